//! The checkpoint store: every checkpoint and savepoint the daemon counted, on disk beyond
//! Flink's history of ten, bounded by age and count, queryable by job and time range.
//!
//! An I/O edge like `state::persist`: a redb database (`state.dir/checkpoints.redb`) with one
//! record per (cluster, job id, trigger time, checkpoint id). The key makes writes idempotent:
//! the persister writes a batch *before* the state snapshot that marks its checkpoints counted,
//! so a `kill -9` between the two makes the restarted daemon count them again and write the
//! same keys again, one record each (never a loss, never a duplicate). The trigger time in the
//! key keeps apart two checkpoints with the same id (a job whose ids start again at 1 after a
//! restart without HA) and orders a job's records by time for range queries.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};

use crate::state::outbox::{Outboxed, OutboxedRestore, StoredCheckpoint};
use crate::state::restore::RestoreRecord;
use crate::time::Timestamp;

/// The file name inside the state directory.
pub const STORE_FILE: &str = "checkpoints.redb";

/// The largest `limit` a query may ask for.
pub const MAX_QUERY_LIMIT: usize = 10_000;

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

/// The open store.
pub struct Store {
    db: Database,
    path: PathBuf,
    bounds: Bounds,
}

/// The store's page cache (redb's default is 1 GiB).
pub const CACHE_BYTES: usize = 16 << 20;

impl Store {
    /// Opens (or creates) `dir/STORE_FILE`.
    pub fn open(dir: &Path, bounds: Bounds) -> Result<Store, StoreError> {
        let path = dir.join(STORE_FILE);
        let err = |e: &dyn std::fmt::Display| StoreError::Db { path: path.clone(), message: e.to_string() };
        std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
        // redb caches up to 1 GiB of pages by default: bounded here, since the store is written
        // every few seconds and read only for the history API (a cold read costs a disk read).
        let db = redb::Builder::new().set_cache_size(CACHE_BYTES).create(&path).map_err(|e| err(&e))?;
        // Create the tables, so that reads of an empty store find them.
        let txn = db.begin_write().map_err(|e| err(&e))?;
        txn.open_table(RECORDS).map_err(|e| err(&e))?;
        txn.open_table(BY_TIME).map_err(|e| err(&e))?;
        txn.open_table(RESTORES).map_err(|e| err(&e))?;
        txn.open_table(RESTORES_BY_TIME).map_err(|e| err(&e))?;
        txn.commit().map_err(|e| err(&e))?;
        Ok(Store { db, path, bounds })
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Db { path: self.path.clone(), message: e.to_string() }
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
        let mut written = Written::default();
        let txn = self.db.begin_write().map_err(|e| self.err(e))?;
        let horizon = now.millis().saturating_sub(self.bounds.max_age.as_millis() as i64);
        {
            let mut table = txn.open_table(RESTORES).map_err(|e| self.err(e))?;
            let mut by_time = txn.open_table(RESTORES_BY_TIME).map_err(|e| self.err(e))?;
            for r in restores {
                let at = r.record.from.restored_at.millis();
                let bytes = serde_json::to_vec(&r.record).expect("restores always serialise");
                table
                    .insert((r.cluster.as_str(), r.job_id.as_str(), at), bytes.as_slice())
                    .map_err(|e| self.err(e))?;
                by_time.insert((at, r.cluster.as_str(), r.job_id.as_str()), ()).map_err(|e| self.err(e))?;
            }
            let total = table.len().map_err(|e| self.err(e))?;
            let mut doomed: Vec<(i64, String, String)> = Vec::new();
            for entry in by_time.iter().map_err(|e| self.err(e))? {
                let (key, _) = entry.map_err(|e| self.err(e))?;
                let (at, cluster, job) = key.value();
                if at >= horizon && total - doomed.len() as u64 <= self.bounds.max_records {
                    break;
                }
                doomed.push((at, cluster.to_string(), job.to_string()));
            }
            for (at, cluster, job) in &doomed {
                by_time.remove((*at, cluster.as_str(), job.as_str())).map_err(|e| self.err(e))?;
                table.remove((cluster.as_str(), job.as_str(), *at)).map_err(|e| self.err(e))?;
            }
        }
        {
            let mut table = txn.open_table(RECORDS).map_err(|e| self.err(e))?;
            let mut by_time = txn.open_table(BY_TIME).map_err(|e| self.err(e))?;
            for r in records {
                let record = &r.checkpoint.record;
                let at = record.triggered_at.millis();
                let bytes = serde_json::to_vec(&r.checkpoint).expect("records always serialise");
                let key = (r.cluster.as_str(), r.job_id.as_str(), at, record.id);
                let old = table.insert(key, bytes.as_slice()).map_err(|e| self.err(e))?;
                if old.is_some() {
                    written.rewritten += 1;
                } else {
                    written.inserted += 1;
                }
                drop(old);
                by_time
                    .insert((at, r.cluster.as_str(), r.job_id.as_str(), record.id), ())
                    .map_err(|e| self.err(e))?;
            }
            // Oldest first: everything older than the age bound, then whatever exceeds the count.
            let total = table.len().map_err(|e| self.err(e))?;
            let mut doomed: Vec<(i64, String, String, u64)> = Vec::new();
            for entry in by_time.iter().map_err(|e| self.err(e))? {
                let (key, _) = entry.map_err(|e| self.err(e))?;
                let (at, cluster, job, id) = key.value();
                let over_count = total - doomed.len() as u64 > self.bounds.max_records;
                if at >= horizon && !over_count {
                    break;
                }
                doomed.push((at, cluster.to_string(), job.to_string(), id));
            }
            for (at, cluster, job, id) in &doomed {
                by_time.remove((*at, cluster.as_str(), job.as_str(), *id)).map_err(|e| self.err(e))?;
                table.remove((cluster.as_str(), job.as_str(), *at, *id)).map_err(|e| self.err(e))?;
            }
            written.pruned = doomed.len() as u64;
            written.records = total - written.pruned;
        }
        txn.commit().map_err(|e| self.err(e))?;
        Ok(written)
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
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(RESTORES).map_err(|e| self.err(e))?;
        let from = (cluster, job_id, query.since.unwrap_or(i64::MIN));
        let to = (cluster, job_id, query.until.unwrap_or(i64::MAX));
        let mut found = Vec::new();
        for entry in table.range(from..=to).map_err(|e| self.err(e))?.rev() {
            let (_, value) = entry.map_err(|e| self.err(e))?;
            if found.len() == limit {
                break;
            }
            if let Ok(record) = serde_json::from_slice::<RestoreRecord>(value.value()) {
                found.push(record);
            }
        }
        found.reverse();
        Ok(found)
    }

    /// Records in the store.
    pub fn len(&self) -> Result<u64, StoreError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(RECORDS).map_err(|e| self.err(e))?;
        table.len().map_err(|e| self.err(e))
    }

    /// Whether the store holds no record.
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        Ok(self.len()? == 0)
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
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(RECORDS).map_err(|e| self.err(e))?;
        let from = (cluster, job_id, query.since.unwrap_or(i64::MIN), 0u64);
        let to = (cluster, job_id, query.until.unwrap_or(i64::MAX), u64::MAX);
        let mut found = Vec::new();
        let mut more = false;
        for entry in table.range(from..=to).map_err(|e| self.err(e))?.rev() {
            let (_, value) = entry.map_err(|e| self.err(e))?;
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
    }
}
