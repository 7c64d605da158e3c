//! The tailer follows files while a writer appends: rename+create, copytruncate and
//! delete+recreate rotations, a restart from saved positions, new files and start positions.
//! Every record carries a unique checkpoint id, so "no line lost, none counted twice" is
//! "the ids seen are exactly 0..n, each once".

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use checkpoint_sentinel::config::StartAt;
use checkpoint_sentinel::observe::{FileId, FilePosition, LogEvent};
use checkpoint_sentinel::sources::logs::offsets::FINGERPRINT_BYTES;
use checkpoint_sentinel::sources::logs::parse::Patterns;
use checkpoint_sentinel::sources::logs::tail::{TailCore, TailOptions};
use checkpoint_sentinel::time::Timestamp;

const JOB: &str = "e5977598408a0b50e1eb3e122b7bd082";

/// Record `i`: an expiry line, or every 7th a failure line with a three-line stack trace.
fn record(i: u64) -> String {
    let ts = "2026-11-29 15:04:18,724";
    if i.is_multiple_of(7) {
        format!(
            "{ts} WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint {i} for job {JOB}. (0 consecutive failed attempts so far)\n\
             org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n\
             \tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator$CheckpointCanceller.run(CheckpointCoordinator.java:2346) ~[flink-dist-1.20.5.jar:1.20.5]\n\
             Caused by: java.io.IOException: No space left on device\n"
        )
    } else {
        format!(
            "{ts} INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Checkpoint {i} of job {JOB} expired before completing.\n"
        )
    }
}

fn options(dir: &Path, glob: &str) -> TailOptions {
    TailOptions {
        id: "t".into(),
        cluster: "c".into(),
        paths: vec![dir.join(glob).display().to_string()],
        start_at: StartAt::Beginning,
        max_line_bytes: 4096,
        flush_after: Duration::from_millis(30),
        drop_after: Duration::from_millis(150),
        read_budget: 8 << 20,
        max_files: 256,
    }
}

/// Appends records, sometimes splitting a line over two writes (a partial last line).
fn append(file: &mut File, from: u64, to: u64) {
    append_with(file, from, to, || {});
}

/// [`append`], calling `halfway` between the two halves of every 100th record: a tailer that
/// looks then meets a partial last line.
fn append_with(file: &mut File, from: u64, to: u64, mut halfway: impl FnMut()) {
    for i in from..to {
        let r = record(i);
        if i.is_multiple_of(5) {
            let (a, b) = r.split_at(r.len() / 2);
            file.write_all(a.as_bytes()).unwrap();
            file.flush().unwrap();
            if i.is_multiple_of(100) {
                halfway();
            }
            file.write_all(b.as_bytes()).unwrap();
        } else {
            file.write_all(r.as_bytes()).unwrap();
        }
    }
    file.flush().unwrap();
}

fn open_append(path: &Path) -> File {
    OpenOptions::new().create(true).append(true).open(path).unwrap()
}

fn collect(events: Vec<LogEvent>, ids: &mut Vec<u64>) {
    for e in events {
        assert!(e.kind == "expired" || e.kind == "failed", "{e:?}");
        if e.kind == "failed" {
            // The stack trace stays with its record across reads, rotations and restarts.
            assert_eq!(e.root_cause.as_ref().map(|c| c.category), Some("disk_full"), "{e:?}");
        }
        ids.push(e.checkpoint_id.unwrap());
    }
}

/// How long a test waits for the tailer before it gives up: generous, for a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

/// Longer than `flush_after` and shorter than `drop_after` (see [`options`]): a record held for
/// its stack trace is flushed, a rotated file not yet closed.
const QUIET: Duration = Duration::from_millis(40);

/// The tailer's clock in these tests: `cycle` takes the time, and the test moves it on.
///
/// Its wall clock runs a minute behind the file system's: file times are as coarse as the
/// kernel's tick, so a clock read just before a write may be later than the write's mtime, and
/// a file written during a test must count as written after any listing the tailer made.
#[derive(Clone)]
struct Clock {
    start: Instant,
    wall: Timestamp,
    elapsed_ms: Arc<AtomicU64>,
}

