//! The storage source: a task per cluster that lists its jobs' checkpoint directories through
//! the `object_store` crate (local and mounted paths, S3 and S3-compatible endpoints, GCS,
//! Azure Blob) and applies each round as one `Observation::Storage`. It reads no file's
//! contents: sizes come from the listings (`_metadata` too).
//!
//! Where it looks: per watched job, the parent of its completed checkpoints' external paths
//! (from the polls), else `<configured checkpoint dir>/<job id>`; per base directory, the job
//! folders in it. Paths go through the cluster's `storage_paths` mapping first.
//!
//! Cost bounds: at most `[storage] max_requests_per_round` list requests a round (a request is
//! a page of up to 1,000 entries, or one local directory walk), jobs taken in turn; what a round
//! leaves is counted. A job's listing stops at `max_entries_per_job`. Every request has
//! `[storage] timeout`, the round twice the budget's worth. A directory it cannot reach is said
//! once (a warning and `checkpoint_sentinel_storage_unreachable`), not every round; throttling
//! (`503 SlowDown`, 429) is counted, and the job's listing tried again next time. The object
//! stores' own retries are off: each answer the storage gives is seen and counted.

pub(crate) mod analyse;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path as ObjPath;

use crate::app::AppState;
use crate::config::{ClusterConfig, StorageConfig};
use crate::observe::{AbandonedJob, BaseStorage, DEFAULT_FRAMESIZE_BYTES, Observation, StorageRound};
use crate::state::ClusterState;
use crate::time::Timestamp;
use analyse::{Entry, JobFacts};

/// Entries an S3-style list page holds (what a request costs, in entries).
const PAGE: u64 = 1_000;

/// Folders of jobs that do not run listed per round at most (their sizes are kept between).
const ABANDONED_PER_ROUND: usize = 4;

/// Folders of jobs that do not run kept per base directory (the largest).
const ABANDONED_KEPT: usize = 32;

/// A folder of a job the cluster does not list at all is taken as abandoned only when nothing
/// was written in it for this long (it may be a job this daemon does not watch).
const UNLISTED_QUIET_MS: u64 = 10 * 60 * 1000;

/// Why a listing failed, as a fixed metric label.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    /// The storage answered 503 SlowDown or 429.
    #[error("throttled: {0}")]
    Throttled(String),
    /// The directory or bucket does not exist.
    #[error("not found: {0}")]
    NotFound(String),
    /// Credentials missing or refused.
    #[error("access denied: {0}")]
    Denied(String),
    /// No answer within `[storage] timeout`.
    #[error("timed out")]
    Timeout,
    /// A scheme the daemon cannot read (`hdfs://`), or object stores are off.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

impl ListError {
    /// The metric label.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            ListError::Throttled(_) => "throttled",
            ListError::NotFound(_) => "not_found",
            ListError::Denied(_) => "denied",
            ListError::Timeout => "timeout",
            ListError::Unsupported(_) => "unsupported",
            ListError::Other(_) => "other",
        }
    }

    /// Whether the directory is unreachable (said once), not merely busy.
    fn unreachable(&self) -> bool {
        !matches!(self, ListError::Throttled(_) | ListError::Timeout)
    }

    fn of(e: &object_store::Error) -> ListError {
        let text = e.to_string();
        // The whole chain: an HTTP client's timeout says so only in a source ("operation timed
        // out" under "error sending request"), which the top's text leaves out.
        let mut lower = text.to_ascii_lowercase();
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            lower.push_str(" | ");
            lower.push_str(&cause.to_string().to_ascii_lowercase());
            source = cause.source();
        }
        match e {
            object_store::Error::NotFound { .. } => ListError::NotFound(text),
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
                ListError::Denied(text)
            }
            // Status codes with their words: a bare "503" may be part of a port or a request id.
            _ if [
                "slowdown",
                "slow down",
                "status code: 503",
                "503 service unavailable",
                "status code: 429",
                "429 too many requests",
                "too many requests",
                "reduce your request rate",
            ]
            .iter()
            .any(|n| lower.contains(n)) =>
            {
                ListError::Throttled(text)
            }
            _ if ["nosuchbucket", "status code: 404", "404 not found"].iter().any(|n| lower.contains(n)) => {
                ListError::NotFound(text)
            }
            _ if ["accessdenied", "status code: 403", "403 forbidden"].iter().any(|n| lower.contains(n)) => {
                ListError::Denied(text)
            }
            _ if lower.contains("timed out") || lower.contains("timeout") => ListError::Timeout,
            _ => ListError::Other(text),
        }
    }
}

/// A Flink path split into the store that holds it and the path inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Location {
    /// The store (`file`, `s3://bucket`, `gs://bucket`, `abfss://container@account…`).
    pub(crate) store: String,
    /// The path inside it.
    pub(crate) path: String,
}

/// Where `path` (already mapped) lives; `None` for a scheme no store here reads.
pub(crate) fn locate(path: &str) -> Option<Location> {
    if let Some(rest) = path.strip_prefix("file:").or_else(|| path.starts_with('/').then_some(path)) {
        let local = format!("/{}", rest.trim_start_matches('/'));
        return Some(Location { store: "file".into(), path: local });
    }
    let (scheme, rest) = path.split_once("://")?;
    let scheme = match scheme {
        "s3" | "s3a" | "s3n" | "s3p" => "s3",
        "gs" => "gs",
        "abfs" | "abfss" | "az" | "adl" | "azure" | "wasb" | "wasbs" => scheme,
        _ => return None,
    };
    let (bucket, inner) = rest.split_once('/').unwrap_or((rest, ""));
    Some(Location { store: format!("{scheme}://{bucket}"), path: inner.trim_matches('/').to_string() })
}

