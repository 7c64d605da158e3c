//! What a job's checkpoints showed, for the advisor: one [`Sample`] per finished checkpoint
//! (from the poller's details, from the store, or from Flink's JSON) and the figures the
//! findings rest on ([`Observed`]: percentiles, spacing, alignment, state size).

use crate::observe::{CheckpointStatus, FailureReason, FinishedCheckpoint, SnapshotKind};
use crate::state::outbox::StoredCheckpoint;
use crate::state::record::CheckpointRecord;
use crate::time::Timestamp;

/// Fewer completed checkpoints than this are too few to time a recommendation on.
pub(crate) const MIN_COMPLETED: usize = 5;

/// One finished checkpoint (savepoints are left out: they are not on the periodic schedule).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    /// Flink's id.
    pub(crate) id: u64,
    /// Trigger time.
    pub(crate) triggered_at: Timestamp,
    /// Completed or failed.
    pub(crate) status: CheckpointStatus,
    /// Trigger to last ack (completed) or to failure (failed), ms.
    pub(crate) duration_ms: Option<u64>,
    /// Why it failed, when it did and the message says.
    pub(crate) failure: Option<FailureReason>,
    /// The longest time a subtask spent before its snapshot: start delay + alignment, ms.
    pub(crate) alignment_ms: Option<u64>,
    /// Bytes processed during alignment (what unaligned checkpoints would persist instead).
    pub(crate) processed_bytes: Option<u64>,
    /// In-flight bytes persisted (unaligned checkpoints).
    pub(crate) persisted_bytes: Option<u64>,
    /// Full state size (1.15+).
    pub(crate) full_state_bytes: Option<u64>,
    /// Bytes this checkpoint wrote.
    pub(crate) checkpointed_bytes: Option<u64>,
    /// An expired checkpoint whose every subtask acknowledged in the end (Flink records a late
    /// acknowledgement, marked aborted): how long it needed, ms.
    pub(crate) needed_ms: Option<u64>,
}

impl Sample {
    #[cfg(test)]
    /// A completed checkpoint with only its trigger time and duration known.
    pub(crate) fn completed(id: u64, triggered_at: Timestamp, duration_ms: u64) -> Sample {
        Sample {
            id,
            triggered_at,
            status: CheckpointStatus::Completed,
            duration_ms: Some(duration_ms),
            failure: None,
            alignment_ms: None,
            processed_bytes: None,
            persisted_bytes: None,
            full_state_bytes: None,
            checkpointed_bytes: None,
            needed_ms: None,
        }
    }

