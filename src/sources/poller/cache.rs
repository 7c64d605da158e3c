//! What the poller remembers about a job between rounds (`JobCache`), and how a poll of an
//! ended job moves it towards its last one.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::schedule::final_polls_done;
use crate::observe::{FinishedCheckpoint, JobStatus};
use crate::time::Timestamp;

/// What the poller remembers about a job between rounds (not durable: it is re-fetched).
pub(super) struct JobCache {
    pub(super) state: JobStatus,
    /// `None`: checkpointing is disabled for this job.
    pub(super) settings: Option<Option<crate::observe::CheckpointSettings>>,
    /// By vertex id, in Flink's order of a checkpoint's `tasks` (sorted).
    pub(super) vertex_names: BTreeMap<String, String>,
    pub(super) final_poll_done: bool,
    /// Polls made since the job was seen in a terminal state, and the counts of the last one.
    pub(super) final_polls: u8,
    pub(super) final_counts: Option<(u64, u64, u64)>,
    /// When the first terminal poll with `final_counts` was made.
    pub(super) final_counts_since: Timestamp,
    /// The whole checkpoint configuration read at the last refresh, until applied (after the
    /// job's poll, which creates the job in `State`).
    pub(super) configuration: Option<Box<crate::observe::CheckpointConfiguration>>,
    /// The job graph from `/jobs/:id` (for the alignment shadow).
    pub(super) topology: Option<Arc<crate::observe::JobTopology>>,
    /// The round from which the job's load is due again.
    pub(super) load_due: u64,
    /// Early load fetches left for a job whose subtasks had no TaskManager yet (still being
    /// deployed), so their locations do not wait [`LOAD_EVERY_POLLS`] rounds.
    pub(super) location_retries: u8,
    /// In-progress checkpoints whose pending subtasks were reported already.
    pub(super) reported_pending: std::collections::BTreeSet<u64>,
    /// The restore being timed (Flink's restore time), how often its subtasks were fetched, and
    /// the round from which they are due again.
    pub(super) restore: Option<(Timestamp, u32, u64)>,
    /// Finished checkpoints Flink listed whose details were left for a later round (over
    /// `max_history_per_poll`), as its history told them: a deferred one that Flink no longer
    /// lists is counted from this, without its per-subtask details, instead of going by
    /// unobserved. At most [`MAX_DEFERRED_REMEMBERED`], the newest.
    pub(super) deferred: std::collections::BTreeMap<u64, FinishedCheckpoint>,
    /// When its next checkpoint can come at the earliest, from its last statistics (`None`:
    /// one was in progress, or it cannot be told), and the rounds skipped since
    /// ([`stats_due`]).
    pub(super) next_checkpoint_at: Option<Timestamp>,
    pub(super) skipped_rounds: u8,
    /// Each vertex's parallelism at the last look (id, name, parallelism): a restart that
    /// changes it is a rescale.
    pub(super) parallelism: Vec<(String, String, u32)>,
    /// Flink's restore count at the last poll: a rise is a restart (a rescale restores too).
    pub(super) restored_count: Option<u64>,
    /// The job's rescale history did not answer (off, or a version without it).
    pub(super) rescale_history_off: bool,
    /// Rescales of the history read already (`uuid#attempt`), the newest.
    pub(super) rescales_read: std::collections::VecDeque<String>,
    /// Rounds left in which to look for a rescale (after a restore or a change of state: the
    /// history may list it only once it ended).
    pub(super) rescale_looks: u8,
    /// Until when the job's status metrics are read every round, after a restore: the
    /// JobManager serves them from its metric store, which its fetcher refreshes only every
    /// `metrics.fetcher.update-interval` (10 s by default), so right after a restore
    /// `numRestarts` may still be the old value (seen live on 2.3.0: 0 for 3 s after a rescale).
    pub(super) status_reads_until: Option<Timestamp>,
}

/// Rounds in which a job is looked at for rescales after a restore or a change of state.
pub(super) const RESCALE_LOOKS: u8 = 3;

/// How long after a restore the job's status metrics are read every round: Flink's
/// `metrics.fetcher.update-interval` (10 s by default) and a margin.
pub(super) const STATUS_READS_AFTER_RESTORE_MS: i64 = 15_000;

impl JobCache {
    /// Keeps what the poller knew of the job before this refresh: its deferred checkpoints and
    /// what the rescale check compares with (the parallelism then: a change of state may be
    /// the restart of a rescale, so the next rounds look).
    pub(super) fn carry_over(&mut self, old: JobCache) {
        self.deferred = old.deferred;
        self.restored_count = old.restored_count;
        self.rescale_history_off = old.rescale_history_off;
        self.rescales_read = old.rescales_read;
        self.status_reads_until = old.status_reads_until;
        if !old.parallelism.is_empty() {
            self.parallelism = old.parallelism;
            self.rescale_looks = RESCALE_LOOKS;
        }
    }

    /// A poll of the ended job with checkpoint counts `counts` (completed, failed, in
    /// progress) at `polled_at`: whether its polls are over ([`final_polls_done`]).
    pub(super) fn note_final_poll(&mut self, counts: (u64, u64, u64), polled_at: Timestamp) {
        self.final_polls = self.final_polls.saturating_add(1);
        if self.final_counts != Some(counts) {
            self.final_counts_since = polled_at;
        }
        let unchanged_ms = polled_at.since(self.final_counts_since);
        self.final_poll_done = final_polls_done(self.final_counts, counts, self.final_polls, unchanged_ms);
        self.final_counts = Some(counts);
    }
}
/// What the poller remembers of a cluster's applications between rounds.
#[derive(Default)]
pub(super) struct Applications {
    /// The version serves none (`/applications/overview` answered 404).
    pub(super) unavailable: bool,
    /// Per application fetched in detail: its job count then, and its job ids.
    pub(super) jobs: std::collections::HashMap<String, (u64, Vec<String>)>,
}
