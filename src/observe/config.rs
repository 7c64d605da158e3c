//! A job's whole checkpoint configuration as the advisor reads it: the timing settings of
//! `/checkpoints/config`, retention, the state backend's options and the restart strategy,
//! gathered from `/checkpoints/config`, `/jobs/:id/config` and `/jobmanager/config`.

/// How Flink is configured to checkpoint a job (`/checkpoints/config`), durations in ms.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
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
    /// The interval while a source reports that it processes backlog (FLIP-309, Flink 1.19+:
    /// `execution.checkpointing.interval-during-backlog`, the same key in 1.x and 2.x); `Some(0)`
    /// turns checkpoints off during backlog. `/checkpoints/config` does not report it: it comes
    /// from the job's parameters or configuration, or the cluster's. A `u32` (49 days at most,
    /// longer is taken as that): every watched job holds this twice.
    pub interval_during_backlog_ms: Option<u32>,
}

/// Everything Flink says about how a job checkpoints; what no endpoint told is `None`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CheckpointConfiguration {
    /// The timing settings (interval, timeout, min-pause, max-concurrent, tolerable failures,
    /// unaligned and its aligned timeout, the state backend's class).
    pub(crate) settings: CheckpointSettings,
    /// Whether completed checkpoints are kept when the job is cancelled.
    pub(crate) retained_on_cancellation: Option<bool>,
    /// The checkpoint storage's class name.
    pub(crate) checkpoint_storage: Option<String>,
    /// Incremental snapshots (`execution.checkpointing.incremental`, 1.x
    /// `state.backend.incremental`).
    pub(crate) incremental: Option<bool>,
    /// The changelog state backend.
    pub(crate) changelog: Option<bool>,
    /// Local recovery (`execution.state-recovery.from-local`, 1.x `state.backend.local-recovery`).
    pub(crate) local_recovery: Option<bool>,
    /// How many completed checkpoints are retained (`execution.checkpointing.num-retained`, 1.x
    /// `state.checkpoints.num-retained`; Flink's default is 1).
    pub(crate) retained_checkpoints: Option<u32>,
    /// The restart strategy, as `/jobs/:id/config` words it.
    pub(crate) restart_strategy: Option<String>,
    /// Flink's version, e.g. `2.3.0`.
    pub(crate) flink_version: Option<String>,
    /// The configured checkpoint directory (`execution.checkpointing.dir`, 1.x
    /// `state.checkpoints.dir`).
    pub checkpoint_dir: Option<String>,
    /// File merging (`execution.checkpointing.file-merging.enabled`, FLIP-306, 1.20+).
    pub file_merging: Option<bool>,
    /// The RPC frame size, bytes (`pekko.framesize`, 1.x `akka.framesize`; Flink's default
    /// 10485760b): an acknowledgement larger than it is dropped (before FLINK-39738).
    pub framesize_bytes: Option<u64>,
    /// The Kafka producer's `transaction.timeout.ms` where the job's configuration exposes it
    /// (a job parameter, `properties.transaction.timeout.ms` of a table's options), ms.
    pub(crate) kafka_transaction_timeout_ms: Option<u64>,
    /// Whether a Kafka sink is configured exactly-once (`sink.delivery-guarantee`,
    /// `delivery.guarantee`), where the configuration says.
    pub(crate) kafka_exactly_once: Option<bool>,
    /// Not configuration but read beside it: the job's latest measured restore time (the
    /// daemon's: from the restore to its last subtask RUNNING), ms; `None` where none was seen.
    pub(crate) measured_restore_ms: Option<u64>,
    /// The configuration keys read and where each came from (the advisor says which
    /// generation it read: FLIP-406 renamed many keys in 1.20/2.0).
    pub(crate) keys_read: Vec<KeyRead>,
}

/// One configuration key the advisor read.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct KeyRead {
    /// What it sets (`incremental`, `retained checkpoints` …).
    pub(crate) setting: &'static str,
    /// The key found, e.g. `execution.checkpointing.incremental`.
    pub(crate) key: String,
    /// `2.x` for a key of FLIP-406's generation (Flink 1.20+ and 2.x), `1.x` for the older
    /// one (gone or deprecated in 2.0), `1.x and 2.x` for a key both read, `connector` for a
    /// connector's option passed as a job parameter.
    pub(crate) generation: &'static str,
    /// Where: `job parameters` (`/jobs/:id/config`), `job configuration`
    /// (`/jobs/:id/jobmanager/config`) or `cluster configuration` (`/jobmanager/config`).
    pub(crate) source: &'static str,
    /// Its value as Flink gave it.
    pub(crate) value: String,
}

/// Flink's default `pekko.framesize`, bytes.
pub const DEFAULT_FRAMESIZE_BYTES: u64 = 10_485_760;

impl CheckpointConfiguration {
    /// Flink's major version (1 when unknown: the 1.x keys are the ones 2.x still reads most).
    pub(crate) fn major_version(&self) -> u32 {
        self.flink_version
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|m| m.parse().ok())
            .unwrap_or(1)
    }

    /// Whether the state backend is the heap one (`HashMapStateBackend`, 1.x `MemoryStateBackend`
    /// and `FsStateBackend`).
    pub(crate) fn heap_backend(&self) -> bool {
        self.settings.state_backend.as_deref().is_some_and(|b| {
            let b = b.to_ascii_lowercase();
            b.contains("hashmap") || b.contains("memory") || b.contains("fsstate") || b == "heap"
        })
    }
}
