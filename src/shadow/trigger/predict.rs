//! The model beside the observations: a periodic checkpoint as the shadow knows it, the
//! coordinator model replayed from the schedule anchor, and the prediction nearest to an
//! observed trigger.

use crate::model::coordinator::{
    Binding, Coordinator, CoordinatorConfig, Outcome, Schedule, UNLIMITED_TOLERABLE,
};
use crate::observe::{CheckpointStatus, FailureReason, FinishedCheckpoint};
use crate::time::Timestamp;

/// Model steps per prediction (bounds the work per observed checkpoint).
pub(super) const MAX_MODEL_STEPS: usize = 20_000;
/// How much later than the model a queued request may start, per checkpoint replayed from the
/// anchor. With max-concurrent 1 every periodic tick while a checkpoint is pending stays queued
/// (`CheckpointRequestDecider.chooseRequestToExecute` runs nothing while `pending >=
/// maxConcurrent`), and the queue is re-evaluated when the pending one completes or is aborted
/// (`CheckpointCoordinator.scheduleTriggerRequest` from `completePendingCheckpoint` and
/// `abortPendingCheckpoint`, expiry included): the queued request starts at once. Between the
/// slot freeing up and its trigger timestamp the JobManager finalises or aborts the previous
/// checkpoint and prepares the next (checkpoint id, storage location, on its I/O executor): the
/// captures (`blocked`, `gc`; 1.14.6 to 2.3.0) show 5–204 ms per step, and a chain of queued
/// triggers (after an expiry, or the queue draining after a blocked task) adds them up.
pub(super) const QUEUED_TRIGGER_LAG_MS: u64 = 250;

/// A periodic checkpoint as the shadow knows it.
#[derive(Clone, Debug)]
pub(super) struct Seen {
    pub(super) id: u64,
    pub(super) triggered_at: Timestamp,
    pub(super) outcome: Outcome,
    /// Trigger to last ack (completed) or failure.
    pub(super) duration_ms: u64,
    pub(super) status: CheckpointStatus,
}

pub(super) fn seen(cp: &FinishedCheckpoint) -> Seen {
    let elapsed = cp.finished_at.since(cp.triggered_at);
    let outcome = match cp.status {
        CheckpointStatus::Completed => Outcome::Complete { duration_ms: cp.end_to_end_ms.unwrap_or(elapsed) },
        CheckpointStatus::Failed => {
            match cp.failure_message.as_deref().and_then(FailureReason::from_message) {
                Some(FailureReason::CheckpointExpired) => Outcome::Hang,
                reason => Outcome::Fail {
                    after_ms: elapsed,
                    reason: reason.unwrap_or(FailureReason::CheckpointDeclined),
                },
            }
        }
    };
    let duration_ms = match outcome {
        Outcome::Complete { duration_ms } => duration_ms,
        _ => elapsed,
    };
    Seen { id: cp.id, triggered_at: cp.triggered_at, outcome, duration_ms, status: cp.status }
}

/// One observed trigger next to its expectation.
#[derive(Clone, Debug)]
pub(super) struct Comparison {
    pub(super) observed_gap_ms: Option<u64>,
    pub(super) expected_gap_ms: Option<u64>,
    pub(super) binding: Option<Binding>,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct RestartMark {
    pub(super) consecutive_failures: u32,
    /// The restart happened after this time: it explains the first checkpoint triggered later.
    pub(super) after: Timestamp,
}

/// Failure reasons that mean the job failed over (its checkpoint scheduler stops and starts
/// again when the job runs again).
pub(super) fn means_failover(reason: FailureReason) -> bool {
    matches!(
        reason,
        FailureReason::CheckpointCoordinatorSuspend
            | FailureReason::CheckpointCoordinatorShutdown
            | FailureReason::JobFailoverRegion
            | FailureReason::TaskFailure
    )
}

/// The model prediction nearest to an observed trigger.
pub(super) struct Nearest {
    /// |deviation|, ms.
    pub(super) abs: u64,
    /// Observed minus predicted trigger time, ms.
    pub(super) dev: i64,
    pub(super) predicted: Timestamp,
    pub(super) binding: Binding,
    /// Checkpoints assumed to have gone by unobserved before this one.
    pub(super) unseen: usize,
    /// Trigger time of the anchor the prediction was replayed from.
    pub(super) anchor_time: Timestamp,
}

/// Whether `c` is off where the configured interval alone puts its trigger: the
/// (unseen + 1)-th tick of the anchor's fixed-rate grid after the previous checkpoint.
pub(super) fn off_naive_grid(c: &Seen, prev: &Seen, nearest: &Nearest, interval: u64, tol: u64) -> bool {
    let anchor_time = nearest.anchor_time;
    let ticks_before = (prev.triggered_at.since(anchor_time) + tol) / interval;
    let naive = anchor_time.plus_millis(((ticks_before + 1 + nearest.unseen as u64) * interval) as i64);
    c.triggered_at.0.abs_diff(naive.0) > tol
}

/// Whether `c` was triggered within [`QUEUED_TRIGGER_LAG_MS`] after `prev` ended: how a
/// queued request runs (`scheduleTriggerRequest` once the slot is free).
pub(super) fn ran_when_slot_freed(c: &Seen, prev: &Seen) -> bool {
    let prev_end = prev.triggered_at.plus_millis(prev.duration_ms as i64);
    c.triggered_at >= prev_end && c.triggered_at.since(prev_end) <= QUEUED_TRIGGER_LAG_MS
}

/// The model's trigger times for the checkpoints after `known` (which start at an anchor: a
/// trigger on a tick of the schedule). The first `extra` are filled with `filler_ms`
/// completions (checkpoints that went by unobserved).
pub(super) fn run_model(
    config: &CoordinatorConfig,
    known: &[Seen],
    extra: usize,
    filler_ms: u64,
) -> Vec<(Timestamp, Binding)> {
    let Some(first) = known.first() else { return Vec::new() };
    let cfg = CoordinatorConfig {
        tolerable_failures: UNLIMITED_TOLERABLE,
        keep_checkpoints: usize::MAX,
        ..config.clone()
    };
    let mut model = Coordinator::new(cfg, first.triggered_at, Schedule::FirstTriggerAt(first.triggered_at));
    let n_known = known.len();
    let want = n_known + extra + 1;
    let mut outcomes = |id: u64, at: Timestamp| -> Outcome {
        let i = (id as usize).saturating_sub(1);
        if i < n_known {
            // Ends where it was observed to end: the model's trigger time drifts from the
            // observed one by the JobManager's latency, and a chain of queued triggers (each
            // starting when the previous ends) would add the drift up.
            let k = &known[i];
            let observed_end = |d: u64| k.triggered_at.plus_millis(d as i64).since(at);
            match k.outcome {
                Outcome::Complete { duration_ms } => {
                    Outcome::Complete { duration_ms: observed_end(duration_ms) }
                }
                Outcome::Fail { after_ms, reason } => {
                    Outcome::Fail { after_ms: observed_end(after_ms), reason }
                }
                Outcome::Hang => Outcome::Hang,
            }
        } else if i < n_known + extra {
            Outcome::Complete { duration_ms: filler_ms }
        } else {
            Outcome::Hang
        }
    };
    let mut triggered = 0usize;
    for _ in 0..MAX_MODEL_STEPS {
        if triggered >= want || model.step(&mut outcomes).is_none() {
            break;
        }
        triggered = model.checkpoints().count();
    }
    model.checkpoints().skip(n_known).map(|c| (c.triggered_at, c.binding)).collect()
}
