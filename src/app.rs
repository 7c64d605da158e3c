//! The state shared between the sources, the HTTP server and the persister.

use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use crate::export::DaemonStats;
use crate::observe::{Observation, Severity};
use crate::rules::AlertState;
use crate::state::State;
use crate::time::Timestamp;

/// Shared by every task of the daemon. Locks are held only for synchronous work, never across
/// an `.await`.
pub struct AppState {
    /// What the daemon knows.
    pub state: RwLock<State>,
    /// Bumped on every applied observation, so the persister writes only after a change.
    pub generation: AtomicU64,
    persist_errors: AtomicU64,
    last_persisted_ms: AtomicI64,
    /// The latest alert evaluation, for metrics and the API.
    pub alerts: RwLock<AlertsView>,
    /// Woken when warning or error log events arrive: the rules look at them at once instead
    /// of at the next evaluation tick, so a failure line reaches Alertmanager within a second.
    pub log_events_arrived: tokio::sync::Notify,
    /// Whether the daemon's port serves TLS, and its failed handshakes by reason
    /// (`TLS_HANDSHAKE_ERRORS`).
    pub tls_serving: AtomicBool,
    /// Counters in the order of [`TLS_HANDSHAKE_ERRORS`].
    pub tls_handshake_errors: [AtomicU64; 3],
    /// What file discovery last found, when it is on.
    pub discovery: RwLock<Option<crate::discovery::DiscoveryStats>>,
}

/// Why a TLS handshake on the daemon's port failed: a plain `http://` request, a client that
/// broke it off or did not trust the certificate (or offered none that mutual TLS accepts),
/// a client that did not finish in time.
pub const TLS_HANDSHAKE_ERRORS: [&str; 3] = ["plain_http", "failed", "timeout"];

/// What the rule evaluator last concluded, copied out for readers.
#[derive(Clone, Debug, Default)]
pub struct AlertsView {
    /// Per rule: (name, severity label).
    pub rules: Vec<(String, &'static str)>,
    /// Pending and firing alerts.
    pub active: Vec<crate::rules::Alert>,
    /// Recently resolved alerts, oldest first.
    pub resolved: Vec<crate::rules::Alert>,
    /// Delivery counters per Alertmanager.
    pub alertmanagers: Vec<crate::alerting::TargetStats>,
}

impl AppState {
    /// Shares `state`.
    pub fn new(state: State) -> Self {
        AppState {
            state: RwLock::new(state),
            generation: AtomicU64::new(0),
            persist_errors: AtomicU64::new(0),
            last_persisted_ms: AtomicI64::new(0),
            alerts: RwLock::new(AlertsView::default()),
            log_events_arrived: tokio::sync::Notify::new(),
            tls_serving: AtomicBool::new(false),
            tls_handshake_errors: Default::default(),
            discovery: RwLock::new(None),
        }
    }

    /// Applies an observation at the current time.
    pub fn apply(&self, observation: &Observation) {
        let now = Timestamp::now();
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        state.apply(observation, now);
        drop(state);
        self.generation.fetch_add(1, Ordering::Release);
        // Routine lines (triggered, completed) are most of a log and change no alert that
        // cannot wait for the next tick; a failure should not wait.
        let events = match observation {
            Observation::LogEvents(events) => events.as_slice(),
            Observation::LogRead(read) => read.events.as_slice(),
            _ => &[],
        };
        if events.iter().any(|e| e.severity >= Severity::Warning) {
            self.log_events_arrived.notify_one();
        }
    }

    /// Records the outcome of a state write.
    pub fn persisted(&self, result: Result<Timestamp, ()>) {
        match result {
            Ok(at) => self.last_persisted_ms.store(at.millis(), Ordering::Relaxed),
            Err(()) => {
                self.persist_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The daemon's own counters.
    pub fn daemon_stats(&self) -> DaemonStats {
        let last = self.last_persisted_ms.load(Ordering::Relaxed);
        let view = self.alerts.read().unwrap_or_else(|e| e.into_inner());
        let alerts = view
            .rules
            .iter()
            .map(|(name, severity)| {
                let count =
                    |state| view.active.iter().filter(|a| a.name() == name && a.state == state).count();
                (name.clone(), *severity, count(AlertState::Pending), count(AlertState::Firing))
            })
            .collect();
        let tls_handshake_errors = self.tls_serving.load(Ordering::Relaxed).then(|| {
            std::array::from_fn(|i| {
                (TLS_HANDSHAKE_ERRORS[i], self.tls_handshake_errors[i].load(Ordering::Relaxed))
            })
        });
        DaemonStats {
            tls_handshake_errors,
            persist_errors: self.persist_errors.load(Ordering::Relaxed),
            last_persisted: (last > 0).then_some(Timestamp(last)),
            alerts,
            alertmanagers: view.alertmanagers.clone(),
            discovery: self.discovery.read().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{LogEvent, LogRead};
    use crate::stats::WindowSpec;
    use std::time::Duration;

    fn read(severity: Severity) -> Observation {
        Observation::LogRead(LogRead {
            cluster: "c".into(),
            tailer: "t".into(),
            events: vec![LogEvent::new("k".into(), severity, String::new())],
            positions: Default::default(),
        })
    }

    #[tokio::test]
    async fn warnings_from_the_logs_wake_the_rules_and_routine_lines_do_not() {
        let app = AppState::new(State::new(WindowSpec { window_ms: 60_000, slots: 6 }));
        let wait = Duration::from_millis(50);
        app.apply(&read(Severity::Info));
        let woken = tokio::time::timeout(wait, app.log_events_arrived.notified()).await.is_ok();
        assert!(!woken, "a completed checkpoint's line is no reason for a round");
        app.apply(&read(Severity::Warning));
        let woken = tokio::time::timeout(wait, app.log_events_arrived.notified()).await.is_ok();
        assert!(woken, "an expired checkpoint's line is");
    }
}
