//! The evidence vocabulary: what Flink's metrics said about the subtasks and TaskManagers of
//! a cluster in one evidence round (busy, backpressure, buffers; heap, GC, CPU, memory).
//!
//! Plain data. A metric Flink did not report (not in this version, not collected yet) is
//! `None`; ratios are 0–1 (Flink's `…TimeMsPerSecond` divided by 1,000), sizes bytes.

use crate::time::Timestamp;

/// One evidence round of a cluster: what its metrics endpoints answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvidenceRound {
    /// The configured cluster name.
    pub cluster: String,
    /// When the round's answers came (the round's end).
    pub at: Timestamp,
    /// Per operator (job vertex): its subtasks' load, aggregated by Flink (max and average).
    pub operators: Vec<OperatorLoad>,
    /// Single subtasks (the culprits of recent checkpoints): their own load.
    pub subtasks: Vec<SubtaskEvidence>,
    /// TaskManagers: JVM and Flink memory, GC, CPU, network segments.
    pub taskmanagers: Vec<TaskManagerSample>,
    /// Requests made this round.
    pub requests: u32,
    /// Requests the round wanted but left out (over `[evidence] max_requests_per_round`).
    pub requests_cut: u32,
    /// Requests that failed (no answer, an error status, an answer that did not parse).
    pub errors: u32,
}

/// The load of one subtask, or an aggregate over a vertex's subtasks; each 0–1.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Load {
    /// Share of time busy (`busyTimeMsPerSecond` / 1,000).
    pub busy: Option<f64>,
    /// Share of time idle (`idleTimeMsPerSecond`).
    pub idle: Option<f64>,
    /// Share of time backpressured (`backPressuredTimeMsPerSecond`).
    pub backpressured: Option<f64>,
    /// Of it, hard backpressure (no buffer at all, 1.14+ where reported).
    pub hard_backpressured: Option<f64>,
    /// Of it, soft backpressure (some buffers, but not enough).
    pub soft_backpressured: Option<f64>,
    /// Input buffer pool usage (`Shuffle.Netty.Input.Buffers.inPoolUsage`).
    pub input_pool_usage: Option<f64>,
    /// Output buffer pool usage (`Shuffle.Netty.Output.Buffers.outPoolUsage`).
    pub output_pool_usage: Option<f64>,
    /// Floating input buffers in use (`inputFloatingBuffersUsage`).
    pub input_floating_usage: Option<f64>,
    /// Exclusive input buffers in use (`inputExclusiveBuffersUsage`).
    pub input_exclusive_usage: Option<f64>,
}

impl Load {}

/// One operator chain's subtasks, aggregated by Flink's
/// `/jobs/:jid/vertices/:vid/subtasks/metrics?agg=max,avg`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperatorLoad {
    /// Flink's job id.
    pub(crate) job_id: String,
    /// The job vertex id.
    pub(crate) vertex_id: String,
    /// The operator chain's name.
    pub(crate) operator: String,
    /// The largest value of each metric over the subtasks.
    pub(crate) max: Load,
    /// The average of each metric over the subtasks.
    pub(crate) avg: Load,
    /// RocksDB native metrics where the job enables them (`state.backend.rocksdb.metrics.*`):
    /// (property, each column family's largest value over the subtasks, summed over the column
    /// families or their largest: `sources::flink::metrics::ROCKSDB_METRICS`), e.g.
    /// `estimate-pending-compaction-bytes`.
    pub(crate) rocksdb: Vec<(String, f64)>,
}

/// One subtask's own load (`/jobs/:jid/vertices/:vid/subtasks/:i/metrics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubtaskEvidence {
    /// Flink's job id.
    pub job_id: String,
    /// The operator chain's name.
    pub operator: String,
    /// The subtask index (0-based).
    pub subtask: u32,
    /// Its load.
    pub load: Load,
}

/// One garbage collector's cumulative counters (`Status.JVM.GarbageCollector.<name>.*`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CollectorCounters {
    /// The collector as Flink names it, e.g. `G1_Old_Generation`.
    pub name: String,
    /// Collections since the JVM started.
    pub count: Option<u64>,
    /// Milliseconds spent collecting since the JVM started.
    pub time_ms: Option<u64>,
    /// Flink's own rate of `time_ms` over the last minute (`TimeMsPerSecond`, 1.19+), ms/s.
    pub time_ms_per_second: Option<f64>,
}

/// What one TaskManager's metrics said (`/taskmanagers/:tm/metrics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskManagerSample {
    /// The TaskManager's id, as the REST API names it.
    pub id: String,
    /// Heap used, bytes (`Status.JVM.Memory.Heap.Used`).
    pub heap_used_bytes: Option<f64>,
    /// Heap max, bytes (`Status.JVM.Memory.Heap.Max`).
    pub heap_max_bytes: Option<f64>,
    /// Every collector's counters (the `All` sum Flink 1.19+ adds is left out).
    pub collectors: Vec<CollectorCounters>,
    /// The JVM's recent CPU load, 0–1 (`Status.JVM.CPU.Load`).
    pub cpu_load: Option<f64>,
    /// Managed memory used and total, bytes (`Status.Flink.Memory.Managed.*`).
    pub managed_used_bytes: Option<f64>,
    /// See `managed_used_bytes`.
    pub managed_total_bytes: Option<f64>,
    /// Network memory segments available and total (`Status.Shuffle.Netty.*MemorySegments`).
    pub network_segments_available: Option<f64>,
    /// See `network_segments_available`.
    pub network_segments_total: Option<f64>,
}
