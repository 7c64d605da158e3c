//! One job: `JobState`, what the daemon knows of it (counts by epoch, the checkpoints in
//! progress and finished, the histograms, the failure streak), and how a poll, a log line and a
//! trace span change it. `State::apply` hands each observation to the job it is about.
//!
//! `poll.rs`: a poll; `spans.rs`: log lines and trace spans; `records.rs`: a counted
//! checkpoint's record and histograms.

mod poll;
mod records;
mod spans;

use std::collections::{BTreeMap, VecDeque};

use super::checkpoint_ids::{FailureEvidence, LoggedCheckpoint, SeenIds};
use super::failure_text::is_stop_failure;
use super::history::P95History;
use super::record::{CheckpointRecord, PhaseHistograms, SharedRecord, Totals};
use super::tolerance::ToleranceCount;
use super::{outbox, restore, traced};
use crate::observe::{
    CheckpointCounts, CheckpointSettings, CheckpointStatus, FailureReason, InProgressCheckpoint,
    JobLoadReport, JobStatus, SnapshotKind,
};
use crate::shadow::Shadow;
use crate::stats::{WindowSpec, WindowedHistogram};
use crate::time::Timestamp;

/// How many consecutive polls Flink's counts must stay below what it said before (or its
/// checkpoint ids stay restarted), with evidence of a new counting epoch, before the daemon
/// takes them as one: see [`JobState::apply_poll`] and docs/reliability.md, "Counters".
pub const EPOCH_CONFIRM_POLLS: u32 = 3;

/// How many recent checkpoints per job are kept for the API and status page, by default
/// (`[state] recent_checkpoints`, `State::keep_recent_checkpoints`).
pub const RECENT_CHECKPOINTS: usize = 32;

/// A run of polls that may be a new counting epoch (see [`EPOCH_CONFIRM_POLLS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SuspectRun {
    /// Polls in the run.
    pub(crate) polls: u32,
    /// Whether a poll of the run reported a restore newer than the last one known.
    pub(crate) restored: bool,
    /// Whether the last poll of the run showed checkpoint ids that restarted.
    pub(crate) ids_restarted: bool,
}

/// The size histograms of a job.
pub struct SizeHistograms {
    /// Bytes persisted by each checkpoint.
    pub(crate) checkpointed: WindowedHistogram,
    /// Full state size (Flink 1.15+).
    pub(crate) full_state: WindowedHistogram,
    /// Bytes processed during alignment.
    pub(crate) processed: WindowedHistogram,
    /// In-flight bytes persisted.
    pub(crate) persisted: WindowedHistogram,
}

/// Per-operator (job vertex) histograms: every subtask's value of each phase.
pub struct OperatorState {
    /// The operator chain's name.
    pub(crate) name: String,
    /// Its phase histograms (`end_to_end` is each subtask's ack − trigger).
    pub(crate) phases: PhaseHistograms,
    /// When a checkpoint last brought data for it.
    pub(crate) last_seen: Timestamp,
}

/// One job.
pub struct JobState {
    /// The job name.
    pub(crate) name: String,
    /// The job's status (`RUNNING`, …).
    pub(crate) job_state: JobStatus,
    /// Whether the JobManager listed it in the last poll round.
    pub(crate) listed: bool,
    /// When it was last listed or polled.
    pub(crate) last_seen: Timestamp,
    /// Its checkpoint configuration.
    pub settings: Option<CheckpointSettings>,
    /// Its whole checkpoint configuration, for the advisor (not persisted: re-fetched).
    pub(crate) configuration: Option<Box<crate::observe::CheckpointConfiguration>>,
    /// The advisor's risk findings, worked out again only when the configuration or the recent
    /// checkpoints change (`advice::job_risks`; not persisted).
    pub(crate) risks: super::memo::Memo<[bool; 3]>,
    /// Flink's counts as last polled.
    pub flink_counts: CheckpointCounts,
    /// Totals of earlier counting epochs: Flink's counts restart with a new JobMaster
    /// (JobManager failover, or a redeploy under the same job id). Each epoch adds its highest
    /// counts.
    pub(crate) earlier_incarnations: Totals,
    /// The newest finished checkpoint of this epoch: (id, trigger time). A checkpoint with an
    /// id at or below it but triggered later means the ids restarted.
    pub(crate) newest: Option<(u64, Timestamp)>,
    /// Consecutive polls whose counts were below `flink_counts` or whose ids had restarted,
    /// and whether they brought evidence of a new epoch (a newer restore, restarted ids).
    pub(crate) suspect: SuspectRun,
    /// Checkpoints counted from Flink's counts without their own details.
    pub unobserved: Totals,
    /// Finished checkpoints the last poll left for a later round while Flink still lists them
    /// (`JobPoll::deferred`): in Flink's counts already, neither counted nor unobserved yet.
    /// Not persisted: after a restart the poller starts its deferral afresh.
    pub(crate) deferred: Totals,
    /// Finished checkpoint ids already counted.
    pub(crate) seen: SeenIds,
    /// Checkpoints in progress at the last poll.
    pub in_progress: Vec<InProgressCheckpoint>,
    /// When that poll was answered.
    pub(crate) in_progress_polled_at: Timestamp,
    /// The latest completed checkpoint (shared with `recent` and the state file's snapshot:
    /// a record is written once and copied only when changed).
    pub last_completed: Option<SharedRecord>,
    /// The latest failed checkpoint.
    pub(crate) last_failed: Option<SharedRecord>,
    /// The latest restore: (checkpoint id, when).
    pub(crate) latest_restore: Option<(Option<u64>, Timestamp)>,
    /// Recent finished checkpoints, oldest first.
    pub recent: VecDeque<SharedRecord>,
    /// Job-level phase histograms: per checkpoint, the slowest subtask's value of each phase.
    pub phases: PhaseHistograms,
    /// Their P95s over time, for the status page (rebuilt from observations, not persisted).
    pub(crate) p95_history: P95History,
    /// Job-level size histograms.
    pub(crate) sizes: SizeHistograms,
    /// Per-operator histograms by vertex id (none while `keep_operators` is off).
    pub(crate) operators: BTreeMap<String, OperatorState>,
    /// Whether `operators` is kept (`State::keep_operator_histograms`).
    pub(crate) keep_operators: bool,
    /// How many checkpoints `recent` keeps (`State::keep_recent_checkpoints`).
    pub(crate) recent_kept: usize,
    /// The reference model run beside the job (rebuilt from observations, not persisted).
    pub shadow: Shadow,
    /// |observed − expected| trigger time of each compared checkpoint, ms.
    pub(crate) trigger_deviation: WindowedHistogram,
    /// The last thread samples of subtasks that held a checkpoint up (bounded, not persisted).
    pub(crate) threads: super::threads::ThreadSamples,
    /// Failed checkpoints since the last completed one (a running count, not bounded by the
    /// recent ring; failures of a stopping job do not count).
    consecutive_failures: u64,
    /// When the first failure of the current run of consecutive failures finished.
    pub(crate) failing_since: Option<Timestamp>,
    /// Flink's own count towards `tolerable-failed-checkpoints` (only the failures its failure
    /// manager counts; starts over when exceeded), and how often it was exceeded.
    pub tolerance: ToleranceCount,
    /// When the daemon saw the job enter RUNNING (its first poll if it was running then).
    pub(crate) running_since: Option<Timestamp>,
    /// Whether a checkpoint completed since `running_since` (or the job had completed one
    /// when first seen running).
    pub(crate) completed_since_running: bool,
    /// Whether a poll of this job was applied yet.
    polled: bool,
    /// Failures Flink counted that never got a checkpoint id: a trigger that failed before it
    /// started ("Not all required tasks are currently running" while a job deploys, …). They
    /// are not failed checkpoints, and Flink does not count them towards the tolerable failures.
    pub(crate) failed_without_id: u64,
    /// Flink's total count and the highest checkpoint id at the last poll.
    total_and_max_id: Option<(u64, u64)>,
    /// What the JobManager log said about the job's latest checkpoints (by id, at most
    /// [`LOGGED_CHECKPOINTS`]), ahead of the next poll; rebuilt from the log, not persisted.
    pub(crate) logged: BTreeMap<u64, LoggedCheckpoint>,
    /// Failed checkpoints known from the log or the poll, each once (persisted).
    pub failures: FailureEvidence,
    /// Its savepoints, counted apart from its checkpoints.
    pub savepoints: outbox::SavepointStats,
    /// Its restores, each counted once and timed (persisted).
    pub restores: restore::RestoreStats,
    /// Records counted by the poll being applied, moved to `State::outbox` right after it.
    pub(super) outbox: Vec<outbox::StoredCheckpoint>,
    /// Checkpoints counted from Flink's trace spans ahead of the poll, and counts by source
    /// (persisted).
    pub traced: traced::Traced,
    /// Its checkpoint storage: the completed checkpoints' paths and the latest listing (not
    /// persisted; boxed, the state stays within its allocation class).
    pub(crate) storage: Box<super::storage::JobStorageState>,
    /// What Flink reported of the job besides its checkpoints (its rescales persisted, the rest
    /// not; boxed, so that the job state stays within its allocation class).
    pub(crate) reported: Box<Reported>,
}

