//! One watched cluster: `ClusterState`, its poll health, its jobs by id, what its log files
//! said, and the checkpoint lines and spans of jobs its first poll has not listed yet.

use std::collections::{BTreeMap, VecDeque};

use super::job::JobState;
use super::logs::LogState;
use crate::observe::{CheckpointSpan, LogEvent};
use crate::stats::{WindowSpec, WindowedHistogram};
use crate::time::Timestamp;

/// One watched cluster.
pub struct ClusterState {
    /// Whether the last poll round reached the JobManager.
    pub(crate) reachable: bool,
    /// Whether any poll round has ever reached it (readiness).
    pub(crate) answered_once: bool,
    /// Flink's version, as reported by `/overview`.
    pub(crate) flink_version: Option<String>,
    /// Completed poll rounds.
    pub(crate) polls_total: u64,
    /// Poll errors by kind.
    pub(crate) poll_errors: BTreeMap<&'static str, u64>,
    /// Duration of the last poll round, ms.
    pub(crate) last_poll_duration_ms: u64,
    /// When the JobManager last answered.
    pub(crate) last_success: Option<Timestamp>,
    /// Durations of poll rounds.
    pub(crate) poll_duration: WindowedHistogram,
    /// Jobs by id, boxed: a state is ~4 KB and a map node holds up to 11, often half empty.
    pub jobs: BTreeMap<String, Box<JobState>>,
    /// What its log files said.
    pub logs: LogState,
    /// Checkpoint lines of jobs not polled yet (a job's first lines come before the poll that
    /// lists it), handed to the job when it appears; at most [`UNCLAIMED_LOG_EVENTS`].
    pub(super) unclaimed: VecDeque<(LogEvent, Timestamp)>,
    /// Checkpoint spans of jobs not polled yet, counted when the job's first poll lists it
    /// (before that poll is applied); at most [`UNCLAIMED_SPANS`], persisted.
    pub(crate) unclaimed_spans: VecDeque<CheckpointSpan>,
    /// What Flink's metrics said (evidence rounds), not persisted.
    pub(crate) evidence: super::evidence::ClusterEvidence,
    /// What its jobs' checkpoint storage held (storage rounds), not persisted.
    pub(crate) storage: super::storage::ClusterStorage,
    /// Its applications (Flink 2.3+), as the last poll round saw them; not persisted.
    pub(crate) applications: Vec<crate::observe::Application>,
}

/// How many checkpoint spans of jobs not known yet a cluster keeps for them.
pub(crate) const UNCLAIMED_SPANS: usize = 256;

/// How many checkpoint lines of jobs not known yet a cluster keeps for them.
const UNCLAIMED_LOG_EVENTS: usize = 256;

impl ClusterState {
    /// The application job `job_id` belongs to, where Flink serves applications.
    pub fn application_of(&self, job_id: &str) -> Option<&crate::observe::Application> {
        self.applications.iter().find(|a| a.job_ids.iter().any(|j| j == job_id))
    }

    /// A cluster not polled yet, whose histograms use `window`.
    pub(crate) fn new(window: WindowSpec) -> Self {
        ClusterState {
            reachable: false,
            answered_once: false,
            flink_version: None,
            polls_total: 0,
            poll_errors: BTreeMap::new(),
            last_poll_duration_ms: 0,
            last_success: None,
            poll_duration: WindowedHistogram::new(window),
            jobs: BTreeMap::new(),
            logs: LogState::default(),
            unclaimed: VecDeque::new(),
            unclaimed_spans: VecDeque::new(),
            evidence: Default::default(),
            storage: Default::default(),
            applications: Vec::new(),
        }
    }

    /// Hands a log event to the job it names, if that job is known.
    pub(super) fn observe_log_event(&mut self, event: &LogEvent, now: Timestamp) {
        let Some(job_id) = event.job_id.as_deref() else { return };
        match self.jobs.get_mut(job_id) {
            Some(job) => job.observe_log_event(event, now),
            None if event.checkpoint_id.is_some() && event.source == "log" => {
                self.unclaimed.push_back((event.clone(), now));
                if self.unclaimed.len() > UNCLAIMED_LOG_EVENTS {
                    self.unclaimed.pop_front();
                }
            }
            None => {}
        }
    }
}
