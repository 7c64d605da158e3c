//! Discrete-event model of checkpoint barriers travelling through a job graph, per subtask.
//!
//! Each channel (upstream subtask → downstream subtask) is a FIFO of data buffers and at most
//! one barrier. Sources receive the trigger, emit the barrier and snapshot; every other subtask
//! processes one buffer at a time (round robin over its inputs) at its processing rate and
//! reacts to barriers by mode, as Flink's barrier handlers do (mission-anchors §4):
//!
//! * **aligned** (`SingleCheckpointBarrierHandler.aligned`): a channel that delivered the
//!   barrier is blocked until every channel has; then snapshot, forward, unblock.
//! * **unaligned**: the barrier overtakes the buffers in the channel; the first one received
//!   triggers the snapshot; buffers the barrier overtook (output side) and buffers received
//!   on not-yet-barriered channels after the snapshot (input side) are persisted.
//! * **aligned with timeout** (`alternating`): aligned until `trigger + timeout`, then every
//!   barrier still queued overtakes and subtasks still aligning snapshot unaligned.
//! * **at-least-once** (`CheckpointBarrierTracker`): nothing blocks; the snapshot is taken when
//!   the last barrier arrives.
//!
//! Every buffer carries whether its producer emitted it before or after its barrier, so the
//! resulting cut can be checked against Chandy-Lamport (see [`ChannelCut`]). Time is in
//! microseconds inside, reported in ms. Deterministic for a seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::model::rng::SplitMix64;
use crate::observe::{OperatorCheckpoint, SubtaskCheckpoint};

/// How barriers are handled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// EXACTLY_ONCE, aligned.
    Aligned,
    /// EXACTLY_ONCE, unaligned from the start (`aligned-checkpoint-timeout` 0).
    Unaligned,
    /// EXACTLY_ONCE, unaligned enabled with `aligned-checkpoint-timeout` > 0.
    AlignedWithTimeout {
        /// The aligned checkpoint timeout, ms after the trigger.
        timeout_ms: u64,
    },
    /// AT_LEAST_ONCE.
    AtLeastOnce,
}

/// How an edge distributes records over the downstream subtasks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Partitioner {
    /// Subtask i → subtask i (equal parallelism).
    Forward,
    /// By key; `hot_share` of the records go to the hot key's subtask (0), the rest uniformly.
    Hash {
        /// Share of records with the hot key, 0..=1.
        hot_share: f64,
    },
    /// Round robin.
    Rebalance,
}

/// A job vertex (operator chain).
#[derive(Clone, Debug, PartialEq)]
pub struct VertexSpec {
    /// Its name, e.g. `Source: fast-source -> fast-throttle`.
    pub name: String,
    /// Parallelism.
    pub parallelism: u32,
    /// For a source: bytes per ms each subtask emits (into each outgoing edge).
    pub source_rate: Option<f64>,
    /// Bytes per ms each subtask processes (ignored for sources).
    pub process_rate: f64,
    /// Subtask 0 processes this many times slower (skew from a hot key's heavy records).
    pub hot_slowdown: f64,
    /// Operator state per subtask, bytes.
    pub state_bytes: u64,
}

/// An edge between two vertices.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeSpec {
    /// Upstream vertex index.
    pub from: usize,
    /// Downstream vertex index.
    pub to: usize,
    /// Distribution.
    pub partitioner: Partitioner,
    /// Bytes already queued in each channel of this edge when the checkpoint is triggered
    /// (the backlog of a backpressured edge).
    pub backlog_bytes: u64,
}

/// A job graph.
#[derive(Clone, Debug, PartialEq)]
pub struct JobGraph {
    /// Vertices; edges refer to them by index.
    pub vertices: Vec<VertexSpec>,
    /// Edges.
    pub edges: Vec<EdgeSpec>,
    /// Size of one network buffer, bytes (the unit of the simulation).
    pub buffer_bytes: u64,
}

