//! Rotation storms: a writer appends numbered lines while the log is rotated over and over,
//! several times within one tailer poll interval, the way log4j's RollingFileAppender
//! (`app.log` → `app.log.1` → `app.log.2` …), logrotate's copytruncate and a delete and recreate
//! do it. Whatever the storm, no line is counted twice; a file that lived at least a poll interval
//! loses nothing; and when lines of the storm's short-lived files are lost, `rotation_gaps` says so.
//!
//! The writer and the tailer take turns on one thread, and the tailer's clock is injected (each
//! cycle one poll interval later): what a storm does between two cycles is the same on a quiet
//! and on a loaded machine.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common;

use checkpoint_sentinel::config::StartAt;
use checkpoint_sentinel::observe::TailerReport;
use checkpoint_sentinel::sources::logs::parse::Patterns;
use checkpoint_sentinel::sources::logs::tail::{TailCore, TailOptions};

const JOB: &str = "e5977598408a0b50e1eb3e122b7bd082";
/// The tailer's poll interval: the injected time between two cycles.
const POLL: Duration = Duration::from_millis(50);
/// Cycles a file between storms lives: several poll intervals, each after a burst of lines.
const CALM_CYCLES: u32 = 5;
/// Rotations per storm, all within a fraction of one poll interval.
const STORM: u64 = 6;
const ROUNDS: u64 = 8;
/// A record is flushed this long after its last line (`TailOptions::flush_after`).
const FLUSH_AFTER: Duration = Duration::from_millis(30);
/// A rotated file quiet this long is read to its end and closed (`TailOptions::drop_after`).
const DROP_AFTER: Duration = Duration::from_millis(150);

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
        flush_after: FLUSH_AFTER,
        drop_after: DROP_AFTER,
        read_budget: 8 << 20,
        max_files: 256,
    };
    let mut core = TailCore::new(options, Patterns::builtin(), None);
    assert!(core.watch(None), "file events are needed to count files no cycle saw");
    let mut tailer =
        Tailer { core, cycles: 0, start: Instant::now(), wall: checkpoint_sentinel::time::Timestamp::now() };
    let mut read = Vec::new();
    tailer.cycle(&mut read);

    let (mut calm, mut stormy, mut last_of_file) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut i = 0;
    let mut burst = |file: &mut File, lines: u64, into: &mut BTreeSet<u64>| {
        for _ in 0..lines {
            file.write_all(line(i).as_bytes()).unwrap();
            into.insert(i);
            i += 1;
        }
        i - 1
    };
    for _ in 0..ROUNDS {
        // A calm file: a burst of lines before each of several cycles, and one more after the
        // last (read from the rotated file, if at all), then rotated.
        for _ in 0..CALM_CYCLES {
            burst(&mut file, 5, &mut calm);
            tailer.cycle(&mut read);
        }
        last_of_file.insert(burst(&mut file, 5, &mut calm));
        file = rotate(style, &path, file);
        // The storm, within one poll interval: files that live for a few lines each.
        for _ in 0..STORM {
            last_of_file.insert(burst(&mut file, 3, &mut stormy));
            file = rotate(style, &path, file);
        }
    }
    burst(&mut file, 5, &mut calm);
    // Read to the end: rotated files are read to their end and closed once quiet for
    // `drop_after`, the last record flushed after `flush_after` (both in injected time).
    let quiet = tailer.read_to_the_end_at();
    while tailer.elapsed() < quiet {
        tailer.cycle(&mut read);
    }
    // A file no listing met is counted from file events, which come from another thread: when
    // lines were lost, cycle until their gap is counted (or fail after the patience).
    let written = calm.len() + stormy.len();
    let distinct: BTreeSet<u64> = read.iter().copied().collect();
    if distinct.len() < written {
        let what = format!("{style:?} {glob}: a rotation gap for {} lost lines", written - distinct.len());
        common::until_blocking(
            &what,
            Duration::from_secs(10),
            || {
                tailer.cycle(&mut read);
                tailer.core.report().rotation_gaps
            },
            |gaps| *gaps > 0,
        );
    }
    Outcome { calm, last_of_file, stormy, read, report: tailer.core.report() }
}

/// The core under test with its injected clock: cycle `n` runs `n` poll intervals after the
/// start, on both its monotonic and its wall clock.
struct Tailer {
    core: TailCore,
    cycles: u32,
    start: Instant,
    wall: checkpoint_sentinel::time::Timestamp,
}

impl Tailer {
    /// One cycle, one poll interval after the previous one; its events' checkpoint ids go to `read`.
    fn cycle(&mut self, read: &mut Vec<u64>) {
        let now = self.start + self.elapsed();
        let wall = self.wall.plus_millis(self.elapsed().as_millis() as i64);
        read.extend(self.core.cycle(now, wall).into_iter().map(|e| e.checkpoint_id.unwrap()));
        self.cycles += 1;
    }

    /// The injected time since the start.
    fn elapsed(&self) -> Duration {
        POLL * self.cycles
    }

    /// Injected time after which every rotated file was read to its end and closed, and the last
    /// record flushed: `drop_after` and `flush_after` with a cycle to spare each, as the
    /// sleeping version waited 600 ms for.
    fn read_to_the_end_at(&self) -> Duration {
        self.elapsed() + DROP_AFTER + FLUSH_AFTER + 2 * POLL
    }
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
