//! The HTTP server: `/metrics`, `/healthz`, `/readyz`, as a function of shared state.

use std::sync::Arc;

use axum::Router;
use axum::extract::State as Extract;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::AppState;
use crate::export;

/// What the handlers need.
#[derive(Clone)]
pub struct HttpState {
    /// The daemon's shared state.
    pub app: Arc<AppState>,
    /// The registry holding the state collector.
    pub registry: Arc<prometheus::Registry>,
}

/// The daemon's routes. Handlers read state; none of them mutates it.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/alerts", get(alerts))
        .with_state(state)
}

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        concat!(
            "checkpoint-sentinel ",
            env!("CARGO_PKG_VERSION"),
            "\n\n",
            "/metrics  Prometheus metrics\n",
            "/healthz  liveness\n",
            "/readyz   readiness: every configured cluster answered at least once\n",
            "/api/v1/alerts  pending, firing and recently resolved alerts (JSON)\n",
        ),
    )
}

async fn metrics(Extract(state): Extract<HttpState>) -> Response {
    let families = state.registry.gather();
    let body = export::encode_text(&families);
    ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], body).into_response()
}

/// Pending, firing and recently resolved alerts of the daemon's own rules.
async fn alerts(Extract(state): Extract<HttpState>) -> Response {
    let view = state.app.alerts.read().unwrap_or_else(|e| e.into_inner()).clone();
    axum::Json(serde_json::json!({ "active": view.active, "resolved": view.resolved })).into_response()
}

async fn readyz(Extract(state): Extract<HttpState>) -> Response {
    let waiting: Vec<String> = {
        let s = state.app.state.read().unwrap_or_else(|e| e.into_inner());
        s.clusters().iter().filter(|(_, c)| !c.answered_once).map(|(n, _)| n.clone()).collect()
    };
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        let body = format!("waiting for the first answer of: {}\n", waiting.join(", "));
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{ClusterPoll, Observation};
    use crate::state::State;
    use crate::stats::WindowSpec;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    fn app() -> (Arc<AppState>, Router) {
        let mut state = State::new(WindowSpec { window_ms: 60_000, slots: 6 });
        state.retain_clusters(&["prod".to_string()]);
        let app = Arc::new(AppState::new(state));
        let registry = prometheus::Registry::new();
        registry.register(Box::new(export::StateCollector::new(app.clone()))).unwrap();
        (app.clone(), router(HttpState { app, registry: Arc::new(registry) }))
    }

    async fn get(router: &Router, path: &str) -> (StatusCode, String) {
        let response = router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn ready_once_every_cluster_answered() {
        let (app, router) = app();
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
        let (status, body) = get(&router, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("prod"), "{body}");
        app.apply(&Observation::ClusterPolled(ClusterPoll {
            cluster: "prod".into(),
            duration_ms: 12,
            flink_version: Some("2.3.0".into()),
            jobs: Some(Vec::new()),
            errors: Vec::new(),
            reachable: true,
        }));
        assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
        let (status, metrics) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(metrics.contains("checkpoint_sentinel_flink_up{cluster=\"prod\"} 1"), "{metrics}");
        assert!(metrics.contains("checkpoint_sentinel_flink_info{cluster=\"prod\",version=\"2.3.0\"} 1"));
    }
}
