//! The checks that need no model: a restart (the scheduler starts again), checkpoint ids that
//! skipped, a checkpoint that outlived its timeout, and a stall (the expected trigger overdue at
//! two polls in a row).

use super::deviation::{Deviation, DeviationKind};
use super::predict::{RestartMark, Seen, run_model};
use super::{OVERDUE_GRACE_MS, TriggerShadow, stall_tolerance_ms, tolerance_ms};
use crate::model::coordinator::{Binding, Outcome};
use crate::observe::{CheckpointStatus, InProgressCheckpoint, JobPoll, JobStatus};
use crate::time::{Timestamp, human_ms};

impl TriggerShadow {
    pub(super) fn detect_restart(&mut self, poll: &JobPoll) {
        let restored = poll.counts.restored;
        let mut restarted = self.last_restored.is_some_and(|last| restored > last);
        if let Some(restore) = poll.latest_restore {
            restarted |= self.last_restore.is_some_and(|last| last != restore);
            if self.last_restore.is_none() && self.last_restored.is_some() && self.last.is_some() {
                restarted = true;
            }
            self.last_restore = Some(restore);
        }
        restarted |= poll.job_state == JobStatus::Restarting && self.last.is_some();
        self.last_restored = Some(restored);
        if restarted {
            let after = poll.latest_restore.map_or(poll.polled_at, |(_, at)| at);
            self.mark_restart(after.min(poll.polled_at));
        }
    }

    /// A rescale (Flink's history or a parallelism change): its restart is a restart of the
    /// schedule, explained by the rescale. Checkpoints triggered before the old execution
    /// stopped belong to the old schedule.
    pub(crate) fn note_rescale(&mut self, rescale: &crate::observe::Rescale) {
        let stopped = rescale.restarted_at.unwrap_or(rescale.at);
        self.rescale = Some(Box::new((stopped, rescale.parallelism_words())));
        self.mark_restart(stopped);
    }

    pub(super) fn mark_restart(&mut self, after: Timestamp) {
        match &mut self.restart {
            // Already known (a failure said so, then the restore count went up): keep the earlier.
            Some(mark) => mark.after = mark.after.min(after),
            None => {
                self.restart = Some(RestartMark { consecutive_failures: self.consecutive_failures, after });
                self.consecutive_failures = 0;
            }
        }
    }

    pub(super) fn check_id_skip(&mut self, poll: &JobPoll) {
        let c = poll.counts;
        let total = c.completed.saturating_add(c.failed).saturating_add(c.in_progress);
        let newest = poll.finished.iter().map(|f| f.id).chain(poll.in_progress.iter().map(|p| p.id)).max();
        let max_id = newest.unwrap_or(0).max(self.max_id);
        if let Some((prev_total, prev_max)) = self.last_counts
            && total >= prev_total
            && prev_max > 0
            && max_id > prev_max
        {
            let advanced = max_id - prev_max;
            let counted = total - prev_total;
            if advanced > counted {
                let skipped = advanced - counted;
                let sentence = format!(
                    "checkpoint ids advanced by {advanced} (to {max_id}) but Flink counted only {counted} new \
                     checkpoint(s): {skipped} id(s) skipped with no checkpoint behind them (id counter \
                     jump, e.g. after a JobManager failover)"
                );
                self.push(Deviation {
                    checkpoint_id: max_id,
                    at: poll.polled_at,
                    kind: DeviationKind::IdSkip,
                    explained: false,
                    sentence,
                });
            }
        }
        self.max_id = max_id;
        self.last_counts = Some((total, max_id));
    }

    pub(super) fn check_not_expired_on_finish(&mut self, s: &Seen) {
        let Some(timeout) = self.settings.as_ref().and_then(|st| st.timeout_ms) else { return };
        let tol = tolerance_ms(timeout);
        if s.status == CheckpointStatus::Completed
            && s.duration_ms > timeout + tol
            && self.flagged_overdue.insert(s.id)
        {
            let sentence = format!(
                "checkpoint {} completed {} after its trigger, past its {} timeout: it should have expired \
                 (JobManager overloaded or its timer thread stalled?)",
                s.id,
                human_ms(s.duration_ms),
                human_ms(timeout)
            );
            self.push(Deviation {
                checkpoint_id: s.id,
                at: s.triggered_at,
                kind: DeviationKind::NotExpired,
                explained: false,
                sentence,
            });
        }
    }