/// Builds the store for a location's `store` key.
fn build_store(key: &str, s: &StorageConfig) -> Result<Arc<dyn ObjectStore>, ListError> {
    if key == "file" {
        return Ok(Arc::new(object_store::local::LocalFileSystem::new()));
    }
    if !s.object_stores {
        return Err(ListError::Unsupported(format!("{key}: [storage] object_stores is off")));
    }
    let retry = object_store::RetryConfig { max_retries: 0, ..Default::default() };
    // Timeouts as configuration keys: `with_client_options` would replace what the environment
    // set (`AWS_ALLOW_HTTP`, a proxy, certificates).
    let timeout = humantime::format_duration(s.timeout).to_string();
    let timeouts = [object_store::ClientConfigKey::Timeout, object_store::ClientConfigKey::ConnectTimeout];
    let built: Result<Arc<dyn ObjectStore>, object_store::Error> = if key.starts_with("s3://") {
        use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
        let b = AmazonS3Builder::from_env().with_url(key).with_retry(retry);
        timeouts
            .into_iter()
            .fold(b, |b, k| b.with_config(AmazonS3ConfigKey::Client(k), &timeout))
            .build()
            .map(|s| Arc::new(s) as _)
    } else if key.starts_with("gs://") {
        use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
        let b = GoogleCloudStorageBuilder::from_env().with_url(key).with_retry(retry);
        timeouts
            .into_iter()
            .fold(b, |b, k| b.with_config(GoogleConfigKey::Client(k), &timeout))
            .build()
            .map(|s| Arc::new(s) as _)
    } else {
        use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
        let b = MicrosoftAzureBuilder::from_env().with_url(key).with_retry(retry);
        timeouts
            .into_iter()
            .fold(b, |b, k| b.with_config(AzureConfigKey::Client(k), &timeout))
            .build()
            .map(|s| Arc::new(s) as _)
    };
    built.map_err(|e| ListError::Other(e.to_string()))
}

/// What a round lists, read under the state's read lock.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// Per watched running job: what Flink says, and its directory as the daemon reads it.
    pub(crate) jobs: Vec<(JobFacts, String)>,
    /// Base directories: (as Flink names it, as the daemon reads it).
    pub(crate) bases: Vec<(String, String)>,
    /// Every job the cluster lists: its status and whether it runs.
    pub(crate) known: HashMap<String, (String, bool)>,
}

/// What a round of `cluster` lists (`mapping`: the cluster's `storage_paths`).
pub(crate) fn plan(cluster: &ClusterState, mapping: &[(String, String)]) -> Plan {
    let mut out = Plan::default();
    let mut bases = std::collections::BTreeSet::new();
    for (job_id, job) in &cluster.jobs {
        let running = job.listed && !job.job_state.has_ended();
        out.known.insert(job_id.clone(), (job.job_state.to_string(), running));
        let config = job.configuration.as_deref();
        let newest = job.storage.paths.iter().next_back();
        let dir = newest.and_then(|(_, k)| analyse::job_dir_of(&k.path).map(str::to_string)).or_else(|| {
            config?.checkpoint_dir.as_ref().map(|d| format!("{}/{job_id}", d.trim_end_matches('/')))
        });
        let Some(dir) = dir else { continue };
        if let Some(base) = analyse::parent_of(&dir) {
            bases.insert(base.to_string());
        }
        if !running {
            continue;
        }
        let interval = job.settings.as_ref().and_then(|s| s.interval_ms).unwrap_or(0);
        let mut facts = JobFacts {
            job_id: job_id.clone(),
            dir: dir.clone(),
            num_retained: config.and_then(|c| c.retained_checkpoints).unwrap_or(1),
            newest_completed: newest.map(|(id, _)| *id).or(job.last_completed.as_ref().map(|r| r.id)),
            in_progress: job.in_progress.iter().map(|c| c.id).collect(),
            reported_state_bytes: newest.and_then(|(_, k)| k.full_state_bytes),
            file_merging: config.and_then(|c| c.file_merging).unwrap_or(false),
            framesize_bytes: config.and_then(|c| c.framesize_bytes).unwrap_or(DEFAULT_FRAMESIZE_BYTES),
            grace_ms: (2 * interval).max(60_000),
        };
        let local = analyse::mapped(&dir, mapping);
        if local != dir {
            facts.dir = format!("{dir} (read at {local})");
        }
        out.jobs.push((facts, local));
    }
    out.bases = bases.into_iter().map(|b| (b.clone(), analyse::mapped(&b, mapping))).collect();
    out
}

/// Lists one cluster's checkpoint storage.
pub(crate) struct StorageSource {
    config: ClusterConfig,
    app: Arc<AppState>,
    stores: HashMap<String, Arc<dyn ObjectStore>>,
    /// The next job in turn.
    cursor: usize,
    /// Directories said to be unreachable (not said again until they answer).
    unreachable: HashSet<String>,
    /// Per (base, job id): the last listing of a folder of a job that does not run.
    abandoned: HashMap<(String, String), AbandonedJob>,
    /// Jobs the cluster lists that the state does not hold (a look at a few jobs): status, runs.
    also_known: HashMap<String, (String, bool)>,
}

