//! The alignment shadow: the alignment engine run on a job's graph and measured load, next to
//! the observed per-subtask start delays and alignments.
//!
//! The graph comes from `/jobs/:id`'s plan; rates, busy and backpressure ratios and output
//! buffer usage from the vertex endpoints. The engine's inputs are derived from them:
//!
//! * a source subtask emits at its measured output rate (bytes per record from the cumulative
//!   I/O counters; rates of subtasks younger than Flink's 60 s meter window come from their
//!   counts over their running time, see `convert::RATE_WINDOW_MS`);
//! * a subtask's capacity is its measured input rate divided by its busy ratio; the slowest
//!   subtask of the whole job is the engine's hot subtask (index 0, subtasks are rotated so
//!   forward edges stay aligned), its slowdown the ratio to its peers' capacity, and the hot
//!   share of a hash edge follows from how the downstream input rates are split;
//! * an edge out of a back-pressured vertex starts with a backlog per channel of the unread
//!   part of its used output buffers (`outPoolUsage` × Flink's default pool of 2 per
//!   subpartition + 8 floating, at most `max-buffers-per-channel` = 10, less the buffer the
//!   consumer is reading and the one the producer is filling: [`unread_buffers`]) of 32 KiB
//!   (the default segment size).
//!
//! The engine then predicts start delay and alignment per operator in the configured mode and
//! in the other one (the what-if). The operator holding the barriers up is the one that adds
//! the most delay to the barriers' way through the graph.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::model::alignment::{
    AlignmentConfig, AlignmentResult, EdgeSpec, JobGraph, Mode, Partitioner, VertexSpec, simulate,
};
use crate::model::replay::median;
use crate::observe::{
    CheckpointSettings, CheckpointStatus, FinishedCheckpoint, JobTopology, SnapshotKind, VertexLoad,
};
use crate::time::human_ms;

/// Flink's default network buffer (memory segment) size, bytes.
pub(crate) const BUFFER_BYTES: u64 = 32 * 1024;
/// `taskmanager.network.memory.max-buffers-per-channel` default.
pub(crate) const MAX_BUFFERS_PER_CHANNEL: f64 = 10.0;
/// Checkpoints kept per operator for the observed medians.
const KEPT: usize = 16;
/// The engine gives up after this much simulated time, ms.
const HORIZON_MS: u64 = 120_000;
/// Below this (predicted and observed), barriers are not held up: no operator is named as
/// holding them, and unaligned checkpoints have nothing to gain, ms.
pub(crate) const NOTABLE_MS: f64 = 100.0;
/// The engine's budget: a job graph with more channels (upstream subtask → downstream
/// subtask pairs; a hash or rebalance edge between two vertices of parallelism P has P×P) or
/// more subtasks than this is not modelled. The engine's cost grows faster than its channels
/// (one run of the lab job with 4,656 channels took 47 ms, with a backlog 330 ms, in a debug
/// build; 32,896 channels took 1.4 s and 4.1 s), and a job at parallelism 1,000 with a hash edge has a
/// million; docs/reliability.md.
pub(crate) const MAX_MODEL_CHANNELS: u64 = 4_096;

/// Why a topology is too large for the engine's budget, or `Ok(())` when it fits.
pub(crate) fn within_budget(topology: &JobTopology) -> Result<(), String> {
    let by_id: BTreeMap<&str, u64> =
        topology.vertices.iter().map(|v| (v.id.as_str(), u64::from(v.parallelism.max(1)))).collect();
    let parallelism = |id: &str| by_id.get(id).copied().unwrap_or(1);
    let subtasks: u64 = topology.vertices.iter().map(|v| u64::from(v.parallelism.max(1))).sum();
    let mut channels = 0u64;
    for e in &topology.edges {
        let (up, down) = (parallelism(&e.from), parallelism(&e.to));
        let edge = if e.ship_strategy.eq_ignore_ascii_case("FORWARD") { up } else { up.saturating_mul(down) };
        channels = channels.saturating_add(edge);
    }
    let widest = topology.vertices.iter().map(|v| v.parallelism.max(1)).max().unwrap_or(1);
    if channels > MAX_MODEL_CHANNELS || subtasks > MAX_MODEL_CHANNELS {
        return Err(format!(
            "not modelled: parallelism {widest} exceeds the model's budget of {MAX_MODEL_CHANNELS} channels \
             (this job graph has {channels} channels between {subtasks} subtasks)"
        ));
    }
    Ok(())
}

/// The engine's mode for a job's settings.
pub(crate) fn mode(settings: &CheckpointSettings) -> Mode {
    if !settings.exactly_once {
        Mode::AtLeastOnce
    } else if settings.unaligned {
        match settings.aligned_checkpoint_timeout_ms {
            Some(t) if t > 0 => Mode::AlignedWithTimeout { timeout_ms: t },
            _ => Mode::Unaligned,
        }
    } else {
        Mode::Aligned
    }
}

/// The mode's name, as the API writes it.
fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Aligned => "aligned",
        Mode::Unaligned => "unaligned",
        Mode::AlignedWithTimeout { .. } => "aligned with timeout",
        Mode::AtLeastOnce => "at-least-once",
    }
}

fn serialize_mode<S: serde::Serializer>(mode: &Mode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(mode_name(*mode))
}

