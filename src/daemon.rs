//! Wires the daemon together: config, persisted state, pollers, HTTP server, reloads, shutdown.
//!
//! This is the only module that owns tasks, signals and the file watcher; everything it
//! starts reports into the shared `AppState`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::app::AppState;
use crate::config::{ClusterConfig, Config, Credentials, Shard, shard_clusters};
use crate::outputs::http::{HttpState, router};
use crate::outputs::listener::{Bounded, PROBE_MAX_CONNECTIONS, PROBE_TIMEOUTS, Timeouts};
use crate::outputs::tls::{TlsListener, TlsPeer};
use crate::sources::discovery::Discovery;
use crate::sources::poller::Poller;
use crate::state::{State, persist};
use crate::stats::WindowSpec;
use crate::time::Timestamp;

/// How long config file events must be quiet before the file is read.
const RELOAD_SETTLE: Duration = Duration::from_millis(300);

/// How often sliding windows move when nothing is recorded.
const EXPIRE_EVERY: Duration = Duration::from_secs(10);

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The HTTP address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// `SENTINEL_SHARD_INDEX`/`SENTINEL_SHARD_COUNT` make no sense, or a secret cannot be read.
    #[error("{0}")]
    Shard(String),
    /// A cluster's client cannot be built (unreadable secret or CA file).
    #[error(transparent)]
    Client(#[from] crate::sources::flink::client::ClientBuildError),
    /// The listener's TLS files are missing, not PEM, or the key does not match the certificate.
    #[error("{}", .0.join("; "))]
    Tls(Vec<String>),
    /// Another daemon uses the state directory (or its lock file cannot be made).
    #[error("state.dir {dir}: {message}")]
    StateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        message: String,
    },
}

/// The lock file in the state directory: one daemon per directory (two wrote the same state
/// file, 47 rename errors in 30 s).
pub const LOCK_FILE: &str = "checkpoint-sentinel.lock";

/// Takes the state directory's lock, held as long as the returned file is open.
fn lock_state_dir(dir: &Path) -> Result<std::fs::File, StartError> {
    let fail = |message: String| StartError::StateDir { dir: dir.to_path_buf(), message };
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create it: {e}")))?;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| fail(format!("cannot open {}: {e}", path.display())))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(fail(format!(
            "another checkpoint-sentinel is using this directory (it holds {}); give each daemon a state \
             directory of its own",
            path.display()
        ))),
        Err(e) => Err(fail(format!("cannot lock {}: {e}", path.display()))),
    }
}

/// The state directory's lock, held, with the (device, inode) of the directory and of the lock
/// file when it was taken: a directory removed or replaced under the daemon (its lock file
/// with it) would let a second daemon start on it, so each persist round looks again.
struct StateDirLock {
    dir: PathBuf,
    /// Held while open.
    _file: std::fs::File,
    ids: [Option<(u64, u64)>; 2],
}

/// The (device, inode) of `path`, `None` if there is none.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl StateDirLock {
    fn take(dir: &Path) -> Result<StateDirLock, StartError> {
        let file = lock_state_dir(dir)?;
        let ids = [identity(dir), identity(&dir.join(LOCK_FILE))];
        Ok(StateDirLock { dir: dir.to_path_buf(), _file: file, ids })
    }

    /// Whether the directory or its lock file is not the one locked any more: then, loudly,
    /// the directory is made again and the lock taken again (the caller writes everything it
    /// holds). A second daemon that got there first is logged; this one keeps the old lock.
    fn retake_if_replaced(&mut self) -> bool {
        let now = [identity(&self.dir), identity(&self.dir.join(LOCK_FILE))];
        if now == self.ids {
            return false;
        }
        tracing::error!(
            dir = %self.dir.display(),
            "THE STATE DIRECTORY WAS REMOVED OR REPLACED while running: making it again, taking its lock \
             again and writing the state and the checkpoint store anew"
        );
        match StateDirLock::take(&self.dir) {
            Ok(fresh) => *self = fresh,
            Err(e) => tracing::error!("cannot lock the state directory again: {e}"),
        }
        true
    }
}

