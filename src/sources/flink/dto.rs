//! Serde models of Flink's REST JSON (1.13 … 2.x), tolerant of every version's differences.
//!
//! Rules, all from real captures (`tests/fixtures/flink-*`): every field that is not present in
//! every version is an `Option`; unknown fields are ignored; the type tag is `@class` up to 1.14
//! and `className` from 1.15; per-subtask percentiles are the string `"NaN"`; `checkpointed_size`
//! exists only from 1.15, and before it `state_size` meant what `checkpointed_size` means now.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

/// `GET /overview`.
#[derive(Debug, Clone, Deserialize)]
pub struct ClusterOverview {
    /// Flink's version string, e.g. `2.3.0`.
    #[serde(rename = "flink-version")]
    pub(crate) flink_version: Option<String>,
}

/// `GET /jobs/overview`.
#[derive(Debug, Clone, Deserialize)]
pub struct JobsOverview {
    /// One entry per job the JobManager still knows.
    #[serde(default)]
    pub jobs: Vec<JobOverview>,
}

/// One job in `/jobs/overview`.
#[derive(Debug, Clone, Deserialize)]
pub struct JobOverview {
    /// The job id (32 hex digits).
    pub(crate) jid: String,
    /// The job name.
    pub(crate) name: Option<String>,
    /// `RUNNING`, `RESTARTING`, `FAILED`, `CANCELED`, `FINISHED`, …
    pub(crate) state: Option<String>,
    /// When the job was submitted, epoch ms.
    #[serde(rename = "start-time")]
    pub(crate) start_time: Option<i64>,
    /// `Default` or `Adaptive` (2.3+; absent before).
    #[serde(rename = "schedulerType")]
    pub(crate) scheduler_type: Option<String>,
}

/// `GET /applications/overview` (Flink 2.3+, FLIP-549): the applications and how many of
/// their jobs are in each state.
#[derive(Debug, Clone, Deserialize)]
pub struct ApplicationsOverview {
    /// One entry per application the JobManager knows.
    #[serde(default)]
    pub applications: Vec<ApplicationOverview>,
}

/// One application in `/applications/overview`.
#[derive(Debug, Clone, Deserialize)]
pub struct ApplicationOverview {
    /// The application id (32 hex digits; a single-job application's is its job's id).
    pub id: String,
    /// Its name, e.g. `SingleJobApplication(my-job)`.
    pub name: Option<String>,
    /// `RUNNING`, `FINISHED`, …
    pub status: Option<String>,
    /// How many of its jobs are in each state.
    #[serde(default)]
    pub jobs: BTreeMap<String, u64>,
}

/// `GET /applications/:id` (2.3+): the application and its jobs.
#[derive(Debug, Clone, Deserialize)]
pub struct ApplicationDetails {
    /// Its jobs, as `/jobs/overview` lists them.
    #[serde(default)]
    pub jobs: Vec<JobOverview>,
}

/// `GET /jobs/:id`: the job graph, used for operator names and (later) the alignment shadow.
#[derive(Debug, Clone, Deserialize)]
pub struct JobDetails {
    /// The job id.
    pub(crate) jid: Option<String>,
    /// The job name.
    pub name: Option<String>,
    /// The job vertices (operator chains).
    #[serde(default)]
    pub vertices: Vec<JobVertex>,
    /// The execution plan with edges and ship strategies.
    pub(crate) plan: Option<Plan>,
    /// The JobManager's clock when it answered, epoch ms.
    pub(crate) now: Option<i64>,
    /// When the job last entered each job status (`RESTARTING`, `RUNNING`, …), epoch ms; 0 for
    /// a status it never entered.
    #[serde(default)]
    pub(crate) timestamps: std::collections::BTreeMap<String, i64>,
}

/// `/jobs/:id/vertices/:vertex/subtasktimes` (every version from 1.13 to 2.x): when each
/// subtask's current execution attempt entered each execution state.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SubtaskTimes {
    /// The subtasks.
    #[serde(default)]
    pub(crate) subtasks: Vec<SubtaskTimesEntry>,
}

/// One subtask of `subtasktimes`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SubtaskTimesEntry {
    /// The subtask index (0-based).
    pub(crate) subtask: u32,
    /// Execution state (`DEPLOYING`, `INITIALIZING`, `RUNNING`, …) → when the attempt entered
    /// it, epoch ms; 0 for a state it never entered.
    #[serde(default)]
    pub(crate) timestamps: std::collections::BTreeMap<String, i64>,
}

