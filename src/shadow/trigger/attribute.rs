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
        } else if let Some((_, words)) =
            self.rescale.as_deref().filter(|(at, _)| *at <= c.triggered_at).cloned()
        {
            self.rescale = None;
            (
                DeviationKind::Rescale,
                format!(
                    "the job was rescaled in between ({words}) after checkpoint {} and the new execution's \
                     checkpoint scheduler started again",
                    prev.id
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
        // The latest manual trigger counts as an anchor only where it matches: a scheduler that
        // started again there. Otherwise the schedule goes on from the periodic checkpoints.
        let manual = self.manual.as_ref().and_then(|m| m.anchor.as_ref()).filter(|m| m.id < c.id);
        let regular = anchors.len();
        if let Some(manual) = manual {
            anchors.push(vec![manual.clone()]);
        }
        let tol = super::tolerance_ms(config.base_interval());
        let mut best: Option<Nearest> = None;
        for (i, known) in anchors.iter().enumerate() {
            let predictions = run_model(config, known, unseen_max, filler);
            for (k, (t, b)) in predictions.into_iter().enumerate() {
                let dev = c.triggered_at.0 - t.0;
                if i >= regular && dev.unsigned_abs() > tol {
                    continue;
                }
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
        } else if config.max_concurrent == 1 && ran_when_slot_freed(c, prev) && !self.anchor_on_tick {
            // Early, but right when the previous checkpoint ended: a request that had queued
            // while a checkpoint was pending (the history seen starts after the one that held
            // the queue, so the model had no queue to replay). From an anchor on a known tick the
            // model did replay the queue: a periodic tick there would have matched, so a request
            // that queued and did not match is a manual one.
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
            self.anchor_on_tick = matched && on_tick;
        } else {
            if matched && self.since_anchor.first().map(|s| s.triggered_at) != Some(nearest.anchor_time) {
                // Matched from the previous checkpoint (or the latest manual trigger, where the
                // scheduler started again): the schedule moved there.
                let manual = self
                    .manual
                    .as_mut()
                    .and_then(|m| m.anchor.take())
                    .filter(|m| m.triggered_at == nearest.anchor_time);
                self.since_anchor = vec![manual.unwrap_or_else(|| prev.clone())];
                self.anchor_on_tick = false;
            }
            self.since_anchor.push(c.clone());
            self.grid_uncertain = !matched;
        }
    }

    /// A checkpoint put down to a manual trigger (`POST /jobs/:id/checkpoints`, `flink
    /// checkpoint`, 1.19+): a non-periodic request that leaves the periodic timer alone, so
    /// the schedule goes on from the checkpoint before it; kept like a savepoint (it may hold
    /// the slot when the next tick comes) and tried as an anchor for the next checkpoint.
    pub(super) fn note_manual(&mut self, c: Seen) {
        let finished_at = c.triggered_at.plus_millis(c.duration_ms as i64);
        self.savepoints.push_back((c.id, c.triggered_at, finished_at));
        if self.savepoints.len() > 8 {
            self.savepoints.pop_front();
        }
        let manual = self.manual.get_or_insert_with(Default::default);
        manual.ids.push_back(c.id);
        if manual.ids.len() > 8 {
            manual.ids.pop_front();
        }
        self.grid_uncertain = true;
        manual.anchor = Some(c);
    }

    /// Whether checkpoint `id` was put down to a manual trigger.
    pub(super) fn was_manual(&self, id: u64) -> bool {
        self.manual.as_ref().is_some_and(|m| m.ids.contains(&id))
    }

    /// The latest manual trigger is no anchor any more.
    pub(super) fn forget_manual_anchor(&mut self) {
        if let Some(m) = self.manual.as_mut() {
            m.anchor = None;
        }
    }

    pub(super) fn anchor_at(&mut self, c: Seen) {
        self.forget_manual_anchor();
        self.since_anchor = vec![c.clone()];
        self.grid_uncertain = false;
        self.anchor_on_tick = false;
        self.last = Some(c);
    }
}

#[cfg(test)]
mod tests {
    use super::super::backlog::tests::{Snap, replay, settings};
    use super::*;
    use crate::observe::{CheckpointSettings, SnapshotKind};

    fn five_seconds() -> CheckpointSettings {
        CheckpointSettings { interval_ms: Some(5_000), ..settings(None) }
    }

    /// Periodic ticks every 5 s from 2 s; `extra` snapshots (trigger ms, duration ms, kind) in
    /// between; ids in trigger order. A periodic tick that comes while an extra one is pending
    /// runs when it ends (max-concurrent 1).
    fn series(extra: &[(i64, u64, SnapshotKind)], ticks: i64) -> Vec<Snap> {
        let mut all: Vec<(i64, u64, SnapshotKind)> =
            (0..ticks).map(|k| (2_000 + k * 5_000, 60, SnapshotKind::Checkpoint)).collect();
        for &(t, d, kind) in extra {
            all.push((t, d, kind));
        }
        all.sort_by_key(|s| s.0);
        let mut out: Vec<Snap> = Vec::new();
        let mut busy_until = 0;
        for (t, d, kind) in all {
            let t = t.max(busy_until);
            busy_until = t + d as i64;
            out.push((out.len() as u64 + 1, t, d, kind));
        }
        out
    }

    #[test]
    fn full_manual_triggers_and_a_savepoint_between_periodic_ones_raise_nothing_unexplained() {
        // Three manual triggers 1.7 s after ticks, a savepoint 2.9 s after another; ~60 ms each.
        let extra = [
            (13_700, 80, SnapshotKind::Checkpoint),
            (28_700, 80, SnapshotKind::Checkpoint),
            (38_700, 80, SnapshotKind::Checkpoint),
            (49_900, 300, SnapshotKind::Savepoint),
        ];
        let series = series(&extra, 14);
        let shadow = replay(&series, &five_seconds(), 72_000, &mut |at, shadow| {
            assert_eq!(shadow.stalled_for_ms(), None, "a stall at {at} ms");
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "at {at} ms: {unexplained:#?}");
        });
        let manual: Vec<u64> = shadow
            .deviations()
            .filter(|d| d.kind == DeviationKind::ManualTrigger)
            .map(|d| d.checkpoint_id)
            .collect();
        let ids = |t: i64| series.iter().find(|s| s.1 == t).unwrap().0;
        assert_eq!(manual, vec![ids(13_700), ids(28_700), ids(38_700)]);
        // The periodic checkpoints after them stay on the schedule: no deviation of their own.
        assert_eq!(shadow.deviations().count(), 3, "{:#?}", shadow.deviations().collect::<Vec<_>>());
        let sentence = &shadow.deviations().next().unwrap().sentence;
        assert!(sentence.contains("FLINK-33723"), "{sentence}");
        let headline = shadow.headline().unwrap();
        assert!(headline.contains("as configured (interval 5.0 s)"), "{headline}");
    }

    #[test]
    fn a_periodic_tick_held_by_a_long_manual_checkpoint_is_explained_by_it() {
        // The manual checkpoint at 15.5 s takes 3.5 s: the 17 s tick runs at 19 s.
        let series = series(&[(15_500, 3_500, SnapshotKind::Checkpoint)], 10);
        let shadow = replay(&series, &five_seconds(), 50_000, &mut |at, shadow| {
            assert_eq!(shadow.stalled_for_ms(), None, "a stall at {at} ms");
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "at {at} ms: {unexplained:#?}");
        });
        let held = shadow.deviations().find(|d| d.kind == DeviationKind::Savepoint).expect("the held tick");
        assert!(held.sentence.contains("the manual checkpoint 4 ran in between"), "{}", held.sentence);
    }

    #[test]
    fn a_manual_trigger_queued_behind_a_periodic_checkpoint_on_the_grid_is_manual() {
        // Requested while the periodic checkpoints of the 12 s and 27 s ticks were pending (as a
        // live 2.3.0 run under load did): each runs the moment the one before it ends. The
        // periodic checkpoint before it sat on the grid and ended before the next tick, so no
        // periodic tick can have queued there: a manual trigger, not a long checkpoint.
        let extra = [(12_030, 80, SnapshotKind::Checkpoint), (27_010, 80, SnapshotKind::Checkpoint)];
        let series = series(&extra, 10);
        let shadow = replay(&series, &five_seconds(), 50_000, &mut |at, shadow| {
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "at {at} ms: {unexplained:#?}");
        });
        let kinds: Vec<(u64, DeviationKind)> =
            shadow.deviations().map(|d| (d.checkpoint_id, d.kind)).collect();
        let id = |t: i64| series.iter().find(|s| s.1 == t).unwrap().0;
        assert_eq!(
            kinds,
            vec![(id(12_060), DeviationKind::ManualTrigger), (id(27_060), DeviationKind::ManualTrigger)]
        );
    }

    #[test]
    fn a_scheduler_that_started_again_off_the_grid_is_followed() {
        // From 23.3 s on the ticks are on a new grid (23.3, 28.3, …): the first looks manual,
        // the next ones match the schedule from it.
        let mut triggers: Vec<i64> = (0..5).map(|k| 2_000 + k * 5_000).collect();
        triggers.extend((0..8).map(|k| 23_300 + k * 5_000));
        let series: Vec<Snap> = triggers
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64 + 1, *t, 60, SnapshotKind::Checkpoint))
            .collect();
        let shadow = replay(&series, &five_seconds(), 62_000, &mut |at, shadow| {
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "at {at} ms: {unexplained:#?}");
        });
        assert_eq!(shadow.deviations().count(), 1, "{:#?}", shadow.deviations().collect::<Vec<_>>());
    }
}