/// A running daemon.
pub struct Running {
    /// The address the HTTP server listens on.
    pub addr: SocketAddr,
    /// The probe port's address, when `[server] probe_listen` is set.
    pub probe_addr: Option<SocketAddr>,
    /// The shared state (for tests and one-shot commands).
    pub app: Arc<AppState>,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Running {
    /// Stops pollers and the server, writes the state one last time, and waits for all of it.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// The window of the histograms from the config.
pub fn window_of(config: &Config) -> WindowSpec {
    WindowSpec { window_ms: config.stats.window.as_millis() as u64, slots: config.stats.window_slots }
}

/// Loads the persisted state from `dir`, or starts empty. A corrupt file is moved aside (and
/// logged), never a reason to refuse to start: counts come back from Flink's own counts.
fn load_state(dir: &Path, window: WindowSpec) -> State {
    match persist::load(dir) {
        Ok(Some(persisted)) => {
            tracing::info!(dir = %dir.display(), "restored state");
            persist::restore(window, persisted)
        }
        Ok(None) => State::new(window),
        Err(e) => {
            let aside = dir.join(format!("{}.corrupt-{}", persist::STATE_FILE, Timestamp::now().millis()));
            let _ = std::fs::rename(dir.join(persist::STATE_FILE), &aside);
            tracing::error!(moved_to = %aside.display(), "cannot restore state, starting empty: {e}");
            State::new(window)
        }
    }
}

/// One line at start-up: the version, the config file, the state directory and what was
/// restored from it.
fn log_start(config: &Config, config_path: Option<&Path>, saved: bool, state: &State) {
    let jobs: Vec<&crate::state::JobState> =
        state.clusters().values().flat_map(|c| c.jobs.values().map(|j| &**j)).collect();
    let checkpoints: u64 = jobs.iter().map(|j| j.totals().completed + j.totals().failed).sum();
    let restored = if saved {
        format!("{} jobs and {checkpoints} counted checkpoints restored", jobs.len())
    } else {
        "no saved state".to_string()
    };
    tracing::info!(
        version = crate::telemetry::VERSION,
        revision = crate::telemetry::REVISION,
        config = %config_path.map_or_else(|| "(none)".to_string(), |p| p.display().to_string()),
        state_dir = %config.state.dir.display(),
        restored = %restored,
        "checkpoint-sentinel {} starting",
        crate::telemetry::VERSION
    );
}

/// One line for each thing an empty list switches off, so that `logs = []` and
/// `alertmanagers = []` are never silent.
fn log_what_is_off(config: &Config) {
    if config.logs.is_empty() && config.discovery.defaults.logs.is_none() {
        tracing::warn!(
            "no [[logs]]: the JobManager log is not followed, so the log-based alerts \
             (FlinkCheckpointExpiredBurst, FlinkCheckpointDeclinedBurst, FlinkCheckpointBarrierMissing), \
             root causes and the sub-second failure alerts are off; add a [[logs]] entry per cluster"
        );
    }
    if config.alerting.alertmanagers.is_empty() {
        tracing::warn!(
            "no [alerting] alertmanagers: alerts are evaluated and shown (/api/v1/alerts, \
             checkpoint_sentinel_alerts) but page nobody; list your Alertmanager URLs to be paged"
        );
    }
}

/// Opens the checkpoint store, when enabled. A damaged file is moved aside by the store; one
/// that cannot be opened at all is logged and opened again by the persister's writes (with
/// back-off; the records wait in the outbox and the state file meanwhile), never a reason to
/// refuse to start.
fn open_store(config: &Config) -> Option<crate::state::store::Store> {
    use crate::state::store::Store;
    if !config.store.enabled {
        return None;
    }
    let bounds = config.store.bounds();
    match Store::open(&config.state.dir, bounds) {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::error!("cannot open the checkpoint store, trying again with the next state write: {e}");
            Some(Store::closed(&config.state.dir, bounds, Default::default()))
        }
    }
}

/// Starts the daemon with `config`. With `config_path`, the file is re-read on SIGHUP and when
/// it changes. The shard comes from `SENTINEL_SHARD_INDEX`/`SENTINEL_SHARD_COUNT`.
pub async fn start(config: Config, config_path: Option<PathBuf>) -> Result<Running, StartError> {
    let shard = Config::shard_from_env().map_err(StartError::Shard)?;
    start_sharded(config, config_path, shard).await
}

/// [`start`] as replica `shard` of a sharded deployment (`None`: not sharded).
pub async fn start_sharded(
    config: Config,
    config_path: Option<PathBuf>,
    shard: Option<Shard>,
) -> Result<Running, StartError> {
    let config = config.for_shard(shard);
    log_shard(&config, shard);
    let lock = StateDirLock::take(&config.state.dir)?;
    let saved = config.state.dir.join(persist::STATE_FILE).exists();
    let mut state = load_state(&config.state.dir, window_of(&config));
    // Discovery reads its files before the state is trimmed, so what was persisted about a
    // discovered cluster is kept over a restart.
    let mut discovery = config
        .discovery
        .enabled()
        .then(|| Discovery::new(config.discovery.clone(), static_names(&config.clusters)));
    let discovered = first_reading(&mut discovery, shard).await;
    let clusters = all_clusters(&config.clusters, &discovered);
    state.retain_clusters(&clusters.iter().map(|c| c.name.clone()).collect::<Vec<_>>());
    log_start(&config, config_path.as_deref(), saved, &state);
    log_what_is_off(&config);
    let app = shared_state(&config, state);

    let tls = crate::outputs::tls::load(&config.server).map_err(StartError::Tls)?;
    let (listener, addr) = bind(config.server.listen).await?;
    let probes = match config.server.probe_listen {
        Some(listen) => Some(bind(listen).await?),
        None => None,
    };
    let probe_addr = probes.as_ref().map(|(_, addr)| *addr);

    let mut pollers = Pollers::default();
    pollers.sync(&clusters, &app)?;
    let (discovery_task, discovered_rx) = spawn_discovery(discovery, &app);
    let mut tailers = crate::sources::logs::tail::Tailers::default();
    tailers.sync(&all_logs(&config, &discovered), &config.state.dir, &app).await;

    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let listeners = (listener, probes.map(|(l, _)| l));
    let (server, tls_reloader, scheme) = serve(listeners, tls, &config.server, &app, shutdown_rx.clone())?;
    tracing::info!(%addr, ?probe_addr, scheme, clusters = clusters.len(), "checkpoint-sentinel listening");
    // Certificates are watched like the config file: cert-manager rotates them in place.
    let watched_server = tls_reloader.as_ref().map(|_| &config.server);
    let (watcher, reload_rx) = watch_for_reloads(config_path.as_deref(), watched_server);

    let (alerting_tx, alerting_rx) = watch::channel(config.clone());
    let generator_url = config.alerting.external_url.clone().unwrap_or_else(|| format!("{scheme}://{addr}"));
    let alert_task = tokio::spawn(alert_loop(app.clone(), alerting_rx, shutdown_rx.clone(), generator_url));

    let supervisor = Supervisor {
        app: app.clone(),
        shard,
        config_path,
        state_dir: config.state.dir.clone(),
        persist_every: config.state.persist_interval,
        current: config,
        pollers,
        tailers,
        discovery_task,
        discovered_rx,
        discovered,
        tls_reloader,
        alerting_tx,
        alert_task,
        server,
        _watcher: watcher,
        lock,
    };
    let task = tokio::spawn(supervisor.run(shutdown_rx, reload_rx));
    Ok(Running { addr, probe_addr, app, shutdown: shutdown_tx, task })
}

/// One line when sharded: which replica this is and how many clusters it keeps.
fn log_shard(config: &Config, shard: Option<Shard>) {
    if let Some(shard) = shard {
        tracing::info!(
            shard = shard.index,
            of = shard.count,
            clusters = config.clusters.len(),
            "sharded: watching the clusters this replica owns"
        );
    }
}

/// Starts `discovery`'s Kubernetes watch (it waits up to `initial_wait` for the first complete
/// listing) and gives the clusters this replica polls of what was discovered so far.
async fn first_reading(discovery: &mut Option<Discovery>, shard: Option<Shard>) -> Vec<ClusterConfig> {
    if let Some(d) = discovery {
        d.start_kubernetes().await;
    }
    discovery.as_ref().map(|d| shard_clusters(d.clusters.clone(), shard)).unwrap_or_default()
}

/// The state shared by the daemon's tasks, with the checkpoint store when it opens (its outbox
/// is filled only then) and the `[metrics]` settings.
fn shared_state(config: &Config, mut state: State) -> Arc<AppState> {
    let store = open_store(config);
    if store.is_some() {
        state.outbox.enable();
    } else if !state.outbox.is_empty() {
        tracing::warn!(
            records = state.outbox.len(),
            "the saved state holds records for the checkpoint store, which is off: they are not written"
        );
        state.outbox.disable();
    }
    state.keep_operator_histograms(config.metrics.operators);
    state.keep_recent_checkpoints(config.state.recent_checkpoints);
    state.keep_p95_history(config.state.p95_history_points);
    let app = Arc::new(AppState::new(state));
    *app.metrics.write().unwrap_or_else(|e| e.into_inner()) = config.metrics.clone();
    *app.thread_dumps.write().unwrap_or_else(|e| e.into_inner()) = config.thread_dumps.clone();
    *app.evidence.write().unwrap_or_else(|e| e.into_inner()) = config.evidence.clone();
    if let Some(store) = store {
        let _ = app.store.set(Arc::new(store));
    }
    app
}

/// The listener on `listen` and the address it got (the port, when `listen` asks for any).
async fn bind(listen: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), StartError> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| StartError::Listen { addr: listen, source })?;
    let addr = listener.local_addr().map_err(|source| StartError::Listen { addr: listen, source })?;
    Ok((listener, addr))
}

