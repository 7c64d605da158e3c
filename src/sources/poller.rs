//! The REST poller: one task per cluster, turning Flink's answers into observations.
//!
//! Each round fetches `/overview` and `/jobs/overview`, then per watched job its
//! `/checkpoints` (and `/checkpoints/config` plus `/jobs/:id` on first sight or after a state
//! change). Details of a finished checkpoint are fetched once, for ids the state has not counted.
//! Failures are observations too: they become error metrics and log lines, and the loop goes on
//! with exponential back-off while the JobManager is unreachable.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use regex::Regex;
use tokio::sync::Semaphore;

use crate::app::AppState;
use crate::config::{ClusterConfig, Pattern};
use crate::observe::{
    CheckpointStatus, ClusterPoll, Deferred, EventSeverity, FinishedCheckpoint, JobKey, JobPoll, JobStatus,
    JobSummary, LogEvent, LogKind, Observation,
};
use crate::sources::flink::client::{ClientBuildError, FetchError, FlinkClient};
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;

/// Longest wait between rounds while a cluster is failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The alignment shadow's load (vertex rates, busy and backpressure) is re-fetched for a job
/// every this many poll rounds (and on first sight, and after a state change).
pub const LOAD_EVERY_POLLS: u64 = 30;
/// A job's load is fetched at least once in this many rounds however many jobs the cluster
/// runs: the loads of a cluster are spread over the rounds (each costs 3 requests per vertex),
/// as few per round as that allows (see [`load_fetches_per_round`]).
pub const LOAD_REFRESH_WITHIN_ROUNDS: usize = 120;

/// How many jobs have their load fetched in one round: one for up to
/// [`LOAD_REFRESH_WITHIN_ROUNDS`] jobs (a sidecar's job every [`LOAD_EVERY_POLLS`] rounds), more
/// for a cluster with many, so that 1,000 jobs are not 1,000 rounds (2.8 h at 10 s) apart.
pub fn load_fetches_per_round(jobs: usize) -> usize {
    jobs.div_ceil(LOAD_REFRESH_WITHIN_ROUNDS).max(1)
}
/// A job whose subtasks had no TaskManager at a load fetch (still deploying) is fetched again
/// after this many rounds instead of [`LOAD_EVERY_POLLS`], at most [`LOCATION_RETRIES`] times.
const LOCATION_RETRY_POLLS: u64 = 2;
const LOCATION_RETRIES: u8 = 5;
/// Per-subtask metrics are asked for at most this many subtasks of a vertex.
pub const MAX_LOAD_SUBTASKS: u32 = 32;

/// Jobs in flight per permit of `max_concurrent_requests`: a job's requests come one after the
/// other (listing, details, subtasks), so with only as many jobs as permits some permits idle
/// while a job parses an answer or moves to its next request. Requests in flight stay bounded
/// by the semaphore; two jobs per permit keep it busy.
const JOBS_PER_REQUEST_SLOT: usize = 2;

/// A job that reached a terminal state is polled until its checkpoint counts stop changing
/// and nothing is in progress, at most this many times: Flink's REST answers from a cache, so
/// the first polls after a cancel may still show the snapshot from before it (the last
/// checkpoints, and the one the cancel failed, come a poll or two later).
pub const MAX_FINAL_POLLS: u8 = 12;

/// How long an ended job's counts must stay the same before they are taken as final: longer
/// than Flink's REST cache keeps an answer (`web.refresh-interval`, 3 s by default), so that
/// two polls of one cached, pre-cancel answer are not taken for settled counts. A live e2e
/// with a 1 s poll lost the last checkpoint that way.
pub const FINAL_SETTLE_MS: u64 = 4_000;

/// Whether the polls of an ended job are over: `previous` are the counts (completed, failed,
/// in progress) of its previous poll in a terminal state, `current` this poll's, and
/// `unchanged_ms` how long the counts have been `current` (0 when they just changed).
pub fn final_polls_done(
    previous: Option<(u64, u64, u64)>,
    current: (u64, u64, u64),
    polls: u8,
    unchanged_ms: u64,
) -> bool {
    polls >= MAX_FINAL_POLLS
        || (current.2 == 0 && previous == Some(current) && unchanged_ms >= FINAL_SETTLE_MS)
}

/// What the poller remembers about a job between rounds (not durable: it is re-fetched).
struct JobCache {
    state: JobStatus,
    /// `None`: checkpointing is disabled for this job.
    settings: Option<Option<crate::observe::CheckpointSettings>>,
    /// By vertex id, in Flink's order of a checkpoint's `tasks` (sorted).
    vertex_names: BTreeMap<String, String>,
    final_poll_done: bool,
    /// Polls made since the job was seen in a terminal state, and the counts of the last one.
    final_polls: u8,
    final_counts: Option<(u64, u64, u64)>,
    /// When the first terminal poll with `final_counts` was made.
    final_counts_since: Timestamp,
    /// The whole checkpoint configuration read at the last refresh, until applied (after the
    /// job's poll, which creates the job in `State`).
    configuration: Option<Box<crate::observe::CheckpointConfiguration>>,
    /// The job graph from `/jobs/:id` (for the alignment shadow).
    topology: Option<Arc<crate::observe::JobTopology>>,
    /// The round from which the job's load is due again.
    load_due: u64,
    /// Early load fetches left for a job whose subtasks had no TaskManager yet (still being
    /// deployed), so their locations do not wait [`LOAD_EVERY_POLLS`] rounds.
    location_retries: u8,
    /// In-progress checkpoints whose pending subtasks were reported already.
    reported_pending: std::collections::BTreeSet<u64>,
    /// The restore being timed (Flink's restore time), how often its subtasks were fetched, and
    /// the round from which they are due again.
    restore: Option<(Timestamp, u32, u64)>,
    /// Finished checkpoints Flink listed whose details were left for a later round (over
    /// `max_history_per_poll`), as its history told them: a deferred one that Flink no longer
    /// lists is counted from this, without its per-subtask details, instead of going by
    /// unobserved. At most [`MAX_DEFERRED_REMEMBERED`], the newest.
    deferred: std::collections::BTreeMap<u64, FinishedCheckpoint>,
    /// When its next checkpoint can come at the earliest, from its last statistics (`None`:
    /// one was in progress, or it cannot be told), and the rounds skipped since
    /// ([`stats_due`]).
    next_checkpoint_at: Option<Timestamp>,
    skipped_rounds: u8,
}

