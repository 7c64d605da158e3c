//! What the JobManager's log lines and Flink's trace spans say about a job's checkpoints: trigger
//! times and failures from the log, checkpoints counted from spans ahead of the poll, and what a
//! poll fills into a span-counted record.

use super::JobState;
use super::records::Streak;
use crate::observe::{
    CheckpointSpan, CheckpointStatus, FailureReason, FinishedCheckpoint, LogEvent, LogKind, SnapshotKind,
};
use crate::state::checkpoint_ids::{LOGGED_CHECKPOINTS, logged_trigger_time};
use crate::state::failure_text::{is_shutdown_failure, is_stop_failure};
use crate::state::outbox;
use crate::state::record::SharedRecord;
use crate::stats::WindowSpec;
use crate::time::Timestamp;

impl JobState {
    /// Takes what a log line says about one of this job's checkpoints: its trigger time, that
    /// it finished, and whether it failed.
    pub(in crate::state) fn observe_log_event(&mut self, event: &LogEvent, now: Timestamp) {
        if event.source != "log" {
            return;
        }
        let Some(id) = event.checkpoint_id else { return };
        let failed = match event.kind {
            LogKind::Triggered | LogKind::Completed => false,
            LogKind::Expired | LogKind::Declined | LogKind::Failed => true,
            _ => return,
        };
        let entry = self.logged.entry(id).or_default();
        if event.kind == LogKind::Triggered {
            entry.triggered_at = logged_trigger_time(&event.message).or(entry.triggered_at);
            entry.savepoint |= event.detail.as_deref().is_some_and(|d| d.contains("Savepoint"));
        } else {
            entry.finished = true;
        }
        while self.logged.len() > LOGGED_CHECKPOINTS {
            self.logged.pop_first();
        }
        let texts = [
            event.reason.as_deref(),
            event.root_cause.as_ref().map(|c| c.message.as_str()),
            event.root_cause.as_ref().map(|c| c.exception.as_str()),
        ];
        let shutdown = texts.into_iter().flatten().any(is_shutdown_failure)
            || event.stack.iter().take(3).any(|l| is_shutdown_failure(l));
        if failed && !shutdown {
            self.failures.count(id, now);
        }
        if failed {
            if let Some(entry) = self.logged.get_mut(&id) {
                entry.failed_stopping = Some(shutdown);
            }
            self.span_failure_told(id, shutdown);
        }
    }

    /// The cause of a failure a span counted is told (by a log line, or by the poll): unless
    /// the job was stopping, or it was a savepoint, or a checkpoint completed after it, it joins
    /// the consecutive failures now.
    fn span_failure_told(&mut self, id: u64, stopping: bool) {
        if !self.traced.take_cause(id) || stopping {
            return;
        }
        let Some(record) = self.recent.iter().rev().find(|r| r.id == id) else { return };
        let completed_since = self.last_completed.as_ref().is_some_and(|c| c.id > id);
        if record.kind != SnapshotKind::Savepoint && !completed_since {
            let at = record.finished_at;
            let reason = record.failure_message.as_deref().and_then(FailureReason::from_message);
            self.consecutive_failures = self.consecutive_failures.saturating_add(1);
            self.failing_since.get_or_insert(at);
            self.tolerance.failed(Some(id), reason, self.tolerable(), at);
        }
    }

