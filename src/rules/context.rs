//! The series a rule can read for one job, and the short history `increase()`/`ago()` need.
//!
//! Series names (values in base units: seconds, bytes, counts):
//! - `duration`, `alignment`, `sync`, `async`, `start_delay` with `.p50`, `.p95`, `.p99`
//!   (job level: the slowest subtask of each checkpoint), and `.count` (lifetime);
//! - `checkpointed_size`, `full_size`, `processed_data`, `persisted_data` with `.p50/.p95/.p99`;
//! - counters `checkpoints.completed`, `checkpoints.failed`, `checkpoints.total`, `restores`
//!   (Flink's counts, from the poll), and `checkpoints.trigger_failed` (of the failed ones,
//!   triggers that failed before the checkpoint got an id: "Not all required tasks are
//!   currently running" while a job deploys);
//! - `checkpoints.failed_seen`: failed checkpoints known from whichever source said so first,
//!   a JobManager log line or the poll, each once, without those of a job shutting down
//!   (`state::FailureEvidence`): the log line makes it move within a second of the failure;
//! - `in_progress` (at the last poll), `in_progress_age` (the oldest checkpoint in progress
//!   *now*: the poll's and the log's, minus what the log said finished since and what is past
//!   its timeout, `JobState::live_in_progress`; 0 when none), `since_last_completed`, and
//!   `running_without_checkpoint` (seconds since the job entered RUNNING while no checkpoint
//!   completed since; no value once one did);
//! - configuration: `interval`, `timeout`, `min_pause`, `max_concurrent`, `tolerable_failures`,
//!   and `progress_window` = max(interval, timeout) × (min(tolerable_failures, 3) + 2) (the
//!   Flink Kubernetes operator's window with the tolerable count capped, so that a large
//!   tolerable-failed-checkpoints does not make it hours long);
//! - `consecutive_failures` (failed checkpoints since the last completed one, a running count;
//!   failures of a stopping job excluded), `failing_for` (seconds since the first failure of
//!   that run; no value without one) and
//!   `remaining_tolerable` = tolerable_failures − consecutive_failures;
//! - log events of the job by kind, counters: `log.expired`, `log.declined`, `log.failed`,
//!   `log.barrier_missing`, `log.restored`, … (any kind the tailer or a user pattern produces);
//! - the shadow model: `shadow.unexplained` and `shadow.explained` (deviation counters) and
//!   `shadow.stall` (seconds since a trigger the model expected and that did not come, once
//!   that is past `shadow.stall_tolerance` at two polls in a row) and `shadow.stall_tolerance`
//!   (the trigger jitter plus the longest observed lag from a trigger to the first poll that
//!   showed the checkpoint, at least 3 s until three are known, plus one poll interval, seconds).

use std::collections::{BTreeMap, VecDeque};

use super::expr::Context;
use crate::state::JobState;
use crate::state::logs::LogState;
use crate::stats::Summary;
use crate::time::Timestamp;

const PHASES: [&str; 5] = ["duration", "alignment", "sync", "async", "start_delay"];
const SIZES: [&str; 4] = ["checkpointed_size", "full_size", "processed_data", "persisted_data"];
const PLAIN: [&str; 21] = [
    "checkpoints.completed",
    "savepoints.completed",
    "savepoints.failed",
    "checkpoints.failed",
    "checkpoints.failed_seen",
    "checkpoints.total",
    "checkpoints.trigger_failed",
    "restores",
    "in_progress",
    "in_progress_age",
    "since_last_completed",
    "running_without_checkpoint",
    "failing_for",
    "interval",
    "timeout",
    "min_pause",
    "max_concurrent",
    "tolerable_failures",
    "progress_window",
    "consecutive_failures",
    "remaining_tolerable",
];

/// `progress_window` counts at most this many tolerable failures: at tolerable 100 the
/// uncapped window was 102 × max(interval, timeout), 17 h with a 10-minute timeout.
pub const PROGRESS_TOLERABLE_CAP: u32 = 3;

/// Whether `name` is a series rules can read.
pub fn is_known_series(name: &str) -> bool {
    if PLAIN.contains(&name)
        || ["shadow.unexplained", "shadow.explained", "shadow.stall", "shadow.stall_tolerance"]
            .contains(&name)
    {
        return true;
    }
    if let Some(kind) = name.strip_prefix("log.") {
        return !kind.is_empty()
            && kind.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    }
    let Some((base, stat)) = name.rsplit_once('.') else { return false };
    let quantile = ["p50", "p95", "p99"].contains(&stat);
    (PHASES.contains(&base) && (quantile || stat == "count")) || (SIZES.contains(&base) && quantile)
}

