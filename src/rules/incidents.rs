//! Incidents: many jobs, one cause. Jobs whose checkpoints started failing, expiring or slowing
//! (or that restart, or whose JobManager does not answer) within [`WINDOW_MS`] of each other and
//! share a cause that the healthy jobs do not share, grouped into one [`Incident`]. Pure: time is
//! an argument; computed once per rule round (`Evaluator::evaluate_with`) and read by every
//! surface from `AlertsView::incidents`.
//!
//! **The rule.** A cause is a fact of a job: a TaskManager or host that runs one of its subtasks
//! (as its last load fetch placed them), its checkpoint storage (the folder above its job-id
//! folder), its cluster, the exception class of its latest failed checkpoint, a source operator
//! it reads from. A cause is named when (1) at least [`MIN_JOBS`] troubled jobs have it and their
//! trouble started within [`WINDOW_MS`] of each other (a chain: sorted by start, no gap wider),
//! (2) **no healthy job has it**, and (3) **some healthy job without it exists** among the jobs
//! the fact is known of (in the same cluster for a TaskManager or host, anywhere otherwise): if
//! every job runs on tm-7 and every job fails, tm-7 explains nothing the cluster does not; the
//! one exception is a cluster whose JobManager does not answer, a fact by itself. A troubled job
//! whose JobManager does not answer is grouped by its cluster only (its other facts are from its
//! last answer). Of two causes with the same jobs the more specific is named (TaskManager, host,
//! storage, source, exception class, cluster, in that order); a cause whose jobs all belong to a
//! larger incident already named is left out; two causes with different jobs are two incidents.
//! An incident's id comes from its cause, so it stays the same while it lasts; it ends when
//! fewer than [`MIN_JOBS`] of its jobs are still troubled.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::observe::{CheckpointStatus, JobStatus, Outcome};
use crate::state::{ClusterState, JobState, State};
use crate::time::Timestamp;

/// Troubled jobs whose trouble started at most this far apart (in a chain) form one incident.
pub(crate) const WINDOW_MS: u64 = 10 * 60_000;
/// The fewest jobs an incident groups.
pub(crate) const MIN_JOBS: usize = 2;
/// At most this many incidents are named at once (the largest first): the alerts' labels stay
/// bounded.
pub(crate) const MAX_INCIDENTS: usize = 10;
/// An incident lists at most this many of its jobs (`jobs` counts them all).
pub(crate) const MAX_LISTED: usize = 1_000;

/// What the jobs of an incident share, most specific first (the order that breaks a tie).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CauseKind {
    /// A TaskManager runs a subtask of each (`taskmanager-id (address)`).
    Taskmanager,
    /// A host runs a subtask of each.
    Host,
    /// They checkpoint to the same storage folder.
    Storage,
    /// They read from the same source operator.
    Source,
    /// Their latest failed checkpoint names the same exception class.
    Exception,
    /// They run on the same cluster.
    Cluster,
}

impl CauseKind {
    /// Its name, as the API and the alerts' `incident_cause` label say it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CauseKind::Taskmanager => "taskmanager",
            CauseKind::Host => "host",
            CauseKind::Storage => "storage",
            CauseKind::Source => "source",
            CauseKind::Exception => "exception",
            CauseKind::Cluster => "cluster",
        }
    }

    /// Whether the fact is of one cluster (a TaskManager's id means nothing in another).
    fn cluster_local(self) -> bool {
        matches!(self, CauseKind::Taskmanager | CauseKind::Host)
    }
}

/// A shared cause: its kind and value, and its cluster when the kind is cluster-local.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub(crate) struct Cause {
    /// What kind of fact.
    pub(crate) kind: CauseKind,
    /// Its value: `tm-7 (10.0.3.12:6122)`, `s3://bucket/checkpoints`, `java.io.IOException`, ….
    pub(crate) value: String,
    /// The cluster of a TaskManager or host; `null` for a fact that spans clusters.
    pub(crate) cluster: Option<String>,
}

/// How a troubled job is troubled, worst first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Symptom {
    /// Its JobManager does not answer.
    Unreachable,
    /// The job fails over (failing, restarting).
    Restarting,
    /// Its latest checkpoints expired.
    Expire,
    /// Its latest checkpoints failed or were declined.
    Fail,
    /// A checkpoint in progress is past half its timeout.
    Slow,
}

