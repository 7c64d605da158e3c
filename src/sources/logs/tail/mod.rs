//! The follower: one task per `[[logs]]` entry reads new bytes of every file its globs match and
//! applies the recognised events to the shared state.
//!
//! File metadata is polled every `poll_interval`; `notify` events only wake the task up early
//! (events get lost on network filesystems and in containers) and count files that were created
//! and gone again before the tailer looked. Rotation styles:
//! * rename + create: the renamed file is followed by its inode to its end (and a grace
//!   period) before it is closed; the new file at the old name is read from its beginning;
//! * copytruncate: the file shrinks below our position or its first bytes change: read it
//!   again from the start. If the glob also matches the copy, the copy is known by its first
//!   bytes and read on from where the tailer was in the original: neither counted twice nor,
//!   for what the copy holds, lost;
//! * delete + recreate: the open handle keeps the old inode readable to its end.
//!
//! Older content is read first (each file's content has a sequence number), so events keep
//! their order across rotations. A file's identity and size come from its open handle, and bytes
//! read are kept only while the file still starts with its fingerprint: in a storm a name moves
//! on, or a file is truncated and rewritten, between two system calls. A file created and rotated away before the tailer looked at it
//! is never read: with file events, it is counted in `rotation_gaps`.
//!
//! The read position reported for a file is the start of the record still being assembled, so
//! a restart reads that record again and emits it once (see `parse`). Positions travel with the
//! events in one `Observation::LogRead` and are persisted with the state, never on their own.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::offsets::{self, FileId, FilePosition, TailerPositions};
use super::parse::{LineSplitter, Patterns, RecordParser, UserPattern, line_needles};
use super::trace;
use crate::app::AppState;
use crate::config::{LogConfig, StartAt};
use crate::observe::{CheckpointSpan, LogEvent, LogRead, Observation, TailerReport};

/// Bytes read from one file per cycle before the others get their turn.
const READ_BUDGET: usize = 8 << 20;
/// Size of one read.
const CHUNK: usize = 256 << 10;
/// How many contents no longer followed (truncated away, closed) are remembered to recognise
/// their copies.
const RETIRED: usize = 64;
/// A `**` in a glob descends at most this many directories, and one listing looks at most at
/// [`MAX_LISTED`] entries: symlinked directories are not followed (a symlink loop under `**`
/// spun a thread at 100 % and then blocked shutdown), and a huge tree cannot stall a cycle.
pub const MAX_GLOB_DEPTH: usize = 16;
/// See [`MAX_GLOB_DEPTH`].
pub const MAX_LISTED: usize = 100_000;
/// A warning about one path (cannot stat, open or read it) is repeated at most this often.
const WARN_AGAIN_AFTER: Duration = Duration::from_secs(600);
/// A stopping tailer gets this long to apply its last cycle; then shutdown goes on without it.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What a tailer needs, resolved from its config entry.
#[derive(Clone, Debug)]
pub struct TailOptions {
    /// The entry's id (tailer label, key of its positions in the state).
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
    /// Bytes per file per cycle.
    pub read_budget: usize,
    /// At most this many files are followed (open) at once.
    pub max_files: usize,
}

impl TailOptions {
    /// Options from a config entry.
    pub fn from_config(config: &LogConfig) -> Self {
        TailOptions {
            id: config.id().to_string(),
            cluster: config.cluster.clone(),
            paths: config.paths.clone(),
            start_at: config.start_at,
            max_line_bytes: config.max_line_bytes,
            flush_after: config.flush_after,
            drop_after: (config.poll_interval * 2).max(Duration::from_secs(1)),
            read_budget: READ_BUDGET,
            max_files: config.max_files,
        }
    }
}

