//! The offline analysis behind `checkpoint-sentinel scan-logs`: events per kind, a timeline per
//! checkpoint, the subtasks that held checkpoints up, and root causes, as text or JSON.
//!
//! The scan streams: each file is read in large buffers, one SIMD multi-literal search over the
//! whole buffer finds the built-in needles ([`Patterns::find_needles`]), and only the lines
//! that carry one (plus the stack trace of a line that produced an event) reach the record
//! parser. Lines that match nothing cost the newline search and a comparison. Events are folded
//! into an [`Aggregate`] as they come, in a compact form (interned strings, no stack traces),
//! so memory grows with the number of checkpoint events, not with the size of the input, and
//! every per-checkpoint collection is capped.
//!
//! Several files, or a large one cut into ranges at record starts, are scanned on one thread
//! per core ([`Scanner::scan_paths`]); the events are folded in in file order, so the report is
//! the one of a serial pass.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::{Value, json};

use crate::observe::{LogEvent, counts_root_cause};
use crate::sources::logs::parse::{
    BUILTIN_KINDS, LineNeedles, LineSplitter, Patterns, RecordParser, SYMPTOM_CATEGORIES, is_record_start,
    line_needles,
};
use crate::time::log_time_utc_ms;

/// Kinds that name a subtask holding a checkpoint up or failing it.
const BLOCKING_KINDS: &[&str] = &[
    "declined",
    "late_message",
    "async_snapshot_failed",
    "sync_snapshot_failed",
    "barrier_missing",
    "barrier_overtaken",
    "end_of_partition",
    "execution_delay",
];

/// Bytes read per system call; the needle search runs over a whole buffer at a time. Small
/// enough to stay in the L2 cache between the kernel's copy and the search.
const READ_BUFFER: usize = 256 << 10;
/// Timeline events kept (≈ 80 bytes each); further ones are counted in `timeline_events_dropped`.
const MAX_TIMELINE_EVENTS: usize = 1_000_000;
/// Checkpoint ids listed per blocking subtask.
const MAX_BLOCKING_IDS: usize = 10_000;
/// Distinct (exception, message) examples kept per root-cause category.
const MAX_CAUSE_EXAMPLES: usize = 100;

/// One scanned file.
#[derive(Clone, Debug, Default)]
pub struct FileSummary {
    /// Its path.
    pub path: PathBuf,
    /// Bytes read.
    pub bytes: u64,
    /// Lines read.
    pub lines: u64,
    /// Lines cut at the line limit.
    pub oversize_lines: u64,
    /// Lines that start with a log4j timestamp (`2026-11-29 15:04:08,723`), counted up to the
    /// first one: 0 in a file that has lines means it is not a Flink log.
    pub records: u64,
}

impl FileSummary {
    /// A file with lines of which none starts with a log4j timestamp: not a Flink log in
    /// Flink's layout (`%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n`).
    pub fn is_not_a_flink_log(&self) -> bool {
        self.lines > 0 && self.records == 0
    }
}

/// Everything a scan found.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// The files, in the order given.
    pub files: Vec<FileSummary>,
    /// Every event, in file order (files in the order given), with its stack trace — only when
    /// the scan keeps events ([`Scanner::keep_events`], [`scan_paths`]); the report itself is
    /// built from the aggregate either way.
    pub events: Vec<LogEvent>,
    aggregate: Aggregate,
}

/// Reads `paths` with the given line limit and keeps every event in [`ScanReport::events`]
/// besides the aggregate: for tests and small inputs. `scan-logs` uses [`scan_paths_streaming`].
pub fn scan_paths(
    paths: &[PathBuf],
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
) -> io::Result<ScanReport> {
    let mut scanner = Scanner::new(patterns.clone(), max_line_bytes).keep_events(true);
    scanner.scan_paths(paths)?;
    Ok(scanner.finish())
}

/// Reads `paths` with the given line limit into the aggregate only: memory bounded by the
/// number of checkpoint events, whatever the size of the files.
pub fn scan_paths_streaming(
    paths: &[PathBuf],
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
) -> io::Result<ScanReport> {
    let mut scanner = Scanner::new(patterns.clone(), max_line_bytes);
    scanner.scan_paths(paths)?;
    Ok(scanner.finish())
}

/// Reads one stream into `report` (events kept, as [`scan_paths`]).
pub fn scan_reader(
    path: &Path,
    reader: impl Read,
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
    report: &mut ScanReport,
) -> io::Result<()> {
    let mut scanner = Scanner::new(patterns.clone(), max_line_bytes).keep_events(true);
    scanner.report = std::mem::take(report);
    scanner.seq = scanner.report.aggregate.next_seq;
    scanner.scan_reader(path, reader)?;
    *report = scanner.finish();
    Ok(())
}

/// A streaming scan over any number of files.
pub struct Scanner {
    patterns: Arc<Patterns>,
    max_line_bytes: usize,
    keep_events: bool,
    report: ScanReport,
    seq: u64,
    buf: Vec<u8>,
    /// Files at least this large are cut into ranges at record starts.
    parallel_min_bytes: u64,
    /// Threads that scan (this one included).
    threads: usize,
    /// Ranges per cut file; `None`: one per [`RANGE_BYTES`], at least one per thread.
    ranges: Option<usize>,
    /// Every line visited one by one (the reference the tests compare the jumping scan with).
    by_lines: bool,
}

