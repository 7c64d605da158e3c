//! The observation vocabulary: what sources (REST poller, log tailer) and the model report.
//!
//! Every value here is plain data. Sources produce observations; `State::apply` consumes them.
//! The reference model produces the same types, so everything downstream can be tested on
//! simulated input.

use crate::time::Timestamp;

mod config;
mod evidence;
mod job_status;
mod log;
mod rescale;
mod storage;
mod threads;
pub use config::*;
pub use evidence::*;
pub use job_status::*;
pub use log::*;
pub use rescale::*;
pub use storage::*;
pub use threads::*;

/// Identifies a job within a cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey {
    /// The configured cluster name.
    pub cluster: String,
    /// Flink's job id (32 hex digits).
    pub job_id: String,
}

/// One observation, stamped by the source that made it.
#[derive(Clone, Debug)]
pub enum Observation {
    /// One poll round of a cluster finished (successfully or not).
    ClusterPolled(ClusterPoll),
    /// The checkpoint statistics of one job as polled.
    JobPolled(JobPoll),
    /// Checkpoint events recognised in log files (or synthesised from REST), in file order.
    LogEvents(Vec<LogEvent>),
    /// One read cycle of a log tailer: its events and where it stands now. Applied as one, so a
    /// persisted snapshot holds the events counted up to a read position together with it.
    LogRead(LogRead),
    /// The cumulative counters of one log tailer (`[[logs]]` entry).
    LogTailer(TailerReport),
    /// A job's graph and per-subtask load, for the alignment shadow (fetched rarely).
    JobLoad(JobLoadReport),
    /// A job's latest restore and, when fetched, when its subtasks were running again.
    Restore(RestoreReport),
    /// A job's whole checkpoint configuration, for the advisor (fetched on first sight and
    /// when the job changes state).
    JobConfiguration(JobKey, Box<CheckpointConfiguration>),
    /// The stack of a subtask that held an in-progress checkpoint up (`sources::threads`).
    ThreadSampled(ThreadReport),
    /// What Flink's metrics said about a cluster's subtasks and TaskManagers in one round.
    Evidence(EvidenceRound),
    /// What the checkpoint storage of a cluster's jobs held in one round (`sources::storage`).
    Storage(StorageRound),
    /// A cluster's applications and their jobs (Flink 2.3+, `/applications/overview`).
    Applications(ApplicationsReport),
    /// A job's rescales (Flink 2.3's rescale history, or a parallelism changed by a restart).
    Rescales(RescaleReport),
    /// A job's status metrics (`numRestarts`, `runningTime`, …), fetched with its load.
    JobStatus(JobKey, JobStatusMetrics),
}

/// A cluster's applications as one poll round saw them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplicationsReport {
    /// The configured cluster name.
    pub cluster: String,
    /// Its applications (at most the poller's cap).
    pub applications: Vec<Application>,
}

/// One application (FLIP-549): several jobs under one id and name.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Application {
    /// The application id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its status (`RUNNING`, …).
    pub status: String,
    /// The ids of its jobs.
    pub job_ids: Vec<String>,
}

/// A thread sample for a job, as the thread looker reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadReport {
    /// Which job.
    pub(crate) key: JobKey,
    /// The sample.
    pub(crate) sample: ThreadSample,
}

/// What a job last restored from (`latest.restored` of `/checkpoints`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RestoredFrom {
    /// The checkpoint or savepoint id.
    pub checkpoint_id: Option<u64>,
    /// Whether it was a savepoint.
    pub is_savepoint: bool,
    /// Where it was stored.
    pub external_path: Option<String>,
    /// When the JobManager restored it (Flink's `restore_timestamp`): the restore's start. It
    /// tells restores apart (a restore of the same checkpoint again has a new one).
    pub restored_at: Timestamp,
}

/// One subtask's current execution attempt, from `/jobs/:id/vertices/:v/subtasktimes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubtaskStart {
    /// The operator chain's name.
    pub operator: String,
    /// The subtask index (0-based).
    pub subtask: u32,
    /// When it entered INITIALIZING (restoring its state), if it did.
    pub initializing_at: Option<Timestamp>,
    /// When it entered RUNNING, if it did.
    pub running_at: Option<Timestamp>,
    /// Whether it is RUNNING (or FINISHED) now: its latest state.
    pub running_now: bool,
}

