//! What `State` hands to the checkpoint store (`store`): one record per finished checkpoint
//! or savepoint, made at the moment `State` counts it (once), and the savepoint counters.
//!
//! Pure like the rest of `state`: `State::apply` pushes the records into an [`Outbox`]; the
//! daemon's persister drains it and writes the records to the store *before* the state
//! snapshot that marks them counted (see `ARCHITECTURE.md`, "`src/state/store.rs`").

use serde::{Deserialize, Serialize};

use super::record::{CheckpointRecord, Totals};
use crate::observe::{CheckpointStatus, FinishedCheckpoint, SnapshotKind};
use crate::time::Timestamp;

/// At most this many records wait in the outbox (about 1 KiB each): the store is written every
/// `state.persist_interval`, so only a store that keeps failing fills it; the oldest are dropped
/// then, and counted (`checkpoint_sentinel_store_records_dropped_total`).
pub(crate) const OUTBOX_CAPACITY: usize = 50_000;

/// One finished checkpoint or savepoint as the store keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredCheckpoint {
    /// What the API and the status page show of it (id, kind, outcome, times, phases of the
    /// slowest subtask, failure reason, the subtask that held a failed one up).
    pub record: CheckpointRecord,
    /// Bytes it persisted (the incremental size for incremental checkpoints).
    pub checkpointed_bytes: Option<u64>,
    /// Full state size (Flink 1.15 and later).
    pub full_state_bytes: Option<u64>,
    /// Bytes processed during alignment.
    pub processed_bytes: Option<u64>,
    /// In-flight bytes persisted.
    pub persisted_bytes: Option<u64>,
    /// The TaskManager of its slowest subtask (of a failed one: of the subtask that held it
    /// up), where the poller last saw that subtask run when the checkpoint was counted.
    pub taskmanager: Option<String>,
}

impl StoredCheckpoint {
    /// The store's record of `checkpoint`, counted as `record`; `location` says where a
    /// subtask (operator name, index) runs.
    pub(crate) fn new(
        record: &CheckpointRecord,
        checkpoint: &FinishedCheckpoint,
        location: impl Fn(&str, u32) -> Option<String>,
    ) -> Self {
        let subtask = match (&record.holdout, &record.slowest_subtask) {
            (Some(h), _) => Some((h.operator.as_str(), h.subtask)),
            (None, Some((operator, index, _))) => Some((operator.as_str(), *index)),
            (None, None) => None,
        };
        StoredCheckpoint {
            record: record.clone(),
            checkpointed_bytes: checkpoint.checkpointed_bytes,
            full_state_bytes: checkpoint.full_state_bytes,
            processed_bytes: checkpoint.processed_bytes,
            persisted_bytes: checkpoint.persisted_bytes,
            taskmanager: subtask.and_then(|(operator, index)| location(operator, index)),
        }
    }
}

/// A record with the job it belongs to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outboxed {
    /// The cluster's name.
    pub cluster: String,
    /// The job id.
    pub job_id: String,
    /// The record.
    pub checkpoint: StoredCheckpoint,
}

/// A restore with the job it belongs to (written again, same key, whenever it changes: counted,
/// then timed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutboxedRestore {
    /// The cluster's name.
    pub(crate) cluster: String,
    /// The job id.
    pub(crate) job_id: String,
    /// The record.
    pub(crate) record: super::restore::RestoreRecord,
}

/// Records counted since the persister last drained them, and those the store could not take
/// yet. Off (records are not kept) unless the daemon has a store to write them to.
///
/// The state snapshot carries what waits here (`persist`), so a restart during a store outage
/// loses nothing the outbox held. Beyond [`OUTBOX_CAPACITY`] the oldest are dropped: counted,
/// and their checkpoint ids kept as ranges per job for the log ([`Outbox::take_dropped`]).
#[derive(Debug, Default)]
pub struct Outbox {
    enabled: bool,
    records: Vec<Outboxed>,
    restores: Vec<OutboxedRestore>,
    dropped: u64,
    /// Ids dropped since the last [`Outbox::take_dropped`], per (cluster, job id).
    dropped_ids: std::collections::BTreeMap<(String, String), Vec<u64>>,
}

