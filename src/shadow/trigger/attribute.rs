//! An off-schedule trigger put down to what explains it: the rule the model says bound it, a
//! restart, a savepoint, a manual trigger, or nothing (a late trigger); and the schedule anchor
//! moved on.

use super::deviation::{Deviation, DeviationKind};
use super::predict::{
    Comparison, Nearest, QUEUED_TRIGGER_LAG_MS, RestartMark, Seen, ran_when_slot_freed, run_model,
};
use super::{JOBMANAGER_LATENCY_MS, MAX_SINCE_ANCHOR, MAX_UNSEEN, RECENT, TriggerShadow};
use crate::model::coordinator::{Binding, CoordinatorConfig, UNLIMITED_TOLERABLE};
use crate::time::human_ms;

impl TriggerShadow {
    /// Whether `nearest` is a queued request (it waited for a completion, an abort or an
    /// expiry) that started later than the model within the JobManager's latency
    /// ([`QUEUED_TRIGGER_LAG_MS`] per checkpoint replayed from the anchor, at most half the
    /// period so that it never matches another tick).
    pub(super) fn queued_lag_allowed(&self, config: &CoordinatorConfig, nearest: &Nearest) -> bool {
        let queued = matches!(nearest.binding, Binding::MaxConcurrent | Binding::Timeout);
        let steps = self.since_anchor.len().max(1) as u64;
        let allowed = (QUEUED_TRIGGER_LAG_MS * steps).min(config.base_interval() / 2);
        queued && nearest.dev > 0 && nearest.dev.unsigned_abs() <= allowed
    }

