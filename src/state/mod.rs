//! What the daemon knows, and the one function that changes it: `State::apply(obs, now)`.
//!
//! Pure: no I/O, no clock, no tokio. The poller and the tailer produce observations, the
//! daemon applies them here, and the exporter, HTTP API and rules read the result.

pub mod history;
pub mod logs;
pub mod outbox;
pub mod persist;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::observe::{
    CheckpointCounts, CheckpointSettings, CheckpointStatus, ClusterPoll, FinishedCheckpoint,
    InProgressCheckpoint, JobLoadReport, JobPoll, Observation, SnapshotKind,
};
use crate::shadow::Shadow;
use crate::stats::{WindowSpec, WindowedHistogram};
use crate::time::Timestamp;
use history::P95History;

/// How many finished checkpoint ids per job are remembered individually. Ids below the
/// oldest remembered one count as seen, so memory per job stays bounded.
pub const SEEN_IDS_CAPACITY: usize = 1024;

/// How many recent checkpoints per job are kept for the API and status page.
pub const RECENT_CHECKPOINTS: usize = 32;

/// Everything the daemon knows about the clusters it watches.
pub struct State {
    window: WindowSpec,
    clusters: BTreeMap<String, ClusterState>,
    /// Checkpoints counted since the persister last wrote them to the store.
    pub outbox: outbox::Outbox,
}

/// One watched cluster.
pub struct ClusterState {
    /// Whether the last poll round reached the JobManager.
    pub reachable: bool,
    /// Whether any poll round has ever reached it (readiness).
    pub answered_once: bool,
    /// Flink's version, as reported by `/overview`.
    pub flink_version: Option<String>,
    /// Completed poll rounds.
    pub polls_total: u64,
    /// Poll errors by kind.
    pub poll_errors: BTreeMap<&'static str, u64>,
    /// Duration of the last poll round, ms.
    pub last_poll_duration_ms: u64,
    /// When the JobManager last answered.
    pub last_success: Option<Timestamp>,
    /// Durations of poll rounds.
    pub poll_duration: WindowedHistogram,
    /// Jobs by id.
    pub jobs: BTreeMap<String, JobState>,
    /// What its log files said.
    pub logs: logs::LogState,
}

/// Lifetime checkpoint totals by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    /// Completed.
    pub completed: u64,
    /// Failed.
    pub failed: u64,
}

impl Totals {
    /// The total for a status.
    pub fn get(&self, status: CheckpointStatus) -> u64 {
        match status {
            CheckpointStatus::Completed => self.completed,
            CheckpointStatus::Failed => self.failed,
        }
    }
}

/// The ids of finished checkpoints already counted, bounded in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SeenIds {
    /// Every id below this counts as seen.
    pub floor: u64,
    /// Seen ids at or above `floor`.
    pub ids: BTreeSet<u64>,
}

impl SeenIds {
    /// Whether `id` was counted already.
    pub fn contains(&self, id: u64) -> bool {
        id < self.floor || self.ids.contains(&id)
    }

    /// Marks `id` as counted; returns `true` if it was new.
    pub fn insert(&mut self, id: u64) -> bool {
        if self.contains(id) {
            return false;
        }
        self.ids.insert(id);
        while self.ids.len() > SEEN_IDS_CAPACITY {
            if let Some(oldest) = self.ids.pop_first() {
                self.floor = oldest + 1;
            }
        }
        true
    }
}

/// The phase and size histograms of a job or operator.
pub struct PhaseHistograms {
    /// End-to-end duration, ms (job level only).
    pub end_to_end: WindowedHistogram,
    /// Alignment duration, ms.
    pub alignment: WindowedHistogram,
    /// Synchronous snapshot duration, ms.
    pub sync: WindowedHistogram,
    /// Asynchronous snapshot duration, ms.
    pub async_: WindowedHistogram,
    /// Start delay (trigger to first barrier), ms.
    pub start_delay: WindowedHistogram,
}

