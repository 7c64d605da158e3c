//! A counted checkpoint's record: the slowest subtask, the subtask that held a failed one up,
//! the failure streak, the recent ring, and the job's and operators' histograms.

use super::{JobState, OperatorState};
use crate::observe::{CheckpointStatus, FailureReason, FinishedCheckpoint, SnapshotKind};
use crate::state::failure_text::is_stop_failure;
use crate::state::outbox;
use crate::state::record::{CheckpointRecord, Holdout, PhaseHistograms, SharedRecord, held_up};
use crate::stats::WindowSpec;
use crate::time::Timestamp;

/// How a failed checkpoint joins the job's consecutive failures when it is recorded.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Streak {
    /// By its failure message and kind (a stop failure and a savepoint do not count).
    ByMessage,
    /// Not now: a span's failure whose cause no line has told yet, or a stop failure.
    Not,
}

/// The subtask that held a failed checkpoint up, among those that did not acknowledge before
/// it failed. A checkpoint a subtask failed (declined, its snapshot failed): one that never
/// acknowledged (the one that declined never does; others may only be late). Otherwise (expired
/// …): one whose acknowledgement came late (its phases say where it spent the time) before
/// one that never acknowledged. Within each, the first in the details' order (the poller lists
/// the vertices as Flink does, sources first). `None` without per-subtask details, or when every
/// subtask with details acknowledged in time.
fn holdout(checkpoint: &FinishedCheckpoint) -> Option<Holdout> {
    use crate::observe::{OperatorCheckpoint, SubtaskCheckpoint};
    let lifetime = checkpoint.finished_at.since(checkpoint.triggered_at);
    let late = |st: &SubtaskCheckpoint| {
        if st.acknowledged { st.end_to_end_ms.filter(|e| *e > lifetime) } else { None }
    };
    let held: Vec<(&OperatorCheckpoint, &SubtaskCheckpoint)> = held_up(checkpoint).collect();
    let by_a_subtask = checkpoint
        .failure_message
        .as_deref()
        .and_then(FailureReason::from_message)
        .is_some_and(FailureReason::failed_by_a_subtask);
    // A subtask that failed the checkpoint never acknowledges it; one that was stuck until the
    // checkpoint expired may have acknowledged later.
    let (op, st) = held.iter().find(|(_, st)| st.acknowledged != by_a_subtask).or_else(|| held.first())?;
    let never_acknowledged = held.iter().filter(|(_, st)| !st.acknowledged).count() as u32;
    Some(Holdout {
        operator: op.name.clone(),
        subtask: st.index,
        late_ack_ms: late(st),
        phases_ms: [st.start_delay_ms, st.alignment_ms, st.sync_ms, st.async_ms],
        never_acknowledged,
        acknowledged_late: held.len() as u32 - never_acknowledged,
    })
}

impl JobState {
    /// Records a newly seen checkpoint; returns whether it went into the phase histograms.
    pub(super) fn record(
        &mut self,
        checkpoint: &FinishedCheckpoint,
        at: Timestamp,
        window: WindowSpec,
    ) -> bool {
        self.record_from(checkpoint, None, Streak::ByMessage, at, window)
    }

    /// The record of a checkpoint: the slowest subtask's phases from its per-subtask details, or
    /// the maxima a span carried when it has none.
    pub(super) fn build_record(
        &self,
        checkpoint: &FinishedCheckpoint,
        span_phases: Option<[Option<u64>; 4]>,
    ) -> (CheckpointRecord, [Option<u64>; 4]) {
        let acknowledged = || {
            checkpoint
                .operators
                .iter()
                .flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
                .filter(|(_, st)| st.acknowledged)
        };
        let max_of = |f: fn(&crate::observe::SubtaskCheckpoint) -> Option<u64>| {
            acknowledged().filter_map(|(_, st)| f(st)).max()
        };
        let max_phases = match span_phases {
            Some(phases) if checkpoint.operators.is_empty() => phases,
            _ => [
                max_of(|st| st.start_delay_ms),
                max_of(|st| st.alignment_ms),
                max_of(|st| st.sync_ms),
                max_of(|st| st.async_ms),
            ],
        };
        let slowest = acknowledged()
            .filter(|(_, st)| st.end_to_end_ms.is_some())
            .max_by_key(|(_, st)| st.end_to_end_ms);
        let slowest_subtask =
            slowest.and_then(|(op, st)| Some((op.name.clone(), st.index, st.end_to_end_ms?)));
        let slowest_phases_ms = slowest
            .and_then(|(_, st)| Some([st.start_delay_ms?, st.alignment_ms?, st.sync_ms?, st.async_ms?]));
        let holdout = (checkpoint.status == CheckpointStatus::Failed).then(|| holdout(checkpoint)).flatten();
        let record = CheckpointRecord {
            id: checkpoint.id,
            status: checkpoint.status,
            kind: checkpoint.kind,
            triggered_at: checkpoint.triggered_at,
            finished_at: checkpoint.finished_at,
            end_to_end_ms: checkpoint.end_to_end_ms,
            max_phases_ms: match max_phases {
                [Some(a), Some(b), Some(c), Some(d)] => Some([a, b, c, d]),
                _ => None,
            },
            slowest_subtask,
            slowest_phases_ms,
            failure_message: checkpoint.failure_message.clone(),
            acknowledged: (checkpoint.num_subtasks > 0)
                .then_some((checkpoint.num_acknowledged, checkpoint.num_subtasks)),
            holdout: holdout.map(Box::new),
            blocked_thread: self.threads.for_record(checkpoint.id).map(Box::new),
            evidence: None,
        };
        (record, max_phases)
    }