/// Sync and async durations from state size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateModel {
    /// Fixed synchronous cost, ms.
    pub(crate) sync_base_ms: f64,
    /// Synchronous cost per MiB of state, ms (copy-on-write snapshot, memtable flush…).
    pub(crate) sync_ms_per_mib: f64,
    /// Fixed asynchronous cost, ms.
    pub(crate) async_base_ms: f64,
    /// Upload throughput of state and persisted in-flight data, bytes per ms.
    pub(crate) upload_bytes_per_ms: f64,
}

impl Default for StateModel {
    fn default() -> Self {
        StateModel {
            sync_base_ms: 1.0,
            sync_ms_per_mib: 0.5,
            async_base_ms: 5.0,
            upload_bytes_per_ms: 100_000.0,
        }
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignmentConfig {
    /// Barrier handling.
    pub mode: Mode,
    /// Sync/async durations.
    pub state: StateModel,
    /// Sources receive the trigger RPC uniformly within this many µs.
    pub trigger_jitter_us: u64,
    /// Give up (the checkpoint would expire) after this much simulated time, ms.
    pub horizon_ms: u64,
}

impl Default for AlignmentConfig {
    fn default() -> Self {
        AlignmentConfig {
            mode: Mode::Aligned,
            state: StateModel::default(),
            trigger_jitter_us: 2_000,
            horizon_ms: 600_000,
        }
    }
}

/// One subtask's part of the checkpoint, durations in ms since the trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct SubtaskResult {
    /// Vertex index.
    pub(crate) vertex: usize,
    /// Subtask index.
    pub(crate) index: u32,
    /// Whether it snapshotted before the horizon.
    pub(crate) acknowledged: bool,
    /// Trigger → first barrier (sources: trigger RPC).
    pub(crate) start_delay_ms: f64,
    /// First barrier → snapshot.
    pub(crate) alignment_ms: f64,
    /// Synchronous snapshot.
    pub(crate) sync_ms: f64,
    /// Asynchronous part (state and persisted in-flight data).
    pub(crate) async_ms: f64,
    /// Trigger → acknowledgement.
    pub(crate) end_to_end_ms: f64,
    /// Bytes processed between the first barrier and the snapshot.
    pub(crate) processed_bytes: u64,
    /// In-flight bytes persisted for this subtask's input channels.
    pub persisted_bytes: u64,
    /// Whether its snapshot was unaligned.
    pub unaligned: bool,
}

/// The cut on one channel, in buffers. Chandy-Lamport requires, for exactly-once,
/// `processed_pre + persisted_pre == emitted_pre` and no post-barrier buffer processed before
/// the snapshot or persisted; aligned mode has nothing persisted; at-least-once loses nothing
/// (`processed_pre == emitted_pre`) but may have processed post-barrier buffers (duplicates on
/// recovery).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelCut {
    /// Buffers the producer emitted before its barrier.
    pub emitted_pre: u64,
    /// Pre-barrier buffers the consumer processed before its snapshot.
    pub processed_pre: u64,
    /// Post-barrier buffers the consumer processed before its snapshot.
    pub processed_post: u64,
    /// Pre-barrier buffers persisted as channel state.
    pub persisted_pre: u64,
    /// Post-barrier buffers persisted (must stay 0).
    pub persisted_post: u64,
}

/// The result of one checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct AlignmentResult {
    /// Per subtask, vertex by vertex.
    pub subtasks: Vec<SubtaskResult>,
    /// Per channel.
    pub channels: Vec<ChannelCut>,
    /// Trigger → last acknowledgement, ms; `None` when some subtask never snapshotted.
    pub end_to_end_ms: Option<f64>,
}

