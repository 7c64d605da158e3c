//! `diagnose`'s answer first (pure): whether a job failed over (its restarts, the tolerable
//! failures exceeded), each job's verdict and [`Headline`] from the daemon's health of it, and
//! the cluster's first line.

use crate::health::Health;
use crate::health::headline::{self, Headline, HeadlineClass, Severity};
use crate::model::coordinator::UNLIMITED_TOLERABLE;
use crate::observe::{CheckpointStatus, FailureReason, FinishedCheckpoint, JobStatus, SnapshotKind};
use crate::time::Timestamp;

use super::report::{JobData, JobReport, Judged, Report, Verdict};
use crate::observe::CheckpointSettings;

/// What the failover findings read of a job: the fetched data and its settings.
#[derive(Clone, Copy)]
pub(super) struct Job<'a> {
    /// What was fetched.
    pub(super) d: &'a JobData,
    /// Its checkpoint settings, when known.
    pub(super) settings: Option<&'a CheckpointSettings>,
}

impl Job<'_> {
    fn interval(&self) -> Option<u64> {
        self.settings?.interval_ms
    }
}

/// The restarts `diagnose` can tell from one look at the REST API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Restarts {
    /// The latest restart: when the job last entered RESTARTING (`/jobs/:id` `timestamps`).
    pub(crate) latest: Option<Timestamp>,
    /// A restart inferred from the history: (the first checkpoint after it, when it began). The
    /// oldest checkpoints Flink still lists failed in a row, fewer than the tolerable number,
    /// and the next one came after a gap: the run began before the history does, and the gap is
    /// the restart it caused.
    pub(crate) inferred: Option<(u64, Timestamp)>,
}

impl Restarts {
    /// Every restart known, in time order.
    pub(crate) fn all(&self) -> Vec<Timestamp> {
        let mut all: Vec<Timestamp> =
            self.latest.into_iter().chain(self.inferred.map(|(_, at)| at)).collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Flink's periodic checkpoints (not savepoints), oldest first.
fn periodic<'a>(job: &Job<'a>) -> Vec<&'a FinishedCheckpoint> {
    let mut all: Vec<&FinishedCheckpoint> =
        job.d.finished.iter().filter(|c| c.kind != SnapshotKind::Savepoint).collect();
    all.sort_by_key(|c| c.id);
    all
}

/// Whether a checkpoint failed in a way Flink counts against `tolerable-failed-checkpoints`.
fn counted_failure(c: &FinishedCheckpoint) -> bool {
    c.status == CheckpointStatus::Failed
        && c.failure_message
            .as_deref()
            .and_then(FailureReason::from_message)
            .is_none_or(|r| r.counts_toward_tolerable(true))
}

/// The tolerable number of failures in a row, `None` when unlimited or unknown.
fn tolerable(job: &Job<'_>) -> Option<u32> {
    job.settings?.tolerable_failures.filter(|t| *t != UNLIMITED_TOLERABLE)
}

/// The restarts of a job, as far as the REST API tells.
pub(super) fn restarts(job: &Job<'_>) -> Restarts {
    let latest = job.d.details.as_ref().and_then(|d| d.timestamps.get("RESTARTING")).filter(|t| **t > 0);
    let mut restarts = Restarts { latest: latest.map(|t| Timestamp(*t)), inferred: None };
    let (Some(t), Some(interval)) = (tolerable(job), job.interval()) else { return restarts };
    let all = periodic(job);
    // Only when the history starts within a run of failures: its first checkpoint is not the job's first.
    if all.first().is_none_or(|c| c.id <= 1) {
        return restarts;
    }
    for (run, pair) in all.windows(2).enumerate() {
        let (prev, next) = (pair[0], pair[1]);
        if !counted_failure(prev) || run as u32 >= t {
            break;
        }
        let gap = next.triggered_at.since(prev.triggered_at);
        let known = restarts.latest.is_some_and(|l| l >= prev.finished_at && l <= next.triggered_at);
        if gap > interval + interval / 2 && !known {
            restarts.inferred = Some((next.id, prev.finished_at));
            break;
        }
    }
    restarts
}