/// A job's latest restore as the poller saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreReport {
    /// Which job.
    pub key: JobKey,
    /// What it restored from, and when.
    pub restored: RestoredFrom,
    /// When the job last entered RESTARTING (`timestamps` of `/jobs/:id`), if it did.
    pub restarting_at: Option<Timestamp>,
    /// Every subtask's current attempt; `None` when they could not be fetched.
    pub subtasks: Option<Vec<SubtaskStart>>,
}

/// A job's rescales as one poll saw them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RescaleReport {
    /// Which job.
    pub key: JobKey,
    /// Its rescales, oldest first (Flink's history, or the one parallelism change just seen).
    pub rescales: Vec<Rescale>,
}

/// The outcome of one poll round of a cluster.
#[derive(Clone, Debug)]
pub struct ClusterPoll {
    /// The configured cluster name.
    pub cluster: String,
    /// How long the round took, ms.
    pub duration_ms: u64,
    /// Flink's version, when `/overview` answered.
    pub flink_version: Option<String>,
    /// The jobs listed by `/jobs/overview`, when it answered.
    pub jobs: Option<Vec<JobSummary>>,
    /// Errors during the round, by kind (`connect`, `timeout`, `http_status`, `decode`).
    pub errors: Vec<&'static str>,
    /// Whether the cluster's JobManager answered at all this round.
    pub reachable: bool,
}

/// A job as listed by the JobManager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSummary {
    /// Flink's job id.
    pub job_id: String,
    /// The job name.
    pub name: String,
    /// `RUNNING`, `RESTARTING`, `FAILED`, …
    pub state: JobStatus,
}

/// A job's status as Flink names it (`org.apache.flink.api.common.JobStatus`). Flink may add a
/// status (or a JobManager may answer something odd): that is kept as [`JobStatus::Other`],
/// never an error. Written out (metrics, API, status page) as Flink spells it, by
/// [`JobStatus::as_str`]; serialised as that same string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// `INITIALIZING`: submitted, the JobManager is setting it up.
    Initializing,
    /// `CREATED`: set up, no task scheduled yet.
    Created,
    /// `RUNNING`.
    Running,
    /// `FAILING`: failed, tasks being cancelled.
    Failing,
    /// `FAILED`: ended for good after a failure.
    Failed,
    /// `CANCELLING`.
    Cancelling,
    /// `CANCELED` (Flink's spelling).
    Canceled,
    /// `FINISHED`: every task finished.
    Finished,
    /// `RESTARTING`: failed, restarting from its latest checkpoint.
    Restarting,
    /// `SUSPENDED`: the JobManager stopped without ending the job (HA failover, shutdown).
    Suspended,
    /// `RECONCILING`: a new JobManager is taking over the running job.
    Reconciling,
    /// Anything else, as Flink sent it (an empty string when Flink sent none).
    Other(String),
}

impl JobStatus {
    /// Every status Flink defines, in the order of its enum.
    pub(crate) const KNOWN: [JobStatus; 11] = [
        JobStatus::Initializing,
        JobStatus::Created,
        JobStatus::Running,
        JobStatus::Failing,
        JobStatus::Failed,
        JobStatus::Cancelling,
        JobStatus::Canceled,
        JobStatus::Finished,
        JobStatus::Restarting,
        JobStatus::Suspended,
        JobStatus::Reconciling,
    ];

    /// Reads Flink's spelling; anything else is kept as [`JobStatus::Other`].
    pub fn parse(s: &str) -> JobStatus {
        JobStatus::KNOWN
            .into_iter()
            .find(|k| k.as_str() == s)
            .unwrap_or_else(|| JobStatus::Other(s.to_string()))
    }

    /// Flink's exact spelling (for [`JobStatus::Other`], what was read).
    pub(crate) fn as_str(&self) -> &str {
        match self {
            JobStatus::Initializing => "INITIALIZING",
            JobStatus::Created => "CREATED",
            JobStatus::Running => "RUNNING",
            JobStatus::Failing => "FAILING",
            JobStatus::Failed => "FAILED",
            JobStatus::Cancelling => "CANCELLING",
            JobStatus::Canceled => "CANCELED",
            JobStatus::Finished => "FINISHED",
            JobStatus::Restarting => "RESTARTING",
            JobStatus::Suspended => "SUSPENDED",
            JobStatus::Reconciling => "RECONCILING",
            JobStatus::Other(s) => s,
        }
    }

