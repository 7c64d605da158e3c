//! The thread looker: a task per cluster that, when a checkpoint is about to expire (in
//! progress for `[thread_dumps] expiry_share` of its timeout) and a subtask has not
//! acknowledged it, fetches that subtask's stack once: Flink's flame graph of the subtask
//! (1.17+, when `rest.flamegraph.enabled` is on) or its TaskManager's thread dump, at most
//! one per TaskManager per `min_interval`. Every request has a timeout and a size cap; each
//! look is counted (`checkpoint_sentinel_thread_dumps_total`). docs/thread-dumps.md.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::app::AppState;
use crate::config::{ClusterConfig, ThreadDumpsConfig};
use crate::observe::{JobKey, Observation, SampleSource, ThreadReport, ThreadSample, first_user_frame};
use crate::sources::flink::client::{ClientBuildError, FetchError, FlinkClient};
use crate::sources::flink::threads::{self, FlameAnswer};
use crate::state::ClusterState;
use crate::time::Timestamp;

/// How often the looker reads the state for checkpoints about to expire.
const TICK: Duration = Duration::from_secs(2);

/// Checkpoints looked at per tick (the rest wait for the next).
const LOOKS_PER_TICK: usize = 2;

/// Vertices whose per-subtask details are fetched to find the pending subtask.
const MAX_VERTICES: usize = 32;

/// Checkpoints remembered as looked at (each is looked at once).
const LOOKED_CAPACITY: usize = 256;

/// A checkpoint about to expire.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Due {
    /// Its job.
    pub(crate) job_id: String,
    /// Its id.
    pub(crate) checkpoint_id: u64,
}

/// The checkpoints of `cluster` in progress at `now` for at least `share` of their timeout,
/// not in `looked`, oldest first.
pub(crate) fn due(
    cluster: &ClusterState,
    now: Timestamp,
    share: f64,
    looked: &BTreeSet<(String, u64)>,
) -> Vec<Due> {
    let mut due: Vec<(Timestamp, Due)> = Vec::new();
    for (job_id, job) in &cluster.jobs {
        let Some(timeout) = job.settings.as_ref().and_then(|s| s.timeout_ms) else { continue };
        for (id, triggered_at) in job.live_in_progress(now) {
            let late = now.since(triggered_at) as f64 >= share * timeout as f64;
            if late && !looked.contains(&(job_id.clone(), id)) {
                due.push((triggered_at, Due { job_id: job_id.clone(), checkpoint_id: id }));
            }
        }
    }
    due.sort_by_key(|(at, _)| *at);
    due.into_iter().map(|(_, d)| d).collect()
}

/// Whether the cluster's Flink samples a single subtask's flame graph (`subtaskindex`, 1.17+).
pub(crate) fn has_subtask_flame_graph(version: Option<&str>) -> bool {
    let mut parts = version.unwrap_or("").split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    major > 1 || (major == 1 && minor >= 17)
}

/// The pending subtask of a checkpoint: its vertex and where it runs.
struct Pending {
    vertex_id: String,
    operator: String,
    parallelism: Option<u32>,
    subtask: u32,
    taskmanager: String,
}

/// One cluster's looker.
pub(crate) struct Looker {
    config: ClusterConfig,
    client: FlinkClient,
    app: Arc<AppState>,
    /// When each TaskManager was last looked at.
    last_look: HashMap<String, Instant>,
    /// Checkpoints already looked at (or given up on).
    looked: BTreeSet<(String, u64)>,
    /// Whether a flame-graph request said `rest.flamegraph.enabled` is off.
    flame_graph_off: bool,
}

impl Looker {
    /// A looker for `config`'s cluster, reporting into `app`.
    pub(crate) fn new(config: ClusterConfig, app: Arc<AppState>) -> Result<Self, ClientBuildError> {
        let client = FlinkClient::new(&config)?;
        Ok(Looker {
            config,
            client,
            app,
            last_look: HashMap::new(),
            looked: BTreeSet::new(),
            flame_graph_off: false,
        })
    }

