//! The interval during backlog (FLIP-309, Flink 1.19+): while any source reports
//! `isProcessingBacklog`, the coordinator schedules periodic checkpoints every
//! `execution.checkpointing.interval-during-backlog` instead of every interval.
//!
//! Flink's `CheckpointCoordinator`: `ScheduledTrigger.run` schedules the next tick
//! `getCurrentCheckpointInterval()` after the planned time of the one running (the backlog
//! interval while `backlogOperators` is not empty), so a backlog that starts lets the tick
//! already planned run and spaces the following ones by the backlog interval;
//! `setIsProcessingBacklog` reschedules the trigger to `now + interval` when that comes before
//! the tick planned, so when the backlog ends the next trigger comes one interval after the
//! source reported it, anywhere between one interval and one backlog interval after the
//! previous trigger. A backlog interval of 0 turns checkpoints off during backlog. No REST
//! endpoint says whether a source reports backlog: the shadow reads it from the spacing.

use super::deviation::{Deviation, DeviationKind};
use super::predict::{Comparison, Seen};
use super::{JOBMANAGER_LATENCY_MS, RECENT, TriggerShadow, tolerance_ms};
use crate::model::coordinator::{Binding, CoordinatorConfig};
use crate::time::human_ms;

/// How a backlog interval explains a trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BacklogCase {
    /// The gap is the backlog interval: a source reports backlog.
    InForce,
    /// The first trigger after a backlog ended: one interval after the source said so.
    Ended,
    /// Checkpoints are off during backlog (`interval-during-backlog` 0) and the gap is longer
    /// than the interval.
    Off,
}

impl TriggerShadow {
    /// The configured interval during backlog, ms, when it differs from the interval (`Some(0)`:
    /// no checkpoints during backlog).
    pub(crate) fn backlog_interval_ms(&self) -> Option<u64> {
        let interval = self.config.as_ref()?.base_interval();
        self.settings.as_ref()?.interval_during_backlog_ms.map(u64::from).filter(|&b| b != interval)
    }

    /// Whether the latest triggers were spaced by the interval during backlog (a source reports
    /// backlog now, as far as the spacing tells).
    pub(crate) fn backlog_in_force(&self) -> bool {
        self.backlog_in_force
    }

    /// How the backlog interval explains a trigger `gap` ms after the previous one that the
    /// interval does not, if it does.
    fn backlog_case(&self, config: &CoordinatorConfig, gap: u64) -> Option<BacklogCase> {
        let backlog = self.backlog_interval_ms()?;
        let interval = config.base_interval();
        let tol = tolerance_ms(interval);
        if backlog == 0 {
            return (gap > interval + tol).then_some(BacklogCase::Off);
        }
        let backlog_tol = tolerance_ms(backlog) + JOBMANAGER_LATENCY_MS;
        if gap.abs_diff(backlog) <= backlog_tol {
            Some(BacklogCase::InForce)
        } else if self.backlog_in_force && gap + tol >= interval && gap <= backlog + backlog_tol {
            Some(BacklogCase::Ended)
        } else {
            None
        }
    }

    /// When the backlog interval explains `c`, `gap` ms after `prev`: records it and returns
    /// its |deviation| from the backlog interval (`None` inside when it ended a backlog).
    pub(super) fn explain_by_backlog(
        &mut self,
        config: &CoordinatorConfig,
        c: &Seen,
        prev: &Seen,
        gap: u64,
    ) -> Option<Option<u64>> {
        let case = self.backlog_case(config, gap)?;
        if case == BacklogCase::Ended {
            // One interval after the source caught up, or a manual trigger during the backlog:
            // kept off the schedule like a manual one until the next checkpoint tells (one
            // interval after it: the backlog ended there; the backlog interval after `prev`:
            // it still holds).
            let sentence = format!(
                "checkpoint {} came {} after checkpoint {}, before the backlog interval's {} tick: the \
                 backlog ended (the source stopped reporting it and Flink scheduled the next checkpoint one \
                 interval, {}, later), or a manual trigger during it",
                c.id,
                human_ms(gap),
                prev.id,
                human_ms(self.backlog_interval_ms().unwrap_or(0)),
                human_ms(config.base_interval())
            );
            self.push(Deviation {
                checkpoint_id: c.id,
                at: c.triggered_at,
                kind: DeviationKind::BacklogInterval,
                explained: true,
                sentence,
            });
            self.note_manual(c.clone());
            return Some(None);
        }
        self.explain_backlog(case, c, prev, gap, config);
        let backlog = self.backlog_interval_ms().unwrap_or(0);
        Some((case == BacklogCase::InForce).then(|| gap.abs_diff(backlog)))
    }