/// Serves the HTTP API on the first listener, over TLS when `tls` is given, behind the
/// configured access, and the probes alone on the second (the probe port), until `shutdown`;
/// the server task (both servers), the TLS reloader (with TLS) and the scheme.
fn serve(
    (listener, probe_listener): (tokio::net::TcpListener, Option<tokio::net::TcpListener>),
    tls: Option<crate::outputs::tls::Loaded>,
    server: &crate::config::ServerConfig,
    app: &Arc<AppState>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(JoinHandle<()>, Option<crate::outputs::tls::Reloader>, &'static str), StartError> {
    let access = server.access().map_err(StartError::Shard)?;
    let handlers = HttpState::new(app.clone());
    let probes = probe_listener.map(|l| serve_probes(l, handlers.clone(), shutdown.clone()));
    let http =
        crate::outputs::access::protect(&access, server.tls_client_ca_file.is_some(), router(handlers));
    let graceful = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (main, reloader) = match tls {
        Some(loaded) => {
            let (listener, reloader) =
                TlsListener::new(listener, loaded, app.listener.clone(), server.max_connections)
                    .map_err(|source| StartError::Listen { addr: server.listen, source })?;
            let listener =
                Bounded::new(listener, app.listener.clone(), server.max_connections, Timeouts::default());
            let serve = axum::serve(listener, http.into_make_service_with_connect_info::<TlsPeer>())
                .with_graceful_shutdown(graceful);
            (spawn_server(serve, scheme), Some(reloader))
        }
        None => {
            let listener =
                Bounded::new(listener, app.listener.clone(), server.max_connections, Timeouts::default());
            (spawn_server(axum::serve(listener, http).with_graceful_shutdown(graceful), scheme), None)
        }
    };
    let both = tokio::spawn(async move {
        let _ = main.await;
        if let Some(probes) = probes {
            let _ = probes.await;
        }
    });
    Ok((both, reloader, scheme))
}

/// Serves /healthz and /readyz alone on the probe port (`[server] probe_listen`): plain HTTP,
/// no credentials (as on the main port), on connection slots of its own with short timeouts,
/// so that a kubelet's probe is answered while the main port is at its cap. Its connections
/// are counted apart (not exported: `checkpoint_sentinel_http_connections` is the main port's).
fn serve_probes(
    listener: tokio::net::TcpListener,
    handlers: HttpState,
    mut shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    let stats = Arc::new(crate::outputs::listener::ListenerStats::default());
    let listener = Bounded::new(listener, stats, PROBE_MAX_CONNECTIONS, PROBE_TIMEOUTS);
    let graceful = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    let probes = crate::outputs::http::probe_router(handlers);
    spawn_server(axum::serve(listener, probes).with_graceful_shutdown(graceful), "probe")
}

/// Asks for a reload when the config file or (given the running `[server]`) its TLS files
/// change, and on SIGHUP; the watcher lives as long as it is kept.
fn watch_for_reloads(
    config_path: Option<&Path>,
    tls_files_of: Option<&crate::config::ServerConfig>,
) -> (Option<notify::RecommendedWatcher>, mpsc::Receiver<()>) {
    let (reload_tx, reload_rx) = mpsc::channel::<()>(4);
    let tls_files = tls_files_of
        .into_iter()
        .flat_map(|s| [&s.tls_cert_file, &s.tls_key_file, &s.tls_client_ca_file].into_iter().flatten());
    let watched: Vec<PathBuf> =
        config_path.into_iter().map(Path::to_path_buf).chain(tls_files.cloned()).collect();
    let watcher = watch_files(&watched, reload_tx.clone());
    #[cfg(unix)]
    spawn_sighup(reload_tx);
    (watcher, reload_rx)
}

/// The daemon's main task once started: it owns the pollers, the tailers and discovery, keeps
/// them in step with discovery and with reloads, persists the state and expires windows, and
/// stops everything on shutdown.
struct Supervisor {
    app: Arc<AppState>,
    shard: Option<Shard>,
    config_path: Option<PathBuf>,
    /// The state directory and how often it is written, as at start (a change needs a restart).
    state_dir: PathBuf,
    persist_every: Duration,
    /// The running configuration: the one started with, then each accepted reload.
    current: Config,
    pollers: Pollers,
    tailers: crate::sources::logs::tail::Tailers,
    discovery_task: Option<JoinHandle<()>>,
    discovered_rx: watch::Receiver<Vec<ClusterConfig>>,
    /// The discovered clusters this replica polls.
    discovered: Vec<ClusterConfig>,
    tls_reloader: Option<crate::outputs::tls::Reloader>,
    /// Hands each reloaded config to the rule loop.
    alerting_tx: watch::Sender<Config>,
    alert_task: JoinHandle<()>,
    server: JoinHandle<()>,
    /// The file watcher stops when dropped, and the state directory's lock is held while its
    /// file is open: both live as long as this task.
    _watcher: Option<notify::RecommendedWatcher>,
    lock: StateDirLock,
}

impl Supervisor {
    async fn run(mut self, mut shutdown_rx: watch::Receiver<bool>, mut reload_rx: mpsc::Receiver<()>) {
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
                    self.app.state.write().unwrap_or_else(|e| e.into_inner()).expire(Timestamp::now());
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
        reload(path, self.shard, &mut self.current, &self.discovered, &mut self.pollers, &self.app);
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
        *self.app.discovery.write().unwrap_or_else(|e| e.into_inner()) = None;
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

/// Runs the HTTP(S) server until its graceful shutdown; a failure is logged.
fn spawn_server<S>(serve: S, scheme: &'static str) -> JoinHandle<()>
where
    S: std::future::IntoFuture<Output = std::io::Result<()>> + Send + 'static,
    S::IntoFuture: Send,
{
    tokio::spawn(async move {
        if let Err(e) = serve.await {
            tracing::error!("{scheme} server failed: {e}");
        }
    })
}

/// Runs until SIGTERM or SIGINT.
pub async fn run(config: Config, config_path: Option<PathBuf>) -> Result<(), StartError> {
    let stop = shutdown_signal();
    let running = start(config, config_path).await?;
    stop.await;
    tracing::info!("shutting down");
    running.shutdown().await;
    Ok(())
}

/// Ctrl-C (SIGINT) or SIGTERM, whichever comes first (the daemon's and the demo's stop).
///
/// The handlers are installed when this is called, not when the future is first awaited: a
/// signal that comes in between (the demo prints "SIGTERM stops the demo", then awaits; the
/// daemon starts, then awaits) stops the process cleanly instead of killing it.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        let interrupt = signal(SignalKind::interrupt()).ok();
        let terminate = signal(SignalKind::terminate()).ok();
        async fn received(signal: Option<Signal>) {
            match signal {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        async move {
            tokio::select! {
                _ = received(interrupt) => {},
                _ = received(terminate) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(unix)]
fn spawn_sighup(reload: mpsc::Sender<()>) {
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            return;
        };
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: reloading the configuration");
            let _ = reload.try_send(());
        }
    });
}

/// Watches the directories of `paths` (editors and Kubernetes ConfigMap and Secret mounts
/// replace files rather than write them in place) and signals a reload when one of the files
/// may have changed.
fn watch_files(paths: &[PathBuf], reload: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    if paths.is_empty() {
        return None;
    }
    let file_names: Vec<std::ffi::OsString> =
        paths.iter().filter_map(|p| p.file_name()).map(|n| n.to_os_string()).collect();
    let mut dirs: Vec<PathBuf> = paths
        .iter()
        .map(|p| p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf())
        .collect();
    dirs.sort();
    dirs.dedup();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let touches_file =
            event.paths.iter().filter_map(|p| p.file_name()).any(|n| file_names.iter().any(|f| f == n))
            // A ConfigMap or Secret update swaps the `..data` symlink; the file name itself is not
            // in the event.
            || event.paths.iter().any(|p| p.file_name().is_some_and(|n| n == "..data"));
        if touches_file && !matches!(event.kind, notify::EventKind::Access(_)) {
            let _ = reload.try_send(());
        }
    })
    .map_err(|e| tracing::warn!("cannot watch the config and TLS files, reload with SIGHUP: {e}"))
    .ok()?;
    for dir in &dirs {
        if let Err(e) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %dir.display(), "cannot watch this directory, reload with SIGHUP: {e}");
        }
    }
    Some(watcher)
}