    /// Looks whenever a checkpoint is about to expire, forever.
    pub(crate) async fn run(mut self) {
        loop {
            tokio::time::sleep(TICK).await;
            let settings = self.app.thread_dumps.read().clone();
            if !settings.enabled {
                continue;
            }
            let (due, version) = {
                let state = self.app.state.read();
                let Some(cluster) = state.clusters().get(&self.config.name) else { continue };
                (
                    due(cluster, Timestamp::now(), settings.expiry_share, &self.looked),
                    cluster.flink_version.clone(),
                )
            };
            for d in due.into_iter().take(LOOKS_PER_TICK) {
                if self.looked.len() >= LOOKED_CAPACITY {
                    self.looked.pop_first();
                }
                self.looked.insert((d.job_id.clone(), d.checkpoint_id));
                self.look(&d, &settings, version.as_deref()).await;
            }
        }
    }

    /// Finds the pending subtask of `d` and looks at its thread.
    async fn look(&mut self, d: &Due, settings: &ThreadDumpsConfig, version: Option<&str>) {
        let timeout = settings.timeout;
        let Some(pending) = self.pending(d, timeout).await else { return };
        let cluster = self.config.name.clone();
        let now = Instant::now();
        if self
            .last_look
            .get(&pending.taskmanager)
            .is_some_and(|at| now.duration_since(*at) < settings.min_interval)
        {
            self.app.count_thread_dump(&cluster, "rate_limited");
            return;
        }
        self.last_look.insert(pending.taskmanager.clone(), now);
        let mut sample = None;
        if settings.flame_graph && !self.flame_graph_off && has_subtask_flame_graph(version) {
            sample = self.flame_graph(d, &pending, settings).await;
        }
        if sample.is_none() {
            sample = self.thread_dump(d, &pending, settings).await;
        }
        if let Some(sample) = sample {
            let key = JobKey { cluster, job_id: d.job_id.clone() };
            self.app.apply(&Observation::ThreadSampled(ThreadReport { key, sample }));
        }
    }

    /// The first pending subtask in the job's vertex order (the most upstream one holding the
    /// barrier back) and its TaskManager.
    async fn pending(&self, d: &Due, timeout: Duration) -> Option<Pending> {
        let job = self.request(timeout, self.client.job(&d.job_id)).await.ok()?;
        for v in job.vertices.iter().take(MAX_VERTICES) {
            let details =
                self.request(timeout, self.client.subtask_details(&d.job_id, d.checkpoint_id, &v.id)).await;
            let Ok(Some(details)) = details else { continue };
            let Some(subtask) = details.subtasks.iter().find(|s| !s.is_completed()).map(|s| s.index) else {
                continue;
            };
            let operator = v.name.clone().unwrap_or_else(|| v.id.clone());
            let vertex = self.request(timeout, self.client.vertex(&d.job_id, &v.id)).await.ok().flatten();
            let from_vertex = vertex.as_ref().and_then(|vx| {
                let s = vx.subtasks.iter().find(|s| s.subtask == subtask)?;
                s.taskmanager_id.clone().filter(|id| !id.is_empty() && id != "(unassigned)")
            });
            // The poller's last placing, `id (endpoint)`: the id is what the REST path takes.
            let taskmanager = from_vertex.or_else(|| {
                let state = self.app.state.read();
                let job = state.clusters().get(&self.config.name)?.jobs.get(&d.job_id)?;
                let at = job.subtask_location(&operator, subtask)?;
                Some(at.split(" (").next().unwrap_or(at).to_string())
            })?;
            return Some(Pending {
                vertex_id: v.id.clone(),
                operator,
                parallelism: v.parallelism,
                subtask,
                taskmanager,
            });
        }
        None
    }

