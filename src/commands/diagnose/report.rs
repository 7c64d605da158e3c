//! What `diagnose` fetched and what it concluded: the fetched data of a job ([`JobData`]) and
//! the report ([`Report`], [`JobReport`] and its lines), serialised as the JSON output.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::health::headline::Headline;
use crate::health::{Health, Outcome};
use crate::observe::{FinishedCheckpoint, JobLoadReport, JobStatus};
use crate::rules::Class;
use crate::sources::flink::dto;
use crate::time::Timestamp;

/// Everything fetched about one job (the input of [`analyse`]).
#[derive(Clone, Debug)]
pub(crate) struct JobData {
    /// `/jobs/overview` entry: id, name, state.
    pub(crate) job_id: String,
    /// The job name.
    pub(crate) name: String,
    /// `RUNNING`, …
    pub(crate) state: JobStatus,
    /// The Flink version of the cluster.
    pub(crate) flink_version: Option<String>,
    /// `/jobs/:id`.
    pub(crate) details: Option<dto::JobDetails>,
    /// `/jobs/:id/checkpoints/config`.
    pub(crate) config: Option<dto::CheckpointConfig>,
    /// `/jobs/:id/checkpoints`.
    pub(crate) stats: dto::CheckpointingStatistics,
    /// The newest finished checkpoints, newest first, with per-subtask details when Flink still
    /// had them.
    pub(crate) finished: Vec<FinishedCheckpoint>,
    /// Per in-progress checkpoint id: per vertex id, the subtask indexes not acknowledged yet.
    pub(crate) pending: BTreeMap<u64, Vec<(String, Vec<u32>)>>,
    /// Per vertex id, per subtask index: where it runs (current attempt).
    pub(crate) locations: BTreeMap<(String, u32), Location>,
    /// The vertices' load (busy, backpressure) as the poller reads it.
    pub(crate) load: Option<JobLoadReport>,
    /// When the data was fetched (the JobManager's clock from `/jobs/:id` when it has one).
    pub(crate) fetched_at: Timestamp,
    /// The stack of the first pending subtask of a checkpoint in progress ([`super::blocked`]).
    pub(crate) blocked_thread: Option<crate::observe::ThreadSample>,
    /// Flink's job status metrics under the version's names (`numRestarts` or `fullRestarts`, …).
    pub(crate) status_metrics: Option<crate::sources::flink::metrics::JobStatusMetrics>,
}

/// Where a subtask runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub(crate) struct Location {
    /// `taskmanager-id`.
    pub(crate) taskmanager_id: Option<String>,
    /// `endpoint` (host:port, 1.17+) or `host`.
    pub(crate) host: Option<String>,
}

impl Location {
    pub(super) fn text(&self) -> String {
        match (&self.taskmanager_id, &self.host) {
            (Some(id), Some(host)) => format!("TaskManager {id} ({host})"),
            (Some(id), None) => format!("TaskManager {id}"),
            (None, Some(host)) => format!("TaskManager on {host}"),
            (None, None) => "TaskManager unknown".into(),
        }
    }
}

/// How a job is doing, in `diagnose`'s words (and its exit code): the daemon's [`Health`] of
/// the job after one look ([`Verdict::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Verdict {
    /// Nothing of the job is pending or firing, its checkpoints complete (exit 0).
    Healthy,
    /// An alert of the job is pending (its condition holds, not yet for its `for`: one look
    /// never waits that long), or too little is known yet (exit 3).
    AtRisk,
    /// An alert fires, the latest checkpoints failed, the schedule stalls or the job is not
    /// running (exit 1).
    Unhealthy,
}

impl Verdict {
    /// The one mapping of the daemon's health onto the verdict. `unknown` is at risk: a job with
    /// no checkpoint seen yet has not shown it is healthy, nor that it fails (a cluster that does
    /// not answer never gets here: `diagnose` exits 2 when it cannot fetch).
    pub(crate) fn of(health: Health) -> Verdict {
        match health {
            Health::Critical | Health::Warning => Verdict::Unhealthy,
            Health::Pending | Health::Unknown => Verdict::AtRisk,
            Health::Ok => Verdict::Healthy,
        }
    }
}