/// The user patterns of a config entry, as compiled when the config was read (a config with
/// one that does not compile is refused). Should one come here uncompiled all the same, it is
/// left out with an error in the log, never silently.
pub fn user_patterns(config: &LogConfig) -> Vec<UserPattern> {
    config
        .patterns
        .iter()
        .filter_map(|p| match p.regex.regex() {
            Ok(regex) => Some(UserPattern {
                name: p.name.clone(),
                regex: regex.clone(),
                kind: p.kind.clone(),
                severity: p.severity,
            }),
            Err(e) => {
                tracing::error!(cluster = %config.cluster, pattern = %p.name, regex = %p.regex.as_str(), error = %e, "a [[logs.patterns]] regex does not compile: pattern left out");
                None
            }
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
    /// The needles of the last buffer read (reused).
    needles: Vec<(usize, usize, u32)>,
    /// Its path leads elsewhere now (rotated away or deleted): read to the end, then close.
    gone: bool,
    last_growth: Instant,
    /// Size at the last look.
    len: u64,
    /// The age of its content: lower is older and is read first.
    seq: u64,
}

impl Follower {
    /// Every byte before this was turned into events.
    fn committed(&self) -> u64 {
        let line_start = self.splitter.line_start();
        self.parser.pending_start().map_or(line_start, |p| p.min(line_start))
    }
}

/// Content the tailer read and no longer follows at its inode (truncated away, or closed after a
/// rotation): a file that starts with the same bytes is a copy of it, read on from `offset`.
struct Retired {
    head: Vec<u8>,
    offset: u64,
    seq: u64,
    /// Truncated recently, no copy met yet: cycles left until that counts as a gap (lines
    /// written after the last read are lost). One cycle of grace, because in a storm the copy
    /// may have moved on to its next name while it was listed.
    awaiting_copy: u8,
}

/// What to do with a file seen for the first time.
enum Start {
    /// Follow it from this offset, with this content sequence number.
    At(u64, u64),
    /// A copy of content still being read elsewhere: leave it, the original is the authority.
    Skip,
    /// Too little written to tell whether it is a copy (`cp` creates the file, then fills it):
    /// look again next cycle.
    Wait,
}

/// The synchronous core of a tailer: one `cycle` looks at the files and reads what is new.
pub struct TailCore {
    opts: TailOptions,
    patterns: Arc<Patterns>,
    followers: Vec<Follower>,
    /// Where to resume, for the first cycle.
    resume: Option<TailerPositions>,
    first_cycle: bool,
    stats: TailerReport,
    /// Positions changed since they were last taken.
    moved: bool,
    /// The budget ran out on some file: call `cycle` again without waiting.
    pub more: bool,
    /// Contents no longer followed, newest last.
    retired: VecDeque<Retired>,
    next_seq: u64,
    /// When the files were last listed, Unix ms.
    listed_at_ms: i64,
    /// Files of the current listing already met (followed, or left as a copy).
    met: HashSet<FileId>,
    /// Files met after the first cycle.
    met_since_start: u64,
    /// Creations of matching files reported by file events (see [`TailCore::watch`]).
    created: Arc<AtomicU64>,
    /// `created` at the first listing.
    created_at_start: Option<u64>,
    /// Created files never met, as counted so far.
    unmet: u64,
    watcher: Option<notify::RecommendedWatcher>,
    /// When each path was last warned about (bounded: cleared when it grows past 10,000).
    warned: HashMap<PathBuf, Instant>,
    /// Files left unfollowed because of `max_files`, not yet counted.
    files_cut: u64,
    /// Files already counted as cut (so a file left out is counted once).
    cut_ids: HashSet<FileId>,
    /// Checkpoint spans of Flink's trace reporter read since the last [`TailCore::read`].
    spans: Vec<CheckpointSpan>,
}

impl TailCore {
    /// A tailer core that resumes from `resume` (positions it reported before, as persisted).
    pub fn new(opts: TailOptions, patterns: Arc<Patterns>, resume: Option<TailerPositions>) -> Self {
        let stats = TailerReport {
            cluster: opts.cluster.clone(),
            tailer: opts.id.clone(),
            ..TailerReport::default()
        };
        TailCore {
            opts,
            patterns,
            followers: Vec::new(),
            resume,
            first_cycle: true,
            stats,
            moved: false,
            more: false,
            retired: VecDeque::new(),
            next_seq: 0,
            listed_at_ms: 0,
            met: HashSet::new(),
            met_since_start: 0,
            created: Arc::new(AtomicU64::new(0)),
            created_at_start: None,
            unmet: 0,
            watcher: None,
            warned: HashMap::new(),
            files_cut: 0,
            cut_ids: HashSet::new(),
            spans: Vec::new(),
        }
    }

    /// Files left unfollowed because of `max_files` since the last call (each counted once).
    pub fn take_files_cut(&mut self) -> u64 {
        std::mem::take(&mut self.files_cut)
    }

    /// Counts an error on `path` and warns about it, at most every [`WARN_AGAIN_AFTER`] per path
    /// (before: a warning a second per unreadable file, forever).
    fn warn(&mut self, path: &Path, what: &str, e: &io::Error) {
        self.stats.errors += 1;
        let now = Instant::now();
        if self.warned.get(path).is_some_and(|at| now.duration_since(*at) < WARN_AGAIN_AFTER) {
            return;
        }
        if self.warned.len() >= 10_000 {
            self.warned.clear();
        }
        self.warned.insert(path.to_path_buf(), now);
        tracing::warn!(path = %path.display(), "{what}: {e} (repeated at most every 10 min)");
    }

    /// The tailer's counters now.
    pub fn report(&self) -> TailerReport {
        self.stats.clone()
    }

    /// Where the tailer stands: per followed file, the first byte not yet turned into events.
    pub fn positions(&self) -> TailerPositions {
        let files = self
            .followers
            .iter()
            .map(|f| FilePosition {
                id: f.id,
                head_len: f.head.len(),
                head_hash: offsets::fnv1a(&f.head),
                offset: f.committed(),
                path: f.path.display().to_string(),
            })
            .collect();
        TailerPositions { written_at_ms: self.listed_at_ms, files }
    }

    /// Whether the positions moved since this was last asked.
    pub fn take_moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }

    /// The events of a cycle with the positions after them, as one observation, and the
    /// checkpoint spans read since the last call.
    pub fn read(&mut self, events: Vec<LogEvent>) -> LogRead {
        let mut spans = std::mem::take(&mut self.spans);
        for span in &mut spans {
            span.cluster.clone_from(&self.opts.cluster);
        }
        LogRead {
            cluster: self.opts.cluster.clone(),
            tailer: self.opts.id.clone(),
            events,
            positions: self.positions(),
            spans,
        }
    }

    /// Whether checkpoint spans were read since the last [`TailCore::read`].
    pub fn has_spans(&self) -> bool {
        !self.spans.is_empty()
    }

    /// Directories to watch for the wake-up hint: the fixed prefix of each glob.
    pub fn watch_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.opts.paths.iter().map(|p| fixed_prefix(Path::new(p))).collect();
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
            self.opts.paths.iter().filter_map(|p| glob::Pattern::new(p).ok()).collect();
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

    fn discover(&mut self) -> Vec<(PathBuf, std::fs::Metadata)> {
        let mut found: Vec<(PathBuf, std::fs::Metadata)> = Vec::new();
        let mut failed = Vec::new();
        for pattern in &self.opts.paths {
            for path in list(pattern) {
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_file() => {
                        let id = FileId::of(&meta);
                        if !found.iter().any(|(_, m)| FileId::of(m) == id) {
                            found.push((path, meta));
                        }
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {} // Gone between listing and stat.
                    Err(e) => failed.push((path, e)),
                }
            }
        }
        for (path, e) in failed {
            self.warn(&path, "cannot stat log file", &e);
        }
        found
    }

    fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Looks at the files and reads what is new; returns the events, in file order.
    pub fn cycle(&mut self, now: Instant) -> Vec<LogEvent> {
        let mut events = Vec::new();
        // Read before listing: a file whose creation was reported by now is in this listing,
        // unless it is gone already.
        let created = self.created.load(Ordering::Acquire);
        self.listed_at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
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

        let mut unknown = Vec::new();
        for (path, meta) in &found {
            let id = FileId::of(meta);
            let Some(f) = self.followers.iter_mut().find(|f| f.id == id) else {
                unknown.push(path);
                continue;
            };
            f.gone = false;
            f.len = meta.len();
            let was_empty = f.head.is_empty();
            match truncated(f, meta.len()) {
                Ok(true) => {
                    // copytruncate (or the content was replaced in place): what the old content
                    // still owed is emitted, then the file is read from its start. The old
                    // content is remembered, so its copy is read on from here.
                    self.stats.rotations += 1;
                    f.parser.flush(&mut events);
                    set_file(&mut events, &self.opts.cluster, &f.path);
                    self.retired.push_back(Retired {
                        head: std::mem::take(&mut f.head),
                        offset: f.committed(),
                        seq: f.seq,
                        awaiting_copy: 2,
                    });
                    // Newer than anything met so far, copies of older content included: numbered
                    // once those are opened.
                    f.seq = u64::MAX;
                    if let Err(e) = f.file.seek(SeekFrom::Start(0)) {
                        self.stats.errors += 1;
                        tracing::warn!(path = %f.path.display(), "cannot rewind log file: {e}");
                    }
                    f.splitter = LineSplitter::new(self.opts.max_line_bytes, 0);
                    f.head = offsets::read_head(&f.file).unwrap_or_default();
                    self.moved = true;
                }
                Ok(false) if was_empty && !f.head.is_empty() => {
                    // Content appeared in a file that was empty (new, or just truncated): newer
                    // than copies of older content met in this cycle.
                    f.seq = u64::MAX;
                }
                Ok(false) => {}
                Err(e) => {
                    self.stats.errors += 1;
                    tracing::warn!(path = %f.path.display(), "cannot read log file: {e}");
                }
            }
        }
        self.open_new(unknown, now);
        for f in self.followers.iter_mut().filter(|f| f.seq == u64::MAX) {
            self.next_seq += 1;
            f.seq = self.next_seq;
        }
        self.count_gaps(created, &found);
        self.first_cycle = false;
        self.resume = None;

        // Older content first, so events keep their order across a rotation.
        self.followers.sort_by_key(|f| f.seq);
        self.more = false;
        let mut chunk = vec![0u8; CHUNK];
        for f in &mut self.followers {
            let before = events.len();
            let (lines, oversize) = (f.splitter.lines, f.splitter.oversize);
            match read_some(f, &mut chunk, self.opts.read_budget, &mut events, &mut self.spans) {
                Ok((n, budget_left)) => {
                    self.stats.bytes += n as u64;
                    if n > 0 {
                        f.last_growth = now;
                        self.moved = true;
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
                self.moved = true;
            }
            if f.gone && quiet >= self.opts.drop_after {
                let parser = &mut f.parser;
                let mut tail = Vec::new();
                let spans = &mut self.spans;
                f.splitter.finish(|line, offset| {
                    spans.extend(trace::parse_line(line));
                    parser.push_line(line, offset, &mut tail)
                });
                parser.flush(&mut tail);
                events.extend(tail);
            }
            set_file(&mut events[before..], &self.opts.cluster, &f.path);
            self.stats.lines += f.splitter.lines - lines;
            self.stats.oversize_lines += f.splitter.oversize - oversize;
        }
        let drop_after = self.opts.drop_after;
        let retired = &mut self.retired;
        self.followers.retain(|f| {
            let keep = !(f.gone && now.saturating_duration_since(f.last_growth) >= drop_after);
            if !keep {
                tracing::info!(path = %f.path.display(), "closed rotated log file");
                retired.push_back(Retired {
                    head: f.head.clone(),
                    offset: f.splitter.offset(),
                    seq: f.seq,
                    awaiting_copy: 0,
                });
                self.moved = true;
            }
            keep
        });
        while self.retired.len() > RETIRED {
            self.retired.pop_front();
        }

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

    /// Opens the files seen for the first time, oldest first.
    fn open_new(&mut self, unknown: Vec<&PathBuf>, now: Instant) {
        let mut candidates: Vec<(&PathBuf, std::fs::Metadata, Vec<u8>, File)> = Vec::new();
        let mut failed = Vec::new();
        // At most max_files open at once (file descriptors): the newest-named files first is
        // not knowable here, so the first in listing order; the rest are counted once each.
        let room = self.opts.max_files.saturating_sub(self.followers.len());
        if unknown.len() > room {
            for path in &unknown[room..] {
                if let Ok(meta) = std::fs::metadata(path)
                    && self.cut_ids.insert(FileId::of(&meta))
                {
                    self.files_cut += 1;
                }
            }
            if self.cut_ids.len() > 100_000 {
                self.cut_ids.clear();
            }
        }
        for path in unknown.into_iter().take(room) {
            // What the path leads to now: in a storm it may be another file than the listing
            // saw (`app.log.1` moved on to `app.log.2`, a newer one took its name), so identity
            // and size come from the open handle, and a file already met is left alone.
            let opened = File::open(path).and_then(|file| {
                let meta = file.metadata()?;
                Ok((meta, offsets::read_head(&file)?, file))
            });
            match opened {
                Ok((meta, head, file)) => {
                    let id = FileId::of(&meta);
                    let known = self.followers.iter().any(|f| f.id == id)
                        || candidates.iter().any(|(_, m, _, _)| FileId::of(m) == id);
                    if meta.is_file() && !known {
                        candidates.push((path, meta, head, file));
                    }
                }
                // Gone between listing and opening: if it was created while watched, it is a gap.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => failed.push((path.clone(), e)),
            }
        }
        for (path, e) in failed {
            self.warn(&path, "cannot open log file", &e);
        }
        // The files the resumed positions name first, so that a copy of one is known as such.
        let resume = self.resume.as_ref().filter(|_| self.first_cycle);
        candidates.sort_by_key(|(path, meta, head, _)| {
            let resumed = resume.is_some_and(|r| r.files.iter().any(|p| p.matches(FileId::of(meta), head)));
            (!resumed, meta.modified().ok(), rotation_age(path))
        });
        for (path, meta, head, mut file) in candidates {
            let id = FileId::of(&meta);
            let start = self.start_of(id, &meta, &head);
            if !matches!(start, Start::Wait) && self.met.insert(id) && !self.first_cycle {
                self.met_since_start += 1;
            }
            let (offset, seq) = match start {
                Start::At(offset, seq) => (offset, seq),
                Start::Skip | Start::Wait => continue,
            };
            if let Err(e) = file.seek(SeekFrom::Start(offset)) {
                self.stats.errors += 1;
                tracing::warn!(path = %path.display(), "cannot open log file: {e}");
                continue;
            }
            tracing::info!(path = %path.display(), offset, "following log file");
            self.followers.push(Follower {
                id,
                path: path.clone(),
                file,
                head,
                splitter: LineSplitter::new(self.opts.max_line_bytes, offset),
                parser: RecordParser::new(self.patterns.clone()),
                needles: Vec::new(),
                gone: false,
                last_growth: now,
                len: meta.len(),
                seq,
            });
            self.moved = true;
        }
    }

    /// Where a file seen for the first time is read from.
    fn start_of(&mut self, id: FileId, meta: &std::fs::Metadata, head: &[u8]) -> Start {
        let len = meta.len();
        let resume = self.resume.as_ref().filter(|_| self.first_cycle);
        if let Some(entry) = resume.and_then(|r| r.files.iter().find(|p| p.matches(id, head))) {
            // Shorter than where we were: truncated while we were down.
            let offset = if entry.offset <= len { entry.offset } else { 0 };
            return Start::At(offset, self.next_seq());
        }
        if !self.first_cycle && head.is_empty() {
            return Start::Wait;
        }
        let live = self.followers.iter().map(|f| resemblance(&f.head, head)).max();
        if live == Some(Resemblance::Same) {
            // A copy of a file being read (copytruncate copies, then truncates): that file is
            // read on; once it is truncated, this copy is known as its retired content.
            return Start::Skip;
        }
        let retired =
            self.retired.iter_mut().rev().find(|r| resemblance(&r.head, head) != Resemblance::Different);
        let retired_maybe =
            retired.as_ref().is_some_and(|r| resemblance(&r.head, head) == Resemblance::Maybe);
        if live == Some(Resemblance::Maybe) || retired_maybe {
            return Start::Wait;
        }
        if let Some(r) = retired {
            r.awaiting_copy = 0;
            return Start::At(r.offset.min(len), r.seq);
        }
        if let Some(resume) = resume {
            let copy =
                resume.files.iter().find(|p| p.same_content(head) && head[..p.head_len].contains(&b'\n'));
            if let Some(entry) = copy {
                // A copy of a file we were reading, made while the daemon was down.
                return Start::At(entry.offset.min(len), self.next_seq());
            }
            // Positions exist, so the daemon ran before: a file written since it last listed
            // the files appeared while it was down and is read whole.
            let offset = if modified_ms(meta) >= resume.written_at_ms { 0 } else { self.start_at(len) };
            return Start::At(offset, self.next_seq());
        }
        if self.first_cycle {
            let offset = self.start_at(len);
            return Start::At(offset, self.next_seq());
        }
        Start::At(0, self.next_seq()) // Appeared while we were running: read from its beginning.
    }

    fn start_at(&self, len: u64) -> u64 {
        if self.opts.start_at == StartAt::Beginning { 0 } else { len }
    }

    /// Counts rotations after which lines may be missing: truncations whose copy did not turn
    /// up, and files created (as file events reported) that no listing met.
    fn count_gaps(&mut self, created: u64, found: &[(PathBuf, std::fs::Metadata)]) {
        for r in &mut self.retired {
            if r.awaiting_copy > 0 {
                r.awaiting_copy -= 1;
                if r.awaiting_copy == 0 {
                    self.stats.rotation_gaps += 1;
                }
            }
        }
        let listed: HashSet<FileId> = found.iter().map(|(_, m)| FileId::of(m)).collect();
        self.met.retain(|id| listed.contains(id));
        let Some(at_start) = self.created_at_start else {
            // Files created before the first listing are in it.
            self.created_at_start = Some(created);
            return;
        };
        let unmet = created.saturating_sub(at_start).saturating_sub(self.met_since_start);
        if unmet > self.unmet {
            self.stats.rotation_gaps += unmet - self.unmet;
            self.unmet = unmet;
        }
    }
}

/// Orders files of the same modification time (timestamps are as coarse as the kernel's tick)
/// by their rotation suffix: `app.log.3` is older than `app.log.1`, which is older than a name
/// without a number (the live file).
fn rotation_age(path: &Path) -> std::cmp::Reverse<u64> {
    let number = path.extension().and_then(|e| e.to_str()).and_then(|e| e.parse::<u64>().ok());
    std::cmp::Reverse(number.map_or(0, |n| n.saturating_add(1)))
}

/// How a file's first bytes compare with those of known content (ordered by how alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Resemblance {
    /// They differ.
    Different,
    /// One starts with the other, but they share less than a line: too little to tell.
    Maybe,
    /// One starts with the other, and what they share holds a whole line.
    Same,
}

fn resemblance(known: &[u8], head: &[u8]) -> Resemblance {
    let common = known.len().min(head.len());
    if common == 0 || known[..common] != head[..common] {
        Resemblance::Different
    } else if known[..common].contains(&b'\n') {
        Resemblance::Same
    } else {
        Resemblance::Maybe
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
    spans: &mut Vec<CheckpointSpan>,
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
        if !same_content(f)? {
            // Truncated and written again since the file was last looked at (a storm): these
            // bytes may be of the new content, read from the old position. Left to the next
            // look, which sees the truncation and reads the new content from its start.
            f.file.seek(SeekFrom::Start(f.splitter.offset()))?;
            return Ok((total, true));
        }
        total += n;
        extend_head(&mut f.head, f.splitter.offset(), &chunk[..n]);
        // A span line is taken as it is read: spans count by (job, checkpoint id), so one read
        // again after a restart (the position may stand before it, at a record held for its
        // stack trace) is a no-op.
        feed_searched(&mut f.splitter, &mut f.parser, &mut f.needles, &chunk[..n], events, spans);
    }
    Ok((total, false))
}

/// Feeds one buffer read from a file into its parser: one whole-buffer needle search, and
/// each line's needles (or none) handed over with it, so only lines with a needle reach the
/// recogniser and none is searched twice (as `scan-logs` does). With user patterns every line
/// is a candidate and goes the per-line way.
pub fn feed_searched(
    splitter: &mut LineSplitter,
    parser: &mut RecordParser,
    needles: &mut Vec<(usize, usize, u32)>,
    chunk: &[u8],
    events: &mut Vec<LogEvent>,
    spans: &mut Vec<CheckpointSpan>,
) {
    let patterns = parser.patterns().clone();
    let chunk_start = splitter.offset();
    // Span lines are rare: one search of the buffer says whether any line wholly in it can be
    // one; a line begun in an earlier buffer is looked at whatever this one holds.
    let any_span = memchr::memmem::find(chunk, trace::SPAN_MARKER.as_bytes()).is_some();
    let mut take_span = |line: &[u8], offset: u64| {
        if any_span || offset < chunk_start {
            spans.extend(trace::parse_line(line));
        }
    };
    if patterns.has_user_patterns() {
        splitter.feed(chunk, |line, offset| {
            take_span(line, offset);
            parser.push_line(line, offset, events)
        });
        return;
    }
    needles.clear();
    patterns.find_needles(chunk, needles);
    let mut next = 0;
    splitter.feed(chunk, |line, offset| {
        take_span(line, offset);
        let (candidate, found) = line_needles(&patterns, needles, &mut next, line, offset, chunk_start);
        parser.push_line_with_needles(line, offset, candidate, found, events);
    });
}

/// Whether the file still starts with the bytes its fingerprint holds.
fn same_content(f: &Follower) -> io::Result<bool> {
    if f.head.is_empty() {
        return Ok(true);
    }
    let head = offsets::read_head(&f.file)?;
    Ok(head.starts_with(&f.head))
}

/// Grows a file's fingerprint with bytes read at `pos`, so it always covers what was read: the
/// head read when the file was (re)opened may be shorter than what the same cycle then read
/// (the writer went on in between), and a fingerprint that lags behind would not tell that
/// content from the next.
fn extend_head(head: &mut Vec<u8>, pos: u64, bytes: &[u8]) {
    let have = head.len() as u64;
    if have >= offsets::FINGERPRINT_BYTES as u64 || have < pos || have >= pos + bytes.len() as u64 {
        return;
    }
    let from = (have - pos) as usize;
    let to = bytes.len().min(from + offsets::FINGERPRINT_BYTES - head.len());
    head.extend_from_slice(&bytes[from..to]);
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

/// The paths `pattern` matches, sorted. A `**` is walked here rather than by `glob::glob`,
/// which follows symlinked directories (a loop spun forever): symlinked directories are not
/// entered, at most [`MAX_GLOB_DEPTH`] levels and [`MAX_LISTED`] entries are looked at.
fn list(pattern: &str) -> Vec<PathBuf> {
    if !pattern.contains("**") {
        // Bounded by the pattern's own components: no recursion.
        let Ok(paths) = glob::glob(pattern) else { return Vec::new() };
        return paths.flatten().take(MAX_LISTED).collect();
    }
    let Ok(matcher) = glob::Pattern::new(pattern) else { return Vec::new() };
    let options = glob::MatchOptions { require_literal_separator: true, ..glob::MatchOptions::new() };
    let mut out = Vec::new();
    let mut looked = 0usize;
    let mut stack = vec![(fixed_prefix(Path::new(pattern)), 0usize)];
    'walk: while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            looked += 1;
            if looked > MAX_LISTED {
                break 'walk;
            }
            let path = entry.path();
            // The entry itself, not what a symlink leads to.
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if depth < MAX_GLOB_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if matcher.matches_path_with(&path, options) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
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
    /// Asks the tailer to stop, and waits until its last cycle is applied to the state, at
    /// most [`STOP_TIMEOUT`] (a cycle stuck on a file system must not hold shutdown).
    pub async fn stop(self) {
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
        let state = app.state.read().unwrap_or_else(|e| e.into_inner());
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
        let Some(mut c) = core.take() else { return };
        let app_for_cycle = app.clone();
        let previous = last_report.clone();
        let cycled = tokio::task::spawn_blocking(move || {
            let events = c.cycle(Instant::now());
            // The events and the positions after them go into the state as one observation:
            // whatever snapshot of the state is persisted holds both or neither.
            if c.take_moved() || !events.is_empty() || c.has_spans() {
                app_for_cycle.apply(&Observation::LogRead(c.read(events)));
            }
            let cut = c.take_files_cut();
            app_for_cycle.count_cut(&c.opts.cluster, "log_files", cut);
            let report = c.report();
            if report != previous {
                app_for_cycle.apply(&Observation::LogTailer(report.clone()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_grows_with_what_was_read() {
        let mut head = b"ab".to_vec();
        extend_head(&mut head, 0, b"abcd");
        assert_eq!(head, b"abcd");
        extend_head(&mut head, 10, b"xyz"); // Not adjacent: the fingerprint stays as it is.
        assert_eq!(head, b"abcd");
        extend_head(&mut head, 4, &[b'e'; 2000]);
        assert_eq!(head.len(), offsets::FINGERPRINT_BYTES);
        assert_eq!(&head[..5], b"abcde");
    }

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