/// A job that failed over and is healthy again, as the daemon's `health::recovered` found it in
/// the look, told with what the REST API adds (whether Flink's history reaches back to the
/// restart, the restarts Flink counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// The latest restart.
    pub(crate) restart: Timestamp,
    /// When it recovered: the first checkpoint after the restart completed and every subtask of
    /// its restore was RUNNING (`health::Recovered::since`).
    pub(crate) since: Timestamp,
    /// Whether the history reaches back to the restart (a checkpoint before it is listed).
    pub(crate) exact: bool,
    /// The restarts known: those the REST API times, or Flink's count of restores or its restart
    /// counter if higher.
    pub(crate) restarts: u64,
}

impl Recovered {
    /// "healthy again since 15:39:23.833 UTC, after 1 restart".
    pub(crate) fn sentence(&self) -> String {
        let s = if self.restarts == 1 { "" } else { "s" };
        let earlier = if self.exact { "" } else { " or earlier" };
        format!("healthy again since {} UTC{earlier}, after {} restart{s}", clock(self.since), self.restarts)
    }
}

/// Whether the job is healthy again after its latest restart: the daemon's one answer
/// (`health::recovered` over the look's state, `health`), never one of `diagnose`'s own; `None`
/// when it has not recovered (a checkpoint since failed, none completed, a subtask still
/// restores) or the look did not watch it.
pub(super) fn recovered(
    job: &Job<'_>,
    restarts: &Restarts,
    health: Option<crate::health::Recovered>,
) -> Option<Recovered> {
    let h = health?;
    let exact = periodic(job).first().is_some_and(|c| c.triggered_at < h.restart);
    // Flink's restore count, or its restart counter (`numRestarts`, 1.x `fullRestarts`) if higher.
    let counted = job.d.status_metrics.as_ref().and_then(|m| m.restarts).map_or(0, |(n, _)| n);
    let restored = job.d.stats.counts.as_ref().and_then(|c| c.restored).unwrap_or(0).max(counted);
    Some(Recovered {
        restart: h.restart,
        since: h.since,
        exact,
        restarts: (restarts.all().len() as u64).max(restored).max(h.restarts),
    })
}

