//! The checkpoint store: every checkpoint and savepoint the daemon counted, on disk beyond
//! Flink's history of ten, bounded by age and count, queryable by job and time range.
//!
//! An I/O edge like `state::persist`: a redb database (`state.dir/checkpoints.redb`) with one
//! record per (cluster, job id, trigger time, checkpoint id). The key makes writes idempotent:
//! the persister writes a batch *before* the state snapshot that marks its checkpoints counted,
//! and a batch the store refuses goes into that snapshot's outbox section instead, so every
//! counted checkpoint is in the store or in the state file; a `kill -9` in between makes the
//! restarted daemon write the same keys again, one record each (never a loss, never a
//! duplicate). The trigger time in the
//! key keeps apart two checkpoints with the same id (a job whose ids start again at 1 after a
//! restart without HA) and orders a job's records by time for range queries.

// redb's own error is 160 bytes; it is returned once per failed write or read (a cold path),
// and boxing it would lose `?` from redb's many error types.
#![allow(clippy::result_large_err)]

use parking_lot::RwLock;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redb::backends::FileBackend;
use redb::{Database, ReadableTable, ReadableTableMetadata, StorageBackend, TableDefinition};

use crate::state::outbox::{Outboxed, OutboxedRestore, StoredCheckpoint};
use crate::state::restore::RestoreRecord;
use crate::time::Timestamp;

/// The file name inside the state directory.
pub const STORE_FILE: &str = "checkpoints.redb";

/// The largest `limit` a query may ask for.
pub(crate) const MAX_QUERY_LIMIT: usize = 10_000;

/// (cluster, job id, trigger time ms, checkpoint id) → the record as JSON.
const RECORDS: TableDefinition<(&str, &str, i64, u64), &[u8]> = TableDefinition::new("checkpoints");
/// (trigger time ms, cluster, job id, checkpoint id): the records oldest first, for pruning.
const BY_TIME: TableDefinition<(i64, &str, &str, u64), ()> = TableDefinition::new("checkpoints_by_time");
/// (cluster, job id, restore time ms) → the restore as JSON (rewritten when it is timed).
const RESTORES: TableDefinition<(&str, &str, i64), &[u8]> = TableDefinition::new("restores");
/// (restore time ms, cluster, job id): the restores oldest first, for pruning.
const RESTORES_BY_TIME: TableDefinition<(i64, &str, &str), ()> = TableDefinition::new("restores_by_time");

/// Errors of the store; `kind()` is a metric label.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened, read or written.
    #[error("{path}: {message}")]
    Db {
        /// The database file.
        path: PathBuf,
        /// What redb said.
        message: String,
    },
}

/// The store's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Records triggered longer ago than this are pruned.
    pub max_age: Duration,
    /// At most this many records are kept; the oldest (by trigger time) go first.
    pub max_records: u64,
}

/// What a write did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Records that were not in the store yet.
    pub inserted: u64,
    /// Records that were (a rewrite after a restart): replaced by the same key, not added.
    pub rewritten: u64,
    /// Records pruned by age or count.
    pub pruned: u64,
    /// Records in the store after the write.
    pub records: u64,
}

/// A time-range query of one job's records.
#[derive(Clone, Debug, Default)]
pub struct Query {
    /// Only records triggered at or after this (epoch ms).
    pub since: Option<i64>,
    /// Only records triggered at or before this (epoch ms).
    pub until: Option<i64>,
    /// At most this many, the newest of those that match.
    pub limit: usize,
}

/// The open store. It heals itself: a write that fails leaves it *failing*, and the next
/// write (after a back-off) closes the database and opens it again, since redb answers every
/// write after an I/O error with "Previous I/O error occurred" until it is re-opened. A file
/// that is damaged (redb reports corruption, or panics on it) is moved aside and a new one
/// started; a file removed or replaced under the daemon is noticed and a new one written with
/// everything the old one held.
pub struct Store {
    path: PathBuf,
    bounds: Bounds,
    faults: Arc<DiskFaults>,
    inner: RwLock<Inner>,
    files_set_aside: AtomicU64,
    reopened: AtomicU64,
}

/// What changes as the store fails and heals.
struct Inner {
    /// `None` while it cannot be opened.
    db: Option<Database>,
    /// The file's (device, inode) when it was opened: a different one (or none) at the path
    /// means the file or its directory was removed or replaced.
    file_id: Option<(u64, u64)>,
    failing: Option<Failing>,
}

