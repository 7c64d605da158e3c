//! Test support: a local HTTP server that replays a captured Flink scenario.
//!
//! It serves a scenario's REST captures the way the JobManager did: `/jobs/:id/checkpoints`
//! walks through the `rest/poll/` time series (one step per request, then stays on the last),
//! everything else comes from the snapshot files, and what was not captured is a 404.
#![allow(dead_code)]

pub(crate) mod many;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

/// Whether this run rewrites the goldens and the generated doc tables instead of comparing with
/// them: `SENTINEL_BLESS=1`, the one bless variable of every golden.
pub(crate) fn blessing() -> bool {
    std::env::var_os("SENTINEL_BLESS").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The fixtures folder of this repository.
pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A capture's `/checkpoints` series in order, with when each answer came (Unix ms), in either
/// layout: the first captures' `rest/poll/index.tsv` (`seq unix_ms file`), or
/// `e2e/capture_evidence.py`'s `poll/NNN-checkpoints.json`, timed by the top `index.tsv` (every
/// request's ms since the capture began, which ended at `captured_until_ms`).
pub(crate) fn poll_series(dir: &Path) -> Vec<(PathBuf, i64)> {
    if let Ok(index) = std::fs::read_to_string(dir.join("rest/poll/index.tsv")) {
        return index
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let mut cols = l.split('\t').skip(1);
                let at = cols.next().unwrap().parse::<i64>().unwrap();
                (dir.join("rest/poll").join(cols.next().unwrap()), at)
            })
            .collect();
    }
    let Some((requests, began)) = capture_requests(dir) else { return Vec::new() };
    let meta: Value = read_json(&dir.join("scenario.json"));
    if meta["job_id"].is_null() {
        return Vec::new();
    }
    let checkpoints = format!("/jobs/{}/checkpoints", meta["job_id"].as_str().unwrap());
    requests
        .iter()
        .filter(|(_, path)| *path == checkpoints)
        .enumerate()
        .map(|(n, (t_ms, _))| (dir.join(format!("poll/{n:03}-checkpoints.json")), began + t_ms))
        .take_while(|(file, _)| file.exists())
        .collect()
}

/// When the snapshot after the series (`rest/checkpoints.json`) was taken, Unix ms.
pub(crate) fn snapshot_time(dir: &Path) -> i64 {
    let meta: Value = read_json(&dir.join("scenario.json"));
    if let Some(at) = meta["snapshot_unix_ms"].as_i64() {
        return at;
    }
    let (requests, began) = capture_requests(dir).expect("a capture with an index.tsv");
    let checkpoints = format!("/jobs/{}/checkpoints", meta["job_id"].as_str().unwrap());
    let polls = poll_series(dir).len();
    let after = requests.iter().filter(|(_, path)| *path == checkpoints).nth(polls);
    began + after.expect("the snapshot's /checkpoints request").0
}

/// `e2e/capture_evidence.py`'s `index.tsv`: each request's (ms since the capture began, path),
/// and when it began, Unix ms (its end, `captured_until_ms`, less the last request's start and
/// duration).
fn capture_requests(dir: &Path) -> Option<(Vec<(i64, String)>, i64)> {
    let index = std::fs::read_to_string(dir.join("index.tsv")).ok()?;
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("scenario.json")).ok()?).ok()?;
    let mut last_end = 0.0f64;
    let requests: Vec<(i64, String)> = index
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            let t_ms: i64 = cols[0].parse().unwrap();
            last_end = last_end.max(t_ms as f64 + cols[4].parse::<f64>().unwrap_or(0.0));
            (t_ms, cols[1].to_string())
        })
        .collect();
    let began = meta["captured_until_ms"].as_i64()? - last_end.round() as i64;
    Some((requests, began))
}

/// A vertex name as `e2e/capture_evidence.py` shortens it for file names.
pub(crate) fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').chars().take(40).collect()
}

/// A captured scenario.
pub(crate) struct Scenario {
    /// `tests/fixtures/flink-<version>/<scenario>`.
    pub dir: PathBuf,
    /// The job id.
    pub job_id: String,
    /// The poll series, in order.
    pub polls: Vec<Value>,
}

