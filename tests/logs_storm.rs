//! Rotation storms: a writer appends numbered lines while the log is rotated over and over,
//! several times within one tailer poll interval, the way log4j's RollingFileAppender
//! (`app.log` → `app.log.1` → `app.log.2` …), logrotate's copytruncate and a delete and recreate
//! do it. Whatever the storm, no line is counted twice; a file that lived at least a poll interval
//! loses nothing; and when lines of the storm's short-lived files are lost, `rotation_gaps` says so.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use checkpoint_sentinel::config::StartAt;
use checkpoint_sentinel::observe::TailerReport;
use checkpoint_sentinel::sources::logs::parse::Patterns;
use checkpoint_sentinel::sources::logs::tail::{TailCore, TailOptions};

const JOB: &str = "e5977598408a0b50e1eb3e122b7bd082";
/// How long the tailer sleeps between cycles.
const POLL: Duration = Duration::from_millis(50);
/// How long a file between storms lives: several poll intervals, so a cycle surely lists it.
const CALM: Duration = Duration::from_millis(250);
/// Rotations per storm, all within a fraction of one poll interval.
const STORM: u64 = 6;
const ROUNDS: u64 = 8;

fn line(i: u64) -> String {
    format!(
        "2026-11-29 15:04:18,724 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Checkpoint {i} of job {JOB} expired before completing.\n"
    )
}

#[derive(Clone, Copy, Debug)]
enum Style {
    /// Rename `app.log` → `app.log.1` (shifting `.1` → `.2` … and deleting the oldest), create.
    Log4j { backups: u32 },
    /// Copy to `app.log.1` (after the same shift), truncate in place; the writer goes on.
    CopyTruncate { backups: u32 },
    /// Delete, create.
    DeleteRecreate,
}

fn numbered(path: &Path, n: u32) -> PathBuf {
    path.with_extension(format!("log.{n}"))
}

fn shift(path: &Path, backups: u32) {
    let _ = std::fs::remove_file(numbered(path, backups));
    for n in (1..backups).rev() {
        let _ = std::fs::rename(numbered(path, n), numbered(path, n + 1));
    }
}

fn open_append(path: &Path) -> File {
    OpenOptions::new().create(true).append(true).open(path).unwrap()
}

/// Rotates the log; returns the writer's handle to the live file.
fn rotate(style: Style, path: &Path, file: File) -> File {
    match style {
        Style::Log4j { backups } => {
            drop(file);
            shift(path, backups);
            std::fs::rename(path, numbered(path, 1)).unwrap();
            open_append(path)
        }
        Style::CopyTruncate { backups } => {
            shift(path, backups);
            std::fs::copy(path, numbered(path, 1)).unwrap();
            file.set_len(0).unwrap();
            file
        }
        Style::DeleteRecreate => {
            drop(file);
            std::fs::remove_file(path).unwrap();
            open_append(path)
        }
    }
}

struct Outcome {
    /// Lines written to files that lived at least `CALM`.
    calm: BTreeSet<u64>,
    /// The last line of each file.
    last_of_file: BTreeSet<u64>,
    /// Lines written to the storms' short-lived files.
    stormy: BTreeSet<u64>,
    read: Vec<u64>,
    report: TailerReport,
}

fn storm(style: Style, glob: &str) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.log");
    let mut file = open_append(&path);
    let options = TailOptions {
        id: "t".into(),
        cluster: "c".into(),
        paths: vec![dir.path().join(glob).display().to_string()],
        start_at: StartAt::Beginning,
        max_line_bytes: 4096,
        flush_after: Duration::from_millis(30),
        drop_after: Duration::from_millis(150),
        read_budget: 8 << 20,
        max_files: 256,
    };
    let mut core = TailCore::new(options, Patterns::builtin(), None);
    assert!(core.watch(None), "file events are needed to count files no cycle saw");
    let mut read = Vec::new();
    let mut cycle = |core: &mut TailCore| {
        read.extend(
            core.cycle(Instant::now(), checkpoint_sentinel::time::Timestamp::now())
                .into_iter()
                .map(|e| e.checkpoint_id.unwrap()),
        );
    };
    cycle(&mut core);

    let writer = thread::spawn(move || {
        let (mut calm, mut stormy, mut last_of_file) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        let mut i = 0;
        for _ in 0..ROUNDS {
            // A calm file: written in bursts for several poll intervals, then rotated.
            let born = Instant::now();
            while born.elapsed() < CALM {
                for _ in 0..5 {
                    file.write_all(line(i).as_bytes()).unwrap();
                    calm.insert(i);
                    i += 1;
                }
                // Part of the scenario: bursts a few milliseconds apart.
                thread::sleep(Duration::from_millis(7));
            }
            last_of_file.insert(i - 1);
            file = rotate(style, &path, file);
            // The storm: files that live for a few lines each.
            for _ in 0..STORM {
                for _ in 0..3 {
                    file.write_all(line(i).as_bytes()).unwrap();
                    stormy.insert(i);
                    i += 1;
                }
                last_of_file.insert(i - 1);
                file = rotate(style, &path, file);
            }
        }
        for _ in 0..5 {
            file.write_all(line(i).as_bytes()).unwrap();
            calm.insert(i);
            i += 1;
        }
        (calm, stormy, last_of_file)
    });
    while !writer.is_finished() {
        cycle(&mut core);
        // Part of the scenario: the tailer's poll interval while the writer writes.
        thread::sleep(POLL);
    }
    let (calm, stormy, last_of_file) = writer.join().unwrap();
    // Long enough for rotated files to be read to their end and closed.
    let quiet_until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < quiet_until {
        cycle(&mut core);
        thread::sleep(POLL);
    }
    Outcome { calm, last_of_file, stormy, read, report: core.report() }
}

