//! The state shared between the sources, the HTTP server and the persister.

use std::sync::RwLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::export::DaemonStats;
use crate::observe::Observation;
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
}

impl AppState {
    /// Shares `state`.
    pub fn new(state: State) -> Self {
        AppState {
            state: RwLock::new(state),
            generation: AtomicU64::new(0),
            persist_errors: AtomicU64::new(0),
            last_persisted_ms: AtomicI64::new(0),
        }
    }

    /// Applies an observation at the current time.
    pub fn apply(&self, observation: &Observation) {
        let now = Timestamp::now();
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        state.apply(observation, now);
        self.generation.fetch_add(1, Ordering::Release);
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
        DaemonStats {
            persist_errors: self.persist_errors.load(Ordering::Relaxed),
            last_persisted: (last > 0).then_some(Timestamp(last)),
        }
    }
}