    /// Flink's flame graph of the subtask; `None` (to fall back to a dump) when it is off.
    async fn flame_graph(
        &mut self,
        d: &Due,
        p: &Pending,
        settings: &ThreadDumpsConfig,
    ) -> Option<ThreadSample> {
        let deadline = Instant::now() + settings.timeout;
        let cluster = self.config.name.clone();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let fetch =
                self.client.flame_graph(&d.job_id, &p.vertex_id, p.subtask, settings.max_response_bytes);
            let graph = match self.request(left, fetch).await {
                Ok(Some(graph)) => graph,
                Ok(None) => return None,
                Err(e) => {
                    self.count_error(&e);
                    return None;
                }
            };
            match threads::read_flame_graph(&graph) {
                FlameAnswer::Disabled => {
                    tracing::info!(cluster = %cluster, "rest.flamegraph.enabled is off: thread dumps instead");
                    self.flame_graph_off = true;
                    return None;
                }
                // Flink takes its samples (100 × 50 ms by default) and caches them: ask again.
                FlameAnswer::Waiting if Instant::now() + Duration::from_secs(2) < deadline => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                FlameAnswer::Waiting | FlameAnswer::Nothing => return None,
                FlameAnswer::Stack { frames, stopped_early, hits, of } => {
                    self.app.count_thread_dump(&cluster, "sampled");
                    let user_frame = first_user_frame(&frames);
                    return Some(ThreadSample {
                        checkpoint_id: d.checkpoint_id,
                        operator: p.operator.clone(),
                        subtask: p.subtask,
                        taskmanager: p.taskmanager.clone(),
                        thread: None,
                        taken_at: Timestamp::now(),
                        state: None,
                        frames,
                        user_frame,
                        stopped_early,
                        source: SampleSource::FlameGraph,
                        hits: Some((hits, of)),
                    });
                }
            }
        }
    }

    /// The TaskManager's thread dump, reduced to the subtask's task thread.
    async fn thread_dump(
        &mut self,
        d: &Due,
        p: &Pending,
        settings: &ThreadDumpsConfig,
    ) -> Option<ThreadSample> {
        let cluster = self.config.name.clone();
        let fetch = self.client.thread_dump(&p.taskmanager, settings.max_response_bytes);
        let dump = match self.request(settings.timeout, fetch).await {
            Ok(Some(dump)) => dump,
            Ok(None) => {
                self.app.count_thread_dump(&cluster, "error");
                return None;
            }
            Err(e) => {
                self.count_error(&e);
                return None;
            }
        };
        let sample = threads::task_thread_sample(
            &dump,
            d.checkpoint_id,
            &p.operator,
            p.subtask,
            p.parallelism,
            &p.taskmanager,
            Timestamp::now(),
        );
        self.app.count_thread_dump(&cluster, if sample.is_some() { "taken" } else { "thread_not_found" });
        sample
    }

    fn count_error(&self, e: &FetchError) {
        let cluster = &self.config.name;
        let outcome = match e.kind() {
            "timeout" => "timeout",
            "too_large" => {
                self.app.count_cut(cluster, "thread_dumps", 1);
                "too_large"
            }
            _ => "error",
        };
        tracing::debug!(cluster = %cluster, "thread look failed: {e}");
        self.app.count_thread_dump(cluster, outcome);
    }

    /// `fetch` within `timeout` (a timeout is a [`FetchError::Timeout`]).
    async fn request<T>(
        &self,
        timeout: Duration,
        fetch: impl std::future::Future<Output = Result<T, FetchError>>,
    ) -> Result<T, FetchError> {
        match tokio::time::timeout(timeout, fetch).await {
            Ok(result) => result,
            Err(_) => Err(FetchError::Timeout { path: "thread look".to_string() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subtask_flame_graph_is_there_from_flink_1_17() {
        assert!(!has_subtask_flame_graph(Some("1.14.6")));
        assert!(has_subtask_flame_graph(Some("1.17.2")));
        assert!(has_subtask_flame_graph(Some("2.3.0")));
        assert!(!has_subtask_flame_graph(None));
    }
}
