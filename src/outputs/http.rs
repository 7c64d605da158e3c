//! The HTTP server: `/metrics`, `/healthz`, `/readyz`, the status page at `/` and the JSON API
//! under `/api/v1/` (views in `api`), as a function of shared state; the probe port's routes.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{FromRequestParts, State as Extract};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::AppState;
use crate::time::Timestamp;
use crate::{outputs::api, outputs::export};

/// What the handlers need.
#[derive(Clone)]
pub struct HttpState {
    /// The daemon's shared state.
    pub(crate) app: Arc<AppState>,
    /// The thread that renders `/metrics`.
    metrics: std::sync::mpsc::Sender<Scrape>,
    /// The advice of recently asked-for jobs.
    advice: Arc<super::advice_cache::AdviceCache>,
}

impl HttpState {
    /// Handlers over the daemon's shared state.
    pub fn new(app: Arc<AppState>) -> Self {
        HttpState { app, metrics: metrics_thread(), advice: Arc::default() }
    }
}

/// The daemon's routes. Handlers read state; none of them mutates it.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(index))
        // gzip when the scraper sends `Accept-Encoding: gzip` (Prometheus does): a layer around
        // the route, whatever the handler streams. At the fastest level: the exposition repeats
        // itself so much that level 1 still shrinks it ~15 times, at several times the speed of
        // the default level (which took 3.7 s for 66 MB at 2,000 jobs: docs/performance.md).
        .route(
            "/metrics",
            get(metrics).layer(
                tower_http::compression::CompressionLayer::new()
                    .gzip(true)
                    .quality(tower_http::compression::CompressionLevel::Fastest),
            ),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/alerts", get(alerts))
        .route("/api/v1/clusters", get(api_clusters))
        .route("/api/v1/jobs", get(api_jobs))
        .route("/api/v1/incidents", get(api_incidents))
        .route("/api/v1/jobs/{cluster}/{job_id}", get(api_job))
        .route("/api/v1/jobs/{cluster}/{job_id}/checkpoints", get(api_checkpoints))
        .route("/api/v1/jobs/{cluster}/{job_id}/advice", get(api_advice))
        .route("/api/v1/events", get(api_events))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// The probe port's routes (`[server] probe_listen`): /healthz and /readyz, nothing else, so
/// that the port's own connection slots serve only probes.
pub(crate) fn probe_router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state)
}

/// An API error: `{"error": message}` with its status, as every error of the API answers.
fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message.into() }))).into_response()
}

/// A path that no route serves.
async fn no_route(uri: axum::http::Uri) -> Response {
    json_error(StatusCode::NOT_FOUND, format!("no route {}", uri.path()))
}

/// A route asked with a method it does not serve (only GET is served).
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    json_error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} {}: only GET is served", uri.path()))
}

/// axum's `Path`, rejected with a JSON error body instead of axum's plain text.
struct Path<T>(T);

impl<T: serde::de::DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for Path<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(rejection) => Err(json_error(rejection.status(), rejection.body_text())),
        }
    }
}

/// axum's `Query`, rejected with a JSON error body instead of axum's plain text.
struct Query<T>(T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Query<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(json_error(rejection.status(), rejection.body_text())),
        }
    }
}

/// The status page: one static file that reads the JSON API.
const STATUS_PAGE: &str = include_str!("ui/index.html");

/// Where the page takes its first view's data from (`null`: it fetches it).
const INITIAL_SLOT: &str = r#"<script id="initial" type="application/json">null</script>"#;

/// Jobs on one page of the status page when its address names no `limit` (the API's default
/// is larger): at 10,000 jobs the first paint stays small and quick (docs/performance.md).
const PAGE_LIMIT: usize = 100;

