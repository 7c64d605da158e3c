//! The HTTP server: `/metrics`, `/healthz`, `/readyz`, the status page at `/` and the JSON API
//! under `/api/v1/` (views in `api`), as a function of shared state.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, State as Extract};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::StreamExt;
use tokio::sync::mpsc::error::TrySendError;

use crate::app::AppState;
use crate::time::Timestamp;
use crate::{api, export};

/// What the handlers need.
#[derive(Clone)]
pub struct HttpState {
    /// The daemon's shared state.
    pub app: Arc<AppState>,
    /// The thread that renders `/metrics`.
    metrics: std::sync::mpsc::Sender<Scrape>,
}

impl HttpState {
    /// Handlers over the daemon's shared state.
    pub fn new(app: Arc<AppState>) -> Self {
        HttpState { app, metrics: metrics_thread() }
    }
}

/// The daemon's routes. Handlers read state; none of them mutates it.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/alerts", get(alerts))
        .route("/api/v1/clusters", get(api_clusters))
        .route("/api/v1/jobs", get(api_jobs))
        .route("/api/v1/jobs/{cluster}/{job_id}", get(api_job))
        .route("/api/v1/jobs/{cluster}/{job_id}/checkpoints", get(api_checkpoints))
        .route("/api/v1/events", get(api_events))
        .with_state(state)
}

/// The status page: one static file that reads the JSON API.
const STATUS_PAGE: &str = include_str!("ui/index.html");

async fn index() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], STATUS_PAGE)
}

fn json_no_cache<T: serde::Serialize>(value: &T) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], axum::Json(value)).into_response()
}

async fn api_clusters(Extract(state): Extract<HttpState>) -> Response {
    let alerts = state.app.alerts.read().unwrap_or_else(|e| e.into_inner()).clone();
    let view = {
        let s = state.app.state.read().unwrap_or_else(|e| e.into_inner());
        api::clusters(&s, &alerts, Timestamp::now())
    };
    json_no_cache(&view)
}

async fn api_jobs(Extract(state): Extract<HttpState>) -> Response {
    let alerts = state.app.alerts.read().unwrap_or_else(|e| e.into_inner()).clone();
    let view = {
        let s = state.app.state.read().unwrap_or_else(|e| e.into_inner());
        api::jobs(&s, &alerts, Timestamp::now())
    };
    json_no_cache(&view)
}

async fn api_job(
    Extract(state): Extract<HttpState>,
    Path((cluster, job_id)): Path<(String, String)>,
) -> Response {
    let alerts = state.app.alerts.read().unwrap_or_else(|e| e.into_inner()).clone();
    let view = {
        let s = state.app.state.read().unwrap_or_else(|e| e.into_inner());
        api::job(&s, &alerts, &cluster, &job_id, Timestamp::now())
    };
    match view {
        Some(v) => json_no_cache(&v),
        None => (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": format!("no job {job_id} in cluster {cluster}") })),
        )
            .into_response(),
    }
}

#[derive(serde::Deserialize)]
struct CheckpointsQuery {
    since: Option<i64>,
    until: Option<i64>,
    outcome: Option<String>,
    limit: Option<usize>,
}

/// The default `limit` of a checkpoint history query.
const DEFAULT_HISTORY_LIMIT: usize = 1000;

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(serde_json::json!({ "error": message }))).into_response()
}

