//! Replay: drive the coordinator model with a job's observed checkpoints and compare triggers.
//!
//! The observed durations and outcomes are the model's input; its output trigger times are
//! compared with the observed ones. The model runs free from the first observed trigger (it is
//! never re-anchored), so the deviation measures the rules, not a fit.
//!
//! Observed and predicted checkpoints are paired by time, not by id: savepoints and manual
//! triggers take ids from the same counter, and a poll series can miss some ids entirely, so
//! after a gap the ids of the two sides no longer line up while the schedule still does. A
//! model trigger takes the next unpaired observed checkpoint whose trigger is within half a
//! period; a model trigger with none is a checkpoint the observation missed, and it gets the
//! median observed duration.

use crate::model::coordinator::{Binding, Coordinator, CoordinatorConfig, Outcome, Schedule};
use crate::observe::CheckpointStatus;
use crate::observe::FailureReason;
use crate::time::Timestamp;

/// One checkpoint as a job's history reported it.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedCheckpoint {
    /// Flink's id.
    pub(crate) id: u64,
    /// Trigger time.
    pub(crate) triggered_at: Timestamp,
    /// Final status; `None` when the history only saw it in progress.
    pub(crate) status: Option<CheckpointStatus>,
    /// Trigger to last ack (completed) or to failure (failed), ms.
    pub(crate) duration_ms: Option<u64>,
    /// Why it failed.
    pub(crate) failure: Option<FailureReason>,
}

/// One observed checkpoint next to its prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayRow {
    /// Flink's id.
    pub id: u64,
    /// The id the model gave the paired checkpoint.
    pub(crate) model_id: u64,
    /// Observed trigger.
    pub(crate) observed_trigger: Timestamp,
    /// Predicted trigger.
    pub(crate) predicted_trigger: Timestamp,
    /// Predicted − observed, ms.
    pub deviation_ms: i64,
    /// What set the predicted trigger time.
    pub binding: Binding,
}

/// The result of a replay.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayReport {
    /// The configuration the model ran with.
    pub(crate) config: CoordinatorConfig,
    /// Paired checkpoints, in order.
    pub rows: Vec<ReplayRow>,
    /// Observed checkpoints the model had no trigger for.
    pub unpaired_observed: Vec<u64>,
    /// Model checkpoints in the observed span that had no observation (filled with the
    /// median duration).
    pub(crate) unobserved_predicted: usize,
    /// Median |deviation| over the paired checkpoints, ms.
    pub median_abs_deviation_ms: u64,
    /// Median gap between consecutive predicted triggers, ms.
    pub effective_interval_ms: u64,
    /// Median duration of the observed completed checkpoints, ms.
    pub(crate) median_duration_ms: u64,
    /// The constraint that set most trigger times.
    pub binding: Binding,
}

/// The median of `values` (lower median for an even count); 0 when empty.
pub(crate) fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    if values.is_empty() { 0 } else { values[(values.len() - 1) / 2] }
}

/// The constraint that set most trigger times (ignoring the initial one); ties go to the
/// later variant (min-pause, max-concurrent and timeout are the interesting explanations).
pub(crate) fn dominant_binding<'a>(bindings: impl IntoIterator<Item = &'a Binding>) -> Binding {
    let mut counts: std::collections::BTreeMap<Binding, usize> = Default::default();
    for b in bindings {
        if *b != Binding::Initial {
            *counts.entry(*b).or_default() += 1;
        }
    }
    counts.into_iter().max_by_key(|(b, n)| (*n, *b)).map(|(b, _)| b).unwrap_or(Binding::Interval)
}

/// Replays `observed` (from [`merge_history`]) through the model with `config`.
pub fn replay(config: CoordinatorConfig, observed: &[ObservedCheckpoint]) -> ReplayReport {
    let mut observed: Vec<&ObservedCheckpoint> = observed.iter().collect();
    observed.sort_by_key(|o| (o.triggered_at, o.id));
    let median_duration_ms = median(
        observed
            .iter()
            .filter(|o| o.status == Some(CheckpointStatus::Completed))
            .filter_map(|o| o.duration_ms)
            .collect(),
    );
    let Some(first) = observed.first() else {
        return ReplayReport {
            config,
            rows: Vec::new(),
            unpaired_observed: Vec::new(),
            unobserved_predicted: 0,
            median_abs_deviation_ms: 0,
            effective_interval_ms: 0,
            median_duration_ms,
            binding: Binding::Interval,
        };
    };
    let last_trigger = observed.last().map(|o| o.triggered_at).unwrap_or(first.triggered_at);
    let tolerance = (config.base_interval() / 2) as i64;
    let filler = Outcome::Complete { duration_ms: median_duration_ms };

    let mut pairing = Pairing::default();
    let mut model = lifted_model(&config, first.triggered_at);
    model.run_until(last_trigger.plus_millis(tolerance), &mut |model_id: u64, at: Timestamp| {
        pairing.outcome_at(&observed, model_id, at, tolerance, filler)
    });
    pairing.unpaired.extend(observed[pairing.cursor..].iter().map(|o| o.id));

    let rows = paired_rows(&model, &pairing.pairs, &observed);
    let triggers: Vec<i64> = model.checkpoints().map(|c| c.triggered_at.0).collect();
    let gaps: Vec<u64> = triggers.windows(2).map(|w| (w[1] - w[0]).max(0) as u64).collect();
    let bindings: Vec<Binding> = model.checkpoints().map(|c| c.binding).collect();
    ReplayReport {
        config,
        median_abs_deviation_ms: median(rows.iter().map(|r| r.deviation_ms.unsigned_abs()).collect()),
        effective_interval_ms: median(gaps),
        median_duration_ms,
        binding: dominant_binding(&bindings),
        rows,
        unpaired_observed: pairing.unpaired,
        unobserved_predicted: pairing.unobserved,
    }
}

