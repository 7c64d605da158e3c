//! The trigger shadow: the coordinator model run in lockstep with a job's observed checkpoints.
//!
//! Each observed periodic checkpoint is compared with the trigger time the coordinator model
//! predicts from the checkpoints before it. The model is re-anchored on the newest checkpoint
//! that sat on a tick of the fixed-rate schedule (so its error never accumulates) and fed the
//! observed outcomes since then. A trigger that is not where the configured interval puts it
//! is a **deviation**: explained when the model predicted it (min-pause, max-concurrent, a long
//! checkpoint, a timeout) or when something observed explains it (a restart, a savepoint, a
//! manual trigger); unexplained when it came late with no rule for it, when a checkpoint outlived
//! its timeout, or when ids skipped that Flink never counted.
//!
//! `mod.rs` feeds the polls through; `predict.rs` runs the model from the anchor, `attribute.rs`
//! puts each off-schedule trigger down to a rule or an event, `checks.rs` holds the checks that
//! need no model (restarts, id skips, checkpoints past their timeout, stalls), `text.rs` says it
//! in sentences, `deviation.rs` names the kinds.

mod attribute;
mod backlog;
mod checks;
mod deviation;
mod predict;
mod text;

pub use deviation::{Deviation, DeviationKind};

use predict::{Comparison, RestartMark, Seen, means_failover, off_naive_grid, seen};

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::model::coordinator::{Binding, CoordinatorConfig, UNLIMITED_TOLERABLE};
use crate::model::replay::{dominant_binding, median};
use crate::observe::FailureReason;
use crate::observe::{
    CheckpointSettings, CheckpointStatus, FinishedCheckpoint, JobPoll, JobStatus, SnapshotKind,
};
use crate::time::Timestamp;

/// Comparisons kept for the interval medians and the dominant rule.
const RECENT: usize = 16;
/// Deviations kept for the API.
const DEVIATIONS_KEPT: usize = 32;
/// At most this many checkpoints are replayed from the schedule anchor.
const MAX_SINCE_ANCHOR: usize = 32;
/// At most this many unobserved checkpoints are assumed between two observed ones.
const MAX_UNSEEN: usize = 64;
/// A checkpoint still in progress this long past its deadline was not expired.
const OVERDUE_GRACE_MS: u64 = 5_000;

/// How far an observed trigger may be from the expected one and still agree: 100 ms or 5 % of
/// the period, whichever is larger (Flink's own jitter: finalisation, trigger RPCs, timers).
pub(crate) fn tolerance_ms(period_ms: u64) -> u64 {
    (period_ms / 20).max(100)
}

/// A trigger later than the model by less than this (and within no rule) is the JobManager's
/// own latency, not a deviation: the trigger timestamp is taken on the coordinator's timer
/// thread, which a GC pause or a busy machine holds up for a few hundred milliseconds (a
/// 2-core CI machine running the JobManager, a TaskManager and the daemon paged on one). On a
/// quiet JobManager triggers keep their tick within 2 ms (the e2e JobManager logs: 2,498–2,502
/// ms apart at a 2.5 s interval). A coordinator stall worth a warning is seconds long.
const JOBMANAGER_LATENCY_MS: u64 = 500;

/// First-appearance lags (trigger to the first poll that showed the checkpoint) kept for the
/// stall tolerance.
const LAGS_KEPT: usize = 16;

/// How late Flink's REST may show a trigger: its checkpoint statistics are cached for
/// `rest.cache.checkpoint-statistics.timeout`, by default `web.refresh-interval`, 3 s. The stall
/// tolerance always allows at least this much: the lags observed so far are a sample, and they
/// understate the worst one whenever the cache happened to be refreshed soon after the
/// triggers seen (a new job's first checkpoint is often answered fresh, and a run of triggers
/// can keep the same phase against the cache for a while).
const DEFAULT_REST_LAG_MS: u64 = 3_000;

/// How long after its expected trigger time a checkpoint may still be invisible to the poller
/// without being late: the trigger jitter ([`tolerance_ms`] of the period), plus the longest
/// recently observed lag between a trigger and the first poll that showed the checkpoint
/// (Flink's REST answers from a cache, so a checkpoint appears in `/checkpoints` 1.3–1.4 s
/// after its trigger on 1.17 and later, and the poll waits for its next round on top), plus
/// one poll interval (a lag sample taken right after a trigger does not show the worst phase of
/// the poll against the schedule).
pub(crate) fn stall_tolerance_ms(period_ms: u64, max_lag_ms: Option<u64>, poll_gap_ms: Option<u64>) -> u64 {
    tolerance_ms(period_ms) + max_lag_ms.unwrap_or(0) + poll_gap_ms.unwrap_or(0)
}