impl Clock {
    fn new() -> Self {
        Clock {
            start: Instant::now(),
            wall: Timestamp::now().plus_millis(-60_000),
            elapsed_ms: Arc::default(),
        }
    }

    fn advance(&self, by: Duration) {
        self.elapsed_ms.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }

    /// One cycle of `core` at the clock's time; its events' ids go to `ids`.
    fn cycle(&self, core: &mut TailCore, ids: &mut Vec<u64>) {
        let elapsed = self.elapsed_ms.load(Ordering::SeqCst);
        let now = self.start + Duration::from_millis(elapsed);
        collect(core.cycle(now, self.wall.plus_millis(elapsed as i64)), ids);
    }
}

/// What the writer thread sees of the tailer: how many cycles it ran and the files it follows
/// (open) after the latest.
#[derive(Clone, Default)]
struct Followed(Arc<(Mutex<Seen>, Condvar)>);

/// The tailer's cycles so far, and the files it follows after the latest.
#[derive(Default)]
struct Seen {
    cycles: u64,
    files: Vec<FilePosition>,
}

impl Followed {
    fn update(&self, core: &TailCore) {
        let (seen, changed) = &*self.0;
        let mut seen = seen.lock().unwrap();
        seen.cycles += 1;
        seen.files = core.positions().files;
        changed.notify_all();
    }

    /// Waits, at most [`PATIENCE`], until `done` holds for (cycles run, files followed).
    fn wait_until(&self, what: &str, mut done: impl FnMut(u64, &[FilePosition]) -> bool) {
        let (seen, changed) = &*self.0;
        let seen = seen.lock().unwrap();
        let (seen, timeout) =
            changed.wait_timeout_while(seen, PATIENCE, |seen| !done(seen.cycles, &seen.files)).unwrap();
        drop(seen);
        assert!(!timeout.timed_out(), "waited {PATIENCE:?} for the tailer to {what}");
    }

    /// Waits until the tailer follows `file`, which starts with record `first`: known by its
    /// inode and its first bytes, as the inode of a file closed may be the next one's.
    ///
    /// A file created and rotated away between two of the tailer's looks is never read (tail/
    /// says so; in real life rotations are minutes apart). A fixed sleep does not make sure the
    /// tailer looked: under load (debug build, load ~10 on 2 cores) one cycle took 100–150 ms,
    /// and whole files went unread ("500 lost records").
    fn wait_for(&self, file: &File, first: u64) {
        let id = FileId::of(&file.metadata().unwrap());
        let mut head: Vec<u8> = (first..first + FIRST).flat_map(|i| record(i).into_bytes()).collect();
        head.truncate(FINGERPRINT_BYTES);
        self.wait_until(&format!("open {id:?}"), |_, files| files.iter().any(|p| p.matches(id, &head)));
    }

    /// Waits until the tailer ran a whole cycle that started after this call: it looked at what
    /// was written before.
    fn wait_for_a_look(&self) {
        let from = self.0.0.lock().unwrap().cycles;
        // The first cycle to end may have begun before the call; the second began after it.
        self.wait_until("cycle twice", |cycles, _| cycles >= from + 2);
    }
}