impl AlignmentResult {
    /// The per-operator details as the poller reports them (vertex ids are synthesised from
    /// the vertex index, 32 hex digits like Flink's).
    pub fn operators(&self, graph: &JobGraph) -> Vec<OperatorCheckpoint> {
        graph
            .vertices
            .iter()
            .enumerate()
            .map(|(v, spec)| OperatorCheckpoint {
                vertex_id: vertex_id(v),
                name: spec.name.clone(),
                subtasks: self
                    .subtasks
                    .iter()
                    .filter(|s| s.vertex == v)
                    .map(|s| SubtaskCheckpoint {
                        index: s.index,
                        acknowledged: s.acknowledged,
                        end_to_end_ms: s.acknowledged.then_some(s.end_to_end_ms.round() as u64),
                        start_delay_ms: s.acknowledged.then_some(s.start_delay_ms.round() as u64),
                        alignment_ms: s.acknowledged.then_some(s.alignment_ms.round() as u64),
                        sync_ms: s.acknowledged.then_some(s.sync_ms.round() as u64),
                        async_ms: s.acknowledged.then_some(s.async_ms.round() as u64),
                        processed_bytes: s.acknowledged.then_some(s.processed_bytes),
                        persisted_bytes: s.acknowledged.then_some(s.persisted_bytes),
                        unaligned: s.unaligned,
                        state_size_bytes: None,
                        checkpointed_bytes: None,
                    })
                    .collect(),
            })
            .collect()
    }
}

/// A Flink-looking vertex id for vertex `v`.
pub(crate) fn vertex_id(v: usize) -> String {
    format!("{:032x}", (v as u128 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835))
}

#[derive(Clone, Copy, Debug)]
enum Item {
    Data { pre: bool, persisted: bool },
    Barrier,
}

#[derive(Clone, Debug)]
struct Channel {
    to: usize,
    queue: VecDeque<Item>,
    barrier_emitted: bool,
    barrier_received: bool,
    /// The consumer snapshotted unaligned and has not received this channel's barrier yet:
    /// pre-barrier buffers it processes now are channel state.
    spilling: bool,
    cut: ChannelCut,
}

#[derive(Clone, Debug, Default)]
struct Subtask {
    vertex: usize,
    index: u32,
    inputs: Vec<usize>,
    /// Per outgoing edge: (partitioner, channels by downstream index).
    outputs: Vec<(Partitioner, Vec<usize>)>,
    rr: usize,
    round_robin_out: Vec<usize>,
    busy: bool,
    blocked: Vec<bool>,
    barriers: usize,
    first_barrier_us: Option<u64>,
    snapshot_us: Option<u64>,
    unaligned: bool,
    barrier_emitted: bool,
    processed_in_alignment: u64,
    persisted: u64,
    sync_us: u64,
    /// Pending output of the buffer being processed (emitted when processing finishes).
    in_hand: bool,
    process_us_per_buffer: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A source subtask receives the trigger RPC.
    Trigger(usize),
    /// A source subtask emits its next buffer.
    Emit(usize),
    /// A subtask finished its current buffer or its sync phase.
    Done(usize),
    /// The aligned checkpoint timeout passes.
    AlignmentTimeout,
}

struct Sim<'a> {
    graph: &'a JobGraph,
    config: &'a AlignmentConfig,
    rng: SplitMix64,
    now: u64,
    subtasks: Vec<Subtask>,
    channels: Vec<Channel>,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    timed_out: bool,
    snapshots_left: usize,
    barriers_left: usize,
}

/// Simulates one checkpoint of `graph` triggered at time 0.
pub fn simulate(graph: &JobGraph, config: &AlignmentConfig, seed: u64) -> AlignmentResult {
    let mut sim = Sim::new(graph, config, seed);
    sim.run();
    sim.result()
}

