//! The REST poller: one task per cluster, turning Flink's answers into observations.
//!
//! Each round fetches `/overview` and `/jobs/overview`, then per watched job its
//! `/checkpoints` (and `/checkpoints/config` plus `/jobs/:id` on first sight or after a state
//! change). Details of a finished checkpoint are fetched once, for ids the state has not counted.
//! Failures are observations too: they become error metrics and log lines, and the loop goes on
//! with exponential back-off while the JobManager is unreachable.
//!
//! `mod.rs` holds the round; `job.rs` one job's poll, `pending.rs` the pending subtasks it
//! names, `load.rs` the loads for the alignment shadow, `schedule.rs` (pure) when each is due,
//! `cache.rs` what is remembered of a job between rounds, `phase.rs` (pure) where a pending
//! subtask stands, `in_flight.rs` (pure) how many requests a round keeps in flight.

mod applications;
mod cache;
pub(crate) mod in_flight;
mod job;
mod load;
mod pending;
mod phase;
mod rescale;
mod schedule;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use regex::Regex;
use tokio::sync::Semaphore;

pub use phase::{PendingPhase, pending_phase};
pub use schedule::{
    ADAPTIVE_ABOVE_JOBS, FINAL_SETTLE_MS, LOAD_EVERY_POLLS, LOAD_REFRESH_WITHIN_ROUNDS,
    MAX_DEFERRED_REMEMBERED, MAX_FINAL_POLLS, MAX_LOAD_SUBTASKS, MAX_SKIPPED_ROUNDS, final_polls_done,
    load_fetches_per_round, stats_due,
};

use cache::JobCache;

use crate::app::AppState;
use crate::config::{ClusterConfig, Pattern};
use crate::observe::{ClusterPoll, JobKey, JobStatus, JobSummary, Observation};
use crate::sources::flink::client::{ClientBuildError, FetchError, FlinkClient};
use crate::sources::flink::{convert, dto};

/// Longest wait between rounds while a cluster is failing.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Jobs in flight per request in flight: a job's requests come one after the
/// other (listing, details, subtasks), so with only as many jobs as permits some permits idle
/// while a job parses an answer or moves to its next request. Requests in flight stay bounded
/// by the semaphore; two jobs per permit keep it busy.
const JOBS_PER_REQUEST_SLOT: usize = 2;

/// Polls one cluster.
pub struct Poller {
    config: ClusterConfig,
    client: FlinkClient,
    include: Vec<Regex>,
    exclude: Vec<Regex>,
    requests: Semaphore,
    /// The semaphore's permits now: the requests in flight this round chose.
    permits: usize,
    /// This round's answers so far: their count and summed time (µs), read at its end.
    answers: (std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64),
    /// The last round's mean answer time and requests per watched job.
    measured: (Option<Duration>, Option<f64>),
    /// `rest.server.numThreads` from `/jobmanager/config`, once asked (`Some(None)`: not said).
    rest_threads: Option<Option<usize>>,
    app: Arc<AppState>,
    jobs: HashMap<String, JobCache>,
    rounds: u64,
    /// Only these job ids when set (a one-shot look at `--job`): the include and exclude
    /// patterns match names, which two jobs can share.
    only: Option<HashSet<String>>,
    /// Whether a round fetches the load (and so the placement) of every due job, not a few
    /// (`commands::look`: one look places every job, for the incidents).
    all_loads: bool,
    /// The JobManager's configuration (`/jobmanager/config`, for the advisor), fetched once per
    /// round however many jobs are new in it: per job, the first round of 10,000 jobs asked
    /// for the same answer 10,000 times.
    cluster_options: tokio::sync::OnceCell<Vec<dto::ConfigEntry>>,
    /// Whether this round polls statistics only where due ([`stats_due`]): the cluster has
    /// more than [`ADAPTIVE_ABOVE_JOBS`] watched jobs.
    adaptive: bool,
    /// The cluster's applications (2.3+) between rounds.
    applications: cache::Applications,
}

impl Poller {
    /// A poller for `config` that reports into `app`.
    pub fn new(config: ClusterConfig, app: Arc<AppState>) -> Result<Self, ClientBuildError> {
        let client = FlinkClient::new(&config)?;
        Self::with_client(config, client, app)
    }

