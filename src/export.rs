//! The Prometheus exporter: a custom `Collector` that renders `State` at scrape time.
//!
//! HDR quantiles go out as real `summary` families (quantiles over the sliding window, `_sum`
//! and `_count` over the lifetime). Every metric name, type and help text is in [`METRICS`];
//! `docs/metrics.md` lists the same names and `tests/metrics_doc.rs` keeps the two in step.

use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{self, MetricFamily, MetricType};

use crate::app::AppState;
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
    metric!("flink_checkpoints_in_progress", Gauge, JOB, "Checkpoints in progress at the last poll."),
    metric!(
        "flink_checkpoint_oldest_in_progress_age_seconds",
        Gauge,
        JOB,
        "Age of the oldest checkpoint in progress at scrape time (now minus its trigger time), 0 when none."
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
        "Checkpoint events recognised in Flink logs (source log) or synthesised from REST (source rest), by kind: triggered, completed, expired, declined, failed, barrier_missing, …; job_id is empty for lines that name no job."
    ),
    metric!(
        "flink_checkpoint_log_root_causes_total",
        Counter,
        &["cluster", "cause"],
        "Root causes of checkpoint failures in Flink logs: the deepest \"Caused by:\" of the attached stack trace, classified (disk_full, out_of_memory, timeout, closed_stream, serialization, permission, s3, hdfs, …); counted once per checkpoint and cause."
    ),
    metric!("checkpoint_sentinel_build_info", Gauge, &["version"], "The daemon's version; always 1."),
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
        "Failed REST requests by kind: connect, timeout, http_status, decode."
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
        "Failed checkpoints since the last completed one (Flink fails the job when this exceeds the tolerable failures)."
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
pub const ERROR_KINDS: [&str; 4] = ["connect", "timeout", "http_status", "decode"];

/// The collector: renders the shared state at each scrape.
pub struct StateCollector {
    app: Arc<AppState>,
    descs: Vec<Desc>,
}

impl StateCollector {
    /// A collector over the daemon's shared state.
    pub fn new(app: Arc<AppState>) -> Self {
        let descs = METRICS
            .iter()
            .map(|m| {
                let labels = m.labels.iter().map(|l| l.to_string()).collect();
                Desc::new(m.name.to_string(), m.help.to_string(), labels, Default::default())
                    .expect("metric table entries are valid descriptors")
            })
            .collect();
        StateCollector { app, descs }
    }
}

impl Collector for StateCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let now = Timestamp::now();
        let daemon = self.app.daemon_stats();
        let state = self.app.state.read().unwrap_or_else(|e| e.into_inner());
        render(&state, &daemon, now)
    }
}

/// The daemon's own counters that live outside `State`.
#[derive(Clone, Debug, Default)]
pub struct DaemonStats {
    /// Failed state writes.
    pub persist_errors: u64,
    /// Last successful state write.
    pub last_persisted: Option<Timestamp>,
    /// Per rule: (name, severity, pending alerts, firing alerts).
    pub alerts: Vec<(String, &'static str, usize, usize)>,
    /// Delivery counters per Alertmanager.
    pub alertmanagers: Vec<crate::alerting::TargetStats>,
}

/// Collects metric families, in the order of [`METRICS`].
struct Families {
    families: Vec<MetricFamily>,
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
        Families { families }
    }