    /// Records a trigger the backlog interval explains and anchors the schedule on it.
    fn explain_backlog(
        &mut self,
        case: BacklogCase,
        c: &Seen,
        prev: &Seen,
        gap: u64,
        config: &CoordinatorConfig,
    ) {
        let backlog = self.backlog_interval_ms().unwrap_or(0);
        let head = format!(
            "checkpoint {} came {} after checkpoint {}, not {}",
            c.id,
            human_ms(gap),
            prev.id,
            human_ms(config.interval_ms)
        );
        let sentence = match case {
            BacklogCase::InForce => format!(
                "{head}: backlog interval in force: a source reports that it processes backlog, and \
                 execution.checkpointing.interval-during-backlog {} spaces the checkpoints meanwhile",
                human_ms(backlog)
            ),
            BacklogCase::Ended => format!(
                "{head}: the backlog ended: the source stopped reporting backlog and Flink scheduled the \
                 next checkpoint one interval ({}) later, before the backlog interval's {} tick",
                human_ms(config.base_interval()),
                human_ms(backlog)
            ),
            BacklogCase::Off => format!(
                "{head}: checkpoints are off while a source reports backlog \
                 (execution.checkpointing.interval-during-backlog 0)"
            ),
        };
        self.backlog_in_force = case != BacklogCase::Ended;
        self.push(Deviation {
            checkpoint_id: c.id,
            at: c.triggered_at,
            kind: DeviationKind::BacklogInterval,
            explained: true,
            sentence,
        });
        let expected = match case {
            BacklogCase::InForce => Some(backlog),
            BacklogCase::Ended | BacklogCase::Off => None,
        };
        self.recent.push_back(Comparison {
            observed_gap_ms: Some(gap),
            expected_gap_ms: expected,
            binding: expected.map(|_| Binding::Interval),
        });
        if self.recent.len() > RECENT {
            self.recent.pop_front();
        }
        self.anchor_at(c.clone());
    }

    /// How far past the last trigger the next one may come before it counts as missing, ms,
    /// when a backlog interval is configured: a backlog may start at any tick, so the trigger
    /// after it may come one backlog interval later (`None`: checkpoints are off during
    /// backlog, no trigger is owed). Without a backlog interval, the model's expectation alone.
    pub(super) fn backlog_allowance_ms(&self) -> Option<Option<u64>> {
        let backlog = self.backlog_interval_ms()?;
        let interval = self.config.as_ref()?.base_interval();
        Some(match backlog {
            0 => None,
            b => Some(b.max(interval)),
        })
    }