    pub(super) fn track_pending(&mut self, in_progress: &[InProgressCheckpoint], now: Timestamp) {
        let timeout = self.settings.as_ref().and_then(|s| s.timeout_ms);
        self.pending.retain(|id, _| in_progress.iter().any(|p| p.id == *id));
        for p in in_progress {
            if let Some(timeout) = timeout {
                self.pending.entry(p.id).or_insert(p.triggered_at.plus_millis(timeout as i64));
            }
        }
        let overdue: Vec<(u64, Timestamp)> = self
            .pending
            .iter()
            .filter(|(id, deadline)| {
                now.since(**deadline) > OVERDUE_GRACE_MS.max(tolerance_ms(timeout.unwrap_or(0)))
                    && !self.flagged_overdue.contains(id)
            })
            .map(|(id, deadline)| (*id, *deadline))
            .collect();
        for (id, deadline) in overdue {
            self.flagged_overdue.insert(id);
            let timeout = timeout.unwrap_or(0);
            let trigger = deadline.plus_millis(-(timeout as i64));
            let sentence = format!(
                "checkpoint {id} is still in progress {} after its trigger, past its {} timeout: the \
                 coordinator did not expire it (JobManager overloaded or its timer thread stalled?)",
                human_ms(now.since(trigger)),
                human_ms(timeout)
            );
            self.push(Deviation {
                checkpoint_id: id,
                at: now,
                kind: DeviationKind::NotExpired,
                explained: false,
                sentence,
            });
        }
        // Bounded memory: forget flags of ids far behind.
        while self.flagged_overdue.len() > 64 {
            self.flagged_overdue.pop_first();
        }
    }

    pub(super) fn update_expectation(&mut self, in_progress: &[InProgressCheckpoint], now: Timestamp) {
        self.expected_next = None;
        self.stalled_for_ms = None;
        let overdue_before = self.overdue_at_last_poll.take();
        let (Some(config), Some(last)) = (self.config.as_ref(), self.last.as_ref()) else { return };
        if self.restart.is_some() {
            return;
        }
        let mut known =
            if self.since_anchor.is_empty() { vec![last.clone()] } else { self.since_anchor.clone() };
        let filler = self.filler_ms();
        for p in in_progress.iter().filter(|p| p.id > last.id) {
            let assumed = now.since(p.triggered_at).max(filler);
            known.push(Seen {
                id: p.id,
                triggered_at: p.triggered_at,
                outcome: Outcome::Complete { duration_ms: assumed },
                duration_ms: assumed,
                status: CheckpointStatus::Completed,
            });
        }
        self.expected_next = run_model(config, &known, 0, filler).first().copied();
        // With an interval during backlog configured, the next trigger may come a backlog
        // interval after the last one (a backlog may start at any tick), or, with checkpoints
        // off during backlog, not at all until it ends.
        let allowance = self.backlog_allowance_ms();
        if self.backlog_in_force
            && let Some(Some(backlog)) = allowance
        {
            let last_trigger = known.last().map_or(last.triggered_at, |k| k.triggered_at);
            self.expected_next = Some((last_trigger.plus_millis(backlog as i64), Binding::Interval));
        }
        let deadline = match allowance {
            Some(None) => None,
            Some(Some(backlog)) => self.expected_next.map(|(at, _)| {
                let last_trigger = known.last().map_or(last.triggered_at, |k| k.triggered_at);
                at.max(last_trigger.plus_millis(backlog as i64))
            }),
            None => self.expected_next.map(|(at, _)| at),
        };
        let tolerance = stall_tolerance_ms(config.base_interval(), self.lag_allowed_ms(), self.poll_gap_ms);
        let overdue = deadline.filter(|at| in_progress.is_empty() && now > *at && now.since(*at) > tolerance);
        // Evidence must survive the next poll: the same expected trigger overdue at two polls
        // in a row, with nothing triggered in between.
        if let Some(at) = overdue
            && overdue_before == Some(at)
        {
            self.stalled_for_ms = Some(now.since(at));
        }
        self.overdue_at_last_poll = overdue;
    }
}
