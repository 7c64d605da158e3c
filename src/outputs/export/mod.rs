//! The Prometheus exporter: a custom `Collector` that renders `State` at scrape time.
//!
//! HDR quantiles go out as real `summary` families (quantiles over the sliding window, `_sum`
//! and `_count` over the lifetime). Every metric name, type and help text is in [`METRICS`];
//! `docs/metrics.md` lists the same names and `tests/metrics_doc.rs` keeps the two in step.

use prometheus::proto::{self, MetricFamily, MetricType};

use crate::app::DaemonStats;
use crate::observe::CheckpointStatus;
use crate::state::{Phase, State};
use crate::stats::{QUANTILES, Summary};
use crate::time::Timestamp;

/// One exported metric family.
pub struct MetricDef {
    /// Full name (for counters, including `_total`).
    pub name: &'static str,
    /// HELP text.
    pub help: &'static str,
    /// Prometheus type.
    pub kind: Kind,
    /// Label names.
    pub labels: &'static [&'static str],
}

/// The metric types we export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A value that only goes up (resets on restart of its source).
    Counter,
    /// Quantiles with sum and count.
    Summary,
}

const JOB: &[&str] = &["cluster", "job_id", "job_name"];
const OPERATOR: &[&str] = &["cluster", "job_id", "job_name", "vertex_id", "operator"];

macro_rules! metric {
    ($name:literal, $kind:ident, $labels:expr, $help:literal) => {
        MetricDef { name: $name, help: $help, kind: Kind::$kind, labels: $labels }
    };
}