/// One vertex of `/jobs/:id`.
#[derive(Debug, Clone, Deserialize)]
pub struct JobVertex {
    /// The vertex id (32 hex digits).
    pub id: String,
    /// The operator chain's name, e.g. `Source: fast-source -> fast-throttle`.
    pub name: Option<String>,
    /// The vertex parallelism.
    pub parallelism: Option<u32>,
}

/// `plan` inside `/jobs/:id`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Plan {
    /// The plan's nodes.
    #[serde(default)]
    pub(crate) nodes: Vec<PlanNode>,
}

/// A node of the execution plan.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PlanNode {
    /// The vertex id.
    pub(crate) id: String,
    /// The parallelism.
    pub(crate) parallelism: Option<u32>,
    /// Inputs of this node.
    #[serde(default)]
    pub(crate) inputs: Vec<PlanInput>,
}

/// An edge into a plan node.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PlanInput {
    /// The upstream vertex id.
    pub(crate) id: String,
    /// `FORWARD`, `HASH`, `REBALANCE`, …
    pub(crate) ship_strategy: Option<String>,
}

/// `GET /jobs/:id/checkpoints/config`.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckpointConfig {
    /// `exactly_once` or `at_least_once` (case varies).
    pub(crate) mode: Option<String>,
    /// Checkpoint interval in ms; `i64::MAX` when periodic checkpoints are off.
    pub(crate) interval: Option<i64>,
    /// Checkpoint timeout in ms.
    pub(crate) timeout: Option<i64>,
    /// Minimum pause between checkpoints in ms.
    pub(crate) min_pause: Option<i64>,
    /// Maximum concurrent checkpoints.
    pub(crate) max_concurrent: Option<i64>,
    /// State backend class name.
    pub(crate) state_backend: Option<String>,
    /// Checkpoint storage class name.
    pub(crate) checkpoint_storage: Option<String>,
    /// Whether unaligned checkpoints are enabled.
    pub(crate) unaligned_checkpoints: Option<bool>,
    /// Tolerable failed checkpoints before the job fails.
    pub(crate) tolerable_failed_checkpoints: Option<i64>,
    /// Aligned checkpoint timeout in ms (1.14+).
    pub(crate) aligned_checkpoint_timeout: Option<i64>,
    /// Whether completed checkpoints outlive the job (externalized, retained on cancellation).
    pub(crate) externalization: Option<Externalization>,
    /// Whether the changelog state backend is on (1.15+).
    pub(crate) state_changelog_enabled: Option<bool>,
}

/// `externalization` of `/checkpoints/config`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct Externalization {
    /// `true`: deleted when the job is cancelled (`DELETE_ON_CANCELLATION`).
    pub(crate) delete_on_cancellation: Option<bool>,
}

/// `GET /jobs/:id/config`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct JobConfig {
    /// The job's execution config.
    #[serde(rename = "execution-config")]
    pub(crate) execution_config: Option<ExecutionConfig>,
}

/// `execution-config` of `/jobs/:id/config`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ExecutionConfig {
    /// The restart strategy as a sentence, e.g. `Restart with fixed delay (PT3S). #5 restart attempts.`
    #[serde(rename = "restart-strategy")]
    pub(crate) restart_strategy: Option<String>,
    /// The global job parameters (any JSON value; only strings are read).
    #[serde(rename = "user-config", default)]
    pub(crate) user_config: BTreeMap<String, serde_json::Value>,
}

/// One entry of `GET /jobmanager/config` (an array of them).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ConfigEntry {
    /// The option key, e.g. `state.backend.incremental`.
    pub(crate) key: String,
    /// Its value as a string.
    pub(crate) value: Option<String>,
}

/// `GET /config` (the web dashboard's configuration).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct DashboardConfig {
    /// Flink's version string.
    #[serde(rename = "flink-version")]
    pub(crate) flink_version: Option<String>,
}

/// `GET /jobs/:id/checkpoints`.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckpointingStatistics {
    /// Cumulative counts since the JobManager started tracking this job.
    pub counts: Option<Counts>,
    /// Latest completed, savepoint, failed and restored checkpoints.
    pub latest: Option<LatestCheckpoints>,
    /// The last `web.checkpoints.history` checkpoints, including in-progress ones, any order.
    #[serde(default)]
    pub history: Vec<CheckpointStatistics>,
}

