//! What a rule is evaluated for, as the series table's getters see it: a job, a cluster, a
//! TaskManager with the figures the state keeps of it (`taskmanagers`), or the daemon itself
//! (`DaemonFacts`, handed in as plain data).

use std::collections::{BTreeMap, BTreeSet};

use crate::observe::{CheckpointStatus, LogKind};
use crate::state::logs::LogState;
use crate::state::{ClusterState, JobState};
use crate::time::Timestamp;

/// What a job-scope series reads: the job, its id, its cluster's log events, and the time.
pub struct JobView<'a> {
    /// The job.
    pub(crate) job: &'a JobState,
    /// Its id.
    pub(crate) job_id: &'a str,
    /// Its cluster's log events.
    pub(crate) logs: Option<&'a LogState>,
    /// Its cluster's evidence (state skew, the evidence beside checkpoints).
    pub(crate) evidence: Option<&'a crate::state::evidence::ClusterEvidence>,
    /// The evaluation's time.
    pub(crate) now: Timestamp,
}

impl JobView<'_> {
    /// The job's most skewed operator in its latest checkpoint with per-subtask sizes.
    pub(crate) fn state_skew(&self) -> Option<&crate::state::evidence::StateSkew> {
        let skew = self.evidence?.skew.get(self.job_id)?;
        skew.operators.iter().max_by(|a, b| a.ratio.total_cmp(&b.ratio))
    }

    /// Text a description may name: `evidence` (" Beside checkpoint N: <the evidence>.", of
    /// the newest checkpoint that has it; empty when none has) and `skew_operator`.
    pub(crate) fn texts(&self) -> Vec<(&'static str, String)> {
        let evidence = self.job.recent.iter().rev().find_map(|r| Some((r.id, r.evidence.as_deref()?)));
        let beside = |(id, e): (u64, &crate::state::evidence::CheckpointEvidence)| {
            let class = e
                .class
                .as_deref()
                .map(|c| format!(" (class {c}: {})", e.used.join(", ")))
                .unwrap_or_default();
            format!(" Beside checkpoint {id}: {}{class}.", e.text)
        };
        vec![
            ("evidence", evidence.map(beside).unwrap_or_default()),
            ("skew_operator", self.state_skew().map_or_else(|| "n/a".to_string(), |s| s.operator.clone())),
        ]
    }

    /// The job's log events of `kind`, from every source.
    pub(crate) fn log_events(&self, kind: &str) -> f64 {
        let Some(logs) = self.logs else { return 0.0 };
        // Keyed by job first: a range, not a scan of every job's counters (a round over 1,000
        // jobs would compare a million keys).
        let from = (self.job_id.to_string(), LogKind::from_name(kind), "");
        logs.events
            .range(from..)
            .take_while(|((job, k, _), _)| job == self.job_id && k.as_str() == kind)
            .map(|(_, n)| *n as f64)
            .sum()
    }

    /// The job's trigger deviations that a coordinator rule explains, or that none does.
    pub(crate) fn shadow_deviations(&self, explained: bool) -> f64 {
        self.job
            .shadow
            .trigger
            .deviation_counts()
            .iter()
            .filter(|(kind, _)| kind.explained() == explained)
            .map(|(_, n)| *n as f64)
            .sum()
    }
}

/// What a cluster-scope series reads.
pub struct ClusterView<'a> {
    /// The cluster.
    pub(crate) cluster: &'a ClusterState,
    /// The evaluation's time.
    pub(crate) now: Timestamp,
}

impl ClusterView<'_> {
    /// Watched jobs that have not ended and failed a checkpoint since their last completed one.
    pub(crate) fn failing_jobs(&self) -> usize {
        evaluated_jobs(self.cluster).filter(|(_, job)| job.consecutive_failures() > 0).count()
    }

    /// Watched jobs whose configuration shows one of the advisor's risk findings, with how many
    /// each shows, most first (then by name).
    pub(crate) fn config_risk_jobs(&self) -> Vec<(usize, &str)> {
        let mut risky: Vec<(usize, &str)> = evaluated_jobs(self.cluster)
            .map(|(_, job)| (crate::advice::job_risk_findings(job).len(), job.name.as_str()))
            .filter(|(n, _)| *n > 0)
            .collect();
        risky.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        risky
    }

    /// The texts a cluster gives its alerts' descriptions: `config_risk_jobs`, the riskiest
    /// jobs by name (at most [`NAMED_JOBS`], then how many more).
    pub(crate) fn texts(&self) -> Vec<(&'static str, String)> {
        let risky = self.config_risk_jobs();
        let names: Vec<&str> = risky.iter().map(|(_, name)| *name).collect();
        vec![("config_risk_jobs", crate::time::some_of(&names, NAMED_JOBS, "none"))]
    }
}

/// How many jobs a cluster alert's description names before it says "and N more".
pub(crate) const NAMED_JOBS: usize = 5;