/// What Flink reported of a job besides its checkpoints, rebuilt from observations (but the
/// rescales, which a restart keeps).
#[derive(Clone, Debug, Default)]
pub(crate) struct Reported {
    /// Where each operator's subtasks ran (by operator name, then subtask index) when the
    /// poller last fetched the job's load.
    pub(crate) subtask_locations: BTreeMap<String, Vec<Option<String>>>,
    /// Its latest rescales (persisted).
    pub(crate) rescales: super::rescale::Rescales,
    /// Its status metrics as Flink served them at the last load fetch or after a restore.
    pub(crate) status_metrics: Option<crate::observe::JobStatusMetrics>,
    /// Acknowledgements a TaskManager's log said were dropped as oversized, attached to the
    /// checkpoints they hurt (at most [`super::ack_drops::DROPS_PER_JOB`], newest last).
    pub(crate) ack_drops: VecDeque<super::ack_drops::AckDrop>,
}

impl JobState {
    /// A job seen first at `now`, with nothing observed yet.
    pub(crate) fn new(window: WindowSpec, name: String, job_state: JobStatus, now: Timestamp) -> Self {
        JobState {
            name,
            job_state,
            listed: true,
            last_seen: now,
            settings: None,
            configuration: None,
            risks: Default::default(),
            flink_counts: CheckpointCounts::default(),
            earlier_incarnations: Totals::default(),
            newest: None,
            suspect: SuspectRun::default(),
            unobserved: Totals::default(),
            deferred: Totals::default(),
            seen: SeenIds::default(),
            in_progress: Vec::new(),
            in_progress_polled_at: now,
            last_completed: None,
            last_failed: None,
            latest_restore: None,
            recent: VecDeque::new(),
            phases: PhaseHistograms::new(window),
            p95_history: P95History::new(window),
            sizes: SizeHistograms {
                checkpointed: WindowedHistogram::new(window),
                full_state: WindowedHistogram::new(window),
                processed: WindowedHistogram::new(window),
                persisted: WindowedHistogram::new(window),
            },
            operators: BTreeMap::new(),
            keep_operators: true,
            recent_kept: RECENT_CHECKPOINTS,
            shadow: Shadow::new(),
            trigger_deviation: WindowedHistogram::new(window),
            threads: super::threads::ThreadSamples::default(),
            storage: Default::default(),
            reported: Box::default(),
            savepoints: outbox::SavepointStats::default(),
            restores: restore::RestoreStats::default(),
            outbox: Vec::new(),
            consecutive_failures: 0,
            failing_since: None,
            tolerance: ToleranceCount::default(),
            running_since: None,
            completed_since_running: false,
            polled: false,
            failed_without_id: 0,
            total_and_max_id: None,
            logged: BTreeMap::new(),
            failures: FailureEvidence::default(),
            traced: traced::Traced::default(),
        }
    }

    /// An acknowledgement dropped as oversized, attached to the checkpoint it hurt.
    pub(crate) fn note_ack_drop(&mut self, drop: super::ack_drops::AckDrop) {
        let drops = &mut self.reported.ack_drops;
        if drops.iter().any(|d| d.checkpoint_id == drop.checkpoint_id) {
            return;
        }
        if drops.len() >= super::ack_drops::DROPS_PER_JOB {
            drops.pop_front();
        }
        drops.push_back(drop);
    }

    /// The newest acknowledgement dropped as oversized whose checkpoint did not complete: what the
    /// verdict of an expiry names.
    pub(crate) fn ack_drop_hurting(&self) -> Option<&super::ack_drops::AckDrop> {
        self.reported.ack_drops.iter().rev().find(|d| {
            !self.recent.iter().any(|r| r.id == d.checkpoint_id && r.status == CheckpointStatus::Completed)
        })
    }