    /// A finished checkpoint as the poller or `convert::finished` gives it; `None` for a savepoint.
    pub(crate) fn from_finished(cp: &FinishedCheckpoint) -> Option<Sample> {
        if cp.kind == SnapshotKind::Savepoint {
            return None;
        }
        let alignment_ms = cp
            .operators
            .iter()
            .flat_map(|o| &o.subtasks)
            .filter_map(|s| match (s.start_delay_ms, s.alignment_ms) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            })
            .max();
        let subtasks: Vec<_> = cp.operators.iter().flat_map(|o| &o.subtasks).collect();
        let needed_ms = (cp.status == CheckpointStatus::Failed
            && !subtasks.is_empty()
            && subtasks.iter().all(|s| s.acknowledged && s.end_to_end_ms.is_some()))
        .then(|| subtasks.iter().filter_map(|s| s.end_to_end_ms).max())
        .flatten();
        Some(Sample {
            needed_ms,
            id: cp.id,
            triggered_at: cp.triggered_at,
            status: cp.status,
            duration_ms: match cp.status {
                CheckpointStatus::Completed => cp.end_to_end_ms,
                _ => Some(cp.finished_at.since(cp.triggered_at)),
            },
            failure: cp.failure_message.as_deref().and_then(FailureReason::from_message),
            alignment_ms,
            processed_bytes: cp.processed_bytes,
            persisted_bytes: cp.persisted_bytes,
            full_state_bytes: cp.full_state_bytes,
            checkpointed_bytes: cp.checkpointed_bytes,
        })
    }

    /// A checkpoint as the store keeps it; `None` for a savepoint.
    pub(crate) fn from_stored(stored: &StoredCheckpoint) -> Option<Sample> {
        Some(Sample {
            processed_bytes: stored.processed_bytes,
            persisted_bytes: stored.persisted_bytes,
            full_state_bytes: stored.full_state_bytes,
            checkpointed_bytes: stored.checkpointed_bytes,
            ..Sample::from_record(&stored.record)?
        })
    }

    /// A checkpoint as the daemon's recent list keeps it (no sizes); `None` for a savepoint.
    pub(crate) fn from_record(r: &CheckpointRecord) -> Option<Sample> {
        if r.kind == SnapshotKind::Savepoint {
            return None;
        }
        let phases = r.slowest_phases_ms.or(r.max_phases_ms);
        Some(Sample {
            needed_ms: r.holdout.as_ref().and_then(|h| h.late_ack_ms),
            id: r.id,
            triggered_at: r.triggered_at,
            status: r.status,
            duration_ms: match r.status {
                CheckpointStatus::Completed => r.end_to_end_ms,
                _ => Some(r.finished_at.since(r.triggered_at)),
            },
            failure: r.failure_message.as_deref().and_then(FailureReason::from_message),
            alignment_ms: phases.map(|p| p[0] + p[1]),
            processed_bytes: None,
            persisted_bytes: None,
            full_state_bytes: None,
            checkpointed_bytes: None,
        })
    }

    /// Whether it expired (the coordinator's timeout aborted it).
    pub(crate) fn expired(&self) -> bool {
        self.failure == Some(FailureReason::CheckpointExpired)
    }
}

/// The figures of a job's samples the findings rest on.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Observed {
    /// Completed checkpoints looked at.
    pub(crate) completed: usize,
    /// Failed ones, expired included.
    pub(crate) failed: usize,
    /// Expired ones.
    pub(crate) expired: usize,
    /// The longest an expired checkpoint needed, ms, of those acknowledged late by all their
    /// subtasks (`None`: none was, how long they needed is not known).
    pub(crate) expired_needed_ms: Option<u64>,
    /// How many expired checkpoints tell how long they needed.
    pub(crate) expired_needed_known: usize,
    /// First to last trigger, ms.
    pub(crate) span_ms: u64,
    /// Completed durations, ms: median, 95th and 99th percentile (nearest rank).
    pub(crate) duration_p50_ms: Option<u64>,
    /// See `duration_p50_ms`.
    pub(crate) duration_p95_ms: Option<u64>,
    /// See `duration_p50_ms`.
    pub(crate) duration_p99_ms: Option<u64>,
    /// Mean gap between the triggers of consecutive ids, ms ([`spacing`]).
    pub(crate) spacing_ms: Option<u64>,
    /// Median start delay + alignment of the completed ones, ms.
    pub(crate) alignment_p50_ms: Option<u64>,
    /// Median bytes processed during alignment.
    pub(crate) processed_p50_bytes: Option<u64>,
    /// Median in-flight bytes persisted.
    pub(crate) persisted_p50_bytes: Option<u64>,
    /// The newest completed checkpoint's full state size (its checkpointed size before 1.15).
    pub(crate) state_bytes: Option<u64>,
    /// Whether some completed checkpoint wrote well under its full state (incremental seen).
    pub(crate) incremental_seen: bool,
}

/// Nearest-rank percentile `p` (0–100) of `values`; `None` when empty.
pub(crate) fn percentile(values: &[u64], p: u64) -> Option<u64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len() as u64;
    if n == 0 {
        return None;
    }
    let rank = (p * n).div_ceil(100).clamp(1, n);
    Some(sorted[(rank - 1) as usize])
}

