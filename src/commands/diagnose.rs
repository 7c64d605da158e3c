//! `checkpoint-sentinel diagnose`: a one-shot checkpoint health report of a live cluster,
//! without the daemon — the usual curl/jq/grep round of the REST API as one command.
//!
//! [`fetch`] is the I/O edge: it reads the job(s), `/checkpoints`, `/checkpoints/config`, the
//! details and per-subtask details of the recent checkpoints, and the vertices' locations and
//! load through [`FlinkClient`]. [`analyse`] is pure: it turns that into a [`JobReport`] —
//! statuses, failures with reasons, top alignment and start delay with the blocking subtasks and
//! their TaskManagers, the failure class (blocking, timeout, failure), likely causes with a link to
//! the Flink documentation that explains them, the shadow model's explanation of the spacing, and the next thing to
//! check. [`exit_code`] makes it a deploy gate: 0 healthy, 1 unhealthy, 3 at risk (2 when the
//! cluster cannot be diagnosed).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::commands::simulate::human_ms;
use crate::config::ClusterConfig;
use crate::model::coordinator::{CoordinatorConfig, FailureReason};
use crate::model::replay::{merge_history, replay};
use crate::observe::{
    CheckpointStatus, FinishedCheckpoint, JobKey, JobLoadReport, JobPoll, SnapshotKind, SubtaskCheckpoint,
};
use crate::rules::Class;
use crate::shadow::Shadow;
use crate::sources::flink::client::{FetchError, FlinkClient};
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A report for people.
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `diagnose`.
#[derive(Clone, Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// The JobManager's REST base URL, e.g. `http://127.0.0.1:8081`.
    #[arg(long, required_unless_present = "config", conflicts_with = "config")]
    pub url: Option<String>,
    /// Take the cluster's URL, credentials and CA from the daemon's configuration file instead
    /// (for a JobManager behind TLS or authentication).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// With `--config`: which `[[clusters]]` entry (by `name`); needed when there are several.
    #[arg(long, requires = "config")]
    pub cluster: Option<String>,
    /// Diagnose only this job id (default: every job that is not finished, canceled or failed).
    #[arg(long)]
    pub job: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// How many of the newest finished checkpoints to look at in detail.
    #[arg(long, default_value_t = 10)]
    pub checkpoints: usize,
    /// Timeout of each request.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Why a cluster cannot be diagnosed.
#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    /// The client could not be built.
    #[error(transparent)]
    Client(#[from] crate::sources::flink::client::ClientBuildError),
    /// A request that the report needs failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The asked-for job is not there.
    #[error("no job {0} on this cluster")]
    NoSuchJob(String),
    /// The configuration file could not be loaded.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// `--cluster` names no cluster of the configuration file, or it has several and none was named.
    #[error("{0}")]
    NoSuchCluster(String),
    /// `--url` is not an http(s) URL.
    #[error(
        "--url {0:?} is not the JobManager's REST address: expected an http:// or https:// URL such as http://jobmanager:8081"
    )]
    BadUrl(String),
}

/// Everything fetched about one job (the input of [`analyse`]).
#[derive(Clone, Debug)]
pub struct JobData {
    /// `/jobs/overview` entry: id, name, state.
    pub job_id: String,
    /// The job name.
    pub name: String,
    /// `RUNNING`, …
    pub state: String,
    /// The Flink version of the cluster.
    pub flink_version: Option<String>,
    /// `/jobs/:id`.
    pub details: Option<dto::JobDetails>,
    /// `/jobs/:id/checkpoints/config`.
    pub config: Option<dto::CheckpointConfig>,
    /// `/jobs/:id/checkpoints`.
    pub stats: dto::CheckpointingStatistics,
    /// The newest finished checkpoints, newest first, with per-subtask details when Flink still
    /// had them.
    pub finished: Vec<FinishedCheckpoint>,
    /// Per in-progress checkpoint id: per vertex id, the subtask indexes not acknowledged yet.
    pub pending: BTreeMap<u64, Vec<(String, Vec<u32>)>>,
    /// Per vertex id, per subtask index: where it runs (current attempt).
    pub locations: BTreeMap<(String, u32), Location>,
    /// The vertices' load (busy, backpressure) as the poller reads it.
    pub load: Option<JobLoadReport>,
    /// When the data was fetched (the JobManager's clock from `/jobs/:id` when it has one).
    pub fetched_at: Timestamp,
}

/// Where a subtask runs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Location {
    /// `taskmanager-id`.
    pub taskmanager_id: Option<String>,
    /// `endpoint` (host:port, 1.17+) or `host`.
    pub host: Option<String>,
}

impl Location {
    fn text(&self) -> String {
        match (&self.taskmanager_id, &self.host) {
            (Some(id), Some(host)) => format!("TaskManager {id} ({host})"),
            (Some(id), None) => format!("TaskManager {id}"),
            (None, Some(host)) => format!("TaskManager on {host}"),
            (None, None) => "TaskManager unknown".into(),
        }
    }
}

/// How a job is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Checkpoints complete well within their limits.
    Healthy,
    /// Checkpoints complete, but a phase uses over half the interval or timeout.
    AtRisk,
    /// Checkpoints fail or expire, the job is not running, or nothing completes.
    Unhealthy,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The REST URL.
    pub url: String,
    /// Flink's version.
    pub flink_version: Option<String>,
    /// When it was made.
    pub at_ms: i64,
    /// One per job.
    pub jobs: Vec<JobReport>,
}

/// The diagnosis of one job.
#[derive(Clone, Debug, Serialize)]
pub struct JobReport {
    /// Flink's job id.
    pub job_id: String,
    /// The job name.
    pub name: String,
    /// Its state.
    pub state: String,
    /// How it is doing.
    pub verdict: Verdict,
    /// Why, one sentence each.
    pub verdict_reasons: Vec<String>,
    /// The checkpoint configuration in one line.
    pub config: Option<String>,
    /// The TaskManager every subtask runs on, when there is only one (then the report does not
    /// repeat it on every subtask).
    pub taskmanager: Option<Location>,
    /// Flink's counts: completed, failed, in progress, restored.
    pub counts: [u64; 4],
    /// The newest checkpoints, newest first.
    pub recent: Vec<CheckpointLine>,
    /// Failed and expired checkpoints among them, with reasons and the subtasks that held them.
    pub failures: Vec<FailureLine>,
    /// Subtasks not acknowledged yet in checkpoints still in progress.
    pub pending: Vec<String>,
    /// The longest alignments (per subtask, its longest over the recent checkpoints), only
    /// culprits: at least 100 ms and a tenth of the interval, and twice its siblings' median or
    /// over half the interval. Savepoints are left out.
    pub top_alignment: Vec<SubtaskStat>,
    /// The longest start delays, chosen the same way.
    pub top_start_delay: Vec<SubtaskStat>,
    /// Subtasks that acknowledged last in at least a third of the completed checkpoints, when
    /// those take long enough to matter (1 s, or a tenth of the interval), with how often.
    pub blocking: Vec<Blocking>,
    /// Backpressure and busy subtasks (`/vertices/:id/backpressure`).
    pub load: Vec<String>,
    /// The failure classes found, most important first, with the evidence.
    pub classes: Vec<ClassFinding>,
    /// Likely causes, each with the page that explains it.
    pub causes: Vec<Cause>,
    /// The shadow model's explanation of the spacing of the triggers.
    pub spacing: Vec<String>,
    /// The next thing to check.
    pub next: Vec<String>,
}

/// One recent checkpoint.
#[derive(Clone, Debug, Serialize)]
pub struct CheckpointLine {
    /// Id.
    pub id: u64,
    /// `COMPLETED`, `EXPIRED`, `DECLINED`, `FAILED`, `IN_PROGRESS`; `SAVEPOINT` is a kind.
    pub status: String,
    /// Savepoint?
    pub savepoint: bool,
    /// Trigger time.
    pub triggered_at_ms: Option<i64>,
    /// Trigger to completion or failure (or to now when in progress).
    pub took_ms: Option<u64>,
    /// Checkpointed bytes.
    pub size_bytes: Option<u64>,
    /// Acknowledged / all subtasks.
    pub acknowledged: (u32, u32),
}

