//! Reference model of Flink's `CheckpointCoordinator`: when checkpoints trigger, and why.
//!
//! Rules, each from Flink's source (`CheckpointCoordinator`, `CheckpointRequestDecider`,
//! `CheckpointFailureManager`; see `shared/research/mission-anchors.md` §4):
//!
//! 1. The periodic trigger runs at a **fixed rate** with period `max(interval, minPause)` after
//!    a random initial delay in `[minPause, period]` (`getRandomInitDelay`).
//! 2. Each tick enqueues a periodic request (at most 1000 queued). The decider runs nothing while
//!    `pending >= maxConcurrent`; otherwise, if the head is periodic and the last completion is
//!    less than `minPause` ago, the request **fails** with `MINIMUM_TIME_BETWEEN_CHECKPOINTS`
//!    and the timer is **rescheduled**: a new fixed-rate schedule starting after the remaining
//!    pause (`rescheduleTrigger`).
//! 3. After every completion or abort the queue is re-evaluated at once, so a queued request
//!    starts the moment a slot frees up.
//! 4. Every pending checkpoint expires `timeout` after it was triggered (`CheckpointCanceller`).
//! 5. A completion subsumes every older pending checkpoint (`CHECKPOINT_SUBSUMED`).
//! 6. Only some failure reasons count toward `tolerable-failed-checkpoints`, each id once, and
//!    only ids above the last success; a success with a higher id resets the count; the job
//!    fails when the count is **strictly greater** than the tolerable number.
//!
//! The output is a timeline of [`PredictedCheckpoint`]s (with the constraint that set each
//! trigger time) and, through [`Coordinator::job_poll`], the same [`JobPoll`] the REST poller
//! produces, so the whole pipeline can run on simulated jobs.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use crate::model::rng::SplitMix64;
use crate::observe::{
    CheckpointCounts, CheckpointSettings, CheckpointStatus, FailureReason, FinishedCheckpoint,
    InProgressCheckpoint, JobKey, JobPoll, OperatorCheckpoint, SnapshotKind,
};
use crate::time::Timestamp;

/// `CheckpointRequestDecider.DEFAULT_MAX_QUEUED_REQUESTS`.
pub(crate) const MAX_QUEUED_REQUESTS: usize = 1000;
/// Flink caps the minimum pause at one year to avoid overflows.
pub(crate) const MAX_MIN_PAUSE_MS: u64 = 365 * 24 * 60 * 60 * 1000;
/// `UNLIMITED_TOLERABLE_FAILURE_NUMBER` (`Integer.MAX_VALUE`): failures are never counted.
pub(crate) const UNLIMITED_TOLERABLE: u32 = i32::MAX as u32;
/// `web.checkpoints.history` default: how many finished checkpoints `/checkpoints` lists.
pub(crate) const REST_HISTORY: usize = 10;

/// What the model needs to know about a job's checkpointing, durations in ms.
#[derive(Clone, Debug, PartialEq)]
pub struct CoordinatorConfig {
    /// The configured interval (Flink 2.x's REST reports `max(interval, minPause)` instead).
    pub interval_ms: u64,
    /// Minimum pause between the completion of one checkpoint and the next trigger.
    pub min_pause_ms: u64,
    /// Maximum concurrent checkpoints (at least 1).
    pub max_concurrent: u32,
    /// Checkpoint timeout.
    pub timeout_ms: u64,
    /// Tolerable consecutive counted failures; [`UNLIMITED_TOLERABLE`] for no limit.
    pub tolerable_failures: u32,
    /// Whether `FINALIZE_CHECKPOINT_FAILURE` counts (newest Flink; not 1.14/1.15).
    pub finalize_failure_counts: bool,
    /// Time between the last acknowledgement and the coordinator's completion (metadata
    /// write); `minPause` is measured from the latter.
    pub finalize_ms: u64,
    /// Delay before a job that failed (tolerable failures exceeded) runs again; `None` leaves
    /// it FAILED.
    pub restart_delay_ms: Option<u64>,
    /// Subtasks that acknowledge each checkpoint (reported as `num_subtasks`).
    pub num_subtasks: u32,
    /// How many predicted checkpoints to keep (oldest dropped first); bounds memory of
    /// long-running simulations.
    pub keep_checkpoints: usize,
}

impl Default for CoordinatorConfig {
    /// Flink's defaults, with a 60 s interval (Flink has no default interval).
    fn default() -> Self {
        CoordinatorConfig {
            interval_ms: 60_000,
            min_pause_ms: 0,
            max_concurrent: 1,
            timeout_ms: 600_000,
            tolerable_failures: 0,
            finalize_failure_counts: true,
            finalize_ms: 0,
            restart_delay_ms: None,
            num_subtasks: 1,
            keep_checkpoints: usize::MAX,
        }
    }
}

impl CoordinatorConfig {
    /// The model's config from what `/checkpoints/config` says; `None` when periodic
    /// checkpointing is off.
    pub fn from_settings(settings: &CheckpointSettings) -> Option<Self> {
        let defaults = CoordinatorConfig::default();
        Some(CoordinatorConfig {
            interval_ms: settings.interval_ms?,
            min_pause_ms: settings.min_pause_ms,
            max_concurrent: settings.max_concurrent.max(1),
            timeout_ms: settings.timeout_ms.unwrap_or(defaults.timeout_ms),
            tolerable_failures: settings.tolerable_failures.unwrap_or(0),
            ..defaults
        })
    }

    /// `minPause`, capped like Flink does.
    pub(crate) fn min_pause(&self) -> u64 {
        self.min_pause_ms.min(MAX_MIN_PAUSE_MS)
    }

    /// `baseInterval = max(interval, minPause)`: the period of the fixed-rate trigger.
    pub(crate) fn base_interval(&self) -> u64 {
        self.interval_ms.max(self.min_pause()).max(1)
    }
}