/// The longest run of counted failures in the history (Flink's count resets on a success).
fn longest_failure_run(job: &Job<'_>) -> u32 {
    let (mut run, mut longest) = (0u32, 0u32);
    for c in periodic(job) {
        run = if counted_failure(c) { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    longest
}

/// Whether, and why, the job failed over: the tolerable failures exceeded, its restarts, a
/// FAILED, FAILING or RESTARTING state; `None` when nothing says so.
pub(super) fn failover(job: &Job<'_>, restarts: &Restarts) -> Option<String> {
    let mut parts = Vec::new();
    let run = longest_failure_run(job);
    if let Some(t) = tolerable(job)
        && run > t
    {
        parts.push(format!(
            "more checkpoints failed in a row than tolerable-failed-checkpoints {t} allows ({run} in a row in \
             the history)"
        ));
    }
    match (restarts.latest, restarts.inferred) {
        (Some(at), _) => parts.push(format!("last restart at {} UTC", clock(at))),
        (None, Some((id, _))) => {
            parts.push(format!("a restart before checkpoint {id} (inferred from the gap)"))
        }
        (None, None) => {}
    }
    if parts.is_empty()
        && matches!(job.d.state, JobStatus::Restarting | JobStatus::Failing | JobStatus::Failed)
    {
        parts.push(format!("the job is {}", job.d.state));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// `15:26:21.340`.
pub(crate) fn clock(at: Timestamp) -> String {
    let t = crate::time::log_time(at);
    t.get(11..).unwrap_or(&t).replace(',', ".")
}

/// A job's verdict, reasons and headline from the daemon's health of it after the one look
/// (`None`: the look did not watch it): the headline is the API's answer, word for word.
pub(crate) fn judged(
    job: &str,
    health: Option<&crate::outputs::answer::JobVerdict>,
    recovered: Option<crate::health::Recovered>,
) -> Judged {
    let Some(h) = health else { return Judged::unwatched() };
    let verdict = Verdict::of(h.health);
    let severity = match h.health {
        Health::Critical => Severity::Critical,
        Health::Warning => Severity::Warning,
        Health::Pending | Health::Unknown => Severity::AtRisk,
        Health::Ok => Severity::AtRisk,
    };
    let headline = h.answer.as_ref().filter(|_| verdict != Verdict::Healthy).map(|a| {
        let class = a.class.map(HeadlineClass::from);
        // The answer's culprit as a place, "operator #n on TaskManager …": its `where` sentence
        // retells the `what` and the next step, and the headline is a few lines.
        let where_ = a.culprit.as_ref().map(|w| {
            let tm = w.taskmanager.as_deref().map(|t| format!(" on TaskManager {t}")).unwrap_or_default();
            format!("{} #{}{tm}", w.operator, w.subtask)
        });
        // The page that explains the class (the answer's own next step is the text).
        let (_, doc) = headline::next_step(class, where_.as_deref());
        Headline {
            severity,
            job: job.to_string(),
            what: a.what.clone(),
            where_,
            class,
            next_step: a.next_step.clone(),
            doc_url: Some(doc.url.to_string()),
        }
    });
    Judged { verdict, reasons: h.reasons.iter().map(ToString::to_string).collect(), headline, recovered }
}

/// The cluster's first line: how many jobs, how many of each verdict.
pub(crate) fn cluster_line(url: &str, version: Option<&str>, jobs: &[JobReport]) -> String {
    let count = |v: Verdict| jobs.iter().filter(|j| j.verdict == v).count();
    let (bad, risk, ok) = (count(Verdict::Unhealthy), count(Verdict::AtRisk), count(Verdict::Healthy));
    let total = jobs.len();
    let jobs_word = if total == 1 { "job" } else { "jobs" };
    let verdict = match (bad, risk) {
        (0, 0) if total == 0 => "no running job".to_string(),
        (0, 0) => format!("{total} {jobs_word}, all healthy"),
        _ => format!("{total} {jobs_word}: {bad} unhealthy, {risk} at risk, {ok} healthy"),
    };
    format!("Cluster {url} (Flink {}): {verdict}", version.unwrap_or("?"))
}

/// The headlines of every job, worst first.
pub(crate) fn headlines(jobs: &[JobReport]) -> Vec<Headline> {
    headline::order(jobs.iter().filter_map(|j| j.headline.clone()).collect())
}

impl Report {
    /// Points every runbook link of the report (headlines, causes) at `runbook_base_url` (the
    /// configuration's `[alerting] runbook_base_url`), as the alerts' `runbook_url` are.
    pub(crate) fn rebase_runbook_links(&mut self, runbook_base_url: &str) {
        let rebase = |url: &mut String| *url = crate::health::links::rebased(url, runbook_base_url);
        for h in self.headline.iter_mut().chain(self.jobs.iter_mut().filter_map(|j| j.headline.as_mut())) {
            if let Some(url) = h.doc_url.as_mut() {
                rebase(url);
            }
        }
        for c in self.jobs.iter_mut().flat_map(|j| j.causes.iter_mut()) {
            rebase(&mut c.url);
        }
    }

    /// The report of these jobs, with its summary and headlines.
    pub(crate) fn new(
        url: String,
        flink_version: Option<String>,
        at_ms: i64,
        jobs: Vec<JobReport>,
    ) -> Report {
        Report {
            incidents: Vec::new(),
            summary: cluster_line(&url, flink_version.as_deref(), &jobs),
            headline: headlines(&jobs),
            advice: crate::health::advice_line(jobs.iter().filter(|j| !j.advice.is_empty()).count()),
            url,
            flink_version,
            at_ms,
            jobs,
        }
    }
}