impl Symptom {
    /// "checkpoints expire", as the sentence says it.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Symptom::Unreachable => "the JobManager does not answer",
            Symptom::Restarting => "jobs fail over",
            Symptom::Expire => "checkpoints expire",
            Symptom::Fail => "checkpoints fail",
            Symptom::Slow => "checkpoints are slow",
        }
    }
}

/// A job in an incident.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Member {
    /// Its cluster.
    pub(crate) cluster: String,
    /// Its id.
    pub(crate) job_id: String,
    /// Its name.
    pub(crate) job_name: String,
    /// How it is troubled.
    pub(crate) symptom: Symptom,
    /// Since when, epoch ms.
    pub(crate) since_at_ms: i64,
}

/// Many jobs, one cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Incident {
    /// Stable while it lasts: from the cause (`taskmanager-1f2e3d4c`).
    pub(crate) id: String,
    /// What its jobs share and the healthy ones do not.
    pub(crate) cause: Cause,
    /// How most of its jobs are troubled (the worst among the most common).
    pub(crate) symptom: Symptom,
    /// When the first of its jobs became troubled, epoch ms.
    pub(crate) since_at_ms: i64,
    /// How many jobs it groups.
    pub(crate) jobs: usize,
    /// Its jobs, by cluster and name (the API lists at most [`MAX_LISTED`]).
    pub(crate) members: Vec<Member>,
    /// Healthy jobs without the cause (in its cluster for a TaskManager or host).
    pub(crate) healthy_without: usize,
    /// The one sentence every surface leads with.
    pub(crate) text: String,
}

/// What one job tells the grouping: whether and how it is troubled, or healthy, and its facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobFacts {
    /// Its cluster.
    pub(crate) cluster: String,
    /// Its id.
    pub(crate) job_id: String,
    /// Its name.
    pub(crate) job_name: String,
    /// Troubled: how and since when; `None` for a job that is healthy or not known to be either.
    pub(crate) trouble: Option<(Symptom, Timestamp)>,
    /// Healthy: runs and completes its checkpoints, none in progress past half its timeout.
    pub(crate) healthy: bool,
    /// Its facts (values of every kind it is known by).
    pub(crate) causes: Vec<(CauseKind, String)>,
}

/// The incidents in `state` at `now`.
pub(crate) fn incidents(state: &State, now: Timestamp) -> Vec<Incident> {
    group(&facts(state, now))
}

/// Every watched job's facts (listed, not ended).
pub(crate) fn facts(state: &State, now: Timestamp) -> Vec<JobFacts> {
    let mut out = Vec::new();
    for (cluster, c) in state.clusters() {
        for (job_id, j) in c.jobs.iter().filter(|(_, j)| j.listed && !j.job_state.has_ended()) {
            out.push(job_facts(cluster, c, job_id, j, now));
        }
    }
    out
}

/// One job's facts.
fn job_facts(cluster: &str, c: &ClusterState, job_id: &str, j: &JobState, now: Timestamp) -> JobFacts {
    let mut facts = JobFacts {
        cluster: cluster.to_string(),
        job_id: job_id.to_string(),
        job_name: j.name.clone(),
        trouble: None,
        healthy: false,
        causes: vec![(CauseKind::Cluster, cluster.to_string())],
    };
    if !c.reachable && c.answered_once {
        facts.trouble = Some((Symptom::Unreachable, c.last_success.unwrap_or(now)));
        return facts;
    }
    let mut locations: BTreeSet<&str> = BTreeSet::new();
    for (operator, places) in &j.reported.subtask_locations {
        locations.extend(places.iter().flatten().map(String::as_str));
        if operator.starts_with("Source") {
            facts.causes.push((CauseKind::Source, operator.clone()));
        }
    }
    let hosts: BTreeSet<&str> = locations.iter().filter_map(|l| host_of(l)).collect();
    facts.causes.extend(locations.iter().map(|l| (CauseKind::Taskmanager, l.to_string())));
    facts.causes.extend(hosts.iter().map(|h| (CauseKind::Host, h.to_string())));
    if let Some(base) = j.storage.paths.last_key_value().and_then(|(_, k)| storage_base(&k.path)) {
        facts.causes.push((CauseKind::Storage, base));
    }
    facts.trouble = trouble(j, now);
    if let Some(class) =
        facts.trouble.and(j.last_failed.as_ref()).and_then(|r| exception_class(r.failure_message.as_deref()?))
    {
        facts.causes.push((CauseKind::Exception, class));
    }
    facts.healthy = facts.trouble.is_none()
        && j.job_state == JobStatus::Running
        && (j.completed_since_running || j.last_completed.is_some());
    facts
}