/// Cycles while the writer writes, at a clock that only the writer moves on (between files,
/// when nothing is half written), then until nothing is left to read or flush, and on for a
/// while in which records read twice would show.
fn follow(
    core: &mut TailCore,
    clock: &Clock,
    writer: thread::JoinHandle<()>,
    rotate: Option<(mpsc::Receiver<()>, mpsc::Sender<()>)>,
    followed: &Followed,
) -> Vec<u64> {
    let mut ids = Vec::new();
    while !writer.is_finished() {
        clock.cycle(core, &mut ids);
        followed.update(core);
        if let Some((_, ack)) = rotate.as_ref().filter(|(want, _)| want.try_recv().is_ok()) {
            // copytruncate loses what was written after the tailer's last read (logrotate says
            // so too): the writer lets the tailer catch up before each truncate.
            clock.cycle(core, &mut ids);
            clock.cycle(core, &mut ids);
            assert_eq!(core.report().lag_bytes, 0);
            ack.send(()).unwrap();
        }
        // As often as it can: the more looks while the writer writes, the more interleavings.
        thread::yield_now();
    }
    writer.join().unwrap();
    // All is written: each look past `drop_after` reads what is left (one read budget holds
    // all of it), flushes the last records and closes the rotated files; the later looks
    // would read a record twice if the positions were wrong.
    for _ in 0..10 {
        clock.advance(Duration::from_millis(200));
        clock.cycle(core, &mut ids);
    }
    assert!(!core.more, "the files are read to their end");
    ids
}

fn assert_exactly_once(mut ids: Vec<u64>, n: u64) {
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "some records were counted twice");
    let missing: Vec<u64> = (0..n).filter(|i| ids.binary_search(i).is_err()).collect();
    assert!(
        missing.is_empty(),
        "{} lost records, the first: {:?}",
        missing.len(),
        &missing[..missing.len().min(20)]
    );
    assert_eq!(ids.len() as u64, n);
}

const N: u64 = 3000;
const PER_FILE: u64 = 500;
/// Records a file holds when the writer waits for the tailer to have opened it.
const FIRST: u64 = 100;

#[test]
fn rename_and_create_finishes_the_old_file_first() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let path = log.clone();
    let (clock, followed) = (Clock::new(), Followed::default());
    let (writer_clock, seen) = (clock.clone(), followed.clone());
    let writer = thread::spawn(move || {
        let mut file = open_append(&path);
        let mut i = 0;
        let mut generation = 0;
        while i < N {
            append_with(&mut file, i, i + FIRST, || seen.wait_for_a_look());
            // Rotations are minutes apart in real life: the tailer has opened a file before it
            // is rotated, and has likely not read it all.
            seen.wait_for(&file, i);
            append_with(&mut file, i + FIRST, i + PER_FILE - 5, || seen.wait_for_a_look());
            i += PER_FILE - 5;
            generation += 1;
            std::fs::rename(&path, path.with_extension(format!("log.{generation}"))).unwrap();
            // The writer still appends to the renamed file for a moment, as log4j does.
            append(&mut file, i, i + 5);
            i += 5;
            file = open_append(&path);
            // Minutes pass until the next rotation: the tailer may close the renamed file.
            writer_clock.advance(Duration::from_millis(200));
        }
    });
    let ids = follow(&mut core, &clock, writer, None, &followed);
    assert_exactly_once(ids, N);
    assert!(core.report().rotations >= N / PER_FILE, "{:?}", core.report());
}

#[test]
fn copytruncate_starts_over_at_the_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let (want_tx, want_rx) = mpsc::channel();
    let (ack_tx, ack_rx) = mpsc::channel();
    let path = log.clone();
    let followed = Followed::default();
    let seen = followed.clone();
    let writer = thread::spawn(move || {
        let mut file = open_append(&path);
        let mut i = 0;
        let mut generation = 0;
        while i < N {
            append_with(&mut file, i, i + PER_FILE, || seen.wait_for_a_look());
            i += PER_FILE;
            want_tx.send(()).unwrap();
            ack_rx.recv().unwrap();
            generation += 1;
            std::fs::copy(&path, path.with_extension(format!("log.{generation}"))).unwrap();
            file.set_len(0).unwrap();
            // Write on at once: the file may be longer than the old position before the tailer
            // looks again, so only the changed first bytes tell it was truncated.
        }
    });
    let ids = follow(&mut core, &Clock::new(), writer, Some((want_rx, ack_tx)), &followed);
    assert_exactly_once(ids, N);
    assert!(core.report().rotations >= N / PER_FILE - 1, "{:?}", core.report());
}

