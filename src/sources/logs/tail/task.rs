//! The tailer's task, its I/O edge: a tokio task per `[[logs]]` entry that reads the clock,
//! runs the core's cycles on a blocking thread, applies what they read to the state, and wakes
//! early on `notify` file events.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::cycle::{TailCore, TailOptions};
use super::list::fixed_prefix;
use crate::app::AppState;
use crate::config::LogConfig;
use crate::observe::{LogKind, Observation, TailerReport};
use crate::sources::logs::offsets::{self, TailerPositions};
use crate::sources::logs::parse::{Patterns, UserPattern};
use crate::time::Timestamp;

/// A stopping tailer gets this long to apply its last cycle; then shutdown goes on without it.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The user patterns of a config entry, as compiled when the config was read (a config with
/// one that does not compile is refused). Should one come here uncompiled all the same, it is
/// left out with an error in the log, never silently.
pub fn user_patterns(config: &LogConfig) -> Vec<UserPattern> {
    config
        .patterns
        .iter()
        .filter_map(|p| match p.regex.regex() {
            Ok(regex) => Some(UserPattern {
                regex: regex.clone(),
                kind: LogKind::from_name(&p.kind),
                severity: p.severity,
            }),
            Err(e) => {
                tracing::error!(cluster = %config.cluster, pattern = %p.name, regex = %p.regex.as_str(), error = %e, "a [[logs.patterns]] regex does not compile: pattern left out");
                None
            }
        })
        .collect()
}

impl TailCore {
    /// Directories to watch for the wake-up hint: the fixed prefix of each glob.
    pub(crate) fn watch_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> =
            self.options().paths.iter().map(|p| fixed_prefix(Path::new(p))).collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    /// Watches the globs' directories for file events: each one wakes `hint`, and creations of
    /// matching files are counted, so that a file created and gone again before a cycle listed
    /// it shows up in `rotation_gaps`. Returns whether events are available (not on every
    /// filesystem); without them the tailer only polls.
    pub fn watch(&mut self, hint: Option<mpsc::Sender<()>>) -> bool {
        use notify::Watcher;
        use notify::event::{CreateKind, EventKind};
        let patterns: Vec<glob::Pattern> =
            self.options().paths.iter().filter_map(|p| glob::Pattern::new(p).ok()).collect();
        let created = self.created.clone();
        let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            let matching = |p: &PathBuf| {
                let p = p.strip_prefix(".").unwrap_or(p);
                patterns.iter().any(|pattern| pattern.matches_path(p))
            };
            let n = if event.need_rescan() {
                // The kernel dropped events: whether a file came and went is unknown.
                1
            } else if matches!(event.kind, EventKind::Create(kind) if kind != CreateKind::Folder) {
                event.paths.iter().filter(|p| matching(p)).count() as u64
            } else {
                0
            };
            if n > 0 {
                created.fetch_add(n, Ordering::Release);
            }
            if let Some(hint) = &hint
                && !matches!(event.kind, EventKind::Access(_))
            {
                let _ = hint.try_send(());
            }
        });
        let mut watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!("no file events, polling only: {e}");
                return false;
            }
        };
        let mut any = false;
        for dir in self.watch_dirs() {
            match watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
                Ok(()) => any = true,
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), "no file events for this directory, polling only: {e}")
                }
            }
        }
        self.watcher = Some(watcher);
        any
    }
}

/// A running tailer task.
pub struct TailerHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl TailerHandle {
    /// Asks the tailer to stop, and waits until its last cycle is applied to the state, at
    /// most [`STOP_TIMEOUT`] (a cycle stuck on a file system must not hold shutdown).
    pub(crate) async fn stop(self) {
        let _ = self.stop.send(true);
        let abort = self.task.abort_handle();
        if tokio::time::timeout(STOP_TIMEOUT, self.task).await.is_err() {
            abort.abort();
            tracing::warn!(
                "a log tailer did not stop within {STOP_TIMEOUT:?}; going on without its last cycle"
            );
        }
    }
}

/// Starts a tailer that applies its events to `app`.
pub fn spawn(config: &LogConfig, state_dir: &Path, app: Arc<AppState>) -> TailerHandle {
    let resume = resume_positions(config, state_dir, &app);
    let core = TailCore::new(TailOptions::from_config(config), Patterns::new(user_patterns(config)), resume);
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run(core, app, config.poll_interval, stop_rx));
    TailerHandle { stop, task }
}

