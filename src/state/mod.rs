//! What the daemon knows, and the one function that changes it: `State::apply(obs, now)`.
//!
//! Pure: no I/O, no clock, no tokio. The poller and the tailer produce observations, the
//! daemon applies them here, and the exporter, HTTP API and rules read the result.

pub(crate) mod ack_drops;
pub(crate) mod checkpoint_ids;
pub(crate) mod cluster;
pub mod evidence;
pub mod evidence_at;
pub(crate) mod failure_text;
pub(crate) mod history;
pub(crate) mod job;
pub(crate) mod logs;
pub mod memo;
pub mod outbox;
pub mod persist;
pub(crate) mod record;
pub(crate) mod rescale;
pub mod restore;
pub mod storage;
pub mod store;
pub(crate) mod threads;
pub(crate) mod tolerance;
pub(crate) mod traced;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::observe::{ClusterPoll, JobKey, Observation};
use crate::stats::WindowSpec;
use crate::time::Timestamp;
pub(crate) use checkpoint_ids::{FailureEvidence, SeenIds};
pub(crate) use cluster::{ClusterState, UNCLAIMED_SPANS};
pub use failure_text::{is_shutdown_failure, is_stop_failure};
pub use job::{EPOCH_CONFIRM_POLLS, JobState, OperatorState, RECENT_CHECKPOINTS, SizeHistograms, SuspectRun};
pub use record::{CheckpointRecord, Holdout, Phase, PhaseHistograms, SharedRecord, Totals};

/// Everything the daemon knows about the clusters it watches.
pub struct State {
    window: WindowSpec,
    clusters: BTreeMap<String, ClusterState>,
    /// Whether the alignment engine runs outside `apply` ([`State::defer_model_runs`]).
    defer_model: bool,
    /// Jobs whose alignment engine run is due (deferred mode).
    model_due: BTreeSet<JobKey>,
    /// Checkpoints counted since the persister last wrote them to the store: filled by
    /// `apply`, emptied only through [`State::take_store_batch`] and its return.
    outbox: outbox::Outbox,
    /// Whether jobs keep per-operator phase histograms (`[metrics] operators`): five per
    /// operator chain, most of a job's memory when nothing exports them.
    operator_histograms: bool,
    /// How many recent checkpoints each job keeps (`[state] recent_checkpoints`).
    recent_checkpoints: usize,
    /// How many P95 samples each job keeps for its chart (`[state] p95_history_points`).
    p95_history_points: usize,
}

impl State {
    /// Empty state whose histograms use `window`.
    pub fn new(window: WindowSpec) -> Self {
        State {
            window,
            clusters: BTreeMap::new(),
            defer_model: false,
            model_due: BTreeSet::new(),
            outbox: outbox::Outbox::default(),
            operator_histograms: true,
            recent_checkpoints: job::RECENT_CHECKPOINTS,
            p95_history_points: history::P95_HISTORY_POINTS,
        }
    }

    /// The checkpoints waiting for the store, read only (how many, how many were dropped).
    pub fn outbox(&self) -> &outbox::Outbox {
        &self.outbox
    }

    /// Whether counted checkpoints are kept for the checkpoint store: only while one is open.
    /// Turning it off forgets what waits; returns how many records that was.
    pub fn keep_for_store(&mut self, store_open: bool) -> usize {
        let waiting = self.outbox.len();
        if store_open {
            self.outbox.enable();
        } else if waiting > 0 {
            self.outbox.disable();
        }
        if store_open { 0 } else { waiting }
    }

    /// The persister's batch: the records and restores waiting for the store, taken out (moved,
    /// not copied, so the snapshot after it copies none of them).
    pub fn take_store_batch(&mut self) -> (Vec<outbox::Outboxed>, Vec<outbox::OutboxedRestore>) {
        (self.outbox.take(), self.outbox.take_restores())
    }

