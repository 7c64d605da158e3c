//! The HTTP client for one JobManager's REST API (reqwest with rustls).

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::config::{ClusterConfig, Credentials};
use crate::outbound::Authorize;
use crate::sources::flink::dto;

/// Why a request failed. `kind()` is a fixed label value; the text goes to the log only.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No connection (refused, DNS, TLS).
    #[error("GET {path}: cannot connect: {message}")]
    Connect {
        /// Request path.
        path: String,
        /// Detail.
        message: String,
    },
    /// No answer within the timeout.
    #[error("GET {path}: timed out")]
    Timeout {
        /// Request path.
        path: String,
    },
    /// An answer with an error status.
    #[error("GET {path}: HTTP {status}")]
    HttpStatus {
        /// Request path.
        path: String,
        /// The status code.
        status: u16,
    },
    /// The connection broke while the answer's body was read (a reset mid-body).
    #[error("GET {path}: connection broken while reading the answer: {message}")]
    Transport {
        /// Request path.
        path: String,
        /// Detail.
        message: String,
    },
    /// An answer larger than `max_response_bytes`: cut off, not read into memory.
    #[error("GET {path}: answer larger than max_response_bytes ({limit} bytes); not read")]
    TooLarge {
        /// Request path.
        path: String,
        /// The limit.
        limit: u64,
    },
    /// An answer that is not the JSON we expect.
    #[error("GET {path}: cannot decode: {message}")]
    Decode {
        /// Request path.
        path: String,
        /// Detail (serde's message names the field and position).
        message: String,
    },
}

impl FetchError {
    /// A bounded label value for metrics.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            FetchError::Connect { .. } => "connect",
            FetchError::Timeout { .. } => "timeout",
            FetchError::HttpStatus { .. } => "http_status",
            FetchError::Decode { .. } => "decode",
            FetchError::Transport { .. } => "transport",
            FetchError::TooLarge { .. } => "too_large",
        }
    }
}

/// Errors building a client from its configuration.
#[derive(Debug, thiserror::Error)]
#[error("cluster {cluster}: {message}")]
pub struct ClientBuildError {
    cluster: String,
    message: String,
}

impl ClientBuildError {
    /// A setting of `cluster` that no client or poller can be built with.
    pub(crate) fn invalid(cluster: &str, message: String) -> Self {
        ClientBuildError { cluster: cluster.to_string(), message }
    }
}

/// A client for one cluster's REST API. A clone shares the request counter and, when on, the
/// memo ([`FlinkClient::memoised`]).
#[derive(Clone)]
pub(crate) struct FlinkClient {
    base: String,
    http: reqwest::Client,
    credentials: Credentials,
    max_response_bytes: u64,
    /// Requests sent (answered or not), over every clone.
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// A one-shot look's answers by path: a second ask of the same path is answered from here.
    memo: Option<std::sync::Arc<parking_lot::Mutex<Memo>>>,
}

/// The bodies of answered requests by path (`None`: Flink said 404), and the paths that timed
/// out: a TaskManager that does not answer (paused, overloaded) costs a one-shot look one
/// timeout, not one per job that asks for its thread dump.
type Memo = std::collections::HashMap<String, Remembered>;

/// What a one-shot look remembers of a path.
#[derive(Clone)]
enum Remembered {
    /// The answer's body (`None`: 404).
    Body(Option<Vec<u8>>),
    /// No answer within the timeout.
    TimedOut,
}

/// Clients by (timeout, max_concurrent_requests, CA file contents): see [`FlinkClient::new`].
type ClientKey = (Duration, Option<usize>, Option<Vec<u8>>);
static SHARED_CLIENTS: std::sync::LazyLock<
    parking_lot::Mutex<std::collections::HashMap<ClientKey, reqwest::Client>>,
> = std::sync::LazyLock::new(Default::default);
/// Distinct client settings kept at most (the cache starts over beyond).
const MAX_SHARED_CLIENTS: usize = 64;

