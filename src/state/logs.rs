//! What the daemon knows from log files, per cluster: event counters, root-cause counters,
//! a bounded ring of recent events, the tailers' read positions and their own counters. Pure,
//! like all of `state`.
//!
//! The read positions live here, next to the counters, so that one persisted snapshot holds
//! both: after a `kill -9` the tailer resumes at the position that matches the counters, and a
//! line is counted exactly once.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::observe::counts_root_cause;
use crate::observe::{LogEvent, LogKind, TailerPositions, TailerReport};

/// How many recent log events per cluster are kept for the API and status page.
pub(crate) const RECENT_LOG_EVENTS: usize = 256;

/// At most this many distinct job ids get log-event series of their own per cluster; events of
/// further job ids (log lines can name any) are counted under `job_id=""` and in
/// [`LogState::job_ids_cut`] (before: 50,000 series, never pruned).
pub(crate) const MAX_LOG_JOB_IDS: usize = 1_000;

/// How many (checkpoint id, cause) pairs are remembered to count each cause once per checkpoint.
const COUNTED_CAUSES: usize = 256;

/// Log-derived knowledge of one cluster.
#[derive(Default)]
pub struct LogState {
    /// Events by (job id or "", kind, source).
    pub events: BTreeMap<(String, LogKind, &'static str), u64>,
    /// Root causes by category.
    pub root_causes: BTreeMap<&'static str, u64>,
    /// Recent non-routine events, oldest first.
    pub recent: VecDeque<LogEvent>,
    /// The latest report of each tailer bound to this cluster.
    pub(crate) tailers: BTreeMap<String, TailerReport>,
    /// Where each tailer bound to this cluster stands, by tailer id: every byte before these
    /// positions is counted above.
    pub positions: BTreeMap<String, TailerPositions>,
    /// (checkpoint id, cause) pairs already counted, oldest first.
    pub(super) counted_causes: VecDeque<(u64, &'static str)>,
    /// Events whose job id was past [`MAX_LOG_JOB_IDS`] (counted under no job).
    pub(crate) job_ids_cut: u64,
    /// The job ids in `events` (built from them on first use, e.g. after a restore).
    job_ids: Option<BTreeSet<String>>,
}

impl LogState {
    /// Counts one event.
    pub(crate) fn apply_event(&mut self, event: &LogEvent) {
        let mut job = event.job_id.clone().unwrap_or_default();
        if !job.is_empty() {
            let events = &self.events;
            let known = self.job_ids.get_or_insert_with(|| {
                events.keys().map(|(j, _, _)| j.clone()).filter(|j| !j.is_empty()).collect()
            });
            if !known.contains(&job) {
                if known.len() >= MAX_LOG_JOB_IDS {
                    self.job_ids_cut += 1;
                    job = String::new();
                } else {
                    known.insert(job.clone());
                }
            }
        }
        let key = (job, event.kind.clone(), event.source);
        *self.events.entry(key).or_insert(0) += 1;
        if let Some(cause) = event.root_cause.as_ref().filter(|_| counts_root_cause(event.kind.as_str())) {
            // One failure shows up as several records with the same stack (the JobManager's
            // decline and failure-manager lines, the TaskManager's own line): count the cause
            // once per checkpoint. Events without a checkpoint id count each time.
            let first_time = match event.checkpoint_id {
                Some(id) if self.counted_causes.contains(&(id, cause.category)) => false,
                Some(id) => {
                    self.counted_causes.push_back((id, cause.category));
                    if self.counted_causes.len() > COUNTED_CAUSES {
                        self.counted_causes.pop_front();
                    }
                    true
                }
                None => true,
            };
            if first_time {
                *self.root_causes.entry(cause.category).or_insert(0) += 1;
            }
        }
        // Routine kinds are counted, but kept out of the recent ring so it holds what an
        // operator wants to see.
        if !event.kind.is_routine() {
            self.recent.push_back(event.clone());
            while self.recent.len() > RECENT_LOG_EVENTS {
                self.recent.pop_front();
            }
        }
    }

    /// Counts a tailer's events (as `State` correlated them) and moves its positions past them.
    pub(crate) fn apply_read(&mut self, tailer: &str, events: &[LogEvent], positions: &TailerPositions) {
        for event in events {
            self.apply_event(event);
        }
        self.positions.insert(tailer.to_string(), positions.clone());
    }

    /// Replaces a tailer's counters with its latest report.
    pub(crate) fn apply_report(&mut self, report: &TailerReport) {
        self.tailers.insert(report.tailer.clone(), report.clone());
    }

    /// The counters of all tailers of this cluster added up.
    pub fn tailer_totals(&self) -> Option<TailerReport> {
        if self.tailers.is_empty() {
            return None;
        }
        let mut total = TailerReport::default();
        for r in self.tailers.values() {
            total.bytes += r.bytes;
            total.lines += r.lines;
            total.files += r.files;
            total.rotations += r.rotations;
            total.rotation_gaps += r.rotation_gaps;
            total.oversize_lines += r.oversize_lines;
            total.lag_bytes += r.lag_bytes;
            total.errors += r.errors;
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{EventSeverity, RootCause};

    fn event(kind: &str, id: Option<u64>, cause: Option<&'static str>) -> LogEvent {
        let mut e = LogEvent::new(kind.into(), EventSeverity::Warning, String::new());
        e.cluster = "c".into();
        e.file = "f".into();
        e.job_id = Some("j".into());
        e.checkpoint_id = id;
        e.root_cause =
            cause.map(|c| RootCause { category: c, exception: String::new(), message: String::new() });
        e
    }

    #[test]
    fn events_are_counted_and_causes_once_per_checkpoint() {
        let mut s = LogState::default();
        s.apply_event(&event("declined", Some(3), Some("io_error")));
        s.apply_event(&event("failed", Some(3), Some("io_error")));
        s.apply_event(&event("failed", Some(4), Some("io_error")));
        s.apply_event(&event("completed", Some(5), None));
        assert_eq!(s.events[&("j".to_string(), LogKind::Failed, "log")], 2);
        assert_eq!(s.root_causes["io_error"], 2);
        assert_eq!(s.recent.len(), 3, "completed is routine");
    }

    #[test]
    fn log_series_of_job_ids_are_bounded() {
        let mut s = LogState::default();
        for i in 0..(MAX_LOG_JOB_IDS + 500) {
            let mut e = event("expired", None, None);
            e.job_id = Some(format!("{i:032x}"));
            s.apply_event(&e);
        }
        let jobs: BTreeSet<&str> = s.events.keys().map(|(j, _, _)| j.as_str()).collect();
        assert_eq!(jobs.len(), MAX_LOG_JOB_IDS + 1, "1,000 job ids and the no-job series");
        assert_eq!(s.job_ids_cut, 500);
        assert_eq!(s.events[&(String::new(), LogKind::Expired, "log")], 500);
        // A known job id keeps counting in its own series.
        let mut e = event("expired", None, None);
        e.job_id = Some(format!("{:032x}", 3));
        s.apply_event(&e);
        assert_eq!(s.events[&(format!("{:032x}", 3), LogKind::Expired, "log")], 2);
    }

    #[test]
    fn the_ring_is_bounded() {
        let mut s = LogState::default();
        for i in 0..(RECENT_LOG_EVENTS as u64 + 10) {
            s.apply_event(&event("expired", Some(i), None));
        }
        assert_eq!(s.recent.len(), RECENT_LOG_EVENTS);
        assert_eq!(s.recent.front().unwrap().checkpoint_id, Some(10));
    }
}