/// A graph ready for the engine, with the way back to Flink's ids and subtask indices.
#[derive(Clone, Debug)]
pub(crate) struct ShadowGraph {
    /// The engine's graph (vertex `i` is `vertex_ids[i]`).
    pub(crate) graph: JobGraph,
    /// Flink's vertex ids by engine index.
    pub(crate) vertex_ids: Vec<String>,
    /// Engine subtask `i` of a vertex with parallelism `p` is Flink subtask `(i + rotation) % p`.
    pub(crate) rotation: u32,
    /// Per engine vertex and subtask: whether the real subtask is saturated (busy ≥ 50 %).
    pub(crate) saturated: Vec<Vec<bool>>,
}

/// Of the buffers a back-pressured subpartition holds, how many buffers' worth of records its
/// consumer has not read yet. Flink counts a buffer against its subpartition from the moment
/// the producer requests it until the consumer recycles it (`LocalBufferPool`), so the count
/// includes the buffer the consumer is reading (half read, on average) and the one the
/// producer is filling. A producer stopped by `max-buffers-per-channel` stopped right after
/// requesting that last buffer (the pool turns unavailable on the request that reaches the
/// limit), so it holds next to nothing; otherwise it is half full on average.
pub(crate) fn unread_buffers(in_use: f64) -> f64 {
    let in_use = in_use.min(MAX_BUFFERS_PER_CHANNEL);
    let filling = if in_use >= MAX_BUFFERS_PER_CHANNEL { 1.0 } else { 0.5 };
    (in_use - 0.5 - filling).max(0.0)
}

/// Builds the engine's graph; `None` when the topology or the load of a vertex is missing.
/// A graph over [`MAX_MODEL_CHANNELS`] is `None` too (see [`within_budget`]).
pub(crate) fn build_graph(topology: &JobTopology, load: &[VertexLoad]) -> Option<ShadowGraph> {
    if topology.vertices.is_empty() || within_budget(topology).is_err() {
        return None;
    }
    let load_of = |id: &str| load.iter().find(|l| l.vertex_id == id);
    for v in &topology.vertices {
        load_of(&v.id)?;
    }
    let rotation = busiest_subtask(topology, load)?;
    let mut vertices = Vec::new();
    let mut saturated = Vec::new();
    for v in &topology.vertices {
        let l = load_of(&v.id)?;
        saturated.push(saturated_subtasks(v, l, rotation));
        vertices.push(if is_source(topology, &v.id) {
            source_spec(v, l)
        } else {
            operator_spec(v, l, rotation)
        });
    }
    let index = |id: &str| topology.vertices.iter().position(|v| v.id == id);
    let mut edges = Vec::new();
    for e in &topology.edges {
        let (Some(from), Some(to)) = (index(&e.from), index(&e.to)) else { continue };
        let down = &topology.vertices[to];
        let partitioner = partitioner(&e.ship_strategy, down, || load_of(&down.id), rotation)?;
        let backlog_bytes = backlog_bytes(load_of(&e.from)?, down.parallelism.max(1));
        edges.push(EdgeSpec { from, to, partitioner, backlog_bytes });
    }
    Some(ShadowGraph {
        graph: JobGraph { vertices, edges, buffer_bytes: BUFFER_BYTES },
        vertex_ids: topology.vertices.iter().map(|v| v.id.clone()).collect(),
        rotation,
        saturated,
    })
}

/// Whether a vertex is a source: no edge leads into it.
fn is_source(topology: &JobTopology, id: &str) -> bool {
    !topology.edges.iter().any(|e| e.to == id)
}

/// Flink's index of engine subtask `sim` of a vertex with parallelism `p`.
fn real_index(sim: u32, rotation: u32, p: u32) -> u32 {
    (sim + rotation) % p.max(1)
}

/// The index of the slowest subtask of the job, the most busy non-source subtask (0 when there
/// is none): the engine's subtasks are rotated by it so that it is the hot subtask, index 0.
/// `None` when a vertex has no load.
fn busiest_subtask(topology: &JobTopology, load: &[VertexLoad]) -> Option<u32> {
    let mut rotation = 0u32;
    let mut busiest = -1.0f64;
    for v in topology.vertices.iter().filter(|v| !is_source(topology, &v.id)) {
        for st in &load.iter().find(|l| l.vertex_id == v.id)?.subtasks {
            // The input rate breaks ties between equally busy subtasks.
            let busy = st.busy_ratio.unwrap_or(0.0) + st.records_in_per_s.unwrap_or(0.0) * 1e-9;
            if busy > busiest {
                busiest = busy;
                rotation = st.index;
            }
        }
    }
    Some(rotation)
}

/// The measured load of engine subtask `sim` of `v`.
fn engine_subtask<'a>(
    v: &crate::observe::TopologyVertex,
    l: &'a VertexLoad,
    rotation: u32,
    sim: u32,
) -> Option<&'a crate::observe::SubtaskLoad> {
    let p = v.parallelism.max(1);
    l.subtasks.iter().find(|s| s.index == real_index(sim, rotation, p))
}

/// Per engine subtask of `v`: whether the real subtask is saturated (busy ≥ 50 %).
fn saturated_subtasks(v: &crate::observe::TopologyVertex, l: &VertexLoad, rotation: u32) -> Vec<bool> {
    let p = v.parallelism.max(1);
    (0..p)
        .map(|i| engine_subtask(v, l, rotation, i).and_then(|s| s.busy_ratio).is_some_and(|b| b >= 0.5))
        .collect()
}

