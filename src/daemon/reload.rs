//! Config reload: what asks for one (SIGHUP, a changed config or TLS file) and how a new file is
//! read, checked like a start's (`preflight`) and applied or refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::mpsc;

use super::clusters::{Pollers, all_clusters, static_names};
use crate::app::AppState;
use crate::config::{ClusterConfig, Config, Shard};

/// How long config file events must be quiet before the file is read.
pub(super) const RELOAD_SETTLE: Duration = Duration::from_millis(300);

/// Asks for a reload when the config file or (given the running `[server]`) its TLS files
/// change, and on SIGHUP; the watcher lives as long as it is kept.
pub(super) fn watch_for_reloads(
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

/// The config file at `path` read and checked as `run` and `check-config` check it
/// (`Config::load`, then `preflight::check`: the secret and TLS files, `state.dir`, at least one
/// cluster), on a blocking thread: it reads files, which must not hold a runtime worker. The
/// error is the line to log.
async fn load_checked(path: &Path) -> Result<Config, String> {
    let path = path.to_path_buf();
    let checked = tokio::task::spawn_blocking(move || {
        let config = Config::load(&path).map_err(|e| e.to_string())?;
        let problems = crate::preflight::check(&config);
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(format!("{}: {}", path.display(), problems.join("; ")))
        }
    })
    .await;
    checked.unwrap_or_else(|e| Err(format!("the configuration could not be read: {e}")))
}

/// Reads the config file again and applies what can change while running (clusters, logs,
/// discovery, alerting, rules, metrics, thread dumps, evidence); a file that a start would
/// refuse is refused, and the running configuration stays.
pub(super) async fn reload(
    path: &Path,
    shard: Option<Shard>,
    current: &mut Config,
    discovered: &[ClusterConfig],
    pollers: &mut Pollers,
    app: &Arc<AppState>,
) {
    // Checked before `for_shard`, as `run` checks it: a replica that owns none of the clusters
    // is not refused for having none.
    let new = match load_checked(path).await {
        Ok(new) => new.for_shard(shard),
        Err(e) => {
            tracing::error!("configuration not reloaded, the running one stays: {e}");
            return;
        }
    };
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
    app.state.write().retain_clusters(&names);
    app.generation.fetch_add(1, Ordering::Release);
    tracing::info!(clusters = names.len(), "configuration reloaded");
    current.clusters = new.clusters;
    current.discovery = new.discovery;
    current.logs = new.logs;
    current.alerting = new.alerting;
    current.rules = new.rules;
    *app.metrics.write() = new.metrics.clone();
    app.state.write().keep_operator_histograms(new.metrics.operators);
    *app.thread_dumps.write() = new.thread_dumps.clone();
    *app.evidence.write() = new.evidence.clone();
    *app.storage.write() = new.storage.clone();
    current.metrics = new.metrics;
}