/// Every metric the daemon exports.
pub const METRICS: &[MetricDef] = &[
    metric!(
        "flink_checkpoint_duration_seconds",
        Summary,
        JOB,
        "End-to-end duration (trigger to last acknowledgement) of completed checkpoints; quantiles over the sliding window, savepoints excluded."
    ),
    metric!(
        "flink_checkpoint_alignment_duration_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest barrier alignment of any subtask."
    ),
    metric!(
        "flink_checkpoint_sync_duration_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest synchronous snapshot phase of any subtask."
    ),
    metric!(
        "flink_checkpoint_async_duration_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest asynchronous snapshot phase of any subtask (for unaligned checkpoints it includes persisting in-flight data)."
    ),
    metric!(
        "flink_checkpoint_start_delay_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest time from trigger until the first barrier reached a subtask (backpressure shows here)."
    ),
    metric!(
        "flink_checkpoint_checkpointed_size_bytes",
        Summary,
        JOB,
        "Bytes persisted by each completed checkpoint (the incremental size for incremental checkpoints)."
    ),
    metric!(
        "flink_checkpoint_full_size_bytes",
        Summary,
        JOB,
        "Full state size of each completed checkpoint (Flink 1.15 and later only)."
    ),
    metric!(
        "flink_checkpoint_processed_data_bytes",
        Summary,
        JOB,
        "Bytes processed during alignment by each completed checkpoint."
    ),
    metric!(
        "flink_checkpoint_persisted_data_bytes",
        Summary,
        JOB,
        "In-flight bytes persisted by each completed checkpoint (unaligned checkpoints)."
    ),
    metric!(
        "flink_checkpoints_total",
        Counter,
        &["cluster", "job_id", "job_name", "status"],
        "Checkpoints (and savepoints) by final status; equals Flink's own counts, kept monotonic across JobManager failovers."
    ),
    metric!(
        "flink_checkpoint_restores_total",
        Counter,
        JOB,
        "Restores of the job from a checkpoint or savepoint, as counted by Flink."
    ),
    metric!(
        "flink_job_restores_total",
        Counter,
        &["cluster", "job_id", "job_name", "from"],
        "Restores of the job the daemon saw, each once (told apart by Flink's restore time), by what they restored from: from=\"checkpoint\" (a failover) or \"savepoint\"; persisted, so unlike flink_checkpoint_restores_total it does not restart with a new JobMaster."
    ),
    metric!(
        "flink_job_last_restore_duration_seconds",
        Gauge,
        JOB,
        "The latest timed restore: from the JobManager restoring the checkpoint or savepoint (Flink's restore_timestamp) until the last subtask was RUNNING again."
    ),
    metric!(
        "flink_job_last_restore_downtime_seconds",
        Gauge,
        JOB,
        "The latest timed restore after a failover: from the job entering RESTARTING until the last subtask was RUNNING again (the restart strategy's delay included)."
    ),
    metric!(
        "flink_job_last_restore_timestamp_seconds",
        Gauge,
        JOB,
        "When the job last restored (Flink's restore_timestamp), Unix time."
    ),
    metric!(
        "flink_job_last_restore_checkpoint_id",
        Gauge,
        JOB,
        "The id of the checkpoint or savepoint the job last restored from (a value, not a label: one series per job)."
    ),
    metric!(
        "flink_checkpoint_failures_seen_total",
        Counter,
        JOB,
        "Failed checkpoints known from whichever source said so first, a JobManager log line (expired, declined, failed) or the poll, each checkpoint once; failures of a job shutting down (coordinator suspending, tasks cancelled or not running) are left out."
    ),
    metric!(
        "flink_savepoints_total",
        Counter,
        &["cluster", "job_id", "job_name", "status"],
        "Savepoints (manual and periodic) the daemon saw finish, by final status; part of flink_checkpoints_total too, since Flink counts them there."
    ),
    metric!(
        "flink_savepoint_last_completed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest completed savepoint the daemon saw was acknowledged, Unix time (its age: time() minus this)."
    ),
    metric!(
        "flink_savepoint_last_duration_seconds",
        Gauge,
        JOB,
        "Trigger to last acknowledgement of the latest completed savepoint."
    ),
    metric!(
        "flink_savepoint_last_failed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest failed savepoint the daemon saw failed, Unix time."
    ),
    metric!("flink_checkpoints_in_progress", Gauge, JOB, "Checkpoints in progress at the last poll."),
    metric!(
        "flink_checkpoint_oldest_in_progress_age_seconds",
        Gauge,
        JOB,
        "Age of the oldest checkpoint in progress at scrape time (now minus its trigger time): those the log saw triggered and those the last poll saw, without those the log said finished since, those past their timeout, and those only a poll saw and younger than half their timeout then (they may have completed unheard); 0 when none."
    ),
    metric!(
        "flink_checkpoint_trigger_failures_total",
        Counter,
        JOB,
        "Of the failed checkpoints Flink counted, the triggers that failed before the checkpoint got an id (e.g. 'Not all required tasks are currently running' while the job deploys); not checkpoint failures, and not counted towards the tolerable failures."
    ),
    metric!(
        "flink_checkpoint_running_without_completed_since_timestamp_seconds",
        Gauge,
        JOB,
        "When the job entered RUNNING as the daemon saw it (its first poll if it was running then), Unix time; only while no checkpoint has completed since, for jobs with periodic checkpoints."
    ),
    metric!(
        "flink_checkpoint_failing_since_timestamp_seconds",
        Gauge,
        JOB,
        "When the first of the job's current consecutive checkpoint failures failed, Unix time; only while the last checkpoint failed."
    ),
    metric!(
        "flink_checkpoint_last_completed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest completed checkpoint was acknowledged, Unix time."
    ),
    metric!(
        "flink_checkpoint_last_failed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest failed checkpoint failed, Unix time."
    ),
    metric!(
        "flink_checkpoint_interval_seconds",
        Gauge,
        JOB,
        "Configured checkpoint interval (absent when periodic checkpoints are off)."
    ),
    metric!("flink_checkpoint_timeout_seconds", Gauge, JOB, "Configured checkpoint timeout."),
    metric!(
        "flink_checkpoint_min_pause_seconds",
        Gauge,
        JOB,
        "Configured minimum pause between checkpoints."
    ),
    metric!(
        "flink_checkpoint_max_concurrent",
        Gauge,
        JOB,
        "Configured maximum number of concurrent checkpoints."
    ),
    metric!(
        "flink_checkpoint_tolerable_failures",
        Gauge,
        JOB,
        "Configured tolerable consecutive checkpoint failures."
    ),
    metric!(
        "flink_checkpoint_expected_interval_seconds",
        Gauge,
        JOB,
        "Median gap between recent consecutive triggers as the coordinator model expected them (max(interval, min-pause), or longer when min-pause, max-concurrent or a timeout binds)."
    ),
    metric!(
        "flink_checkpoint_observed_interval_seconds",
        Gauge,
        JOB,
        "Median gap between recent consecutive observed checkpoint triggers."
    ),
    metric!(
        "flink_checkpoint_trigger_deviation_seconds",
        Summary,
        JOB,
        "Per checkpoint, |observed - expected| trigger time, the expectation being the coordinator model's, re-anchored on the schedule; quantiles over the sliding window."
    ),
    metric!(
        "flink_checkpoint_schedule_stall_seconds",
        Gauge,
        JOB,
        "How long the next checkpoint trigger the coordinator model expected has been overdue at the last poll, once that is beyond the stall tolerance (0 otherwise): the stall part of FlinkCheckpointScheduleUnexplained, the `shadow.stall` series of the built-in rules."
    ),
    metric!(
        "flink_checkpoint_deviations_total",
        Counter,
        &["cluster", "job_id", "job_name", "kind", "explained"],
        "Checkpoint triggers not where the configured interval puts them (and checkpoints that outlived their timeout, ids that skipped), by what explains them: min_pause, max_concurrent, long_checkpoint, timeout, tolerable_failures, job_restart, savepoint, manual_trigger (explained=\"true\"); late_trigger, not_expired, id_skip (explained=\"false\")."
    ),
    metric!(
        "flink_job_info",
        Gauge,
        &["cluster", "job_id", "job_name", "state"],
        "Watched jobs with their current state; always 1."
    ),
    metric!(
        "flink_operator_checkpoint_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's acknowledgement time (ack minus trigger) of completed checkpoints."
    ),
    metric!(
        "flink_operator_checkpoint_alignment_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's barrier alignment duration."
    ),
    metric!(
        "flink_operator_checkpoint_sync_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's synchronous snapshot duration."
    ),
    metric!(
        "flink_operator_checkpoint_async_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's asynchronous snapshot duration."
    ),
    metric!(
        "flink_operator_checkpoint_start_delay_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's checkpoint start delay."
    ),
    metric!(
        "flink_checkpoint_log_events_total",
        Counter,
        &["cluster", "job_id", "kind", "source"],
        "Checkpoint events recognised in Flink logs (source log) or synthesised from REST (source rest), by kind: triggered, completed, expired, declined, failed, barrier_missing, snapshot_slow, subtask_pending, …; job_id is empty for lines that name no job."
    ),
    metric!(
        "flink_checkpoint_log_root_causes_total",
        Counter,
        &["cluster", "cause"],
        "Root causes of checkpoint failures in Flink logs: the deepest \"Caused by:\" of the attached stack trace, classified (disk_full, out_of_memory, timeout, closed_stream, serialization, permission, s3, hdfs, …); counted once per checkpoint and cause."
    ),
    metric!(
        "checkpoint_sentinel_build_info",
        Gauge,
        &["version", "revision", "rustc_version"],
        "The daemon's version, the git commit it was built from (unknown without git at build time) and the Rust compiler's version; always 1. The Flink versions seen are in checkpoint_sentinel_flink_info."
    ),
    metric!("process_cpu_seconds_total", Counter, &[], "User and system CPU time of the daemon, seconds."),
    metric!("process_resident_memory_bytes", Gauge, &[], "Resident memory of the daemon, bytes."),
    metric!("process_virtual_memory_bytes", Gauge, &[], "Virtual memory of the daemon, bytes."),
    metric!("process_open_fds", Gauge, &[], "Open file descriptors of the daemon."),
    metric!("process_max_fds", Gauge, &[], "The daemon's limit of open file descriptors (soft limit)."),
    metric!("process_start_time_seconds", Gauge, &[], "Start of the daemon, seconds since the Unix epoch."),
    metric!("process_threads", Gauge, &[], "Threads of the daemon."),
    metric!(
        "checkpoint_sentinel_discovered_clusters",
        Gauge,
        &[],
        "Clusters found by file discovery and polled (when [discovery] files are set)."
    ),
    metric!(
        "checkpoint_sentinel_discovery_targets_dropped",
        Gauge,
        &["reason"],
        "Targets in the discovery files left out at the last reading, by reason: limit (beyond discovery.max_clusters), duplicate (a name taken by a [[clusters]] entry or an earlier target), invalid (not a valid cluster name or URL)."
    ),
    metric!(
        "checkpoint_sentinel_discovery_file_errors_total",
        Counter,
        &["reason"],
        "Discovery file readings that failed (what the file gave before is kept), by reason: too_large (over discovery.max_file_bytes), unreadable, invalid (not a file_sd JSON list), too_many_files (beyond discovery.max_files)."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_discovered_clusters",
        Gauge,
        &[],
        "Clusters found by Kubernetes discovery and polled (when [discovery.kubernetes] is enabled)."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_objects",
        Gauge,
        &["kind"],
        "Kubernetes objects kept by discovery, by kind (services, flinkdeployments, flinksessionjobs); several may name one cluster."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_objects_cut_total",
        Counter,
        &["kind"],
        "Kubernetes objects left out because discovery.kubernetes.max_objects were kept already, by kind."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_relists_total",
        Counter,
        &["kind"],
        "Full re-lists of a kind after the first listing: the watch could not resume (410 Gone, or it failed), by kind."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_watch_errors_total",
        Counter,
        &["kind", "reason"],
        "Errors of the Kubernetes watches, by kind and reason: client (no API client), list, watch_start, watch_stream (the watch broke off or sent what could not be read), gone (410: listed again), api_error (another error status)."
    ),
    metric!(
        "flink_operator_job_info",
        Gauge,
        &["cluster", "resource", "job_id", "state", "lifecycle_state"],
        "1 per FlinkDeployment or FlinkSessionJob that Kubernetes discovery keeps: the Flink Kubernetes Operator's status.jobStatus.jobId, .state and status.lifecycleState (other: a value not in the CRD)."
    ),
    metric!(
        "flink_operator_last_savepoint_timestamp_seconds",
        Gauge,
        &["cluster", "resource"],
        "The Flink Kubernetes Operator's status.jobStatus.savepointInfo.lastSavepoint.timeStamp (seconds since the Unix epoch), when it has one."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_synced",
        Gauge,
        &[],
        "1 once every Kubernetes watch has listed its objects completely at least once, else 0."
    ),
    metric!(
        "checkpoint_sentinel_tls_handshake_errors_total",
        Counter,
        &["reason"],
        "Failed TLS handshakes on the daemon's port (when it serves TLS) by reason: plain_http (an http:// request), failed (broken off, certificate not trusted, no acceptable client certificate), timeout."
    ),
    metric!(
        "checkpoint_sentinel_http_connections",
        Gauge,
        &[],
        "Connections to the daemon's port open now (at most 512; more wait in the accept queue)."
    ),
    metric!(
        "checkpoint_sentinel_http_connections_closed_total",
        Counter,
        &["reason"],
        "Connections to the daemon's port it closed by reason: header_timeout (a request's headers not complete within 10 s), idle_timeout (no byte moved either way for 30 s, e.g. a client that stopped reading)."
    ),
    metric!(
        "checkpoint_sentinel_inputs_cut_total",
        Counter,
        &["cluster", "what"],
        "What the daemon's bounds on outside input cut (docs/reliability.md, \"Bounds\"), by what: response_bodies (REST answers over the size limit), jobs (jobs over max_jobs), history_entries (finished checkpoints whose details were deferred to a later round: over max_history_per_poll), log_files (files over max_files of a [[logs]] entry), log_job_ids (log series of job ids over the limit)."
    ),
    metric!(
        "checkpoint_sentinel_flink_up",
        Gauge,
        &["cluster"],
        "1 if the cluster's JobManager REST API answered the last poll round, else 0."
    ),
    metric!(
        "checkpoint_sentinel_flink_info",
        Gauge,
        &["cluster", "version"],
        "The Flink version a cluster reports; always 1."
    ),
    metric!(
        "checkpoint_sentinel_poll_duration_seconds",
        Summary,
        &["cluster"],
        "Duration of poll rounds (the daemon polls in the background; metrics are rendered from its state at scrape time)."
    ),
    metric!("checkpoint_sentinel_polls_total", Counter, &["cluster"], "Poll rounds, successful or not."),
    metric!(
        "checkpoint_sentinel_poll_errors_total",
        Counter,
        &["cluster", "kind"],
        "Failed REST requests by kind: connect, timeout, http_status, decode, transport (the connection broke while the answer was read), too_large (an answer over max_response_bytes, cut off)."
    ),
    metric!(
        "checkpoint_sentinel_last_successful_poll_timestamp_seconds",
        Gauge,
        &["cluster"],
        "When the cluster's JobManager last answered, Unix time."
    ),
    metric!(
        "checkpoint_sentinel_watched_jobs",
        Gauge,
        &["cluster"],
        "Jobs with checkpointing that the daemon watches on the cluster."
    ),
    metric!(
        "checkpoint_sentinel_checkpoints_unobserved_total",
        Counter,
        &["cluster", "job_id", "job_name", "status"],
        "Checkpoints counted from Flink's counts without their own details: before the first poll, or more than web.checkpoints.history went by between two polls."
    ),
    metric!(
        "checkpoint_sentinel_checkpoints_observed_total",
        Counter,
        &["cluster", "job_id", "job_name", "source", "status"],
        "Checkpoints counted by the source that reported each first: rest (the poll of Flink's history) or trace (a checkpoint span of Flink's Slf4j trace reporter, read from the JobManager log). Each checkpoint counts once; with the unobserved ones they add up to what the daemon counted of Flink's counts."
    ),
    metric!(
        "checkpoint_sentinel_clamped_values_total",
        Counter,
        &[],
        "Values too large for the histograms, recorded at the maximum instead."
    ),
    metric!("checkpoint_sentinel_log_read_bytes_total", Counter, &["cluster"], "Bytes the log tailers read."),
    metric!("checkpoint_sentinel_log_lines_total", Counter, &["cluster"], "Lines the log tailers read."),
    metric!(
        "checkpoint_sentinel_log_files_watched",
        Gauge,
        &["cluster"],
        "Log files followed now (rotated files are followed until read to their end)."
    ),
    metric!(
        "checkpoint_sentinel_log_rotations_total",
        Counter,
        &["cluster"],
        "Log rotations seen: renamed, truncated (copytruncate) or deleted and recreated files."
    ),
    metric!(
        "checkpoint_sentinel_log_rotation_gaps_total",
        Counter,
        &["cluster"],
        "Log rotations after which lines may be missing: a file created and gone again before the tailer listed it (seen through file events, so not on filesystems without them), or a copytruncate whose copy the tailer does not follow (what was written after its last read is only in the copy)."
    ),
    metric!(
        "checkpoint_sentinel_log_oversize_lines_total",
        Counter,
        &["cluster"],
        "Log lines longer than max_line_bytes; each was cut to that length."
    ),
    metric!(
        "checkpoint_sentinel_log_lag_bytes",
        Gauge,
        &["cluster"],
        "Bytes written to followed log files and not read yet."
    ),
    metric!(
        "checkpoint_sentinel_log_errors_total",
        Counter,
        &["cluster"],
        "Errors of the log tailers: files that could not be listed, opened or read."
    ),
    metric!(
        "flink_checkpoint_consecutive_failures",
        Gauge,
        JOB,
        "Failed checkpoints since the last completed one, a running count (not limited to the recent history); failures a cancel, stop or failover causes are not counted. Flink fails the job when this exceeds the tolerable failures."
    ),
    metric!(
        "checkpoint_sentinel_alerts",
        Gauge,
        &["alertname", "severity", "state"],
        "Alerts of the daemon's own rules by state (pending, firing); 0 for rules with none."
    ),
    metric!(
        "checkpoint_sentinel_alertmanager_sends_total",
        Counter,
        &["alertmanager"],
        "Successful posts of alerts to an Alertmanager."
    ),
    metric!(
        "checkpoint_sentinel_alertmanager_errors_total",
        Counter,
        &["alertmanager"],
        "Failed posts of alerts to an Alertmanager (retried with back-off; nothing still relevant is dropped)."
    ),
    metric!(
        "checkpoint_sentinel_alertmanager_queued_alerts",
        Gauge,
        &["alertmanager"],
        "Resolved alerts waiting to be delivered to an Alertmanager."
    ),
    metric!(
        "checkpoint_sentinel_store_records",
        Gauge,
        &[],
        "Checkpoint and savepoint records in the checkpoint store after its last write."
    ),
    metric!(
        "checkpoint_sentinel_store_pruned_records_total",
        Counter,
        &[],
        "Records pruned from the checkpoint store by [store] max_age or max_records, oldest first."
    ),
    metric!(
        "checkpoint_sentinel_store_write_errors_total",
        Counter,
        &[],
        "Failed writes of the checkpoint store; the records are kept and written with the next state write, which waits for them."
    ),
    metric!(
        "checkpoint_sentinel_store_dropped_records_total",
        Counter,
        &[],
        "Records dropped unwritten because the store kept failing and its queue was full."
    ),
    metric!(
        "checkpoint_sentinel_state_persist_errors_total",
        Counter,
        &[],
        "Failed writes of the state file."
    ),
    metric!(
        "checkpoint_sentinel_state_last_persisted_timestamp_seconds",
        Gauge,
        &[],
        "When the state file was last written, Unix time."
    ),
];