/// The spacing of checkpoints from the gaps between consecutive triggers, ms: their mean,
/// leaving out gaps over [`GAP_OUTLIER_FACTOR`]× the median (a restart, a suspended job).
/// The mean and not the median, so that the spacing agrees with the checkpoints per hour
/// beside it: where a slow checkpoint holds the next trigger and the queued one follows at
/// once (gaps of 6 s, 0.1 s, 3 s, 3 s), the median lands on whichever cluster of gaps is
/// larger and moves between them with small timing differences.
pub(crate) fn spacing(gaps: &[u64]) -> Option<u64> {
    let median = percentile(gaps, 50)?;
    let typical: Vec<u64> =
        gaps.iter().copied().filter(|&g| g <= median.saturating_mul(GAP_OUTLIER_FACTOR)).collect();
    let sum: u64 = typical.iter().sum();
    Some((sum as f64 / typical.len().max(1) as f64).round() as u64)
}

/// A gap this many times the median is no part of the job's rhythm (see [`spacing`]).
pub(crate) const GAP_OUTLIER_FACTOR: u64 = 10;

impl Observed {
    /// The figures of `samples` (any order).
    pub(crate) fn of(samples: &[Sample]) -> Observed {
        let mut sorted: Vec<&Sample> = samples.iter().collect();
        sorted.sort_by_key(|s| (s.triggered_at, s.id));
        let completed: Vec<&Sample> =
            sorted.iter().copied().filter(|s| s.status == CheckpointStatus::Completed).collect();
        let durations: Vec<u64> = completed.iter().filter_map(|s| s.duration_ms).collect();
        let gaps: Vec<u64> = sorted
            .windows(2)
            .filter(|w| w[1].id == w[0].id + 1)
            .map(|w| w[1].triggered_at.since(w[0].triggered_at))
            .collect();
        let of_completed =
            |f: fn(&Sample) -> Option<u64>| -> Vec<u64> { completed.iter().filter_map(|s| f(s)).collect() };
        let newest = completed.last();
        Observed {
            completed: completed.len(),
            failed: sorted.len() - completed.len(),
            expired: sorted.iter().filter(|s| s.expired()).count(),
            expired_needed_ms: sorted.iter().filter(|s| s.expired()).filter_map(|s| s.needed_ms).max(),
            expired_needed_known: sorted.iter().filter(|s| s.expired() && s.needed_ms.is_some()).count(),
            span_ms: match (sorted.first(), sorted.last()) {
                (Some(a), Some(b)) => b.triggered_at.since(a.triggered_at),
                _ => 0,
            },
            duration_p50_ms: percentile(&durations, 50),
            duration_p95_ms: percentile(&durations, 95),
            duration_p99_ms: percentile(&durations, 99),
            spacing_ms: spacing(&gaps),
            alignment_p50_ms: percentile(&of_completed(|s| s.alignment_ms), 50),
            processed_p50_bytes: percentile(&of_completed(|s| s.processed_bytes), 50),
            persisted_p50_bytes: percentile(&of_completed(|s| s.persisted_bytes), 50),
            state_bytes: newest.and_then(|s| s.full_state_bytes.or(s.checkpointed_bytes)),
            incremental_seen: completed.iter().any(|s| match (s.checkpointed_bytes, s.full_state_bytes) {
                (Some(c), Some(f)) => f > 0 && c * 10 < f * 9,
                _ => false,
            }),
        }
    }

    /// Why these samples are too few to time advice on, if they are.
    pub(crate) fn thin(&self) -> Option<String> {
        (self.completed < MIN_COMPLETED).then(|| {
            format!(
                "only {} completed checkpoint{} to go on (at least {MIN_COMPLETED} are needed): no timing advice yet",
                self.completed,
                if self.completed == 1 { "" } else { "s" }
            )
        })
    }
}
