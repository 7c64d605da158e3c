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
        .with_state(state)
}

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        concat!(
            "checkpoint-sentinel ", env!("CARGO_PKG_VERSION"), "\n\n",
            "/metrics  Prometheus metrics\n",
            "/healthz  liveness\n",
            "/readyz   readiness: every configured cluster answered at least once\n",
        ),
    )
}

async fn metrics(Extract(state): Extract<HttpState>) -> Response {
    let families = state.registry.gather();
    let body = export::encode_text(&families);
    ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], body).into_response()
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