impl Scenario {
    /// Loads `flink-<version>/<name>`.
    pub(crate) fn load(version: &str, name: &str) -> Scenario {
        let dir = fixtures().join(format!("flink-{version}")).join(name);
        let meta: Value = read_json(&dir.join("scenario.json"));
        let polls = poll_series(&dir)
            .into_iter()
            .map(|(file, _)| read_json(&file))
            // The snapshot taken after the series is its last step: its history is the one whose
            // checkpoint details were captured (the ids in between went by unseen).
            .chain(std::iter::once(read_json(&dir.join("rest/checkpoints.json"))))
            .collect();
        Scenario { job_id: meta["job_id"].as_str().unwrap().to_string(), dir, polls }
    }

    /// Distinct completed, non-savepoint checkpoints across the poll series: (id, entry).
    pub(crate) fn distinct_completed(&self) -> Vec<(u64, Value)> {
        let mut seen = std::collections::BTreeMap::new();
        for poll in &self.polls {
            for h in poll["history"].as_array().unwrap() {
                if h["status"] == "COMPLETED" && h["is_savepoint"] != true {
                    seen.entry(h["id"].as_u64().unwrap()).or_insert_with(|| h.clone());
                }
            }
        }
        seen.into_iter().collect()
    }

    /// Distinct finished ids with this status (savepoints included) across the series.
    pub(crate) fn distinct_with_status(&self, status: &str) -> usize {
        let mut ids = std::collections::BTreeSet::new();
        for poll in &self.polls {
            for h in poll["history"].as_array().unwrap() {
                if h["status"] == status {
                    ids.insert(h["id"].as_u64().unwrap());
                }
            }
        }
        ids.len()
    }

    /// Flink's counts in the last poll.
    pub(crate) fn last_counts(&self) -> Value {
        self.polls.last().unwrap()["counts"].clone()
    }

    /// The captured per-vertex subtask details of a checkpoint, if any.
    pub(crate) fn subtask_details(&self, checkpoint_id: u64) -> Vec<Value> {
        let dir = self.dir.join("rest/checkpoint-details");
        let prefix = format!("checkpoint-{checkpoint_id}-subtasks-");
        let mut out = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if name.starts_with(&prefix) && name.ends_with(".json") {
                    out.push(read_json(&e.path()));
                }
            }
        }
        out
    }
}

/// Reads a JSON file.
pub(crate) fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct Replay {
    scenario: Scenario,
    step: AtomicUsize,
    /// `/jobs/:id/vertices/:vid` is answered (from `rest/vertices/`) only when set: until this
    /// many polls were served, every subtask shows `(unassigned)`, as Flink does while deploying.
    vertices_unassigned_until_poll: Option<usize>,
    vertex_requests: AtomicUsize,
    /// Until this many polls were served, `/jobs/:id` answers without vertices and plan, as
    /// Flink's cached answer for a job still initializing.
    graph_missing_until_poll: usize,
    /// Whether the job is cancelled after the series: then the listing says CANCELED, the next
    /// `/checkpoints` answer is still the last one of the series (Flink's cache lags the
    /// cancel), and every later one is `rest/checkpoints-after-cancel.json`.
    cancel_after_series: std::sync::atomic::AtomicBool,
}

/// A running replay server.
pub(crate) struct ReplayServer {
    /// Its base URL.
    pub url: String,
    state: Arc<Replay>,
}

impl ReplayServer {
    /// How many `/checkpoints` requests were answered.
    pub(crate) fn polls_served(&self) -> usize {
        self.state.step.load(Ordering::SeqCst)
    }

    /// How many `/jobs/:id/vertices/:vid` requests were answered.
    pub(crate) fn vertex_requests(&self) -> usize {
        self.state.vertex_requests.load(Ordering::SeqCst)
    }

    /// The scenario it replays.
    pub(crate) fn scenario(&self) -> &Scenario {
        &self.state.scenario
    }

    /// Waits until the whole series was served plus `extra` more polls.
    pub(crate) async fn wait_for_polls(&self, extra: usize) {
        let target = self.state.scenario.polls.len() + extra;
        let what = format!("{target} polls served");
        until(&what, std::time::Duration::from_secs(30), || async { self.polls_served() }, |n| *n >= target)
            .await;
    }
}

/// Starts a replay server for `flink-<version>/<name>` on a free loopback port.
pub(crate) async fn replay(version: &str, name: &str) -> ReplayServer {
    replay_server(version, name, None, 0).await
}

/// A replay server whose job is cancelled once the series was served: listed CANCELED, one
/// stale `/checkpoints` answer, then `rest/checkpoints-after-cancel.json`.
pub(crate) async fn replay_then_cancel(version: &str, name: &str) -> ReplayServer {
    let server = replay_server(version, name, None, 0).await;
    server.state.cancel_after_series.store(true, Ordering::SeqCst);
    server
}

