//! The record types shared by the state's files: the lifetime `Totals`, a job's or operator's
//! `PhaseHistograms` by `Phase`, and the `CheckpointRecord` (with its `Holdout`) kept for the API,
//! the store and the outbox, and the rule of who held a failed checkpoint up (which `job` and
//! `health::culprit` share). Pure: `mod.rs`, `history`, `outbox` and `traced` all use
//! them, and this file uses none of them (no cycle between the state's files).

use crate::observe::{
    CheckpointStatus, FinishedCheckpoint, OperatorCheckpoint, SnapshotKind, SubtaskCheckpoint,
};
use crate::stats::{WindowSpec, WindowedHistogram};
use crate::time::Timestamp;

/// Lifetime checkpoint totals by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Totals {
    /// Completed.
    pub completed: u64,
    /// Failed.
    pub failed: u64,
}

impl Totals {
    /// The total for a status.
    pub(crate) fn get(&self, status: CheckpointStatus) -> u64 {
        match status {
            CheckpointStatus::Completed => self.completed,
            CheckpointStatus::Failed => self.failed,
        }
    }

    /// Adds `n` to the total for a status (saturating).
    pub(crate) fn add(&mut self, status: CheckpointStatus, n: u64) {
        match status {
            CheckpointStatus::Completed => self.completed = self.completed.saturating_add(n),
            CheckpointStatus::Failed => self.failed = self.failed.saturating_add(n),
        }
    }
}

/// The phase and size histograms of a job or operator.
pub struct PhaseHistograms {
    /// End-to-end duration, ms (job level only).
    pub end_to_end: WindowedHistogram,
    /// Alignment duration, ms.
    pub alignment: WindowedHistogram,
    /// Synchronous snapshot duration, ms.
    pub(crate) sync: WindowedHistogram,
    /// Asynchronous snapshot duration, ms.
    pub(crate) async_: WindowedHistogram,
    /// Start delay (trigger to first barrier), ms.
    pub(crate) start_delay: WindowedHistogram,
}

impl PhaseHistograms {
    /// Empty histograms of every phase over `window`.
    pub(crate) fn new(window: WindowSpec) -> Self {
        PhaseHistograms {
            end_to_end: WindowedHistogram::new(window),
            alignment: WindowedHistogram::new(window),
            sync: WindowedHistogram::new(window),
            async_: WindowedHistogram::new(window),
            start_delay: WindowedHistogram::new(window),
        }
    }

    /// The histogram of one phase.
    pub(crate) fn get(&self, phase: Phase) -> &WindowedHistogram {
        match phase {
            Phase::EndToEnd => &self.end_to_end,
            Phase::Alignment => &self.alignment,
            Phase::Sync => &self.sync,
            Phase::Async => &self.async_,
            Phase::StartDelay => &self.start_delay,
        }
    }

    /// The histograms with their phase names, in a fixed order.
    pub(crate) fn iter(&self) -> [(Phase, &WindowedHistogram); 5] {
        [
            (Phase::EndToEnd, &self.end_to_end),
            (Phase::Alignment, &self.alignment),
            (Phase::Sync, &self.sync),
            (Phase::Async, &self.async_),
            (Phase::StartDelay, &self.start_delay),
        ]
    }

    pub(super) fn iter_mut(&mut self) -> [&mut WindowedHistogram; 5] {
        [&mut self.end_to_end, &mut self.alignment, &mut self.sync, &mut self.async_, &mut self.start_delay]
    }
}

/// The phases of a checkpoint whose durations are tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Trigger to the last acknowledgement.
    EndToEnd,
    /// First to last barrier at a subtask.
    Alignment,
    /// Synchronous snapshot.
    Sync,
    /// Asynchronous snapshot.
    Async,
    /// Trigger to the first barrier at a subtask.
    StartDelay,
}

/// A record shared by its job's recent ring, its latest completed or failed checkpoint and the
/// state file's snapshot: a snapshot of every job copies a pointer per record, not the record
/// (issue 31). A change copies it first (`Arc::make_mut`).
pub type SharedRecord = std::sync::Arc<CheckpointRecord>;