    /// The checkpoints in progress at `now` as far as the daemon can tell, as (id, trigger
    /// time): those the log saw triggered (the REST answer lags a trigger by a second or more,
    /// and the poll comes every `poll_interval`) and those the last poll saw in progress, minus
    /// those a log line or a later poll has said finished, minus those at or past their timeout
    /// (Flink's canceller has expired them by then, whatever the last poll said), and minus
    /// those only a poll knows of that it saw younger than half their timeout (they may have
    /// completed since, unheard). Nothing for a job that ended.
    pub(crate) fn live_in_progress(&self, now: Timestamp) -> Vec<(u64, Timestamp)> {
        if !self.job_state.can_checkpoint() {
            return Vec::new();
        }
        let timeout_ms = self.settings.as_ref().and_then(|s| s.timeout_ms);
        let within_timeout = |at: Timestamp| timeout_ms.is_none_or(|t| now.since(at) < t);
        // A checkpoint the log saw triggered would be heard of when it finishes. One only the
        // poll knows may have completed since that poll (which itself lags Flink by a second
        // or so): it counts only if the poll saw it running at half its timeout or later, so
        // that a checkpoint seen young and done since is not taken for a slow one.
        let fresh = |cp: &InProgressCheckpoint| {
            self.logged.get(&cp.id).is_some_and(|l| l.triggered_at.is_some())
                || timeout_ms.is_some_and(|t| 2 * self.in_progress_polled_at.since(cp.triggered_at) >= t)
        };
        let mut live: Vec<(u64, Timestamp)> = self
            .in_progress
            .iter()
            .filter(|cp| !self.finished_by_log(cp.id) && within_timeout(cp.triggered_at) && fresh(cp))
            .map(|cp| (cp.id, cp.triggered_at))
            .collect();
        // Checkpoints only the log knows of yet: they need a timeout to be bounded by.
        if timeout_ms.is_some() {
            for (&id, logged) in &self.logged {
                let Some(at) = logged.triggered_at else { continue };
                if logged.finished || self.seen.contains(id) || live.iter().any(|(l, _)| *l == id) {
                    continue;
                }
                if within_timeout(at) {
                    live.push((id, at));
                }
            }
        }
        live
    }

    /// Whether a log line saw checkpoint `id` finish.
    fn finished_by_log(&self, id: u64) -> bool {
        self.logged.get(&id).is_some_and(|l| l.finished)
    }

    /// The earliest trigger of a checkpoint the last poll saw in progress that is past its
    /// timeout by `now` and that no log line saw finish: Flink's canceller has expired it (or is
    /// about to), though no answer lists the failure yet (the REST history lags by up to
    /// `web.refresh-interval`, 3 s by default). Not live ([`Self::live_in_progress`]), not failed
    /// yet: the job is in trouble all the same.
    pub(crate) fn overdue_in_progress(&self, now: Timestamp) -> Option<Timestamp> {
        let timeout = self.settings.as_ref().and_then(|s| s.timeout_ms)?;
        if !self.job_state.can_checkpoint() {
            return None;
        }
        self.in_progress
            .iter()
            .filter(|cp| !self.finished_by_log(cp.id) && now.since(cp.triggered_at) >= timeout)
            .map(|cp| cp.triggered_at)
            .min()
    }

    /// Keeps where the subtasks of each vertex in the load report run. A vertex the report
    /// has no location for keeps what was known: a failed fetch does not forget it.
    pub(super) fn observe_locations(&mut self, report: &JobLoadReport) {
        let Some(topology) = &report.topology else { return };
        for load in &report.vertices {
            let Some(vertex) = topology.vertices.iter().find(|v| v.id == load.vertex_id) else { continue };
            if load.taskmanagers.iter().any(Option::is_some) {
                self.reported.subtask_locations.insert(vertex.name.clone(), load.taskmanagers.clone());
            }
        }
    }

    /// Where a subtask of an operator ran at the last load fetch.
    pub(crate) fn subtask_location(&self, operator: &str, subtask: u32) -> Option<&str> {
        self.reported.subtask_locations.get(operator)?.get(subtask as usize)?.as_deref()
    }

