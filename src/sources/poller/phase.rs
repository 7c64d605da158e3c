//! Where a subtask that holds an in-progress checkpoint up stands (aligning, snapshotting,
//! behind an upstream one), from which vertices around it acknowledged. Pure.

use std::collections::HashSet;

/// Where a subtask that has not acknowledged an in-progress checkpoint stands, from which
/// vertices around it have acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingPhase {
    /// Every subtask downstream of it acknowledged, so it emitted the barrier (Flink emits it
    /// before the synchronous snapshot, `SubtaskCheckpointCoordinatorImpl.checkpointState`), or
    /// it is a source (triggered by RPC, it waits for no barrier): it is in its snapshot.
    Snapshot,
    /// An upstream vertex has not acknowledged either: the barrier it waits for was not sent.
    BehindUpstream,
    /// Its inputs sent their barriers and the subtasks downstream of it still wait for its
    /// barrier: it has not passed it on, so it is still aligning (barriers queued behind data).
    Barriers,
    /// Its inputs sent their barriers and it has no downstream subtasks to tell whether it
    /// passed one on: aligning or snapshotting cannot be told apart.
    Unknown,
}

/// Classifies a pending subtask of vertex `vid` given the vertices whose subtasks all
/// acknowledged (`done`).
pub fn pending_phase(
    topology: &crate::observe::JobTopology,
    vid: &str,
    done: &HashSet<&str>,
) -> PendingPhase {
    let producers: Vec<&str> =
        topology.edges.iter().filter(|e| e.to == vid).map(|e| e.from.as_str()).collect();
    let consumers: Vec<&str> =
        topology.edges.iter().filter(|e| e.from == vid).map(|e| e.to.as_str()).collect();
    if producers.iter().any(|p| !done.contains(p)) {
        return PendingPhase::BehindUpstream;
    }
    if producers.is_empty() || (!consumers.is_empty() && consumers.iter().all(|c| done.contains(c))) {
        return PendingPhase::Snapshot;
    }
    if consumers.is_empty() {
        return PendingPhase::Unknown;
    }
    PendingPhase::Barriers
}