/// The store's records of one job: read on a blocking thread, off the state lock; the view is
/// then built under a read lock (it names TaskManagers from what the cluster's state knows).
async fn api_checkpoints(
    Extract(state): Extract<HttpState>,
    Path((cluster, job_id)): Path<(String, String)>,
    Query(q): Query<CheckpointsQuery>,
) -> Response {
    let Some(store) = state.app.store.get().cloned() else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": "the checkpoint store is off ([store] enabled = false) or could not be opened" })),
        )
            .into_response();
    };
    if let Some(outcome) = q.outcome.as_deref().filter(|o| !api::is_query_outcome(o)) {
        return bad_request(format!(
            "outcome={outcome}: expected completed, expired, declined, failed or failed_any"
        ));
    }
    let limit = q.limit.unwrap_or(DEFAULT_HISTORY_LIMIT);
    if limit == 0 || limit > crate::store::MAX_QUERY_LIMIT {
        return bad_request(format!("limit={limit}: expected 1 to {}", crate::store::MAX_QUERY_LIMIT));
    }
    if let (Some(since), Some(until)) = (q.since, q.until)
        && since > until
    {
        return bad_request(format!("since={since} is after until={until} (both epoch ms)"));
    }
    if !state.app.state.read().unwrap_or_else(|e| e.into_inner()).clusters().contains_key(&cluster) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": format!("no cluster {cluster}") })),
        )
            .into_response();
    }
    let query = crate::store::Query { since: q.since, until: q.until, limit };
    let (c, j, outcome) = (cluster.clone(), job_id.clone(), q.outcome.clone());
    let found = tokio::task::spawn_blocking(move || {
        store.query(&c, &j, &query, |r| outcome.as_deref().is_none_or(|o| api::outcome_matches(&r.record, o)))
    })
    .await;
    let (records, truncated) = match found {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            tracing::error!("cannot read the checkpoint store: {e}");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(serde_json::json!({ "error": e.to_string() })),
            )
                .into_response();
        }
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                axum::Json(serde_json::json!({ "error": e.to_string() })),
            )
                .into_response();
        }
    };
    let s = state.app.state.read().unwrap_or_else(|e| e.into_inner());
    let Some(c) = s.clusters().get(&cluster) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": format!("no cluster {cluster}") })),
        )
            .into_response();
    };
    let view = api::CheckpointHistoryView {
        now_ms: Timestamp::now().millis(),
        checkpoints: records.iter().map(|r| api::stored_checkpoint_view(c, &job_id, r)).collect(),
        cluster,
        job_id,
        since_ms: q.since,
        until_ms: q.until,
        outcome: q.outcome,
        limit,
        truncated,
    };
    drop(s);
    json_no_cache(&view)
}

#[derive(serde::Deserialize)]
struct EventsQuery {
    limit: Option<usize>,
}

async fn api_events(Extract(state): Extract<HttpState>, Query(q): Query<EventsQuery>) -> Response {
    let limit = q.limit.unwrap_or(100).min(crate::state::logs::RECENT_LOG_EVENTS);
    let view = {
        let s = state.app.state.read().unwrap_or_else(|e| e.into_inner());
        api::events(&s, limit, Timestamp::now())
    };
    json_no_cache(&view)
}

async fn metrics(Extract(state): Extract<HttpState>) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(2);
    if state.metrics.send(Scrape { app: state.app.clone(), chunks: tx }).is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the metrics renderer stopped\n").into_response();
    }
    let chunks = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
        .map(|chunk| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(chunk)));
    ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], axum::body::Body::from_stream(chunks)).into_response()
}

/// A scrape for the metrics thread: whose state, and where its body's chunks go.
struct Scrape {
    app: Arc<AppState>,
    chunks: tokio::sync::mpsc::Sender<Vec<u8>>,
}

/// How long a scraper may read nothing before its scrape is dropped (Prometheus' default
/// scrape timeout), so that it cannot hold up the next one.
const STALLED_SCRAPER: Duration = Duration::from_secs(10);

