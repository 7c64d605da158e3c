//! What the checkpoint storage held (`sources::storage`), kept beside each job and cluster: the
//! completed checkpoints' paths from the polls (where the storage source looks), the latest
//! listing's findings and the `_metadata` sizes over the rounds; per cluster the rounds'
//! request counters, the directories that could not be reached and the folders of jobs that no
//! longer run. Not persisted: a restart lists again.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::observe::{
    BaseStorage, CheckpointStatus, FinishedCheckpoint, JobStorage, SnapshotKind, StorageRound,
};
use crate::time::Timestamp;

/// Completed checkpoints' paths kept per job.
const PATHS_KEPT: usize = 64;

/// `_metadata` sizes kept per job, one per checkpoint id.
const METADATA_KEPT: usize = 32;

/// Asynchronous uploads that took at least this long are rated (shorter ones say nothing of the
/// storage's throughput).
pub(crate) const UPLOAD_RATED_MS: u64 = 200;

/// The slowest subtask's siblings upload at least this many times faster: that subtask (or its
/// host), not the storage.
const ONE_SUBTASK_FACTOR: f64 = 3.0;

/// One subtask's upload in the async phase.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SubtaskUpload {
    /// Its operator chain's name.
    pub(crate) operator: String,
    /// Its index.
    pub(crate) index: u32,
    /// Bytes per second: bytes persisted (Flink's `checkpointed_size`) over the async duration.
    pub(crate) rate: f64,
    /// Bytes persisted.
    pub(crate) bytes: u64,
    /// The async duration, ms.
    pub(crate) async_ms: u64,
}

/// The upload rate of the async phase per subtask in one checkpoint: the slowest subtask against
/// its siblings' (the other subtasks of its operator) median. Every subtask slow alike is the
/// storage's throughput; one slow among fast siblings is that subtask or its host.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UploadSpread {
    /// The checkpoint.
    pub(crate) checkpoint_id: u64,
    /// Whether it completed.
    pub(crate) completed: bool,
    /// Subtasks rated (an async phase of [`UPLOAD_RATED_MS`] or more, bytes persisted).
    pub(crate) rated: usize,
    /// The slowest.
    pub(crate) slowest: SubtaskUpload,
    /// Its siblings' median rate, bytes per second (`None`: it has no rated sibling).
    pub(crate) siblings_median: Option<f64>,
    /// The slowest subtask's async duration over the checkpoint's end-to-end duration (how much
    /// of the checkpoint the upload was), 0 when the checkpoint has no duration.
    pub(crate) async_share: f64,
}

impl UploadSpread {
    /// The spread of `cp`'s subtasks, `None` when none is rated.
    pub(crate) fn of(cp: &FinishedCheckpoint) -> Option<UploadSpread> {
        let mut rates: Vec<SubtaskUpload> = Vec::new();
        for op in &cp.operators {
            for st in &op.subtasks {
                if let (Some(bytes), Some(async_ms)) = (st.checkpointed_bytes, st.async_ms)
                    && async_ms >= UPLOAD_RATED_MS
                    && bytes > 0
                {
                    let rate = bytes as f64 * 1000.0 / async_ms as f64;
                    rates.push(SubtaskUpload {
                        operator: op.name.clone(),
                        index: st.index,
                        rate,
                        bytes,
                        async_ms,
                    });
                }
            }
        }
        rates.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        let rated = rates.len();
        let mut rest = rates.into_iter();
        let slowest = rest.next()?;
        let siblings: Vec<f64> = rest.filter(|r| r.operator == slowest.operator).map(|r| r.rate).collect();
        let siblings_median = (!siblings.is_empty()).then(|| siblings[siblings.len() / 2]);
        let duration = cp.end_to_end_ms.unwrap_or(0).max(cp.finished_at.since(cp.triggered_at));
        let async_share = if duration > 0 { slowest.async_ms as f64 / duration as f64 } else { 0.0 };
        Some(UploadSpread {
            checkpoint_id: cp.id,
            completed: cp.status == CheckpointStatus::Completed,
            rated,
            slowest,
            siblings_median,
            async_share,
        })
    }