/// The error kinds every cluster reports, zero or not, so `rate()` works from the start.
pub const ERROR_KINDS: [&str; 6] = ["connect", "timeout", "http_status", "decode", "transport", "too_large"];

/// Where [`render_into`] puts samples: metric families for the `prometheus` crate ([`render`])
/// or the text exposition format written directly ([`TextRenderer`]).
/// Both receive the same calls in the same order, so they cannot disagree on what is exported.
trait Sink {
    /// One sample of the family `METRICS[family]`; `labels` are in the table's order.
    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value);
    /// Which of [`QUANTILES`] summaries show (`[metrics] quantiles`), from now on.
    fn show_quantiles(&mut self, shown: [bool; 3]);
}

/// Index of a metric in [`METRICS`], resolved at compile time: a name missing from the table is
/// a build error, and a scrape of 1,000 jobs (about 100 k samples) does no name lookups.
const fn index_of(name: &str) -> usize {
    let mut i = 0;
    while i < METRICS.len() {
        if const_str_eq(METRICS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("metric is not in METRICS")
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Collects metric families, in the order of [`METRICS`].
struct Families {
    families: Vec<MetricFamily>,
    shown: [bool; 3],
}

impl Families {
    fn new() -> Self {
        let families = METRICS
            .iter()
            .map(|m| {
                let mut f = MetricFamily::default();
                f.set_name(m.name.to_string());
                f.set_help(m.help.to_string());
                f.set_field_type(match m.kind {
                    Kind::Gauge => MetricType::GAUGE,
                    Kind::Counter => MetricType::COUNTER,
                    Kind::Summary => MetricType::SUMMARY,
                });
                f
            })
            .collect();
        Families { families, shown: [true; 3] }
    }

    fn finish(self) -> Vec<MetricFamily> {
        // A family without samples is left out, as client libraries do.
        self.families.into_iter().filter(|f| !f.get_metric().is_empty()).collect()
    }
}

impl Sink for Families {
    fn show_quantiles(&mut self, shown: [bool; 3]) {
        self.shown = shown;
    }

    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value) {
        let def = &METRICS[family];
        debug_assert_eq!(def.labels.len(), labels.len(), "{}", def.name);
        let mut metric = proto::Metric::default();
        metric.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut pair = proto::LabelPair::default();
                    pair.set_name(k.to_string());
                    pair.set_value(v.to_string());
                    pair
                })
                .collect(),
        );
        match (def.kind, value) {
            (Kind::Gauge, Value::Number(v)) => {
                let mut g = proto::Gauge::default();
                g.set_value(v);
                metric.set_gauge(g);
            }
            (Kind::Counter, Value::Number(v)) => {
                let mut c = proto::Counter::default();
                c.set_value(v);
                metric.set_counter(c);
            }
            (Kind::Summary, Value::Summary(s, divisor)) => {
                let mut summary = proto::Summary::default();
                summary.set_sample_count(s.count);
                summary.set_sample_sum(s.sum as f64 / divisor);
                summary.set_quantile(
                    QUANTILES
                        .iter()
                        .zip(s.quantiles)
                        .zip(self.shown)
                        .filter(|(_, shown)| *shown)
                        .map(|((&q, v), _)| {
                            let mut quantile = proto::Quantile::default();
                            quantile.set_quantile(q);
                            quantile.set_value(v.map_or(f64::NAN, |v| v as f64 / divisor));
                            quantile
                        })
                        .collect(),
                );
                metric.set_summary(summary);
            }
            _ => unreachable!("{}: value does not match the metric type", def.name),
        }
        self.families[family].mut_metric().push(metric);
    }
}

