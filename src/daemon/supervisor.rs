//! The daemon's main task once started: keeps pollers, tailers and discovery in step with
//! discovery and reloads, persists the state, expires windows, and stops it all on shutdown.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::clusters::{Pollers, all_logs, apply_clusters, first_reading, spawn_discovery, static_names};
use super::lock::StateDirLock;
use super::persister::persist_if_changed;
use super::reload::{RELOAD_SETTLE, reload};
use crate::app::AppState;
use crate::config::{ClusterConfig, Config, Shard, shard_clusters};
use crate::sources::discovery::Discovery;
use crate::time::Timestamp;

/// How often sliding windows move when nothing is recorded.
const EXPIRE_EVERY: Duration = Duration::from_secs(10);

/// The daemon's main task once started: it owns the pollers, the tailers and discovery, keeps
/// them in step with discovery and with reloads, persists the state and expires windows, and
/// stops everything on shutdown.
pub(super) struct Supervisor {
    pub(super) app: Arc<AppState>,
    pub(super) shard: Option<Shard>,
    pub(super) config_path: Option<PathBuf>,
    /// The state directory and how often it is written, as at start (a change needs a restart).
    pub(super) state_dir: PathBuf,
    pub(super) persist_every: Duration,
    /// The running configuration: the one started with, then each accepted reload.
    pub(super) current: Config,
    pub(super) pollers: Pollers,
    pub(super) tailers: crate::sources::logs::tail::Tailers,
    pub(super) discovery_task: Option<JoinHandle<()>>,
    pub(super) discovered_rx: watch::Receiver<Vec<ClusterConfig>>,
    /// The discovered clusters this replica polls.
    pub(super) discovered: Vec<ClusterConfig>,
    pub(super) tls_reloader: Option<crate::outputs::tls::Reloader>,
    /// Hands each reloaded config to the rule loop.
    pub(super) alerting_tx: watch::Sender<Config>,
    pub(super) alert_task: JoinHandle<()>,
    pub(super) server: JoinHandle<()>,
    /// The file watcher stops when dropped, and the state directory's lock is held while its
    /// file is open: both live as long as this task.
    pub(super) _watcher: Option<notify::RecommendedWatcher>,
    pub(super) lock: StateDirLock,
}

impl Supervisor {
    pub(super) async fn run(
        mut self,
        mut shutdown_rx: watch::Receiver<bool>,
        mut reload_rx: mpsc::Receiver<()>,
    ) {
        let mut persist_tick = tokio::time::interval(self.persist_every);
        let mut expire_tick = tokio::time::interval(EXPIRE_EVERY);
        let mut persisted_generation = u64::MAX;
        loop {
            tokio::select! {
                changed = shutdown_rx.changed() => if changed.is_err() || *shutdown_rx.borrow() { break },
                _ = persist_tick.tick() => {
                    if self.lock.retake_if_replaced() {
                        // Everything again: the state file (any generation), and the store
                        // notices its file is gone and writes a new one with all it held.
                        persisted_generation = u64::MAX;
                        if let Some(store) = self.app.store.get() {
                            store.follow_file(Timestamp::now());
                        }
                    }
                    persisted_generation = persist_if_changed(&self.app, &self.state_dir, persisted_generation).await;
                }
                _ = expire_tick.tick() => {
                    self.app.state.write().expire(Timestamp::now());
                }
                Ok(()) = self.discovered_rx.changed() => self.on_discovered().await,
                Some(()) = reload_rx.recv() => {
                    // A file written in place shows up as several events, the first one while it
                    // is still empty (truncated): let the writes settle, then read it once.
                    tokio::time::sleep(RELOAD_SETTLE).await;
                    while reload_rx.try_recv().is_ok() {}
                    self.on_reload().await;
                }
            }
        }
        self.stop(persisted_generation).await;
    }

    /// Discovery found a different set of clusters: pollers and tailers for exactly these.
    async fn on_discovered(&mut self) {
        self.discovered = shard_clusters(self.discovered_rx.borrow_and_update().clone(), self.shard);
        // Tailers first: a stopped tailer applies its last cycle, which must not bring back the
        // state of a cluster that is going.
        self.tailers.sync(&all_logs(&self.current, &self.discovered), &self.state_dir, &self.app).await;
        apply_clusters(&self.current.clusters, &self.discovered, &mut self.pollers, &self.app);
    }

    /// SIGHUP or a changed file: the TLS files re-read, then the config file.
    async fn on_reload(&mut self) {
        // The running [server] section's files: a change of paths needs a restart.
        if let Some(tls) = &mut self.tls_reloader {
            tls.reload(&self.current.server);
        }
        let Some(path) = &self.config_path else { return };
        let before = (self.current.discovery.clone(), static_names(&self.current.clusters));
        reload(path, self.shard, &mut self.current, &self.discovered, &mut self.pollers, &self.app).await;
        // New discovery settings or [[clusters]] names (they win a name clash): discovery
        // starts over, and its first reading applies at once.
        if before != (self.current.discovery.clone(), static_names(&self.current.clusters)) {
            self.restart_discovery().await;
        }
        self.tailers.sync(&all_logs(&self.current, &self.discovered), &self.state_dir, &self.app).await;
        let _ = self.alerting_tx.send(self.current.clone());
    }

    /// Discovery started over with the running settings, its first reading applied.
    async fn restart_discovery(&mut self) {
        if let Some(task) = self.discovery_task.take() {
            task.abort();
        }
        let config = self.current.discovery.clone();
        let names = static_names(&self.current.clusters);
        let mut fresh = if config.enabled() {
            tokio::task::spawn_blocking(move || Discovery::new(config, names)).await.ok()
        } else {
            None
        };
        self.discovered = first_reading(&mut fresh, self.shard).await;
        *self.app.discovery.write() = None;
        (self.discovery_task, self.discovered_rx) = spawn_discovery(fresh, &self.app);
        apply_clusters(&self.current.clusters, &self.discovered, &mut self.pollers, &self.app);
    }

    /// Stops every task, lets open connections finish (for at most 10 s), and writes the state
    /// one last time; the watcher and the lock go last, with `self`.
    async fn stop(mut self, persisted_generation: u64) {
        if let Some(task) = self.discovery_task.take() {
            task.abort();
        }
        self.pollers.stop_all();
        self.tailers.stop_all().await;
        let _ = self.alert_task.await;
        // Graceful: open connections finish, but not for longer than this.
        if tokio::time::timeout(Duration::from_secs(10), self.server).await.is_err() {
            tracing::warn!("connections still open after 10 s; stopping without them");
        }
        persist_if_changed(&self.app, &self.state_dir, persisted_generation).await;
        tracing::info!("checkpoint-sentinel stopped");
    }
}