/// What the state knows of one TaskManager, gathered from the cluster's watched jobs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TaskManagerFigures {
    /// Subtasks placed on it at their job's last load fetch.
    pub(crate) subtasks: u64,
    /// Jobs with a subtask on it.
    pub(crate) jobs: u64,
    /// Recent completed checkpoints whose slowest subtask ran on it.
    pub(crate) slowest_subtasks: u64,
    /// Recent failed checkpoints whose holdout ran on it.
    pub(crate) holdouts: u64,
    /// Jobs whose latest restore's last subtask to start ran on it.
    pub(crate) last_to_restore: u64,
    /// The share of the last minute its JVM spent in GC (evidence), when known.
    pub(crate) gc_time_ratio: Option<f64>,
}

/// The TaskManagers that run subtasks of the cluster's watched jobs (those job rules are
/// evaluated for), by id, with their figures. A subtask is placed where the job's last load
/// fetch saw it, as the API places a checkpoint's slowest subtask when no log line says more.
pub(crate) fn taskmanagers(cluster: &ClusterState) -> BTreeMap<String, TaskManagerFigures> {
    // Keyed by the state's own strings while counting: one allocation per TaskManager, not one
    // per subtask and checkpoint (this runs at every evaluation, over every job).
    let mut figures: BTreeMap<&str, TaskManagerFigures> = BTreeMap::new();
    for (_, job) in evaluated_jobs(cluster) {
        let mut on_job = BTreeSet::new();
        for tm in job.reported.subtask_locations.values().flatten().flatten() {
            figures.entry(tm.as_str()).or_default().subtasks += 1;
            on_job.insert(tm.as_str());
        }
        for tm in on_job {
            figures.entry(tm).or_default().jobs += 1;
        }
        let mut count = |operator: &str, subtask: u32, field: fn(&mut TaskManagerFigures) -> &mut u64| {
            if let Some(tm) = job.subtask_location(operator, subtask) {
                *field(figures.entry(tm).or_default()) += 1;
            }
        };
        for record in &job.recent {
            if let (CheckpointStatus::Completed, Some((operator, subtask, _))) =
                (record.status, &record.slowest_subtask)
            {
                count(operator, *subtask, |f| &mut f.slowest_subtasks);
            }
            if let Some(holdout) = &record.holdout {
                count(&holdout.operator, holdout.subtask, |f| &mut f.holdouts);
            }
        }
        if let Some(last) = job.restores.latest().and_then(|r| r.last_subtask.as_ref()) {
            count(&last.operator, last.subtask, |f| &mut f.last_to_restore);
        }
    }
    figures
        .into_iter()
        .map(|(location, mut f)| {
            let id = crate::state::evidence::taskmanager_id(location);
            f.gc_time_ratio = cluster.evidence.gc_share(id, Timestamp(i64::MAX)).map(|g| g.ratio);
            (location.to_string(), f)
        })
        .collect()
}

/// The jobs job rules are evaluated for: listed, and not ended (a job that finished, was
/// cancelled, failed for good or was suspended no longer checkpoints).
pub(crate) fn evaluated_jobs(cluster: &ClusterState) -> impl Iterator<Item = (&String, &JobState)> {
    cluster.jobs.iter().filter(|(_, j)| j.listed && !j.job_state.has_ended()).map(|(id, j)| (id, &**j))
}

/// What a TaskManager-scope series reads.
pub struct TaskManagerView<'a> {
    /// What the state knows of it.
    pub(crate) figures: &'a TaskManagerFigures,
}

/// What the daemon knows of its own persistence, for the rules of the daemon scope. Plain data
/// the daemon gathers from its counters (the rules read no runtime); the default is a daemon
/// without a store that writes its state file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DaemonFacts {
    /// Whether the checkpoint store refuses writes now; `None` when no store is open.
    pub store_failing: Option<bool>,
    /// Records waiting in the outbox for the store; `None` when no store is open.
    pub store_waiting_records: Option<u64>,
    /// Records the full outbox dropped unwritten (a counter).
    pub(crate) store_dropped_records: u64,
    /// Failed writes of the state file (a counter).
    pub(crate) state_persist_errors: u64,
    /// Whether the last write of the state file failed.
    pub(crate) state_persist_failing: bool,
}

/// What an incident-scope series reads.
pub struct IncidentView<'a> {
    /// The incident.
    pub(crate) incident: &'a super::incidents::Incident,
}

impl IncidentView<'_> {
    /// The texts an incident gives its alerts' descriptions: `incident_text` (the sentence every
    /// surface leads with) and `incident_jobs` (its jobs by name, the first [`NAMED_JOBS`]).
    pub(crate) fn texts(&self) -> Vec<(&'static str, String)> {
        let names: Vec<&str> = self.incident.members.iter().map(|m| m.job_name.as_str()).collect();
        let more = self.incident.jobs.saturating_sub(names.len().min(NAMED_JOBS));
        let named = names.iter().take(NAMED_JOBS).copied().collect::<Vec<_>>().join(", ");
        let jobs = if more > 0 { format!("{named} and {more} more") } else { named };
        vec![("incident_text", self.incident.text.clone()), ("incident_jobs", jobs)]
    }
}

/// What a daemon-scope series reads.
pub struct DaemonView<'a> {
    /// The daemon's facts.
    pub(crate) facts: &'a DaemonFacts,
}