/// What the shadow remembers of manual triggers.
#[derive(Clone, Debug, Default)]
struct ManualTriggers {
    /// Recent checkpoints put down to a manual trigger: out of the periodic schedule, like a
    /// savepoint (also in `savepoints`, which holds every snapshot off the schedule).
    ids: VecDeque<u64>,
    /// The latest manual trigger, tried as an anchor for the next checkpoint (it may have been a
    /// scheduler that started again there rather than a manual trigger).
    anchor: Option<Seen>,
}

/// The coordinator shadow of one job.
#[derive(Clone, Debug, Default)]
pub struct TriggerShadow {
    settings: Option<CheckpointSettings>,
    config: Option<CoordinatorConfig>,
    flink_major: Option<u32>,
    /// Periodic checkpoints from the schedule anchor on, oldest first.
    since_anchor: Vec<Seen>,
    /// Whether the schedule may have moved (after an unexplained trigger): the previous
    /// checkpoint is tried as an anchor too.
    grid_uncertain: bool,
    /// Whether the schedule anchor is a checkpoint that matched a tick of the model: the grid
    /// is known there, so the model's replay from it shows every tick that could have queued.
    anchor_on_tick: bool,
    last: Option<Seen>,
    processed_max: u64,
    savepoints: VecDeque<(u64, Timestamp, Timestamp)>,
    durations: VecDeque<u64>,
    recent: VecDeque<Comparison>,
    last_displacement: Option<DeviationKind>,
    consecutive_failures: u32,
    restart: Option<RestartMark>,
    last_restored: Option<u64>,
    last_restore: Option<(Option<u64>, Timestamp)>,
    last_counts: Option<(u64, u64)>,
    max_id: u64,
    pending: BTreeMap<u64, Timestamp>,
    flagged_overdue: BTreeSet<u64>,
    deviations: VecDeque<Deviation>,
    counts: BTreeMap<DeviationKind, u64>,
    expected_next: Option<(Timestamp, Binding)>,
    stalled_for_ms: Option<u64>,
    polled_at: Option<Timestamp>,
    /// Time between the last two polls, ms.
    poll_gap_ms: Option<u64>,
    /// The highest checkpoint id any poll has shown (finished or in progress); `None` before
    /// the first poll. Ids above it are seen for the first time.
    visible_max: Option<u64>,
    /// Recent lags between a checkpoint's trigger and the first poll that showed it, ms.
    first_seen_lags: VecDeque<u64>,
    /// The expected trigger that the previous poll already found overdue beyond the stall
    /// tolerance: a stall is reported only when the next poll still finds it overdue.
    overdue_at_last_poll: Option<Timestamp>,
    /// Whether the latest trigger was spaced by the interval during backlog.
    backlog_in_force: bool,
    /// Manual triggers seen (boxed: most jobs never see one).
    manual: Option<Box<ManualTriggers>>,
    /// The latest rescale: when the old execution stopped, and its parallelism in words (boxed:
    /// most jobs never rescale).
    rescale: Option<Box<(Timestamp, String)>>,
}

impl TriggerShadow {
    #[cfg(test)]
    /// An empty shadow.
    pub(crate) fn new() -> Self {
        TriggerShadow::default()
    }

    /// The Flink version the cluster reports (`2.3.0`): 2.x reports `max(interval, minPause)`
    /// as the interval, which changes what can honestly be said about min-pause.
    pub fn set_flink_version(&mut self, version: Option<&str>) {
        self.flink_major = version.and_then(|v| v.split('.').next()).and_then(|m| m.parse().ok());
    }

    /// Forgets the schedule (checkpoint ids restarted under the same job id: a new run of the
    /// job); keeps the Flink version. The settings come again with the next poll.
    pub(crate) fn start_over(&mut self) {
        *self = TriggerShadow { flink_major: self.flink_major, ..TriggerShadow::default() };
    }

    /// The settings the shadow runs with.
    pub(crate) fn settings(&self) -> Option<&CheckpointSettings> {
        self.settings.as_ref()
    }

    fn set_settings(&mut self, settings: &CheckpointSettings) {
        if self.settings.as_ref() == Some(settings) {
            return;
        }
        self.settings = Some(settings.clone());
        self.config = CoordinatorConfig::from_settings(settings);
        // A new configuration starts a new schedule.
        self.since_anchor.clear();
        self.anchor_on_tick = false;
        self.grid_uncertain = true;
    }