/// A store that cannot be written: since when, why, and when it is tried again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failing {
    /// The first failed write or open of this outage.
    pub(crate) since: Timestamp,
    /// What redb or the file system said last.
    pub reason: String,
    attempts: u32,
    next_try: Timestamp,
}

/// Longest wait between two attempts to re-open a failing store.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The wait before attempt `attempts + 1`: 1 s, 2 s, 4 s, ... up to [`MAX_BACKOFF`].
fn backoff(attempts: u32) -> Duration {
    Duration::from_secs(1u64 << attempts.min(5)).min(MAX_BACKOFF)
}

/// Faults of the disk under the store, for tests: while `full`, every write, resize and sync
/// of the file fails with `ENOSPC` as a full file system's would (reads still work). The
/// production store has one that is never set.
#[derive(Debug, Default)]
pub struct DiskFaults {
    full: AtomicBool,
}

impl DiskFaults {
    /// From now on the disk is full.
    pub fn fill(&self) {
        self.full.store(true, Ordering::SeqCst);
    }

    /// From now on the disk takes writes again.
    pub fn free(&self) {
        self.full.store(false, Ordering::SeqCst);
    }

    fn check(&self) -> std::io::Result<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(std::io::Error::from_raw_os_error(28)); // ENOSPC
        }
        Ok(())
    }
}

/// redb's file backend with [`DiskFaults`] in front of its writes.
#[derive(Debug)]
struct FaultyFile {
    file: FileBackend,
    faults: Arc<DiskFaults>,
}

impl StorageBackend for FaultyFile {
    fn len(&self) -> std::io::Result<u64> {
        self.file.len()
    }

    fn read(&self, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
        self.file.read(offset, len)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.faults.check()?;
        self.file.set_len(len)
    }

    fn sync_data(&self, eventual: bool) -> std::io::Result<()> {
        self.faults.check()?;
        self.file.sync_data(eventual)
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.faults.check()?;
        self.file.write(offset, data)
    }
}

/// Why a database could not be opened.
enum OpenFailure {
    /// The file is damaged: redb said so, or panicked on it. It is moved aside.
    Damaged(String),
    /// Anything else (permissions, a full disk): the file stays, the open is tried again.
    Other(String),
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".to_string())
}

/// Runs `f` on redb, turning a panic into an error.
///
/// redb's types are not `UnwindSafe` (they hold `Arc`s and locks), hence `AssertUnwindSafe`.
/// It is sound here because nothing that `f` touched is used after a panic: the caller drops
/// the `Database` (and every transaction of it) and opens the file anew, or moves it aside. A
/// lock redb poisoned goes with it; the daemon's own locks are not held inside `f`.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_text(p.as_ref()))
}

/// Whether a redb error says the file is damaged (rather than the disk failing).
fn is_corruption(e: &redb::Error) -> bool {
    matches!(e, redb::Error::Corrupted(_))
}

/// The (device, inode) of the file at `path`, `None` if there is none.
fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Opens (or creates) the database at `path` and its tables.
fn open_db(path: &Path, faults: &Arc<DiskFaults>) -> Result<Database, OpenFailure> {
    let opened = guarded(|| -> Result<Database, redb::Error> {
        let file =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        let backend = FaultyFile { file: FileBackend::new(file)?, faults: faults.clone() };
        // redb caches up to 1 GiB of pages by default: bounded here, since the store is written
        // every few seconds and read only for the history API (a cold read costs a disk read).
        let db = redb::Builder::new().set_cache_size(CACHE_BYTES).create_with_backend(backend)?;
        // Create the tables, so that reads of an empty store find them.
        let txn = db.begin_write()?;
        txn.open_table(RECORDS)?;
        txn.open_table(BY_TIME)?;
        txn.open_table(RESTORES)?;
        txn.open_table(RESTORES_BY_TIME)?;
        txn.commit()?;
        // redb checks pages only when it must recover from a crash: a file damaged while the
        // daemon was stopped (a garbled page) would otherwise panic later, in some write. The
        // check reads the whole file once (about a second per 100 MB), at open only.
        let mut db = db;
        if !db.check_integrity()? {
            tracing::warn!(file = %path.display(), "the checkpoint store was damaged and redb repaired it");
        }
        Ok(db)
    });
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(e)) if is_corruption(&e) => Err(OpenFailure::Damaged(e.to_string())),
        Ok(Err(e)) => Err(OpenFailure::Other(e.to_string())),
        Err(panic) => Err(OpenFailure::Damaged(format!("redb panicked opening it: {panic}"))),
    }
}

