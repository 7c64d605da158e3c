//! How a poll changes a job: Flink's counts against the checkpoints counted (each once), what
//! went by unobserved, and a new counting epoch only with evidence (docs/reliability.md,
//! "Counters").

use super::{EPOCH_CONFIRM_POLLS, JobState, SuspectRun};
use crate::observe::{
    CheckpointCounts, CheckpointStatus, FinishedCheckpoint, JobPoll, JobStatus, SnapshotKind,
};
use crate::state::checkpoint_ids::SeenIds;
use crate::state::failure_text::is_shutdown_failure;
use crate::state::record::Totals;
use crate::stats::WindowSpec;

impl JobState {
    /// Whether the poll shows checkpoint ids that restarted: one at or below the newest id
    /// of this epoch, triggered after it (Flink's ids grow with the trigger time).
    fn ids_restarted(&self, poll: &JobPoll) -> bool {
        let Some((newest, at)) = self.newest else { return false };
        let finished = poll.finished.iter().map(|cp| (cp.id, cp.triggered_at));
        let pending = poll.in_progress.iter().map(|cp| (cp.id, cp.triggered_at));
        finished.chain(pending).any(|(id, t)| id <= newest && t.millis() > at.millis())
    }

    /// Counter semantics (docs/reliability.md, "Counters"): Flink's counts going down is a
    /// new counting epoch only with evidence: they stay lower for [`EPOCH_CONFIRM_POLLS`]
    /// polls and the job reported a newer restore (a JobManager failover restores the latest
    /// checkpoint) or its checkpoint ids restarted (a redeploy under the same job id). Until
    /// then the poll is held back: the counters stay at the highest counts (a dip is a glitch,
    /// e.g. a stale answer); afterwards the epoch's highest counts are kept and counting goes
    /// on from the new epoch's.
    pub(in crate::state) fn apply_poll(&mut self, poll: &JobPoll, window: WindowSpec) {
        let counts = poll.counts;
        let entered_running =
            poll.job_state == JobStatus::Running && (!self.polled || self.job_state != JobStatus::Running);
        if entered_running {
            self.running_since = Some(poll.polled_at);
            // First seen already running with completed checkpoints: it did complete one (when
            // it entered RUNNING the daemon cannot know).
            self.completed_since_running = !self.polled && counts.completed > 0;
        }
        self.polled = true;
        let lower =
            counts.completed < self.flink_counts.completed || counts.failed < self.flink_counts.failed;
        let ids_restarted = self.ids_restarted(poll);
        if lower || ids_restarted {
            self.suspect_epoch(poll, ids_restarted);
            return;
        }
        self.suspect = SuspectRun::default();
        if poll.settings.is_some() {
            // Known before the checkpoints are recorded: Flink's count is held against them.
            self.settings.clone_from(&poll.settings);
            self.tolerance.settle(self.tolerable());
        }
        // The highest id counted before this poll.
        let counted_before = self.seen.newest();
        let newly_seen = self.count_listed(poll, window);
        self.count_the_rest(poll, counted_before, newly_seen);
        self.flink_counts = counts;
        if let Some(cp) =
            poll.finished.iter().filter(|cp| cp.triggered_at.millis() > 0).max_by_key(|cp| cp.id)
            && self.newest.is_none_or(|(id, _)| cp.id >= id)
        {
            self.newest = Some((cp.id, cp.triggered_at));
        }
        self.listed_from(poll);
        if poll.latest_restore.is_some() {
            self.latest_restore = poll.latest_restore;
        }
        for deviation_ms in self.shadow.observe_poll(poll) {
            self.trigger_deviation.record(deviation_ms, poll.polled_at);
        }
    }