/// How a reachable job is troubled, and since when.
fn trouble(j: &JobState, now: Timestamp) -> Option<(Symptom, Timestamp)> {
    if matches!(j.job_state, JobStatus::Failing | JobStatus::Restarting) {
        return Some((Symptom::Restarting, j.failing_since.unwrap_or(now)));
    }
    if j.consecutive_failures() > 0 {
        let latest = j
            .recent
            .iter()
            .rev()
            .find(|r| r.status == CheckpointStatus::Failed)
            .map_or(Outcome::Failed, |r| Outcome::of(r.status, r.failure_message.as_deref()));
        let symptom = if latest == Outcome::Expired { Symptom::Expire } else { Symptom::Fail };
        return Some((symptom, j.failing_since.unwrap_or(now)));
    }
    let timeout = j.settings.as_ref().and_then(|s| s.timeout_ms)?;
    let slow =
        j.live_in_progress(now).into_iter().map(|(_, at)| at).filter(|at| now.since(*at) >= timeout / 2);
    // Past its timeout and not yet listed as failed (Flink's history lags): it expires.
    slow.min()
        .map(|at| (Symptom::Slow, at))
        .or_else(|| j.overdue_in_progress(now).map(|at| (Symptom::Expire, at)))
}

/// The host of a location `tm-id (host:port)` or `host:port-suffix`.
fn host_of(location: &str) -> Option<&str> {
    let address = match location.rsplit_once(" (") {
        Some((_, rest)) => rest.trim_end_matches(')'),
        None => location,
    };
    let host = address.split(':').next()?;
    (!host.is_empty() && host != location).then_some(host)
}

/// The storage folder above a checkpoint's job-id folder: `s3://b/cp/<job>/chk-5` → `s3://b/cp`.
fn storage_base(path: &str) -> Option<String> {
    let path = path.trim_end_matches('/');
    let (job_dir, _) = path.rsplit_once('/')?;
    let (base, _) = job_dir.rsplit_once('/')?;
    (!base.is_empty() && !base.trim_end_matches('/').ends_with(':')).then(|| base.to_string())
}

/// The last Java class name ending in `Exception` or `Error` a failure message names.
fn exception_class(message: &str) -> Option<String> {
    message
        .split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '$' || c == '_'))
        .rfind(|w| w.contains('.') && (w.ends_with("Exception") || w.ends_with("Error")))
        .map(str::to_string)
}

/// A candidate: the troubled jobs with a cause (indices into the facts).
struct Candidate {
    cause: Cause,
    members: Vec<usize>,
    healthy_without: usize,
}