    /// A checkpoint span of Flink's trace reporter (`logs::trace`), the second source of
    /// finished checkpoints. Counted here unless the job counted its id already (by the poll or
    /// an earlier span: a no-op) or a poll since counted it among the unobserved (its id is
    /// below the newest one a poll brought: a late span, a no-op too). Its per-phase maxima
    /// and sizes go where the poll's would; what the span lacks, the poll fills in later.
    pub(in crate::state) fn observe_span(
        &mut self,
        span: &CheckpointSpan,
        now: Timestamp,
        window: WindowSpec,
    ) {
        if self.seen.contains(span.id) {
            self.traced.duplicate_spans = self.traced.duplicate_spans.saturating_add(1);
            return;
        }
        if self.newest.is_some_and(|(newest, _)| span.id < newest) {
            self.traced.late_spans = self.traced.late_spans.saturating_add(1);
            return;
        }
        self.seen.insert(span.id);
        let logged = self.logged.get(&span.id).copied().unwrap_or_default();
        let kind = span.kind.unwrap_or(if logged.savepoint {
            SnapshotKind::Savepoint
        } else {
            SnapshotKind::Checkpoint
        });
        let checkpoint = FinishedCheckpoint {
            id: span.id,
            status: span.status,
            kind,
            triggered_at: span.triggered_at,
            // A failure no subtask acknowledged has no end in the span: it was logged now.
            finished_at: span.finished_at.unwrap_or(now),
            end_to_end_ms: span.finished_at.map(|end| end.since(span.triggered_at)),
            checkpointed_bytes: span.checkpointed_bytes,
            full_state_bytes: span.full_state_bytes,
            processed_bytes: span.processed_bytes,
            persisted_bytes: span.persisted_bytes,
            num_subtasks: 0,
            num_acknowledged: 0,
            failure_message: None,
            operators: Vec::new(),
            external_path: None,
        };
        self.traced.counted_by_span(span.id, span.status);
        let streak = match (span.status, logged.failed_stopping) {
            (CheckpointStatus::Failed, Some(stopping)) => {
                // The failure line came first: its cause is known.
                self.traced.take_cause(span.id);
                if stopping { Streak::Not } else { Streak::ByMessage }
            }
            (CheckpointStatus::Failed, None) => Streak::Not,
            (CheckpointStatus::Completed, _) => Streak::ByMessage,
        };
        if self.record_from(&checkpoint, Some(span.max_phases_ms), streak, now, window) {
            self.p95_history.sample(&self.phases, now);
        }
    }

    /// The poll brought a checkpoint a span counted: what the span lacked (per-subtask phases,
    /// the slowest subtask, the failure message, sizes it did not carry) is filled in, the
    /// record replaced (the store rewrites it under the same key) and nothing counted again.
    /// Returns whether the phase histograms changed.
    pub(super) fn fill(
        &mut self,
        checkpoint: &FinishedCheckpoint,
        at: Timestamp,
        window: WindowSpec,
    ) -> bool {
        let Some(pos) = self.recent.iter().position(|r| r.id == checkpoint.id) else {
            // Out of the recent ring already: the store record stays the span's.
            return false;
        };
        let before = self.recent[pos].clone();
        let (record, _) = self.build_record(checkpoint, None);
        if checkpoint.kind == SnapshotKind::Savepoint && before.kind != SnapshotKind::Savepoint {
            self.savepoints.observe(&record);
        }
        let stored = outbox::StoredCheckpoint::new(&record, checkpoint, |op, i| {
            self.subtask_location(op, i).map(str::to_owned)
        });
        self.outbox.push(stored);
        let record = SharedRecord::new(record);
        for last in [&mut self.last_completed, &mut self.last_failed] {
            if last.as_ref().is_some_and(|l| l.id == record.id && l.triggered_at == record.triggered_at) {
                *last = Some(record.clone());
            }
        }
        self.recent[pos] = record.clone();
        if checkpoint.status == CheckpointStatus::Failed {
            let stopping = is_stop_failure(checkpoint.failure_message.as_deref())
                || checkpoint.failure_message.as_deref().is_some_and(is_shutdown_failure);
            if !stopping && checkpoint.kind != SnapshotKind::Savepoint {
                self.failures.count(checkpoint.id, at);
            }
            self.span_failure_told(checkpoint.id, stopping);
            return false;
        }
        if checkpoint.kind == SnapshotKind::Savepoint {
            return false;
        }
        // Only what the span did not carry goes into the histograms now.
        let mut changed = false;
        if before.max_phases_ms.is_none()
            && let Some(phases) = record.max_phases_ms
        {
            for (v, h) in phases.into_iter().zip([
                &mut self.phases.start_delay,
                &mut self.phases.alignment,
                &mut self.phases.sync,
                &mut self.phases.async_,
            ]) {
                h.record(v, at);
            }
            changed = true;
        }
        self.record_operators(checkpoint, at, window);
        changed
    }
}