/// `counts` of `/checkpoints`.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct Counts {
    /// Restores of this job.
    pub(crate) restored: Option<u64>,
    /// Checkpoints in progress now.
    pub(crate) in_progress: Option<u64>,
    /// Completed checkpoints (and savepoints).
    pub(crate) completed: Option<u64>,
    /// Failed checkpoints, including attempts that never got an id.
    pub(crate) failed: Option<u64>,
}

/// `latest` of `/checkpoints`.
#[derive(Debug, Clone, Deserialize)]
pub struct LatestCheckpoints {
    /// The latest savepoint.
    pub savepoint: Option<CheckpointStatistics>,
    /// The checkpoint the job last restored from.
    pub restored: Option<RestoredCheckpoint>,
}

/// `latest.restored` (no type tag in any version).
#[derive(Debug, Clone, Deserialize)]
pub struct RestoredCheckpoint {
    /// Checkpoint id restored from.
    pub id: Option<u64>,
    /// When the restore happened, epoch ms.
    pub restore_timestamp: Option<i64>,
    /// Whether it was a savepoint.
    pub(crate) is_savepoint: Option<bool>,
    /// Where it was stored.
    pub(crate) external_path: Option<String>,
}

/// A checkpoint in `history`, `latest.*` and `/checkpoints/details/:id`.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckpointStatistics {
    /// Type tag: `completed`, `failed` or `in_progress`.
    #[serde(rename = "className", alias = "@class")]
    pub(crate) class_name: Option<String>,
    /// The checkpoint id.
    pub id: u64,
    /// `COMPLETED`, `FAILED` or `IN_PROGRESS`.
    pub(crate) status: Option<String>,
    /// Whether this is a savepoint.
    pub(crate) is_savepoint: Option<bool>,
    /// When the coordinator triggered it, epoch ms.
    pub(crate) trigger_timestamp: Option<i64>,
    /// The latest acknowledgement, epoch ms.
    pub(crate) latest_ack_timestamp: Option<i64>,
    /// Bytes persisted by this checkpoint (1.15+).
    pub checkpointed_size: Option<i64>,
    /// Full state size from 1.15; before 1.15 the checkpointed (possibly incremental) size.
    pub state_size: Option<i64>,
    /// Latest ack − trigger, ms (for an in-progress one: only up to its latest ack).
    pub(crate) end_to_end_duration: Option<i64>,
    /// Bytes processed during alignment.
    pub(crate) processed_data: Option<i64>,
    /// In-flight bytes persisted (unaligned checkpoints).
    pub(crate) persisted_data: Option<i64>,
    /// Subtasks that must acknowledge.
    pub(crate) num_subtasks: Option<u32>,
    /// Subtasks that acknowledged.
    pub(crate) num_acknowledged_subtasks: Option<u32>,
    /// `CHECKPOINT`, `UNALIGNED_CHECKPOINT` (1.15+), `SAVEPOINT`, `SYNC_SAVEPOINT`.
    pub(crate) checkpoint_type: Option<String>,
    /// Per-vertex statistics; empty in `/checkpoints`, filled in `/details/:id`.
    #[serde(default)]
    pub tasks: BTreeMap<String, serde::de::IgnoredAny>,
    /// When a failed checkpoint failed, epoch ms.
    pub(crate) failure_timestamp: Option<i64>,
    /// Why a failed checkpoint failed, e.g. `Checkpoint expired before completing.`
    pub(crate) failure_message: Option<String>,
    /// Where a completed checkpoint is stored (the storage source lists its folder).
    pub(crate) external_path: Option<String>,
}

/// `GET /jobs/:id/checkpoints/details/:cp/subtasks/:vertex`.
#[derive(Debug, Clone, Deserialize)]
pub struct TaskCheckpointDetails {
    /// Per-subtask statistics.
    #[serde(default)]
    pub subtasks: Vec<SubtaskCheckpointStatistics>,
}