    /// One subtask uploads slowly among fast siblings: that subtask or its host.
    pub(crate) fn one_subtask(&self) -> bool {
        self.siblings_median.is_some_and(|m| m > ONE_SUBTASK_FACTOR * self.slowest.rate)
    }

    /// Every subtask uploads slowly alike: the storage's throughput.
    pub(crate) fn every_subtask(&self) -> bool {
        self.siblings_median.is_some() && !self.one_subtask()
    }

    /// Whether the upload was most of the checkpoint's time (half or more of its end-to-end
    /// duration): then the upload is why the checkpoint was slow.
    pub(crate) fn upload_bound(&self) -> bool {
        self.async_share >= 0.5
    }
}

/// A completed checkpoint as the storage source needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KnownCheckpoint {
    /// Where Flink stored it.
    pub(crate) path: String,
    /// Its full state size as Flink reports it.
    pub(crate) full_state_bytes: Option<u64>,
}

/// A job's storage: what the polls said and the latest listing found.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct JobStorageState {
    /// Completed checkpoints (not savepoints) by id, the newest [`PATHS_KEPT`].
    pub(crate) paths: BTreeMap<u64, KnownCheckpoint>,
    /// The latest listing, and when it was made.
    pub(crate) latest: Option<(Box<JobStorage>, Timestamp)>,
    /// `_metadata` size by checkpoint id, over the rounds (the newest [`METADATA_KEPT`]).
    pub(crate) metadata: VecDeque<(u64, u64)>,
    /// Listings of its directory the storage throttled (`503 SlowDown`, 429), since the start.
    pub(crate) throttled: u64,
    /// The async phase's upload rate per subtask in the newest checkpoint (completed or failed)
    /// whose details rated one.
    pub(crate) upload: Option<UploadSpread>,
}

impl JobStorageState {
    /// Takes in the completed checkpoints of a poll.
    pub(crate) fn observe_poll(&mut self, finished: &[FinishedCheckpoint]) {
        for cp in finished {
            if cp.kind != SnapshotKind::Savepoint
                && self.upload.as_ref().is_none_or(|u| u.checkpoint_id <= cp.id)
                && let Some(spread) = UploadSpread::of(cp)
            {
                self.upload = Some(spread);
            }
            if cp.status != CheckpointStatus::Completed || cp.kind == SnapshotKind::Savepoint {
                continue;
            }
            let Some(path) = &cp.external_path else { continue };
            self.paths
                .insert(cp.id, KnownCheckpoint { path: path.clone(), full_state_bytes: cp.full_state_bytes });
        }
        while self.paths.len() > PATHS_KEPT {
            self.paths.pop_first();
        }
    }

    /// Takes in a listing made at `at`.
    pub(crate) fn observe_listing(&mut self, listing: &JobStorage, at: Timestamp) {
        for folder in &listing.checkpoints {
            let Some(bytes) = folder.metadata_bytes else { continue };
            match self.metadata.iter().position(|(id, _)| *id >= folder.id) {
                Some(i) if self.metadata[i].0 == folder.id => self.metadata[i].1 = bytes,
                Some(i) => self.metadata.insert(i, (folder.id, bytes)),
                None => self.metadata.push_back((folder.id, bytes)),
            }
        }
        while self.metadata.len() > METADATA_KEPT {
            self.metadata.pop_front();
        }
        self.latest = Some((Box::new(listing.clone()), at));
    }

    /// How the `_metadata` grows: bytes per checkpoint over the sizes kept (least squares over
    /// the ids), `None` with fewer than three.
    pub(crate) fn metadata_growth_per_checkpoint(&self) -> Option<f64> {
        if self.metadata.len() < 3 {
            return None;
        }
        let n = self.metadata.len() as f64;
        let (sx, sy) = self.metadata.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + *x as f64, b + *y as f64));
        let (mx, my) = (sx / n, sy / n);
        let (mut num, mut den) = (0.0, 0.0);
        for (x, y) in &self.metadata {
            num += (*x as f64 - mx) * (*y as f64 - my);
            den += (*x as f64 - mx).powi(2);
        }
        (den > 0.0).then(|| num / den)
    }

    /// The latest listing.
    pub(crate) fn listing(&self) -> Option<&JobStorage> {
        self.latest.as_ref().map(|(l, _)| &**l)
    }
}