/// The status page with the first view's data (`/api/v1/clusters` and one page of
/// `/api/v1/jobs` for the page's query string: `/?health=critical&name=orders`) in it, so the
/// jobs table is drawn without waiting on a fetch. A query the API refuses shows the first page
/// and says why.
async fn index(Extract(state): Extract<HttpState>, Query(mut q): Query<api::page::ListQuery>) -> Response {
    q.limit = q.limit.or(Some(PAGE_LIMIT));
    let (request, error) = match api::JobsRequest::of(&q) {
        Ok(r) => (r, None),
        Err(e) => {
            let fallback = api::page::ListQuery { limit: Some(PAGE_LIMIT), ..Default::default() };
            (api::JobsRequest::of(&fallback).expect("a valid query"), Some(e.0))
        }
    };
    let alerts = state.app.alerts.read().clone();
    let initial = {
        let s = state.app.state.read();
        let now = Timestamp::now();
        serde_json::json!({
            "clusters": api::clusters(&s, &alerts, now),
            "jobs": api::jobs_page(&s, &alerts, now, &request),
            "error": error,
            "incidents": api::incidents(&alerts, false, now),
        })
    };
    // In a <script> element only "</" could end it early: JSON allows "<" escaped.
    let json = serde_json::to_string(&initial).unwrap_or_else(|_| "null".into()).replace('<', "\\u003c");
    let page = STATUS_PAGE.replacen(
        INITIAL_SLOT,
        &format!(r#"<script id="initial" type="application/json">{json}</script>"#),
        1,
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], page)
        .into_response()
}

fn json_no_cache<T: serde::Serialize>(value: &T) -> Response {
    ([(header::CACHE_CONTROL, "no-store")], axum::Json(value)).into_response()
}

async fn api_clusters(Extract(state): Extract<HttpState>) -> Response {
    let alerts = state.app.alerts.read().clone();
    let view = {
        let s = state.app.state.read();
        api::clusters(&s, &alerts, Timestamp::now())
    };
    json_no_cache(&view)
}

async fn api_jobs(Extract(state): Extract<HttpState>, Query(q): Query<api::page::ListQuery>) -> Response {
    let request = match api::JobsRequest::of(&q) {
        Ok(r) => r,
        Err(e) => return bad_request(e.0),
    };
    let alerts = state.app.alerts.read().clone();
    let view = {
        let s = state.app.state.read();
        api::jobs_page(&s, &alerts, Timestamp::now(), &request)
    };
    json_no_cache(&view)
}

#[derive(serde::Deserialize)]
struct IncidentsQuery {
    members: Option<bool>,
}

async fn api_incidents(Extract(state): Extract<HttpState>, Query(q): Query<IncidentsQuery>) -> Response {
    let alerts = state.app.alerts.read().clone();
    json_no_cache(&api::incidents(&alerts, q.members.unwrap_or(true), Timestamp::now()))
}

