//! One job's poll: its configuration on first sight or a change of state, its checkpoint
//! statistics, the details of checkpoints the state has not counted (the newest
//! `max_history_per_poll`, the rest deferred), its restore, and its last polls once ended.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::Poller;
use super::cache::{JobCache, RESCALE_LOOKS, STATUS_READS_AFTER_RESTORE_MS};
use super::schedule::{
    LOCATION_RETRIES, MAX_DEFERRED_REMEMBERED, RESTORE_RECHECK_MAX_ROUNDS, next_checkpoint_at, stats_due,
};
use crate::observe::{
    CheckpointStatus, Deferred, FinishedCheckpoint, JobKey, JobPoll, JobStatus, Observation,
};
use crate::sources::flink::client::FetchError;
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;

/// A job's unseen history entries split by [`Poller::defer_beyond_limit`].
struct Backlog {
    /// Ids whose details are fetched this round.
    fetch_now: Vec<u64>,
    /// Deferred checkpoints Flink no longer lists, as its history told them.
    forgotten: Vec<FinishedCheckpoint>,
    /// Listed ones left for a later round.
    deferred: Deferred,
}

impl Poller {
    /// Polls one job; `Ok(None)` when it does not checkpoint or needs no more polls. `slot` is
    /// what the poller remembers of the job (taken out of `jobs` for the round, so that jobs can
    /// be polled concurrently); its observations of pending subtasks are applied here, in order.
    pub(super) async fn poll_job(
        &self,
        job: &dto::JobOverview,
        slot: &mut Option<JobCache>,
    ) -> Result<Option<JobPoll>, FetchError> {
        let job_state = convert::job_status(job.state.as_deref());
        let terminal = job_state.has_ended();
        if slot.as_ref().is_some_and(|c| c.final_poll_done && terminal) {
            return Ok(None);
        }
        // Re-read the configuration on first sight and whenever the job changes state
        // (a restart may come with a new configuration), and the graph until it has one: right
        // after a submit Flink may list the job RUNNING while `/jobs/:id` still answers the
        // initializing job without vertices (seen live on 1.20.5), and without this the job's
        // operators would be named by their vertex ids for good.
        let refresh = slot
            .as_ref()
            .is_none_or(|c| c.state != job_state || c.settings.is_none() || c.vertex_names.is_empty());
        // The one borrow of the job's cache for the rest of the poll. A failed refresh leaves
        // the old cache in place.
        let cache = match slot {
            Some(cache) if !refresh => cache,
            _ => {
                let mut fresh = self.refreshed_cache(job, &job_state).await?;
                if let Some(old) = slot.take() {
                    fresh.carry_over(old);
                }
                slot.insert(fresh)
            }
        };
        let Some(Some(settings)) = cache.settings.clone() else {
            return Ok(None);
        };
        if self.adaptive && !refresh && !terminal {
            let interval_ms = self.config.poll_interval.as_millis() as u64;
            if !stats_due(cache.next_checkpoint_at, cache.skipped_rounds, self.app.now(), interval_ms) {
                cache.skipped_rounds = cache.skipped_rounds.saturating_add(1);
                return Ok(None);
            }
        }
        let stats = self.fetch(self.client.checkpoints(&job.jid)).await?;
        cache.next_checkpoint_at = next_checkpoint_at(&stats.history, &settings);
        cache.skipped_rounds = 0;
        let polled_at = self.app.now();
        let finished_ids: Vec<(u64, Timestamp)> = stats
            .history
            .iter()
            .filter(|cp| convert::status(cp).is_some())
            .map(|cp| (cp.id, Timestamp(cp.trigger_timestamp.unwrap_or(0))))
            .collect();
        let unseen = {
            let state = self.app.state.read();
            state.unseen_entries(&self.config.name, &job.jid, &finished_ids)
        };
        let backlog = self.defer_beyond_limit(cache, &stats.history, unseen);
        let mut finished = backlog.forgotten;
        finished.extend(self.finished_details(&job.jid, cache, &stats.history, backlog.fetch_now).await);
        if let Some(timeout) = settings.timeout_ms {
            let events = self.pending_subtasks(cache, &job.jid, &stats, timeout, polled_at).await;
            if !events.is_empty() {
                self.app.apply(&Observation::LogEvents(events));
            }
        }
        let restored = stats.counts.as_ref().map(|c| convert::counts(c).restored);
        if cache.restored_count.is_some_and(|before| restored.is_some_and(|now| now > before)) {
            cache.rescale_looks = RESCALE_LOOKS;
            cache.status_reads_until = Some(polled_at.plus_millis(STATUS_READS_AFTER_RESTORE_MS));
        }
        cache.restored_count = restored.or(cache.restored_count);
        let mut read_status = cache.status_reads_until.is_some_and(|until| polled_at <= until);
        if !terminal && cache.rescale_looks > 0 {
            cache.rescale_looks -= 1;
            self.look_for_rescales(job, cache).await;
            read_status = true;
        }
        if !terminal
            && read_status
            && let Some(status) = self.job_status_metrics(&job.jid).await
        {
            let key = JobKey { cluster: self.config.name.clone(), job_id: job.jid.clone() };
            self.app.apply(&Observation::JobStatus(key, status));
        }
        if !terminal {
            self.time_restore(&job.jid, cache, &stats).await;
        }
        let latest_restore = stats
            .latest
            .as_ref()
            .and_then(|l| l.restored.as_ref())
            .and_then(|r| r.restore_timestamp.map(|at| (r.id, Timestamp(at))));
        let counts = stats.counts.as_ref().map(convert::counts).unwrap_or_default();
        if terminal {
            cache.note_final_poll((counts.completed, counts.failed, counts.in_progress), polled_at);
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

    /// A fresh cache of `job`: its checkpoint settings (`None` inside when checkpointing is
    /// disabled), its graph and, for the advisor, its whole checkpoint configuration, as on
    /// first sight.
    async fn refreshed_cache(
        &self,
        job: &dto::JobOverview,
        job_state: &JobStatus,
    ) -> Result<JobCache, FetchError> {
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
                let job_options =
                    self.fetch(self.client.job_jobmanager_config(&job.jid)).await.ok().flatten();
                let cluster_options = self
                    .cluster_options
                    .get_or_init(|| async {
                        self.fetch(self.client.jobmanager_config()).await.unwrap_or_default()
                    })
                    .await;
                Some(Box::new(convert::configuration_of(
                    c,
                    job_config.as_ref(),
                    job_options.as_deref().unwrap_or_default(),
                    cluster_options,
                    None,
                )))
            }
            None => None,
        };
        if config.is_none() {
            tracing::info!(cluster = %self.config.name, job = %job.jid, "checkpointing is disabled for this job; not watching it");
        }
        Ok(JobCache {
            state: job_state.clone(),
            // The settings as the configuration completed them (the interval during backlog is
            // not in `/checkpoints/config`).
            settings: Some(config.as_ref().map(|c| crate::observe::CheckpointSettings {
                interval_during_backlog_ms:
                    configuration.as_ref().and_then(|whole| whole.settings.interval_during_backlog_ms),
                ..convert::settings(c)
            })),
            configuration,
            vertex_names,
            final_poll_done: false,
            final_polls: 0,
            final_counts: None,
            final_counts_since: Timestamp(0),
            topology: convert::topology(&details).map(Arc::new),
            parallelism: convert::vertex_parallelism(&details),
            restored_count: None,
            rescale_history_off: false,
            rescales_read: Default::default(),
            rescale_looks: 0,
            status_reads_until: None,
            load_due: self.rounds,
            location_retries: LOCATION_RETRIES,
            reported_pending: Default::default(),
            restore: None,
            deferred: Default::default(),
            next_checkpoint_at: None,
            skipped_rounds: 0,
        })
    }