/// A job's verdict, why, and its headline, from the one look ([`crate::commands::look`]).
#[derive(Clone, Debug)]
pub(crate) struct Judged {
    /// The verdict.
    pub(crate) verdict: Verdict,
    /// The health's reasons, the API's `health_reasons`.
    pub(crate) reasons: Vec<String>,
    /// The answer as a headline; `None` when healthy.
    pub(crate) headline: Option<Headline>,
    /// Whether the job is healthy again after a failover: `health::recovered` over the look's
    /// state, the answer the page, the API and the alerts read.
    pub(crate) recovered: Option<crate::health::Recovered>,
}

impl Judged {
    /// A job the look did not watch (its checkpointing is off): nothing to hold against it.
    pub(crate) fn unwatched() -> Judged {
        Judged { verdict: Verdict::Healthy, reasons: Vec::new(), headline: None, recovered: None }
    }
}

/// The advisor's risk findings of a job (the daemon's `advice::job_risk_findings` over what
/// `diagnose` fetched): its checkpoint configuration against its newest finished checkpoints.
pub(crate) fn advice_of(d: &JobData) -> Vec<&'static str> {
    let Some(config) = &d.config else { return Vec::new() };
    let configuration =
        crate::sources::flink::convert::configuration(config, None, &[], d.flink_version.as_deref());
    let samples: Vec<crate::advice::Sample> =
        d.finished.iter().filter_map(crate::advice::Sample::from_finished).collect();
    crate::advice::risks(&configuration, &samples)
        .into_iter()
        .filter_map(|(id, on)| on.then_some(id))
        .collect()
}

/// The whole report: the answer first (the cluster's line, the unhealthy jobs worst first),
/// then the details of every job.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The incidents the look found, one sentence each (`rules::incidents`, as the daemon's
    /// page and API say them): many jobs, one cause. The text report opens with them.
    pub(crate) incidents: Vec<String>,
    /// The cluster in one line: how many jobs, how many unhealthy or at risk.
    pub(crate) summary: String,
    /// Every job that is not healthy, worst first (each as `JobReport::headline`).
    pub(crate) headline: Vec<Headline>,
    /// The advice lane on its own line: "3 jobs have configuration advice"; `null` for none.
    pub(crate) advice: Option<String>,
    /// The REST URL.
    pub(crate) url: String,
    /// Flink's version.
    pub(crate) flink_version: Option<String>,
    /// When it was made.
    pub(crate) at_ms: i64,
    /// One per job.
    pub(crate) jobs: Vec<JobReport>,
}

/// The diagnosis of one job.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct JobReport {
    /// Flink's job id.
    pub(crate) job_id: String,
    /// The job name.
    pub(crate) name: String,
    /// Its state.
    pub(crate) state: JobStatus,
    /// How it is doing.
    pub(crate) verdict: Verdict,
    /// Why, one sentence each.
    pub(crate) verdict_reasons: Vec<String>,
    /// What is wrong, where, the class and the next step; `None` when healthy.
    pub(crate) headline: Option<Headline>,
    /// Whether and why the job failed over (tolerable failures exceeded, restarts, FAILED).
    pub(crate) failover: Option<String>,
    /// The checkpoint configuration in one line.
    pub(crate) config: Option<String>,
    /// The other lane: the advisor's risk findings the configuration and the checkpoints show
    /// (`tolerable_too_high`, `timeout_tight`, `no_retention`). Advice never changes `verdict`.
    pub(crate) advice: Vec<&'static str>,
    /// The TaskManager every subtask runs on, when there is only one (then the report does not
    /// repeat it on every subtask).
    pub(crate) taskmanager: Option<Location>,
    /// Flink's counts: completed, failed, in progress, restored.
    pub(crate) counts: [u64; 4],
    /// Flink's restart counter and the metric it was read from (`numRestarts`, 1.x
    /// `fullRestarts`), where the job's metrics have one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) restarts_metric: Option<(u64, &'static str)>,
    /// The newest checkpoints, newest first.
    pub(crate) recent: Vec<CheckpointLine>,
    /// Failed and expired checkpoints among them, with reasons and the subtasks that held them.
    pub(crate) failures: Vec<FailureLine>,
    /// Subtasks not acknowledged yet in checkpoints still in progress.
    pub(crate) pending: Vec<String>,
    /// Where the first of them is held: `Checkpoint 7, blocking-map #0: blocked in:
    /// class.method(File.java:42) on <tm> (thread <name>)` (left out when not looked at).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) blocked_thread: Option<String>,
    /// The longest alignments (per subtask, its longest over the recent checkpoints), only
    /// culprits: at least 100 ms and a tenth of the interval, and twice its siblings' median or
    /// over half the interval. Savepoints are left out.
    pub(crate) top_alignment: Vec<SubtaskStat>,
    /// The longest start delays, chosen the same way.
    pub(crate) top_start_delay: Vec<SubtaskStat>,
    /// Subtasks that acknowledged last in at least a third of the completed checkpoints, when
    /// those take long enough to matter (1 s, or a tenth of the interval), with how often.
    pub(crate) blocking: Vec<Blocking>,
    /// Backpressure and busy subtasks (`/vertices/:id/backpressure`).
    pub(crate) load: Vec<String>,
    /// The failure classes found, most important first, with the evidence.
    pub(crate) classes: Vec<ClassFinding>,
    /// Likely causes, each with the page that explains it.
    pub(crate) causes: Vec<Cause>,
    /// The shadow model's explanation of the spacing of the triggers.
    pub(crate) spacing: Vec<String>,
    /// The next thing to check.
    pub(crate) next: Vec<String>,
    /// What the metrics say now about the culprit of the newest failed or slow checkpoint and
    /// its TaskManager (`diagnose::evidence`), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) evidence: Option<String>,
    /// The checkpoint storage: the async phase's upload rate per subtask, then what the job's
    /// checkpoint directory holds (`health::storage::lines`); left out when nothing is known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) storage: Vec<String>,
}

