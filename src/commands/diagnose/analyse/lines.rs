//! What was seen, line by line: the configuration, recent statuses, each failure in a sentence,
//! the pending and the slow subtasks, who acknowledged last, and the load.

use std::collections::BTreeMap;

use crate::health::Outcome;
use crate::health::culprit;
use crate::observe::{CheckpointSettings, CheckpointStatus, FinishedCheckpoint, SubtaskCheckpoint};
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;
use crate::time::human_ms;

use super::job::{Job, dominant, median};
use crate::commands::diagnose::report::*;

/// A load ratio at or over which a vertex counts as backpressured.
const BACKPRESSURED: f64 = 0.5;
/// A busy ratio at or over which a subtask downstream of a backpressured vertex is its bottleneck.
const BUSY: f64 = 0.8;

/// Whether checkpoints are aligned or unaligned, as the config line says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Alignment {
    Aligned,
    Unaligned,
}

impl Alignment {
    pub(super) fn of(s: &CheckpointSettings) -> Alignment {
        if s.unaligned { Alignment::Unaligned } else { Alignment::Aligned }
    }

    fn as_str(self) -> &'static str {
        match self {
            Alignment::Aligned => "aligned",
            Alignment::Unaligned => "unaligned",
        }
    }
}

/// The checkpoint configuration in one line.
pub(super) fn config_line(s: &CheckpointSettings) -> String {
    format!(
        "{}, interval {}, timeout {}, min pause {}, max concurrent {}, tolerable failures {}, {}{}",
        if s.exactly_once { "exactly once" } else { "at least once" },
        s.interval_ms.map_or("off".into(), human_ms),
        s.timeout_ms.map_or("?".into(), human_ms),
        human_ms(s.min_pause_ms),
        s.max_concurrent,
        s.tolerable_failures.map_or("?".into(), |n| n.to_string()),
        Alignment::of(s).as_str(),
        s.state_backend.as_deref().map_or(String::new(), |b| format!(", {b}")),
    )
}

/// Recent statuses, newest first.
pub(super) fn recent(d: &JobData) -> Vec<CheckpointLine> {
    let mut history: Vec<&dto::CheckpointStatistics> = d.stats.history.iter().collect();
    history.sort_by_key(|c| std::cmp::Reverse(c.id));
    history
        .iter()
        .map(|cp| {
            // Only the newest `--checkpoints` were fetched in detail; an older finished entry of
            // the history still has its own outcome and end, not an age as if it were in progress.
            let finished =
                d.finished.iter().find(|f| f.id == cp.id).cloned().or_else(|| convert::finished(cp, &[]));
            let status = match &finished {
                Some(f) => Outcome::of_checkpoint(f).as_str().to_uppercase(),
                None => cp.status.clone().unwrap_or_default().to_uppercase(),
            };
            let took_ms = match &finished {
                Some(f) => Some(f.finished_at.since(f.triggered_at)),
                None => cp.trigger_timestamp.map(|t| d.fetched_at.since(Timestamp(t))),
            };
            CheckpointLine {
                id: cp.id,
                status,
                savepoint: cp.is_savepoint == Some(true),
                triggered_at_ms: cp.trigger_timestamp,
                took_ms,
                size_bytes: cp.checkpointed_size.or(cp.state_size).and_then(|s| u64::try_from(s).ok()),
                acknowledged: (cp.num_acknowledged_subtasks.unwrap_or(0), cp.num_subtasks.unwrap_or(0)),
            }
        })
        .collect()
}

/// Failures: what held them up or ended them, in one sentence each.
pub(super) fn failures(job: &Job<'_>) -> Vec<FailureLine> {
    job.d
        .finished
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Failed)
        .map(|cp| failure(job, cp))
        .collect()
}