/// The mean of a measure over the subtasks that have it.
fn mean_over(l: &VertexLoad, f: &dyn Fn(&crate::observe::SubtaskLoad) -> Option<f64>) -> Option<f64> {
    let values: Vec<f64> = l.subtasks.iter().filter_map(f).collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A source emits at its measured output rate, in KB/s.
fn source_spec(v: &crate::observe::TopologyVertex, l: &VertexLoad) -> VertexSpec {
    let bpr = mean_over(l, &|s| s.bytes_per_record_out).unwrap_or(100.0);
    let rate = mean_over(l, &|s| s.records_out_per_s).unwrap_or(0.0) * bpr / 1000.0;
    VertexSpec {
        name: v.name.clone(),
        parallelism: v.parallelism.max(1),
        source_rate: Some(rate.clamp(0.001, 10_000.0)),
        process_rate: 0.0,
        hot_slowdown: 1.0,
        state_bytes: 0,
    }
}

/// An operator processes at its peers' capacity (input rate over busy ratio, KB/s); its hot
/// subtask (engine index 0) is slower by the ratio of its own capacity to theirs.
fn operator_spec(v: &crate::observe::TopologyVertex, l: &VertexLoad, rotation: u32) -> VertexSpec {
    let p = v.parallelism.max(1);
    let bpr = mean_over(l, &|s| s.bytes_per_record_in).unwrap_or(100.0);
    let capacity = |sim: u32| {
        let s = engine_subtask(v, l, rotation, sim)?;
        let rate = s.records_in_per_s? * bpr / 1000.0;
        (rate > 0.0).then(|| (rate / s.busy_ratio.unwrap_or(1.0).max(0.01)).min(100_000.0))
    };
    let hot = capacity(0).unwrap_or(100_000.0);
    let peers: Vec<f64> = (1..p).filter_map(capacity).collect();
    let base = if peers.is_empty() { hot } else { peers.iter().sum::<f64>() / peers.len() as f64 };
    VertexSpec {
        name: v.name.clone(),
        parallelism: p,
        source_rate: None,
        process_rate: base.max(0.001),
        hot_slowdown: (base / hot.max(0.001)).max(1.0),
        state_bytes: 0,
    }
}

/// The engine's partitioner for an edge into `down`. A hash edge's hot share follows from how
/// the downstream input rates are split (`down_load` is only needed then; `None` when it is
/// missing).
fn partitioner<'a>(
    ship_strategy: &str,
    down: &crate::observe::TopologyVertex,
    down_load: impl FnOnce() -> Option<&'a VertexLoad>,
    rotation: u32,
) -> Option<Partitioner> {
    Some(match ship_strategy.to_ascii_uppercase().as_str() {
        "FORWARD" => Partitioner::Forward,
        "HASH" => {
            let l = down_load()?;
            let p = down.parallelism.max(1);
            let rate = |sim: u32| {
                engine_subtask(down, l, rotation, sim).and_then(|s| s.records_in_per_s).unwrap_or(0.0)
            };
            let total: f64 = (0..p).map(rate).sum();
            let hot_share = if p > 1 && total > 0.0 {
                let share = rate(0) / total;
                ((p as f64 * share - 1.0) / (p as f64 - 1.0)).clamp(0.0, 1.0)
            } else {
                0.0
            };
            Partitioner::Hash { hot_share }
        }
        _ => Partitioner::Rebalance,
    })
}

/// The backlog per channel an edge out of `up` starts with: the unread part of its used
/// output buffers when `up` is back-pressured (see [`unread_buffers`]), else none. `p` is
/// the downstream parallelism (Flink's pool is 2 buffers per subpartition + 8 floating).
fn backlog_bytes(up: &VertexLoad, p: u32) -> u64 {
    let bp: Vec<f64> = up.subtasks.iter().filter_map(|s| s.backpressure_ratio).collect();
    let backpressured = !bp.is_empty() && bp.iter().sum::<f64>() / bp.len() as f64 >= 0.5;
    if !backpressured {
        return 0;
    }
    let usage: Vec<f64> = up.subtasks.iter().filter_map(|s| s.out_pool_usage).collect();
    let usage = if usage.is_empty() { 1.0 } else { usage.iter().sum::<f64>() / usage.len() as f64 };
    let pool = p as f64 * 2.0 + 8.0;
    (unread_buffers(usage * pool) * BUFFER_BYTES as f64).round() as u64
}

/// The engine's prediction for one operator (its slowest subtask).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OperatorPrediction {
    /// Flink's vertex id.
    pub vertex_id: String,
    /// The operator chain's name.
    pub name: String,
    /// Largest start delay of a subtask, ms.
    pub start_delay_ms: f64,
    /// Largest alignment of a subtask, ms.
    pub alignment_ms: f64,
    /// The Flink subtask with the largest alignment.
    pub slowest_subtask: u32,
    /// How much later its barriers leave than they reached its slowest input, ms.
    pub(crate) added_ms: f64,
}

/// One run of the engine, summarised.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Prediction {
    /// The mode it ran in (written as its name).
    #[serde(serialize_with = "serialize_mode")]
    pub(crate) mode: Mode,
    /// Per operator, in the topology's order.
    pub(crate) operators: Vec<OperatorPrediction>,
    /// Index of the operator holding the barriers up.
    pub(crate) holder: Option<usize>,
    /// In-flight bytes persisted by the saturated subtasks (unaligned), per checkpoint.
    pub(crate) persisted_bytes: u64,
}

