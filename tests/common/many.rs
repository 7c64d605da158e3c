//! A replay server for many jobs behind a slow network: every job replays the same captured
//! scenario (its own step through `rest/poll/`), under its own id and name, and every request
//! is answered after an injected delay. It counts requests, the most it had in flight at once,
//! and how often each (job, checkpoint) had its details asked for. Its gate holds answers back on
//! demand: until a number of job requests are in flight at once (so a test sees the concurrency a
//! poller reaches, whatever the machine's load), or every answer until the test releases them (a
//! cluster that does not answer for as long as a test needs).
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use serde_json::Value;
use tokio::sync::Notify;

use super::{Scenario, read_json};

struct Many {
    scenario: Scenario,
    /// Job id -> (index, `/checkpoints` answers served).
    jobs: HashMap<String, (usize, AtomicUsize)>,
    ids: Vec<String>,
    delay: Duration,
    requests: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Per (job, checkpoint, vertex; "" for `/checkpoints/details/:id` itself): how often asked.
    details: Mutex<HashMap<(String, u64, String), usize>>,
    gate: Gate,
}

/// Holds answers back while closed. See [`ManyServer::hold_until_in_flight`] and
/// [`ManyServer::hold_everything`].
#[derive(Default)]
struct Gate {
    closed: AtomicBool,
    /// Opens by itself when this many requests are in flight at once; 0: only `release` opens it.
    opens_at_in_flight: AtomicUsize,
    /// Whether `/overview`, `/jobs/overview` and `/applications/overview` wait too (they come one
    /// at a time, first in a round).
    holds_listing: AtomicBool,
    opened: Notify,
}

/// How long a held job request waits for the in-flight count before the gate gives up and opens:
/// a poller that never reaches the count fails the test's assertion on it instead of hanging.
const GATE_PATIENCE: Duration = Duration::from_secs(30);

/// A running many-jobs replay server.
pub(crate) struct ManyServer {
    /// Its base URL.
    pub url: String,
    state: Arc<Many>,
}

impl ManyServer {
    /// The scenario every job replays.
    pub(crate) fn scenario(&self) -> &Scenario {
        &self.state.scenario
    }

    /// The jobs' ids, in listing order.
    pub(crate) fn job_ids(&self) -> &[String] {
        &self.state.ids
    }

    /// The name of job `i`.
    pub(crate) fn job_name(&self, i: usize) -> String {
        format!("many-{i:04}")
    }

    /// Requests answered so far.
    pub(crate) fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The most requests that were in flight at once.
    pub(crate) fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }

    /// Forgets the most requests in flight so far: [`ManyServer::max_in_flight`] counts from now.
    pub(crate) fn reset_max_in_flight(&self) {
        self.state.max_in_flight.store(self.state.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// Closes the gate for job requests: each waits until `in_flight` requests are in flight at
    /// once, then the gate stays open (until closed again) and every waiting one goes on. After
    /// [`GATE_PATIENCE`] without that many, it opens anyway.
    pub(crate) fn hold_until_in_flight(&self, in_flight: usize) {
        self.state.gate.opens_at_in_flight.store(in_flight, Ordering::SeqCst);
        self.state.gate.holds_listing.store(false, Ordering::SeqCst);
        self.state.gate.closed.store(true, Ordering::SeqCst);
    }

    /// Closes the gate for every request, until [`ManyServer::release`].
    pub(crate) fn hold_everything(&self) {
        self.state.gate.opens_at_in_flight.store(0, Ordering::SeqCst);
        self.state.gate.holds_listing.store(true, Ordering::SeqCst);
        self.state.gate.closed.store(true, Ordering::SeqCst);
    }

    /// Opens the gate: every held request goes on.
    pub(crate) fn release(&self) {
        self.state.gate.open();
    }

    /// `/checkpoints` answers served to the job least polled.
    pub(crate) fn min_polls(&self) -> usize {
        self.state.jobs.values().map(|(_, n)| n.load(Ordering::SeqCst)).min().unwrap_or(0)
    }

    /// (job, checkpoint) pairs whose details were asked for more than once.
    /// (A checkpoint's details are its per-vertex subtask details, asked for directly when the
    /// poller knows the job graph, or after `/checkpoints/details/:id`.)
    pub(crate) fn details_asked_twice(&self) -> Vec<((String, u64), usize)> {
        let details = self.state.details.lock().unwrap();
        details.iter().filter(|(_, n)| **n > 1).map(|((job, cp, _), n)| ((job.clone(), *cp), *n)).collect()
    }

    /// How many (job, checkpoint) details were asked for.
    pub(crate) fn details_asked(&self) -> usize {
        let details = self.state.details.lock().unwrap();
        details.keys().map(|(job, cp, _)| (job, cp)).collect::<std::collections::HashSet<_>>().len()
    }

    /// Waits until every job was served the whole series plus `extra` more polls.
    pub(crate) async fn wait_for_polls(&self, extra: usize) {
        let target = self.state.scenario.polls.len() + extra;
        let what = format!("{target} polls served to the least polled job");
        super::until(&what, Duration::from_secs(60), || async { self.min_polls() }, |n| *n >= target).await;
    }
}

/// `jobs` copies of `flink-<version>/<name>`, each request answered after `delay`.
pub(crate) async fn replay_many(version: &str, name: &str, jobs: usize, delay: Duration) -> ManyServer {
    let scenario = Scenario::load(version, name);
    let ids: Vec<String> = (0..jobs).map(|i| format!("{i:08x}{}", &scenario.job_id[8..])).collect();
    let state = Arc::new(Many {
        jobs: ids.iter().enumerate().map(|(i, id)| (id.clone(), (i, AtomicUsize::new(0)))).collect(),
        ids,
        scenario,
        delay,
        requests: AtomicUsize::new(0),
        in_flight: AtomicUsize::new(0),
        max_in_flight: AtomicUsize::new(0),
        details: Mutex::new(HashMap::new()),
        gate: Gate::default(),
    });
    let app = Router::new()
        .route("/overview", get(overview))
        .route("/jobs/overview", get(jobs_overview))
        .route("/jobs/{job}", get(job))
        .route("/jobs/{job}/checkpoints", get(checkpoints))
        .route("/jobs/{job}/checkpoints/config", get(checkpoints_config))
        .route("/jobs/{job}/checkpoints/details/{cp}", get(details))
        .route("/jobs/{job}/checkpoints/details/{cp}/subtasks/{vertex}", get(subtasks))
        .layer(middleware::from_fn_with_state(state.clone(), slow))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    ManyServer { url: format!("http://{addr}"), state }
}

type S = State<Arc<Many>>;

/// Every request waits `delay` (the round trip to a JobManager in another zone), counted in flight.
async fn slow(State(s): S, request: Request, next: Next) -> Response {
    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    s.max_in_flight.fetch_max(now, Ordering::SeqCst);
    s.gate.pass(now, request.uri().path()).await;
    // Part of the scenario: the stub answers slowly on purpose.
    tokio::time::sleep(s.delay).await;
    let response = next.run(request).await;
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    s.requests.fetch_add(1, Ordering::SeqCst);
    response
}

impl Gate {
    /// Waits while the gate is closed for this request; the request that brings the in-flight
    /// count to the gate's number opens it.
    async fn pass(&self, in_flight: usize, path: &str) {
        // The listing requests of a round come one at a time (2.3's applications too: 404 here).
        if matches!(path, "/overview" | "/jobs/overview" | "/applications/overview")
            && !self.holds_listing.load(Ordering::SeqCst)
        {
            return;
        }
        // Registered before looking at the gate, so an opening in between is not missed.
        let opened = self.opened.notified();
        tokio::pin!(opened);
        opened.as_mut().enable();
        if !self.closed.load(Ordering::SeqCst) {
            return;
        }
        match self.opens_at_in_flight.load(Ordering::SeqCst) {
            0 => opened.await,
            n if in_flight >= n => self.open(),
            _ => {
                if tokio::time::timeout(GATE_PATIENCE, opened).await.is_err() {
                    self.open();
                }
            }
        }
    }

    fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
        self.opened.notify_waiters();
    }
}