    /// The first checkpoint after a restart: the scheduler started again, so its gap is
    /// explained by the restart (or by the failure budget that caused it) when it is off.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn explain_restart(
        &mut self,
        mark: RestartMark,
        config: &CoordinatorConfig,
        c: &Seen,
        prev: &Seen,
        gap: u64,
        interval: u64,
        tol: u64,
    ) {
        self.restart = None;
        let tolerable = config.tolerable_failures;
        let (kind, cause) = if mark.consecutive_failures > tolerable && tolerable != UNLIMITED_TOLERABLE {
            (
                DeviationKind::TolerableFailures,
                format!(
                    "the job restarted after {} consecutive failed checkpoints exceeded \
                     tolerable-failed-checkpoints {tolerable}",
                    mark.consecutive_failures
                ),
            )
        } else {
            (
                DeviationKind::JobRestart,
                "the job restarted in between and its checkpoint scheduler started again".to_string(),
            )
        };
        if gap.abs_diff(interval) > tol {
            let sentence = format!(
                "checkpoint {} came {} after checkpoint {}, not {}: {cause}",
                c.id,
                human_ms(gap),
                prev.id,
                human_ms(interval)
            );
            self.push(Deviation { checkpoint_id: c.id, at: c.triggered_at, kind, explained: true, sentence });
        }
    }

    /// The model prediction nearest to `c`'s trigger, over the candidate anchors (the schedule
    /// anchor and, when the grid may have moved, the previous checkpoint) and over the number
    /// of checkpoints that may have gone by unobserved in between.
    pub(super) fn nearest_prediction(
        &self,
        config: &CoordinatorConfig,
        c: &Seen,
        prev: &Seen,
    ) -> Option<Nearest> {
        let missing = c.id.saturating_sub(prev.id + 1) as usize;
        let savepoints_between =
            self.savepoints.iter().filter(|(id, ..)| *id > prev.id && *id < c.id).count();
        let unseen_max = missing.saturating_sub(savepoints_between).min(MAX_UNSEEN);
        let filler = self.filler_ms();

        let mut anchors: Vec<Vec<Seen>> = Vec::new();
        if !self.since_anchor.is_empty() {
            anchors.push(self.since_anchor.clone());
        }
        if self.grid_uncertain || anchors.is_empty() {
            anchors.push(vec![prev.clone()]);
        }
        let mut best: Option<Nearest> = None;
        for known in &anchors {
            let predictions = run_model(config, known, unseen_max, filler);
            for (k, (t, b)) in predictions.into_iter().enumerate() {
                let dev = c.triggered_at.0 - t.0;
                if best.as_ref().is_none_or(|n| dev.unsigned_abs() < n.abs) {
                    best = Some(Nearest {
                        abs: dev.unsigned_abs(),
                        dev,
                        predicted: t,
                        binding: b,
                        unseen: k,
                        anchor_time: known[0].triggered_at,
                    });
                }
            }
        }
        best
    }

    /// What a deviating trigger is attributed to: the rule the model says bound it when the
    /// model agrees, else a savepoint in between, a late trigger or a manual one; `None` for a
    /// trigger late within [`JOBMANAGER_LATENCY_MS`] with no rule behind it (no deviation).
    pub(super) fn attribute(
        &self,
        config: &CoordinatorConfig,
        c: &Seen,
        prev: &Seen,
        nearest: &Nearest,
        matched: bool,
    ) -> Option<DeviationKind> {
        let kind = if matched {
            match nearest.binding {
                Binding::MinPause => DeviationKind::MinPause,
                Binding::MaxConcurrent if config.max_concurrent > 1 => DeviationKind::MaxConcurrent,
                Binding::MaxConcurrent => DeviationKind::LongCheckpoint,
                Binding::Timeout => DeviationKind::Timeout,
                Binding::Interval | Binding::Initial => {
                    self.last_displacement.unwrap_or(DeviationKind::LongCheckpoint)
                }
            }
        } else if nearest.dev > 0 {
            let savepoint = self
                .savepoints
                .iter()
                .any(|(_, t, f)| *t > prev.triggered_at && *t < c.triggered_at && *f > nearest.predicted);
            if savepoint {
                DeviationKind::Savepoint
            } else if nearest.dev <= JOBMANAGER_LATENCY_MS as i64 {
                return None;
            } else {
                DeviationKind::LateTrigger
            }
        } else if config.max_concurrent == 1 && ran_when_slot_freed(c, prev) {
            // Early, but right when the previous checkpoint ended: a request that had queued
            // while a checkpoint was pending (the history seen starts after the one that held
            // the queue, so the model had no queue to replay).
            DeviationKind::LongCheckpoint
        } else {
            DeviationKind::ManualTrigger
        };
        Some(kind)
    }

    /// Records a deviation of `c`; a displacement by a rule is remembered so that the
    /// checkpoints still on the displaced grid after it are attributed to the same rule.
    pub(super) fn push_deviation_of(&mut self, kind: DeviationKind, c: &Seen, sentence: String) {
        if matches!(
            kind,
            DeviationKind::MinPause
                | DeviationKind::LongCheckpoint
                | DeviationKind::MaxConcurrent
                | DeviationKind::Timeout
        ) {
            self.last_displacement = Some(kind);
        }
        self.push(Deviation {
            checkpoint_id: c.id,
            at: c.triggered_at,
            kind,
            explained: kind.explained(),
            sentence,
        });
    }

    /// Keeps the comparison for the interval medians and the dominant rule (gaps only when no
    /// checkpoint went by unobserved in between, so they are gaps between neighbours).
    pub(super) fn remember_comparison(
        &mut self,
        gap: u64,
        expected_gap: u64,
        nearest: &Nearest,
        matched: bool,
    ) {
        let unseen = nearest.unseen;
        self.recent.push_back(Comparison {
            observed_gap_ms: (unseen == 0).then_some(gap),
            expected_gap_ms: (unseen == 0 && matched).then_some(expected_gap),
            binding: matched.then_some(nearest.binding),
        });
        if self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }

    /// Moves the schedule anchor: to `c` when it sat on a tick (or the replay grows too long,
    /// or checkpoints went unseen), else `c` joins the checkpoints replayed from the anchor.
    pub(super) fn move_anchor(&mut self, c: &Seen, prev: &Seen, nearest: &Nearest, matched: bool) {
        let unseen = nearest.unseen;
        let on_tick = matches!(nearest.binding, Binding::Interval | Binding::MinPause | Binding::Initial);
        if (matched && on_tick) || unseen > 0 || self.since_anchor.len() >= MAX_SINCE_ANCHOR {
            self.since_anchor = vec![c.clone()];
            self.grid_uncertain = unseen > 0 && !matched;
        } else {
            if matched && self.since_anchor.first().map(|s| s.triggered_at) != Some(nearest.anchor_time) {
                // Matched from the previous checkpoint: the schedule moved there.
                self.since_anchor = vec![prev.clone()];
            }
            self.since_anchor.push(c.clone());
            self.grid_uncertain = !matched;
        }
    }

    pub(super) fn anchor_at(&mut self, c: Seen) {
        self.since_anchor = vec![c.clone()];
        self.grid_uncertain = false;
        self.last = Some(c);
    }
}