    /// A poll whose counts went down or whose ids restarted: held back (the counters stay at
    /// the highest counts) until [`EPOCH_CONFIRM_POLLS`] such polls with evidence make it a new
    /// counting epoch, which keeps what the earlier one counted and counts the new one from zero.
    fn suspect_epoch(&mut self, poll: &JobPoll, ids_restarted: bool) {
        let newer_restore = poll
            .latest_restore
            .is_some_and(|(_, at)| self.latest_restore.is_none_or(|(_, known)| at.millis() > known.millis()));
        self.suspect.polls += 1;
        self.suspect.restored |= newer_restore;
        self.suspect.ids_restarted = ids_restarted;
        self.listed_from(poll);
        let evidence = self.suspect.restored || self.suspect.ids_restarted;
        if self.suspect.polls < EPOCH_CONFIRM_POLLS || !evidence {
            return;
        }
        // A new epoch: keep what the earlier one counted, count the new one from zero
        // (from the next poll on, so that the poller fetches the details of its ids).
        self.earlier_incarnations.completed =
            self.earlier_incarnations.completed.saturating_add(self.flink_counts.completed);
        self.earlier_incarnations.failed =
            self.earlier_incarnations.failed.saturating_add(self.flink_counts.failed);
        self.flink_counts = CheckpointCounts::default();
        self.deferred = Totals::default();
        // A new JobMaster: its failure manager counts from zero.
        self.tolerance.start_over();
        // Trigger failures are told from Flink's total and the ids of the new epoch.
        self.total_and_max_id = None;
        if self.suspect.ids_restarted {
            // The old ids say nothing about the new ones; the schedule starts over.
            self.seen = SeenIds::default();
            self.traced.start_over();
            self.newest = None;
            self.shadow.trigger.start_over();
        }
        self.suspect = SuspectRun::default();
    }

    /// Counts the finished checkpoints the poll lists that were not counted yet (a span-counted
    /// one only gets what the span lacked); returns how many of each status.
    fn count_listed(&mut self, poll: &JobPoll, window: WindowSpec) -> Totals {
        let mut finished: Vec<&FinishedCheckpoint> = poll.finished.iter().collect();
        finished.sort_by_key(|cp| cp.id);
        let mut newly_seen = Totals::default();
        let mut latencies_changed = false;
        for checkpoint in finished {
            if !self.seen.insert(checkpoint.id) {
                // A span counted it: the poll only fills in what the span lacked.
                if self.traced.fill(checkpoint.id) {
                    latencies_changed |= self.fill(checkpoint, poll.polled_at, window);
                }
                continue;
            }
            self.traced.counted_by_rest(checkpoint.status);
            match checkpoint.status {
                CheckpointStatus::Completed => newly_seen.completed += 1,
                CheckpointStatus::Failed => {
                    newly_seen.failed += 1;
                    let shutdown = checkpoint.failure_message.as_deref().is_some_and(is_shutdown_failure);
                    // A failed savepoint is FlinkSavepointFailed's, not a checkpoint failure.
                    if !shutdown && checkpoint.kind != SnapshotKind::Savepoint {
                        self.failures.count(checkpoint.id, poll.polled_at);
                    }
                }
            }
            latencies_changed |= self.record(checkpoint, poll.polled_at, window);
        }
        if latencies_changed {
            // Once per poll, after all its checkpoints: the P95s as the metrics show them now.
            self.p95_history.sample(&self.phases, poll.polled_at);
        }
        newly_seen
    }