fn summarise(sg: &ShadowGraph, result: &AlignmentResult, mode: Mode) -> Prediction {
    let g = &sg.graph;
    let done = |v: usize| {
        result
            .subtasks
            .iter()
            .filter(|s| s.vertex == v)
            .map(|s| s.start_delay_ms + s.alignment_ms)
            .fold(0.0, f64::max)
    };
    let operators: Vec<OperatorPrediction> = g
        .vertices
        .iter()
        .enumerate()
        .map(|(v, spec)| {
            let subtasks: Vec<_> = result.subtasks.iter().filter(|s| s.vertex == v).collect();
            let slowest = subtasks.iter().max_by(|a, b| a.alignment_ms.total_cmp(&b.alignment_ms));
            let upstream = g.edges.iter().filter(|e| e.to == v).map(|e| done(e.from)).fold(0.0, f64::max);
            OperatorPrediction {
                vertex_id: sg.vertex_ids[v].clone(),
                name: spec.name.clone(),
                start_delay_ms: subtasks.iter().map(|s| s.start_delay_ms).fold(0.0, f64::max),
                alignment_ms: subtasks.iter().map(|s| s.alignment_ms).fold(0.0, f64::max),
                slowest_subtask: slowest.map_or(0, |s| (s.index + sg.rotation) % spec.parallelism.max(1)),
                added_ms: (done(v) - upstream).max(0.0),
            }
        })
        .collect();
    let holder = operators
        .iter()
        .enumerate()
        .filter(|(v, _)| g.vertices[*v].source_rate.is_none())
        .max_by(|a, b| a.1.added_ms.total_cmp(&b.1.added_ms))
        .map(|(i, _)| i);
    let persisted_all: u64 = result.subtasks.iter().map(|s| s.persisted_bytes).sum();
    let persisted_saturated: u64 = result
        .subtasks
        .iter()
        .filter(|s| {
            sg.saturated.get(s.vertex).and_then(|v| v.get(s.index as usize)).copied().unwrap_or(false)
        })
        .map(|s| s.persisted_bytes)
        .sum();
    Prediction {
        mode,
        operators,
        holder,
        persisted_bytes: if persisted_saturated > 0 { persisted_saturated } else { persisted_all },
    }
}

/// Runs the engine on a graph in a mode.
pub(crate) fn predict(sg: &ShadowGraph, mode: Mode) -> Prediction {
    let config = AlignmentConfig { mode, horizon_ms: HORIZON_MS, ..AlignmentConfig::default() };
    let result = simulate(&sg.graph, &config, 1);
    summarise(sg, &result, mode)
}

/// One operator's recent completed checkpoints, oldest first, in two flat rings: per checkpoint
/// the largest start delay and alignment of a subtask, and every acknowledged subtask's start
/// delay (a checkpoint's subtasks contiguous). An operator costs two allocations however many
/// checkpoints it keeps; a `Vec` per checkpoint was 64 MB of the heap at 10,000 jobs (issue 31).
#[derive(Clone, Debug, Default)]
struct OperatorRing {
    /// The operator chain's name.
    name: String,
    /// Per checkpoint: (largest start delay ms, largest alignment ms, its entries in `start_delays`).
    checkpoints: VecDeque<(u32, u32, u32)>,
    /// (subtask index, start delay ms) of the checkpoints in `checkpoints`, in their order.
    start_delays: VecDeque<(u32, u32)>,
}

/// Milliseconds kept as `u32` (49 days), saturating.
fn ms32(ms: u64) -> u32 {
    u32::try_from(ms).unwrap_or(u32::MAX)
}

impl OperatorRing {
    /// Adds a checkpoint, dropping the oldest beyond [`KEPT`].
    fn push(
        &mut self,
        start_delay_ms: u64,
        alignment_ms: u64,
        start_delays: impl Iterator<Item = (u32, u64)>,
    ) {
        let before = self.start_delays.len();
        self.start_delays.extend(start_delays.map(|(i, d)| (i, ms32(d))));
        if self.checkpoints.is_empty() {
            // Exactly what a full ring needs, not the next power of two (a third to a half less
            // at 10,000 jobs); a job whose parallelism grows lets `extend` grow it.
            self.checkpoints.reserve_exact(KEPT + 1);
            self.start_delays.reserve_exact(self.start_delays.len() * KEPT);
        }
        let added = (self.start_delays.len() - before) as u32;
        self.checkpoints.push_back((ms32(start_delay_ms), ms32(alignment_ms), added));
        if self.checkpoints.len() > KEPT
            && let Some((_, _, entries)) = self.checkpoints.pop_front()
        {
            self.start_delays.drain(..entries as usize);
        }
    }

    fn median_start_delay_ms(&self) -> u64 {
        median(self.checkpoints.iter().map(|c| u64::from(c.0)).collect())
    }

    fn median_alignment_ms(&self) -> u64 {
        median(self.checkpoints.iter().map(|c| u64::from(c.1)).collect())
    }
}

/// Observed medians of one operator over recent checkpoints.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OperatorObserved {
    /// Flink's vertex id.
    pub vertex_id: String,
    /// The operator chain's name.
    pub(crate) name: String,
    /// Median over checkpoints of the largest start delay of a subtask, ms.
    pub start_delay_ms: u64,
    /// Median over checkpoints of the largest alignment of a subtask, ms.
    pub alignment_ms: u64,
    /// Checkpoints the medians are over.
    pub checkpoints: usize,
}

