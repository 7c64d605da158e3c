//! The follower: one task per `[[logs]]` entry reads new bytes of every file its globs match and
//! applies the recognised events to the shared state.
//!
//! File metadata is polled every `poll_interval`; `notify` events only wake the task up early
//! (events get lost on network filesystems and in containers). Rotation styles:
//! * rename + create: the renamed file is followed by its inode to its end (and a grace
//!   period) before it is closed; the new file at the old name is read from its beginning;
//! * copytruncate: the file shrinks below our position or its first bytes change: read it
//!   again from the start;
//! * delete + recreate: the open handle keeps the old inode readable to its end.
//!
//! The read position saved for a file is the start of the record still being assembled, so a
//! restart reads that record again and emits it once (see `parse`). Positions are saved after
//! the events before them were applied.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::offsets::{self, FileId, SavedFile, SavedOffsets};
use super::parse::{LineSplitter, Patterns, RecordParser, UserPattern};
use crate::app::AppState;
use crate::config::{LogConfig, StartAt};
use crate::observe::{LogEvent, Observation, TailerReport};

/// Bytes read from one file per cycle before the others get their turn.
const READ_BUDGET: usize = 8 << 20;
/// Size of one read.
const CHUNK: usize = 256 << 10;

/// What a tailer needs, resolved from its config entry.
#[derive(Clone, Debug)]
pub struct TailOptions {
    /// The entry's id (offsets file name, tailer label).
    pub id: String,
    /// The cluster its events belong to.
    pub cluster: String,
    /// Glob patterns.
    pub paths: Vec<String>,
    /// Where files first seen at start are read from.
    pub start_at: StartAt,
    /// Line limit.
    pub max_line_bytes: usize,
    /// Quiet time after which the last record of a file is complete.
    pub flush_after: Duration,
    /// Quiet time after which a rotated-away or deleted file is closed.
    pub drop_after: Duration,
    /// Where positions are saved (`None`: not saved).
    pub offsets_path: Option<PathBuf>,
    /// Bytes per file per cycle.
    pub read_budget: usize,
}

impl TailOptions {
    /// Options from a config entry, saving positions under `state_dir`.
    pub fn from_config(config: &LogConfig, state_dir: &Path) -> Self {
        TailOptions {
            id: config.id().to_string(),
            cluster: config.cluster.clone(),
            paths: config.paths.clone(),
            start_at: config.start_at,
            max_line_bytes: config.max_line_bytes,
            flush_after: config.flush_after,
            drop_after: (config.poll_interval * 2).max(Duration::from_secs(1)),
            offsets_path: Some(offsets::path_for(state_dir, config.id())),
            read_budget: READ_BUDGET,
        }
    }
}

/// The user patterns of a config entry, compiled (the config was validated, so they compile).
pub fn user_patterns(config: &LogConfig) -> Vec<UserPattern> {
    config
        .patterns
        .iter()
        .filter_map(|p| {
            Some(UserPattern {
                name: p.name.clone(),
                regex: regex::Regex::new(&p.regex).ok()?,
                kind: p.kind.clone(),
                severity: p.severity,
            })
        })
        .collect()
}

struct Follower {
    id: FileId,
    path: PathBuf,
    file: File,
    /// The first bytes as last read (grows up to the fingerprint size).
    head: Vec<u8>,
    splitter: LineSplitter,
    parser: RecordParser,
    /// Its path leads elsewhere now (rotated away or deleted): read to the end, then close.
    gone: bool,
    last_growth: Instant,
    /// Size at the last look.
    len: u64,
}

impl Follower {
    /// Every byte before this was turned into events.
    fn committed(&self) -> u64 {
        let line_start = self.splitter.line_start();
        self.parser.pending_start().map_or(line_start, |p| p.min(line_start))
    }
}

/// The synchronous core of a tailer: one `cycle` looks at the files and reads what is new.
pub struct TailCore {
    opts: TailOptions,
    patterns: Arc<Patterns>,
    followers: Vec<Follower>,
    saved: Option<SavedOffsets>,
    first_cycle: bool,
    stats: TailerReport,
    /// Positions changed since the last save.
    dirty: bool,
    /// The budget ran out on some file: call `cycle` again without waiting.
    pub more: bool,
}

