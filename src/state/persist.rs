//! The on-disk form of what must survive a restart, written atomically (temp, fsync, rename).
//!
//! One JSON document holds every job's counted ids, counters and histogram slots. Because it is
//! written as a whole and swapped in with a rename, a `kill -9` at any moment leaves either the
//! previous snapshot or the new one: a checkpoint is never lost and never counted twice.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{
    CheckpointRecord, ClusterState, JobState, OperatorState, PhaseHistograms, SeenIds, SizeHistograms, State,
    Totals,
};
use crate::observe::CheckpointCounts;
use crate::stats::{PersistedHistogram, WindowSpec, WindowedHistogram};
use crate::time::Timestamp;

/// The file name inside the state directory.
pub const STATE_FILE: &str = "state.json";

/// Errors reading or writing the state file.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// Which file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file is not a state snapshot this version understands.
    #[error("{path}: not a valid state file: {source}")]
    Format {
        /// Which file.
        path: PathBuf,
        /// What went wrong.
        source: serde_json::Error,
    },
}

/// Versioned on-disk state; an incompatible change adds a variant.
#[derive(Serialize, Deserialize)]
#[serde(tag = "version")]
pub enum PersistedState {
    /// The first format.
    #[serde(rename = "1")]
    V1 {
        /// Jobs by cluster name and job id.
        clusters: BTreeMap<String, BTreeMap<String, PersistedJob>>,
    },
}

/// One job's durable state.
#[derive(Serialize, Deserialize)]
pub struct PersistedJob {
    name: String,
    flink_counts: CheckpointCounts,
    earlier_incarnations: Totals,
    unobserved: Totals,
    seen: SeenIds,
    last_seen: Timestamp,
    last_completed: Option<CheckpointRecord>,
    last_failed: Option<CheckpointRecord>,
    recent: VecDeque<CheckpointRecord>,
    /// end_to_end, alignment, sync, async, start_delay.
    phases: [PersistedHistogram; 5],
    /// checkpointed, full_state, processed, persisted.
    sizes: [PersistedHistogram; 4],
    operators: BTreeMap<String, PersistedOperator>,
}

/// One operator's durable state.
#[derive(Serialize, Deserialize)]
pub struct PersistedOperator {
    name: String,
    last_seen: Timestamp,
    phases: [PersistedHistogram; 5],
}

fn phases_out(p: &PhaseHistograms) -> [PersistedHistogram; 5] {
    p.iter().map(|(_, h)| h.to_persisted())
}

fn phases_in(window: WindowSpec, p: &[PersistedHistogram; 5]) -> PhaseHistograms {
    let h = |i: usize| WindowedHistogram::from_persisted(window, &p[i]);
    PhaseHistograms { end_to_end: h(0), alignment: h(1), sync: h(2), async_: h(3), start_delay: h(4) }
}

/// Takes a durable snapshot of `state`.
pub fn snapshot(state: &State) -> PersistedState {
    let clusters = state
        .clusters
        .iter()
        .map(|(name, cluster)| {
            let jobs = cluster
                .jobs
                .iter()
                .map(|(id, job)| {
                    let persisted = PersistedJob {
                        name: job.name.clone(),
                        flink_counts: job.flink_counts,
                        earlier_incarnations: job.earlier_incarnations,
                        unobserved: job.unobserved,
                        seen: job.seen.clone(),
                        last_seen: job.last_seen,
                        last_completed: job.last_completed.clone(),
                        last_failed: job.last_failed.clone(),
                        recent: job.recent.clone(),
                        phases: phases_out(&job.phases),
                        sizes: [
                            job.sizes.checkpointed.to_persisted(),
                            job.sizes.full_state.to_persisted(),
                            job.sizes.processed.to_persisted(),
                            job.sizes.persisted.to_persisted(),
                        ],
                        operators: job
                            .operators
                            .iter()
                            .map(|(vid, op)| {
                                let persisted = PersistedOperator {
                                    name: op.name.clone(),
                                    last_seen: op.last_seen,
                                    phases: phases_out(&op.phases),
                                };
                                (vid.clone(), persisted)
                            })
                            .collect(),
                    };
                    (id.clone(), persisted)
                })
                .collect();
            (name.clone(), jobs)
        })
        .collect();
    PersistedState::V1 { clusters }
}

/// Rebuilds state from a snapshot. Jobs start as not listed until a poll lists them again.
pub fn restore(window: WindowSpec, persisted: PersistedState) -> State {
    let mut state = State::new(window);
    let PersistedState::V1 { clusters } = persisted;
    for (name, jobs) in clusters {
        let cluster = state.cluster_mut(&name);
        for (id, job) in jobs {
            let mut restored = JobState::new(window, job.name, "UNKNOWN".to_string(), job.last_seen);
            restored.listed = false;
            restored.flink_counts = job.flink_counts;
            restored.earlier_incarnations = job.earlier_incarnations;
            restored.unobserved = job.unobserved;
            restored.seen = job.seen;
            restored.last_completed = job.last_completed;
            restored.last_failed = job.last_failed;
            restored.recent = job.recent;
            restored.phases = phases_in(window, &job.phases);
            let s = |i: usize| WindowedHistogram::from_persisted(window, &job.sizes[i]);
            restored.sizes =
                SizeHistograms { checkpointed: s(0), full_state: s(1), processed: s(2), persisted: s(3) };
            restored.operators = job
                .operators
                .into_iter()
                .map(|(vid, op)| {
                    let phases = phases_in(window, &op.phases);
                    (vid, OperatorState { name: op.name, phases, last_seen: op.last_seen })
                })
                .collect();
            cluster.jobs.insert(id, restored);
        }
    }
    state
}

impl ClusterState {
    /// Number of jobs currently listed by the JobManager.
    pub fn listed_jobs(&self) -> usize {
        self.jobs.values().filter(|j| j.listed).count()
    }
}

/// Serialises a snapshot.
pub fn to_bytes(persisted: &PersistedState) -> Vec<u8> {
    serde_json::to_vec(persisted).expect("state snapshots always serialise")
}

/// Writes `bytes` to `dir/STATE_FILE` atomically: a temp file in the same directory, fsync,
/// rename over the old file, fsync of the directory.
pub fn write_atomic(dir: &Path, bytes: &[u8]) -> Result<(), PersistError> {
    let path = dir.join(STATE_FILE);
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    let io = |source| PersistError::Io { path: path.clone(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut file = std::fs::File::create(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(io)?;
    // The rename is durable only once the directory entry is on disk.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Loads the snapshot in `dir`, `Ok(None)` if there is none yet. A leftover temp file from
/// an interrupted write is ignored: the rename never happened, so the old file is the truth.
pub fn load(dir: &Path) -> Result<Option<PersistedState>, PersistError> {
    let path = dir.join(STATE_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(PersistError::Io { path, source }),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|source| PersistError::Format { path, source })
}