/// Writes the text exposition format (0.0.4) straight from `State`, byte for byte what
/// `prometheus::TextEncoder` makes of [`render`]'s families (a test holds the two equal), at a
/// fraction of the cost: no per-sample allocation, label sets escaped once per sample, numbers
/// formatted without `fmt` on the common paths. It renders one [`Part`] at a time, as one
/// chunk per family, which the server sends as they are.
#[derive(Default)]
pub struct TextRenderer {
    /// Per family, in the order of [`METRICS`]: its HELP and TYPE lines, then its samples
    /// (the format wants a family's lines together; the state is walked job by job).
    families: Vec<Vec<u8>>,
    /// The current sample's escaped label set.
    labels: Vec<u8>,
    /// Each family's size at the previous scrape, to allocate it once at the next.
    last_sizes: Vec<usize>,
    /// Which of [`QUANTILES`] are left out (`[metrics] quantiles`).
    hidden: [bool; 3],
}

impl TextRenderer {
    /// Renders one part of the exposition: its chunks, one per family with samples, in the
    /// order of [`METRICS`]. Pure: `now` is only used for ages.
    pub fn render(
        &mut self,
        state: &State,
        daemon: &DaemonStats,
        now: Timestamp,
        part: Part,
    ) -> Vec<Vec<u8>> {
        self.render_part(state, daemon, now, part).into_iter().map(|(_, chunk)| chunk).collect()
    }

    /// Every part as one buffer, the families in the order of [`METRICS`].
    pub fn render_to_vec(&mut self, state: &State, daemon: &DaemonStats, now: Timestamp) -> Vec<u8> {
        let mut chunks: Vec<_> =
            PARTS.iter().flat_map(|&p| self.render_part(state, daemon, now, p)).collect();
        chunks.sort_by_key(|(family, _)| *family);
        chunks.into_iter().flat_map(|(_, chunk)| chunk).collect()
    }

    fn render_part(
        &mut self,
        state: &State,
        daemon: &DaemonStats,
        now: Timestamp,
        part: Part,
    ) -> Vec<(usize, Vec<u8>)> {
        self.last_sizes.resize(METRICS.len(), 0);
        self.families.resize_with(METRICS.len(), Vec::new);
        render_into(state, daemon, now, self, part);
        let mut chunks = Vec::new();
        for (family, lines) in self.families.iter_mut().enumerate() {
            if !lines.is_empty() {
                self.last_sizes[family] = lines.len();
                chunks.push((family, std::mem::take(lines)));
            }
        }
        chunks
    }
}

/// `# HELP` and `# TYPE`, which open a family's lines.
fn write_header(out: &mut Vec<u8>, def: &MetricDef) {
    out.extend_from_slice(b"# HELP ");
    out.extend_from_slice(def.name.as_bytes());
    out.push(b' ');
    escape_into(out, def.help, false);
    out.extend_from_slice(b"\n# TYPE ");
    out.extend_from_slice(def.name.as_bytes());
    out.extend_from_slice(match def.kind {
        Kind::Gauge => b" gauge\n".as_slice(),
        Kind::Counter => b" counter\n",
        Kind::Summary => b" summary\n",
    });
}

impl Sink for TextRenderer {
    fn show_quantiles(&mut self, shown: [bool; 3]) {
        self.hidden = shown.map(|s| !s);
    }

    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value) {
        let def = &METRICS[family];
        debug_assert_eq!(def.labels.len(), labels.len(), "{}", def.name);
        // `{name="value",…}` once per sample (a summary writes it five times), `` without labels.
        self.labels.clear();
        for (i, (name, value)) in labels.iter().enumerate() {
            self.labels.push(if i == 0 { b'{' } else { b',' });
            self.labels.extend_from_slice(name.as_bytes());
            self.labels.extend_from_slice(b"=\"");
            escape_into(&mut self.labels, value, true);
            self.labels.push(b'"');
        }
        if !labels.is_empty() {
            self.labels.push(b'}');
        }
        let (name, braced) = (def.name.as_bytes(), self.labels.as_slice());
        let out = &mut self.families[family];
        if out.is_empty() {
            let expected = self.last_sizes[family];
            out.reserve(expected + expected / 8);
            write_header(out, def);
        }
        // `name{…} ` and `name_suffix{…} `: few copies per line, as these are most of the body.
        let start = |out: &mut Vec<u8>, suffix: &[u8]| {
            out.extend_from_slice(name);
            out.extend_from_slice(suffix);
            out.extend_from_slice(braced);
            out.push(b' ');
        };
        match (def.kind, value) {
            (Kind::Gauge | Kind::Counter, Value::Number(v)) => {
                start(out, b"");
                write_f64(out, v);
                out.push(b'\n');
            }
            (Kind::Summary, Value::Summary(s, divisor)) => {
                for ((tail, v), _) in
                    QUANTILE_LABELS.iter().zip(s.quantiles).zip(self.hidden).filter(|(_, hidden)| !hidden)
                {
                    out.extend_from_slice(name);
                    match braced.split_last() {
                        Some((_, open)) => {
                            out.extend_from_slice(open);
                            out.push(b',');
                        }
                        None => out.push(b'{'),
                    }
                    out.extend_from_slice(tail);
                    match v {
                        Some(v) => write_scaled(out, v, divisor),
                        None => out.extend_from_slice(b"NaN"),
                    }
                    out.push(b'\n');
                }
                start(out, b"_sum");
                write_scaled(out, s.sum, divisor);
                out.push(b'\n');
                start(out, b"_count");
                write_f64(out, s.count as f64);
                out.push(b'\n');
            }
            _ => unreachable!("{}: value does not match the metric type", def.name),
        }
    }
}

/// The end of a quantile line's label set, [`QUANTILES`] as `f64::to_string` prints them.
const QUANTILE_LABELS: [&[u8]; 3] = [b"quantile=\"0.5\"} ", b"quantile=\"0.95\"} ", b"quantile=\"0.99\"} "];

/// Appends `text` with the text format's escapes: backslash and newline, and in label values
/// the double quote.
fn escape_into(out: &mut Vec<u8>, text: &str, quote: bool) {
    let bytes = text.as_bytes();
    // Label values almost never need an escape: one SIMD search, then one copy.
    let first =
        if quote { memchr::memchr3(b'\\', b'\n', b'"', bytes) } else { memchr::memchr2(b'\\', b'\n', bytes) };
    let Some(first) = first else {
        out.extend_from_slice(bytes);
        return;
    };
    out.extend_from_slice(&bytes[..first]);
    for b in &bytes[first..] {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' if quote => out.extend_from_slice(b"\\\""),
            _ => out.push(*b),
        }
    }
}

