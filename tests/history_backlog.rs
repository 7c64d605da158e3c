//! More finished checkpoints per poll than `max_history_per_poll` (issue 30, item 4): the ones
//! left for later are fetched or counted while Flink still lists them, each stored once, and
//! `checkpoint_sentinel_checkpoints_unobserved_total` counts only the ids Flink no longer had.
//!
//! `cargo test --test integration history_backlog::`

use crate::common::{self, sample};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

const JOB: &str = "0123456789abcdef0123456789abcdef";

/// A JobManager whose one job finishes `per_poll` checkpoints between two `/checkpoints`
/// answers, for `growing_polls` answers, and keeps the newest `history` in its history.
struct Backlog {
    per_poll: u64,
    history: u64,
    growing_polls: usize,
    /// When the stub started, epoch ms.
    started_ms: i64,
    polls: AtomicUsize,
    /// How often the details of each checkpoint id were asked for.
    details_asked: Mutex<BTreeMap<u64, usize>>,
}

type S = State<Arc<Backlog>>;

impl Backlog {
    /// The newest id after `polls` answers.
    fn newest_after(&self, polls: usize) -> u64 {
        self.per_poll * polls.min(self.growing_polls) as u64
    }
}

async fn start(per_poll: u64, history: u64, growing_polls: usize) -> (String, Arc<Backlog>) {
    let state = Arc::new(Backlog {
        per_poll,
        history,
        growing_polls,
        started_ms: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as i64,
        polls: AtomicUsize::new(0),
        details_asked: Mutex::default(),
    });
    let app = Router::new()
        .route("/overview", get(|| async { axum::Json(json!({"flink-version": "1.20.5"})) }))
        .route(
            "/jobs/overview",
            get(|| async {
                axum::Json(json!({"jobs": [{"jid": JOB, "name": "backlog", "state": "RUNNING"}]}))
            }),
        )
        .route("/jobs/{job}", get(job))
        .route("/jobs/{job}/checkpoints", get(checkpoints))
        .route("/jobs/{job}/checkpoints/config", get(config))
        .route("/jobs/{job}/checkpoints/details/{cp}", get(details))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

async fn job() -> Response {
    let vertex = "a".repeat(32);
    axum::Json(json!({
        "jid": JOB, "name": "backlog", "state": "RUNNING",
        "vertices": [{"id": vertex, "name": "Source: backlog", "parallelism": 1}],
        "plan": {"jid": JOB, "name": "backlog", "nodes": [{"id": vertex, "parallelism": 1}]},
    }))
    .into_response()
}

async fn config() -> Response {
    axum::Json(json!({
        "mode": "exactly_once", "interval": 1000, "timeout": 600000, "min_pause": 0,
        "max_concurrent": 1, "externalization": {"enabled": false, "delete_on_cancellation": true},
        "unaligned_checkpoints": false,
    }))
    .into_response()
}

/// Not found, as Flink answers once it forgot a checkpoint: counted without its details.
async fn details(State(b): S, UrlPath((_job, id)): UrlPath<(String, u64)>) -> Response {
    *b.details_asked.lock().unwrap().entry(id).or_default() += 1;
    (StatusCode::NOT_FOUND, r#"{"errors":["Not found"]}"#).into_response()
}

/// History entry `id`, triggered `id` × 100 ms after `started` (recent: the store keeps 30 days).
fn entry(started: i64, id: u64) -> Value {
    let at = started + id as i64 * 100;
    json!({
        "className": "completed", "id": id, "status": "COMPLETED", "is_savepoint": false,
        "trigger_timestamp": at, "latest_ack_timestamp": at + 50, "checkpointed_size": 1, "state_size": 1,
        "end_to_end_duration": 50, "alignment_buffered": 0, "processed_data": 0, "persisted_data": 0,
        "num_subtasks": 1, "num_acknowledged_subtasks": 1, "checkpoint_type": "CHECKPOINT", "tasks": {},
    })
}

async fn checkpoints(State(b): S) -> Response {
    let served = b.polls.fetch_add(1, Ordering::SeqCst) + 1;
    let newest = b.newest_after(served);
    let oldest = newest.saturating_sub(b.history) + 1;
    let history: Vec<Value> = (oldest..=newest).rev().map(|id| entry(b.started_ms, id)).collect();
    axum::Json(json!({
        "counts": {"restored": 0, "total": newest, "in_progress": 0, "completed": newest, "failed": 0},
        "latest": {"completed": null, "savepoint": null, "failed": null, "restored": null},
        "history": history,
    }))
    .into_response()
}

/// The ids the daemon's store holds for the job, in order (duplicates kept).
async fn stored_ids(addr: std::net::SocketAddr) -> Vec<u64> {
    let url = format!("http://{addr}/api/v1/jobs/lab/{JOB}/checkpoints?limit=1000");
    let Ok(answer) = reqwest::get(url).await else { return Vec::new() };
    let v: Value = answer.json().await.unwrap_or_default();
    let mut ids: Vec<u64> =
        v["checkpoints"].as_array().into_iter().flatten().filter_map(|c| c["id"].as_u64()).collect();
    ids.sort_unstable();
    ids
}

/// Runs the daemon against a job finishing 25 checkpoints per poll for 10 polls, with Flink
/// keeping `history` of them and the default limit of 20 details per poll; returns the ids
/// stored, the unobserved count, Flink's newest id and the details asked for more than once.
async fn run(history: u64) -> (Vec<u64>, f64, u64, Vec<u64>) {
    const PER_POLL: u64 = 25;
    const GROWING_POLLS: usize = 10;
    let (url, backlog) = start(PER_POLL, history, GROWING_POLLS).await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::watching(&url, Duration::from_millis(100), dir.path());
    assert_eq!(config.clusters[0].max_history_per_poll, 20, "the default limit");
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    // The growth, then quiet polls for the backlog to drain.
    let polls = || async { backlog.polls.load(Ordering::SeqCst) };
    common::until("the growth and five quiet polls", Duration::from_secs(60), polls, |n| {
        *n >= GROWING_POLLS + 5
    })
    .await;
    let newest = backlog.newest_after(GROWING_POLLS);
    let labels = [("cluster", "lab"), ("job_id", JOB), ("job_name", "backlog"), ("status", "completed")];
    // Everything Flink reported is either stored or unobserved once the store was written.
    let (ids, unobserved) = common::until(
        "every checkpoint stored or counted unobserved",
        Duration::from_secs(60),
        || async {
            let m = common::try_scrape(daemon.addr).await.unwrap_or_default();
            let unobserved =
                sample(&m, "checkpoint_sentinel_checkpoints_unobserved_total", &labels).unwrap_or(-1.0);
            (stored_ids(daemon.addr).await, unobserved)
        },
        |(ids, unobserved)| ids.len() as f64 + unobserved >= newest as f64,
    )
    .await;
    let asked_twice =
        backlog.details_asked.lock().unwrap().iter().filter(|(_, n)| **n > 1).map(|(id, _)| *id).collect();
    daemon.shutdown().await;
    (ids, unobserved, newest, asked_twice)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_over_the_limit_are_stored_later_while_flink_still_lists_them() {
    let (ids, unobserved, newest, asked_twice) = run(50).await;
    assert_eq!(ids, (1..=newest).collect::<Vec<_>>(), "every id stored exactly once");
    assert_eq!(unobserved, 0.0, "Flink listed every one of them while the daemon looked");
    assert_eq!(asked_twice, Vec::<u64>::new(), "no details asked for twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_ids_flink_no_longer_lists_count_as_unobserved() {
    // Flink keeps 10: of each 25, the 15 oldest went by before the daemon could see them.
    let (ids, unobserved, newest, _) = run(10).await;
    let listed: Vec<u64> = (1..=newest).filter(|id| (id - 1) % 25 >= 15).collect();
    assert_eq!(ids, listed, "the listed ones stored exactly once");
    assert_eq!(unobserved, (newest - listed.len() as u64) as f64, "exactly the ids that fell out");
}