/// A failed checkpoint.
#[derive(Clone, Debug, Serialize)]
pub struct FailureLine {
    /// Id.
    pub id: u64,
    /// `expired`, `declined` or `failed`.
    pub outcome: &'static str,
    /// Trigger to failure.
    pub after_ms: Option<u64>,
    /// Flink's message.
    pub reason: Option<String>,
    /// The subtasks that held it up: never acknowledged, or acknowledged after it failed.
    pub held_by: Vec<String>,
    /// Subtasks that acknowledged in time / all subtasks (from the per-subtask details, or
    /// Flink's counts when it no longer has them).
    pub acknowledged: (u32, u32),
    /// What held it up or ended it, in one sentence, naming subtasks only where they explain it.
    pub summary: String,
}

/// One subtask's phase value.
#[derive(Clone, Debug, Serialize)]
pub struct SubtaskStat {
    /// Operator chain name.
    pub operator: String,
    /// Subtask index.
    pub subtask: u32,
    /// The value, ms.
    pub value_ms: u64,
    /// In which checkpoint.
    pub checkpoint_id: u64,
    /// The median of the same phase over the other subtasks of the operator in that checkpoint.
    pub siblings_median_ms: Option<u64>,
    /// Where it runs.
    pub location: Option<Location>,
}

/// A subtask that acknowledged last.
#[derive(Clone, Debug, Serialize)]
pub struct Blocking {
    /// Operator chain name.
    pub operator: String,
    /// Subtask index.
    pub subtask: u32,
    /// In how many of the checkpoints with details.
    pub times: usize,
    /// Of how many.
    pub of: usize,
    /// Its phase that took longest, the last time.
    pub dominant_phase: &'static str,
    /// Where it runs.
    pub location: Option<Location>,
}

/// A failure class with its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct ClassFinding {
    /// Blocking, timeout or failure.
    pub class: Class,
    /// Why.
    pub evidence: String,
}

/// A likely cause.
#[derive(Clone, Debug, Serialize)]
pub struct Cause {
    /// The cause.
    pub cause: String,
    /// The title of the page that explains it (Flink's documentation or the runbook).
    pub source: &'static str,
    /// Its address.
    pub url: &'static str,
}

/// A page a finding points the reader to: Flink's documentation or a runbook section.
#[derive(Clone, Copy, Debug)]
struct Doc {
    title: &'static str,
    url: &'static str,
}

const MONITORING: Doc = Doc {
    title: "Flink: Monitoring Checkpointing",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/checkpoint_monitoring/",
};
const LARGE_STATE: Doc = Doc {
    title: "Flink: Tuning Checkpoints and Large State",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/large_state_tuning/",
};
const UNDER_BACKPRESSURE: Doc = Doc {
    title: "Flink: Checkpointing under backpressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/checkpointing_under_backpressure/",
};
const BACK_PRESSURE: Doc = Doc {
    title: "Flink: Monitoring Back Pressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/back_pressure/",
};
const CONFIGURATION: Doc = Doc {
    title: "Flink: Configuration, checkpointing options",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/config/#checkpointing",
};
const RUNBOOK_FAILURES: Doc = Doc {
    title: "Runbook: FlinkCheckpointFailuresIncreasing",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointfailuresincreasing",
};
const RUNBOOK_TOLERANCE: Doc = Doc {
    title: "Runbook: FlinkCheckpointToleranceNearlySpent",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointtolerancenearlyspent",
};

/// Connects, fetches and analyses; returns the report.
pub async fn diagnose(args: &DiagnoseArgs) -> Result<Report, DiagnoseError> {
    let cluster = cluster_config(args)?;
    let client = FlinkClient::new(&cluster)?;
    let overview = client.overview().await?;
    let jobs = client.jobs_overview().await?;
    let selected: Vec<&dto::JobOverview> = match &args.job {
        Some(id) => {
            let job = jobs
                .jobs
                .iter()
                .find(|j| &j.jid == id)
                .ok_or_else(|| DiagnoseError::NoSuchJob(id.clone()))?;
            vec![job]
        }
        None => jobs
            .jobs
            .iter()
            .filter(|j| !matches!(j.state.as_deref(), Some("FINISHED" | "CANCELED" | "FAILED")))
            .collect(),
    };
    let mut reports = Vec::new();
    for job in selected {
        let data = fetch(&client, job, overview.flink_version.clone(), args.checkpoints).await?;
        reports.push(analyse(&data));
    }
    Ok(Report {
        url: cluster.url,
        flink_version: overview.flink_version,
        at_ms: Timestamp::now().millis(),
        jobs: reports,
    })
}

/// Fetches what [`analyse`] needs about one job.
pub async fn fetch(
    client: &FlinkClient,
    job: &dto::JobOverview,
    flink_version: Option<String>,
    checkpoints: usize,
) -> Result<JobData, DiagnoseError> {
    let id = job.jid.as_str();
    let config = client.checkpoint_config(id).await?;
    let stats = client.checkpoints(id).await?;
    let details = client.job(id).await.ok();
    // Ages of checkpoints in progress are measured on the JobManager's clock when it gives one.
    let fetched_at = details.as_ref().and_then(|d| d.now).map_or_else(Timestamp::now, Timestamp);
    let names: BTreeMap<String, String> = details
        .iter()
        .flat_map(|d| {
            d.vertices.iter().map(|v| (v.id.clone(), v.name.clone().unwrap_or_else(|| v.id.clone())))
        })
        .collect();
    let mut history: Vec<&dto::CheckpointStatistics> = stats.history.iter().collect();
    history.sort_by_key(|c| std::cmp::Reverse(c.id));
    let mut finished = Vec::new();
    let mut pending = BTreeMap::new();
    for cp in history.iter().filter(|cp| convert::status(cp).is_some()).take(checkpoints) {
        let mut per_vertex = Vec::new();
        for vid in names.keys() {
            if let Ok(Some(d)) = client.subtask_details(id, cp.id, vid).await {
                per_vertex.push((vid.clone(), d));
            }
        }
        let views: Vec<convert::VertexDetails<'_>> = per_vertex
            .iter()
            .map(|(vid, d)| convert::VertexDetails { vertex_id: vid, name: &names[vid], details: d })
            .collect();
        finished.extend(convert::finished(cp, &views));
    }
    for cp in history.iter().filter(|cp| convert::status(cp).is_none()) {
        let mut per_vertex = Vec::new();
        for vid in names.keys() {
            if let Ok(Some(d)) = client.subtask_details(id, cp.id, vid).await {
                let missing: Vec<u32> =
                    d.subtasks.iter().filter(|s| !s.is_completed()).map(|s| s.index).collect();
                if !missing.is_empty() {
                    per_vertex.push((vid.clone(), missing));
                }
            }
        }
        pending.insert(cp.id, per_vertex);
    }
    let mut locations = BTreeMap::new();
    let mut vertices = Vec::new();
    let topology = details.as_ref().and_then(convert::topology);
    for v in details.iter().flat_map(|d| &d.vertices) {
        let parallelism = v.parallelism.unwrap_or(1).clamp(1, 64);
        let vertex = client.vertex(id, &v.id).await.ok().flatten();
        for st in vertex.iter().flat_map(|d| &d.subtasks) {
            let location = Location {
                taskmanager_id: st.taskmanager_id.clone(),
                host: st.endpoint.clone().or_else(|| st.host.clone()),
            };
            if location.taskmanager_id.is_some() || location.host.is_some() {
                locations.insert((v.id.clone(), st.subtask), location);
            }
        }
        let backpressure = client.vertex_backpressure(id, &v.id).await.ok().flatten();
        let ids: Vec<String> = (0..parallelism)
            .flat_map(|i| convert::LOAD_METRICS.iter().map(move |m| format!("{i}.{m}")))
            .collect();
        let metrics = client.vertex_metrics(id, &v.id, &ids).await.ok().flatten().unwrap_or_default();
        if vertex.is_some() || backpressure.is_some() || !metrics.is_empty() {
            vertices.push(convert::vertex_load(
                &v.id,
                parallelism,
                vertex.as_ref(),
                backpressure.as_ref(),
                &metrics,
            ));
        }
    }
    let load = (!vertices.is_empty() || topology.is_some()).then(|| JobLoadReport {
        key: JobKey { cluster: "diagnose".into(), job_id: id.to_string() },
        measured_at: fetched_at,
        topology,
        vertices,
    });
    Ok(JobData {
        job_id: id.to_string(),
        name: job.name.clone().unwrap_or_default(),
        state: job.state.clone().unwrap_or_default(),
        flink_version,
        details,
        config,
        stats,
        finished,
        pending,
        locations,
        load,
        fetched_at,
    })
}