fn reload(
    path: &Path,
    shard: Option<Shard>,
    current: &mut Config,
    discovered: &[ClusterConfig],
    pollers: &mut Pollers,
    app: &Arc<AppState>,
) {
    let new = match Config::load(path) {
        Ok(new) => new.for_shard(shard),
        Err(e) => {
            tracing::error!("configuration not reloaded, the running one stays: {e}");
            return;
        }
    };
    // Config::load checks the values; the TLS files are read as a start would read them, so
    // a reload refuses a missing file or a key that does not match, as check-config does.
    if let Err(problems) = crate::outputs::tls::load(&new.server) {
        tracing::error!(
            "configuration not reloaded, the running one stays: {}: {}",
            path.display(),
            problems.join("; ")
        );
        return;
    }
    if new == *current {
        return;
    }
    if new.clusters.is_empty() && !current.clusters.is_empty() && !new.discovery.enabled() {
        // A file caught half-written or emptied by mistake would drop every cluster's counters
        // and histograms at once (issue 15: a 2.5 s mistake took a _count from 44 to 16).
        tracing::error!(
            "configuration not reloaded, the running one stays: {}: no [[clusters]] (to stop watching every \
             cluster, restart the daemon without them)",
            path.display()
        );
        return;
    }
    if new.server != current.server
        || new.stats != current.stats
        || new.state != current.state
        || new.store != current.store
    {
        tracing::warn!("changes to [server], [stats], [state] and [store] take effect after a restart");
    }
    // Discovered clusters whose names a new [[clusters]] entry takes give way to it.
    let discovered: Vec<ClusterConfig> = {
        let names = static_names(&new.clusters);
        discovered.iter().filter(|c| !names.contains(&c.name)).cloned().collect()
    };
    if let Err(e) = pollers.sync(&all_clusters(&new.clusters, &discovered), app) {
        tracing::error!("configuration not reloaded, the running one stays: {e}");
        return;
    }
    let names: Vec<String> = all_clusters(&new.clusters, &discovered).into_iter().map(|c| c.name).collect();
    app.state.write().unwrap_or_else(|e| e.into_inner()).retain_clusters(&names);
    app.generation.fetch_add(1, Ordering::Release);
    tracing::info!(clusters = names.len(), "configuration reloaded");
    current.clusters = new.clusters;
    current.discovery = new.discovery;
    current.logs = new.logs;
    current.alerting = new.alerting;
    current.rules = new.rules;
    *app.metrics.write().unwrap_or_else(|e| e.into_inner()) = new.metrics.clone();
    app.state.write().unwrap_or_else(|e| e.into_inner()).keep_operator_histograms(new.metrics.operators);
    *app.thread_dumps.write().unwrap_or_else(|e| e.into_inner()) = new.thread_dumps.clone();
    *app.evidence.write().unwrap_or_else(|e| e.into_inner()) = new.evidence.clone();
    current.metrics = new.metrics;
}

