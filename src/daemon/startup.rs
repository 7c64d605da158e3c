//! What start-up does before the tasks run: restores the state, opens the checkpoint store,
//! builds the shared `AppState` and logs what the daemon starts with.

use std::path::Path;
use std::sync::Arc;

use crate::app::AppState;
use crate::config::{Config, Shard};
use crate::state::{State, persist};
use crate::stats::WindowSpec;
use crate::time::Timestamp;

/// Loads the persisted state from `dir`, or starts empty. A corrupt file is moved aside (and
/// logged), never a reason to refuse to start: counts come back from Flink's own counts.
pub(super) fn load_state(dir: &Path, window: WindowSpec) -> State {
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
pub(super) fn log_start(config: &Config, config_path: Option<&Path>, saved: bool, state: &State) {
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
pub(super) fn log_what_is_off(config: &Config) {
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

/// One line when sharded: which replica this is and how many clusters it keeps.
pub(super) fn log_shard(config: &Config, shard: Option<Shard>) {
    if let Some(shard) = shard {
        tracing::info!(
            shard = shard.index,
            of = shard.count,
            clusters = config.clusters.len(),
            "sharded: watching the clusters this replica owns"
        );
    }
}

/// The state shared by the daemon's tasks, with the checkpoint store when it opens (its outbox
/// is filled only then) and the `[metrics]` settings.
pub(super) fn shared_state(config: &Config, mut state: State) -> Arc<AppState> {
    let store = open_store(config);
    let dropped = state.keep_for_store(store.is_some());
    if dropped > 0 {
        tracing::warn!(
            records = dropped,
            "the saved state holds records for the checkpoint store, which is off: they are not written"
        );
    }
    state.keep_operator_histograms(config.metrics.operators);
    state.keep_recent_checkpoints(config.state.recent_checkpoints);
    state.keep_p95_history(config.state.p95_history_points);
    let app = Arc::new(AppState::new(state));
    *app.metrics.write() = config.metrics.clone();
    *app.thread_dumps.write() = config.thread_dumps.clone();
    *app.evidence.write() = config.evidence.clone();
    *app.storage.write() = config.storage.clone();
    if let Some(store) = store {
        let _ = app.store.set(Arc::new(store));
    }
    app
}
