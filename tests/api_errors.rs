//! Every error of the JSON API answers `{"error": …}` (issue 30, item 7): bad query values and
//! paths (axum's own rejections were plain text), unknown routes and methods, unknown jobs.
//!
//! `cargo test --test integration api_errors::`

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use checkpoint_sentinel::app::AppState;
use checkpoint_sentinel::outputs::http::{HttpState, router};
use checkpoint_sentinel::state::State;
use checkpoint_sentinel::stats::WindowSpec;
use tower::ServiceExt;

const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

/// The status and body of `method uri` against the daemon's routes over an empty state, with a
/// checkpoint store in `dir` when `with_store`.
async fn ask(method: &str, uri: &str, with_store: Option<&std::path::Path>) -> (StatusCode, String) {
    let app = Arc::new(AppState::new(State::new(WINDOW)));
    if let Some(dir) = with_store {
        let bounds = checkpoint_sentinel::state::store::Bounds {
            max_age: std::time::Duration::from_secs(86_400),
            max_records: 1_000,
        };
        let store = checkpoint_sentinel::state::store::Store::open(dir, bounds).unwrap();
        let _ = app.store.set(Arc::new(store));
    }
    let request = Request::builder().method(method).uri(uri).body(Body::empty()).unwrap();
    let answer = router(HttpState::new(app)).oneshot(request).await.unwrap();
    let status = answer.status();
    let body = axum::body::to_bytes(answer.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn every_api_error_is_a_json_object_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let history = "/api/v1/jobs/lab/0123/checkpoints";
    let cases: Vec<(&str, String, StatusCode)> = vec![
        ("GET", format!("{history}?limit=many"), StatusCode::BAD_REQUEST),
        ("GET", format!("{history}?limit=-1"), StatusCode::BAD_REQUEST),
        ("GET", format!("{history}?limit=0"), StatusCode::BAD_REQUEST),
        ("GET", format!("{history}?since=yesterday"), StatusCode::BAD_REQUEST),
        ("GET", format!("{history}?until=1.5"), StatusCode::BAD_REQUEST),
        ("GET", format!("{history}?since=20&until=10"), StatusCode::BAD_REQUEST),
        ("GET", format!("{history}?outcome=lost"), StatusCode::BAD_REQUEST),
        ("GET", history.to_string(), StatusCode::NOT_FOUND),
        ("GET", "/api/v1/events?limit=lots".into(), StatusCode::BAD_REQUEST),
        ("GET", "/api/v1/events?limit=-5".into(), StatusCode::BAD_REQUEST),
        ("GET", "/api/v1/jobs/lab/0123".into(), StatusCode::NOT_FOUND),
        ("GET", "/api/v1/jobs/lab".into(), StatusCode::NOT_FOUND),
        ("GET", "/api/v1/nothing".into(), StatusCode::NOT_FOUND),
        ("POST", "/api/v1/jobs".into(), StatusCode::METHOD_NOT_ALLOWED),
        ("DELETE", "/api/v1/alerts".into(), StatusCode::METHOD_NOT_ALLOWED),
    ];
    for (method, uri, status) in cases {
        let (got, body) = ask(method, &uri, Some(dir.path())).await;
        assert_eq!(got, status, "{method} {uri}: {body}");
        let json: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{method} {uri}: not JSON ({e}): {body:?}"));
        assert!(json["error"].as_str().is_some_and(|e| !e.is_empty()), "{method} {uri}: {body}");
    }
    // Without a store the history answers 404 with its reason, as JSON too.
    let (got, body) = ask("GET", history, None).await;
    assert_eq!(got, StatusCode::NOT_FOUND);
    assert!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["error"].is_string(), "{body}");
}
