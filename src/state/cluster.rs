//! One watched cluster: `ClusterState`, its poll health, its jobs by id, what its log files
//! said, and the checkpoint lines and spans of jobs its first poll has not listed yet.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use super::ack_drops::{self, AckDrop, Recipient, Window, hurt_checkpoint, jobmaster_of};
use super::job::JobState;
use super::logs::LogState;
use crate::observe::{CheckpointSpan, LogEvent, LogKind};
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
    /// JobMaster endpoint → job id, from the TaskManagers' "Successful registration at job
    /// manager …" lines (at most [`ack_drops::JOBMASTERS`]); not persisted.
    pub(crate) jobmasters: BTreeMap<String, String>,
    /// Oversized payloads no checkpoint was in progress for, waiting for their job's next
    /// expiry (at most [`ack_drops::PENDING_DROPS`]); not persisted.
    pending_drops: VecDeque<(LogEvent, Timestamp)>,
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
            jobmasters: BTreeMap::new(),
            pending_drops: VecDeque::new(),
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

    /// Events as they count: an oversized payload (a line that names no checkpoint) attached to
    /// the checkpoint it hurt ([`ack_drops::hurt_checkpoint`]: the one in progress on its job now),
    /// JobMaster registrations remembered, and drops that found no checkpoint in progress put down
    /// to their job's next expiry. Borrowed unchanged when the events hold none of these.
    pub(super) fn correlate<'a>(&mut self, events: &'a [LogEvent], now: Timestamp) -> Cow<'a, [LogEvent]> {
        let relevant = |e: &LogEvent| {
            matches!(e.kind, LogKind::OversizedPayload | LogKind::JobMasterRegistered)
                || (ends_failed(&e.kind) && !self.pending_drops.is_empty())
        };
        if !events.iter().any(relevant) {
            return Cow::Borrowed(events);
        }
        let mut events = events.to_vec();
        for e in &mut events {
            match e.kind {
                LogKind::JobMasterRegistered => {
                    if let (Some(endpoint), Some(job)) = (e.detail.as_deref(), e.job_id.as_deref()) {
                        if self.jobmasters.len() >= ack_drops::JOBMASTERS
                            && !self.jobmasters.contains_key(endpoint)
                        {
                            self.jobmasters.pop_first();
                        }
                        self.jobmasters.insert(endpoint.to_string(), job.to_string());
                    }
                }
                LogKind::OversizedPayload => self.attach_drop(e, now),
                ref k if ends_failed(k) => self.failure_takes_drops(e, now),
                _ => {}
            }
        }
        Cow::Owned(events)
    }

    /// An oversized payload read at `now`: attached to its job's checkpoint in progress, else kept
    /// for the job's next expiry.
    fn attach_drop(&mut self, e: &mut LogEvent, now: Timestamp) {
        let job = match jobmaster_of(e) {
            Recipient::Other => return,
            // A JobMaster the log never said whose: any job, if only one fits.
            Recipient::JobMaster(endpoint) => self.jobmasters.get(endpoint).cloned(),
            Recipient::Unnamed => None,
        };
        let windows =
            self.jobs.iter().filter(|(id, _)| job.as_deref().is_none_or(|j| j == id.as_str())).flat_map(
                |(id, j)| {
                    j.live_in_progress(now).into_iter().map(move |(cp, at)| Window {
                        job: id.as_str(),
                        id: cp,
                        triggered_ms: Some(at.millis()),
                        ended_ms: None,
                        failed: false,
                    })
                },
            );
        let hurt = hurt_checkpoint(now.millis(), job.as_deref(), windows).map(|(j, id)| (j.to_string(), id));
        match hurt {
            Some((job_id, id)) => {
                e.job_id = Some(job_id.clone());
                e.checkpoint_id = Some(id);
                if let (Some(drop), Some(job)) = (AckDrop::of(e, id), self.jobs.get_mut(&job_id)) {
                    job.note_ack_drop(drop);
                }
            }
            None => {
                e.job_id = e.job_id.take().or(job);
                if self.pending_drops.len() >= ack_drops::PENDING_DROPS {
                    self.pending_drops.pop_front();
                }
                self.pending_drops.push_back((e.clone(), now));
            }
        }
    }

    /// A checkpoint that failed at `now` (expired, declined): a waiting drop of its job (or of no
    /// known job) read shortly before is put down to it, by the same rule.
    fn failure_takes_drops(&mut self, e: &LogEvent, now: Timestamp) {
        if let (Some(job_id), Some(id)) = (e.job_id.as_deref(), e.checkpoint_id) {
            self.failed_takes_drops(job_id, id, now);
        }
    }

    /// Checkpoint `id` of `job_id` failed at `now` (a log line or a poll said so): the waiting
    /// drops it takes ([`ack_drops::hurt_checkpoint`]).
    pub(super) fn failed_takes_drops(&mut self, job_id: &str, id: u64, now: Timestamp) {
        if self.pending_drops.is_empty() {
            return;
        }
        let expiry =
            Window { job: job_id, id, triggered_ms: None, ended_ms: Some(now.millis()), failed: true };
        let mut taken = Vec::new();
        self.pending_drops.retain(|(drop, at)| {
            match hurt_checkpoint(at.millis(), drop.job_id.as_deref(), [expiry])
                .and_then(|_| AckDrop::of(drop, id))
            {
                Some(d) => {
                    taken.push(d);
                    false
                }
                None => now.since(*at) <= ack_drops::EXPIRY_WITHIN_MS as u64,
            }
        });
        if let Some(job) = self.jobs.get_mut(job_id) {
            for d in taken {
                job.note_ack_drop(d);
            }
        }
    }
}

/// Whether a JobManager line says a checkpoint ended without completing.
fn ends_failed(kind: &LogKind) -> bool {
    matches!(kind, LogKind::Expired | LogKind::Declined | LogKind::Failed)
}