impl Scanner {
    /// A scan with these patterns and line limit that keeps only the aggregate.
    pub fn new(patterns: Arc<Patterns>, max_line_bytes: usize) -> Self {
        Scanner {
            patterns,
            max_line_bytes,
            keep_events: false,
            report: ScanReport::default(),
            seq: 0,
            buf: Vec::new(),
            parallel_min_bytes: PARALLEL_MIN_BYTES,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS),
            ranges: None,
            by_lines: false,
        }
    }

    /// Scans on `threads` threads, and cuts files of at least `min_bytes` into `threads`
    /// ranges (by default: one thread per core, at most 8; files from 32 MiB on, cut into
    /// 16 MiB ranges).
    pub fn parallel(mut self, min_bytes: u64, threads: usize) -> Self {
        let threads = threads.clamp(1, MAX_THREADS);
        (self.parallel_min_bytes, self.threads, self.ranges) = (min_bytes, threads, Some(threads));
        self
    }

    /// Visits every line one by one instead of jumping from needle to needle: the reference
    /// path, slower, that tests compare the default one with.
    #[doc(hidden)]
    pub fn by_lines(mut self, by_lines: bool) -> Self {
        self.by_lines = by_lines;
        self
    }

    /// Also keep every event (with its stack trace) in [`ScanReport::events`].
    pub fn keep_events(mut self, keep: bool) -> Self {
        self.keep_events = keep;
        self
    }

    /// Reads one file (see [`Scanner::scan_paths`]).
    pub fn scan_path(&mut self, path: &Path) -> io::Result<()> {
        self.scan_paths(std::slice::from_ref(&path.to_path_buf()))
    }

    /// Reads `paths` in order. The work is cut into units, each a small file or a range of a
    /// large one cut at a record start; the threads take units in order as they become free
    /// and this thread folds their events into the aggregate in file order, so the report
    /// (and the kept events) are those of one serial pass, and the first error returned is
    /// the one a serial scan would meet first. A thread runs at most [`AHEAD`] units per
    /// thread ahead of the aggregation, so memory holds a few units' events, whatever the
    /// size of the input.
    pub fn scan_paths(&mut self, paths: &[PathBuf]) -> io::Result<()> {
        let units = self.plan(paths);
        if units.is_empty() {
            return Ok(());
        }
        let threads = self.threads.min(units.len());
        let work = Work {
            units: &units,
            paths,
            next: AtomicUsize::new(0),
            gate: Mutex::new(0),
            advanced: Condvar::new(),
        };
        let mut buf = std::mem::take(&mut self.buf);
        let (tx, rx) = std::sync::mpsc::channel::<(usize, UnitOutcome)>();
        let patterns = self.patterns.clone();
        let scan = ScanSettings {
            patterns: &patterns,
            max_line_bytes: self.max_line_bytes,
            by_lines: self.by_lines,
            keep: self.keep_events,
        };
        let result = std::thread::scope(|scope| {
            for _ in 1..threads {
                let (tx, work) = (tx.clone(), &work);
                scope.spawn(move || {
                    let mut buf = Vec::new();
                    while let Some(i) = work.take(threads) {
                        if tx.send((i, scan.unit(work.paths, &work.units[i], &mut buf))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut pending: BTreeMap<usize, UnitOutcome> = BTreeMap::new();
            let mut files = FileTotals::default();
            let mut done = 0;
            let result = loop {
                while let Ok((i, outcome)) = rx.try_recv() {
                    pending.insert(i, outcome);
                }
                if let Some(outcome) = pending.remove(&done) {
                    let step = match outcome {
                        Ok(scanned) => scanned.map(|s| self.fold(paths, &units[done], s, &mut files)),
                        Err(panic) => {
                            work.stop();
                            std::panic::resume_unwind(panic)
                        }
                    };
                    if let Err(e) = step {
                        break Err(e);
                    }
                    done += 1;
                    work.advance(done);
                    if done == units.len() {
                        break Ok(());
                    }
                } else if let Some(i) = work.take_now(done, threads) {
                    pending.insert(i, scan.unit(paths, &units[i], &mut buf));
                } else {
                    match rx.recv() {
                        Ok((i, outcome)) => {
                            pending.insert(i, outcome);
                        }
                        // Every worker ended without the unit this thread waits for: cannot
                        // happen (a worker sends every unit it took), but never wait for ever.
                        Err(_) => break Err(io::Error::other("scan-logs: a scanning thread ended early")),
                    }
                }
            };
            work.stop();
            result
        });
        self.buf = buf;
        result
    }

    /// The units of `paths`: a file below the parallel size is one unit, a larger one is cut
    /// into ranges at record starts.
    fn plan(&self, paths: &[PathBuf]) -> Vec<Unit> {
        let mut units = Vec::new();
        for (path, p) in paths.iter().enumerate() {
            let whole = Unit { path, from: 0, to: None, first: true, last: true };
            // Only a regular file can be cut (a pipe or a device is read as one unit).
            let len = std::fs::metadata(p).ok().filter(|m| m.is_file()).map_or(0, |m| m.len());
            let ranges =
                self.ranges.unwrap_or_else(|| (len.div_ceil(RANGE_BYTES) as usize).max(self.threads));
            if len == 0 || len < self.parallel_min_bytes || ranges < 2 {
                units.push(whole);
                continue;
            }
            // A file that cannot be opened or read here is scanned whole: the scan meets the
            // error in its place, after the files before it, as a serial scan would.
            let starts = std::fs::File::open(p)
                .and_then(|mut file| split_points(&mut file, len, ranges))
                .unwrap_or_default();
            if starts.is_empty() {
                units.push(whole);
                continue;
            }
            for (k, &from) in starts.iter().enumerate() {
                // The last range reads to the end, as a single pass would.
                let to = starts.get(k + 1).copied();
                units.push(Unit { path, from, to, first: k == 0, last: to.is_none() });
            }
        }
        units
    }

    /// Folds one scanned unit into the report, in order.
    fn fold(&mut self, paths: &[PathBuf], unit: &Unit, scanned: Scanned, files: &mut FileTotals) {
        let path = &paths[unit.path];
        if unit.first {
            let name = path.display().to_string();
            files.sym = self.report.aggregate.add_file(&name);
            files.name = name;
            files.totals = Totals::default();
        }
        let mut sink = Sink {
            aggregate: &mut self.report.aggregate,
            kept: self.keep_events.then_some(&mut self.report.events),
            name: &files.name,
            file: files.sym,
            seq: &mut self.seq,
        };
        match scanned.events {
            UnitEvents::Kept(events) => events.into_iter().for_each(|e| sink.add(e)),
            UnitEvents::Packed(packed) => packed.views().for_each(|e| sink.add_view(&e)),
        }
        let (t, s) = (&mut files.totals, scanned.totals);
        (t.end, t.lines, t.oversize, t.records) =
            (s.end, t.lines + s.lines, t.oversize + s.oversize, t.records.max(s.records));
        if unit.last {
            self.report.files.push(FileSummary {
                path: path.clone(),
                bytes: t.end,
                lines: t.lines,
                oversize_lines: t.oversize,
                records: t.records,
            });
        }
    }

    /// Reads one stream; `path` names it in the report.
    pub fn scan_reader(&mut self, path: &Path, reader: impl Read) -> io::Result<()> {
        let name = path.display().to_string();
        let file = self.report.aggregate.add_file(&name);
        let mut buf = std::mem::take(&mut self.buf);
        let mut sink = Sink {
            aggregate: &mut self.report.aggregate,
            kept: self.keep_events.then_some(&mut self.report.events),
            name: &name,
            file,
            seq: &mut self.seq,
        };
        let result = scan_range(
            &self.patterns,
            self.max_line_bytes,
            0,
            reader,
            &mut buf,
            self.by_lines,
            self.keep_events,
            &mut |e| sink.add(e),
        );
        self.buf = buf;
        let totals = result?;
        self.report.files.push(FileSummary {
            path: path.to_path_buf(),
            bytes: totals.end,
            lines: totals.lines,
            oversize_lines: totals.oversize,
            records: totals.records,
        });
        Ok(())
    }

    /// The report.
    pub fn finish(mut self) -> ScanReport {
        self.report.aggregate.next_seq = self.seq;
        self.report
    }
}

/// Files at least this large are cut into ranges scanned in parallel.
const PARALLEL_MIN_BYTES: u64 = 32 << 20;
/// The size of a range of a cut file: small enough that the threads share out a large file
/// evenly (a thread slowed by something else on the machine takes fewer ranges) and that the
/// events of the ranges waiting to be folded in stay small.
const RANGE_BYTES: u64 = 16 << 20;
/// At most this many threads.
const MAX_THREADS: usize = 8;
/// How many units per thread a scanning thread may be ahead of the aggregation.
const AHEAD: usize = 4;

/// A piece of a scan: a whole file, or a range of one starting at a record start.
struct Unit {
    /// Index of its file in the paths.
    path: usize,
    from: u64,
    /// Offset after its last byte; `None` to the end of the file.
    to: Option<u64>,
    /// The first (last) range of its file.
    first: bool,
    last: bool,
}

/// What a unit held: its totals and its events, in order.
struct Scanned {
    totals: Totals,
    events: UnitEvents,
}

/// A unit's events: whole when the scan keeps them, else packed.
enum UnitEvents {
    Kept(Vec<LogEvent>),
    Packed(PackedEvents),
}

/// A unit's result, or the panic of the thread that scanned it (raised again in order).
type UnitOutcome = std::thread::Result<io::Result<Scanned>>;

/// The file being folded in: its name, symbol and totals so far.
#[derive(Default)]
struct FileTotals {
    name: String,
    sym: u32,
    totals: Totals,
}

/// The units of a scan and who takes which: units are taken in order; a worker waits while
/// the unit it took is too far ahead of the aggregation.
struct Work<'a> {
    units: &'a [Unit],
    paths: &'a [PathBuf],
    next: AtomicUsize,
    /// Units folded in so far (`usize::MAX` once the scan stops).
    gate: Mutex<usize>,
    advanced: Condvar,
}

impl Work<'_> {
    /// The next unit for a worker, once the aggregation is close enough; `None` when every
    /// unit is taken or the scan stopped.
    fn take(&self, threads: usize) -> Option<usize> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if i >= self.units.len() {
            return None;
        }
        let mut done = self.gate.lock().unwrap_or_else(|p| p.into_inner());
        while *done != usize::MAX && i >= *done + AHEAD * threads {
            done = self.advanced.wait(done).unwrap_or_else(|p| p.into_inner());
        }
        (*done != usize::MAX).then_some(i)
    }

    /// The next unit for the aggregating thread, if one is left within reach (it never waits:
    /// it is the one that moves the gate).
    fn take_now(&self, done: usize, threads: usize) -> Option<usize> {
        let mut i = self.next.load(Ordering::Relaxed);
        while i < self.units.len() && i < done + AHEAD * threads {
            match self.next.compare_exchange(i, i + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(i),
                Err(now) => i = now,
            }
        }
        None
    }

    fn advance(&self, done: usize) {
        *self.gate.lock().unwrap_or_else(|p| p.into_inner()) = done;
        self.advanced.notify_all();
    }

    /// Workers take no further unit.
    fn stop(&self) {
        self.next.store(self.units.len(), Ordering::Relaxed);
        self.advance(usize::MAX);
    }
}

/// What every unit of a scan is read with.
#[derive(Clone, Copy)]
struct ScanSettings<'a> {
    patterns: &'a Arc<Patterns>,
    max_line_bytes: usize,
    by_lines: bool,
    keep: bool,
}