/// One subtask of [`TaskCheckpointDetails`]; a pending one has only `index` and `status`.
#[derive(Debug, Clone, Deserialize)]
pub struct SubtaskCheckpointStatistics {
    /// Type tag: `completed` or `pending`.
    #[serde(rename = "className", alias = "@class")]
    pub(crate) class_name: Option<String>,
    /// Subtask index.
    pub index: u32,
    /// `completed` or `pending_or_failed`.
    pub(crate) status: Option<String>,
    /// Ack − trigger, ms.
    pub(crate) end_to_end_duration: Option<i64>,
    /// State size.
    pub state_size: Option<i64>,
    /// Bytes this subtask persisted (1.15+): its upload, over the async duration.
    pub(crate) checkpointed_size: Option<i64>,
    /// Synchronous and asynchronous snapshot durations.
    pub(crate) checkpoint: Option<SubtaskSnapshotDurations>,
    /// Alignment statistics.
    pub(crate) alignment: Option<SubtaskAlignment>,
    /// Time from trigger until the first barrier reached this subtask, ms.
    pub(crate) start_delay: Option<i64>,
    /// Whether this subtask took an unaligned checkpoint.
    pub(crate) unaligned_checkpoint: Option<bool>,
}

impl SubtaskCheckpointStatistics {
    /// A subtask is complete when its tag or status says so.
    pub fn is_completed(&self) -> bool {
        let tag = self.class_name.as_deref().or(self.status.as_deref());
        tag.is_some_and(|t| t.eq_ignore_ascii_case("completed"))
    }
}

/// `checkpoint` of a subtask.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct SubtaskSnapshotDurations {
    /// Synchronous part, ms.
    pub(crate) sync: Option<i64>,
    /// Asynchronous part, ms (for unaligned checkpoints it includes persisting in-flight data).
    #[serde(rename = "async")]
    pub(crate) async_: Option<i64>,
}

/// `alignment` of a subtask.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct SubtaskAlignment {
    /// Bytes processed during alignment.
    pub(crate) processed: Option<i64>,
    /// In-flight bytes persisted.
    pub(crate) persisted: Option<i64>,
    /// Alignment duration, ms.
    pub(crate) duration: Option<i64>,
}

/// A number that Flink may also send as the string `"NaN"` (per-subtask percentiles).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MaybeNan(pub(crate) Option<f64>);

impl<'de> Deserialize<'de> for MaybeNan {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum NumberOrString {
            Number(f64),
            Text(String),
        }
        Ok(match Option::<NumberOrString>::deserialize(deserializer)? {
            Some(NumberOrString::Number(n)) => MaybeNan(Some(n)),
            Some(NumberOrString::Text(s)) => MaybeNan(s.parse::<f64>().ok().filter(|n| n.is_finite())),
            None => MaybeNan(None),
        })
    }
}

/// `GET /jobs/:id/vertices/:vertex`: per-subtask I/O counters.
#[derive(Debug, Clone, Deserialize)]
pub struct VertexDetails {
    /// Its subtasks.
    #[serde(default)]
    pub subtasks: Vec<VertexSubtask>,
}

/// One subtask of [`VertexDetails`].
#[derive(Debug, Clone, Deserialize)]
pub struct VertexSubtask {
    /// Subtask index (`subtask`; older versions also call it that).
    pub(crate) subtask: u32,
    /// Cumulative I/O metrics.
    pub(crate) metrics: Option<IoMetrics>,
    /// The TaskManager's host (up to 1.20; 2.x has `endpoint` only).
    pub(crate) host: Option<String>,
    /// The TaskManager's `host:port` (1.17 and later).
    pub(crate) endpoint: Option<String>,
    /// The TaskManager's id (`taskmanager-id`).
    #[serde(rename = "taskmanager-id")]
    pub(crate) taskmanager_id: Option<String>,
    /// Milliseconds since the subtask was deployed, as of the request (`-1` before that).
    pub(crate) duration: Option<i64>,
}

/// The `metrics` of a vertex or subtask (cumulative since the task started).
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct IoMetrics {
    /// Bytes read.
    #[serde(rename = "read-bytes")]
    pub(crate) read_bytes: Option<u64>,
    /// Bytes written.
    #[serde(rename = "write-bytes")]
    pub(crate) write_bytes: Option<u64>,
    /// Records read.
    #[serde(rename = "read-records")]
    pub(crate) read_records: Option<u64>,
    /// Records written.
    #[serde(rename = "write-records")]
    pub(crate) write_records: Option<u64>,
    /// Milliseconds spent busy since the task started running (1.20 and later, a float in 2.x).
    #[serde(rename = "accumulated-busy-time")]
    pub(crate) accumulated_busy_ms: Option<MaybeNan>,
    /// Milliseconds spent idle since the task started running.
    #[serde(rename = "accumulated-idle-time")]
    pub(crate) accumulated_idle_ms: Option<MaybeNan>,
    /// Milliseconds spent back-pressured since the task started running.
    #[serde(rename = "accumulated-backpressured-time")]
    pub(crate) accumulated_backpressured_ms: Option<MaybeNan>,
}