/// `value / divisor` as `f64::to_string` prints it; integer arithmetic for whole units and
/// milliseconds (every duration and size we export), `fmt` otherwise.
fn write_scaled(out: &mut Vec<u8>, value: u64, divisor: f64) {
    if divisor == 1.0 && value < (1 << 53) {
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    } else if divisor == 1000.0 && value < 1_000_000_000_000_000 {
        write_millis(out, value);
    } else {
        write_f64(out, value as f64 / divisor);
    }
}

/// `value` as `f64::to_string` prints it (shortest round-trip digits, never an exponent).
fn write_f64(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() && value.abs() < 1e15 && !(value == 0.0 && value.is_sign_negative()) {
        if value.fract() == 0.0 {
            out.extend_from_slice(itoa::Buffer::new().format(value as i64).as_bytes());
            return;
        }
        // Seconds from milliseconds (timestamps, durations): the decimal with at most three
        // fraction digits is the shortest string that parses back to `value` when it does.
        let millis = (value.abs() * 1000.0).round();
        if value.abs() < 1e12 && millis / 1000.0 == value.abs() {
            if value < 0.0 {
                out.push(b'-');
            }
            write_millis(out, millis as u64);
            return;
        }
    }
    use std::io::Write as _;
    let _ = write!(out, "{value}");
}

/// `millis / 1000` in decimal, trailing fraction zeros dropped.
fn write_millis(out: &mut Vec<u8>, millis: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(millis / 1000).as_bytes());
    let fraction = millis % 1000;
    if fraction == 0 {
        return;
    }
    let digits = [fraction / 100, fraction / 10 % 10, fraction % 10].map(|d| b'0' + d as u8);
    let len = digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count();
    out.push(b'.');
    out.extend_from_slice(&digits[..len]);
}

enum Value {
    Number(f64),
    /// A summary and the divisor from its stored unit (ms or bytes) to the exported one
    /// (dividing, not multiplying by 0.001, keeps 43 ms printed as 0.043).
    Summary(Summary, f64),
}

macro_rules! family {
    ($name:literal) => {
        const { index_of($name) }
    };
}

const MS: f64 = 1000.0;
const BYTES: f64 = 1.0;

fn seconds(ms: u64) -> Value {
    Value::Number(ms as f64 / 1000.0)
}

fn phase_metric(phase: Phase, operator: bool) -> usize {
    match (phase, operator) {
        (Phase::EndToEnd, false) => family!("flink_checkpoint_duration_seconds"),
        (Phase::Alignment, false) => family!("flink_checkpoint_alignment_duration_seconds"),
        (Phase::Sync, false) => family!("flink_checkpoint_sync_duration_seconds"),
        (Phase::Async, false) => family!("flink_checkpoint_async_duration_seconds"),
        (Phase::StartDelay, false) => family!("flink_checkpoint_start_delay_seconds"),
        (Phase::EndToEnd, true) => family!("flink_operator_checkpoint_duration_seconds"),
        (Phase::Alignment, true) => family!("flink_operator_checkpoint_alignment_duration_seconds"),
        (Phase::Sync, true) => family!("flink_operator_checkpoint_sync_duration_seconds"),
        (Phase::Async, true) => family!("flink_operator_checkpoint_async_duration_seconds"),
        (Phase::StartDelay, true) => family!("flink_operator_checkpoint_start_delay_seconds"),
    }
}

/// Renders the state as metric families (the `prometheus` crate's form, for a registry). Pure: `now`
/// is only used for ages.
pub fn render(state: &State, daemon: &DaemonStats, now: Timestamp) -> Vec<MetricFamily> {
    let mut families = Families::new();
    for part in PARTS {
        render_into(state, daemon, now, &mut families, part);
    }
    families.finish()
}

/// A part of the exposition: each is rendered by its own walk over the state, so the server
/// can send one part while it renders the next and never holds the whole body (for 1,000 jobs
/// ~30 MB, two thirds of it the operators' summaries). Parts have disjoint families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Everything but the operators' summaries: jobs, clusters, logs, the daemon itself.
    Jobs,
    /// The operators' summaries of one phase.
    Operators(Phase),
}

/// Every part, in the order the server sends them.
pub const PARTS: [Part; 6] = [
    Part::Jobs,
    Part::Operators(Phase::EndToEnd),
    Part::Operators(Phase::Alignment),
    Part::Operators(Phase::Sync),
    Part::Operators(Phase::Async),
    Part::Operators(Phase::StartDelay),
];

/// Every sample of `part`, family by family as the state is walked; the sink groups them.
fn render_into(state: &State, daemon: &DaemonStats, now: Timestamp, out: &mut impl Sink, part: Part) {
    out.show_quantiles(daemon.metrics.shown_quantiles());
    match part {
        Part::Jobs => render_jobs(state, daemon, now, out),
        Part::Operators(phase) if daemon.metrics.operators => render_operators(state, out, phase),
        Part::Operators(_) => {}
    }
}

fn render_operators(state: &State, out: &mut impl Sink, phase: Phase) {
    let family = phase_metric(phase, true);
    for (cluster_name, cluster) in state.clusters() {
        for (job_id, job) in cluster.jobs.iter().filter(|(_, j)| j.listed) {
            for (vertex_id, operator) in &job.operators {
                let labels = [
                    ("cluster", cluster_name.as_str()),
                    ("job_id", job_id.as_str()),
                    ("job_name", job.name.as_str()),
                    ("vertex_id", vertex_id.as_str()),
                    ("operator", operator.name.as_str()),
                ];
                let histogram = operator.phases.get(phase);
                out.push(family, &labels, Value::Summary(histogram.summary(), MS));
            }
        }
    }
}