async fn api_job(
    Extract(state): Extract<HttpState>,
    Path((cluster, job_id)): Path<(String, String)>,
) -> Response {
    let alerts = state.app.alerts.read().clone();
    let view = {
        let s = state.app.state.read();
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
    json_error(StatusCode::BAD_REQUEST, message)
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
    if limit == 0 || limit > crate::state::store::MAX_QUERY_LIMIT {
        return bad_request(format!("limit={limit}: expected 1 to {}", crate::state::store::MAX_QUERY_LIMIT));
    }
    if let (Some(since), Some(until)) = (q.since, q.until)
        && since > until
    {
        return bad_request(format!("since={since} is after until={until} (both epoch ms)"));
    }
    if !state.app.state.read().clusters().contains_key(&cluster) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({ "error": format!("no cluster {cluster}") })),
        )
            .into_response();
    }
    let query = crate::state::store::Query { since: q.since, until: q.until, limit };
    let (c, j, outcome) = (cluster.clone(), job_id.clone(), q.outcome.clone());
    let found = tokio::task::spawn_blocking(move || {
        let found = store.query(&c, &j, &query, |r| {
            outcome.as_deref().is_none_or(|o| api::outcome_matches(&r.record, o))
        })?;
        Ok::<_, crate::state::store::StoreError>((found, store.query_restores(&c, &j, &query)?))
    })
    .await;
    let ((records, truncated), restores) = match found {
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
    let s = state.app.state.read();
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
        restores: restores.iter().map(api::restore_view).collect(),
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

/// How many of a job's newest stored checkpoints the advice rests on.
const ADVICE_HISTORY: usize = 1000;

/// The advisor's view of one job (`docs/advice.md`): its configuration and recent checkpoints
/// are copied under a short read lock; when they are what the cached advice was worked out
/// from, that is served. Otherwise its store records are read and the findings with their model
/// runs computed on a blocking thread, off the state lock, one job at a time.
async fn api_advice(
    Extract(state): Extract<HttpState>,
    Path((cluster, job_id)): Path<(String, String)>,
) -> Response {
    let found = {
        let s = state.app.state.read();
        s.clusters().get(&cluster).and_then(|c| {
            let job = c.jobs.get(&job_id)?;
            Some((
                job.name.clone(),
                crate::advice::job_inputs(job, c.flink_version.as_deref()),
                job.storage.listing().cloned(),
            ))
        })
    };
    let Some((name, inputs, storage)) = found else {
        return json_error(StatusCode::NOT_FOUND, format!("no job {job_id} in cluster {cluster}"));
    };
    let Some((configuration, recent)) = inputs else {
        return json_error(StatusCode::NOT_FOUND, format!("job {job_id} has not been polled yet"));
    };
    let view = |advice: Arc<crate::advice::Advice>| {
        let advice = crate::advice::with_storage(advice, storage.as_ref());
        json_no_cache(&api::AdviceView {
            cluster: &cluster,
            job_id: &job_id,
            job_name: &name,
            advice: &advice,
        })
    };
    if let Some(advice) = state.advice.get(&cluster, &job_id, &configuration, &recent) {
        return view(advice);
    }
    let Ok(_permit) = state.advice.computing.acquire().await else {
        return json_error(StatusCode::SERVICE_UNAVAILABLE, "the daemon is stopping".to_string());
    };
    // Another request may have worked it out while this one waited.
    if let Some(advice) = state.advice.get(&cluster, &job_id, &configuration, &recent) {
        return view(advice);
    }
    let store = state.app.store.get().cloned();
    let (c, j) = (cluster.clone(), job_id.clone());
    let (configuration_kept, recent_kept) = (configuration.clone(), recent.clone());
    let advice = tokio::task::spawn_blocking(move || {
        // From the store when it has the job's history, else the recent checkpoints in memory.
        let query = crate::state::store::Query { since: None, until: None, limit: ADVICE_HISTORY };
        let stored: Vec<crate::advice::Sample> = store
            .and_then(|store| store.query(&c, &j, &query, |_| true).ok())
            .map(|(records, _)| records.iter().filter_map(crate::advice::Sample::from_stored).collect())
            .unwrap_or_default();
        let samples = if stored.len() >= recent.len() { stored } else { recent };
        Arc::new(crate::advice::advise(&configuration, &samples))
    })
    .await;
    match advice {
        Ok(advice) => {
            state.advice.put(&cluster, &job_id, configuration_kept, recent_kept, advice.clone());
            view(advice)
        }
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(serde::Deserialize)]
struct EventsQuery {
    limit: Option<usize>,
}

async fn api_events(Extract(state): Extract<HttpState>, Query(q): Query<EventsQuery>) -> Response {
    let limit = q.limit.unwrap_or(100).min(crate::state::logs::RECENT_LOG_EVENTS);
    let view = {
        let s = state.app.state.read();
        api::events(&s, limit, Timestamp::now())
    };
    json_no_cache(&view)
}

async fn metrics(Extract(state): Extract<HttpState>, headers: axum::http::HeaderMap) -> Response {
    let (tx, rx) = tokio::sync::oneshot::channel();
    if state.metrics.send(Scrape { app: state.app.clone(), body: tx }).is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "the metrics renderer stopped\n").into_response();
    }
    let Ok(Ok(body)) = tokio::time::timeout(RENDER_TIMEOUT, rx).await else {
        return (StatusCode::SERVICE_UNAVAILABLE, "the metrics renderer did not answer in time\n")
            .into_response();
    };
    // The body is shared with the other scrapes of the same render: a client that reads
    // slowly, or never, holds only its own connection (closed by the listener's idle timeout),
    // never the renderer. It is kept gzipped; a scraper that does not take gzip gets it
    // inflated as it reads, 256 KiB at a time.
    if accepts_gzip(&headers) {
        let slices = (0..body.len().div_ceil(SEND_CHUNK)).map(move |i| {
            Ok::<_, std::convert::Infallible>(
                body.slice(i * SEND_CHUNK..body.len().min((i + 1) * SEND_CHUNK)),
            )
        });
        let headers = [(header::CONTENT_TYPE, prometheus::TEXT_FORMAT), (header::CONTENT_ENCODING, "gzip")];
        return (headers, axum::body::Body::from_stream(futures_util::stream::iter(slices))).into_response();
    }
    let inflater = flate2::read::GzDecoder::new(std::io::Cursor::new(HeldBody(body)));
    let plain = futures_util::stream::unfold(Some(inflater), |inflater| async move {
        let mut inflater = inflater?;
        let mut chunk = vec![0u8; SEND_CHUNK];
        let mut filled = 0;
        // Fill the chunk (a read may return less), so that the client gets few, full ones.
        while filled < chunk.len() {
            match std::io::Read::read(&mut inflater, &mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) => return Some((Err(e), None)),
            }
        }
        chunk.truncate(filled);
        (filled > 0).then(|| (Ok(axum::body::Bytes::from(chunk)), Some(inflater)))
    });
    ([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], axum::body::Body::from_stream(plain)).into_response()
}