    /// Whether the job has ended for good: Flink's globally terminal states (FINISHED,
    /// CANCELED, FAILED) and SUSPENDED (the JobManager stopped without ending the job; it
    /// checkpoints no more under this JobManager). The one definition of "the job has ended":
    /// the poller's final polls, `State`, the rules, the API and `diagnose` all use it (a caller
    /// that needs another set says so beside it and builds it from this one).
    pub(crate) fn has_ended(&self) -> bool {
        matches!(self, JobStatus::Finished | JobStatus::Canceled | JobStatus::Failed | JobStatus::Suspended)
    }

    /// Whether the job is on the way to an end or a restart: its checkpoint coordinator has
    /// stopped.
    pub(crate) fn is_stopping(&self) -> bool {
        matches!(self, JobStatus::Cancelling | JobStatus::Failing | JobStatus::Restarting)
    }

    /// Whether a checkpoint of a job in this status can be in progress. Not when the job has
    /// ended and, on purpose a larger set, not while it is stopping either: its coordinator
    /// stopped (or restarts) and aborted whatever was pending.
    pub(crate) fn can_checkpoint(&self) -> bool {
        !self.has_ended() && !self.is_stopping()
    }
}

impl From<&str> for JobStatus {
    fn from(s: &str) -> Self {
        JobStatus::parse(s)
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for JobStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for JobStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(JobStatus::parse(&s))
    }
}

/// Flink's cumulative checkpoint counts for a job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointCounts {
    /// Completed checkpoints and savepoints.
    pub completed: u64,
    /// Failed checkpoints (including attempts that never got an id).
    pub failed: u64,
    /// In progress now.
    pub in_progress: u64,
    /// Restores.
    pub restored: u64,
}

/// Final status of a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CheckpointStatus {
    /// Acknowledged by every subtask and finalised.
    Completed,
    /// Expired, declined or otherwise aborted.
    Failed,
}

impl CheckpointStatus {
    /// The label value used in metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CheckpointStatus::Completed => "completed",
            CheckpointStatus::Failed => "failed",
        }
    }
}

/// What kind of snapshot a checkpoint was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SnapshotKind {
    /// A periodic (aligned) checkpoint.
    Checkpoint,
    /// An unaligned checkpoint (from `checkpoint_type` in 1.15+, or from subtask flags).
    UnalignedCheckpoint,
    /// A savepoint (user triggered).
    Savepoint,
}

/// The checkpoint the poll of a job saw in progress.
#[derive(Clone, Debug, PartialEq)]
pub struct InProgressCheckpoint {
    /// Checkpoint id.
    pub id: u64,
    /// Trigger time.
    pub triggered_at: Timestamp,
    /// Subtasks that must acknowledge.
    pub(crate) num_subtasks: u32,
    /// Subtasks that acknowledged so far.
    pub(crate) num_acknowledged: u32,
}

/// The checkpoint statistics of one job, from one poll.
#[derive(Clone, Debug)]
pub struct JobPoll {
    /// Which job.
    pub key: JobKey,
    /// Its name.
    pub job_name: String,
    /// Its status.
    pub job_state: JobStatus,
    /// When the poll was answered.
    pub polled_at: Timestamp,
    /// Flink's own counts.
    pub counts: CheckpointCounts,
    /// The checkpoint configuration, when known.
    pub settings: Option<CheckpointSettings>,
    /// Checkpoints in progress.
    pub in_progress: Vec<InProgressCheckpoint>,
    /// Finished checkpoints in Flink's history (new and already seen ones alike).
    pub finished: Vec<FinishedCheckpoint>,
    /// The latest restore, if any: (checkpoint id, when).
    pub latest_restore: Option<(Option<u64>, Timestamp)>,
    /// Finished checkpoints Flink still lists whose details the poller left for a later round
    /// (more new ones than `max_history_per_poll`): not in `finished`, and not unobserved.
    pub deferred: Deferred,
}

/// Finished checkpoints of a poll left for a later round, by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deferred {
    /// Completed ones.
    pub(crate) completed: u64,
    /// Failed ones.
    pub(crate) failed: u64,
}

