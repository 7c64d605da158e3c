//! Rescales through the real poller: a job (default scheduler, no rescale history) that restored
//! with another parallelism is a rescale with the checkpoint it restored, and the shadow puts the
//! first checkpoint after it down to the rescale.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State as AxumState;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use checkpoint_sentinel::app::AppState;
use checkpoint_sentinel::config::ClusterConfig;
use checkpoint_sentinel::rules::AlertsView;
use checkpoint_sentinel::sources::poller::Poller;
use checkpoint_sentinel::state::State;
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;
use serde_json::{Value, json};

const JOB: &str = "5c1d506d29e5f5b44d244a49b326c3e2";
const T0: i64 = 1_796_468_353_363;
const VERTICES: [(&str, &str); 2] = [
    ("f4ed146d70273ee4d2e38f322c939c7e", "Source: fast-source"),
    ("857e9877747f27b5e758680f3644828a", "stateful-map"),
];

fn respond(value: Value) -> Response {
    ([("content-type", "application/json")], value.to_string()).into_response()
}

/// Checkpoints 1-3 every 3 s at parallelism 2, then (`rescaled`) restored from 3 at parallelism
/// 1 and checkpoints 4-6 from 400 ms after checkpoint 3's completion on.
fn checkpoints(rescaled: bool) -> Value {
    let at = |id: i64| if id <= 3 { T0 + (id - 1) * 3_000 } else { T0 + 6_000 + 500 + (id - 4) * 3_000 };
    let n = if rescaled { 6 } else { 3 };
    let history: Vec<Value> = (1..=n)
        .rev()
        .map(|id| {
            json!({"id": id, "status": "COMPLETED", "is_savepoint": false, "trigger_timestamp": at(id),
                   "latest_ack_timestamp": at(id) + 40, "end_to_end_duration": 40, "num_subtasks": 4,
                   "num_acknowledged_subtasks": 4, "checkpoint_type": "CHECKPOINT"})
        })
        .collect();
    let restored = rescaled.then(|| json!({"id": 3, "restore_timestamp": T0 + 6_250, "is_savepoint": false}));
    json!({"counts": {"restored": if rescaled { 1 } else { 0 }, "total": n, "in_progress": 0, "completed": n, "failed": 0},
           "history": history, "latest": {"restored": restored}})
}

fn job(rescaled: bool) -> Value {
    let p = if rescaled { 1 } else { 2 };
    let vertices: Vec<Value> =
        VERTICES.iter().map(|(id, name)| json!({"id": id, "name": name, "parallelism": p})).collect();
    json!({"jid": JOB, "name": "orders", "state": "RUNNING", "vertices": vertices,
           "timestamps": {"RUNNING": T0 - 1_000, "CREATED": if rescaled { T0 + 6_100 } else { T0 - 2_000 }, "RESTARTING": 0}})
}

#[tokio::test]
async fn a_restore_at_another_parallelism_is_a_rescale_gated_by_the_checkpoint_restored() {
    let rescaled = Arc::new(AtomicBool::new(false));
    type S = AxumState<Arc<AtomicBool>>;
    let config = crate::common::fixtures().join("flink-2.3.0/failover/rest/checkpoints-config.json");
    let app = Router::new()
        .route("/overview", get(|| async { respond(json!({"flink-version": "1.20.5", "taskmanagers": 1})) }))
        .route(
            "/jobs/overview",
            get(|| async { respond(json!({"jobs": [{"jid": JOB, "name": "orders", "state": "RUNNING"}]})) }),
        )
        .route("/jobs/{job}", get(|AxumState(r): S| async move { respond(job(r.load(Ordering::SeqCst))) }))
        .route(
            "/jobs/{job}/checkpoints",
            get(|AxumState(r): S| async move { respond(checkpoints(r.load(Ordering::SeqCst))) }),
        )
        .route(
            "/jobs/{job}/checkpoints/config",
            get(move || async move { respond(crate::common::read_json(&config)) }),
        )
        .with_state(rescaled.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let state = Arc::new(AppState::new(State::new(WindowSpec { window_ms: 3_600_000, slots: 6 })));
    let mut poller = Poller::new(ClusterConfig::new("lab", &url), state.clone()).unwrap();
    for _ in 0..2 {
        assert!(poller.round().await);
    }
    rescaled.store(true, Ordering::SeqCst);
    for _ in 0..2 {
        assert!(poller.round().await);
    }
    let s = state.state.read();
    let view = checkpoint_sentinel::outputs::api::job(
        &s,
        &AlertsView::default(),
        "lab",
        JOB,
        Timestamp(T0 + 20_000),
    )
    .unwrap();
    let v = serde_json::to_value(&view).unwrap();
    let rescales = v["rescales"].as_array().unwrap();
    assert_eq!(rescales.len(), 1, "{rescales:?}");
    assert_eq!(rescales[0]["source"], "parallelism_change");
    assert_eq!(rescales[0]["restarted_at_ms"], T0 + 6_100, "the adaptive scheduler's restart passes CREATED");
    assert_eq!(rescales[0]["gated_by_checkpoint"], 3);
    assert_eq!(
        rescales[0]["text"],
        "rescaled: Source: fast-source 2 → 1, stateful-map 2 → 1, gated by checkpoint 3"
    );
    let devs = v["shadow"]["deviations"].as_array().unwrap();
    assert_eq!(devs.len(), 1, "{devs:?}");
    assert_eq!((devs[0]["checkpoint_id"].as_u64(), devs[0]["kind"].as_str()), (Some(4), Some("rescale")));
    assert_eq!(devs[0]["explained"], true);
}