fn outcome(cp: &FinishedCheckpoint) -> &'static str {
    match cp.status {
        CheckpointStatus::Completed => "completed",
        CheckpointStatus::Failed => match cp.failure_message.as_deref().and_then(FailureReason::from_message)
        {
            Some(FailureReason::CheckpointExpired) => "expired",
            Some(FailureReason::CheckpointDeclined) => "declined",
            _ => "failed",
        },
    }
}

/// The phase of a subtask that took longest: (name, ms).
fn dominant(st: &SubtaskCheckpoint) -> (&'static str, u64) {
    [
        ("start delay", st.start_delay_ms),
        ("alignment", st.alignment_ms),
        ("sync", st.sync_ms),
        ("async", st.async_ms),
    ]
    .into_iter()
    .filter_map(|(n, v)| Some((n, v?)))
    .max_by_key(|(_, v)| *v)
    .unwrap_or(("unknown", 0))
}

fn median(mut v: Vec<u64>) -> Option<u64> {
    v.sort_unstable();
    (!v.is_empty()).then(|| v[(v.len() - 1) / 2])
}

/// The diagnosis of one job (pure).
pub fn analyse(d: &JobData) -> JobReport {
    let settings = d.config.as_ref().map(convert::settings);
    let interval = settings.as_ref().and_then(|s| s.interval_ms);
    let timeout = settings.as_ref().and_then(|s| s.timeout_ms);
    let counts = d.stats.counts.as_ref().map(convert::counts).unwrap_or_default();
    let vertex_of: BTreeMap<&str, &str> = d
        .details
        .iter()
        .flat_map(|j| j.vertices.iter().map(|v| (v.name.as_deref().unwrap_or(v.id.as_str()), v.id.as_str())))
        .collect();
    let location = |operator: &str, subtask: u32| {
        vertex_of.get(operator).and_then(|vid| d.locations.get(&(vid.to_string(), subtask))).cloned()
    };
    // One TaskManager for every subtask: said once, not on every line.
    let distinct: std::collections::BTreeSet<&Location> = d.locations.values().collect();
    let single_tm = match distinct.into_iter().collect::<Vec<_>>().as_slice() {
        [only] => Some((*only).clone()),
        _ => None,
    };
    let located = |operator: &str, subtask: u32| match (location(operator, subtask), &single_tm) {
        (Some(_), Some(_)) => format!("{operator} #{subtask}"),
        (Some(l), None) => format!("{operator} #{subtask} on {}", l.text()),
        (None, _) => format!("{operator} #{subtask} (TaskManager unknown: the REST API did not name it)"),
    };

    // 1. Recent statuses, newest first.
    let mut history: Vec<&dto::CheckpointStatistics> = d.stats.history.iter().collect();
    history.sort_by_key(|c| std::cmp::Reverse(c.id));
    let recent: Vec<CheckpointLine> = history
        .iter()
        .map(|cp| {
            // Only the newest `--checkpoints` were fetched in detail; an older finished entry of
            // the history still has its own outcome and end, not an age as if it were in progress.
            let finished =
                d.finished.iter().find(|f| f.id == cp.id).cloned().or_else(|| convert::finished(cp, &[]));
            let status = match &finished {
                Some(f) => outcome(f).to_uppercase(),
                None => cp.status.clone().unwrap_or_default().to_uppercase(),
            };
            let took_ms = match &finished {
                Some(f) => Some(f.finished_at.since(f.triggered_at)),
                None => cp.trigger_timestamp.map(|t| d.fetched_at.since(Timestamp(t))),
            };
            CheckpointLine {
                id: cp.id,
                status,
                savepoint: cp.is_savepoint == Some(true),
                triggered_at_ms: cp.trigger_timestamp,
                took_ms,
                size_bytes: cp.checkpointed_size.or(cp.state_size).and_then(|s| u64::try_from(s).ok()),
                acknowledged: (cp.num_acknowledged_subtasks.unwrap_or(0), cp.num_subtasks.unwrap_or(0)),
            }
        })
        .collect();

    // 2. Failures: what held them up or ended them, in one sentence each.
    let failures: Vec<FailureLine> = d
        .finished
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Failed)
        .map(|cp| {
            let after = cp.finished_at.since(cp.triggered_at);
            let mut held_by = Vec::new();
            let mut never = Vec::new();
            let mut late = Vec::new();
            let mut total = 0u32;
            for op in &cp.operators {
                for st in &op.subtasks {
                    total += 1;
                    if !st.acknowledged {
                        held_by.push(format!("{} never acknowledged", located(&op.name, st.index)));
                        never.push((op.name.as_str(), st.index));
                    } else if let Some(e2e) = st.end_to_end_ms.filter(|e| *e > after) {
                        let (phase, ms) = dominant(st);
                        let text = format!(
                            "{} acknowledged {} after the trigger, {} too late; its {phase} took {}",
                            located(&op.name, st.index),
                            human_ms(e2e),
                            human_ms(e2e - after),
                            human_ms(ms)
                        );
                        held_by.push(text.clone());
                        late.push(text);
                    }
                }
            }
            let outcome = outcome(cp);
            // An expiry is held up by the late subtasks too; after an error, a subtask that
            // acknowledged a moment later was not what ended it.
            let late_counts = if outcome == "expired" { late.len() as u32 } else { 0 };
            let acknowledged = if total > 0 {
                (total - never.len() as u32 - late_counts, total)
            } else {
                (cp.num_acknowledged, cp.num_subtasks)
            };
            let summary = failure_summary(outcome, acknowledged, total > 0, &never, &late, &located);
            FailureLine {
                id: cp.id,
                outcome,
                after_ms: Some(after),
                reason: cp.failure_message.clone(),
                held_by,
                acknowledged,
                summary,
            }
        })
        .collect();

    let pending: Vec<String> = d
        .pending
        .iter()
        .flat_map(|(id, vertices)| {
            let names: BTreeMap<&str, &str> = vertex_of.iter().map(|(n, v)| (*v, *n)).collect();
            vertices.iter().flat_map(move |(vid, subtasks)| {
                let name = names.get(vid.as_str()).copied().unwrap_or(vid.as_str()).to_string();
                subtasks.iter().map(move |s| (id, name.clone(), *s))
            })
        })
        .fold(Vec::<(u64, Vec<String>)>::new(), |mut acc, (id, name, s)| {
            match acc.last_mut() {
                Some((last, list)) if last == id => list.push(located(&name, s)),
                _ => acc.push((*id, vec![located(&name, s)])),
            }
            acc
        })
        .into_iter()
        .map(|(id, list)| format!("checkpoint {id} in progress: {} not acknowledged yet", some_of(&list)))
        .collect();

    // 3. Top alignment and start delay: per subtask its longest over the recent checkpoints.
    // Savepoints (triggered by hand, other rules) are not in the tables.
    let with_details: Vec<&FinishedCheckpoint> = d
        .finished
        .iter()
        .filter(|cp| !cp.operators.is_empty() && cp.kind != SnapshotKind::Savepoint)
        .collect();
    let culprit = |s: &SubtaskStat| {
        let floor = interval.map_or(100, |iv| (iv / 10).max(100));
        s.value_ms >= floor
            && (s.siblings_median_ms.is_none_or(|m| s.value_ms >= 2 * m.max(1))
                || interval.is_some_and(|iv| s.value_ms * 2 > iv))
    };
    let top = |phase: fn(&SubtaskCheckpoint) -> Option<u64>| {
        let mut best: BTreeMap<(String, u32), SubtaskStat> = BTreeMap::new();
        for cp in &with_details {
            for op in &cp.operators {
                for st in op.subtasks.iter().filter(|s| s.acknowledged) {
                    let Some(v) = phase(st) else { continue };
                    let key = (op.name.clone(), st.index);
                    if best.get(&key).is_some_and(|b| b.value_ms >= v) {
                        continue;
                    }
                    let siblings =
                        op.subtasks.iter().filter(|o| o.index != st.index).filter_map(phase).collect();
                    best.insert(
                        key,
                        SubtaskStat {
                            operator: op.name.clone(),
                            subtask: st.index,
                            value_ms: v,
                            checkpoint_id: cp.id,
                            siblings_median_ms: median(siblings),
                            location: location(&op.name, st.index),
                        },
                    );
                }
            }
        }
        let mut all: Vec<SubtaskStat> = best.into_values().filter(culprit).collect();
        all.sort_by_key(|s| std::cmp::Reverse(s.value_ms));
        all.truncate(3);
        all
    };
    let top_alignment = top(|s| s.alignment_ms);
    let top_start_delay = top(|s| s.start_delay_ms);

    // 4. Who acknowledged last.
    let mut last_ack: BTreeMap<(String, u32), (usize, &'static str)> = BTreeMap::new();
    for cp in with_details.iter().filter(|cp| cp.status == CheckpointStatus::Completed) {
        let slowest = cp
            .operators
            .iter()
            .flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
            .filter(|(_, st)| st.acknowledged)
            .max_by_key(|(_, st)| st.end_to_end_ms);
        if let Some((op, st)) = slowest {
            let e = last_ack.entry((op.name.clone(), st.index)).or_insert((0, "unknown"));
            e.0 += 1;
            e.1 = dominant(st).0;
        }
    }
    let completed_with_details =
        with_details.iter().filter(|cp| cp.status == CheckpointStatus::Completed).count();
    let mut blocking: Vec<Blocking> = last_ack
        .into_iter()
        .map(|((operator, subtask), (times, dominant_phase))| Blocking {
            location: location(&operator, subtask),
            operator,
            subtask,
            times,
            of: completed_with_details,
            dominant_phase,
        })
        .collect();
    blocking.sort_by_key(|b| std::cmp::Reverse(b.times));
    let slowest_completed = with_details
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Completed)
        .filter_map(|cp| cp.end_to_end_ms)
        .max()
        .unwrap_or(0);
    let matters = slowest_completed >= interval.map_or(1_000, |iv| (iv / 10).clamp(100, 1_000));
    blocking.retain(|b| matters && b.times * 3 >= b.of);
    blocking.truncate(3);

    // Load: backpressured vertices and the busy subtasks downstream of them.
    let mut load = Vec::new();
    let mut bottleneck: Option<String> = None;
    if let Some(report) = &d.load {
        let name_of = |vid: &str| {
            report
                .topology
                .as_ref()
                .and_then(|t| t.vertices.iter().find(|v| v.id == vid))
                .map_or(vid.to_string(), |v| v.name.clone())
        };
        for v in &report.vertices {
            let bp = v.subtasks.iter().filter_map(|s| s.backpressure_ratio).fold(0.0, f64::max);
            if bp >= 0.5 {
                load.push(format!(
                    "{} is backpressured {:.0} % of the time",
                    name_of(&v.vertex_id),
                    bp * 100.0
                ));
            }
        }
        if let Some(t) = &report.topology {
            for e in &t.edges {
                let up = report.vertices.iter().find(|v| v.vertex_id == e.from);
                let down = report.vertices.iter().find(|v| v.vertex_id == e.to);
                let (Some(up), Some(down)) = (up, down) else { continue };
                let up_bp = up.subtasks.iter().filter_map(|s| s.backpressure_ratio).fold(0.0, f64::max);
                if up_bp < 0.5 {
                    continue;
                }
                for s in &down.subtasks {
                    let busy = s.busy_ratio.unwrap_or(0.0);
                    if busy >= 0.8 && s.backpressure_ratio.unwrap_or(0.0) < 0.5 {
                        let siblings: Vec<String> = down
                            .subtasks
                            .iter()
                            .filter(|o| o.index != s.index)
                            .filter_map(|o| o.busy_ratio.map(|b| format!("#{} {:.0} %", o.index, b * 100.0)))
                            .collect();
                        let text = format!(
                            "{} #{} is busy {:.0} % of the time (siblings: {}) while {} upstream waits on it: the bottleneck",
                            name_of(&e.to),
                            s.index,
                            busy * 100.0,
                            if siblings.is_empty() { "none".to_string() } else { siblings.join(", ") },
                            name_of(&e.from)
                        );
                        if !load.contains(&text) {
                            bottleneck.get_or_insert_with(|| located(&name_of(&e.to), s.index));
                            load.push(text);
                        }
                    }
                }
            }
        }
    }

    // The shadow model over what was fetched: spacing, deviations, alignment holder.
    let mut spacing = Vec::new();
    let mut alignment_view = Vec::new();
    if let Some(settings) = &settings {
        let mut shadow = Shadow::new();
        shadow.trigger.set_flink_version(d.flink_version.as_deref());
        if let Some(report) = &d.load {
            shadow.observe_load(report);
        }
        let mut ordered = d.finished.clone();
        ordered.sort_by_key(|cp| cp.id);
        shadow.observe_poll(&JobPoll {
            key: JobKey { cluster: "diagnose".into(), job_id: d.job_id.clone() },
            job_name: d.name.clone(),
            job_state: d.state.clone(),
            polled_at: d.fetched_at,
            counts,
            settings: Some(settings.clone()),
            in_progress: convert::in_progress(&d.stats.history),
            finished: ordered,
            latest_restore: None,
        });
        let ex = shadow.explanation();
        match (ex.schedule, CoordinatorConfig::from_settings(settings)) {
            (Some(s), _) => spacing.push(s),
            (None, Some(config)) => {
                let r = replay(config, &merge_history([&d.stats]));
                if r.rows.len() >= 2 {
                    spacing.push(crate::commands::simulate::explain(
                        &r.config,
                        r.effective_interval_ms,
                        r.median_duration_ms,
                        r.binding,
                    ));
                }
            }
            (None, None) => spacing.push("periodic checkpoints are off".into()),
        }
        spacing.extend(ex.last_unexplained.or(ex.last_deviation).map(|d| d.sentence));
        alignment_view.extend(ex.alignment);
        alignment_view.extend(ex.what_if);
        spacing.extend(ex.contradictions);
    }

    // Classes: failure (an error), timeout (a slow snapshot), blocking (barriers stuck).
    let mut classes: Vec<ClassFinding> = Vec::new();
    let errors: Vec<&FailureLine> = failures.iter().filter(|f| f.outcome != "expired").collect();
    if let Some(f) = errors.first() {
        classes.push(ClassFinding {
            class: Class::Failure,
            evidence: format!(
                "{} checkpoint(s) failed with an error, e.g. {}: {}",
                errors.len(),
                f.id,
                f.reason.as_deref().unwrap_or("no message")
            ),
        });
    }
    let expired: Vec<&FinishedCheckpoint> = d.finished.iter().filter(|cp| outcome(cp) == "expired").collect();
    if !expired.is_empty() {
        // What the subtasks that held the expired checkpoints were doing.
        let mut snapshot = 0;
        let mut barrier = 0;
        let mut unknown = 0;
        let mut no_details = 0;
        for cp in &expired {
            let after = cp.finished_at.since(cp.triggered_at);
            let holders: Vec<&SubtaskCheckpoint> = cp
                .operators
                .iter()
                .flat_map(|op| &op.subtasks)
                .filter(|st| !st.acknowledged || st.end_to_end_ms.is_some_and(|e| e > after))
                .collect();
            if holders.is_empty() {
                unknown += 1;
            }
            if cp.operators.is_empty() {
                no_details += 1;
            }
            for st in holders {
                match dominant(st).0 {
                    "sync" | "async" => snapshot += 1,
                    "alignment" | "start delay" => barrier += 1,
                    _ => unknown += 1,
                }
            }
        }
        let n = expired.len();
        let t = timeout.map_or("the timeout".to_string(), human_ms);
        if snapshot >= barrier && snapshot > 0 {
            classes.push(ClassFinding {
                class: Class::Timeout,
                evidence: format!(
                    "{n} checkpoint(s) expired at {t}; the subtasks that held them were in their snapshot (sync/async) phase, not waiting for barriers"
                ),
            });
        } else if barrier > 0 {
            classes.push(ClassFinding {
                class: Class::Blocking,
                evidence: format!(
                    "{n} checkpoint(s) expired at {t}; the subtasks that held them were waiting for barriers (alignment/start delay)"
                ),
            });
        } else if unknown > 0 {
            classes.push(ClassFinding {
                class: Class::Timeout,
                evidence: format!(
                    "{n} checkpoint(s) expired at {t}; {}, so blocking cannot be told from a slow snapshot",
                    if no_details == n {
                        "Flink no longer has their per-subtask details"
                    } else {
                        "the subtasks that held them never acknowledged, so Flink reports none of their phases"
                    }
                ),
            });
        }
    }
    // Alignment is the cause when both are long (downstream start delay follows from it).
    let half = |s: &&SubtaskStat| interval.is_some_and(|iv| s.value_ms * 2 > iv);
    let slow_barrier = match (top_alignment.first().filter(half), top_start_delay.first().filter(half)) {
        (Some(a), _) => Some(format!("alignment {}", human_ms(a.value_ms))),
        (None, Some(s)) => Some(format!("start delay {}", human_ms(s.value_ms))),
        (None, None) => None,
    };
    if let (Some(what), Some(iv)) = (slow_barrier, interval) {
        if let Some(timeout_finding) = classes.iter_mut().find(|c| c.class == Class::Timeout) {
            // A task thread stuck in a long synchronous snapshot takes the next barrier late too.
            timeout_finding.evidence.push_str(&format!(
                "; the {what} (over half the {} interval) of the checkpoints after them is the same task \
                 thread still busy in that snapshot",
                human_ms(iv)
            ));
        } else if !classes.iter().any(|c| c.class == Class::Blocking) {
            classes.push(ClassFinding {
                class: Class::Blocking,
                evidence: format!(
                    "barriers are slow to get through: {what} is over half the {} interval",
                    human_ms(iv)
                ),
            });
        }
    }

    // The alignment engine's view matters when barriers are what is slow.
    if classes.iter().any(|c| c.class == Class::Blocking) {
        spacing.extend(alignment_view);
    }

    // Verdict.
    let mut verdict = Verdict::Healthy;
    let mut reasons = Vec::new();
    let mut set = |v: Verdict, reason: String, reasons: &mut Vec<String>| {
        verdict = verdict.max(v);
        reasons.push(reason);
    };
    if !matches!(d.state.as_str(), "RUNNING" | "FINISHED") {
        set(Verdict::Unhealthy, format!("the job is {}", d.state), &mut reasons);
    }
    let failed_n = d.finished.iter().filter(|cp| cp.status == CheckpointStatus::Failed).count();
    if failed_n > 0 {
        let exp = expired.len();
        let text = match (exp, failed_n - exp) {
            (e, 0) => format!("{e} of the last {} finished checkpoints expired", d.finished.len()),
            (0, f) => format!("{f} of the last {} finished checkpoints failed", d.finished.len()),
            (e, f) => {
                format!("{e} expired and {f} failed of the last {} finished checkpoints", d.finished.len())
            }
        };
        set(Verdict::Unhealthy, text, &mut reasons);
    }
    if counts.completed == 0 && interval.is_some() {
        set(Verdict::Unhealthy, "no checkpoint has completed".into(), &mut reasons);
    }
    if let (Some(t), Some(oldest)) =
        (timeout, recent.iter().filter(|r| r.status == "IN_PROGRESS").filter_map(|r| r.took_ms).max())
        && oldest > t
    {
        set(
            Verdict::Unhealthy,
            format!("a checkpoint has been in progress for {}, past the timeout", human_ms(oldest)),
            &mut reasons,
        );
    }
    let completed: Vec<&FinishedCheckpoint> = d
        .finished
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Completed && cp.kind != SnapshotKind::Savepoint)
        .collect();
    let longest = completed.iter().filter_map(|cp| cp.end_to_end_ms).max();
    if let (Some(t), Some(l)) = (timeout, longest)
        && l * 2 > t
    {
        set(
            Verdict::AtRisk,
            format!(
                "the longest recent completed checkpoint took {} of the {} timeout",
                human_ms(l),
                human_ms(t)
            ),
            &mut reasons,
        );
    }
    if let (Some(iv), Some(a)) = (interval, top_alignment.first())
        && a.value_ms * 2 > iv
    {
        set(
            Verdict::AtRisk,
            format!("alignment up to {} is over half the {} interval", human_ms(a.value_ms), human_ms(iv)),
            &mut reasons,
        );
    }
    if let (Some(iv), Some(s)) = (interval, top_start_delay.first())
        && s.value_ms * 2 > iv
    {
        set(
            Verdict::AtRisk,
            format!("start delay up to {} is over half the {} interval", human_ms(s.value_ms), human_ms(iv)),
            &mut reasons,
        );
    }

    // Likely causes and the next thing to check, by class.
    let mut causes = Vec::new();
    let mut next = Vec::new();
    let cause = |c: &str, doc: Doc| Cause { cause: c.to_string(), source: doc.title, url: doc.url };
    // The subtask that held the newest failed checkpoint up, if one did: when several never
    // acknowledged, none of them stands out and naming the first would be a guess.
    let failed_holder = d.finished.iter().find(|cp| cp.status == CheckpointStatus::Failed).and_then(|cp| {
        let after = cp.finished_at.since(cp.triggered_at);
        let holders: Vec<(String, u32)> = cp
            .operators
            .iter()
            .flat_map(|op| {
                op.subtasks
                    .iter()
                    .filter(move |st| !st.acknowledged || st.end_to_end_ms.is_some_and(|e| e > after))
                    .map(move |st| (op.name.clone(), st.index))
            })
            .collect();
        match holders.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    });
    let holder = failed_holder
        .map(|(op, st)| located(&op, st))
        .or(bottleneck.clone())
        .or_else(|| blocking.first().map(|b| located(&b.operator, b.subtask)));
    for finding in &classes {
        match finding.class {
            Class::Failure => {
                for f in &errors {
                    let m = f.reason.as_deref().unwrap_or("");
                    causes.push(failure_cause(m));
                }
                causes.dedup_by(|a, b| a.cause == b.cause);
                next.push(
                    "the TaskManager log around the failed checkpoint: the deepest `Caused by:` of its stack trace \
                     (`checkpoint-sentinel scan-logs` on the JobManager and TaskManager logs classifies it)"
                        .to_string(),
                );
            }
            Class::Timeout => {
                let phase = failures.iter().flat_map(|f| &f.held_by).find_map(|h| {
                    ["sync", "async"].into_iter().find(|p| h.contains(&format!("its {p} took")))
                });
                match phase {
                    Some("sync") => causes.push(cause(
                        "the synchronous part of the snapshot is slow: the operator's snapshotState() (user code, a \
                         blocking flush to an external system) or the state backend's synchronous part",
                        MONITORING,
                    )),
                    _ => causes.push(cause(
                        "writing the snapshot to checkpoint storage is slow: storage throughput or latency (HDFS/S3), \
                         or a state that grew",
                        LARGE_STATE,
                    )),
                }
                causes.push(cause(
                    "state too large or growing without TTL, so every snapshot takes longer",
                    LARGE_STATE,
                ));
                if settings
                    .as_ref()
                    .and_then(|s| s.state_backend.as_deref())
                    .is_some_and(|b| b.contains("RocksDB"))
                {
                    causes.push(cause(
                        "RocksDB without incremental checkpoints, or a small block cache / write buffer",
                        LARGE_STATE,
                    ));
                }
                match &holder {
                    Some(h) => next.push(format!(
                        "what {h} does while it snapshots: its TaskManager log and a thread dump (jstack) during a checkpoint, \
                         then its state size and the checkpoint storage's throughput; do not just raise the timeout \
                         (Flink: Tuning Checkpoints and Large State)"
                    )),
                    None => next.push(
                        "no single subtask stands out: the TaskManagers' logs and a thread dump (jstack) during a \
                         checkpoint, then the state size and the checkpoint storage's throughput; do not just raise \
                         the timeout (Flink: Tuning Checkpoints and Large State)"
                            .to_string(),
                    ),
                }
            }
            Class::Blocking => {
                causes.push(cause(
                    "backpressure: barriers queue behind buffered records, so alignment and start delay grow together",
                    UNDER_BACKPRESSURE,
                ));
                let skewed = top_alignment
                    .first()
                    .is_some_and(|a| a.siblings_median_ms.is_some_and(|m| a.value_ms > 4 * m.max(1)));
                if skewed || bottleneck.is_some() {
                    causes.push(cause(
                        "data skew: one subtask (a hot key) lags its siblings and every checkpoint waits for it",
                        BACK_PRESSURE,
                    ));
                }
                causes.push(cause(
                    "user code blocking the task thread (synchronous external calls, lock contention, heavy timers)",
                    UNDER_BACKPRESSURE,
                ));
                if let Some(h) = &holder {
                    next.push(format!(
                        "the records in/out and busy time of {h} against its siblings (key skew) and the backpressure of the \
                         operators upstream of it (Web UI BackPressure tab or GET /jobs/{}/vertices/<id>/backpressure); \
                         if its CPU is low while its input buffers are full, a thread dump",
                        d.job_id
                    ));
                }
                if settings.as_ref().is_some_and(|s| s.exactly_once && !s.unaligned) {
                    next.push(
                        "once skew and backpressure are addressed and alignment is still too long: unaligned checkpoints \
                         (Flink: Checkpointing under backpressure)"
                            .to_string(),
                    );
                }
            }
        }
    }
    if let Some(s) = &settings
        && let (Some(iv), Some(observed)) = (s.interval_ms, median(observed_gaps(&d.stats)))
        && observed > iv + iv / 2
    {
        causes.push(cause(
            &format!(
                "checkpoints come every {} although the interval is {}: min-pause or the concurrency limit holds the trigger",
                human_ms(observed),
                human_ms(iv)
            ),
            CONFIGURATION,
        ));
    }
    if next.is_empty() {
        next.push(if verdict == Verdict::Healthy {
            "nothing now; keep an eye on the P95 checkpoint duration against the timeout".into()
        } else {
            "the slowest phase in the recent checkpoints' details (Web UI Checkpoints → Details) and the TaskManager log of the \
             slowest subtask"
                .into()
        });
    }

    JobReport {
        job_id: d.job_id.clone(),
        name: d.name.clone(),
        state: d.state.clone(),
        verdict,
        verdict_reasons: reasons,
        taskmanager: single_tm,
        config: settings.as_ref().map(|s| {
            format!(
                "{}, interval {}, timeout {}, min pause {}, max concurrent {}, tolerable failures {}, {}{}",
                if s.exactly_once { "exactly once" } else { "at least once" },
                s.interval_ms.map_or("off".into(), human_ms),
                s.timeout_ms.map_or("?".into(), human_ms),
                human_ms(s.min_pause_ms),
                s.max_concurrent,
                s.tolerable_failures.map_or("?".into(), |n| n.to_string()),
                if s.unaligned { "unaligned" } else { "aligned" },
                s.state_backend.as_deref().map_or(String::new(), |b| format!(", {b}")),
            )
        }),
        counts: [counts.completed, counts.failed, counts.in_progress, counts.restored],
        recent,
        failures,
        pending,
        top_alignment,
        top_start_delay,
        blocking,
        load,
        classes,
        causes,
        spacing,
        next,
    }
}