impl FlinkClient {
    /// Builds a client: resolves secrets and reads the CA file.
    pub(crate) fn new(config: &ClusterConfig) -> Result<Self, ClientBuildError> {
        let fail = |message: String| ClientBuildError { cluster: config.name.clone(), message };
        let pem = match &config.ca_file {
            Some(ca) => Some(std::fs::read(ca).map_err(|e| fail(format!("ca_file {}: {e}", ca.display())))?),
            None => None,
        };
        let credentials = Credentials::resolve(config.basic_auth.as_ref(), config.bearer_token.as_ref(), "")
            .map_err(fail)?;
        // Clusters with the same client settings share one client (it is a handle: connection
        // pools stay per host): each client holds its own TLS roots, about 0.3 MB, which
        // 1,000 discovered clusters paid 1,000 times. Credentials go with each request.
        let key = (config.timeout, config.max_concurrent_requests, pem.clone());
        let mut shared = SHARED_CLIENTS.lock();
        let http = match shared.get(&key) {
            Some(http) => http.clone(),
            None => {
                let mut builder = reqwest::Client::builder()
                    .timeout(config.timeout)
                    .connect_timeout(config.timeout.min(Duration::from_secs(5)))
                    .pool_max_idle_per_host(config.in_flight_bound())
                    .user_agent(concat!("checkpoint-sentinel/", env!("CARGO_PKG_VERSION")));
                if let (Some(pem), Some(ca)) = (&pem, &config.ca_file) {
                    for cert in reqwest::Certificate::from_pem_bundle(pem)
                        .map_err(|e| fail(format!("ca_file {}: {e}", ca.display())))?
                    {
                        builder = builder.add_root_certificate(cert);
                    }
                }
                let http = builder.build().map_err(|e| fail(e.to_string()))?;
                // Bounded: settings are few; a rotated CA file makes one more entry.
                if shared.len() >= MAX_SHARED_CLIENTS {
                    shared.clear();
                }
                shared.insert(key, http.clone());
                http
            }
        };
        Ok(FlinkClient {
            base: config.url.trim_end_matches('/').to_string(),
            http,
            credentials,
            max_response_bytes: config.max_response_bytes,
            sent: Default::default(),
            memo: None,
        })
    }

    /// The same client answering a path it already asked from memory, for a one-shot look
    /// (`diagnose`, `advise`) whose parts ask the JobManager for the same paths (the poller's
    /// round and the report's own fetch): each path costs one request. Never for the daemon,
    /// which asks again because the answers change.
    pub(crate) fn memoised(mut self) -> Self {
        self.memo = Some(Default::default());
        self
    }

    /// Requests sent so far by this client and its clones (the memo's answers are not requests).
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `GET /overview`.
    pub(crate) async fn overview(&self) -> Result<dto::ClusterOverview, FetchError> {
        self.get("/overview").await
    }

    /// `GET /jobs/overview`.
    pub(crate) async fn jobs_overview(&self) -> Result<dto::JobsOverview, FetchError> {
        self.get("/jobs/overview").await
    }

    /// `GET /applications/overview` (2.3+); `None` where the version has no applications.
    pub(crate) async fn applications_overview(
        &self,
    ) -> Result<Option<dto::ApplicationsOverview>, FetchError> {
        self.get_optional("/applications/overview").await
    }

    /// `GET /applications/:id` (2.3+); `None` once it is gone.
    pub(crate) async fn application(&self, id: &str) -> Result<Option<dto::ApplicationDetails>, FetchError> {
        self.get_optional(&format!("/applications/{id}")).await
    }

