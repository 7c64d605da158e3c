//! Flink's own count of a job's consecutive failed checkpoints, as `CheckpointFailureManager`
//! keeps it: which failures count towards `tolerable-failed-checkpoints`, when it starts over,
//! and how often the job was failed for exceeding it.
//!
//! Flink counts a failed checkpoint only for the reasons `FailureReason::counts_toward_tolerable`
//! names (expired, declined, asynchronous snapshot, I/O, finalisation), each id once, and none
//! older than the latest completed checkpoint. The count starts over when a newer checkpoint
//! completes, and when it exceeds the tolerable number: Flink clears it and fails the job (the
//! job restarts or fails, as its restart strategy decides). A new JobMaster starts from zero
//! too. The JobManager logs the count before each failure ("(N consecutive failed attempts so
//! far)"), so after a failure the count here is the N of the next such line. A failure whose
//! reason is not known (no message yet) counts: the failures that do not count (a task failure,
//! a cancel, a subsumed checkpoint) bring their message.

use std::collections::BTreeSet;

use crate::model::coordinator::UNLIMITED_TOLERABLE;
use crate::observe::FailureReason;
use crate::time::Timestamp;

/// Counted ids remembered (Flink counts an id once); beyond this the lowest are forgotten.
const COUNTED_IDS: usize = 1024;

/// A job's count towards `tolerable-failed-checkpoints`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToleranceCount {
    count: u64,
    counted: BTreeSet<u64>,
    last_completed: Option<u64>,
    exceeded: u64,
    last_exceeded_at: Option<Timestamp>,
}

impl ToleranceCount {
    /// Flink's count now: counted failures since the last completed checkpoint or the last time
    /// it was exceeded.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Times the count went past the tolerable number, each a job failure by Flink (a counter).
    pub fn exceeded(&self) -> u64 {
        self.exceeded
    }

    /// When it last did.
    pub(crate) fn last_exceeded_at(&self) -> Option<Timestamp> {
        self.last_exceeded_at
    }

    /// Checkpoint `id` completed: a newer one than the last starts the count over.
    pub(crate) fn completed(&mut self, id: u64) {
        if self.last_completed.is_none_or(|last| id > last) {
            self.last_completed = Some(id);
            self.clear();
        }
    }

    /// Checkpoint `id` failed for `reason` (`None`: not known) at `at`; returns whether this
    /// failure exceeded the tolerable number (Flink fails the job now).
    pub(crate) fn failed(
        &mut self,
        id: Option<u64>,
        reason: Option<FailureReason>,
        tolerable: Option<u32>,
        at: Timestamp,
    ) -> bool {
        if tolerable == Some(UNLIMITED_TOLERABLE)
            || id.is_some_and(|id| self.last_completed.is_some_and(|last| id <= last))
            || reason.is_some_and(|r| !r.counts_toward_tolerable(true))
        {
            return false;
        }
        if let Some(id) = id {
            if !self.counted.insert(id) {
                return false;
            }
            while self.counted.len() > COUNTED_IDS {
                self.counted.pop_first();
            }
        }
        self.count = self.count.saturating_add(1);
        self.exceed_at(tolerable, at)
    }

    /// `n` failures that went by between polls without their details (reasons unknown).
    pub(crate) fn failed_unseen(&mut self, n: u64, tolerable: Option<u32>, at: Timestamp) {
        for _ in 0..n.min(COUNTED_IDS as u64) {
            self.failed(None, None, tolerable, at);
        }
    }

    /// The count as far as the tolerable number allows when it was learnt late (the job's
    /// settings came after its failures, or the count was rebuilt after a restart of the
    /// daemon): Flink started over at each exceedance, whose times are not known here.
    pub(crate) fn settle(&mut self, tolerable: Option<u32>) {
        if let Some(t) = tolerable.filter(|t| *t != UNLIMITED_TOLERABLE) {
            self.count %= u64::from(t) + 1;
        }
    }

    /// A new JobMaster (a new counting epoch of the job): Flink's failure manager is new.
    pub(crate) fn start_over(&mut self) {
        self.clear();
        self.last_completed = None;
    }