#[test]
fn delete_and_recreate_reads_the_deleted_file_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let path = log.clone();
    let (clock, followed) = (Clock::new(), Followed::default());
    let (writer_clock, seen) = (clock.clone(), followed.clone());
    let writer = thread::spawn(move || {
        let mut file = open_append(&path);
        let mut i = 0;
        while i < N {
            append_with(&mut file, i, i + FIRST, || seen.wait_for_a_look());
            // The tailer has opened the file (its handle keeps the inode readable) before it
            // is deleted, and has likely not read it all.
            seen.wait_for(&file, i);
            append_with(&mut file, i + FIRST, i + PER_FILE - 5, || seen.wait_for_a_look());
            i += PER_FILE - 5;
            std::fs::remove_file(&path).unwrap();
            append(&mut file, i, i + 5);
            i += 5;
            file = open_append(&path);
            // The tailer may close the deleted file from now on.
            writer_clock.advance(Duration::from_millis(200));
        }
    });
    let ids = follow(&mut core, &clock, writer, None, &followed);
    assert_exactly_once(ids, N);
}

#[test]
fn a_truncation_hidden_by_new_writes_is_seen_by_the_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 10);
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let (clock, mut ids) = (Clock::new(), Vec::new());
    clock.cycle(&mut core, &mut ids);
    file.set_len(0).unwrap();
    append(&mut file, 100, 130); // Longer than before the truncation.
    clock.cycle(&mut core, &mut ids);
    clock.advance(QUIET);
    clock.cycle(&mut core, &mut ids);
    assert_eq!(ids, (0..10).chain(100..130).collect::<Vec<u64>>());
    assert_eq!(core.report().rotations, 1);
}

#[test]
fn a_restart_resumes_exactly_where_the_tailer_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 2000);
    let (clock, mut ids) = (Clock::new(), Vec::new());
    let saved = {
        // Small reads: the tailer stops in the middle of the file, likely inside a record.
        let mut opts = options(dir.path(), "app.log");
        opts.read_budget = 10_000;
        let mut core = TailCore::new(opts, Patterns::builtin(), None);
        for _ in 0..7 {
            clock.cycle(&mut core, &mut ids);
        }
        assert!(core.report().lag_bytes > 0, "stopped mid-file");
        core.positions()
    };
    let before = ids.len();
    assert!(before > 0 && before < 2000);
    append(&mut file, 2000, 3000);
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), Some(saved));
    for _ in 0..5 {
        clock.cycle(&mut core, &mut ids);
        clock.advance(QUIET);
    }
    assert_exactly_once(ids, 3000);
}

#[test]
fn first_start_begins_at_the_end_and_new_files_at_their_beginning() {
    let dir = tempfile::tempdir().unwrap();
    let mut old = open_append(&dir.path().join("a.log"));
    append(&mut old, 0, 50);
    let mut opts = options(dir.path(), "*.log");
    opts.start_at = StartAt::End;
    let mut core = TailCore::new(opts.clone(), Patterns::builtin(), None);
    let (clock, mut ids) = (Clock::new(), Vec::new());
    clock.cycle(&mut core, &mut ids);
    assert!(ids.is_empty(), "existing lines are skipped at first start: {ids:?}");
    append(&mut old, 50, 60);
    let mut new = open_append(&dir.path().join("b.log"));
    append(&mut new, 1000, 1010);
    clock.advance(QUIET);
    clock.cycle(&mut core, &mut ids);
    clock.advance(QUIET);
    clock.cycle(&mut core, &mut ids);
    ids.sort_unstable();
    assert_eq!(ids, (50..60).chain(1000..1010).collect::<Vec<u64>>());
    let saved = core.positions();
    drop(core);

    // While the daemon is down a file appears: it is read whole at the next start, although
    // start_at = "end" (positions exist, so this is not the first start). Its mtime is after
    // the last listing: the clock's wall time is behind the file system's (see `Clock`).
    let mut late = open_append(&dir.path().join("c.log"));
    append(&mut late, 2000, 2005);
    let mut core = TailCore::new(opts, Patterns::builtin(), Some(saved));
    let mut ids = Vec::new();
    clock.advance(QUIET);
    clock.cycle(&mut core, &mut ids);
    clock.advance(QUIET);
    clock.cycle(&mut core, &mut ids);
    assert_eq!(ids, (2000..2005).collect::<Vec<u64>>());
}