/// The names of the `[[clusters]]` entries (they win a name clash with a discovered cluster).
fn static_names(clusters: &[ClusterConfig]) -> std::collections::BTreeSet<String> {
    clusters.iter().map(|c| c.name.clone()).collect()
}

/// The `[[logs]]` entries, then those of the discovered clusters (`[discovery.defaults.logs]`).
fn all_logs(config: &Config, discovered: &[ClusterConfig]) -> Vec<crate::config::LogConfig> {
    let taken = config.logs.iter().map(|l| l.id().to_string()).collect();
    config.logs.iter().cloned().chain(config.discovery.defaults.logs_of(discovered, &taken)).collect()
}

/// The `[[clusters]]` entries, then the discovered clusters.
fn all_clusters(configured: &[ClusterConfig], discovered: &[ClusterConfig]) -> Vec<ClusterConfig> {
    configured.iter().chain(discovered).cloned().collect()
}

/// Runs pollers for exactly the configured and discovered clusters, and forgets what the state
/// held about clusters no longer among them (their series go). Unchanged clusters keep their
/// poller and what the daemon knows of them.
fn apply_clusters(
    configured: &[ClusterConfig],
    discovered: &[ClusterConfig],
    pollers: &mut Pollers,
    app: &Arc<AppState>,
) {
    let clusters = all_clusters(configured, discovered);
    if let Err(e) = pollers.sync(&clusters, app) {
        tracing::error!("discovered clusters not applied, the running ones stay: {e}");
        return;
    }
    let names: Vec<String> = clusters.into_iter().map(|c| c.name).collect();
    app.state.write().unwrap_or_else(|e| e.into_inner()).retain_clusters(&names);
    app.generation.fetch_add(1, Ordering::Release);
}