/// A cluster's storage rounds.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ClusterStorage {
    /// Rounds applied.
    pub(crate) rounds: u64,
    /// List requests made.
    pub(crate) requests: u64,
    /// Listings left for a later round by the budget.
    pub(crate) requests_cut: u64,
    /// Entries not read (listings stopped at their bound).
    pub(crate) entries_cut: u64,
    /// Failed requests by kind.
    pub(crate) errors: BTreeMap<&'static str, u64>,
    /// Directories that cannot be reached now.
    pub(crate) unreachable: BTreeSet<String>,
    /// Per base directory, the folders of jobs that no longer run (from the last round that
    /// listed it).
    pub(crate) bases: BTreeMap<String, BaseStorage>,
    /// When the last round ended.
    pub(crate) last_round: Option<Timestamp>,
}

impl ClusterStorage {
    /// Takes in a round's counters and bases (the jobs' listings go to the jobs).
    pub(crate) fn apply(&mut self, round: &StorageRound) {
        self.rounds += 1;
        self.requests += u64::from(round.requests);
        self.requests_cut += u64::from(round.requests_cut);
        self.entries_cut += round.entries_cut;
        for kind in &round.errors {
            *self.errors.entry(kind).or_default() += 1;
        }
        for dir in &round.unreachable {
            self.unreachable.insert(dir.clone());
        }
        for dir in &round.reachable_again {
            self.unreachable.remove(dir);
        }
        for base in &round.bases {
            self.bases.insert(base.base.clone(), base.clone());
        }
        // Bounded as every outside input: the bases with the most abandoned bytes.
        while self.bases.len() > MAX_BASES {
            let smallest = self.bases.iter().min_by_key(|(_, b)| b.abandoned_bytes).map(|(k, _)| k.clone());
            if let Some(k) = smallest {
                self.bases.remove(&k);
            }
        }
        self.last_round = Some(round.at);
    }
}

/// Base directories kept per cluster.
const MAX_BASES: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::CheckpointFolder;

    fn listing(sizes: &[(u64, u64)]) -> JobStorage {
        JobStorage {
            checkpoints: sizes
                .iter()
                .map(|(id, b)| CheckpointFolder { id: *id, metadata_bytes: Some(*b), ..Default::default() })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn metadata_growth_is_bytes_per_checkpoint() {
        let mut s = JobStorageState::default();
        assert_eq!(s.metadata_growth_per_checkpoint(), None);
        s.observe_listing(&listing(&[(3, 1_000), (4, 1_100)]), Timestamp(0));
        s.observe_listing(&listing(&[(5, 1_200), (6, 1_300)]), Timestamp(1));
        assert_eq!(s.metadata.len(), 4);
        let g = s.metadata_growth_per_checkpoint().unwrap();
        assert!((g - 100.0).abs() < 1e-9, "{g}");
        // A folder listed again is not counted twice.
        s.observe_listing(&listing(&[(6, 1_300)]), Timestamp(2));
        assert_eq!(s.metadata.len(), 4);
    }

    #[test]
    fn only_completed_checkpoints_paths_are_kept() {
        let mut s = JobStorageState::default();
        let mut cp = FinishedCheckpoint::completed(7, Timestamp(0), 10);
        cp.external_path = Some("file:/c/j/chk-7".into());
        let mut sp = FinishedCheckpoint::completed(8, Timestamp(0), 10).kind(SnapshotKind::Savepoint);
        sp.external_path = Some("file:/s/savepoint-1".into());
        let failed = FinishedCheckpoint::completed(9, Timestamp(0), 10).failed("expired");
        s.observe_poll(&[cp, sp, failed]);
        assert_eq!(s.paths.keys().copied().collect::<Vec<_>>(), vec![7]);
    }
}