    /// Whether the thread samples say the user's code holds a subtask's thread at `now`
    /// (`super::threads`): until a checkpoint completes after the latest sample.
    pub(crate) fn blocked_thread(&self, now: Timestamp) -> Option<super::threads::Blocked<'_>> {
        self.threads.blocked(self.last_completed.as_ref().map(|r| r.finished_at), now)
    }

    /// Failed checkpoints since the last completed one (Flink's consecutive-failure count as
    /// far as the daemon saw the checkpoints; failures of a job that was stopping excluded). A
    /// running count: not limited to the recent ring.
    pub fn consecutive_failures(&self) -> u64 {
        self.consecutive_failures
    }

    /// Recomputes the consecutive failures from the recent ring (after a restart, when the
    /// running count was not persisted: a lower bound when the ring is all failures).
    pub(crate) fn recount_consecutive_failures(&mut self) {
        let streak: Vec<&CheckpointRecord> = self
            .recent
            .iter()
            .rev()
            .map(|r| &**r)
            .filter(|r| !is_stop_failure(r.failure_message.as_deref()))
            .filter(|r| !(r.kind == SnapshotKind::Savepoint && r.status == CheckpointStatus::Failed))
            .take_while(|r| r.status == CheckpointStatus::Failed)
            .collect();
        self.consecutive_failures = streak.len() as u64;
        self.failing_since = streak.last().map(|r| r.finished_at);
        self.tolerance = ToleranceCount::rebuilt(
            self.recent
                .iter()
                .filter(|r| {
                    !is_stop_failure(r.failure_message.as_deref()) && r.kind != SnapshotKind::Savepoint
                })
                .map(|r| {
                    let reason = r.failure_message.as_deref().and_then(FailureReason::from_message);
                    (r.id, r.status == CheckpointStatus::Completed, reason)
                }),
        );
    }

    /// Flink's own count towards `tolerable-failed-checkpoints` ([`ToleranceCount`]); `None`
    /// until the tolerable number is known (without it the count's resets are not known).
    pub(crate) fn counted_failures(&self) -> Option<u64> {
        self.tolerable().map(|_| self.tolerance.count())
    }

    /// The job's `tolerable-failed-checkpoints`, once its settings are known.
    fn tolerable(&self) -> Option<u32> {
        self.settings.as_ref().and_then(|s| s.tolerable_failures)
    }

    /// How long (ms) the job has been running without completing a checkpoint, at `now`;
    /// `None` when it is not running or completed one since it entered RUNNING.
    /// A job without periodic checkpoints (no interval) has none: it is not waiting for one.
    pub(crate) fn running_without_checkpoint_ms(&self, now: Timestamp) -> Option<u64> {
        let periodic = self.settings.as_ref().is_none_or(|s| s.interval_ms.is_some());
        if self.job_state != JobStatus::Running || self.completed_since_running || !periodic {
            return None;
        }
        self.running_since.map(|since| now.since(since))
    }

    /// Forgets what an ended job had in progress: it will never finish, and its age must not
    /// grow (nor alert) forever.
    pub(super) fn end(&mut self) {
        self.in_progress.clear();
        self.running_since = None;
        self.restores.give_up();
    }

    /// Checkpoints counted so far by status: the highest counts Flink reported in this epoch
    /// plus those of earlier epochs. Never goes down and never exceeds Flink's own counts summed
    /// over its epochs (saturating at u64::MAX).
    pub fn totals(&self) -> Totals {
        Totals {
            completed: self.earlier_incarnations.completed.saturating_add(self.flink_counts.completed),
            failed: self.earlier_incarnations.failed.saturating_add(self.flink_counts.failed),
        }
    }

    pub(super) fn expire(&mut self, now: Timestamp) {
        self.trigger_deviation.expire(now);
        let mut latencies_changed = false;
        for h in self.phases.iter_mut() {
            latencies_changed |= h.expire(now);
        }
        if latencies_changed {
            // Values left the window: the chart shows the P95 falling (or ending) as it did.
            self.p95_history.sample(&self.phases, now);
        }
        for h in [
            &mut self.sizes.checkpointed,
            &mut self.sizes.full_state,
            &mut self.sizes.processed,
            &mut self.sizes.persisted,
        ] {
            h.expire(now);
        }
        for op in self.operators.values_mut() {
            for h in op.phases.iter_mut() {
                h.expire(now);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::observe::{ClusterPoll, Observation};
    use crate::observe::{FinishedCheckpoint, JobPoll, LogEvent};
    use crate::state::checkpoint_ids::SEEN_RUNS_CAPACITY;
    use crate::state::record::Phase;
    use crate::state::{State, persist};

    use crate::observe::{JobKey, SubtaskCheckpoint};

    pub(in crate::state) const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

    /// Every watched job is one boxed `JobState`; jemalloc rounds a box of 3.5 to 4 KiB up to
    /// 4 KiB, so past 3,584 bytes each job pays 512 more (5 MB at 10,000 jobs, issue 31).
    #[test]
    fn a_job_state_fits_the_3584_byte_allocation_class() {
        let size = std::mem::size_of::<JobState>();
        assert!(size <= 3584, "JobState is {size} bytes: box a part that not every job needs");
    }

    pub(in crate::state) fn completed(id: u64, e2e: u64) -> FinishedCheckpoint {
        checkpoint_at(id, Timestamp(id as i64 * 1000), e2e)
    }

    /// Completed checkpoint `id` triggered at `triggered_at`, sized, with one two-subtask chain.
    fn checkpoint_at(id: u64, triggered_at: Timestamp, e2e: u64) -> FinishedCheckpoint {
        let subtasks = (0..2)
            .map(|i| SubtaskCheckpoint {
                index: i,
                acknowledged: true,
                end_to_end_ms: Some(e2e - i as u64),
                alignment_ms: Some(10 * (i as u64 + 1)),
                start_delay_ms: Some(1),
                sync_ms: Some(2),
                async_ms: Some(3),
                ..SubtaskCheckpoint::default()
            })
            .collect();
        FinishedCheckpoint::completed(id, triggered_at, e2e)
            .sizes(100, 100)
            .acknowledged(2, 2)
            .operator("v1", "map", subtasks)
    }

    pub(in crate::state) fn poll(
        completed_count: u64,
        failed: u64,
        finished: Vec<FinishedCheckpoint>,
    ) -> Observation {
        Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "job".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(1_000_000),
            counts: CheckpointCounts { completed: completed_count, failed, in_progress: 0, restored: 0 },
            settings: None,
            in_progress: Vec::new(),
            finished,
            latest_restore: None,
            deferred: Default::default(),
        })
    }

    pub(in crate::state) fn job(state: &State) -> &JobState {
        &state.clusters()["c"].jobs["j"]
    }

    pub(in crate::state) fn log_line(kind: &str, id: u64, message: &str) -> Observation {
        let mut e = LogEvent::new(kind.into(), crate::observe::EventSeverity::Warning, message.into());
        (e.cluster, e.job_id, e.checkpoint_id) = ("c".into(), Some("j".into()), Some(id));
        Observation::LogEvents(vec![e])
    }

    /// A RUNNING job with a 4 s timeout whose checkpoint 6 (triggered at 100 s) the poll at
    /// 102.1 s saw in progress.
    fn running_with_checkpoint_6() -> State {
        polled_with_checkpoint_6(102_100)
    }

    fn polled_with_checkpoint_6(at: i64) -> State {
        let mut state = State::new(WINDOW);
        let Observation::JobPolled(mut p) = poll(5, 0, Vec::new()) else { unreachable!() };
        p.polled_at = Timestamp(at);
        p.settings = Some(CheckpointSettings { timeout_ms: Some(4_000), ..Default::default() });
        p.in_progress = vec![InProgressCheckpoint {
            id: 6,
            triggered_at: Timestamp(100_000),
            num_subtasks: 6,
            num_acknowledged: 5,
        }];
        state.apply(&Observation::JobPolled(p), Timestamp(at));
        state
    }

    #[test]
    fn a_checkpoint_is_in_progress_until_the_log_or_its_timeout_says_it_is_not() {
        let mut state = running_with_checkpoint_6();
        assert_eq!(job(&state).live_in_progress(Timestamp(103_300)), [(6, Timestamp(100_000))]);
        // Past the timeout Flink's canceller has expired it, whatever the last poll said.
        assert!(job(&state).live_in_progress(Timestamp(104_000)).is_empty());
        // Overdue: no longer live, not yet listed as failed.
        assert_eq!(job(&state).overdue_in_progress(Timestamp(103_300)), None);
        assert_eq!(job(&state).overdue_in_progress(Timestamp(104_000)), Some(Timestamp(100_000)));
        // The expiry's line arrives before the next poll: stale REST state no longer counts.
        state.apply(&log_line("expired", 6, ""), Timestamp(103_400));
        assert!(job(&state).live_in_progress(Timestamp(103_500)).is_empty());
        assert_eq!(job(&state).overdue_in_progress(Timestamp(104_000)), None, "the log saw it end");
        // The next checkpoint is known from its trigger line, before any poll shows it.
        let line = "Triggering checkpoint 7 (type=CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}) @ 104001 for job e5977598408a0b50e1eb3e122b7bd082.";
        state.apply(&log_line("triggered", 7, line), Timestamp(104_002));
        assert_eq!(job(&state).live_in_progress(Timestamp(104_500)), [(7, Timestamp(104_001))]);
        state.apply(&log_line("completed", 7, ""), Timestamp(106_000));
        assert!(job(&state).live_in_progress(Timestamp(106_001)).is_empty());
        // Seen by a poll at 37 % of its timeout and heard of no more, it may have completed
        // since: no evidence that it is still running at 80 %.
        let state = polled_with_checkpoint_6(101_500);
        assert!(job(&state).live_in_progress(Timestamp(103_300)).is_empty());
        // Unless the log saw it triggered (and would have said when it finished).
        let mut state = State::new(WINDOW);
        state.apply(
            &Observation::JobPolled(match poll(5, 0, Vec::new()) {
                Observation::JobPolled(p) => JobPoll {
                    settings: Some(CheckpointSettings { timeout_ms: Some(4_000), ..Default::default() }),
                    ..p
                },
                _ => unreachable!(),
            }),
            Timestamp(99_000),
        );
        let line = "Triggering checkpoint 6 (type=CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}) @ 100000 for job e5977598408a0b50e1eb3e122b7bd082.";
        state.apply(&log_line("triggered", 6, line), Timestamp(100_001));
        assert_eq!(job(&state).live_in_progress(Timestamp(103_300)), [(6, Timestamp(100_000))]);
        // A job that is being cancelled has nothing in progress.
        let mut state = running_with_checkpoint_6();
        state.clusters.get_mut("c").unwrap().jobs.get_mut("j").unwrap().job_state = "CANCELLING".into();
        assert!(job(&state).live_in_progress(Timestamp(103_300)).is_empty());
    }

    #[test]
    fn a_failed_checkpoint_counts_once_whichever_source_says_it_first_and_shutdowns_not_at_all() {
        let mut state = running_with_checkpoint_6();
        // The JobManager's two lines for one expiry, then the poll that shows it failed.
        state.apply(&log_line("expired", 6, ""), Timestamp(104_000));
        assert_eq!((job(&state).failures.total, job(&state).failures.last_at), (1, Some(Timestamp(104_000))));
        state.apply(&log_line("failed", 6, ""), Timestamp(104_001));
        let mut failed = completed(6, 4_000);
        failed.status = CheckpointStatus::Failed;
        failed.failure_message = Some("Checkpoint expired before completing.".into());
        state.apply(&poll(5, 1, vec![failed.clone()]), Timestamp(105_000));
        assert_eq!(job(&state).failures.total, 1);
        // The poll stands in for a log nobody tails.
        failed.id = 9;
        state.apply(&poll(5, 2, vec![failed.clone()]), Timestamp(115_000));
        assert_eq!(job(&state).failures.total, 2);
        // At cancel, the checkpoint in progress fails because the coordinator suspends.
        let Observation::LogEvents(mut events) = log_line("failed", 10, "") else { unreachable!() };
        events[0].root_cause = Some(crate::observe::RootCause {
            category: "task_failure",
            exception: "org.apache.flink.runtime.checkpoint.CheckpointException".into(),
            message: "Checkpoint Coordinator is suspending.".into(),
        });
        state.apply(&Observation::LogEvents(events), Timestamp(120_000));
        failed.id = 10;
        failed.failure_message = Some("Checkpoint Coordinator is suspending.".into());
        state.apply(&poll(5, 3, vec![failed]), Timestamp(121_000));
        assert_eq!(job(&state).failures.total, 2, "a cancel is not a checkpoint failure");
        // Lines of the REST source (the poller's pending-subtask reports) are not log lines.
        let Observation::LogEvents(mut events) = log_line("declined", 11, "") else { unreachable!() };
        events[0].source = "rest";
        state.apply(&Observation::LogEvents(events), Timestamp(122_000));
        assert_eq!(job(&state).failures.total, 2);
    }

    #[test]
    fn a_failed_savepoint_is_no_checkpoint_failure() {
        let mut state = running_with_checkpoint_6();
        let mut savepoint = completed(7, 4_000);
        savepoint.status = CheckpointStatus::Failed;
        savepoint.kind = SnapshotKind::Savepoint;
        savepoint.failure_message = Some("IO-problem detected.".into());
        state.apply(&poll(5, 1, vec![savepoint]), Timestamp(105_000));
        let j = job(&state);
        assert_eq!(j.totals().failed, 1, "Flink counts it, and so does flink_checkpoints_total");
        assert_eq!(j.failures.total, 0, "not a failed checkpoint (FlinkCheckpointFailed)");
        assert_eq!(j.consecutive_failures(), 0, "not a failure Flink tolerates a number of");
        assert_eq!(j.savepoints.totals.failed, 1);
    }

    #[test]
    fn without_operator_histograms_a_job_keeps_none_and_drops_what_it_had() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(1, 0, vec![completed(1, 50)]), Timestamp(1_000_000));
        assert_eq!(job(&state).operators["v1"].phases.alignment.summary().count, 2);
        state.keep_operator_histograms(false);
        assert!(job(&state).operators.is_empty(), "dropped when switched off");
        state.apply(&poll(2, 0, vec![completed(1, 50), completed(2, 70)]), Timestamp(1_001_000));
        let j = job(&state);
        assert!(j.operators.is_empty(), "none kept while off");
        assert_eq!(j.phases.alignment.summary().count, 2, "the job-level histograms still are");
        state.keep_operator_histograms(true);
        state.apply(&poll(3, 0, vec![completed(3, 90)]), Timestamp(1_002_000));
        assert_eq!(job(&state).operators["v1"].phases.alignment.summary().count, 2, "kept again when on");
    }

    /// The record a job keeps [`RECENT_CHECKPOINTS`] of stays small: its rare parts are boxed.
    #[test]
    fn a_checkpoint_record_is_small_inline() {
        assert!(
            std::mem::size_of::<CheckpointRecord>() <= 256,
            "{}",
            std::mem::size_of::<CheckpointRecord>()
        );
    }

    #[test]
    fn a_checkpoint_seen_twice_is_counted_once() {
        let mut state = State::new(WINDOW);
        let obs = poll(2, 0, vec![completed(1, 50), completed(2, 70)]);
        state.apply(&obs, Timestamp(1_000_000));
        state.apply(&obs, Timestamp(1_001_000));
        let j = job(&state);
        assert_eq!(j.totals(), Totals { completed: 2, failed: 0 });
        assert_eq!(j.phases.end_to_end.summary().count, 2);
        // Job level takes the slowest subtask per phase; operator level takes every subtask.
        assert_eq!(j.phases.alignment.summary().quantiles[2], Some(20));
        assert_eq!(j.operators["v1"].phases.alignment.summary().count, 4);
        assert_eq!(j.unobserved, Totals::default());
    }

    #[test]
    fn an_operator_first_seen_by_its_vertex_id_takes_its_name_later() {
        let mut state = State::new(WINDOW);
        // Converted before the poller had the job graph: the operator is named by its id.
        let mut early = completed(1, 50);
        early.operators[0].name = "v1".into();
        state.apply(&poll(1, 0, vec![early]), Timestamp(0));
        assert_eq!(job(&state).operators["v1"].name, "v1");
        state.apply(&poll(2, 0, vec![completed(2, 50)]), Timestamp(1));
        assert_eq!(job(&state).operators["v1"].name, "map");
        assert_eq!(job(&state).operators["v1"].phases.alignment.summary().count, 4, "its history is kept");
    }

    #[test]
    fn ids_that_went_by_unseen_are_counted_from_flinks_counts() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(1, 0, vec![completed(1, 50)]), Timestamp(0));
        // Flink completed 5 more and failed 1, but its history only shows the last one.
        state.apply(&poll(6, 1, vec![completed(7, 60)]), Timestamp(1));
        let j = job(&state);
        assert_eq!(j.totals(), Totals { completed: 6, failed: 1 });
        assert_eq!(j.unobserved, Totals { completed: 4, failed: 1 });
        assert_eq!(j.phases.end_to_end.summary().count, 2);
    }

    /// A poll with counts, finished checkpoints and a restore.
    fn poll_with(
        completed_count: u64,
        failed: u64,
        finished: Vec<FinishedCheckpoint>,
        restore: Option<(Option<u64>, Timestamp)>,
    ) -> Observation {
        match poll(completed_count, failed, finished) {
            Observation::JobPolled(p) => Observation::JobPolled(JobPoll { latest_restore: restore, ..p }),
            other => other,
        }
    }

    /// A completed checkpoint `id` triggered at `at` ms.
    fn completed_at(id: u64, at: i64) -> FinishedCheckpoint {
        checkpoint_at(id, Timestamp(at), 50)
    }

    #[test]
    fn counters_never_go_down_when_a_new_jobmaster_counts_from_zero() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(10, 2, vec![completed(12, 50)]), Timestamp(0));
        let unobserved = job(&state).unobserved;
        // A JobManager failover: the new JobMaster restored checkpoint 12 and counts from zero.
        let restored = Some((Some(12), Timestamp(50_000)));
        for t in 1..EPOCH_CONFIRM_POLLS as i64 {
            state.apply(&poll_with(1, 0, vec![completed(13, 50)], restored), Timestamp(t));
            assert_eq!(job(&state).totals(), Totals { completed: 10, failed: 2 }, "held until confirmed");
        }
        state.apply(&poll_with(1, 0, vec![completed(13, 50)], restored), Timestamp(10));
        assert_eq!(job(&state).totals(), Totals { completed: 10, failed: 2 });
        state.apply(&poll_with(2, 0, vec![completed(13, 50), completed(14, 50)], restored), Timestamp(11));
        assert_eq!(job(&state).totals(), Totals { completed: 12, failed: 2 }, "10 + the new JobMaster's 2");
        assert_eq!(job(&state).unobserved, unobserved, "13 and 14 were seen with their details");
    }

    #[test]
    fn a_dip_in_flinks_counts_is_not_a_failover() {
        // The attack: Flink's count dipped by 5 for a moment, three times; before, each
        // dip added the whole count again (1,255 counted while Flink said 671).
        let mut state = State::new(WINDOW);
        let mut flink_max = 0;
        let mut last = Totals::default();
        for round in 0..3u64 {
            let base = 660 + round * 4;
            for (count, restore) in [(base, None), (base - 5, None), (base - 5, None), (base + 2, None)] {
                flink_max = flink_max.max(count);
                state.apply(&poll_with(count, 0, vec![], restore), Timestamp(round as i64));
                let totals = job(&state).totals();
                assert!(totals.completed >= last.completed, "{totals:?} after {last:?}");
                assert!(
                    totals.completed <= flink_max,
                    "{} counted, Flink said at most {flink_max}",
                    totals.completed
                );
                last = totals;
            }
        }
        assert_eq!(last.completed, flink_max);
        // A dip that lasts, without a restore or restarted ids: still held, never added again.
        for t in 0..10 {
            state.apply(&poll(600, 0, vec![]), Timestamp(100 + t));
        }
        assert_eq!(job(&state).totals().completed, flink_max);
        state.apply(&poll(flink_max + 3, 0, vec![]), Timestamp(200));
        assert_eq!(job(&state).totals().completed, flink_max + 3);
    }

    #[test]
    fn ids_near_u64_max_saturate_and_never_wrap() {
        let mut state = State::new(WINDOW);
        let top = u64::MAX;
        state.apply(&poll(569, 0, vec![completed(569, 50)]), Timestamp(0));
        let mut last = job(&state).totals();
        for (count, id) in [(top - 1, top - 1), (top, top), (top, top), (588, 5), (top, top)] {
            state.apply(&poll(count, 0, vec![completed_at(id, 1_000)]), Timestamp(1));
            let totals = job(&state).totals();
            assert!(totals.completed >= last.completed, "{totals:?} after {last:?}");
            last = totals;
        }
        assert_eq!(last.completed, top);
        let mut seen = SeenIds::default();
        // Every other id, so that each is a run of its own and the oldest runs are dropped.
        let lowest = top - 4 * SEEN_RUNS_CAPACITY as u64;
        for id in (lowest..=top).filter(|id| id % 2 == 1) {
            seen.insert(id);
        }
        assert!(
            seen.contains(top) && seen.contains(top - 2) && seen.floor > lowest,
            "the floor did not wrap to 0"
        );
    }

    #[test]
    fn a_job_keeps_the_recent_checkpoints_it_is_told_and_fewer_drops_the_oldest() {
        let mut state = State::new(WINDOW);
        state.keep_recent_checkpoints(4);
        let finished: Vec<_> = (1..=10).map(|id| completed_at(id, id as i64 * 1_000)).collect();
        state.apply(&poll(10, 0, finished), Timestamp(0));
        let ids = |s: &State| job(s).recent.iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(&state), vec![7, 8, 9, 10]);
        state.keep_recent_checkpoints(2);
        assert_eq!(ids(&state), vec![9, 10]);
        assert_eq!(job(&state).totals().completed, 10, "fewer kept, none uncounted");
    }

    #[test]
    fn ids_restarting_under_the_same_job_id_are_a_new_epoch() {
        // Application mode with a fixed job id, redeployed without state: the ids and the counts
        // start again at 1, the trigger times go on.
        let mut state = State::new(WINDOW);
        let old: Vec<_> = (501..=510).map(|id| completed_at(id, id as i64 * 1_000)).collect();
        state.apply(&poll(510, 0, old), Timestamp(0));
        assert_eq!(job(&state).last_completed.as_ref().map(|r| r.id), Some(510));
        let unobserved = job(&state).unobserved;
        let later = 1_000_000;
        let new = |n: u64| (1..=n).map(|id| completed_at(id, later + id as i64 * 1_000)).collect::<Vec<_>>();
        for n in 1..=EPOCH_CONFIRM_POLLS as u64 {
            state.apply(&poll(n, 0, new(n)), Timestamp(n as i64));
            assert_eq!(job(&state).totals().completed, 510, "held until confirmed");
        }
        // Confirmed: the next poll counts the new run's checkpoints, each with its details.
        state.apply(&poll(4, 0, new(4)), Timestamp(10));
        let j = job(&state);
        assert_eq!(j.totals().completed, 514);
        assert_eq!(j.unobserved, unobserved, "ids 1-4 collided with remembered ones and are recorded");
        assert_eq!(j.last_completed.as_ref().map(|r| r.id), Some(4), "the last checkpoint follows");
        assert_eq!(j.recent.back().map(|r| r.id), Some(4));
        assert!(j.seen.contains(4) && !j.seen.contains(300));
    }

    proptest::proptest! {
        /// Whatever Flink's counts do — grow, dip for a few polls, restart with a new
        /// JobMaster (with a restore) — the exported totals never go down and never exceed
        /// the sum over epochs of the highest counts Flink reported in each.
        #[test]
        fn totals_never_decrease_nor_exceed_flinks(steps in proptest::collection::vec((0u8..10, 0u64..4, 0u64..3), 1..120)) {
            let mut state = State::new(WINDOW);
            let (mut completed_count, mut failed) = (0u64, 0u64);
            let mut epochs_before = 0u64;
            let mut epoch_max = 0u64;
            let mut restore_at = 0i64;
            let mut last = 0u64;
            for (t, (action, grow, fail)) in steps.into_iter().enumerate() {
                let mut restore = (restore_at > 0).then_some((None, Timestamp(restore_at)));
                let (shown_c, shown_f) = match action {
                    // A glitch: lower counts for one answer.
                    0 | 1 => (completed_count.saturating_sub(grow + 1), failed.saturating_sub(fail)),
                    // A failover: the new JobMaster restores and counts from zero.
                    2 => {
                        epochs_before += epoch_max.max(completed_count);
                        epoch_max = 0;
                        completed_count = 0;
                        failed = 0;
                        restore_at = 1_000 + t as i64;
                        restore = Some((None, Timestamp(restore_at)));
                        (0, 0)
                    }
                    _ => {
                        completed_count += grow;
                        failed += fail;
                        (completed_count, failed)
                    }
                };
                epoch_max = epoch_max.max(shown_c);
                state.apply(&poll_with(shown_c, shown_f, vec![], restore), Timestamp(t as i64));
                let now = job(&state).totals().completed;
                proptest::prop_assert!(now >= last, "went down: {} -> {}", last, now);
                proptest::prop_assert!(now <= epochs_before + epoch_max, "{} > Flink's {}", now, epochs_before + epoch_max);
                last = now;
            }
        }
    }

    #[test]
    fn the_p95_history_gets_a_sample_per_poll_that_changed_the_p95s_and_when_the_window_empties() {
        let mut state = State::new(WINDOW);
        let at = |obs: Observation, t: i64| match obs {
            Observation::JobPolled(p) => Observation::JobPolled(JobPoll { polled_at: Timestamp(t), ..p }),
            other => other,
        };
        state.apply(&at(poll(2, 0, vec![completed(1, 50), completed(2, 70)]), 10_000), Timestamp(10_000));
        state.apply(&at(poll(3, 0, vec![completed(3, 900)]), 20_000), Timestamp(20_000));
        let mut failed = completed(4, 60_000);
        failed.status = CheckpointStatus::Failed;
        // A failed checkpoint and a repeated poll leave the P95s as they were: no new point.
        state.apply(&at(poll(3, 1, vec![failed]), 30_000), Timestamp(30_000));
        state.apply(&at(poll(3, 1, vec![completed(3, 900)]), 40_000), Timestamp(40_000));
        let samples: Vec<_> = job(&state).p95_history.samples().copied().collect();
        assert_eq!(samples.iter().map(|s| s.at.millis()).collect::<Vec<_>>(), [10_000, 20_000]);
        assert_eq!(samples[0].p95_ms(Phase::EndToEnd), Some(70));
        assert!(samples[1].p95_ms(Phase::EndToEnd).is_some_and(|v| v.abs_diff(900) <= 9));
        assert_eq!(samples[1].p95_ms(Phase::Alignment), Some(20));
        state.expire(Timestamp(2 * 3_600_000 + 20_000));
        let last = *job(&state).p95_history.samples().last().unwrap();
        assert_eq!((last.at.millis(), last.p95_ms(Phase::EndToEnd)), (2 * 3_600_000 + 20_000, None));
    }

    fn failed(id: u64, message: &str) -> FinishedCheckpoint {
        completed(id, 50).failed(message)
    }

    fn job_poll(
        state: &str,
        at: i64,
        counts: (u64, u64),
        in_progress: &[u64],
        finished: Vec<FinishedCheckpoint>,
    ) -> Observation {
        Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "job".into(),
            job_state: state.into(),
            polled_at: Timestamp(at),
            counts: CheckpointCounts {
                completed: counts.0,
                failed: counts.1,
                in_progress: in_progress.len() as u64,
                restored: 0,
            },
            settings: None,
            in_progress: in_progress
                .iter()
                .map(|&id| InProgressCheckpoint {
                    id,
                    triggered_at: Timestamp(id as i64 * 1000),
                    num_subtasks: 2,
                    num_acknowledged: 0,
                })
                .collect(),
            finished,
            latest_restore: None,
            deferred: Default::default(),
        })
    }

    #[test]
    fn a_cancelled_job_forgets_its_in_progress_checkpoint_and_its_stop_failure_is_not_a_failure() {
        let mut state = State::new(WINDOW);
        state.apply(&job_poll("RUNNING", 10_000, (1, 0), &[2], vec![completed(1, 50)]), Timestamp(10_000));
        // The first poll after the cancel: the REST cache still shows checkpoint 2 in progress.
        state.apply(&job_poll("CANCELED", 12_000, (1, 0), &[2], vec![]), Timestamp(12_000));
        assert!(job(&state).in_progress.is_empty(), "an ended job has nothing in progress");
        // The next poll: the cancel failed it.
        let stop = failed(2, "Checkpoint Coordinator is suspending.");
        state.apply(&job_poll("CANCELED", 14_000, (1, 1), &[], vec![stop]), Timestamp(14_000));
        let j = job(&state);
        assert_eq!(j.totals(), Totals { completed: 1, failed: 1 }, "counted like Flink counts it");
        assert_eq!(j.consecutive_failures(), 0, "a stop failure is not one of the job's failures");
        assert!(j.in_progress.is_empty());
        // The job listing alone (no job poll) also ends what was in progress.
        let mut state = State::new(WINDOW);
        state.apply(&job_poll("RUNNING", 10_000, (1, 0), &[2], vec![completed(1, 50)]), Timestamp(10_000));
        state.apply(
            &Observation::ClusterPolled(ClusterPoll {
                cluster: "c".into(),
                duration_ms: 1,
                flink_version: None,
                jobs: Some(vec![crate::observe::JobSummary {
                    job_id: "j".into(),
                    name: "job".into(),
                    state: "CANCELED".into(),
                }]),
                errors: Vec::new(),
                reachable: true,
            }),
            Timestamp(12_000),
        );
        assert!(job(&state).in_progress.is_empty());
    }

    #[test]
    fn consecutive_failures_are_a_running_count_beyond_the_recent_ring() {
        let mut state = State::new(WINDOW);
        state.apply(&job_poll("RUNNING", 1_000, (1, 0), &[], vec![completed(1, 50)]), Timestamp(1_000));
        for id in 2..=101u64 {
            let at = id as i64 * 1000 + 500;
            state.apply(
                &job_poll(
                    "RUNNING",
                    at,
                    (1, id - 1),
                    &[],
                    vec![failed(id, "Checkpoint expired before completing.")],
                ),
                Timestamp(at),
            );
        }
        let j = job(&state);
        assert_eq!(j.consecutive_failures(), 100, "not capped at the {RECENT_CHECKPOINTS} recent ones");
        assert_eq!(j.failing_since, Some(Timestamp(2_050)), "since the first failure of the run finished");
        // Failures that went by unseen count too; a completion ends the run.
        // (102 to 104 failed unseen; 105 is in progress.)
        state.apply(&job_poll("RUNNING", 200_000, (1, 103), &[105], vec![]), Timestamp(200_000));
        assert_eq!(job(&state).consecutive_failures(), 103);
        state.apply(
            &job_poll("RUNNING", 201_000, (2, 103), &[], vec![completed(105, 50)]),
            Timestamp(201_000),
        );
        assert_eq!((job(&state).consecutive_failures(), job(&state).failing_since), (0, None));
    }

    #[test]
    fn a_trigger_that_failed_before_its_checkpoint_had_an_id_is_no_failed_checkpoint() {
        let mut state = State::new(WINDOW);
        // A fresh job: Flink counted its first trigger as failed while the tasks deployed
        // ("Not all required tasks are currently running"); checkpoint 1 completed.
        state.apply(&job_poll("RUNNING", 10_000, (1, 1), &[], vec![completed(1, 50)]), Timestamp(10_000));
        let j = job(&state);
        assert_eq!((j.failed_without_id, j.consecutive_failures()), (1, 0));
        assert_eq!(j.totals(), Totals { completed: 1, failed: 1 }, "still counted as Flink counts it");
        // Later: one more trigger failure (no id), then a declined checkpoint 3 seen, and one
        // with an id that went by unseen (4; 5 is in progress).
        state.apply(&job_poll("RUNNING", 20_000, (2, 2), &[], vec![completed(2, 50)]), Timestamp(20_000));
        state.apply(
            &job_poll(
                "RUNNING",
                30_000,
                (2, 4),
                &[5],
                vec![failed(3, "Asynchronous task checkpoint failed.")],
            ),
            Timestamp(30_000),
        );
        let j = job(&state);
        assert_eq!(j.failed_without_id, 2);
        assert_eq!(j.consecutive_failures(), 2, "3 and the unseen 4, not the trigger failures");
    }

    #[test]
    fn after_a_restart_of_the_daemon_a_new_failed_checkpoint_is_not_taken_for_a_trigger_failure() {
        let mut state = State::new(WINDOW);
        // One trigger failure at the start, checkpoints 1 to 3 completed.
        let first = vec![completed(1, 50), completed(2, 50), completed(3, 50)];
        state.apply(&job_poll("RUNNING", 10_000, (3, 1), &[], first), Timestamp(10_000));
        assert_eq!(job(&state).failed_without_id, 1);
        let bytes = persist::to_bytes(&persist::snapshot(&state));
        let mut restored = persist::restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
        // The first poll after the restart brings only checkpoint 4, declined.
        let declined = failed(4, "Asynchronous task checkpoint failed.");
        restored.apply(&job_poll("RUNNING", 20_000, (3, 2), &[], vec![declined]), Timestamp(20_000));
        let j = job(&restored);
        assert_eq!((j.failed_without_id, j.consecutive_failures()), (0, 1));
    }

    #[test]
    fn time_running_without_a_completed_checkpoint_counts_from_entering_running() {
        let mut state = State::new(WINDOW);
        state.apply(&job_poll("RUNNING", 10_000, (0, 0), &[1], vec![]), Timestamp(10_000));
        state.apply(
            &job_poll(
                "RUNNING",
                70_000,
                (0, 1),
                &[],
                vec![failed(1, "Checkpoint expired before completing.")],
            ),
            Timestamp(70_000),
        );
        assert_eq!(job(&state).running_without_checkpoint_ms(Timestamp(100_000)), Some(90_000));
        state.apply(&job_poll("RUNNING", 110_000, (1, 1), &[], vec![completed(100, 50)]), Timestamp(110_000));
        assert_eq!(job(&state).running_without_checkpoint_ms(Timestamp(120_000)), None);
        // A restart starts the clock again.
        state.apply(&job_poll("RESTARTING", 130_000, (1, 1), &[], vec![]), Timestamp(130_000));
        assert_eq!(job(&state).running_without_checkpoint_ms(Timestamp(131_000)), None, "not running");
        state.apply(&job_poll("RUNNING", 140_000, (1, 1), &[], vec![]), Timestamp(140_000));
        assert_eq!(job(&state).running_without_checkpoint_ms(Timestamp(150_000)), Some(10_000));
        // A job without periodic checkpoints waits for none.
        let mut state = State::new(WINDOW);
        let Observation::JobPolled(mut poll) = job_poll("RUNNING", 10_000, (0, 0), &[], vec![]) else {
            unreachable!()
        };
        poll.settings = Some(CheckpointSettings { interval_ms: None, ..CheckpointSettings::default() });
        state.apply(&Observation::JobPolled(poll), Timestamp(10_000));
        assert_eq!(job(&state).running_without_checkpoint_ms(Timestamp(900_000)), None);
        // A job first seen running with completed checkpoints has completed one.
        let mut state = State::new(WINDOW);
        state.apply(&job_poll("RUNNING", 10_000, (5, 0), &[], vec![]), Timestamp(10_000));
        assert_eq!(job(&state).running_without_checkpoint_ms(Timestamp(900_000)), None);
    }

    #[test]
    fn savepoints_and_failures_count_but_stay_out_of_the_latency_summaries() {
        let mut state = State::new(WINDOW);
        let mut savepoint = completed(1, 5000);
        savepoint.kind = SnapshotKind::Savepoint;
        let mut failed = completed(2, 60_000);
        failed.status = CheckpointStatus::Failed;
        state.apply(&poll(1, 1, vec![savepoint, failed]), Timestamp(0));
        let j = job(&state);
        assert_eq!(j.totals(), Totals { completed: 1, failed: 1 });
        assert_eq!(j.phases.end_to_end.summary().count, 0);
        assert_eq!(j.last_failed.as_ref().map(|r| r.id), Some(2));
    }
}