    fn push(&mut self, name: &str, labels: &[(&str, &str)], value: Value) {
        // Called once per sample (about 100 k for 1,000 jobs): look the name up, don't scan the table.
        static INDEX: std::sync::OnceLock<std::collections::HashMap<&'static str, usize>> =
            std::sync::OnceLock::new();
        let index = *INDEX
            .get_or_init(|| METRICS.iter().enumerate().map(|(i, m)| (m.name, i)).collect())
            .get(name)
            .expect("metric is in the table");
        let def = &METRICS[index];
        debug_assert_eq!(def.labels.len(), labels.len(), "{name}");
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
                        .map(|(&q, v)| {
                            let mut quantile = proto::Quantile::default();
                            quantile.set_quantile(q);
                            quantile.set_value(v.map_or(f64::NAN, |v| v as f64 / divisor));
                            quantile
                        })
                        .collect(),
                );
                metric.set_summary(summary);
            }
            _ => unreachable!("{name}: value does not match the metric type"),
        }
        self.families[index].mut_metric().push(metric);
    }

    fn finish(self) -> Vec<MetricFamily> {
        // A family without samples is left out, as client libraries do.
        self.families.into_iter().filter(|f| !f.get_metric().is_empty()).collect()
    }
}

enum Value {
    Number(f64),
    /// A summary and the divisor from its stored unit (ms or bytes) to the exported one
    /// (dividing, not multiplying by 0.001, keeps 43 ms printed as 0.043).
    Summary(Summary, f64),
}

const MS: f64 = 1000.0;
const BYTES: f64 = 1.0;

fn seconds(ms: u64) -> Value {
    Value::Number(ms as f64 / 1000.0)
}

fn phase_metric(phase: Phase, operator: bool) -> &'static str {
    match (phase, operator) {
        (Phase::EndToEnd, false) => "flink_checkpoint_duration_seconds",
        (Phase::Alignment, false) => "flink_checkpoint_alignment_duration_seconds",
        (Phase::Sync, false) => "flink_checkpoint_sync_duration_seconds",
        (Phase::Async, false) => "flink_checkpoint_async_duration_seconds",
        (Phase::StartDelay, false) => "flink_checkpoint_start_delay_seconds",
        (Phase::EndToEnd, true) => "flink_operator_checkpoint_duration_seconds",
        (Phase::Alignment, true) => "flink_operator_checkpoint_alignment_duration_seconds",
        (Phase::Sync, true) => "flink_operator_checkpoint_sync_duration_seconds",
        (Phase::Async, true) => "flink_operator_checkpoint_async_duration_seconds",
        (Phase::StartDelay, true) => "flink_operator_checkpoint_start_delay_seconds",
    }
}

