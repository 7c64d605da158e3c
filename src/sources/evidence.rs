//! The evidence source: a task per cluster that reads Flink's metrics endpoints for why
//! checkpoints are slow (subtask load and buffers, TaskManager heap, GC, CPU, memory) and
//! applies each round as one `Observation::Evidence`.
//!
//! Cost bounds: a round runs at most every `[evidence] interval` (never under 10 s, Flink's
//! `metrics.fetcher.update-interval`), makes at most `max_requests_per_round` requests, each
//! asking for many metrics at once, culprits first and the rest in turn over the rounds; what
//! a round leaves out is counted. Every request has the cluster's timeout; a failed one is
//! counted and leaves its part `None`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use crate::app::AppState;
use crate::config::ClusterConfig;
use crate::observe::{CheckpointStatus, EvidenceRound, Observation, OperatorLoad, SubtaskEvidence};
use crate::sources::flink::client::{ClientBuildError, FetchError, FlinkClient};
use crate::sources::flink::metrics;
use crate::state::ClusterState;
use crate::state::evidence::taskmanager_id;
use crate::time::Timestamp;

/// Up to this many TaskManagers are sampled every round, ahead of the operators.
const FEW_TASKMANAGERS: usize = 2;

/// Culprit subtasks looked at per round at most (the newest checkpoints' first).
const MAX_CULPRITS: usize = 64;

/// One request a round may make (fields: the job, vertex, operator chain, subtask, TaskManager
/// it is about).
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Request {
    /// A vertex's subtasks, aggregated (max, avg).
    Operator { job_id: String, vertex_id: String, operator: String },
    /// A vertex's metric names (once: which RocksDB metrics it has).
    OperatorNames { job_id: String, vertex_id: String },
    /// One subtask's own metrics.
    Subtask { job_id: String, vertex_id: String, operator: String, subtask: u32 },
    /// A TaskManager's metric names (once: which collectors it has).
    TaskManagerNames { id: String },
    /// A TaskManager's metrics.
    TaskManager { id: String },
}

/// What a round wants, culprits first: their subtasks and TaskManagers, then every operator and
/// TaskManager of the watched jobs. Read under the state's read lock: no I/O here.
#[derive(Debug, Default, PartialEq)]
pub struct Wanted {
    /// Asked for every round.
    pub first: Vec<Request>,
    /// Asked for in turn, as the budget leaves room.
    pub rest: Vec<Request>,
}

/// What a round of `cluster` wants; `known_*` say which names were listed already.
pub fn wanted(
    cluster: &ClusterState,
    known_collectors: &HashSet<String>,
    known_vertices: &HashSet<(String, String)>,
) -> Wanted {
    let mut culprits = Vec::new();
    let mut operators = Vec::new();
    let mut taskmanagers = Vec::new();
    for (job_id, job) in cluster.jobs.iter().filter(|(_, j)| j.listed && !j.job_state.has_ended()) {
        let vertex_of =
            |name: &str| job.operators.iter().find(|(_, o)| o.name == name).map(|(id, _)| id.clone());
        // The newest checkpoint, when it failed or took half its timeout (as the evidence
        // beside checkpoints is kept for those).
        let timeout_ms = job.settings.as_ref().and_then(|s| s.timeout_ms);
        let slow_or_failed = |r: &&crate::state::CheckpointRecord| {
            r.status == CheckpointStatus::Failed
                || r.end_to_end_ms.zip(timeout_ms).is_some_and(|(e, t)| 2 * e >= t)
        };
        if let Some(r) = job.recent.back().filter(slow_or_failed) {
            let culprit = match (&r.holdout, &r.slowest_subtask) {
                (Some(h), _) => Some((h.operator.as_str(), h.subtask)),
                (None, Some((op, i, _))) => Some((op.as_str(), *i)),
                _ => None,
            };
            if let Some((operator, subtask)) = culprit
                && let Some(vertex_id) = vertex_of(operator)
            {
                let failed = r.status == CheckpointStatus::Failed;
                let tm = job.subtask_location(operator, subtask).map(|l| taskmanager_id(l).to_string());
                culprits.push((
                    !failed,
                    std::cmp::Reverse(r.finished_at),
                    job_id.clone(),
                    vertex_id,
                    operator.to_string(),
                    subtask,
                    tm,
                ));
            }
        }
        for (vertex_id, op) in &job.operators {
            if !known_vertices.contains(&(job_id.clone(), vertex_id.clone())) {
                operators
                    .push(Request::OperatorNames { job_id: job_id.clone(), vertex_id: vertex_id.clone() });
            }
            operators.push(Request::Operator {
                job_id: job_id.clone(),
                vertex_id: vertex_id.clone(),
                operator: op.name.clone(),
            });
        }
        for location in job.subtask_locations.values().flatten().flatten() {
            taskmanagers.push(taskmanager_id(location).to_string());
        }
    }
    culprits.sort();
    culprits.truncate(MAX_CULPRITS);
    let tm_request = |id: &str| match known_collectors.contains(id) {
        true => Request::TaskManager { id: id.to_string() },
        false => Request::TaskManagerNames { id: id.to_string() },
    };
    let mut first = Vec::new();
    let mut seen_tms = HashSet::new();
    for (_, _, job_id, vertex_id, operator, subtask, tm) in culprits {
        first.push(Request::Subtask { job_id, vertex_id, operator, subtask });
        if let Some(tm) = tm
            && seen_tms.insert(tm.clone())
        {
            first.push(tm_request(&tm));
        }
    }
    let mut rest = operators;
    taskmanagers.sort();
    taskmanagers.dedup();
    let others = taskmanagers.iter().filter(|tm| !seen_tms.contains(*tm)).map(|tm| tm_request(tm));
    // A few TaskManagers are asked for every round (the GC share of the last minute needs a
    // sample at least every minute); many take their turn with the operators.
    if taskmanagers.len() <= FEW_TASKMANAGERS {
        first.extend(others);
    } else {
        rest.extend(others);
    }
    Wanted { first, rest }
}

