//! What a job remembers by checkpoint id, bounded in memory: the ids it counted, what the
//! JobManager log said about each of its latest checkpoints, and the failed ones counted once
//! whichever source said so first.

use std::collections::BTreeSet;

use crate::time::Timestamp;

/// How many runs of consecutive counted ids per job are remembered. A job whose checkpoints are
/// all polled keeps one run whatever its age; each checkpoint the poller missed (counted from
/// Flink's counts instead) splits a run. Ids below the oldest remembered run count as seen, so
/// memory per job stays bounded: at most this many runs of 16 bytes.
pub(crate) const SEEN_RUNS_CAPACITY: usize = 128;

/// The ids of finished checkpoints already counted, as runs of consecutive ids, bounded in
/// memory. (Before issue 31 they were a set of up to 1,024 ids, ~12 KB per job once full; the
/// state file still reads that form.)
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "SeenIdsOnDisk", into = "SeenIdsOnDisk")]
pub(crate) struct SeenIds {
    /// Every id below this counts as seen.
    pub(crate) floor: u64,
    /// Counted ids at or above `floor`: inclusive (first, last) runs, sorted, neither
    /// overlapping nor adjacent.
    runs: Vec<(u64, u64)>,
}

impl SeenIds {
    /// Whether `id` was counted already.
    pub(crate) fn contains(&self, id: u64) -> bool {
        if id < self.floor {
            return true;
        }
        let i = self.runs.partition_point(|&(_, last)| last < id);
        self.runs.get(i).is_some_and(|&(first, _)| first <= id)
    }

    /// The highest id counted (`floor - 1` when no run is remembered, 0 when nothing is).
    pub(crate) fn newest(&self) -> u64 {
        self.runs.last().map_or(self.floor.saturating_sub(1), |&(_, last)| last)
    }

    #[cfg(test)]
    /// How many runs are remembered (for tests and sizing).
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Marks `id` as counted; returns `true` if it was new.
    pub(crate) fn insert(&mut self, id: u64) -> bool {
        if self.contains(id) {
            return false;
        }
        // The first run past `id` (`id` is in none of them).
        let i = self.runs.partition_point(|&(_, last)| last < id);
        let joins_previous = i > 0 && self.runs[i - 1].1.checked_add(1) == Some(id);
        let joins_next = id.checked_add(1).is_some_and(|next| self.runs.get(i).is_some_and(|r| r.0 == next));
        match (joins_previous, joins_next) {
            (true, true) => {
                self.runs[i - 1].1 = self.runs[i].1;
                self.runs.remove(i);
            }
            (true, false) => self.runs[i - 1].1 = id,
            (false, true) => self.runs[i].0 = id,
            (false, false) => self.runs.insert(i, (id, id)),
        }
        self.bound();
        true
    }

    /// Forgets the oldest runs beyond [`SEEN_RUNS_CAPACITY`]: their ids, and any gaps below
    /// them, count as seen from then on.
    fn bound(&mut self) {
        while self.runs.len() > SEEN_RUNS_CAPACITY {
            // A run ending at u64::MAX stays remembered instead of wrapping the floor to 0.
            let Some(floor) = self.runs[0].1.checked_add(1) else { break };
            self.floor = floor;
            self.runs.remove(0);
        }
    }
}

/// `SeenIds` as the state file holds it: its runs, or (files written before issue 31) its ids
/// one by one.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct SeenIdsOnDisk {
    floor: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    runs: Vec<(u64, u64)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    ids: Vec<u64>,
}

impl From<SeenIdsOnDisk> for SeenIds {
    fn from(disk: SeenIdsOnDisk) -> Self {
        // A damaged or hand-edited file may hold runs out of order, overlapping or reversed:
        // they are normalised rather than trusted.
        let mut runs: Vec<(u64, u64)> = disk
            .runs
            .into_iter()
            .map(|(a, b)| (a.min(b), a.max(b)))
            .chain(disk.ids.into_iter().map(|id| (id, id)))
            .filter(|&(_, last)| last >= disk.floor)
            .map(|(first, last)| (first.max(disk.floor), last))
            .collect();
        runs.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(runs.len());
        for (first, last) in runs {
            match merged.last_mut() {
                Some(previous) if first <= previous.1.saturating_add(1) => previous.1 = previous.1.max(last),
                _ => merged.push((first, last)),
            }
        }
        let mut seen = SeenIds { floor: disk.floor, runs: merged };
        seen.bound();
        seen
    }
}

