//! The evaluation context of a rule for one job, cluster, TaskManager or the daemon: its series'
//! values through the series table (`series::SERIES`), and the history `increase()`/`ago()` need.

use std::collections::VecDeque;

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

/// How many samples each `(series, window)` of `increase()`/`ago()` keeps over its window: the
/// answer is off by at most 1/60 of the window (10 s for `[10m]`, 24 min for `ago(…, 1d)`).
pub const SAMPLES_PER_WINDOW: i64 = 60;

/// The samples `increase()`/`ago()` read: one ring per `(series, window)` of the scope's rules,
/// each spaced at 1/[`SAMPLES_PER_WINDOW`] of its own window and kept as long as it. Bounded per
/// entity at about 62 samples of 16 bytes per ring, however long the daemon runs. (Before issue
/// 31 one ring held every series as a map per sample, spaced by the longest window: with
/// `ago(…, 1d)` ~140 KB per job after a day, and `[10m]` read from samples 6 minutes apart.)
#[derive(Default)]
pub struct SeriesHistory {
    rings: Vec<SeriesRing>,
}

/// The samples of one series for one window.
struct SeriesRing {
    series: String,
    window_s: f64,
    samples: VecDeque<(Timestamp, f64)>,
}

impl SeriesRing {
    fn spacing_ms(&self) -> i64 {
        ((self.window_s * 1000.0) as i64 / SAMPLES_PER_WINDOW).max(1)
    }

    fn sample(&mut self, value: Option<f64>, now: Timestamp) {
        let spacing_ms = self.spacing_ms();
        if let Some(value) = value
            && self.samples.back().is_none_or(|(t, _)| now.millis() - t.millis() >= spacing_ms)
        {
            self.samples.push_back((now, value));
        }
        let horizon = now.millis() - (self.window_s * 1000.0) as i64 - spacing_ms * 2;
        while self.samples.len() > 2 && self.samples.front().is_some_and(|(t, _)| t.millis() < horizon) {
            self.samples.pop_front();
        }
    }

    /// The sample closest to `at` at or before it, or the oldest one.
    fn at_or_before(&self, at: i64) -> Option<f64> {
        let after = self.samples.partition_point(|(t, _)| t.millis() <= at);
        match after {
            0 => self.samples.front().map(|&(_, v)| v),
            i => Some(self.samples[i - 1].1),
        }
    }
}

impl SeriesHistory {
    /// Records the current values of the windowed series of `subject`; `windows` are the
    /// scope's `(series, window)` pairs (a changed rule set keeps the rings it still reads).
    pub fn sample(&mut self, subject: &Subject<'_>, now: Timestamp, windows: &[(String, f64)]) {
        let aligned = self.rings.len() == windows.len()
            && self.rings.iter().zip(windows).all(|(r, (series, w))| r.series == *series && r.window_s == *w);
        if !aligned {
            let mut old = std::mem::take(&mut self.rings);
            self.rings = windows
                .iter()
                .map(|(series, window_s)| {
                    match old.iter().position(|r| r.series == *series && r.window_s == *window_s) {
                        Some(i) => old.swap_remove(i),
                        None => SeriesRing {
                            series: series.clone(),
                            window_s: *window_s,
                            samples: VecDeque::new(),
                        },
                    }
                })
                .collect();
        }
        for ring in &mut self.rings {
            ring.sample(subject.value(&ring.series), now);
        }
    }

    fn ring(&self, series: &str, window_s: f64) -> Option<&SeriesRing> {
        self.rings.iter().find(|r| r.series == series && r.window_s == window_s)
    }

    /// Samples held, over every ring (for tests and sizing).
    pub fn samples_held(&self) -> usize {
        self.rings.iter().map(|r| r.samples.len()).sum()
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
        let ring = self.history.ring(series, window_s)?;
        let then = ring.at_or_before(self.now.millis() - (window_s * 1000.0) as i64)?;
        // A counter that went down was reset: count from zero, as Prometheus does.
        Some(if now >= then { now - then } else { now })
    }

    fn ago(&self, series: &str, window_s: f64) -> Option<f64> {
        let at = self.now.millis() - (window_s * 1000.0) as i64;
        let ring = self.history.ring(series, window_s)?;
        // Only a sample that is really that old counts; a young history has no answer yet.
        ring.samples.front().filter(|(t, _)| t.millis() <= at)?;
        ring.at_or_before(at)
    }

    fn knows(&self, series: &str) -> bool {
        series::is_known(self.subject.scope(), series)
    }
}