/// A replay server that also answers `/jobs/:id/vertices/:vid`, with every subtask
/// `(unassigned)` until `unassigned_until_poll` polls were served, and `…/backpressure` with
/// HTTP 500 (as Flink does while a young job's metrics are not collected yet).
pub(crate) async fn replay_with_vertices(
    version: &str,
    name: &str,
    unassigned_until_poll: usize,
) -> ReplayServer {
    replay_server(version, name, Some(unassigned_until_poll), 0).await
}

/// A replay server whose `/jobs/:id` has no vertices and no plan until `until_poll` polls were
/// served (a job Flink lists RUNNING while its cached details are still the initializing job's).
pub(crate) async fn replay_without_graph_at_first(
    version: &str,
    name: &str,
    until_poll: usize,
) -> ReplayServer {
    replay_server(version, name, None, until_poll).await
}

async fn replay_server(
    version: &str,
    name: &str,
    vertices_unassigned_until_poll: Option<usize>,
    graph_missing_until_poll: usize,
) -> ReplayServer {
    let state = Arc::new(Replay {
        scenario: Scenario::load(version, name),
        step: AtomicUsize::new(0),
        vertices_unassigned_until_poll,
        vertex_requests: AtomicUsize::new(0),
        graph_missing_until_poll,
        cancel_after_series: Default::default(),
    });
    let app = Router::new()
        .route("/overview", get(overview))
        .route("/jobs/overview", get(jobs_overview))
        .route("/jobs/{job}", get(job))
        .route("/jobs/{job}/checkpoints", get(checkpoints))
        .route("/jobs/{job}/checkpoints/config", get(checkpoints_config))
        .route("/jobs/{job}/config", get(job_config))
        .route("/jobs/{job}/checkpoints/details/{cp}", get(details))
        .route("/jobs/{job}/checkpoints/details/{cp}/subtasks/{vertex}", get(subtasks))
        .route("/jobs/{job}/vertices/{vertex}", get(vertex))
        .route("/jobs/{job}/vertices/{vertex}/backpressure", get(vertex_backpressure))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    ReplayServer { url: format!("http://{addr}"), state }
}

type S = State<Arc<Replay>>;