    /// Feeds one poll; returns |observed − expected| trigger time, ms, of each newly compared
    /// checkpoint (for the deviation summary).
    pub(crate) fn observe_poll(&mut self, poll: &JobPoll) -> Vec<u64> {
        if let Some(settings) = &poll.settings {
            self.set_settings(settings);
        }
        self.poll_gap_ms = self.polled_at.filter(|t| *t < poll.polled_at).map(|t| poll.polled_at.since(t));
        self.polled_at = Some(poll.polled_at);
        self.observe_first_appearances(poll);
        self.detect_restart(poll);
        self.check_id_skip(poll);
        let mut out = Vec::new();
        let mut finished: Vec<&FinishedCheckpoint> =
            poll.finished.iter().filter(|cp| cp.id > self.processed_max && cp.triggered_at.0 > 0).collect();
        finished.sort_by_key(|cp| cp.id);
        for cp in finished {
            self.processed_max = cp.id;
            self.pending.remove(&cp.id);
            if cp.kind == SnapshotKind::Savepoint {
                self.savepoints.push_back((cp.id, cp.triggered_at, cp.finished_at));
                if self.savepoints.len() > 8 {
                    self.savepoints.pop_front();
                }
                continue;
            }
            let s = seen(cp);
            self.check_not_expired_on_finish(&s);
            match s.status {
                CheckpointStatus::Completed => {
                    self.consecutive_failures = 0;
                    self.durations.push_back(s.duration_ms);
                    if self.durations.len() > RECENT {
                        self.durations.pop_front();
                    }
                }
                CheckpointStatus::Failed => {}
            }
            let reason = cp.failure_message.as_deref().and_then(FailureReason::from_message);
            if s.status == CheckpointStatus::Failed && reason.is_some_and(|r| r.counts_toward_tolerable(true))
            {
                self.consecutive_failures += 1;
            }
            // CheckpointFailureManager: the job fails when the count exceeds the tolerable number.
            let tolerable = self.config.as_ref().map_or(UNLIMITED_TOLERABLE, |c| c.tolerable_failures);
            let exceeded = tolerable != UNLIMITED_TOLERABLE && self.consecutive_failures > tolerable;
            let failover = s.status == CheckpointStatus::Failed && reason.is_some_and(means_failover);
            let finished_at = cp.finished_at;
            if let Some(dev) = self.process(s) {
                out.push(dev);
            }
            if exceeded || failover {
                self.mark_restart(finished_at);
            }
        }
        self.track_pending(&poll.in_progress, poll.polled_at);
        if poll.job_state == JobStatus::Running {
            self.update_expectation(&poll.in_progress, poll.polled_at);
        } else {
            // A job that is not running triggers nothing: no expectation, no stall.
            self.expected_next = None;
            self.stalled_for_ms = None;
            self.overdue_at_last_poll = None;
        }
        out
    }

    /// Records how long after its trigger each checkpoint first showed up in a poll. The
    /// checkpoints of a job's first poll are not counted: they may have been triggered long
    /// before the daemon started.
    fn observe_first_appearances(&mut self, poll: &JobPoll) {
        let ids = poll
            .finished
            .iter()
            .map(|f| (f.id, f.triggered_at))
            .chain(poll.in_progress.iter().map(|p| (p.id, p.triggered_at)));
        let Some(visible_max) = self.visible_max else {
            self.visible_max = Some(ids.map(|(id, _)| id).max().unwrap_or(0));
            return;
        };
        let mut new_max = visible_max;
        for (id, triggered_at) in ids {
            if id > visible_max && triggered_at.0 > 0 {
                self.first_seen_lags.push_back(poll.polled_at.since(triggered_at));
                if self.first_seen_lags.len() > LAGS_KEPT {
                    self.first_seen_lags.pop_front();
                }
            }
            new_max = new_max.max(id);
        }
        self.visible_max = Some(new_max);
    }

    /// The longest recent lag between a trigger and the first poll that showed the checkpoint.
    pub(crate) fn max_first_seen_lag_ms(&self) -> Option<u64> {
        self.first_seen_lags.iter().copied().max()
    }

    /// The REST lag the stall tolerance allows for: the longest recent one, and at least
    /// [`DEFAULT_REST_LAG_MS`].
    fn lag_allowed_ms(&self) -> Option<u64> {
        Some(self.max_first_seen_lag_ms().unwrap_or(0).max(DEFAULT_REST_LAG_MS))
    }

