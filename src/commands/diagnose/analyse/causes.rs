//! Likely causes with the page that explains them, and the next thing to check, by class.

use crate::health::Outcome;
use crate::rules::Class;
use crate::sources::flink::dto;
use crate::time::human_ms;

use super::job::{Job, median};
use super::lines::Alignment;
use crate::commands::diagnose::report::*;

use crate::health::links::{
    BACK_PRESSURE, CONFIGURATION, Doc, LARGE_STATE, MONITORING, RUNBOOK_FAILURES, RUNBOOK_TOLERANCE,
    UNDER_BACKPRESSURE,
};

fn cause(c: &str, doc: Doc) -> Cause {
    Cause { cause: c.to_string(), source: doc.title, url: doc.url.to_string() }
}

/// Likely causes and the next thing to check, by class, then the spacing's own cause.
pub(super) fn causes_and_next(
    job: &Job<'_>,
    classes: &[ClassFinding],
    failures: &[FailureLine],
    top_alignment: &[SubtaskStat],
    has_bottleneck: bool,
    holder: Option<String>,
) -> (Vec<Cause>, Vec<String>) {
    let mut causes = Vec::new();
    let mut next = Vec::new();
    for finding in classes {
        match finding.class {
            Class::Failure => failure_causes(failures, &mut causes, &mut next),
            Class::Timeout => timeout_causes(job, failures, holder.as_deref(), &mut causes, &mut next),
            Class::Blocking => {
                blocking_causes(job, top_alignment, has_bottleneck, holder.as_deref(), &mut causes, &mut next)
            }
            // Advice is not a failure class of a checkpoint: no cause to name here.
            Class::Advice => {}
        }
    }
    causes.extend(spacing_cause(job));
    (causes, next)
}

/// `failure`: the cause behind each error's message.
fn failure_causes(failures: &[FailureLine], causes: &mut Vec<Cause>, next: &mut Vec<String>) {
    for f in failures.iter().filter(|f| f.outcome != Outcome::Expired) {
        causes.push(failure_cause(f.reason.as_deref().unwrap_or("")));
    }
    causes.dedup_by(|a, b| a.cause == b.cause);
    next.push(
        "the TaskManager log around the failed checkpoint: the deepest `Caused by:` of its stack trace \
         (`checkpoint-sentinel scan-logs` on the JobManager and TaskManager logs classifies it)"
            .to_string(),
    );
}

/// `timeout`: the slow part of the snapshot, the state, and the subtask to look at.
fn timeout_causes(
    job: &Job<'_>,
    failures: &[FailureLine],
    holder: Option<&str>,
    causes: &mut Vec<Cause>,
    next: &mut Vec<String>,
) {
    let phase = failures
        .iter()
        .flat_map(|f| &f.held_by)
        .find_map(|h| ["sync", "async"].into_iter().find(|p| h.contains(&format!("its {p} took"))));
    match phase {
        Some("sync") => causes.push(cause(
            "the synchronous part of the snapshot is slow: the operator's snapshotState() (user code, a \
             blocking flush to an external system) or the state backend's synchronous part",
            MONITORING,
        )),
        _ => causes.push(cause(
            "writing the snapshot to checkpoint storage is slow: storage throughput or latency (HDFS/S3), \
             or a state that grew",
            LARGE_STATE,
        )),
    }
    causes.push(cause("state too large or growing without TTL, so every snapshot takes longer", LARGE_STATE));
    if job.settings.as_ref().and_then(|s| s.state_backend.as_deref()).is_some_and(|b| b.contains("RocksDB")) {
        causes.push(cause(
            "RocksDB without incremental checkpoints, or a small block cache / write buffer",
            LARGE_STATE,
        ));
    }
    match holder {
        Some(h) => next.push(format!(
            "what {h} does while it snapshots: its TaskManager log and a thread dump (jstack) during a checkpoint, \
             then its state size and the checkpoint storage's throughput; do not just raise the timeout \
             (Flink: Tuning Checkpoints and Large State)"
        )),
        None => next.push(
            "no single subtask stands out: the TaskManagers' logs and a thread dump (jstack) during a \
             checkpoint, then the state size and the checkpoint storage's throughput; do not just raise \
             the timeout (Flink: Tuning Checkpoints and Large State)"
                .to_string(),
        ),
    }
}