/// Starts the thread that renders `/metrics`. One long-lived thread, off the async workers
/// (health checks and the API keep answering), renders each scrape part by part, each part
/// sent while the next is rendered, so a scrape of 1,000 jobs never holds its whole ~30 MB
/// body; and always the same thread, so the allocator reuses one arena's memory from scrape
/// to scrape instead of keeping a body's worth in each blocking thread it happened to use.
fn metrics_thread() -> std::sync::mpsc::Sender<Scrape> {
    let (tx, rx) = std::sync::mpsc::channel::<Scrape>();
    let spawned = std::thread::Builder::new().name("metrics".into()).spawn(move || {
        let mut renderer = export::TextRenderer::default();
        for scrape in rx {
            render_scrape(&mut renderer, &scrape);
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the metrics thread: {e}");
    }
    tx
}

fn render_scrape(renderer: &mut export::TextRenderer, scrape: &Scrape) {
    let now = Timestamp::now();
    let daemon = scrape.app.daemon_stats();
    for part in export::PARTS {
        // Each part under one read lock: every family is consistent in itself.
        let chunks = {
            let s = scrape.app.state.read().unwrap_or_else(|e| e.into_inner());
            renderer.render(&s, &daemon, now, part)
        };
        for mut chunk in chunks {
            let deadline = Instant::now() + STALLED_SCRAPER;
            loop {
                match scrape.chunks.try_send(chunk) {
                    Ok(()) => break,
                    Err(TrySendError::Full(back)) if Instant::now() < deadline => {
                        chunk = back;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // Gone, or not reading: the stream ends short and the scrape fails.
                    Err(_) => return,
                }
            }
        }
    }
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
        (app.clone(), router(HttpState::new(app)))
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

    #[tokio::test]
    async fn the_status_page_and_the_json_api_answer_from_the_state() {
        use crate::observe::{
            CheckpointCounts, CheckpointStatus, FinishedCheckpoint, JobKey, JobPoll, SnapshotKind,
        };
        let (app, router) = app();
        let (status, page) = get(&router, "/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("<title>checkpoint-sentinel</title>") && page.contains("/api/v1/jobs"));
        let finished = FinishedCheckpoint {
            id: 7,
            status: CheckpointStatus::Failed,
            kind: SnapshotKind::Checkpoint,
            triggered_at: Timestamp(1_000),
            finished_at: Timestamp(61_000),
            end_to_end_ms: None,
            checkpointed_bytes: None,
            full_state_bytes: None,
            processed_bytes: None,
            persisted_bytes: None,
            num_subtasks: 2,
            num_acknowledged: 1,
            failure_message: Some("Checkpoint expired before completing.".into()),
            operators: Vec::new(),
        };
        app.apply(&Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "prod".into(), job_id: "abc".into() },
            job_name: "orders".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(62_000),
            counts: CheckpointCounts { completed: 0, failed: 1, in_progress: 0, restored: 0 },
            settings: None,
            in_progress: Vec::new(),
            finished: vec![finished],
            latest_restore: None,
        }));
        let (status, body) = get(&router, "/api/v1/jobs").await;
        assert_eq!(status, StatusCode::OK);
        let jobs: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(jobs["jobs"][0]["name"], "orders");
        assert_eq!(jobs["jobs"][0]["health"], "warning");
        assert_eq!(jobs["jobs"][0]["last_checkpoint"]["outcome"], "expired");
        let (status, body) = get(&router, "/api/v1/jobs/prod/abc").await;
        assert_eq!(status, StatusCode::OK);
        let job: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(job["checkpoints"][0]["id"], 7);
        assert!(job["shadow"]["explanation"].is_object(), "{job}");
        assert!(job["phases"]["alignment"].is_object());
        // Only a failed checkpoint so far: no P95 yet, so no point in its history.
        assert_eq!(job["p95_history"], serde_json::json!([]), "{job}");
        assert_eq!(get(&router, "/api/v1/jobs/prod/nope").await.0, StatusCode::NOT_FOUND);
        let (_, body) = get(&router, "/api/v1/clusters").await;
        assert!(body.contains("\"name\":\"prod\""), "{body}");
        let (status, body) = get(&router, "/api/v1/events?limit=5").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("\"events\":[]"), "{body}");
        assert_eq!(get(&router, "/api/v1/alerts").await.0, StatusCode::OK);
        assert_eq!(get(&router, "/metrics").await.0, StatusCode::OK);
    }
}