/// What happens to a checkpoint once triggered: the model's input per checkpoint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Every subtask acknowledges `duration_ms` after the trigger (expires instead if that is
    /// not before the timeout).
    Complete {
        /// Trigger to last acknowledgement.
        duration_ms: u64,
    },
    /// Aborted `after_ms` after the trigger (a decline, an async failure …).
    Fail {
        /// Trigger to abort.
        after_ms: u64,
        /// Why.
        reason: FailureReason,
    },
    /// Never acknowledged by every subtask: the timeout canceller expires it.
    Hang,
}

/// Supplies the outcome of each checkpoint as it is triggered.
pub trait Outcomes {
    /// The outcome of checkpoint `id`, triggered at `triggered_at`.
    fn outcome(&mut self, id: u64, triggered_at: Timestamp) -> Outcome;
}

impl<F: FnMut(u64, Timestamp) -> Outcome> Outcomes for F {
    fn outcome(&mut self, id: u64, triggered_at: Timestamp) -> Outcome {
        self(id, triggered_at)
    }
}

/// The constraint that set a checkpoint's trigger time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Binding {
    /// The first trigger after the (random or pinned) initial delay.
    Initial,
    /// A tick of the fixed-rate schedule whose period is the configured interval.
    Interval,
    /// The minimum pause: a tick of a schedule restarted by `rescheduleTrigger`, or of the
    /// original schedule when `minPause > interval` made it the period.
    MinPause,
    /// The request waited in the queue until a concurrent checkpoint completed or failed.
    MaxConcurrent,
    /// The request waited in the queue until a checkpoint expired.
    Timeout,
}

impl Binding {
    /// The name used in JSON and text output.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Initial => "initial",
            Binding::Interval => "interval",
            Binding::MinPause => "min_pause",
            Binding::MaxConcurrent => "max_concurrent",
            Binding::Timeout => "timeout",
        }
    }
}

/// How the periodic trigger starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Random initial delay in `[minPause, baseInterval]`, drawn from this seed.
    Seeded(u64),
    /// The first tick at this time (replay: the first observed trigger).
    FirstTriggerAt(Timestamp),
}

/// How a finished checkpoint ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum End {
    /// Completed by the coordinator at this time (last ack + finalization).
    Completed(Timestamp),
    /// Aborted at this time for this reason.
    Failed(Timestamp, FailureReason),
}

/// One checkpoint as the model predicts it.
#[derive(Clone, Debug, PartialEq)]
pub struct PredictedCheckpoint {
    /// The id the coordinator gave it.
    pub(crate) id: u64,
    /// When it was triggered.
    pub(crate) triggered_at: Timestamp,
    /// When the periodic request that led to it was made (earlier when it waited in the queue).
    pub(crate) requested_at: Timestamp,
    /// What set the trigger time.
    pub(crate) binding: Binding,
    /// Its outcome as supplied.
    pub(crate) outcome: Outcome,
    /// How it ended; `None` while pending.
    pub(crate) end: Option<End>,
    /// Per-operator details to report with it (filled by whoever supplies the outcome, e.g.
    /// the alignment model).
    pub operators: Vec<OperatorCheckpoint>,
}

impl PredictedCheckpoint {
    /// When it ended, if it did.
    pub(crate) fn finished_at(&self) -> Option<Timestamp> {
        match self.end? {
            End::Completed(t) | End::Failed(t, _) => Some(t),
        }
    }

    /// As the poller reports it, `None` while pending. Durations follow Flink: a completed
    /// checkpoint's `end_to_end_duration` is last ack − trigger; a failed one's is failure −
    /// trigger.
    pub fn to_finished(&self, num_subtasks: u32) -> Option<FinishedCheckpoint> {
        let end = self.end?;
        let (status, finished_at, failure) = match end {
            End::Completed(t) => (CheckpointStatus::Completed, t, None),
            End::Failed(t, reason) => (CheckpointStatus::Failed, t, Some(reason)),
        };
        let last_ack = match (end, self.outcome) {
            (End::Completed(_), Outcome::Complete { duration_ms }) => {
                self.triggered_at.plus_millis(duration_ms as i64)
            }
            _ => finished_at,
        };
        Some(FinishedCheckpoint {
            id: self.id,
            status,
            kind: SnapshotKind::Checkpoint,
            triggered_at: self.triggered_at,
            finished_at: last_ack,
            end_to_end_ms: Some(last_ack.since(self.triggered_at)),
            checkpointed_bytes: None,
            full_state_bytes: None,
            processed_bytes: None,
            persisted_bytes: None,
            num_subtasks,
            num_acknowledged: if status == CheckpointStatus::Completed { num_subtasks } else { 0 },
            failure_message: failure.map(|r| r.message().to_string()),
            operators: self.operators.clone(),
            external_path: None,
        })
    }
}

/// Something the coordinator did, in order: what its log would say.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// `Triggering checkpoint {id} (type=CHECKPOINT) @ {at} for job {job}.`
    Triggered {
        /// When.
        at: Timestamp,
        /// Checkpoint id.
        id: u64,
    },
    /// `Completed checkpoint {id} for job {job} (… checkpointDuration={duration_ms} ms …).`
    Completed {
        /// When the coordinator completed it.
        at: Timestamp,
        /// Checkpoint id.
        id: u64,
        /// Trigger to last ack.
        duration_ms: u64,
    },
    /// A pending checkpoint was aborted (`Checkpoint {id} of job {job} expired before
    /// completing.` for expiry) and reported to the failure manager (`Failed to trigger or
    /// complete checkpoint {id} for job {job}. ({n} consecutive failed attempts so far)`).
    Failed {
        /// When.
        at: Timestamp,
        /// Checkpoint id.
        id: u64,
        /// Why.
        reason: FailureReason,
        /// The consecutive-failure count before this failure (as Flink logs it).
        consecutive_before: u32,
    },
    /// A periodic request was dropped before it got an id (min-pause, queue full); Flink does
    /// not count or log these at INFO.
    RequestDropped {
        /// When.
        at: Timestamp,
        /// Why.
        reason: FailureReason,
    },
    /// `Exceeded checkpoint tolerable failure threshold.`: the job fails over.
    JobFailed {
        /// When.
        at: Timestamp,
        /// The failure that exceeded the threshold.
        reason: FailureReason,
    },
    /// The job runs again and the checkpoint scheduler restarts.
    JobRestarted {
        /// When.
        at: Timestamp,
        /// The checkpoint restored from (the latest completed), if any.
        restored_from: Option<u64>,
    },
}

