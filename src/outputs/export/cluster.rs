//! A cluster's series: reachability, Flink version, polls and their errors, watched jobs, and
//! what its log tailers counted.

use super::families::ERROR_KINDS;
use super::sink::{MS, Sink, Value};
use crate::state::ClusterState;

/// The series of one cluster (its jobs' are `job::render_job`'s).
pub(super) fn render_cluster(out: &mut impl Sink, c: &str, cluster: &ClusterState) {
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
    render_logs(out, c, cluster);
    super::evidence::render_evidence(out, c, cluster);
    super::storage::render_storage(out, c, cluster);
}

fn render_logs(out: &mut impl Sink, c: &str, cluster: &crate::state::ClusterState) {
    let logs = &cluster.logs;
    for ((job_id, kind, source), n) in &logs.events {
        // The name the poll of the same job id gave (one per job id: bounded as job_id is).
        let job_name = cluster.jobs.get(job_id).map_or("", |j| j.name.as_str());
        let labels = [
            ("cluster", c),
            ("job_id", job_id.as_str()),
            ("job_name", job_name),
            ("kind", kind.as_str()),
            ("source", *source),
        ];
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
