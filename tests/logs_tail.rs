//! The tailer follows files while a writer appends: rename+create, copytruncate and
//! delete+recreate rotations, a restart from saved positions, new files and start positions.
//! Every record carries a unique checkpoint id, so "no line lost, none counted twice" is
//! "the ids seen are exactly 0..n, each once".

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use checkpoint_sentinel::config::StartAt;
use checkpoint_sentinel::observe::LogEvent;
use checkpoint_sentinel::sources::logs::parse::Patterns;
use checkpoint_sentinel::sources::logs::tail::{TailCore, TailOptions};

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
    for i in from..to {
        if i % 100 == 99 {
            // The writer goes on while the tailer reads.
            file.flush().unwrap();
            thread::sleep(Duration::from_millis(2));
        }
        let r = record(i);
        if i.is_multiple_of(5) {
            let (a, b) = r.split_at(r.len() / 2);
            file.write_all(a.as_bytes()).unwrap();
            file.flush().unwrap();
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

/// Cycles until the writer is done and then until nothing is left to read or flush.
fn follow(
    core: &mut TailCore,
    writer: thread::JoinHandle<()>,
    rotate: Option<(mpsc::Receiver<()>, mpsc::Sender<()>)>,
) -> Vec<u64> {
    let mut ids = Vec::new();
    while !writer.is_finished() {
        collect(core.cycle(Instant::now()), &mut ids);
        if let Some((_, ack)) = rotate.as_ref().filter(|(want, _)| want.try_recv().is_ok()) {
            // copytruncate loses what was written after the tailer's last read (logrotate says
            // so too): the writer lets the tailer catch up before each truncate.
            collect(core.cycle(Instant::now()), &mut ids);
            collect(core.cycle(Instant::now()), &mut ids);
            assert_eq!(core.report().lag_bytes, 0);
            ack.send(()).unwrap();
        }
        thread::sleep(Duration::from_millis(1));
    }
    writer.join().unwrap();
    let quiet_until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < quiet_until {
        collect(core.cycle(Instant::now()), &mut ids);
        thread::sleep(Duration::from_millis(5));
    }
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

#[test]
fn rename_and_create_finishes_the_old_file_first() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let path = log.clone();
    let writer = thread::spawn(move || {
        let mut file = open_append(&path);
        let mut i = 0;
        let mut generation = 0;
        while i < N {
            append(&mut file, i, i + PER_FILE - 5);
            i += PER_FILE - 5;
            generation += 1;
            std::fs::rename(&path, path.with_extension(format!("log.{generation}"))).unwrap();
            // The writer still appends to the renamed file for a moment, as log4j does.
            append(&mut file, i, i + 5);
            i += 5;
            file = open_append(&path);
            // Rotations are minutes apart in real life; the tailer must have seen a file once.
            thread::sleep(Duration::from_millis(30));
        }
    });
    let ids = follow(&mut core, writer, None);
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
    let writer = thread::spawn(move || {
        let mut file = open_append(&path);
        let mut i = 0;
        let mut generation = 0;
        while i < N {
            append(&mut file, i, i + PER_FILE);
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
    let ids = follow(&mut core, writer, Some((want_rx, ack_tx)));
    assert_exactly_once(ids, N);
    assert!(core.report().rotations >= N / PER_FILE - 1, "{:?}", core.report());
}

#[test]
fn delete_and_recreate_reads_the_deleted_file_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let path = log.clone();
    let writer = thread::spawn(move || {
        let mut file = open_append(&path);
        let mut i = 0;
        while i < N {
            append(&mut file, i, i + PER_FILE - 5);
            i += PER_FILE - 5;
            std::fs::remove_file(&path).unwrap();
            append(&mut file, i, i + 5);
            i += 5;
            file = open_append(&path);
            // Rotations are minutes apart in real life; the tailer must have seen a file once.
            thread::sleep(Duration::from_millis(30));
        }
    });
    let ids = follow(&mut core, writer, None);
    assert_exactly_once(ids, N);
}

#[test]
fn a_truncation_hidden_by_new_writes_is_seen_by_the_fingerprint() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 10);
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), None);
    let mut ids = Vec::new();
    collect(core.cycle(Instant::now()), &mut ids);
    file.set_len(0).unwrap();
    append(&mut file, 100, 130); // Longer than before the truncation.
    collect(core.cycle(Instant::now()), &mut ids);
    thread::sleep(Duration::from_millis(40));
    collect(core.cycle(Instant::now()), &mut ids);
    assert_eq!(ids, (0..10).chain(100..130).collect::<Vec<u64>>());
    assert_eq!(core.report().rotations, 1);
}