/// The alignment shadow of one job.
#[derive(Clone, Debug, Default)]
pub struct AlignmentShadow {
    topology: Option<Arc<JobTopology>>,
    load: Vec<VertexLoad>,
    settings: Option<CheckpointSettings>,
    graph: Option<ShadowGraph>,
    configured: Option<Prediction>,
    alternative: Option<Prediction>,
    observed: BTreeMap<String, OperatorRing>,
    e2e: VecDeque<u64>,
    persisted: VecDeque<u64>,
    /// Whether each recent completed checkpoint was unaligned.
    unaligned: VecDeque<bool>,
    /// Why the engine does not run on this job's graph (over [`MAX_MODEL_CHANNELS`]).
    not_modelled: Option<String>,
    /// Whether the engine runs outside `rerun` ([`Self::take_work`], [`Self::finish`]): the
    /// daemon runs it off the state lock. Inline otherwise (tests, `diagnose`).
    deferred: bool,
    /// Bumped whenever the engine's inputs change; a deferred result of older inputs is dropped.
    inputs_version: u64,
    /// A deferred run is due.
    pending: bool,
}

/// One run of the engine to be made outside the state: the graph and the modes, cloned
/// (bounded by [`MAX_MODEL_CHANNELS`]).
#[derive(Clone, Debug)]
pub(crate) struct ModelWork {
    version: u64,
    graph: ShadowGraph,
    configured: Mode,
    other: Option<Mode>,
}

/// The result of a [`ModelWork`], to be handed back with [`AlignmentShadow::finish`].
#[derive(Clone, Debug)]
pub(crate) struct ModelOutput {
    version: u64,
    configured: Prediction,
    alternative: Option<Prediction>,
}

impl ModelWork {
    /// Runs the engine (pure; bounded by the budget, may take tens of milliseconds).
    pub(crate) fn run(&self) -> ModelOutput {
        ModelOutput {
            version: self.version,
            configured: predict(&self.graph, self.configured),
            alternative: self.other.map(|m| predict(&self.graph, m)),
        }
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, v: T) {
    q.push_back(v);
    if q.len() > KEPT {
        q.pop_front();
    }
}

impl AlignmentShadow {
    #[cfg(test)]
    /// An empty shadow.
    pub(crate) fn new() -> Self {
        AlignmentShadow::default()
    }

    /// New settings (re-runs the engine when the mode changes).
    pub(crate) fn set_settings(&mut self, settings: &CheckpointSettings) {
        if self.settings.as_ref().map(mode) != Some(mode(settings)) {
            self.settings = Some(settings.clone());
            self.rerun();
        } else {
            self.settings = Some(settings.clone());
        }
    }

    /// A new graph and load measurement: re-runs the engine.
    pub(crate) fn set_load(&mut self, topology: Option<&Arc<JobTopology>>, load: &[VertexLoad]) {
        if let Some(t) = topology {
            self.topology = Some(Arc::clone(t));
        }
        if !load.is_empty() {
            self.load = load.to_vec();
        }
        self.rerun();
    }

    /// Runs the engine outside [`Self::rerun`] from now on (see [`Self::take_work`]).
    pub(crate) fn defer_runs(&mut self) {
        self.deferred = true;
    }

    fn rerun(&mut self) {
        self.configured = None;
        self.alternative = None;
        self.inputs_version += 1;
        self.pending = false;
        self.not_modelled = self.topology.as_ref().and_then(|t| within_budget(t).err());
        self.graph = self.topology.as_ref().and_then(|t| build_graph(t, &self.load));
        if self.deferred {
            self.pending = self.graph.is_some() && self.settings.is_some();
        } else if let Some(work) = self.take_work() {
            self.finish(work.run());
        }
    }

    /// The engine run that is due, if any (then not due any more).
    pub(crate) fn take_work(&mut self) -> Option<ModelWork> {
        self.pending = false;
        let (Some(sg), Some(settings)) = (&self.graph, &self.settings) else { return None };
        let configured = mode(settings);
        let other = match configured {
            Mode::Aligned | Mode::AlignedWithTimeout { .. } => Some(Mode::Unaligned),
            Mode::Unaligned => Some(Mode::Aligned),
            Mode::AtLeastOnce => None,
        };
        Some(ModelWork { version: self.inputs_version, graph: sg.clone(), configured, other })
    }

    /// Whether a deferred engine run is due.
    pub(crate) fn has_pending_work(&self) -> bool {
        self.pending
    }

    /// Takes the result of a run; dropped when the inputs changed since its [`ModelWork`].
    pub(crate) fn finish(&mut self, output: ModelOutput) {
        if output.version == self.inputs_version {
            self.configured = Some(output.configured);
            self.alternative = output.alternative;
        }
    }

    #[cfg(test)]
    /// Why the engine does not model this job, when its graph is over the budget.
    pub(crate) fn not_modelled(&self) -> Option<&str> {
        self.not_modelled.as_deref()
    }