/// A completed or failed checkpoint with everything known about it.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedCheckpoint {
    /// Checkpoint id.
    pub id: u64,
    /// Completed or failed.
    pub status: CheckpointStatus,
    /// Checkpoint, unaligned checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// Trigger time.
    pub triggered_at: Timestamp,
    /// Completion time (latest ack) or failure time.
    pub finished_at: Timestamp,
    /// Latest ack − trigger, ms.
    pub end_to_end_ms: Option<u64>,
    /// Bytes this checkpoint persisted (incremental size).
    pub checkpointed_bytes: Option<u64>,
    /// Full state size; unknown before Flink 1.15.
    pub full_state_bytes: Option<u64>,
    /// Bytes processed during alignment.
    pub(crate) processed_bytes: Option<u64>,
    /// In-flight bytes persisted.
    pub persisted_bytes: Option<u64>,
    /// Subtasks that had to acknowledge.
    pub(crate) num_subtasks: u32,
    /// Subtasks that acknowledged.
    pub(crate) num_acknowledged: u32,
    /// Why it failed.
    pub failure_message: Option<String>,
    /// Per-operator details, when they could be fetched (only the newest checkpoints have them).
    pub operators: Vec<OperatorCheckpoint>,
    /// Where a completed checkpoint is stored (`external_path`, e.g. `s3://b/ckpt/<job>/chk-7`).
    pub external_path: Option<String>,
}

/// A checkpoint built by hand (tests, benches): [`FinishedCheckpoint::completed`] gives a plain
/// completed checkpoint, and the chained setters change what a case needs.
impl FinishedCheckpoint {
    /// Completed checkpoint `id`, triggered at `triggered_at`, acknowledged `end_to_end_ms` later;
    /// no sizes, no subtasks, no operator details.
    pub fn completed(id: u64, triggered_at: Timestamp, end_to_end_ms: u64) -> FinishedCheckpoint {
        FinishedCheckpoint {
            id,
            status: CheckpointStatus::Completed,
            kind: SnapshotKind::Checkpoint,
            triggered_at,
            finished_at: Timestamp(triggered_at.0 + end_to_end_ms as i64),
            end_to_end_ms: Some(end_to_end_ms),
            checkpointed_bytes: None,
            full_state_bytes: None,
            processed_bytes: None,
            persisted_bytes: None,
            num_subtasks: 0,
            num_acknowledged: 0,
            failure_message: None,
            operators: Vec::new(),
            external_path: None,
        }
    }

    /// Failed instead, with this message.
    pub fn failed(mut self, message: &str) -> FinishedCheckpoint {
        self.status = CheckpointStatus::Failed;
        self.failure_message = Some(message.to_string());
        self
    }

    /// A savepoint or unaligned checkpoint instead.
    pub fn kind(mut self, kind: SnapshotKind) -> FinishedCheckpoint {
        self.kind = kind;
        self
    }

    /// Sizes: persisted this time and in full; nothing processed during alignment nor in flight.
    pub fn sizes(mut self, checkpointed_bytes: u64, full_state_bytes: u64) -> FinishedCheckpoint {
        self.checkpointed_bytes = Some(checkpointed_bytes);
        self.full_state_bytes = Some(full_state_bytes);
        self.processed_bytes = Some(0);
        self.persisted_bytes = Some(0);
        self
    }

    /// `acknowledged` of `subtasks` subtasks acknowledged.
    pub fn acknowledged(mut self, acknowledged: u32, subtasks: u32) -> FinishedCheckpoint {
        self.num_acknowledged = acknowledged;
        self.num_subtasks = subtasks;
        self
    }

    /// One more operator chain with these subtask details.
    pub fn operator(
        mut self,
        vertex_id: &str,
        name: &str,
        subtasks: Vec<SubtaskCheckpoint>,
    ) -> FinishedCheckpoint {
        self.operators.push(OperatorCheckpoint { vertex_id: vertex_id.into(), name: name.into(), subtasks });
        self
    }
}

/// One operator chain (job vertex) of a checkpoint, with its subtasks.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorCheckpoint {
    /// The vertex id.
    pub(crate) vertex_id: String,
    /// The vertex name.
    pub(crate) name: String,
    /// Per-subtask statistics (pending subtasks included, with `acknowledged = false`).
    pub subtasks: Vec<SubtaskCheckpoint>,
}

