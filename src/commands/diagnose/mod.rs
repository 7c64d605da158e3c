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
//!
//! Files: this one (arguments, fetching, exit code), [`report`] (the data and the report),
//! [`analyse`] (pure analysis), [`text`] (the text output), [`blocked`] (the blocked thread).

pub(crate) mod analyse;
pub(crate) mod blocked;
pub(crate) mod evidence;
pub(crate) mod headline;
pub(crate) mod report;
pub(crate) mod text;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::ClusterConfig;
use crate::observe::{FinishedCheckpoint, JobKey, JobLoadReport};
use crate::sources::flink::client::{FetchError, FlinkClient};
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;

use analyse::analyse;
use report::*;
use text::to_text;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
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
    pub(crate) url: Option<String>,
    /// Take the cluster's URL, credentials and CA from the daemon's configuration file instead
    /// (for a JobManager behind TLS or authentication).
    #[arg(long)]
    pub(crate) config: Option<std::path::PathBuf>,
    /// With `--config`: which `[[clusters]]` entry (by `name`); needed when there are several.
    #[arg(long, requires = "config")]
    pub(crate) cluster: Option<String>,
    /// Diagnose only this job id (default: every job that is not finished, canceled or failed).
    #[arg(long)]
    pub(crate) job: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: Format,
    /// How many of the newest finished checkpoints to look at in detail.
    #[arg(long, default_value_t = 10)]
    pub(crate) checkpoints: usize,
    /// Timeout of each request.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub(crate) timeout: Duration,
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
    /// The one look through the daemon's pipeline could not be taken.
    #[error(transparent)]
    Look(#[from] crate::commands::look::LookError),
    /// The configuration file could not be loaded.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// `--cluster` names no cluster of the configuration file, or it has several and none was named.
    #[error("{0}")]
    NoSuchCluster(String),
    /// `--url` answers as checkpoint-sentinel's own HTTP server, not as a JobManager.
    #[error(
        "{0} is checkpoint-sentinel, not a JobManager: give diagnose the JobManager's REST address (the `url` of a \
         `[[clusters]]` entry, e.g. http://jobmanager:8081), or read this daemon's own view at {0}/api/v1/jobs"
    )]
    NotAJobManager(String),
    /// `--url` is not an http(s) URL.
    #[error(
        "--url {0:?} is not the JobManager's REST address: expected an http:// or https:// URL such as http://jobmanager:8081"
    )]
    BadUrl(String),
}

/// The jobs `diagnose` leaves out when no `--job` is given: those that have ended
/// (`JobStatus::has_ended`), except a SUSPENDED one. Its JobManager stopped without ending it
/// (an HA failover, a shutdown), so it is still the cluster's job and is reported (as unhealthy:
/// not RUNNING) rather than left out as finished.
fn ended_for_diagnose(job_state: &str) -> bool {
    let status = crate::observe::JobStatus::parse(job_state);
    status.has_ended() && status != crate::observe::JobStatus::Suspended
}

/// Connects, fetches and analyses; returns the report.
pub async fn diagnose(args: &DiagnoseArgs) -> Result<Report, DiagnoseError> {
    let cluster = cluster_config(args)?;
    // One request per path: the look's round and the report's own fetch ask for the same ones.
    let client = FlinkClient::new(&cluster)?.memoised();
    let overview = match client.overview().await {
        Ok(o) => o,
        Err(e @ FetchError::HttpStatus { status: 404, .. }) => {
            return Err(if is_checkpoint_sentinel(&cluster.url, args.timeout).await {
                DiagnoseError::NotAJobManager(cluster.url.trim_end_matches('/').to_string())
            } else {
                e.into()
            });
        }
        Err(e) => return Err(e.into()),
    };
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
        None => jobs.jobs.iter().filter(|j| !j.state.as_deref().is_some_and(ended_for_diagnose)).collect(),
    };
    let (rules, window, runbook_base_url) = rules_and_window(args)?;
    let look =
        crate::commands::look::look(&cluster, &client, &selected, rules, window, args.checkpoints).await?;
    let mut reports = Vec::new();
    for job in selected {
        let data = fetch(&client, job, overview.flink_version.clone(), args.checkpoints).await?;
        let name = if data.name.is_empty() { data.job_id.clone() } else { data.name.clone() };
        let judged = headline::judged(&name, look.job(&job.jid).as_ref(), look.recovered(&job.jid));
        let mut report = analyse(&data, judged);
        report.evidence = evidence::report_line(&client, &data).await;
        report.storage.extend(look.storage_lines(&job.jid));
        reports.push(report);
    }
    tracing::debug!(
        requests = client.requests_sent(),
        jobs = reports.len(),
        "diagnose: requests to the JobManager"
    );
    let mut report = Report::new(cluster.url, overview.flink_version, Timestamp::now().millis(), reports);
    report.incidents = look.alerts.incidents.iter().map(|i| i.text.clone()).collect();
    report.rebase_runbook_links(&runbook_base_url);
    Ok(report)
}

