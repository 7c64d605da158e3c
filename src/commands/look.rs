//! A one-shot look at a cluster through the daemon's own pipeline: the poller's round into a
//! fresh `State`, the rule pack evaluated once, each job's `health::job_health` and
//! `outputs::answer::job_answer` as the API gives them (`diagnose` reads its verdict here).
//!
//! One look has no history, and rules with `increase()` measure from their first sample: a
//! daemon's first round would not see the failures Flink already lists. So before the round the
//! look applies a baseline, what a daemon watching since then would have known: per job a poll
//! at the later of its start and [`BASELINE_MS`] before now, with Flink's counts less what came
//! after, and the rules evaluated then. Failures and restores within that span then count as
//! seen (`FlinkCheckpointFailed`, `FlinkJobFrequentRestores` fire for them, as they would have
//! for a daemon watching); older ones are in the baseline, as old failures are for a daemon. A
//! rule's `for` is longer than the look: one whose condition holds now is pending (at risk).
//!
//! Time stands still at one instant, the JobManager's `now` (`/jobs/:id`): ages are Flink's, do
//! not depend on how long the requests took, and a captured cluster reads as when captured. The client is memoised ([`FlinkClient::memoised`]):
//! the round and the report's own fetch share one request per path.

use std::sync::Arc;

use crate::app::AppState;
use crate::config::ClusterConfig;
use crate::observe::{
    CheckpointCounts, CheckpointStatus, ClusterPoll, FinishedCheckpoint, JobKey, JobPoll, JobSummary,
    Observation,
};
use crate::rules::{AlertsView, Evaluator, Rule};
use crate::sources::flink::client::{ClientBuildError, FetchError, FlinkClient};
use crate::sources::flink::{convert, dto};
use crate::sources::poller::Poller;
use crate::state::State;
use crate::stats::WindowSpec;
use crate::time::Timestamp;

/// How far back the baseline goes at most: `FlinkCheckpointFailed`'s window (`increase(…,
/// 10m)`), so that a failure older than the daemon would still alert on is not told as new.
pub(crate) const BASELINE_MS: i64 = 10 * 60_000;

/// What one look found: the state after the round and the alerts evaluated at its end.
pub(crate) struct Look {
    /// The state the round built.
    pub(crate) app: Arc<AppState>,
    /// The cluster's name in it.
    pub(crate) cluster: String,
    /// The alerts pending or firing then.
    pub(crate) alerts: AlertsView,
}

