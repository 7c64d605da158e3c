//! The observation vocabulary: what sources (REST poller, log tailer) and the model report.
//!
//! Every value here is plain data. Sources produce observations; `State::apply` consumes them.
//! The reference model produces the same types, so everything downstream can be tested on
//! simulated input.

use crate::time::Timestamp;

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
    pub state: String,
}

/// How Flink is configured to checkpoint a job (`/checkpoints/config`), durations in ms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointSettings {
    /// `true` for EXACTLY_ONCE, `false` for AT_LEAST_ONCE.
    pub exactly_once: bool,
    /// Interval; `None` when periodic checkpoints are off.
    pub interval_ms: Option<u64>,
    /// Timeout.
    pub timeout_ms: Option<u64>,
    /// Minimum pause between the end of one checkpoint and the start of the next.
    pub min_pause_ms: u64,
    /// Maximum concurrent checkpoints.
    pub max_concurrent: u32,
    /// Tolerable consecutive failed checkpoints.
    pub tolerable_failures: Option<u32>,
    /// Unaligned checkpoints enabled.
    pub unaligned: bool,
    /// Aligned checkpoint timeout (0 = start unaligned right away when unaligned is on).
    pub aligned_checkpoint_timeout_ms: Option<u64>,
    /// State backend class name.
    pub state_backend: Option<String>,
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
    pub fn as_str(self) -> &'static str {
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
    pub num_subtasks: u32,
    /// Subtasks that acknowledged so far.
    pub num_acknowledged: u32,
}

/// The checkpoint statistics of one job, from one poll.
#[derive(Clone, Debug)]
pub struct JobPoll {
    /// Which job.
    pub key: JobKey,
    /// Its name.
    pub job_name: String,
    /// Its state.
    pub job_state: String,
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
    pub processed_bytes: Option<u64>,
    /// In-flight bytes persisted.
    pub persisted_bytes: Option<u64>,
    /// Subtasks that had to acknowledge.
    pub num_subtasks: u32,
    /// Subtasks that acknowledged.
    pub num_acknowledged: u32,
    /// Why it failed.
    pub failure_message: Option<String>,
    /// Per-operator details, when they could be fetched (only the newest checkpoints have them).
    pub operators: Vec<OperatorCheckpoint>,
}

/// One operator chain (job vertex) of a checkpoint, with its subtasks.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorCheckpoint {
    /// The vertex id.
    pub vertex_id: String,
    /// The vertex name.
    pub name: String,
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
}
