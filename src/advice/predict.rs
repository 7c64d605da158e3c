//! The prediction: the reference model (`model::coordinator`) run over a job's observed
//! outcomes under a set of settings, giving the spacing, checkpoints and expiries per hour (from
//! one window of the run, so the spacing is one hour over the checkpoints per hour),
//! the replay window on failure, alignment and the in-flight data unaligned would persist.
//! Deterministic: the outcomes are taken in their observed order, again and again, and the
//! initial delay comes from a fixed seed.

use crate::model::coordinator::Binding;
use crate::model::coordinator::{
    Coordinator, CoordinatorConfig, End, Event, Outcome, PredictedCheckpoint, Schedule, UNLIMITED_TOLERABLE,
};
use crate::model::replay::dominant_binding;
use crate::observe::{CheckpointStatus, FailureReason};
use crate::time::Timestamp;

use super::observed::Sample;

/// The seed of every prediction's initial delay.
pub(crate) const SEED: u64 = 29;
/// Checkpoints each prediction simulates (at least; twice the observed ones when more).
pub(crate) const SIMULATED: usize = 240;

/// The settings a prediction runs under.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Knobs {
    /// The coordinator's (interval, min-pause, max-concurrent, timeout, tolerable failures).
    pub(crate) coordinator: CoordinatorConfig,
    /// Unaligned checkpoints.
    pub(crate) unaligned: bool,
    /// The aligned checkpoint timeout with unaligned on, ms (0: unaligned from the start).
    pub(crate) aligned_timeout_ms: u64,
}

/// What the model predicts under one set of settings. The spacing and the per-hour rates are
/// private and set together ([`Pace`]): the spacing is always one hour over the completed and
/// failed checkpoints per hour, whoever builds a prediction.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Prediction {
    /// Mean gap between triggers, ms: the window from the first trigger to the last over the
    /// checkpoints triggered in it.
    spacing_ms: u64,
    /// What set most trigger times: `interval`, `min_pause`, `max_concurrent`, `timeout`.
    pub(crate) binding: &'static str,
    /// Completed checkpoints per hour.
    checkpoints_per_hour: f64,
    /// Expired checkpoints per hour.
    expiries_per_hour: f64,
    /// Failed checkpoints per hour, expiries included.
    failures_per_hour: f64,
    /// The longest gap between two completed checkpoints, ms: the most processing a failure
    /// would replay.
    pub(crate) replay_window_ms: Option<u64>,
    /// Median start delay + alignment per checkpoint, ms.
    pub(crate) alignment_ms: Option<u64>,
    /// In-flight bytes each checkpoint persists (unaligned), or would persist if unaligned were
    /// on (the bytes processed during alignment).
    pub(crate) inflight_bytes: Option<u64>,
    /// With these outcomes the job fails (tolerable failures exceeded) this long after start, ms.
    pub(crate) job_fails_after_ms: Option<u64>,
    /// Were every checkpoint to hang (a stuck job), it would fail this long after start, ms;
    /// `None`: never (unlimited tolerable failures).
    pub(crate) stuck_job_fails_after_ms: Option<u64>,
}

impl Prediction {
    /// Mean gap between triggers, ms: 3,600,000 ÷ (completed + failed per hour).
    pub(crate) fn spacing_ms(&self) -> u64 {
        self.spacing_ms
    }

    /// Completed checkpoints per hour.
    pub(crate) fn checkpoints_per_hour(&self) -> f64 {
        self.checkpoints_per_hour
    }

    /// Expired checkpoints per hour (counted among the failed too).
    pub(crate) fn expiries_per_hour(&self) -> f64 {
        self.expiries_per_hour
    }

    /// Failed checkpoints per hour, expiries included.
    pub(crate) fn failures_per_hour(&self) -> f64 {
        self.failures_per_hour
    }
}

/// How often a simulated run's checkpoints came and how they ended: one window and one set of
/// checkpoints for the spacing and for every rate. Each checkpoint opens the gap to the next
/// trigger, so the window from the first trigger to the last holds the gaps of all checkpoints
/// but the last, and those are the ones counted; a lone checkpoint's window is its own life.
/// No gap is left out as an outlier: behind a hanging checkpoint the queued ones run back to
/// back, their gaps are the typical ones, and leaving the hang's gap out gave 51 ms beside
/// 1,770 checkpoints an hour.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pace {
    window_ms: u64,
    completed: usize,
    expired: usize,
    failed: usize,
}