/// A round's request budget and counts.
struct Budget {
    left: usize,
    made: u32,
    cut: u32,
    entries_cut: u64,
    errors: Vec<&'static str>,
}

impl Budget {
    /// Takes one request; `false` when none is left.
    fn take(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        self.made += 1;
        true
    }
}

impl StorageSource {
    /// A source for `config`'s cluster.
    pub(crate) fn new(config: ClusterConfig, app: Arc<AppState>) -> Self {
        StorageSource {
            config,
            app,
            stores: HashMap::new(),
            cursor: 0,
            unreachable: HashSet::new(),
            abandoned: HashMap::new(),
            also_known: HashMap::new(),
        }
    }

    /// Also knows these jobs' statuses (`diagnose` watches only the jobs it was asked about,
    /// but the cluster's job list says which other folders belong to running jobs).
    pub(crate) fn knowing(mut self, jobs: HashMap<String, (String, bool)>) -> Self {
        self.also_known = jobs;
        self
    }

    /// Runs rounds until aborted.
    pub(crate) async fn run(mut self) {
        loop {
            let settings = self.app.storage.read().clone();
            tokio::time::sleep(settings.interval.max(StorageConfig::MIN_INTERVAL)).await;
            if !settings.enabled {
                continue;
            }
            if let Some(round) = self.round(&settings).await {
                self.app.apply(&Observation::Storage(round));
            }
        }
    }

    fn mapping(&self) -> Vec<(String, String)> {
        self.config.storage_paths.iter().map(|m| (m.flink.clone(), m.local.clone())).collect()
    }

    /// One round: `None` when there is nothing to list (no watched job with a known directory).
    pub(crate) async fn round(&mut self, s: &StorageConfig) -> Option<StorageRound> {
        let mut plan = {
            let state = self.app.state.read();
            plan(state.clusters().get(&self.config.name)?, &self.mapping())
        };
        for (job, known) in &self.also_known {
            plan.known.entry(job.clone()).or_insert_with(|| known.clone());
        }
        if plan.jobs.is_empty() && plan.bases.is_empty() {
            return None;
        }
        let mut budget = Budget {
            left: s.max_requests_per_round.max(1),
            made: 0,
            cut: 0,
            entries_cut: 0,
            errors: Vec::new(),
        };
        let mut round = StorageRound { cluster: self.config.name.clone(), ..Default::default() };
        // The whole round is bounded too: each request has the timeout, a round its budget's worth.
        let deadline = s.timeout * (s.max_requests_per_round.min(1_000) as u32 + 1) + Duration::from_secs(1);
        let work = async {
            self.list_jobs(&plan, s, &mut budget, &mut round).await;
            self.list_bases(&plan, s, &mut budget, &mut round).await;
        };
        if tokio::time::timeout(deadline, work).await.is_err() {
            budget.errors.push("timeout");
        }
        round.at = Timestamp::now();
        round.requests = budget.made;
        round.requests_cut = budget.cut;
        round.entries_cut = budget.entries_cut;
        round.errors = budget.errors;
        Some(round)
    }

    async fn list_jobs(
        &mut self,
        plan: &Plan,
        s: &StorageConfig,
        budget: &mut Budget,
        round: &mut StorageRound,
    ) {
        let n = plan.jobs.len();
        let start = self.cursor % n.max(1);
        let mut listed = 0;
        for k in 0..n {
            let (facts, local) = &plan.jobs[(start + k) % n];
            if budget.left == 0 {
                budget.cut += 1;
                continue;
            }
            listed += 1;
            let listing = self.list_dir(local, s, budget).await;
            match listing {
                Ok((entries, truncated)) => {
                    self.answered(local, round);
                    round.jobs.push(analyse::analyse(&entries, truncated, facts, Timestamp::now()));
                }
                Err(e) => {
                    if matches!(e, ListError::Throttled(_)) {
                        round.throttled_jobs.push(facts.job_id.clone());
                    }
                    self.failed(local, &e, budget, round)
                }
            }
        }
        self.cursor = (start + listed) % n.max(1);
    }