impl PhaseHistograms {
    fn new(window: WindowSpec) -> Self {
        PhaseHistograms {
            end_to_end: WindowedHistogram::new(window),
            alignment: WindowedHistogram::new(window),
            sync: WindowedHistogram::new(window),
            async_: WindowedHistogram::new(window),
            start_delay: WindowedHistogram::new(window),
        }
    }

    /// The histogram of one phase.
    pub fn get(&self, phase: Phase) -> &WindowedHistogram {
        match phase {
            Phase::EndToEnd => &self.end_to_end,
            Phase::Alignment => &self.alignment,
            Phase::Sync => &self.sync,
            Phase::Async => &self.async_,
            Phase::StartDelay => &self.start_delay,
        }
    }

    /// The histograms with their phase names, in a fixed order.
    pub fn iter(&self) -> [(Phase, &WindowedHistogram); 5] {
        [
            (Phase::EndToEnd, &self.end_to_end),
            (Phase::Alignment, &self.alignment),
            (Phase::Sync, &self.sync),
            (Phase::Async, &self.async_),
            (Phase::StartDelay, &self.start_delay),
        ]
    }

    fn iter_mut(&mut self) -> [&mut WindowedHistogram; 5] {
        [&mut self.end_to_end, &mut self.alignment, &mut self.sync, &mut self.async_, &mut self.start_delay]
    }
}

/// The phases of a checkpoint whose durations are tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Trigger to the last acknowledgement.
    EndToEnd,
    /// First to last barrier at a subtask.
    Alignment,
    /// Synchronous snapshot.
    Sync,
    /// Asynchronous snapshot.
    Async,
    /// Trigger to the first barrier at a subtask.
    StartDelay,
}

/// The size histograms of a job.
pub struct SizeHistograms {
    /// Bytes persisted by each checkpoint.
    pub checkpointed: WindowedHistogram,
    /// Full state size (Flink 1.15+).
    pub full_state: WindowedHistogram,
    /// Bytes processed during alignment.
    pub processed: WindowedHistogram,
    /// In-flight bytes persisted.
    pub persisted: WindowedHistogram,
}

/// Per-operator (job vertex) histograms: every subtask's value of each phase.
pub struct OperatorState {
    /// The operator chain's name.
    pub name: String,
    /// Its phase histograms (`end_to_end` is each subtask's ack − trigger).
    pub phases: PhaseHistograms,
    /// When a checkpoint last brought data for it.
    pub last_seen: Timestamp,
}

/// A finished checkpoint, briefly, for the API and status page.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointRecord {
    /// Checkpoint id.
    pub id: u64,
    /// Completed or failed.
    pub status: CheckpointStatus,
    /// Checkpoint, unaligned checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// Trigger time.
    pub triggered_at: Timestamp,
    /// Completion or failure time.
    pub finished_at: Timestamp,
    /// End-to-end duration, ms.
    pub end_to_end_ms: Option<u64>,
    /// The slowest phases of any subtask, ms: start delay, alignment, sync, async.
    pub max_phases_ms: Option<[u64; 4]>,
    /// The subtask that acknowledged last: (operator name, subtask index, its ack − trigger).
    pub slowest_subtask: Option<(String, u32, u64)>,
    /// The phases of that slowest subtask, ms: start delay, alignment, sync, async (they add up
    /// to about its ack − trigger, unlike `max_phases_ms`, whose maxima may come from different
    /// subtasks). For the status page's timeline.
    #[serde(default)]
    pub slowest_phases_ms: Option<[u64; 4]>,
    /// Why it failed.
    pub failure_message: Option<String>,
    /// Subtasks that acknowledged, of those that had to (Flink's `num_acknowledged_subtasks`
    /// of `num_subtasks`); `None` in records written before it was kept.
    #[serde(default)]
    pub acknowledged: Option<(u32, u32)>,
    /// A failed checkpoint: the subtask that held it up, i.e. did not acknowledge before it
    /// failed (not the slowest that did acknowledge); `None` for a completed checkpoint or
    /// when the per-subtask details could not be fetched.
    #[serde(default)]
    pub holdout: Option<Holdout>,
}

