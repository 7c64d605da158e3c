//! A job's series: its info, phase and size summaries, counts, savepoints, restores, in-progress
//! and failure gauges, configuration, the trigger shadow's series, and its operators' summaries
//! (a part of their own).

use super::sink::{BYTES, MS, Sink, Value, seconds};
use crate::observe::CheckpointStatus;
use crate::state::{JobState, Phase, State};
use crate::time::Timestamp;

pub(super) fn phase_metric(phase: Phase, operator: bool) -> usize {
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

pub(super) fn render_operators(state: &State, out: &mut impl Sink, phase: Phase) {
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

/// A job's identifying labels: cluster, job id, job name.
type JobLabels<'a> = [(&'a str, &'a str); 3];

/// Every series of one listed job but its operators' summaries; returns how many of its values
/// (its operators' too) were clamped into the histograms' range.
pub(super) fn render_job(out: &mut impl Sink, c: &str, job_id: &str, job: &JobState, now: Timestamp) -> u64 {
    let labels = [("cluster", c), ("job_id", job_id), ("job_name", job.name.as_str())];
    out.push(
        family!("flink_job_info"),
        &[labels[0], labels[1], labels[2], ("state", job.job_state.as_str())],
        Value::Number(1.0),
    );
    let mut clamped = render_summaries(out, &labels, job);
    render_counts(out, &labels, job);
    render_savepoints(out, &labels, job);
    render_restores(out, &labels, job);
    render_progress(out, &labels, job, now);
    render_settings(out, &labels, job);
    render_shadow(out, &labels, job);
    // The operators' summaries are parts of their own (`render_operators`).
    for operator in job.operators.values() {
        clamped += operator.phases.iter().into_iter().map(|(_, h)| h.out_of_range()).sum::<u64>();
    }
    clamped
}

/// The phase and size summaries; returns how many of their values were clamped.
fn render_summaries(out: &mut impl Sink, labels: &JobLabels, job: &JobState) -> u64 {
    let mut clamped = 0u64;
    for (phase, histogram) in job.phases.iter() {
        clamped += histogram.out_of_range();
        out.push(phase_metric(phase, false), labels, Value::Summary(histogram.summary(), MS));
    }
    for (name, histogram) in [
        (family!("flink_checkpoint_checkpointed_size_bytes"), &job.sizes.checkpointed),
        (family!("flink_checkpoint_full_size_bytes"), &job.sizes.full_state),
        (family!("flink_checkpoint_processed_data_bytes"), &job.sizes.processed),
        (family!("flink_checkpoint_persisted_data_bytes"), &job.sizes.persisted),
    ] {
        clamped += histogram.out_of_range();
        out.push(name, labels, Value::Summary(histogram.summary(), BYTES));
    }
    clamped
}

/// Checkpoints by status: counted, unobserved, and observed by each source.
fn render_counts(out: &mut impl Sink, labels: &JobLabels, job: &JobState) {
    let totals = job.totals();
    for status in [CheckpointStatus::Completed, CheckpointStatus::Failed] {
        let with_status = [labels[0], labels[1], labels[2], ("status", status.as_str())];
        out.push(family!("flink_checkpoints_total"), &with_status, Value::Number(totals.get(status) as f64));
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
}

/// Savepoints: counts, and the last one's times.
fn render_savepoints(out: &mut impl Sink, labels: &JobLabels, job: &JobState) {
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
            labels,
            Value::Number(at.seconds()),
        );
    }
    if let Some(ms) = job.savepoints.last_duration_ms {
        out.push(family!("flink_savepoint_last_duration_seconds"), labels, seconds(ms));
    }
    if let Some(at) = job.savepoints.last_failed_at {
        out.push(
            family!("flink_savepoint_last_failed_timestamp_seconds"),
            labels,
            Value::Number(at.seconds()),
        );
    }
}

/// Restores: Flink's count, ours by origin, and the latest one.
fn render_restores(out: &mut impl Sink, labels: &JobLabels, job: &JobState) {
    out.push(
        family!("flink_checkpoint_restores_total"),
        labels,
        Value::Number(job.flink_counts.restored as f64),
    );
    let restores = &job.restores;
    for (from, n) in [("checkpoint", restores.totals.checkpoint), ("savepoint", restores.totals.savepoint)] {
        out.push(
            family!("flink_job_restores_total"),
            &[labels[0], labels[1], labels[2], ("from", from)],
            Value::Number(n as f64),
        );
    }
    if let Some(latest) = restores.latest() {
        out.push(
            family!("flink_job_last_restore_timestamp_seconds"),
            labels,
            Value::Number(latest.from.restored_at.seconds()),
        );
        if let Some(id) = latest.from.checkpoint_id {
            out.push(family!("flink_job_last_restore_checkpoint_id"), labels, Value::Number(id as f64));
        }
    }
    if let Some(timed) = restores.last_measured() {
        if let Some(ms) = timed.duration_ms {
            out.push(family!("flink_job_last_restore_duration_seconds"), labels, seconds(ms));
        }
        if let Some(ms) = timed.downtime_ms {
            out.push(family!("flink_job_last_restore_downtime_seconds"), labels, seconds(ms));
        }
    }
    render_status_metrics(out, labels, job);
}

/// Flink's own job status metrics, each under the name it was read (2.x's, else 1.x's).
fn render_status_metrics(out: &mut impl Sink, labels: &JobLabels, job: &JobState) {
    let Some(m) = &job.reported.status_metrics else { return };
    if let Some((n, name)) = m.restarts {
        out.push(
            family!("flink_job_restarts"),
            &[labels[0], labels[1], labels[2], ("flink_metric", name)],
            Value::Number(n as f64),
        );
    }
    let times = [
        ("running", m.running_ms),
        ("restarting", m.restarting_ms),
        ("cancelling", m.cancelling_ms),
        ("failing", m.failing_ms),
    ];
    for (status, value) in times {
        let Some((ms, name)) = value else { continue };
        out.push(
            family!("flink_job_status_time_seconds"),
            &[labels[0], labels[1], labels[2], ("status", status), ("flink_metric", name)],
            seconds(ms),
        );
    }
    if let Some(bytes) = m.last_metadata_bytes {
        out.push(family!("flink_job_last_checkpoint_metadata_bytes"), labels, Value::Number(bytes as f64));
    }
}

/// Checkpoints in progress and failing: gauges, ages, and the times of the last of each.
fn render_progress(out: &mut impl Sink, labels: &JobLabels, job: &JobState, now: Timestamp) {
    out.push(family!("flink_checkpoints_in_progress"), labels, Value::Number(job.in_progress.len() as f64));
    out.push(
        family!("flink_checkpoint_consecutive_failures"),
        labels,
        Value::Number(job.consecutive_failures() as f64),
    );
    if let Some(counted) = job.counted_failures() {
        out.push(family!("flink_checkpoint_counted_failures"), labels, Value::Number(counted as f64));
    }
    out.push(
        family!("flink_checkpoint_tolerance_exceeded_total"),
        labels,
        Value::Number(job.tolerance.exceeded() as f64),
    );
    if let Some(at) = job.tolerance.last_exceeded_at() {
        out.push(
            family!("flink_checkpoint_tolerance_exceeded_timestamp_seconds"),
            labels,
            Value::Number(at.seconds()),
        );
    }
    out.push(
        family!("flink_checkpoint_failures_seen_total"),
        labels,
        Value::Number(job.failures.total as f64),
    );
    let oldest = job.live_in_progress(now).iter().map(|(_, at)| now.since(*at)).max().unwrap_or(0);
    out.push(family!("flink_checkpoint_oldest_in_progress_age_seconds"), labels, seconds(oldest));
    if let Some(blocked) = job.blocked_thread(now) {
        // One series per job at most, only while the verdict holds; the frame is a label because
        // Prometheus has no other way to carry it into the alert.
        let s = blocked.sample;
        let subtask = s.subtask.to_string();
        let frame = blocked.frame();
        let extra = [
            ("operator", s.operator.as_str()),
            ("subtask", subtask.as_str()),
            ("taskmanager", s.taskmanager.as_str()),
            ("frame", frame.as_str()),
        ];
        let all: Vec<(&str, &str)> = labels.iter().copied().chain(extra).collect();
        out.push(family!("flink_checkpoint_blocked_by_user_code"), &all, Value::Number(1.0));
    }
    out.push(
        family!("flink_checkpoint_trigger_failures_total"),
        labels,
        Value::Number(job.failed_without_id as f64),
    );
    if let Some(since) = job.running_without_checkpoint_ms(now).and(job.running_since) {
        out.push(
            family!("flink_checkpoint_running_without_completed_since_timestamp_seconds"),
            labels,
            Value::Number(since.seconds()),
        );
    }
    if let Some(since) = job.failing_since.filter(|_| job.consecutive_failures() > 0) {
        out.push(
            family!("flink_checkpoint_failing_since_timestamp_seconds"),
            labels,
            Value::Number(since.seconds()),
        );
    }
    if let Some(last) = &job.last_completed {
        out.push(
            family!("flink_checkpoint_last_completed_timestamp_seconds"),
            labels,
            Value::Number(last.finished_at.seconds()),
        );
    }
    if let Some(last) = &job.last_failed {
        out.push(
            family!("flink_checkpoint_last_failed_timestamp_seconds"),
            labels,
            Value::Number(last.finished_at.seconds()),
        );
    }
}

/// The job's checkpoint configuration, once known.
fn render_settings(out: &mut impl Sink, labels: &JobLabels, job: &JobState) {
    let Some(settings) = &job.settings else { return };
    if let Some(interval) = settings.interval_ms {
        out.push(family!("flink_checkpoint_interval_seconds"), labels, seconds(interval));
    }
    if let Some(timeout) = settings.timeout_ms {
        out.push(family!("flink_checkpoint_timeout_seconds"), labels, seconds(timeout));
    }
    out.push(family!("flink_checkpoint_min_pause_seconds"), labels, seconds(settings.min_pause_ms));
    out.push(
        family!("flink_checkpoint_max_concurrent"),
        labels,
        Value::Number(f64::from(settings.max_concurrent)),
    );
    if let Some(tolerable) = settings.tolerable_failures {
        out.push(family!("flink_checkpoint_tolerable_failures"), labels, Value::Number(f64::from(tolerable)));
    }
    // The advisor's risk findings, by their thresholds (no model run at scrape time).
    for (finding, on) in crate::advice::job_risks(job, None).into_iter().flatten() {
        out.push(
            family!("flink_checkpoint_config_risk"),
            &[labels[0], labels[1], labels[2], ("finding", finding)],
            Value::Number(if on { 1.0 } else { 0.0 }),
        );
    }
}

/// The trigger shadow's series: intervals, stall, deviations.
fn render_shadow(out: &mut impl Sink, labels: &JobLabels, job: &JobState) {
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
