//! The thread looker end to end: a JobManager stub whose job always has a checkpoint about to
//! expire with `blocking-map` #0 pending, a flame graph switched off (`endTimestamp` -2) and the
//! captured 2.3.0 thread dump of the `blocked` scenario. The daemon looks at the TaskManager (at
//! most once per `min_interval`), puts the stack beside the checkpoint in the API, and fires
//! FlinkCheckpointBlockedByUserCode naming the scenario job's class and method.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::common;

const JOB: &str = "ea9073fc97ba96ae016f11e2fc97dd85";
const VERTEX: &str = "ba75f89dd809f15061bbf5b37c0530d8";

struct Stub {
    started: Instant,
    dumps: AtomicUsize,
    flame_graphs: AtomicUsize,
}

type S = State<Arc<Stub>>;

fn now_ms() -> i64 {
    checkpoint_sentinel::time::Timestamp::now().millis()
}

impl Stub {
    /// A new checkpoint every 3 s, each seen 8.5 s after its trigger (timeout 10 s).
    fn checkpoint(&self) -> (u64, i64) {
        (100 + self.started.elapsed().as_millis() as u64 / 3000, now_ms() - 8_500)
    }
}

fn json_of(v: Value) -> Response {
    axum::Json(v).into_response()
}

async fn serve() -> (String, Arc<Stub>) {
    let stub = Arc::new(Stub {
        started: Instant::now(),
        dumps: AtomicUsize::new(0),
        flame_graphs: AtomicUsize::new(0),
    });
    let dump =
        std::fs::read_to_string(common::fixtures().join("threads/flink-2.3.0/thread-dump-000.json")).unwrap();
    let app = Router::new()
        .route("/overview", get(|| async { json_of(json!({"flink-version": "2.3.0", "taskmanagers": 1})) }))
        .route(
            "/jobs/overview",
            get(|| async { json_of(json!({"jobs": [{"jid": JOB, "name": "blocked", "state": "RUNNING"}]})) }),
        )
        .route(
            "/jobs/{job}",
            get(|| async {
                json_of(json!({"jid": JOB, "name": "blocked", "state": "RUNNING", "now": now_ms(),
                    "vertices": [{"id": VERTEX, "name": "blocking-map", "parallelism": 2}]}))
            }),
        )
        .route(
            "/jobs/{job}/checkpoints/config",
            get(|| async { json_of(json!({"mode": "exactly_once", "interval": 3000, "timeout": 10000, "min_pause": 0, "max_concurrent": 1})) }),
        )
        .route(
            "/jobs/{job}/checkpoints",
            get(|State(s): S| async move {
                let (id, at) = s.checkpoint();
                json_of(json!({
                    "counts": {"restored": 0, "total": id, "in_progress": 1, "completed": 0, "failed": id - 1},
                    "history": [{"className": "in_progress", "id": id, "status": "IN_PROGRESS",
                        "trigger_timestamp": at, "latest_ack_timestamp": at, "num_subtasks": 2,
                        "num_acknowledged_subtasks": 1, "tasks": {}}],
                }))
            }),
        )
        .route(
            "/jobs/{job}/checkpoints/details/{cp}/subtasks/{v}",
            get(|| async {
                json_of(json!({"status": "IN_PROGRESS", "num_subtasks": 2, "subtasks": [
                    {"className": "pending", "index": 0, "status": "pending_or_failed"},
                    {"className": "completed", "index": 1, "status": "completed", "ack_timestamp": now_ms()},
                ]}))
            }),
        )
        .route(
            "/jobs/{job}/vertices/{v}",
            get(|| async {
                json_of(json!({"id": VERTEX, "name": "blocking-map", "parallelism": 2, "subtasks": [
                    {"subtask": 0, "taskmanager-id": "127.0.0.1:21125-5385d0", "endpoint": "127.0.0.1:21125"},
                    {"subtask": 1, "taskmanager-id": "127.0.0.1:21125-5385d0", "endpoint": "127.0.0.1:21125"},
                ]}))
            }),
        )
        .route(
            "/jobs/{job}/vertices/{v}/flamegraph",
            get(|State(s): S| async move {
                s.flame_graphs.fetch_add(1, Ordering::SeqCst);
                json_of(json!({"endTimestamp": -2, "data": null}))
            }),
        )
        .route(
            "/taskmanagers/{tm}/thread-dump",
            get(move |State(s): S| {
                let dump = dump.clone();
                async move {
                    s.dumps.fetch_add(1, Ordering::SeqCst);
                    ([("content-type", "application/json")], dump).into_response()
                }
            }),
        )
        .with_state(stub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, stub)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_held_in_user_code_is_dumped_shown_and_alerted() {
    let (url, stub) = serve().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::watching(&url, Duration::from_millis(500), dir.path());
    // Shorter than the 10 s the config file allows, so that two looks fit in a test.
    config.thread_dumps.min_interval = Duration::from_secs(1);
    config.alerting.evaluation_interval = Duration::from_millis(200);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let api = format!("http://{}/api/v1/jobs/lab/{JOB}", daemon.addr);
    let job: Value = common::until(
        "the stack beside the checkpoint in progress",
        Duration::from_secs(30),
        || async { reqwest::get(&api).await.unwrap().json::<Value>().await.unwrap() },
        |j| {
            j["checkpoints_in_progress"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| !c["blocked_thread"].is_null()))
        },
    )
    .await;
    let cp = job["checkpoints_in_progress"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| !c["blocked_thread"].is_null())
        .unwrap();
    let b = &cp["blocked_thread"];
    assert_eq!(b["user_frame"], "sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread(ScenarioJob.java:366)");
    assert_eq!((b["operator"].as_str(), b["subtask"].as_u64()), (Some("blocking-map"), Some(0)));
    assert_eq!(
        (b["source"].as_str(), b["thread"].as_str()),
        (Some("thread_dump"), Some("blocking-map (1/2)#0"))
    );
    assert!(b["frames"].as_array().unwrap().iter().filter(|f| f["user"] == true).count() == 1, "{b}");
    // The second look, a second later, finds the same frame: the alert names it.
    let alerts_url = format!("http://{}/api/v1/alerts", daemon.addr);
    let alerts: Value = common::until(
        "FlinkCheckpointBlockedByUserCode",
        Duration::from_secs(30),
        || async { reqwest::get(&alerts_url).await.unwrap().json::<Value>().await.unwrap() },
        |a| a.to_string().contains("FlinkCheckpointBlockedByUserCode"),
    )
    .await;
    let text = alerts.to_string();
    assert!(text.contains("sat in sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread in"), "{text}");
    let metrics = common::scrape(daemon.addr).await;
    let taken = common::sample(
        &metrics,
        "checkpoint_sentinel_thread_dumps_total",
        &[("cluster", "lab"), ("outcome", "taken")],
    );
    assert!(taken.is_some_and(|n| n >= 2.0), "{taken:?}");
    assert!(metrics.contains("flink_checkpoint_blocked_by_user_code{"), "the Prometheus side's series");
    // The flame graph said it is off: asked once, then thread dumps only.
    assert_eq!(stub.flame_graphs.load(Ordering::SeqCst), 1);
    assert_eq!(stub.dumps.load(Ordering::SeqCst) as f64, taken.unwrap());
    daemon.shutdown().await;
}