fn failure(job: &Job<'_>, cp: &FinishedCheckpoint) -> FailureLine {
    let after = cp.finished_at.since(cp.triggered_at);
    let mut held_by = Vec::new();
    let mut never = Vec::new();
    let mut late = Vec::new();
    let mut total = 0u32;
    for (op, st) in culprit::subtasks(cp) {
        total += 1;
        if !culprit::held(cp, st) {
            continue;
        }
        if !st.acknowledged {
            held_by.push(format!("{} never acknowledged", job.located(&op.name, st.index)));
            never.push((op.name.as_str(), st.index));
        } else if let Some(e2e) = st.end_to_end_ms {
            let (phase, ms) = dominant(st);
            let text = format!(
                "{} acknowledged {} after the trigger, {} too late; its {phase} took {}",
                job.located(&op.name, st.index),
                human_ms(e2e),
                human_ms(e2e - after),
                human_ms(ms)
            );
            held_by.push(text.clone());
            late.push(text);
        }
    }
    let outcome = Outcome::of_checkpoint(cp);
    // An expiry is held up by the late subtasks too; after an error, a subtask that
    // acknowledged a moment later was not what ended it.
    let late_counts = if outcome == Outcome::Expired { late.len() as u32 } else { 0 };
    let acknowledged = if total > 0 {
        (total - never.len() as u32 - late_counts, total)
    } else {
        (cp.num_acknowledged, cp.num_subtasks)
    };
    let summary = failure_summary(outcome, acknowledged, total > 0, &never, &late, job);
    FailureLine {
        id: cp.id,
        outcome,
        after_ms: Some(after),
        reason: cp.failure_message.clone(),
        held_by,
        acknowledged,
        summary,
    }
}

/// Subtasks not acknowledged yet, one line per checkpoint in progress.
pub(super) fn pending(job: &Job<'_>) -> Vec<String> {
    let names: BTreeMap<&str, &str> = job.vertex_of.iter().map(|(n, v)| (*v, *n)).collect();
    job.d
        .pending
        .iter()
        .map(|(id, vertices)| {
            let list: Vec<String> = vertices
                .iter()
                .flat_map(|(vid, subtasks)| {
                    let name = names.get(vid.as_str()).copied().unwrap_or(vid.as_str());
                    subtasks.iter().map(move |s| job.located(name, *s))
                })
                .collect();
            (id, list)
        })
        .filter(|(_, list)| !list.is_empty())
        .map(|(id, list)| format!("checkpoint {id} in progress: {} not acknowledged yet", some_of(&list)))
        .collect()
}

/// Whether a subtask's phase stands out: at least 100 ms and a tenth of the interval, and
/// twice its siblings' median or over half the interval.
fn stands_out(s: &SubtaskStat, interval: Option<u64>) -> bool {
    let floor = interval.map_or(100, |iv| (iv / 10).max(100));
    s.value_ms >= floor
        && (s.siblings_median_ms.is_none_or(|m| s.value_ms >= 2 * m.max(1))
            || interval.is_some_and(|iv| s.value_ms * 2 > iv))
}

/// The top three subtasks of a phase that stand out: per subtask its longest over the recent
/// checkpoints.
pub(super) fn top_subtasks(job: &Job<'_>, phase: fn(&SubtaskCheckpoint) -> Option<u64>) -> Vec<SubtaskStat> {
    let mut best: BTreeMap<(String, u32), SubtaskStat> = BTreeMap::new();
    for cp in job.with_details() {
        for op in &cp.operators {
            for st in op.subtasks.iter().filter(|s| s.acknowledged) {
                let Some(v) = phase(st) else { continue };
                let key = (op.name.clone(), st.index);
                if best.get(&key).is_some_and(|b| b.value_ms >= v) {
                    continue;
                }
                let siblings = op.subtasks.iter().filter(|o| o.index != st.index).filter_map(phase).collect();
                best.insert(
                    key,
                    SubtaskStat {
                        operator: op.name.clone(),
                        subtask: st.index,
                        value_ms: v,
                        checkpoint_id: cp.id,
                        siblings_median_ms: median(siblings),
                        location: job.location(&op.name, st.index),
                    },
                );
            }
        }
    }
    let mut all: Vec<SubtaskStat> = best.into_values().filter(|s| stands_out(s, job.interval)).collect();
    all.sort_by_key(|s| std::cmp::Reverse(s.value_ms));
    all.truncate(3);
    all
}