    /// A batch the store did not take, back in the outbox before what was counted since.
    pub fn return_store_batch(
        &mut self,
        records: Vec<outbox::Outboxed>,
        restores: Vec<outbox::OutboxedRestore>,
    ) {
        self.outbox.put_back(records);
        self.outbox.put_back_restores(restores);
    }

    /// The id ranges the bounded outbox dropped since the last call (for the log).
    pub(crate) fn take_dropped_ranges(&mut self) -> Vec<outbox::DroppedRange> {
        self.outbox.take_dropped()
    }

    /// How many P95 samples each job keeps from now on (`[state] p95_history_points`); jobs
    /// that keep more drop their oldest.
    pub(crate) fn keep_p95_history(&mut self, points: usize) {
        self.p95_history_points = points;
        for job in self.clusters.values_mut().flat_map(|c| c.jobs.values_mut()) {
            job.p95_history.keep(points);
        }
    }

    /// How many recent checkpoints each job keeps from now on (`[state] recent_checkpoints`);
    /// jobs that keep more drop their oldest.
    pub(crate) fn keep_recent_checkpoints(&mut self, kept: usize) {
        self.recent_checkpoints = kept.max(1);
        for job in self.clusters.values_mut().flat_map(|c| c.jobs.values_mut()) {
            job.recent_kept = self.recent_checkpoints;
            if job.recent.len() > job.recent_kept {
                job.recent.drain(..job.recent.len() - job.recent_kept);
                job.recent.shrink_to_fit();
            }
        }
    }

    /// Whether jobs keep per-operator phase histograms from now on; `false` drops the ones
    /// kept so far (`[metrics] operators = false`: nothing exports them).
    pub(crate) fn keep_operator_histograms(&mut self, keep: bool) {
        self.operator_histograms = keep;
        if !keep {
            for job in self.clusters.values_mut().flat_map(|c| c.jobs.values_mut()) {
                job.operators = BTreeMap::new();
            }
        }
    }

    /// From now on `apply` only notes which jobs' alignment engine must run again; the caller
    /// runs it with [`State::take_model_work`] and [`State::finish_model_work`], outside its
    /// lock (the engine may take tens of milliseconds on a large graph, `MAX_MODEL_CHANNELS`).
    pub(crate) fn defer_model_runs(&mut self) {
        self.defer_model = true;
        for job in self.clusters.values_mut().flat_map(|c| c.jobs.values_mut()) {
            job.shadow.alignment.defer_runs();
        }
    }

    /// The alignment engine runs that are due, with the inputs cloned.
    pub(crate) fn take_model_work(&mut self) -> Vec<(JobKey, crate::shadow::alignment::ModelWork)> {
        let due = std::mem::take(&mut self.model_due);
        due.into_iter()
            .filter_map(|key| {
                let job = self.clusters.get_mut(&key.cluster)?.jobs.get_mut(&key.job_id)?;
                Some((key, job.shadow.alignment.take_work()?))
            })
            .collect()
    }

    /// Hands back an engine run's result (dropped if the job's inputs changed meanwhile).
    pub(crate) fn finish_model_work(&mut self, key: &JobKey, output: crate::shadow::alignment::ModelOutput) {
        if let Some(job) = self.clusters.get_mut(&key.cluster).and_then(|c| c.jobs.get_mut(&key.job_id)) {
            job.shadow.alignment.finish(output);
        }
    }

    fn note_model_due(&mut self, key: &JobKey) {
        let due = self
            .clusters
            .get(&key.cluster)
            .and_then(|c| c.jobs.get(&key.job_id))
            .is_some_and(|j| j.shadow.alignment.has_pending_work());
        if due {
            self.model_due.insert(key.clone());
        }
    }

    /// The watched clusters by name.
    pub fn clusters(&self) -> &BTreeMap<String, ClusterState> {
        &self.clusters
    }