/// Samples of the series that `increase()`/`ago()` read, kept as long as the longest window.
#[derive(Default)]
pub struct SeriesHistory {
    samples: VecDeque<(Timestamp, BTreeMap<String, f64>)>,
}

impl SeriesHistory {
    /// Records the current values of the windowed series. Samples are spaced so that each
    /// window holds at most a few hundred, whatever the evaluation interval.
    pub fn sample(
        &mut self,
        job: &JobState,
        job_id: &str,
        logs: Option<&LogState>,
        now: Timestamp,
        windows: &[(String, f64)],
    ) {
        let Some(longest) = windows.iter().map(|(_, w)| *w).reduce(f64::max) else {
            self.samples.clear();
            return;
        };
        let spacing_ms = ((longest * 1000.0) / 240.0).max(1.0) as i64;
        let due = self.samples.back().is_none_or(|(t, _)| now.millis() - t.millis() >= spacing_ms);
        if due {
            let ctx = JobContext { job, job_id, logs, history: None, now };
            let values = windows
                .iter()
                .filter_map(|(series, _)| ctx.value(series).map(|v| (series.clone(), v)))
                .collect();
            self.samples.push_back((now, values));
        }
        let horizon = now.millis() - (longest * 1000.0) as i64 - spacing_ms * 2;
        while self.samples.len() > 2 && self.samples.front().is_some_and(|(t, _)| t.millis() < horizon) {
            self.samples.pop_front();
        }
    }

    /// The sample closest to `at` at or before it, or the oldest one.
    fn at_or_before(&self, at: i64, series: &str) -> Option<f64> {
        let mut found = None;
        for (t, values) in &self.samples {
            if t.millis() > at {
                break;
            }
            found = values.get(series).copied().or(found);
        }
        found.or_else(|| self.samples.iter().find_map(|(_, v)| v.get(series).copied()))
    }
}

/// The series of one job at one evaluation.
pub struct JobContext<'a> {
    job: &'a JobState,
    job_id: &'a str,
    logs: Option<&'a LogState>,
    history: Option<&'a SeriesHistory>,
    now: Timestamp,
}

impl<'a> JobContext<'a> {
    /// A context over `job` (with id `job_id` and its cluster's log events) and its history.
    pub fn new(
        job: &'a JobState,
        job_id: &'a str,
        logs: Option<&'a LogState>,
        history: &'a SeriesHistory,
        now: Timestamp,
    ) -> Self {
        JobContext { job, job_id, logs, history: Some(history), now }
    }

    fn log_events(&self, kind: &str) -> f64 {
        let Some(logs) = self.logs else { return 0.0 };
        // Keyed by job first: a range, not a scan of every job's counters (a round over 1,000
        // jobs would compare a million keys).
        let from = (self.job_id.to_string(), kind.to_string(), "");
        logs.events
            .range(from..)
            .take_while(|((job, k, _), _)| job == self.job_id && k == kind)
            .map(|(_, n)| *n as f64)
            .sum()
    }

    fn shadow_deviations(&self, explained: bool) -> f64 {
        self.job
            .shadow
            .trigger
            .deviation_counts()
            .iter()
            .filter(|(kind, _)| kind.explained() == explained)
            .map(|(_, n)| *n as f64)
            .sum()
    }

    fn consecutive_failures(&self) -> f64 {
        self.job.consecutive_failures() as f64
    }
}

fn quantile(summary: Summary, stat: &str, divisor: f64) -> Option<f64> {
    let index = match stat {
        "p50" => 0,
        "p95" => 1,
        "p99" => 2,
        "count" => return Some(summary.count as f64),
        _ => return None,
    };
    summary.quantiles[index].map(|v| v as f64 / divisor)
}