/// The job's state as the model's coordinator sees it: the three of Flink's job statuses a
/// simulated job passes through, with when a restarting one runs again (model-only; what a poll
/// of Flink would report is [`CoordinatorStatus::observed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CoordinatorStatus {
    /// Running; checkpoints are scheduled.
    Running,
    /// Failed over; runs again at the given time.
    Restarting(Timestamp),
    /// Failed for good.
    Failed,
}

impl CoordinatorStatus {
    /// The same status in the observation vocabulary (what a poll of Flink would report).
    pub(crate) fn observed(self) -> crate::observe::JobStatus {
        match self {
            CoordinatorStatus::Running => crate::observe::JobStatus::Running,
            CoordinatorStatus::Restarting(_) => crate::observe::JobStatus::Restarting,
            CoordinatorStatus::Failed => crate::observe::JobStatus::Failed,
        }
    }
}

/// `CheckpointFailureManager`'s counter.
#[derive(Clone, Debug)]
struct FailureCounter {
    tolerable: u32,
    finalize_counts: bool,
    continuous: u32,
    counted: BTreeSet<u64>,
    last_succeeded: Option<u64>,
}

impl FailureCounter {
    /// Counts a failure of checkpoint `id` (`None`: failed before it got an id); returns
    /// whether the job must fail.
    fn on_failure(&mut self, id: Option<u64>, reason: FailureReason) -> bool {
        let newer = match (id, self.last_succeeded) {
            (None, _) | (Some(_), None) => true,
            (Some(id), Some(last)) => id > last,
        };
        if !newer || self.tolerable == UNLIMITED_TOLERABLE {
            return false;
        }
        if reason.counts_toward_tolerable(self.finalize_counts) && id.is_none_or(|id| self.counted.insert(id))
        {
            self.continuous += 1;
        }
        if self.continuous > self.tolerable {
            self.clear();
            return true;
        }
        false
    }

    fn on_success(&mut self, id: u64) {
        if self.last_succeeded.is_none_or(|last| id > last) {
            self.last_succeeded = Some(id);
            self.clear();
        }
    }

    fn clear(&mut self) {
        self.continuous = 0;
        self.counted.clear();
    }
}

/// A queued periodic request.
#[derive(Clone, Copy, Debug)]
struct Request {
    at: Timestamp,
    /// What the trigger time would be attributed to if it ran at once.
    binding: Binding,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    /// Last ack (or abort) of a pending checkpoint, per its outcome.
    End(u64),
    /// The coordinator finalises a completed checkpoint.
    Finalized(u64),
    /// The canceller fires.
    Expire(u64),
    /// The job runs again.
    Restart,
}

/// The coordinator of one job: feed it time, it produces the checkpoint timeline.
#[derive(Clone, Debug)]
pub struct Coordinator {
    config: CoordinatorConfig,
    rng: SplitMix64,
    now: Timestamp,
    status: CoordinatorStatus,
    /// Next tick of the periodic trigger; `None` while the scheduler is stopped.
    next_tick: Option<Timestamp>,
    /// What a tick of the current schedule is attributed to.
    tick_binding: Binding,
    queue: VecDeque<Request>,
    /// Pending checkpoint ids (acknowledged-but-not-finalised ones included).
    pending: BTreeSet<u64>,
    /// Future timer events, earliest first.
    timers: BinaryHeap<Reverse<(Timestamp, Timer, u64)>>,
    timer_seq: u64,
    last_completion: Option<Timestamp>,
    next_id: u64,
    failures: FailureCounter,
    checkpoints: VecDeque<PredictedCheckpoint>,
    events: Vec<Event>,
    /// Job status changes, for polls of the past.
    status_changes: Vec<(Timestamp, CoordinatorStatus)>,
    counts: CheckpointCounts,
    /// Counts of checkpoints no longer kept in `checkpoints`.
    dropped: CheckpointCounts,
    latest_restore: Option<(Option<u64>, Timestamp)>,
    last_completed_id: Option<u64>,
}