/// The requests a round makes within `budget`, the rest taken in turn from `cursor` on:
/// (requests, how many were left out, the next cursor).
pub fn choose(wanted: Wanted, budget: usize, cursor: usize) -> (Vec<Request>, u32, usize) {
    let total = wanted.first.len() + wanted.rest.len();
    // Culprits first, but a quarter of the budget stays for the rest when there is any, so that
    // many failing jobs do not starve the operators and TaskManagers.
    let for_first = if wanted.rest.is_empty() { budget } else { budget - budget / 4 };
    let mut chosen: Vec<Request> = wanted.first.into_iter().take(for_first.max(1)).collect();
    let room = budget - chosen.len();
    let n = wanted.rest.len();
    let mut next = cursor;
    if n > 0 {
        let start = cursor % n;
        let take = room.min(n);
        chosen.extend((0..take).map(|k| wanted.rest[(start + k) % n].clone()));
        next = (start + take) % n;
    }
    let cut = (total - chosen.len()) as u32;
    (chosen, cut, next)
}

/// Reads one cluster's evidence.
pub struct EvidenceSource {
    config: ClusterConfig,
    client: FlinkClient,
    app: Arc<AppState>,
    /// Per TaskManager: its collectors' counter names (from its metric list).
    collectors: HashMap<String, Vec<String>>,
    /// Per (job, vertex): its RocksDB metric names (from its metric list).
    rocksdb: HashMap<(String, String), Vec<String>>,
    cursor: usize,
}

/// What one request brought.
enum Answer {
    Operator(OperatorLoad),
    OperatorNames((String, String), Vec<String>),
    Subtask(SubtaskEvidence),
    TaskManagerNames(String, Vec<String>),
    TaskManager(crate::observe::TaskManagerSample),
    Nothing,
}

/// Bounds the names cache: TaskManagers and vertices come and go.
const MAX_NAMES_CACHED: usize = 4_096;

impl EvidenceSource {
    /// A source for `config`'s cluster (its own client: same settings, shared connection pool).
    pub fn new(config: ClusterConfig, app: Arc<AppState>) -> Result<Self, ClientBuildError> {
        let client = FlinkClient::new(&config)?;
        Ok(EvidenceSource {
            config,
            client,
            app,
            collectors: HashMap::new(),
            rocksdb: HashMap::new(),
            cursor: 0,
        })
    }

    /// Runs rounds until aborted.
    pub async fn run(mut self) {
        loop {
            let settings = self.app.evidence.read().unwrap_or_else(|e| e.into_inner()).clone();
            tokio::time::sleep(settings.interval.max(crate::config::EvidenceConfig::MIN_INTERVAL)).await;
            if !settings.enabled {
                continue;
            }
            let round = self.round(settings.max_requests_per_round.max(1)).await;
            if let Some(round) = round {
                self.app.apply(&Observation::Evidence(round));
            }
        }
    }

    /// One round: `None` when there is nothing to ask (no watched job with known operators).
    pub async fn round(&mut self, budget: usize) -> Option<EvidenceRound> {
        let wanted = {
            let state = self.app.state.read().unwrap_or_else(|e| e.into_inner());
            let cluster = state.clusters().get(&self.config.name)?;
            let known_collectors = self.collectors.keys().cloned().collect();
            let known_vertices = self.rocksdb.keys().cloned().collect();
            wanted(cluster, &known_collectors, &known_vertices)
        };
        if wanted.first.is_empty() && wanted.rest.is_empty() {
            return None;
        }
        let (requests, cut, next) = choose(wanted, budget, self.cursor);
        self.cursor = next;
        let slots = self.config.max_concurrent_requests.clamp(1, budget);
        // Each request is bounded by the client's timeout; this one bounds the whole round.
        let deadline = self.config.timeout * 2 + Duration::from_secs(1);
        let pending: Vec<_> = requests.iter().map(|r| Box::pin(self.fetch(r))).collect();
        let fetches = futures_util::stream::iter(pending).buffer_unordered(slots).collect::<Vec<_>>();
        let answers = tokio::time::timeout(deadline, fetches).await.unwrap_or_default();
        let mut round = EvidenceRound {
            cluster: self.config.name.clone(),
            requests: requests.len() as u32,
            requests_cut: cut,
            ..Default::default()
        };
        round.errors = (requests.len() - answers.len()) as u32;
        for answer in answers {
            match answer {
                Ok(Answer::Operator(op)) => round.operators.push(op),
                Ok(Answer::Subtask(st)) => round.subtasks.push(st),
                Ok(Answer::TaskManager(tm)) => round.taskmanagers.push(tm),
                Ok(Answer::TaskManagerNames(id, names)) => {
                    if self.collectors.len() >= MAX_NAMES_CACHED {
                        self.collectors.clear();
                    }
                    self.collectors.insert(id, names);
                }
                Ok(Answer::OperatorNames(key, names)) => {
                    if self.rocksdb.len() >= MAX_NAMES_CACHED {
                        self.rocksdb.clear();
                    }
                    self.rocksdb.insert(key, names);
                }
                Ok(Answer::Nothing) => {}
                Err(e) => {
                    round.errors += 1;
                    tracing::debug!(cluster = %self.config.name, error = %e, "evidence request failed");
                }
            }
        }
        round.at = Timestamp::now();
        Some(round)
    }

