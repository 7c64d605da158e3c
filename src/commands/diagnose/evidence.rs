//! `diagnose`'s evidence: for the culprit of the job's newest failed (or slow) checkpoint, the
//! subtask's and its TaskManager's metrics now (three requests), in the sentence the daemon
//! puts beside a checkpoint (`state::evidence_at`), and the line the report prints.

use crate::health::culprit::{last_acknowledger, sole_holder};
use crate::observe::{CheckpointStatus, EvidenceRound, FinishedCheckpoint, SubtaskEvidence};
use crate::sources::flink::client::FlinkClient;
use crate::sources::flink::metrics;
use crate::state::evidence::{CheckpointEvidence, ClusterEvidence};
use crate::state::evidence_at::at_checkpoint;
use crate::state::{CheckpointRecord, Holdout};
use crate::time::Timestamp;

use super::report::JobData;

/// The checkpoint whose culprit the evidence is about: the newest failed one with a single
/// holder, else the newest completed one that took at least half the timeout; with its culprit
/// (vertex id, operator, subtask).
fn culprit(d: &JobData) -> Option<(&FinishedCheckpoint, String, String, u32)> {
    let timeout_ms = d.config.as_ref().and_then(|c| c.timeout).and_then(|t| u64::try_from(t).ok());
    d.finished.iter().find_map(|cp| {
        let (op, st) = match cp.status {
            CheckpointStatus::Failed => sole_holder(cp)?,
            CheckpointStatus::Completed => {
                let slow = cp.end_to_end_ms.zip(timeout_ms).is_some_and(|(e, t)| 2 * e >= t);
                if !slow {
                    return None;
                }
                last_acknowledger(cp)?
            }
        };
        Some((cp, op.vertex_id.clone(), op.name.clone(), st.index))
    })
}

/// Fetches the evidence of `d`'s culprit now; `None` when no checkpoint calls for it.
pub(crate) async fn fetch(client: &FlinkClient, d: &JobData) -> Option<CheckpointEvidence> {
    let (cp, vertex_id, operator, subtask) = culprit(d)?;
    let now = Timestamp::now();
    let mut round = EvidenceRound { cluster: "diagnose".into(), at: now, ..Default::default() };
    let values = client.subtask_metrics(&d.job_id, &vertex_id, subtask, &metrics::SUBTASK_METRICS).await;
    if let Ok(Some(values)) = values {
        let load = metrics::subtask_load(&values, "");
        let job_id = d.job_id.clone();
        round.subtasks.push(SubtaskEvidence { job_id, operator: operator.clone(), subtask, load });
    }
    let tm = d.locations.get(&(vertex_id, subtask)).and_then(|l| l.taskmanager_id.clone());
    if let Some(tm) = &tm {
        let list = client.taskmanager_metrics(tm, &[]).await.ok().flatten().unwrap_or_default();
        let mut names: Vec<&str> = metrics::TASKMANAGER_METRICS.to_vec();
        let collectors = metrics::collector_metrics(&list);
        names.extend(collectors.iter().map(String::as_str));
        if let Ok(Some(values)) = client.taskmanager_metrics(tm, &names).await {
            round.taskmanagers.push(metrics::taskmanager_sample(tm, &values));
        }
    }
    let mut evidence = ClusterEvidence::default();
    evidence.apply(&round);
    evidence.observe_checkpoints(&d.job_id, &d.finished);
    // The numbers are of now: the record spans now, so they count as its moment.
    let record = CheckpointRecord {
        id: cp.id,
        status: cp.status,
        kind: cp.kind,
        triggered_at: now,
        finished_at: now,
        end_to_end_ms: cp.end_to_end_ms,
        max_phases_ms: None,
        slowest_subtask: (cp.status == CheckpointStatus::Completed).then(|| (operator.clone(), subtask, 0)),
        slowest_phases_ms: None,
        failure_message: cp.failure_message.clone(),
        acknowledged: None,
        holdout: (cp.status == CheckpointStatus::Failed).then(|| {
            Box::new(Holdout {
                operator: operator.clone(),
                subtask,
                late_ack_ms: None,
                phases_ms: [None; 4],
                never_acknowledged: 1,
                acknowledged_late: 0,
            })
        }),
        evidence: None,
        blocked_thread: None,
    };
    at_checkpoint(&evidence, &d.job_id, &record, tm.as_deref())
}

/// The report's line: "Evidence now for checkpoint 12's culprit: <sentence>; class timeout
/// (gc)."
pub(crate) fn line(checkpoint_id: u64, e: &CheckpointEvidence) -> String {
    let class = match &e.class {
        Some(c) => format!("; class {c} ({})", e.used.join(", ")),
        None => String::new(),
    };
    format!("Evidence now for checkpoint {checkpoint_id}'s culprit: {}{class}.", e.text)
}

/// [`fetch`] and [`line`] together: the report's evidence line of `d`, if any.
pub(crate) async fn report_line(client: &FlinkClient, d: &JobData) -> Option<String> {
    let id = culprit(d)?.0.id;
    Some(line(id, &fetch(client, d).await?))
}