/// Drops `db`; a panic while it flushes (a damaged file) is caught and logged.
fn close(db: Database) {
    if let Err(panic) = guarded(move || drop(db)) {
        tracing::warn!("the checkpoint store panicked while closing: {panic}");
    }
}

/// Copies every record and restore of `old` into `new` (a store whose file was removed: the
/// open handle still reads it). What cannot be read is skipped: the copy saves what it can.
fn copy_all(old: &Database, new: &Database) -> Result<u64, redb::Error> {
    let read = old.begin_read()?;
    let txn = new.begin_write()?;
    let mut copied = 0;
    {
        let from = read.open_table(RECORDS)?;
        let mut to = txn.open_table(RECORDS)?;
        let mut to_time = txn.open_table(BY_TIME)?;
        for (key, value) in from.iter()?.flatten() {
            let (cluster, job, at, id) = key.value();
            to.insert((cluster, job, at, id), value.value())?;
            to_time.insert((at, cluster, job, id), ())?;
            copied += 1;
        }
        let from = read.open_table(RESTORES)?;
        let mut to = txn.open_table(RESTORES)?;
        let mut to_time = txn.open_table(RESTORES_BY_TIME)?;
        for (key, value) in from.iter()?.flatten() {
            let (cluster, job, at) = key.value();
            to.insert((cluster, job, at), value.value())?;
            to_time.insert((at, cluster, job), ())?;
        }
    }
    txn.commit()?;
    Ok(copied)
}

/// The store's page cache (redb's default is 1 GiB).
pub(crate) const CACHE_BYTES: usize = 16 << 20;

impl Store {
    /// Opens (or creates) `dir/STORE_FILE`. A damaged file is moved aside
    /// (`checkpoints.redb.corrupt-<UTC time>`) and a new one started; an error only when no
    /// store can be made at all (the directory cannot be created, the disk refuses it).
    pub fn open(dir: &Path, bounds: Bounds) -> Result<Store, StoreError> {
        Store::open_with_faults(dir, bounds, Arc::default())
    }

    /// [`Store::open`] on a disk whose faults a test sets.
    pub fn open_with_faults(
        dir: &Path,
        bounds: Bounds,
        faults: Arc<DiskFaults>,
    ) -> Result<Store, StoreError> {
        let store = Store::closed(dir, bounds, faults);
        {
            let mut inner = store.inner.write();
            store.open_into(&mut inner, Timestamp::now()).map_err(|message| store.err(message))?;
        }
        Ok(store)
    }

    /// A store not open yet: it is opened by the first write (for a daemon whose store could
    /// not be opened at start: it keeps trying, with back-off).
    pub(crate) fn closed(dir: &Path, bounds: Bounds, faults: Arc<DiskFaults>) -> Store {
        Store {
            path: dir.join(STORE_FILE),
            bounds,
            faults,
            inner: RwLock::new(Inner { db: None, file_id: None, failing: None }),
            files_set_aside: AtomicU64::new(0),
            reopened: AtomicU64::new(0),
        }
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Db { path: self.path.clone(), message: e.to_string() }
    }

    /// Damaged files moved aside since start.
    pub fn files_set_aside(&self) -> u64 {
        self.files_set_aside.load(Ordering::Relaxed)
    }

    /// Times the database was closed and opened again after a failure or a replaced file.
    pub fn reopened(&self) -> u64 {
        self.reopened.load(Ordering::Relaxed)
    }

    /// Why the store cannot be written now, and since when; `None` when the last write worked.
    pub fn failing(&self) -> Option<Failing> {
        self.inner.read().failing.clone()
    }

    /// Writes a new file with everything the open one held if the file at the path is not the
    /// open one (it, or its directory, was removed or replaced): redb would write on into the
    /// deleted file, lost at the next start.
    pub(crate) fn follow_file(&self, now: Timestamp) {
        let mut inner = self.inner.write();
        if inner.db.is_some() && file_id(&self.path) != inner.file_id {
            self.rewrite_replaced(&mut inner, now);
        }
    }