/// The rule pack and the statistics window the look evaluates, and the runbook its links point
/// at: the `--config` file's (its own rules, disabled ones left out), else the built-in ones.
pub(crate) fn rules_and_window(
    args: &DiagnoseArgs,
) -> Result<(Vec<crate::rules::Rule>, crate::stats::WindowSpec, String), DiagnoseError> {
    let config = match &args.config {
        Some(path) => crate::config::Config::load(path)?,
        None => crate::config::Config::default(),
    };
    Ok((
        config.effective_rules(),
        crate::daemon::window_of(&config),
        config.alerting.runbook_base_url.clone(),
    ))
}

/// Whether `url` is checkpoint-sentinel's own HTTP server (a common slip: the daemon's address
/// where the JobManager's was meant): its `/api/v1/clusters` answers with a JSON list.
async fn is_checkpoint_sentinel(url: &str, timeout: Duration) -> bool {
    let Ok(client) = reqwest::Client::builder().timeout(timeout).build() else { return false };
    let probe = format!("{}/api/v1/clusters", url.trim_end_matches('/'));
    match client.get(&probe).send().await {
        Ok(r) if r.status().is_success() => {
            r.json::<serde_json::Value>().await.is_ok_and(|v| v.is_array() || v.get("clusters").is_some())
        }
        _ => false,
    }
}

/// Fetches what [`analyse`] needs about one job.
pub(crate) async fn fetch(
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
    let names = vertex_names(details.as_ref());
    let mut history: Vec<&dto::CheckpointStatistics> = stats.history.iter().collect();
    history.sort_by_key(|c| std::cmp::Reverse(c.id));
    let finished = fetch_finished(client, id, &history, &names, checkpoints).await;
    let pending = fetch_pending(client, id, &history, &names).await;
    let (locations, load) = fetch_locations_and_load(client, id, details.as_ref(), fetched_at).await;
    let mut data = JobData {
        job_id: id.to_string(),
        name: job.name.clone().unwrap_or_default(),
        state: crate::sources::flink::convert::job_status(job.state.as_deref()),
        flink_version,
        details,
        config,
        stats,
        finished,
        pending,
        locations,
        load,
        fetched_at,
        blocked_thread: None,
        status_metrics: None,
    };
    data.blocked_thread = blocked::fetch(client, &data).await;
    data.status_metrics = status_metrics(client, id).await;
    Ok(data)
}

/// The job's status metrics under the names its Flink lists (2.x's where they exist).
async fn status_metrics(
    client: &FlinkClient,
    id: &str,
) -> Option<crate::sources::flink::metrics::JobStatusMetrics> {
    use crate::sources::flink::metrics::{job_status, job_status_names};
    let listed = client.job_metrics(id, &[]).await.ok().flatten()?;
    let names = job_status_names(&listed);
    if names.is_empty() {
        return None;
    }
    let values = client.job_metrics(id, &names).await.ok().flatten()?;
    Some(job_status(&values))
}