impl<'a> Sim<'a> {
    fn new(graph: &'a JobGraph, config: &'a AlignmentConfig, seed: u64) -> Self {
        let mut subtasks = Vec::new();
        let mut first_of_vertex = Vec::new();
        for (v, spec) in graph.vertices.iter().enumerate() {
            first_of_vertex.push(subtasks.len());
            for i in 0..spec.parallelism.max(1) {
                let slow = if i == 0 { spec.hot_slowdown.max(1.0) } else { 1.0 };
                let per_buffer = graph.buffer_bytes as f64 / spec.process_rate.max(1e-9) * slow * 1000.0;
                subtasks.push(Subtask {
                    vertex: v,
                    index: i,
                    process_us_per_buffer: per_buffer.round().max(1.0) as u64,
                    ..Subtask::default()
                });
            }
        }
        let mut channels = Vec::new();
        let buffers_of = |bytes: u64| bytes.div_ceil(graph.buffer_bytes.max(1));
        for edge in &graph.edges {
            let up = graph.vertices[edge.from].parallelism.max(1) as usize;
            let down = graph.vertices[edge.to].parallelism.max(1) as usize;
            for i in 0..up {
                let producer = first_of_vertex[edge.from] + i;
                let mut out = Vec::new();
                for j in 0..down {
                    if edge.partitioner == Partitioner::Forward && i % down != j {
                        continue;
                    }
                    let consumer = first_of_vertex[edge.to] + j;
                    let backlog = buffers_of(edge.backlog_bytes);
                    let queue: VecDeque<Item> =
                        (0..backlog).map(|_| Item::Data { pre: true, persisted: false }).collect();
                    channels.push(Channel {
                        to: consumer,
                        queue,
                        barrier_emitted: false,
                        barrier_received: false,
                        spilling: false,
                        cut: ChannelCut { emitted_pre: backlog, ..ChannelCut::default() },
                    });
                    subtasks[consumer].inputs.push(channels.len() - 1);
                    out.push(channels.len() - 1);
                }
                subtasks[producer].outputs.push((edge.partitioner, out));
                subtasks[producer].round_robin_out.push(0);
            }
        }
        for s in &mut subtasks {
            s.blocked = vec![false; s.inputs.len()];
            let state = graph.vertices[s.vertex].state_bytes as f64 / (1024.0 * 1024.0);
            s.sync_us =
                ((config.state.sync_base_ms + state * config.state.sync_ms_per_mib) * 1000.0).round() as u64;
        }
        let snapshots_left = subtasks.len();
        let barriers_left = channels.len();
        Sim {
            graph,
            config,
            rng: SplitMix64::new(seed),
            now: 0,
            subtasks,
            channels,
            events: BinaryHeap::new(),
            seq: 0,
            timed_out: false,
            snapshots_left,
            barriers_left,
        }
    }