    /// Records the per-operator phases of a finished checkpoint.
    pub(crate) fn observe(&mut self, checkpoint: &FinishedCheckpoint) {
        if checkpoint.status != CheckpointStatus::Completed
            || checkpoint.kind == SnapshotKind::Savepoint
            || checkpoint.operators.is_empty()
        {
            return;
        }
        for op in &checkpoint.operators {
            let acked: Vec<_> = op.subtasks.iter().filter(|s| s.acknowledged).collect();
            if acked.is_empty() {
                continue;
            }
            if !self.observed.contains_key(&op.vertex_id) {
                let ring = OperatorRing { name: op.name.clone(), ..OperatorRing::default() };
                self.observed.insert(op.vertex_id.clone(), ring);
            }
            let Some(ring) = self.observed.get_mut(&op.vertex_id) else { continue };
            ring.push(
                acked.iter().filter_map(|s| s.start_delay_ms).max().unwrap_or(0),
                acked.iter().filter_map(|s| s.alignment_ms).max().unwrap_or(0),
                acked.iter().filter_map(|s| s.start_delay_ms.map(|d| (s.index, d))),
            );
        }
        if let Some(e2e) = checkpoint.end_to_end_ms {
            push_bounded(&mut self.e2e, e2e);
        }
        if let Some(p) = checkpoint.persisted_bytes {
            push_bounded(&mut self.persisted, p);
        }
        push_bounded(&mut self.unaligned, checkpoint.kind == SnapshotKind::UnalignedCheckpoint);
    }

    #[cfg(test)]
    /// The engine's graph, when the topology and load are known.
    pub(crate) fn graph(&self) -> Option<&ShadowGraph> {
        self.graph.as_ref()
    }

    #[cfg(test)]
    /// The prediction in the configured mode.
    pub(crate) fn prediction(&self) -> Option<&Prediction> {
        self.configured.as_ref()
    }

    /// The observed medians per operator.
    pub fn observed(&self) -> Vec<OperatorObserved> {
        self.observed
            .iter()
            .map(|(id, ring)| OperatorObserved {
                vertex_id: id.clone(),
                name: ring.name.clone(),
                start_delay_ms: ring.median_start_delay_ms(),
                alignment_ms: ring.median_alignment_ms(),
                checkpoints: ring.checkpoints.len(),
            })
            .collect()
    }

    /// The observed median of the largest alignment of one operator, ms.
    pub fn observed_alignment_ms(&self, vertex_id: &str) -> Option<u64> {
        let ring = self.observed.get(vertex_id)?;
        (!ring.checkpoints.is_empty()).then(|| ring.median_alignment_ms())
    }

    /// The median in-flight bytes persisted per checkpoint, observed.
    pub fn observed_persisted_bytes(&self) -> Option<u64> {
        (!self.persisted.is_empty()).then(|| median(self.persisted.iter().copied().collect()))
    }

    /// The operator holding the barriers up, as predicted.
    pub fn holder(&self) -> Option<&OperatorPrediction> {
        let p = self.configured.as_ref()?;
        p.operators.get(p.holder?)
    }

    /// The aligned and unaligned predictions at the holder: (aligned alignment ms, unaligned
    /// alignment ms, unaligned persisted bytes).
    pub fn what_if_numbers(&self) -> Option<(f64, f64, u64)> {
        let (c, a) = (self.configured.as_ref()?, self.alternative.as_ref()?);
        let holder = c.holder?;
        let (aligned, unaligned) = if c.mode == Mode::Unaligned { (a, c) } else { (c, a) };
        Some((
            aligned.operators[holder].alignment_ms,
            unaligned.operators[holder].alignment_ms,
            unaligned.persisted_bytes,
        ))
    }

    /// Whether barriers pass without being held up: the predicted alignment and start delay at
    /// the holder and its observed median alignment (when known) all below [`NOTABLE_MS`].
    fn nothing_held_up(&self) -> bool {
        let Some(h) = self.holder() else { return false };
        h.alignment_ms < NOTABLE_MS
            && h.start_delay_ms < NOTABLE_MS
            && self.observed_alignment_ms(&h.vertex_id).is_none_or(|o| (o as f64) < NOTABLE_MS)
    }

    /// "stateful-map holds the barriers up: …", or that nothing does when the barriers pass
    /// within [`NOTABLE_MS`] (predicted and observed).
    /// "stateful-map holds the barriers up: …", or why the alignment is not modelled.
    pub(crate) fn headline(&self) -> Option<String> {
        if let Some(reason) = &self.not_modelled {
            return Some(format!("alignment {reason}"));
        }
        let h = self.holder()?;
        let observed = self
            .observed_alignment_ms(&h.vertex_id)
            .map(|o| format!(" (observed median ~{})", human_ms(o)))
            .unwrap_or_default();
        if self.nothing_held_up() {
            return Some(format!(
                "no operator holds the barriers up: predicted alignment ~{} at most, at {}{observed}",
                human_ms(h.alignment_ms.round() as u64),
                h.name,
            ));
        }
        Some(format!(
            "{} holds the barriers up: its subtask {} is the slowest; predicted start delay ~{} and \
             alignment ~{}{observed}",
            h.name,
            h.slowest_subtask,
            human_ms(h.start_delay_ms.round() as u64),
            human_ms(h.alignment_ms.round() as u64),
        ))
    }