impl TailCore {
    /// A tailer core; loads saved positions (a corrupt file is moved aside and logged).
    pub fn new(opts: TailOptions, patterns: Arc<Patterns>) -> Self {
        let saved = opts.offsets_path.as_deref().and_then(|path| match offsets::load(path) {
            Ok(saved) => saved,
            Err(e) => {
                let aside = path.with_extension("json.corrupt");
                let _ = std::fs::rename(path, &aside);
                tracing::error!(path = %path.display(), "cannot read log positions, moved aside: {e}");
                None
            }
        });
        let stats = TailerReport {
            cluster: opts.cluster.clone(),
            tailer: opts.id.clone(),
            ..TailerReport::default()
        };
        TailCore {
            opts,
            patterns,
            followers: Vec::new(),
            saved,
            first_cycle: true,
            stats,
            dirty: false,
            more: false,
        }
    }

    /// The tailer's counters now.
    pub fn report(&self) -> TailerReport {
        self.stats.clone()
    }

    /// Directories to watch for the wake-up hint: the fixed prefix of each glob.
    pub fn watch_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.opts.paths.iter().map(|p| fixed_prefix(Path::new(p))).collect();
        dirs.sort();
        dirs.dedup();
        dirs
    }

    fn discover(&mut self) -> Vec<(PathBuf, std::fs::Metadata)> {
        let mut found: Vec<(PathBuf, std::fs::Metadata)> = Vec::new();
        for pattern in &self.opts.paths {
            let Ok(paths) = glob::glob(pattern) else { continue };
            for path in paths.flatten() {
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_file() => {
                        let id = FileId::of(&meta);
                        if !found.iter().any(|(_, m)| FileId::of(m) == id) {
                            found.push((path, meta));
                        }
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {} // Gone between listing and stat.
                    Err(e) => {
                        self.stats.errors += 1;
                        tracing::warn!(path = %path.display(), "cannot stat log file: {e}");
                    }
                }
            }
        }
        found
    }

    /// Looks at the files and reads what is new; returns the events, in file order.
    pub fn cycle(&mut self, now: Instant) -> Vec<LogEvent> {
        let mut events = Vec::new();
        let found = self.discover();

        // Files whose path now leads to another file, or to none: rotated away or deleted.
        for f in self.followers.iter_mut().filter(|f| !f.gone) {
            if let Some((path, _)) = found.iter().find(|(_, m)| FileId::of(m) == f.id) {
                if *path != f.path {
                    // Renamed and still matched by a glob (`x.log` → `x.log.1`).
                    self.stats.rotations += 1;
                    f.path = path.clone();
                }
            } else {
                self.stats.rotations += 1;
                f.gone = true;
                f.last_growth = now;
            }
        }

        for (path, meta) in &found {
            let id = FileId::of(meta);
            if let Some(i) = self.followers.iter().position(|f| f.id == id) {
                let f = &mut self.followers[i];
                f.gone = false;
                f.len = meta.len();
                match truncated(f, meta.len()) {
                    Ok(true) => {
                        // copytruncate (or the content was replaced in place): what the old
                        // content still owed is emitted, then the file is read from its start.
                        self.stats.rotations += 1;
                        f.parser.flush(&mut events);
                        set_file(&mut events, &self.opts.cluster, &f.path);
                        if let Err(e) = f.file.seek(SeekFrom::Start(0)) {
                            self.stats.errors += 1;
                            tracing::warn!(path = %f.path.display(), "cannot rewind log file: {e}");
                        }
                        f.splitter = LineSplitter::new(self.opts.max_line_bytes, 0);
                        f.head = offsets::read_head(&f.file).unwrap_or_default();
                        self.dirty = true;
                    }
                    Ok(false) => {}
                    Err(e) => {
                        self.stats.errors += 1;
                        tracing::warn!(path = %f.path.display(), "cannot read log file: {e}");
                    }
                }
                continue;
            }
            match self.open(path, meta, now) {
                Ok(f) => {
                    tracing::info!(path = %path.display(), offset = f.splitter.offset(), "following log file");
                    self.followers.push(f);
                    self.dirty = true;
                }
                Err(e) => {
                    self.stats.errors += 1;
                    tracing::warn!(path = %path.display(), "cannot open log file: {e}");
                }
            }
        }
        self.first_cycle = false;

        // Finish old files first so events keep their order across a rotation.
        self.followers.sort_by_key(|f| (!f.gone, f.path.clone()));
        self.more = false;
        let mut chunk = vec![0u8; CHUNK];
        for f in &mut self.followers {
            let before = events.len();
            let (lines, oversize) = (f.splitter.lines, f.splitter.oversize);
            match read_some(f, &mut chunk, self.opts.read_budget, &mut events) {
                Ok((n, budget_left)) => {
                    self.stats.bytes += n as u64;
                    if n > 0 {
                        f.last_growth = now;
                        self.dirty = true;
                    }
                    if !budget_left {
                        self.more = true;
                    }
                }
                Err(e) => {
                    self.stats.errors += 1;
                    tracing::warn!(path = %f.path.display(), "cannot read log file: {e}");
                }
            }
            let quiet = now.saturating_duration_since(f.last_growth);
            if f.parser.has_pending() && quiet >= self.opts.flush_after {
                f.parser.flush(&mut events);
                self.dirty = true;
            }
            if f.gone && quiet >= self.opts.drop_after {
                let parser = &mut f.parser;
                let mut tail = Vec::new();
                f.splitter.finish(|line, offset| parser.push_line(line, offset, &mut tail));
                parser.flush(&mut tail);
                events.extend(tail);
            }
            set_file(&mut events[before..], &self.opts.cluster, &f.path);
            self.stats.lines += f.splitter.lines - lines;
            self.stats.oversize_lines += f.splitter.oversize - oversize;
        }
        let drop_after = self.opts.drop_after;
        self.followers.retain(|f| {
            let keep = !(f.gone && now.saturating_duration_since(f.last_growth) >= drop_after);
            if !keep {
                tracing::info!(path = %f.path.display(), "closed rotated log file");
            }
            keep
        });

        self.stats.files = self.followers.len() as u64;
        self.stats.lag_bytes = self.followers.iter().map(|f| f.len.saturating_sub(f.splitter.offset())).sum();
        events
    }

    /// How long until a record held for its stack trace is due to be flushed, when one is:
    /// the tailer wakes then rather than at its next poll, so an event that no further line
    /// follows still reaches the rules within `flush_after`.
    pub fn flush_due_in(&self, now: Instant) -> Option<Duration> {
        self.followers
            .iter()
            .filter(|f| f.parser.has_pending())
            .map(|f| self.opts.flush_after.saturating_sub(now.saturating_duration_since(f.last_growth)))
            .min()
    }

    fn open(&mut self, path: &Path, meta: &std::fs::Metadata, now: Instant) -> io::Result<Follower> {
        let mut file = File::open(path)?;
        let id = FileId::of(meta);
        let head = offsets::read_head(&file)?;
        let len = meta.len();
        let start = if self.first_cycle {
            let saved = self.saved.as_ref();
            match saved.and_then(|s| s.files.iter().find(|f| f.matches(id, &head))) {
                Some(entry) if entry.offset <= len => entry.offset,
                Some(_) => 0, // Shorter than where we were: truncated while we were down.
                None => match saved {
                    // Positions exist, so the daemon ran before: a file written since then
                    // appeared while it was down and is read whole.
                    Some(s) if modified_ms(meta) > s.written_at_ms => 0,
                    _ if self.opts.start_at == StartAt::Beginning => 0,
                    _ => len,
                },
            }
        } else {
            0 // Appeared while we were running: a new file, read from its beginning.
        };
        file.seek(SeekFrom::Start(start))?;
        Ok(Follower {
            id,
            path: path.to_path_buf(),
            file,
            head,
            splitter: LineSplitter::new(self.opts.max_line_bytes, start),
            parser: RecordParser::new(self.patterns.clone()),
            gone: false,
            last_growth: now,
            len,
        })
    }

    /// Saves the positions if they changed.
    pub fn persist(&mut self) -> io::Result<()> {
        let Some(path) = self.opts.offsets_path.clone() else { return Ok(()) };
        if !self.dirty {
            return Ok(());
        }
        let files = self
            .followers
            .iter()
            .map(|f| SavedFile {
                id: f.id,
                head_len: f.head.len(),
                head_hash: offsets::fnv1a(&f.head),
                offset: f.committed(),
                path: f.path.display().to_string(),
            })
            .collect();
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        match offsets::save(&path, &SavedOffsets::new(now_ms, files)) {
            Ok(()) => {
                self.dirty = false;
                Ok(())
            }
            Err(e) => {
                self.stats.errors += 1;
                Err(e)
            }
        }
    }
}

