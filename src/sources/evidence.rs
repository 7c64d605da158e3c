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
pub(crate) enum Request {
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
pub(crate) struct Wanted<R> {
    /// Asked for every round.
    pub(crate) first: Vec<Request>,
    /// Asked for in turn, as the budget leaves room.
    pub(crate) rest: R,
}

/// The requests asked for in turn, indexed without being built: a round makes only the few it
/// takes (at 1,000 jobs a round wants about 5,500 and the budget takes 8).
pub(crate) trait TakenInTurn {
    /// How many there are.
    fn len(&self) -> usize;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The `take` requests from position `start` on, wrapping at the end.
    fn take_from(&self, start: usize, take: usize) -> Vec<Request>;
}

impl TakenInTurn for Vec<Request> {
    fn len(&self) -> usize {
        <[Request]>::len(self)
    }
    fn take_from(&self, start: usize, take: usize) -> Vec<Request> {
        (0..take).map(|k| self[(start + k) % self.len()].clone()).collect()
    }
}

/// Metric names listed once per (job, vertex): its RocksDB metrics.
pub(crate) type NamesByVertex = HashMap<String, HashMap<String, Vec<String>>>;

/// Whether a vertex's metric names are still to be listed, given its job's known ones: the one
/// test both the count of a job's requests and their enumeration use, so that they agree.
fn names_unknown(known: Option<&HashMap<String, Vec<String>>>, vertex_id: &str) -> bool {
    !known.is_some_and(|k| k.contains_key(vertex_id))
}

/// The operators of the watched jobs (each vertex's metric names first while unknown), then
/// the TaskManagers that are not asked for every round, borrowed from the state.
pub(crate) struct InTurn<'a> {
    jobs: Vec<(&'a str, &'a crate::state::JobState)>,
    /// Where each job's requests end in the list.
    ends: Vec<usize>,
    known_vertices: &'a NamesByVertex,
    taskmanagers: Vec<Request>,
}

impl<'a> InTurn<'a> {
    /// One job's requests in order, as (vertex id, operator name, names request or not).
    fn of_job(&self, job: usize) -> impl Iterator<Item = (&'a str, &'a str, bool)> + 'a {
        let (job_id, state) = self.jobs[job];
        let known = self.known_vertices.get(job_id);
        state.operators.iter().flat_map(move |(vertex_id, op)| {
            let unknown = names_unknown(known, vertex_id);
            let names = unknown.then_some((vertex_id.as_str(), op.name.as_str(), true));
            names.into_iter().chain(std::iter::once((vertex_id.as_str(), op.name.as_str(), false)))
        })
    }
}

impl TakenInTurn for InTurn<'_> {
    fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0) + self.taskmanagers.len()
    }

    fn take_from(&self, start: usize, take: usize) -> Vec<Request> {
        let n = self.len();
        let in_jobs = self.ends.last().copied().unwrap_or(0);
        let mut out = Vec::with_capacity(take.min(n));
        let mut pos = start % n.max(1);
        while out.len() < take.min(n) {
            if pos >= in_jobs {
                out.push(self.taskmanagers[pos - in_jobs].clone());
                pos = (pos + 1) % n;
                continue;
            }
            let job = self.ends.partition_point(|&end| end <= pos);
            let begin = if job == 0 { 0 } else { self.ends[job - 1] };
            let job_id = self.jobs[job].0;
            for (vertex_id, operator, names) in self.of_job(job).skip(pos - begin) {
                if out.len() == take.min(n) {
                    break;
                }
                out.push(match names {
                    true => Request::OperatorNames { job_id: job_id.into(), vertex_id: vertex_id.into() },
                    false => Request::Operator {
                        job_id: job_id.into(),
                        vertex_id: vertex_id.into(),
                        operator: operator.into(),
                    },
                });
                pos += 1;
            }
            pos %= n;
        }
        out
    }
}

