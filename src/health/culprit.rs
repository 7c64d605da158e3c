//! Who held a checkpoint up: of a completed checkpoint the subtask that acknowledged last; of a
//! failed or expired one the subtask(s) that did not acknowledge before it failed (or, declined,
//! the one that declined), never the fastest that did acknowledge.
//!
//! Two readings of the same rule: [`of_record`] over the daemon's record of a checkpoint (with
//! the log lines and locations it knows), and [`held_up`] / [`last_acknowledger`] over the
//! per-subtask details the REST API returns (`diagnose`). Pure: no I/O, no clock.

use crate::observe::{
    CheckpointStatus, FailureReason, FinishedCheckpoint, LogKind, OperatorCheckpoint, SubtaskCheckpoint,
};
pub(crate) use crate::state::record::{held, held_up, subtasks};
use crate::state::{CheckpointRecord, ClusterState, Holdout};
use crate::time::human_ms;

use super::Outcome;

/// The names of the phases of a subtask's checkpoint, in Flink's order.
pub(crate) const PHASES: [&str; 4] = ["start delay", "alignment", "sync", "async"];

/// The subtask that held a checkpoint up, as the API and the status page show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Culprit {
    /// The operator chain (job vertex) name.
    pub(crate) operator: String,
    /// The subtask index (0-based, as in the REST API).
    pub(crate) subtask: u32,
    /// Whether it acknowledged before the checkpoint completed or failed.
    pub(crate) acknowledged: bool,
    /// Its acknowledgement − trigger (of a failed checkpoint: an acknowledgement that came only
    /// after it had failed); `None` when it never acknowledged.
    pub(crate) end_to_end_ms: Option<u64>,
    /// Its own phases, as far as known ([`PHASES`]); they add up to about `end_to_end_ms`.
    pub(crate) phases_ms: Option<[Option<u64>; 4]>,
    /// Its TaskManager at that moment, as far as known ([`taskmanager_of`]).
    pub(crate) taskmanager: Option<String>,
    /// How it held the checkpoint up.
    pub(crate) role: Role,
    /// Other subtasks that never acknowledged either (of a failed checkpoint).
    pub(crate) others_unacknowledged: u32,
    /// The same in one plain sentence.
    pub(crate) text: String,
}

/// How a [`Culprit`] held its checkpoint up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// It acknowledged last: of a completed checkpoint, or of a failed one that every subtask
    /// (or every subtask whose details are known) acknowledged in time.
    AcknowledgedLast,
    /// It acknowledged only after the checkpoint had failed.
    AcknowledgedLate,
    /// It never acknowledged.
    NeverAcknowledged,
    /// It declined the checkpoint.
    Declined,
}

impl Role {
    /// Whether it kept a failed checkpoint from completing (not just the last in time).
    pub(crate) fn held_it_up(self) -> bool {
        self != Role::AcknowledgedLast
    }
}

/// A subtask's phases ([`PHASES`]).
pub(crate) fn phases(st: &SubtaskCheckpoint) -> [Option<u64>; 4] {
    [st.start_delay_ms, st.alignment_ms, st.sync_ms, st.async_ms]
}

/// The phase that took longest: (name, ms); `None` when no phase is known.
pub(crate) fn dominant_phase(phases: [Option<u64>; 4]) -> Option<(&'static str, u64)> {
    PHASES.into_iter().zip(phases).filter_map(|(name, v)| Some((name, v?))).max_by_key(|(_, v)| *v)
}

/// The one subtask that held a failed checkpoint up, when exactly one did: when several
/// never acknowledged, none of them stands out and naming the first would be a guess.
pub(crate) fn sole_holder(cp: &FinishedCheckpoint) -> Option<(&OperatorCheckpoint, &SubtaskCheckpoint)> {
    let mut all = held_up(cp);
    let one = all.next()?;
    all.next().is_none().then_some(one)
}