/// A cluster with more watched jobs than this polls each job's checkpoint statistics only when
/// they can have changed ([`stats_due`]); a smaller one polls every job every round.
pub const ADAPTIVE_ABOVE_JOBS: usize = 1_000;

/// Whatever the schedule says, a job's statistics are polled at least every this many rounds
/// (a savepoint or a manually triggered checkpoint shows within a minute at a 10 s poll; the
/// log tailer reports failures at once either way).
pub const MAX_SKIPPED_ROUNDS: u8 = 5;

/// Whether a job's checkpoint statistics (`/jobs/:id/checkpoints`) are fetched this round, in
/// a cluster with more than [`ADAPTIVE_ABOVE_JOBS`] jobs: always while a checkpoint was in
/// progress, and otherwise once the next checkpoint can have been triggered by the next round
/// (`next_checkpoint_at`, Flink's interval and min-pause after the newest one) or after
/// [`MAX_SKIPPED_ROUNDS`]. A job checkpointing every 60 s polled every 10 s is asked 3 times a
/// minute instead of 6: at 10,000 jobs half of a round's requests (issue 31).
pub fn stats_due(
    next_checkpoint_at: Option<Timestamp>,
    skipped_rounds: u8,
    now: Timestamp,
    poll_interval_ms: u64,
) -> bool {
    match next_checkpoint_at {
        None => true,
        Some(at) => {
            skipped_rounds >= MAX_SKIPPED_ROUNDS || now.millis() + poll_interval_ms as i64 >= at.millis()
        }
    }
}

/// When the next checkpoint can come at the earliest after a poll that saw `history` (newest
/// first, as Flink lists it): `None` while one is in progress or without an interval.
fn next_checkpoint_at(
    history: &[dto::CheckpointStatistics],
    settings: &crate::observe::CheckpointSettings,
) -> Option<Timestamp> {
    let interval = settings.interval_ms?;
    if history.iter().any(|cp| convert::status(cp).is_none()) {
        return None;
    }
    let newest = history.iter().max_by_key(|cp| cp.trigger_timestamp.unwrap_or(0))?;
    let triggered = newest.trigger_timestamp?;
    let ended = newest.latest_ack_timestamp.filter(|&t| t > 0).unwrap_or(triggered);
    Some(Timestamp((triggered + interval as i64).max(ended + settings.min_pause_ms as i64)))
}

/// How many deferred checkpoints per job the poller remembers from Flink's history. Beyond
/// this (a first poll of a job whose history holds thousands), the oldest are counted from
/// Flink's counts once it forgets them (unobserved), as before there was a deferral.
pub const MAX_DEFERRED_REMEMBERED: usize = 1024;

/// A restore's subtasks are fetched again after at most this many rounds while not all of
/// them run: Flink's timestamps say when each entered RUNNING, so a later look loses no
/// precision, and a restore of hours costs a few requests per minute, not per poll.
const RESTORE_RECHECK_MAX_ROUNDS: u64 = 30;

/// A job's unseen history entries split by [`Poller::defer_beyond_limit`].
struct Backlog {
    /// Ids whose details are fetched this round.
    fetch_now: Vec<u64>,
    /// Deferred checkpoints Flink no longer lists, as its history told them.
    forgotten: Vec<FinishedCheckpoint>,
    /// Listed ones left for a later round.
    deferred: Deferred,
}

/// Polls one cluster.
pub struct Poller {
    config: ClusterConfig,
    client: FlinkClient,
    include: Vec<Regex>,
    exclude: Vec<Regex>,
    requests: Semaphore,
    app: Arc<AppState>,
    jobs: HashMap<String, JobCache>,
    rounds: u64,
    /// The JobManager's configuration (`/jobmanager/config`, for the advisor), fetched once per
    /// round however many jobs are new in it: per job, the first round of 10,000 jobs asked
    /// for the same answer 10,000 times.
    cluster_options: tokio::sync::OnceCell<Vec<dto::ConfigEntry>>,
    /// Whether this round polls statistics only where due ([`stats_due`]): the cluster has
    /// more than [`ADAPTIVE_ABOVE_JOBS`] watched jobs.
    adaptive: bool,
}

impl Poller {
    /// A poller for `config` that reports into `app`.
    pub fn new(config: ClusterConfig, app: Arc<AppState>) -> Result<Self, ClientBuildError> {
        let client = FlinkClient::new(&config)?;
        // Compiled when the config was read (and a config with a bad one refused); a pattern
        // that did not compile fails the poller rather than widening or narrowing what it watches.
        let compiled = |key: &str, ps: &[Pattern]| {
            ps.iter()
                .map(|p| {
                    p.regex().cloned().map_err(|e| {
                        ClientBuildError::invalid(
                            &config.name,
                            format!("{key}: {:?}: expected a regular expression ({e})", p.as_str()),
                        )
                    })
                })
                .collect::<Result<Vec<Regex>, _>>()
        };
        let include = compiled("include_jobs", &config.include_jobs)?;
        let exclude = compiled("exclude_jobs", &config.exclude_jobs)?;
        Ok(Poller {
            include,
            exclude,
            requests: Semaphore::new(config.max_concurrent_requests),
            client,
            config,
            app,
            jobs: HashMap::new(),
            rounds: 0,
            cluster_options: tokio::sync::OnceCell::new(),
            adaptive: false,
        })
    }