/// `GET /jobs/:id/vertices/:vertex/backpressure`.
#[derive(Debug, Clone, Deserialize)]
pub struct VertexBackPressure {
    /// Per subtask.
    #[serde(default)]
    pub(crate) subtasks: Vec<SubtaskBackPressure>,
}

/// One subtask of [`VertexBackPressure`].
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct SubtaskBackPressure {
    /// Subtask index.
    pub(crate) subtask: u32,
    /// Back-pressured share of time.
    pub(crate) ratio: Option<f64>,
    /// Idle share of time (1.13+).
    #[serde(rename = "idleRatio")]
    pub(crate) idle_ratio: Option<f64>,
    /// Busy share of time (1.13+).
    #[serde(rename = "busyRatio")]
    pub(crate) busy_ratio: Option<f64>,
}

/// One entry of an aggregating metrics endpoint (`…/subtasks/metrics?get=…&agg=…`,
/// `/taskmanagers/metrics?…`): Flink's `AggregatedMetric`, numbers, each only when asked for.
#[derive(Debug, Clone, Deserialize)]
pub struct AggregatedMetric {
    /// The metric's name.
    pub id: String,
    /// Largest value.
    pub max: Option<f64>,
    /// Average.
    pub avg: Option<f64>,
}

/// One entry of `GET /jobs/:id/vertices/:vertex/metrics?get=…`.
#[derive(Debug, Clone, Deserialize)]
pub struct MetricValue {
    /// `<subtask>.<name>`, e.g. `0.numRecordsInPerSecond`.
    pub id: String,
    /// The value, always a string.
    pub value: Option<String>,
}

/// One rescale of `/jobs/:id/rescales/history` (a list, newest first) and
/// `/jobs/:id/rescales/details/:rescaleuuid` (Flink 2.3+, `JobRescaleDetails`). The history's
/// `vertices` are empty (2.3.0); the details name each vertex's parallelism before and after.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RescaleDetails {
    /// The rescale's id.
    pub(crate) rescale_uuid: Option<String>,
    /// Its attempt (a rescale may be tried again).
    pub(crate) rescale_attempt_id: Option<u64>,
    /// By vertex id.
    #[serde(default)]
    pub(crate) vertices: std::collections::BTreeMap<String, RescaleVertex>,
    /// The adaptive scheduler's states during it (`Executing`, `Restarting`, …).
    #[serde(default)]
    pub(crate) scheduler_states: Vec<SchedulerStateSpan>,
    /// When it started, epoch ms.
    #[serde(rename = "startTimestampInMillis")]
    pub(crate) start: Option<i64>,
    /// When it ended, epoch ms.
    #[serde(rename = "endTimestampInMillis")]
    pub(crate) end: Option<i64>,
    /// `COMPLETED`, `FAILED`, `IGNORED`; absent while in progress.
    pub(crate) terminal_state: Option<String>,
    /// `INITIAL_SCHEDULE`, `UPDATE_REQUIREMENT`, `NEW_RESOURCE_AVAILABLE`, `RECOVERABLE_FAILOVER`.
    pub(crate) trigger_cause: Option<String>,
}

/// One vertex of a rescale's details.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RescaleVertex {
    /// The operator chain's name.
    pub(crate) job_vertex_name: Option<String>,
    /// Its parallelism before.
    pub(crate) pre_rescale_parallelism: Option<u32>,
    /// Its parallelism after.
    pub(crate) post_rescale_parallelism: Option<u32>,
}

/// One adaptive-scheduler state of a rescale.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SchedulerStateSpan {
    /// `Executing`, `Restarting`, `WaitingForResources`, `CreatingExecutionGraph`, …
    pub(crate) state: Option<String>,
    /// When the scheduler entered it, epoch ms.
    #[serde(rename = "enterTimestampInMillis")]
    pub(crate) enter: Option<i64>,
}
