//! The evaluation context of a rule for one job, cluster, TaskManager or the daemon: its series'
//! values through the series table (`series::SERIES`), and the history `increase()`/`ago()` need.

use std::collections::VecDeque;

use super::expr::Context;
use super::series::{self, Member, Read, Scope};
pub(crate) use super::subjects::{ClusterView, DaemonView, IncidentView, JobView, TaskManagerView};
use crate::time::Timestamp;

/// What one evaluation is for: a job, a cluster or a TaskManager.
pub(crate) enum Subject<'a> {
    /// A job.
    Job(JobView<'a>),
    /// A cluster.
    Cluster(ClusterView<'a>),
    /// A TaskManager.
    TaskManager(TaskManagerView<'a>),
    /// The daemon itself.
    Daemon(DaemonView<'a>),
    /// An incident.
    Incident(IncidentView<'a>),
}

impl Subject<'_> {
    /// Its scope.
    pub(crate) fn scope(&self) -> Scope {
        match self {
            Subject::Job(_) => Scope::Job,
            Subject::Cluster(_) => Scope::Cluster,
            Subject::TaskManager(_) => Scope::TaskManager,
            Subject::Daemon(_) => Scope::Daemon,
            Subject::Incident(_) => Scope::Incident,
        }
    }

    /// The current value of `name`, through the series table.
    pub(crate) fn value(&self, name: &str) -> Option<f64> {
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
            (Read::Incident(read), Subject::Incident(v)) => read(v),
            _ => None,
        }
    }
}

/// A ring keeps a sample at most every 1/`SAMPLES_PER_WINDOW` of the shortest window its series
/// is read over, so `increase()` and `ago()` are off by at most that (10 s for `[10m]`, 24 min
/// for `ago(…, 1d)` alone).
pub(crate) const SAMPLES_PER_WINDOW: i64 = 60;

/// What a scope's rules read through `increase()`/`ago()` of one series: its longest window
/// (how long samples are kept) and its shortest (how finely).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RingSpec {
    /// The series.
    pub(crate) series: std::sync::Arc<str>,
    /// The longest window over which a rule reads it, seconds.
    pub(crate) longest_s: f64,
    /// The shortest, seconds.
    pub(crate) shortest_s: f64,
}

impl RingSpec {
    /// The `RingSpec`s of `(series, window)` pairs: one per series.
    pub(crate) fn of_windows(pairs: &[(String, f64)]) -> Vec<RingSpec> {
        let mut specs: Vec<RingSpec> = Vec::new();
        for (series, window_s) in pairs {
            match specs.iter_mut().find(|s| *s.series == **series) {
                Some(spec) => {
                    spec.longest_s = spec.longest_s.max(*window_s);
                    spec.shortest_s = spec.shortest_s.min(*window_s);
                }
                None => specs.push(RingSpec {
                    series: series.as_str().into(),
                    longest_s: *window_s,
                    shortest_s: *window_s,
                }),
            }
        }
        specs
    }

    fn spacing_ms(&self) -> i64 {
        ((self.shortest_s * 1000.0) as i64 / SAMPLES_PER_WINDOW).max(1)
    }
}

/// The samples `increase()`/`ago()` read: per series of the scope's rules, a ring of its value
/// as a step function, a sample only where the value changed (at most one per spacing), kept
/// for the longest window. Bounded per entity however long the daemon runs: a counter that
/// stays still holds one sample, a busy series at most ~62 of 16 bytes. (Before issue 31 one
/// ring held every series as a map per sample spaced by the longest window: with `ago(…, 1d)`
/// ~140 KB per job after a day, and `[10m]` read from samples 6 minutes apart.)
#[derive(Default)]
pub(crate) struct SeriesHistory {
    rings: Vec<SeriesRing>,
}

/// The samples of one series.
struct SeriesRing {
    spec: RingSpec,
    /// (when, value), oldest first; each value differs from the one before it.
    samples: VecDeque<(Timestamp, f64)>,
    /// When the ring first sampled a value: an `ago()` answers only once the series has been
    /// watched that long, even when its value never changed since.
    since: Option<Timestamp>,
}

impl SeriesRing {
    fn sample(&mut self, value: Option<f64>, now: Timestamp) {
        if let Some(value) = value {
            self.since.get_or_insert(now);
            let due = self.samples.back().is_none_or(|&(t, last)| {
                // A value equal to the last one adds nothing to a step function.
                last.to_bits() != value.to_bits() && now.millis() - t.millis() >= self.spec.spacing_ms()
            });
            if due {
                self.samples.push_back((now, value));
            }
        }
        // The newest sample at or before the horizon still holds the value there: drop only the
        // ones before it.
        let horizon = now.millis() - (self.spec.longest_s * 1000.0) as i64 - self.spec.spacing_ms();
        while self.samples.get(1).is_some_and(|(t, _)| t.millis() <= horizon) {
            self.samples.pop_front();
        }
        if self.samples.len() < self.samples.capacity() / 4 {
            self.samples.shrink_to(self.samples.len() * 2);
        }
    }

    /// The value at `at`: the sample at or before it, or the oldest one.
    fn at_or_before(&self, at: i64) -> Option<f64> {
        let after = self.samples.partition_point(|(t, _)| t.millis() <= at);
        match after {
            0 => self.samples.front().map(|&(_, v)| v),
            i => Some(self.samples[i - 1].1),
        }
    }
}

impl SeriesHistory {
    /// Records the current values of the windowed series of `subject`; `specs` are the scope's
    /// (a changed rule set keeps the rings of the series it still reads).
    pub(crate) fn sample(&mut self, subject: &Subject<'_>, now: Timestamp, specs: &[RingSpec]) {
        let aligned =
            self.rings.len() == specs.len() && self.rings.iter().zip(specs).all(|(r, s)| r.spec == *s);
        if !aligned {
            let mut old = std::mem::take(&mut self.rings);
            self.rings = specs
                .iter()
                .map(|spec| match old.iter().position(|r| r.spec.series == spec.series) {
                    Some(i) => SeriesRing { spec: spec.clone(), ..old.swap_remove(i) },
                    None => SeriesRing { spec: spec.clone(), samples: VecDeque::new(), since: None },
                })
                .collect();
        }
        for ring in &mut self.rings {
            ring.sample(subject.value(&ring.spec.series), now);
        }
    }

    fn ring(&self, series: &str) -> Option<&SeriesRing> {
        self.rings.iter().find(|r| *r.spec.series == *series)
    }

    #[cfg(test)]
    /// Samples held, over every ring (for tests and sizing).
    pub(crate) fn samples_held(&self) -> usize {
        self.rings.iter().map(|r| r.samples.len()).sum()
    }
}

/// The series of one job, cluster or TaskManager at one evaluation, with its history.
pub(crate) struct EvalContext<'a> {
    subject: Subject<'a>,
    history: &'a SeriesHistory,
    now: Timestamp,
}