    async fn list_bases(
        &mut self,
        plan: &Plan,
        s: &StorageConfig,
        budget: &mut Budget,
        round: &mut StorageRound,
    ) {
        for (base, local) in &plan.bases {
            if !budget.take() {
                budget.cut += 1;
                continue;
            }
            let folders = match self.folders(local, s).await {
                Ok(f) => f,
                Err(e) => {
                    self.failed(local, &e, budget, round);
                    continue;
                }
            };
            let job_folders = folders.len() as u32;
            let stopped: Vec<(String, Option<String>)> = folders
                .into_iter()
                .filter(|f| analyse::is_job_id(f))
                .filter_map(|f| match plan.known.get(&f) {
                    Some((_, true)) => None,
                    Some((status, false)) => Some((f, Some(status.clone()))),
                    None => Some((f, None)),
                })
                .collect();
            let present: HashSet<&str> = stopped.iter().map(|(f, _)| f.as_str()).collect();
            self.abandoned.retain(|(b, j), _| b != base || present.contains(j.as_str()));
            let mut fresh = 0;
            for (job_id, status) in &stopped {
                let key = (base.clone(), job_id.clone());
                if self.abandoned.contains_key(&key) || fresh >= ABANDONED_PER_ROUND || budget.left == 0 {
                    continue;
                }
                fresh += 1;
                let dir = format!("{}/{job_id}", local.trim_end_matches('/'));
                match self.list_dir(&dir, s, budget).await {
                    Ok((entries, _)) => {
                        let a = analyse::abandoned(job_id, status.as_deref(), &entries, Timestamp::now());
                        self.abandoned.insert(key, a);
                    }
                    Err(e) => budget.errors.push(e.kind()),
                }
            }
            let mut abandoned: Vec<AbandonedJob> = self
                .abandoned
                .iter()
                .filter(|((b, _), a)| {
                    b == base && a.objects > 0 && (a.status.is_some() || a.age_ms >= UNLISTED_QUIET_MS)
                })
                .map(|(_, a)| a.clone())
                .collect();
            abandoned.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.job_id.cmp(&b.job_id)));
            let abandoned_bytes = abandoned.iter().map(|a| a.bytes).sum();
            abandoned.truncate(ABANDONED_KEPT);
            round.bases.push(BaseStorage { base: base.clone(), job_folders, abandoned, abandoned_bytes });
        }
    }

    /// Notes that `dir` answered (said once if it had not).
    fn answered(&mut self, dir: &str, round: &mut StorageRound) {
        if self.unreachable.remove(dir) {
            tracing::info!(cluster = %self.config.name, dir, "checkpoint storage answers again");
            round.reachable_again.push(dir.to_string());
        }
    }

    /// Counts a failed listing of `dir`; an unreachable directory is said once.
    fn failed(&mut self, dir: &str, e: &ListError, budget: &mut Budget, round: &mut StorageRound) {
        budget.errors.push(e.kind());
        if e.unreachable() && self.unreachable.insert(dir.to_string()) {
            // One warning while the cluster has any unreadable directory, not one per job: at
            // 10,000 jobs on a storage the daemon cannot see, one line says it (the metric counts them).
            if self.unreachable.len() == 1 {
                tracing::warn!(cluster = %self.config.name, dir, "checkpoint storage not readable (said once; the others of this cluster at debug level, counted in the metrics): {e}");
            } else {
                tracing::debug!(cluster = %self.config.name, dir, "checkpoint storage not readable: {e}");
            }
            round.unreachable.push(dir.to_string());
        } else {
            tracing::debug!(cluster = %self.config.name, dir, "checkpoint storage listing failed: {e}");
        }
    }

    fn store(&mut self, key: &str, s: &StorageConfig) -> Result<Arc<dyn ObjectStore>, ListError> {
        if let Some(store) = self.stores.get(key) {
            return Ok(store.clone());
        }
        let store = build_store(key, s)?;
        self.stores.insert(key.to_string(), store.clone());
        Ok(store)
    }

    /// Every object under `dir` (at most `max_entries_per_job`, pages within the budget), with
    /// paths relative to it; `true` when it stopped short. One request is taken already for a
    /// base's folder listing, not for this.
    async fn list_dir(
        &mut self,
        dir: &str,
        s: &StorageConfig,
        budget: &mut Budget,
    ) -> Result<(Vec<Entry>, bool), ListError> {
        let location = locate(dir).ok_or_else(|| ListError::Unsupported(dir.to_string()))?;
        let store = self.store(&location.store, s)?;
        let prefix = self.check_local(&location, s).await?;
        if !budget.take() {
            budget.cut += 1;
            return Ok((Vec::new(), true));
        }
        let local = location.store == "file";
        let mut stream = store.list(Some(&prefix));
        let mut entries = Vec::new();
        let mut skipped = false;
        let strip = format!("{}/", prefix.as_ref());
        loop {
            let next =
                tokio::time::timeout(s.timeout, stream.next()).await.map_err(|_| ListError::Timeout)?;
            let Some(item) = next else { return Ok((entries, skipped)) };
            let meta = match item {
                Ok(meta) => meta,
                // A name that is no path of an object store (not UTF-8): counted and passed over,
                // the listing partial, not the whole job unseen.
                Err(e @ object_store::Error::InvalidPath { .. }) if local => {
                    skipped = true;
                    budget.errors.push(ListError::of(&e).kind());
                    continue;
                }
                Err(e) => return Err(ListError::of(&e)),
            };
            if entries.len() >= s.max_entries_per_job {
                budget.entries_cut += 1;
                return Ok((entries, true));
            }
            // The next S3 page is another request.
            if !local && !entries.is_empty() && (entries.len() as u64).is_multiple_of(PAGE) && !budget.take()
            {
                budget.cut += 1;
                return Ok((entries, true));
            }
            let path = meta.location.as_ref();
            entries.push(Entry {
                path: path.strip_prefix(strip.as_str()).unwrap_or(path).to_string(),
                size: meta.size,
                modified: Timestamp(meta.last_modified.timestamp_millis()),
            });
        }
    }

    /// A local directory must exist (an empty listing would say nothing of a missing mount);
    /// returns the store's path of the location.
    async fn check_local(&self, location: &Location, s: &StorageConfig) -> Result<ObjPath, ListError> {
        if location.store != "file" {
            return Ok(ObjPath::from(location.path.as_str()));
        }
        match tokio::time::timeout(s.timeout, tokio::fs::metadata(&location.path)).await {
            Err(_) => return Err(ListError::Timeout),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ListError::NotFound(location.path.clone()));
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(ListError::Denied(location.path.clone()));
            }
            Ok(Err(e)) => return Err(ListError::Other(e.to_string())),
            Ok(Ok(_)) => {}
        }
        ObjPath::from_absolute_path(&location.path).map_err(|e| ListError::Other(e.to_string()))
    }

    /// The folder names directly under `dir` (one request).
    async fn folders(&mut self, dir: &str, s: &StorageConfig) -> Result<Vec<String>, ListError> {
        let location = locate(dir).ok_or_else(|| ListError::Unsupported(dir.to_string()))?;
        let store = self.store(&location.store, s)?;
        let prefix = self.check_local(&location, s).await?;
        let listed = tokio::time::timeout(s.timeout, store.list_with_delimiter(Some(&prefix)))
            .await
            .map_err(|_| ListError::Timeout)?
            .map_err(|e| ListError::of(&e))?;
        Ok(listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_string)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flink_paths_locate_in_their_store() {
        let l = locate("file:/tmp/ckpt/j").unwrap();
        assert_eq!((l.store.as_str(), l.path.as_str()), ("file", "/tmp/ckpt/j"));
        assert_eq!(locate("file:///tmp/x").unwrap().path, "/tmp/x");
        assert_eq!(locate("/mnt/x").unwrap().path, "/mnt/x");
        let l = locate("s3a://bucket/ckpt/j/").unwrap();
        assert_eq!((l.store.as_str(), l.path.as_str()), ("s3://bucket", "ckpt/j"));
        assert_eq!(locate("gs://b/p").unwrap().store, "gs://b");
        assert_eq!(locate("hdfs://nn/p"), None);
    }

    #[test]
    fn throttling_is_told_from_the_error_text() {
        let e = object_store::Error::Generic {
            store: "S3",
            source: "Server returned non-2xx status code: 503 Service Unavailable: SlowDown".into(),
        };
        assert_eq!(ListError::of(&e).kind(), "throttled");
        // A port or request id with 503 or 403 in it says nothing.
        let e = object_store::Error::Generic {
            store: "S3",
            source:
                "Error performing GET http://127.0.0.1:35031/bucket?list-type=2 in 300ms: timed out (id 4031)"
                    .into(),
        };
        assert_eq!(ListError::of(&e).kind(), "timeout");
        let e = object_store::Error::NotFound { path: "x".into(), source: "gone".into() };
        assert_eq!(ListError::of(&e).kind(), "not_found");
    }

    fn budget(left: usize) -> Budget {
        Budget { left, made: 0, cut: 0, entries_cut: 0, errors: Vec::new() }
    }

    /// Issue 40, odd storage: a job directory past `max_entries_per_job` (cut, counted), a
    /// `_metadata` of size 0, a file where a directory is expected, a missing directory, a
    /// symlink loop and a name that is not UTF-8. No panic; each listing ends with entries or
    /// one counted error kind, and the budget's cut is counted.
    #[tokio::test]
    async fn odd_local_directories_are_cut_or_counted_never_a_panic() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("job");
        std::fs::create_dir_all(job.join("chk-1")).unwrap();
        std::fs::write(job.join("chk-1/_metadata"), b"").unwrap();
        for i in 0..30 {
            std::fs::write(job.join(format!("chk-1/state-{i}")), b"x").unwrap();
        }
        std::fs::write(dir.path().join("a-file"), b"not a directory").unwrap();
        let app = Arc::new(AppState::new(crate::state::State::new(crate::stats::WindowSpec {
            window_ms: 60_000,
            slots: 6,
        })));
        let mut source = StorageSource::new(ClusterConfig::default(), app);
        let s = StorageConfig { max_entries_per_job: 10, ..Default::default() };
        let path = |p: &std::path::Path| p.to_str().unwrap().to_string();

        // Past the cap per job: ten entries, the cut counted.
        let mut b = budget(5);
        let (entries, truncated) = source.list_dir(&path(&job), &s, &mut b).await.unwrap();
        assert!(truncated);
        assert_eq!((entries.len(), b.entries_cut, b.made), (10, 1, 1));
        // With room: the empty _metadata is an entry of size 0.
        let big = StorageConfig::default();
        let (entries, truncated) = source.list_dir(&path(&job), &big, &mut budget(5)).await.unwrap();
        assert!(!truncated);
        assert!(entries.iter().any(|e| e.path == "chk-1/_metadata" && e.size == 0), "{entries:?}");
        // No budget left: cut, not made.
        let mut b = budget(0);
        let (entries, truncated) = source.list_dir(&path(&job), &big, &mut b).await.unwrap();
        assert!(entries.is_empty() && truncated);
        assert_eq!((b.cut, b.made), (1, 0));
        // A missing directory: not_found (said once by the round, never an empty listing).
        let gone = source.list_dir(&path(&dir.path().join("gone")), &big, &mut budget(5)).await;
        assert_eq!(gone.err().map(|e| e.kind()), Some("not_found"));
        // A file where a directory is expected: an error of a fixed kind, or nothing under it.
        match source.list_dir(&path(&dir.path().join("a-file")), &big, &mut budget(5)).await {
            Ok((entries, _)) => assert!(entries.is_empty(), "{entries:?}"),
            Err(e) => assert!(["other", "not_found"].contains(&e.kind()), "{e}"),
        }
        // A symlink loop and a name that is not UTF-8 in a job's directory: the listing ends
        // (entries or one counted error), within the timeout.
        std::os::unix::fs::symlink(job.join("chk-1/loop-b"), job.join("chk-1/loop-a")).unwrap();
        std::os::unix::fs::symlink(job.join("chk-1/loop-a"), job.join("chk-1/loop-b")).unwrap();
        std::fs::write(job.join(std::ffi::OsStr::from_bytes(b"chk-1/bad-\xff-name")), b"x").unwrap();
        // object_store's local walk ends at the first entry it cannot read: the whole job's
        // listing fails with one counted kind (`other`) — no panic, the round goes on — until the
        // loop is gone (a limitation: the job's storage is unseen meanwhile).
        let odd = source.list_dir(&path(&job), &big, &mut budget(5)).await;
        assert_eq!(odd.err().map(|e| e.kind()), Some("other"));
        std::fs::remove_file(job.join("chk-1/loop-a")).unwrap();
        std::fs::remove_file(job.join("chk-1/loop-b")).unwrap();
        // A name that is not UTF-8 is passed over and counted, the listing partial; the rest is
        // listed (before, the whole job's listing failed on it every round).
        let mut b = budget(5);
        let (entries, partial) = source.list_dir(&path(&job), &big, &mut b).await.unwrap();
        assert!(partial);
        assert_eq!(b.errors, ["other"]);
        assert!(entries.iter().any(|e| e.path == "chk-1/_metadata" && e.size == 0), "{entries:?}");
        // object_store's walk loses a few neighbours of the bad name (27 of 30 here): partial.
        assert!(entries.iter().filter(|e| e.path.starts_with("chk-1/state-")).count() >= 20, "{entries:?}");
    }

    const JOB: &str = "0123456789abcdef0123456789abcdef";

    /// A daemon's state with one running job whose checkpoint directory is `dir/<job id>`.
    fn app_with_job(dir: &str) -> Arc<AppState> {
        let app = Arc::new(AppState::new(crate::state::State::new(crate::stats::WindowSpec {
            window_ms: 60_000,
            slots: 6,
        })));
        add_job(&app, JOB, "job", dir);
        app
    }

    /// A running job `job_id` of cluster `c` polled into `app`, its checkpoint directory `dir`.
    fn add_job(app: &AppState, job_id: &str, name: &str, dir: &str) {
        use crate::observe::{CheckpointConfiguration, JobKey, JobPoll};
        let key = JobKey { cluster: "c".into(), job_id: job_id.into() };
        app.apply(&Observation::JobPolled(JobPoll {
            key: key.clone(),
            job_name: name.into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(1_000),
            counts: Default::default(),
            settings: None,
            in_progress: Vec::new(),
            finished: Vec::new(),
            latest_restore: None,
            deferred: Default::default(),
        }));
        let configuration =
            CheckpointConfiguration { checkpoint_dir: Some(dir.into()), ..Default::default() };
        app.apply(&Observation::JobConfiguration(key, Box::new(configuration)));
    }

    /// How a fake S3 endpoint answers every request.
    #[derive(Clone, Copy)]
    enum Answer {
        /// Reads the request and never answers.
        Hang,
        /// This status and body.
        With(u16, &'static str),
    }

    /// A fake S3 endpoint on a free port: its URL.
    async fn fake_s3(answer: Answer) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = vec![0u8; 16 * 1024];
                let _ = socket.read(&mut buf).await;
                match answer {
                    Answer::Hang => held.push(socket),
                    Answer::With(status, body) => {
                        let head = format!(
                            "HTTP/1.1 {status} X\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = socket.write_all(head.as_bytes()).await;
                        let _ = socket.write_all(body.as_bytes()).await;
                    }
                }
            }
        });
        url
    }

    fn s3_store(url: &str, timeout: Duration) -> Arc<dyn ObjectStore> {
        let options = object_store::ClientOptions::new()
            .with_allow_http(true)
            .with_timeout(timeout)
            .with_connect_timeout(timeout);
        let store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(url)
            .with_bucket_name("bucket")
            .with_region("us-east-1")
            .with_access_key_id("key")
            .with_secret_access_key("secret")
            .with_retry(object_store::RetryConfig { max_retries: 0, ..Default::default() })
            .with_client_options(options)
            .build()
            .unwrap();
        Arc::new(store)
    }

    /// Issue 40, a hostile S3: an endpoint that never answers (the timeout fires, counted, and
    /// the round ends within its budget), a 500, a 200 of garbage instead of XML, a 503 SlowDown.
    /// No panic; each round counts its error kind; an unreachable directory is said once (the
    /// round's `unreachable`), not each round; throttling and timeouts are not unreachability.
    #[tokio::test]
    async fn a_hanging_or_garbled_s3_is_counted_and_said_once() {
        let slowdown = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
        let cases = [
            (Answer::Hang, "timeout", false),
            (Answer::With(500, "<Error><Code>InternalError</Code></Error>"), "other", true),
            (Answer::With(200, "this is <not xml"), "other", true),
            (Answer::With(503, slowdown), "throttled", false),
        ];
        for (answer, kind, unreachable) in cases {
            let url = fake_s3(answer).await;
            let app = app_with_job("s3://bucket/ckpt");
            let config = ClusterConfig { name: "c".into(), ..ClusterConfig::default() };
            let mut source = StorageSource::new(config, app.clone());
            let timeout = Duration::from_millis(300);
            source.stores.insert("s3://bucket".into(), s3_store(&url, timeout));
            let s = StorageConfig { timeout, max_requests_per_round: 4, ..Default::default() };
            let mut rounds = Vec::new();
            for _ in 0..2 {
                // Generous: the round's own deadline is a few timeouts; this only keeps a
                // missing timeout from hanging the test.
                let round = tokio::time::timeout(Duration::from_secs(60), source.round(&s))
                    .await
                    .expect("the round ends within its budget")
                    .expect("a job to list");
                app.apply(&Observation::Storage(round.clone()));
                rounds.push(round);
            }
            let dir = format!("s3://bucket/ckpt/{JOB}");
            for (i, r) in rounds.iter().enumerate() {
                assert!(r.errors.contains(&kind), "{kind}, round {i}: {:?}", r.errors);
                assert!(r.jobs.is_empty(), "{kind}: nothing listed");
                assert_eq!(r.throttled_jobs.len(), usize::from(kind == "throttled"), "{kind}");
            }
            let said: Vec<&Vec<String>> = rounds.iter().map(|r| &r.unreachable).collect();
            if unreachable {
                assert!(said[0].contains(&dir), "{kind}: {said:?}");
                assert!(said[1].is_empty(), "{kind}: said once, not each round: {said:?}");
            } else {
                assert!(said.iter().all(|u| u.is_empty()), "{kind}: busy, not unreachable: {said:?}");
            }
        }
    }

    /// Issue 40, the advisor on a real layout: the checkpoint folder of a job of a live Flink
    /// 2.3.0 run (e2e, `tests/fixtures/storage/flink-2.3.0/`: chk-15's `_metadata` and two state
    /// files, 76 KB), listed through the storage source and rendered as `advise` prints it. With
    /// what Flink said of it (one retained, the newest 15) no retention or cleanup advice; with a
    /// newer checkpoint Flink knows and the listing does not show yet, still none: the only
    /// complete checkpoint on storage is never advised away. The captured runs left no orphan
    /// holding files (their leftover chk-N folders are empty, which an object store's listing
    /// does not show), so the orphan is the same live files copied to an older chk-9: cleanup
    /// advice for it alone.
    #[tokio::test]
    async fn the_advisor_on_a_live_layout_advises_cleanup_only_of_what_no_checkpoint_holds() {
        let job_id = "fe39645b1bf96ec372cb39810446e8d6";
        let dir = format!("{}/tests/fixtures/storage/flink-2.3.0/{job_id}", env!("CARGO_MANIFEST_DIR"));
        let app = app_with_job("/nowhere");
        let mut source = StorageSource::new(ClusterConfig::default(), app);
        let (entries, truncated) =
            source.list_dir(&dir, &StorageConfig::default(), &mut budget(5)).await.unwrap();
        assert!(!truncated);
        let mut paths: Vec<(&str, u64)> = entries.iter().map(|e| (e.path.as_str(), e.size)).collect();
        paths.sort_unstable();
        assert_eq!(
            paths,
            [
                ("chk-15/70a5e99f-26b2-4bad-8e01-1eaae489a8f1", 34_970),
                ("chk-15/795487dd-ccb2-4eb4-bc40-b96a2a9d89c1", 37_154),
                ("chk-15/_metadata", 4_290)
            ]
        );
        // An hour after the files were written (a checkout writes them now).
        let written = entries.iter().map(|e| e.modified).max().unwrap();
        let now = written.plus_millis(3_600_000);
        let facts = |newest: u64| JobFacts {
            job_id: job_id.into(),
            dir: format!("file:/flink/checkpoints/{job_id}"),
            num_retained: 1,
            newest_completed: Some(newest),
            in_progress: Vec::new(),
            reported_state_bytes: Some(72_124),
            file_merging: false,
            framesize_bytes: DEFAULT_FRAMESIZE_BYTES,
            grace_ms: 60_000,
        };
        let advise = |listing: &crate::observe::JobStorage| {
            let configuration = crate::observe::CheckpointConfiguration::default();
            let mut job =
                crate::commands::advise::report::job_advice(job_id.into(), "job".into(), &configuration, &[]);
            job.advice =
                Arc::unwrap_or_clone(crate::advice::with_storage(Arc::new(job.advice), Some(listing)));
            let report = crate::commands::advise::report::AdviseReport {
                source: "test".into(),
                flink_version: Some("2.3.0".into()),
                jobs: vec![job],
            };
            crate::commands::advise::render::text(&report)
        };
        let kept = analyse::analyse(&entries, truncated, &facts(15), now);
        assert_eq!(kept.metadata, Some((15, 4_290)));
        assert_eq!((kept.bytes, kept.objects, kept.complete_folders), (76_414, 3, 1));
        assert!(kept.orphans.is_empty());
        let text = advise(&kept);
        for id in [
            "orphaned_checkpoints",
            "retained_beyond_setting",
            "metadata_near_frame_size",
            "shared_outruns_state",
        ] {
            assert!(!text.contains(id), "{id} in\n{text}");
        }
        // Flink says the newest is 17, whose folder the listing does not show yet (written
        // since): chk-15 is still the newest complete folder, retained, never advised away.
        let ahead = analyse::analyse(&entries, truncated, &facts(17), now);
        assert!(ahead.orphans.is_empty() && ahead.orphaned_bytes == 0);
        assert!(!advise(&ahead).contains("orphaned_checkpoints"));
        // Retained beyond the setting: only past num-retained + 1 complete folders (one here).
        assert!(!advise(&ahead).contains("retained_beyond_setting"));
        // The same live files twice: chk-15 retained, and chk-9 left behind beside it (a
        // complete checkpoint whose discard failed leaves exactly such a folder). Only chk-9 is
        // advised away, with its 76,414 bytes.
        let copy = tempfile::tempdir().unwrap();
        for chk in ["chk-15", "chk-9"] {
            let to = copy.path().join(chk);
            std::fs::create_dir_all(&to).unwrap();
            for file in std::fs::read_dir(format!("{dir}/chk-15")).unwrap() {
                let file = file.unwrap();
                std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
            }
        }
        let (entries, truncated) = source
            .list_dir(copy.path().to_str().unwrap(), &StorageConfig::default(), &mut budget(5))
            .await
            .unwrap();
        let now = entries.iter().map(|e| e.modified).max().unwrap().plus_millis(3_600_000);
        let left = analyse::analyse(&entries, truncated, &facts(15), now);
        let orphans: Vec<(u64, u64)> = left.orphans.iter().map(|o| (o.id, o.bytes)).collect();
        assert_eq!(orphans, [(9, 76_414)]);
        let text = advise(&left);
        assert!(text.contains("orphaned_checkpoints"), "{text}");
        assert!(text.contains("1 chk-N folder(s)"), "{text}");
        // Two complete folders where Flink retains one: within num-retained + 1, no retention advice.
        assert!(!text.contains("retained_beyond_setting"), "{text}");
    }

    /// Issue 40, caps: five jobs' local directories, two requests a round, at most 10 entries a
    /// job (one job holds 25). Each round makes two requests, the rest cut and counted, the cap
    /// per job counted; the rounds go on in turn until every job was listed; the counts reach
    /// `/metrics`. Without the budget a round would make six requests; without the entry cap
    /// the big job would list 25.
    #[tokio::test]
    async fn the_request_budget_and_the_entry_cap_cut_and_count_and_the_rounds_go_on() {
        let base = tempfile::tempdir().unwrap();
        let app = Arc::new(AppState::new(crate::state::State::new(crate::stats::WindowSpec {
            window_ms: 60_000,
            slots: 6,
        })));
        let jobs: Vec<String> = (0..5).map(|i| format!("{i:032x}")).collect();
        for (i, job) in jobs.iter().enumerate() {
            let files = if i == 0 { 25 } else { 2 };
            std::fs::create_dir_all(base.path().join(job).join("chk-1")).unwrap();
            for f in 0..files {
                std::fs::write(base.path().join(job).join(format!("chk-1/f{f}")), b"x").unwrap();
            }
            add_job(&app, job, &format!("job{i}"), base.path().to_str().unwrap());
        }
        let config = ClusterConfig { name: "c".into(), ..ClusterConfig::default() };
        let mut source = StorageSource::new(config, app.clone());
        let s = StorageConfig { max_requests_per_round: 2, max_entries_per_job: 10, ..Default::default() };
        let mut listed = std::collections::BTreeSet::new();
        let (mut rounds, mut big_listed) = (0, 0);
        while listed.len() < jobs.len() {
            rounds += 1;
            assert!(rounds <= 5, "every job listed within a few rounds: {listed:?}");
            let round = source.round(&s).await.unwrap();
            assert_eq!(round.requests, 2, "the budget");
            assert!(round.requests_cut >= 4, "three jobs and the base left: {}", round.requests_cut);
            for j in &round.jobs {
                let cut = j.job_id == jobs[0];
                big_listed += u32::from(cut);
                assert_eq!((j.objects, j.truncated), (if cut { 10 } else { 2 }, cut), "{}", j.job_id);
                listed.insert(j.job_id.clone());
            }
            app.apply(&Observation::Storage(round));
        }
        assert_eq!(rounds, 3, "two jobs a round, in turn");
        let text = crate::outputs::export::encode_text(&crate::outputs::export::render(
            &app.state.read(),
            &Default::default(),
            Timestamp::now(),
        ));
        let line = |name: &str| text.lines().find(|l| l.starts_with(name)).map(str::to_string);
        assert_eq!(
            line("checkpoint_sentinel_storage_requests_total{cluster=\"c\",outcome=\"made\"}").as_deref(),
            Some("checkpoint_sentinel_storage_requests_total{cluster=\"c\",outcome=\"made\"} 6")
        );
        assert!(
            line("checkpoint_sentinel_storage_requests_total{cluster=\"c\",outcome=\"cut\"}").is_some(),
            "{text}"
        );
        assert_eq!(
            line("checkpoint_sentinel_storage_entries_cut_total{cluster=\"c\"}"),
            Some(format!("checkpoint_sentinel_storage_entries_cut_total{{cluster=\"c\"}} {big_listed}")),
            "once each time the big job was listed"
        );
    }
}