    /// The unaligned what-if, with its numbers.
    pub(crate) fn what_if(&self) -> Option<String> {
        let (aligned, unaligned, persisted) = self.what_if_numbers()?;
        let mb = persisted as f64 / 1_000_000.0;
        let configured_unaligned = self.configured.as_ref().is_some_and(|c| c.mode == Mode::Unaligned);
        // Nothing to gain: the barriers align within a few ms either way.
        if aligned < NOTABLE_MS && self.nothing_held_up() {
            return Some(if configured_unaligned {
                format!(
                    "aligned checkpoints would do as well here: predicted alignment ~{} aligned, ~{} unaligned",
                    human_ms(aligned.round() as u64),
                    human_ms(unaligned.round() as u64)
                )
            } else {
                format!(
                    "unaligned checkpoints would gain nothing here: alignment is ~{} aligned already",
                    human_ms(aligned.round() as u64)
                )
            });
        }
        Some(if configured_unaligned {
            format!(
                "unaligned checkpoints keep alignment at ~{} instead of ~{} aligned, at the cost of ~{mb:.1} MB \
                 persisted in-flight data per checkpoint",
                human_ms(unaligned.round() as u64),
                human_ms(aligned.round() as u64)
            )
        } else {
            format!(
                "with unaligned checkpoints alignment would drop from ~{} to ~{}, at the cost of ~{mb:.1} MB \
                 persisted in-flight data per checkpoint",
                human_ms(aligned.round() as u64),
                human_ms(unaligned.round() as u64)
            )
        })
    }

    /// Plain contradictions between the configuration and what is observed.
    pub(crate) fn contradictions(&self) -> Vec<String> {
        let mut out = Vec::new();
        let Some(settings) = &self.settings else { return out };
        let max_alignment = self
            .observed
            .keys()
            .filter_map(|id| self.observed_alignment_ms(id).map(|a| (id, a)))
            .max_by_key(|(_, a)| *a);
        let e2e = (!self.e2e.is_empty()).then(|| median(self.e2e.iter().copied().collect()));
        let m = mode(settings);
        if let (Mode::Unaligned, Some((id, a)), Some(e2e)) = (m, max_alignment, e2e)
            && a > 500
            && a * 2 > e2e
        {
            out.push(format!(
                "unaligned checkpoints are configured but alignment dominates: ~{} of the ~{} checkpoint at {}",
                human_ms(a),
                human_ms(e2e),
                self.observed[id].name
            ));
        }
        if let (Mode::AlignedWithTimeout { timeout_ms }, Some((_, a))) = (m, max_alignment)
            && self.unaligned.len() >= 5
            && self.unaligned.iter().all(|u| !u)
            && a > timeout_ms
        {
            out.push(format!(
                "aligned-checkpoint-timeout {} is configured but none of the last {} checkpoints switched to \
                 unaligned although alignment reached ~{}",
                human_ms(timeout_ms),
                self.unaligned.len(),
                human_ms(a)
            ));
        }
        if let (Some(interval), Some((id, a))) = (settings.interval_ms, max_alignment)
            && interval > 0
            && a * 2 > interval
        {
            out.push(format!(
                "alignment ~{} at {} is {} % of the {} interval",
                human_ms(a),
                self.observed[id].name,
                a * 100 / interval,
                human_ms(interval)
            ));
        }
        if let Some(skew) = self.skew() {
            out.push(skew);
        }
        out
    }