impl<'a> EvalContext<'a> {
    /// A context over `subject` and its history at `now`.
    pub(crate) fn new(subject: Subject<'a>, history: &'a SeriesHistory, now: Timestamp) -> Self {
        EvalContext { subject, history, now }
    }

    /// What it is evaluated for.
    pub(crate) fn subject(&self) -> &Subject<'a> {
        &self.subject
    }
}

impl Context for EvalContext<'_> {
    fn value(&self, series: &str) -> Option<f64> {
        self.subject.value(series)
    }

    fn increase(&self, series: &str, window_s: f64) -> Option<f64> {
        let now = self.value(series)?;
        let ring = self.history.ring(series)?;
        let then = ring.at_or_before(self.now.millis() - (window_s * 1000.0) as i64)?;
        // A counter that went down was reset: count from zero, as Prometheus does.
        Some(if now >= then { now - then } else { now })
    }

    fn ago(&self, series: &str, window_s: f64) -> Option<f64> {
        let at = self.now.millis() - (window_s * 1000.0) as i64;
        let ring = self.history.ring(series)?;
        // Only a series watched that long counts; a young history has no answer yet.
        ring.since.filter(|t| t.millis() <= at)?;
        ring.at_or_before(at)
    }

    fn knows(&self, series: &str) -> bool {
        series::is_known(self.subject.scope(), series)
    }
}