/// Renders the state as metric families. Pure: `now` is only used for ages.
pub fn render(state: &State, daemon: &DaemonStats, now: Timestamp) -> Vec<MetricFamily> {
    let mut out = Families::new();
    out.push("checkpoint_sentinel_build_info", &[("version", env!("CARGO_PKG_VERSION"))], Value::Number(1.0));
    let mut clamped = 0u64;
    for (cluster_name, cluster) in state.clusters() {
        let c = cluster_name.as_str();
        out.push(
            "checkpoint_sentinel_flink_up",
            &[("cluster", c)],
            Value::Number(f64::from(u8::from(cluster.reachable))),
        );
        if let Some(version) = &cluster.flink_version {
            out.push(
                "checkpoint_sentinel_flink_info",
                &[("cluster", c), ("version", version)],
                Value::Number(1.0),
            );
        }
        out.push(
            "checkpoint_sentinel_poll_duration_seconds",
            &[("cluster", c)],
            Value::Summary(cluster.poll_duration.summary(), MS),
        );
        out.push(
            "checkpoint_sentinel_polls_total",
            &[("cluster", c)],
            Value::Number(cluster.polls_total as f64),
        );
        for kind in ERROR_KINDS {
            let n = cluster.poll_errors.get(kind).copied().unwrap_or(0);
            out.push(
                "checkpoint_sentinel_poll_errors_total",
                &[("cluster", c), ("kind", kind)],
                Value::Number(n as f64),
            );
        }
        if let Some(at) = cluster.last_success {
            out.push(
                "checkpoint_sentinel_last_successful_poll_timestamp_seconds",
                &[("cluster", c)],
                Value::Number(at.seconds()),
            );
        }
        out.push(
            "checkpoint_sentinel_watched_jobs",
            &[("cluster", c)],
            Value::Number(cluster.listed_jobs() as f64),
        );
        render_logs(&mut out, c, &cluster.logs);

        for (job_id, job) in cluster.jobs.iter().filter(|(_, j)| j.listed) {
            let labels = [("cluster", c), ("job_id", job_id.as_str()), ("job_name", job.name.as_str())];
            out.push(
                "flink_job_info",
                &[labels[0], labels[1], labels[2], ("state", job.job_state.as_str())],
                Value::Number(1.0),
            );
            for (phase, histogram) in job.phases.iter() {
                clamped += histogram.out_of_range();
                out.push(phase_metric(phase, false), &labels, Value::Summary(histogram.summary(), MS));
            }
            for (name, histogram) in [
                ("flink_checkpoint_checkpointed_size_bytes", &job.sizes.checkpointed),
                ("flink_checkpoint_full_size_bytes", &job.sizes.full_state),
                ("flink_checkpoint_processed_data_bytes", &job.sizes.processed),
                ("flink_checkpoint_persisted_data_bytes", &job.sizes.persisted),
            ] {
                clamped += histogram.out_of_range();
                out.push(name, &labels, Value::Summary(histogram.summary(), BYTES));
            }
            let totals = job.totals();
            for status in [CheckpointStatus::Completed, CheckpointStatus::Failed] {
                let with_status = [labels[0], labels[1], labels[2], ("status", status.as_str())];
                out.push("flink_checkpoints_total", &with_status, Value::Number(totals.get(status) as f64));
                out.push(
                    "checkpoint_sentinel_checkpoints_unobserved_total",
                    &with_status,
                    Value::Number(job.unobserved.get(status) as f64),
                );
            }
            out.push(
                "flink_checkpoint_restores_total",
                &labels,
                Value::Number(job.flink_counts.restored as f64),
            );
            out.push("flink_checkpoints_in_progress", &labels, Value::Number(job.in_progress.len() as f64));
            out.push(
                "flink_checkpoint_consecutive_failures",
                &labels,
                Value::Number(job.consecutive_failures() as f64),
            );
            let oldest = job.in_progress.iter().map(|cp| now.since(cp.triggered_at)).max().unwrap_or(0);
            out.push("flink_checkpoint_oldest_in_progress_age_seconds", &labels, seconds(oldest));
            if let Some(last) = &job.last_completed {
                out.push(
                    "flink_checkpoint_last_completed_timestamp_seconds",
                    &labels,
                    Value::Number(last.finished_at.seconds()),
                );
            }
            if let Some(last) = &job.last_failed {
                out.push(
                    "flink_checkpoint_last_failed_timestamp_seconds",
                    &labels,
                    Value::Number(last.finished_at.seconds()),
                );
            }
            if let Some(settings) = &job.settings {
                if let Some(interval) = settings.interval_ms {
                    out.push("flink_checkpoint_interval_seconds", &labels, seconds(interval));
                }
                if let Some(timeout) = settings.timeout_ms {
                    out.push("flink_checkpoint_timeout_seconds", &labels, seconds(timeout));
                }
                out.push("flink_checkpoint_min_pause_seconds", &labels, seconds(settings.min_pause_ms));
                out.push(
                    "flink_checkpoint_max_concurrent",
                    &labels,
                    Value::Number(f64::from(settings.max_concurrent)),
                );
                if let Some(tolerable) = settings.tolerable_failures {
                    out.push(
                        "flink_checkpoint_tolerable_failures",
                        &labels,
                        Value::Number(f64::from(tolerable)),
                    );
                }
            }
            render_shadow(&mut out, &labels, job);
            for (vertex_id, operator) in &job.operators {
                let op_labels = [
                    labels[0],
                    labels[1],
                    labels[2],
                    ("vertex_id", vertex_id.as_str()),
                    ("operator", operator.name.as_str()),
                ];
                for (phase, histogram) in operator.phases.iter() {
                    clamped += histogram.out_of_range();
                    out.push(phase_metric(phase, true), &op_labels, Value::Summary(histogram.summary(), MS));
                }
            }
        }
    }
    out.push("checkpoint_sentinel_clamped_values_total", &[], Value::Number(clamped as f64));
    for (name, severity, pending, firing) in &daemon.alerts {
        for (state, n) in [("pending", pending), ("firing", firing)] {
            let labels = [("alertname", name.as_str()), ("severity", *severity), ("state", state)];
            out.push("checkpoint_sentinel_alerts", &labels, Value::Number(*n as f64));
        }
    }
    for am in &daemon.alertmanagers {
        let labels = [("alertmanager", am.url.as_str())];
        out.push(
            "checkpoint_sentinel_alertmanager_sends_total",
            &labels,
            Value::Number(am.sent_total as f64),
        );
        out.push(
            "checkpoint_sentinel_alertmanager_errors_total",
            &labels,
            Value::Number(am.errors_total as f64),
        );
        out.push("checkpoint_sentinel_alertmanager_queued_alerts", &labels, Value::Number(am.queued as f64));
    }
    out.push(
        "checkpoint_sentinel_state_persist_errors_total",
        &[],
        Value::Number(daemon.persist_errors as f64),
    );
    if let Some(at) = daemon.last_persisted {
        out.push(
            "checkpoint_sentinel_state_last_persisted_timestamp_seconds",
            &[],
            Value::Number(at.seconds()),
        );
    }
    out.finish()
}

