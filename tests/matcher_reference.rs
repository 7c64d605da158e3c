//! The matcher of `scan-logs` and of the tailer against a reference: the per-line parser as it
//! was before issue 20 (`tests/reference/parse_before_issue_20.rs`), on every fixture log of
//! every Flink version (tests/fixtures/flink-*/*/logs/*: 1.13.6, 1.14.6, 1.17.2, 1.20.5, 2.3.0,
//! DEBUG captures included; ../shared/fixtures (beside the checkout) holds byte-identical copies of the 2.3.0,
//! 1.20.5 and 1.14.6 ones). Same events, same fields (stack traces and root causes included),
//! same order — through the jumping buffer scan, the scan cut into parallel ranges, and the
//! tailer's line-by-line path.
//!
//! One difference is expected and checked: an event found on the first continuation line
//! under a record start without a needle (`Exceeded checkpoint tolerable failure threshold`)
//! had `logged_at: Some("")` in the reference; it now has its record's timestamp. The kinds
//! issue 40 added (`jobmaster_registered`, `oversized_payload`) postdate the reference: they are
//! counted and left out of the comparison.

#[path = "reference/parse_before_issue_20.rs"]
mod reference;

use std::path::{Path, PathBuf};

use checkpoint_sentinel::commands::scan_logs::Scanner;
use checkpoint_sentinel::observe::LogEvent;
use checkpoint_sentinel::sources::logs::parse::{LineSplitter, Patterns, RecordParser, is_record_start};

/// Every captured log under tests/fixtures, all versions (`flink-*`; `written/` holds
/// hand-written logs whose root causes postdate the reference).
fn fixture_logs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for version in std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .filter(|v| v.path().is_dir() && v.file_name().to_string_lossy().starts_with("flink-"))
    {
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            if let Ok(files) = std::fs::read_dir(scenario.path().join("logs")) {
                out.extend(files.flatten().map(|f| f.path()).filter(|p| p.is_file()));
            }
        }
    }
    out.sort();
    out
}

/// The reference: every line through the old record parser.
fn reference_events(data: &[u8]) -> Vec<LogEvent> {
    reference::parse_all(&reference::Patterns::builtin(), data)
}

/// The tailer's path: every line through today's record parser.
fn per_line_events(data: &[u8]) -> Vec<LogEvent> {
    let mut parser = RecordParser::new(Patterns::builtin());
    let mut splitter = LineSplitter::new(1 << 20, 0);
    let mut events = Vec::new();
    splitter.feed(data, |line, offset| parser.push_line(line, offset, &mut events));
    splitter.finish(|line, offset| parser.push_line(line, offset, &mut events));
    parser.flush(&mut events);
    events
}

/// `scan-logs`' scan of one file (events kept), optionally cut into `ranges` parallel ranges.
fn scanned_events(path: &Path, ranges: Option<usize>) -> Vec<LogEvent> {
    let mut scanner = Scanner::new(Patterns::builtin(), 1 << 20).keep_events(true);
    if let Some(n) = ranges {
        scanner = scanner.parallel(1, n);
    }
    scanner.scan_path(path).unwrap();
    let mut events = scanner.finish().events;
    for e in &mut events {
        e.file.clear();
    }
    events
}

/// The kinds added after the reference (issue 40).
const NEWER_KINDS: [&str; 2] = ["jobmaster_registered", "oversized_payload"];

/// `events` without the kinds the reference does not know; how many there were.
fn known_to_reference(events: &mut Vec<LogEvent>) -> usize {
    let before = events.len();
    events.retain(|e| !NEWER_KINDS.contains(&e.kind.as_str()));
    before - events.len()
}

/// Compares `got` with the reference's `want` event by event; returns how many reference
/// events had the empty `logged_at` that is now the record's timestamp.
fn compare(what: &str, path: &Path, want: &[LogEvent], got: &[LogEvent]) -> usize {
    let mut got = got.to_vec();
    known_to_reference(&mut got);
    let got = &got[..];
    let mut stamped = 0;
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let mut w = w.clone();
        if w.logged_at.as_deref() == Some("") {
            let ts = g.logged_at.as_deref().unwrap_or_default();
            assert!(
                ts.len() == 23 && is_record_start(ts.as_bytes()),
                "{what} {}: event {i} ({}) should carry its record's timestamp, got {:?}",
                path.display(),
                g.kind,
                g.logged_at
            );
            w.logged_at = g.logged_at.clone();
            stamped += 1;
        }
        assert_eq!(&w, g, "{what} {}: event {i} differs from the reference", path.display());
    }
    assert_eq!(want.len(), got.len(), "{what} {}: number of events", path.display());
    stamped
}

#[test]
fn the_matcher_gives_the_reference_events_on_every_fixture_log() {
    let logs = fixture_logs();
    assert!(logs.len() >= 80, "fixture logs: {}", logs.len());
    let versions: std::collections::BTreeSet<String> = logs
        .iter()
        .filter_map(|p| p.iter().map(|c| c.to_string_lossy().into_owned()).find(|c| c.starts_with("flink-")))
        .collect();
    assert!(versions.len() >= 5, "{versions:?}");
    let (mut events, mut stamped, mut with_stack, mut with_cause, mut newer) = (0, 0, 0, 0, 0);
    for path in &logs {
        let data = std::fs::read(path).unwrap();
        let want = reference_events(&data);
        events += want.len();
        with_stack += want.iter().filter(|e| !e.stack.is_empty()).count();
        with_cause += want.iter().filter(|e| e.root_cause.is_some()).count();
        let tailed = per_line_events(&data);
        newer += tailed.iter().filter(|e| NEWER_KINDS.contains(&e.kind.as_str())).count();
        stamped += compare("tailer path", path, &want, &tailed);
        compare("scan", path, &want, &scanned_events(path, None));
        compare("scan in 3 ranges", path, &want, &scanned_events(path, Some(3)));
    }
    // All of them in one scan (files taken in order by two threads): the events of the files in
    // the order given, as the reference gives them file by file.
    let mut scanner = Scanner::new(Patterns::builtin(), 1 << 20).keep_events(true).parallel(u64::MAX, 2);
    scanner.scan_paths(&logs).unwrap();
    let mut all = scanner.finish().events;
    assert_eq!(known_to_reference(&mut all), newer, "the scan finds the newer kinds the tailer finds");
    // Every TaskManager log registers at a JobMaster: the newer kinds are there to be left out.
    assert!(newer >= 30, "{newer}");
    let mut want_all = Vec::new();
    for path in &logs {
        let name = path.display().to_string();
        want_all.extend(reference_events(&std::fs::read(path).unwrap()).into_iter().map(|mut e| {
            e.file = name.clone();
            e
        }));
    }
    for e in all.iter_mut().chain(&mut want_all) {
        if e.logged_at.as_deref() == Some("") {
            e.logged_at = None;
        }
    }
    for (w, g) in want_all.iter_mut().zip(&mut all) {
        if w.logged_at.is_none() && g.logged_at.is_some() {
            w.logged_at = g.logged_at.clone(); // the record's timestamp, checked above
        }
    }
    assert!(all == want_all, "the scan of all fixture logs at once differs from the reference");
    eprintln!(
        "{} logs of {versions:?}: {events} events ({with_stack} with a stack trace, {with_cause} \
         with a root cause) equal to the reference; {stamped} now carry their record's timestamp",
        logs.len()
    );
    // The fixtures exercise every part of the record parser, not only the first lines.
    assert!(events > 2_000 && with_stack > 100 && with_cause > 100, "{events} {with_stack} {with_cause}");
}