/// A rendered body read by one scrape: held (and so counted by the renderer) until it is done.
struct HeldBody(Arc<axum::body::Bytes>);

impl AsRef<[u8]> for HeldBody {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// How much of the body goes out per chunk.
const SEND_CHUNK: usize = 256 << 10;

/// Whether `Accept-Encoding` takes gzip (`gzip` or `*`, without `q=0`).
fn accepts_gzip(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|coding| {
            let mut parts = coding.split(';').map(str::trim);
            let name = parts.next().unwrap_or("");
            let refused =
                parts.any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// A scrape for the metrics thread: whose state, and where the rendered body goes.
struct Scrape {
    app: Arc<AppState>,
    body: tokio::sync::oneshot::Sender<Arc<axum::body::Bytes>>,
}

/// At most this many rendered bodies are kept in memory at once: while clients that read
/// slowly or not at all hold this many, a new scrape gets the newest of them instead of a new
/// render (at most the listener's idle timeout old: those clients are then closed). Memory for
/// `/metrics` stays within this many bodies, gzipped (1.4 MB each for 1,000 jobs, 14 MB for
/// 10,000 with the large-estate settings).
const MAX_BODIES_HELD: usize = 4;

/// How long a scrape waits for the renderer before it answers 503.
const RENDER_TIMEOUT: Duration = Duration::from_secs(30);

/// Starts the thread that renders `/metrics`: one long-lived thread, off the async workers
/// (health checks and the API keep answering), and always the same one, so the allocator
/// reuses one arena's memory from scrape to scrape. It renders the whole body into memory,
/// gzipped part by part as it goes (the plain text of one part at a time), and hands the same
/// body (shared, not copied) to every scrape that arrived meanwhile: 1,000
/// concurrent scrapes cost one or two renders, and the renderer never waits for a client
/// (before, one that did not read held it 10 s per chunk, and five such made a normal scrape
/// wait 49.7 s).
fn metrics_thread() -> std::sync::mpsc::Sender<Scrape> {
    let (tx, rx) = std::sync::mpsc::channel::<Scrape>();
    let spawned = std::thread::Builder::new().name("metrics".into()).spawn(move || {
        let mut renderer = export::TextRenderer::default();
        // Bodies still being sent (or held by clients that do not read).
        let mut held: Vec<std::sync::Weak<axum::body::Bytes>> = Vec::new();
        while let Ok(first) = rx.recv() {
            let mut waiting = vec![first];
            while let Ok(more) = rx.try_recv() {
                waiting.push(more);
            }
            held.retain(|b| b.strong_count() > 0);
            let newest = held.last().and_then(std::sync::Weak::upgrade);
            let body = match newest {
                Some(body) if held.len() >= MAX_BODIES_HELD => body,
                _ => {
                    let body = Arc::new(render_body(&mut renderer, &waiting[0].app));
                    held.push(Arc::downgrade(&body));
                    body
                }
            };
            for scrape in waiting {
                let _ = scrape.body.send(body.clone());
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the metrics thread: {e}");
    }
    tx
}

/// The whole exposition, gzipped: each part is compressed (outside the state lock) before the
/// next is rendered, so the plain text held at once is one part's, a quarter of the jobs'
/// families (at 10,000 jobs ~30 MB instead of the 125 MB body).
fn render_body(renderer: &mut export::TextRenderer, app: &AppState) -> axum::body::Bytes {
    use std::io::Write;
    let now = Timestamp::now();
    let daemon = app.daemon_stats();
    // The fastest level: at 10,000 jobs 125 MB compress to 14 MB in about 0.4 s.
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    for part in export::PARTS {
        // Each part under one read lock: every family is consistent in itself.
        let chunks = {
            let s = app.state.read();
            renderer.render(&s, &daemon, now, part)
        };
        for chunk in chunks {
            // Writing into memory cannot fail.
            gzip.write_all(&chunk).expect("gzip into a Vec");
        }
    }
    let mut body = gzip.finish().expect("gzip into a Vec");
    body.shrink_to_fit();
    axum::body::Bytes::from(body)
}

/// Pending, firing and recently resolved alerts of the daemon's own rules, paged.
async fn alerts(Extract(state): Extract<HttpState>, Query(q): Query<api::page::ListQuery>) -> Response {
    let view = state.app.alerts.read().clone();
    match api::alerts_page(&view, &q) {
        Ok(page) => json_no_cache(&page),
        Err(e) => bad_request(e.0),
    }
}

async fn readyz(Extract(state): Extract<HttpState>) -> Response {
    let waiting: Vec<String> = {
        let s = state.app.state.read();
        s.clusters().iter().filter(|(_, c)| !c.answered_once).map(|(n, _)| n.clone()).collect()
    };
    // A daemon that cannot keep what it counts is not ready either: the reason is in the body.
    let mut reasons = state.app.write_problems();
    if !waiting.is_empty() {
        reasons.insert(0, format!("waiting for the first answer of: {}", waiting.join(", ")));
    }
    if reasons.is_empty() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", reasons.join("\n"))).into_response()
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

    /// The incidents of the rule loop's round, as it left them in the alerts view; the page
    /// embeds them without their jobs.
    #[tokio::test]
    async fn the_incidents_are_served_as_the_rule_round_found_them() {
        use crate::rules::incidents::{CauseKind, JobFacts, Symptom, group};
        let (app, router) = app();
        let fact = |id: &str, troubled: bool, tm: &str| JobFacts {
            cluster: "prod".into(),
            job_id: id.into(),
            job_name: id.into(),
            trouble: troubled.then_some((Symptom::Expire, Timestamp(1_000))),
            healthy: !troubled,
            causes: vec![(CauseKind::Taskmanager, tm.into()), (CauseKind::Cluster, "prod".into())],
        };
        let found = group(&[fact("a", true, "tm-7"), fact("b", true, "tm-7"), fact("c", false, "tm-1")]);
        app.alerts.write().incidents = Arc::new(found);
        let (status, body) = get(&router, "/api/v1/incidents").await;
        assert_eq!(status, StatusCode::OK);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let i = &v["incidents"][0];
        assert_eq!(
            (i["cause"]["kind"].as_str(), i["cause"]["value"].as_str()),
            (Some("taskmanager"), Some("tm-7"))
        );
        assert_eq!((i["jobs"].as_u64(), i["healthy_without"].as_u64()), (Some(2), Some(1)));
        assert_eq!(i["members"].as_array().map(Vec::len), Some(2), "{body}");
        let (_, page) = get(&router, "/").await;
        assert!(
            page.contains("all with subtasks on TaskManager tm-7; the 1 job without it is healthy"),
            "the page embeds the sentence"
        );
        let (_, bare) = get(&router, "/api/v1/incidents?members=false").await;
        let v: serde_json::Value = serde_json::from_str(&bare).unwrap();
        assert_eq!(v["incidents"][0]["members"].as_array().map(Vec::len), Some(0), "{bare}");
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
        use crate::observe::{CheckpointCounts, FinishedCheckpoint, JobKey, JobPoll};
        let (app, router) = app();
        let (status, page) = get(&router, "/").await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains("<title>checkpoint-sentinel</title>") && page.contains("/api/v1/jobs"));
        assert!(
            page.contains(r#"<script id="initial" type="application/json">{"#),
            "no first view in the page"
        );
        let finished = FinishedCheckpoint::completed(7, Timestamp(1_000), 60_000)
            .failed("Checkpoint expired before completing.")
            .acknowledged(1, 2);
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
            deferred: Default::default(),
        }));
        // The page carries the jobs as the API shows them, with "<" escaped inside its script.
        let (_, page) = get(&router, "/").await;
        let (_, json) = page.split_once(r#"<script id="initial" type="application/json">"#).unwrap();
        let (json, _) = json.split_once("</script>").unwrap();
        let initial: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(initial["jobs"]["jobs"][0]["name"], "orders", "{json}");
        assert_eq!(initial["clusters"]["clusters"][0]["name"], "prod", "{json}");
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

    #[test]
    fn gzip_is_taken_when_offered_and_not_refused() {
        let with = |value: &str| {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, value.parse().unwrap());
            accepts_gzip(&headers)
        };
        assert!(with("gzip") && with("identity, GZIP") && with("br;q=1.0, gzip;q=0.5") && with("*"));
        assert!(!with("identity") && !with("gzip;q=0") && !with("deflate, br") && !with("x-gzip"));
        assert!(!accepts_gzip(&axum::http::HeaderMap::new()));
    }

    #[tokio::test]
    async fn metrics_are_gzipped_when_the_scraper_asks() {
        let (_, router) = app();
        let (_, plain) = get(&router, "/metrics").await;
        let request = Request::get("/metrics").header(header::ACCEPT_ENCODING, "gzip").body(Body::empty());
        let response = router.clone().oneshot(request.unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(response.headers()[header::CONTENT_TYPE], prometheus::TEXT_FORMAT);
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&body[..]), &mut text).unwrap();
        // The process figures differ between two scrapes; the rest is the same body.
        let stable =
            |t: &str| t.lines().filter(|l| !l.starts_with("process_")).collect::<Vec<_>>().join("\n");
        assert_eq!(stable(&text), stable(&plain));
        assert!(body.len() < plain.len(), "{} gzipped bytes for {} plain", body.len(), plain.len());
        // Without the header: plain text, as before.
        let response =
            router.clone().oneshot(Request::get("/metrics").body(Body::empty()).unwrap()).await.unwrap();
        assert!(response.headers().get(header::CONTENT_ENCODING).is_none());
    }
}