/// Runs a storm and checks what holds for every style: nothing twice, and lost lines are seen
/// as rotation gaps. With `calm_is_safe`, files that lived a while lose nothing.
fn check(style: Style, glob: &str, calm_is_safe: bool) -> Outcome {
    let outcome = storm(style, glob);
    let Outcome { calm, last_of_file, stormy, read, report } = &outcome;
    let distinct: BTreeSet<u64> = read.iter().copied().collect();
    let mut seen = BTreeSet::new();
    let twice: Vec<u64> = read.iter().copied().filter(|i| !seen.insert(*i)).collect();
    assert!(twice.is_empty(), "{style:?} {glob}: lines counted twice: {twice:?}");
    // Older files are read first, but in a storm a file can be missed by one listing (it moved
    // on to its next name meanwhile) and read a cycle late. The last record of a rotated file
    // always comes a little late: it waits for `flush_after` in case a stack trace follows.
    let late = read.windows(2).filter(|w| w[0] > w[1] && !last_of_file.contains(&w[1])).count();
    let lost_calm: Vec<u64> = calm.difference(&distinct).copied().collect();
    if calm_is_safe {
        assert!(lost_calm.is_empty(), "{style:?} {glob}: lost lines of calm files: {lost_calm:?}");
    }
    let lost = stormy.difference(&distinct).count() + lost_calm.len();
    println!(
        "{style:?} {glob}: {} lines, {} lost ({} of calm files), {late} read late, rotations {}, rotation gaps {}",
        calm.len() + stormy.len(),
        lost,
        lost_calm.len(),
        report.rotations,
        report.rotation_gaps
    );
    if lost > 0 {
        assert!(
            report.rotation_gaps > 0,
            "{style:?} {glob}: {lost} lines lost and no gap counted: {report:?}"
        );
    }
    outcome
}

#[test]
fn log4j_rolling_with_only_the_live_name_watched() {
    check(Style::Log4j { backups: 3 }, "app.log", true);
}

#[test]
fn log4j_rolling_with_the_rolled_names_watched_too() {
    // The rolled files are found by their inode and new name: a storm shorter than the backups
    // loses nothing.
    let outcome = check(Style::Log4j { backups: 2 * STORM as u32 }, "app.log*", true);
    assert!(outcome.stormy.iter().all(|i| outcome.read.contains(i)), "{:?}", outcome.report);
}

#[test]
fn copytruncate_with_the_copies_watched() {
    // Each copy is known by its first bytes and read on from where the tailer was in the
    // original: nothing twice, and with enough backups nothing lost.
    let outcome = check(Style::CopyTruncate { backups: 2 * STORM as u32 }, "app.log*", true);
    assert!(outcome.stormy.iter().all(|i| outcome.read.contains(i)), "{:?}", outcome.report);
}

#[test]
fn copytruncate_with_only_the_live_name_watched() {
    // What was written after the tailer's last read is only in the copy, which it does not
    // read: even a calm file loses its last lines (logrotate's own caveat), and each truncation
    // counts as a gap.
    let outcome = check(Style::CopyTruncate { backups: 3 }, "app.log", false);
    assert!(outcome.report.rotation_gaps >= ROUNDS, "{:?}", outcome.report);
}

#[test]
fn delete_and_recreate() {
    check(Style::DeleteRecreate, "app.log", true);
}