/// Whether a followed file was truncated or had its content replaced in place.
fn truncated(f: &mut Follower, len: u64) -> io::Result<bool> {
    if len < f.splitter.offset() {
        return Ok(true);
    }
    let head = offsets::read_head(&f.file)?;
    let common = head.len().min(f.head.len());
    if head[..common] != f.head[..common] {
        return Ok(true);
    }
    if head.len() > f.head.len() {
        f.head = head;
    }
    Ok(false)
}

/// Reads up to `budget` bytes; returns (bytes read, whether it reached the end of the file).
fn read_some(
    f: &mut Follower,
    chunk: &mut [u8],
    budget: usize,
    events: &mut Vec<LogEvent>,
) -> io::Result<(usize, bool)> {
    let mut total = 0;
    while total < budget {
        let want = chunk.len().min(budget - total);
        let n = match f.file.read(&mut chunk[..want]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok((total, true));
        }
        total += n;
        let parser = &mut f.parser;
        f.splitter.feed(&chunk[..n], |line, offset| parser.push_line(line, offset, events));
    }
    Ok((total, false))
}

fn set_file(events: &mut [LogEvent], cluster: &str, path: &Path) {
    for e in events {
        if e.file.is_empty() {
            e.file = path.display().to_string();
        }
        if e.cluster.is_empty() {
            e.cluster = cluster.to_string();
        }
    }
}