/// One recent checkpoint.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CheckpointLine {
    /// Id.
    pub(crate) id: u64,
    /// `COMPLETED`, `EXPIRED`, `DECLINED`, `FAILED`, `IN_PROGRESS`; `SAVEPOINT` is a kind.
    pub(crate) status: String,
    /// Savepoint?
    pub(crate) savepoint: bool,
    /// Trigger time.
    pub(crate) triggered_at_ms: Option<i64>,
    /// Trigger to completion or failure (or to now when in progress).
    pub(crate) took_ms: Option<u64>,
    /// Checkpointed bytes.
    pub(crate) size_bytes: Option<u64>,
    /// Acknowledged / all subtasks.
    pub(crate) acknowledged: (u32, u32),
}

/// A failed checkpoint.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FailureLine {
    /// Id.
    pub(crate) id: u64,
    /// `expired`, `declined` or `failed`.
    pub(crate) outcome: Outcome,
    /// Trigger to failure.
    pub(crate) after_ms: Option<u64>,
    /// Flink's message.
    pub(crate) reason: Option<String>,
    /// The subtasks that held it up: never acknowledged, or acknowledged after it failed.
    pub(crate) held_by: Vec<String>,
    /// Subtasks that acknowledged in time / all subtasks (from the per-subtask details, or
    /// Flink's counts when it no longer has them).
    pub(crate) acknowledged: (u32, u32),
    /// What held it up or ended it, in one sentence, naming subtasks only where they explain it.
    pub(crate) summary: String,
}

/// One subtask's phase value.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct SubtaskStat {
    /// Operator chain name.
    pub(crate) operator: String,
    /// Subtask index.
    pub(crate) subtask: u32,
    /// The value, ms.
    pub(crate) value_ms: u64,
    /// In which checkpoint.
    pub(crate) checkpoint_id: u64,
    /// The median of the same phase over the other subtasks of the operator in that checkpoint.
    pub(crate) siblings_median_ms: Option<u64>,
    /// Where it runs.
    pub(crate) location: Option<Location>,
}

/// A subtask that acknowledged last.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Blocking {
    /// Operator chain name.
    pub(crate) operator: String,
    /// Subtask index.
    pub(crate) subtask: u32,
    /// In how many of the checkpoints with details.
    pub(crate) times: usize,
    /// Of how many.
    pub(crate) of: usize,
    /// Its phase that took longest, the last time.
    pub(crate) dominant_phase: &'static str,
    /// Where it runs.
    pub(crate) location: Option<Location>,
}

/// A failure class with its evidence.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ClassFinding {
    /// Blocking, timeout or failure.
    pub(crate) class: Class,
    /// Why.
    pub(crate) evidence: String,
}

/// A likely cause.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Cause {
    /// The cause.
    pub(crate) cause: String,
    /// The title of the page that explains it (Flink's documentation or the runbook).
    pub(crate) source: &'static str,
    /// Its address.
    pub(crate) url: String,
}