    /// Polls forever: a round every `poll_interval`, backing off while rounds fail.
    pub async fn run(mut self) {
        let mut failures: u32 = 0;
        loop {
            let started = Instant::now();
            let reachable = self.round().await;
            failures = if reachable { 0 } else { failures.saturating_add(1) };
            let interval = self.config.poll_interval;
            let wait = if failures == 0 {
                interval
            } else {
                let backoff = interval.saturating_mul(1u32 << failures.min(6));
                backoff.min(MAX_BACKOFF.max(interval))
            };
            tokio::time::sleep(wait.saturating_sub(started.elapsed())).await;
        }
    }

    /// One poll round; returns whether the JobManager answered.
    pub async fn round(&mut self) -> bool {
        let started = Instant::now();
        self.cluster_options = tokio::sync::OnceCell::new();
        let mut errors = Vec::new();
        let cluster = self.config.name.clone();
        let report = |errors: Vec<&'static str>,
                      reachable: bool,
                      version: Option<String>,
                      jobs: Option<Vec<JobSummary>>| {
            Observation::ClusterPolled(ClusterPoll {
                cluster: cluster.clone(),
                duration_ms: started.elapsed().as_millis() as u64,
                flink_version: version,
                jobs,
                errors,
                reachable,
            })
        };
        let overview = match self.fetch(self.client.overview()).await {
            Ok(o) => o,
            Err(e) => {
                self.log_error(&e);
                errors.push(e.kind());
                self.app.apply(&report(errors, false, None, None));
                return false;
            }
        };
        let listed = match self.fetch(self.client.jobs_overview()).await {
            Ok(jobs) => jobs.jobs,
            Err(e) => {
                self.log_error(&e);
                errors.push(e.kind());
                self.app.apply(&report(errors, true, overview.flink_version, None));
                return true;
            }
        };
        let mut watched: Vec<dto::JobOverview> = listed.into_iter().filter(|j| self.watches(j)).collect();
        // At most max_jobs, running ones first (a stable sort keeps Flink's order otherwise).
        if watched.len() > self.config.max_jobs {
            watched.sort_by_key(|j| convert::job_status(j.state.as_deref()) != JobStatus::Running);
            let cut = watched.len() - self.config.max_jobs;
            watched.truncate(self.config.max_jobs);
            self.app.count_cut(&self.config.name, "jobs", cut as u64);
        }
        let watched_ids: HashSet<&str> = watched.iter().map(|j| j.jid.as_str()).collect();
        self.jobs.retain(|id, _| watched_ids.contains(id.as_str()));
        self.adaptive = watched.len() > ADAPTIVE_ABOVE_JOBS;
        // Jobs are polled concurrently (at most `max_concurrent_requests` of them, and as many
        // requests in flight): each job's future owns its cache entry for the round, applies its
        // own observations in order, and no two futures touch the same job, so what one job
        // counted is never seen half-way by another. Different jobs interleave.
        let mut slots: Vec<Option<JobCache>> = watched.iter().map(|j| self.jobs.remove(&j.jid)).collect();
        let outcomes: Vec<(usize, Result<Option<JobSummary>, FetchError>)> = {
            let this = &*self;
            let polls = watched.iter().zip(slots.iter_mut()).enumerate().map(|(i, (job, slot))| async move {
                // Boxed: all of a round's futures are made up front (below), and unboxed each
                // carried `poll_job`'s 3.5 KB state from the start (36 MB at 10,000 jobs, held
                // all round); boxed it exists only while the job is polled.
                let outcome = match Box::pin(this.poll_job(job, slot)).await {
                    Ok(Some(poll)) => {
                        let summary = JobSummary {
                            job_id: job.jid.clone(),
                            name: poll.job_name.clone(),
                            state: poll.job_state.clone(),
                        };
                        this.app.apply(&Observation::JobPolled(poll));
                        if let Some(configuration) = slot.as_mut().and_then(|c| c.configuration.take()) {
                            let key = JobKey { cluster: this.config.name.clone(), job_id: job.jid.clone() };
                            this.app.apply(&Observation::JobConfiguration(key, configuration));
                        }
                        Ok(Some(summary))
                    }
                    Ok(None) => Ok(None),
                    Err(e) => Err(e),
                };
                (i, outcome)
            });
            // Collected first: a `Map` over the closure in the stream trips the compiler's
            // higher-ranked `Send` check when the poller's task is spawned.
            let polls: Vec<_> = polls.collect();
            futures_util::stream::iter(polls)
                .buffer_unordered(self.config.max_concurrent_requests.max(1) * JOBS_PER_REQUEST_SLOT)
                .collect()
                .await
        };
        for (job, slot) in watched.iter().zip(slots) {
            if let Some(cache) = slot {
                self.jobs.insert(job.jid.clone(), cache);
            }
        }
        let mut outcomes = outcomes;
        outcomes.sort_by_key(|(i, _)| *i);
        let mut summaries = Vec::with_capacity(watched.len());
        for ((_, outcome), job) in outcomes.into_iter().zip(&watched) {
            let listed = || JobSummary {
                job_id: job.jid.clone(),
                name: job.name.clone().unwrap_or_default(),
                state: convert::job_status(job.state.as_deref()),
            };
            match outcome {
                Ok(Some(summary)) => summaries.push(summary),
                // A finished job that was polled one last time (or one without checkpointing) stays
                // listed while the JobManager lists it, so its final numbers stay exported.
                Ok(None) => summaries.push(listed()),
                Err(e) => {
                    self.log_error(&e);
                    errors.push(e.kind());
                    // Keep the job listed: one failed request must not drop its series.
                    summaries.push(listed());
                }
            }
        }
        self.fetch_due_loads(&mut errors).await;
        self.rounds += 1;
        self.app.apply(&report(errors, true, overview.flink_version, Some(summaries)));
        true
    }

    fn watches(&self, job: &dto::JobOverview) -> bool {
        let name = job.name.as_deref().unwrap_or("");
        (self.include.is_empty() || self.include.iter().any(|r| r.is_match(name)))
            && !self.exclude.iter().any(|r| r.is_match(name))
            // A cluster whose jobs are shared out between replicas: only the jobs this one owns.
            && self.config.job_shard.is_none_or(|s| s.owns_job(&self.config.name, &job.jid))
    }