/// The subtask that held a failed checkpoint up.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Holdout {
    /// The operator chain's name.
    pub operator: String,
    /// The subtask index.
    pub subtask: u32,
    /// When its acknowledgement came only after the checkpoint had failed (Flink still records
    /// it, marked aborted): its ack − trigger, ms. `None`: it never acknowledged.
    pub late_ack_ms: Option<u64>,
    /// Its phases, ms, as far as Flink reported them: start delay, alignment, sync, async.
    pub phases_ms: [Option<u64>; 4],
    /// Subtasks that never acknowledged (this one included, if it is one of them).
    pub never_acknowledged: u32,
    /// Subtasks that acknowledged only after the checkpoint had failed (this one included, if).
    pub acknowledged_late: u32,
}

/// One job.
pub struct JobState {
    /// The job name.
    pub name: String,
    /// The job's state (`RUNNING`, …).
    pub job_state: String,
    /// Whether the JobManager listed it in the last poll round.
    pub listed: bool,
    /// When it was last listed or polled.
    pub last_seen: Timestamp,
    /// Its checkpoint configuration.
    pub settings: Option<CheckpointSettings>,
    /// Flink's counts as last polled.
    pub flink_counts: CheckpointCounts,
    /// Totals of earlier JobManager incarnations (Flink's counts restart with a new JobMaster).
    pub earlier_incarnations: Totals,
    /// Checkpoints counted from Flink's counts without their own details.
    pub unobserved: Totals,
    /// Finished checkpoint ids already counted.
    pub seen: SeenIds,
    /// Checkpoints in progress at the last poll.
    pub in_progress: Vec<InProgressCheckpoint>,
    /// The latest completed checkpoint.
    pub last_completed: Option<CheckpointRecord>,
    /// The latest failed checkpoint.
    pub last_failed: Option<CheckpointRecord>,
    /// The latest restore: (checkpoint id, when).
    pub latest_restore: Option<(Option<u64>, Timestamp)>,
    /// Recent finished checkpoints, oldest first.
    pub recent: VecDeque<CheckpointRecord>,
    /// Job-level phase histograms: per checkpoint, the slowest subtask's value of each phase.
    pub phases: PhaseHistograms,
    /// Their P95s over time, for the status page (rebuilt from observations, not persisted).
    pub p95_history: P95History,
    /// Job-level size histograms.
    pub sizes: SizeHistograms,
    /// Per-operator histograms by vertex id.
    pub operators: BTreeMap<String, OperatorState>,
    /// The reference model run beside the job (rebuilt from observations, not persisted).
    pub shadow: Shadow,
    /// |observed − expected| trigger time of each compared checkpoint, ms.
    pub trigger_deviation: WindowedHistogram,
    /// Where each operator's subtasks ran (by operator name, then subtask index) when the
    /// poller last fetched the job's load; rebuilt from observations, not persisted.
    pub subtask_locations: BTreeMap<String, Vec<Option<String>>>,
    /// Its savepoints, counted apart from its checkpoints.
    pub savepoints: outbox::SavepointStats,
    /// Records counted by the poll being applied, moved to `State::outbox` right after it.
    outbox: Vec<outbox::StoredCheckpoint>,
}