fn render_shadow(out: &mut Families, labels: &[(&str, &str); 3], job: &crate::state::JobState) {
    let trigger = &job.shadow.trigger;
    if let Some(ms) = trigger.expected_interval_ms() {
        out.push("flink_checkpoint_expected_interval_seconds", labels, seconds(ms));
    }
    if let Some(ms) = trigger.observed_interval_ms() {
        out.push("flink_checkpoint_observed_interval_seconds", labels, seconds(ms));
    }
    if trigger.settings().is_some() {
        out.push(
            "flink_checkpoint_trigger_deviation_seconds",
            labels,
            Value::Summary(job.trigger_deviation.summary(), MS),
        );
        for kind in crate::shadow::DeviationKind::ALL {
            let n = trigger.deviation_counts().get(&kind).copied().unwrap_or(0);
            let explained = if kind.explained() { "true" } else { "false" };
            let with_kind =
                [labels[0], labels[1], labels[2], ("kind", kind.as_str()), ("explained", explained)];
            out.push("flink_checkpoint_deviations_total", &with_kind, Value::Number(n as f64));
        }
    }
}

fn render_logs(out: &mut Families, c: &str, logs: &crate::state::logs::LogState) {
    for ((job_id, kind, source), n) in &logs.events {
        let labels =
            [("cluster", c), ("job_id", job_id.as_str()), ("kind", kind.as_str()), ("source", *source)];
        out.push("flink_checkpoint_log_events_total", &labels, Value::Number(*n as f64));
    }
    for (cause, n) in &logs.root_causes {
        out.push(
            "flink_checkpoint_log_root_causes_total",
            &[("cluster", c), ("cause", cause)],
            Value::Number(*n as f64),
        );
    }
    if let Some(t) = logs.tailer_totals() {
        for (name, value) in [
            ("checkpoint_sentinel_log_read_bytes_total", t.bytes),
            ("checkpoint_sentinel_log_lines_total", t.lines),
            ("checkpoint_sentinel_log_files_watched", t.files),
            ("checkpoint_sentinel_log_rotations_total", t.rotations),
            ("checkpoint_sentinel_log_rotation_gaps_total", t.rotation_gaps),
            ("checkpoint_sentinel_log_oversize_lines_total", t.oversize_lines),
            ("checkpoint_sentinel_log_lag_bytes", t.lag_bytes),
            ("checkpoint_sentinel_log_errors_total", t.errors),
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