impl Pace {
    /// The pace of `settled`: a run's checkpoints in trigger order from its first on, every one
    /// of them ended; `None` when empty.
    fn of(settled: &[&PredictedCheckpoint]) -> Option<Pace> {
        let (first, last) = (settled.first()?, settled.last()?);
        let (counted, window_ms) = if settled.len() >= 2 {
            (&settled[..settled.len() - 1], last.triggered_at.since(first.triggered_at))
        } else {
            (settled, first.finished_at()?.since(first.triggered_at))
        };
        let ended = |f: fn(&End) -> bool| counted.iter().filter(|c| c.end.as_ref().is_some_and(f)).count();
        Some(Pace {
            window_ms: window_ms.max(1),
            completed: ended(|e| matches!(e, End::Completed(_))),
            expired: ended(|e| matches!(e, End::Failed(_, FailureReason::CheckpointExpired))),
            failed: ended(|e| matches!(e, End::Failed(..))),
        })
    }

    /// Mean gap between triggers, ms.
    fn spacing_ms(&self) -> u64 {
        (self.window_ms as f64 / (self.completed + self.failed).max(1) as f64).round() as u64
    }

    /// `count` checkpoints of this pace per hour.
    fn per_hour(&self, count: usize) -> f64 {
        rate(count as f64 * 3_600_000.0 / self.window_ms as f64)
    }
}

/// The decimals a rate per hour is given to: one, and three significant digits below 10 (to a
/// tenth, 0.4 an hour would move the spacing it implies by a quarter).
pub(crate) fn rate_decimals(x: f64) -> usize {
    if x > 0.0 && x.is_finite() { (2 - x.log10().floor() as i32).max(1) as usize } else { 1 }
}

/// A rate per hour rounded to its [`rate_decimals`].
fn rate(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return 0.0;
    }
    let scale = 10f64.powi(rate_decimals(x) as i32);
    (x * scale).round() / scale
}

/// The model's outcome of each observed sample under `knobs`, in trigger order. Unaligned
/// checkpoints (turned on by `knobs`, off when observed) end sooner by the alignment beyond
/// the aligned timeout; an expired checkpoint lasts as long as its late acknowledgements say,
/// or hangs when they do not tell.
/// An expired checkpoint that does not tell lasts `expired_needed_ms` (what those that tell
/// needed at most) when given.
pub(crate) fn outcomes(
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
pub(crate) fn predict(
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
    let mut supply = |_: u64, _: Timestamp| {
        let o = outcomes[next % outcomes.len()];
        next += 1;
        o
    };
    // Until `count` checkpoints have ended with none before them still pending (one hanging
    // under max-concurrent > 1 while later ones end), so the window's every checkpoint counts.
    let mut settled = 0u64;
    loop {
        while model.checkpoint(settled + 1).is_some_and(|c| c.end.is_some()) {
            settled += 1;
        }
        if settled as usize >= count || model.step(&mut supply).is_none() {
            break;
        }
    }
    let job_fails_after_ms = model.drain_events().iter().find_map(|e| match e {
        Event::JobFailed { at, .. } => Some(at.0.max(0) as u64),
        _ => None,
    });
    let ended: Vec<&PredictedCheckpoint> = model.checkpoints().take(settled as usize).collect();
    let pace = Pace::of(&ended)?;
    let completions: Vec<Timestamp> = ended
        .iter()
        .filter_map(|c| match c.end {
            Some(End::Completed(t)) => Some(t),
            _ => None,
        })
        .collect();
    let bindings: Vec<Binding> = ended.iter().map(|c| c.binding).collect();
    let unaligned_alignment = alignment_ms.map(|a| a.min(knobs.aligned_timeout_ms));
    Some(Prediction {
        spacing_ms: pace.spacing_ms(),
        binding: dominant_binding(&bindings).as_str(),
        checkpoints_per_hour: pace.per_hour(pace.completed),
        expiries_per_hour: pace.per_hour(pace.expired),
        failures_per_hour: pace.per_hour(pace.failed),
        replay_window_ms: completions.windows(2).map(|w| w[1].since(w[0])).max(),
        alignment_ms: if knobs.unaligned { unaligned_alignment } else { alignment_ms },
        inflight_bytes,
        job_fails_after_ms,
        stuck_job_fails_after_ms: stuck_job_fails_after(&knobs.coordinator),
    })
}

/// When a job whose every checkpoint hangs fails, ms after start: `tolerable + 1` expiries,
/// simulated up to [`SIMULATED`] of them and extrapolated at the simulated pace beyond.
pub(crate) fn stuck_job_fails_after(config: &CoordinatorConfig) -> Option<u64> {
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