    /// `GET /jobs/:id/rescales/history` (2.3+); `None` where Flink serves none (404).
    pub(crate) async fn rescale_history(
        &self,
        job_id: &str,
    ) -> Result<Option<Vec<dto::RescaleDetails>>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/rescales/history")).await
    }

    /// `GET /jobs/:id/rescales/details/:rescaleuuid` (2.3+).
    pub(crate) async fn rescale_details(
        &self,
        job_id: &str,
        uuid: &str,
    ) -> Result<Option<dto::RescaleDetails>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/rescales/details/{uuid}")).await
    }

    /// `GET /jobs/:id`.
    pub(crate) async fn job(&self, job_id: &str) -> Result<dto::JobDetails, FetchError> {
        self.get(&format!("/jobs/{job_id}")).await
    }

    /// `GET /jobs/:id/checkpoints/config`; `None` when checkpointing is disabled (404).
    pub(crate) async fn checkpoint_config(
        &self,
        job_id: &str,
    ) -> Result<Option<dto::CheckpointConfig>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/checkpoints/config")).await
    }

    /// `GET /jobs/:id/config`: the restart strategy and global job parameters.
    pub(crate) async fn job_config(&self, job_id: &str) -> Result<Option<dto::JobConfig>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/config")).await
    }

    /// `GET /jobs/:id/jobmanager/config` (1.17+): the configuration the job runs with, key by
    /// key; `None` where the version has no such endpoint.
    pub(crate) async fn job_jobmanager_config(
        &self,
        job_id: &str,
    ) -> Result<Option<Vec<dto::ConfigEntry>>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/jobmanager/config")).await
    }

    /// `GET /jobmanager/config`: the cluster's configuration, key by key.
    pub(crate) async fn jobmanager_config(&self) -> Result<Vec<dto::ConfigEntry>, FetchError> {
        self.get("/jobmanager/config").await
    }

    /// `GET /jobs/:id/metrics`: the names the job lists (no `names`), or their values; `None`
    /// when unknown (404).
    pub(crate) async fn job_metrics(
        &self,
        job_id: &str,
        names: &[&str],
    ) -> Result<Option<Vec<dto::MetricValue>>, FetchError> {
        let query = if names.is_empty() { String::new() } else { format!("?get={}", names.join(",")) };
        self.get_optional(&format!("/jobs/{job_id}/metrics{query}")).await
    }

    /// `GET /jobs/:id/checkpoints`.
    pub(crate) async fn checkpoints(&self, job_id: &str) -> Result<dto::CheckpointingStatistics, FetchError> {
        self.get(&format!("/jobs/{job_id}/checkpoints")).await
    }

    /// `GET /jobs/:id/checkpoints/details/:cp`; `None` once Flink forgot it (404).
    pub(crate) async fn checkpoint_details(
        &self,
        job_id: &str,
        checkpoint_id: u64,
    ) -> Result<Option<dto::CheckpointStatistics>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/checkpoints/details/{checkpoint_id}")).await
    }

    /// `GET /jobs/:id/checkpoints/details/:cp/subtasks/:vertex`; `None` when forgotten (404).
    pub(crate) async fn subtask_details(
        &self,
        job_id: &str,
        checkpoint_id: u64,
        vertex_id: &str,
    ) -> Result<Option<dto::TaskCheckpointDetails>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/checkpoints/details/{checkpoint_id}/subtasks/{vertex_id}"))
            .await
    }

    /// `GET /jobs/:id/vertices/:vertex` (per-subtask I/O counters); `None` when unknown (404).
    pub(crate) async fn vertex(
        &self,
        job_id: &str,
        vertex_id: &str,
    ) -> Result<Option<dto::VertexDetails>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/vertices/{vertex_id}")).await
    }

    /// `GET /jobs/:id/vertices/:vertex/subtasktimes`; `None` when unknown (404).
    pub(crate) async fn subtask_times(
        &self,
        job_id: &str,
        vertex_id: &str,
    ) -> Result<Option<dto::SubtaskTimes>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/vertices/{vertex_id}/subtasktimes")).await
    }

    /// `GET /jobs/:id/vertices/:vertex/backpressure`; `None` when unknown (404).
    pub(crate) async fn vertex_backpressure(
        &self,
        job_id: &str,
        vertex_id: &str,
    ) -> Result<Option<dto::VertexBackPressure>, FetchError> {
        self.get_optional(&format!("/jobs/{job_id}/vertices/{vertex_id}/backpressure")).await
    }

    /// `GET /jobs/:id/vertices/:vertex/metrics?get=…` for the given metric ids; `None` when
    /// unknown (404).
    pub(crate) async fn vertex_metrics(
        &self,
        job_id: &str,
        vertex_id: &str,
        metric_ids: &[String],
    ) -> Result<Option<Vec<dto::MetricValue>>, FetchError> {
        self.get_optional(&format!(
            "/jobs/{job_id}/vertices/{vertex_id}/metrics?get={}",
            metric_ids.join(",")
        ))
        .await
    }

    /// `GET /taskmanagers/:tm/thread-dump` (no version up to 2.3 has a lighter mode of it; the
    /// stack depth is Flink's `cluster.thread-dump.stacktrace-max-depth`); `None` when the
    /// TaskManager is gone (404).
    /// Read up to `limit` bytes.
    pub(crate) async fn thread_dump(
        &self,
        taskmanager_id: &str,
        limit: u64,
    ) -> Result<Option<super::threads::ThreadDump>, FetchError> {
        self.get_capped(&format!("/taskmanagers/{taskmanager_id}/thread-dump"), limit).await
    }

    /// `GET /jobs/:id/vertices/:vertex/flamegraph?type=full&subtaskindex=N` (the subtask's own
    /// samples from 1.17; merged over the vertex before); `None` when unknown (404).
    pub(crate) async fn flame_graph(
        &self,
        job_id: &str,
        vertex_id: &str,
        subtask: u32,
        limit: u64,
    ) -> Result<Option<super::threads::FlameGraph>, FetchError> {
        let path = format!("/jobs/{job_id}/vertices/{vertex_id}/flamegraph?type=full&subtaskindex={subtask}");
        self.get_capped(&path, limit).await
    }

    /// `GET /jobs/:id/vertices/:vertex/subtasks/metrics?get=…&agg=…`: the named metrics
    /// aggregated over the vertex's subtasks; without names, the list of names. `None` when
    /// unknown (404).
    pub(crate) async fn subtasks_metrics(
        &self,
        job_id: &str,
        vertex_id: &str,
        names: &[&str],
        aggs: &str,
    ) -> Result<Option<Vec<dto::AggregatedMetric>>, FetchError> {
        let query =
            if names.is_empty() { String::new() } else { format!("?get={}&agg={aggs}", encode(names)) };
        self.get_optional(&format!("/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics{query}")).await
    }

    /// `GET /jobs/:id/vertices/:vertex/subtasks/:index/metrics?get=…`: one subtask's values.
    pub(crate) async fn subtask_metrics(
        &self,
        job_id: &str,
        vertex_id: &str,
        subtask: u32,
        names: &[&str],
    ) -> Result<Option<Vec<dto::MetricValue>>, FetchError> {
        self.get_optional(&format!(
            "/jobs/{job_id}/vertices/{vertex_id}/subtasks/{subtask}/metrics?get={}",
            encode(names)
        ))
        .await
    }

    /// `GET /taskmanagers/:tm/metrics?get=…`; without names, the list of its metrics' names.
    /// `None` when unknown (404: the TaskManager is gone).
    pub(crate) async fn taskmanager_metrics(
        &self,
        taskmanager: &str,
        names: &[&str],
    ) -> Result<Option<Vec<dto::MetricValue>>, FetchError> {
        let query = if names.is_empty() { String::new() } else { format!("?get={}", encode(names)) };
        let tm: String = url::form_urlencoded::byte_serialize(taskmanager.as_bytes()).collect();
        self.get_optional(&format!("/taskmanagers/{tm}/metrics{query}")).await
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, FetchError> {
        match self.get_optional(path).await? {
            Some(value) => Ok(value),
            None => Err(FetchError::HttpStatus { path: path.to_string(), status: 404 }),
        }
    }

    async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, FetchError> {
        self.get_capped(path, self.max_response_bytes).await
    }

    async fn get_capped<T: DeserializeOwned>(&self, path: &str, limit: u64) -> Result<Option<T>, FetchError> {
        let remembered = self.memo.as_ref().and_then(|m| m.lock().get(path).cloned());
        let body = match remembered {
            Some(Remembered::Body(body)) => body,
            Some(Remembered::TimedOut) => return Err(FetchError::Timeout { path: path.to_string() }),
            None => {
                let fetched = self.fetch_body(path, limit).await;
                if let Some(memo) = &self.memo {
                    match &fetched {
                        Ok(body) => memo.lock().insert(path.to_string(), Remembered::Body(body.clone())),
                        Err(FetchError::Timeout { .. }) => {
                            memo.lock().insert(path.to_string(), Remembered::TimedOut)
                        }
                        Err(_) => None,
                    };
                }
                fetched?
            }
        };
        let Some(body) = body else { return Ok(None) };
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| FetchError::Decode { path: path.to_string(), message: e.to_string() })
    }

    /// One request's body, `None` on a 404.
    async fn fetch_body(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>, FetchError> {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let request = self.http.get(format!("{}{}", self.base, path)).authorize(&self.credentials);
        // reqwest's messages name the URL, and with it a password in the URL: not in our logs.
        let classify = |e: reqwest::Error| {
            let e = e.without_url();
            if e.is_timeout() {
                FetchError::Timeout { path: path.to_string() }
            } else if e.is_decode() || e.is_body() {
                FetchError::Decode { path: path.to_string(), message: e.to_string() }
            } else {
                FetchError::Connect { path: path.to_string(), message: error_chain(&e) }
            }
        };
        let response = request.send().await.map_err(classify)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            return Err(FetchError::HttpStatus { path: path.to_string(), status: status.as_u16() });
        }
        // Read chunk by chunk up to the limit: a 1 GB answer is cut off at the limit, never
        // held (before: 2.27 GB peak RSS).
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(FetchError::TooLarge { path: path.to_string(), limit });
        }
        let mut response = response;
        let mut body = Vec::new();
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(e) if e.is_timeout() => return Err(FetchError::Timeout { path: path.to_string() }),
                Err(e) => {
                    return Err(FetchError::Transport { path: path.to_string(), message: error_chain(&e) });
                }
            };
            if body.len() as u64 + chunk.len() as u64 > limit {
                return Err(FetchError::TooLarge { path: path.to_string(), limit });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Some(body))
    }
}