    async fn fetch<T>(&self, request: impl Future<Output = Result<T, FetchError>>) -> Result<T, FetchError> {
        let _permit = self.requests.acquire().await.expect("the semaphore is never closed");
        let answer = request.await;
        if let Err(FetchError::TooLarge { .. }) = &answer {
            self.app.count_cut(&self.config.name, "response_bodies", 1);
        }
        answer
    }

    fn log_error(&self, error: &FetchError) {
        tracing::warn!(cluster = %self.config.name, kind = error.kind(), "{error}");
    }

    /// Polls one job; `Ok(None)` when it does not checkpoint or needs no more polls. `slot` is
    /// what the poller remembers of the job (taken out of `jobs` for the round, so that jobs can
    /// be polled concurrently); its observations of pending subtasks are applied here, in order.
    async fn poll_job(
        &self,
        job: &dto::JobOverview,
        slot: &mut Option<JobCache>,
    ) -> Result<Option<JobPoll>, FetchError> {
        let job_state = convert::job_status(job.state.as_deref());
        let terminal = job_state.has_ended();
        let cached = slot.as_ref();
        if cached.is_some_and(|c| c.final_poll_done && terminal) {
            return Ok(None);
        }
        // Re-read the configuration on first sight and whenever the job changes state
        // (a restart may come with a new configuration), and the graph until it has one: right
        // after a submit Flink may list the job RUNNING while `/jobs/:id` still answers the
        // initializing job without vertices (seen live on 1.20.5), and without this the job's
        // operators would be named by their vertex ids for good.
        let refresh =
            cached.is_none_or(|c| c.state != job_state || c.settings.is_none() || c.vertex_names.is_empty());
        if refresh {
            let config = self.fetch(self.client.checkpoint_config(&job.jid)).await?;
            let details = self.fetch(self.client.job(&job.jid)).await?;
            let vertex_names = details
                .vertices
                .iter()
                .map(|v| (v.id.clone(), v.name.clone().unwrap_or_else(|| v.id.clone())))
                .collect();
            // For the advisor, on the same rare refresh: the restart strategy and job parameters,
            // and the cluster's options. Either may be refused (or cut) without harm.
            let configuration = match &config {
                Some(c) => {
                    let job_config = self.fetch(self.client.job_config(&job.jid)).await.ok().flatten();
                    let cluster_options = self
                        .cluster_options
                        .get_or_init(|| async {
                            self.fetch(self.client.jobmanager_config()).await.unwrap_or_default()
                        })
                        .await;
                    Some(Box::new(convert::configuration(c, job_config.as_ref(), cluster_options, None)))
                }
                None => None,
            };
            if config.is_none() {
                tracing::info!(cluster = %self.config.name, job = %job.jid, "checkpointing is disabled for this job; not watching it");
            }
            let deferred = slot.take().map(|c| c.deferred).unwrap_or_default();
            *slot = Some(JobCache {
                state: job_state.clone(),
                settings: Some(config.as_ref().map(convert::settings)),
                configuration,
                vertex_names,
                final_poll_done: false,
                final_polls: 0,
                final_counts: None,
                final_counts_since: Timestamp(0),
                topology: convert::topology(&details).map(Arc::new),
                load_due: self.rounds,
                location_retries: LOCATION_RETRIES,
                reported_pending: Default::default(),
                restore: None,
                deferred,
                next_checkpoint_at: None,
                skipped_rounds: 0,
            });
        }
        let cache = slot.as_ref().expect("inserted above");
        let Some(Some(settings)) = cache.settings.clone() else {
            return Ok(None);
        };
        if self.adaptive && !refresh && !terminal {
            let cache = slot.as_mut().expect("inserted above");
            let interval_ms = self.config.poll_interval.as_millis() as u64;
            if !stats_due(cache.next_checkpoint_at, cache.skipped_rounds, Timestamp::now(), interval_ms) {
                cache.skipped_rounds = cache.skipped_rounds.saturating_add(1);
                return Ok(None);
            }
        }
        let stats = self.fetch(self.client.checkpoints(&job.jid)).await?;
        if let Some(cache) = slot.as_mut() {
            cache.next_checkpoint_at = next_checkpoint_at(&stats.history, &settings);
            cache.skipped_rounds = 0;
        }
        let polled_at = Timestamp::now();
        let finished_ids: Vec<(u64, Timestamp)> = stats
            .history
            .iter()
            .filter(|cp| convert::status(cp).is_some())
            .map(|cp| (cp.id, Timestamp(cp.trigger_timestamp.unwrap_or(0))))
            .collect();
        let unseen = {
            let state = self.app.state.read().unwrap_or_else(|e| e.into_inner());
            state.unseen_entries(&self.config.name, &job.jid, &finished_ids)
        };
        let cache = slot.as_mut().expect("inserted above");
        let backlog = self.defer_beyond_limit(cache, &stats.history, unseen);
        let (unseen, mut finished) = (backlog.fetch_now, backlog.forgotten);
        // The details of the new checkpoints are fetched concurrently (the semaphore bounds the
        // requests) and taken in the order of `unseen`.
        let known = &slot.as_ref().expect("inserted above").vertex_names;
        let fetched = futures_util::future::join_all(
            unseen
                .into_iter()
                .map(|id| async move { (id, self.checkpoint_vertices(&job.jid, id, known).await) }),
        )
        .await;
        for (id, vertices) in fetched {
            let Some(entry) = stats.history.iter().find(|cp| cp.id == id) else { continue };
            let vertices = match vertices {
                Ok(v) => v,
                Err(e) => {
                    // Count the checkpoint anyway, without its per-subtask phases.
                    tracing::warn!(cluster = %self.config.name, job = %job.jid, checkpoint = id, "details unavailable: {e}");
                    Vec::new()
                }
            };
            let cache = slot.as_ref().expect("inserted above");
            let views: Vec<convert::VertexDetails<'_>> = vertices
                .iter()
                .map(|(vid, details)| convert::VertexDetails {
                    vertex_id: vid,
                    name: cache.vertex_names.get(vid).map_or(vid.as_str(), |n| n.as_str()),
                    details,
                })
                .collect();
            finished.extend(convert::finished(entry, &views));
        }
        if let Some(timeout) = settings.timeout_ms {
            let cache = slot.as_mut().expect("inserted above");
            let events = self.pending_subtasks(cache, &job.jid, &stats, timeout, polled_at).await;
            if !events.is_empty() {
                self.app.apply(&Observation::LogEvents(events));
            }
        }
        let restored =
            stats.latest.as_ref().and_then(|l| l.restored.as_ref()).and_then(convert::restored_from);
        if let Some(restored) = restored.filter(|_| !terminal) {
            let due = {
                let state = self.app.state.read().unwrap_or_else(|e| e.into_inner());
                state.restore_due(&self.config.name, &job.jid, restored.restored_at)
            };
            let cache = slot.as_mut().expect("inserted above");
            if cache.restore.is_none_or(|(at, _, _)| at != restored.restored_at) {
                cache.restore = Some((restored.restored_at, 0, self.rounds));
            }
            if let Some((at, checks, _)) = cache.restore.filter(|(_, _, next)| due && *next <= self.rounds) {
                let backoff = (1u64 << checks.min(6)).min(RESTORE_RECHECK_MAX_ROUNDS);
                cache.restore = Some((at, checks.saturating_add(1), self.rounds + backoff));
                let report = self.restore_report(&job.jid, restored).await;
                self.app.apply(&Observation::Restore(report));
            }
        }
        let latest_restore = stats
            .latest
            .as_ref()
            .and_then(|l| l.restored.as_ref())
            .and_then(|r| r.restore_timestamp.map(|at| (r.id, Timestamp(at))));
        let counts = stats.counts.as_ref().map(convert::counts).unwrap_or_default();
        if let Some(c) = slot.as_mut().filter(|_| terminal) {
            let now = (counts.completed, counts.failed, counts.in_progress);
            c.final_polls = c.final_polls.saturating_add(1);
            if c.final_counts != Some(now) {
                c.final_counts_since = polled_at;
            }
            let unchanged_ms = polled_at.since(c.final_counts_since);
            c.final_poll_done = final_polls_done(c.final_counts, now, c.final_polls, unchanged_ms);
            c.final_counts = Some(now);
        }
        Ok(Some(JobPoll {
            key: JobKey { cluster: self.config.name.clone(), job_id: job.jid.clone() },
            job_name: job.name.clone().unwrap_or_default(),
            job_state,
            polled_at,
            counts,
            settings: Some(settings),
            in_progress: convert::in_progress(&stats.history),
            finished,
            latest_restore,
            deferred: backlog.deferred,
        }))
    }