/// `blocking`: backpressure, skew, blocking user code, and what to compare.
fn blocking_causes(
    job: &Job<'_>,
    top_alignment: &[SubtaskStat],
    has_bottleneck: bool,
    holder: Option<&str>,
    causes: &mut Vec<Cause>,
    next: &mut Vec<String>,
) {
    causes.push(cause(
        "backpressure: barriers queue behind buffered records, so alignment and start delay grow together",
        UNDER_BACKPRESSURE,
    ));
    let skewed = top_alignment
        .first()
        .is_some_and(|a| a.siblings_median_ms.is_some_and(|m| a.value_ms > 4 * m.max(1)));
    if skewed || has_bottleneck {
        causes.push(cause(
            "data skew: one subtask (a hot key) lags its siblings and every checkpoint waits for it",
            BACK_PRESSURE,
        ));
    }
    causes.push(cause(
        "user code blocking the task thread (synchronous external calls, lock contention, heavy timers)",
        UNDER_BACKPRESSURE,
    ));
    if let Some(h) = holder {
        next.push(format!(
            "the records in/out and busy time of {h} against its siblings (key skew) and the backpressure of the \
             operators upstream of it (Web UI BackPressure tab or GET /jobs/{}/vertices/<id>/backpressure); \
             if its CPU is low while its input buffers are full, a thread dump",
            job.d.job_id
        ));
    }
    if job.settings.as_ref().is_some_and(|s| s.exactly_once && Alignment::of(s) == Alignment::Aligned) {
        next.push(
            "once skew and backpressure are addressed and alignment is still too long: unaligned checkpoints \
             (Flink: Checkpointing under backpressure)"
                .to_string(),
        );
    }
}

/// Checkpoints that come much later than the interval: min-pause or the concurrency limit.
fn spacing_cause(job: &Job<'_>) -> Option<Cause> {
    let iv = job.settings.as_ref()?.interval_ms?;
    let observed = median(observed_gaps(&job.d.stats))?;
    (observed > iv + iv / 2).then(|| {
        cause(
            &format!(
                "checkpoints come every {} although the interval is {}: min-pause or the concurrency limit holds the trigger",
                human_ms(observed),
                human_ms(iv)
            ),
            CONFIGURATION,
        )
    })
}

/// What to check when no class was found.
pub(super) fn nothing_found_next(verdict: Verdict) -> String {
    if verdict == Verdict::Healthy {
        "nothing now; keep an eye on the P95 checkpoint duration against the timeout".into()
    } else {
        "the slowest phase in the recent checkpoints' details (Web UI Checkpoints → Details) and the TaskManager log of the \
         slowest subtask"
            .into()
    }
}

fn observed_gaps(stats: &dto::CheckpointingStatistics) -> Vec<u64> {
    let mut t: Vec<i64> = stats
        .history
        .iter()
        .filter(|c| c.is_savepoint != Some(true))
        .filter_map(|c| c.trigger_timestamp)
        .collect();
    t.sort_unstable();
    t.windows(2).map(|w| (w[1] - w[0]).max(0) as u64).collect()
}

/// The likely cause behind a failure message, with the page that explains it.
fn failure_cause(message: &str) -> Cause {
    let table: [(&str, &str, Doc); 10] = [
        (
            "Failed to persist checkpoint metadata",
            "the checkpoint metadata storage is not writable (ZooKeeper, disk space, permissions)",
            RUNBOOK_FAILURES,
        ),
        (
            "Could not materialize checkpoint",
            "the state backend failed writing (e.g. an HDFS DataNode down)",
            RUNBOOK_FAILURES,
        ),
        (
            "Asynchronous task checkpoint failed",
            "the asynchronous part of a subtask's snapshot threw: writing the state to checkpoint storage \
             failed (Flink's `Could not materialize checkpoint`: storage unavailable, a full disk)",
            RUNBOOK_FAILURES,
        ),
        (
            "ClassCastException",
            "a state class that does not serialise, or a serializer changed by an upgrade",
            RUNBOOK_FAILURES,
        ),
        ("OutOfMemoryError", "a subtask ran out of memory", RUNBOOK_FAILURES),
        (
            "SocketTimeoutException",
            "the checkpoint storage client timed out (network, S3 throttling)",
            RUNBOOK_FAILURES,
        ),
        (
            "No space left on device",
            "a full disk (the `Stream is closed` that follows is a symptom)",
            RUNBOOK_FAILURES,
        ),
        (
            "Stream is closed",
            "the stream to checkpoint storage was closed underneath: look for a full disk or a closed connection",
            RUNBOOK_FAILURES,
        ),
        (
            "tolerable failure threshold",
            "the tolerable-failure budget is spent: the job fails over because of checkpoints",
            RUNBOOK_TOLERANCE,
        ),
        (
            "declined",
            "a subtask declined the checkpoint: a task failure (OOM, user code exception) or a task not ready",
            RUNBOOK_FAILURES,
        ),
    ];
    table
        .iter()
        .find(|(needle, _, _)| message.to_lowercase().contains(&needle.to_lowercase()))
        .map(|(_, cause, doc)| Cause {
            cause: (*cause).to_string(),
            source: doc.title,
            url: doc.url.to_string(),
        })
        .unwrap_or_else(|| Cause {
            cause: format!(
                "Flink says: {}; the stack trace in the TaskManager log names the cause",
                message.trim_end_matches('.')
            ),
            source: RUNBOOK_FAILURES.title,
            url: RUNBOOK_FAILURES.url.to_string(),
        })
}