/// Starts the discovery task (when discovery is on) and publishes its first reading's stats;
/// the receiver sees every later change. Without discovery the sender lives in a task that
/// never ends, so the receiver never fires.
fn spawn_discovery(
    discovery: Option<Discovery>,
    app: &Arc<AppState>,
) -> (Option<JoinHandle<()>>, watch::Receiver<Vec<ClusterConfig>>) {
    let (tx, mut rx) = watch::channel(discovery.as_ref().map(|d| d.clusters.clone()).unwrap_or_default());
    rx.mark_unchanged();
    let task = match discovery {
        Some(d) => {
            *app.discovery.write().unwrap_or_else(|e| e.into_inner()) = Some(d.stats.clone());
            let app = app.clone();
            tokio::spawn(d.run(tx, move |stats| {
                *app.discovery.write().unwrap_or_else(|e| e.into_inner()) = Some(stats);
            }))
        }
        None => tokio::spawn(async move {
            tx.closed().await;
        }),
    };
    (Some(task), rx)
}

/// Evaluates the rules every `evaluation_interval`, publishes the alerts for metrics and the
/// API, and delivers them to the Alertmanagers. Picks up rule changes from reloads.
async fn alert_loop(
    app: Arc<AppState>,
    mut config: watch::Receiver<Config>,
    mut shutdown: watch::Receiver<bool>,
    generator_url: String,
) {
    let build = |c: &Config| {
        let rules = c.effective_rules();
        let notifier = crate::outputs::alerting::Notifier::new(
            &c.alerting.alertmanagers,
            c.alerting.timeout,
            c.alerting.resend_interval,
            format!(
                "{}/",
                c.alerting.external_url.as_deref().unwrap_or(&generator_url).trim_end_matches('/')
            ),
        );
        let credentials = Credentials::resolve(
            c.alerting.basic_auth.as_ref(),
            c.alerting.bearer_token.as_ref(),
            "alerting.",
        )
        .unwrap_or_else(|e| {
            tracing::error!("{e}; sending without credentials");
            Credentials::None
        });
        let notifier = notifier
            .map_err(|e| tracing::error!("cannot build the Alertmanager client: {e}; alerts are not sent"))
            .ok()
            .map(|n| n.with_credentials(credentials));
        (rules, notifier, c.alerting.evaluation_interval, c.alerting.clone())
    };
    let (rules, notifier, mut every, mut alerting) = build(&config.borrow());
    let mut evaluator = crate::rules::Evaluator::new(rules);
    // Delivery runs in a task of its own: rule rounds never wait for an Alertmanager.
    let (deliver, deliveries) = mpsc::unbounded_channel();
    let delivery = tokio::spawn(deliver_loop(app.clone(), deliveries, notifier));
    let _abort_delivery = AbortOnDrop(delivery);
    let mut tick = tokio::time::interval(every);
    let mut last_round = tokio::time::Instant::now();
    // The least gap between two rounds woken by events: EVENT_ROUND_GAP, or more when a round
    // is expensive (a round is a walk over every job), so that event-driven rounds take at most
    // 1/ROUND_DUTY_DIVISOR of a core. With 10 jobs a round takes well under a millisecond and
    // the gap stays 250 ms; at 10,000 jobs with 20,000 active alerts a round took ~200 ms, and
    // four a second kept a core busy (issue 31).
    let mut event_gap = EVENT_ROUND_GAP;
    let round = |app: &AppState, evaluator: &mut crate::rules::Evaluator, gap: &mut Duration| {
        let started = std::time::Instant::now();
        crate::app::off_the_workers(|| evaluate(app, evaluator, &deliver));
        *gap = EVENT_ROUND_GAP.max(started.elapsed() * ROUND_DUTY_DIVISOR).min(MAX_EVENT_ROUND_GAP);
        tokio::time::Instant::now()
    };
    loop {
        // When the age of a checkpoint in progress crosses the next step of its timeout: the
        // early warning is evaluated then, not at the next tick (rules::next_age_wake).
        let walk_started = std::time::Instant::now();
        let age_wake = {
            let now = Timestamp::now();
            let state = app.state.read().unwrap_or_else(|e| e.into_inner());
            crate::rules::next_age_wake(&state, now)
                .map(|at| tokio::time::Instant::now() + Duration::from_millis(at.since(now)))
        };
        // The walk over every job above, again at most 1/ROUND_DUTY_DIVISOR of a core.
        let age_wake_gap = AGE_WAKE_GAP.max(walk_started.elapsed() * ROUND_DUTY_DIVISOR);
        let far = tokio::time::Instant::now() + Duration::from_secs(3600);
        tokio::select! {
            changed = shutdown.changed() => if changed.is_err() || *shutdown.borrow() { return },
            changed = config.changed() => {
                if changed.is_err() {
                    return;
                }
                let (rules, new_notifier, new_every, new_alerting) = build(&config.borrow_and_update());
                evaluator.set_rules(rules);
                // A new notifier only when delivery changed: it holds undelivered alerts.
                if new_alerting != alerting {
                    let _ = deliver.send(Delivery::Replace(new_notifier));
                    alerting = new_alerting;
                }
                if new_every != every {
                    every = new_every;
                    tick = tokio::time::interval(every);
                }
            }
            _ = tick.tick() => {
                last_round = round(&app, &mut evaluator, &mut event_gap);
            }
            () = tokio::time::sleep_until(age_wake.unwrap_or(far).max(last_round + event_gap)) => {
                last_round = round(&app, &mut evaluator, &mut event_gap);
            }
            // Only to compute `age_wake` again with the new checkpoint in it; with many jobs
            // polls come often, so at most every AGE_WAKE_GAP (a walk over every job each time).
            () = app.checkpoint_started.notified() => {
                tokio::time::sleep(age_wake_gap).await;
            }
            () = app.log_events_arrived.notified() => {
                // A burst of failures across many jobs wakes this often: one round per gap.
                tokio::time::sleep_until(last_round + event_gap).await;
                last_round = round(&app, &mut evaluator, &mut event_gap);
            }
        }
    }
}

