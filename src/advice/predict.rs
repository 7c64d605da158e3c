//! The prediction: the reference model (`model::coordinator`) run over a job's observed
//! outcomes under a set of settings, giving the spacing, checkpoints and expiries per hour,
//! the replay window on failure, alignment and the in-flight data unaligned would persist.
//! Deterministic: the outcomes are taken in their observed order, again and again, and the
//! initial delay comes from a fixed seed.

use crate::model::coordinator::Binding;
use crate::model::coordinator::{
    Coordinator, CoordinatorConfig, End, Event, Outcome, Schedule, UNLIMITED_TOLERABLE,
};
use crate::model::replay::dominant_binding;
use crate::observe::{CheckpointStatus, FailureReason};
use crate::time::Timestamp;

use super::observed::{Sample, spacing};

/// The seed of every prediction's initial delay.
pub const SEED: u64 = 29;
/// Checkpoints each prediction simulates (at least; twice the observed ones when more).
pub const SIMULATED: usize = 240;

/// The settings a prediction runs under.
#[derive(Clone, Debug, PartialEq)]
pub struct Knobs {
    /// The coordinator's (interval, min-pause, max-concurrent, timeout, tolerable failures).
    pub coordinator: CoordinatorConfig,
    /// Unaligned checkpoints.
    pub unaligned: bool,
    /// The aligned checkpoint timeout with unaligned on, ms (0: unaligned from the start).
    pub aligned_timeout_ms: u64,
}

/// What the model predicts under one set of settings.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Prediction {
    /// Mean gap between triggers, ms (`observed::spacing`: it agrees with the checkpoints per
    /// hour).
    pub spacing_ms: u64,
    /// What set most trigger times: `interval`, `min_pause`, `max_concurrent`, `timeout`.
    pub binding: &'static str,
    /// Completed checkpoints per hour.
    pub checkpoints_per_hour: f64,
    /// Expired checkpoints per hour.
    pub expiries_per_hour: f64,
    /// Failed checkpoints per hour, expiries included.
    pub failures_per_hour: f64,
    /// The longest gap between two completed checkpoints, ms: the most processing a failure
    /// would replay.
    pub replay_window_ms: Option<u64>,
    /// Median start delay + alignment per checkpoint, ms.
    pub alignment_ms: Option<u64>,
    /// In-flight bytes each checkpoint persists (unaligned), or would persist if unaligned were
    /// on (the bytes processed during alignment).
    pub inflight_bytes: Option<u64>,
    /// With these outcomes the job fails (tolerable failures exceeded) this long after start, ms.
    pub job_fails_after_ms: Option<u64>,
    /// Were every checkpoint to hang (a stuck job), it would fail this long after start, ms;
    /// `None`: never (unlimited tolerable failures).
    pub stuck_job_fails_after_ms: Option<u64>,
}

