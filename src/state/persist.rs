//! The on-disk form of what must survive a restart, written atomically (temp, fsync, rename).
//!
//! One JSON document holds every job's counted ids, counters and histogram slots, and per
//! cluster the log-event counters with the log tailers' read positions they correspond to.
//! Because it is written as a whole and swapped in with a rename, a `kill -9` at any moment
//! leaves either the previous snapshot or the new one: a checkpoint is never lost and never
//! counted twice, and a log line is counted exactly once (the tailer resumes at the positions
//! of the snapshot whose counters hold the lines before them).

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::logs::LogState;
use super::{
    ClusterState, FailureEvidence, JobState, OperatorState, PhaseHistograms, SeenIds, SharedRecord,
    SizeHistograms, State, Totals,
};
use crate::observe::{
    CheckpointCounts, CheckpointSpan, JobStatus, LogEvent, LogKind, TailerPositions, intern_cause,
    intern_source,
};
use crate::stats::{PersistedHistogram, WindowSpec, WindowedHistogram};
use crate::time::Timestamp;

/// The file name inside the state directory.
pub(crate) const STATE_FILE: &str = "state.json";

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
        /// Log knowledge by cluster name. Added within version 1: files written before have
        /// none (the counters start at zero, the tailers read their old offsets files), and
        /// earlier versions ignore it.
        #[serde(default)]
        logs: BTreeMap<String, PersistedLogs>,
        /// Records counted but not yet in the checkpoint store (it was failing). Added within
        /// version 1: files written before have none, and earlier versions ignore it. Left out
        /// while nothing waits, so a file with nothing waiting is as an earlier build wrote it.
        #[serde(default, skip_serializing_if = "PersistedOutbox::is_empty")]
        outbox: PersistedOutbox,
    },
}

/// What waited for the checkpoint store when the snapshot was taken: with it, every checkpoint
/// the snapshot marks counted is in the store or here, so a restart during a store outage
/// (even `kill -9`) writes them later. Writing one twice is the same key: one record.
#[derive(Default, Serialize, Deserialize)]
pub struct PersistedOutbox {
    records: Vec<super::outbox::Outboxed>,
    restores: Vec<super::outbox::OutboxedRestore>,
    /// Records the outbox dropped (full) so far.
    dropped: u64,
}

impl PersistedOutbox {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.restores.is_empty() && self.dropped == 0
    }
}

impl PersistedState {
    /// Records the snapshot holds for the store.
    pub fn outbox_len(&self) -> usize {
        let PersistedState::V1 { outbox, .. } = self;
        outbox.records.len() + outbox.restores.len()
    }

    /// Forgets the records for the store: they are in it now.
    pub fn clear_outbox(&mut self) {
        let PersistedState::V1 { outbox, .. } = self;
        outbox.records.clear();
        outbox.restores.clear();
    }

    /// Holds `records` and `restores` for the store, in front of what the snapshot held: those
    /// the persister took out of the outbox before the snapshot and the store did not take.
    pub(crate) fn hold_for_store(
        &mut self,
        mut records: Vec<super::outbox::Outboxed>,
        mut restores: Vec<super::outbox::OutboxedRestore>,
    ) {
        let PersistedState::V1 { outbox, .. } = self;
        records.append(&mut outbox.records);
        restores.append(&mut outbox.restores);
        outbox.records = records;
        outbox.restores = restores;
    }
}

/// One cluster's durable log knowledge: counters, the recent ring and the read positions
/// those counters go up to.
#[derive(Serialize, Deserialize)]
pub struct PersistedLogs {
    /// (job id or "", kind, source, count).
    events: Vec<(String, String, String, u64)>,
    root_causes: BTreeMap<String, u64>,
    counted_causes: Vec<(u64, String)>,
    /// The recent ring, oldest first, without stack lines (the API does not show them, and
    /// they would make the file megabytes).
    recent: Vec<LogEvent>,
    /// By tailer id.
    positions: BTreeMap<String, TailerPositions>,
    /// Checkpoint spans of jobs not polled yet (read before the positions). Added within
    /// version 1: earlier files have none.
    #[serde(default)]
    unclaimed_spans: Vec<CheckpointSpan>,
}