/// A finished checkpoint, briefly, for the API and status page. A job keeps
/// [`RECENT_CHECKPOINTS`](super::job::RECENT_CHECKPOINTS) of them, so the rare parts (a failure's
/// holdout, a blocked thread, the evidence) are boxed: 832 bytes inline before, most of them
/// empty `Option`s (issue 31's memory budget).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CheckpointRecord {
    /// Checkpoint id.
    pub id: u64,
    /// Completed or failed.
    pub status: CheckpointStatus,
    /// Checkpoint, unaligned checkpoint or savepoint.
    pub kind: SnapshotKind,
    /// Trigger time.
    pub triggered_at: Timestamp,
    /// Completion or failure time.
    pub finished_at: Timestamp,
    /// End-to-end duration, ms.
    pub end_to_end_ms: Option<u64>,
    /// The slowest phases of any subtask, ms: start delay, alignment, sync, async.
    pub max_phases_ms: Option<[u64; 4]>,
    /// The subtask that acknowledged last: (operator name, subtask index, its ack − trigger).
    pub slowest_subtask: Option<(String, u32, u64)>,
    /// The phases of that slowest subtask, ms: start delay, alignment, sync, async (they add up
    /// to about its ack − trigger, unlike `max_phases_ms`, whose maxima may come from different
    /// subtasks). For the status page's timeline.
    #[serde(default)]
    pub slowest_phases_ms: Option<[u64; 4]>,
    /// Why it failed.
    pub failure_message: Option<String>,
    /// Subtasks that acknowledged, of those that had to (Flink's `num_acknowledged_subtasks`
    /// of `num_subtasks`); `None` in records written before it was kept.
    #[serde(default)]
    pub acknowledged: Option<(u32, u32)>,
    /// A failed checkpoint: the subtask that held it up, i.e. did not acknowledge before it
    /// failed (not the slowest that did acknowledge); `None` for a completed checkpoint or
    /// when the per-subtask details could not be fetched.
    #[serde(default)]
    pub holdout: Option<Box<Holdout>>,
    /// The stack of the subtask that held it up, when one was sampled while it was in progress
    /// (`[thread_dumps]`); left out of the JSON when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_thread: Option<Box<crate::observe::ThreadSample>>,
    /// What the metrics said about its culprit subtask and TaskManager when it was counted
    /// (`state::evidence_at`); `None` without evidence or in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Box<super::evidence::CheckpointEvidence>>,
}

/// The subtask that held a failed checkpoint up.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Holdout {
    /// The operator chain's name.
    pub operator: String,
    /// The subtask index.
    pub subtask: u32,
    /// When its acknowledgement came only after the checkpoint had failed (Flink still records
    /// it, marked aborted): its ack − trigger, ms. `None`: it never acknowledged.
    pub late_ack_ms: Option<u64>,
    /// Its phases, ms, as far as Flink reported them: start delay, alignment, sync, async.
    pub phases_ms: [Option<u64>; 4],
    /// Subtasks that never acknowledged (this one included, if it is one of them).
    pub never_acknowledged: u32,
    /// Subtasks that acknowledged only after the checkpoint had failed (this one included, if).
    pub acknowledged_late: u32,
}

/// Whether a subtask held a failed checkpoint up: it never acknowledged, or its acknowledgement
/// came only after the checkpoint had failed.
pub(crate) fn held(cp: &FinishedCheckpoint, st: &SubtaskCheckpoint) -> bool {
    let lifetime = cp.finished_at.since(cp.triggered_at);
    !st.acknowledged || st.end_to_end_ms.is_some_and(|e| e > lifetime)
}

/// Every subtask that held a failed checkpoint up ([`held`]), in the details' order.
pub(crate) fn held_up(
    cp: &FinishedCheckpoint,
) -> impl Iterator<Item = (&OperatorCheckpoint, &SubtaskCheckpoint)> {
    subtasks(cp).filter(move |(_, st)| held(cp, st))
}

/// Every subtask of a checkpoint's details, with its operator, in the details' order.
pub(crate) fn subtasks(
    cp: &FinishedCheckpoint,
) -> impl Iterator<Item = (&OperatorCheckpoint, &SubtaskCheckpoint)> {
    cp.operators.iter().flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
}
