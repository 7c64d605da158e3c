//! The evaluation context of a rule for one job, cluster, TaskManager or the daemon: its series'
//! values through the series table (`series::SERIES`), and the history `increase()`/`ago()` need.

use std::collections::{BTreeMap, VecDeque};

use super::expr::Context;
use super::series::{self, Member, Read, Scope};
pub use super::subjects::{ClusterView, DaemonView, JobView, TaskManagerView};
use crate::time::Timestamp;

pub use super::series::PROGRESS_TOLERABLE_CAP;

/// Whether `name` is a series rules of the job scope can read.
pub fn is_known_series(name: &str) -> bool {
    series::is_known(Scope::Job, name)
}

/// What one evaluation is for: a job, a cluster or a TaskManager.
pub enum Subject<'a> {
    /// A job.
    Job(JobView<'a>),
    /// A cluster.
    Cluster(ClusterView<'a>),
    /// A TaskManager.
    TaskManager(TaskManagerView<'a>),
    /// The daemon itself.
    Daemon(DaemonView<'a>),
}

impl Subject<'_> {
    /// Its scope.
    pub fn scope(&self) -> Scope {
        match self {
            Subject::Job(_) => Scope::Job,
            Subject::Cluster(_) => Scope::Cluster,
            Subject::TaskManager(_) => Scope::TaskManager,
            Subject::Daemon(_) => Scope::Daemon,
        }
    }

    /// The current value of `name`, through the series table.
    pub fn value(&self, name: &str) -> Option<f64> {
        let (series, member) = series::find(self.scope(), name)?;
        match (&series.read, self) {
            (Read::Job(read), Subject::Job(v)) => read(v),
            (Read::JobSummary { histogram, per_unit, .. }, Subject::Job(v)) => {
                let summary = histogram(v.job).summary();
                match member {
                    Member::Count => Some(summary.count as f64),
                    Member::Quantile(i) => summary.quantiles[i].map(|q| q as f64 / per_unit),
                    Member::Whole | Member::Key(_) => None,
                }
            }
            (Read::JobKeyed(read), Subject::Job(v)) => match member {
                Member::Key(key) => read(v, key),
                _ => None,
            },
            (Read::Cluster(read), Subject::Cluster(v)) => read(v),
            (Read::TaskManager(read), Subject::TaskManager(v)) => read(v),
            (Read::Daemon(read), Subject::Daemon(v)) => read(v),
            _ => None,
        }
    }
}

/// Samples of the series that `increase()`/`ago()` read, kept as long as the longest window.
#[derive(Default)]
pub struct SeriesHistory {
    samples: VecDeque<(Timestamp, BTreeMap<String, f64>)>,
}

impl SeriesHistory {
    /// Records the current values of the windowed series of `subject`. Samples are spaced so
    /// that each window holds at most a few hundred, whatever the evaluation interval.
    pub fn sample(&mut self, subject: &Subject<'_>, now: Timestamp, windows: &[(String, f64)]) {
        let Some(longest) = windows.iter().map(|(_, w)| *w).reduce(f64::max) else {
            self.samples.clear();
            return;
        };
        let spacing_ms = ((longest * 1000.0) / 240.0).max(1.0) as i64;
        let due = self.samples.back().is_none_or(|(t, _)| now.millis() - t.millis() >= spacing_ms);
        if due {
            let values = windows
                .iter()
                .filter_map(|(series, _)| subject.value(series).map(|v| (series.clone(), v)))
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

/// The series of one job, cluster or TaskManager at one evaluation, with its history.
pub struct EvalContext<'a> {
    subject: Subject<'a>,
    history: &'a SeriesHistory,
    now: Timestamp,
}

impl<'a> EvalContext<'a> {
    /// A context over `subject` and its history at `now`.
    pub fn new(subject: Subject<'a>, history: &'a SeriesHistory, now: Timestamp) -> Self {
        EvalContext { subject, history, now }
    }

    /// What it is evaluated for.
    pub fn subject(&self) -> &Subject<'a> {
        &self.subject
    }
}

impl Context for EvalContext<'_> {
    fn value(&self, series: &str) -> Option<f64> {
        self.subject.value(series)
    }

    fn increase(&self, series: &str, window_s: f64) -> Option<f64> {
        let now = self.value(series)?;
        let then = self.history.at_or_before(self.now.millis() - (window_s * 1000.0) as i64, series)?;
        // A counter that went down was reset: count from zero, as Prometheus does.
        Some(if now >= then { now - then } else { now })
    }

    fn ago(&self, series: &str, window_s: f64) -> Option<f64> {
        let at = self.now.millis() - (window_s * 1000.0) as i64;
        // Only a sample that is really that old counts; a young history has no answer yet.
        self.history.samples.front().filter(|(t, _)| t.millis() <= at)?;
        self.history.at_or_before(at, series)
    }

    fn knows(&self, series: &str) -> bool {
        series::is_known(self.subject.scope(), series)
    }
}