    /// Which of a job's unseen history entries get their details this round: the newest
    /// `max_history_per_poll` (before, 10,000 entries were 30,000 requests in one round). The
    /// others wait for later rounds while Flink lists them (counted in the poll's `deferred`,
    /// so not as unobserved); the ones Flink forgot before their turn came are counted from
    /// what its history said of them, without per-subtask details.
    fn defer_beyond_limit(
        &self,
        cache: &mut JobCache,
        history: &[dto::CheckpointStatistics],
        mut unseen: Vec<u64>,
    ) -> Backlog {
        let listed: HashMap<u64, &dto::CheckpointStatistics> = history.iter().map(|cp| (cp.id, cp)).collect();
        let remembered = std::mem::take(&mut cache.deferred);
        let forgotten: Vec<FinishedCheckpoint> =
            remembered.into_values().filter(|cp| !listed.contains_key(&cp.id)).collect();
        let mut deferred = Deferred::default();
        if unseen.len() > self.config.max_history_per_poll {
            unseen.sort_unstable_by(|a, b| b.cmp(a));
            let later = unseen.split_off(self.config.max_history_per_poll);
            self.app.count_cut(&self.config.name, "history_entries", later.len() as u64);
            for (rank, id) in later.iter().enumerate() {
                let Some(checkpoint) = listed.get(id).and_then(|e| convert::finished(e, &[])) else {
                    continue;
                };
                match checkpoint.status {
                    CheckpointStatus::Completed => deferred.completed += 1,
                    CheckpointStatus::Failed => deferred.failed += 1,
                }
                if rank < MAX_DEFERRED_REMEMBERED {
                    cache.deferred.insert(*id, checkpoint);
                }
            }
        }
        Backlog { fetch_now: unseen, forgotten, deferred }
    }

    /// A job's latest restore with, when they answer, its `RESTARTING` time and every subtask's
    /// `subtasktimes` (one request per vertex, concurrently).
    async fn restore_report(
        &self,
        job_id: &str,
        restored: crate::observe::RestoredFrom,
    ) -> crate::observe::RestoreReport {
        let key = JobKey { cluster: self.config.name.clone(), job_id: job_id.to_string() };
        let details = match self.fetch(self.client.job(job_id)).await {
            Ok(d) => d,
            Err(e) => {
                self.log_error(&e);
                return crate::observe::RestoreReport { key, restored, restarting_at: None, subtasks: None };
            }
        };
        let restarting_at = details.timestamps.get("RESTARTING").copied().filter(|&t| t > 0).map(Timestamp);
        let answers = futures_util::future::join_all(
            details.vertices.iter().map(|v| self.fetch(self.client.subtask_times(job_id, &v.id))),
        )
        .await;
        let mut subtasks = Some(Vec::new());
        for (vertex, answer) in details.vertices.iter().zip(answers) {
            match answer {
                Ok(Some(times)) => {
                    let name = vertex.name.as_deref().unwrap_or(&vertex.id);
                    if let Some(all) = subtasks.as_mut() {
                        all.extend(convert::subtask_starts(name, &times));
                    }
                }
                Ok(None) => subtasks = None,
                Err(e) => {
                    self.log_error(&e);
                    subtasks = None;
                }
            }
        }
        crate::observe::RestoreReport { key, restored, restarting_at, subtasks }
    }