fn file(path: PathBuf) -> Response {
    match std::fs::read_to_string(&path) {
        Ok(body) => ([("content-type", "application/json")], body).into_response(),
        Err(_) => (StatusCode::NOT_FOUND, r#"{"errors":["Not found"]}"#).into_response(),
    }
}

fn json(value: &Value) -> Response {
    ([("content-type", "application/json")], value.to_string()).into_response()
}

fn rest(s: &Replay, name: &str) -> PathBuf {
    s.scenario.dir.join("rest").join(name)
}

async fn overview(State(s): S) -> Response {
    file(rest(&s, "overview.json"))
}

/// Only the scenario's job, shown RUNNING (the capture ran other scenarios on the same cluster).
async fn jobs_overview(State(s): S) -> Response {
    let mut all = read_json(&rest(&s, "jobs-overview.json"));
    let jobs = all["jobs"].as_array_mut().unwrap();
    jobs.retain(|j| j["jid"] == s.scenario.job_id.as_str());
    let cancelled = s.cancel_after_series.load(Ordering::SeqCst)
        && s.step.load(Ordering::SeqCst) >= s.scenario.polls.len();
    for j in jobs.iter_mut() {
        j["state"] = Value::from(if cancelled { "CANCELED" } else { "RUNNING" });
    }
    json(&all)
}

async fn job(State(s): S, UrlPath(job): UrlPath<String>) -> Response {
    if job != s.scenario.job_id {
        return file(PathBuf::new());
    }
    if s.step.load(Ordering::SeqCst) < s.graph_missing_until_poll {
        let mut details = read_json(&rest(&s, "job.json"));
        details["vertices"] = Value::Array(Vec::new());
        if let Some(object) = details.as_object_mut() {
            object.remove("plan");
        }
        return json(&details);
    }
    file(rest(&s, "job.json"))
}

async fn checkpoints(State(s): S, UrlPath(_job): UrlPath<String>) -> Response {
    let step = s.step.fetch_add(1, Ordering::SeqCst);
    let polls = &s.scenario.polls;
    if s.cancel_after_series.load(Ordering::SeqCst) && step > polls.len() {
        return file(rest(&s, "checkpoints-after-cancel.json"));
    }
    json(&polls[step.min(polls.len() - 1)])
}

async fn checkpoints_config(State(s): S, UrlPath(_job): UrlPath<String>) -> Response {
    file(rest(&s, "checkpoints-config.json"))
}

/// `/jobs/:id/config` as captured; `/jobmanager/config` was not captured and answers 404.
async fn job_config(State(s): S, UrlPath(_job): UrlPath<String>) -> Response {
    file(rest(&s, "job-config.json"))
}

/// The details as of the poll step last served: an in-progress capture of that step if there is
/// one (`rest/poll/in-progress/poll-NNN/`), else the snapshot's.
fn details_file(s: &Replay, name: &str) -> PathBuf {
    let step = s.step.load(Ordering::SeqCst).saturating_sub(1);
    let in_progress = s.scenario.dir.join(format!("rest/poll/in-progress/poll-{step:03}/{name}"));
    if in_progress.exists() { in_progress } else { rest(s, &format!("checkpoint-details/{name}")) }
}

async fn details(State(s): S, UrlPath((_job, cp)): UrlPath<(String, u64)>) -> Response {
    file(details_file(&s, &format!("checkpoint-{cp}.json")))
}

async fn subtasks(State(s): S, UrlPath((_job, cp, vertex)): UrlPath<(String, u64, String)>) -> Response {
    file(details_file(&s, &format!("checkpoint-{cp}-subtasks-{vertex}.json")))
}

async fn vertex(State(s): S, UrlPath((_job, vertex)): UrlPath<(String, String)>) -> Response {
    let Some(unassigned_until_poll) = s.vertices_unassigned_until_poll else {
        return file(PathBuf::new());
    };
    let path = rest(&s, &format!("vertices/{vertex}.json"));
    if !path.exists() {
        return file(path);
    }
    let mut details = read_json(&path);
    s.vertex_requests.fetch_add(1, Ordering::SeqCst);
    if s.step.load(Ordering::SeqCst) < unassigned_until_poll {
        for subtask in details["subtasks"].as_array_mut().unwrap() {
            for field in ["host", "endpoint", "taskmanager-id"] {
                subtask[field] = Value::from("(unassigned)");
            }
        }
    }
    json(&details)
}

/// A configuration watching one cluster named `lab` at `url`, polled every `poll_interval`,
/// the daemon on a free loopback port, its state in `state_dir`.
pub(crate) fn watching(
    url: &str,
    poll_interval: std::time::Duration,
    state_dir: &Path,
) -> checkpoint_sentinel::config::Config {
    use checkpoint_sentinel::config::{ClusterConfig, Config};
    let mut cluster = ClusterConfig::new("lab", url);
    cluster.poll_interval = poll_interval;
    let mut config = Config { clusters: vec![cluster], ..Config::default() };
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.state.dir = state_dir.to_path_buf();
    config
}

async fn vertex_backpressure(State(s): S) -> Response {
    if s.vertices_unassigned_until_poll.is_none() {
        return file(PathBuf::new());
    }
    (StatusCode::INTERNAL_SERVER_ERROR, r#"{"errors":["Internal server error.","<Exception on server side: java.util.NoSuchElementException>"]}"#)
        .into_response()
}

/// The daemon's `/metrics` at `addr`.
pub(crate) async fn scrape(addr: SocketAddr) -> String {
    reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap()
}

/// The daemon's `/metrics` at `addr`, or `None` while it does not answer.
pub(crate) async fn try_scrape(addr: SocketAddr) -> Option<String> {
    reqwest::get(format!("http://{addr}/metrics")).await.ok()?.text().await.ok()
}

/// How often [`until`] looks again: a poll of the condition, not a wait for time to pass.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_millis(100);

/// Observes with `observe` until `done` holds for what it saw, and returns that. After `timeout`
/// it panics with `what` it waited for and the last value it saw. A sync condition is an
/// `async` block around it.
pub(crate) async fn until<V: std::fmt::Debug, F: std::future::Future<Output = V>>(
    what: &str,
    timeout: std::time::Duration,
    mut observe: impl FnMut() -> F,
    done: impl Fn(&V) -> bool,
) -> V {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let seen = observe().await;
        if done(&seen) {
            return seen;
        }
        if std::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen:#?}");
        }
        tokio::time::sleep(LOOK_AGAIN).await;
    }
}