impl ScanSettings<'_> {
    /// Scans one unit; a panic is caught and handed over with the unit, to be raised again
    /// where the unit's turn comes.
    fn unit(&self, paths: &[PathBuf], unit: &Unit, buf: &mut Vec<u8>) -> UnitOutcome {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.scan(paths, unit, buf)))
    }

    /// Scans one unit into its events (packed unless they are kept: the root cause is
    /// classified already, the aggregate reads no stack trace).
    fn scan(&self, paths: &[PathBuf], unit: &Unit, buf: &mut Vec<u8>) -> io::Result<Scanned> {
        let path = &paths[unit.path];
        let mut file = std::fs::File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        if unit.from > 0 {
            file.seek(io::SeekFrom::Start(unit.from))?;
        }
        let (mut kept, mut packed) = (Vec::new(), PackedEvents::default());
        let keep = self.keep;
        let mut emit = |e: LogEvent| {
            if keep {
                kept.push(e);
            } else {
                packed.push(&EventView::of(&e));
            }
        };
        let (patterns, max, by_lines) = (self.patterns, self.max_line_bytes, self.by_lines);
        let totals = match unit.to {
            Some(to) => scan_range(
                patterns,
                max,
                unit.from,
                file.take(to - unit.from),
                buf,
                by_lines,
                keep,
                &mut emit,
            ),
            None => scan_range(patterns, max, unit.from, file, buf, by_lines, keep, &mut emit),
        }?;
        let events = if keep { UnitEvents::Kept(kept) } else { UnitEvents::Packed(packed) };
        Ok(Scanned { totals, events })
    }
}

/// What a range held.
#[derive(Default)]
struct Totals {
    /// Offset after its last byte.
    end: u64,
    lines: u64,
    oversize: u64,
    /// Record starts seen (counting stops at the first).
    records: u64,
}

/// Where to cut a file of `len` bytes into `n` ranges: offsets of record starts (a timestamped
/// line) near each `len * i / n`, beginning with 0. Empty if no cut was found.
fn split_points(file: &mut std::fs::File, len: u64, n: usize) -> io::Result<Vec<u64>> {
    // Most records are a line or a short stack trace: a record start is usually in the first
    // few KiB; a window of 1 MiB is read only for a record longer than that.
    const FIRST_WINDOW: usize = 64 << 10;
    const MAX_WINDOW: usize = 1 << 20;
    let mut starts = vec![0u64];
    let mut window = vec![0u8; MAX_WINDOW];
    for i in 1..n as u64 {
        let target = len * i / n as u64;
        file.seek(io::SeekFrom::Start(target))?;
        let mut filled = 0;
        let mut want = FIRST_WINDOW;
        let cut = loop {
            while filled < want {
                match file.read(&mut window[filled..want]) {
                    Ok(0) => break,
                    Ok(k) => filled += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let data = &window[..filled];
            // A line start is a byte after a newline; the line must be complete in the window.
            let cut = memchr::memchr_iter(b'\n', data).map(|nl| nl + 1).find(|&at| {
                let line_end = memchr::memchr(b'\n', &data[at..]).map(|e| at + e);
                line_end.is_some_and(|e| is_record_start(&data[at..e]))
            });
            if cut.is_some() || filled < want || want == MAX_WINDOW {
                break cut;
            }
            want = MAX_WINDOW;
        };
        match cut {
            Some(at) if target + at as u64 > *starts.last().unwrap_or(&0) => starts.push(target + at as u64),
            _ => {}
        }
    }
    Ok(if starts.len() > 1 { starts } else { Vec::new() })
}

/// Scans `reader`, whose first byte is at `start` in its file and starts a line, and hands
/// every event to `emit`, in order. Only lines with a needle (and the stack traces of lines
/// that produced events) reach the record parser.
///
/// The needles are searched over the whole read buffer. Unless `by_lines` (the reference path
/// the tests compare with), the lines between two needles are not visited one by one: the scan
/// jumps to the start of the next needle's line (`memrchr`), and their newlines are counted in
/// one vectorised pass. Only a record that produced events (its stack trace follows) is read
/// line by line, up to the next record start.
#[allow(clippy::too_many_arguments)]
fn scan_range(
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
    start: u64,
    mut reader: impl Read,
    buf: &mut Vec<u8>,
    by_lines: bool,
    keep_stack: bool,
    emit: &mut dyn FnMut(LogEvent),
) -> io::Result<Totals> {
    let mut splitter = LineSplitter::new(max_line_bytes, start);
    // Every line is a candidate when user patterns are configured (they match anything).
    let all_lines = patterns.has_user_patterns();
    // A line within one buffer is shorter than the buffer, so no line the jump skips could have
    // been cut by the line limit; lines across buffers go through the splitter as before.
    let jump = !by_lines && !all_lines && max_line_bytes >= READ_BUFFER;
    if buf.len() != READ_BUFFER {
        *buf = vec![0u8; READ_BUFFER];
    }
    let mut needles = Vec::new();
    let mut lines = Lines {
        patterns,
        all_lines,
        parser: RecordParser::new(patterns.clone()).keep_stack(keep_stack),
        prev: PrevLine::default(),
        records: 0,
        events: Vec::new(),
        next: 0,
    };
    loop {
        let n = match reader.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        let chunk_start = splitter.offset();
        needles.clear();
        if !all_lines {
            patterns.find_needles(chunk, &mut needles);
        }
        lines.next = 0;
        let newlines =
            if jump { memchr::memchr(b'\n', chunk).zip(memchr::memrchr(b'\n', chunk)) } else { None };
        match newlines {
            Some((first, last)) => {
                // The line the previous buffer began, or the first line; then the complete
                // lines between the first and the last newline; then the unfinished line.
                let (a, b) = (first + 1, last + 1);
                splitter.feed(&chunk[..a], |line, offset| {
                    lines.line(line, offset, chunk, chunk_start, &needles, emit)
                });
                lines.jump(chunk, a, b, chunk_start, &needles, emit);
                splitter.skip(b - a, memchr::memchr_iter(b'\n', &chunk[a..b]).count() as u64);
                splitter.feed(&chunk[b..], |line, offset| {
                    lines.line(line, offset, chunk, chunk_start, &needles, emit)
                });
            }
            None => splitter
                .feed(chunk, |line, offset| lines.line(line, offset, chunk, chunk_start, &needles, emit)),
        }
        lines.prev.keep(chunk, chunk_start);
    }
    let end = splitter.offset();
    splitter.finish(|line, offset| lines.line(line, offset, &[], end, &[], emit));
    lines.parser.flush(&mut lines.events);
    for e in lines.events.drain(..) {
        emit(e);
    }
    Ok(Totals { end, lines: splitter.lines, oversize: splitter.oversize, records: lines.records })
}

/// The per-line state of one range.
struct Lines<'p> {
    patterns: &'p Patterns,
    all_lines: bool,
    parser: RecordParser,
    /// The line before the current one, for a needle on a record's first continuation line
    /// (`Exceeded checkpoint tolerable failure threshold` under a line that matched nothing).
    prev: PrevLine,
    /// Record starts seen (counting stops at the first).
    records: u64,
    events: Vec<LogEvent>,
    /// Index of the first needle of the buffer not before the current line.
    next: usize,
}

impl Lines<'_> {
    /// One line as the splitter cut it, starting at `offset` in the file; `chunk` is the
    /// buffer being read (starting at `chunk_start`) and `needles` the needles found in it.
    fn line(
        &mut self,
        line: &[u8],
        offset: u64,
        chunk: &[u8],
        chunk_start: u64,
        needles: &[(usize, usize, u32)],
        emit: &mut dyn FnMut(LogEvent),
    ) {
        if self.records == 0 && is_record_start(line) {
            self.records = 1;
        }
        let (candidate, found) = if self.all_lines {
            (true, LineNeedles::Unknown)
        } else {
            line_needles(self.patterns, needles, &mut self.next, line, offset, chunk_start)
        };
        consider(
            line,
            offset,
            candidate,
            found,
            &mut self.parser,
            &mut self.prev,
            chunk,
            chunk_start,
            &mut self.events,
        );
        for e in self.events.drain(..) {
            emit(e);
        }
    }

    /// The complete lines `chunk[a..b]` (`b` follows a newline): a line without a needle,
    /// while no record that produced events is open, would only become the previous line, so
    /// the scan jumps from needle line to needle line and sets the previous line once per jump.
    fn jump(
        &mut self,
        chunk: &[u8],
        a: usize,
        b: usize,
        chunk_start: u64,
        needles: &[(usize, usize, u32)],
        emit: &mut dyn FnMut(LogEvent),
    ) {
        let mut pos = a;
        while pos < b {
            if self.records != 0 && !self.parser.wants_continuation() {
                while self.next < needles.len() && needles[self.next].0 < pos {
                    self.next += 1;
                }
                let target = match needles.get(self.next) {
                    Some(&(s, ..)) if s < b => s,
                    _ => b,
                };
                let line_start = memchr::memrchr(b'\n', &chunk[pos..target]).map_or(pos, |i| pos + i + 1);
                if line_start > pos {
                    let prev_end = line_start - 1;
                    let prev_start =
                        memchr::memrchr(b'\n', &chunk[pos..prev_end]).map_or(pos, |i| pos + i + 1);
                    self.prev.set(
                        strip_cr(&chunk[prev_start..prev_end]),
                        chunk_start + prev_start as u64,
                        chunk_start,
                    );
                    pos = line_start;
                    if pos >= b {
                        break;
                    }
                }
            }
            let end = memchr::memchr(b'\n', &chunk[pos..b]).map_or(b, |i| pos + i);
            self.line(
                strip_cr(&chunk[pos..end]),
                chunk_start + pos as u64,
                chunk,
                chunk_start,
                needles,
                emit,
            );
            pos = end + 1;
        }
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Hands a line to the parser if it can matter: it carries a needle (`candidate`), or it is part
/// of a record that produced events (its stack trace, or the line that ends it). A needle on a
/// continuation line counts only on the first line under a record start (where Flink prints the
/// thrown exception), and then that record start is pushed first.
#[allow(clippy::too_many_arguments)]
fn consider(
    line: &[u8],
    offset: u64,
    candidate: bool,
    needles: LineNeedles,
    parser: &mut RecordParser,
    prev: &mut PrevLine,
    chunk: &[u8],
    chunk_start: u64,
    events: &mut Vec<LogEvent>,
) {
    if parser.wants_continuation() || (candidate && is_record_start(line)) {
        parser.push_line_with_needles(line, offset, candidate, needles, events);
    } else if candidate && let Some(header) = prev.record_start_before(offset, chunk, chunk_start) {
        parser.push_line(header, prev.offset, events);
        parser.push_searched_line(line, offset, candidate, events);
    }
    prev.set(line, offset, chunk_start);
}

/// Where events go: the aggregate, and the kept list if asked for.
struct Sink<'a> {
    aggregate: &'a mut Aggregate,
    kept: Option<&'a mut Vec<LogEvent>>,
    name: &'a str,
    file: u32,
    seq: &'a mut u64,
}

impl Sink<'_> {
    fn add(&mut self, mut event: LogEvent) {
        self.add_view(&EventView::of(&event));
        if let Some(kept) = self.kept.as_deref_mut() {
            event.file = self.name.to_string();
            kept.push(event);
        }
    }

    fn add_view(&mut self, event: &EventView<'_>) {
        self.aggregate.add(event, self.file, *self.seq);
        *self.seq += 1;
    }
}

