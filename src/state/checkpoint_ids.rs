//! What a job remembers by checkpoint id, bounded in memory: the ids it counted, what the
//! JobManager log said about each of its latest checkpoints, and the failed ones counted once
//! whichever source said so first.

use std::collections::BTreeSet;

use crate::time::Timestamp;

/// How many finished checkpoint ids per job are remembered individually. Ids below the
/// oldest remembered one count as seen, so memory per job stays bounded.
pub const SEEN_IDS_CAPACITY: usize = 1024;

/// The ids of finished checkpoints already counted, bounded in memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SeenIds {
    /// Every id below this counts as seen.
    pub floor: u64,
    /// Seen ids at or above `floor`.
    pub ids: BTreeSet<u64>,
}

impl SeenIds {
    /// Whether `id` was counted already.
    pub fn contains(&self, id: u64) -> bool {
        id < self.floor || self.ids.contains(&id)
    }

    /// Marks `id` as counted; returns `true` if it was new.
    pub fn insert(&mut self, id: u64) -> bool {
        if self.contains(id) {
            return false;
        }
        self.ids.insert(id);
        while self.ids.len() > SEEN_IDS_CAPACITY {
            if let Some(oldest) = self.ids.pop_first() {
                // An id of u64::MAX stays remembered instead of wrapping the floor to 0.
                match oldest.checked_add(1) {
                    Some(floor) => self.floor = floor,
                    None => {
                        self.ids.insert(oldest);
                        break;
                    }
                }
            }
        }
        true
    }
}

/// How many checkpoint ids per job the log trackers remember (`JobState::logged` and the ids
/// of [`FailureEvidence`]); older ones are done with by the time 64 newer ones were triggered.
pub const LOGGED_CHECKPOINTS: usize = 64;

/// What a JobManager log line said about one checkpoint of a job, ahead of the next poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoggedCheckpoint {
    /// Trigger time, from `Triggering checkpoint N (…) @ <ms> for job J`.
    pub triggered_at: Option<Timestamp>,
    /// Whether a line said it completed, expired, was declined or failed.
    pub finished: bool,
    /// Whether its trigger line said it was a savepoint (`type=SavepointType{…}`).
    pub savepoint: bool,
    /// A line said it failed: `Some(true)` when the job was stopping (no checkpoint failure).
    pub failed_stopping: Option<bool>,
}

/// Failed checkpoints the daemon knows of, from whichever source said so first: a JobManager
/// log line (`expired`, `declined`, `failed` with a checkpoint id) or a poll that found it
/// failed. Each id counts once; failures of a job that is shutting down (the coordinator
/// suspending at cancel, tasks cancelled or not running) do not count: they are not a
/// checkpoint problem.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FailureEvidence {
    /// Failed checkpoints counted, lifetime.
    pub total: u64,
    /// When the latest one was counted.
    pub last_at: Option<Timestamp>,
    /// The ids counted recently (at most [`LOGGED_CHECKPOINTS`]; below `floor` all count as
    /// seen).
    ids: BTreeSet<u64>,
    floor: u64,
}

impl FailureEvidence {
    /// Whether checkpoint `id` was counted (ids below the remembered ones count as counted).
    pub fn counted(&self, id: u64) -> bool {
        id < self.floor || self.ids.contains(&id)
    }

    /// Counts checkpoint `id` as failed at `at` unless it was counted already; returns whether
    /// it was new.
    pub fn count(&mut self, id: u64, at: Timestamp) -> bool {
        if id < self.floor || !self.ids.insert(id) {
            return false;
        }
        while self.ids.len() > LOGGED_CHECKPOINTS {
            if let Some(oldest) = self.ids.pop_first() {
                self.floor = oldest + 1;
            }
        }
        self.total += 1;
        self.last_at = Some(at);
        true
    }
}

/// The trigger time a `Triggering checkpoint N (…) @ <ms> for job J` line states.
pub(super) fn logged_trigger_time(message: &str) -> Option<Timestamp> {
    let (_, tail) = message.rsplit_once("@ ")?;
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok().map(Timestamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_ids_are_bounded() {
        let mut seen = SeenIds::default();
        for id in 0..5000 {
            assert!(seen.insert(id));
        }
        assert_eq!(seen.ids.len(), SEEN_IDS_CAPACITY);
        assert!((0..5000).all(|id| seen.contains(id)));
        assert!(!seen.insert(17));
    }
}