/// The subtask that held a failed checkpoint up, among those that did not acknowledge before
/// it failed. A checkpoint a subtask failed (declined, its snapshot failed): one that never
/// acknowledged (the one that declined never does; others may only be late). Otherwise (expired
/// …): one whose acknowledgement came late (its phases say where it spent the time) before
/// one that never acknowledged. Within each, the first in the details' order (the poller lists
/// the vertices as Flink does, sources first). `None` without per-subtask details, or when every
/// subtask with details acknowledged in time.
fn holdout(checkpoint: &FinishedCheckpoint) -> Option<Holdout> {
    use crate::model::coordinator::FailureReason;
    use crate::observe::{OperatorCheckpoint, SubtaskCheckpoint};
    let lifetime = checkpoint.finished_at.since(checkpoint.triggered_at);
    let late = |st: &SubtaskCheckpoint| {
        if st.acknowledged { st.end_to_end_ms.filter(|e| *e > lifetime) } else { None }
    };
    let held: Vec<(&OperatorCheckpoint, &SubtaskCheckpoint)> = checkpoint
        .operators
        .iter()
        .flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
        .filter(|(_, st)| !st.acknowledged || late(st).is_some())
        .collect();
    let by_a_subtask = checkpoint
        .failure_message
        .as_deref()
        .and_then(FailureReason::from_message)
        .is_some_and(FailureReason::failed_by_a_subtask);
    // A subtask that failed the checkpoint never acknowledges it; one that was stuck until the
    // checkpoint expired may have acknowledged later.
    let (op, st) = held.iter().find(|(_, st)| st.acknowledged != by_a_subtask).or_else(|| held.first())?;
    let never_acknowledged = held.iter().filter(|(_, st)| !st.acknowledged).count() as u32;
    Some(Holdout {
        operator: op.name.clone(),
        subtask: st.index,
        late_ack_ms: late(st),
        phases_ms: [st.start_delay_ms, st.alignment_ms, st.sync_ms, st.async_ms],
        never_acknowledged,
        acknowledged_late: held.len() as u32 - never_acknowledged,
    })
}

impl JobState {
    fn new(window: WindowSpec, name: String, job_state: String, now: Timestamp) -> Self {
        JobState {
            name,
            job_state,
            listed: true,
            last_seen: now,
            settings: None,
            flink_counts: CheckpointCounts::default(),
            earlier_incarnations: Totals::default(),
            unobserved: Totals::default(),
            seen: SeenIds::default(),
            in_progress: Vec::new(),
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
            shadow: Shadow::new(),
            trigger_deviation: WindowedHistogram::new(window),
            subtask_locations: BTreeMap::new(),
            savepoints: outbox::SavepointStats::default(),
            outbox: Vec::new(),
        }
    }

    /// Keeps where the subtasks of each vertex in the load report run. A vertex the report
    /// has no location for keeps what was known: a failed fetch does not forget it.
    fn observe_locations(&mut self, report: &JobLoadReport) {
        let Some(topology) = &report.topology else { return };
        for load in &report.vertices {
            let Some(vertex) = topology.vertices.iter().find(|v| v.id == load.vertex_id) else { continue };
            if load.taskmanagers.iter().any(Option::is_some) {
                self.subtask_locations.insert(vertex.name.clone(), load.taskmanagers.clone());
            }
        }
    }

    /// Where a subtask of an operator ran at the last load fetch.
    pub fn subtask_location(&self, operator: &str, subtask: u32) -> Option<&str> {
        self.subtask_locations.get(operator)?.get(subtask as usize)?.as_deref()
    }

    /// Failed checkpoints since the last completed one, among the recent ones (Flink's
    /// consecutive-failure count, as far as the daemon saw the checkpoints).
    pub fn consecutive_failures(&self) -> u64 {
        self.recent.iter().rev().take_while(|r| r.status == CheckpointStatus::Failed).count() as u64
    }

    /// Checkpoints counted so far by status; equals Flink's `counts` (plus earlier
    /// JobManager incarnations), and never goes down.
    pub fn totals(&self) -> Totals {
        Totals {
            completed: self.earlier_incarnations.completed + self.flink_counts.completed,
            failed: self.earlier_incarnations.failed + self.flink_counts.failed,
        }
    }