fn render_jobs(state: &State, daemon: &DaemonStats, now: Timestamp, out: &mut impl Sink) {
    out.push(
        family!("checkpoint_sentinel_build_info"),
        &[
            ("version", crate::telemetry::VERSION),
            ("revision", crate::telemetry::REVISION),
            ("rustc_version", crate::telemetry::RUSTC_VERSION),
        ],
        Value::Number(1.0),
    );
    if let Some(p) = &daemon.process {
        for (family, value) in [
            (family!("process_cpu_seconds_total"), p.cpu_seconds),
            (family!("process_resident_memory_bytes"), p.resident_memory_bytes),
            (family!("process_virtual_memory_bytes"), p.virtual_memory_bytes),
            (family!("process_open_fds"), p.open_fds),
            (family!("process_max_fds"), p.max_fds),
            (family!("process_start_time_seconds"), p.start_time_seconds),
            (family!("process_threads"), p.threads),
        ] {
            // An "unlimited" descriptor limit is left out rather than exported as infinity.
            if value.is_finite() {
                out.push(family, &[], Value::Number(value));
            }
        }
    }
    let mut clamped = 0u64;
    for (cluster_name, cluster) in state.clusters() {
        let c = cluster_name.as_str();
        out.push(
            family!("checkpoint_sentinel_flink_up"),
            &[("cluster", c)],
            Value::Number(f64::from(u8::from(cluster.reachable))),
        );
        if let Some(version) = &cluster.flink_version {
            out.push(
                family!("checkpoint_sentinel_flink_info"),
                &[("cluster", c), ("version", version)],
                Value::Number(1.0),
            );
        }
        out.push(
            family!("checkpoint_sentinel_poll_duration_seconds"),
            &[("cluster", c)],
            Value::Summary(cluster.poll_duration.summary(), MS),
        );
        out.push(
            family!("checkpoint_sentinel_polls_total"),
            &[("cluster", c)],
            Value::Number(cluster.polls_total as f64),
        );
        for kind in ERROR_KINDS {
            let n = cluster.poll_errors.get(kind).copied().unwrap_or(0);
            out.push(
                family!("checkpoint_sentinel_poll_errors_total"),
                &[("cluster", c), ("kind", kind)],
                Value::Number(n as f64),
            );
        }
        if let Some(at) = cluster.last_success {
            out.push(
                family!("checkpoint_sentinel_last_successful_poll_timestamp_seconds"),
                &[("cluster", c)],
                Value::Number(at.seconds()),
            );
        }
        out.push(
            family!("checkpoint_sentinel_watched_jobs"),
            &[("cluster", c)],
            Value::Number(cluster.listed_jobs() as f64),
        );
        render_logs(out, c, &cluster.logs);

        for (job_id, job) in cluster.jobs.iter().filter(|(_, j)| j.listed) {
            let labels = [("cluster", c), ("job_id", job_id.as_str()), ("job_name", job.name.as_str())];
            out.push(
                family!("flink_job_info"),
                &[labels[0], labels[1], labels[2], ("state", job.job_state.as_str())],
                Value::Number(1.0),
            );
            for (phase, histogram) in job.phases.iter() {
                clamped += histogram.out_of_range();
                out.push(phase_metric(phase, false), &labels, Value::Summary(histogram.summary(), MS));
            }
            for (name, histogram) in [
                (family!("flink_checkpoint_checkpointed_size_bytes"), &job.sizes.checkpointed),
                (family!("flink_checkpoint_full_size_bytes"), &job.sizes.full_state),
                (family!("flink_checkpoint_processed_data_bytes"), &job.sizes.processed),
                (family!("flink_checkpoint_persisted_data_bytes"), &job.sizes.persisted),
            ] {
                clamped += histogram.out_of_range();
                out.push(name, &labels, Value::Summary(histogram.summary(), BYTES));
            }
            let totals = job.totals();
            for status in [CheckpointStatus::Completed, CheckpointStatus::Failed] {
                let with_status = [labels[0], labels[1], labels[2], ("status", status.as_str())];
                out.push(
                    family!("flink_checkpoints_total"),
                    &with_status,
                    Value::Number(totals.get(status) as f64),
                );
                out.push(
                    family!("checkpoint_sentinel_checkpoints_unobserved_total"),
                    &with_status,
                    Value::Number(job.unobserved.get(status) as f64),
                );
                for (source, totals) in [("rest", &job.traced.by_rest), ("trace", &job.traced.by_trace)] {
                    out.push(
                        family!("checkpoint_sentinel_checkpoints_observed_total"),
                        &[labels[0], labels[1], labels[2], ("source", source), ("status", status.as_str())],
                        Value::Number(totals.get(status) as f64),
                    );
                }
            }
            for status in [CheckpointStatus::Completed, CheckpointStatus::Failed] {
                out.push(
                    family!("flink_savepoints_total"),
                    &[labels[0], labels[1], labels[2], ("status", status.as_str())],
                    Value::Number(job.savepoints.totals.get(status) as f64),
                );
            }
            if let Some(at) = job.savepoints.last_completed_at {
                out.push(
                    family!("flink_savepoint_last_completed_timestamp_seconds"),
                    &labels,
                    Value::Number(at.seconds()),
                );
            }
            if let Some(ms) = job.savepoints.last_duration_ms {
                out.push(family!("flink_savepoint_last_duration_seconds"), &labels, seconds(ms));
            }
            if let Some(at) = job.savepoints.last_failed_at {
                out.push(
                    family!("flink_savepoint_last_failed_timestamp_seconds"),
                    &labels,
                    Value::Number(at.seconds()),
                );
            }
            out.push(
                family!("flink_checkpoint_restores_total"),
                &labels,
                Value::Number(job.flink_counts.restored as f64),
            );
            let restores = &job.restores;
            for (from, n) in
                [("checkpoint", restores.totals.checkpoint), ("savepoint", restores.totals.savepoint)]
            {
                out.push(
                    family!("flink_job_restores_total"),
                    &[labels[0], labels[1], labels[2], ("from", from)],
                    Value::Number(n as f64),
                );
            }
            if let Some(latest) = restores.latest() {
                out.push(
                    family!("flink_job_last_restore_timestamp_seconds"),
                    &labels,
                    Value::Number(latest.from.restored_at.seconds()),
                );
                if let Some(id) = latest.from.checkpoint_id {
                    out.push(
                        family!("flink_job_last_restore_checkpoint_id"),
                        &labels,
                        Value::Number(id as f64),
                    );
                }
            }
            if let Some(timed) = restores.last_measured() {
                if let Some(ms) = timed.duration_ms {
                    out.push(family!("flink_job_last_restore_duration_seconds"), &labels, seconds(ms));
                }
                if let Some(ms) = timed.downtime_ms {
                    out.push(family!("flink_job_last_restore_downtime_seconds"), &labels, seconds(ms));
                }
            }
            out.push(
                family!("flink_checkpoints_in_progress"),
                &labels,
                Value::Number(job.in_progress.len() as f64),
            );
            out.push(
                family!("flink_checkpoint_consecutive_failures"),
                &labels,
                Value::Number(job.consecutive_failures() as f64),
            );
            out.push(
                family!("flink_checkpoint_failures_seen_total"),
                &labels,
                Value::Number(job.failures.total as f64),
            );
            let oldest = job.live_in_progress(now).iter().map(|(_, at)| now.since(*at)).max().unwrap_or(0);
            out.push(family!("flink_checkpoint_oldest_in_progress_age_seconds"), &labels, seconds(oldest));
            out.push(
                family!("flink_checkpoint_trigger_failures_total"),
                &labels,
                Value::Number(job.failed_without_id as f64),
            );
            if let Some(since) = job.running_without_checkpoint_ms(now).and(job.running_since) {
                out.push(
                    family!("flink_checkpoint_running_without_completed_since_timestamp_seconds"),
                    &labels,
                    Value::Number(since.seconds()),
                );
            }
            if let Some(since) = job.failing_since.filter(|_| job.consecutive_failures() > 0) {
                out.push(
                    family!("flink_checkpoint_failing_since_timestamp_seconds"),
                    &labels,
                    Value::Number(since.seconds()),
                );
            }
            if let Some(last) = &job.last_completed {
                out.push(
                    family!("flink_checkpoint_last_completed_timestamp_seconds"),
                    &labels,
                    Value::Number(last.finished_at.seconds()),
                );
            }
            if let Some(last) = &job.last_failed {
                out.push(
                    family!("flink_checkpoint_last_failed_timestamp_seconds"),
                    &labels,
                    Value::Number(last.finished_at.seconds()),
                );
            }
            if let Some(settings) = &job.settings {
                if let Some(interval) = settings.interval_ms {
                    out.push(family!("flink_checkpoint_interval_seconds"), &labels, seconds(interval));
                }
                if let Some(timeout) = settings.timeout_ms {
                    out.push(family!("flink_checkpoint_timeout_seconds"), &labels, seconds(timeout));
                }
                out.push(
                    family!("flink_checkpoint_min_pause_seconds"),
                    &labels,
                    seconds(settings.min_pause_ms),
                );
                out.push(
                    family!("flink_checkpoint_max_concurrent"),
                    &labels,
                    Value::Number(f64::from(settings.max_concurrent)),
                );
                if let Some(tolerable) = settings.tolerable_failures {
                    out.push(
                        family!("flink_checkpoint_tolerable_failures"),
                        &labels,
                        Value::Number(f64::from(tolerable)),
                    );
                }
            }
            render_shadow(out, &labels, job);
            // The operators' summaries are parts of their own (`render_operators`).
            for operator in job.operators.values() {
                clamped += operator.phases.iter().into_iter().map(|(_, h)| h.out_of_range()).sum::<u64>();
            }
        }
    }
    out.push(family!("checkpoint_sentinel_clamped_values_total"), &[], Value::Number(clamped as f64));
    for rule in &daemon.alerts {
        for (state, n) in [("pending", rule.pending), ("firing", rule.firing)] {
            let labels = [("alertname", rule.name.as_str()), ("severity", rule.severity), ("state", state)];
            out.push(family!("checkpoint_sentinel_alerts"), &labels, Value::Number(n as f64));
        }
    }
    for am in &daemon.alertmanagers {
        let labels = [("alertmanager", am.url.as_str())];
        out.push(
            family!("checkpoint_sentinel_alertmanager_sends_total"),
            &labels,
            Value::Number(am.sent_total as f64),
        );
        out.push(
            family!("checkpoint_sentinel_alertmanager_errors_total"),
            &labels,
            Value::Number(am.errors_total as f64),
        );
        out.push(
            family!("checkpoint_sentinel_alertmanager_queued_alerts"),
            &labels,
            Value::Number(am.queued as f64),
        );
    }
    if let Some(d) = &daemon.discovery {
        out.push(family!("checkpoint_sentinel_discovered_clusters"), &[], Value::Number(d.clusters as f64));
        for (reason, n) in d.dropped {
            out.push(
                family!("checkpoint_sentinel_discovery_targets_dropped"),
                &[("reason", reason)],
                Value::Number(n as f64),
            );
        }
        for (reason, n) in d.file_errors {
            out.push(
                family!("checkpoint_sentinel_discovery_file_errors_total"),
                &[("reason", reason)],
                Value::Number(n as f64),
            );
        }
        // Kubernetes discovery's series (bounded: three kinds, six reasons).
        if let Some(k) = &d.kubernetes {
            out.push(
                family!("checkpoint_sentinel_kubernetes_discovered_clusters"),
                &[],
                Value::Number(k.clusters as f64),
            );
            out.push(
                family!("checkpoint_sentinel_kubernetes_synced"),
                &[],
                Value::Number(f64::from(u8::from(k.synced))),
            );
            // One family after the other (the text format groups a family's samples).
            for (family, values) in [
                (family!("checkpoint_sentinel_kubernetes_objects"), &k.objects),
                (family!("checkpoint_sentinel_kubernetes_objects_cut_total"), &k.cut),
                (family!("checkpoint_sentinel_kubernetes_relists_total"), &k.relists),
            ] {
                for (kind, n) in k.kind_names().into_iter().zip(values) {
                    out.push(family, &[("kind", kind)], Value::Number(*n as f64));
                }
            }
            for j in &k.jobs {
                out.push(
                    family!("flink_operator_job_info"),
                    &[
                        ("cluster", &j.cluster),
                        ("resource", &j.resource),
                        ("job_id", &j.job_id),
                        ("state", &j.state),
                        ("lifecycle_state", &j.lifecycle_state),
                    ],
                    Value::Number(1.0),
                );
            }
            for j in &k.jobs {
                if let Some(ms) = j.last_savepoint_ms {
                    out.push(
                        family!("flink_operator_last_savepoint_timestamp_seconds"),
                        &[("cluster", &j.cluster), ("resource", &j.resource)],
                        Value::Number(ms as f64 / 1000.0),
                    );
                }
            }
            for (i, kind) in k.kind_names().into_iter().enumerate() {
                for (r, reason) in k.error_reasons().into_iter().enumerate() {
                    out.push(
                        family!("checkpoint_sentinel_kubernetes_watch_errors_total"),
                        &[("kind", kind), ("reason", reason)],
                        Value::Number(k.errors[i][r] as f64),
                    );
                }
            }
        }
    }
    for (reason, n) in daemon.tls_handshake_errors.iter().flatten() {
        out.push(
            family!("checkpoint_sentinel_tls_handshake_errors_total"),
            &[("reason", reason)],
            Value::Number(*n as f64),
        );
    }
    if let Some(store) = daemon.store {
        out.push(family!("checkpoint_sentinel_store_records"), &[], Value::Number(store.records as f64));
        out.push(
            family!("checkpoint_sentinel_store_pruned_records_total"),
            &[],
            Value::Number(store.pruned as f64),
        );
        out.push(
            family!("checkpoint_sentinel_store_write_errors_total"),
            &[],
            Value::Number(store.errors as f64),
        );
        out.push(
            family!("checkpoint_sentinel_store_dropped_records_total"),
            &[],
            Value::Number(state.outbox.dropped() as f64),
        );
    }
    out.push(
        family!("checkpoint_sentinel_http_connections"),
        &[],
        Value::Number(daemon.http_connections as f64),
    );
    for (reason, n) in &daemon.http_closed {
        out.push(
            family!("checkpoint_sentinel_http_connections_closed_total"),
            &[("reason", reason)],
            Value::Number(*n as f64),
        );
    }
    for (cluster, what, n) in &daemon.inputs_cut {
        out.push(
            family!("checkpoint_sentinel_inputs_cut_total"),
            &[("cluster", cluster), ("what", what)],
            Value::Number(*n as f64),
        );
    }
    out.push(
        family!("checkpoint_sentinel_state_persist_errors_total"),
        &[],
        Value::Number(daemon.persist_errors as f64),
    );
    if let Some(at) = daemon.last_persisted {
        out.push(
            family!("checkpoint_sentinel_state_last_persisted_timestamp_seconds"),
            &[],
            Value::Number(at.seconds()),
        );
    }
}