/// `a`, `a and b`, `a, b and c`, or the first three and how many more.
fn some_of(list: &[String]) -> String {
    match list {
        [] => "no subtask".into(),
        [one] => one.clone(),
        [init @ .., last] if list.len() <= 3 => format!("{} and {last}", init.join(", ")),
        _ => format!("{} and {} more", list[..3].join(", "), list.len() - 3),
    }
}

/// One sentence on a failed checkpoint: how many subtasks acknowledged in time, and the
/// subtasks that explain it (the late or missing ones of an expiry; the one that did not
/// acknowledge when an error ended it).
fn failure_summary(
    outcome: &str,
    (acked, total): (u32, u32),
    details: bool,
    never: &[(&str, u32)],
    late: &[String],
    located: &dyn Fn(&str, u32) -> String,
) -> String {
    if !details {
        return format!(
            "{acked} of {total} subtasks acknowledged; Flink no longer has its per-subtask details"
        );
    }
    let never_named: Vec<String> = never.iter().map(|(op, st)| located(op, *st)).collect();
    if outcome == "expired" {
        let mut parts: Vec<String> = late.to_vec();
        match never_named.len() {
            0 => {}
            1..=3 => parts.push(format!("{} never acknowledged", some_of(&never_named))),
            n => parts.push(format!("{n} subtasks never acknowledged ({})", per_operator(never))),
        }
        if parts.len() > 3 {
            let n = parts.len();
            parts.truncate(2);
            parts.push(format!("{} more", n - 2));
        }
        let holders = if parts.is_empty() { "no subtask was late".into() } else { parts.join("; ") };
        return format!("{acked} of {total} subtasks acknowledged in time; {holders}");
    }
    let head = format!("{acked} of {total} subtasks acknowledged");
    match never_named.as_slice() {
        [] => head,
        [one] if total > 1 => format!("{head}; the failure came from the one that did not, {one}"),
        [_] => format!("{head}; the failure came from its only subtask"),
        _ if acked == 0 => format!(
            "{head}; the error came before any subtask acknowledged, so no subtask was slow \
             (`scan-logs` names the task that threw it)"
        ),
        list if list.len() <= 3 => format!("{head}; not acknowledged: {}", some_of(list)),
        _ => format!("{head}; not acknowledged: {}", per_operator(never)),
    }
}