    fn apply_poll(&mut self, poll: &JobPoll, window: WindowSpec) {
        let counts = poll.counts;
        if counts.completed < self.flink_counts.completed || counts.failed < self.flink_counts.failed {
            // A new JobMaster started counting from zero (JobManager failover): keep what the
            // earlier one counted so our counters never go down.
            self.earlier_incarnations.completed += self.flink_counts.completed;
            self.earlier_incarnations.failed += self.flink_counts.failed;
            self.flink_counts = CheckpointCounts::default();
        }
        let mut finished: Vec<&FinishedCheckpoint> = poll.finished.iter().collect();
        finished.sort_by_key(|cp| cp.id);
        let mut newly_seen = Totals::default();
        let mut latencies_changed = false;
        for checkpoint in finished {
            if !self.seen.insert(checkpoint.id) {
                continue;
            }
            match checkpoint.status {
                CheckpointStatus::Completed => newly_seen.completed += 1,
                CheckpointStatus::Failed => newly_seen.failed += 1,
            }
            latencies_changed |= self.record(checkpoint, poll.polled_at, window);
        }
        if latencies_changed {
            // Once per poll, after all its checkpoints: the P95s as the metrics show them now.
            self.p95_history.sample(&self.phases, poll.polled_at);
        }
        let delta_completed = counts.completed.saturating_sub(self.flink_counts.completed);
        let delta_failed = counts.failed.saturating_sub(self.flink_counts.failed);
        self.unobserved.completed += delta_completed.saturating_sub(newly_seen.completed);
        self.unobserved.failed += delta_failed.saturating_sub(newly_seen.failed);
        self.flink_counts = counts;
        self.name.clone_from(&poll.job_name);
        self.job_state.clone_from(&poll.job_state);
        self.last_seen = poll.polled_at;
        if poll.settings.is_some() {
            self.settings.clone_from(&poll.settings);
        }
        self.in_progress.clone_from(&poll.in_progress);
        if poll.latest_restore.is_some() {
            self.latest_restore = poll.latest_restore;
        }
        for deviation_ms in self.shadow.observe_poll(poll) {
            self.trigger_deviation.record(deviation_ms, poll.polled_at);
        }
    }