    /// Applies one observation made at `now`.
    pub fn apply(&mut self, observation: &Observation, now: Timestamp) {
        match observation {
            Observation::ClusterPolled(poll) => self.apply_cluster_poll(poll, now),
            Observation::JobPolled(poll) => {
                let window = self.window;
                let defer = self.defer_model;
                let operator_histograms = self.operator_histograms;
                let recent_kept = self.recent_checkpoints;
                let p95_points = self.p95_history_points;
                let cluster = self.cluster_mut(&poll.key.cluster);
                let job = cluster.jobs.entry(poll.key.job_id.clone()).or_insert_with(|| {
                    let mut job = JobState::new(window, poll.job_name.clone(), poll.job_state.clone(), now);
                    job.p95_history.keep(p95_points);
                    if defer {
                        job.shadow.alignment.defer_runs();
                    }
                    // Boxed: a map node then holds pointers, not 4 KB states half of it empty.
                    Box::new(job)
                });
                job.listed = true;
                job.keep_operators = operator_histograms;
                job.recent_kept = recent_kept;
                job.shadow.trigger.set_flink_version(cluster.flink_version.as_deref());
                // Lines about this job read before it was first polled (say, its first checkpoint
                // completing): without them a stale "in progress" of the poll would look live.
                if cluster
                    .unclaimed
                    .iter()
                    .any(|(e, _)| e.job_id.as_deref() == Some(poll.key.job_id.as_str()))
                {
                    let (mine, others) = std::mem::take(&mut cluster.unclaimed)
                        .into_iter()
                        .partition(|(e, _)| e.job_id.as_deref() == Some(poll.key.job_id.as_str()));
                    cluster.unclaimed = others;
                    for (event, at) in mine {
                        job.observe_log_event(&event, at);
                    }
                }
                // Spans of this job read before its first poll count first: the poll then knows
                // them (a span of a checkpoint the poll counts is a no-op the other way round).
                if cluster.unclaimed_spans.iter().any(|s| s.job_id == poll.key.job_id) {
                    let (mine, others): (VecDeque<_>, VecDeque<_>) =
                        std::mem::take(&mut cluster.unclaimed_spans)
                            .into_iter()
                            .partition(|s| s.job_id == poll.key.job_id);
                    cluster.unclaimed_spans = others;
                    for span in &mine {
                        job.observe_span(span, now, window);
                    }
                }
                job.apply_poll(poll, window);
                job.storage.observe_poll(&poll.finished);
                let mut counted = std::mem::take(&mut job.outbox);
                let restores = std::mem::take(&mut job.restores.changed);
                cluster.evidence.observe_checkpoints(&poll.key.job_id, &poll.finished);
                for r in
                    counted.iter().filter(|c| c.record.status == crate::observe::CheckpointStatus::Failed)
                {
                    cluster.failed_takes_drops(&poll.key.job_id, r.record.id, now);
                }
                attach_evidence(cluster, &poll.key.job_id, &mut counted);
                self.outbox.extend(&poll.key.cluster, &poll.key.job_id, counted);
                self.outbox.extend_restores(&poll.key.cluster, &poll.key.job_id, restores);
                self.note_model_due(&poll.key);
            }
            Observation::JobLoad(report) => {
                let job = self
                    .clusters
                    .get_mut(&report.key.cluster)
                    .and_then(|c| c.jobs.get_mut(&report.key.job_id));
                if let Some(job) = job {
                    job.observe_locations(report);
                    job.shadow.observe_load(report);
                }
                self.note_model_due(&report.key);
            }
            Observation::LogEvents(events) => {
                for event in events {
                    let cluster = self.cluster_mut(&event.cluster);
                    let events = cluster.correlate(std::slice::from_ref(event), now);
                    for event in events.iter() {
                        cluster.logs.apply_event(event);
                        cluster.observe_log_event(event, now);
                    }
                }
            }
            Observation::LogRead(read) => self.apply_log_read(read, now),
            Observation::Evidence(round) => self.cluster_mut(&round.cluster).evidence.apply(round),
            Observation::Storage(round) => self.apply_storage(round),
            Observation::Applications(report) => {
                self.cluster_mut(&report.cluster).applications = report.applications.clone();
            }
            Observation::LogTailer(report) => self.cluster_mut(&report.cluster).logs.apply_report(report),
            Observation::JobConfiguration(key, configuration) => {
                let Some(cluster) = self.clusters.get_mut(&key.cluster) else { return };
                let version = cluster.flink_version.clone();
                if let Some(job) = cluster.jobs.get_mut(&key.job_id) {
                    let mut configuration = configuration.clone();
                    if configuration.flink_version.is_none() {
                        configuration.flink_version = version;
                    }
                    job.configuration = Some(configuration);
                }
            }
            Observation::Restore(report) => {
                let job = self
                    .clusters
                    .get_mut(&report.key.cluster)
                    .and_then(|c| c.jobs.get_mut(&report.key.job_id));
                if let Some(job) = job {
                    job.restores.observe(report);
                    let changed = std::mem::take(&mut job.restores.changed);
                    self.outbox.extend_restores(&report.key.cluster, &report.key.job_id, changed);
                }
            }
            Observation::Rescales(report) => self.apply_rescales(report),
            Observation::JobStatus(key, metrics) => {
                if let Some(job) = self.job_mut(key) {
                    job.reported.status_metrics = Some(metrics.clone());
                }
            }
            Observation::ThreadSampled(report) => {
                if let Some(job) = self.job_mut(&report.key) {
                    job.threads.push(report.sample.clone());
                }
            }
        }
    }