/// What the aggregate reads of an event, borrowed (from a [`LogEvent`] or a [`PackedEvents`]).
struct EventView<'a> {
    kind: &'a str,
    logged_at: Option<&'a str>,
    job_id: Option<&'a str>,
    checkpoint_id: Option<u64>,
    task: Option<&'a str>,
    subtask: Option<u32>,
    taskmanager: Option<&'a str>,
    duration_ms: Option<u64>,
    consecutive_failures: Option<u32>,
    reason: Option<&'a str>,
    detail: Option<&'a str>,
    /// (category, exception, message)
    root_cause: Option<(&'static str, &'a str, &'a str)>,
}

impl<'a> EventView<'a> {
    fn of(e: &'a LogEvent) -> Self {
        EventView {
            kind: &e.kind,
            logged_at: e.logged_at.as_deref(),
            job_id: e.job_id.as_deref(),
            checkpoint_id: e.checkpoint_id,
            task: e.task.as_deref(),
            subtask: e.subtask,
            taskmanager: e.taskmanager.as_deref(),
            duration_ms: e.duration_ms,
            consecutive_failures: e.consecutive_failures,
            reason: e.reason.as_deref(),
            detail: e.detail.as_deref(),
            root_cause: e.root_cause.as_ref().map(|c| (c.category, c.exception.as_str(), c.message.as_str())),
        }
    }
}

/// A unit's events as the aggregate reads them, their text in one string: what a scanning
/// thread hands over when events are not kept. Each [`LogEvent`] is dropped on the thread that
/// made it (its eight or so strings freed where they were allocated; with glibc's malloc, frees
/// from another thread contend for the arena's lock), and one string and one vector cross over.
#[derive(Default)]
struct PackedEvents {
    text: String,
    events: Vec<PackedEvent>,
}

/// A piece of [`PackedEvents::text`]: (start, end); `NONE` is `None`.
type Piece = (u32, u32);
const NONE: Piece = (u32::MAX, 0);

struct PackedEvent {
    kind: Piece,
    logged_at: Piece,
    job_id: Piece,
    task: Piece,
    taskmanager: Piece,
    reason: Piece,
    detail: Piece,
    cause: Option<(&'static str, Piece, Piece)>,
    checkpoint_id: Option<u64>,
    duration_ms: Option<u64>,
    subtask: Option<u32>,
    consecutive_failures: Option<u32>,
}

impl PackedEvents {
    fn piece(&mut self, s: Option<&str>) -> Piece {
        let Some(s) = s else { return NONE };
        let start = self.text.len();
        self.text.push_str(s);
        // A unit is at most a file range read in one pass; offsets past 4 GiB of event text
        // (never reached: a unit is 16 MiB) would only garble this unit's names, not panic.
        (start as u32, self.text.len() as u32)
    }

    fn push(&mut self, e: &EventView<'_>) {
        let event = PackedEvent {
            kind: self.piece(Some(e.kind)),
            logged_at: self.piece(e.logged_at),
            job_id: self.piece(e.job_id),
            task: self.piece(e.task),
            taskmanager: self.piece(e.taskmanager),
            reason: self.piece(e.reason),
            detail: self.piece(e.detail),
            cause: e.root_cause.map(|(category, exception, message)| {
                (category, self.piece(Some(exception)), self.piece(Some(message)))
            }),
            checkpoint_id: e.checkpoint_id,
            duration_ms: e.duration_ms,
            subtask: e.subtask,
            consecutive_failures: e.consecutive_failures,
        };
        self.events.push(event);
    }

    fn get(&self, (start, end): Piece) -> Option<&str> {
        (start != u32::MAX).then(|| self.text.get(start as usize..end as usize).unwrap_or_default())
    }