/// The incidents among `facts` (see the module's rule), largest first.
pub(crate) fn group(facts: &[JobFacts]) -> Vec<Incident> {
    // Per cause: the troubled jobs with it, and whether a healthy job has it.
    let mut troubled: BTreeMap<Cause, Vec<usize>> = BTreeMap::new();
    let mut healthy_with: BTreeSet<Cause> = BTreeSet::new();
    // Healthy jobs the fact of a kind is known of: per kind (and cluster, when cluster-local).
    let mut healthy_known: BTreeMap<(CauseKind, Option<&str>), usize> = BTreeMap::new();
    for (i, f) in facts.iter().enumerate() {
        let unreachable = matches!(f.trouble, Some((Symptom::Unreachable, _)));
        let mut kinds: BTreeSet<CauseKind> = BTreeSet::new();
        for (kind, value) in &f.causes {
            if unreachable && *kind != CauseKind::Cluster {
                continue;
            }
            let cluster = kind.cluster_local().then(|| f.cluster.clone());
            let cause = Cause { kind: *kind, value: value.clone(), cluster };
            kinds.insert(*kind);
            if f.trouble.is_some() {
                troubled.entry(cause).or_default().push(i);
            } else if f.healthy {
                healthy_with.insert(cause);
            }
        }
        if f.healthy {
            for kind in kinds {
                let cluster = kind.cluster_local().then_some(f.cluster.as_str());
                *healthy_known.entry((kind, cluster)).or_default() += 1;
            }
            // A healthy job without a failed checkpoint has no exception class, yet it is a
            // job without one.
            *healthy_known.entry((CauseKind::Exception, None)).or_default() += 1;
        }
    }
    let mut candidates: Vec<Candidate> = Vec::new();
    for (cause, jobs) in troubled {
        if healthy_with.contains(&cause) {
            continue;
        }
        let members = within_window(facts, jobs);
        let known = healthy_known.get(&(cause.kind, cause.cluster.as_deref())).copied().unwrap_or(0);
        let unreachable =
            members.iter().all(|&i| matches!(facts[i].trouble, Some((Symptom::Unreachable, _))));
        if members.len() >= MIN_JOBS && (known > 0 || (cause.kind == CauseKind::Cluster && unreachable)) {
            candidates.push(Candidate { cause, members, healthy_without: known });
        }
    }
    // Largest first; of equal sets the more specific kind.
    candidates.sort_by(|a, b| {
        (b.members.len(), a.cause.kind, &a.cause.value).cmp(&(a.members.len(), b.cause.kind, &b.cause.value))
    });
    let mut named: Vec<Candidate> = Vec::new();
    for c in candidates {
        let covered = named.iter().any(|n| c.members.iter().all(|m| n.members.binary_search(m).is_ok()));
        if !covered && named.len() < MAX_INCIDENTS {
            named.push(c);
        }
    }
    named.into_iter().map(|c| incident(facts, c)).collect()
}

/// The largest chain of `jobs` (sorted by when their trouble started) with no gap wider than
/// [`WINDOW_MS`] (of equal chains the latest), sorted by index.
fn within_window(facts: &[JobFacts], mut jobs: Vec<usize>) -> Vec<usize> {
    let since = |i: usize| facts[i].trouble.map_or(0, |(_, at)| at.millis());
    jobs.sort_by_key(|&i| (since(i), i));
    let mut best: (usize, usize) = (0, 0);
    let mut start = 0;
    for k in 0..jobs.len() {
        if k > 0 && since(jobs[k]) - since(jobs[k - 1]) > WINDOW_MS as i64 {
            start = k;
        }
        if k + 1 - start >= best.1 - best.0 {
            best = (start, k + 1);
        }
    }
    let mut chain = jobs[best.0..best.1].to_vec();
    chain.sort_unstable();
    chain
}

/// A named candidate as an incident.
fn incident(facts: &[JobFacts], c: Candidate) -> Incident {
    let mut members: Vec<Member> = c
        .members
        .iter()
        .map(|&i| {
            let f = &facts[i];
            let (symptom, since) = f.trouble.unwrap_or((Symptom::Fail, Timestamp(0)));
            Member {
                cluster: f.cluster.clone(),
                job_id: f.job_id.clone(),
                job_name: f.job_name.clone(),
                symptom,
                since_at_ms: since.millis(),
            }
        })
        .collect();
    members.sort_by(|a, b| (&a.cluster, &a.job_name, &a.job_id).cmp(&(&b.cluster, &b.job_name, &b.job_id)));
    let mut counts: BTreeMap<Symptom, usize> = BTreeMap::new();
    for m in &members {
        *counts.entry(m.symptom).or_default() += 1;
    }
    let most = counts.values().copied().max().unwrap_or(0);
    let symptom = counts.iter().find(|(_, n)| **n == most).map_or(Symptom::Fail, |(s, _)| *s);
    let since_at_ms = members.iter().map(|m| m.since_at_ms).min().unwrap_or(0);
    let jobs = members.len();
    let mut incident = Incident {
        id: incident_id(&c.cause),
        cause: c.cause,
        symptom,
        since_at_ms,
        jobs,
        members,
        healthy_without: c.healthy_without,
        text: String::new(),
    };
    incident.text = sentence(&incident);
    incident
}

