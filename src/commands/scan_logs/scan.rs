//! The threaded scan: the units of a plan taken in order by one thread per core, their events
//! folded into the aggregate in file order by the calling thread, so the report is that of a
//! serial pass.

use std::collections::BTreeMap;
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};

use crate::observe::LogEvent;
use crate::sources::logs::parse::Patterns;

use super::aggregate::{Aggregate, BorrowedEvent};
use super::lines::{RangeTotals, scan_range};
use super::names::add_names;
use super::pack::PackedEvents;
use super::plan::{PARALLEL_MIN_BYTES, Unit, plan};
use super::report::{FileSummary, ScanReport};

/// At most this many threads.
const MAX_THREADS: usize = 8;
/// How many units per thread a scanning thread may be ahead of the aggregation.
const AHEAD: usize = 4;

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
    /// Ranges per cut file; `None`: one per 16 MiB (`plan::RANGE_BYTES`), at least one per thread.
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
        let units = plan(paths, self.parallel_min_bytes, self.ranges, self.threads);
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
        let (tx, rx) = mpsc::channel::<(usize, UnitOutcome)>();
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
                scope.spawn(move || scan.work_on(work, threads, &tx));
            }
            drop(tx);
            let result = self.fold_in_order(&work, threads, scan, &rx, &mut buf);
            work.stop();
            result
        });
        self.buf = buf;
        result
    }

    /// The calling thread's part of [`Scanner::scan_paths`]: folds the units in, in order, and
    /// scans a unit itself when the one it waits for is not there and one is left within reach.
    /// Returns at the last unit or the first error; a unit's panic is raised again here.
    fn fold_in_order(
        &mut self,
        work: &Work<'_>,
        threads: usize,
        scan: ScanSettings<'_>,
        rx: &mpsc::Receiver<(usize, UnitOutcome)>,
        buf: &mut Vec<u8>,
    ) -> io::Result<()> {
        let (units, paths) = (work.units, work.paths);
        let mut pending: BTreeMap<usize, UnitOutcome> = BTreeMap::new();
        let mut files = FileTotals::default();
        let mut done = 0;
        loop {
            while let Ok((i, outcome)) = rx.try_recv() {
                pending.insert(i, outcome);
            }
            if let Some(outcome) = pending.remove(&done) {
                match outcome {
                    Ok(scanned) => self.fold(paths, &units[done], scanned?, &mut files),
                    Err(panic) => {
                        work.stop();
                        std::panic::resume_unwind(panic)
                    }
                }
                done += 1;
                work.advance(done);
                if done == units.len() {
                    return Ok(());
                }
            } else if let Some(i) = work.take_now(done, threads) {
                pending.insert(i, scan.unit(paths, &units[i], buf));
            } else {
                match rx.recv() {
                    Ok((i, outcome)) => {
                        pending.insert(i, outcome);
                    }
                    // Every worker ended without the unit this thread waits for: cannot
                    // happen (a worker sends every unit it took), but never wait for ever.
                    Err(_) => return Err(io::Error::other("scan-logs: a scanning thread ended early")),
                }
            }
        }
    }

    /// Folds one scanned unit into the report, in order.
    fn fold(&mut self, paths: &[PathBuf], unit: &Unit, scanned: Scanned, files: &mut FileTotals) {
        let path = &paths[unit.path];
        if unit.first {
            let name = path.display().to_string();
            files.sym = self.report.aggregate.add_file(&name);
            files.name = name;
            files.totals = RangeTotals::default();
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
        add_names(&mut self.report.aggregate.vertex_names, s.vertices);
        add_names(&mut self.report.aggregate.job_names, s.jobs);
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
        add_names(&mut self.report.aggregate.vertex_names, totals.vertices);
        add_names(&mut self.report.aggregate.job_names, totals.jobs);
        self.report.files.push(FileSummary {
            path: path.to_path_buf(),
            bytes: totals.end,
            lines: totals.lines,
            oversize_lines: totals.oversize,
            records: totals.records,
        });
        Ok(())
    }

    /// The report: tasks named by a vertex id get the name the logs give that vertex.
    pub fn finish(mut self) -> ScanReport {
        self.report.aggregate.next_seq = self.seq;
        self.report.aggregate.attach_drops();
        self.report.aggregate.name_vertices();
        self.report
    }

    /// The vertex names found so far.
    #[cfg(test)]
    pub(super) fn vertex_names(&self) -> &std::collections::HashMap<String, String> {
        &self.report.aggregate.vertex_names
    }
}

/// What a unit held: its totals and its events, in order.
struct Scanned {
    totals: RangeTotals,
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
    totals: RangeTotals,
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
    /// A scanning thread: takes units in order and sends each one's outcome, until none is
    /// left, the scan stopped, or the folding thread hung up.
    fn work_on(&self, work: &Work<'_>, threads: usize, tx: &mpsc::Sender<(usize, UnitOutcome)>) {
        let mut buf = Vec::new();
        while let Some(i) = work.take(threads) {
            if tx.send((i, self.unit(work.paths, &work.units[i], &mut buf))).is_err() {
                break;
            }
        }
    }

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
                packed.push(&BorrowedEvent::of(&e));
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
        self.add_view(&BorrowedEvent::of(&event));
        if let Some(kept) = self.kept.as_deref_mut() {
            event.file = self.name.to_string();
            kept.push(event);
        }
    }

    fn add_view(&mut self, event: &BorrowedEvent<'_>) {
        self.aggregate.add(event, self.file, *self.seq);
        *self.seq += 1;
    }
}
