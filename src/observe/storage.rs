//! The storage vocabulary: what one round of the storage source (`sources::storage`) found in the
//! checkpoint directories of a cluster's jobs: bytes and objects, checkpoint folders and their
//! `_metadata`, orphans, folders of jobs that no longer run, and how the storage answered.
//!
//! Plain data: sizes in bytes, ages in ms, paths as Flink names them (before any mapping).

use crate::time::Timestamp;

/// One storage round of a cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StorageRound {
    /// The configured cluster name.
    pub cluster: String,
    /// When the round ended.
    pub at: Timestamp,
    /// The jobs whose checkpoint directory was listed in full this round.
    pub jobs: Vec<JobStorage>,
    /// Per base directory listed this round, the folders of jobs that no longer run there.
    pub bases: Vec<BaseStorage>,
    /// List requests made (an S3-style page of up to 1,000 entries, or a local directory walk).
    pub requests: u32,
    /// Listings the round wanted but left for a later one (`[storage] max_requests_per_round`).
    pub requests_cut: u32,
    /// Entries not read: listings stopped at `[storage] max_entries_per_job`.
    pub entries_cut: u64,
    /// Requests that failed, by kind (`throttled`, `not_found`, `denied`, `timeout`, `other`).
    pub errors: Vec<&'static str>,
    /// Directories the daemon could not reach this round, newly (said once: the log and a
    /// metric; not again while they stay unreachable).
    pub unreachable: Vec<String>,
    /// Directories that answered again after being unreachable.
    pub reachable_again: Vec<String>,
    /// Jobs whose listing the storage throttled this round (`503 SlowDown`, 429).
    pub throttled_jobs: Vec<String>,
}

/// One job's checkpoint directory (`<base>/<job id>/`), as listed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobStorage {
    /// Flink's job id.
    pub job_id: String,
    /// The job's checkpoint directory as Flink names it.
    pub dir: String,
    /// Every object under it.
    pub bytes: u64,
    /// Objects under it.
    pub objects: u64,
    /// Of `bytes`, under `shared/` (incremental state shared between checkpoints).
    pub shared_bytes: u64,
    /// Of `bytes`, under `taskowned/`.
    pub taskowned_bytes: u64,
    /// Whether the listing stopped at `[storage] max_entries_per_job` (figures are lower bounds).
    pub truncated: bool,
    /// Every `chk-N` folder, id ascending.
    pub checkpoints: Vec<CheckpointFolder>,
    /// The folders no retained or in-progress checkpoint holds, past the grace time.
    pub orphans: Vec<OrphanFolder>,
    /// Their bytes.
    pub orphaned_bytes: u64,
    /// Completed checkpoints Flink retains (`num-retained`, Flink's default 1).
    pub num_retained: u32,
    /// Checkpoint folders with a `_metadata` file (complete checkpoints on storage).
    pub complete_folders: u32,
    /// The full state size Flink reports for the newest retained checkpoint, when known.
    pub reported_state_bytes: Option<u64>,
    /// The newest checkpoint folder's `_metadata` size: (checkpoint id, bytes).
    pub metadata: Option<(u64, u64)>,
    /// With file merging on (`execution.checkpointing.file-merging.enabled`) checkpoints share
    /// physical files: a folder's bytes say nothing of what it holds alone, orphans are not told.
    pub file_merging: bool,
    /// The frame size the acknowledgements must fit (`pekko.framesize`, 1.x `akka.framesize`).
    pub framesize_bytes: u64,
}

/// One `chk-N` folder.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CheckpointFolder {
    /// N.
    pub id: u64,
    /// Its objects' bytes (with file merging: only the files named under it).
    pub bytes: u64,
    /// Its objects.
    pub objects: u64,
    /// Its `_metadata` size, when it has one.
    pub metadata_bytes: Option<u64>,
    /// Its newest object's last modification.
    pub modified: Timestamp,
}

/// A checkpoint folder no retained or in-progress checkpoint holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrphanFolder {
    /// Its checkpoint id.
    pub id: u64,
    /// Its bytes.
    pub bytes: u64,
    /// How long since its newest object was written, ms.
    pub age_ms: u64,
    /// Whether it has a `_metadata` (a completed checkpoint Flink did not delete) or not (an
    /// expired or discarded one left behind).
    pub completed: bool,
}

/// One base directory (the parent of the jobs' directories) and the folders in it of jobs that
/// do not run (ended, or unknown to the cluster).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaseStorage {
    /// As Flink names it.
    pub base: String,
    /// The job folders in it.
    pub job_folders: u32,
    /// Those of jobs that do not run, with their bytes (most first, bounded).
    pub abandoned: Vec<AbandonedJob>,
    /// Their bytes, all of them (also those past the bound).
    pub abandoned_bytes: u64,
}

/// The folder of a job that no longer runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AbandonedJob {
    /// The job id (the folder's name).
    pub job_id: String,
    /// Its status as the cluster lists it (`CANCELED`, …), or `None` when the cluster does not
    /// list it.
    pub status: Option<String>,
    /// Bytes and objects under it.
    pub bytes: u64,
    /// See `bytes`.
    pub objects: u64,
    /// How long since its newest object was written, ms.
    pub age_ms: u64,
}