    /// [`JobState::record`] of a checkpoint from either source (`span_phases` from a span).
    pub(super) fn record_from(
        &mut self,
        checkpoint: &FinishedCheckpoint,
        span_phases: Option<[Option<u64>; 4]>,
        streak: Streak,
        at: Timestamp,
        window: WindowSpec,
    ) -> bool {
        let (record, max_phases) = self.build_record(checkpoint, span_phases);
        // Counted once, here: the store gets its record, and a savepoint its own counters.
        self.savepoints.observe(&record);
        let stored = outbox::StoredCheckpoint::new(&record, checkpoint, |op, i| {
            self.subtask_location(op, i).map(str::to_owned)
        });
        self.outbox.push(stored);
        // Newer by id, or triggered later (ids that restarted under the same job id).
        let record = SharedRecord::new(record);
        let newer = |latest: &Option<SharedRecord>| {
            latest.as_ref().is_none_or(|l| {
                l.id < checkpoint.id || l.triggered_at.millis() < checkpoint.triggered_at.millis()
            })
        };
        match checkpoint.status {
            CheckpointStatus::Completed => {
                self.consecutive_failures = 0;
                self.failing_since = None;
                self.tolerance.completed(checkpoint.id);
                if self.running_since.is_none_or(|since| checkpoint.finished_at >= since) {
                    self.completed_since_running = true;
                }
            }
            // A failed savepoint is not one of the checkpoint failures Flink tolerates a
            // number of (`CheckpointFailureManager` counts periodic checkpoints only).
            CheckpointStatus::Failed
                if streak == Streak::ByMessage
                    && !is_stop_failure(checkpoint.failure_message.as_deref())
                    && checkpoint.kind != SnapshotKind::Savepoint =>
            {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.failing_since.get_or_insert(checkpoint.finished_at);
                let reason = checkpoint.failure_message.as_deref().and_then(FailureReason::from_message);
                let tolerable = self.tolerable();
                self.tolerance.failed(Some(checkpoint.id), reason, tolerable, checkpoint.finished_at);
            }
            CheckpointStatus::Failed => {}
        }
        match checkpoint.status {
            CheckpointStatus::Completed if newer(&self.last_completed) => {
                self.last_completed = Some(record.clone())
            }
            CheckpointStatus::Failed if newer(&self.last_failed) => self.last_failed = Some(record.clone()),
            _ => {}
        }
        let order = |r: &CheckpointRecord| (r.triggered_at.millis(), r.id);
        let position =
            self.recent.iter().position(|r| order(r) > order(&record)).unwrap_or(self.recent.len());
        self.recent.insert(position, record);
        while self.recent.len() > self.recent_kept.max(1) {
            self.recent.pop_front();
        }

        // Latency and size statistics describe checkpoints that completed. Savepoints are
        // user-triggered and often canonical (full) snapshots: they would distort the P95s.
        if checkpoint.status != CheckpointStatus::Completed || checkpoint.kind == SnapshotKind::Savepoint {
            return false;
        }
        if let Some(e2e) = checkpoint.end_to_end_ms {
            self.phases.end_to_end.record(e2e, at);
        }
        let [start_delay, alignment, sync, async_] = max_phases;
        for (value, histogram) in [
            (start_delay, &mut self.phases.start_delay),
            (alignment, &mut self.phases.alignment),
            (sync, &mut self.phases.sync),
            (async_, &mut self.phases.async_),
        ] {
            if let Some(v) = value {
                histogram.record(v, at);
            }
        }
        for (value, histogram) in [
            (checkpoint.checkpointed_bytes, &mut self.sizes.checkpointed),
            (checkpoint.full_state_bytes, &mut self.sizes.full_state),
            (checkpoint.processed_bytes, &mut self.sizes.processed),
            (checkpoint.persisted_bytes, &mut self.sizes.persisted),
        ] {
            if let Some(v) = value {
                histogram.record(v, at);
            }
        }
        self.record_operators(checkpoint, at, window);
        true
    }

    /// The per-operator histograms of a completed checkpoint's acknowledged subtasks.
    pub(super) fn record_operators(
        &mut self,
        checkpoint: &FinishedCheckpoint,
        at: Timestamp,
        window: WindowSpec,
    ) {
        if !self.keep_operators {
            return;
        }
        for op in &checkpoint.operators {
            let state = self.operators.entry(op.vertex_id.clone()).or_insert_with(|| OperatorState {
                name: op.name.clone(),
                phases: PhaseHistograms::new(window),
                last_seen: at,
            });
            state.last_seen = at;
            // A checkpoint converted before the poller had the job's graph names the operator
            // by its vertex id; the first one that knows the name renames it.
            if state.name != op.name {
                state.name.clone_from(&op.name);
            }
            for st in op.subtasks.iter().filter(|st| st.acknowledged) {
                for (value, histogram) in [
                    (st.end_to_end_ms, &mut state.phases.end_to_end),
                    (st.start_delay_ms, &mut state.phases.start_delay),
                    (st.alignment_ms, &mut state.phases.alignment),
                    (st.sync_ms, &mut state.phases.sync),
                    (st.async_ms, &mut state.phases.async_),
                ] {
                    if let Some(v) = value {
                        histogram.record(v, at);
                    }
                }
            }
        }
    }
}