/// Vertex id to its name (the id when it has none).
pub(crate) fn vertex_names(details: Option<&dto::JobDetails>) -> BTreeMap<String, String> {
    details
        .iter()
        .flat_map(|d| {
            d.vertices.iter().map(|v| (v.id.clone(), v.name.clone().unwrap_or_else(|| v.id.clone())))
        })
        .collect()
}

/// The newest `checkpoints` finished checkpoints of `history` (newest first), with their
/// per-subtask details (vertices whose details cannot be fetched are left out).
pub(crate) async fn fetch_finished(
    client: &FlinkClient,
    id: &str,
    history: &[&dto::CheckpointStatistics],
    names: &BTreeMap<String, String>,
    checkpoints: usize,
) -> Vec<FinishedCheckpoint> {
    let mut finished = Vec::new();
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
    finished
}

/// Per checkpoint in progress: the vertices with subtasks that have not acknowledged it, and
/// their indexes.
async fn fetch_pending(
    client: &FlinkClient,
    id: &str,
    history: &[&dto::CheckpointStatistics],
    names: &BTreeMap<String, String>,
) -> BTreeMap<u64, Vec<(String, Vec<u32>)>> {
    let mut pending = BTreeMap::new();
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
    pending
}

/// Where each subtask runs and the job's load (per vertex: subtasks, back-pressure, load
/// metrics), vertex by vertex; `None` load when nothing about it could be fetched.
async fn fetch_locations_and_load(
    client: &FlinkClient,
    id: &str,
    details: Option<&dto::JobDetails>,
    fetched_at: Timestamp,
) -> (BTreeMap<(String, u32), Location>, Option<JobLoadReport>) {
    let mut locations = BTreeMap::new();
    let mut vertices = Vec::new();
    let topology = details.and_then(convert::topology);
    for v in details.iter().flat_map(|d| &d.vertices) {
        let parallelism = v.parallelism.unwrap_or(1).clamp(1, 64);
        let vertex = client.vertex(id, &v.id).await.ok().flatten();
        record_locations(&mut locations, &v.id, vertex.as_ref());
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
        topology: topology.map(std::sync::Arc::new),
        vertices,
    });
    (locations, load)
}

/// Adds the TaskManager and host of each subtask of `vertex` that says where it runs.
fn record_locations(
    locations: &mut BTreeMap<(String, u32), Location>,
    vertex_id: &str,
    vertex: Option<&dto::VertexDetails>,
) {
    for st in vertex.iter().flat_map(|d| &d.subtasks) {
        let location = Location {
            taskmanager_id: st.taskmanager_id.clone(),
            host: st.endpoint.clone().or_else(|| st.host.clone()),
        };
        if location.taskmanager_id.is_some() || location.host.is_some() {
            locations.insert((vertex_id.to_string(), st.subtask), location);
        }
    }
}

/// 0 when every job is healthy, 1 when one is unhealthy, 3 when the worst is at risk.
pub(crate) fn exit_code(report: &Report) -> u8 {
    match report.jobs.iter().map(|j| j.verdict).max() {
        Some(Verdict::Unhealthy) => 1,
        Some(Verdict::AtRisk) => 3,
        _ => 0,
    }
}