#[test]
fn long_lines_are_cut_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 3);
    let long = format!("2026-11-29 15:04:18,724 INFO  x [] - {}\n", "y".repeat(100_000));
    file.write_all(long.as_bytes()).unwrap();
    append(&mut file, 3, 6);
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let (clock, mut ids) = (Clock::new(), Vec::new());
    clock.cycle(&mut core, &mut ids);
    clock.advance(QUIET);
    clock.cycle(&mut core, &mut ids);
    assert_eq!(ids, (0..6).collect::<Vec<u64>>());
    assert_eq!(core.report().oversize_lines, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_task_applies_events_and_positions_to_the_state() {
    use checkpoint_sentinel::app::AppState;
    use checkpoint_sentinel::config::LogConfig;
    use checkpoint_sentinel::sources::logs::tail::Tailers;
    use checkpoint_sentinel::state::State;
    use checkpoint_sentinel::stats::WindowSpec;

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("jm.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 20);
    let app = Arc::new(AppState::new(State::new(WindowSpec { window_ms: 60_000, slots: 6 })));
    let config = LogConfig {
        cluster: "c".into(),
        paths: vec![dir.path().join("*.log").display().to_string()],
        start_at: StartAt::Beginning,
        poll_interval: Duration::from_millis(50),
        flush_after: Duration::from_millis(50),
        ..LogConfig::default()
    };
    let mut tailers = Tailers::default();
    tailers.sync(std::slice::from_ref(&config), &dir.path().join("state"), &app).await;
    let count = |kind: &str| {
        let state = app.state.read();
        state
            .clusters()
            .get("c")
            .map_or(0, |c| c.logs.events.get(&(JOB.to_string(), kind.into(), "log")).copied().unwrap_or(0))
    };
    // The task cycles on its own clock: the test can only look until the state shows the events.
    let deadline = Instant::now() + PATIENCE;
    while count("expired") + count("failed") < 20 {
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for the tailer task to apply 20 events");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!((count("expired"), count("failed")), (17, 3));
    tailers.stop_all().await;
    let state = app.state.read();
    let logs = &state.clusters()["c"].logs;
    // The positions are in the state with the counters they match, not in a file of their own.
    assert_eq!(logs.positions["c"].files[0].offset, std::fs::metadata(&log).unwrap().len());
    assert!(!dir.path().join("state/log-offsets").exists());
    assert_eq!(logs.root_causes.get("disk_full"), Some(&3));
    assert_eq!(logs.tailer_totals().unwrap().files, 1);
    let _: PathBuf = log;
}

/// Cycles until what the files hold is read and the last records are flushed.
fn settle(core: &mut TailCore, clock: &Clock, ids: &mut Vec<u64>) {
    for _ in 0..3 {
        clock.cycle(core, ids);
        clock.advance(QUIET);
    }
}

#[test]
fn a_rolled_file_the_glob_still_matches_is_read_before_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 10);
    let mut core = TailCore::new(options(dir.path(), "app.log*"), Patterns::builtin(), None);
    let (clock, mut ids) = (Clock::new(), Vec::new());
    settle(&mut core, &clock, &mut ids);
    append(&mut file, 10, 20);
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    append(&mut open_append(&log), 20, 30);
    settle(&mut core, &clock, &mut ids);
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..30).collect::<Vec<u64>>());
    // The last record of a file waits for `flush_after` (a stack trace could follow it), so
    // only it may come after the next file's first records.
    let without_last: Vec<u64> = ids.iter().copied().filter(|i| *i != 19 && *i != 29).collect();
    assert!(without_last.is_sorted(), "the rolled file's lines come first: {ids:?}");
}