    /// Opens the file into `inner` (moving a damaged one aside first).
    fn open_into(&self, inner: &mut Inner, now: Timestamp) -> Result<(), String> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let db = match open_db(&self.path, &self.faults) {
            Ok(db) => db,
            Err(OpenFailure::Other(why)) => return Err(why),
            Err(OpenFailure::Damaged(why)) => {
                self.set_aside(&why, now)?;
                open_db(&self.path, &self.faults).map_err(|f| match f {
                    OpenFailure::Damaged(m) | OpenFailure::Other(m) => m,
                })?
            }
        };
        inner.db = Some(db);
        inner.file_id = file_id(&self.path);
        Ok(())
    }

    /// Moves the damaged file aside as `checkpoints.redb.corrupt-<UTC time>`, loudly.
    fn set_aside(&self, why: &str, now: Timestamp) -> Result<(), String> {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(now.millis().max(0) as u64);
        let stamp = humantime::format_rfc3339_millis(at).to_string().replace(':', "");
        let aside = self.path.with_file_name(format!("{STORE_FILE}.corrupt-{stamp}"));
        std::fs::rename(&self.path, &aside)
            .map_err(|e| format!("damaged ({why}) and cannot be moved aside: {e}"))?;
        self.files_set_aside.fetch_add(1, Ordering::Relaxed);
        tracing::error!(
            file = %self.path.display(),
            moved_to = %aside.display(),
            "THE CHECKPOINT STORE IS DAMAGED ({why}): moved aside, starting a new one; the records it \
             held are in the file moved aside, not in the new store"
        );
        Ok(())
    }

    /// Before a write: a store that failed is opened again once its back-off has passed, and
    /// one whose file was removed or replaced is written anew with what the old file held.
    fn heal(&self, inner: &mut Inner, now: Timestamp) -> Result<(), StoreError> {
        let replaced = inner.db.is_some() && file_id(&self.path) != inner.file_id;
        if replaced {
            self.rewrite_replaced(inner, now);
        }
        let Some(failing) = inner.failing.clone() else {
            return if inner.db.is_some() { Ok(()) } else { self.reopen(inner, now) };
        };
        if now < failing.next_try {
            return Err(self.err(format!(
                "{} (failing since {}; next attempt in {})",
                failing.reason,
                crate::time::log_time(failing.since),
                crate::time::human_ms(failing.next_try.since(now))
            )));
        }
        self.reopen(inner, now)
    }

    /// Closes the database and opens it again (redb keeps refusing writes after an I/O error
    /// until then).
    fn reopen(&self, inner: &mut Inner, now: Timestamp) -> Result<(), StoreError> {
        if let Some(db) = inner.db.take() {
            close(db);
        }
        self.reopened.fetch_add(1, Ordering::Relaxed);
        match self.open_into(inner, now) {
            Ok(()) => Ok(()),
            Err(why) => {
                self.note_failure(inner, now, why.clone());
                Err(self.err(why))
            }
        }
    }

    /// The file at the path is not the one open (removed, or its directory was): a new one is
    /// made and everything the old one held is copied into it, loudly.
    fn rewrite_replaced(&self, inner: &mut Inner, now: Timestamp) {
        let Some(old) = inner.db.take() else { return };
        tracing::error!(
            file = %self.path.display(),
            "THE CHECKPOINT STORE'S FILE WAS REMOVED OR REPLACED while open: writing a new one with \
             everything the old one held"
        );
        self.reopened.fetch_add(1, Ordering::Relaxed);
        match self.open_into(inner, now) {
            Ok(()) => {
                let new = inner.db.as_ref().expect("just opened");
                match guarded(|| copy_all(&old, new)) {
                    Ok(Ok(n)) => {
                        tracing::warn!(records = n, "the new checkpoint store holds the old one's records")
                    }
                    Ok(Err(e)) => tracing::error!("cannot copy the old checkpoint store's records: {e}"),
                    Err(panic) => tracing::error!("cannot copy the old checkpoint store's records: {panic}"),
                }
            }
            Err(why) => self.note_failure(inner, now, why),
        }
        close(old);
    }

    fn note_failure(&self, inner: &mut Inner, now: Timestamp, reason: String) {
        let (since, attempts) = inner.failing.as_ref().map_or((now, 0), |f| (f.since, f.attempts + 1));
        let next_try = now.plus_millis(backoff(attempts).as_millis() as i64);
        inner.failing = Some(Failing { since, reason, attempts, next_try });
    }

    /// Writes `records` and prunes to the bounds as of `now`, in one durable transaction.
    /// Writing a record again replaces it: the store holds it once.
    pub fn write(&self, records: &[Outboxed], now: Timestamp) -> Result<Written, StoreError> {
        self.write_all(records, &[], now)
    }

    /// [`Store::write`] of checkpoint records and restores together, in one transaction. A
    /// restore is keyed by its job and Flink's restore time, so writing it again (counted, then
    /// timed; or again after a restart) replaces it. Restores are pruned by the same age bound,
    /// and to `max_records` of their own.
    pub fn write_all(
        &self,
        records: &[Outboxed],
        restores: &[OutboxedRestore],
        now: Timestamp,
    ) -> Result<Written, StoreError> {
        let mut inner = self.inner.write();
        self.heal(&mut inner, now)?;
        let db = inner.db.as_ref().ok_or_else(|| self.err("not open"))?;
        match guarded(|| write_txn(db, self.bounds, records, restores, now)) {
            Ok(Ok(written)) => {
                if let Some(failing) = inner.failing.take() {
                    tracing::warn!(
                        down_for = %crate::time::human_ms(now.since(failing.since)),
                        "the checkpoint store takes writes again"
                    );
                }
                Ok(written)
            }
            Ok(Err(e)) => {
                let damaged = is_corruption(&e);
                self.fail_write(&mut inner, now, e.to_string(), damaged)
            }
            Err(panic) => {
                self.fail_write(&mut inner, now, format!("redb panicked writing it: {panic}"), true)
            }
        }
    }

    /// A failed write: the store is failing; a damaged file is closed and moved aside at once
    /// (the next write starts a new one), an I/O error is retried after the back-off.
    fn fail_write(
        &self,
        inner: &mut Inner,
        now: Timestamp,
        reason: String,
        damaged: bool,
    ) -> Result<Written, StoreError> {
        self.note_failure(inner, now, reason.clone());
        if damaged {
            if let Some(db) = inner.db.take() {
                close(db);
            }
            if let Err(why) = self.set_aside(&reason, now) {
                tracing::error!("{why}");
            }
            if let Some(f) = inner.failing.as_mut() {
                f.next_try = now;
            }
        }
        Err(self.err(reason))
    }

    /// Runs a read on the open database; a panic on a damaged file is an error of this read
    /// (the next write finds the damage and moves the file aside).
    fn read<T>(&self, f: impl FnOnce(&Database) -> Result<T, redb::Error>) -> Result<T, StoreError> {
        let inner = self.inner.read();
        let db = inner.db.as_ref().ok_or_else(|| self.err("not open (it is failing; see the log)"))?;
        match guarded(|| f(db)) {
            Ok(result) => result.map_err(|e| self.err(e)),
            Err(panic) => Err(self.err(format!("redb panicked reading it: {panic}"))),
        }
    }

    /// One job's restores with a restore time within `since`..=`until`: the newest `limit`
    /// (at most [`MAX_QUERY_LIMIT`]), oldest first.
    pub fn query_restores(
        &self,
        cluster: &str,
        job_id: &str,
        query: &Query,
    ) -> Result<Vec<RestoreRecord>, StoreError> {
        let limit = query.limit.min(MAX_QUERY_LIMIT);
        self.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RESTORES)?;
            let from = (cluster, job_id, query.since.unwrap_or(i64::MIN));
            let to = (cluster, job_id, query.until.unwrap_or(i64::MAX));
            let mut found = Vec::new();
            for entry in table.range(from..=to)?.rev() {
                let (_, value) = entry?;
                if found.len() == limit {
                    break;
                }
                if let Ok(record) = serde_json::from_slice::<RestoreRecord>(value.value()) {
                    found.push(record);
                }
            }
            found.reverse();
            Ok(found)
        })
    }

    /// Records in the store.
    pub fn record_count(&self) -> Result<u64, StoreError> {
        self.read(|db| Ok(db.begin_read()?.open_table(RECORDS)?.len()?))
    }

    /// One job's records triggered within the query's range that `keep` accepts: the newest
    /// `query.limit` of them (at most [`MAX_QUERY_LIMIT`]), oldest first, and whether more
    /// matched.
    pub fn query(
        &self,
        cluster: &str,
        job_id: &str,
        query: &Query,
        keep: impl Fn(&StoredCheckpoint) -> bool,
    ) -> Result<(Vec<StoredCheckpoint>, bool), StoreError> {
        let limit = query.limit.min(MAX_QUERY_LIMIT);
        self.read(|db| {
            let txn = db.begin_read()?;
            let table = txn.open_table(RECORDS)?;
            let from = (cluster, job_id, query.since.unwrap_or(i64::MIN), 0u64);
            let to = (cluster, job_id, query.until.unwrap_or(i64::MAX), u64::MAX);
            let mut found = Vec::new();
            let mut more = false;
            for entry in table.range(from..=to)?.rev() {
                let (_, value) = entry?;
                // A record this version cannot read is skipped, not an error for the whole query.
                let Ok(record) = serde_json::from_slice::<StoredCheckpoint>(value.value()) else { continue };
                if !keep(&record) {
                    continue;
                }
                if found.len() == limit {
                    more = true;
                    break;
                }
                found.push(record);
            }
            found.reverse();
            Ok((found, more))
        })
    }
}