    /// One subtask whose start delay is far above its peers' (the skew closest to the sources).
    pub(crate) fn skew(&self) -> Option<String> {
        let mut found: Option<(u64, String)> = None;
        for ring in self.observed.values() {
            let name = &ring.name;
            let mut per_subtask: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            for &(i, d) in &ring.start_delays {
                per_subtask.entry(i).or_default().push(u64::from(d));
            }
            if per_subtask.len() < 2 {
                continue;
            }
            let medians: Vec<(u32, u64)> = per_subtask.into_iter().map(|(i, v)| (i, median(v))).collect();
            let Some(&(worst, high)) = medians.iter().max_by_key(|(_, d)| *d) else { continue };
            let peers = median(medians.iter().filter(|(i, _)| *i != worst).map(|(_, d)| *d).collect());
            if high > 200 && high > 5 * peers.max(1) && found.as_ref().is_none_or(|(h, _)| high < *h) {
                found = Some((
                    high,
                    format!(
                        "skew: {name} subtask {worst} start delay ~{} vs ~{} for its peers",
                        human_ms(high),
                        human_ms(peers)
                    ),
                ));
            }
        }
        found.map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subpartition_at_max_buffers_per_channel_holds_eight_and_a_half_unread_buffers() {
        // outPoolUsage 11/12 of a 2-subpartition pool: the hot subpartition is at the limit.
        assert_eq!(unread_buffers(11.0), 8.5);
        assert_eq!(unread_buffers(MAX_BUFFERS_PER_CHANNEL), 8.5);
        // Below the limit the producer's buffer is half full on average.
        assert_eq!(unread_buffers(4.0), 3.0);
        assert_eq!(unread_buffers(0.5), 0.0);
    }

    use crate::observe::{SubtaskLoad, TopologyEdge, TopologyVertex};

    /// A source and a map joined by a hash edge, both at `parallelism`, with the load of the
    /// first 32 subtasks (as the poller fetches it).
    fn hashed(parallelism: u32) -> (Arc<JobTopology>, Vec<VertexLoad>) {
        let vertex = |id: &str| TopologyVertex { id: id.into(), name: id.into(), parallelism };
        let topology = JobTopology {
            vertices: vec![vertex("src"), vertex("map")],
            edges: vec![TopologyEdge { from: "src".into(), to: "map".into(), ship_strategy: "HASH".into() }],
        };
        let load = |id: &str| VertexLoad {
            vertex_id: id.into(),
            subtasks: (0..parallelism.min(32))
                .map(|index| SubtaskLoad {
                    index,
                    records_in_per_s: Some(100.0),
                    records_out_per_s: Some(100.0),
                    busy_ratio: Some(if index == 0 { 0.9 } else { 0.2 }),
                    ..SubtaskLoad::default()
                })
                .collect(),
            taskmanagers: Vec::new(),
        };
        (Arc::new(topology), vec![load("src"), load("map")])
    }

    fn settings() -> CheckpointSettings {
        CheckpointSettings { exactly_once: true, interval_ms: Some(10_000), ..CheckpointSettings::default() }
    }

    #[test]
    fn a_graph_over_the_budget_is_not_modelled_and_says_why() {
        for parallelism in [1_000, crate::sources::flink::convert::MAX_PARALLELISM] {
            let (topology, load) = hashed(parallelism);
            let mut shadow = AlignmentShadow::new();
            shadow.set_settings(&settings());
            shadow.set_load(Some(&topology), &load);
            assert!(shadow.prediction().is_none() && shadow.graph().is_none());
            let channels = u64::from(parallelism) * u64::from(parallelism);
            assert_eq!(
                shadow.headline().as_deref(),
                Some(
                    format!(
                        "alignment not modelled: parallelism {parallelism} exceeds the model's budget of 4096 \
                         channels (this job graph has {channels} channels between {} subtasks)",
                        2 * parallelism
                    )
                    .as_str()
                )
            );
        }
        // Just within: 45 × 45 = 2,025 channels.
        let (topology, load) = hashed(45);
        let mut shadow = AlignmentShadow::new();
        shadow.set_settings(&settings());
        shadow.set_load(Some(&topology), &load);
        assert!(shadow.not_modelled().is_none());
        assert!(shadow.prediction().is_some(), "a graph within the budget is modelled");
        assert!(shadow.headline().is_some_and(|h| h.contains("holds the barriers up")));
    }

    #[test]
    fn a_deferred_run_is_made_outside_and_a_stale_result_is_dropped() {
        let (topology, load) = hashed(4);
        let mut shadow = AlignmentShadow::new();
        shadow.defer_runs();
        shadow.set_settings(&settings());
        shadow.set_load(Some(&topology), &load);
        assert!(shadow.prediction().is_none() && shadow.has_pending_work());
        let stale = shadow.take_work().unwrap();
        assert!(!shadow.has_pending_work());
        // New load arrives while the engine runs on the old one: its result is dropped.
        shadow.set_load(Some(&topology), &load);
        shadow.finish(stale.run());
        assert!(shadow.prediction().is_none());
        let fresh = shadow.take_work().unwrap();
        shadow.finish(fresh.run());
        assert!(shadow.prediction().is_some());
    }

    /// A completed checkpoint of one operator whose subtasks started after `delays` ms.
    fn completed(id: u64, delays: &[u64]) -> FinishedCheckpoint {
        use crate::observe::{OperatorCheckpoint, SubtaskCheckpoint};
        use crate::time::Timestamp;
        let subtasks = delays
            .iter()
            .enumerate()
            .map(|(i, d)| SubtaskCheckpoint {
                index: i as u32,
                acknowledged: true,
                start_delay_ms: Some(*d),
                alignment_ms: Some(*d / 10),
                ..SubtaskCheckpoint::default()
            })
            .collect();
        FinishedCheckpoint {
            id,
            status: CheckpointStatus::Completed,
            kind: SnapshotKind::Checkpoint,
            triggered_at: Timestamp(0),
            finished_at: Timestamp(0),
            end_to_end_ms: Some(2_000),
            checkpointed_bytes: None,
            full_state_bytes: None,
            processed_bytes: None,
            persisted_bytes: None,
            num_subtasks: delays.len() as u32,
            num_acknowledged: delays.len() as u32,
            failure_message: None,
            operators: vec![OperatorCheckpoint {
                vertex_id: "map".into(),
                name: "stateful-map".into(),
                subtasks,
            }],
            external_path: None,
        }
    }

    #[test]
    fn an_operators_ring_keeps_the_last_sixteen_checkpoints_and_their_subtasks_only() {
        let mut shadow = AlignmentShadow::new();
        // 40 checkpoints in which subtask 2 starts late: a skew.
        for id in 0..40 {
            shadow.observe(&completed(id, &[50, 60, 1_500]));
        }
        let ring = &shadow.observed["map"];
        assert_eq!((ring.checkpoints.len(), ring.start_delays.len()), (KEPT, 3 * KEPT));
        let observed = shadow.observed();
        assert_eq!(
            (observed[0].start_delay_ms, observed[0].alignment_ms, observed[0].checkpoints),
            (1_500, 150, KEPT)
        );
        assert_eq!(
            shadow.skew().as_deref(),
            Some("skew: stateful-map subtask 2 start delay ~1.5 s vs ~50 ms for its peers")
        );
        // 16 more in which it keeps up (and one subtask fewer acknowledges): the late starts
        // have left the ring with their checkpoints, so the skew is gone.
        for id in 40..56 {
            shadow.observe(&completed(id, &[50, 60]));
        }
        let ring = &shadow.observed["map"];
        assert_eq!((ring.checkpoints.len(), ring.start_delays.len()), (KEPT, 2 * KEPT));
        assert_eq!(shadow.skew(), None);
        assert_eq!(shadow.observed()[0].start_delay_ms, 60);
    }
}