/// `2 of stateful-map, 4 of Sink`: subtasks counted per operator, in first-seen order.
fn per_operator(subtasks: &[(&str, u32)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (op, _) in subtasks {
        match counts.iter_mut().find(|(o, _)| o == op) {
            Some((_, n)) => *n += 1,
            None => counts.push((op, 1)),
        }
    }
    counts.iter().map(|(op, n)| format!("{n} of {op}")).collect::<Vec<_>>().join(", ")
}

fn observed_gaps(stats: &dto::CheckpointingStatistics) -> Vec<u64> {
    let mut t: Vec<i64> = stats
        .history
        .iter()
        .filter(|c| c.is_savepoint != Some(true))
        .filter_map(|c| c.trigger_timestamp)
        .collect();
    t.sort_unstable();
    t.windows(2).map(|w| (w[1] - w[0]).max(0) as u64).collect()
}

/// The likely cause behind a failure message, with the page that explains it.
fn failure_cause(message: &str) -> Cause {
    let table: [(&str, &str, Doc); 10] = [
        (
            "Failed to persist checkpoint metadata",
            "the checkpoint metadata storage is not writable (ZooKeeper, disk space, permissions)",
            RUNBOOK_FAILURES,
        ),
        (
            "Could not materialize checkpoint",
            "the state backend failed writing (e.g. an HDFS DataNode down)",
            RUNBOOK_FAILURES,
        ),
        (
            "Asynchronous task checkpoint failed",
            "the asynchronous part of a subtask's snapshot threw: writing the state to checkpoint storage \
             failed (Flink's `Could not materialize checkpoint`: storage unavailable, a full disk)",
            RUNBOOK_FAILURES,
        ),
        (
            "ClassCastException",
            "a state class that does not serialise, or a serializer changed by an upgrade",
            RUNBOOK_FAILURES,
        ),
        ("OutOfMemoryError", "a subtask ran out of memory", RUNBOOK_FAILURES),
        (
            "SocketTimeoutException",
            "the checkpoint storage client timed out (network, S3 throttling)",
            RUNBOOK_FAILURES,
        ),
        (
            "No space left on device",
            "a full disk (the `Stream is closed` that follows is a symptom)",
            RUNBOOK_FAILURES,
        ),
        (
            "Stream is closed",
            "the stream to checkpoint storage was closed underneath: look for a full disk or a closed connection",
            RUNBOOK_FAILURES,
        ),
        (
            "tolerable failure threshold",
            "the tolerable-failure budget is spent: the job fails over because of checkpoints",
            RUNBOOK_TOLERANCE,
        ),
        (
            "declined",
            "a subtask declined the checkpoint: a task failure (OOM, user code exception) or a task not ready",
            RUNBOOK_FAILURES,
        ),
    ];
    table
        .iter()
        .find(|(needle, _, _)| message.to_lowercase().contains(&needle.to_lowercase()))
        .map(|(_, cause, doc)| Cause { cause: (*cause).to_string(), source: doc.title, url: doc.url })
        .unwrap_or_else(|| Cause {
            cause: format!(
                "Flink says: {}; the stack trace in the TaskManager log names the cause",
                message.trim_end_matches('.')
            ),
            source: RUNBOOK_FAILURES.title,
            url: RUNBOOK_FAILURES.url,
        })
}

/// 0 when every job is healthy, 1 when one is unhealthy, 3 when the worst is at risk.
pub fn exit_code(report: &Report) -> u8 {
    match report.jobs.iter().map(|j| j.verdict).max() {
        Some(Verdict::Unhealthy) => 1,
        Some(Verdict::AtRisk) => 3,
        _ => 0,
    }
}

fn clock(ms: i64) -> String {
    let t = crate::commands::demo::log_time(Timestamp(ms));
    t.get(11..).unwrap_or(&t).replace(',', ".")
}

/// Rows of the recent-checkpoints table in the text report (the JSON has them all).
const RECENT_ROWS: usize = 10;

/// The report as text.
pub fn to_text(report: &Report) -> String {
    let mut o = String::new();
    let mut line = |s: String| {
        o.push_str(&s);
        o.push('\n');
    };
    line(format!(
        "checkpoint-sentinel diagnose: {} (Flink {}), {} UTC",
        report.url,
        report.flink_version.as_deref().unwrap_or("?"),
        crate::commands::demo::log_time(Timestamp(report.at_ms)).replace(',', ".")
    ));
    if report.jobs.is_empty() {
        line("No running job.".into());
    }
    for j in &report.jobs {
        line(String::new());
        let verdict = match j.verdict {
            Verdict::Healthy => "HEALTHY",
            Verdict::AtRisk => "AT RISK",
            Verdict::Unhealthy => "UNHEALTHY",
        };
        line(format!("Job {} ({}) {}: {verdict}", j.name, j.job_id, j.state));
        for r in &j.verdict_reasons {
            line(format!("  - {r}"));
        }
        if let Some(c) = &j.config {
            line(format!("Config: {c}"));
        }
        if let Some(tm) = &j.taskmanager {
            line(format!("Every subtask runs on {}.", tm.text()));
        }
        let place = |l: &Option<Location>| match (&j.taskmanager, l) {
            (Some(_), Some(_)) => String::new(),
            (_, Some(l)) => format!(", on {}", l.text()),
            (_, None) => ", on a TaskManager the REST API did not name".into(),
        };
        line(format!(
            "Counts: {} completed, {} failed, {} in progress, {} restored",
            j.counts[0], j.counts[1], j.counts[2], j.counts[3]
        ));
        line(String::new());
        line("Recent checkpoints (newest first):".into());
        line(format!(
            "  {:>6}  {:<11}  {:<12}  {:>8}  {:>10}  {:>5}",
            "id", "status", "triggered", "took", "size", "acked"
        ));
        // The newest ten fit a screen; older ones of Flink's history are counted by status.
        for r in j.recent.iter().take(RECENT_ROWS) {
            line(format!(
                "  {:>6}  {:<11}  {:<12}  {:>8}  {:>10}  {:>5}{}",
                r.id,
                r.status,
                r.triggered_at_ms.map_or("?".into(), clock),
                r.took_ms.map_or("?".into(), human_ms),
                r.size_bytes.map_or("?".into(), |b| crate::rules::format_bytes(b as f64)),
                format!("{}/{}", r.acknowledged.0, r.acknowledged.1),
                if r.savepoint { "  savepoint" } else { "" }
            ));
        }
        if j.recent.len() > RECENT_ROWS {
            let mut by_status: Vec<(&str, usize)> = Vec::new();
            for r in &j.recent[RECENT_ROWS..] {
                match by_status.iter_mut().find(|(s, _)| *s == r.status) {
                    Some((_, n)) => *n += 1,
                    None => by_status.push((&r.status, 1)),
                }
            }
            let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
            line(format!("  … and {} older: {}", j.recent.len() - RECENT_ROWS, counts.join(", ")));
        }
        if !j.failures.is_empty() || !j.pending.is_empty() {
            line(String::new());
            line("Failures, expirations, checkpoints in progress:".into());
            // Failures that read the same (outcome, reason, summary) are said once.
            let mut groups: Vec<(Vec<&FailureLine>, &str, Option<&str>, &str)> = Vec::new();
            for f in &j.failures {
                let key = (f.outcome, f.reason.as_deref(), f.summary.as_str());
                match groups.iter_mut().find(|g| (g.1, g.2, g.3) == key) {
                    Some(g) => g.0.push(f),
                    None => groups.push((vec![f], key.0, key.1, key.2)),
                }
            }
            for (members, outcome, reason, summary) in groups {
                let ids: Vec<String> = members.iter().map(|f| f.id.to_string()).collect();
                let afters: Vec<u64> = members.iter().filter_map(|f| f.after_ms).collect();
                let after = match (afters.iter().min(), afters.iter().max()) {
                    (Some(lo), Some(hi)) if human_ms(*lo) == human_ms(*hi) => human_ms(*lo),
                    (Some(lo), Some(hi)) => format!("{} to {}", human_ms(*lo), human_ms(*hi)),
                    _ => "?".into(),
                };
                line(format!(
                    "  {} {} after {after}: {}",
                    ids.join(", "),
                    outcome.to_uppercase(),
                    reason.unwrap_or("no reason given")
                ));
                line(format!("      {summary}"));
            }
            for p in &j.pending {
                line(format!("  {p}"));
            }
        }
        let stat = |s: &SubtaskStat| {
            format!(
                "{} #{}: {} in checkpoint {}{}{}",
                s.operator,
                s.subtask,
                human_ms(s.value_ms),
                s.checkpoint_id,
                s.siblings_median_ms
                    .map_or(String::new(), |m| format!(" (siblings' median {})", human_ms(m))),
                place(&s.location)
            )
        };
        line(String::new());
        if j.top_alignment.is_empty() && j.top_start_delay.is_empty() {
            line("Alignment and start delay: no subtask stands out".into());
        } else {
            for (title, stats) in
                [("Top alignment:", &j.top_alignment), ("Top start delay:", &j.top_start_delay)]
            {
                if stats.is_empty() {
                    line(format!("{title} no subtask stands out"));
                } else {
                    line(title.into());
                }
                for s in stats {
                    line(format!("  {}", stat(s)));
                }
            }
        }
        if !j.blocking.is_empty() {
            line("Acknowledged last (held the completed checkpoints up):".into());
            for b in &j.blocking {
                line(format!(
                    "  {} #{}: {} of {} checkpoints, mostly in {}{}",
                    b.operator,
                    b.subtask,
                    b.times,
                    b.of,
                    b.dominant_phase,
                    place(&b.location)
                ));
            }
        }
        if !j.load.is_empty() {
            line("Load:".into());
            for l in &j.load {
                line(format!("  {l}"));
            }
        }
        line(String::new());
        if j.classes.is_empty() {
            line("Failure class: none (the classes are blocking, timeout and failure)".into());
        }
        for c in &j.classes {
            let name = match c.class {
                Class::Blocking => "blocking: barriers do not get through (backpressure, skew, alignment)",
                Class::Timeout => {
                    "timeout: the snapshot itself takes too long (state size, checkpoint storage)"
                }
                Class::Failure => "failure: a checkpoint failed with an explicit error",
            };
            line(format!("Failure class: {name}"));
            line(format!("  {}", c.evidence));
        }
        // Each cause points to the page that explains it, listed once under "Read more".
        let mut pages: Vec<(&str, &str)> = Vec::new();
        if !j.causes.is_empty() {
            line("Likely causes:".into());
            for c in &j.causes {
                let n = match pages.iter().position(|p| p.1 == c.url) {
                    Some(i) => i + 1,
                    None => {
                        pages.push((c.source, c.url));
                        pages.len()
                    }
                };
                line(format!("  - {} [{n}]", c.cause));
            }
        }
        if !j.spacing.is_empty() {
            line("Spacing (shadow model):".into());
            for s in &j.spacing {
                line(format!("  {s}"));
            }
        }
        line("Next, check:".into());
        for n in &j.next {
            line(format!("  → {n}"));
        }
        if !pages.is_empty() {
            line("Read more:".into());
            for (i, (title, url)) in pages.iter().enumerate() {
                line(format!("  [{}] {title}: {url}", i + 1));
            }
        }
    }
    o
}

/// The cluster to diagnose: `--url` alone, or an entry of the `--config` file with its
/// credentials and CA (the request timeout is `--timeout` either way).
fn cluster_config(args: &DiagnoseArgs) -> Result<ClusterConfig, DiagnoseError> {
    let Some(path) = &args.config else {
        let url = args.url.clone().unwrap_or_default();
        let valid = url::Url::parse(&url).is_ok_and(|u| {
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
        });
        if !valid {
            return Err(DiagnoseError::BadUrl(url));
        }
        return Ok(ClusterConfig {
            name: "diagnose".into(),
            url: args.url.clone().unwrap_or_default(),
            timeout: args.timeout,
            ..ClusterConfig::default()
        });
    };
    let config = crate::config::Config::load(path)?;
    let names = || config.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
    let chosen = match &args.cluster {
        Some(name) => config.clusters.iter().find(|c| &c.name == name).ok_or_else(|| {
            DiagnoseError::NoSuchCluster(format!(
                "{}: no cluster named {name:?} (clusters: {})",
                path.display(),
                names()
            ))
        })?,
        None => match config.clusters.as_slice() {
            [only] => only,
            _ => {
                return Err(DiagnoseError::NoSuchCluster(format!(
                    "{}: choose one of its clusters with --cluster (clusters: {})",
                    path.display(),
                    names()
                )));
            }
        },
    };
    Ok(ClusterConfig { timeout: args.timeout, ..chosen.clone() })
}

/// Runs the command: prints the report; returns the exit code.
pub async fn run(args: &DiagnoseArgs) -> u8 {
    match diagnose(args).await {
        Ok(report) => {
            match args.format {
                Format::Text => print!("{}", to_text(&report)),
                Format::Json => println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default()),
            }
            exit_code(&report)
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::OperatorCheckpoint;

    fn job(history: serde_json::Value, finished: Vec<FinishedCheckpoint>) -> JobData {
        JobData {
            job_id: "j".into(),
            name: "n".into(),
            state: "RUNNING".into(),
            flink_version: Some("2.3.0".into()),
            details: None,
            config: None,
            stats: serde_json::from_value(serde_json::json!({ "history": history })).unwrap(),
            finished,
            pending: BTreeMap::new(),
            locations: BTreeMap::new(),
            load: None,
            fetched_at: Timestamp(100_000),
        }
    }

    #[test]
    fn finished_checkpoints_beyond_the_detailed_ones_keep_their_outcome_and_duration() {
        // Flink keeps 20 in its history, diagnose fetches the newest 10 in detail: seen live, the
        // older ones were listed as "took" their age (36-48 s) and an expired one as FAILED.
        let history = serde_json::json!([
            { "className": "completed", "id": 5, "status": "COMPLETED", "trigger_timestamp": 90_000,
              "latest_ack_timestamp": 92_000, "end_to_end_duration": 2_000 },
            { "className": "failed", "id": 3, "status": "FAILED", "trigger_timestamp": 80_000,
              "failure_timestamp": 84_000, "failure_message": "Checkpoint expired before completing." },
            { "className": "completed", "id": 2, "status": "COMPLETED", "trigger_timestamp": 77_000,
              "latest_ack_timestamp": 77_085, "end_to_end_duration": 85 },
            { "className": "in_progress", "id": 6, "status": "IN_PROGRESS", "trigger_timestamp": 99_000 }
        ]);
        let stats: dto::CheckpointingStatistics =
            serde_json::from_value(serde_json::json!({ "history": history.clone() })).unwrap();
        let newest = convert::finished(&stats.history[0], &[]).unwrap();
        let report = analyse(&job(history, vec![newest]));
        let lines: Vec<(u64, &str, Option<u64>)> =
            report.recent.iter().map(|r| (r.id, r.status.as_str(), r.took_ms)).collect();
        assert_eq!(
            lines,
            [
                (6, "IN_PROGRESS", Some(1_000)),
                (5, "COMPLETED", Some(2_000)),
                (3, "EXPIRED", Some(4_000)),
                (2, "COMPLETED", Some(85)),
            ]
        );
    }

    fn checkpoint(
        id: u64,
        kind: SnapshotKind,
        status: CheckpointStatus,
        subtasks: Vec<SubtaskCheckpoint>,
    ) -> FinishedCheckpoint {
        FinishedCheckpoint {
            id,
            status,
            kind,
            triggered_at: Timestamp(id as i64 * 10_000),
            finished_at: Timestamp(id as i64 * 10_000 + 30),
            end_to_end_ms: Some(30),
            checkpointed_bytes: None,
            full_state_bytes: None,
            processed_bytes: None,
            persisted_bytes: None,
            num_subtasks: subtasks.len() as u32,
            num_acknowledged: subtasks.iter().filter(|s| s.acknowledged).count() as u32,
            failure_message: (status == CheckpointStatus::Failed)
                .then(|| "Asynchronous task checkpoint failed.".into()),
            operators: vec![OperatorCheckpoint { vertex_id: "v".into(), name: "map".into(), subtasks }],
        }
    }

    /// A savepoint's long alignment is neither a culprit of the checkpoints nor a table row;
    /// a failure that no subtask acknowledged is one sentence, not a line per subtask.
    #[test]
    fn savepoints_stay_out_of_the_tables_and_a_failure_is_one_sentence() {
        let slow = |index| SubtaskCheckpoint {
            index,
            acknowledged: true,
            end_to_end_ms: Some(9_000),
            alignment_ms: Some(9_000),
            ..SubtaskCheckpoint::default()
        };
        let quick = |index| SubtaskCheckpoint {
            index,
            acknowledged: true,
            end_to_end_ms: Some(30),
            alignment_ms: Some(1),
            ..SubtaskCheckpoint::default()
        };
        let never = |index| SubtaskCheckpoint { index, ..SubtaskCheckpoint::default() };
        let finished = vec![
            checkpoint(3, SnapshotKind::Checkpoint, CheckpointStatus::Failed, (0..8).map(never).collect()),
            checkpoint(2, SnapshotKind::Savepoint, CheckpointStatus::Completed, vec![slow(0), quick(1)]),
            checkpoint(1, SnapshotKind::Checkpoint, CheckpointStatus::Completed, vec![quick(0), quick(1)]),
        ];
        let report = analyse(&job(serde_json::json!([]), finished));
        assert!(report.top_alignment.is_empty(), "{:?}", report.top_alignment);
        assert!(report.blocking.is_empty());
        let failure = &report.failures[0];
        assert_eq!(failure.acknowledged, (0, 8));
        assert!(
            failure
                .summary
                .starts_with("0 of 8 subtasks acknowledged; the error came before any subtask acknowledged"),
            "{}",
            failure.summary
        );
        let text = to_text(&Report { url: "u".into(), flink_version: None, at_ms: 0, jobs: vec![report] });
        assert_eq!(text.matches("map #").count(), 0, "no subtask listed one by one:\n{text}");
    }

    /// An expiry that no subtask acknowledged names no subtask as the one to look at (seen on
    /// the demo's expiring job: "what Source #0 does while it snapshots" was a guess).
    #[test]
    fn an_expiry_nobody_acknowledged_names_no_single_subtask() {
        let never = |index| SubtaskCheckpoint { index, ..SubtaskCheckpoint::default() };
        let mut expired =
            checkpoint(4, SnapshotKind::Checkpoint, CheckpointStatus::Failed, (0..8).map(never).collect());
        expired.failure_message = Some("Checkpoint expired before completing.".into());
        expired.finished_at = expired.triggered_at.plus_millis(3_000);
        let report = analyse(&job(serde_json::json!([]), vec![expired]));
        assert!(
            report.failures[0].summary.starts_with(
                "0 of 8 subtasks acknowledged in time; 8 subtasks never acknowledged (8 of map)"
            ),
            "{}",
            report.failures[0].summary
        );
        assert!(report.classes[0].evidence.contains("never acknowledged"), "{}", report.classes[0].evidence);
        assert!(report.next.iter().all(|n| !n.contains("map #")), "{:?}", report.next);
        assert!(report.next[0].starts_with("no single subtask stands out"), "{:?}", report.next);
    }

    /// Flink keeps up to 20 checkpoints in its history; the text shows the newest ten and
    /// counts the rest (live on 2.3.0 the expired report was 54 lines with all 16 listed).
    #[test]
    fn the_recent_table_shows_ten_rows_and_counts_the_rest() {
        let history: Vec<serde_json::Value> = (1..=16)
            .map(|id| {
                if id % 3 == 0 {
                    serde_json::json!({ "className": "failed", "id": id, "status": "FAILED",
                        "trigger_timestamp": id * 3_000, "failure_timestamp": id * 3_000 + 4_000,
                        "failure_message": "Checkpoint expired before completing." })
                } else {
                    serde_json::json!({ "className": "completed", "id": id, "status": "COMPLETED",
                        "trigger_timestamp": id * 3_000, "latest_ack_timestamp": id * 3_000 + 50,
                        "end_to_end_duration": 50 })
                }
            })
            .collect();
        let report = analyse(&job(serde_json::Value::Array(history), vec![]));
        assert_eq!(report.recent.len(), 16, "the JSON keeps them all");
        let text = to_text(&Report { url: "u".into(), flink_version: None, at_ms: 0, jobs: vec![report] });
        let rows = text.lines().filter(|l| l.contains("COMPLETED  ") || l.contains("EXPIRED  ")).count();
        assert_eq!(rows, 10, "{text}");
        assert!(text.contains("  … and 6 older: 2 EXPIRED, 4 COMPLETED\n"), "{text}");
    }
}