fn logs_out(logs: &LogState, unclaimed_spans: &VecDeque<CheckpointSpan>) -> PersistedLogs {
    PersistedLogs {
        unclaimed_spans: unclaimed_spans.iter().cloned().collect(),
        events: logs
            .events
            .iter()
            .map(|((job, kind, source), n)| (job.clone(), kind.to_string(), source.to_string(), *n))
            .collect(),
        root_causes: logs.root_causes.iter().map(|(c, n)| (c.to_string(), *n)).collect(),
        counted_causes: logs.counted_causes.iter().map(|(id, c)| (*id, c.to_string())).collect(),
        recent: logs.recent.iter().map(|e| LogEvent { stack: Vec::new(), ..e.clone() }).collect(),
        positions: logs.positions.clone(),
    }
}

fn logs_in(persisted: PersistedLogs, logs: &mut LogState, unclaimed_spans: &mut VecDeque<CheckpointSpan>) {
    *unclaimed_spans = persisted.unclaimed_spans.into();
    for (job, kind, source, n) in persisted.events {
        *logs.events.entry((job, LogKind::from_name(&kind), intern_source(&source))).or_insert(0) += n;
    }
    for (cause, n) in persisted.root_causes {
        *logs.root_causes.entry(intern_cause(&cause)).or_insert(0) += n;
    }
    logs.counted_causes = persisted.counted_causes.iter().map(|(id, c)| (*id, intern_cause(c))).collect();
    logs.recent = persisted.recent.into();
    logs.positions = persisted.positions;
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
    last_completed: Option<SharedRecord>,
    last_failed: Option<SharedRecord>,
    recent: VecDeque<SharedRecord>,
    /// end_to_end, alignment, sync, async, start_delay.
    phases: [PersistedHistogram; 5],
    /// checkpointed, full_state, processed, persisted.
    sizes: [PersistedHistogram; 4],
    operators: BTreeMap<String, PersistedOperator>,
    /// Failed checkpoints known from the log or the poll. Added within version 1: files
    /// written before start it at zero.
    #[serde(default)]
    failures: FailureEvidence,
    /// Savepoint counters; added within version 1 (earlier files have none).
    #[serde(default)]
    savepoints: super::outbox::SavepointStats,
    /// Checkpoints counted from trace spans not yet met by a poll, and counts by source;
    /// added within version 1 (earlier files have none).
    #[serde(default)]
    traced: super::traced::Traced,
    /// Its restores (counted once each; added after version 1 first shipped).
    #[serde(default)]
    restores: super::restore::RestoreStats,
    /// Of Flink's counts, the checkpoints the last poll left for a later round (over
    /// `max_history_per_poll`): neither counted nor unobserved yet. Kept over a restart, so
    /// that those Flink forgets meanwhile count as unobserved instead of going by unaccounted.
    /// Added within version 1; left out while zero (earlier files have none).
    #[serde(default, skip_serializing_if = "nothing_deferred")]
    deferred: Totals,
    /// Its latest rescales, oldest first: kept over a restart, so that the API and the page still
    /// show them and a rescale Flink's history tells again is not new (its shadow would put the
    /// next checkpoint down to it). Added within version 1; left out while empty (earlier files
    /// have none).
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    rescales: VecDeque<crate::observe::Rescale>,
}

fn nothing_deferred(deferred: &Totals) -> bool {
    *deferred == Totals::default()
}

/// One operator's durable state.
#[derive(Serialize, Deserialize)]
pub(crate) struct PersistedOperator {
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
                        savepoints: job.savepoints,
                        restores: job.restores.clone(),
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
                        failures: job.failures.clone(),
                        traced: job.traced.clone(),
                        deferred: job.deferred,
                        rescales: job.reported.rescales.recent.clone(),
                    };
                    (id.clone(), persisted)
                })
                .collect();
            (name.clone(), jobs)
        })
        .collect();
    let logs = state
        .clusters
        .iter()
        .map(|(name, cluster)| (name.clone(), logs_out(&cluster.logs, &cluster.unclaimed_spans)))
        .collect();
    let (records, restores, dropped) = state.outbox.waiting();
    PersistedState::V1 { clusters, logs, outbox: PersistedOutbox { records, restores, dropped } }
}