/// [`until`] from a thread outside the runtime: the condition is sync.
pub(crate) fn until_blocking<V: std::fmt::Debug>(
    what: &str,
    timeout: std::time::Duration,
    mut observe: impl FnMut() -> V,
    done: impl Fn(&V) -> bool,
) -> V {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let seen = observe();
        if done(&seen) {
            return seen;
        }
        if std::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {seen:#?}");
        }
        std::thread::sleep(LOOK_AGAIN);
    }
}

/// Scrapes `/metrics` at `addr` until `done` holds for it (see [`until`]), and returns it.
pub(crate) async fn scrape_until(
    addr: SocketAddr,
    what: &str,
    timeout: std::time::Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let seen = until(what, timeout, || try_scrape(addr), |m| m.as_deref().is_some_and(&done)).await;
    seen.unwrap_or_default()
}

/// Parses Prometheus text: the value of the sample with exactly this name and these labels.
pub(crate) fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (metric, rest) = match series.split_once('{') {
            Some((m, r)) => (m, r.trim_end_matches('}')),
            None => (series, ""),
        };
        if metric != name {
            return None;
        }
        let parsed: Vec<(String, String)> = rest
            .split("\",")
            .filter(|p| !p.is_empty())
            .filter_map(|p| {
                let (k, v) = p.split_once("=\"")?;
                Some((k.to_string(), v.trim_end_matches('"').to_string()))
            })
            .collect();
        let matches = labels.iter().all(|(k, v)| parsed.iter().any(|(pk, pv)| pk == k && pv == v))
            && parsed.len() == labels.len();
        matches.then(|| value.parse().ok()).flatten()
    })
}

impl Scenario {
    /// The poll times of the series (`index.tsv`), then the snapshot time for the last step.
    pub(crate) fn poll_times(&self) -> Vec<i64> {
        let series = poll_series(&self.dir);
        let times: Vec<i64> = series.iter().map(|(_, at)| *at).collect();
        times.into_iter().chain(std::iter::once(snapshot_time(&self.dir))).collect()
    }

    /// The series as the poller would report it: each finished id once (with its per-subtask
    /// details when they were captured), the captured `/checkpoints/config` as settings.
    pub(crate) fn job_polls(&self) -> Vec<checkpoint_sentinel::observe::JobPoll> {
        self.job_polls_of(&self.polls)
    }

    /// [`Scenario::job_polls`] of an edited copy of the series.
    pub(crate) fn job_polls_of(&self, polls: &[Value]) -> Vec<checkpoint_sentinel::observe::JobPoll> {
        self.job_polls_at(polls, &self.poll_times())
    }

    /// [`Scenario::job_polls_of`] with the poll times given (one per poll).
    pub(crate) fn job_polls_at(
        &self,
        polls: &[Value],
        times: &[i64],
    ) -> Vec<checkpoint_sentinel::observe::JobPoll> {
        use checkpoint_sentinel::observe::{JobKey, JobPoll};
        use checkpoint_sentinel::sources::flink::{convert, dto};
        use checkpoint_sentinel::time::Timestamp;
        let config: dto::CheckpointConfig =
            serde_json::from_value(read_json(&self.dir.join("rest/checkpoints-config.json"))).unwrap();
        let settings = convert::settings(&config);
        let job: dto::JobDetails =
            serde_json::from_value(read_json(&self.dir.join("rest/job.json"))).unwrap();
        let names: std::collections::HashMap<String, String> =
            job.vertices.iter().map(|v| (v.id.clone(), v.name.clone().unwrap_or_default())).collect();
        let mut seen = std::collections::BTreeSet::new();
        polls
            .iter()
            .zip(times.iter().copied())
            .map(|(poll, at)| {
                let stats: dto::CheckpointingStatistics = serde_json::from_value(poll.clone()).unwrap();
                let mut finished = Vec::new();
                for cp in &stats.history {
                    if convert::status(cp).is_none() || !seen.insert(cp.id) {
                        continue;
                    }
                    let details: Vec<(String, dto::TaskCheckpointDetails)> = names
                        .keys()
                        .filter_map(|vid| {
                            // By vertex id (the first captures) or by the vertex name's slug
                            // (`e2e/capture_evidence.py`).
                            let text = [vid.clone(), slug(&names[vid])].iter().find_map(|v| {
                                let path = self.dir.join(format!(
                                    "rest/checkpoint-details/checkpoint-{}-subtasks-{v}.json",
                                    cp.id
                                ));
                                std::fs::read_to_string(path).ok()
                            })?;
                            Some((vid.clone(), serde_json::from_str(&text).ok()?))
                        })
                        .collect();
                    let views: Vec<convert::VertexDetails<'_>> = details
                        .iter()
                        .map(|(vid, d)| convert::VertexDetails {
                            vertex_id: vid,
                            name: &names[vid],
                            details: d,
                        })
                        .collect();
                    finished.extend(convert::finished(cp, &views));
                }
                JobPoll {
                    key: JobKey { cluster: "lab".into(), job_id: self.job_id.clone() },
                    job_name: job.name.clone().unwrap_or_default(),
                    job_state: "RUNNING".into(),
                    polled_at: Timestamp(at),
                    counts: stats.counts.as_ref().map(convert::counts).unwrap_or_default(),
                    settings: Some(settings.clone()),
                    in_progress: convert::in_progress(&stats.history),
                    finished,
                    latest_restore: stats
                        .latest
                        .as_ref()
                        .and_then(|l| l.restored.as_ref())
                        .and_then(|r| r.restore_timestamp.map(|t| (r.id, Timestamp(t)))),
                    deferred: Default::default(),
                }
            })
            .collect()
    }