#[test]
fn a_restart_resumes_exactly_where_the_tailer_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 2000);
    let mut ids = Vec::new();
    let saved = {
        // Small reads: the tailer stops in the middle of the file, likely inside a record.
        let mut opts = options(dir.path(), "app.log");
        opts.read_budget = 10_000;
        let mut core = TailCore::new(opts, Patterns::builtin(), None);
        for _ in 0..7 {
            collect(core.cycle(Instant::now()), &mut ids);
        }
        assert!(core.report().lag_bytes > 0, "stopped mid-file");
        core.positions()
    };
    let before = ids.len();
    assert!(before > 0 && before < 2000);
    append(&mut file, 2000, 3000);
    let mut core = TailCore::new(options(dir.path(), "app.log"), Patterns::builtin(), Some(saved));
    for _ in 0..5 {
        collect(core.cycle(Instant::now()), &mut ids);
        thread::sleep(Duration::from_millis(40));
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
    let mut ids = Vec::new();
    collect(core.cycle(Instant::now()), &mut ids);
    assert!(ids.is_empty(), "existing lines are skipped at first start: {ids:?}");
    append(&mut old, 50, 60);
    let mut new = open_append(&dir.path().join("b.log"));
    append(&mut new, 1000, 1010);
    thread::sleep(Duration::from_millis(40));
    collect(core.cycle(Instant::now()), &mut ids);
    thread::sleep(Duration::from_millis(40));
    collect(core.cycle(Instant::now()), &mut ids);
    ids.sort_unstable();
    assert_eq!(ids, (50..60).chain(1000..1010).collect::<Vec<u64>>());
    let saved = core.positions();
    drop(core);

    // While the daemon is down a file appears: it is read whole at the next start, although
    // start_at = "end" (positions exist, so this is not the first start).
    thread::sleep(Duration::from_millis(20));
    let mut late = open_append(&dir.path().join("c.log"));
    append(&mut late, 2000, 2005);
    let mut core = TailCore::new(opts, Patterns::builtin(), Some(saved));
    let mut ids = Vec::new();
    collect(core.cycle(Instant::now()), &mut ids);
    thread::sleep(Duration::from_millis(40));
    collect(core.cycle(Instant::now()), &mut ids);
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
    let mut ids = Vec::new();
    collect(core.cycle(Instant::now()), &mut ids);
    thread::sleep(Duration::from_millis(40));
    collect(core.cycle(Instant::now()), &mut ids);
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
        let state = app.state.read().unwrap();
        state.clusters().get("c").map_or(0, |c| {
            c.logs.events.get(&(JOB.to_string(), kind.to_string(), "log")).copied().unwrap_or(0)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while count("expired") + count("failed") < 20 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!((count("expired"), count("failed")), (17, 3));
    tailers.stop_all().await;
    let state = app.state.read().unwrap();
    let logs = &state.clusters()["c"].logs;
    // The positions are in the state with the counters they match, not in a file of their own.
    assert_eq!(logs.positions["c"].files[0].offset, std::fs::metadata(&log).unwrap().len());
    assert!(!dir.path().join("state/log-offsets").exists());
    assert_eq!(logs.root_causes.get("disk_full"), Some(&3));
    assert_eq!(logs.tailer_totals().unwrap().files, 1);
    let _: PathBuf = log;
}

/// Cycles until what the files hold is read and the last records are flushed.
fn settle(core: &mut TailCore, ids: &mut Vec<u64>) {
    for _ in 0..3 {
        collect(core.cycle(Instant::now()), ids);
        thread::sleep(Duration::from_millis(40));
    }
}

#[test]
fn a_rolled_file_the_glob_still_matches_is_read_before_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    let mut file = open_append(&log);
    append(&mut file, 0, 10);
    let mut core = TailCore::new(options(dir.path(), "app.log*"), Patterns::builtin(), None);
    let mut ids = Vec::new();
    settle(&mut core, &mut ids);
    append(&mut file, 10, 20);
    std::fs::rename(&log, dir.path().join("app.log.1")).unwrap();
    append(&mut open_append(&log), 20, 30);
    settle(&mut core, &mut ids);
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
        let mut ids = Vec::new();
        settle(&mut core, &mut ids);
        // Written after the tailer's last read, then copied away and truncated.
        append(&mut file, 10, 20);
        std::fs::copy(&log, dir.path().join("app.log.1")).unwrap();
        file.set_len(0).unwrap();
        append(&mut file, 20, 30);
        settle(&mut core, &mut ids);
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
    let mut ids = Vec::new();
    let saved = {
        let mut core = TailCore::new(options(dir.path(), "app.log*"), Patterns::builtin(), None);
        settle(&mut core, &mut ids);
        core.positions()
    };
    append(&mut file, 10, 20);
    std::fs::copy(&log, dir.path().join("app.log.1")).unwrap();
    file.set_len(0).unwrap();
    append(&mut file, 20, 30);
    let mut core = TailCore::new(options(dir.path(), "app.log*"), Patterns::builtin(), Some(saved));
    settle(&mut core, &mut ids);
    ids.sort_unstable();
    assert_eq!(ids, (0..30).collect::<Vec<u64>>());
}