/// Checkpoints of one job the outbox dropped, as ranges of ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DroppedRange {
    /// The cluster's name.
    pub(crate) cluster: String,
    /// The job id.
    pub(crate) job_id: String,
    /// Inclusive id ranges, ascending.
    pub(crate) ranges: Vec<(u64, u64)>,
}

impl DroppedRange {
    /// `257–1097, 1200` (as the log line says it).
    pub(crate) fn describe(&self) -> String {
        self.ranges
            .iter()
            .map(|(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}–{hi}") })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Sorted ids as inclusive ranges of consecutive ids.
fn ranges_of(mut ids: Vec<u64>) -> Vec<(u64, u64)> {
    ids.sort_unstable();
    ids.dedup();
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for id in ids {
        match ranges.last_mut() {
            Some((_, hi)) if *hi + 1 == id => *hi = id,
            _ => ranges.push((id, id)),
        }
    }
    ranges
}

impl Outbox {
    /// Starts keeping records.
    pub(crate) fn enable(&mut self) {
        self.enabled = true;
    }

    /// Stops keeping records and forgets those waiting (the store is off).
    pub(crate) fn disable(&mut self) {
        *self = Outbox::default();
    }

    /// Adds a job's newly counted records.
    pub(crate) fn extend(&mut self, cluster: &str, job_id: &str, records: Vec<StoredCheckpoint>) {
        if !self.enabled || records.is_empty() {
            return;
        }
        self.records.extend(records.into_iter().map(|checkpoint| Outboxed {
            cluster: cluster.to_string(),
            job_id: job_id.to_string(),
            checkpoint,
        }));
        self.bound_records();
    }

    /// Takes every waiting record, oldest first.
    pub(crate) fn take(&mut self) -> Vec<Outboxed> {
        std::mem::take(&mut self.records)
    }

    /// Adds a job's restores counted or changed (bounded like the checkpoints).
    pub(crate) fn extend_restores(
        &mut self,
        cluster: &str,
        job_id: &str,
        records: Vec<super::restore::RestoreRecord>,
    ) {
        if !self.enabled || records.is_empty() {
            return;
        }
        self.restores.extend(records.into_iter().map(|record| OutboxedRestore {
            cluster: cluster.to_string(),
            job_id: job_id.to_string(),
            record,
        }));
        self.bound_restores();
    }

    /// Takes every waiting restore, oldest first.
    pub(crate) fn take_restores(&mut self) -> Vec<OutboxedRestore> {
        std::mem::take(&mut self.restores)
    }

    /// Puts restores the store could not take back in front.
    pub(crate) fn put_back_restores(&mut self, mut restores: Vec<OutboxedRestore>) {
        restores.append(&mut self.restores);
        self.restores = restores;
        self.bound_restores();
    }

    fn bound_restores(&mut self) {
        if self.restores.len() > OUTBOX_CAPACITY {
            let excess = self.restores.len() - OUTBOX_CAPACITY;
            self.restores.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// Drops the oldest records beyond the capacity, noting their ids.
    fn bound_records(&mut self) {
        if self.records.len() > OUTBOX_CAPACITY {
            let excess = self.records.len() - OUTBOX_CAPACITY;
            for r in self.records.drain(..excess) {
                self.dropped_ids.entry((r.cluster, r.job_id)).or_default().push(r.checkpoint.record.id);
            }
            self.dropped += excess as u64;
        }
    }

    /// Puts records the store could not take back in front, to be written next time.
    pub(crate) fn put_back(&mut self, mut records: Vec<Outboxed>) {
        records.append(&mut self.records);
        self.records = records;
        self.bound_records();
    }

    /// The checkpoints dropped since the last call, per job, as id ranges.
    pub(crate) fn take_dropped(&mut self) -> Vec<DroppedRange> {
        std::mem::take(&mut self.dropped_ids)
            .into_iter()
            .map(|((cluster, job_id), ids)| DroppedRange { cluster, job_id, ranges: ranges_of(ids) })
            .collect()
    }

    /// Records dropped because the outbox was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record (checkpoint or restore) waits.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.restores.is_empty()
    }

    /// What waits, for the state snapshot: records, restores and the count dropped so far.
    pub(crate) fn waiting(&self) -> (Vec<Outboxed>, Vec<OutboxedRestore>, u64) {
        (self.records.clone(), self.restores.clone(), self.dropped)
    }

    /// Puts back what a snapshot held (a restart during a store outage), before anything new.
    pub(crate) fn restore_waiting(
        &mut self,
        records: Vec<Outboxed>,
        restores: Vec<OutboxedRestore>,
        dropped: u64,
    ) {
        self.put_back(records);
        self.put_back_restores(restores);
        self.dropped += dropped;
    }
}

/// A job's savepoints as the daemon saw them, apart from its checkpoints (Flink's `counts`
/// include savepoints in `completed` and `failed` without saying which).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavepointStats {
    /// Savepoints seen by final status.
    pub totals: Totals,
    /// When the latest completed savepoint was acknowledged.
    pub last_completed_at: Option<Timestamp>,
    /// Its trigger to last acknowledgement, ms.
    pub last_duration_ms: Option<u64>,
    /// When the latest failed savepoint failed.
    pub(crate) last_failed_at: Option<Timestamp>,
}

impl SavepointStats {
    /// Counts `record` if it is a savepoint (each record is counted once by `State`).
    pub(crate) fn observe(&mut self, record: &CheckpointRecord) {
        if record.kind != SnapshotKind::Savepoint {
            return;
        }
        match record.status {
            CheckpointStatus::Completed => {
                self.totals.completed += 1;
                if self.last_completed_at.is_none_or(|at| at <= record.finished_at) {
                    self.last_completed_at = Some(record.finished_at);
                    self.last_duration_ms =
                        Some(record.end_to_end_ms.unwrap_or(record.finished_at.since(record.triggered_at)));
                }
            }
            CheckpointStatus::Failed => {
                self.totals.failed += 1;
                if self.last_failed_at.is_none_or(|at| at <= record.finished_at) {
                    self.last_failed_at = Some(record.finished_at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{CheckpointStatus, SnapshotKind};

    fn stored(id: u64) -> StoredCheckpoint {
        let record = CheckpointRecord {
            id,
            status: CheckpointStatus::Completed,
            kind: SnapshotKind::Checkpoint,
            triggered_at: Timestamp(id as i64),
            finished_at: Timestamp(id as i64 + 1),
            end_to_end_ms: None,
            max_phases_ms: None,
            slowest_subtask: None,
            slowest_phases_ms: None,
            failure_message: None,
            acknowledged: None,
            holdout: None,
            blocked_thread: None,
            evidence: None,
        };
        StoredCheckpoint {
            record,
            checkpointed_bytes: None,
            full_state_bytes: None,
            processed_bytes: None,
            persisted_bytes: None,
            taskmanager: None,
        }
    }

    #[test]
    fn an_overflowing_outbox_names_the_ids_it_dropped_as_ranges() {
        let mut outbox = Outbox::default();
        outbox.enable();
        let n = OUTBOX_CAPACITY as u64 + 841;
        outbox.extend("c", "j", (257..257 + n).map(stored).collect());
        assert_eq!(outbox.len(), OUTBOX_CAPACITY);
        assert_eq!(outbox.dropped(), 841);
        let dropped = outbox.take_dropped();
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].ranges, [(257, 1097)]);
        assert_eq!(dropped[0].describe(), "257–1097");
        assert!(outbox.take_dropped().is_empty(), "each drop is told once");
        assert_eq!(ranges_of(vec![5, 3, 4, 9, 11, 10]), [(3, 5), (9, 11)]);
    }
}