    async fn fetch(&self, request: &Request) -> Result<Answer, FetchError> {
        let c = &self.client;
        Ok(match request {
            Request::Operator { job_id, vertex_id, operator } => {
                let mut names: Vec<&str> = metrics::SUBTASK_METRICS.to_vec();
                let rocksdb = self.rocksdb.get(&(job_id.clone(), vertex_id.clone()));
                names.extend(rocksdb.into_iter().flatten().map(String::as_str));
                match c.subtasks_metrics(job_id, vertex_id, &names, "max,avg").await? {
                    Some(values) => {
                        let (max, avg, rocksdb) = metrics::operator_load(&values);
                        Answer::Operator(OperatorLoad {
                            job_id: job_id.clone(),
                            vertex_id: vertex_id.clone(),
                            operator: operator.clone(),
                            max,
                            avg,
                            rocksdb,
                        })
                    }
                    None => Answer::Nothing,
                }
            }
            Request::OperatorNames { job_id, vertex_id } => {
                let list = c.subtasks_metrics(job_id, vertex_id, &[], "").await?.unwrap_or_default();
                Answer::OperatorNames((job_id.clone(), vertex_id.clone()), metrics::rocksdb_metrics(&list))
            }
            Request::Subtask { job_id, vertex_id, operator, subtask } => {
                match c.subtask_metrics(job_id, vertex_id, *subtask, &metrics::SUBTASK_METRICS).await? {
                    Some(values) => Answer::Subtask(SubtaskEvidence {
                        job_id: job_id.clone(),
                        operator: operator.clone(),
                        subtask: *subtask,
                        load: metrics::subtask_load(&values, ""),
                    }),
                    None => Answer::Nothing,
                }
            }
            Request::TaskManagerNames { id } => {
                let list = c.taskmanager_metrics(id, &[]).await?.unwrap_or_default();
                Answer::TaskManagerNames(id.clone(), metrics::collector_metrics(&list))
            }
            Request::TaskManager { id } => {
                let mut names: Vec<&str> = metrics::TASKMANAGER_METRICS.to_vec();
                names.extend(self.collectors.get(id).into_iter().flatten().map(String::as_str));
                match c.taskmanager_metrics(id, &names).await? {
                    Some(values) => Answer::TaskManager(metrics::taskmanager_sample(id, &values)),
                    None => Answer::Nothing,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tm(id: &str) -> Request {
        Request::TaskManager { id: id.into() }
    }

    #[test]
    fn a_round_takes_the_culprits_first_then_the_rest_in_turn_within_the_budget() {
        let wanted = || Wanted {
            first: vec![tm("c1"), tm("c2")],
            rest: (0..5).map(|i| tm(&format!("r{i}"))).collect(),
        };
        let (chosen, cut, next) = choose(wanted(), 4, 0);
        assert_eq!(chosen, [tm("c1"), tm("c2"), tm("r0"), tm("r1")]);
        assert_eq!((cut, next), (3, 2));
        // The next round goes on where this one stopped, and wraps.
        let (chosen, _, next) = choose(wanted(), 4, next);
        assert_eq!(chosen[2..], [tm("r2"), tm("r3")]);
        let (chosen, _, _) = choose(wanted(), 5, next + 1);
        assert_eq!(chosen[2..], [tm("r0"), tm("r1"), tm("r2")]);
        // A budget below the culprits cuts culprits too, and everything fits a large one.
        let (chosen, cut, _) = choose(wanted(), 1, 0);
        assert_eq!((chosen, cut), (vec![tm("c1")], 6));
        // Many culprits leave a quarter of the budget to the rest.
        let many = Wanted { first: (0..10).map(|i| tm(&format!("c{i}"))).collect(), rest: vec![tm("r0")] };
        let (chosen, _, _) = choose(many, 8, 0);
        assert_eq!(chosen[6..], [tm("r0")]);
        let (chosen, cut, _) = choose(wanted(), 100, 3);
        assert_eq!((chosen.len(), cut), (7, 0));
    }
}