/// The model of `config` from the first observed trigger on. A replay reproduces the schedule;
/// the job's tolerable-failure limit is not what is being checked here (the observed job
/// evidently kept running), so it is lifted.
fn lifted_model(config: &CoordinatorConfig, first_trigger: Timestamp) -> Coordinator {
    Coordinator::new(
        CoordinatorConfig {
            tolerable_failures: crate::model::coordinator::UNLIMITED_TOLERABLE,
            ..config.clone()
        },
        first_trigger,
        Schedule::FirstTriggerAt(first_trigger),
    )
}

/// The pairing of model checkpoints with observed ones, built as the model triggers them.
#[derive(Default)]
struct Pairing {
    /// The next observed checkpoint not yet paired or passed.
    cursor: usize,
    /// (model id, observed index).
    pairs: Vec<(u64, usize)>,
    /// Observed ids no model checkpoint came near.
    unpaired: Vec<u64>,
    /// Model checkpoints with no observation.
    unobserved: usize,
}

impl Pairing {
    /// The outcome of the model's checkpoint `model_id` triggered at `at`: the observed one
    /// within `tolerance` of it (observed ones passed by are unpaired), else `filler`.
    fn outcome_at(
        &mut self,
        observed: &[&ObservedCheckpoint],
        model_id: u64,
        at: Timestamp,
        tolerance: i64,
        filler: Outcome,
    ) -> Outcome {
        while self.cursor < observed.len() && observed[self.cursor].triggered_at.0 < at.0 - tolerance {
            self.unpaired.push(observed[self.cursor].id);
            self.cursor += 1;
        }
        if self.cursor < observed.len() && observed[self.cursor].triggered_at.0 <= at.0 + tolerance {
            let o = observed[self.cursor];
            self.pairs.push((model_id, self.cursor));
            self.cursor += 1;
            observed_outcome(o, filler)
        } else {
            self.unobserved += 1;
            filler
        }
    }
}

/// What an observed checkpoint's end means to the model (`filler` when it says too little).
fn observed_outcome(o: &ObservedCheckpoint, filler: Outcome) -> Outcome {
    match (o.status, o.duration_ms) {
        (Some(CheckpointStatus::Completed), Some(d)) => Outcome::Complete { duration_ms: d },
        (Some(CheckpointStatus::Failed), _) if o.failure == Some(FailureReason::CheckpointExpired) => {
            Outcome::Hang
        }
        (Some(CheckpointStatus::Failed), d) => Outcome::Fail {
            after_ms: d.unwrap_or(0),
            reason: o.failure.unwrap_or(FailureReason::CheckpointDeclined),
        },
        _ => filler,
    }
}

/// One row per paired checkpoint: observed next to predicted trigger.
fn paired_rows(
    model: &Coordinator,
    pairs: &[(u64, usize)],
    observed: &[&ObservedCheckpoint],
) -> Vec<ReplayRow> {
    pairs
        .iter()
        .filter_map(|&(model_id, i)| {
            let predicted = model.checkpoint(model_id)?;
            let o = observed[i];
            Some(ReplayRow {
                id: o.id,
                model_id,
                observed_trigger: o.triggered_at,
                predicted_trigger: predicted.triggered_at,
                deviation_ms: predicted.triggered_at.0 - o.triggered_at.0,
                binding: predicted.binding,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(id: u64, at: i64, d: u64) -> ObservedCheckpoint {
        ObservedCheckpoint {
            id,
            triggered_at: Timestamp(at),
            status: Some(CheckpointStatus::Completed),
            duration_ms: Some(d),
            failure: None,
        }
    }

    #[test]
    fn a_perfect_min_pause_history_replays_exactly() {
        let config = CoordinatorConfig { interval_ms: 2_000, min_pause_ms: 5_000, ..Default::default() };
        let observed: Vec<_> = (0..10).map(|i| completed(i + 1, 1_000 + i as i64 * 5_010, 10)).collect();
        let report = replay(config, &observed);
        assert_eq!(report.rows.len(), 10);
        assert_eq!(report.median_abs_deviation_ms, 0);
        assert_eq!(report.binding, Binding::MinPause);
        assert_eq!(report.effective_interval_ms, 5_010);
    }

    #[test]
    fn ids_taken_by_a_savepoint_do_not_shift_the_pairing() {
        let config = CoordinatorConfig { interval_ms: 1_000, ..Default::default() };
        // Ids 1..=3, then a savepoint took id 4 and the poll missed 5: 6 is the 4th tick… no,
        // the 5th: ticks 4 and 5 are unobserved; 6 is at the 6th tick.
        let observed = vec![
            completed(1, 0, 10),
            completed(2, 1_000, 10),
            completed(3, 2_000, 10),
            completed(6, 4_000, 10),
        ];
        let report = replay(config, &observed);
        assert_eq!(report.rows.len(), 4);
        assert!(report.rows.iter().all(|r| r.deviation_ms == 0));
        assert_eq!(report.unobserved_predicted, 1);
        assert_eq!(report.rows[3].model_id, 5);
    }
}