/// Phase timings of one subtask's part of a checkpoint, durations in ms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubtaskCheckpoint {
    /// Subtask index.
    pub index: u32,
    /// Whether it acknowledged.
    pub acknowledged: bool,
    /// Ack − trigger.
    pub end_to_end_ms: Option<u64>,
    /// Trigger until the first barrier arrived.
    pub start_delay_ms: Option<u64>,
    /// First to last barrier.
    pub alignment_ms: Option<u64>,
    /// Synchronous snapshot.
    pub sync_ms: Option<u64>,
    /// Asynchronous snapshot.
    pub async_ms: Option<u64>,
    /// Bytes processed during alignment.
    pub processed_bytes: Option<u64>,
    /// In-flight bytes persisted.
    pub persisted_bytes: Option<u64>,
    /// Whether this subtask's checkpoint was unaligned.
    pub unaligned: bool,
    /// Its state size, bytes (Flink's `state_size`: the full size from 1.15, before it what
    /// the checkpoint persisted, the increment of an incremental checkpoint).
    pub state_size_bytes: Option<u64>,
    /// What it uploaded this time, bytes (Flink's `checkpointed_size`, 1.15+).
    pub checkpointed_bytes: Option<u64>,
}

/// Flink's `CheckpointFailureReason`, with the message REST and logs show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is named after Flink's enum constant
pub enum FailureReason {
    PeriodicSchedulerShutdown,
    TooManyCheckpointRequests,
    MinimumTimeBetweenCheckpoints,
    NotAllRequiredTasksRunning,
    IoException,
    BlockingOutputExist,
    CheckpointAsyncException,
    ChannelStateSharedStreamException,
    CheckpointExpired,
    CheckpointSubsumed,
    CheckpointDeclined,
    CheckpointDeclinedTaskNotReady,
    CheckpointDeclinedTaskClosing,
    CheckpointDeclinedSubsumed,
    CheckpointDeclinedOnCancellationBarrier,
    CheckpointDeclinedInputEndOfStream,
    CheckpointCoordinatorShutdown,
    CheckpointCoordinatorSuspend,
    JobFailoverRegion,
    TaskFailure,
    TaskCheckpointFailure,
    UnknownTaskCheckpointNotificationFailure,
    FinalizeCheckpointFailure,
    TriggerCheckpointFailure,
}

impl FailureReason {
    /// Every reason, most specific message first (so prefix matching picks the right one).
    pub(crate) const ALL: [FailureReason; 24] = [
        FailureReason::CheckpointDeclinedTaskNotReady,
        FailureReason::CheckpointDeclinedTaskClosing,
        FailureReason::CheckpointDeclinedSubsumed,
        FailureReason::CheckpointDeclinedInputEndOfStream,
        FailureReason::CheckpointDeclined,
        FailureReason::PeriodicSchedulerShutdown,
        FailureReason::TooManyCheckpointRequests,
        FailureReason::MinimumTimeBetweenCheckpoints,
        FailureReason::NotAllRequiredTasksRunning,
        FailureReason::IoException,
        FailureReason::BlockingOutputExist,
        FailureReason::CheckpointAsyncException,
        FailureReason::ChannelStateSharedStreamException,
        FailureReason::CheckpointExpired,
        FailureReason::CheckpointSubsumed,
        FailureReason::CheckpointDeclinedOnCancellationBarrier,
        FailureReason::CheckpointCoordinatorShutdown,
        FailureReason::CheckpointCoordinatorSuspend,
        FailureReason::JobFailoverRegion,
        FailureReason::TaskFailure,
        FailureReason::TaskCheckpointFailure,
        FailureReason::UnknownTaskCheckpointNotificationFailure,
        FailureReason::FinalizeCheckpointFailure,
        FailureReason::TriggerCheckpointFailure,
    ];