impl Context for JobContext<'_> {
    fn value(&self, series: &str) -> Option<f64> {
        let job = self.job;
        let settings = job.settings.as_ref();
        let secs = |ms: u64| ms as f64 / 1000.0;
        let totals = job.totals();
        match series {
            "checkpoints.completed" => return Some(totals.completed as f64),
            "checkpoints.failed" => return Some(totals.failed as f64),
            "checkpoints.total" => return Some((totals.completed + totals.failed) as f64),
            "checkpoints.trigger_failed" => return Some(job.failed_without_id as f64),
            "checkpoints.failed_seen" => return Some(job.failures.total as f64),
            "restores" => return Some(job.flink_counts.restored as f64),
            "savepoints.completed" => return Some(job.savepoints.totals.completed as f64),
            "savepoints.failed" => return Some(job.savepoints.totals.failed as f64),
            "in_progress" => return Some(job.in_progress.len() as f64),
            "in_progress_age" => {
                let live = job.live_in_progress(self.now);
                return Some(live.iter().map(|(_, at)| secs(self.now.since(*at))).fold(0.0, f64::max));
            }
            "since_last_completed" => {
                return job.last_completed.as_ref().map(|c| secs(self.now.since(c.finished_at)));
            }
            "running_without_checkpoint" => return job.running_without_checkpoint_ms(self.now).map(secs),
            "failing_for" => return job.failing_since.map(|since| secs(self.now.since(since))),
            "interval" => return settings.and_then(|s| s.interval_ms).map(secs),
            "timeout" => return settings.and_then(|s| s.timeout_ms).map(secs),
            "min_pause" => return settings.map(|s| secs(s.min_pause_ms)),
            "max_concurrent" => return settings.map(|s| f64::from(s.max_concurrent)),
            "tolerable_failures" => return settings.and_then(|s| s.tolerable_failures).map(f64::from),
            "progress_window" => {
                let s = settings?;
                let base = secs(s.interval_ms.unwrap_or(0).max(s.timeout_ms.unwrap_or(0)));
                let tolerable = s.tolerable_failures.unwrap_or(0).min(PROGRESS_TOLERABLE_CAP);
                return Some(base * (f64::from(tolerable) + 2.0));
            }
            "consecutive_failures" => return Some(self.consecutive_failures()),
            "shadow.unexplained" => return Some(self.shadow_deviations(false)),
            "shadow.explained" => return Some(self.shadow_deviations(true)),
            "shadow.stall" => return Some(job.shadow.trigger.stalled_for_ms().map_or(0.0, secs)),
            "shadow.stall_tolerance" => return job.shadow.trigger.current_stall_tolerance_ms().map(secs),
            "remaining_tolerable" => {
                let tolerable = settings.and_then(|s| s.tolerable_failures)?;
                return Some(f64::from(tolerable) - self.consecutive_failures());
            }
            _ => {}
        }
        if let Some(kind) = series.strip_prefix("log.") {
            return Some(self.log_events(kind));
        }
        let (base, stat) = series.rsplit_once('.')?;
        let phases = &job.phases;
        let sizes = &job.sizes;
        match base {
            "duration" => quantile(phases.end_to_end.summary(), stat, 1000.0),
            "alignment" => quantile(phases.alignment.summary(), stat, 1000.0),
            "sync" => quantile(phases.sync.summary(), stat, 1000.0),
            "async" => quantile(phases.async_.summary(), stat, 1000.0),
            "start_delay" => quantile(phases.start_delay.summary(), stat, 1000.0),
            "checkpointed_size" => quantile(sizes.checkpointed.summary(), stat, 1.0),
            "full_size" => quantile(sizes.full_state.summary(), stat, 1.0),
            "processed_data" => quantile(sizes.processed.summary(), stat, 1.0),
            "persisted_data" => quantile(sizes.persisted.summary(), stat, 1.0),
            _ => None,
        }
    }

    fn increase(&self, series: &str, window_s: f64) -> Option<f64> {
        let now = self.value(series)?;
        let then = self.history?.at_or_before(self.now.millis() - (window_s * 1000.0) as i64, series)?;
        // A counter that went down was reset: count from zero, as Prometheus does.
        Some(if now >= then { now - then } else { now })
    }

    fn ago(&self, series: &str, window_s: f64) -> Option<f64> {
        let history = self.history?;
        let at = self.now.millis() - (window_s * 1000.0) as i64;
        // Only a sample that is really that old counts; a young history has no answer yet.
        history.samples.front().filter(|(t, _)| t.millis() <= at)?;
        history.at_or_before(at, series)
    }

    fn knows(&self, series: &str) -> bool {
        is_known_series(series)
    }
}