/// The subtask that acknowledged last (the last among equals in the details' order).
pub(crate) fn last_acknowledger(
    cp: &FinishedCheckpoint,
) -> Option<(&OperatorCheckpoint, &SubtaskCheckpoint)> {
    subtasks(cp).filter(|(_, st)| st.acknowledged).max_by_key(|(_, st)| st.end_to_end_ms)
}

/// The subtask that held checkpoint `r` of job `job_id` up (see the module's rule), with its
/// TaskManager; `None` when the record names none.
pub(crate) fn of_record(c: &ClusterState, job_id: &str, r: &CheckpointRecord) -> Option<Culprit> {
    let by_a_subtask = failed_by_a_subtask(r);
    let mut culprit = if let Some((task, subtask)) = by_a_subtask.then(|| decliner(c, job_id, r)).flatten() {
        declined(r, task, subtask)
    } else if let Some(h) = &r.holdout {
        held_out(r, h, by_a_subtask)
    } else {
        acknowledged_last(r)?
    };
    culprit.taskmanager = taskmanager_of(c, job_id, r.id, &culprit.operator, culprit.subtask);
    Some(culprit)
}

/// Failed by a subtask (it declined, its own snapshot failed …) rather than by the coordinator
/// (expired, a task failure …).
fn failed_by_a_subtask(r: &CheckpointRecord) -> bool {
    r.failure_message
        .as_deref()
        .and_then(FailureReason::from_message)
        .is_some_and(FailureReason::failed_by_a_subtask)
}

/// The subtask a log line of this checkpoint says declined it.
fn decliner(c: &ClusterState, job_id: &str, r: &CheckpointRecord) -> Option<(String, u32)> {
    c.logs
        .recent
        .iter()
        .rev()
        .filter(|e| matches!(e.kind, LogKind::Declined | LogKind::AsyncSnapshotFailed))
        .filter(|e| e.checkpoint_id == Some(r.id))
        .filter(|e| e.job_id.as_deref().is_none_or(|j| j == job_id))
        .find_map(|e| Some((e.task.clone()?, e.subtask?)))
}

/// " (5 of 6 acknowledged)", or nothing when the counts are unknown.
fn of_acknowledged(r: &CheckpointRecord) -> String {
    r.acknowledged.map(|(n, m)| format!(" ({n} of {m} acknowledged)")).unwrap_or_default()
}

/// The subtask a log line says declined the checkpoint.
fn declined(r: &CheckpointRecord, task: String, subtask: u32) -> Culprit {
    // The log names the task as Flink does; the REST details' operator name when they agree.
    let operator = r
        .holdout
        .as_ref()
        .filter(|h| h.subtask == subtask && (task.starts_with(&h.operator) || h.operator.starts_with(&task)))
        .map_or(task, |h| h.operator.clone());
    let text = format!("{operator} #{subtask} declined the checkpoint{}", of_acknowledged(r));
    Culprit {
        operator,
        subtask,
        acknowledged: r.status == CheckpointStatus::Completed,
        end_to_end_ms: None,
        phases_ms: None,
        taskmanager: None,
        role: Role::Declined,
        others_unacknowledged: 0,
        text,
    }
}