    /// A tailer's read: its events (correlated: `ClusterState::correlate`) counted with its
    /// positions, told to their jobs, then its spans.
    fn apply_log_read(&mut self, read: &crate::observe::LogRead, now: Timestamp) {
        let window = self.window;
        let cluster = self.cluster_mut(&read.cluster);
        let events = cluster.correlate(&read.events, now);
        cluster.logs.apply_read(&read.tailer, &events, &read.positions);
        for event in events.iter() {
            cluster.observe_log_event(event, now);
        }
        // After the lines of the same read: a failure line that came first tells the
        // cause of its span's failure.
        let mut counted = Vec::new();
        for span in &read.spans {
            match cluster.jobs.get_mut(&span.job_id) {
                Some(job) => {
                    job.observe_span(span, now, window);
                    if !job.outbox.is_empty() {
                        counted.push((span.job_id.clone(), std::mem::take(&mut job.outbox)));
                    }
                }
                None => {
                    cluster.unclaimed_spans.push_back(span.clone());
                    if cluster.unclaimed_spans.len() > UNCLAIMED_SPANS {
                        cluster.unclaimed_spans.pop_front();
                    }
                }
            }
        }
        for (job_id, mut records) in counted {
            attach_evidence(self.cluster_mut(&read.cluster), &job_id, &mut records);
            self.outbox.extend(&read.cluster, &job_id, records);
        }
    }

    /// A job's rescales: kept, and each new one told to its trigger shadow.
    fn apply_rescales(&mut self, report: &crate::observe::RescaleReport) {
        if let Some(job) = self.job_mut(&report.key) {
            for r in job.reported.rescales.observe(report) {
                job.shadow.trigger.note_rescale(&r);
            }
        }
    }

    fn job_mut(&mut self, key: &JobKey) -> Option<&mut JobState> {
        self.clusters.get_mut(&key.cluster).and_then(|c| c.jobs.get_mut(&key.job_id)).map(|j| &mut **j)
    }

    /// Whether a job's restore at `restored_at` is still to be counted or timed, so the poller
    /// fetches its subtasks' times only then.
    pub fn restore_due(&self, cluster: &str, job_id: &str, restored_at: Timestamp) -> bool {
        // A job not polled yet is created by its first poll; its restore is looked at next round.
        let job = self.clusters.get(cluster).and_then(|c| c.jobs.get(job_id));
        job.is_some_and(|j| j.restores.due(restored_at))
    }