fn modified_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| d.as_millis() as i64)
}

/// The directory part of a glob before its first wildcard.
fn fixed_prefix(pattern: &Path) -> PathBuf {
    let mut dir = PathBuf::new();
    for c in pattern.components() {
        let literal = match c {
            Component::Normal(s) => !s.to_string_lossy().contains(['*', '?', '[', '{']),
            _ => true,
        };
        if !literal {
            break;
        }
        dir.push(c);
    }
    if dir == pattern {
        dir.pop(); // The pattern is a plain file path: watch its directory.
    }
    if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir }
}

/// A running tailer task.
pub struct TailerHandle {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl TailerHandle {
    /// Asks the tailer to stop, and waits until it saved its positions.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Starts a tailer that applies its events to `app`.
pub fn spawn(config: &LogConfig, state_dir: &Path, app: Arc<AppState>) -> TailerHandle {
    let core =
        TailCore::new(TailOptions::from_config(config, state_dir), Patterns::new(user_patterns(config)));
    let (stop, stop_rx) = watch::channel(false);
    let task = tokio::spawn(run(core, app, config.poll_interval, stop_rx));
    TailerHandle { stop, task }
}

async fn run(core: TailCore, app: Arc<AppState>, poll_interval: Duration, mut stop: watch::Receiver<bool>) {
    let (hint_tx, mut hint_rx) = mpsc::channel::<()>(1);
    let _watcher = watch_dirs(&core.watch_dirs(), hint_tx);
    let mut core = Some(core);
    let mut last_report = TailerReport::default();
    loop {
        let Some(mut c) = core.take() else { return };
        let app_for_cycle = app.clone();
        let previous = last_report.clone();
        let cycled = tokio::task::spawn_blocking(move || {
            let events = c.cycle(Instant::now());
            if !events.is_empty() {
                app_for_cycle.apply(&Observation::LogEvents(events));
            }
            let report = c.report();
            if report != previous {
                app_for_cycle.apply(&Observation::LogTailer(report.clone()));
            }
            // Saved only now that the events before these positions are applied.
            if let Err(e) = c.persist() {
                tracing::error!("cannot save log positions: {e}");
            }
            (c, report)
        })
        .await;
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
    if let Some(mut c) = core {
        let _ = tokio::task::spawn_blocking(move || c.persist()).await;
    }
}

fn watch_dirs(dirs: &[PathBuf], hint: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
            let _ = hint.try_send(());
        }
    })
    .map_err(|e| tracing::debug!("no file events, polling only: {e}"))
    .ok()?;
    for dir in dirs {
        if let Err(e) = watcher.watch(dir, notify::RecursiveMode::NonRecursive) {
            tracing::debug!(dir = %dir.display(), "no file events for this directory, polling only: {e}");
        }
    }
    Some(watcher)
}

/// The running tailers by entry id, with the config each was started with.
#[derive(Default)]
pub struct Tailers {
    running: HashMap<String, (LogConfig, TailerHandle)>,
}

impl Tailers {
    /// Starts, restarts and stops tailers so that exactly `entries` run. A restarted tailer
    /// starts only after the old one saved its positions.
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

    /// Stops every tailer, each saving its positions.
    pub async fn stop_all(&mut self) {
        for (_, (_, handle)) in self.running.drain() {
            handle.stop().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watched_directory_is_the_fixed_part_of_the_glob() {
        assert_eq!(
            fixed_prefix(Path::new("/opt/flink/log/flink-*-taskexecutor-*.log")),
            PathBuf::from("/opt/flink/log")
        );
        assert_eq!(fixed_prefix(Path::new("/opt/*/log/x.log")), PathBuf::from("/opt"));
        assert_eq!(fixed_prefix(Path::new("/var/log/a.log")), PathBuf::from("/var/log"));
    }
}