impl Coordinator {
    /// A coordinator whose job starts running at `start`.
    pub fn new(config: CoordinatorConfig, start: Timestamp, schedule: Schedule) -> Self {
        let seed = match schedule {
            Schedule::Seeded(seed) => seed,
            Schedule::FirstTriggerAt(_) => 0,
        };
        let failures = FailureCounter {
            tolerable: config.tolerable_failures,
            finalize_counts: config.finalize_failure_counts,
            continuous: 0,
            counted: BTreeSet::new(),
            last_succeeded: None,
        };
        let mut c = Coordinator {
            config,
            rng: SplitMix64::new(seed),
            now: start,
            status: CoordinatorStatus::Running,
            next_tick: None,
            tick_binding: Binding::Initial,
            queue: VecDeque::new(),
            pending: BTreeSet::new(),
            timers: BinaryHeap::new(),
            timer_seq: 0,
            last_completion: None,
            next_id: 1,
            failures,
            checkpoints: VecDeque::new(),
            events: Vec::new(),
            status_changes: vec![(start, CoordinatorStatus::Running)],
            counts: CheckpointCounts::default(),
            dropped: CheckpointCounts::default(),
            latest_restore: None,
            last_completed_id: None,
        };
        match schedule {
            Schedule::Seeded(_) => c.start_scheduler(),
            Schedule::FirstTriggerAt(t) => {
                c.next_tick = Some(t.max(start));
                c.tick_binding = Binding::Initial;
            }
        }
        c
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &CoordinatorConfig {
        &self.config
    }

    /// The model's current time.
    pub(crate) fn now(&self) -> Timestamp {
        self.now
    }

    /// The job's state now.
    pub(crate) fn status(&self) -> CoordinatorStatus {
        self.status
    }

    /// When the job last entered each state (`RUNNING`, `RESTARTING`, `FAILED`), as Flink's
    /// `/jobs/:id` `timestamps` says it.
    pub(crate) fn last_entered(&self) -> std::collections::BTreeMap<String, i64> {
        self.status_changes.iter().map(|(at, s)| (s.observed().as_str().to_string(), at.0)).collect()
    }

    /// Every checkpoint so far (the oldest may have been dropped, see
    /// [`CoordinatorConfig::keep_checkpoints`]).
    pub(crate) fn checkpoints(&self) -> impl Iterator<Item = &PredictedCheckpoint> {
        self.checkpoints.iter()
    }

    /// The checkpoint with `id`, if still kept.
    pub fn checkpoint(&self, id: u64) -> Option<&PredictedCheckpoint> {
        let first = self.checkpoints.front()?.id;
        self.checkpoints.get(id.checked_sub(first)? as usize).filter(|c| c.id == id)
    }

    /// Mutable access, e.g. to attach operator details once they are known.
    pub fn checkpoint_mut(&mut self, id: u64) -> Option<&mut PredictedCheckpoint> {
        let first = self.checkpoints.front()?.id;
        self.checkpoints.get_mut(id.checked_sub(first)? as usize).filter(|c| c.id == id)
    }

    /// Takes the events recorded since the last call.
    pub fn drain_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Flink's cumulative counts now.
    pub fn counts(&self) -> CheckpointCounts {
        CheckpointCounts { in_progress: self.pending.len() as u64, ..self.counts }
    }

    /// The time of the next thing that will happen, if anything will.
    pub(crate) fn next_event_at(&self) -> Option<Timestamp> {
        let timer = self.timers.peek().map(|Reverse((t, _, _))| *t);
        match (timer, self.next_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Processes the next event; returns its time, or `None` when nothing is scheduled.
    pub(crate) fn step(&mut self, outcomes: &mut dyn Outcomes) -> Option<Timestamp> {
        let timer_at = self.timers.peek().map(|Reverse((t, _, _))| *t);
        // Completions and aborts at the same millisecond run before a tick: the timer thread
        // runs the abort/complete callback's queued request first in practice, and either order
        // gives the same schedule except at exact ties.
        let take_timer = match (timer_at, self.next_tick) {
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if take_timer {
            let Reverse((at, timer, _)) = self.timers.pop().expect("peeked");
            self.now = self.now.max(at);
            match timer {
                Timer::End(id) => self.on_end(id, outcomes),
                Timer::Finalized(id) => self.on_finalized(id, outcomes),
                Timer::Expire(id) => self.on_expire(id, outcomes),
                Timer::Restart => self.on_restart(),
            }
        } else {
            let at = self.next_tick.expect("checked");
            self.now = self.now.max(at);
            self.on_tick(outcomes);
        }
        Some(self.now)
    }

    /// Processes every event up to and including `until`, then sets the clock to `until`.
    pub fn run_until(&mut self, until: Timestamp, outcomes: &mut dyn Outcomes) {
        while self.next_event_at().is_some_and(|t| t <= until) {
            self.step(outcomes);
        }
        self.now = self.now.max(until);
    }

    /// Runs until `n` checkpoints have ended (or nothing is left to happen).
    pub(crate) fn run_checkpoints(&mut self, n: usize, outcomes: &mut dyn Outcomes) {
        while self.checkpoints.iter().filter(|c| c.end.is_some()).count() < n {
            if self.step(outcomes).is_none() {
                break;
            }
        }
    }

    fn schedule(&mut self, at: Timestamp, timer: Timer) {
        self.timer_seq += 1;
        self.timers.push(Reverse((at, timer, self.timer_seq)));
    }

    /// `startCheckpointScheduler`: a fixed-rate schedule after a random initial delay.
    fn start_scheduler(&mut self) {
        let delay = self.rng.between(self.config.min_pause(), self.config.base_interval());
        self.next_tick = Some(self.now.plus_millis(delay as i64));
        self.tick_binding = Binding::Initial;
    }

    /// What a tick of a regular (not rescheduled) schedule is attributed to.
    fn period_binding(&self) -> Binding {
        if self.config.min_pause() > self.config.interval_ms { Binding::MinPause } else { Binding::Interval }
    }

    fn on_tick(&mut self, outcomes: &mut dyn Outcomes) {
        let binding = self.tick_binding;
        // Fixed rate: the next tick is on the grid, whatever happens to this request.
        self.next_tick = Some(self.now.plus_millis(self.config.base_interval() as i64));
        // Only the first tick of a schedule is special (initial delay, or the end of a pause).
        self.tick_binding = self.period_binding();
        self.queue.push_back(Request { at: self.now, binding });
        if self.queue.len() > MAX_QUEUED_REQUESTS {
            // `pollLast()` of the queue: with only periodic requests, the newest is dropped.
            self.queue.pop_back();
            self.events.push(Event::RequestDropped {
                at: self.now,
                reason: FailureReason::TooManyCheckpointRequests,
            });
        }
        self.choose_and_trigger(None, outcomes);
    }

    /// `CheckpointRequestDecider.chooseRequestToExecute`; `freed_by` says what just freed a
    /// slot (for attributing the trigger time of a request that waited).
    fn choose_and_trigger(&mut self, freed_by: Option<Binding>, outcomes: &mut dyn Outcomes) {
        if self.status != CoordinatorStatus::Running {
            return;
        }
        let Some(head) = self.queue.front().copied() else { return };
        if self.pending.len() >= self.config.max_concurrent as usize {
            return; // only a forced request could run now, and periodic ones are not forced
        }
        if let Some(last) = self.last_completion {
            let ready_at = last.plus_millis(self.config.min_pause() as i64);
            if ready_at > self.now {
                self.queue.pop_front();
                self.events.push(Event::RequestDropped {
                    at: self.now,
                    reason: FailureReason::MinimumTimeBetweenCheckpoints,
                });
                // rescheduleTrigger: cancel the periodic trigger, start a new fixed-rate one
                // whose first tick is when the pause is over.
                self.next_tick = Some(ready_at);
                self.tick_binding = Binding::MinPause;
                return;
            }
        }
        self.queue.pop_front();
        let waited = head.at < self.now;
        let binding = match (waited, freed_by) {
            (true, Some(b)) => b,
            _ => head.binding,
        };
        self.trigger(head.at, binding, outcomes);
    }

    fn trigger(&mut self, requested_at: Timestamp, binding: Binding, outcomes: &mut dyn Outcomes) {
        let id = self.next_id;
        self.next_id += 1;
        let at = self.now;
        let outcome = outcomes.outcome(id, at);
        self.pending.insert(id);
        self.events.push(Event::Triggered { at, id });
        self.schedule(at.plus_millis(self.config.timeout_ms as i64), Timer::Expire(id));
        match outcome {
            Outcome::Complete { duration_ms } if duration_ms < self.config.timeout_ms => {
                self.schedule(at.plus_millis(duration_ms as i64), Timer::End(id));
            }
            Outcome::Fail { after_ms, .. } if after_ms < self.config.timeout_ms => {
                self.schedule(at.plus_millis(after_ms as i64), Timer::End(id));
            }
            _ => {} // the canceller will expire it
        }
        self.checkpoints.push_back(PredictedCheckpoint {
            id,
            triggered_at: at,
            requested_at,
            binding,
            outcome,
            end: None,
            operators: Vec::new(),
        });
        while self.checkpoints.len() > self.config.keep_checkpoints {
            match self.checkpoints.pop_front().and_then(|c| c.end) {
                Some(End::Completed(_)) => self.dropped.completed += 1,
                Some(End::Failed(..)) => self.dropped.failed += 1,
                None => {}
            }
        }
    }

    fn on_end(&mut self, id: u64, outcomes: &mut dyn Outcomes) {
        if !self.pending.contains(&id) {
            return; // already expired or subsumed
        }
        let outcome = self.checkpoint(id).map(|c| c.outcome);
        match outcome {
            Some(Outcome::Complete { .. }) => {
                let at = self.now.plus_millis(self.config.finalize_ms as i64);
                self.schedule(at, Timer::Finalized(id));
            }
            Some(Outcome::Fail { reason, .. }) => self.abort(id, reason, None, outcomes),
            _ => {}
        }
    }

    fn on_finalized(&mut self, id: u64, outcomes: &mut dyn Outcomes) {
        if !self.pending.remove(&id) {
            return;
        }
        let now = self.now;
        let duration_ms = match self.checkpoint(id).map(|c| c.outcome) {
            Some(Outcome::Complete { duration_ms }) => duration_ms,
            _ => 0,
        };
        if let Some(c) = self.checkpoint_mut(id) {
            c.end = Some(End::Completed(now));
        }
        self.counts.completed += 1;
        self.last_completed_id = Some(id);
        self.failures.on_success(id);
        self.events.push(Event::Completed { at: now, id, duration_ms });
        // dropSubsumedCheckpoints: older pending checkpoints are aborted, not counted.
        let older: Vec<u64> = self.pending.range(..id).copied().collect();
        for old in older {
            self.abort(old, FailureReason::CheckpointSubsumed, Some(Binding::MaxConcurrent), outcomes);
        }
        self.last_completion = Some(now);
        self.choose_and_trigger(Some(Binding::MaxConcurrent), outcomes);
    }

    fn on_expire(&mut self, id: u64, outcomes: &mut dyn Outcomes) {
        if self.pending.contains(&id) {
            self.abort(id, FailureReason::CheckpointExpired, None, outcomes);
        }
    }

    /// `abortPendingCheckpoint` + `CheckpointFailureManager.handleCheckpointException`, then
    /// `scheduleTriggerRequest` (unless the caller re-evaluates itself).
    fn abort(
        &mut self,
        id: u64,
        reason: FailureReason,
        caller_reevaluates: Option<Binding>,
        outcomes: &mut dyn Outcomes,
    ) {
        if !self.pending.remove(&id) {
            return;
        }
        let now = self.now;
        if let Some(c) = self.checkpoint_mut(id) {
            c.end = Some(End::Failed(now, reason));
        }
        self.counts.failed += 1;
        let consecutive_before = self.failures.continuous;
        self.events.push(Event::Failed { at: now, id, reason, consecutive_before });
        if self.failures.on_failure(Some(id), reason) {
            self.fail_job(reason, outcomes);
            return;
        }
        if caller_reevaluates.is_none() {
            let freed_by = if reason == FailureReason::CheckpointExpired {
                Binding::Timeout
            } else {
                Binding::MaxConcurrent
            };
            self.choose_and_trigger(Some(freed_by), outcomes);
        }
    }

    /// The job fails over: the scheduler stops, pending and queued checkpoints are aborted
    /// (`CHECKPOINT_COORDINATOR_SUSPEND`, never counted), and it restarts after the delay.
    fn fail_job(&mut self, reason: FailureReason, outcomes: &mut dyn Outcomes) {
        let now = self.now;
        self.events.push(Event::JobFailed { at: now, reason });
        self.status = match self.config.restart_delay_ms {
            Some(delay) => CoordinatorStatus::Restarting(now.plus_millis(delay as i64)),
            None => CoordinatorStatus::Failed,
        };
        self.status_changes.push((now, self.status));
        self.next_tick = None;
        self.queue.clear();
        let pending: Vec<u64> = self.pending.iter().copied().collect();
        for id in pending {
            self.abort(
                id,
                FailureReason::CheckpointCoordinatorSuspend,
                Some(Binding::MaxConcurrent),
                outcomes,
            );
        }
        if let CoordinatorStatus::Restarting(at) = self.status {
            self.schedule(at, Timer::Restart);
        }
    }

    fn on_restart(&mut self) {
        let now = self.now;
        self.status = CoordinatorStatus::Running;
        self.status_changes.push((now, CoordinatorStatus::Running));
        if let Some(id) = self.last_completed_id {
            self.counts.restored += 1;
            self.latest_restore = Some((Some(id), now));
        }
        self.events.push(Event::JobRestarted { at: now, restored_from: self.last_completed_id });
        self.start_scheduler();
    }

    /// The job's state at `at` (which may be in the past).
    pub(crate) fn status_at(&self, at: Timestamp) -> CoordinatorStatus {
        self.status_changes
            .iter()
            .rev()
            .find(|(t, _)| *t <= at)
            .map(|(_, s)| *s)
            .unwrap_or(CoordinatorStatus::Running)
    }

    /// What `/jobs/:id/checkpoints` would have said at `at` (not after the model's clock), as
    /// the poller reports it: counts, in-progress checkpoints and the last
    /// [`REST_HISTORY`] finished ones.
    pub fn job_poll(
        &self,
        key: JobKey,
        job_name: &str,
        at: Timestamp,
        settings: Option<CheckpointSettings>,
    ) -> JobPoll {
        let ended_by = |c: &PredictedCheckpoint| c.finished_at().is_some_and(|t| t <= at);
        let started: Vec<&PredictedCheckpoint> =
            self.checkpoints.iter().filter(|c| c.triggered_at <= at).collect();
        let mut counts = CheckpointCounts::default();
        let mut finished = Vec::new();
        let mut in_progress = Vec::new();
        for c in &started {
            if ended_by(c) {
                match c.end {
                    Some(End::Completed(_)) => counts.completed += 1,
                    _ => counts.failed += 1,
                }
                if let Some(f) = c.to_finished(self.config.num_subtasks) {
                    finished.push(f);
                }
            } else {
                counts.in_progress += 1;
                in_progress.push(InProgressCheckpoint {
                    id: c.id,
                    triggered_at: c.triggered_at,
                    num_subtasks: self.config.num_subtasks,
                    num_acknowledged: 0,
                });
            }
        }
        // Checkpoints dropped from memory ended before any kept one.
        counts.completed += self.dropped.completed;
        counts.failed += self.dropped.failed;
        counts.restored = self
            .status_changes
            .iter()
            .skip(1)
            .filter(|(t, s)| *t <= at && *s == CoordinatorStatus::Running)
            .count() as u64;
        finished.sort_by_key(|f| std::cmp::Reverse(f.id));
        finished.truncate(REST_HISTORY);
        finished.reverse();
        JobPoll {
            key,
            job_name: job_name.to_string(),
            job_state: self.status_at(at).observed(),
            polled_at: at,
            counts,
            settings,
            in_progress,
            finished,
            latest_restore: self.latest_restore.filter(|(_, t)| *t <= at),
            deferred: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp(1_000_000);

    fn cfg(interval: u64, min_pause: u64) -> CoordinatorConfig {
        CoordinatorConfig { interval_ms: interval, min_pause_ms: min_pause, ..CoordinatorConfig::default() }
    }

    fn always(duration_ms: u64) -> impl FnMut(u64, Timestamp) -> Outcome {
        move |_, _| Outcome::Complete { duration_ms }
    }

    fn triggers(c: &Coordinator) -> Vec<i64> {
        c.checkpoints().map(|c| c.triggered_at.0 - T0.0).collect()
    }

    fn gaps(c: &Coordinator) -> Vec<i64> {
        triggers(c).windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn initial_delay_is_within_min_pause_and_period_and_seeded() {
        for seed in 0..200 {
            let mut c = Coordinator::new(cfg(30_000, 10_000), T0, Schedule::Seeded(seed));
            c.run_checkpoints(1, &mut always(100));
            let first = triggers(&c)[0];
            assert!((10_000..=30_000).contains(&first), "seed {seed}: {first}");
            let mut again = Coordinator::new(cfg(30_000, 10_000), T0, Schedule::Seeded(seed));
            again.run_checkpoints(1, &mut always(100));
            assert_eq!(triggers(&again)[0], first, "same seed, same schedule");
        }
    }

    /// `CheckpointCoordinator.scheduleTriggerWithDelay` (`scheduleAtFixedRate`): the interval
    /// counts from trigger to trigger (fixed rate), so a 50 s
    /// checkpoint with a 60 s interval leaves 10 s until the next one.
    #[test]
    fn fixed_rate_counts_from_trigger_not_completion() {
        let mut c = Coordinator::new(cfg(60_000, 0), T0, Schedule::FirstTriggerAt(T0));
        c.run_checkpoints(5, &mut always(50_000));
        assert_eq!(gaps(&c), vec![60_000; 4]);
        assert!(c.checkpoints().skip(1).all(|c| c.binding == Binding::Interval));
    }

    /// `CheckpointRequestDecider` (min-pause gate, `getMinPauseBetweenCheckpoints`): interval
    /// 30 s with minPause 60 s checkpoints
    /// every 60 s, not 30 s, because the period is max(interval, minPause).
    #[test]
    fn min_pause_above_interval_sets_the_period() {
        let mut c = Coordinator::new(cfg(30_000, 60_000), T0, Schedule::Seeded(0));
        c.run_checkpoints(6, &mut always(1));
        // Each checkpoint takes 1 ms, so the tick 60 s after a trigger comes 1 ms early for
        // the pause: it fails with MINIMUM_TIME_BETWEEN_CHECKPOINTS and is rescheduled 1 ms
        // later; the spacing is 60 s + the checkpoint duration.
        assert_eq!(gaps(&c), vec![60_001; 5]);
        assert!(c.checkpoints().skip(1).all(|c| c.binding == Binding::MinPause));
        let dropped = c
            .drain_events()
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Event::RequestDropped { reason: FailureReason::MinimumTimeBetweenCheckpoints, .. }
                )
            })
            .count();
        assert_eq!(dropped, 5);
    }

    /// The observed-gap rule: with maxConcurrent = 1 and duration + minPause > interval, the
    /// gap between triggers is duration + minPause, and the new schedule is fixed-rate from
    /// the reschedule point.
    #[test]
    fn min_pause_after_long_checkpoint_reschedules() {
        let mut c = Coordinator::new(cfg(10_000, 5_000), T0, Schedule::FirstTriggerAt(T0));
        c.run_checkpoints(4, &mut always(8_000));
        assert_eq!(gaps(&c), vec![13_000; 3]);
        // A short checkpoint after that: back to the interval grid of the new schedule.
        let mut c = Coordinator::new(cfg(10_000, 5_000), T0, Schedule::FirstTriggerAt(T0));
        let mut durations = [8_000u64, 100, 100, 100].into_iter();
        c.run_checkpoints(4, &mut |_, _| Outcome::Complete { duration_ms: durations.next().unwrap_or(100) });
        assert_eq!(gaps(&c), vec![13_000, 10_000, 10_000]);
        let bindings: Vec<Binding> = c.checkpoints().map(|c| c.binding).collect();
        assert_eq!(bindings, vec![Binding::Initial, Binding::MinPause, Binding::Interval, Binding::Interval]);
    }

    /// `CheckpointRequestDecider` (max-concurrent gate): with maxConcurrent = 1 a tick during a
    /// checkpoint waits in
    /// the queue and runs the moment the checkpoint completes.
    #[test]
    fn max_concurrent_queues_the_request_until_completion() {
        let mut c = Coordinator::new(cfg(10_000, 0), T0, Schedule::FirstTriggerAt(T0));
        let mut durations = [15_000u64, 100, 100].into_iter();
        c.run_checkpoints(3, &mut |_, _| Outcome::Complete { duration_ms: durations.next().unwrap_or(100) });
        assert_eq!(triggers(&c), vec![0, 15_000, 20_000]);
        assert_eq!(c.checkpoint(2).unwrap().binding, Binding::MaxConcurrent);
        assert_eq!(c.checkpoint(2).unwrap().requested_at, T0.plus_millis(10_000));
        assert_eq!(c.checkpoint(3).unwrap().binding, Binding::Interval);
    }

    #[test]
    fn two_concurrent_checkpoints_overlap() {
        let mut config = cfg(10_000, 0);
        config.max_concurrent = 2;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        c.run_checkpoints(3, &mut always(15_000));
        assert_eq!(triggers(&c)[..3], [0, 10_000, 20_000]);
        // Checkpoint 3 triggered at 20 s while 1 (ends 15 s) is done and 2 is pending.
        assert!(c.checkpoints().all(|c| c.binding != Binding::MaxConcurrent));
    }

    /// The `expired` fixture scenario (interval 3 s, timeout 4 s): the expired checkpoint's
    /// queued request runs at the expiry, then the grid continues.
    #[test]
    fn timeout_expires_and_frees_the_slot() {
        let mut config = cfg(3_000, 0);
        config.timeout_ms = 4_000;
        config.tolerable_failures = 1000;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        // As in the fixture, the checkpoint after the expired one takes ~2 s (the task thread was
        // still sleeping in the expired checkpoint's snapshot).
        let mut plan =
            [Outcome::Hang, Outcome::Complete { duration_ms: 2_010 }, Outcome::Complete { duration_ms: 20 }]
                .into_iter();
        c.run_checkpoints(4, &mut |_, _| plan.next().unwrap_or(Outcome::Complete { duration_ms: 20 }));
        assert_eq!(triggers(&c)[..4], [0, 4_000, 6_010, 9_000]);
        let first = c.checkpoint(1).unwrap();
        assert_eq!(first.end, Some(End::Failed(T0.plus_millis(4_000), FailureReason::CheckpointExpired)));
        let bindings: Vec<Binding> = c.checkpoints().take(4).map(|c| c.binding).collect();
        assert_eq!(
            bindings,
            vec![Binding::Initial, Binding::Timeout, Binding::MaxConcurrent, Binding::Interval]
        );
    }

    #[test]
    fn a_completion_subsumes_older_pending_checkpoints() {
        let mut config = cfg(1_000, 0);
        config.max_concurrent = 2;
        config.tolerable_failures = 0;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        let mut plan =
            [Outcome::Complete { duration_ms: 5_000 }, Outcome::Complete { duration_ms: 500 }].into_iter();
        c.run_checkpoints(2, &mut |_, _| plan.next().unwrap_or(Outcome::Complete { duration_ms: 10 }));
        assert_eq!(
            c.checkpoint(1).unwrap().end,
            Some(End::Failed(T0.plus_millis(1_500), FailureReason::CheckpointSubsumed))
        );
        assert_eq!(c.checkpoint(2).unwrap().end, Some(End::Completed(T0.plus_millis(1_500))));
        // Subsumption never counts: the job, with 0 tolerable failures, still runs.
        assert_eq!(c.status(), CoordinatorStatus::Running);
    }

    #[test]
    fn which_reasons_count() {
        use FailureReason::*;
        let counted: Vec<FailureReason> =
            FailureReason::ALL.into_iter().filter(|r| r.counts_toward_tolerable(true)).collect();
        assert_eq!(counted.len(), 5);
        for r in [
            IoException,
            CheckpointAsyncException,
            CheckpointDeclined,
            CheckpointExpired,
            FinalizeCheckpointFailure,
        ] {
            assert!(counted.contains(&r), "{r:?}");
        }
        assert!(!FinalizeCheckpointFailure.counts_toward_tolerable(false), "1.14/1.15 ignore it");
        for r in [
            MinimumTimeBetweenCheckpoints,
            CheckpointSubsumed,
            CheckpointDeclinedTaskNotReady,
            CheckpointCoordinatorSuspend,
        ] {
            assert!(!r.counts_toward_tolerable(true), "{r:?}");
        }
    }

    #[test]
    fn reasons_are_recognised_from_rest_messages() {
        assert_eq!(
            FailureReason::from_message("Checkpoint expired before completing."),
            Some(FailureReason::CheckpointExpired)
        );
        assert_eq!(
            FailureReason::from_message("Asynchronous task checkpoint failed."),
            Some(FailureReason::CheckpointAsyncException)
        );
        assert_eq!(
            FailureReason::from_message("Checkpoint was declined (tasks not ready)"),
            Some(FailureReason::CheckpointDeclinedTaskNotReady)
        );
        assert_eq!(
            FailureReason::from_message("Checkpoint was declined."),
            Some(FailureReason::CheckpointDeclined)
        );
        assert_eq!(FailureReason::from_message("something else"), None);
    }

    /// `tolerable-exceeded` fixture: tolerable 2, every checkpoint declined by an async
    /// failure; the third consecutive counted failure (3 > 2) fails the job.
    #[test]
    fn job_fails_when_the_count_exceeds_tolerable() {
        let mut config = cfg(2_000, 0);
        config.tolerable_failures = 2;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        let mut fail = |_, _| Outcome::Fail { after_ms: 20, reason: FailureReason::CheckpointAsyncException };
        c.run_until(T0.plus_millis(60_000), &mut fail);
        assert_eq!(c.status(), CoordinatorStatus::Failed);
        assert_eq!(c.checkpoints().count(), 3);
        let events = c.drain_events();
        let consecutive: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Failed { consecutive_before, .. } => Some(*consecutive_before),
                _ => None,
            })
            .collect();
        assert_eq!(consecutive, vec![0, 1, 2], "Flink logs the count before this failure");
        assert!(events.iter().any(|e| matches!(e, Event::JobFailed { .. })));
    }

    #[test]
    fn a_success_resets_the_count_and_uncounted_reasons_do_not_add() {
        let mut config = cfg(1_000, 0);
        config.tolerable_failures = 1;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        // fail, succeed, fail, subsumed-like uncounted decline, fail: never two counted in a row.
        let plan = [
            Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointDeclined },
            Outcome::Complete { duration_ms: 10 },
            Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointExpired },
            Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointDeclinedTaskNotReady },
            Outcome::Complete { duration_ms: 10 },
            Outcome::Fail { after_ms: 10, reason: FailureReason::IoException },
        ];
        let mut it = plan.into_iter();
        c.run_checkpoints(6, &mut |_, _| it.next().unwrap_or(Outcome::Complete { duration_ms: 10 }));
        assert_eq!(c.status(), CoordinatorStatus::Running);
        // Two counted failures in a row: 2 > 1 fails the job.
        let mut c = Coordinator::new(cfg(1_000, 0), T0, Schedule::FirstTriggerAt(T0));
        c.failures.tolerable = 1;
        let mut it = [
            Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointDeclined },
            Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointExpired },
        ]
        .into_iter();
        c.run_until(T0.plus_millis(10_000), &mut |_, _| {
            it.next().unwrap_or(Outcome::Complete { duration_ms: 10 })
        });
        assert_eq!(c.status(), CoordinatorStatus::Failed);
    }

    #[test]
    fn a_failure_older_than_the_last_success_is_not_counted() {
        let mut counter = FailureCounter {
            tolerable: 0,
            finalize_counts: true,
            continuous: 0,
            counted: BTreeSet::new(),
            last_succeeded: None,
        };
        counter.on_success(5);
        assert!(!counter.on_failure(Some(4), FailureReason::CheckpointExpired));
        assert!(counter.on_failure(Some(6), FailureReason::CheckpointExpired));
        // One id counts once.
        counter.tolerable = 1;
        assert!(!counter.on_failure(Some(7), FailureReason::CheckpointDeclined));
        assert!(!counter.on_failure(Some(7), FailureReason::CheckpointDeclined));
        assert_eq!(counter.continuous, 1);
        // Failures without an id always count.
        assert!(counter.on_failure(None, FailureReason::IoException));
    }

    #[test]
    fn unlimited_tolerable_never_fails_the_job() {
        let mut config = cfg(1_000, 0);
        config.tolerable_failures = UNLIMITED_TOLERABLE;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        c.run_checkpoints(50, &mut |_, _| Outcome::Fail {
            after_ms: 1,
            reason: FailureReason::CheckpointExpired,
        });
        assert_eq!(c.status(), CoordinatorStatus::Running);
    }

    #[test]
    fn a_failed_job_restarts_with_a_new_schedule() {
        let mut config = cfg(2_000, 0);
        config.tolerable_failures = 0;
        config.restart_delay_ms = Some(3_000);
        let mut c = Coordinator::new(config, T0, Schedule::Seeded(3));
        let mut it = [
            Outcome::Complete { duration_ms: 10 },
            Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointDeclined },
        ]
        .into_iter();
        c.run_checkpoints(3, &mut |_, _| it.next().unwrap_or(Outcome::Complete { duration_ms: 10 }));
        assert_eq!(c.status(), CoordinatorStatus::Running);
        let failed_at = c.checkpoint(2).unwrap().finished_at().unwrap();
        let third = c.checkpoint(3).unwrap();
        assert!(third.triggered_at >= failed_at.plus_millis(3_000), "after the restart delay");
        assert_eq!(third.binding, Binding::Initial);
        let poll = c.job_poll(JobKey { cluster: "c".into(), job_id: "j".into() }, "job", c.now(), None);
        assert_eq!(poll.counts.restored, 1);
        assert_eq!(poll.latest_restore.map(|(id, _)| id), Some(Some(1)));
        assert!(matches!(c.status_at(failed_at.plus_millis(1)), CoordinatorStatus::Restarting(_)));
    }

    #[test]
    fn the_queue_is_bounded() {
        let mut c = Coordinator::new(cfg(1, 0), T0, Schedule::FirstTriggerAt(T0));
        c.run_until(T0.plus_millis(5_000), &mut always(10_000));
        assert_eq!(c.queue.len(), MAX_QUEUED_REQUESTS);
    }

    #[test]
    fn job_poll_looks_like_the_poller_s() {
        let mut config = cfg(1_000, 0);
        config.num_subtasks = 4;
        let mut c = Coordinator::new(config, T0, Schedule::FirstTriggerAt(T0));
        c.run_until(T0.plus_millis(20_500), &mut always(600));
        let key = JobKey { cluster: "demo".into(), job_id: "ab".into() };
        let poll = c.job_poll(key.clone(), "job", T0.plus_millis(20_300), None);
        assert_eq!(poll.counts.completed, 20);
        assert_eq!(poll.counts.in_progress, 1);
        assert_eq!(poll.finished.len(), REST_HISTORY);
        assert_eq!(poll.finished.last().unwrap().id, 20);
        assert_eq!(poll.finished[0].end_to_end_ms, Some(600));
        assert_eq!(poll.finished[0].num_subtasks, 4);
        assert_eq!(poll.in_progress[0].id, 21);
        // A poll of the past sees only the past.
        let early = c.job_poll(key, "job", T0.plus_millis(2_300), None);
        assert_eq!(early.counts.completed, 2);
        assert_eq!(early.counts.in_progress, 1);
    }
}
