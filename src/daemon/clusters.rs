//! The clusters the daemon polls: the configured and discovered ones, each with its tasks (poller,
//! thread looker, evidence source), and the discovery task that changes them.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::error::StartError;
use crate::app::AppState;
use crate::config::{ClusterConfig, Config, Shard, shard_clusters};
use crate::sources::discovery::Discovery;
use crate::sources::poller::Poller;

/// Starts `discovery`'s Kubernetes watch (it waits up to `initial_wait` for the first complete
/// listing) and gives the clusters this replica polls of what was discovered so far.
pub(super) async fn first_reading(
    discovery: &mut Option<Discovery>,
    shard: Option<Shard>,
) -> Vec<ClusterConfig> {
    if let Some(d) = discovery {
        d.start_kubernetes().await;
    }
    discovery.as_ref().map(|d| shard_clusters(d.clusters.clone(), shard)).unwrap_or_default()
}

/// The names of the `[[clusters]]` entries (they win a name clash with a discovered cluster).
pub(super) fn static_names(clusters: &[ClusterConfig]) -> std::collections::BTreeSet<String> {
    clusters.iter().map(|c| c.name.clone()).collect()
}

/// The `[[logs]]` entries, then those of the discovered clusters (`[discovery.defaults.logs]`).
pub(super) fn all_logs(config: &Config, discovered: &[ClusterConfig]) -> Vec<crate::config::LogConfig> {
    let taken = config.logs.iter().map(|l| l.id().to_string()).collect();
    config.logs.iter().cloned().chain(config.discovery.defaults.logs_of(discovered, &taken)).collect()
}

/// The `[[clusters]]` entries, then the discovered clusters.
pub(super) fn all_clusters(configured: &[ClusterConfig], discovered: &[ClusterConfig]) -> Vec<ClusterConfig> {
    configured.iter().chain(discovered).cloned().collect()
}

/// Runs pollers for exactly the configured and discovered clusters, and forgets what the state
/// held about clusters no longer among them (their series go). Unchanged clusters keep their
/// poller and what the daemon knows of them.
pub(super) fn apply_clusters(
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
    app.state.write().retain_clusters(&names);
    app.generation.fetch_add(1, Ordering::Release);
}

/// Starts the discovery task (when discovery is on) and publishes its first reading's stats;
/// the receiver sees every later change. Without discovery the sender lives in a task that
/// never ends, so the receiver never fires.
pub(super) fn spawn_discovery(
    discovery: Option<Discovery>,
    app: &Arc<AppState>,
) -> (Option<JoinHandle<()>>, watch::Receiver<Vec<ClusterConfig>>) {
    let (tx, mut rx) = watch::channel(discovery.as_ref().map(|d| d.clusters.clone()).unwrap_or_default());
    rx.mark_unchanged();
    let task = match discovery {
        Some(d) => {
            *app.discovery.write() = Some(d.stats.clone());
            let app = app.clone();
            tokio::spawn(d.run(tx, move |stats| {
                *app.discovery.write() = Some(stats);
            }))
        }
        None => tokio::spawn(async move {
            tx.closed().await;
        }),
    };
    (Some(task), rx)
}

/// The running pollers, by cluster name, with the config each was started with.
#[derive(Default)]
pub(super) struct Pollers {
    /// Per cluster: its config, its poller, its thread looker (`sources::threads`), its
    /// evidence source (`sources::evidence`) and its storage source (`sources::storage`).
    running: HashMap<String, ClusterTasks>,
}

/// A cluster's config and its tasks: the poller, the thread looker, the evidence source, the
/// storage source.
type ClusterTasks = (ClusterConfig, JoinHandle<()>, JoinHandle<()>, JoinHandle<()>, JoinHandle<()>);

impl Pollers {
    /// Starts, restarts and stops pollers so that exactly `clusters` run. Builds every new
    /// client first, so a bad entry changes nothing.
    pub(super) fn sync(&mut self, clusters: &[ClusterConfig], app: &Arc<AppState>) -> Result<(), StartError> {
        let mut fresh = Vec::new();
        for c in clusters {
            if self.running.get(&c.name).is_some_and(|(old, ..)| old == c) {
                continue;
            }
            let looker = crate::sources::threads::Looker::new(c.clone(), app.clone())?;
            let evidence = crate::sources::evidence::EvidenceSource::new(c.clone(), app.clone())?;
            fresh.push((c.clone(), Poller::new(c.clone(), app.clone())?, looker, evidence));
        }
        self.running.retain(|name, (_, handle, looker, evidence, storage)| {
            let keep =
                clusters.iter().any(|c| &c.name == name) && !fresh.iter().any(|(c, _, _, _)| &c.name == name);
            if !keep {
                handle.abort();
                looker.abort();
                evidence.abort();
                storage.abort();
                tracing::info!(cluster = %name, "stopped polling");
            }
            keep
        });
        for (c, poller, looker, evidence) in fresh {
            tracing::info!(cluster = %c.name, url = %crate::config::redact_url(&c.url), "polling");
            let handle = tokio::spawn(poller.run());
            let looker = tokio::spawn(looker.run());
            let evidence = tokio::spawn(evidence.run());
            let storage =
                tokio::spawn(crate::sources::storage::StorageSource::new(c.clone(), app.clone()).run());
            self.running.insert(c.name.clone(), (c, handle, looker, evidence, storage));
        }
        Ok(())
    }

    pub(super) fn stop_all(&mut self) {
        for (_, (_, handle, looker, evidence, storage)) in self.running.drain() {
            handle.abort();
            looker.abort();
            evidence.abort();
            storage.abort();
        }
    }
}