    /// A poller for `config` asking through `client` (a one-shot look shares its memoised
    /// client with the report's own fetch: [`FlinkClient::memoised`]).
    pub(crate) fn with_client(
        config: ClusterConfig,
        client: FlinkClient,
        app: Arc<AppState>,
    ) -> Result<Self, ClientBuildError> {
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
            requests: Semaphore::new(in_flight::MIN_IN_FLIGHT),
            permits: in_flight::MIN_IN_FLIGHT,
            answers: Default::default(),
            measured: (None, None),
            rest_threads: None,
            client,
            config,
            app,
            jobs: HashMap::new(),
            rounds: 0,
            only: None,
            all_loads: false,
            cluster_options: tokio::sync::OnceCell::new(),
            adaptive: false,
            applications: Default::default(),
        })
    }

    /// Watches only the jobs `ids` (besides the patterns).
    pub(crate) fn only_jobs(mut self, ids: impl IntoIterator<Item = String>) -> Self {
        self.only = Some(ids.into_iter().collect());
        self
    }

    /// Fetches the load of every due job in a round (one look, not a daemon's rounds).
    pub(crate) fn all_loads(mut self) -> Self {
        self.all_loads = true;
        self
    }

    /// Polls forever: a round every `poll_interval`, backing off while rounds fail.
    pub(crate) async fn run(mut self) {
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
        let listed_ids: HashSet<String> = listed.iter().map(|j| j.jid.clone()).collect();
        self.poll_applications(&listed_ids).await;
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
        let in_flight = self.choose_in_flight(watched.len()).await;
        // Jobs are polled concurrently (at most twice the requests in flight of them, and that
        // many requests in flight): each job's future owns its cache entry for the round, applies its
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
                .buffer_unordered(in_flight * JOBS_PER_REQUEST_SLOT)
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
        self.measure_answers(watched.len());
        self.rounds += 1;
        self.app.apply(&report(errors, true, overview.flink_version, Some(summaries)));
        true
    }

    fn watches(&self, job: &dto::JobOverview) -> bool {
        let name = job.name.as_deref().unwrap_or("");
        self.only.as_ref().is_none_or(|ids| ids.contains(&job.jid))
            && (self.include.is_empty() || self.include.iter().any(|r| r.is_match(name)))
            && !self.exclude.iter().any(|r| r.is_match(name))
            // A cluster whose jobs are shared out between replicas: only the jobs this one owns.
            && self.config.job_shard.is_none_or(|s| s.owns_job(&self.config.name, &job.jid))
    }

    async fn fetch<T>(&self, request: impl Future<Output = Result<T, FetchError>>) -> Result<T, FetchError> {
        let _permit = self.requests.acquire().await.expect("the semaphore is never closed");
        let asked = Instant::now();
        let answer = request.await;
        let micros = asked.elapsed().as_micros().min(u128::from(u64::MAX)) as u64;
        self.answers.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.answers.1.fetch_add(micros, std::sync::atomic::Ordering::Relaxed);
        if let Err(FetchError::TooLarge { .. }) = &answer {
            self.app.count_cut(&self.config.name, "response_bodies", 1);
        }
        answer
    }

    /// The requests in flight for this round of `jobs` ([`in_flight::requests_in_flight`]),
    /// set on the semaphore (nothing is in flight between the job list and the jobs' polls)
    /// and reported. The JobManager's REST threads are asked for once, and only when the choice
    /// would go above the floor (a small cluster is never asked).
    async fn choose_in_flight(&mut self, jobs: usize) -> usize {
        let fixed = self.config.max_concurrent_requests;
        let mut demand = in_flight::Demand {
            jobs,
            requests_per_job: self.measured.1,
            answer: self.measured.0,
            interval: self.config.poll_interval,
            rest_threads: self.rest_threads.flatten(),
        };
        if fixed.is_none()
            && self.rest_threads.is_none()
            && in_flight::requests_in_flight(&demand, None) > in_flight::MIN_IN_FLIGHT
        {
            let options = self.fetch(self.client.jobmanager_config()).await.unwrap_or_default();
            let threads = options
                .iter()
                .find(|e| e.key == "rest.server.numThreads")
                .and_then(|e| e.value.as_deref()?.trim().parse::<usize>().ok());
            self.rest_threads = Some(threads);
            demand.rest_threads = threads;
            // The advisor's look at new jobs this round reads the same answer.
            let _ = self.cluster_options.set(options);
        }
        let n = in_flight::requests_in_flight(&demand, fixed);
        if n > self.permits {
            self.requests.add_permits(n - self.permits);
            self.permits = n;
        } else if n < self.permits {
            self.permits -= self.requests.forget_permits(self.permits - n);
        }
        self.app.set_requests_in_flight(&self.config.name, n);
        self.answers.0.store(0, std::sync::atomic::Ordering::Relaxed);
        self.answers.1.store(0, std::sync::atomic::Ordering::Relaxed);
        n
    }

    /// The round's mean answer time and requests per job, for the next round's choice.
    fn measure_answers(&mut self, jobs: usize) {
        let count = self.answers.0.load(std::sync::atomic::Ordering::Relaxed);
        let micros = self.answers.1.load(std::sync::atomic::Ordering::Relaxed);
        if let Some(mean) = micros.checked_div(count) {
            self.measured.0 = Some(Duration::from_micros(mean));
        }
        if jobs > 0 {
            self.measured.1 = Some(count as f64 / jobs as f64);
        }
    }

    fn log_error(&self, error: &FetchError) {
        tracing::warn!(cluster = %self.config.name, kind = error.kind(), "{error}");
    }
}