/// `taskmanager-1f2e3d4c`: the kind and an FNV-1a hash of the cluster and value.
fn incident_id(cause: &Cause) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let key = format!("{}\u{0}{}", cause.cluster.as_deref().unwrap_or(""), cause.value);
    for b in key.bytes() {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{}-{hash:08x}", cause.kind.as_str())
}

/// "312 jobs: checkpoints expire since 02:31 UTC, all with subtasks on TaskManager tm-7
/// (10.0.3.12); the 2,400 jobs without it are healthy".
pub(crate) fn sentence(i: &Incident) -> String {
    let t = crate::time::log_time(Timestamp(i.since_at_ms));
    let clock = t.get(11..16).unwrap_or(&t);
    let v = &i.cause.value;
    // The cluster is the API's `cause.cluster`, not in the sentence: `diagnose` knows the
    // cluster by its URL only, and says the same sentence as the daemon.
    let shared = match i.cause.kind {
        CauseKind::Taskmanager => format!("all with subtasks on TaskManager {v}"),
        CauseKind::Host => format!("all with subtasks on host {v}"),
        CauseKind::Storage => format!("all checkpointing to {v}"),
        CauseKind::Source => format!("all reading from {v}"),
        CauseKind::Exception => format!("all failing with {v}"),
        CauseKind::Cluster => format!("all on cluster {v}"),
    };
    let healthy = match i.healthy_without {
        0 => String::new(),
        1 => "; the 1 job without it is healthy".to_string(),
        n => format!("; the {} jobs without it are healthy", thousands(n)),
    };
    let what = if i.symptom == Symptom::Unreachable {
        format!("the JobManager of {v} does not answer since {clock} UTC")
    } else {
        format!("{} since {clock} UTC, {shared}", i.symptom.words())
    };
    format!("{} jobs: {what}{healthy}", thousands(i.jobs))
}