/// The cluster to diagnose: `--url` alone, or an entry of the `--config` file with its
/// credentials and CA (the request timeout is `--timeout` either way).
pub(crate) fn cluster_config(args: &DiagnoseArgs) -> Result<ClusterConfig, DiagnoseError> {
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

    #[test]
    fn diagnose_leaves_out_the_ended_jobs_but_a_suspended_one() {
        let all = crate::observe::JobStatus::KNOWN;
        let all = all.iter().map(crate::observe::JobStatus::as_str);
        let left_out: Vec<&str> = all.clone().filter(|s| ended_for_diagnose(s)).collect();
        assert_eq!(left_out, ["FAILED", "CANCELED", "FINISHED"]);
    }

    use crate::observe::{CheckpointStatus, FinishedCheckpoint, SnapshotKind, SubtaskCheckpoint};

    /// The one mapping of the daemon's health onto the verdict, and the exit code of each.
    #[test]
    fn the_daemons_health_maps_onto_the_verdict_and_its_exit_code() {
        use crate::health::Health;
        let code_of = |health: Health| {
            let mut report = analysed(&job(serde_json::json!([]), Vec::new()));
            report.verdict = Verdict::of(health);
            (report.verdict, exit_code(&Report::new("u".into(), None, 0, vec![report])))
        };
        assert_eq!(code_of(Health::Critical), (Verdict::Unhealthy, 1));
        assert_eq!(code_of(Health::Warning), (Verdict::Unhealthy, 1));
        assert_eq!(code_of(Health::Pending), (Verdict::AtRisk, 3));
        assert_eq!(code_of(Health::Unknown), (Verdict::AtRisk, 3));
        assert_eq!(code_of(Health::Ok), (Verdict::Healthy, 0));
    }

    /// The details of `d` (the verdict is the look's, not these tests' business).
    fn analysed(d: &JobData) -> JobReport {
        analyse(d, Judged::unwatched())
    }

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
            blocked_thread: None,
            status_metrics: None,
        }
    }

    /// Live on 1.14.6 (session 11) `diagnose` said "next: nothing now" while its checkpoint had
    /// waited 5.1 s of a 10 s timeout on a task thread the dump found in the user's code. A held
    /// thread is the first thing to check: that code, class blocking. (The verdict is the
    /// daemon's health after the look: one dump is not the looker's consecutive samples.)
    #[test]
    fn a_checkpoint_held_by_a_thread_in_user_code_names_the_code_first() {
        use crate::observe::{Frame, SampleSource, ThreadSample, ThreadState};
        let history = serde_json::json!([
            { "className": "in_progress", "id": 4, "status": "IN_PROGRESS", "trigger_timestamp": 94_900 },
            { "className": "completed", "id": 3, "status": "COMPLETED", "trigger_timestamp": 91_900,
              "latest_ack_timestamp": 91_964, "end_to_end_duration": 64 }
        ]);
        let mut data = job(history.clone(), Vec::new());
        data.stats = serde_json::from_value(serde_json::json!({ "history": history,
            "counts": { "completed": 3, "failed": 0, "in_progress": 1, "restored": 0, "total": 4 } }))
        .unwrap();
        data.config = Some(
            serde_json::from_value(
                serde_json::json!({ "mode": "exactly_once", "interval": 3000, "timeout": 10000,
                "min_pause": 0, "max_concurrent": 1, "tolerable_failed_checkpoints": 1000 }),
            )
            .unwrap(),
        );
        let unlooked = analysed(&data);
        assert!(
            !unlooked.next[0].starts_with("the code at"),
            "without a look at the thread: {:?}",
            unlooked.next
        );
        let frame = |class: &str, method: &str, file: Option<&str>, line: Option<u32>| Frame {
            class: class.into(),
            method: method.into(),
            file: file.map(str::to_string),
            line,
        };
        data.blocked_thread = Some(ThreadSample {
            checkpoint_id: 4,
            operator: "blocking-map".into(),
            subtask: 0,
            taskmanager: "tm-1".into(),
            thread: Some("blocking-map (1/2)#0".into()),
            taken_at: Timestamp(100_000),
            state: Some(ThreadState::TimedWaiting),
            frames: vec![
                frame("java.lang.Thread", "sleep", None, None),
                frame(
                    "sentinel.e2e.ScenarioJob$BlockingMap",
                    "holdTheThread",
                    Some("ScenarioJob.java"),
                    Some(378),
                ),
            ],
            user_frame: Some(1),
            stopped_early: false,
            source: SampleSource::ThreadDump,
            hits: None,
        });
        let report = analysed(&data);
        assert!(
            report.next[0].starts_with(
                "the code at sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread(ScenarioJob.java:378)"
            ),
            "{:?}",
            report.next
        );
        assert_eq!(report.classes[0].class, crate::rules::Class::Blocking);
        assert!(report.classes[0].evidence.contains("blocking-map #0"), "{}", report.classes[0].evidence);
        // A checkpoint merely under way (30 ms, as long as the last one took) with its thread in
        // user code, as a throttling source's is most of the time: nothing is claimed.
        let mut under_way = data.clone();
        under_way.fetched_at = Timestamp(94_930);
        assert!(!analysed(&under_way).next[0].starts_with("the code at"));
        // Once the thread is back in Flink's code (no user frame), nothing is claimed either.
        data.blocked_thread.as_mut().unwrap().user_frame = None;
        assert!(!analysed(&data).next[0].starts_with("the code at"));
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
        let report = analysed(&job(history, vec![newest]));
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
        let acknowledged = subtasks.iter().filter(|s| s.acknowledged).count() as u32;
        let checkpoint = FinishedCheckpoint::completed(id, Timestamp(id as i64 * 10_000), 30)
            .kind(kind)
            .acknowledged(acknowledged, subtasks.len() as u32)
            .operator("v", "map", subtasks);
        match status {
            CheckpointStatus::Failed => checkpoint.failed("Asynchronous task checkpoint failed."),
            CheckpointStatus::Completed => checkpoint,
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
        let report = analysed(&job(serde_json::json!([]), finished));
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
        let text = to_text(&Report::new("u".into(), None, 0, vec![report]));
        assert_eq!(text.matches("map #").count(), 0, "no subtask listed one by one:\n{text}");
    }

    /// The async phase's upload rate per subtask: one slow subtask among fast siblings is that
    /// subtask; all slow alike is the storage's throughput.
    #[test]
    fn upload_rates_tell_one_subtask_from_the_storage() {
        let up = |index, bytes: u64, async_ms| SubtaskCheckpoint {
            index,
            acknowledged: true,
            end_to_end_ms: Some(async_ms + 10),
            async_ms: Some(async_ms),
            checkpointed_bytes: Some(bytes),
            ..SubtaskCheckpoint::default()
        };
        let one_slow = vec![up(0, 1 << 20, 10_000), up(1, 1 << 20, 500), up(2, 1 << 20, 500)];
        let finished = vec![checkpoint(5, SnapshotKind::Checkpoint, CheckpointStatus::Completed, one_slow)];
        let report = analysed(&job(serde_json::json!([]), finished));
        assert_eq!(
            report.storage,
            vec![
                "Upload (checkpoint 5, bytes persisted over async duration): slowest map #0 102 KiB/s (1 MiB \
                 in 10.0 s), its siblings' median 2 MiB/s: that subtask"
                    .to_string()
            ]
        );
        let all_slow = vec![up(0, 1 << 20, 10_000), up(1, 1 << 20, 9_000)];
        let finished = vec![checkpoint(6, SnapshotKind::Checkpoint, CheckpointStatus::Completed, all_slow)];
        let report = analysed(&job(serde_json::json!([]), finished));
        assert!(
            report.storage[0].ends_with("every subtask alike, the storage's throughput"),
            "{:?}",
            report.storage
        );
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
        let report = analysed(&job(serde_json::json!([]), vec![expired]));
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

    /// A restart between two checkpoints is a restart, not "coordinator stall …?": seen on the
    /// demo's failing job (tolerable 2), whose history begins within a run of failures that the
    /// restart ended, and whose latest restart `/jobs/:id` `timestamps` gives.
    #[test]
    fn a_restart_gap_reads_as_a_restart_and_the_job_failed_over() {
        let failed = |id: u64, at: i64| {
            FinishedCheckpoint::completed(id, Timestamp(at), 80)
                .failed("Asynchronous task checkpoint failed.")
        };
        // 8, 9 | restart | 10, 11, 12 (3 > 2: restart) | 13, 14: 2 s apart but after a restart.
        let times = [(8, 0), (9, 2_000), (10, 6_300), (11, 8_300), (12, 10_300), (13, 13_900), (14, 15_900)];
        let finished: Vec<FinishedCheckpoint> = times.iter().rev().map(|(id, at)| failed(*id, *at)).collect();
        let history: Vec<serde_json::Value> = times
            .iter()
            .rev()
            .map(|(id, at)| {
                serde_json::json!({ "className": "failed", "id": id, "status": "FAILED",
                    "trigger_timestamp": at, "failure_timestamp": at + 80,
                    "failure_message": "Asynchronous task checkpoint failed." })
            })
            .collect();
        let mut data = job(serde_json::Value::Array(history), finished);
        data.stats.counts = serde_json::from_value(
            serde_json::json!({ "restored": 0, "total": 14, "in_progress": 0, "completed": 0, "failed": 14 }),
        )
        .unwrap();
        data.config = Some(
            serde_json::from_value(serde_json::json!({ "mode": "exactly_once", "interval": 2_000,
                "timeout": 600_000, "min_pause": 0, "max_concurrent": 1, "tolerable_failed_checkpoints": 2 }))
            .unwrap(),
        );
        data.fetched_at = Timestamp(16_500);
        let report = analysed(&data);
        let spacing = report.spacing.join("\n");
        assert!(!spacing.contains("coordinator stall"), "{spacing}");
        assert!(spacing.contains("restarted"), "{spacing}");
        let failover = report.failover.as_deref().unwrap_or_default();
        assert!(failover.contains("tolerable-failed-checkpoints 2"), "{failover}");
    }

    /// "Healthy again" is the daemon's answer (`health::recovered` over the look's state), not
    /// one `diagnose` makes of the history: a failover restored checkpoint 3 at 100 s and
    /// checkpoint 4 completed at 106 s while stateful-map #0 still restored its in-flight data
    /// (INITIALIZING, FLIP-547). The history alone (every checkpoint since the restart
    /// completed) read as healthy again; it is not until the subtask runs (130 s), and then since
    /// that moment, as the page, the API and the alerts say.
    #[test]
    fn healthy_again_is_the_daemons_answer_not_at_a_checkpoint_during_recovery() {
        let report = |running: Option<i64>| {
            let state = crate::health::tests::restored_during_recovery(running);
            let look = crate::commands::look::Look {
                app: std::sync::Arc::new(crate::app::AppState::new(state)),
                cluster: "c".into(),
                alerts: crate::rules::AlertsView::default(),
            };
            let at = |id: u64| if id <= 3 { 90_000 + id as i64 * 2_000 } else { 105_000 };
            let finished: Vec<FinishedCheckpoint> = (1..=4u64)
                .rev()
                .map(|id| FinishedCheckpoint::completed(id, Timestamp(at(id)), 1_000))
                .collect();
            let mut data = job(serde_json::json!([]), finished);
            data.stats.counts = serde_json::from_value(
                serde_json::json!({ "restored": 1, "total": 4, "in_progress": 0, "completed": 4, "failed": 0 }),
            )
            .unwrap();
            data.details = Some(
                serde_json::from_value(serde_json::json!({ "timestamps": { "RESTARTING": 99_000 } }))
                    .unwrap(),
            );
            data.fetched_at = Timestamp(running.unwrap_or(107_000) + 1_000);
            let judged = headline::judged("orders", look.job("j").as_ref(), look.recovered("j"));
            analyse(&data, judged).failover.unwrap_or_default()
        };
        let restoring = report(None);
        assert!(restoring.contains("last restart at"), "{restoring}");
        assert!(!restoring.contains("healthy again"), "a subtask still restores: {restoring}");
        let running = report(Some(130_000));
        assert!(running.ends_with("healthy again since 00:02:10.000 UTC, after 1 restart"), "{running}");
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
        let report = analysed(&job(serde_json::Value::Array(history), vec![]));
        assert_eq!(report.recent.len(), 16, "the JSON keeps them all");
        let text = to_text(&Report::new("u".into(), None, 0, vec![report]));
        let rows = text.lines().filter(|l| l.contains("COMPLETED  ") || l.contains("EXPIRED  ")).count();
        assert_eq!(rows, 10, "{text}");
        assert!(text.contains("  … and 6 older: 2 EXPIRED, 4 COMPLETED\n"), "{text}");
    }
}
