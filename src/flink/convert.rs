//! Pure conversion from Flink's REST DTOs to observations; Flink's version semantics live here.

use crate::flink::dto;
use crate::observe::{
    CheckpointCounts, CheckpointSettings, CheckpointStatus, FinishedCheckpoint, InProgressCheckpoint,
    OperatorCheckpoint, SnapshotKind, SubtaskCheckpoint,
};
use crate::time::Timestamp;

/// A non-negative quantity, or `None` for missing and for Flink's `-1` "unknown".
fn non_negative(value: Option<i64>) -> Option<u64> {
    value.and_then(|v| u64::try_from(v).ok())
}

/// Converts `/checkpoints/config`.
pub fn settings(config: &dto::CheckpointConfig) -> CheckpointSettings {
    // Periodic checkpointing is off when the interval is Long.MAX_VALUE.
    let interval_ms = non_negative(config.interval).filter(|&ms| ms < i64::MAX as u64);
    CheckpointSettings {
        exactly_once: !config.mode.as_deref().is_some_and(|m| m.eq_ignore_ascii_case("at_least_once")),
        interval_ms,
        timeout_ms: non_negative(config.timeout),
        min_pause_ms: non_negative(config.min_pause).unwrap_or(0),
        max_concurrent: non_negative(config.max_concurrent)
            .map(|n| n.min(u32::MAX as u64) as u32)
            .unwrap_or(1),
        tolerable_failures: non_negative(config.tolerable_failed_checkpoints)
            .map(|n| n.min(u32::MAX as u64) as u32),
        unaligned: config.unaligned_checkpoints.unwrap_or(false),
        aligned_checkpoint_timeout_ms: non_negative(config.aligned_checkpoint_timeout),
        state_backend: config.state_backend.clone(),
    }
}

/// Converts `counts` of `/checkpoints`.
pub fn counts(counts: &dto::Counts) -> CheckpointCounts {
    CheckpointCounts {
        completed: counts.completed.unwrap_or(0),
        failed: counts.failed.unwrap_or(0),
        in_progress: counts.in_progress.unwrap_or(0),
        restored: counts.restored.unwrap_or(0),
    }
}

/// The final status of a history entry, `None` while it is in progress.
pub fn status(checkpoint: &dto::CheckpointStatistics) -> Option<CheckpointStatus> {
    let status = checkpoint.status.as_deref().or(checkpoint.class_name.as_deref())?;
    if status.eq_ignore_ascii_case("completed") {
        Some(CheckpointStatus::Completed)
    } else if status.eq_ignore_ascii_case("failed") {
        Some(CheckpointStatus::Failed)
    } else {
        None
    }
}

/// The in-progress entries of a history.
pub fn in_progress(history: &[dto::CheckpointStatistics]) -> Vec<InProgressCheckpoint> {
    let mut pending: Vec<InProgressCheckpoint> = history
        .iter()
        .filter(|cp| status(cp).is_none())
        .map(|cp| InProgressCheckpoint {
            id: cp.id,
            triggered_at: Timestamp(cp.trigger_timestamp.unwrap_or(0)),
            num_subtasks: cp.num_subtasks.unwrap_or(0),
            num_acknowledged: cp.num_acknowledged_subtasks.unwrap_or(0),
        })
        .collect();
    pending.sort_by_key(|cp| cp.id);
    pending
}

/// The subtask details of one vertex, as fetched for a finished checkpoint.
pub struct VertexDetails<'a> {
    /// The vertex id.
    pub vertex_id: &'a str,
    /// The vertex name from `/jobs/:id`.
    pub name: &'a str,
    /// `/checkpoints/details/:cp/subtasks/:vertex`.
    pub details: &'a dto::TaskCheckpointDetails,
}

/// Converts a finished history entry, with its per-vertex details when they were fetched.
/// Returns `None` for an entry that is still in progress.
pub fn finished(
    checkpoint: &dto::CheckpointStatistics,
    vertices: &[VertexDetails<'_>],
) -> Option<FinishedCheckpoint> {
    let status = status(checkpoint)?;
    let operators: Vec<OperatorCheckpoint> = vertices.iter().map(operator).collect();
    let any_unaligned_subtask = operators.iter().flat_map(|op| &op.subtasks).any(|st| st.unaligned);
    let checkpoint_type = checkpoint.checkpoint_type.as_deref().unwrap_or("");
    let kind = if checkpoint.is_savepoint == Some(true) || checkpoint_type.contains("SAVEPOINT") {
        SnapshotKind::Savepoint
    } else if checkpoint_type == "UNALIGNED_CHECKPOINT" || any_unaligned_subtask {
        // 1.13/1.14 report unaligned checkpoints as CHECKPOINT; the subtask flag tells.
        SnapshotKind::UnalignedCheckpoint
    } else {
        SnapshotKind::Checkpoint
    };
    // Flink 1.15 (FLINK-25557) added `checkpointed_size` and made `state_size` the full size;
    // before, `state_size` was the checkpointed (possibly incremental) size.
    let (checkpointed_bytes, full_state_bytes) = match checkpoint.checkpointed_size {
        Some(checkpointed) => (non_negative(Some(checkpointed)), non_negative(checkpoint.state_size)),
        None => (non_negative(checkpoint.state_size), None),
    };
    let triggered_at = Timestamp(checkpoint.trigger_timestamp.unwrap_or(0));
    let finished_at = match status {
        CheckpointStatus::Completed => checkpoint.latest_ack_timestamp,
        CheckpointStatus::Failed => checkpoint.failure_timestamp.or(checkpoint.latest_ack_timestamp),
    }
    .map(Timestamp)
    .unwrap_or(triggered_at);
    Some(FinishedCheckpoint {
        id: checkpoint.id,
        status,
        kind,
        triggered_at,
        finished_at,
        end_to_end_ms: non_negative(checkpoint.end_to_end_duration),
        checkpointed_bytes,
        full_state_bytes,
        processed_bytes: non_negative(checkpoint.processed_data),
        persisted_bytes: non_negative(checkpoint.persisted_data),
        num_subtasks: checkpoint.num_subtasks.unwrap_or(0),
        num_acknowledged: checkpoint.num_acknowledged_subtasks.unwrap_or(0),
        failure_message: checkpoint.failure_message.clone(),
        operators,
    })
}

fn operator(vertex: &VertexDetails<'_>) -> OperatorCheckpoint {
    let mut subtasks: Vec<SubtaskCheckpoint> = vertex
        .details
        .subtasks
        .iter()
        .map(|st| {
            let acknowledged = st.is_completed();
            SubtaskCheckpoint {
                index: st.index,
                acknowledged,
                end_to_end_ms: non_negative(st.end_to_end_duration),
                start_delay_ms: non_negative(st.start_delay),
                alignment_ms: non_negative(st.alignment.and_then(|a| a.duration)),
                sync_ms: non_negative(st.checkpoint.and_then(|c| c.sync)),
                async_ms: non_negative(st.checkpoint.and_then(|c| c.async_)),
                processed_bytes: non_negative(st.alignment.and_then(|a| a.processed)),
                persisted_bytes: non_negative(st.alignment.and_then(|a| a.persisted)),
                unaligned: st.unaligned_checkpoint.unwrap_or(false),
            }
        })
        .collect();
    subtasks.sort_by_key(|st| st.index);
    OperatorCheckpoint { vertex_id: vertex.vertex_id.to_string(), name: vertex.name.to_string(), subtasks }
}
