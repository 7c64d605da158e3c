//! The series table: every series a rule can read, per scope (job, cluster, TaskManager, daemon), with
//! its unit, its meaning, how it is read from the state and its Prometheus twin.
//!
//! The one list of series names: the evaluator's known series (`is_known`), the values a rule
//! reads (`context::Subject::value`), the series list of docs/metrics.md (checked by
//! `tests/rules_agree.rs`, `SENTINEL_BLESS=1` rewrites it) and `rules_agree`'s mapping from a
//! built-in series to the exported metrics (`twin`) all come from [`SERIES`]. A new series is one
//! entry here. Values are in base units: seconds, bytes, counts.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::subjects::{ClusterView, DaemonView, IncidentView, JobView, TaskManagerView};
use crate::state::JobState;
use crate::stats::WindowedHistogram;

/// What a rule is evaluated for: each job (the default), each cluster, each TaskManager that
/// runs a subtask of a watched job, or the daemon itself. The scope decides the series a rule
/// reads and the labels of its alerts (`cluster`, `job_id`, `job_name`; `cluster`; `cluster`,
/// `taskmanager`; none for the daemon, one alert per daemon).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Each watched job that has not ended.
    #[default]
    Job,
    /// Each watched cluster.
    Cluster,
    /// Each TaskManager that runs a subtask of a watched job, as the last load fetch placed it.
    TaskManager,
    /// The daemon itself: its checkpoint store and state file.
    Daemon,
    /// Each incident (`rules::incidents`): many jobs, one cause. Its alerts' labels are
    /// `incident`, `incident_cause`, `incident_value` and `cluster` (its jobs' cluster, empty
    /// when they span several).
    Incident,
}

impl Scope {
    /// The name in a rule (`scope = "cluster"`) and in the docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Job => "job",
            Scope::Cluster => "cluster",
            Scope::TaskManager => "taskmanager",
            Scope::Daemon => "daemon",
            Scope::Incident => "incident",
        }
    }

    /// Whether this is the default scope (a rule that says nothing).
    pub(crate) fn is_job(&self) -> bool {
        *self == Scope::Job
    }
}

/// The unit of a series' values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds (a duration or an age).
    Seconds,
    /// Bytes.
    Bytes,
    /// A count or a counter.
    Count,
    /// 1 or 0.
    Flag,
    /// A share, 0 to 1.
    Ratio,
}

impl Unit {
    /// As the docs name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Seconds => "seconds",
            Unit::Bytes => "bytes",
            Unit::Count => "count",
            Unit::Flag => "1 or 0",
            Unit::Ratio => "ratio (0-1)",
        }
    }
}