    /// Rebuilt from the recent checkpoints (after a restart of the daemon), oldest first: the
    /// ids and reasons of failures counted since the newest completed one.
    pub(crate) fn rebuilt(
        recent: impl Iterator<Item = (u64, bool, Option<FailureReason>)>,
    ) -> ToleranceCount {
        let mut count = ToleranceCount::default();
        for (id, completed, reason) in recent {
            if completed {
                count.completed(id);
            } else {
                count.failed(Some(id), reason, None, Timestamp(0));
            }
        }
        count
    }

    fn exceed_at(&mut self, tolerable: Option<u32>, at: Timestamp) -> bool {
        let Some(t) = tolerable else { return false };
        if self.count <= u64::from(t) {
            return false;
        }
        self.exceeded = self.exceeded.saturating_add(1);
        self.last_exceeded_at = Some(at);
        self.clear();
        true
    }

    fn clear(&mut self) {
        self.count = 0;
        self.counted.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use FailureReason::*;

    const T: Timestamp = Timestamp(1_000);

    /// The `tolerable-exceeded` captures: tolerable 2, every checkpoint declined by an async
    /// failure; the JobManager logs 0, 1, 2 consecutive failed attempts, the third failure
    /// fails the job, and the next run starts from 0 again.
    #[test]
    fn counts_as_the_jobmanager_logs_it_and_starts_over_when_exceeded() {
        let mut c = ToleranceCount::default();
        let mut logged_before = Vec::new();
        let mut exceeded_at = Vec::new();
        for id in 1..=9 {
            logged_before.push(c.count());
            if c.failed(Some(id), Some(CheckpointAsyncException), Some(2), Timestamp(id as i64)) {
                exceeded_at.push(id);
            }
        }
        assert_eq!(logged_before, vec![0, 1, 2, 0, 1, 2, 0, 1, 2]);
        assert_eq!(exceeded_at, vec![3, 6, 9]);
        assert_eq!((c.count(), c.exceeded(), c.last_exceeded_at()), (0, 3, Some(Timestamp(9))));
    }

    #[test]
    fn with_tolerable_zero_the_first_counted_failure_fails_the_job() {
        let mut c = ToleranceCount::default();
        assert!(c.failed(Some(1), Some(CheckpointExpired), Some(0), T));
        assert_eq!((c.count(), c.exceeded()), (0, 1));
    }

    #[test]
    fn only_flinks_reasons_count_each_id_once_and_not_before_the_last_completed() {
        let mut c = ToleranceCount::default();
        c.completed(5);
        for reason in [TaskFailure, CheckpointSubsumed, CheckpointCoordinatorSuspend, JobFailoverRegion] {
            assert!(!c.failed(Some(6), Some(reason), Some(3), T));
        }
        assert_eq!(c.count(), 0, "reasons Flink does not count");
        c.failed(Some(4), Some(CheckpointExpired), Some(3), T);
        assert_eq!(c.count(), 0, "older than the last completed checkpoint");
        c.failed(Some(6), Some(CheckpointDeclined), Some(3), T);
        c.failed(Some(6), Some(CheckpointExpired), Some(3), T);
        c.failed(Some(7), None, Some(3), T);
        assert_eq!(c.count(), 2, "id 6 once; an unknown reason counts");
        c.completed(3);
        assert_eq!(c.count(), 2, "an older completion does not reset");
        c.completed(8);
        assert_eq!(c.count(), 0);
        assert!(!c.failed(Some(9), Some(CheckpointExpired), Some(UNLIMITED_TOLERABLE), T));
        assert_eq!(c.count(), 0, "unlimited: Flink does not count");
    }

    #[test]
    fn a_count_learnt_late_is_settled_by_the_tolerable_number_and_a_new_jobmaster_starts_over() {
        let recent = (1..=8).map(|id| (id, false, Some(CheckpointDeclined)));
        let mut c = ToleranceCount::rebuilt(recent);
        assert_eq!(c.count(), 8);
        c.settle(Some(2));
        assert_eq!((c.count(), c.exceeded()), (2, 0), "8 failures at tolerable 2: 3 + 3 + 2");
        c.start_over();
        assert_eq!(c.count(), 0);
        c.failed(Some(1), Some(CheckpointDeclined), Some(2), T);
        assert_eq!(c.count(), 1, "ids of a new JobMaster count again");
    }
}