    /// Names the subtasks that hold an in-progress checkpoint up: once a checkpoint has been
    /// pending for `pending_subtask_after` of its timeout, its details are fetched (once) and every
    /// subtask that has not acknowledged becomes a `barrier_missing` event with source `rest`.
    async fn pending_subtasks(
        &self,
        cache: &mut JobCache,
        job_id: &str,
        stats: &dto::CheckpointingStatistics,
        timeout_ms: u64,
        now: Timestamp,
    ) -> Vec<LogEvent> {
        let threshold = (timeout_ms as f64 * self.config.pending_subtask_after) as u64;
        let due: Vec<(u64, Timestamp)> = convert::in_progress(&stats.history)
            .into_iter()
            .filter(|cp| now.since(cp.triggered_at) >= threshold && cp.num_acknowledged < cp.num_subtasks)
            .filter(|cp| !cache.reported_pending.contains(&cp.id))
            .map(|cp| (cp.id, cp.triggered_at))
            .take(self.config.max_history_per_poll)
            .collect();
        let mut events = Vec::new();
        let topology = cache.topology.clone();
        let known = cache.vertex_names.clone();
        for (id, triggered_at) in due {
            let vertices = match self.checkpoint_vertices(job_id, id, &known).await {
                Ok(v) => v,
                Err(e) => {
                    self.log_error(&e);
                    continue;
                }
            };
            let waited = now.since(triggered_at);
            let done: HashSet<&str> = vertices
                .iter()
                .filter(|(_, d)| d.subtasks.iter().all(|st| st.is_completed()))
                .map(|(vid, _)| vid.as_str())
                .collect();
            let mut pending_by_vertex = Vec::new();
            let mut undecided = false;
            for (vid, details) in &vertices {
                let pending: Vec<u32> =
                    details.subtasks.iter().filter(|st| !st.is_completed()).map(|st| st.index).collect();
                if pending.is_empty() {
                    continue;
                }
                let phase =
                    topology.as_ref().map_or(PendingPhase::Barriers, |t| pending_phase(t, vid, &done));
                // Waiting behind an upstream subtask that is itself pending: that one is named.
                if phase == PendingPhase::BehindUpstream {
                    continue;
                }
                // Flink's checkpoint statistics lag the acknowledgements (a cache of a few
                // seconds): a consumer still shown pending may have acknowledged. Look again at
                // the next poll, until 3/4 of the timeout.
                if phase == PendingPhase::Barriers
                    && topology.is_some()
                    && (waited as f64) < 0.75 * timeout_ms as f64
                {
                    undecided = true;
                    continue;
                }
                pending_by_vertex.push((vid.clone(), pending, phase));
            }
            if undecided {
                continue;
            }
            let mut hosts: HashMap<String, Vec<dto::VertexSubtask>> = HashMap::new();
            for (vid, pending, phase) in pending_by_vertex {
                if !hosts.contains_key(&vid) {
                    let subtasks =
                        self.fetch(self.client.vertex(job_id, &vid)).await.ok().flatten().map(|v| v.subtasks);
                    hosts.insert(vid.clone(), subtasks.unwrap_or_default());
                }
                let name = cache.vertex_names.get(&vid).cloned().unwrap_or_else(|| vid.clone());
                for index in pending {
                    let tm =
                        hosts[&vid].iter().find(|s| s.subtask == index).and_then(convert::taskmanager_of);
                    let (kind, message) = match phase {
                        PendingPhase::Snapshot => (
                            LogKind::SnapshotSlow,
                            format!(
                                "{name} (subtask {index}) has not acknowledged checkpoint {id} after {waited} ms (timeout {timeout_ms} ms) although every subtask downstream of it has: it passed the barrier on and is in its synchronous or asynchronous snapshot, not waiting for barriers"
                            ),
                        ),
                        PendingPhase::Unknown => (
                            LogKind::SubtaskPending,
                            format!(
                                "{name} (subtask {index}) has not acknowledged checkpoint {id} after {waited} ms (timeout {timeout_ms} ms); its inputs sent their barriers, and with no subtask downstream of it nothing tells whether it is still aligning or in its snapshot"
                            ),
                        ),
                        _ => (
                            LogKind::BarrierMissing,
                            format!(
                                "{name} (subtask {index}) has not acknowledged checkpoint {id} after {waited} ms (timeout {timeout_ms} ms), and the subtasks downstream of it are still waiting for its barrier"
                            ),
                        ),
                    };
                    let mut event = LogEvent::new(kind, EventSeverity::Warning, message);
                    event.cluster = self.config.name.clone();
                    event.source = "rest";
                    event.job_id = Some(job_id.to_string());
                    event.checkpoint_id = Some(id);
                    event.task = Some(name.clone());
                    event.subtask = Some(index);
                    event.taskmanager = tm;
                    event.duration_ms = Some(waited);
                    event.detail = Some(vid.clone());
                    events.push(event);
                }
            }
            cache.reported_pending.insert(id);
            while cache.reported_pending.len() > 64 {
                cache.reported_pending.pop_first();
            }
        }
        events
    }