    /// `CheckpointFailureReason.message()`.
    pub(crate) fn message(self) -> &'static str {
        use FailureReason::*;
        match self {
            PeriodicSchedulerShutdown => "Periodic checkpoint scheduler is shut down.",
            TooManyCheckpointRequests => "The maximum number of queued checkpoint requests exceeded",
            MinimumTimeBetweenCheckpoints => {
                "The minimum time between checkpoints is still pending. Checkpoint will be triggered after the minimum time."
            }
            NotAllRequiredTasksRunning => "Not all required tasks are currently running.",
            IoException => "An Exception occurred while triggering the checkpoint. IO-problem detected.",
            BlockingOutputExist => "Blocking output edge exists in running tasks.",
            CheckpointAsyncException => "Asynchronous task checkpoint failed.",
            ChannelStateSharedStreamException => {
                "The checkpoint was aborted due to exception of other subtasks sharing the ChannelState file."
            }
            CheckpointExpired => "Checkpoint expired before completing.",
            CheckpointSubsumed => "Checkpoint has been subsumed.",
            CheckpointDeclined => "Checkpoint was declined.",
            CheckpointDeclinedTaskNotReady => "Checkpoint was declined (tasks not ready)",
            CheckpointDeclinedTaskClosing => "Checkpoint was declined (task is closing)",
            CheckpointDeclinedSubsumed => {
                "Checkpoint was canceled because a barrier from newer checkpoint was received."
            }
            CheckpointDeclinedOnCancellationBarrier => "Task received cancellation from one of its inputs",
            CheckpointDeclinedInputEndOfStream => {
                "Checkpoint was declined because one input stream is finished"
            }
            CheckpointCoordinatorShutdown => "CheckpointCoordinator shutdown.",
            CheckpointCoordinatorSuspend => "Checkpoint Coordinator is suspending.",
            JobFailoverRegion => "FailoverRegion is restarting.",
            TaskFailure => "Task has failed.",
            TaskCheckpointFailure => "Task local checkpoint failure.",
            UnknownTaskCheckpointNotificationFailure => "Unknown task for the checkpoint to notify.",
            FinalizeCheckpointFailure => "Failure to finalize checkpoint.",
            TriggerCheckpointFailure => "Trigger checkpoint failure.",
        }
    }

    /// The reason whose message `text` (a REST `failure_message` or a log line) contains.
    pub(crate) fn from_message(text: &str) -> Option<FailureReason> {
        // Flink 1.x wrapped some messages; the known sentence is always in there.
        let trimmed = |m: &'static str| m.trim_end_matches('.');
        FailureReason::ALL.into_iter().find(|r| text.contains(trimmed(r.message())))
    }

    /// Whether a subtask failed the checkpoint (it declined, or its own snapshot failed and it
    /// declined for that), rather than the coordinator (expired, a task failure, a shutdown …).
    pub(crate) fn failed_by_a_subtask(self) -> bool {
        use FailureReason::*;
        matches!(
            self,
            CheckpointDeclined
                | CheckpointDeclinedTaskNotReady
                | CheckpointDeclinedTaskClosing
                | CheckpointDeclinedSubsumed
                | CheckpointDeclinedOnCancellationBarrier
                | CheckpointDeclinedInputEndOfStream
                | CheckpointAsyncException
                | TaskCheckpointFailure
        )
    }

    /// Whether this reason counts toward `tolerable-failed-checkpoints`
    /// (`CheckpointFailureManager.checkFailureCounter`).
    pub(crate) fn counts_toward_tolerable(self, finalize_failure_counts: bool) -> bool {
        use FailureReason::*;
        match self {
            IoException | CheckpointAsyncException | CheckpointDeclined | CheckpointExpired => true,
            FinalizeCheckpointFailure => finalize_failure_counts,
            _ => false,
        }
    }
}

/// How a checkpoint ended: `completed`, `expired`, `declined` or `failed` (the API's and
/// `diagnose`'s outcome).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Every subtask acknowledged and the coordinator finalised it.
    Completed,
    /// It ran out of time (`execution.checkpointing.timeout`).
    Expired,
    /// A task declined it.
    Declined,
    /// Any other failure.
    Failed,
}

impl Outcome {
    /// The outcome of a finished checkpoint from its status and Flink's failure message.
    pub(crate) fn of(status: CheckpointStatus, failure_message: Option<&str>) -> Outcome {
        match status {
            CheckpointStatus::Completed => Outcome::Completed,
            CheckpointStatus::Failed => match failure_message.and_then(FailureReason::from_message) {
                Some(FailureReason::CheckpointExpired) => Outcome::Expired,
                Some(FailureReason::CheckpointDeclined) => Outcome::Declined,
                _ => Outcome::Failed,
            },
        }
    }