    /// The schedule sentence while the backlog interval is in force.
    pub(super) fn backlog_headline(&self) -> Option<String> {
        if !self.backlog_in_force {
            return None;
        }
        let backlog = self.backlog_interval_ms()?;
        let interval = self.config.as_ref()?.interval_ms;
        Some(if backlog == 0 {
            format!(
                "backlog interval in force: no checkpoints while a source reports backlog \
                 (execution.checkpointing.interval-during-backlog 0; interval {} otherwise)",
                human_ms(interval)
            )
        } else {
            format!(
                "checkpoints every {}: backlog interval in force while a source reports backlog \
                 (execution.checkpointing.interval-during-backlog; interval {} otherwise)",
                human_ms(backlog),
                human_ms(interval)
            )
        })
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::observe::{
        CheckpointSettings, FinishedCheckpoint, InProgressCheckpoint, JobPoll, SnapshotKind,
    };
    use crate::time::Timestamp;

    const INTERVAL: u64 = 2_500;
    const BACKLOG: u64 = 10_000;
    /// Flink's REST answers what was true this long ago.
    const REST_LAG: i64 = 1_400;
    const DURATION: u64 = 60;

    pub(in crate::shadow::trigger) fn settings(backlog: Option<u32>) -> CheckpointSettings {
        CheckpointSettings {
            exactly_once: true,
            interval_ms: Some(INTERVAL),
            timeout_ms: Some(60_000),
            min_pause_ms: 0,
            max_concurrent: 1,
            tolerable_failures: Some(100),
            interval_during_backlog_ms: backlog,
            ..CheckpointSettings::default()
        }
    }

    /// One snapshot as the series gives it: (id, trigger ms, duration ms, kind).
    pub(in crate::shadow::trigger) type Snap = (u64, i64, u64, SnapshotKind);

    /// The poll at `at` of a running job whose snapshots are `series`, through a REST answer
    /// lagging by [`REST_LAG`].
    pub(in crate::shadow::trigger) fn poll(
        series: &[Snap],
        at: i64,
        settings: &CheckpointSettings,
    ) -> JobPoll {
        let mut finished = Vec::new();
        let mut in_progress = Vec::new();
        for &(id, t, d, kind) in series.iter().filter(|s| s.1 + REST_LAG <= at) {
            if t + d as i64 + REST_LAG <= at {
                finished
                    .push(FinishedCheckpoint::completed(id, Timestamp(t), d).kind(kind).acknowledged(2, 2));
            } else {
                in_progress.push(InProgressCheckpoint {
                    id,
                    triggered_at: Timestamp(t),
                    num_subtasks: 2,
                    num_acknowledged: 0,
                });
            }
        }
        crate::shadow::trigger::tests::running_poll(at, settings.clone(), finished, in_progress)
    }

    /// A job whose source reports backlog from its start until 63 s, as Flink schedules it: the
    /// first tick 1.8 s in, then one every backlog interval (10 s) while the backlog lasts; the
    /// source's report that it caught up at 63 s reschedules the next trigger one interval
    /// later (65.5 s), and the interval (2.5 s) spaces them from there. Triggers 0–2 ms off
    /// their tick, as the JobManager's timer thread keeps them.
    fn backlog_then_caught_up() -> Vec<Snap> {
        let mut triggers: Vec<i64> = (0..7).map(|k| 1_800 + k * BACKLOG as i64).collect();
        triggers.extend((0..20).map(|k| 65_500 + k * INTERVAL as i64));
        triggers
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64 + 1, t + (i as i64 % 3), DURATION, SnapshotKind::Checkpoint))
            .collect()
    }

    /// Every poll of `series` a second apart from `start` to `end`, each phase of the poll
    /// against the schedule; `check` sees the shadow after each poll.
    pub(in crate::shadow::trigger) fn replay(
        series: &[Snap],
        settings: &CheckpointSettings,
        end: i64,
        check: &mut dyn FnMut(i64, &TriggerShadow),
    ) -> TriggerShadow {
        let mut last = TriggerShadow::new();
        for phase in (0..1_000).step_by(125) {
            let mut shadow = TriggerShadow::new();
            shadow.set_flink_version(Some("2.3.0"));
            let mut at = phase;
            while at <= end {
                shadow.observe_poll(&poll(series, at, settings));
                check(at, &shadow);
                at += 1_000;
            }
            last = shadow;
        }
        last
    }

    #[test]
    fn a_backlog_interval_explains_the_spacing_and_no_poll_finds_a_stall_or_a_late_trigger() {
        let series = backlog_then_caught_up();
        let mut headlines = Vec::new();
        let shadow = replay(&series, &settings(Some(BACKLOG as u32)), 118_000, &mut |at, shadow| {
            assert_eq!(shadow.stalled_for_ms(), None, "a stall at {at} ms");
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "at {at} ms: {unexplained:#?}");
            if at == 40_000 {
                headlines.push(shadow.headline().unwrap_or_default());
                assert!(shadow.backlog_in_force(), "in force at 40 s");
            }
        });
        assert!(headlines.iter().all(|h| h.contains("backlog interval in force")), "{headlines:?}");
        let kinds: Vec<(u64, DeviationKind)> =
            shadow.deviations().map(|d| (d.checkpoint_id, d.kind)).collect();
        // 2–7 are 10 s apart; 8 is the first after the backlog ended.
        for id in 2..=8 {
            assert!(kinds.contains(&(id, DeviationKind::BacklogInterval)), "{id}: {kinds:?}");
        }
        let ended = shadow.deviations().find(|d| d.checkpoint_id == 8).unwrap();
        assert!(ended.sentence.contains("the backlog ended"), "{}", ended.sentence);
        assert_eq!(ended.kind, DeviationKind::BacklogInterval);
        assert!(!shadow.backlog_in_force());
        let headline = shadow.headline().unwrap();
        assert!(headline.contains("as configured (interval 2.5 s)"), "{headline}");
    }

    #[test]
    fn a_manual_trigger_during_the_backlog_leaves_the_backlog_schedule_alone() {
        // In backlog (10 s apart from 1.8 s); a manual checkpoint 4.9 s after the 31.8 s tick;
        // the backlog goes on (41.8 s, 51.8 s), then ends (2.5 s from 54.3 s).
        let mut triggers: Vec<i64> = (0..6).map(|k| 1_800 + k * BACKLOG as i64).collect();
        triggers.push(36_700);
        triggers.sort();
        triggers.extend((0..10).map(|k| 54_300 + k * INTERVAL as i64));
        let series: Vec<Snap> = triggers
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64 + 1, *t, DURATION, SnapshotKind::Checkpoint))
            .collect();
        let shadow = replay(&series, &settings(Some(BACKLOG as u32)), 80_000, &mut |at, shadow| {
            assert_eq!(shadow.stalled_for_ms(), None, "a stall at {at} ms");
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "at {at} ms: {unexplained:#?}");
        });
        assert!(!shadow.backlog_in_force());
        let headline = shadow.headline().unwrap();
        assert!(headline.contains("as configured"), "{headline}");
    }

    #[test]
    fn without_the_key_the_same_spacing_is_late() {
        // The test above can fail: the model without the backlog interval finds the 10 s gaps late.
        let series = backlog_then_caught_up();
        let shadow = replay(&series, &settings(None), 118_000, &mut |_, _| {});
        let late: Vec<u64> = shadow
            .deviations()
            .filter(|d| d.kind == DeviationKind::LateTrigger)
            .map(|d| d.checkpoint_id)
            .collect();
        assert!(late.len() >= 6, "{late:?}");
    }

    #[test]
    fn a_late_trigger_that_is_no_backlog_spacing_is_still_late() {
        // Interval 2.5 s, backlog 10 s, never in backlog: checkpoint 6 comes 5.2 s after 5.
        let mut triggers: Vec<i64> = (0..5).map(|k| 1_800 + k * INTERVAL as i64).collect();
        triggers.extend((0..8).map(|k| 17_000 + k * INTERVAL as i64));
        let series: Vec<Snap> = triggers
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64 + 1, *t, DURATION, SnapshotKind::Checkpoint))
            .collect();
        let shadow = replay(&series, &settings(Some(BACKLOG as u32)), 34_000, &mut |_, _| {});
        let late: Vec<u64> = shadow
            .deviations()
            .filter(|d| d.kind == DeviationKind::LateTrigger)
            .map(|d| d.checkpoint_id)
            .collect();
        assert_eq!(late, vec![6]);
    }

    #[test]
    fn a_stall_past_the_backlog_interval_is_still_reported() {
        // In backlog (10 s apart), then nothing from 41.8 s on.
        let series: Vec<Snap> = (0..5)
            .map(|k| (k as u64 + 1, 1_800 + k * BACKLOG as i64, DURATION, SnapshotKind::Checkpoint))
            .collect();
        let mut first_stall = None;
        replay(&series, &settings(Some(BACKLOG as u32)), 90_000, &mut |at, shadow| {
            if shadow.stalled_for_ms().is_some() && first_stall.is_none() {
                first_stall = Some(at);
            }
        });
        let at = first_stall.expect("a stall is reported");
        // Not before the backlog tick (51.8 s) plus the tolerance (~3.1 s), two polls later.
        assert!(at > 51_800 + 3_000, "{at}");
        assert!(at < 51_800 + 8_000, "{at}");
    }
}