/// One durable transaction: `records` and `restores` written, then pruned to `bounds` as of
/// `now` (see [`Store::write_all`]).
fn write_txn(
    db: &Database,
    bounds: Bounds,
    records: &[Outboxed],
    restores: &[OutboxedRestore],
    now: Timestamp,
) -> Result<Written, redb::Error> {
    let mut written = Written::default();
    let txn = db.begin_write()?;
    let horizon = now.millis().saturating_sub(bounds.max_age.as_millis() as i64);
    {
        let mut table = txn.open_table(RESTORES)?;
        let mut by_time = txn.open_table(RESTORES_BY_TIME)?;
        for r in restores {
            let at = r.record.from.restored_at.millis();
            let bytes = serde_json::to_vec(&r.record).expect("restores always serialise");
            table.insert((r.cluster.as_str(), r.job_id.as_str(), at), bytes.as_slice())?;
            by_time.insert((at, r.cluster.as_str(), r.job_id.as_str()), ())?;
        }
        let total = table.len()?;
        let mut doomed: Vec<(i64, String, String)> = Vec::new();
        for entry in by_time.iter()? {
            let (key, _) = entry?;
            let (at, cluster, job) = key.value();
            if at >= horizon && total - doomed.len() as u64 <= bounds.max_records {
                break;
            }
            doomed.push((at, cluster.to_string(), job.to_string()));
        }
        for (at, cluster, job) in &doomed {
            by_time.remove((*at, cluster.as_str(), job.as_str()))?;
            table.remove((cluster.as_str(), job.as_str(), *at))?;
        }
    }
    {
        let mut table = txn.open_table(RECORDS)?;
        let mut by_time = txn.open_table(BY_TIME)?;
        for r in records {
            let record = &r.checkpoint.record;
            let at = record.triggered_at.millis();
            let bytes = serde_json::to_vec(&r.checkpoint).expect("records always serialise");
            let key = (r.cluster.as_str(), r.job_id.as_str(), at, record.id);
            let old = table.insert(key, bytes.as_slice())?;
            if old.is_some() {
                written.rewritten += 1;
            } else {
                written.inserted += 1;
            }
            drop(old);
            by_time.insert((at, r.cluster.as_str(), r.job_id.as_str(), record.id), ())?;
        }
        // Oldest first: everything older than the age bound, then whatever exceeds the count.
        let total = table.len()?;
        let mut doomed: Vec<(i64, String, String, u64)> = Vec::new();
        for entry in by_time.iter()? {
            let (key, _) = entry?;
            let (at, cluster, job, id) = key.value();
            let over_count = total - doomed.len() as u64 > bounds.max_records;
            if at >= horizon && !over_count {
                break;
            }
            doomed.push((at, cluster.to_string(), job.to_string(), id));
        }
        for (at, cluster, job, id) in &doomed {
            by_time.remove((*at, cluster.as_str(), job.as_str(), *id))?;
            table.remove((cluster.as_str(), job.as_str(), *at, *id))?;
        }
        written.pruned = doomed.len() as u64;
        written.records = total - written.pruned;
    }
    txn.commit()?;
    Ok(written)
}
