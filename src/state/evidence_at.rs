//! The evidence beside a slow or failed checkpoint: for its culprit subtask and that subtask's
//! TaskManager at that moment, one sentence with numbers, the failure class it supports and
//! which evidence that rests on; "evidence thin: …" where samples are missing or too old.
//! Pure: the moment is the checkpoint's own times.

use crate::observe::{CheckpointStatus, FailureReason, Load};
use crate::state::evidence::{CheckpointEvidence, ClusterEvidence, Ring, Sample};
use crate::state::record::CheckpointRecord;
use crate::time::Timestamp;

/// A sample counts for a checkpoint from this long before its trigger (one evidence round and
/// a half: the round before it started still tells its conditions) …
pub(crate) const BEFORE_TRIGGER_MS: i64 = 15_000;
/// … to this long after it finished (the next round).
pub(crate) const AFTER_FINISH_MS: i64 = 15_000;

/// A subtask backpressured at least this share of the time is blocked downstream.
pub(crate) const BACKPRESSURED: f64 = 0.5;
/// Input buffers at least this full: the subtask cannot keep up (> 95 % is backpressure).
pub(crate) const FULL_BUFFERS: f64 = 0.95;
/// GC at least this share of the last minute holds barriers up (`FlinkTaskManagerGcPressure`).
pub(crate) const GC_PRESSURE: f64 = 0.25;
/// State skew (max/median) at least this, with the culprit the hot subtask
/// (`FlinkCheckpointStateSkew`).
pub(crate) const STATE_SKEW: f64 = 4.0;

/// The sample of `ring` nearest to `at` within the checkpoint's window.
fn near<T>(ring: Option<&Ring<T>>, from: i64, to: i64, at: Timestamp) -> Option<&Sample<T>> {
    ring?
        .iter()
        .filter(|s| (from..=to).contains(&s.at.millis()))
        .min_by_key(|s| (s.at.millis() - at.millis()).abs())
}