    /// The rest of the rise of Flink's counts, beyond the `newly_seen` the poll listed: the
    /// triggers that failed without an id, the checkpoints spans counted, and what went by
    /// unobserved (and what that says of the failure streak). `counted_before` is the highest id
    /// counted before the poll.
    fn count_the_rest(&mut self, poll: &JobPoll, counted_before: u64, newly_seen: Totals) {
        let counts = poll.counts;
        let delta_completed = counts.completed.saturating_sub(self.flink_counts.completed);
        let delta_failed = counts.failed.saturating_sub(self.flink_counts.failed);
        // The checkpoints behind the rise that are no longer waiting for a later round: the
        // rise, plus what the previous poll deferred, less what this one defers.
        let released = Totals {
            completed: (delta_completed + self.deferred.completed).saturating_sub(poll.deferred.completed),
            failed: (delta_failed + self.deferred.failed).saturating_sub(poll.deferred.failed),
        };
        self.deferred = Totals { completed: poll.deferred.completed, failed: poll.deferred.failed };
        // Each checkpoint with an id advances the ids by one and Flink's total by one; a trigger
        // that failed before it got an id adds to the total (as failed) only.
        let total = counts.completed.saturating_add(counts.failed).saturating_add(counts.in_progress);
        let newest = poll.finished.iter().map(|f| f.id).chain(poll.in_progress.iter().map(|p| p.id)).max();
        let max_id = newest.unwrap_or(0).max(self.total_and_max_id.map_or(0, |(_, id)| id));
        // Without a previous poll: a job restored from the state file continues from its
        // restored counts and the ids counted before (its first poll brings only new ids); a
        // job seen for the first time has had every id from 1.
        let previous = self.total_and_max_id.or_else(|| {
            let c = self.flink_counts;
            (c != CheckpointCounts::default()).then_some((
                c.completed.saturating_add(c.failed).saturating_add(c.in_progress),
                counted_before,
            ))
        });
        let without_id = match previous {
            None => total.saturating_sub(max_id),
            Some((t, id)) if total >= t => (total - t).saturating_sub(max_id.saturating_sub(id)),
            Some(_) => 0,
        }
        .min(delta_failed);
        self.failed_without_id = self.failed_without_id.saturating_add(without_id);
        self.total_and_max_id = Some((total, max_id));
        // Checkpoints spans counted since earlier polls are behind as much of the released rise
        // of Flink's counts as they reach; only the rest went by unobserved (Flink no longer
        // lists them: a deferred one is not unobserved until then).
        let by_spans = self.traced.reconcile(Totals {
            completed: released.completed.saturating_sub(newly_seen.completed),
            failed: released.failed.saturating_sub(newly_seen.failed),
        });
        self.traced.prune(poll.finished.iter().map(|cp| cp.id).min());
        let unseen_completed = released.completed.saturating_sub(newly_seen.completed + by_spans.completed);
        let unseen_failed = released.failed.saturating_sub(newly_seen.failed + by_spans.failed);
        let unseen_failed_with_id = unseen_failed.saturating_sub(without_id);
        if unseen_completed > 0 {
            // A checkpoint completed between polls without its details: the run of failures
            // ended (in which order is unknown; the ones seen after it count again next time).
            self.consecutive_failures = 0;
            self.failing_since = None;
            self.completed_since_running = true;
            self.tolerance.completed(self.newest.map_or(0, |(id, _)| id));
        } else if unseen_failed_with_id > 0 && poll.job_state == JobStatus::Running {
            self.consecutive_failures = self.consecutive_failures.saturating_add(unseen_failed_with_id);
            self.failing_since.get_or_insert(poll.polled_at);
            self.tolerance.failed_unseen(unseen_failed_with_id, self.tolerable(), poll.polled_at);
        }
        self.unobserved.completed = self.unobserved.completed.saturating_add(unseen_completed);
        self.unobserved.failed = self.unobserved.failed.saturating_add(unseen_failed);
    }

    /// What a poll says about the job whatever its counts: name, state, settings, the
    /// checkpoints in progress.
    fn listed_from(&mut self, poll: &JobPoll) {
        self.name.clone_from(&poll.job_name);
        self.job_state.clone_from(&poll.job_state);
        self.last_seen = poll.polled_at;
        if poll.settings.is_some() {
            self.settings.clone_from(&poll.settings);
        }
        self.in_progress.clone_from(&poll.in_progress);
        if poll.job_state.has_ended() {
            self.end();
        }
        self.in_progress_polled_at = poll.polled_at;
    }
}