fn render_shadow(out: &mut impl Sink, labels: &[(&str, &str); 3], job: &crate::state::JobState) {
    let trigger = &job.shadow.trigger;
    if let Some(ms) = trigger.expected_interval_ms() {
        out.push(family!("flink_checkpoint_expected_interval_seconds"), labels, seconds(ms));
    }
    if let Some(ms) = trigger.observed_interval_ms() {
        out.push(family!("flink_checkpoint_observed_interval_seconds"), labels, seconds(ms));
    }
    if trigger.settings().is_some() {
        out.push(
            family!("flink_checkpoint_schedule_stall_seconds"),
            labels,
            seconds(trigger.stalled_for_ms().unwrap_or(0)),
        );
        out.push(
            family!("flink_checkpoint_trigger_deviation_seconds"),
            labels,
            Value::Summary(job.trigger_deviation.summary(), MS),
        );
        for kind in crate::shadow::DeviationKind::ALL {
            let n = trigger.deviation_counts().get(&kind).copied().unwrap_or(0);
            let explained = if kind.explained() { "true" } else { "false" };
            let with_kind =
                [labels[0], labels[1], labels[2], ("kind", kind.as_str()), ("explained", explained)];
            out.push(family!("flink_checkpoint_deviations_total"), &with_kind, Value::Number(n as f64));
        }
    }
}

fn render_logs(out: &mut impl Sink, c: &str, logs: &crate::state::logs::LogState) {
    for ((job_id, kind, source), n) in &logs.events {
        let labels =
            [("cluster", c), ("job_id", job_id.as_str()), ("kind", kind.as_str()), ("source", *source)];
        out.push(family!("flink_checkpoint_log_events_total"), &labels, Value::Number(*n as f64));
    }
    for (cause, n) in &logs.root_causes {
        out.push(
            family!("flink_checkpoint_log_root_causes_total"),
            &[("cluster", c), ("cause", cause)],
            Value::Number(*n as f64),
        );
    }
    if let Some(t) = logs.tailer_totals() {
        for (name, value) in [
            (family!("checkpoint_sentinel_log_read_bytes_total"), t.bytes),
            (family!("checkpoint_sentinel_log_lines_total"), t.lines),
            (family!("checkpoint_sentinel_log_files_watched"), t.files),
            (family!("checkpoint_sentinel_log_rotations_total"), t.rotations),
            (family!("checkpoint_sentinel_log_rotation_gaps_total"), t.rotation_gaps),
            (family!("checkpoint_sentinel_log_oversize_lines_total"), t.oversize_lines),
            (family!("checkpoint_sentinel_log_lag_bytes"), t.lag_bytes),
            (family!("checkpoint_sentinel_log_errors_total"), t.errors),
        ] {
            out.push(name, &[("cluster", c)], Value::Number(value as f64));
        }
    }
}