    /// Keeps exactly these clusters (after a config reload), dropping the state of others.
    pub(crate) fn retain_clusters(&mut self, names: &[String]) {
        self.clusters.retain(|name, _| names.contains(name));
        for name in names {
            self.cluster_mut(name);
        }
    }

    /// [`State::unseen`] of history entries (id, trigger time): an id already counted is
    /// unseen again when it was triggered after the newest checkpoint counted, at an id not above
    /// it (the ids restarted under the same job id: a new run's checkpoint, not the old one).
    pub fn unseen_entries(&self, cluster: &str, job_id: &str, entries: &[(u64, Timestamp)]) -> Vec<u64> {
        let job = self.clusters.get(cluster).and_then(|c| c.jobs.get(job_id));
        entries
            .iter()
            .filter(|(id, at)| {
                job.is_none_or(|j| {
                    !j.seen.contains(*id)
                        || j.traced.wants_details(*id)
                        || j.newest.is_some_and(|(newest, t)| *id <= newest && at.millis() > t.millis())
                })
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Moves the sliding windows to `now` and forgets jobs unlisted for longer than a window.
    pub(crate) fn expire(&mut self, now: Timestamp) {
        let horizon = now.millis() - self.window.window_ms as i64;
        for cluster in self.clusters.values_mut() {
            cluster.poll_duration.expire(now);
            cluster.jobs.retain(|_, job| job.listed || job.last_seen.millis() > horizon);
            for job in cluster.jobs.values_mut() {
                job.expire(now);
            }
            let jobs = &cluster.jobs;
            cluster.evidence.expire(now, |job| jobs.contains_key(job));
        }
    }

    /// A storage round: its counters to the cluster, each listing to its job.
    fn apply_storage(&mut self, round: &crate::observe::StorageRound) {
        let cluster = self.cluster_mut(&round.cluster);
        cluster.storage.apply(round);
        for listing in &round.jobs {
            if let Some(job) = cluster.jobs.get_mut(&listing.job_id) {
                job.storage.observe_listing(listing, round.at);
            }
        }
        for job_id in &round.throttled_jobs {
            if let Some(job) = cluster.jobs.get_mut(job_id) {
                job.storage.throttled += 1;
            }
        }
    }

    fn cluster_mut(&mut self, name: &str) -> &mut ClusterState {
        let window = self.window;
        self.clusters.entry(name.to_string()).or_insert_with(|| ClusterState::new(window))
    }

    fn apply_cluster_poll(&mut self, poll: &ClusterPoll, now: Timestamp) {
        let cluster = self.cluster_mut(&poll.cluster);
        cluster.polls_total += 1;
        cluster.reachable = poll.reachable;
        cluster.last_poll_duration_ms = poll.duration_ms;
        cluster.poll_duration.record(poll.duration_ms, now);
        for kind in &poll.errors {
            *cluster.poll_errors.entry(kind).or_insert(0) += 1;
        }
        if poll.reachable {
            cluster.answered_once = true;
            cluster.last_success = Some(now);
        }
        if poll.flink_version.is_some() {
            cluster.flink_version.clone_from(&poll.flink_version);
        }
        if let Some(jobs) = &poll.jobs {
            for job in cluster.jobs.values_mut() {
                job.listed = false;
            }
            for listed in jobs {
                if let Some(job) = cluster.jobs.get_mut(&listed.job_id) {
                    job.listed = true;
                    job.last_seen = now;
                    job.name.clone_from(&listed.name);
                    job.job_state.clone_from(&listed.state);
                    if listed.state.has_ended() {
                        job.end();
                    }
                }
            }
        }
    }
}

/// Puts the evidence beside each of a job's newly counted checkpoints that failed or took at
/// least half its timeout (`state::evidence_at`), in the store's record and the recent ring's.
fn attach_evidence(cluster: &mut ClusterState, job_id: &str, counted: &mut [outbox::StoredCheckpoint]) {
    let Some(job) = cluster.jobs.get_mut(job_id) else { return };
    let timeout_ms = job.settings.as_ref().and_then(|s| s.timeout_ms);
    for stored in counted {
        let r = &stored.record;
        let slow = r.end_to_end_ms.zip(timeout_ms).is_some_and(|(e2e, t)| 2 * e2e >= t);
        if r.status != crate::observe::CheckpointStatus::Failed && !slow {
            continue;
        }
        let found = crate::state::evidence_at::at_checkpoint(
            &cluster.evidence,
            job_id,
            r,
            stored.taskmanager.as_deref(),
        );
        if let Some(recent) =
            job.recent.iter_mut().rev().find(|x| x.id == r.id && x.triggered_at == r.triggered_at)
        {
            std::sync::Arc::make_mut(recent).evidence = found.clone().map(Box::new);
        }
        stored.record.evidence = found.map(Box::new);
    }
}

#[cfg(test)]
mod tests {
    use super::job::tests::{WINDOW, completed, job, log_line, poll};
    use super::*;
    use crate::observe::{CheckpointSettings, InProgressCheckpoint, LogEvent, LogKind};

    #[test]
    fn lines_read_before_the_jobs_first_poll_still_count() {
        // Live on Flink 1.20.5: checkpoint 1 of a fresh job completed in 115 ms, before the
        // first poll listed the job, and that poll (Flink's statistics lag) still showed it in
        // progress; at 80 % of the timeout it was taken for a checkpoint about to expire.
        let mut state = State::new(WINDOW);
        state.apply(&log_line("completed", 6, ""), Timestamp(100_200));
        let Observation::JobPolled(mut p) = poll(5, 0, Vec::new()) else { unreachable!() };
        p.settings = Some(CheckpointSettings { timeout_ms: Some(4_000), ..Default::default() });
        p.in_progress = vec![InProgressCheckpoint {
            id: 6,
            triggered_at: Timestamp(100_000),
            num_subtasks: 6,
            num_acknowledged: 5,
        }];
        state.apply(&Observation::JobPolled(p), Timestamp(101_000));
        assert!(job(&state).live_in_progress(Timestamp(103_300)).is_empty());
    }

    #[test]
    fn restored_state_does_not_count_again() {
        let mut state = State::new(WINDOW);
        let obs = poll(2, 0, vec![completed(1, 50), completed(2, 70)]);
        state.apply(&obs, Timestamp(0));
        let bytes = persist::to_bytes(&persist::snapshot(&state));
        let mut restored = persist::restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
        restored.apply(&obs, Timestamp(1));
        let j = job(&restored);
        assert_eq!(j.totals(), Totals { completed: 2, failed: 0 });
        assert_eq!(j.phases.end_to_end.summary(), job(&state).phases.end_to_end.summary());
        assert_eq!(j.operators["v1"].phases.alignment.summary().count, 4);
    }

    #[test]
    fn a_state_file_of_the_previous_format_loads_with_empty_log_state() {
        let mut state = State::new(WINDOW);
        state.apply(&poll(2, 0, vec![completed(1, 50), completed(2, 70)]), Timestamp(0));
        // The previous version wrote the same document without the `logs` section.
        let mut old: serde_json::Value =
            serde_json::from_slice(&persist::to_bytes(&persist::snapshot(&state))).unwrap();
        assert!(old.as_object_mut().unwrap().remove("logs").is_some());
        let restored = persist::restore(WINDOW, serde_json::from_value(old).unwrap());
        assert_eq!(job(&restored).totals(), Totals { completed: 2, failed: 0 });
        assert_eq!(job(&restored).phases.end_to_end.summary().count, 2);
        let logs = &restored.clusters()["c"].logs;
        assert!(logs.events.is_empty() && logs.positions.is_empty() && logs.recent.is_empty());
    }

    /// Issue 40, the tailer's side of `ack_drops`: Pekko's "Discarding oversized payload" (a
    /// TaskManager line that names no checkpoint) sent to the JobMaster job `j` registered at is
    /// attached to `j`'s checkpoint in progress: counted under its id, kept for the verdict. A
    /// drop read while nothing is in progress waits for the job's next expiry.
    #[test]
    fn an_oversized_payload_is_attached_to_the_checkpoint_in_progress_on_its_job() {
        use crate::observe::EventSeverity;
        let tm = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/written/oversized-ack/logs/flink-root-taskexecutor-0-vm.log"
        ))
        .unwrap();
        let mut events =
            crate::sources::logs::parse::parse_all(&crate::sources::logs::parse::Patterns::builtin(), &tm);
        for e in &mut events {
            e.cluster = "c".into();
            if e.job_id.as_deref() == Some("e5977598408a0b50e1eb3e122b7bd082") {
                e.job_id = Some("j".into());
            }
        }
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            ["jobmaster_registered", "jobmaster_registered", "oversized_payload", "oversized_payload"]
        );
        let mut state = State::new(WINDOW);
        let Observation::JobPolled(mut p) = poll(11, 0, Vec::new()) else { unreachable!() };
        p.polled_at = Timestamp(131_000);
        p.settings = Some(CheckpointSettings { timeout_ms: Some(60_000), ..Default::default() });
        p.in_progress = vec![InProgressCheckpoint {
            id: 12,
            triggered_at: Timestamp(100_000),
            num_subtasks: 2,
            num_acknowledged: 1,
        }];
        state.apply(&Observation::JobPolled(p), Timestamp(131_000));
        state.apply(&Observation::LogEvents(events[..3].to_vec()), Timestamp(132_000));
        let logs = &state.clusters()["c"].logs;
        let drop = logs.recent.iter().find(|e| e.kind == LogKind::OversizedPayload).unwrap();
        assert_eq!((drop.job_id.as_deref(), drop.checkpoint_id), (Some("j"), Some(12)));
        assert_eq!(logs.root_causes.get("oversized_ack"), Some(&1));
        let hurt = job(&state).ack_drop_hurting().cloned().unwrap();
        assert_eq!((hurt.checkpoint_id, hurt.payload_bytes, hurt.frame_bytes), (12, 15_859_121, 10_485_760));
        assert!(
            hurt.sentence()
                .starts_with("the acknowledgement of checkpoint 12 was dropped as oversized: 15 MiB")
        );

        // Checkpoint 12 is over; nothing in progress when the second drop is read: it waits, and
        // the expiry of checkpoint 13 a little later takes it.
        let Observation::JobPolled(mut p) = poll(11, 1, Vec::new()) else { unreachable!() };
        p.polled_at = Timestamp(161_000);
        p.settings = Some(CheckpointSettings { timeout_ms: Some(60_000), ..Default::default() });
        state.apply(&Observation::JobPolled(p), Timestamp(161_000));
        state.apply(&Observation::LogEvents(events[3..].to_vec()), Timestamp(162_000));
        assert_eq!(job(&state).ack_drop_hurting().map(|d| d.checkpoint_id), Some(12));
        let mut expired =
            LogEvent::new(LogKind::Expired, EventSeverity::Warning, "Checkpoint 13 expired".into());
        (expired.cluster, expired.job_id, expired.checkpoint_id) = ("c".into(), Some("j".into()), Some(13));
        state.apply(&Observation::LogEvents(vec![expired]), Timestamp(190_000));
        let hurt = job(&state).ack_drop_hurting().cloned().unwrap();
        assert_eq!((hurt.checkpoint_id, hurt.payload_bytes), (13, 15_861_344));
    }
}