/// The subtask that did not acknowledge a failed checkpoint before it failed.
fn held_out(r: &CheckpointRecord, h: &Holdout, by_a_subtask: bool) -> Culprit {
    let fmt = human_ms;
    let outcome = Outcome::of(r.status, r.failure_message.as_deref());
    let name = format!("{} #{}", h.operator, h.subtask);
    // Others that acknowledged only after the checkpoint had failed.
    let late_others = h.acknowledged_late - u32::from(h.late_ack_ms.is_some());
    let of = match (r.acknowledged, late_others) {
        (Some((n, m)), 0) => format!(" ({n} of {m} acknowledged)"),
        (Some((n, m)), k) => format!(" ({n} of {m} acknowledged, {k} more only after it had failed)"),
        (None, _) => String::new(),
    };
    let text = match h.late_ack_ms {
        // Its acknowledgement came after the checkpoint had failed; its phases say why.
        Some(late) => {
            let dominant = dominant_phase(h.phases_ms)
                .map(|(phase, v)| format!("; its {phase} phase took {}", fmt(v)))
                .unwrap_or_default();
            format!(
                "{name} never acknowledged before the checkpoint {outcome} after {}{of}: its \
                 acknowledgement came {} after the trigger{dominant}",
                fmt(r.finished_at.since(r.triggered_at)),
                fmt(late),
            )
        }
        // The only subtask that never acknowledged a checkpoint a subtask failed declined it.
        None if by_a_subtask && h.never_acknowledged == 1 => format!("{name} declined the checkpoint{of}"),
        None if h.never_acknowledged > 1 => {
            let more = h.never_acknowledged - 1;
            let subtasks = if more == 1 { "subtask" } else { "subtasks" };
            format!("{name} and {more} other {subtasks} never acknowledged{of}")
        }
        None => format!("{name} never acknowledged{of}"),
    };
    let known = h.late_ack_ms.is_some() || h.phases_ms.iter().any(Option::is_some);
    let role = match h.late_ack_ms {
        Some(_) => Role::AcknowledgedLate,
        None if by_a_subtask && h.never_acknowledged == 1 => Role::Declined,
        None => Role::NeverAcknowledged,
    };
    Culprit {
        operator: h.operator.clone(),
        subtask: h.subtask,
        acknowledged: r.status == CheckpointStatus::Completed,
        end_to_end_ms: h.late_ack_ms,
        phases_ms: known.then_some(h.phases_ms),
        taskmanager: None,
        role,
        others_unacknowledged: h.never_acknowledged.saturating_sub(u32::from(h.late_ack_ms.is_none())),
        text,
    }
}

/// The subtask that acknowledged last (of a failed checkpoint: every subtask acknowledged in
/// time, or only some subtasks' details are known).
fn acknowledged_last(r: &CheckpointRecord) -> Option<Culprit> {
    let fmt = human_ms;
    let (operator, subtask, e2e) = r.slowest_subtask.as_ref()?;
    let of = of_acknowledged(r);
    let text = match r.status {
        CheckpointStatus::Completed => {
            format!("{operator} #{subtask} acknowledged last, after {}", fmt(*e2e))
        }
        // Every subtask acknowledged in time: the checkpoint failed after (in the coordinator).
        CheckpointStatus::Failed if r.acknowledged.is_some_and(|(n, m)| n >= m) => {
            format!("every subtask acknowledged{of}; {operator} #{subtask} was the last, after {}", fmt(*e2e))
        }
        // Details of only some subtasks: the one that held it up is not among them.
        CheckpointStatus::Failed => format!(
            "{operator} #{subtask} acknowledged last of the subtasks whose details were fetched, \
             after {}{of}",
            fmt(*e2e)
        ),
    };
    Some(Culprit {
        operator: operator.clone(),
        subtask: *subtask,
        acknowledged: true,
        end_to_end_ms: Some(*e2e),
        phases_ms: r.slowest_phases_ms.map(|p| p.map(Some)),
        taskmanager: None,
        role: Role::AcknowledgedLast,
        others_unacknowledged: 0,
        text,
    })
}

/// The TaskManager a log line of this checkpoint names for this subtask (where it was at that
/// moment), else where the poller last saw the subtask run (Flink's per-subtask checkpoint
/// statistics carry no location).
pub(crate) fn taskmanager_of(
    c: &ClusterState,
    job_id: &str,
    checkpoint_id: u64,
    operator: &str,
    subtask: u32,
) -> Option<String> {
    c.logs
        .recent
        .iter()
        .rev()
        .filter(|e| e.checkpoint_id == Some(checkpoint_id) && e.subtask == Some(subtask))
        .filter(|e| e.job_id.as_deref().is_none_or(|j| j == job_id))
        .filter(|e| {
            e.task
                .as_deref()
                .is_none_or(|t| t == operator || operator.starts_with(t) || t.starts_with(operator))
        })
        .find_map(|e| e.taskmanager.clone())
        .or_else(|| c.jobs.get(job_id)?.subtask_location(operator, subtask).map(str::to_string))
}