/// Who acknowledged last in the completed checkpoints: the subtasks that did in at least a
/// third of them, when those take long enough to matter.
pub(super) fn blocking(job: &Job<'_>) -> Vec<Blocking> {
    let completed: Vec<&FinishedCheckpoint> =
        job.with_details().into_iter().filter(|cp| cp.status == CheckpointStatus::Completed).collect();
    let mut last_ack: BTreeMap<(String, u32), (usize, &'static str)> = BTreeMap::new();
    for (op, st) in completed.iter().filter_map(|cp| culprit::last_acknowledger(cp)) {
        let e = last_ack.entry((op.name.clone(), st.index)).or_insert((0, "unknown"));
        e.0 += 1;
        e.1 = dominant(st).0;
    }
    let mut blocking: Vec<Blocking> = last_ack
        .into_iter()
        .map(|((operator, subtask), (times, dominant_phase))| Blocking {
            location: job.location(&operator, subtask),
            operator,
            subtask,
            times,
            of: completed.len(),
            dominant_phase,
        })
        .collect();
    blocking.sort_by_key(|b| std::cmp::Reverse(b.times));
    let slowest_completed = completed.iter().filter_map(|cp| cp.end_to_end_ms).max().unwrap_or(0);
    let matters = slowest_completed >= job.interval.map_or(1_000, |iv| (iv / 10).clamp(100, 1_000));
    blocking.retain(|b| matters && b.times * 3 >= b.of);
    blocking.truncate(3);
    blocking
}

/// Load: backpressured vertices and the busy subtasks downstream of them (the first of which is
/// the bottleneck).
pub(super) fn load(job: &Job<'_>) -> (Vec<String>, Option<(String, u32)>) {
    let mut load = Vec::new();
    let mut bottleneck: Option<(String, u32)> = None;
    let Some(report) = &job.d.load else { return (load, bottleneck) };
    let name_of = |vid: &str| {
        report
            .topology
            .as_ref()
            .and_then(|t| t.vertices.iter().find(|v| v.id == vid))
            .map_or(vid.to_string(), |v| v.name.clone())
    };
    let max_backpressure = |v: &crate::observe::VertexLoad| {
        v.subtasks.iter().filter_map(|s| s.backpressure_ratio).fold(0.0, f64::max)
    };
    for v in &report.vertices {
        let bp = max_backpressure(v);
        if bp >= BACKPRESSURED {
            load.push(format!("{} is backpressured {:.0} % of the time", name_of(&v.vertex_id), bp * 100.0));
        }
    }
    let Some(t) = &report.topology else { return (load, bottleneck) };
    for e in &t.edges {
        let up = report.vertices.iter().find(|v| v.vertex_id == e.from);
        let down = report.vertices.iter().find(|v| v.vertex_id == e.to);
        let (Some(up), Some(down)) = (up, down) else { continue };
        if max_backpressure(up) < BACKPRESSURED {
            continue;
        }
        let busy_and_free = |s: &&crate::observe::SubtaskLoad| {
            s.busy_ratio.unwrap_or(0.0) >= BUSY && s.backpressure_ratio.unwrap_or(0.0) < BACKPRESSURED
        };
        for s in down.subtasks.iter().filter(busy_and_free) {
            let busy = s.busy_ratio.unwrap_or(0.0);
            let siblings: Vec<String> = down
                .subtasks
                .iter()
                .filter(|o| o.index != s.index)
                .filter_map(|o| o.busy_ratio.map(|b| format!("#{} {:.0} %", o.index, b * 100.0)))
                .collect();
            let text = format!(
                "{} #{} is busy {:.0} % of the time (siblings: {}) while {} upstream waits on it: the bottleneck",
                name_of(&e.to),
                s.index,
                busy * 100.0,
                if siblings.is_empty() { "none".to_string() } else { siblings.join(", ") },
                name_of(&e.from)
            );
            if !load.contains(&text) {
                bottleneck.get_or_insert_with(|| (name_of(&e.to), s.index));
                load.push(text);
            }
        }
    }
    (load, bottleneck)
}

/// `a`, `a and b`, `a, b and c`, or the first three and how many more.
fn some_of(list: &[String]) -> String {
    crate::time::some_of(list, 3, "no subtask")
}

/// One sentence on a failed checkpoint: how many subtasks acknowledged in time, and the
/// subtasks that explain it (the late or missing ones of an expiry; the one that did not
/// acknowledge when an error ended it).
fn failure_summary(
    outcome: Outcome,
    (acked, total): (u32, u32),
    details: bool,
    never: &[(&str, u32)],
    late: &[String],
    job: &Job<'_>,
) -> String {
    if !details {
        return format!(
            "{acked} of {total} subtasks acknowledged; Flink no longer has its per-subtask details"
        );
    }
    let never_named: Vec<String> = never.iter().map(|(op, st)| job.located(op, *st)).collect();
    if outcome == Outcome::Expired {
        let mut parts: Vec<String> = late.to_vec();
        match never_named.len() {
            0 => {}
            1..=3 => parts.push(format!("{} never acknowledged", some_of(&never_named))),
            n => parts.push(format!("{n} subtasks never acknowledged ({})", per_operator(never))),
        }
        if parts.len() > 3 {
            let n = parts.len();
            parts.truncate(2);
            parts.push(format!("{} more", n - 2));
        }
        let holders = if parts.is_empty() { "no subtask was late".into() } else { parts.join("; ") };
        return format!("{acked} of {total} subtasks acknowledged in time; {holders}");
    }
    let head = format!("{acked} of {total} subtasks acknowledged");
    match never_named.as_slice() {
        [] => head,
        [one] if total > 1 => format!("{head}; the failure came from the one that did not, {one}"),
        [_] => format!("{head}; the failure came from its only subtask"),
        _ if acked == 0 => format!(
            "{head}; the error came before any subtask acknowledged, so no subtask was slow \
             (`scan-logs` names the task that threw it)"
        ),
        list if list.len() <= 3 => format!("{head}; not acknowledged: {}", some_of(list)),
        _ => format!("{head}; not acknowledged: {}", per_operator(never)),
    }
}

/// `2 of stateful-map, 4 of Sink`: subtasks counted per operator, in first-seen order.
fn per_operator(subtasks: &[(&str, u32)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (op, _) in subtasks {
        match counts.iter_mut().find(|(o, _)| o == op) {
            Some((_, n)) => *n += 1,
            None => counts.push((op, 1)),
        }
    }
    counts.iter().map(|(op, n)| format!("{n} of {op}")).collect::<Vec<_>>().join(", ")
}

/// The upload rate of the async phase per subtask in the newest completed checkpoint with
/// details (bytes persisted over async duration): the slowest against its siblings' median, and
/// whether every subtask is slow alike (the storage, not one subtask).
pub(super) fn upload(job: &Job<'_>) -> Vec<String> {
    let Some(cp) = job.with_details().into_iter().find(|c| c.status == CheckpointStatus::Completed) else {
        return Vec::new();
    };
    let Some(u) = crate::state::storage::UploadSpread::of(cp) else { return Vec::new() };
    let rate = |r: f64| format!("{}/s", crate::time::bytes(r));
    let s = &u.slowest;
    let mut line = format!(
        "Upload (checkpoint {}, bytes persisted over async duration): slowest {} #{} {} ({} in {})",
        cp.id,
        s.operator,
        s.index,
        rate(s.rate),
        crate::time::bytes(s.bytes as f64),
        human_ms(s.async_ms)
    );
    match u.siblings_median {
        Some(m) if u.one_subtask() => {
            line.push_str(&format!(", its siblings' median {}: that subtask", rate(m)))
        }
        Some(m) => line.push_str(&format!(
            ", its siblings' median {}: every subtask alike, the storage's throughput",
            rate(m)
        )),
        None => {}
    }
    vec![line]
}