    /// Fetches the graph load of at most [`load_fetches_per_round`] jobs whose load is
    /// due, and reports it for the alignment shadow.
    async fn fetch_due_loads(&mut self, errors: &mut Vec<&'static str>) {
        let rounds = self.rounds;
        let mut due: Vec<(u64, String)> = self
            .jobs
            .iter()
            .filter(|(_, c)| c.topology.is_some() && !c.final_poll_done && c.load_due <= rounds)
            .map(|(id, c)| (c.load_due, id.clone()))
            .collect();
        due.sort();
        let per_round = load_fetches_per_round(self.jobs.len());
        let mut fetches = Vec::new();
        for (_, job_id) in due.into_iter().take(per_round) {
            let Some(c) = self.jobs.get_mut(&job_id) else { continue };
            c.load_due = rounds + LOAD_EVERY_POLLS;
            let Some(topology) = c.topology.clone() else { continue };
            fetches.push((job_id, topology));
        }
        // The due jobs' loads are fetched concurrently (requests bounded by the semaphore).
        let loads = {
            let this = &*self;
            let requests: Vec<_> = fetches
                .into_iter()
                .map(|(job_id, topology)| async move {
                    let mut errors = Vec::new();
                    let load = this.job_load(&job_id, &topology, &mut errors).await;
                    (job_id, topology, load, errors)
                })
                .collect();
            futures_util::future::join_all(requests).await
        };
        for (job_id, topology, load, load_errors) in loads {
            errors.extend(load_errors);
            match load {
                Ok(vertices) => {
                    let located = vertices.iter().any(|v| v.taskmanagers.iter().any(Option::is_some));
                    if let Some(c) = self.jobs.get_mut(&job_id).filter(|c| !located && c.location_retries > 0)
                    {
                        c.location_retries -= 1;
                        c.load_due = rounds + LOCATION_RETRY_POLLS;
                    }
                    self.app.apply(&Observation::JobLoad(crate::observe::JobLoadReport {
                        key: JobKey { cluster: self.config.name.clone(), job_id },
                        measured_at: Timestamp::now(),
                        topology: Some(topology),
                        vertices,
                    }));
                }
                Err(e) => {
                    self.log_error(&e);
                    errors.push(e.kind());
                }
            }
        }
    }

    /// Per vertex: its subtasks' I/O counters and locations, backpressure and rates; a vertex
    /// whose endpoints are unknown (404) is left out. One endpoint answering an error status
    /// leaves only its part out (counted in `errors`): Flink answers 500 to `/backpressure` of
    /// a young job whose metrics are not collected yet, and that must not cost the rest (seen
    /// live: the subtasks' TaskManagers were lost with it). No connection, a timeout or a
    /// garbled answer still ends the fetch.
    async fn job_load(
        &self,
        job_id: &str,
        topology: &crate::observe::JobTopology,
        errors: &mut Vec<&'static str>,
    ) -> Result<Vec<crate::observe::VertexLoad>, FetchError> {
        // Every vertex's three requests go out at once (the semaphore bounds them); the answers
        // are taken in the vertices' order, so errors and the first failure that ends the fetch
        // are what the requests one after the other gave.
        let answers = futures_util::future::join_all(topology.vertices.iter().map(|v| async move {
            let subtasks = v.parallelism.clamp(1, MAX_LOAD_SUBTASKS);
            let ids: Vec<String> = (0..subtasks)
                .flat_map(|i| convert::LOAD_METRICS.iter().map(move |m| format!("{i}.{m}")))
                .collect();
            let (details, backpressure, metrics) = futures_util::future::join3(
                self.fetch(self.client.vertex(job_id, &v.id)),
                self.fetch(self.client.vertex_backpressure(job_id, &v.id)),
                self.fetch(self.client.vertex_metrics(job_id, &v.id, &ids)),
            )
            .await;
            (v, subtasks, details, backpressure, metrics)
        }))
        .await;
        let mut out = Vec::new();
        for (v, subtasks, details, backpressure, metrics) in answers {
            let details = self.part(details, errors)?;
            let backpressure = self.part(backpressure, errors)?;
            let metrics = self.part(metrics, errors)?;
            if details.is_none() && backpressure.is_none() && metrics.is_none() {
                continue;
            }
            out.push(convert::vertex_load(
                &v.id,
                subtasks,
                details.as_ref(),
                backpressure.as_ref(),
                metrics.as_deref().unwrap_or(&[]),
            ));
        }
        Ok(out)
    }

    /// One part of a job's load: an error status is logged, counted and taken as missing.
    fn part<T>(
        &self,
        answer: Result<Option<T>, FetchError>,
        errors: &mut Vec<&'static str>,
    ) -> Result<Option<T>, FetchError> {
        match answer {
            Err(e @ FetchError::HttpStatus { .. }) => {
                self.log_error(&e);
                errors.push(e.kind());
                Ok(None)
            }
            other => other,
        }
    }

    /// The per-vertex subtask details of a checkpoint (empty if Flink forgot it). The vertices
    /// are the job graph's (`known`, sorted) when the poller has it: one request fewer per
    /// checkpoint than asking `/checkpoints/details/:id` for them first, a sixth of a round's
    /// requests at 10,000 jobs (issue 31). A vertex Flink has no details of (404) is left out.
    async fn checkpoint_vertices(
        &self,
        job_id: &str,
        checkpoint_id: u64,
        known: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, dto::TaskCheckpointDetails)>, FetchError> {
        let listed: Vec<String> = if known.is_empty() {
            let Some(details) = self.fetch(self.client.checkpoint_details(job_id, checkpoint_id)).await?
            else {
                return Ok(Vec::new());
            };
            details.tasks.into_keys().collect()
        } else {
            known.keys().cloned().collect()
        };
        let requests = listed.iter().map(|vid| async move {
            let answer = self.fetch(self.client.subtask_details(job_id, checkpoint_id, vid)).await;
            answer.map(|d| d.map(|d| (vid.clone(), d)))
        });
        let mut vertices = Vec::new();
        for answer in futures_util::future::join_all(requests).await {
            vertices.extend(answer?);
        }
        Ok(vertices)
    }
}