/// What a round of `cluster` wants; `known_collectors` and `known_vertices` are the names
/// listed already (per TaskManager, per job and vertex).
pub(crate) fn wanted<'a>(
    cluster: &'a ClusterState,
    known_collectors: &HashMap<String, Vec<String>>,
    known_vertices: &'a NamesByVertex,
) -> Wanted<InTurn<'a>> {
    let mut culprits = Vec::new();
    let mut jobs = Vec::new();
    let mut ends = Vec::new();
    let mut listed = 0usize;
    let mut taskmanagers = std::collections::BTreeSet::new();
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
        if let Some(r) = job.recent.back().map(|r| &**r).filter(slow_or_failed) {
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
        let known = known_vertices.get(job_id.as_str());
        let names = job.operators.keys().filter(|v| names_unknown(known, v)).count();
        listed += job.operators.len() + names;
        jobs.push((job_id.as_str(), &**job));
        ends.push(listed);
        for location in job.reported.subtask_locations.values().flatten().flatten() {
            taskmanagers.insert(taskmanager_id(location));
        }
    }
    culprits.sort();
    culprits.truncate(MAX_CULPRITS);
    let tm_request = |id: &str| match known_collectors.contains_key(id) {
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
    let others = taskmanagers.iter().filter(|tm| !seen_tms.contains(**tm)).map(|tm| tm_request(tm));
    // A few TaskManagers are asked for every round (the GC share of the last minute needs a
    // sample at least every minute); many take their turn with the operators.
    let mut in_turn = Vec::new();
    if taskmanagers.len() <= FEW_TASKMANAGERS {
        first.extend(others);
    } else {
        in_turn.extend(others);
    }
    Wanted { first, rest: InTurn { jobs, ends, known_vertices, taskmanagers: in_turn } }
}

/// The requests a round makes within `budget`, the rest taken in turn from `cursor` on:
/// (requests, how many were left out, the next cursor).
pub(crate) fn choose<R: TakenInTurn>(
    wanted: Wanted<R>,
    budget: usize,
    cursor: usize,
) -> (Vec<Request>, u32, usize) {
    let total = wanted.first.len() + wanted.rest.len();
    // Culprits first, but a quarter of the budget stays for the rest when there is any, so that
    // many failing jobs do not starve the operators and TaskManagers.
    let for_first = if wanted.rest.is_empty() { budget } else { budget - budget / 4 };
    let mut chosen: Vec<Request> = wanted.first.into_iter().take(for_first.max(1)).collect();
    let room = budget.saturating_sub(chosen.len());
    let n = wanted.rest.len();
    let mut next = cursor;
    if n > 0 {
        let start = cursor % n;
        let take = room.min(n);
        chosen.extend(wanted.rest.take_from(start, take));
        next = (start + take) % n;
    }
    let cut = (total - chosen.len()) as u32;
    (chosen, cut, next)
}

/// Reads one cluster's evidence.
pub(crate) struct EvidenceSource {
    config: ClusterConfig,
    client: FlinkClient,
    app: Arc<AppState>,
    /// Per TaskManager: its collectors' counter names (from its metric list).
    collectors: HashMap<String, Vec<String>>,
    /// Per job and vertex: its RocksDB metric names (from its metric list).
    rocksdb: NamesByVertex,
    /// How many vertices `rocksdb` holds names of.
    rocksdb_vertices: usize,
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
    pub(crate) fn new(config: ClusterConfig, app: Arc<AppState>) -> Result<Self, ClientBuildError> {
        let client = FlinkClient::new(&config)?;
        Ok(EvidenceSource {
            config,
            client,
            app,
            collectors: HashMap::new(),
            rocksdb: HashMap::new(),
            rocksdb_vertices: 0,
            cursor: 0,
        })
    }