impl From<SeenIds> for SeenIdsOnDisk {
    fn from(seen: SeenIds) -> Self {
        SeenIdsOnDisk { floor: seen.floor, runs: seen.runs, ids: Vec::new() }
    }
}

/// How many checkpoint ids per job the log trackers remember (`JobState::logged` and the ids
/// of [`FailureEvidence`]); older ones are done with by the time 64 newer ones were triggered.
pub(crate) const LOGGED_CHECKPOINTS: usize = 64;

/// What a JobManager log line said about one checkpoint of a job, ahead of the next poll.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LoggedCheckpoint {
    /// Trigger time, from `Triggering checkpoint N (…) @ <ms> for job J`.
    pub(crate) triggered_at: Option<Timestamp>,
    /// Whether a line said it completed, expired, was declined or failed.
    pub(crate) finished: bool,
    /// Whether its trigger line said it was a savepoint (`type=SavepointType{…}`).
    pub(crate) savepoint: bool,
    /// A line said it failed: `Some(true)` when the job was stopping (no checkpoint failure).
    pub(crate) failed_stopping: Option<bool>,
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
    pub(crate) last_at: Option<Timestamp>,
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
    pub(crate) fn count(&mut self, id: u64, at: Timestamp) -> bool {
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
    fn consecutive_ids_keep_one_run_however_many() {
        let mut seen = SeenIds::default();
        for id in 1..=100_000 {
            assert!(seen.insert(id));
        }
        assert_eq!(seen.runs(), 1);
        assert_eq!(seen.newest(), 100_000);
        assert!((1..=100_000).all(|id| seen.contains(id)));
        assert!(!seen.contains(0) && !seen.contains(100_001));
        assert!(!seen.insert(17));
    }

    #[test]
    fn remembered_runs_are_bounded_and_gaps_below_them_count_as_seen() {
        let mut seen = SeenIds::default();
        // Every third id missed: each counted pair is a run of its own.
        let counted: Vec<u64> = (0..3_000).filter(|id| id % 3 != 0).collect();
        for &id in &counted {
            assert!(seen.insert(id));
        }
        assert_eq!(seen.runs(), SEEN_RUNS_CAPACITY);
        assert!(counted.iter().all(|&id| seen.contains(id)));
        // A recent gap is still open; an old one is below the floor.
        assert!(!seen.contains(2_997) && seen.contains(3));
        // Filling a gap joins its neighbours into one run.
        assert!(seen.insert(2_997));
        assert_eq!(seen.runs(), SEEN_RUNS_CAPACITY - 1);
        assert_eq!(seen.newest(), 2_999);
    }

    #[test]
    fn ids_inserted_out_of_order_merge_into_runs() {
        let mut seen = SeenIds::default();
        for id in [10, 12, 14, 11, 13, 5, 7, 6] {
            assert!(seen.insert(id));
        }
        assert_eq!(seen.runs, vec![(5, 7), (10, 14)]);
        assert!(!seen.contains(8) && !seen.contains(9) && !seen.contains(15));
    }

    #[test]
    fn the_state_file_reads_both_forms() {
        let mut seen = SeenIds::default();
        for id in [3, 4, 5, 9] {
            seen.insert(id);
        }
        let json = serde_json::to_string(&seen).unwrap();
        assert_eq!(json, r#"{"floor":0,"runs":[[3,5],[9,9]]}"#);
        assert_eq!(serde_json::from_str::<SeenIds>(&json).unwrap(), seen);
        // Written before issue 31: the ids one by one.
        let old: SeenIds = serde_json::from_str(r#"{"floor":2,"ids":[3,4,5,9]}"#).unwrap();
        assert_eq!((old.floor, old.runs.clone()), (2, vec![(3, 5), (9, 9)]));
        // Damaged: reversed, overlapping, below the floor.
        let odd: SeenIds = serde_json::from_str(r#"{"floor":4,"runs":[[9,7],[1,2],[3,5],[5,6]]}"#).unwrap();
        assert_eq!(odd.runs, vec![(4, 9)]);
    }
}