    fn views(&self) -> impl Iterator<Item = EventView<'_>> {
        self.events.iter().map(|e| EventView {
            kind: self.get(e.kind).unwrap_or_default(),
            logged_at: self.get(e.logged_at),
            job_id: self.get(e.job_id),
            checkpoint_id: e.checkpoint_id,
            task: self.get(e.task),
            subtask: e.subtask,
            taskmanager: self.get(e.taskmanager),
            duration_ms: e.duration_ms,
            consecutive_failures: e.consecutive_failures,
            reason: self.get(e.reason),
            detail: self.get(e.detail),
            root_cause: e.cause.map(|(category, exception, message)| {
                (category, self.get(exception).unwrap_or_default(), self.get(message).unwrap_or_default())
            }),
        })
    }
}

/// The previous line: its position, and a copy when it is not in the current buffer.
#[derive(Default)]
struct PrevLine {
    offset: u64,
    len: usize,
    in_chunk: bool,
    valid: bool,
    copy: Vec<u8>,
}

impl PrevLine {
    fn set(&mut self, line: &[u8], offset: u64, chunk_start: u64) {
        let in_chunk = offset >= chunk_start;
        (self.offset, self.len, self.in_chunk, self.valid) = (offset, line.len(), in_chunk, true);
        if !in_chunk {
            // Began in the previous buffer (at most one such line per buffer): copy it now.
            self.copy.clear();
            self.copy.extend_from_slice(line);
        }
    }

    /// At the end of a buffer: copy the last line, the next buffer cannot see it.
    fn keep(&mut self, chunk: &[u8], chunk_start: u64) {
        if self.in_chunk && self.valid {
            let start = (self.offset - chunk_start) as usize;
            self.copy.clear();
            self.copy.extend_from_slice(&chunk[start..start + self.len]);
            self.in_chunk = false;
        }
    }

    /// The previous line if it starts a record and directly precedes `offset`.
    fn record_start_before<'a>(&'a self, offset: u64, chunk: &'a [u8], chunk_start: u64) -> Option<&'a [u8]> {
        if !self.valid || self.offset >= offset {
            return None;
        }
        let line = if self.in_chunk {
            let start = (self.offset - chunk_start) as usize;
            &chunk[start..start + self.len]
        } else {
            &self.copy[..]
        };
        is_record_start(line).then_some(line)
    }
}

/// A map with a multiply-rotate hash (the Fx hash of rustc) instead of SipHash: its keys are
/// interned strings and ids of the scanned logs, looked up for every event, and nothing
/// iterates over it in an order that reaches a report.
type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FxHasher>>;

/// The Fx hash: not DoS-resistant (a scan reads files the operator chose), a few instructions
/// per word.
#[derive(Default)]
struct FxHasher(u64);

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(n.into());
    }
    fn write_u32(&mut self, n: u32) {
        self.add(n.into());
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Strings seen more than once (tasks, TaskManagers, reasons, channels, jobs), stored once.
#[derive(Debug, Default)]
struct Interner {
    ids: FastMap<Box<str>, u32>,
    strings: Vec<Box<str>>,
}

impl Interner {
    /// The symbol of `s`; 0 is "none".
    fn intern(&mut self, s: Option<&str>) -> u32 {
        let Some(s) = s else { return 0 };
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        self.strings.push(s.into());
        let id = self.strings.len() as u32;
        self.ids.insert(s.into(), id);
        id
    }

    fn get(&self, sym: u32) -> Option<&str> {
        (sym > 0).then(|| &*self.strings[sym as usize - 1])
    }
}

/// An event as a timeline keeps it: what the text and JSON reports print, nothing more.
#[derive(Clone, Debug)]
struct TimelineEvent {
    seq: u64,
    kind: u32,
    file: u32,
    /// The line's timestamp (`2026-11-29 15:04:08,723`), inline: it differs for every event.
    at: Option<Box<str>>,
    task: u32,
    subtask: Option<u32>,
    taskmanager: u32,
    duration_ms: Option<u64>,
    consecutive_failures: Option<u32>,
    reason: u32,
    cause: u32,
}

/// A root cause, interned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Cause {
    category: &'static str,
    exception: u32,
    message: u32,
}

/// A subtask that held checkpoints up.
#[derive(Debug, Default)]
struct Blocking {
    count: u64,
    kinds: BTreeSet<u32>,
    checkpoints: BTreeSet<u64>,
    taskmanager: u32,
}

/// How often a root-cause category was counted, and how often each interned (exception,
/// message) of it.
type CauseCounts = (u64, BTreeMap<(u32, u32), u64>);

/// A subtask: (interned task name, 0-based index when the line gives one).
type SubtaskKey = (u32, Option<u32>);

fn count_cause(causes: &mut BTreeMap<&'static str, CauseCounts>, c: Cause) {
    let entry = causes.entry(c.category).or_default();
    entry.0 += 1;
    let examples = entry.1.len();
    match entry.1.get_mut(&(c.exception, c.message)) {
        Some(n) => *n += 1,
        None if examples < MAX_CAUSE_EXAMPLES => {
            entry.1.insert((c.exception, c.message), 1);
        }
        None => {}
    }
}

/// Everything the report needs, folded in event by event.
#[derive(Debug, Default)]
struct Aggregate {
    strings: Interner,
    next_seq: u64,
    files: Vec<u32>,
    kinds: BTreeMap<String, u64>,
    /// Root causes of lines that name no checkpoint, by category: (count, (exception,
    /// message) → count).
    causes: BTreeMap<&'static str, CauseCounts>,
    /// Per checkpoint id, the first cause of each category its lines carried. Reports count a
    /// checkpoint's real cause and leave out the symptoms ([`SYMPTOM_CATEGORIES`]) it has
    /// besides.
    checkpoint_causes: BTreeMap<u64, Vec<Cause>>,
    cause_ids: Vec<Cause>,
    cause_index: FastMap<Cause, u32>,
    /// Timeline events by (job symbol, 0 if the line names none; checkpoint id).
    timelines: BTreeMap<(u32, u64), Vec<TimelineEvent>>,
    timeline_events: usize,
    timeline_events_dropped: u64,
    /// Jobs that have a checkpoint with this id (TaskManager lines name no job).
    jobs_of_id: FastMap<u64, BTreeSet<u32>>,
    blocking: BTreeMap<(u32, Option<u32>), Blocking>,
    completed: BTreeSet<u64>,
    /// Channels by (task, subtask), and channels a barrier came from by ((task, subtask),
    /// checkpoint).
    channels: BTreeMap<SubtaskKey, BTreeSet<u32>>,
    received: BTreeMap<(SubtaskKey, u64), BTreeSet<u32>>,
}

impl Aggregate {
    fn add_file(&mut self, name: &str) -> u32 {
        let sym = self.strings.intern(Some(name));
        self.files.push(sym);
        sym
    }