    /// Records a newly seen checkpoint; returns whether it went into the phase histograms.
    fn record(&mut self, checkpoint: &FinishedCheckpoint, at: Timestamp, window: WindowSpec) -> bool {
        let acknowledged = || {
            checkpoint
                .operators
                .iter()
                .flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
                .filter(|(_, st)| st.acknowledged)
        };
        let max_of = |f: fn(&crate::observe::SubtaskCheckpoint) -> Option<u64>| {
            acknowledged().filter_map(|(_, st)| f(st)).max()
        };
        let max_phases = [
            max_of(|st| st.start_delay_ms),
            max_of(|st| st.alignment_ms),
            max_of(|st| st.sync_ms),
            max_of(|st| st.async_ms),
        ];
        let slowest = acknowledged()
            .filter(|(_, st)| st.end_to_end_ms.is_some())
            .max_by_key(|(_, st)| st.end_to_end_ms);
        let slowest_subtask =
            slowest.and_then(|(op, st)| Some((op.name.clone(), st.index, st.end_to_end_ms?)));
        let slowest_phases_ms = slowest
            .and_then(|(_, st)| Some([st.start_delay_ms?, st.alignment_ms?, st.sync_ms?, st.async_ms?]));
        let holdout = (checkpoint.status == CheckpointStatus::Failed).then(|| holdout(checkpoint)).flatten();
        let record = CheckpointRecord {
            id: checkpoint.id,
            status: checkpoint.status,
            kind: checkpoint.kind,
            triggered_at: checkpoint.triggered_at,
            finished_at: checkpoint.finished_at,
            end_to_end_ms: checkpoint.end_to_end_ms,
            max_phases_ms: match max_phases {
                [Some(a), Some(b), Some(c), Some(d)] => Some([a, b, c, d]),
                _ => None,
            },
            slowest_subtask,
            slowest_phases_ms,
            failure_message: checkpoint.failure_message.clone(),
            acknowledged: (checkpoint.num_subtasks > 0)
                .then_some((checkpoint.num_acknowledged, checkpoint.num_subtasks)),
            holdout,
        };
        // Counted once, here: the store gets its record, and a savepoint its own counters.
        self.savepoints.observe(&record);
        let stored = outbox::StoredCheckpoint::new(&record, checkpoint, |op, i| {
            self.subtask_location(op, i).map(str::to_owned)
        });
        self.outbox.push(stored);
        let newer = |latest: &Option<CheckpointRecord>| latest.as_ref().is_none_or(|l| l.id < checkpoint.id);
        match checkpoint.status {
            CheckpointStatus::Completed if newer(&self.last_completed) => {
                self.last_completed = Some(record.clone())
            }
            CheckpointStatus::Failed if newer(&self.last_failed) => self.last_failed = Some(record.clone()),
            _ => {}
        }
        let position = self.recent.iter().position(|r| r.id > record.id).unwrap_or(self.recent.len());
        self.recent.insert(position, record);
        while self.recent.len() > RECENT_CHECKPOINTS {
            self.recent.pop_front();
        }

        // Latency and size statistics describe checkpoints that completed. Savepoints are
        // user-triggered and often canonical (full) snapshots: they would distort the P95s.
        if checkpoint.status != CheckpointStatus::Completed || checkpoint.kind == SnapshotKind::Savepoint {
            return false;
        }
        if let Some(e2e) = checkpoint.end_to_end_ms {
            self.phases.end_to_end.record(e2e, at);
        }
        let [start_delay, alignment, sync, async_] = max_phases;
        for (value, histogram) in [
            (start_delay, &mut self.phases.start_delay),
            (alignment, &mut self.phases.alignment),
            (sync, &mut self.phases.sync),
            (async_, &mut self.phases.async_),
        ] {
            if let Some(v) = value {
                histogram.record(v, at);
            }
        }
        for (value, histogram) in [
            (checkpoint.checkpointed_bytes, &mut self.sizes.checkpointed),
            (checkpoint.full_state_bytes, &mut self.sizes.full_state),
            (checkpoint.processed_bytes, &mut self.sizes.processed),
            (checkpoint.persisted_bytes, &mut self.sizes.persisted),
        ] {
            if let Some(v) = value {
                histogram.record(v, at);
            }
        }
        for op in &checkpoint.operators {
            let state = self.operators.entry(op.vertex_id.clone()).or_insert_with(|| OperatorState {
                name: op.name.clone(),
                phases: PhaseHistograms::new(window),
                last_seen: at,
            });
            state.last_seen = at;
            // A checkpoint converted before the poller had the job's graph names the operator
            // by its vertex id; the first one that knows the name renames it.
            if state.name != op.name {
                state.name.clone_from(&op.name);
            }
            for st in op.subtasks.iter().filter(|st| st.acknowledged) {
                for (value, histogram) in [
                    (st.end_to_end_ms, &mut state.phases.end_to_end),
                    (st.start_delay_ms, &mut state.phases.start_delay),
                    (st.alignment_ms, &mut state.phases.alignment),
                    (st.sync_ms, &mut state.phases.sync),
                    (st.async_ms, &mut state.phases.async_),
                ] {
                    if let Some(v) = value {
                        histogram.record(v, at);
                    }
                }
            }
        }
        true
    }