fn rest(s: &Many, name: &str) -> PathBuf {
    s.scenario.dir.join("rest").join(name)
}

fn step_of(s: &Many, job: &str) -> usize {
    s.jobs.get(job).map_or(0, |(_, n)| n.load(Ordering::SeqCst))
}

async fn overview(State(s): S) -> Response {
    super::file(rest(&s, "overview.json"))
}

async fn jobs_overview(State(s): S) -> Response {
    let all = read_json(&rest(&s, "jobs-overview.json"));
    let template = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jid"] == s.scenario.job_id.as_str())
        .unwrap()
        .clone();
    let jobs: Vec<Value> = s
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut j = template.clone();
            j["jid"] = Value::from(id.as_str());
            j["name"] = Value::from(format!("many-{i:04}"));
            j["state"] = Value::from("RUNNING");
            j
        })
        .collect();
    super::json(&serde_json::json!({ "jobs": jobs }))
}

async fn job(State(s): S, UrlPath(job): UrlPath<String>) -> Response {
    let Some((i, _)) = s.jobs.get(&job) else { return super::file(PathBuf::new()) };
    let mut details = read_json(&rest(&s, "job.json"));
    details["jid"] = Value::from(job.as_str());
    details["name"] = Value::from(format!("many-{i:04}"));
    super::json(&details)
}

async fn checkpoints(State(s): S, UrlPath(job): UrlPath<String>) -> Response {
    let Some((_, step)) = s.jobs.get(&job) else { return super::file(PathBuf::new()) };
    let step = step.fetch_add(1, Ordering::SeqCst);
    let polls = &s.scenario.polls;
    super::json(&polls[step.min(polls.len() - 1)])
}

async fn checkpoints_config(State(s): S) -> Response {
    super::file(rest(&s, "checkpoints-config.json"))
}

/// The details as of the job's last step (see `details_file` of the single-job server).
fn details_file(s: &Many, job: &str, name: &str) -> PathBuf {
    let step = step_of(s, job).saturating_sub(1);
    let in_progress = s.scenario.dir.join(format!("rest/poll/in-progress/poll-{step:03}/{name}"));
    if in_progress.exists() { in_progress } else { rest(s, &format!("checkpoint-details/{name}")) }
}

async fn details(State(s): S, UrlPath((job, cp)): UrlPath<(String, u64)>) -> Response {
    *s.details.lock().unwrap().entry((job.clone(), cp, String::new())).or_default() += 1;
    super::file(details_file(&s, &job, &format!("checkpoint-{cp}.json")))
}

async fn subtasks(State(s): S, UrlPath((job, cp, vertex)): UrlPath<(String, u64, String)>) -> Response {
    *s.details.lock().unwrap().entry((job.clone(), cp, vertex.clone())).or_default() += 1;
    super::file(details_file(&s, &job, &format!("checkpoint-{cp}-subtasks-{vertex}.json")))
}