    /// The finished checkpoints `ids` of Flink's `history` with their per-subtask details,
    /// fetched concurrently (the semaphore bounds the requests) and taken in the order of `ids`;
    /// one whose details do not come is counted anyway, without them.
    async fn finished_details(
        &self,
        job_id: &str,
        cache: &JobCache,
        history: &[dto::CheckpointStatistics],
        ids: Vec<u64>,
    ) -> Vec<FinishedCheckpoint> {
        let known = &cache.vertex_names;
        let fetched = futures_util::future::join_all(
            ids.into_iter().map(|id| async move { (id, self.checkpoint_vertices(job_id, id, known).await) }),
        )
        .await;
        let mut finished = Vec::new();
        for (id, vertices) in fetched {
            let Some(entry) = history.iter().find(|cp| cp.id == id) else { continue };
            let vertices = match vertices {
                Ok(v) => v,
                Err(e) => {
                    // Count the checkpoint anyway, without its per-subtask phases.
                    tracing::warn!(cluster = %self.config.name, job = %job_id, checkpoint = id, "details unavailable: {e}");
                    Vec::new()
                }
            };
            let views: Vec<convert::VertexDetails<'_>> = vertices
                .iter()
                .map(|(vid, details)| convert::VertexDetails {
                    vertex_id: vid,
                    name: known.get(vid).map_or(vid.as_str(), |n| n.as_str()),
                    details,
                })
                .collect();
            finished.extend(convert::finished(entry, &views));
        }
        finished
    }

    /// Times the latest restore Flink reports while `State::restore_due` says it is not timed
    /// yet: its subtasks are fetched when due, again after a back-off while not all of them run.
    async fn time_restore(&self, job_id: &str, cache: &mut JobCache, stats: &dto::CheckpointingStatistics) {
        let restored =
            stats.latest.as_ref().and_then(|l| l.restored.as_ref()).and_then(convert::restored_from);
        let Some(restored) = restored else { return };
        let due = {
            let state = self.app.state.read();
            state.restore_due(&self.config.name, job_id, restored.restored_at)
        };
        if cache.restore.is_none_or(|(at, _, _)| at != restored.restored_at) {
            cache.restore = Some((restored.restored_at, 0, self.rounds));
        }
        if let Some((at, checks, _)) = cache.restore.filter(|(_, _, next)| due && *next <= self.rounds) {
            let backoff = (1u64 << checks.min(6)).min(RESTORE_RECHECK_MAX_ROUNDS);
            cache.restore = Some((at, checks.saturating_add(1), self.rounds + backoff));
            let report = self.restore_report(job_id, restored).await;
            self.app.apply(&Observation::Restore(report));
        }
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

    /// The per-vertex subtask details of a checkpoint (empty if Flink forgot it). The vertices
    /// are the job graph's (`known`, sorted) when the poller has it: one request fewer per
    /// checkpoint than asking `/checkpoints/details/:id` for them first, a sixth of a round's
    /// requests at 10,000 jobs (issue 31). A vertex Flink has no details of (404) is left out.
    pub(super) async fn checkpoint_vertices(
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
