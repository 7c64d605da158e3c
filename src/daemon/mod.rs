//! Wires the daemon together: config, persisted state, pollers, HTTP server, reloads, shutdown.
//!
//! It starts, keeps in step and stops the daemon's tasks, and owns the signals and the config's
//! file watcher; everything it starts reports into the shared `AppState`. Its parts: `lock` (the
//! state directory), `startup` (state, store, logs), `serve` (the ports), `clusters` (pollers and
//! discovery), `reload`, `alerts` (the rule loop and delivery), `persister`, and `supervisor` (the
//! main task that keeps them in step).

mod alerts;
mod clusters;
mod error;
mod lock;
mod persister;
mod reload;
mod serve;
mod startup;
mod supervisor;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub(crate) use error::StartError;
pub use persister::persist_if_changed;

use alerts::alert_loop;
use clusters::{Pollers, all_clusters, all_logs, first_reading, spawn_discovery, static_names};
use lock::StateDirLock;
use reload::watch_for_reloads;
use serve::{bind, serve};
use startup::{load_state, log_shard, log_start, log_what_is_off, shared_state};
use supervisor::Supervisor;

use crate::app::AppState;
use crate::config::{Config, Shard};
use crate::sources::discovery::Discovery;
use crate::state::persist;
use crate::stats::WindowSpec;

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
