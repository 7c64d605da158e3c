//! The state shared between the sources, the HTTP server and the persister.

use parking_lot::RwLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::counters::{CLOSE_REASONS, DiscoveryStats, ListenerStats, TLS_HANDSHAKE_ERRORS, TargetStats};
use crate::observe::{EventSeverity, LogKind, Observation};
use crate::process::ProcessStats;
use crate::rules::{AlertState, AlertsView};
use crate::state::State;
use crate::time::Timestamp;

/// Shared by every task of the daemon. Locks are held only for synchronous work, never across
/// an `.await`.
pub struct AppState {
    /// What the daemon knows.
    pub state: RwLock<State>,
    /// Bumped on every applied observation, so the persister writes only after a change.
    pub(crate) generation: AtomicU64,
    persist_errors: AtomicU64,
    last_persisted_ms: AtomicI64,
    /// Why the last state write failed, `None` when it worked (for `/readyz`).
    persist_problem: RwLock<Option<String>>,
    /// The latest alert evaluation, for metrics and the API.
    pub alerts: RwLock<AlertsView>,
    /// Delivery counters per Alertmanager, after each delivery round.
    pub(crate) alertmanagers: RwLock<Vec<TargetStats>>,
    /// Woken when warning or error log events arrive: the rules look at them at once instead
    /// of at the next evaluation tick, so a failure line reaches Alertmanager within a second.
    pub(crate) log_events_arrived: tokio::sync::Notify,
    /// Woken when a poll or a log line shows a checkpoint in progress, so the rule loop
    /// schedules the early-warning evaluation for its age (`rules::next_age_wake`).
    pub(crate) checkpoint_started: tokio::sync::Notify,
    /// The counters of the daemon's port (connections, closures, TLS handshakes), shared with
    /// the listener that counts them.
    pub listener: std::sync::Arc<ListenerStats>,
    /// What the bounds on outside input cut, per (cluster, what): see [`AppState::count_cut`].
    inputs_cut: parking_lot::Mutex<std::collections::BTreeMap<(String, &'static str), u64>>,
    /// The requests in flight each cluster's poller chose for its latest round.
    requests_in_flight: parking_lot::Mutex<std::collections::BTreeMap<String, usize>>,
    /// Thread dumps and flame graphs asked for, per (cluster, outcome): [`AppState::count_thread_dump`].
    thread_looks: parking_lot::Mutex<std::collections::BTreeMap<(String, &'static str), u64>>,
    /// What `/metrics` exports (`[metrics]`), set at start and on reload.
    pub(crate) metrics: RwLock<crate::config::MetricsConfig>,
    /// `[thread_dumps]`, set at start and on reload; each cluster's looker reads it per round.
    pub(crate) thread_dumps: RwLock<crate::config::ThreadDumpsConfig>,
    /// How the evidence sources read (`[evidence]`), set at start and on reload.
    pub(crate) evidence: RwLock<crate::config::EvidenceConfig>,
    /// How the storage sources list (`[storage]`), set at start and on reload.
    pub storage: RwLock<crate::config::StorageConfig>,
    /// The checkpoint store, when `[store] enabled` and it opened.
    pub store: std::sync::OnceLock<std::sync::Arc<crate::state::store::Store>>,
    /// The store's counters.
    pub(crate) store_stats: StoreStats,
    /// What file discovery last found, when it is on.
    pub(crate) discovery: RwLock<Option<DiscoveryStats>>,
    /// The instant [`AppState::now`] reads instead of the wall clock once set
    /// ([`AppState::stop_clock`]; `i64::MIN`: not set, the daemon's case).
    stopped_at_ms: AtomicI64,
}

/// What the persister did with the checkpoint store.
#[derive(Debug, Default)]
pub(crate) struct StoreStats {
    /// Records in the store after the last write.
    pub(crate) records: AtomicU64,
    /// Records pruned by age or count.
    pub(crate) pruned: AtomicU64,
    /// Failed writes (retried with the next state write).
    pub(crate) errors: AtomicU64,
}

/// The daemon's own counters that live outside `State`.
#[derive(Clone, Debug, Default)]
pub struct DaemonStats {
    /// The checkpoint store's counters, when it is open.
    pub store: Option<StoreCounters>,
    /// Failed state writes.
    pub(crate) persist_errors: u64,
    /// Last successful state write.
    pub(crate) last_persisted: Option<Timestamp>,
    /// Per rule: its pending and firing alerts.
    pub(crate) alerts: Vec<RuleAlerts>,
    /// Delivery counters per Alertmanager.
    pub(crate) alertmanagers: Vec<TargetStats>,
    /// Failed TLS handshakes on the daemon's port by reason, when it serves TLS.
    pub(crate) tls_handshake_errors: Option<[(&'static str, u64); 3]>,
    /// Connections to the daemon's port open now.
    pub(crate) http_connections: i64,
    /// Connections the daemon closed by reason ([`CLOSE_REASONS`]).
    pub(crate) http_closed: [(&'static str, u64); 2],
    /// What the bounds on outside input cut, per (cluster, what).
    pub(crate) inputs_cut: Vec<(String, &'static str, u64)>,
    /// The requests in flight per cluster (its poller's latest choice).
    pub(crate) requests_in_flight: Vec<(String, usize)>,
    /// Thread dumps and flame graphs, per (cluster, outcome).
    pub(crate) thread_dumps: Vec<(String, &'static str, u64)>,
    /// The process's CPU, memory, descriptors and threads (Linux only).
    pub(crate) process: Option<ProcessStats>,
    /// What to export: per-operator series or not, which quantiles (`[metrics]`).
    pub(crate) metrics: crate::config::MetricsConfig,
    /// What file discovery last found, when it is on.
    pub(crate) discovery: Option<DiscoveryStats>,
    /// The rule loop's incidents (`flink_checkpoint_incident_jobs`).
    pub(crate) incidents: std::sync::Arc<Vec<crate::rules::incidents::Incident>>,
}

/// How many alerts of one rule are pending and firing (`checkpoint_sentinel_alerts`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct RuleAlerts {
    /// The rule's name (`alertname`).
    pub(crate) name: String,
    /// Its severity label.
    pub(crate) severity: &'static str,
    /// Alerts pending.
    pub(crate) pending: usize,
    /// Alerts firing.
    pub(crate) firing: usize,
}

/// The checkpoint store's counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreCounters {
    /// Records in the store.
    pub(crate) records: u64,
    /// Records pruned.
    pub(crate) pruned: u64,
    /// Failed writes.
    pub(crate) errors: u64,
    /// Damaged files moved aside.
    pub(crate) files_set_aside: u64,
    /// Whether the last write (or open) failed.
    pub(crate) failing: bool,
    /// Records waiting in the outbox for the store.
    pub waiting: u64,
}

impl AppState {
    /// Shares `state`. The alignment engine then runs outside the state's lock (see
    /// [`AppState::apply`]).
    pub fn new(mut state: State) -> Self {
        state.defer_model_runs();
        AppState {
            state: RwLock::new(state),
            generation: AtomicU64::new(0),
            persist_errors: AtomicU64::new(0),
            last_persisted_ms: AtomicI64::new(0),
            persist_problem: RwLock::new(None),
            alerts: RwLock::new(AlertsView::default()),
            alertmanagers: RwLock::default(),
            log_events_arrived: tokio::sync::Notify::new(),
            checkpoint_started: tokio::sync::Notify::new(),
            listener: Default::default(),
            inputs_cut: Default::default(),
            requests_in_flight: Default::default(),
            thread_looks: Default::default(),
            metrics: RwLock::default(),
            thread_dumps: RwLock::default(),
            evidence: RwLock::default(),
            storage: RwLock::default(),
            store: std::sync::OnceLock::new(),
            store_stats: StoreStats::default(),
            discovery: RwLock::new(None),
            stopped_at_ms: AtomicI64::new(i64::MIN),
        }
    }

    /// Applies an observation at the current time.
    ///
    /// The write lock is held for the bookkeeping only: an alignment engine run the
    /// observation made due is made after the lock is released, on a copy of its inputs
    /// (bounded by `MAX_MODEL_CHANNELS`), and its result handed back under a second short lock.
    /// Readers (`/metrics`, `/healthz`, the API, the rules) never wait for the engine.
    pub fn apply(&self, observation: &Observation) {
        self.apply_at(observation, self.now());
    }

    /// The time the sources stamp their observations with: the wall clock, or the instant
    /// [`AppState::stop_clock`] set.
    pub(crate) fn now(&self) -> Timestamp {
        match self.stopped_at_ms.load(Ordering::Relaxed) {
            i64::MIN => Timestamp::now(),
            at => Timestamp(at),
        }
    }

    /// Makes [`AppState::now`] read `at` from now on: a one-shot look takes its answers as of
    /// one instant, the JobManager's `now`, so that ages are Flink's and do not depend on how
    /// long the look's requests took (nor on when a captured cluster was captured).
    pub(crate) fn stop_clock(&self, at: Timestamp) {
        self.stopped_at_ms.store(at.millis(), Ordering::Relaxed);
    }

    /// [`AppState::apply`] at `now` (a one-shot look's baseline, before the polls).
    pub(crate) fn apply_at(&self, observation: &Observation, now: Timestamp) {
        let mut state = self.state.write();
        let failures = |state: &State| match observation {
            Observation::JobPolled(poll) => state
                .clusters()
                .get(&poll.key.cluster)
                .and_then(|c| c.jobs.get(&poll.key.job_id))
                .map_or(0, |j| j.failures.total),
            _ => 0,
        };
        let failures_before = failures(&state);
        state.apply(observation, now);
        // A poll that found a failed checkpoint no log line reported (no log tailed, or a line
        // not written): the rules look at it now too.
        let poll_found_failure = failures(&state) > failures_before;
        let work = state.take_model_work();
        drop(state);
        if !work.is_empty() {
            let outputs = off_the_workers(|| work.iter().map(|(key, w)| (key, w.run())).collect::<Vec<_>>());
            let mut state = self.state.write();
            for (key, output) in outputs {
                state.finish_model_work(key, output);
            }
        }
        self.generation.fetch_add(1, Ordering::Release);
        // Routine lines (triggered, completed) are most of a log and change no alert that
        // cannot wait for the next tick; a failure should not wait.
        let events = match observation {
            Observation::LogEvents(events) => events.as_slice(),
            Observation::LogRead(read) => read.events.as_slice(),
            _ => &[],
        };
        let sampled = matches!(observation, Observation::ThreadSampled(_));
        if poll_found_failure || sampled || events.iter().any(|e| e.severity >= EventSeverity::Warning) {
            self.log_events_arrived.notify_one();
        }
        let started = match observation {
            Observation::JobPolled(poll) => !poll.in_progress.is_empty(),
            _ => events.iter().any(|e| e.kind == LogKind::Triggered),
        };
        if started {
            self.checkpoint_started.notify_one();
        }
    }

    /// Counts `n` items of outside input a bound cut (`what`: one of the labels of
    /// `checkpoint_sentinel_inputs_cut_total`).
    pub(crate) fn count_cut(&self, cluster: &str, what: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        let mut cuts = self.inputs_cut.lock();
        *cuts.entry((cluster.to_string(), what)).or_insert(0) += n;
    }

    /// Notes the requests in flight `cluster`'s poller chose for this round.
    pub(crate) fn set_requests_in_flight(&self, cluster: &str, n: usize) {
        self.requests_in_flight.lock().insert(cluster.to_string(), n);
    }

    /// Counts one look at a subtask's thread (`outcome`: one of the labels of
    /// `checkpoint_sentinel_thread_dumps_total`).
    pub(crate) fn count_thread_dump(&self, cluster: &str, outcome: &'static str) {
        let mut counts = self.thread_looks.lock();
        *counts.entry((cluster.to_string(), outcome)).or_insert(0) += 1;
    }

    /// Records the outcome of a state write (the error's text when it failed).
    pub(crate) fn persisted(&self, result: Result<Timestamp, String>) {
        let mut problem = self.persist_problem.write();
        match result {
            Ok(at) => {
                self.last_persisted_ms.store(at.millis(), Ordering::Relaxed);
                *problem = None;
            }
            Err(why) => {
                self.persist_errors.fetch_add(1, Ordering::Relaxed);
                *problem = Some(why);
            }
        }
    }

    /// What keeps the daemon from writing what it must keep: the state file's last error, the
    /// checkpoint store's failure (with since when). Empty when both are written.
    pub fn write_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(why) = self.persist_problem.read().clone() {
            problems.push(format!("the state file cannot be written: {why}"));
        }
        if let Some(failing) = self.store.get().and_then(|s| s.failing()) {
            problems.push(format!(
                "the checkpoint store cannot be written since {}: {}",
                crate::time::log_time(failing.since),
                failing.reason
            ));
        }
        problems
    }

    /// What the daemon-scope rules read: the store's and the state file's health, with the
    /// outbox's figures from `state` (the caller holds its lock).
    pub fn daemon_facts(&self, state: &State) -> crate::rules::DaemonFacts {
        let store = self.store.get();
        crate::rules::DaemonFacts {
            store_failing: store.map(|s| s.failing().is_some()),
            store_waiting_records: store.map(|_| state.outbox().len() as u64),
            store_dropped_records: state.outbox().dropped(),
            state_persist_errors: self.persist_errors.load(Ordering::Relaxed),
            state_persist_failing: self.persist_problem.read().is_some(),
        }
    }

    /// The daemon's own counters.
    pub fn daemon_stats(&self) -> DaemonStats {
        let last = self.last_persisted_ms.load(Ordering::Relaxed);
        let view = self.alerts.read();
        let alerts = view
            .rules
            .iter()
            .map(|(name, severity)| {
                let count =
                    |state| view.active.iter().filter(|a| a.name() == name && a.state == state).count();
                RuleAlerts {
                    name: name.clone(),
                    severity,
                    pending: count(AlertState::Pending),
                    firing: count(AlertState::Firing),
                }
            })
            .collect();
        let listener = &self.listener;
        let tls_handshake_errors = listener.tls_serving.load(Ordering::Relaxed).then(|| {
            std::array::from_fn(|i| {
                (TLS_HANDSHAKE_ERRORS[i], listener.tls_handshake_errors[i].load(Ordering::Relaxed))
            })
        });
        let mut inputs_cut: Vec<(String, &'static str, u64)> =
            self.inputs_cut.lock().iter().map(|((cluster, what), n)| (cluster.clone(), *what, *n)).collect();
        let requests_in_flight = {
            let state = self.state.read();
            for (name, cluster) in state.clusters() {
                if cluster.logs.job_ids_cut > 0 {
                    inputs_cut.push((name.clone(), "log_job_ids", cluster.logs.job_ids_cut));
                }
            }
            // Only the clusters still watched: one that left (a reload, discovery) leaves no series.
            let mut chosen = self.requests_in_flight.lock();
            chosen.retain(|name, _| state.clusters().contains_key(name));
            chosen.iter().map(|(c, n)| (c.clone(), *n)).collect()
        };
        let waiting = self.state.read().outbox().len() as u64;
        let store = self.store.get().map(|store| StoreCounters {
            records: self.store_stats.records.load(Ordering::Relaxed),
            pruned: self.store_stats.pruned.load(Ordering::Relaxed),
            errors: self.store_stats.errors.load(Ordering::Relaxed),
            files_set_aside: store.files_set_aside(),
            failing: store.failing().is_some(),
            waiting,
        });
        DaemonStats {
            http_connections: listener.connections.load(Ordering::Relaxed),
            http_closed: std::array::from_fn(|i| {
                (CLOSE_REASONS[i], listener.closed[i].load(Ordering::Relaxed))
            }),
            inputs_cut,
            requests_in_flight,
            thread_dumps: self
                .thread_looks
                .lock()
                .iter()
                .map(|((cluster, outcome), n)| (cluster.clone(), *outcome, *n))
                .collect(),
            store,
            tls_handshake_errors,
            persist_errors: self.persist_errors.load(Ordering::Relaxed),
            last_persisted: (last > 0).then_some(Timestamp(last)),
            alerts,
            alertmanagers: self.alertmanagers.read().clone(),
            process: crate::process::read(),
            metrics: self.metrics.read().clone(),
            discovery: self.discovery.read().clone(),
            incidents: std::sync::Arc::clone(&view.incidents),
        }
    }
}

/// Runs `work`, which takes long (an engine run, a rule round over 10,000 jobs), so that the
/// runtime's other tasks do not wait behind it: on a worker of a multi-thread runtime the runtime
/// hands that worker's tasks to another thread meanwhile (`block_in_place`); elsewhere (a
/// current-thread runtime in tests, no runtime) it just runs.
pub(crate) fn off_the_workers<R>(work: impl FnOnce() -> R) -> R {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread { tokio::task::block_in_place(work) } else { work() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{LogEvent, LogRead};
    use crate::stats::WindowSpec;
    use std::time::Duration;

    fn read(severity: EventSeverity) -> Observation {
        Observation::LogRead(LogRead {
            cluster: "c".into(),
            tailer: "t".into(),
            events: vec![LogEvent::new("k".into(), severity, String::new())],
            positions: Default::default(),
            spans: Vec::new(),
        })
    }

    #[tokio::test]
    async fn warnings_from_the_logs_wake_the_rules_and_routine_lines_do_not() {
        let app = AppState::new(State::new(WindowSpec { window_ms: 60_000, slots: 6 }));
        let wait = Duration::from_millis(50);
        app.apply(&read(EventSeverity::Info));
        let woken = tokio::time::timeout(wait, app.log_events_arrived.notified()).await.is_ok();
        assert!(!woken, "a completed checkpoint's line is no reason for a round");
        app.apply(&read(EventSeverity::Warning));
        let woken = tokio::time::timeout(wait, app.log_events_arrived.notified()).await.is_ok();
        assert!(woken, "an expired checkpoint's line is");
    }

    #[tokio::test]
    async fn a_poll_that_finds_a_failed_checkpoint_wakes_the_rules() {
        use crate::observe::{CheckpointCounts, FinishedCheckpoint, JobKey, JobPoll};
        let app = AppState::new(State::new(WindowSpec { window_ms: 60_000, slots: 6 }));
        let wait = Duration::from_millis(50);
        let poll = |finished: Vec<FinishedCheckpoint>| {
            Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "c".into(), job_id: "j".into() },
                job_name: "orders".into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(1_000),
                counts: CheckpointCounts::default(),
                settings: None,
                in_progress: Vec::new(),
                finished,
                latest_restore: None,
                deferred: Default::default(),
            })
        };
        app.apply(&poll(Vec::new()));
        let woken = tokio::time::timeout(wait, app.log_events_arrived.notified()).await.is_ok();
        assert!(!woken, "nothing failed");
        let failed = FinishedCheckpoint::completed(3, Timestamp(0), 900)
            .failed("Checkpoint expired before completing.")
            .acknowledged(1, 2);
        app.apply(&poll(vec![failed]));
        let woken = tokio::time::timeout(wait, app.log_events_arrived.notified()).await.is_ok();
        assert!(woken, "a failure no log line reported");
    }
}