/// `2400` → `2,400`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (k, d) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_764_900_000_000; // 2025-12-05 02:00:00 UTC

    fn job(
        cluster: &str,
        id: &str,
        trouble: Option<(Symptom, i64)>,
        causes: &[(CauseKind, &str)],
    ) -> JobFacts {
        JobFacts {
            cluster: cluster.into(),
            job_id: id.into(),
            job_name: format!("job-{id}"),
            trouble: trouble.map(|(s, at)| (s, Timestamp(at))),
            healthy: trouble.is_none(),
            causes: causes
                .iter()
                .map(|(k, v)| (*k, v.to_string()))
                .chain([(CauseKind::Cluster, cluster.to_string())])
                .collect(),
        }
    }

    const TM: CauseKind = CauseKind::Taskmanager;
    const EXPIRE: Option<(Symptom, i64)> = Some((Symptom::Expire, T0));

    fn ids(i: &Incident) -> Vec<&str> {
        i.members.iter().map(|m| m.job_id.as_str()).collect()
    }

    #[test]
    fn the_jobs_on_a_stalled_taskmanager_are_one_incident_and_the_sentence_says_so() {
        let facts = vec![
            job("prod", "a", EXPIRE, &[(TM, "tm-7 (10.0.3.12:6122)"), (TM, "tm-1 (10.0.3.1:6122)")]),
            job("prod", "b", Some((Symptom::Expire, T0 + 60_000)), &[(TM, "tm-7 (10.0.3.12:6122)")]),
            job("prod", "c", Some((Symptom::Slow, T0 + 90_000)), &[(TM, "tm-7 (10.0.3.12:6122)")]),
            job("prod", "d", None, &[(TM, "tm-1 (10.0.3.1:6122)")]),
            job("prod", "e", None, &[(TM, "tm-2 (10.0.3.2:6122)")]),
        ];
        let incidents = group(&facts);
        assert_eq!(incidents.len(), 1, "{incidents:#?}");
        let i = &incidents[0];
        assert_eq!(i.cause.kind, CauseKind::Taskmanager);
        assert_eq!(i.cause.value, "tm-7 (10.0.3.12:6122)");
        assert_eq!(ids(i), ["a", "b", "c"]);
        assert_eq!((i.jobs, i.healthy_without, i.symptom), (3, 2, Symptom::Expire));
        assert_eq!(
            i.text,
            "3 jobs: checkpoints expire since 02:00 UTC, all with subtasks on TaskManager tm-7 \
             (10.0.3.12:6122); the 2 jobs without it are healthy"
        );
        assert!(i.id.starts_with("taskmanager-"), "{}", i.id);
    }

    #[test]
    fn a_cause_a_healthy_job_shares_is_not_named() {
        // tm-7 runs the failing jobs, and also a healthy one: not the cause. Nor is tm-1, shared
        // by a failing job and a healthy one.
        let facts = vec![
            job("prod", "a", EXPIRE, &[(TM, "tm-7"), (TM, "tm-1")]),
            job("prod", "b", EXPIRE, &[(TM, "tm-7")]),
            job("prod", "c", None, &[(TM, "tm-7")]),
            job("prod", "d", None, &[(TM, "tm-1")]),
        ];
        assert_eq!(group(&facts), []);
    }

    #[test]
    fn a_cause_every_job_shares_is_named_only_when_healthy_jobs_without_it_exist() {
        let all_failing =
            vec![job("prod", "a", EXPIRE, &[(TM, "tm-7")]), job("prod", "b", EXPIRE, &[(TM, "tm-7")])];
        assert_eq!(group(&all_failing), [], "nothing healthy to tell tm-7 apart");
        let mut with_healthy = all_failing.clone();
        with_healthy.push(job("prod", "c", None, &[(TM, "tm-8")]));
        let named = group(&with_healthy);
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].cause.value, "tm-7");
        // A healthy job of another cluster tells nothing about this cluster's TaskManagers.
        let mut elsewhere = all_failing;
        elsewhere.push(job("staging", "x", None, &[(TM, "tm-8")]));
        let named = group(&elsewhere);
        assert_eq!(named.len(), 1, "{named:#?}");
        assert_eq!(named[0].cause.kind, CauseKind::Cluster, "the cluster, not its TaskManager");
    }

    #[test]
    fn two_causes_at_once_are_two_incidents() {
        let facts = vec![
            job("prod", "a", EXPIRE, &[(TM, "tm-7"), (CauseKind::Storage, "s3://one/cp")]),
            job("prod", "b", EXPIRE, &[(TM, "tm-7"), (CauseKind::Storage, "s3://one/cp")]),
            job("prod", "c", Some((Symptom::Fail, T0)), &[(TM, "tm-1"), (CauseKind::Storage, "s3://two/cp")]),
            job("prod", "d", Some((Symptom::Fail, T0)), &[(TM, "tm-2"), (CauseKind::Storage, "s3://two/cp")]),
            job("prod", "e", None, &[(TM, "tm-1"), (TM, "tm-2"), (CauseKind::Storage, "s3://one/cp")]),
            job("prod", "f", None, &[(TM, "tm-3"), (CauseKind::Storage, "s3://three/cp")]),
        ];
        let incidents = group(&facts);
        let causes: Vec<(CauseKind, &str, Vec<&str>)> =
            incidents.iter().map(|i| (i.cause.kind, i.cause.value.as_str(), ids(i))).collect();
        assert_eq!(
            causes,
            [
                (CauseKind::Taskmanager, "tm-7", vec!["a", "b"]),
                (CauseKind::Storage, "s3://two/cp", vec!["c", "d"])
            ]
        );
        assert_ne!(incidents[0].id, incidents[1].id);
        assert_eq!(
            incidents[1].text.split(", all").nth(1),
            Some(" checkpointing to s3://two/cp; the 2 jobs without it are healthy")
        );
    }

    #[test]
    fn an_incident_ends_when_its_jobs_recover_and_keeps_its_id_while_it_lasts() {
        let mut facts = vec![
            job("prod", "a", EXPIRE, &[(TM, "tm-7")]),
            job("prod", "b", EXPIRE, &[(TM, "tm-7")]),
            job("prod", "c", EXPIRE, &[(TM, "tm-7")]),
            job("prod", "d", None, &[(TM, "tm-1")]),
        ];
        let first = group(&facts)[0].id.clone();
        facts[0].trouble = None;
        facts[0].healthy = false; // recovering: no checkpoint completed yet
        let later = group(&facts);
        assert_eq!((later.len(), later[0].id.as_str(), later[0].jobs), (1, first.as_str(), 2));
        // b recovers: it completes a checkpoint on tm-7, which is then no cause.
        facts[1].trouble = None;
        facts[1].healthy = true;
        assert_eq!(group(&facts), []);
    }

    #[test]
    fn jobs_whose_trouble_started_far_apart_are_not_one_incident() {
        let long_ago = Some((Symptom::Fail, T0 - 2 * WINDOW_MS as i64));
        let facts = vec![
            job("prod", "old", long_ago, &[(TM, "tm-7")]),
            job("prod", "a", EXPIRE, &[(TM, "tm-7")]),
            job("prod", "b", Some((Symptom::Expire, T0 + 30_000)), &[(TM, "tm-7")]),
            job("prod", "d", None, &[(TM, "tm-1")]),
        ];
        let incidents = group(&facts);
        assert_eq!(ids(&incidents[0]), ["a", "b"], "the job failing since long before is apart");
        assert_eq!(incidents[0].since_at_ms, T0);
        let just_two = vec![facts[0].clone(), facts[1].clone(), facts[3].clone()];
        assert_eq!(group(&just_two), []);
    }

    #[test]
    fn of_equal_sets_the_more_specific_cause_is_named_and_a_covered_one_left_out() {
        // tm-7 is the only TaskManager on host 10.0.3.12: the same two jobs; the TaskManager
        // is named. Both also fail with the same exception, a subset too.
        let facts = vec![
            job(
                "prod",
                "a",
                EXPIRE,
                &[
                    (TM, "tm-7"),
                    (CauseKind::Host, "10.0.3.12"),
                    (CauseKind::Exception, "java.io.IOException"),
                ],
            ),
            job(
                "prod",
                "b",
                EXPIRE,
                &[
                    (TM, "tm-7"),
                    (CauseKind::Host, "10.0.3.12"),
                    (CauseKind::Exception, "java.io.IOException"),
                ],
            ),
            job("prod", "c", None, &[(TM, "tm-1"), (CauseKind::Host, "10.0.3.1")]),
        ];
        let incidents = group(&facts);
        assert_eq!(incidents.len(), 1, "{incidents:#?}");
        assert_eq!(incidents[0].cause.kind, CauseKind::Taskmanager);
    }

    #[test]
    fn an_unreachable_jobmanager_is_its_clusters_incident() {
        let down = Some((Symptom::Unreachable, T0));
        let facts = vec![job("prod", "a", down, &[(TM, "tm-7")]), job("prod", "b", down, &[(TM, "tm-7")])];
        let incidents = group(&facts);
        assert_eq!(incidents.len(), 1);
        assert_eq!(
            (incidents[0].cause.kind, incidents[0].cause.value.as_str()),
            (CauseKind::Cluster, "prod")
        );
        assert_eq!(incidents[0].text, "2 jobs: the JobManager of prod does not answer since 02:00 UTC");
    }

    #[test]
    fn facts_are_read_from_names_paths_and_messages() {
        assert_eq!(host_of("127.0.0.1:6122-demo01 (localhost:6121)"), Some("localhost"));
        assert_eq!(host_of("10.0.3.12:6122-abc"), Some("10.0.3.12"));
        assert_eq!(host_of("tm-7"), None);
        assert_eq!(storage_base("s3://bucket/cp/0123abcd/chk-5").as_deref(), Some("s3://bucket/cp"));
        assert_eq!(storage_base("file:/tmp/cp/0123/chk-5").as_deref(), Some("file:/tmp/cp"));
        assert_eq!(storage_base("s3://bucket/chk-5"), None);
        let declined = "Task declined: org.apache.flink.util.FlinkRuntimeException: x Caused by: java.io.IOException: no space";
        assert_eq!(exception_class(declined).as_deref(), Some("java.io.IOException"));
        assert_eq!(exception_class("Checkpoint expired before completing."), None);
        assert_eq!(thousands(2400), "2,400");
        assert_eq!(thousands(312), "312");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