/// Rounds to one decimal.
fn tenth(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The model's outcome of each observed sample under `knobs`, in trigger order. Unaligned
/// checkpoints (turned on by `knobs`, off when observed) end sooner by the alignment beyond
/// the aligned timeout; an expired checkpoint lasts as long as its late acknowledgements say,
/// or hangs when they do not tell.
/// An expired checkpoint that does not tell lasts `expired_needed_ms` (what those that tell
/// needed at most) when given.
pub fn outcomes(
    samples: &[Sample],
    knobs: &Knobs,
    observed_unaligned: bool,
    expired_needed_ms: Option<u64>,
) -> Vec<Outcome> {
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by_key(|s| (s.triggered_at, s.id));
    sorted
        .into_iter()
        .filter_map(|s| match s.status {
            CheckpointStatus::Completed => {
                let d = s.duration_ms?;
                let saved = match (knobs.unaligned && !observed_unaligned, s.alignment_ms) {
                    (true, Some(a)) => a.saturating_sub(knobs.aligned_timeout_ms),
                    _ => 0,
                };
                Some(Outcome::Complete { duration_ms: d.saturating_sub(saved).max(1) })
            }
            _ if s.expired() => Some(match s.needed_ms.or(expired_needed_ms) {
                // The model expires it again unless the timeout now leaves it room.
                Some(d) => Outcome::Complete { duration_ms: d },
                None => Outcome::Hang,
            }),
            _ => Some(Outcome::Fail {
                after_ms: s.duration_ms.unwrap_or(0),
                reason: s.failure.unwrap_or(FailureReason::CheckpointDeclined),
            }),
        })
        .collect()
}

/// Runs the model over `outcomes` (repeated) under `knobs`; `None` without outcomes.
pub fn predict(
    knobs: &Knobs,
    outcomes: &[Outcome],
    alignment_ms: Option<u64>,
    inflight_bytes: Option<u64>,
) -> Option<Prediction> {
    if outcomes.is_empty() {
        return None;
    }
    let count = SIMULATED.max(outcomes.len() * 2);
    let mut model = Coordinator::new(knobs.coordinator.clone(), Timestamp(0), Schedule::Seeded(SEED));
    let mut next = 0usize;
    model.run_checkpoints(count, &mut |_: u64, _: Timestamp| {
        let o = outcomes[next % outcomes.len()];
        next += 1;
        o
    });
    let job_fails_after_ms = model.drain_events().iter().find_map(|e| match e {
        Event::JobFailed { at, .. } => Some(at.0.max(0) as u64),
        _ => None,
    });
    let ended: Vec<_> = model.checkpoints().filter(|c| c.end.is_some()).collect();
    let first = ended.first()?.triggered_at;
    let last = ended.iter().filter_map(|c| c.finished_at()).max()?;
    let hours = (last.since(first).max(1) as f64) / 3_600_000.0;
    let triggers: Vec<Timestamp> = ended.iter().map(|c| c.triggered_at).collect();
    let gaps: Vec<u64> = triggers.windows(2).map(|w| w[1].since(w[0])).collect();
    let completions: Vec<Timestamp> = ended
        .iter()
        .filter_map(|c| match c.end {
            Some(End::Completed(t)) => Some(t),
            _ => None,
        })
        .collect();
    let expiries = ended
        .iter()
        .filter(|c| matches!(c.end, Some(End::Failed(_, FailureReason::CheckpointExpired))))
        .count();
    let failures = ended.iter().filter(|c| matches!(c.end, Some(End::Failed(..)))).count();
    let bindings: Vec<Binding> = ended.iter().map(|c| c.binding).collect();
    let unaligned_alignment = alignment_ms.map(|a| a.min(knobs.aligned_timeout_ms));
    Some(Prediction {
        spacing_ms: spacing(&gaps).unwrap_or(0),
        binding: dominant_binding(&bindings).as_str(),
        checkpoints_per_hour: tenth(completions.len() as f64 / hours),
        expiries_per_hour: tenth(expiries as f64 / hours),
        failures_per_hour: tenth(failures as f64 / hours),
        replay_window_ms: completions.windows(2).map(|w| w[1].since(w[0])).max(),
        alignment_ms: if knobs.unaligned { unaligned_alignment } else { alignment_ms },
        inflight_bytes,
        job_fails_after_ms,
        stuck_job_fails_after_ms: stuck_job_fails_after(&knobs.coordinator),
    })
}

/// When a job whose every checkpoint hangs fails, ms after start: `tolerable + 1` expiries,
/// simulated up to [`SIMULATED`] of them and extrapolated at the simulated pace beyond.
pub fn stuck_job_fails_after(config: &CoordinatorConfig) -> Option<u64> {
    if config.tolerable_failures >= UNLIMITED_TOLERABLE {
        return None;
    }
    let mut model = Coordinator::new(config.clone(), Timestamp(0), Schedule::Seeded(SEED));
    let needed = config.tolerable_failures as u64 + 1;
    let simulated = (needed as usize).min(SIMULATED);
    model.run_checkpoints(simulated, &mut |_: u64, _: Timestamp| Outcome::Hang);
    if let Some(at) = model.drain_events().iter().find_map(|e| match e {
        Event::JobFailed { at, .. } => Some(at.0.max(0) as u64),
        _ => None,
    }) {
        return Some(at);
    }
    let last_end = model.checkpoints().filter_map(|c| c.finished_at()).max()?;
    let per_failure = last_end.0.max(0) as f64 / simulated.max(1) as f64;
    Some((per_failure * needed as f64).round() as u64)
}