    fn expire(&mut self, now: Timestamp) {
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

impl State {
    /// Empty state whose histograms use `window`.
    pub fn new(window: WindowSpec) -> Self {
        State { window, clusters: BTreeMap::new(), outbox: outbox::Outbox::default() }
    }

    /// The histogram window.
    pub fn window(&self) -> WindowSpec {
        self.window
    }

    /// The watched clusters by name.
    pub fn clusters(&self) -> &BTreeMap<String, ClusterState> {
        &self.clusters
    }

    /// Applies one observation made at `now`.
    pub fn apply(&mut self, observation: &Observation, now: Timestamp) {
        match observation {
            Observation::ClusterPolled(poll) => self.apply_cluster_poll(poll, now),
            Observation::JobPolled(poll) => {
                let window = self.window;
                let cluster = self.cluster_mut(&poll.key.cluster);
                let job = cluster.jobs.entry(poll.key.job_id.clone()).or_insert_with(|| {
                    JobState::new(window, poll.job_name.clone(), poll.job_state.clone(), now)
                });
                job.listed = true;
                job.shadow.trigger.set_flink_version(cluster.flink_version.as_deref());
                job.apply_poll(poll, window);
                let counted = std::mem::take(&mut job.outbox);
                self.outbox.extend(&poll.key.cluster, &poll.key.job_id, counted);
            }
            Observation::JobLoad(report) => {
                let job = self
                    .clusters
                    .get_mut(&report.key.cluster)
                    .and_then(|c| c.jobs.get_mut(&report.key.job_id));
                if let Some(job) = job {
                    job.observe_locations(report);
                    job.shadow.observe_load(report);
                }
            }
            Observation::LogEvents(events) => {
                for event in events {
                    self.cluster_mut(&event.cluster).logs.apply_event(event);
                }
            }
            Observation::LogRead(read) => self.cluster_mut(&read.cluster).logs.apply_read(read),
            Observation::LogTailer(report) => self.cluster_mut(&report.cluster).logs.apply_report(report),
        }
    }

    /// Keeps exactly these clusters (after a config reload), dropping the state of others.
    pub fn retain_clusters(&mut self, names: &[String]) {
        self.clusters.retain(|name, _| names.contains(name));
        for name in names {
            self.cluster_mut(name);
        }
    }

    /// Finished checkpoint ids of a job that have not been counted yet, so the poller fetches
    /// details only for those.
    pub fn unseen(&self, cluster: &str, job_id: &str, ids: &[u64]) -> Vec<u64> {
        let seen = self.clusters.get(cluster).and_then(|c| c.jobs.get(job_id)).map(|j| &j.seen);
        ids.iter().copied().filter(|&id| !seen.is_some_and(|s| s.contains(id))).collect()
    }

    /// Whether every cluster has answered at least once.
    pub fn all_answered(&self) -> bool {
        self.clusters.values().all(|c| c.answered_once)
    }

    /// Moves the sliding windows to `now` and forgets jobs unlisted for longer than a window.
    pub fn expire(&mut self, now: Timestamp) {
        let horizon = now.millis() - self.window.window_ms as i64;
        for cluster in self.clusters.values_mut() {
            cluster.poll_duration.expire(now);
            cluster.jobs.retain(|_, job| job.listed || job.last_seen.millis() > horizon);
            for job in cluster.jobs.values_mut() {
                job.expire(now);
            }
        }
    }

    fn cluster_mut(&mut self, name: &str) -> &mut ClusterState {
        let window = self.window;
        self.clusters.entry(name.to_string()).or_insert_with(|| ClusterState {
            reachable: false,
            answered_once: false,
            flink_version: None,
            polls_total: 0,
            poll_errors: BTreeMap::new(),
            last_poll_duration_ms: 0,
            last_success: None,
            poll_duration: WindowedHistogram::new(window),
            jobs: BTreeMap::new(),
            logs: logs::LogState::default(),
        })
    }

    fn apply_cluster_poll(&mut self, poll: &ClusterPoll, now: Timestamp) {
        let cluster = self.cluster_mut(&poll.cluster);
        cluster.polls_total += 1;
        cluster.reachable = poll.reachable;
        cluster.last_poll_duration_ms = poll.duration_ms;
        cluster.poll_duration.record(poll.duration_ms, now);
        for kind in &poll.errors {
            *cluster.poll_errors.entry(kind).or_insert(0) += 1;
        }
        if poll.reachable {
            cluster.answered_once = true;
            cluster.last_success = Some(now);
        }
        if poll.flink_version.is_some() {
            cluster.flink_version.clone_from(&poll.flink_version);
        }
        if let Some(jobs) = &poll.jobs {
            for job in cluster.jobs.values_mut() {
                job.listed = false;
            }
            for listed in jobs {
                if let Some(job) = cluster.jobs.get_mut(&listed.job_id) {
                    job.listed = true;
                    job.last_seen = now;
                    job.name.clone_from(&listed.name);
                    job.job_state.clone_from(&listed.state);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{JobKey, OperatorCheckpoint, SubtaskCheckpoint};

    const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

    fn completed(id: u64, e2e: u64) -> FinishedCheckpoint {
        FinishedCheckpoint {
            id,
            status: CheckpointStatus::Completed,
            kind: SnapshotKind::Checkpoint,
            triggered_at: Timestamp(id as i64 * 1000),
            finished_at: Timestamp(id as i64 * 1000 + e2e as i64),
            end_to_end_ms: Some(e2e),
            checkpointed_bytes: Some(100),
            full_state_bytes: Some(100),
            processed_bytes: Some(0),
            persisted_bytes: Some(0),
            num_subtasks: 2,
            num_acknowledged: 2,
            failure_message: None,
            operators: vec![OperatorCheckpoint {
                vertex_id: "v1".into(),
                name: "map".into(),
                subtasks: (0..2)
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
                    .collect(),
            }],
        }
    }

    fn poll(completed_count: u64, failed: u64, finished: Vec<FinishedCheckpoint>) -> Observation {
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
        })
    }

    fn job(state: &State) -> &JobState {
        &state.clusters()["c"].jobs["j"]
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

    #[test]
    fn counters_never_go_down_when_a_new_jobmaster_counts_from_zero() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(10, 2, vec![completed(12, 50)]), Timestamp(0));
        state.apply(&poll(1, 0, vec![completed(13, 50)]), Timestamp(1));
        assert_eq!(job(&state).totals(), Totals { completed: 11, failed: 2 });
    }

    #[test]
    fn remembered_ids_are_bounded() {
        let mut seen = SeenIds::default();
        for id in 0..5000 {
            assert!(seen.insert(id));
        }
        assert_eq!(seen.ids.len(), SEEN_IDS_CAPACITY);
        assert!((0..5000).all(|id| seen.contains(id)));
        assert!(!seen.insert(17));
    }

    #[test]
    fn restored_state_does_not_count_again() {
        let mut state = State::new(WINDOW);
        let obs = poll(2, 0, vec![completed(1, 50), completed(2, 70)]);
        state.apply(&obs, Timestamp(0));
        let bytes = persist::to_bytes(&persist::snapshot(&state));
        let mut restored = persist::restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
        restored.apply(&obs, Timestamp(1));
        let j = job(&restored);
        assert_eq!(j.totals(), Totals { completed: 2, failed: 0 });
        assert_eq!(j.phases.end_to_end.summary(), job(&state).phases.end_to_end.summary());
        assert_eq!(j.operators["v1"].phases.alignment.summary().count, 4);
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

    #[test]
    fn a_state_file_of_the_previous_format_loads_with_empty_log_state() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(2, 0, vec![completed(1, 50), completed(2, 70)]), Timestamp(0));
        // The previous version wrote the same document without the `logs` section.
        let mut old: serde_json::Value =
            serde_json::from_slice(&persist::to_bytes(&persist::snapshot(&state))).unwrap();
        assert!(old.as_object_mut().unwrap().remove("logs").is_some());
        let restored = persist::restore(WINDOW, serde_json::from_value(old).unwrap());
        assert_eq!(job(&restored).totals(), Totals { completed: 2, failed: 0 });
        assert_eq!(job(&restored).phases.end_to_end.summary().count, 2);
        let logs = &restored.clusters()["c"].logs;
        assert!(logs.events.is_empty() && logs.positions.is_empty() && logs.recent.is_empty());
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