    /// Runs rounds until aborted.
    pub(crate) async fn run(mut self) {
        loop {
            let settings = self.app.evidence.read().clone();
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
    pub(crate) async fn round(&mut self, budget: usize) -> Option<EvidenceRound> {
        let (requests, cut, next) = {
            let state = self.app.state.read();
            let cluster = state.clusters().get(&self.config.name)?;
            let wanted = wanted(cluster, &self.collectors, &self.rocksdb);
            if wanted.first.is_empty() && wanted.rest.is_empty() {
                return None;
            }
            choose(wanted, budget, self.cursor)
        };
        self.cursor = next;
        let slots = self.config.in_flight_bound().clamp(1, budget);
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
                Ok(Answer::OperatorNames((job_id, vertex_id), names)) => {
                    if self.rocksdb_vertices >= MAX_NAMES_CACHED {
                        self.rocksdb.clear();
                        self.rocksdb_vertices = 0;
                    }
                    if self.rocksdb.entry(job_id).or_default().insert(vertex_id, names).is_none() {
                        self.rocksdb_vertices += 1;
                    }
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
                let rocksdb = self.rocksdb.get(job_id).and_then(|v| v.get(vertex_id));
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

    /// A cluster of `jobs` running jobs of `operators` chains each, every subtask on one of
    /// `tms` TaskManagers.
    fn cluster(jobs: usize, operators: usize, tms: usize) -> ClusterState {
        use crate::state::{JobState, OperatorState, PhaseHistograms};
        let window = crate::stats::WindowSpec { window_ms: 600_000, slots: 10 };
        let mut cluster = ClusterState::new(window);
        for j in 0..jobs {
            let mut job = JobState::new(window, format!("job{j}"), "RUNNING".into(), Timestamp(0));
            for o in 0..operators {
                let name = format!("op{o}");
                let state = OperatorState {
                    name: name.clone(),
                    phases: PhaseHistograms::new(window),
                    last_seen: Timestamp(0),
                };
                job.operators.insert(format!("v{j}-{o}"), state);
                job.reported
                    .subtask_locations
                    .insert(name, vec![Some(format!("tm{}:6122-x", (j + o) % tms))]);
            }
            cluster.jobs.insert(format!("j{j:03}"), Box::new(job));
        }
        cluster
    }

    /// Every request the lazy list holds, built one by one: what it stands for.
    fn every_request(wanted: &Wanted<InTurn<'_>>) -> Vec<Request> {
        (0..wanted.rest.len()).flat_map(|i| wanted.rest.take_from(i, 1)).collect()
    }

    #[test]
    fn the_requests_in_turn_are_built_only_for_the_window_a_round_takes() {
        let cluster = cluster(7, 3, 4);
        let collectors: HashMap<String, Vec<String>> = HashMap::from([("tm1:6122-x".into(), vec![])]);
        // Job j001's first vertex has its names listed already.
        let vertices: NamesByVertex =
            HashMap::from([("j001".into(), HashMap::from([("v1-0".to_string(), vec![])]))]);
        let wanted = wanted(&cluster, &collectors, &vertices);
        // 7 jobs × 3 vertices, each with its names request but one, then 4 TaskManagers.
        assert_eq!(wanted.rest.len(), 7 * 3 * 2 - 1 + 4);
        let all = every_request(&wanted);
        assert_eq!(all[0], Request::OperatorNames { job_id: "j000".into(), vertex_id: "v0-0".into() });
        assert_eq!(
            all[1],
            Request::Operator { job_id: "j000".into(), vertex_id: "v0-0".into(), operator: "op0".into() }
        );
        assert_eq!(
            all[6],
            Request::Operator { job_id: "j001".into(), vertex_id: "v1-0".into(), operator: "op0".into() }
        );
        assert_eq!(
            &all[41..],
            [
                Request::TaskManagerNames { id: "tm0:6122-x".into() },
                tm("tm1:6122-x"),
                Request::TaskManagerNames { id: "tm2:6122-x".into() },
                Request::TaskManagerNames { id: "tm3:6122-x".into() },
            ]
        );
        // Any window, wrapping at the end, is that list's.
        for start in [0, 5, 6, 40, 43, 44, 90] {
            for take in [0, 1, 7, 45] {
                let window = wanted.rest.take_from(start, take);
                let expected: Vec<Request> =
                    (0..take).map(|k| all[(start + k) % all.len()].clone()).collect();
                assert_eq!(window, expected, "start {start}, take {take}");
            }
        }
        // A round takes its budget from the cursor on and says how many it left.
        let (chosen, cut, next) = choose(wanted, 8, 43);
        assert_eq!(chosen[..2], all[43..45]);
        assert_eq!(chosen[2..], all[..6]);
        assert_eq!((cut, next), (45 - 8, 6));
    }

    #[test]
    fn a_round_takes_the_culprits_first_then_the_rest_in_turn_within_the_budget() {
        let wanted = || Wanted::<Vec<Request>> {
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