/// How a series is read from the state.
pub enum Read {
    /// One value of a job.
    Job(fn(&JobView<'_>) -> Option<f64>),
    /// `NAME.p50`, `NAME.p95`, `NAME.p99` (and `NAME.count`, the lifetime count, when
    /// `counted`) of one of the job's windowed histograms, its values divided by `per_unit`
    /// (1000: milliseconds to seconds).
    JobSummary {
        /// The histogram.
        histogram: fn(&JobState) -> &WindowedHistogram,
        /// What one unit of the series is in the histogram's values (1000 for ms).
        per_unit: f64,
        /// Whether `NAME.count` exists.
        counted: bool,
    },
    /// `NAME.KEY`: a family of job values keyed by a lower-case word (`log.expired`).
    JobKeyed(fn(&JobView<'_>, &str) -> Option<f64>),
    /// One value of a cluster.
    Cluster(fn(&ClusterView<'_>) -> Option<f64>),
    /// One value of a TaskManager.
    TaskManager(fn(&TaskManagerView<'_>) -> Option<f64>),
    /// One value of the daemon.
    Daemon(fn(&DaemonView<'_>) -> Option<f64>),
    /// One value of an incident.
    Incident(fn(&IncidentView<'_>) -> Option<f64>),
}

impl Read {
    /// The scope whose rules read it.
    pub fn scope(&self) -> Scope {
        match self {
            Read::Job(_) | Read::JobSummary { .. } | Read::JobKeyed(_) => Scope::Job,
            Read::Cluster(_) => Scope::Cluster,
            Read::TaskManager(_) => Scope::TaskManager,
            Read::Daemon(_) => Scope::Daemon,
            Read::Incident(_) => Scope::Incident,
        }
    }
}

/// One series (or family of series) a rule can read.
pub struct Series {
    /// The name; for a summary the base (`duration` of `duration.p95`), for a keyed family the
    /// prefix (`log` of `log.expired`).
    pub(crate) name: &'static str,
    /// The unit of its values.
    pub unit: Unit,
    /// What it is, for the docs.
    pub doc: &'static str,
    /// How it is read.
    pub read: Read,
    /// The PromQL that computes it from the exported metrics, `None` when no metric carries it.
    /// For a summary, the metric family (its quantile or `_count` is added); for a keyed
    /// family, `{key}` stands for the key.
    pub prometheus: Option<&'static str>,
}

/// The statistics of a summary series.
const STATS: [(&str, &str); 3] = [("p50", "0.5"), ("p95", "0.95"), ("p99", "0.99")];

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Every series, job scope first.
pub const SERIES: &[Series] = &[
    summary(
        "duration",
        Unit::Seconds,
        "End-to-end duration (trigger to last acknowledgement) of completed checkpoints, savepoints excluded; quantiles over the sliding window, `.count` over the lifetime.",
        |j| &j.phases.end_to_end,
        1000.0,
        true,
        "flink_checkpoint_duration_seconds",
    ),
    summary(
        "alignment",
        Unit::Seconds,
        "Per completed checkpoint, the longest barrier alignment of any subtask (the slowest subtask of each checkpoint).",
        |j| &j.phases.alignment,
        1000.0,
        true,
        "flink_checkpoint_alignment_duration_seconds",
    ),
    summary(
        "sync",
        Unit::Seconds,
        "Per completed checkpoint, the longest synchronous snapshot phase of any subtask.",
        |j| &j.phases.sync,
        1000.0,
        true,
        "flink_checkpoint_sync_duration_seconds",
    ),
    summary(
        "async",
        Unit::Seconds,
        "Per completed checkpoint, the longest asynchronous snapshot phase of any subtask.",
        |j| &j.phases.async_,
        1000.0,
        true,
        "flink_checkpoint_async_duration_seconds",
    ),
    summary(
        "start_delay",
        Unit::Seconds,
        "Per completed checkpoint, the longest delay from the trigger to the first barrier at a subtask.",
        |j| &j.phases.start_delay,
        1000.0,
        true,
        "flink_checkpoint_start_delay_seconds",
    ),
    summary(
        "checkpointed_size",
        Unit::Bytes,
        "Checkpointed (incremental) size of completed checkpoints.",
        |j| &j.sizes.checkpointed,
        1.0,
        false,
        "flink_checkpoint_checkpointed_size_bytes",
    ),
    summary(
        "full_size",
        Unit::Bytes,
        "Full state size of completed checkpoints.",
        |j| &j.sizes.full_state,
        1.0,
        false,
        "flink_checkpoint_full_size_bytes",
    ),
    summary(
        "processed_data",
        Unit::Bytes,
        "Data processed during the alignment of completed checkpoints.",
        |j| &j.sizes.processed,
        1.0,
        false,
        "flink_checkpoint_processed_data_bytes",
    ),
    summary(
        "persisted_data",
        Unit::Bytes,
        "In-flight data persisted by completed (unaligned) checkpoints.",
        |j| &j.sizes.persisted,
        1.0,
        false,
        "flink_checkpoint_persisted_data_bytes",
    ),
    job(
        "checkpoints.completed",
        Unit::Count,
        "Completed checkpoints, Flink's count from the poll (a counter).",
        |v| Some(v.job.totals().completed as f64),
        Some("flink_checkpoints_total{status=\"completed\"}"),
    ),
    job(
        "checkpoints.failed",
        Unit::Count,
        "Failed checkpoints, Flink's count from the poll (a counter).",
        |v| Some(v.job.totals().failed as f64),
        Some("flink_checkpoints_total{status=\"failed\"}"),
    ),
    job(
        "checkpoints.total",
        Unit::Count,
        "Completed plus failed checkpoints (a counter).",
        |v| {
            let totals = v.job.totals();
            Some((totals.completed + totals.failed) as f64)
        },
        Some("sum without (status) (flink_checkpoints_total)"),
    ),
    job(
        "checkpoints.trigger_failed",
        Unit::Count,
        "Of the failed checkpoints, triggers that failed before the checkpoint got an id (\"Not all required tasks are currently running\" while a job deploys; a counter).",
        |v| Some(v.job.failed_without_id as f64),
        Some("flink_checkpoint_trigger_failures_total"),
    ),
    job(
        "checkpoints.failed_seen",
        Unit::Count,
        "Failed checkpoints known from whichever source said so first, a JobManager log line or the poll, each once, without those of a job shutting down (a counter): the log line makes it move within a second of the failure.",
        |v| Some(v.job.failures.total as f64),
        Some("flink_checkpoint_failures_seen_total"),
    ),
    job(
        "restores",
        Unit::Count,
        "Restores Flink's current JobMaster counts, from a checkpoint or savepoint, from the poll (a counter; it starts over after a JobManager failover).",
        |v| Some(v.job.flink_counts.restored as f64),
        Some("flink_checkpoint_restores_total"),
    ),
    job(
        "savepoints.completed",
        Unit::Count,
        "Completed savepoints (a counter).",
        |v| Some(v.job.savepoints.totals.completed as f64),
        Some("flink_savepoints_total{status=\"completed\"}"),
    ),
    job(
        "savepoints.failed",
        Unit::Count,
        "Failed savepoints (a counter).",
        |v| Some(v.job.savepoints.totals.failed as f64),
        Some("flink_savepoints_total{status=\"failed\"}"),
    ),
    job(
        "in_progress",
        Unit::Count,
        "Checkpoints in progress at the last poll.",
        |v| Some(v.job.in_progress.len() as f64),
        Some("flink_checkpoints_in_progress"),
    ),
    job(
        "in_progress_age",
        Unit::Seconds,
        "Age of the oldest checkpoint in progress now: the poll's and the log's, minus what the log said finished since and what is past its timeout; 0 when none.",
        |v| {
            let live = v.job.live_in_progress(v.now);
            Some(live.iter().map(|(_, at)| secs(v.now.since(*at))).fold(0.0, f64::max))
        },
        Some("flink_checkpoint_oldest_in_progress_age_seconds"),
    ),
    job(
        "since_last_completed",
        Unit::Seconds,
        "Time since the last completed checkpoint; no value before one.",
        |v| v.job.last_completed.as_ref().map(|c| secs(v.now.since(c.finished_at))),
        Some("time() - flink_checkpoint_last_completed_timestamp_seconds"),
    ),
    job(
        "running_without_checkpoint",
        Unit::Seconds,
        "Time since the job entered RUNNING while no checkpoint completed since; no value once one did.",
        |v| v.job.running_without_checkpoint_ms(v.now).map(secs),
        Some("time() - flink_checkpoint_running_without_completed_since_timestamp_seconds"),
    ),
    job(
        "failing_for",
        Unit::Seconds,
        "Time since the first failure of the current run of consecutive failures; no value without one.",
        |v| v.job.failing_since.map(|since| secs(v.now.since(since))),
        Some("time() - flink_checkpoint_failing_since_timestamp_seconds"),
    ),
    job(
        "blocked_by_user_code",
        Unit::Flag,
        "1 while the thread of the subtask holding a checkpoint up sat in the same frame of the user's code in consecutive samples (docs/thread-dumps.md) and no checkpoint completed since, else 0. A rule reading it gets operator, subtask and taskmanager labels, and frame, frame_at, thread, samples and checkpoint for its text.",
        |v| Some(f64::from(u8::from(v.job.blocked_thread(v.now).is_some()))),
        Some("flink_checkpoint_blocked_by_user_code"),
    ),
    job(
        "interval",
        Unit::Seconds,
        "Configured checkpoint interval; no value when periodic checkpoints are off.",
        |v| v.job.settings.as_ref().and_then(|s| s.interval_ms).map(secs),
        Some("flink_checkpoint_interval_seconds"),
    ),
    job(
        "timeout",
        Unit::Seconds,
        "Configured checkpoint timeout.",
        |v| v.job.settings.as_ref().and_then(|s| s.timeout_ms).map(secs),
        Some("flink_checkpoint_timeout_seconds"),
    ),
    job(
        "min_pause",
        Unit::Seconds,
        "Configured minimum pause between checkpoints.",
        |v| v.job.settings.as_ref().map(|s| secs(s.min_pause_ms)),
        Some("flink_checkpoint_min_pause_seconds"),
    ),
    job(
        "max_concurrent",
        Unit::Count,
        "Configured maximum number of concurrent checkpoints.",
        |v| v.job.settings.as_ref().map(|s| f64::from(s.max_concurrent)),
        Some("flink_checkpoint_max_concurrent"),
    ),
    job(
        "tolerable_failures",
        Unit::Count,
        "Configured tolerable consecutive checkpoint failures.",
        |v| v.job.settings.as_ref().and_then(|s| s.tolerable_failures).map(f64::from),
        Some("flink_checkpoint_tolerable_failures"),
    ),
    job(
        "config_risks",
        Unit::Count,
        "How many of the advisor's risk findings (tolerable_too_high, timeout_tight, no_retention) the job's configuration shows (docs/advice.md).",
        |v| {
            let risks = crate::advice::job_risks(v.job, None)?;
            Some(risks.iter().filter(|(_, on)| *on).count() as f64)
        },
        Some("sum without (finding) (flink_checkpoint_config_risk)"),
    ),
    job(
        "progress_window",
        Unit::Seconds,
        "max(interval, timeout) x (min(tolerable_failures, 3) + 2): the Flink Kubernetes operator's window with the tolerable count capped, so that a large tolerable-failed-checkpoints does not make it hours long.",
        progress_window,
        Some(
            "max(flink_checkpoint_interval_seconds, flink_checkpoint_timeout_seconds) * (min(flink_checkpoint_tolerable_failures, 3) + 2)",
        ),
    ),
    job(
        "consecutive_failures",
        Unit::Count,
        "Failed checkpoints since the last completed one, a running count; failures of a stopping job excluded.",
        |v| Some(v.job.consecutive_failures() as f64),
        Some("flink_checkpoint_consecutive_failures"),
    ),
    job(
        "counted_failures",
        Unit::Count,
        "Flink's own count towards tolerable_failures (CheckpointFailureManager): expired, declined, asynchronous, I/O and finalisation failures, each id once, since the last completed checkpoint or the last time Flink failed the job for exceeding it; the N of the JobManager's next \"(N consecutive failed attempts so far)\"; no value before the tolerable number is known.",
        |v| v.job.counted_failures().map(|n| n as f64),
        Some("flink_checkpoint_counted_failures"),
    ),
    job(
        "tolerance_exceeded",
        Unit::Count,
        "Times counted_failures went past tolerable_failures: each time Flink failed the job ('Exceeded checkpoint tolerable failure threshold') and it restarted or failed (a counter).",
        |v| Some(v.job.tolerance.exceeded() as f64),
        Some("flink_checkpoint_tolerance_exceeded_total"),
    ),
    job(
        "since_tolerance_exceeded",
        Unit::Seconds,
        "Time since the failed checkpoint that last took counted_failures past tolerable_failures (Flink failed the job then); no value before one.",
        |v| v.job.tolerance.last_exceeded_at().map(|at| secs(v.now.since(at))),
        Some("time() - flink_checkpoint_tolerance_exceeded_timestamp_seconds"),
    ),
    job(
        "remaining_tolerable",
        Unit::Count,
        "tolerable_failures - counted_failures: counted failures Flink still tolerates.",
        |v| {
            let tolerable = v.job.settings.as_ref().and_then(|s| s.tolerable_failures)?;
            Some(f64::from(tolerable) - v.job.counted_failures()? as f64)
        },
        Some("flink_checkpoint_tolerable_failures - flink_checkpoint_counted_failures"),
    ),
    Series {
        name: "log",
        unit: Unit::Count,
        doc: "`log.KIND`: the job's log events of that kind (expired, declined, failed, barrier_missing, restored, …: any kind the tailer or a user pattern produces), from every source (a counter).",
        read: Read::JobKeyed(|v, kind| Some(v.log_events(kind))),
        prometheus: Some("sum without (source) (flink_checkpoint_log_events_total{kind=\"{key}\"})"),
    },
    job(
        "shadow.unexplained",
        Unit::Count,
        "Trigger deviations from the schedule the model of Flink's checkpoint coordinator predicts that no rule explains (a counter).",
        |v| Some(v.shadow_deviations(false)),
        Some("sum without (kind) (flink_checkpoint_deviations_total{explained=\"false\"})"),
    ),
    job(
        "shadow.explained",
        Unit::Count,
        "Trigger deviations that a rule of the coordinator explains: min pause, max concurrent, a long checkpoint, … (a counter).",
        |v| Some(v.shadow_deviations(true)),
        Some("sum without (kind) (flink_checkpoint_deviations_total{explained=\"true\"})"),
    ),
    job(
        "shadow.stall",
        Unit::Seconds,
        "Time since a trigger the model expected and that did not come, once that is past `shadow.stall_tolerance` at two polls in a row; 0 otherwise.",
        |v| Some(v.job.shadow.trigger.stalled_for_ms().map_or(0.0, secs)),
        Some("flink_checkpoint_schedule_stall_seconds"),
    ),
    job(
        "shadow.stall_tolerance",
        Unit::Seconds,
        "The trigger jitter plus the longest observed lag from a trigger to the first poll that showed the checkpoint (at least 3 s until three are known), plus one poll interval.",
        |v| v.job.shadow.trigger.current_stall_tolerance_ms().map(secs),
        None,
    ),
    job(
        "state_skew",
        Unit::Ratio,
        "State size of the largest subtask over the median one, of the job's most skewed operator chain in its latest completed checkpoint with per-subtask sizes (a ratio, 1 or more; no value below 1 MiB of state).",
        |v| v.state_skew().map(|s| s.ratio),
        Some("flink_checkpoint_state_skew_ratio"),
    ),
    job(
        "state_skew_max_size",
        Unit::Bytes,
        "The state size of that operator's largest subtask.",
        |v| v.state_skew().map(|s| s.max_bytes as f64),
        Some("flink_checkpoint_state_skew_max_bytes"),
    ),
    job(
        "state_skew_hot_subtask",
        Unit::Count,
        "The index (0-based) of that subtask.",
        |v| v.state_skew().map(|s| f64::from(s.hot_subtask)),
        Some("flink_checkpoint_state_skew_hot_subtask"),
    ),
    job(
        "storage_bytes",
        Unit::Bytes,
        "Bytes under the job's checkpoint directory, from the storage source's latest listing.",
        |v| v.job.storage.listing().map(|l| l.bytes as f64),
        Some("flink_checkpoint_storage_bytes"),
    ),
    job(
        "storage_shared_bytes",
        Unit::Bytes,
        "Of them, bytes under shared/ (incremental state shared between checkpoints).",
        |v| v.job.storage.listing().map(|l| l.shared_bytes as f64),
        Some("flink_checkpoint_storage_shared_bytes"),
    ),
    job(
        "storage_state",
        Unit::Bytes,
        "The full state size Flink reports for the newest completed checkpoint whose directory was listed.",
        |v| v.job.storage.listing().and_then(|l| l.reported_state_bytes).map(|b| b as f64),
        Some("flink_checkpoint_storage_reported_state_bytes"),
    ),
    job(
        "storage_orphaned_bytes",
        Unit::Bytes,
        "Bytes in chk-N folders no retained or in-progress checkpoint holds (none with file merging on: not known).",
        |v| v.job.storage.listing().filter(|l| !l.file_merging).map(|l| l.orphaned_bytes as f64),
        Some("flink_checkpoint_storage_orphaned_bytes"),
    ),
    job(
        "storage_orphaned_folders",
        Unit::Count,
        "Those folders.",
        |v| v.job.storage.listing().filter(|l| !l.file_merging).map(|l| l.orphans.len() as f64),
        Some("flink_checkpoint_storage_orphaned_folders"),
    ),
    job(
        "metadata_bytes",
        Unit::Bytes,
        "Size of the _metadata of the job's newest checkpoint folder (from the listing).",
        |v| v.job.storage.listing().and_then(|l| l.metadata).map(|(_, b)| b as f64),
        Some("flink_checkpoint_metadata_bytes"),
    ),
    job(
        "frame_size",
        Unit::Bytes,
        "The RPC frame size an acknowledgement must fit (pekko.framesize, akka.framesize).",
        |v| v.job.storage.listing().map(|l| l.framesize_bytes as f64),
        Some("flink_checkpoint_frame_size_bytes"),
    ),
    job(
        "storage_throttled",
        Unit::Count,
        "Listings of the job's checkpoint directory the storage throttled (503 SlowDown, 429; a counter).",
        |v| Some(v.job.storage.throttled as f64),
        Some("flink_checkpoint_storage_throttled_total"),
    ),
    cluster(
        "reachable",
        Unit::Flag,
        "1 if the JobManager's REST API answered the last poll round, else 0.",
        |v| Some(f64::from(u8::from(v.cluster.reachable))),
        Some("checkpoint_sentinel_flink_up"),
    ),
    cluster(
        "polls",
        Unit::Count,
        "Poll rounds, successful or not (a counter).",
        |v| Some(v.cluster.polls_total as f64),
        Some("checkpoint_sentinel_polls_total"),
    ),
    cluster(
        "poll_errors",
        Unit::Count,
        "Failed REST requests of every kind (a counter).",
        |v| Some(v.cluster.poll_errors.values().sum::<u64>() as f64),
        Some("sum without (kind) (checkpoint_sentinel_poll_errors_total)"),
    ),
    cluster(
        "since_last_success",
        Unit::Seconds,
        "Time since the JobManager last answered; no value before it ever did.",
        |v| v.cluster.last_success.map(|at| secs(v.now.since(at))),
        Some("time() - checkpoint_sentinel_last_successful_poll_timestamp_seconds"),
    ),
    cluster(
        "jobs",
        Unit::Count,
        "Jobs with checkpointing that the daemon watches on the cluster.",
        |v| Some(v.cluster.listed_jobs() as f64),
        Some("checkpoint_sentinel_watched_jobs"),
    ),
    cluster(
        "jobs.failing",
        Unit::Count,
        "Watched jobs that have not ended and failed a checkpoint since their last completed one.",
        |v| Some(v.failing_jobs() as f64),
        None,
    ),
    cluster(
        "jobs.config_risk",
        Unit::Count,
        "Watched jobs whose configuration shows at least one of the advisor's risk findings (tolerable_too_high, timeout_tight, no_retention; docs/advice.md).",
        |v| Some(v.config_risk_jobs().len() as f64),
        Some("count without (job_id, job_name) (sum without (finding) (flink_checkpoint_config_risk) > 0)"),
    ),
    taskmanager(
        "subtasks",
        Unit::Count,
        "Subtasks of the cluster's watched jobs that ran on it at their last load fetch.",
        |v| Some(v.figures.subtasks as f64),
    ),
    taskmanager("jobs", Unit::Count, "Watched jobs with a subtask on it.", |v| Some(v.figures.jobs as f64)),
    taskmanager(
        "slowest_subtasks",
        Unit::Count,
        "Recent completed checkpoints (those of each job's ring of recent checkpoints) whose slowest subtask, the one that acknowledged last, ran on it.",
        |v| Some(v.figures.slowest_subtasks as f64),
    ),
    taskmanager(
        "holdouts",
        Unit::Count,
        "Recent failed checkpoints whose holdout, the subtask that held the checkpoint up, ran on it.",
        |v| Some(v.figures.holdouts as f64),
    ),
    taskmanager(
        "last_to_restore",
        Unit::Count,
        "Jobs whose latest restore waited longest for a subtask on it (the last subtask to start running).",
        |v| Some(v.figures.last_to_restore as f64),
    ),
    daemon(
        "store_failing",
        Unit::Flag,
        "1 while the checkpoint store cannot be written (it is re-opened with back-off), else 0; no value without a store.",
        |v| v.facts.store_failing.map(|f| f64::from(u8::from(f))),
        Some("checkpoint_sentinel_store_failing"),
    ),
    daemon(
        "store_waiting_records",
        Unit::Count,
        "Records waiting in the outbox (and the state file) for the checkpoint store; no value without a store.",
        |v| v.facts.store_waiting_records.map(|n| n as f64),
        Some("checkpoint_sentinel_store_waiting_records"),
    ),
    daemon(
        "store_dropped_records",
        Unit::Count,
        "Records dropped unwritten because the store kept failing and its outbox was full (a counter).",
        |v| Some(v.facts.store_dropped_records as f64),
        Some("checkpoint_sentinel_store_dropped_records_total"),
    ),
    daemon(
        "state_persist_errors",
        Unit::Count,
        "Failed writes of the state file (a counter).",
        |v| Some(v.facts.state_persist_errors as f64),
        Some("checkpoint_sentinel_state_persist_errors_total"),
    ),
    daemon(
        "state_persist_failing",
        Unit::Flag,
        "1 while the last write of the state file failed, else 0.",
        |v| Some(f64::from(u8::from(v.facts.state_persist_failing))),
        None,
    ),
    taskmanager_exported(
        "gc_time_ratio",
        Unit::Ratio,
        "The share of the last minute its JVM spent in garbage collection (evidence rounds).",
        |v| v.figures.gc_time_ratio,
        "flink_taskmanager_gc_time_ratio",
    ),
    taskmanager_exported(
        "checkpoint_culprits",
        Unit::Count,
        "Recent checkpoints whose culprit ran on it: slowest_subtasks plus holdouts.",
        |v| Some((v.figures.slowest_subtasks + v.figures.holdouts) as f64),
        "flink_taskmanager_checkpoint_culprits",
    ),
    Series {
        name: "jobs",
        unit: Unit::Count,
        doc: "The troubled jobs the incident groups (they share its cause; no healthy job has it).",
        read: Read::Incident(|v| Some(v.incident.jobs as f64)),
        prometheus: Some("flink_checkpoint_incident_jobs"),
    },
    Series {
        name: "healthy_without",
        unit: Unit::Count,
        doc: "Healthy jobs without the incident's cause (in its cluster for a TaskManager or host).",
        read: Read::Incident(|v| Some(v.incident.healthy_without as f64)),
        prometheus: None,
    },
];

fn progress_window(v: &JobView<'_>) -> Option<f64> {
    let s = v.job.settings.as_ref()?;
    let base = secs(s.interval_ms.unwrap_or(0).max(s.timeout_ms.unwrap_or(0)));
    let tolerable = s.tolerable_failures.unwrap_or(0).min(PROGRESS_TOLERABLE_CAP);
    Some(base * (f64::from(tolerable) + 2.0))
}

/// `progress_window` counts at most this many tolerable failures: at tolerable 100 the
/// uncapped window was 102 × max(interval, timeout), 17 h with a 10-minute timeout.
pub(crate) const PROGRESS_TOLERABLE_CAP: u32 = 3;

const fn summary(
    name: &'static str,
    unit: Unit,
    doc: &'static str,
    histogram: fn(&JobState) -> &WindowedHistogram,
    per_unit: f64,
    counted: bool,
    metric: &'static str,
) -> Series {
    Series {
        name,
        unit,
        doc,
        read: Read::JobSummary { histogram, per_unit, counted },
        prometheus: Some(metric),
    }
}

const fn job(
    name: &'static str,
    unit: Unit,
    doc: &'static str,
    read: fn(&JobView<'_>) -> Option<f64>,
    prometheus: Option<&'static str>,
) -> Series {
    Series { name, unit, doc, read: Read::Job(read), prometheus }
}

const fn cluster(
    name: &'static str,
    unit: Unit,
    doc: &'static str,
    read: fn(&ClusterView<'_>) -> Option<f64>,
    prometheus: Option<&'static str>,
) -> Series {
    Series { name, unit, doc, read: Read::Cluster(read), prometheus }
}

/// A TaskManager series exported as `prometheus` too.
const fn taskmanager_exported(
    name: &'static str,
    unit: Unit,
    doc: &'static str,
    read: fn(&TaskManagerView<'_>) -> Option<f64>,
    prometheus: &'static str,
) -> Series {
    Series { name, unit, doc, read: Read::TaskManager(read), prometheus: Some(prometheus) }
}

/// A TaskManager series no exported metric carries.
const fn taskmanager(
    name: &'static str,
    unit: Unit,
    doc: &'static str,
    read: fn(&TaskManagerView<'_>) -> Option<f64>,
) -> Series {
    Series { name, unit, doc, read: Read::TaskManager(read), prometheus: None }
}

const fn daemon(
    name: &'static str,
    unit: Unit,
    doc: &'static str,
    read: fn(&DaemonView<'_>) -> Option<f64>,
    prometheus: Option<&'static str>,
) -> Series {
    Series { name, unit, doc, read: Read::Daemon(read), prometheus }
}

/// Which member of a series' family a name selects.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Member<'n> {
    /// The series itself.
    Whole,
    /// A quantile of a summary, by its index in p50, p95, p99.
    Quantile(usize),
    /// The lifetime count of a summary.
    Count,
    /// The key of a keyed family.
    Key(&'n str),
}

/// The entries by (scope, name), built once.
fn index() -> &'static HashMap<(Scope, &'static str), &'static Series> {
    static INDEX: OnceLock<HashMap<(Scope, &'static str), &'static Series>> = OnceLock::new();
    INDEX.get_or_init(|| SERIES.iter().map(|s| ((s.read.scope(), s.name), s)).collect())
}

/// The entry and member a series name of `scope` selects (`duration.p95`: `duration`, the
/// p95), or `None` for a name that scope does not know.
pub(crate) fn find(scope: Scope, name: &str) -> Option<(&'static Series, Member<'_>)> {
    let index = index();
    if let Some(series) = index.get(&(scope, name)).filter(|s| is_single(s)) {
        return Some((series, Member::Whole));
    }
    if let Some((base, stat)) = name.rsplit_once('.')
        && let Some(series) = index.get(&(scope, base))
        && let Read::JobSummary { counted, .. } = series.read
    {
        if let Some(i) = STATS.iter().position(|(s, _)| *s == stat) {
            return Some((series, Member::Quantile(i)));
        }
        return (counted && stat == "count").then_some((series, Member::Count));
    }
    let (prefix, key) = name.split_once('.')?;
    let series = index.get(&(scope, prefix))?;
    let word =
        !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (matches!(series.read, Read::JobKeyed(_)) && word).then_some((series, Member::Key(key)))
}

fn is_single(series: &Series) -> bool {
    !matches!(series.read, Read::JobSummary { .. } | Read::JobKeyed(_))
}

/// Whether `name` is a series rules of `scope` can read.
pub(crate) fn is_known(scope: Scope, name: &str) -> bool {
    find(scope, name).is_some()
}

/// The names an entry stands for, as the docs list them (`duration.p50`, …; `log.KIND`).
pub fn names(series: &Series) -> Vec<String> {
    match series.read {
        Read::JobSummary { counted, .. } => STATS
            .iter()
            .map(|(stat, _)| format!("{}.{stat}", series.name))
            .chain(counted.then(|| format!("{}.count", series.name)))
            .collect(),
        Read::JobKeyed(_) => vec![format!("{}.KIND", series.name)],
        _ => vec![series.name.to_string()],
    }
}

/// The PromQL over the exported metrics that computes the series `name` of `scope`
/// (`duration.p95`: `flink_checkpoint_duration_seconds{quantile="0.95"}`), `None` when the
/// series is unknown or no metric carries it.
pub fn twin(scope: Scope, name: &str) -> Option<String> {
    let (series, member) = find(scope, name)?;
    let prometheus = series.prometheus?;
    Some(match member {
        Member::Whole => prometheus.to_string(),
        Member::Quantile(i) => format!("{prometheus}{{quantile=\"{}\"}}", STATS[i].1),
        Member::Count => format!("{prometheus}_count"),
        Member::Key(key) => prometheus.replace("{key}", key),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_their_entry_and_member() {
        let member = |scope, name| find(scope, name).map(|(s, m)| (s.name, m));
        assert_eq!(member(Scope::Job, "duration.p95"), Some(("duration", Member::Quantile(1))));
        assert_eq!(member(Scope::Job, "duration.count"), Some(("duration", Member::Count)));
        assert_eq!(member(Scope::Job, "checkpointed_size.count"), None, "sizes have no count");
        assert_eq!(member(Scope::Job, "duration.p96"), None);
        assert_eq!(member(Scope::Job, "duration"), None, "a summary needs its statistic");
        assert_eq!(member(Scope::Job, "checkpoints.failed"), Some(("checkpoints.failed", Member::Whole)));
        assert_eq!(member(Scope::Job, "log.barrier_missing"), Some(("log", Member::Key("barrier_missing"))));
        assert_eq!(member(Scope::Job, "log."), None);
        assert_eq!(member(Scope::Job, "log.Expired"), None);
        assert_eq!(member(Scope::Job, "log"), None);
        assert_eq!(member(Scope::Cluster, "jobs"), Some(("jobs", Member::Whole)));
        assert_eq!(member(Scope::TaskManager, "jobs"), Some(("jobs", Member::Whole)));
        assert_eq!(member(Scope::Cluster, "duration.p95"), None, "a job series is not a cluster's");
        assert_eq!(member(Scope::Job, "reachable"), None);
        assert_eq!(member(Scope::Daemon, "store_failing"), Some(("store_failing", Member::Whole)));
        assert_eq!(member(Scope::Job, "store_failing"), None, "a daemon series is not a job's");
    }

    #[test]
    fn each_name_is_defined_once_per_scope() {
        let mut seen = std::collections::BTreeSet::new();
        for series in SERIES {
            assert!(seen.insert((series.read.scope(), series.name)), "{} twice", series.name);
            assert!(!series.doc.is_empty(), "{}", series.name);
        }
    }

    #[test]
    fn twins_name_the_quantile_the_count_or_the_key() {
        assert_eq!(
            twin(Scope::Job, "start_delay.p95").as_deref(),
            Some("flink_checkpoint_start_delay_seconds{quantile=\"0.95\"}")
        );
        assert_eq!(
            twin(Scope::Job, "duration.count").as_deref(),
            Some("flink_checkpoint_duration_seconds_count")
        );
        assert_eq!(
            twin(Scope::Job, "log.expired").as_deref(),
            Some("sum without (source) (flink_checkpoint_log_events_total{kind=\"expired\"})")
        );
        assert_eq!(twin(Scope::Job, "shadow.stall_tolerance"), None);
        assert_eq!(twin(Scope::Job, "no_such_series"), None);
    }
}