/// Rebuilds state from a snapshot. Jobs start as not listed until a poll lists them again.
pub fn restore(window: WindowSpec, persisted: PersistedState) -> State {
    let mut state = State::new(window);
    let PersistedState::V1 { clusters, logs, outbox } = persisted;
    state.outbox.restore_waiting(outbox.records, outbox.restores, outbox.dropped);
    for (name, persisted) in logs {
        let cluster = state.cluster_mut(&name);
        logs_in(persisted, &mut cluster.logs, &mut cluster.unclaimed_spans);
    }
    for (name, jobs) in clusters {
        let cluster = state.cluster_mut(&name);
        for (id, job) in jobs {
            let mut restored =
                JobState::new(window, job.name, JobStatus::Other("UNKNOWN".to_string()), job.last_seen);
            restored.listed = false;
            restored.flink_counts = job.flink_counts;
            restored.earlier_incarnations = job.earlier_incarnations;
            restored.unobserved = job.unobserved;
            restored.deferred = job.deferred;
            restored.seen = job.seen;
            restored.last_completed = job.last_completed;
            restored.last_failed = job.last_failed;
            restored.recent = job.recent;
            restored.failures = job.failures;
            restored.traced = job.traced;
            restored.recount_consecutive_failures();
            // The newest finished checkpoint, to see ids that restart while the daemon was down.
            restored.newest = [&restored.last_completed, &restored.last_failed]
                .into_iter()
                .flatten()
                .max_by_key(|r| r.id)
                .map(|r| (r.id, r.triggered_at));
            restored.savepoints = job.savepoints;
            restored.restores = job.restores;
            restored.reported.rescales.recent = job.rescales;
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
            cluster.jobs.insert(id, Box::new(restored));
        }
    }
    state
}

impl ClusterState {
    /// Number of jobs currently listed by the JobManager.
    pub(crate) fn listed_jobs(&self) -> usize {
        self.jobs.values().filter(|j| j.listed).count()
    }
}

/// Serialises a snapshot.
pub fn to_bytes(persisted: &PersistedState) -> Vec<u8> {
    serde_json::to_vec(persisted).expect("state snapshots always serialise")
}

/// Writes a snapshot to `dir/STATE_FILE` atomically, serialised straight into the file: at
/// 10,000 jobs the JSON is tens of MB, which a `Vec` would hold (and the allocator keep) every
/// `persist_interval` for nothing.
pub(crate) fn write_snapshot(dir: &Path, persisted: &PersistedState) -> Result<(), PersistError> {
    write_atomic_with(dir, |file| {
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, file);
        serde_json::to_writer(&mut out, persisted).map_err(std::io::Error::other)?;
        out.flush()
    })
}