    fn add(&mut self, e: &EventView<'_>, file: u32, seq: u64) {
        match self.kinds.get_mut(e.kind) {
            Some(n) => *n += 1,
            None => {
                self.kinds.insert(e.kind.to_string(), 1);
            }
        }
        let job = self.strings.intern(e.job_id);
        if let (Some(id), true) = (e.checkpoint_id, job != 0) {
            let jobs = self.jobs_of_id.entry(id).or_default();
            if jobs.len() < 2 {
                jobs.insert(job); // only "exactly one job" matters
            }
        }
        let cause = e.root_cause.map(|(category, exception, message)| Cause {
            category,
            exception: self.strings.intern(Some(exception)),
            message: self.strings.intern(Some(message)),
        });
        if let Some(c) = cause.filter(|_| counts_root_cause(e.kind)) {
            match e.checkpoint_id {
                Some(id) => {
                    let known = self.checkpoint_causes.entry(id).or_default();
                    if !known.iter().any(|k| k.category == c.category) {
                        known.push(c);
                    }
                }
                None => count_cause(&mut self.causes, c),
            }
        }
        let kind = e.kind;
        if kind == "completed"
            && let Some(id) = e.checkpoint_id
        {
            self.completed.insert(id);
        }
        if BLOCKING_KINDS.contains(&kind) {
            let task = self.strings.intern(Some(e.task.unwrap_or("?")));
            let kind_sym = self.strings.intern(Some(kind));
            let b = self.blocking.entry((task, e.subtask)).or_default();
            b.count += 1;
            b.kinds.insert(kind_sym);
            if let Some(id) = e.checkpoint_id
                && b.checkpoints.len() < MAX_BLOCKING_IDS
            {
                b.checkpoints.insert(id);
            }
            if e.taskmanager.is_some() {
                b.taskmanager = self.strings.intern(e.taskmanager);
            }
        }
        if kind == "barrier_received" {
            if let (Some(task), Some(channel), Some(id)) = (e.task, e.detail, e.checkpoint_id) {
                let task = (self.strings.intern(Some(task)), e.subtask);
                let channel = self.strings.intern(Some(channel));
                self.channels.entry(task).or_default().insert(channel);
                self.received.entry((task, id)).or_default().insert(channel);
            }
            return;
        }
        if kind == "restored" {
            return;
        }
        let Some(id) = e.checkpoint_id else { return };
        if self.timeline_events >= MAX_TIMELINE_EVENTS {
            self.timeline_events_dropped += 1;
            return;
        }
        let cause = cause.map_or(0, |c| {
            let next = self.cause_ids.len() as u32 + 1;
            *self.cause_index.entry(c).or_insert_with(|| {
                self.cause_ids.push(c);
                next
            })
        });
        let event = TimelineEvent {
            seq,
            kind: self.strings.intern(Some(kind)),
            file,
            at: e.logged_at.map(Box::from),
            task: self.strings.intern(e.task),
            subtask: e.subtask,
            taskmanager: self.strings.intern(e.taskmanager),
            duration_ms: e.duration_ms,
            consecutive_failures: e.consecutive_failures,
            reason: self.strings.intern(e.reason),
            cause,
        };
        self.timeline_events += 1;
        let (task, subtask) = (event.task, event.subtask);
        self.timelines.entry((job, id)).or_default().push(event);
        if matches!(kind, "async_snapshot_failed" | "sync_snapshot_failed") && job == 0 && task != 0 {
            self.name_unnamed_declines(id, task, subtask);
        }
    }

    /// A TaskManager's snapshot failure names the operator but no job ("stateful-map (1/2)#0 -
    /// asynchronous part of checkpoint 3 could not be completed."); a decline of the same
    /// checkpoint that the JobManager logged naming only an attempt id (a 1.13/1.14 line whose
    /// trace was not logged) takes that operator, in its timeline and in the blocking table.
    fn name_unnamed_declines(&mut self, id: u64, task: u32, subtask: Option<u32>) {
        let Some(job) =
            self.jobs_of_id.get(&id).filter(|jobs| jobs.len() == 1).and_then(|j| j.first().copied())
        else {
            return;
        };
        let declined = self.strings.intern(Some("declined"));
        let unnamed = self.strings.intern(Some("?"));
        let Some(events) = self.timelines.get_mut(&(job, id)) else { return };
        let mut moved = 0;
        let mut taskmanager = 0;
        for ev in events.iter_mut().filter(|ev| ev.kind == declined && ev.task == 0) {
            (ev.task, ev.subtask) = (task, subtask);
            moved += 1;
            if ev.taskmanager != 0 {
                taskmanager = ev.taskmanager;
            }
        }
        if moved == 0 {
            return;
        }
        if let Some(row) = self.blocking.get_mut(&(unnamed, None)) {
            row.count = row.count.saturating_sub(moved);
            row.checkpoints.remove(&id);
            if row.count == 0 {
                self.blocking.remove(&(unnamed, None));
            }
        }
        let row = self.blocking.entry((task, subtask)).or_default();
        row.count += moved;
        row.kinds.insert(declined);
        if row.checkpoints.len() < MAX_BLOCKING_IDS {
            row.checkpoints.insert(id);
        }
        if taskmanager != 0 {
            row.taskmanager = taskmanager;
        }
    }

    fn str(&self, sym: u32) -> Option<&str> {
        self.strings.get(sym)
    }

    /// A checkpoint's causes split into the root cause(s) and the symptoms: a symptom
    /// ("Checkpoint Coordinator is suspending", "Checkpoint was declined", expired) is the root
    /// cause only when nothing else was logged for the checkpoint, and then only the first of
    /// them in [`SYMPTOM_CATEGORIES`] order.
    fn split_causes(causes: &[Cause]) -> (Vec<Cause>, Vec<Cause>) {
        let (mut symptoms, real): (Vec<Cause>, Vec<Cause>) =
            causes.iter().partition(|c| SYMPTOM_CATEGORIES.contains(&c.category));
        if !real.is_empty() {
            return (real, symptoms);
        }
        // Only symptoms: the most telling one stands for the cause.
        symptoms.sort_by_key(|c| SYMPTOM_CATEGORIES.iter().position(|s| *s == c.category));
        let rest = symptoms.split_off(symptoms.len().min(1));
        (symptoms, rest)
    }

    /// Root causes by category (once per checkpoint and category, plus lines without a
    /// checkpoint), and the symptoms they explain, by category.
    fn root_causes(&self) -> (BTreeMap<&'static str, CauseCounts>, BTreeMap<&'static str, u64>) {
        let mut causes = self.causes.clone();
        let mut symptoms = BTreeMap::new();
        for known in self.checkpoint_causes.values() {
            let (real, explained) = Self::split_causes(known);
            for c in real {
                count_cause(&mut causes, c);
            }
            for c in explained {
                *symptoms.entry(c.category).or_insert(0) += 1;
            }
        }
        (causes, symptoms)
    }

    /// The root cause of one checkpoint, if its lines carried one.
    fn cause_of(&self, id: u64) -> Option<Cause> {
        self.checkpoint_causes.get(&id).and_then(|known| Self::split_causes(known).0.first().copied())
    }

    fn kind(&self, e: &TimelineEvent) -> &str {
        self.str(e.kind).unwrap_or_default()
    }

    /// Timelines by (job, id) in order; lines that name no job join the one job that has a
    /// checkpoint with that id.
    fn timelines(&self) -> Vec<Timeline<'_>> {
        let mut map: BTreeMap<(&str, u64), Vec<&TimelineEvent>> = BTreeMap::new();
        for ((job, id), events) in &self.timelines {
            let job = match self.str(*job) {
                Some(job) => job,
                None => match self.jobs_of_id.get(id) {
                    Some(jobs) if jobs.len() == 1 => {
                        jobs.iter().next().and_then(|j| self.str(*j)).unwrap_or_default()
                    }
                    _ => "",
                },
            };
            map.entry((job, *id)).or_default().extend(events.iter());
        }
        map.into_iter()
            .map(|((job_id, id), mut events)| {
                // In time order: the files' lines interleave (the JobManager's and the
                // TaskManagers' logs); lines with the same timestamp keep their file order.
                events.sort_by(|a, b| (&a.at, a.seq).cmp(&(&b.at, b.seq)));
                let has = |kind: &str| events.iter().any(|e| self.kind(e) == kind);
                let outcome = if has("completed") {
                    "completed"
                } else if has("expired") {
                    "expired"
                } else if has("declined") || has("async_snapshot_failed") || has("sync_snapshot_failed") {
                    "declined"
                } else if has("failed") || has("barrier_overtaken") || has("end_of_partition") {
                    "failed"
                } else {
                    "unknown"
                };
                Timeline { job_id, id, outcome, events }
            })
            .collect()
    }

    /// From DEBUG "Received barrier from channel" lines: for each checkpoint that did not
    /// complete, the channels of each task whose barrier never came (the channels a task has
    /// are those it received a barrier on for any checkpoint).
    fn missing_barriers(&self) -> Vec<MissingBarriers<'_>> {
        let name = |s: &u32| self.str(*s).unwrap_or_default();
        let sorted = |set: &BTreeSet<u32>| {
            let mut names: Vec<&str> = set.iter().map(name).collect();
            names.sort_unstable();
            names
        };
        let mut out = Vec::new();
        for ((task, id), got) in &self.received {
            if self.completed.contains(id) {
                continue;
            }
            let received = sorted(got);
            let missing: Vec<&str> = sorted(&self.channels[task])
                .into_iter()
                .filter(|c| received.binary_search(c).is_err())
                .collect();
            if !missing.is_empty() {
                out.push(MissingBarriers {
                    task: name(&task.0),
                    subtask: task.1,
                    checkpoint_id: *id,
                    received,
                    missing,
                });
            }
        }
        out.sort_by(|a, b| (a.task, a.subtask, a.checkpoint_id).cmp(&(b.task, b.subtask, b.checkpoint_id)));
        out
    }
}