    /// The outcome of a checkpoint as the poller reports it.
    pub(crate) fn of_checkpoint(cp: &FinishedCheckpoint) -> Outcome {
        Outcome::of(cp.status, cp.failure_message.as_deref())
    }

    /// Its name, as serialized.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Expired => "expired",
            Outcome::Declined => "declined",
            Outcome::Failed => "failed",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one read cycle of a tailer produced.
#[derive(Clone, Debug, PartialEq)]
pub struct LogRead {
    /// The cluster its `[[logs]]` entry is bound to.
    pub cluster: String,
    /// The entry's id.
    pub tailer: String,
    /// The events recognised, in file order.
    pub events: Vec<LogEvent>,
    /// Where it stands after them: the first byte of each file not yet turned into events.
    pub positions: TailerPositions,
    /// Checkpoint spans of Flink's Slf4j trace reporter read in the same cycle, in file order
    /// (the second source of finished checkpoints, beside the poller).
    pub spans: Vec<CheckpointSpan>,
}

/// A finished checkpoint as Flink's trace reporter reported it (a `Checkpoint` span, Flink
/// 1.19+, read from the Slf4j trace reporter's log lines by `logs::trace`). What a version does
/// not emit is `None` (1.20 has sizes only; 2.x adds the type and the slowest subtask's phases).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointSpan {
    /// The configured cluster the log belongs to.
    pub cluster: String,
    /// Flink's job id.
    pub job_id: String,
    /// Checkpoint id.
    pub id: u64,
    /// Completed or failed.
    pub status: CheckpointStatus,
    /// From `checkpointType` and `isUnaligned` (2.x); `None` when the span does not say.
    pub kind: Option<SnapshotKind>,
    /// The span's start: the trigger time.
    pub triggered_at: Timestamp,
    /// The span's end: completion (the latest acknowledgement); `None` for a failed one no
    /// subtask acknowledged (Flink reports -1).
    pub finished_at: Option<Timestamp>,
    /// `checkpointedSize`.
    pub checkpointed_bytes: Option<u64>,
    /// `fullSize`.
    pub full_state_bytes: Option<u64>,
    /// `sumProcessedDataBytes`.
    pub processed_bytes: Option<u64>,
    /// `sumPersistedDataBytes`.
    pub persisted_bytes: Option<u64>,
    /// The largest over the subtasks of the start delay, alignment, sync and async durations
    /// (`max…Ms`), ms.
    pub max_phases_ms: [Option<u64>; 4],
    /// The log line's own timestamp text.
    pub logged_at: Option<String>,
}

/// The job graph from `/jobs/:id` (`plan.nodes` and their inputs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobTopology {
    /// Job vertices (operator chains).
    pub vertices: Vec<TopologyVertex>,
    /// Edges between them.
    pub edges: Vec<TopologyEdge>,
}

/// One job vertex.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyVertex {
    /// The vertex id.
    pub id: String,
    /// The operator chain's name.
    pub name: String,
    /// Its parallelism.
    pub parallelism: u32,
}

/// An edge of the job graph.
#[derive(Clone, Debug, PartialEq)]
pub struct TopologyEdge {
    /// Upstream vertex id.
    pub from: String,
    /// Downstream vertex id.
    pub to: String,
    /// `FORWARD`, `HASH`, `REBALANCE`, … as Flink names it.
    pub ship_strategy: String,
}

/// The load of one subtask, from the vertex endpoints (rates, busy/idle/backpressure ratios).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubtaskLoad {
    /// Subtask index.
    pub(crate) index: u32,
    /// Records in per second.
    pub records_in_per_s: Option<f64>,
    /// Records out per second.
    pub records_out_per_s: Option<f64>,
    /// Average bytes per record read (cumulative read bytes / read records).
    pub(crate) bytes_per_record_in: Option<f64>,
    /// Average bytes per record written.
    pub(crate) bytes_per_record_out: Option<f64>,
    /// Share of time busy, 0..=1.
    pub(crate) busy_ratio: Option<f64>,
    /// Share of time idle, 0..=1.
    pub(crate) idle_ratio: Option<f64>,
    /// Share of time back-pressured, 0..=1.
    pub(crate) backpressure_ratio: Option<f64>,
    /// Output buffer pool usage, 0..=1.
    pub(crate) out_pool_usage: Option<f64>,
}