/// [`write_atomic`] with the content written by `write` into the temp file.
fn write_atomic_with(
    dir: &Path,
    write: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
) -> Result<(), PersistError> {
    let path = dir.join(STATE_FILE);
    // A name of its own per write (process and sequence): two writers never share a temp file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!("{STATE_FILE}.tmp-{}-{n}", std::process::id()));
    let io = |source| PersistError::Io { path: path.clone(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        write(&mut file)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{EventSeverity, FileId, FilePosition, LogRead, Observation, RootCause};

    const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

    /// A poll of job `j` ("orders") at `at`: Flink's completed count, the finished checkpoints
    /// fetched (completed at `id × 100` ms) and those it deferred.
    fn poll(at: i64, completed: u64, ids: Vec<u64>, deferred: u64) -> Observation {
        use crate::observe::{CheckpointCounts, Deferred, FinishedCheckpoint, JobKey, JobPoll};
        Observation::JobPolled(JobPoll {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            job_name: "orders".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(at),
            counts: CheckpointCounts { completed, failed: 0, in_progress: 0, restored: 0 },
            settings: None,
            in_progress: Vec::new(),
            finished: ids
                .into_iter()
                .map(|id| {
                    FinishedCheckpoint::completed(id, Timestamp(id as i64 * 100), 45).acknowledged(1, 1)
                })
                .collect(),
            latest_restore: None,
            deferred: Deferred { completed: deferred, failed: 0 },
        })
    }

    #[test]
    fn what_a_poll_deferred_is_kept_over_a_restart_and_what_flink_forgot_meanwhile_is_unobserved() {
        let mut state = State::new(WINDOW);
        // 50 completed: the 20 newest fetched, 30 left for later.
        state.apply(&poll(10_000, 50, (31..=50).collect(), 30), Timestamp(10_000));
        let bytes = to_bytes(&snapshot(&state));
        // The daemon streams the snapshot into the file: the same bytes.
        let dir = tempfile::tempdir().unwrap();
        write_snapshot(dir.path(), &snapshot(&state)).unwrap();
        assert_eq!(std::fs::read(dir.path().join(STATE_FILE)).unwrap(), bytes);
        let mut state = restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
        // While the daemon was down Flink forgot 1..=10 and completed 51..=55; the restarted
        // daemon fetches those and 16..=30, and leaves 11..=15 for later.
        state.apply(&poll(20_000, 55, (16..=30).chain(51..=55).collect(), 5), Timestamp(20_000));
        let job = &state.clusters()["c"].jobs["j"];
        let counted = job.phases.end_to_end.summary().count;
        assert_eq!(counted, 40, "each fetched checkpoint counted once");
        assert_eq!(job.unobserved.completed, 10, "the ten Flink forgot (before: 0, unaccounted)");
        assert_eq!(job.deferred.completed, 5);
        assert_eq!(counted + job.unobserved.completed + job.deferred.completed, job.totals().completed);
    }

    #[test]
    fn a_snapshot_shares_the_jobs_checkpoint_records_and_a_restore_reads_them_back() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(10_000, 3, (1..=3).collect(), 0), Timestamp(10_000));
        let job = &state.clusters()["c"].jobs["j"];
        let newest = job.recent.back().unwrap();
        // One record for the ring's newest and the latest completed: not a copy each.
        assert!(std::sync::Arc::ptr_eq(newest, job.last_completed.as_ref().unwrap()));
        let persisted = snapshot(&state);
        let PersistedState::V1 { clusters, .. } = &persisted;
        let saved = &clusters["c"]["j"];
        assert_eq!(saved.recent.len(), 3);
        for (kept, saved) in job.recent.iter().zip(&saved.recent) {
            assert!(std::sync::Arc::ptr_eq(kept, saved), "the snapshot copies checkpoint {} whole", kept.id);
        }
        let restored = restore(WINDOW, serde_json::from_slice(&to_bytes(&persisted)).unwrap());
        let again = &restored.clusters()["c"].jobs["j"];
        let ids = |j: &JobState| j.recent.iter().map(|r| (r.id, r.end_to_end_ms)).collect::<Vec<_>>();
        assert_eq!(ids(again), ids(job));
        assert_eq!(again.last_completed.as_deref(), job.last_completed.as_deref());
    }

    fn declined(id: u64, cause: &'static str) -> LogEvent {
        let mut e =
            LogEvent::new("declined".into(), EventSeverity::Warning, format!("Decline checkpoint {id}"));
        e.cluster = "c".into();
        e.file = "/log/jm.log".into();
        e.job_id = Some("j".into());
        e.checkpoint_id = Some(id);
        e.root_cause =
            Some(RootCause { category: cause, exception: "java.io.IOException".into(), message: "x".into() });
        e.stack = vec!["\tat a.b.C.d(C.java:1)".into()];
        e
    }

    fn read(events: Vec<LogEvent>, offset: u64) -> Observation {
        let file = FilePosition {
            id: FileId { dev: 1, ino: 2 },
            head_len: 3,
            head_hash: 4,
            offset,
            path: "/log/jm.log".into(),
        };
        Observation::LogRead(LogRead {
            cluster: "c".into(),
            tailer: "t".into(),
            events,
            positions: TailerPositions { written_at_ms: 7, files: vec![file] },
            spans: Vec::new(),
        })
    }

    #[test]
    fn log_counters_and_positions_survive_a_restart_together() {
        let mut state = State::new(WINDOW);
        state.apply(&read(vec![declined(3, "disk_full"), declined(4, "s3")], 100), Timestamp(0));
        let mut rest = declined(5, "timeout");
        rest.source = "rest";
        state.apply(&Observation::LogEvents(vec![rest]), Timestamp(0));
        let bytes = to_bytes(&snapshot(&state));
        let mut restored = restore(WINDOW, serde_json::from_slice(&bytes).unwrap());

        let logs = &restored.clusters()["c"].logs;
        let key = |source| ("j".to_string(), LogKind::Declined, source);
        assert_eq!(logs.events[&key("log")], 2);
        assert_eq!(logs.events[&key("rest")], 1);
        assert_eq!(logs.root_causes["disk_full"], 1);
        assert_eq!(logs.positions["t"].files[0].offset, 100);
        assert_eq!(logs.positions["t"].written_at_ms, 7);
        let ids: Vec<_> = logs.recent.iter().map(|e| e.checkpoint_id).collect();
        assert_eq!(ids, [Some(3), Some(4), Some(5)]);
        assert_eq!(logs.recent[2].source, "rest");
        assert_eq!(logs.recent[0].root_cause.as_ref().map(|c| c.category), Some("disk_full"));
        assert!(logs.recent[0].stack.is_empty(), "stack lines are not persisted");

        // The failure line of checkpoint 3 after its decline: its cause was counted already.
        let mut failed = declined(3, "disk_full");
        failed.kind = "failed".into();
        restored.apply(&read(vec![failed], 200), Timestamp(1));
        assert_eq!(restored.clusters()["c"].logs.root_causes["disk_full"], 1);
    }

    /// A rescale of Flink's history, as the poller reports it after a restore.
    fn rescaled(id: &str, at: i64) -> Observation {
        use crate::observe::{JobKey, Rescale, RescaleReport, RescaleSource, VertexRescale};
        Observation::Rescales(RescaleReport {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            rescales: vec![Rescale {
                id: Some(id.into()),
                source: RescaleSource::RescaleHistory,
                started_at: Some(Timestamp(at - 2_000)),
                restarted_at: Some(Timestamp(at - 300)),
                at: Timestamp(at),
                cause: Some("UPDATE_REQUIREMENT".into()),
                outcome: Some("COMPLETED".into()),
                vertices: vec![VertexRescale { vertex: "map".into(), before: Some(2), after: Some(1) }],
            }],
        })
    }

    /// A job's rescales survive a restart, and the same rescale told again by Flink's history
    /// afterwards is not new (the restarted daemon's poller reads the history again).
    #[test]
    fn rescales_are_kept_over_a_restart_and_not_new_again() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(10_000, 3, (1..=3).collect(), 0), Timestamp(10_000));
        state.apply(&rescaled("u#1", 9_000), Timestamp(10_000));
        let before = state.clusters()["c"].jobs["j"].reported.rescales.clone();
        assert_eq!(before.recent.len(), 1);
        let mut restored = restore(WINDOW, serde_json::from_slice(&to_bytes(&snapshot(&state))).unwrap());
        let job =
            restored.job_mut(&crate::observe::JobKey { cluster: "c".into(), job_id: "j".into() }).unwrap();
        assert_eq!(job.reported.rescales, before);
        let told_again = match rescaled("u#1", 9_000) {
            Observation::Rescales(r) => r,
            _ => unreachable!(),
        };
        assert!(job.reported.rescales.observe(&told_again).is_empty(), "known from the snapshot");
    }

    /// A snapshot an earlier build wrote (no `rescales`) loads: the job's counts as they were,
    /// no rescales; and a job without rescales writes none (the file as an earlier build wrote it).
    #[test]
    fn a_snapshot_without_rescales_loads() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(10_000, 3, (1..=3).collect(), 0), Timestamp(10_000));
        let plain = to_bytes(&snapshot(&state));
        assert!(!String::from_utf8_lossy(&plain).contains("rescales"), "nothing written while empty");
        state.apply(&rescaled("u#1", 9_000), Timestamp(10_000));
        let mut old: serde_json::Value = serde_json::from_slice(&to_bytes(&snapshot(&state))).unwrap();
        let job = &mut old["clusters"]["c"]["j"];
        assert!(job.as_object_mut().unwrap().remove("rescales").is_some());
        let restored = restore(WINDOW, serde_json::from_value(old).unwrap());
        let job = &restored.clusters()["c"].jobs["j"];
        assert!(job.reported.rescales.recent.is_empty());
        assert_eq!(job.totals().completed, 3);
    }

    #[test]
    fn unknown_labels_from_a_newer_version_are_read_as_known_ones() {
        let mut state = State::new(WINDOW);
        state.apply(&read(vec![declined(3, "disk_full")], 100), Timestamp(0));
        let text =
            String::from_utf8(to_bytes(&snapshot(&state))).unwrap().replace("disk_full", "quantum_flux");
        let restored = restore(WINDOW, serde_json::from_str(&text).unwrap());
        let logs = &restored.clusters()["c"].logs;
        assert_eq!(logs.root_causes["other"], 1);
        assert_eq!(logs.recent[0].root_cause.as_ref().map(|c| c.category), Some("other"));
    }
}