/// Looks once at `jobs` of the cluster `config` through `client` (memoised by the caller, who
/// reads the same answers for its report), with `rules`; `detailed` is how many of each job's
/// newest finished checkpoints get their per-subtask details.
pub(crate) async fn look(
    config: &ClusterConfig,
    client: &FlinkClient,
    jobs: &[&dto::JobOverview],
    rules: Vec<Rule>,
    window: WindowSpec,
    detailed: usize,
) -> Result<Look, LookError> {
    let app = Arc::new(AppState::new(State::new(window)));
    // One instant for the whole look: the JobManager's clock when its first job's details (which
    // the round asks for anyway) give it, else this machine's.
    let jm_now = match jobs.first() {
        Some(first) => client.job(&first.jid).await?.now,
        None => None,
    };
    app.stop_clock(jm_now.map_or_else(Timestamp::now, Timestamp));
    let now = app.now();
    let mut evaluator = Evaluator::new(rules);
    for (at, observations) in baseline(config, client, jobs, now).await? {
        for o in &observations {
            app.apply_at(o, at);
        }
        let state = app.state.read();
        evaluator.evaluate(&state, at);
    }
    // The jobs are chosen (`only_jobs`): the configuration's name patterns, its shard of the
    // jobs and its cap on them would leave out a job asked for by id.
    let config = ClusterConfig {
        max_history_per_poll: detailed.max(1),
        include_jobs: Vec::new(),
        exclude_jobs: Vec::new(),
        job_shard: None,
        max_jobs: config.max_jobs.max(jobs.len()),
        ..config.clone()
    };
    let mut poller = Poller::with_client(config.clone(), client.clone(), app.clone())?
        .only_jobs(jobs.iter().map(|j| j.jid.clone()))
        .all_loads();
    poller.round().await;
    // One storage round over what the poll learnt (the checkpoints' paths, the configuration).
    // The cluster's whole job list (memoised: the round asked for it) tells which other job
    // folders belong to running jobs and which to ended ones.
    let known = client
        .jobs_overview()
        .await
        .map(|o| {
            o.jobs
                .iter()
                .map(|j| {
                    let state = j.state.clone().unwrap_or_default();
                    let runs = !crate::observe::JobStatus::parse(&state).has_ended();
                    (j.jid.clone(), (state, runs))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut storage = crate::sources::storage::StorageSource::new(config.clone(), app.clone()).knowing(known);
    if let Some(round) = storage.round(&crate::config::StorageConfig::default()).await {
        app.apply(&crate::observe::Observation::Storage(round));
    }
    let now = app.now();
    let mut alerts = AlertsView::default();
    {
        let state = app.state.read();
        evaluator.evaluate(&state, now);
        alerts.set_active(evaluator.active_shared().cloned().collect());
        alerts.incidents = evaluator.incidents();
    }
    Ok(Look { app, cluster: config.name, alerts })
}

impl Look {
    /// The health of `job_id` and its answer, exactly as the API's job summary makes them;
    /// `None` when the round did not watch it (no checkpointing).
    pub(crate) fn job(&self, job_id: &str) -> Option<crate::outputs::answer::JobVerdict> {
        let state = self.app.state.read();
        let c = state.clusters().get(&self.cluster)?;
        let j = c.jobs.get(job_id)?;
        Some(crate::outputs::answer::job_verdict(c, &self.cluster, job_id, j, &self.alerts))
    }
}

impl Look {
    /// Whether `job_id` is healthy again after a failover (`health::recovered`), the answer its
    /// health read; `None` when it is not or the round did not watch it.
    pub(crate) fn recovered(&self, job_id: &str) -> Option<crate::health::Recovered> {
        let state = self.app.state.read();
        crate::health::recovered(state.clusters().get(&self.cluster)?.jobs.get(job_id)?)
    }

    /// What the storage round found of `job_id`, in words (`health::storage::lines`).
    pub(crate) fn storage_lines(&self, job_id: &str) -> Vec<String> {
        let state = self.app.state.read();
        let Some(c) = state.clusters().get(&self.cluster) else { return Vec::new() };
        let Some(j) = c.jobs.get(job_id) else { return Vec::new() };
        crate::health::storage::lines(&j.storage, &c.storage, self.app.now())
    }
}

/// Why a look could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LookError {
    /// The poller's client could not be built.
    #[error(transparent)]
    Client(#[from] ClientBuildError),
    /// A request the baseline needs failed.
    #[error(transparent)]
    Fetch(#[from] FetchError),
}

/// The baseline of each job with checkpointing on, in time order: (when, what is applied
/// then). A job's baseline is [`BASELINE_MS`] before now, or just before it started (or, when
/// Flink does not say, before its oldest listed checkpoint) if that is later.
async fn baseline(
    config: &ClusterConfig,
    client: &FlinkClient,
    jobs: &[&dto::JobOverview],
    now: Timestamp,
) -> Result<Vec<(Timestamp, Vec<Observation>)>, FetchError> {
    let mut polls: Vec<(Timestamp, Observation)> = Vec::new();
    for job in jobs {
        let Some(checkpoint_config) = client.checkpoint_config(&job.jid).await? else { continue };
        let stats = client.checkpoints(&job.jid).await?;
        let oldest = stats.history.iter().filter_map(|c| c.trigger_timestamp).min();
        let Some(began) = job.start_time.filter(|t| *t > 0).or(oldest) else { continue };
        let at = Timestamp(began - 1).max(now.plus_millis(-BASELINE_MS)).min(now);
        let poll = baseline_poll(config, job, &checkpoint_config, &stats, at);
        polls.push((at, Observation::JobPolled(poll)));
    }
    polls.sort_by_key(|(at, _)| *at);
    let Some(first) = polls.first().map(|(at, _)| *at) else { return Ok(Vec::new()) };
    let listing = Observation::ClusterPolled(ClusterPoll {
        cluster: config.name.clone(),
        duration_ms: 0,
        flink_version: None,
        jobs: Some(
            jobs.iter()
                .map(|j| JobSummary {
                    job_id: j.jid.clone(),
                    name: j.name.clone().unwrap_or_default(),
                    state: convert::job_status(j.state.as_deref()),
                })
                .collect(),
        ),
        errors: Vec::new(),
        reachable: true,
    });
    let mut steps: Vec<(Timestamp, Vec<Observation>)> = vec![(first, vec![listing])];
    for (at, poll) in polls {
        match steps.last_mut() {
            Some((last, observations)) if *last == at => observations.push(poll),
            _ => steps.push((at, vec![poll])),
        }
    }
    Ok(steps)
}

/// A job's poll as of `at`: the checkpoints that had finished by then (without their details:
/// the round details the newer ones), Flink's counts less the ones listed after, nothing in
/// progress, and its restores: none if it started after `at`, else less the latest if that
/// came after (how many more did, one look cannot tell).
fn baseline_poll(
    config: &ClusterConfig,
    job: &dto::JobOverview,
    checkpoint_config: &dto::CheckpointConfig,
    stats: &dto::CheckpointingStatistics,
    at: Timestamp,
) -> JobPoll {
    let mut counts: CheckpointCounts = stats.counts.as_ref().map(convert::counts).unwrap_or_default();
    counts.in_progress = 0;
    let mut finished: Vec<FinishedCheckpoint> = Vec::new();
    for entry in &stats.history {
        match convert::finished(entry, &[]) {
            Some(f) if f.finished_at <= at => finished.push(f),
            Some(f) => match f.status {
                CheckpointStatus::Completed => counts.completed = counts.completed.saturating_sub(1),
                CheckpointStatus::Failed => counts.failed = counts.failed.saturating_sub(1),
            },
            None => {}
        }
    }
    finished.sort_by_key(|f| f.id);
    let latest_restore = stats
        .latest
        .as_ref()
        .and_then(|l| l.restored.as_ref())
        .and_then(|r| r.restore_timestamp.map(|t| (r.id, Timestamp(t))))
        .filter(|(_, t)| *t <= at);
    if job.start_time.is_some_and(|t| t > at.millis()) {
        counts.restored = 0;
    } else if latest_restore.is_none() && stats.latest.as_ref().and_then(|l| l.restored.as_ref()).is_some() {
        counts.restored = counts.restored.saturating_sub(1);
    }
    JobPoll {
        key: JobKey { cluster: config.name.clone(), job_id: job.jid.clone() },
        job_name: job.name.clone().unwrap_or_default(),
        job_state: convert::job_status(job.state.as_deref()),
        polled_at: at,
        counts,
        settings: Some(convert::settings(checkpoint_config)),
        in_progress: Vec::new(),
        finished,
        latest_restore,
        deferred: Default::default(),
    }
}