/// Least time between two recomputations of the next early-warning instant.
const AGE_WAKE_GAP: Duration = Duration::from_millis(50);

/// Least time between two rule rounds woken by log events (each is a round over every job).
const EVENT_ROUND_GAP: Duration = Duration::from_millis(250);

/// Event-driven rule rounds take at most this fraction of a core: the gap after a round is at
/// least this many times the round's duration.
const ROUND_DUTY_DIVISOR: u32 = 10;

/// However long rounds take, one woken by events comes within this (the early warning's
/// latency at the largest estates).
const MAX_EVENT_ROUND_GAP: Duration = Duration::from_secs(5);

/// What the rule rounds hand to the delivery task.
enum Delivery {
    /// What fires now and what resolved since the last round, at `now`.
    Round(Vec<Arc<crate::rules::Alert>>, Vec<crate::rules::Alert>, Timestamp),
    /// The Alertmanagers changed (reload).
    Replace(Option<crate::outputs::alerting::Notifier>),
}

/// Aborts a task when dropped (the delivery task ends with the rule loop).
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Delivers rounds to the Alertmanagers (all at once, each post bounded by
/// `alerting.timeout`). Rounds that arrive while a delivery is under way are merged: the
/// newest firing set, every resolved alert.
async fn deliver_loop(
    app: Arc<AppState>,
    mut rounds: mpsc::UnboundedReceiver<Delivery>,
    mut notifier: Option<crate::outputs::alerting::Notifier>,
) {
    while let Some(first) = rounds.recv().await {
        let mut pending: Option<(Vec<Arc<crate::rules::Alert>>, Vec<crate::rules::Alert>, Timestamp)> = None;
        let mut next = Some(first);
        while let Some(message) = next.take().or_else(|| rounds.try_recv().ok()) {
            match message {
                Delivery::Replace(n) => notifier = n,
                Delivery::Round(firing, resolved, now) => {
                    let mut all_resolved = pending.take().map(|(_, r, _)| r).unwrap_or_default();
                    all_resolved.extend(resolved);
                    pending = Some((firing, all_resolved, now));
                }
            }
        }
        if let (Some(n), Some((firing, resolved, now))) = (notifier.as_mut(), pending) {
            n.round(&firing, resolved, now).await;
            *app.alertmanagers.write().unwrap_or_else(|e| e.into_inner()) = n.stats();
        }
    }
}

/// One round of the rules over the current state; what fires and resolves goes to delivery.
fn evaluate(
    app: &AppState,
    evaluator: &mut crate::rules::Evaluator,
    deliver: &mpsc::UnboundedSender<Delivery>,
) {
    let now = Timestamp::now();
    let resolved = {
        let state = app.state.read().unwrap_or_else(|e| e.into_inner());
        evaluator.evaluate_with(&state, &app.daemon_facts(&state), now)
    };
    // Shared, not copied: an alert is cloned only when the evaluator changes it while the view
    // or the delivery still holds it.
    let active: Vec<Arc<crate::rules::Alert>> = evaluator.active_shared().cloned().collect();
    let firing: Vec<Arc<crate::rules::Alert>> =
        active.iter().filter(|a| a.state == crate::rules::AlertState::Firing).cloned().collect();
    {
        let mut view = app.alerts.write().unwrap_or_else(|e| e.into_inner());
        view.rules =
            evaluator.rules().iter().map(|r| (r.spec.name.clone(), r.spec.severity.as_str())).collect();
        view.set_active(active);
        view.resolved = evaluator.resolved().cloned().collect();
    }
    let _ = deliver.send(Delivery::Round(firing, resolved, now));
}

/// The running pollers, by cluster name, with the config each was started with.
#[derive(Default)]
struct Pollers {
    /// Per cluster: its config, its poller, its thread looker (`sources::threads`) and its
    /// evidence source (`sources::evidence`).
    running: HashMap<String, ClusterTasks>,
}

/// A cluster's config and its tasks: the poller, the thread looker, the evidence source.
type ClusterTasks = (ClusterConfig, JoinHandle<()>, JoinHandle<()>, JoinHandle<()>);

impl Pollers {
    /// Starts, restarts and stops pollers so that exactly `clusters` run. Builds every new
    /// client first, so a bad entry changes nothing.
    fn sync(&mut self, clusters: &[ClusterConfig], app: &Arc<AppState>) -> Result<(), StartError> {
        let mut fresh = Vec::new();
        for c in clusters {
            if self.running.get(&c.name).is_some_and(|(old, _, _, _)| old == c) {
                continue;
            }
            let looker = crate::sources::threads::Looker::new(c.clone(), app.clone())?;
            let evidence = crate::sources::evidence::EvidenceSource::new(c.clone(), app.clone())?;
            fresh.push((c.clone(), Poller::new(c.clone(), app.clone())?, looker, evidence));
        }
        self.running.retain(|name, (_, handle, looker, evidence)| {
            let keep =
                clusters.iter().any(|c| &c.name == name) && !fresh.iter().any(|(c, _, _, _)| &c.name == name);
            if !keep {
                handle.abort();
                looker.abort();
                evidence.abort();
                tracing::info!(cluster = %name, "stopped polling");
            }
            keep
        });
        for (c, poller, looker, evidence) in fresh {
            tracing::info!(cluster = %c.name, url = %crate::config::redact_url(&c.url), "polling");
            let handle = tokio::spawn(poller.run());
            let looker = tokio::spawn(looker.run());
            let evidence = tokio::spawn(evidence.run());
            self.running.insert(c.name.clone(), (c, handle, looker, evidence));
        }
        Ok(())
    }

    fn stop_all(&mut self) {
        for (_, (_, handle, looker, evidence)) in self.running.drain() {
            handle.abort();
            looker.abort();
            evidence.abort();
        }
    }
}

/// Writes the checkpoint store and then the state, if the state changed since
/// `last_generation` (or records wait for the store); returns the generation written.
///
/// Exactly-once across a `kill -9`: the snapshot and the batch for the store are taken under
/// one lock, so the batch holds exactly the records of the checkpoints the snapshot marks
/// counted that are not in the store yet. When the store takes the batch, the snapshot is
/// written without them; when it does not (a full disk, a read-only file, a store in
/// back-off), the snapshot holds them and the outbox gets them back. Either way the
/// state file is written: it never waits on a failing store, and every checkpoint it counts is
/// in the store or in it. A restart restores that section into the outbox; writing a record the
/// store already has is the same key, one record.
pub async fn persist_if_changed(app: &Arc<AppState>, dir: &Path, last_generation: u64) -> u64 {
    let generation = app.generation.load(Ordering::Acquire);
    let store = app.store.get().cloned();
    let waiting = store.is_some() && !app.state.read().unwrap_or_else(|e| e.into_inner()).outbox.is_empty();
    if generation == last_generation && !waiting {
        return last_generation;
    }
    // The batch is taken out first (moved, not copied), so the snapshot under the lock copies
    // no waiting record: with 50,000 waiting that copy was most of the lock's hold. The batch
    // joins the snapshot only if the store does not take it (below, outside the lock).
    let (mut snapshot, records, restores) = {
        let mut state = app.state.write().unwrap_or_else(|e| e.into_inner());
        log_dropped(&state.outbox.take_dropped());
        let (records, restores) = match store {
            Some(_) => (state.outbox.take(), state.outbox.take_restores()),
            None => (Vec::new(), Vec::new()),
        };
        (persist::snapshot(&state), records, restores)
    };
    let dir = dir.to_path_buf();
    let done = tokio::task::spawn_blocking(move || {
        let stored = match &store {
            Some(store) if !(records.is_empty() && restores.is_empty()) => {
                match store.write_all(&records, &restores, Timestamp::now()) {
                    Ok(written) => Some(Ok(written)),
                    Err(e) => {
                        snapshot.hold_for_store(records.clone(), restores.clone());
                        Some(Err((e, records, restores)))
                    }
                }
            }
            _ => None,
        };
        let state = persist::write_snapshot(&dir, &snapshot);
        (stored, state)
    })
    .await;
    let Ok((stored, state)) = done else {
        tracing::error!("cannot persist state: the writer panicked");
        app.persisted(Err("the writer panicked".to_string()));
        return last_generation;
    };
    note_store(app, stored);
    match state {
        Ok(()) => {
            app.persisted(Ok(Timestamp::now()));
            generation
        }
        Err(e) => {
            tracing::error!("cannot persist state: {e}");
            app.persisted(Err(e.to_string()));
            last_generation
        }
    }
}

/// A batch written, or refused with the records to put back.
type StoreOutcome = Result<
    crate::state::store::Written,
    (
        crate::state::store::StoreError,
        Vec<crate::state::outbox::Outboxed>,
        Vec<crate::state::outbox::OutboxedRestore>,
    ),
>;

/// What the store did with a batch: counted, or the batch back into the outbox (the state
/// snapshot written beside it holds it too).
fn note_store(app: &AppState, stored: Option<StoreOutcome>) {
    match stored {
        None => {}
        Some(Ok(w)) => {
            app.store_stats.records.store(w.records, Ordering::Relaxed);
            app.store_stats.pruned.fetch_add(w.pruned, Ordering::Relaxed);
        }
        Some(Err((e, records, restores))) => {
            let waiting = records.len() + restores.len();
            tracing::error!(
                waiting,
                "cannot write the checkpoint store; the records wait in the outbox and in the state file: {e}"
            );
            app.store_stats.errors.fetch_add(1, Ordering::Relaxed);
            let mut state = app.state.write().unwrap_or_else(|e| e.into_inner());
            state.outbox.put_back(records);
            state.outbox.put_back_restores(restores);
        }
    }
}

/// One line per job whose records the full outbox dropped, naming the checkpoint ids.
fn log_dropped(dropped: &[crate::state::outbox::DroppedRange]) {
    for job in dropped {
        tracing::error!(
            cluster = %job.cluster,
            job_id = %job.job_id,
            "job {}: checkpoints {} dropped: the checkpoint store kept failing and its outbox is full",
            job.job_id,
            job.describe()
        );
    }
}