/// Encodes metric families in the Prometheus text format (0.0.4).
pub fn encode_text(families: &[MetricFamily]) -> String {
    prometheus::TextEncoder::new()
        .encode_to_string(families)
        .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::alignment::{self, AlignmentConfig, Mode};
    use crate::model::coordinator::{Coordinator, CoordinatorConfig, Event, Outcome, Schedule};
    use crate::observe::{CheckpointSettings, EventSeverity, JobKey, LogEvent, Observation};
    use crate::stats::WindowSpec;
    use proptest::prelude::*;

    const START: Timestamp = Timestamp(1_795_964_442_123);

    /// Jobs driven by the coordinator model for `minutes`, with names that need escaping, an
    /// expiring job, log events and the daemon's own counters: every kind of sample there is.
    fn busy_state(jobs: usize, minutes: i64) -> (State, DaemonStats, Timestamp) {
        let graph = alignment::lab_job(2, 0, 0.0);
        let config = AlignmentConfig { mode: Mode::Aligned, ..AlignmentConfig::default() };
        let operators = alignment::simulate(&graph, &config, 7).operators(&graph);
        let mut state = State::new(WindowSpec { window_ms: 600_000, slots: 6 });
        state.retain_clusters(&["prod".to_string(), "lab \"b\\\n".to_string()]);
        let end = START.plus_millis(minutes * 60_000);
        for j in 0..jobs {
            let cluster = if j % 2 == 0 { "prod" } else { "lab \"b\\\n" };
            let cfg = CoordinatorConfig { num_subtasks: 4, ..CoordinatorConfig::default() };
            let mut c = Coordinator::new(cfg, START, Schedule::Seeded(j as u64));
            let mut outcomes = |id: u64, _: Timestamp| {
                if j == 1 && id.is_multiple_of(3) {
                    Outcome::Hang
                } else {
                    Outcome::Complete { duration_ms: 17 + (id * 37 + j as u64) % 3_001 }
                }
            };
            let key = JobKey { cluster: cluster.into(), job_id: format!("{j:032x}") };
            let settings = CheckpointSettings {
                interval_ms: Some(10_000),
                timeout_ms: Some(60_000),
                tolerable_failures: Some(3),
                ..CheckpointSettings::default()
            };
            let mut at = START;
            while at < end {
                at = at.plus_millis(2_500);
                c.run_until(at, &mut outcomes);
                for event in c.drain_events() {
                    if let Event::Triggered { id, .. } = event
                        && let Some(cp) = c.checkpoint_mut(id)
                    {
                        cp.operators = operators.clone();
                    }
                }
                let name = format!("job \"{j}\" \\ of\nmany");
                let poll = c.job_poll(key.clone(), &name, at, Some(settings.clone()));
                state.apply(&Observation::JobPolled(poll), at);
            }
        }
        let mut event =
            LogEvent::new("expired".into(), EventSeverity::Warning, "Checkpoint 3 expired".into());
        event.cluster = "prod".into();
        event.job_id = Some(format!("{:032x}", 0));
        state.apply(&Observation::LogEvents(vec![event]), end);
        let daemon = DaemonStats {
            store: Some(crate::app::StoreCounters { records: 40, pruned: 3, errors: 1 }),
            persist_errors: 2,
            last_persisted: Some(end),
            alerts: vec![crate::app::RuleAlerts {
                name: "FlinkCheckpointSlow".into(),
                severity: "warning",
                pending: 1,
                firing: 2,
            }],
            alertmanagers: vec![crate::outputs::alerting::TargetStats {
                url: "http://am:9093".into(),
                sent_total: 5,
                errors_total: 1,
                queued: 0,
            }],
            tls_handshake_errors: Some([("plain_http", 1), ("failed", 3), ("timeout", 0)]),
            discovery: Some(crate::sources::discovery::DiscoveryStats {
                clusters: 3,
                dropped: [("limit", 1), ("duplicate", 0), ("invalid", 2)],
                file_errors: [("too_large", 0), ("unreadable", 1), ("invalid", 4), ("too_many_files", 0)],
                kubernetes: Some(crate::sources::kubernetes::KubernetesStats {
                    objects: [2, 1, 0],
                    relists: [1, 0, 0],
                    clusters: 2,
                    synced: true,
                    jobs: vec![crate::sources::kubernetes::OperatorJob {
                        cluster: "flink.lab".into(),
                        resource: "flinkdeployment/lab".into(),
                        job_id: "8a3c1f0e2b4d6a8c0e1f3a5b7c9d1e2f".into(),
                        state: "RUNNING".into(),
                        lifecycle_state: "STABLE".into(),
                        last_savepoint_ms: Some(1_764_494_400_000),
                    }],
                    ..Default::default()
                }),
            }),
            process: crate::outputs::process::read(),
            metrics: crate::config::MetricsConfig::default(),
            ..DaemonStats::default()
        };
        (state, daemon, end.plus_millis(1_234))
    }

    #[test]
    fn text_renderer_writes_what_the_prometheus_encoder_writes() {
        let (state, daemon, now) = busy_state(6, 30);
        let expected = encode_text(&render(&state, &daemon, now));
        let mut renderer = TextRenderer::default();
        let text = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
        assert!(text.contains("flink_operator_checkpoint_sync_duration_seconds{"), "{text}");
        assert!(text.contains("quantile=\"0.95\"} 0."), "{text}");
        assert!(text.contains("job_name=\"job \\\"1\\\" \\\\ of\\nmany\""), "{text}");
        assert!(text.contains("NaN"), "a summary with an empty window: {text}");
        for (line, (got, want)) in text.lines().zip(expected.lines()).enumerate() {
            assert_eq!(got, want, "line {}", line + 1);
        }
        assert_eq!(text, expected);
        // Reused buffers: the second scrape is the same text, not the first one doubled.
        let again = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
        assert_eq!(again, expected);
    }

    #[test]
    fn lean_settings_drop_operator_series_and_unchosen_quantiles() {
        let (state, mut daemon, now) = busy_state(6, 30);
        let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
        let full = String::from_utf8(TextRenderer::default().render_to_vec(&state, &daemon, now)).unwrap();
        daemon.metrics = crate::config::MetricsConfig { operators: false, quantiles: vec![0.95] };
        let expected = encode_text(&render(&state, &daemon, now));
        let mut renderer = TextRenderer::default();
        let lean = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
        assert_eq!(lean, expected, "the text renderer and the encoder agree on lean settings");
        assert!(!lean.contains("flink_operator_checkpoint_"), "{lean}");
        assert!(lean.contains("flink_checkpoint_duration_seconds{") && lean.contains("quantile=\"0.95\""));
        assert!(!lean.contains("quantile=\"0.5\"") && !lean.contains("quantile=\"0.99\""), "{lean}");
        assert!(full.contains("flink_operator_checkpoint_") && full.contains("quantile=\"0.99\""));
        assert!(series(&lean) < series(&full) / 2, "{} lean, {} full", series(&lean), series(&full));
        // No quantiles: a summary is its _sum and _count.
        daemon.metrics.quantiles.clear();
        let bare = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
        assert!(!bare.contains("quantile="), "{bare}");
        assert_eq!(bare, encode_text(&render(&state, &daemon, now)));
    }

    #[test]
    fn millisecond_values_print_as_rust_prints_them() {
        for ms in (0..200_000).chain([999_999_999_999, 1_795_964_442_123, 4_000_000_000_000]) {
            let mut out = Vec::new();
            write_scaled(&mut out, ms, MS);
            assert_eq!(String::from_utf8(out).unwrap(), (ms as f64 / 1000.0).to_string(), "{ms} ms");
        }
    }

    proptest! {
        #[test]
        fn numbers_print_as_rust_prints_them(
            value in prop_oneof![
                any::<f64>(),
                (-1e13f64..1e13).prop_map(|v| (v * 1000.0).round() / 1000.0),
                any::<i64>().prop_map(|v| v as f64),
                (0u64..u64::MAX).prop_map(|v| v as f64 / 1000.0),
            ]
        ) {
            let mut out = Vec::new();
            write_f64(&mut out, value);
            prop_assert_eq!(String::from_utf8(out).unwrap(), value.to_string());
        }

        #[test]
        fn label_values_escape_as_the_encoder_does(value in "[a-z\"\\\\\n ]{0,12}") {
            let mut out = Vec::new();
            escape_into(&mut out, &value, true);
            let expected = value.replace('\\', "\\\\").replace('\n', "\\n").replace('"', "\\\"");
            prop_assert_eq!(String::from_utf8(out).unwrap(), expected);
        }
    }
}