/// Where a tailer resumes: its positions in the state (restored from the state file with the
/// counters they match), or, on the first start after an upgrade, the offsets file an earlier
/// version kept beside it.
fn resume_positions(config: &LogConfig, state_dir: &Path, app: &AppState) -> Option<TailerPositions> {
    let in_state = {
        let state = app.state.read();
        state.clusters().get(&config.cluster).and_then(|c| c.logs.positions.get(config.id())).cloned()
    };
    if in_state.is_some() {
        return in_state;
    }
    let legacy = offsets::legacy_path(state_dir, config.id());
    offsets::load_legacy(&legacy).unwrap_or_else(|e| {
        tracing::error!(path = %legacy.display(), "cannot read the log positions of an earlier version: {e}");
        None
    })
}

/// Cycles until stopped: at once again while a file has more to read than one cycle's
/// budget, else when a file event or a record's flush is due, at the latest after
/// `poll_interval`.
async fn run(
    mut core: TailCore,
    app: Arc<AppState>,
    poll_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let (hint_tx, mut hint_rx) = mpsc::channel::<()>(1);
    core.watch(Some(hint_tx));
    let mut core = Some(core);
    let mut last_report = TailerReport::default();
    loop {
        let Some(c) = core.take() else { return };
        let app_for_cycle = app.clone();
        let previous = last_report.clone();
        let cycled = tokio::task::spawn_blocking(move || cycle_and_apply(c, &app_for_cycle, &previous)).await;
        let wait;
        match cycled {
            Ok((c, report)) => {
                last_report = report;
                let more = c.more;
                wait = c.flush_due_in(Instant::now()).map_or(poll_interval, |due| due.min(poll_interval));
                core = Some(c);
                if *stop.borrow() {
                    break;
                }
                if more {
                    tokio::task::yield_now().await;
                    continue;
                }
            }
            Err(e) => {
                tracing::error!("log tailer stopped: {e}");
                return;
            }
        }
        tokio::select! {
            _ = stop.changed() => break,
            _ = hint_rx.recv() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// One cycle at the clock's time, its events, positions, cut files and counters applied to
/// `app` (the counters when they changed since `previous`). Blocking: file reads.
fn cycle_and_apply(mut c: TailCore, app: &AppState, previous: &TailerReport) -> (TailCore, TailerReport) {
    let events = c.cycle(Instant::now(), Timestamp::now());
    // The events and the positions after them go into the state as one observation:
    // whatever snapshot of the state is persisted holds both or neither.
    if c.take_moved() || !events.is_empty() || c.has_spans() {
        app.apply(&Observation::LogRead(c.read(events)));
    }
    let cut = c.take_files_cut();
    app.count_cut(&c.options().cluster, "log_files", cut);
    let report = c.report();
    if report != *previous {
        app.apply(&Observation::LogTailer(report.clone()));
    }
    (c, report)
}

/// The running tailers by entry id, with the config each was started with.
#[derive(Default)]
pub struct Tailers {
    running: HashMap<String, (LogConfig, TailerHandle)>,
}

impl Tailers {
    /// Starts, restarts and stops tailers so that exactly `entries` run. A restarted tailer
    /// starts only after the old one's last cycle is in the state, and resumes from there.
    pub async fn sync(&mut self, entries: &[LogConfig], state_dir: &Path, app: &Arc<AppState>) {
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(id, (config, _))| !entries.iter().any(|e| e.id() == id.as_str() && e == config))
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if let Some((_, handle)) = self.running.remove(&id) {
                handle.stop().await;
                tracing::info!(logs = %id, "stopped following logs");
            }
        }
        for entry in entries {
            if !self.running.contains_key(entry.id()) {
                tracing::info!(logs = %entry.id(), cluster = %entry.cluster, paths = ?entry.paths, "following logs");
                self.running
                    .insert(entry.id().to_string(), (entry.clone(), spawn(entry, state_dir, app.clone())));
            }
        }
    }

    /// Stops every tailer, each applying its last cycle to the state.
    pub async fn stop_all(&mut self) {
        for (_, (_, handle)) in self.running.drain() {
            handle.stop().await;
        }
    }
}