#[test]
fn the_copy_of_a_copytruncate_is_read_on_from_where_the_tailer_was() {
    for (glob, gaps) in [("app.log*", 0), ("app.log", 1)] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        let mut file = open_append(&log);
        append(&mut file, 0, 10);
        let mut core = TailCore::new(options(dir.path(), glob), Patterns::builtin(), None);
        let (clock, mut ids) = (Clock::new(), Vec::new());
        settle(&mut core, &clock, &mut ids);
        // Written after the tailer's last read, then copied away and truncated.
        append(&mut file, 10, 20);
        std::fs::copy(&log, dir.path().join("app.log.1")).unwrap();
        file.set_len(0).unwrap();
        append(&mut file, 20, 30);
        settle(&mut core, &clock, &mut ids);
        if glob == "app.log*" {
            // The copy's last record waits for `flush_after`; the others come in order.
            let without_last: Vec<u64> = ids.iter().copied().filter(|i| *i != 19).collect();
            assert!(without_last.is_sorted(), "{glob}: {ids:?}");
            ids.sort_unstable();
            assert_eq!(ids, (0..30).collect::<Vec<u64>>(), "{glob}: each line once");
        } else {
            // Without the copy, what it alone holds is lost, and counted as a gap.
            assert_eq!(ids, (0..10).chain(20..30).collect::<Vec<u64>>(), "{glob}");
        }
        assert_eq!(core.report().rotation_gaps, gaps, "{glob}");
    }
}

#[test]
fn a_copytruncate_while_the_daemon_was_down_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 10);
    let (clock, mut ids) = (Clock::new(), Vec::new());
    let saved = {
        let mut core = TailCore::new(options(dir.path(), "app.log*"), Patterns::builtin(), None);
        settle(&mut core, &clock, &mut ids);
        core.positions()
    };
    append(&mut file, 10, 20);
    std::fs::copy(&log, dir.path().join("app.log.1")).unwrap();
    file.set_len(0).unwrap();
    append(&mut file, 20, 30);
    let mut core = TailCore::new(options(dir.path(), "app.log*"), Patterns::builtin(), Some(saved));
    settle(&mut core, &clock, &mut ids);
    ids.sort_unstable();
    assert_eq!(ids, (0..30).collect::<Vec<u64>>());
}

/// The tailer's steps driven by hand, time as an argument: however late the tailer looks, a
/// file it opened is read to its end. The old file is rotated away (renamed or deleted) and
/// the new one written before the tailer looks again; the old one gets its last lines only
/// after the tailer switched to the new one, and the tailer's next look comes long after
/// `drop_after`.
#[test]
fn a_late_look_after_a_rotation_reads_the_old_file_to_its_end() {
    for delete in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("app.log");
        let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
        let (t0, wall) = (Instant::now(), Timestamp::now());
        let mut ids = Vec::new();
        let mut old = open_append(&log);
        append(&mut old, 0, 100);
        collect(core.cycle(t0, wall), &mut ids);
        append(&mut old, 100, 495);
        if delete {
            std::fs::remove_file(&log).unwrap();
        } else {
            std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
        }
        append(&mut open_append(&log), 500, 600);
        collect(core.cycle(t0 + Duration::from_millis(10), wall), &mut ids);
        assert!(ids.contains(&493) && ids.contains(&597), "delete {delete}: read both: {ids:?}");
        // The writer's last lines to the old file, after the tailer moved on to the new one.
        append(&mut old, 495, 500);
        drop(old);
        collect(core.cycle(t0 + Duration::from_secs(5), wall), &mut ids);
        collect(core.cycle(t0 + Duration::from_secs(10), wall), &mut ids);
        assert_eq!(core.report().files, 1, "delete {delete}: the old file is closed");
        // Each file's records in order (the old file's last ones were written after the new
        // file's first, and are read after them).
        let old_file: Vec<u64> = ids.iter().copied().filter(|i| *i < 500).collect();
        let new_file: Vec<u64> = ids.iter().copied().filter(|i| *i >= 500).collect();
        assert!(old_file.is_sorted() && new_file.is_sorted(), "delete {delete}: {ids:?}");
        assert_exactly_once(ids, 600);
    }
}