    /// How long past its expected time a trigger may go unseen before it counts as a stall.
    pub(crate) fn current_stall_tolerance_ms(&self) -> Option<u64> {
        let config = self.config.as_ref()?;
        Some(stall_tolerance_ms(config.base_interval(), self.lag_allowed_ms(), self.poll_gap_ms))
    }

    fn filler_ms(&self) -> u64 {
        median(self.durations.iter().copied().collect())
    }

    /// Compares one newly finished periodic checkpoint with the model; returns |deviation|, ms.
    fn process(&mut self, c: Seen) -> Option<u64> {
        let (Some(config), Some(prev)) = (self.config.clone(), self.last.clone()) else {
            self.anchor_at(c);
            return None;
        };
        if c.triggered_at <= prev.triggered_at {
            return None; // out of order (a retried poll); the schedule is already past it
        }
        let gap = c.triggered_at.since(prev.triggered_at);
        let interval = config.interval_ms.max(1);
        let tol = tolerance_ms(config.base_interval());
        if let Some(mark) = self.restart.filter(|m| c.triggered_at >= m.after) {
            self.explain_restart(mark, &config, &c, &prev, gap, interval, tol);
            self.anchor_at(c);
            return None;
        }
        let Some(nearest) = self.nearest_prediction(&config, &c, &prev) else {
            self.anchor_at(c);
            return None;
        };
        let matched = nearest.abs <= tol || self.queued_lag_allowed(&config, &nearest);
        let expected_gap = nearest.predicted.since(prev.triggered_at);
        let deviates = off_naive_grid(&c, &prev, &nearest, interval, tol);
        if deviates
            && !matched
            && let Some(dev) = self.explain_by_backlog(&config, &c, &prev, gap)
        {
            return dev;
        }
        // Anything else than the backlog's spacing ends it.
        self.backlog_in_force = false;
        let kind = if deviates { self.attribute(&config, &c, &prev, &nearest, matched) } else { None };
        if kind == Some(DeviationKind::ManualTrigger) && prev.id > 1 {
            let sentence = self.sentence(
                DeviationKind::ManualTrigger,
                &c,
                &prev,
                gap,
                expected_gap,
                nearest.dev,
                nearest.binding,
                &config,
            );
            self.push_deviation_of(DeviationKind::ManualTrigger, &c, sentence);
            self.note_manual(c);
            return None;
        }
        self.forget_manual_anchor();
        if let Some(kind) = kind {
            let sentence =
                self.sentence(kind, &c, &prev, gap, expected_gap, nearest.dev, nearest.binding, &config);
            self.push_deviation_of(kind, &c, sentence);
        }
        self.remember_comparison(gap, expected_gap, &nearest, matched);
        self.move_anchor(&c, &prev, &nearest, matched);
        self.last = Some(c);
        Some(nearest.abs)
    }

    fn push(&mut self, deviation: Deviation) {
        *self.counts.entry(deviation.kind).or_insert(0) += 1;
        self.deviations.push_back(deviation);
        if self.deviations.len() > DEVIATIONS_KEPT {
            self.deviations.pop_front();
        }
    }

    /// Deviations so far by kind (`explained` follows from the kind).
    pub fn deviation_counts(&self) -> &BTreeMap<DeviationKind, u64> {
        &self.counts
    }

    /// The most recent deviations, oldest first.
    pub fn deviations(&self) -> impl Iterator<Item = &Deviation> {
        self.deviations.iter()
    }

    /// The model's expectation of the next trigger and the rule that sets it.
    pub(crate) fn expected_next(&self) -> Option<(Timestamp, Binding)> {
        self.expected_next
    }

    /// Median gap between recent consecutive triggers as the model expected them, ms.
    pub(crate) fn expected_interval_ms(&self) -> Option<u64> {
        let gaps: Vec<u64> = self.recent.iter().filter_map(|c| c.expected_gap_ms).collect();
        (!gaps.is_empty()).then(|| median(gaps))
    }

    /// Median gap between recent consecutive observed triggers, ms.
    pub(crate) fn observed_interval_ms(&self) -> Option<u64> {
        let gaps: Vec<u64> = self.recent.iter().filter_map(|c| c.observed_gap_ms).collect();
        (!gaps.is_empty()).then(|| median(gaps))
    }

    /// How long the expected next trigger is overdue at the last poll (no checkpoint running).
    pub fn stalled_for_ms(&self) -> Option<u64> {
        self.stalled_for_ms
    }