/// The JSON report, serialised with `checkpoints` streamed (keys in the sorted order of
/// `serde_json::Map`, so the text equals that of the `Value`).
struct JsonReport<'a>(&'a ScanReport);

impl serde::Serialize for JsonReport<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let report = self.0;
        let head = report.json_head();
        let timelines = report.aggregate.timelines();
        let mut keys: Vec<&str> =
            head.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        keys.push("checkpoints");
        keys.sort_unstable();
        let mut map = serializer.serialize_map(Some(keys.len()))?;
        for key in keys {
            if key == "checkpoints" {
                map.serialize_entry(key, &Checkpoints(report, &timelines))?;
            } else {
                map.serialize_entry(key, &head[key])?;
            }
        }
        map.end()
    }
}

struct Checkpoints<'a>(&'a ScanReport, &'a [Timeline<'a>]);

impl serde::Serialize for Checkpoints<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.1.iter().map(|t| self.0.checkpoint_out(t)))
    }
}

/// One entry of `checkpoints` in the JSON report (fields in the sorted order of a JSON map).
#[derive(serde::Serialize)]
struct CheckpointOut<'a> {
    duration_ms: Option<u64>,
    events: Vec<EventOut<'a>>,
    id: u64,
    job_id: &'a str,
    outcome: &'static str,
    /// The checkpoint's root cause: the exception a task threw rather than the symptom
    /// ("Checkpoint Coordinator is suspending") when the logs have both.
    root_cause: Option<CauseOut<'a>>,
}

/// One event of a checkpoint in the JSON report.
#[derive(serde::Serialize)]
struct EventOut<'a> {
    at: Option<&'a str>,
    /// `at` read as UTC, epoch ms (the log4j layout writes no zone).
    at_ms: Option<i64>,
    consecutive_failures: Option<u32>,
    duration_ms: Option<u64>,
    file: Option<std::borrow::Cow<'a, str>>,
    kind: &'a str,
    reason: Option<&'a str>,
    root_cause: Option<CauseOut<'a>>,
    subtask: Option<u32>,
    task: Option<&'a str>,
    taskmanager: Option<&'a str>,
}

/// A root cause in the JSON report.
#[derive(serde::Serialize)]
struct CauseOut<'a> {
    category: &'a str,
    exception: Option<&'a str>,
    message: Option<&'a str>,
}

/// A checkpoint and what the logs said about it.
struct Timeline<'a> {
    job_id: &'a str,
    id: u64,
    outcome: &'static str,
    events: Vec<&'a TimelineEvent>,
}

/// Input channels whose barrier a task never received for a checkpoint that did not complete.
struct MissingBarriers<'a> {
    task: &'a str,
    subtask: Option<u32>,
    checkpoint_id: u64,
    received: Vec<&'a str>,
    missing: Vec<&'a str>,
}

impl ScanReport {
    /// Events per kind: every built-in kind (zero or not) plus user kinds.
    pub fn kind_counts(&self) -> BTreeMap<String, u64> {
        let mut counts: BTreeMap<String, u64> = BUILTIN_KINDS.iter().map(|k| (k.to_string(), 0)).collect();
        for (kind, n) in &self.aggregate.kinds {
            *counts.entry(kind.clone()).or_insert(0) += n;
        }
        counts
    }

    /// Timeline events not kept because the cap was reached (0 unless the input is enormous).
    pub fn timeline_events_dropped(&self) -> u64 {
        self.aggregate.timeline_events_dropped
    }

    fn blocking_rows(&self) -> Vec<(&str, Option<u32>, &Blocking)> {
        let a = &self.aggregate;
        let mut rows: Vec<(&str, Option<u32>, &Blocking)> = a
            .blocking
            .iter()
            .map(|((task, subtask), b)| (a.str(*task).unwrap_or("?"), *subtask, b))
            .collect();
        rows.sort_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
        rows
    }

    fn kinds_of(&self, b: &Blocking) -> Vec<&str> {
        let mut kinds: Vec<&str> = b.kinds.iter().filter_map(|k| self.aggregate.str(*k)).collect();
        kinds.sort_unstable();
        kinds
    }

    fn event_out<'a>(&'a self, e: &'a TimelineEvent) -> EventOut<'a> {
        let a = &self.aggregate;
        EventOut {
            at: e.at.as_deref(),
            at_ms: e.at.as_deref().and_then(log_time_utc_ms),
            consecutive_failures: e.consecutive_failures,
            duration_ms: e.duration_ms,
            file: a.str(e.file).and_then(|f| Path::new(f).file_name()).map(|n| n.to_string_lossy()),
            kind: a.kind(e),
            reason: a.str(e.reason),
            root_cause: e
                .cause
                .checked_sub(1)
                .and_then(|i| a.cause_ids.get(i as usize))
                .map(|c| self.cause_out(*c)),
            subtask: e.subtask,
            task: a.str(e.task),
            taskmanager: a.str(e.taskmanager),
        }
    }