    fn push(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    fn is_source(&self, s: usize) -> bool {
        self.graph.vertices[self.subtasks[s].vertex].source_rate.is_some()
    }

    fn run(&mut self) {
        for s in 0..self.subtasks.len() {
            if self.is_source(s) {
                let jitter = self.rng.below(self.config.trigger_jitter_us + 1);
                self.push(jitter, Ev::Trigger(s));
                let first = self.rng.below(self.emit_period_us(s) + 1);
                self.push(first, Ev::Emit(s));
            } else {
                self.work(s);
            }
        }
        if let Mode::AlignedWithTimeout { timeout_ms } = self.config.mode {
            self.push(timeout_ms * 1000, Ev::AlignmentTimeout);
        }
        let horizon = self.config.horizon_ms * 1000;
        while let Some(Reverse((at, _, ev))) = self.events.pop() {
            if at > horizon || (self.snapshots_left == 0 && self.barriers_left == 0) {
                break;
            }
            self.now = at;
            match ev {
                Ev::Trigger(s) => self.snapshot(s),
                Ev::Emit(s) => {
                    self.emit_output(s);
                    let period = self.emit_period_us(s);
                    self.push(at + period, Ev::Emit(s));
                }
                Ev::Done(s) => {
                    self.subtasks[s].busy = false;
                    if std::mem::take(&mut self.subtasks[s].in_hand) {
                        self.emit_output(s);
                    }
                    self.work(s);
                }
                Ev::AlignmentTimeout => self.alignment_timeout(),
            }
        }
    }

    fn emit_period_us(&self, s: usize) -> u64 {
        let rate = self.graph.vertices[self.subtasks[s].vertex].source_rate.unwrap_or(1.0).max(1e-9);
        ((self.graph.buffer_bytes as f64 / rate) * 1000.0).round().max(1.0) as u64
    }

    /// Whether barriers overtake buffers now.
    fn overtaking(&self) -> bool {
        match self.config.mode {
            Mode::Unaligned => true,
            Mode::AlignedWithTimeout { .. } => self.timed_out,
            Mode::Aligned | Mode::AtLeastOnce => false,
        }
    }

    /// One buffer into each outgoing edge, to the channel the partitioner picks.
    fn emit_output(&mut self, s: usize) {
        let pre = !self.subtasks[s].barrier_emitted;
        for e in 0..self.subtasks[s].outputs.len() {
            let (partitioner, ref outs) = self.subtasks[s].outputs[e];
            let n = outs.len();
            if n == 0 {
                continue;
            }
            let k = match partitioner {
                Partitioner::Forward => 0,
                Partitioner::Rebalance => {
                    let k = self.subtasks[s].round_robin_out[e] % n;
                    self.subtasks[s].round_robin_out[e] += 1;
                    k
                }
                Partitioner::Hash { hot_share } => {
                    if self.rng.unit() < hot_share {
                        0
                    } else {
                        self.rng.below(n as u64) as usize
                    }
                }
            };
            let c = self.subtasks[s].outputs[e].1[k];
            let channel = &mut self.channels[c];
            channel.queue.push_back(Item::Data { pre, persisted: false });
            if pre {
                channel.cut.emitted_pre += 1;
            }
            let to = channel.to;
            self.work(to);
        }
    }

    /// Lets an idle subtask take its next item(s).
    fn work(&mut self, s: usize) {
        if self.subtasks[s].busy || self.is_source(s) {
            return;
        }
        let n = self.subtasks[s].inputs.len();
        let mut tried = 0;
        while tried < n {
            let slot = self.subtasks[s].rr % n;
            let c = self.subtasks[s].inputs[slot];
            if self.subtasks[s].blocked[slot] || self.channels[c].queue.is_empty() {
                self.subtasks[s].rr += 1;
                tried += 1;
                continue;
            }
            match self.channels[c].queue.pop_front().expect("not empty") {
                Item::Barrier => {
                    self.on_barrier(s, slot);
                    tried = 0; // state changed (unblocked, snapshot): look again from here
                    if self.subtasks[s].busy {
                        return;
                    }
                }
                Item::Data { pre, persisted } => {
                    self.process(s, c, pre, persisted);
                    self.subtasks[s].rr += 1; // round robin between inputs, buffer by buffer
                    return;
                }
            }
        }
    }

    fn process(&mut self, s: usize, c: usize, pre: bool, persisted: bool) {
        let before_snapshot = self.subtasks[s].snapshot_us.is_none();
        let channel = &mut self.channels[c];
        if before_snapshot {
            if pre {
                channel.cut.processed_pre += 1;
            } else {
                channel.cut.processed_post += 1;
            }
        } else if channel.spilling && pre && !persisted {
            // Input-side channel state: received after the unaligned snapshot, before the
            // barrier; processed now, replayed from the checkpoint on recovery.
            channel.cut.persisted_pre += 1;
            self.subtasks[s].persisted += self.graph.buffer_bytes;
        }
        let st = &mut self.subtasks[s];
        if before_snapshot && st.first_barrier_us.is_some() {
            st.processed_in_alignment += self.graph.buffer_bytes;
        }
        st.busy = true;
        st.in_hand = !st.outputs.is_empty();
        let done = self.now + st.process_us_per_buffer;
        self.push(done, Ev::Done(s));
    }

    fn on_barrier(&mut self, s: usize, slot: usize) {
        let c = self.subtasks[s].inputs[slot];
        self.channels[c].barrier_received = true;
        self.channels[c].spilling = false;
        self.barriers_left -= 1;
        let st = &mut self.subtasks[s];
        st.barriers += 1;
        if st.first_barrier_us.is_none() {
            st.first_barrier_us = Some(self.now);
        }
        let all = st.barriers == st.inputs.len();
        if st.snapshot_us.is_some() {
            return; // unaligned: already snapshotted; this channel's spilling just ended
        }
        match self.config.mode {
            Mode::AtLeastOnce => {
                if all {
                    self.snapshot(s);
                }
            }
            Mode::Unaligned => self.snapshot(s),
            Mode::AlignedWithTimeout { .. } if self.timed_out => self.snapshot(s),
            Mode::Aligned | Mode::AlignedWithTimeout { .. } => {
                if all {
                    self.snapshot(s);
                } else {
                    self.subtasks[s].blocked[slot] = true;
                }
            }
        }
    }

    /// Takes the snapshot: forwards the barrier, then the sync phase keeps the task busy.
    fn snapshot(&mut self, s: usize) {
        if self.subtasks[s].snapshot_us.is_some() {
            return;
        }
        let unaligned = self.overtaking() && !self.is_source(s);
        self.subtasks[s].snapshot_us = Some(self.now);
        self.subtasks[s].unaligned = unaligned && self.subtasks[s].barriers < self.subtasks[s].inputs.len();
        self.snapshots_left -= 1;
        if unaligned {
            // Channels whose barrier has not arrived: what is queued now is channel state,
            // and so is whatever pre-barrier data is processed until the barrier comes.
            for i in 0..self.subtasks[s].inputs.len() {
                let c = self.subtasks[s].inputs[i];
                if self.channels[c].barrier_received {
                    continue;
                }
                self.channels[c].spilling = true;
                let bytes = self.persist_queued(c);
                self.subtasks[s].persisted += bytes;
            }
        }
        // Forward the barrier.
        self.subtasks[s].barrier_emitted = true;
        let overtake = self.overtaking();
        let outs: Vec<usize> = self.subtasks[s].outputs.iter().flat_map(|(_, o)| o.iter().copied()).collect();
        for c in outs {
            self.channels[c].barrier_emitted = true;
            if overtake {
                // Output-side channel state: the buffers the barrier overtakes.
                let bytes = self.persist_queued(c);
                let to = self.channels[c].to;
                self.subtasks[to].persisted += bytes;
                self.channels[c].queue.push_front(Item::Barrier);
            } else {
                self.channels[c].queue.push_back(Item::Barrier);
            }
            let to = self.channels[c].to;
            self.work(to);
        }
        for b in self.subtasks[s].blocked.iter_mut() {
            *b = false;
        }
        let st = &mut self.subtasks[s];
        st.busy = true;
        let sync = st.sync_us;
        self.push(self.now + sync, Ev::Done(s));
    }

    /// Marks the queued pre-barrier buffers of channel `c` as persisted; returns their bytes.
    fn persist_queued(&mut self, c: usize) -> u64 {
        let mut n = 0;
        let channel = &mut self.channels[c];
        for item in channel.queue.iter_mut() {
            if let Item::Data { pre: true, persisted } = item
                && !*persisted
            {
                *persisted = true;
                n += 1;
            }
        }
        channel.cut.persisted_pre += n;
        n * self.graph.buffer_bytes
    }

    /// `aligned-checkpoint-timeout` passed: queued barriers overtake, aligning subtasks go
    /// unaligned.
    fn alignment_timeout(&mut self) {
        if self.timed_out {
            return;
        }
        self.timed_out = true;
        for c in 0..self.channels.len() {
            let ch = &self.channels[c];
            if !ch.barrier_emitted || ch.barrier_received {
                continue;
            }
            let Some(pos) = ch.queue.iter().position(|i| matches!(i, Item::Barrier)) else { continue };
            if pos == 0 {
                continue;
            }
            self.channels[c].queue.remove(pos);
            let bytes = self.persist_queued(c);
            let to = self.channels[c].to;
            self.subtasks[to].persisted += bytes;
            self.channels[c].queue.push_front(Item::Barrier);
        }
        for s in 0..self.subtasks.len() {
            let aligning =
                self.subtasks[s].first_barrier_us.is_some() && self.subtasks[s].snapshot_us.is_none();
            if aligning && !self.subtasks[s].busy {
                self.snapshot(s);
            } else {
                self.work(s);
            }
        }
    }

    fn result(&self) -> AlignmentResult {
        let ms = |us: u64| us as f64 / 1000.0;
        let state = &self.config.state;
        let subtasks: Vec<SubtaskResult> = self
            .subtasks
            .iter()
            .enumerate()
            .map(|(i, st)| {
                let spec = &self.graph.vertices[st.vertex];
                let snapshot = st.snapshot_us;
                let first = if self.is_source(i) { snapshot } else { st.first_barrier_us };
                let async_ms = state.async_base_ms
                    + (spec.state_bytes + st.persisted) as f64 / state.upload_bytes_per_ms.max(1e-9);
                let sync_ms = ms(st.sync_us);
                let e2e = snapshot.map(|s| ms(s) + sync_ms + async_ms);
                SubtaskResult {
                    vertex: st.vertex,
                    index: st.index,
                    acknowledged: snapshot.is_some(),
                    start_delay_ms: first.map(ms).unwrap_or(0.0),
                    alignment_ms: match (first, snapshot) {
                        (Some(f), Some(s)) => ms(s - f),
                        _ => 0.0,
                    },
                    sync_ms,
                    async_ms,
                    end_to_end_ms: e2e.unwrap_or(0.0),
                    processed_bytes: st.processed_in_alignment,
                    persisted_bytes: st.persisted,
                    unaligned: st.unaligned,
                }
            })
            .collect();
        let end_to_end_ms = subtasks
            .iter()
            .all(|s| s.acknowledged)
            .then(|| subtasks.iter().map(|s| s.end_to_end_ms).fold(0.0, f64::max));
        AlignmentResult { subtasks, channels: self.channels.iter().map(|c| c.cut).collect(), end_to_end_ms }
    }
}

/// The lab job of the fixtures, scaled: a fast and a slow source unioned into a hash edge to a
/// skewed stateful map, forward to a sink. With `backlog_bytes` on the fast source's edge the
/// fast channels hold the barrier back while the slow ones deliver it at once, so alignment
/// dominates, as in the `backpressure` capture.
pub fn lab_job(parallelism: u32, backlog_bytes: u64, hot_share: f64) -> JobGraph {
    JobGraph {
        vertices: vec![
            VertexSpec {
                name: "Source: fast-source -> fast-throttle".into(),
                parallelism,
                source_rate: Some(2_000.0),
                process_rate: 0.0,
                hot_slowdown: 1.0,
                state_bytes: 2_048,
            },
            VertexSpec {
                name: "Source: slow-source -> slow-throttle".into(),
                parallelism,
                source_rate: Some(20.0),
                process_rate: 0.0,
                hot_slowdown: 1.0,
                state_bytes: 2_048,
            },
            VertexSpec {
                name: "stateful-map".into(),
                parallelism,
                source_rate: None,
                process_rate: 4_000.0,
                hot_slowdown: 4.0,
                state_bytes: 4 * 1024 * 1024,
            },
            VertexSpec {
                name: "discarding-sink: Writer".into(),
                parallelism,
                source_rate: None,
                process_rate: 50_000.0,
                hot_slowdown: 1.0,
                state_bytes: 0,
            },
        ],
        edges: vec![
            EdgeSpec { from: 0, to: 2, partitioner: Partitioner::Hash { hot_share }, backlog_bytes },
            EdgeSpec { from: 1, to: 2, partitioner: Partitioner::Hash { hot_share }, backlog_bytes: 0 },
            EdgeSpec { from: 2, to: 3, partitioner: Partitioner::Forward, backlog_bytes: 0 },
        ],
        buffer_bytes: 4_096,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: Mode) -> AlignmentConfig {
        AlignmentConfig { mode, ..AlignmentConfig::default() }
    }

    #[test]
    fn aligned_backpressure_makes_alignment_dominate() {
        let graph = lab_job(2, 2 * 1024 * 1024, 0.5);
        let r = simulate(&graph, &cfg(Mode::Aligned), 1);
        let map0 = r.subtasks.iter().find(|s| s.vertex == 2 && s.index == 0).unwrap();
        assert!(map0.acknowledged);
        assert!(map0.alignment_ms > 100.0, "{map0:?}");
        assert!(map0.alignment_ms > map0.sync_ms + map0.async_ms, "{map0:?}");
        assert_eq!(map0.persisted_bytes, 0);
        assert!(!map0.unaligned);
        // The slow source's barrier arrives at once: start delay is small.
        assert!(map0.start_delay_ms < 50.0, "{map0:?}");
        assert!(r.end_to_end_ms.unwrap() > map0.alignment_ms);
    }

    #[test]
    fn unaligned_skips_alignment_and_persists_the_backlog() {
        let graph = lab_job(2, 2 * 1024 * 1024, 0.5);
        let aligned = simulate(&graph, &cfg(Mode::Aligned), 1);
        let r = simulate(&graph, &cfg(Mode::Unaligned), 1);
        let map0 = r.subtasks.iter().find(|s| s.vertex == 2 && s.index == 0).unwrap();
        assert!(map0.unaligned);
        assert!(map0.alignment_ms < 5.0, "{map0:?}");
        assert!(map0.persisted_bytes >= 1024 * 1024, "{map0:?}");
        assert!(r.end_to_end_ms.unwrap() < aligned.end_to_end_ms.unwrap());
    }

    #[test]
    fn aligned_with_timeout_switches_at_the_timeout() {
        let graph = lab_job(2, 2 * 1024 * 1024, 0.5);
        let r = simulate(&graph, &cfg(Mode::AlignedWithTimeout { timeout_ms: 50 }), 1);
        let map0 = r.subtasks.iter().find(|s| s.vertex == 2 && s.index == 0).unwrap();
        assert!(map0.unaligned, "{map0:?}");
        let snapshot_at = map0.start_delay_ms + map0.alignment_ms;
        assert!((50.0..60.0).contains(&snapshot_at), "{map0:?}");
        // A long timeout never fires: same as aligned.
        let r = simulate(&graph, &cfg(Mode::AlignedWithTimeout { timeout_ms: 500_000 }), 1);
        assert!(r.subtasks.iter().all(|s| !s.unaligned && s.persisted_bytes == 0));
    }

    #[test]
    fn at_least_once_does_not_block() {
        let graph = lab_job(2, 2 * 1024 * 1024, 0.5);
        let r = simulate(&graph, &cfg(Mode::AtLeastOnce), 1);
        let post: u64 = r.channels.iter().map(|c| c.processed_post).sum();
        assert!(post > 0, "early channels kept flowing past their barrier");
        assert!(r.subtasks.iter().all(|s| s.persisted_bytes == 0));
    }

    #[test]
    fn single_input_alignment_is_zero() {
        let graph = JobGraph {
            vertices: vec![
                VertexSpec {
                    name: "src".into(),
                    parallelism: 1,
                    source_rate: Some(100.0),
                    process_rate: 0.0,
                    hot_slowdown: 1.0,
                    state_bytes: 0,
                },
                VertexSpec {
                    name: "map".into(),
                    parallelism: 1,
                    source_rate: None,
                    process_rate: 50.0,
                    hot_slowdown: 1.0,
                    state_bytes: 0,
                },
            ],
            edges: vec![EdgeSpec {
                from: 0,
                to: 1,
                partitioner: Partitioner::Forward,
                backlog_bytes: 100_000,
            }],
            buffer_bytes: 1_000,
        };
        let r = simulate(&graph, &cfg(Mode::Aligned), 3);
        let map = &r.subtasks[1];
        assert_eq!(map.alignment_ms, 0.0);
        assert!(map.start_delay_ms >= 1_900.0, "100 buffers at 20 ms each: {map:?}");
    }

    #[test]
    fn operators_look_like_the_poller_s() {
        let graph = lab_job(2, 0, 0.0);
        let r = simulate(&graph, &cfg(Mode::Aligned), 9);
        let ops = r.operators(&graph);
        assert_eq!(ops.len(), 4);
        assert_eq!(ops[2].name, "stateful-map");
        assert_eq!(ops[2].vertex_id.len(), 32);
        assert!(ops.iter().all(|o| o.subtasks.len() == 2 && o.subtasks.iter().all(|s| s.acknowledged)));
    }

    #[test]
    fn deterministic_for_a_seed() {
        let graph = lab_job(3, 500_000, 0.3);
        assert_eq!(simulate(&graph, &cfg(Mode::Unaligned), 5), simulate(&graph, &cfg(Mode::Unaligned), 5));
    }
}