    /// The rule that set most recent triggers.
    pub(crate) fn dominant_rule(&self) -> Option<Binding> {
        let bindings: Vec<Binding> = self.recent.iter().filter_map(|c| c.binding).collect();
        (!bindings.is_empty()).then(|| dominant_binding(&bindings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{CheckpointCounts, InProgressCheckpoint, JobKey};

    const INTERVAL: u64 = 3_000;
    /// Flink's REST answers what was true this long ago (1.17.2 and 1.13.6: 1.3–1.4 s).
    const REST_LAG: i64 = 1_400;
    const DURATION: i64 = 50;

    fn settings() -> CheckpointSettings {
        CheckpointSettings {
            exactly_once: true,
            interval_ms: Some(INTERVAL),
            timeout_ms: Some(60_000),
            min_pause_ms: 0,
            max_concurrent: 1,
            tolerable_failures: Some(0),
            unaligned: false,
            aligned_checkpoint_timeout_ms: None,
            state_backend: None,
            interval_during_backlog_ms: None,
        }
    }

    /// A job triggering every 3000 ± 1 ms from t = 10 s until `stop` (if any), polled at `at`
    /// through a REST answer that lags by [`REST_LAG`].
    fn poll_at(at: i64, stop: Option<i64>) -> JobPoll {
        poll_lagging(at, stop, &|_| REST_LAG)
    }

    /// [`poll_at`] with checkpoint `id` (and its completion) shown `lag(id)` ms late.
    fn poll_lagging(at: i64, stop: Option<i64>, lag: &dyn Fn(u64) -> i64) -> JobPoll {
        let triggers: Vec<(u64, i64)> = (1u64..)
            .map(|id| (id, 10_000 + (id as i64 - 1) * INTERVAL as i64 + (id as i64 % 3) - 1))
            .take_while(|(_, t)| *t <= at && stop.is_none_or(|s| *t < s))
            .filter(|&(id, t)| t + lag(id) <= at)
            .collect();
        let mut finished = Vec::new();
        let mut in_progress = Vec::new();
        for &(id, t) in &triggers {
            if t + DURATION + lag(id) <= at {
                finished.push(
                    FinishedCheckpoint::completed(id, Timestamp(t), DURATION as u64).acknowledged(1, 1),
                );
            } else {
                in_progress.push(InProgressCheckpoint {
                    id,
                    triggered_at: Timestamp(t),
                    num_subtasks: 1,
                    num_acknowledged: 0,
                });
            }
        }
        running_poll(at, settings(), finished, in_progress)
    }

    /// A poll of a running job at `at` that shows `finished` and `in_progress`.
    pub(super) fn running_poll(
        at: i64,
        settings: CheckpointSettings,
        finished: Vec<FinishedCheckpoint>,
        in_progress: Vec<InProgressCheckpoint>,
    ) -> JobPoll {
        JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "job".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(at),
            counts: CheckpointCounts {
                completed: finished.len() as u64,
                failed: 0,
                in_progress: in_progress.len() as u64,
                restored: 0,
            },
            settings: Some(settings),
            in_progress,
            finished,
            latest_restore: None,
            deferred: Default::default(),
        }
    }

    #[test]
    fn a_rest_answer_lagging_the_trigger_is_no_stall_at_any_poll_phase() {
        // Every phase of a 2 s poll against the 3 s schedule, 10 minutes each.
        for phase in (0..2_000).step_by(97) {
            let mut shadow = TriggerShadow::new();
            for k in 0..300 {
                let at = 12_000 + phase + k * 2_000;
                shadow.observe_poll(&poll_at(at, None));
                assert_eq!(shadow.stalled_for_ms(), None, "phase {phase}: a stall at {at} ms");
            }
            let lag = shadow.max_first_seen_lag_ms().unwrap();
            assert!((1_400..=3_400).contains(&lag), "phase {phase}: lag {lag}");
            assert!(shadow.deviations().next().is_none(), "{:?}", shadow.deviations().collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_first_checkpoint_shown_fresh_and_later_ones_from_flinks_cache_are_no_stall() {
        // A job's first checkpoint is shown at once (the first request finds the statistics
        // cache empty), the following ones 3.9 s after their trigger (a 3 s cache, and the
        // next poll). Polled every second; the job starts with the daemon watching.
        for phase in (0..1_000).step_by(50) {
            let mut shadow = TriggerShadow::new();
            let lag = |id: u64| if id == 1 { 200 } else { 3_900 };
            for k in 0..40 {
                let at = 9_000 + phase + k * 1_000;
                shadow.observe_poll(&poll_lagging(at, None, &lag));
                assert_eq!(shadow.stalled_for_ms(), None, "phase {phase}: a stall at {at} ms");
            }
            assert!(shadow.max_first_seen_lag_ms().unwrap() >= 3_900, "phase {phase}");
        }
    }

    #[test]
    fn short_first_lags_do_not_shrink_the_stall_tolerance_below_flinks_rest_cache() {
        // The first checkpoints happen to be shown 300 ms after their trigger (answered fresh:
        // the cache had just expired), later ones 3.9 s after (a 3 s cache, and a slow answer).
        // Polled every second. A tolerance built from the first three lags alone (1.5–2.5 s)
        // found the later checkpoints missing at two polls: a stall that was not.
        for phase in (0..1_000).step_by(50) {
            let mut shadow = TriggerShadow::new();
            let lag = |id: u64| if id <= 4 { 300 } else { 3_900 };
            for k in 0..40 {
                let at = 9_000 + phase + k * 1_000;
                shadow.observe_poll(&poll_lagging(at, None, &lag));
                assert_eq!(shadow.stalled_for_ms(), None, "phase {phase}: a stall at {at} ms");
            }
        }
    }

    #[test]
    fn a_trigger_a_few_hundred_milliseconds_late_is_the_jobmanagers_latency_and_no_deviation() {
        let late = |ms: i64| {
            let mut timeline = BLOCKED_1_20_5;
            timeline[18].1 += ms; // 19 is on the grid again, nothing queued
            replay(&timeline)
                .deviations()
                .filter(|d| !d.explained)
                .map(|d| (d.checkpoint_id, d.kind))
                .collect::<Vec<_>>()
        };
        // Past the trigger jitter (150 ms at a 3 s interval), within the JobManager's latency.
        assert_eq!(late(400), vec![]);
        assert_eq!(late(JOBMANAGER_LATENCY_MS as i64), vec![]);
        // Past it: a late trigger no rule explains.
        assert_eq!(late(JOBMANAGER_LATENCY_MS as i64 + 100), vec![(19, DeviationKind::LateTrigger)]);
    }

    /// A 2.3.0 job's start as a live e2e run's JobManager logged it (interval 2.5 s, on a
    /// 2-core machine with two busy loops beside it): the scheduler started again once every
    /// task ran and checkpoint 1 was triggered at once, 24 ms before the schedule's first tick;
    /// that tick queued behind checkpoint 1 (max-concurrent 1) and ran as checkpoint 2 when 1
    /// completed; checkpoint 3 is back on the 2.5 s grid. (id, trigger ms, duration ms)
    const START_2_3_0_QUEUED: [(u64, i64, u64); 8] = [
        (1, 1_796_322_588_227, 465),
        (2, 1_796_322_588_704, 124),
        (3, 1_796_322_590_751, 75),
        (4, 1_796_322_593_251, 64),
        (5, 1_796_322_595_751, 97),
        (6, 1_796_322_598_250, 71),
        (7, 1_796_322_600_751, 79),
        (8, 1_796_322_603_251, 95),
    ];

    #[test]
    fn a_2_3_start_whose_first_tick_queued_behind_checkpoint_1_is_neither_late_nor_a_stall() {
        let settings = CheckpointSettings { interval_ms: Some(2_500), ..settings() };
        let start = START_2_3_0_QUEUED[0].1 - 2_000;
        for phase in (0..1_000).step_by(50) {
            let mut shadow = TriggerShadow::new();
            shadow.set_flink_version(Some("2.3.0"));
            // Until 2 s after checkpoint 8's tick: the log ends there.
            for k in 0..19 {
                let at = start + phase + k * 1_000;
                let visible = START_2_3_0_QUEUED.iter().filter(|(_, t, _)| t + REST_LAG <= at);
                let (done, running): (Vec<_>, Vec<_>) =
                    visible.partition(|(_, t, d)| t + *d as i64 + REST_LAG <= at);
                let finished: Vec<_> = done
                    .iter()
                    .map(|(id, t, d)| {
                        FinishedCheckpoint::completed(*id, Timestamp(*t), *d).acknowledged(1, 1)
                    })
                    .collect();
                let in_progress: Vec<_> = running
                    .iter()
                    .map(|(id, t, _)| InProgressCheckpoint {
                        id: *id,
                        triggered_at: Timestamp(*t),
                        num_subtasks: 1,
                        num_acknowledged: 0,
                    })
                    .collect();
                shadow.observe_poll(&running_poll(at, settings.clone(), finished, in_progress));
                assert_eq!(shadow.stalled_for_ms(), None, "phase {phase}: a stall at poll {k}");
            }
            let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
            assert!(unexplained.is_empty(), "phase {phase}: {unexplained:?}");
            let queued =
                shadow.deviations().find(|d| d.checkpoint_id == 2).expect("checkpoint 2 is off the grid");
            assert_eq!(queued.kind, DeviationKind::LongCheckpoint, "{}", queued.sentence);
        }
    }

    #[test]
    fn a_real_stall_is_reported_from_the_second_overdue_poll_on_and_stays_until_triggers_resume() {
        let stop = 100_000; // no trigger from 100 s until 160 s
        let resume_at = 160_000;
        let mut shadow = TriggerShadow::new();
        let mut reported = Vec::new();
        for k in 0..100 {
            let at = 12_300 + k * 2_000;
            let poll = if at < resume_at + REST_LAG { poll_at(at, Some(stop)) } else { poll_at(at, None) };
            shadow.observe_poll(&poll);
            reported.push((at, shadow.stalled_for_ms()));
        }
        // The expected trigger is the first one at or after `stop` (id 31 at 100 s).
        let expected = 10_000 + 30 * INTERVAL as i64;
        let first = reported.iter().find(|(_, s)| s.is_some()).expect("the stall is reported");
        let tolerance = shadow.current_stall_tolerance_ms().unwrap() as i64;
        assert!(first.0 > expected + tolerance, "not before the tolerance: {first:?}, tolerance {tolerance}");
        assert!(first.0 <= expected + tolerance + 2 * 2_000, "within two polls past it: {first:?}");
        let age = first.1.unwrap();
        assert!(
            age.abs_diff((first.0 - expected) as u64) <= 2,
            "measured from the expected trigger: {first:?}"
        );
        // Reported at every poll until the job triggers again: no flapping.
        let until_resume: Vec<_> =
            reported.iter().filter(|(at, _)| *at >= first.0 && *at < resume_at + REST_LAG).collect();
        assert!(until_resume.iter().all(|(_, s)| s.is_some()), "{until_resume:?}");
        assert!(reported.last().unwrap().1.is_none(), "ends once checkpoints are seen again");
    }

    /// Flink 1.20.5 `blocked` as captured (interval 3 s, timeout 10 s, max-concurrent 1): a
    /// map's task thread sleeps 40 s from checkpoint 4 on. 4, 5 and 6 expire and the request
    /// queued meanwhile starts at each expiry; 7 completes after 8.6 s and the ten requests
    /// queued while 4–7 were pending run back to back (8–17); 18 is on the grid again.
    /// (id, trigger ms, end-to-end ms, expired)
    const BLOCKED_1_20_5: [(u64, i64, u64, bool); 19] = [
        (1, 29_333, 1_274, false),
        (2, 32_332, 65, false),
        (3, 35_332, 53, false),
        (4, 38_332, 10_006, true),
        (5, 48_343, 10_013, true),
        (6, 58_358, 10_009, true),
        (7, 68_370, 8_583, false),
        (8, 77_157, 399, false),
        (9, 77_606, 371, false),
        (10, 78_119, 226, false),
        (11, 78_372, 269, false),
        (12, 78_677, 82, false),
        (13, 78_768, 251, false),
        (14, 79_121, 265, false),
        (15, 79_467, 171, false),
        (16, 79_668, 205, false),
        (17, 80_085, 281, false),
        (18, 80_401, 229, false),
        (19, 83_332, 49, false),
    ];

    /// One poll per checkpoint of `timeline`, each right after it ended, with a 10 s timeout.
    fn replay(timeline: &[(u64, i64, u64, bool)]) -> TriggerShadow {
        let mut shadow = TriggerShadow::new();
        let settings =
            CheckpointSettings { timeout_ms: Some(10_000), tolerable_failures: Some(1_000), ..settings() };
        let mut finished = Vec::new();
        for &(id, at, duration, expired) in timeline {
            let cp = FinishedCheckpoint::completed(id, Timestamp(at), duration);
            finished.push(if expired { cp.failed("Checkpoint expired before completing.") } else { cp });
            let polled_at = Timestamp(at + duration as i64 + 10);
            let (failed, completed) =
                finished.iter().partition::<Vec<_>, _>(|c| c.status == CheckpointStatus::Failed);
            shadow.observe_poll(&JobPoll {
                key: JobKey { cluster: "c".into(), job_id: "j".into() },
                job_name: "job".into(),
                job_state: "RUNNING".into(),
                polled_at,
                counts: CheckpointCounts {
                    completed: completed.len() as u64,
                    failed: failed.len() as u64,
                    in_progress: 0,
                    restored: 0,
                },
                settings: Some(settings.clone()),
                in_progress: Vec::new(),
                finished: finished.clone(),
                latest_restore: None,
                deferred: Default::default(),
            });
        }
        shadow
    }

    #[test]
    fn triggers_queued_behind_expiring_and_blocked_checkpoints_are_explained() {
        let shadow = replay(&BLOCKED_1_20_5);
        let unexplained: Vec<_> = shadow.deviations().filter(|d| !d.explained).collect();
        assert!(unexplained.is_empty(), "{unexplained:#?}");
        let kinds: Vec<(u64, DeviationKind)> =
            shadow.deviations().map(|d| (d.checkpoint_id, d.kind)).collect();
        // 5, 6 and 7 start at the expiry of the one before; 8 when 7 completes; 9–17 drain the queue.
        for id in [5, 6, 7] {
            assert!(kinds.contains(&(id, DeviationKind::Timeout)), "{id}: {kinds:?}");
        }
        for id in 8..=17 {
            assert!(kinds.contains(&(id, DeviationKind::LongCheckpoint)), "{id}: {kinds:?}");
        }
        let headline = shadow.headline().unwrap();
        assert!(headline.contains("queued while a checkpoint was pending"), "{headline}");
    }

    #[test]
    fn a_late_trigger_after_the_queue_drained_is_still_unexplained() {
        let mut timeline = BLOCKED_1_20_5;
        timeline[18].1 += 1_200; // 19 comes 1.2 s after its tick, nothing queued
        let shadow = replay(&timeline);
        let unexplained: Vec<_> =
            shadow.deviations().filter(|d| !d.explained).map(|d| (d.checkpoint_id, d.kind)).collect();
        assert_eq!(unexplained, vec![(19, DeviationKind::LateTrigger)]);
    }

    /// The adaptive scheduler's rescale as Flink 2.3.0 did it live (interval 2 s): the rescale
    /// waited for checkpoint 7, the job restored it 190 ms later, and the new execution's
    /// scheduler triggered checkpoint 8 479 ms after checkpoint 7, then every 2 s from there.
    fn rescaled_run(note: bool) -> TriggerShadow {
        let at =
            |k: u64| if k <= 7 { 10_000 + (k as i64 - 1) * 2_000 } else { 22_479 + (k as i64 - 8) * 2_000 };
        let cps = |n: u64| {
            (1..=n)
                .map(|k| FinishedCheckpoint::completed(k, Timestamp(at(k)), 50).acknowledged(2, 2))
                .collect()
        };
        let st = CheckpointSettings { interval_ms: Some(2_000), ..settings() };
        let mut shadow = TriggerShadow::new();
        shadow.observe_poll(&running_poll(21_000, st.clone(), cps(6), vec![]));
        if note {
            shadow.note_rescale(&crate::observe::Rescale {
                id: Some("60f4#1".into()),
                source: crate::observe::RescaleSource::RescaleHistory,
                started_at: Some(Timestamp(21_037)),
                restarted_at: Some(Timestamp(22_073)),
                at: Timestamp(22_281),
                cause: Some("UPDATE_REQUIREMENT".into()),
                outcome: Some("COMPLETED".into()),
                vertices: vec![crate::observe::VertexRescale {
                    vertex: "stateful-map".into(),
                    before: Some(2),
                    after: Some(1),
                }],
            });
        }
        let mut poll = running_poll(29_000, st, cps(11), vec![]);
        poll.counts.restored = 1;
        poll.latest_restore = Some((Some(7), Timestamp(22_250)));
        shadow.observe_poll(&poll);
        shadow
    }

    #[test]
    fn the_first_checkpoint_after_a_rescale_is_put_down_to_the_rescale() {
        let shadow = rescaled_run(true);
        let devs: Vec<&Deviation> = shadow.deviations().collect();
        assert_eq!(devs.len(), 1, "{devs:?}");
        assert_eq!(
            (devs[0].checkpoint_id, devs[0].kind, devs[0].explained),
            (8, DeviationKind::Rescale, true)
        );
        assert!(
            devs[0].sentence.contains("rescaled in between (stateful-map 2 → 1) after checkpoint 7"),
            "{}",
            devs[0].sentence
        );
        // Without the rescale the same restart is a plain one: the rescale is what names it.
        let plain = rescaled_run(false);
        assert_eq!(plain.deviations().map(|d| d.kind).collect::<Vec<_>>(), vec![DeviationKind::JobRestart]);
    }
}