    fn cause_out(&self, c: Cause) -> CauseOut<'_> {
        let a = &self.aggregate;
        CauseOut { category: c.category, exception: a.str(c.exception), message: a.str(c.message) }
    }

    /// The files that have lines but none in Flink's log layout.
    pub fn not_flink_logs(&self) -> Vec<&FileSummary> {
        self.files.iter().filter(|f| f.is_not_a_flink_log()).collect()
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let mut out = self.json_head();
        let timelines = self.aggregate.timelines();
        out["checkpoints"] = Value::Array(
            timelines
                .iter()
                .map(|t| serde_json::to_value(self.checkpoint_out(t)).unwrap_or_default())
                .collect(),
        );
        out
    }

    /// Writes the report as pretty JSON (the same text as `{:#}` of [`to_json`](Self::to_json)),
    /// one checkpoint at a time instead of building the whole tree.
    pub fn write_json(&self, writer: impl io::Write) -> io::Result<()> {
        serde_json::to_writer_pretty(writer, &JsonReport(self)).map_err(io::Error::other)
    }

    fn checkpoint_out<'a>(&'a self, t: &'a Timeline<'a>) -> CheckpointOut<'a> {
        let a = &self.aggregate;
        CheckpointOut {
            duration_ms: t.events.iter().find(|e| a.kind(e) == "completed").and_then(|e| e.duration_ms),
            events: t.events.iter().map(|e| self.event_out(e)).collect(),
            id: t.id,
            job_id: t.job_id,
            outcome: t.outcome,
            root_cause: a.cause_of(t.id).map(|c| self.cause_out(c)),
        }
    }

    /// Everything but `checkpoints`.
    fn json_head(&self) -> Value {
        let a = &self.aggregate;
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| json!({"path": f.path.display().to_string(), "bytes": f.bytes, "lines": f.lines, "oversize_lines": f.oversize_lines, "flink_log": !f.is_not_a_flink_log()}))
            .collect();
        let (causes, symptoms) = a.root_causes();
        let root_causes: BTreeMap<&str, u64> = causes.iter().map(|(k, (n, _))| (*k, *n)).collect();
        let mut examples: Vec<(&str, &str, &str, u64)> = causes
            .iter()
            .flat_map(|(category, (_, ex))| {
                ex.iter().map(move |((exception, message), count)| {
                    (
                        *category,
                        a.str(*exception).unwrap_or_default(),
                        a.str(*message).unwrap_or_default(),
                        *count,
                    )
                })
            })
            .collect();
        examples.sort();
        let examples: Vec<Value> = examples
            .into_iter()
            .map(|(category, exception, message, count)| {
                json!({"category": category, "exception": exception, "message": message, "count": count})
            })
            .collect();
        let blocking: Vec<Value> = self
            .blocking_rows()
            .into_iter()
            .map(|(task, subtask, b)| {
                json!({"task": task, "subtask": subtask, "taskmanager": a.str(b.taskmanager), "count": b.count,
                       "kinds": self.kinds_of(b), "checkpoints": b.checkpoints})
            })
            .collect();
        let missing: Vec<Value> = a
            .missing_barriers()
            .into_iter()
            .map(|m| json!({"task": m.task, "subtask": m.subtask, "checkpoint_id": m.checkpoint_id, "received": m.received, "missing": m.missing}))
            .collect();
        let mut out = json!({
            "files": files,
            "lines": self.files.iter().map(|f| f.lines).sum::<u64>(),
            "bytes": self.files.iter().map(|f| f.bytes).sum::<u64>(),
            "events": self.kind_counts(),
            "root_causes": root_causes,
            "root_cause_symptoms": symptoms,
            "root_cause_examples": examples,
            "not_flink_logs": self.files.iter().filter(|f| f.is_not_a_flink_log()).map(|f| f.path.display().to_string()).collect::<Vec<_>>(),
            "blocking_subtasks": blocking,
            "missing_barriers": missing,
        });
        if a.timeline_events_dropped > 0 {
            out["timeline_events_dropped"] = a.timeline_events_dropped.into();
        }
        out
    }

    /// The report as text for a terminal.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let a = &self.aggregate;
        let mut out = String::new();
        let lines: u64 = self.files.iter().map(|f| f.lines).sum();
        let bytes: u64 = self.files.iter().map(|f| f.bytes).sum();
        let _ = writeln!(out, "Scanned {} file(s), {lines} lines, {bytes} bytes.", self.files.len());
        for f in self.not_flink_logs() {
            let _ = writeln!(
                out,
                "{} is not a Flink log: none of its {} line(s) starts with a log4j timestamp \
                 (yyyy-MM-dd HH:mm:ss,SSS, Flink's default layout).",
                f.path.display(),
                f.lines
            );
        }
        let oversize: u64 = self.files.iter().map(|f| f.oversize_lines).sum();
        if oversize > 0 {
            let _ = writeln!(out, "{oversize} line(s) longer than the line limit were cut.");
        }
        let counts: Vec<(String, u64)> = self.kind_counts().into_iter().filter(|(_, n)| *n > 0).collect();
        if counts.is_empty() {
            let _ = writeln!(out, "\nNo checkpoint events found.");
        } else {
            let _ = writeln!(out, "\nEvents by kind:");
        }
        for (kind, n) in &counts {
            let _ = writeln!(out, "  {kind:<24} {n:>7}");
        }

        let timelines = a.timelines();
        let unfinished: Vec<&Timeline> = timelines.iter().filter(|t| t.outcome != "completed").collect();
        let completed = timelines.len() - unfinished.len();
        if !timelines.is_empty() {
            let _ = writeln!(
                out,
                "\nCheckpoints: {} seen, {completed} completed, {} did not complete.",
                timelines.len(),
                unfinished.len()
            );
        }
        if a.timeline_events_dropped > 0 {
            let _ = writeln!(
                out,
                "  ({} later checkpoint event(s) not kept: more than {MAX_TIMELINE_EVENTS}.)",
                a.timeline_events_dropped
            );
        }
        let names_subtasks = a.blocking.keys().any(|(_, s)| s.is_some())
            || unfinished.iter().any(|t| t.events.iter().any(|e| e.subtask.is_some()));
        if names_subtasks {
            let _ = writeln!(
                out,
                "Subtasks are numbered from 0 as in Flink's REST API (a log line's \"(1/n)\" is #0)."
            );
        }
        for t in &unfinished {
            let job = if t.job_id.is_empty() { "?" } else { t.job_id };
            let _ = writeln!(out, "  checkpoint {} of job {job}: {}", t.id, t.outcome);
            for e in &t.events {
                let who = who(a.str(e.task), e.subtask, a.str(e.taskmanager));
                let mut text = a.kind(e).to_string();
                if !who.is_empty() {
                    let _ = write!(text, "{:pad$}  {who}", "", pad = 21usize.saturating_sub(text.len()));
                }
                if let Some(reason) = a.str(e.reason) {
                    let _ = write!(text, ": {reason}");
                }
                let at = e.at.as_deref().unwrap_or("?");
                let _ = writeln!(out, "    {at}  {text}");
            }
            if let Some(c) = a.cause_of(t.id) {
                let _ = writeln!(
                    out,
                    "    root cause ({}): {}",
                    c.category,
                    exception_text(a.str(c.exception), a.str(c.message))
                );
            }
        }

        let mut rows = self.blocking_rows();
        if !rows.is_empty() {
            let _ = writeln!(out, "\nSubtasks that held checkpoints up or failed them:");
            rows.sort_by_key(|(_, _, b)| std::cmp::Reverse(b.count));
            for (task, subtask, b) in rows {
                let ids: Vec<String> = b.checkpoints.iter().take(12).map(u64::to_string).collect();
                let more = if b.checkpoints.len() > 12 { ", …" } else { "" };
                let _ = writeln!(
                    out,
                    "  {}: {} event(s) ({}), checkpoint(s) {}{more}",
                    match who(Some(task).filter(|t| *t != "?"), subtask, a.str(b.taskmanager)) {
                        w if w.starts_with("on ") => format!("a task the lines do not name, {w}"),
                        w => w,
                    },
                    b.count,
                    self.kinds_of(b).join(", "),
                    ids.join(", ")
                );
            }
        }
        let missing = a.missing_barriers();
        if !missing.is_empty() {
            let _ = writeln!(out, "\nBarriers that never arrived (from DEBUG barrier lines):");
            for m in missing {
                let _ = writeln!(
                    out,
                    "  checkpoint {}: {} is missing {}",
                    m.checkpoint_id,
                    who(Some(m.task), m.subtask, None),
                    m.missing.join(", ")
                );
            }
        }
        let (causes, symptoms) = a.root_causes();
        if !causes.is_empty() {
            let _ = writeln!(out, "\nRoot causes (deepest \"Caused by:\", once per checkpoint):");
            for (category, (n, examples)) in &causes {
                let _ = writeln!(out, "  {category:<18} {n:>5}");
                let mut examples: Vec<(&str, &str, u64)> = examples
                    .iter()
                    .map(|((e, m), c)| (a.str(*e).unwrap_or_default(), a.str(*m).unwrap_or_default(), *c))
                    .collect();
                examples.sort_unstable();
                // The most frequent; of equals, the last in (exception, message) order.
                if let Some((exception, message, _)) = examples.into_iter().max_by_key(|x| x.2) {
                    let _ = writeln!(out, "      e.g. {}", exception_text(Some(exception), Some(message)));
                }
            }
        }
        if !symptoms.is_empty() {
            let _ = writeln!(out, "Symptoms of those causes (the same checkpoints; not counted as causes):");
            for (category, n) in &symptoms {
                let _ = writeln!(out, "  {category:<18} {n:>5}");
            }
        }
        out
    }
}

/// `stateful-map #0 on 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126)`: a subtask numbered
/// from 0, as the REST API numbers it.
fn who(task: Option<&str>, subtask: Option<u32>, taskmanager: Option<&str>) -> String {
    let mut out = match (task, subtask) {
        (Some(task), Some(s)) => format!("{task} #{s}"),
        (Some(task), None) => task.to_string(),
        (None, Some(s)) => format!("subtask #{s}"),
        (None, None) => String::new(),
    };
    if let Some(tm) = taskmanager {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("on ");
        out.push_str(tm);
    }
    out
}

/// `java.io.IOException: disk full`, or the part that is there.
fn exception_text(exception: Option<&str>, message: Option<&str>) -> String {
    match (exception.filter(|e| !e.is_empty()), message.filter(|m| !m.is_empty())) {
        (Some(e), Some(m)) => format!("{e}: {m}"),
        (Some(e), None) => e.to_string(),
        (None, Some(m)) => m.to_string(),
        (None, None) => "no message".into(),
    }
}