/// Where a subtask that has not acknowledged an in-progress checkpoint stands, from which
/// vertices around it have acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingPhase {
    /// Every subtask downstream of it acknowledged, so it emitted the barrier (Flink emits it
    /// before the synchronous snapshot, `SubtaskCheckpointCoordinatorImpl.checkpointState`), or
    /// it is a source (triggered by RPC, it waits for no barrier): it is in its snapshot.
    Snapshot,
    /// An upstream vertex has not acknowledged either: the barrier it waits for was not sent.
    BehindUpstream,
    /// Its inputs sent their barriers and the subtasks downstream of it still wait for its
    /// barrier: it has not passed it on, so it is still aligning (barriers queued behind data).
    Barriers,
    /// Its inputs sent their barriers and it has no downstream subtasks to tell whether it
    /// passed one on: aligning or snapshotting cannot be told apart.
    Unknown,
}

/// Classifies a pending subtask of vertex `vid` given the vertices whose subtasks all
/// acknowledged (`done`).
pub fn pending_phase(
    topology: &crate::observe::JobTopology,
    vid: &str,
    done: &HashSet<&str>,
) -> PendingPhase {
    let producers: Vec<&str> =
        topology.edges.iter().filter(|e| e.to == vid).map(|e| e.from.as_str()).collect();
    let consumers: Vec<&str> =
        topology.edges.iter().filter(|e| e.from == vid).map(|e| e.to.as_str()).collect();
    if producers.iter().any(|p| !done.contains(p)) {
        return PendingPhase::BehindUpstream;
    }
    if producers.is_empty() || (!consumers.is_empty() && consumers.iter().all(|c| done.contains(c))) {
        return PendingPhase::Snapshot;
    }
    if consumers.is_empty() {
        return PendingPhase::Unknown;
    }
    PendingPhase::Barriers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_job_is_polled_until_its_counts_settle_with_nothing_in_progress() {
        // The REST cache still answers the snapshot from before the cancel.
        assert!(!final_polls_done(None, (36, 1, 1), 1, 0));
        // The cancel failed the in-progress checkpoint and the last one completed.
        assert!(!final_polls_done(Some((36, 1, 1)), (38, 2, 0), 2, 0));
        assert!(final_polls_done(Some((38, 2, 0)), (38, 2, 0), 3, 5_000));
        // Two polls of one cached answer a second apart are not settled counts: the cache
        // may still hide a checkpoint that completed just before the cancel.
        assert!(!final_polls_done(Some((121, 0, 0)), (121, 0, 0), 2, 1_000));
        assert!(final_polls_done(Some((121, 0, 0)), (121, 0, 0), 5, FINAL_SETTLE_MS));
        // Still in progress by Flink's word: polled again, but not forever.
        assert!(!final_polls_done(Some((38, 2, 1)), (38, 2, 1), 3, 10_000));
        assert!(final_polls_done(Some((38, 2, 1)), (38, 2, 1), MAX_FINAL_POLLS, 0));
    }

    #[test]
    fn a_large_clusters_job_is_polled_when_its_next_checkpoint_can_have_come() {
        let history = |json: &str| -> Vec<dto::CheckpointStatistics> { serde_json::from_str(json).unwrap() };
        let settings = crate::observe::CheckpointSettings {
            interval_ms: Some(60_000),
            min_pause_ms: 0,
            ..Default::default()
        };
        // The newest completed at 101 s, triggered at 100 s: the next comes at 160 s at the
        // earliest.
        let done = history(
            r#"[{"className": "completed", "id": 2, "trigger_timestamp": 100000, "latest_ack_timestamp": 101000},
                {"className": "completed", "id": 1, "trigger_timestamp": 40000, "latest_ack_timestamp": 41000}]"#,
        );
        let next = next_checkpoint_at(&done, &settings);
        assert_eq!(next, Some(Timestamp(160_000)));
        // Rounds every 10 s: skipped at 105..145 s, polled from 150 s (the next round is at 160 s).
        assert!(!stats_due(next, 0, Timestamp(105_000), 10_000));
        assert!(!stats_due(next, 3, Timestamp(145_000), 10_000));
        assert!(stats_due(next, 4, Timestamp(150_000), 10_000));
        // However far the next one is, never more than MAX_SKIPPED_ROUNDS rounds in a row.
        assert!(stats_due(Some(Timestamp(10_000_000)), MAX_SKIPPED_ROUNDS, Timestamp(105_000), 10_000));
        // The min-pause binds when the newest ended late.
        let paused = crate::observe::CheckpointSettings { min_pause_ms: 50_000, ..settings.clone() };
        let slow = history(
            r#"[{"className": "completed", "id": 2, "trigger_timestamp": 100000, "latest_ack_timestamp": 130000}]"#,
        );
        assert_eq!(next_checkpoint_at(&slow, &paused), Some(Timestamp(180_000)));
        // One in progress: polled every round.
        let running = history(
            r#"[{"className": "in_progress", "id": 3, "trigger_timestamp": 160000},
                {"className": "completed", "id": 2, "trigger_timestamp": 100000, "latest_ack_timestamp": 101000}]"#,
        );
        assert_eq!(next_checkpoint_at(&running, &settings), None);
        assert!(stats_due(None, 0, Timestamp(161_000), 10_000));
        // No checkpoint yet, or no interval: every round.
        assert_eq!(next_checkpoint_at(&[], &settings), None);
        let manual = crate::observe::CheckpointSettings { interval_ms: None, ..settings };
        assert_eq!(next_checkpoint_at(&done, &manual), None);
    }

    #[test]
    fn every_jobs_load_is_fetched_within_the_refresh_bound() {
        assert_eq!(load_fetches_per_round(0), 1);
        assert_eq!(load_fetches_per_round(10), 1);
        assert_eq!(load_fetches_per_round(LOAD_REFRESH_WITHIN_ROUNDS), 1);
        assert_eq!(load_fetches_per_round(LOAD_REFRESH_WITHIN_ROUNDS + 1), 2);
        for jobs in [1usize, 119, 121, 1_000, 10_000] {
            let rounds = jobs.div_ceil(load_fetches_per_round(jobs));
            assert!(rounds <= LOAD_REFRESH_WITHIN_ROUNDS, "{jobs} jobs: {rounds} rounds");
        }
        assert_eq!(load_fetches_per_round(1_000), 9);
    }
}
