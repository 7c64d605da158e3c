//! The synchronous core of a tailer: one `cycle` lists the files, tells rotations (rename,
//! copytruncate, delete + recreate) and copies of content already read, and reads what is new,
//! older content first. Time is an argument: the task reads the clock.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::follow::{CHUNK, Follower, Opened, set_file};
use super::list::list_all;
use crate::config::{LogConfig, StartAt};
use crate::observe::{CheckpointSpan, LogEvent, LogRead, TailerReport};
use crate::sources::logs::offsets::{self, FileId, TailerPositions};
use crate::sources::logs::parse::Patterns;
use crate::time::Timestamp;

/// Bytes read from one file per cycle before the others get their turn.
const READ_BUDGET: usize = 8 << 20;
/// How many contents no longer followed (truncated away, closed) are remembered to recognise
/// their copies.
const RETIRED: usize = 64;
/// A warning about one path (cannot stat, open or read it) is repeated at most this often.
const WARN_AGAIN_AFTER: Duration = Duration::from_secs(600);

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
    pub(crate) fn from_config(config: &LogConfig) -> Self {
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

/// A file opened for the first time, before it is known where to read it from.
struct Candidate<'a> {
    path: &'a PathBuf,
    meta: std::fs::Metadata,
    head: Vec<u8>,
    file: File,
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
    /// Creations of matching files reported by file events (see `TailCore::watch`).
    pub(super) created: Arc<AtomicU64>,
    /// `created` at the first listing.
    created_at_start: Option<u64>,
    /// Created files never met, as counted so far.
    unmet: u64,
    /// Kept alive with the core: its events count into `created`.
    pub(super) watcher: Option<notify::RecommendedWatcher>,
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

    /// The options it was made with.
    pub(crate) fn options(&self) -> &TailOptions {
        &self.opts
    }

    /// Files left unfollowed because of `max_files` since the last call (each counted once).
    pub fn take_files_cut(&mut self) -> u64 {
        std::mem::take(&mut self.files_cut)
    }

    /// Counts an error on `path` and warns about it, at most every [`WARN_AGAIN_AFTER`] per path
    /// (before: a warning a second per unreadable file, forever).
    fn warn(&mut self, path: &Path, what: &str, e: &io::Error, now: Instant) {
        self.stats.errors += 1;
        if self.warned.get(path).is_some_and(|at| now.saturating_duration_since(*at) < WARN_AGAIN_AFTER) {
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
        let files = self.followers.iter().map(Follower::position).collect();
        TailerPositions { written_at_ms: self.listed_at_ms, files }
    }

    /// Whether the positions moved since this was last asked.
    pub(crate) fn take_moved(&mut self) -> bool {
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
    pub(crate) fn has_spans(&self) -> bool {
        !self.spans.is_empty()
    }

    fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Looks at the files and reads what is new; returns the events, in file order. `now`
    /// times the quiet periods (`flush_after`, `drop_after`); `wall` is when the files are
    /// listed, kept with the positions: a file written after it appeared while the tailer was
    /// down.
    pub fn cycle(&mut self, now: Instant, wall: Timestamp) -> Vec<LogEvent> {
        let mut events = Vec::new();
        // Read before listing: a file whose creation was reported by now is in this listing,
        // unless it is gone already.
        let created = self.created.load(Ordering::Acquire);
        self.listed_at_ms = wall.millis();
        let listing = list_all(&self.opts.paths);
        for (path, e) in &listing.failed {
            self.warn(path, "cannot stat log file", e, now);
        }
        let found = listing.found;

        self.note_moves(&found, now);
        let unknown = self.look_at_followed(&found, &mut events);
        self.open_new(unknown, now);
        for f in self.followers.iter_mut().filter(|f| f.seq == u64::MAX) {
            self.next_seq += 1;
            f.seq = self.next_seq;
        }
        self.count_gaps(created, &found);
        self.first_cycle = false;
        self.resume = None;

        self.read_followed(now, &mut events);
        self.close_quiet(now);
        self.stats.files = self.followers.len() as u64;
        self.stats.lag_bytes = self.followers.iter().map(|f| f.len.saturating_sub(f.splitter.offset())).sum();
        events
    }

    /// Files whose path now leads to another file, or to none: rotated away or deleted.
    fn note_moves(&mut self, found: &[(PathBuf, std::fs::Metadata)], now: Instant) {
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
    }

    /// Looks at the listed files already followed, starting over those truncated
    /// (copytruncate); returns the paths of the files not followed yet.
    fn look_at_followed<'a>(
        &mut self,
        found: &'a [(PathBuf, std::fs::Metadata)],
        events: &mut Vec<LogEvent>,
    ) -> Vec<&'a PathBuf> {
        let mut unknown = Vec::new();
        for (path, meta) in found {
            let id = FileId::of(meta);
            let Some(f) = self.followers.iter_mut().find(|f| f.id == id) else {
                unknown.push(path);
                continue;
            };
            f.gone = false;
            f.len = meta.len();
            let was_empty = f.head.is_empty();
            match f.truncated(meta.len()) {
                Ok(true) => {
                    // copytruncate (or the content was replaced in place): what the old content
                    // still owed is emitted, then the file is read from its start. The old
                    // content is remembered, so its copy is read on from here.
                    self.stats.rotations += 1;
                    f.parser.flush(events);
                    set_file(events, &self.opts.cluster, &f.path);
                    self.retired.push_back(Retired {
                        head: std::mem::take(&mut f.head),
                        offset: f.committed(),
                        seq: f.seq,
                        awaiting_copy: 2,
                    });
                    // Newer than anything met so far, copies of older content included: numbered
                    // once those are opened.
                    f.seq = u64::MAX;
                    if let Err(e) = f.start_over(self.opts.max_line_bytes) {
                        self.stats.errors += 1;
                        tracing::warn!(path = %f.path.display(), "cannot rewind log file: {e}");
                    }
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
        unknown
    }

    /// Reads what is new in the followed files, older content first (so events keep their
    /// order across a rotation), flushes records quiet for `flush_after`, and reads files
    /// gone and quiet for `drop_after` to their very end.
    fn read_followed(&mut self, now: Instant, events: &mut Vec<LogEvent>) {
        self.followers.sort_by_key(|f| f.seq);
        self.more = false;
        let mut chunk = vec![0u8; CHUNK];
        for f in &mut self.followers {
            let before = events.len();
            let (lines, oversize) = (f.splitter.lines, f.splitter.oversize);
            match f.read(&mut chunk, self.opts.read_budget, events, &mut self.spans) {
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
            let quiet = f.quiet(now);
            if f.parser.has_pending() && quiet >= self.opts.flush_after {
                f.parser.flush(events);
                self.moved = true;
            }
            if f.gone && quiet >= self.opts.drop_after {
                f.finish(events, &mut self.spans);
            }
            set_file(&mut events[before..], &self.opts.cluster, &f.path);
            self.stats.lines += f.splitter.lines - lines;
            self.stats.oversize_lines += f.splitter.oversize - oversize;
        }
    }

    /// Closes the files gone and quiet for `drop_after` (read to their end by now), remembering
    /// their content to know a copy of it.
    fn close_quiet(&mut self, now: Instant) {
        let drop_after = self.opts.drop_after;
        let retired = &mut self.retired;
        self.followers.retain(|f| {
            let keep = !(f.gone && f.quiet(now) >= drop_after);
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
    }

    /// How long until a record held for its stack trace is due to be flushed, when one is:
    /// the tailer wakes then rather than at its next poll, so an event that no further line
    /// follows still reaches the rules within `flush_after`.
    pub(crate) fn flush_due_in(&self, now: Instant) -> Option<Duration> {
        self.followers
            .iter()
            .filter(|f| f.parser.has_pending())
            .map(|f| self.opts.flush_after.saturating_sub(f.quiet(now)))
            .min()
    }

    /// Opens the files seen for the first time, oldest first.
    fn open_new(&mut self, unknown: Vec<&PathBuf>, now: Instant) {
        // At most max_files open at once (file descriptors): the newest-named files first is
        // not knowable here, so the first in listing order; the rest are counted once each.
        let room = self.opts.max_files.saturating_sub(self.followers.len());
        if unknown.len() > room {
            self.count_cut(&unknown[room..]);
        }
        let mut candidates = self.open_candidates(unknown.into_iter().take(room), now);
        // The files the resumed positions name first, so that a copy of one is known as such.
        let resume = self.resume.as_ref().filter(|_| self.first_cycle);
        candidates.sort_by_key(|c| {
            let resumed =
                resume.is_some_and(|r| r.files.iter().any(|p| p.matches(FileId::of(&c.meta), &c.head)));
            (!resumed, c.meta.modified().ok(), rotation_age(c.path))
        });
        for Candidate { path, meta, head, file } in candidates {
            let id = FileId::of(&meta);
            let start = self.start_of(id, &meta, &head);
            if !matches!(start, Start::Wait) && self.met.insert(id) && !self.first_cycle {
                self.met_since_start += 1;
            }
            let (offset, seq) = match start {
                Start::At(offset, seq) => (offset, seq),
                Start::Skip | Start::Wait => continue,
            };
            let opened = Opened { id, path: path.clone(), file, head, len: meta.len(), offset, seq };
            match Follower::open(opened, self.opts.max_line_bytes, self.patterns.clone(), now) {
                Ok(follower) => {
                    tracing::info!(path = %path.display(), offset, "following log file");
                    self.followers.push(follower);
                    self.moved = true;
                }
                Err(e) => {
                    self.stats.errors += 1;
                    tracing::warn!(path = %path.display(), "cannot open log file: {e}");
                }
            }
        }
    }

    /// Counts the files left out for want of room, each once.
    fn count_cut(&mut self, left_out: &[&PathBuf]) {
        for path in left_out {
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

    /// Opens the files at `paths`, each file once and none already followed.
    fn open_candidates<'a>(
        &mut self,
        paths: impl Iterator<Item = &'a PathBuf>,
        now: Instant,
    ) -> Vec<Candidate<'a>> {
        let mut candidates: Vec<Candidate<'a>> = Vec::new();
        let mut failed = Vec::new();
        for path in paths {
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
                        || candidates.iter().any(|c| FileId::of(&c.meta) == id);
                    if meta.is_file() && !known {
                        candidates.push(Candidate { path, meta, head, file });
                    }
                }
                // Gone between listing and opening: if it was created while watched, it is a gap.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => failed.push((path.clone(), e)),
            }
        }
        for (path, e) in failed {
            self.warn(&path, "cannot open log file", &e, now);
        }
        candidates
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

fn modified_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(i64::MAX, |d| d.as_millis() as i64)
}