/// Metric names as one `get` value: each percent-encoded, joined by commas.
fn encode(names: &[&str]) -> String {
    let encoded: Vec<String> =
        names.iter().map(|n| url::form_urlencoded::byte_serialize(n.as_bytes()).collect()).collect();
    encoded.join(",")
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that accepts connections and never answers: a paused TaskManager behind the
    /// JobManager's proxying of its thread dump. Returns its URL and the connections it took.
    async fn silent_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicU32>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        (url, accepted)
    }

    /// A one-shot look asks a path that timed out once only: four jobs on a paused TaskManager
    /// cost one timeout, not four (a `diagnose` look took 40.8 s that way).
    #[tokio::test]
    async fn a_memoised_client_remembers_a_timeout() {
        let (url, accepted) = silent_server().await;
        let config = crate::config::ClusterConfig {
            name: "paused".into(),
            url,
            timeout: Duration::from_millis(200),
            ..Default::default()
        };
        let client = FlinkClient::new(&config).unwrap().memoised();
        for _ in 0..4 {
            let answer = client.thread_dump("tm-1", 1 << 20).await;
            assert!(matches!(answer, Err(FetchError::Timeout { .. })), "{:?}", answer.err());
        }
        assert_eq!(client.requests_sent(), 1);
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Another path is asked: only the one that timed out is remembered.
        assert!(client.thread_dump("tm-2", 1 << 20).await.is_err());
        assert_eq!(client.requests_sent(), 2);
    }
}