    /// The captured graph and vertex load, as the poller reports it.
    pub(crate) fn load_report(&self) -> checkpoint_sentinel::observe::JobLoadReport {
        use checkpoint_sentinel::observe::{JobKey, JobLoadReport};
        use checkpoint_sentinel::sources::flink::{convert, dto};
        use checkpoint_sentinel::time::Timestamp;
        let job: dto::JobDetails =
            serde_json::from_value(read_json(&self.dir.join("rest/job.json"))).unwrap();
        let topology = convert::topology(&job);
        let opt = |name: String| -> Option<Value> {
            let text = std::fs::read_to_string(self.dir.join("rest/vertices").join(name)).ok()?;
            serde_json::from_str(&text).ok()
        };
        let vertices = job
            .vertices
            .iter()
            .map(|v| {
                let details: Option<dto::VertexDetails> =
                    opt(format!("{}.json", v.id)).and_then(|j| serde_json::from_value(j).ok());
                let bp: Option<dto::VertexBackPressure> =
                    opt(format!("{}-backpressure.json", v.id)).and_then(|j| serde_json::from_value(j).ok());
                let metrics: Vec<dto::MetricValue> = opt(format!("{}-metrics-values.json", v.id))
                    .and_then(|j| serde_json::from_value(j).ok())
                    .unwrap_or_default();
                convert::vertex_load(
                    &v.id,
                    v.parallelism.unwrap_or(1),
                    details.as_ref(),
                    bp.as_ref(),
                    &metrics,
                )
            })
            .collect();
        JobLoadReport {
            key: JobKey { cluster: "lab".into(), job_id: self.job_id.clone() },
            measured_at: Timestamp(0),
            topology: topology.map(std::sync::Arc::new),
            vertices,
        }
    }
}

/// The daemon binary running `config`, quiet, on a port the daemon chose itself (`--listen
/// 127.0.0.1:0`, so no port is released and raced for): its address comes from its
/// "listening" log line. Killed when dropped, so a failing assertion does not leave it running.
pub(crate) fn spawn_daemon(config: &Path) -> Daemon {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["run", "--config"])
        .arg(config)
        .args(["--listen", "127.0.0.1:0"])
        .env("SENTINEL_LOG", "warn,checkpoint_sentinel::daemon=info")
        .env("SENTINEL_LOG_FORMAT", "json")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut daemon = Daemon(child, None);
    let addr = lines.by_ref().map_while(Result::ok).find_map(|line| {
        let record: Value = serde_json::from_str(&line).ok()?;
        (record["message"] == "checkpoint-sentinel listening")
            .then(|| record["addr"].as_str()?.parse().ok())
            .flatten()
    });
    // Its stderr read to the end, so the daemon never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    daemon.1 =
        Some(addr.unwrap_or_else(|| panic!("the daemon exited before listening: {:?}", daemon.0.try_wait())));
    daemon
}

/// A port for another program that binds it itself (Alertmanager): bound and released here, so
/// racy; the daemon itself never needs one ([`spawn_daemon`], `daemon::start` take port 0).
pub(crate) fn port_for_another_program() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A daemon process of a test (see [`spawn_daemon`]) and the address it listens on.
pub(crate) struct Daemon(pub std::process::Child, Option<SocketAddr>);

impl Daemon {
    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.1.expect("listening")
    }
}

impl std::ops::Deref for Daemon {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Already gone when the test waited for it; otherwise this is the panic path.
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