/// The load of one vertex.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VertexLoad {
    /// The vertex id.
    pub(crate) vertex_id: String,
    /// Its subtasks.
    pub subtasks: Vec<SubtaskLoad>,
    /// The TaskManager each subtask runs on, by subtask index (every subtask, not only the
    /// ones with load metrics): `taskmanager-id (endpoint)` as `convert::taskmanager_of` words it.
    pub taskmanagers: Vec<Option<String>>,
}

/// A job's graph and load, as the poller fetched them.
#[derive(Clone, Debug, PartialEq)]
pub struct JobLoadReport {
    /// Which job.
    pub key: JobKey,
    /// When it was measured.
    pub measured_at: Timestamp,
    /// The job graph, when `/jobs/:id` had a plan; shared by the poller, which keeps it
    /// between rounds, and the job's alignment shadow.
    pub topology: Option<std::sync::Arc<JobTopology>>,
    /// Per-vertex load; empty when the vertex endpoints did not answer.
    pub vertices: Vec<VertexLoad>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_status_reads_and_writes_flinks_spelling() {
        for status in JobStatus::KNOWN {
            assert_eq!(JobStatus::parse(status.as_str()), status);
            assert!(!matches!(status, JobStatus::Other(_)));
        }
        assert_eq!(JobStatus::parse("RUNNING"), JobStatus::Running);
        assert_eq!(JobStatus::parse("CANCELED").as_str(), "CANCELED");
        assert_eq!(JobStatus::Reconciling.to_string(), "RECONCILING");
    }

    #[test]
    fn every_flink_spelling_round_trips_through_the_status_and_its_json() {
        // org.apache.flink.api.common.JobStatus, in the order of its enum.
        let flink = [
            "INITIALIZING",
            "CREATED",
            "RUNNING",
            "FAILING",
            "FAILED",
            "CANCELLING",
            "CANCELED",
            "FINISHED",
            "RESTARTING",
            "SUSPENDED",
            "RECONCILING",
        ];
        assert_eq!(JobStatus::KNOWN.map(|s| s.as_str().to_string()), flink.map(String::from));
        for spelling in flink {
            let json = format!("\"{spelling}\"");
            let read: JobStatus = serde_json::from_str(&json).unwrap();
            assert!(!matches!(read, JobStatus::Other(_)), "{spelling} is a known status");
            assert_eq!(serde_json::to_string(&read).unwrap(), json);
            assert_eq!(read.to_string(), spelling);
        }
    }

    #[test]
    fn no_checkpoint_is_in_progress_once_a_job_ended_or_while_it_stops() {
        let named = |keep: fn(&JobStatus) -> bool| -> Vec<&str> {
            JobStatus::KNOWN.iter().filter(|s| keep(s)).map(JobStatus::as_str).collect()
        };
        assert_eq!(named(JobStatus::has_ended), ["FAILED", "CANCELED", "FINISHED", "SUSPENDED"]);
        assert_eq!(named(JobStatus::is_stopping), ["FAILING", "CANCELLING", "RESTARTING"]);
        assert_eq!(
            named(|s| !s.can_checkpoint()),
            ["FAILING", "FAILED", "CANCELLING", "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED"]
        );
        // A status Flink may add is taken for one that checkpoints, as before.
        assert!(JobStatus::Other("WAITING_FOR_RESOURCES".into()).can_checkpoint());
    }

    #[test]
    fn an_unknown_job_status_is_kept_as_sent() {
        // A status a newer Flink may add, a different case, and none at all.
        for sent in ["WAITING_FOR_RESOURCES", "running", ""] {
            let status = JobStatus::parse(sent);
            assert_eq!(status, JobStatus::Other(sent.to_string()));
            assert_eq!(status.as_str(), sent);
        }
    }

    #[test]
    fn job_status_serialises_as_the_same_string() {
        assert_eq!(serde_json::to_string(&JobStatus::Canceled).unwrap(), r#""CANCELED""#);
        assert_eq!(serde_json::to_string(&JobStatus::Other("NEW".into())).unwrap(), r#""NEW""#);
        let read: Vec<JobStatus> = serde_json::from_str(r#"["FAILING","NEW"]"#).unwrap();
        assert_eq!(read, [JobStatus::Failing, JobStatus::Other("NEW".into())]);
    }
}