fn pct(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

/// `G1_Old_Generation` → `G1 Old`.
pub(crate) fn collector_name(name: &str) -> String {
    name.trim_end_matches("_Generation").replace('_', " ")
}

/// The culprit of `record`: (operator, subtask), as `health::culprit` and the store name it.
fn culprit_of(record: &CheckpointRecord) -> Option<(&str, u32)> {
    match (&record.holdout, &record.slowest_subtask) {
        (Some(h), _) => Some((h.operator.as_str(), h.subtask)),
        (None, Some((operator, subtask, _))) => Some((operator.as_str(), *subtask)),
        (None, None) => None,
    }
}

/// The evidence beside checkpoint `record` of job `job_id`, whose culprit ran on `location`
/// (`id (address)` or an id); `None` when the record names no culprit.
pub fn at_checkpoint(
    evidence: &ClusterEvidence,
    job_id: &str,
    record: &CheckpointRecord,
    location: Option<&str>,
) -> Option<CheckpointEvidence> {
    let (operator, subtask) = culprit_of(record)?;
    let from = record.triggered_at.millis() - BEFORE_TRIGGER_MS;
    let to = record.finished_at.millis() + AFTER_FINISH_MS;
    let at = record.finished_at;
    let own = near(evidence.subtasks.get(&(job_id.to_string(), operator.to_string(), subtask)), from, to, at);
    let of_operator = near(evidence.operators.get(&(job_id.to_string(), operator.to_string())), from, to, at);
    let (load, load_at, own_subtask): (Option<Load>, _, _) = match (own, of_operator) {
        (Some(s), _) => (Some(s.value), Some(s.at), true),
        (None, Some(s)) => (Some(s.value.max), Some(s.at), false),
        (None, None) => (None, None, false),
    };
    let tm_id = location.map(|l| crate::state::evidence::taskmanager_id(l).to_string());
    let tm = tm_id.as_ref().and_then(|id| near(evidence.taskmanagers.get(id), from, to, at));
    let gc = tm.and_then(|s| evidence.gc_share(tm_id.as_deref()?, s.at));
    let skew = evidence.skew.get(job_id).and_then(|j| j.operators.iter().find(|o| o.operator == operator));

    let mut e = CheckpointEvidence {
        operator: operator.to_string(),
        subtask,
        taskmanager: tm_id.clone(),
        sampled_at: load_at.or(tm.map(|s| s.at)),
        own_subtask,
        state_skew: skew.map(|s| s.ratio),
        hot_subtask: skew.map(|s| s.hot_subtask),
        ..Default::default()
    };
    if let Some(l) = load {
        (e.busy, e.backpressured, e.idle) = (l.busy, l.backpressured, l.idle);
        (e.input_pool_usage, e.output_pool_usage) = (l.input_pool_usage, l.output_pool_usage);
    }
    if let Some(s) = tm {
        (e.heap_used_bytes, e.heap_max_bytes, e.cpu_load) =
            (s.value.heap_used_bytes, s.value.heap_max_bytes, s.value.cpu_load);
    }
    if let Some(g) = &gc {
        e.gc_ratio = Some(g.ratio);
        e.gc_collector = g.collector.as_deref().map(collector_name);
    }

    // The sentence: what is known, in a fixed order.
    let mut parts = Vec::new();
    let own_or_max = if own_subtask { "" } else { " (max over its subtasks)" };
    for (name, v) in
        [("busy", e.busy), ("backpressured", e.backpressured), ("input buffers", e.input_pool_usage)]
    {
        if let Some(v) = v {
            parts.push(format!("{name} {}", pct(v)));
        }
    }
    if let Some(g) = &gc {
        let by = e.gc_collector.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        let of = if g.window_ms >= 50_000 {
            "the last minute".to_string()
        } else {
            format!("the last {} s", g.window_ms / 1000)
        };
        parts.push(format!("GC {} of {of}{by}", pct(g.ratio)));
    }
    if let (Some(used), Some(max)) = (e.heap_used_bytes, e.heap_max_bytes) {
        parts.push(format!("heap {} of {}", pct(used / max), crate::time::bytes(max)));
    }
    if let Some(s) = skew.filter(|s| s.ratio >= 2.0) {
        parts.push(format!("state skew {:.1}x (hot subtask #{})", s.ratio, s.hot_subtask));
    }
    let mut thin = Vec::new();
    if load.is_none() {
        thin.push(format!("no sample of {operator}'s load"));
    }
    match (&tm_id, tm) {
        (None, _) => thin.push("its TaskManager is not known".to_string()),
        (Some(id), None) => thin.push(format!("no sample of {id}")),
        (Some(_), Some(_)) if gc.is_none() => thin.push("no GC share yet (one sample)".to_string()),
        _ => {}
    }
    (e.class, e.used) = classify(record, &e);
    if !thin.is_empty() {
        e.thin = Some(thin.join("; "));
    }
    let on = tm_id.as_deref().map(|t| format!(" on {t}")).unwrap_or_default();
    let numbers =
        if parts.is_empty() { String::new() } else { format!(": {}{own_or_max}", parts.join(", ")) };
    let thin_text = e.thin.as_deref().map(|t| format!(" (evidence thin: {t})")).unwrap_or_default();
    e.text = format!("{operator} #{subtask}{on}{numbers}{thin_text}");
    Some(e)
}

/// The failure class the evidence supports and what it rests on: `failure` (an exception),
/// `timeout` (GC, or a slow snapshot), `blocking` (backpressure, full input buffers, skew).
fn classify(record: &CheckpointRecord, e: &CheckpointEvidence) -> (Option<String>, Vec<String>) {
    let exception = record.status == CheckpointStatus::Failed
        && record.failure_message.as_deref().and_then(FailureReason::from_message).is_some_and(|r| {
            use FailureReason::*;
            matches!(
                r,
                IoException
                    | CheckpointAsyncException
                    | ChannelStateSharedStreamException
                    | CheckpointDeclined
                    | TaskFailure
                    | TaskCheckpointFailure
                    | FinalizeCheckpointFailure
                    | TriggerCheckpointFailure
            )
        });
    if exception {
        return (Some("failure".into()), vec!["exception".into()]);
    }
    if e.gc_ratio.is_some_and(|g| g >= GC_PRESSURE) {
        return (Some("timeout".into()), vec!["gc".into()]);
    }
    let mut used = Vec::new();
    if e.backpressured.is_some_and(|b| b >= BACKPRESSURED) {
        used.push("backpressure".to_string());
    }
    if e.input_pool_usage.is_some_and(|u| u >= FULL_BUFFERS) {
        used.push("input_buffers".to_string());
    }
    if e.state_skew.is_some_and(|s| s >= STATE_SKEW) && e.hot_subtask == Some(e.subtask) {
        used.push("skew".to_string());
    }
    if !used.is_empty() {
        return (Some("blocking".into()), used);
    }
    let phases =
        record.holdout.as_ref().map(|h| h.phases_ms).or(record.slowest_phases_ms.map(|p| p.map(Some)));
    // The phase that took longest (start delay, alignment, sync, async), as `culprit` says it.
    let longest = phases
        .and_then(|p| p.iter().enumerate().filter_map(|(i, v)| Some((i, (*v)?))).max_by_key(|(_, v)| *v));
    if matches!(longest, Some((2 | 3, _))) {
        return (Some("timeout".into()), vec!["snapshot".into()]);
    }
    (None, Vec::new())
}
