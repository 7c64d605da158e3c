//! The streaming `scan-logs` path (whole-buffer needle search, only candidate lines parsed,
//! events folded into an aggregate) gives exactly the events and reports of the plain per-line
//! parser, whatever the read sizes, and its streamed JSON is the JSON of `to_json`.

use std::io::Read;
use std::path::{Path, PathBuf};

use checkpoint_sentinel::commands::scan_logs::{Scanner, scan_paths, scan_paths_streaming};
use checkpoint_sentinel::observe::LogEvent;
use checkpoint_sentinel::sources::logs::parse::{LineSplitter, Patterns, RecordParser};

fn log_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for version in std::fs::read_dir(root).unwrap().flatten().filter(|v| v.path().is_dir()) {
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            if let Ok(files) = std::fs::read_dir(scenario.path().join("logs")) {
                out.extend(files.flatten().map(|f| f.path()).filter(|p| p.is_file()));
            }
        }
    }
    out.sort();
    assert!(out.len() >= 30, "{out:?}");
    out
}

/// Every line through the record parser, as before the streaming scan.
fn per_line(data: &[u8], max: usize) -> Vec<LogEvent> {
    let mut parser = RecordParser::new(Patterns::builtin());
    let mut splitter = LineSplitter::new(max, 0);
    let mut events = Vec::new();
    splitter.feed(data, |line, offset| parser.push_line(line, offset, &mut events));
    splitter.finish(|line, offset| parser.push_line(line, offset, &mut events));
    parser.flush(&mut events);
    events
}

/// A reader that hands out `n` bytes at a time, so lines span reads.
struct Dribble<'a>(&'a [u8], usize);

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.1.min(buf.len()).min(self.0.len());
        buf[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        Ok(n)
    }
}

fn streamed(data: &[u8], chunk: usize, max: usize) -> Vec<LogEvent> {
    let mut scanner = Scanner::new(Patterns::builtin(), max).keep_events(true);
    scanner.scan_reader(Path::new("x.log"), Dribble(data, chunk)).unwrap();
    let mut events = scanner.finish().events;
    for e in &mut events {
        e.file.clear();
    }
    events
}

#[test]
fn the_streaming_scan_finds_exactly_the_per_line_events() {
    for file in log_files() {
        let data = std::fs::read(&file).unwrap();
        let want = per_line(&data, 1 << 20);
        for chunk in [usize::MAX, 4096, 333, 61] {
            assert_eq!(streamed(&data, chunk, 1 << 20), want, "{} in reads of {chunk}", file.display());
        }
        // A line limit that cuts lines (and needles).
        assert_eq!(streamed(&data, 1000, 90), per_line(&data, 90), "{} cut at 90", file.display());
    }
}

#[test]
fn a_needle_under_a_line_that_matched_nothing_still_counts() {
    let text = "\
2026-11-29 15:45:09,725 INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Asynchronous task checkpoint failed., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.
\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:212) ~[flink-dist-1.20.5.jar:1.20.5]
2026-11-29 15:45:09,726 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job x switched from state RUNNING to RESTARTING.
org.apache.flink.runtime.JobException: Recovery is suppressed
\tat x
Caused by: org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.
2026-11-29 15:45:09,727 INFO  x [] - Checkpoint 4 of job e5977598408a0b50e1eb3e122b7bd082 expired before completing.";
    let want = per_line(text.as_bytes(), 1 << 20);
    assert_eq!(want.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["tolerable_exceeded", "expired"]);
    for chunk in [usize::MAX, 7, 100, 230, 300] {
        assert_eq!(streamed(text.as_bytes(), chunk, 1 << 20), want, "reads of {chunk}");
    }
}

#[test]
fn streaming_and_kept_events_give_the_same_reports_and_json_streams_as_the_tree() {
    let patterns = Patterns::builtin();
    let files = log_files();
    let kept = scan_paths(&files, &patterns, 1 << 20).unwrap();
    let streaming = scan_paths_streaming(&files, &patterns, 1 << 20).unwrap();
    assert!(streaming.events.is_empty());
    assert!(!kept.events.is_empty());
    assert_eq!(kept.to_text(), streaming.to_text());
    let tree = format!("{:#}", streaming.to_json());
    assert_eq!(tree, format!("{:#}", kept.to_json()));
    let mut streamed = Vec::new();
    streaming.write_json(&mut streamed).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), tree);
}

#[test]
fn the_hand_written_parsers_agree_with_the_regexes() {
    let patterns = Patterns::builtin();
    let mut messages: Vec<String> = Vec::new();
    for file in log_files() {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        messages.extend(
            text.lines()
                .filter_map(checkpoint_sentinel::sources::logs::parse::split_header)
                .map(|h| h.message.to_string()),
        );
    }
    let job = "e5977598408a0b50e1eb3e122b7bd082";
    // Near misses and variants of the four fast-parsed lines.
    for variant in [
        format!("Triggering checkpoint 12 @ 1795964442475 for job {job}."),
        format!("Triggering checkpoint 12 @ 1795964442475 for job {job}"),
        format!("Triggering checkpoint 12 (type=) @ 1 for job {job}."),
        format!("Triggering checkpoint 12 (type=a) @ b) @ 7 for job {job}."),
        format!("Triggering checkpoint 12 (type=CHECKPOINT) @ for job {job}."),
        format!("Triggering checkpoint 12 (type=CHECKPOINT)@ 1 for job {job}."),
        format!("Triggering checkpoint 99999999999999999999999 @ 1 for job {job}."),
        format!("Triggering checkpoint ١٢ @ 1 for job {job}."),
        format!("Triggering checkpoint 12 @ 1 for job {job}.."),
        format!("Triggering checkpoint 12 @ 1 for job {}.", job.to_uppercase()),
        "Triggering checkpoint 12 @ 1 for job é5977598408a0b50e1eb3e122b7bd08.".to_string(),
        format!("Completed checkpoint 3 for job {job} (10098 bytes, checkpointDuration=547 ms)."),
        format!(
            "Completed checkpoint 3 for job {job} (10098 bytes, checkpointDuration=547 ms, finalizationTime=3 ms)"
        ),
        format!("Completed checkpoint 3 for job {job} (10098 bytes in 547 ms)."),
        format!("Completed checkpoint 3 for job {job} (10098 bytes in 547 ms).."),
        format!(
            "Completed checkpoint 3 for job {job} (10098 bytes, checkpointDuration=547 ms, finalizationTime= ms)."
        ),
        format!("Completed checkpoint 3 for job {job} (bytes in 547 ms)."),
        format!("Checkpoint 4 of job {job} expired before completing"),
        format!("Checkpoint 4 of job {job} expired before completing.!"),
        format!("Checkpoint  4 of job {job} expired before completing."),
        format!(
            "Failed to trigger or complete checkpoint -1 for job {job}. (0 consecutive failed attempts so far)"
        ),
        format!(
            "Failed to trigger or complete checkpoint abc for job {job}. (2 consecutive failed attempts so far)"
        ),
        format!(
            "Failed to trigger or complete checkpoint 7 for job {job}. (99999999999 consecutive failed attempts so far)"
        ),
        format!(
            "Failed to trigger or complete checkpoint 7\tfor job {job}. (1 consecutive failed attempts so far)"
        ),
        format!(
            "Failed to trigger or complete checkpoint 7 for job {job}. (1 consecutive failed attempts so far)."
        ),
        format!(
            "Failed to trigger checkpoint for job {job} since Checkpoint triggering task is not being executed."
        ),
        // The DEBUG barrier line (hand-parsed when its needle is the only one).
        "map (1/2)#0 (d0f8d1e5_857e9877747f27b5e758680f3644828a_1_0): Received barrier from channel InputChannelInfo{gateIdx=0, inputChannelIdx=0} @ 1.".to_string(),
        "map (1/2)#0 (d0f8d1e5): Received barrier from channel c @ 1 @ 22".to_string(),
        " (abc): Received barrier from channel c @ 1.".to_string(),
        "a (xyz): Received barrier from channel c @ 1.".to_string(),
        "a (): Received barrier from channel c @ 1.".to_string(),
        "a: Received barrier from channel  @ 1.".to_string(),
        "a: Received barrier from channel c @ 1..".to_string(),
        "a: Received barrier from channel c @ ١.".to_string(),
        "a: Received barrier from channel c @ 99999999999999999999999.".to_string(),
        "a: Received barrier from channel x: Received barrier from channel c @ 3".to_string(),
        "a (1/2): Received barrier from channel c @ 3 @ x".to_string(),
        format!("Triggering checkpoint 1 @ 2 for job {job}: Received barrier from channel c @ 3"),
    ] {
        messages.push(variant);
    }
    let mut fast = 0;
    for m in &messages {
        let (got, want) = (patterns.recognise(m), patterns.recognise_by_regex(m));
        assert_eq!(got, want, "{m}");
        fast += usize::from(
            got.is_some_and(|e| ["triggered", "completed", "expired", "failed"].contains(&e.kind.as_str())),
        );
    }
    assert!(fast > 500, "{fast}");
}

#[test]
fn files_cut_into_parallel_ranges_give_the_same_events_and_report() {
    let patterns = Patterns::builtin();
    for file in log_files() {
        let data = std::fs::read(&file).unwrap();
        let mut one = Scanner::new(patterns.clone(), 1 << 20).keep_events(true).parallel(u64::MAX, 1);
        one.scan_path(&file).unwrap();
        let one = one.finish();
        for ranges in [2, 3, 7] {
            let mut cut = Scanner::new(patterns.clone(), 1 << 20).keep_events(true).parallel(0, ranges);
            cut.scan_path(&file).unwrap();
            let cut = cut.finish();
            assert_eq!(cut.events, one.events, "{} in {ranges} ranges", file.display());
            assert_eq!(cut.to_text(), one.to_text(), "{}", file.display());
            assert_eq!((cut.files[0].bytes, cut.files[0].lines), (data.len() as u64, one.files[0].lines));
            // Without kept events the threads hand their events over packed: the same report.
            let mut packed = Scanner::new(patterns.clone(), 1 << 20).parallel(0, ranges);
            packed.scan_path(&file).unwrap();
            let packed = packed.finish();
            assert!(packed.events.is_empty());
            assert_eq!(packed.to_text(), one.to_text(), "{} packed, {ranges} ranges", file.display());
            assert_eq!(packed.to_json(), one.to_json(), "{} packed, {ranges} ranges", file.display());
        }
    }
}

/// The scan that jumps from needle line to needle line (the lines between are never visited,
/// their newlines only counted) against the reference path that visits every line: the same
/// events in the same order, the same line and record counts and the same report, on every
/// fixture log, in reads that cut lines anywhere, and on all of them concatenated (what the
/// real-log benchmark reads).
#[test]
fn the_jumping_scan_gives_the_events_of_the_line_by_line_scan() {
    let patterns = Patterns::builtin();
    let scan = |data: &[u8], chunk: usize, by_lines: bool| {
        let mut scanner = Scanner::new(patterns.clone(), 1 << 20).keep_events(true).by_lines(by_lines);
        scanner.scan_reader(Path::new("x.log"), Dribble(data, chunk)).unwrap();
        let report = scanner.finish();
        let f = &report.files[0];
        let counts = (f.bytes, f.lines, f.records, f.oversize_lines);
        let mut events = report.events.clone();
        for e in &mut events {
            e.file.clear();
        }
        (events, counts, report.to_text())
    };
    let mut all = Vec::new();
    for file in log_files() {
        let data = std::fs::read(&file).unwrap();
        all.extend_from_slice(&data);
        let want = scan(&data, usize::MAX, true);
        assert_eq!(
            want.0,
            per_line(&data, 1 << 20),
            "{}: the reference is the per-line parser",
            file.display()
        );
        for chunk in [usize::MAX, 65536, 4096, 333] {
            assert_eq!(scan(&data, chunk, false), want, "{} in reads of {chunk}", file.display());
        }
    }
    // The tolerable failure on the line under a record start that matched nothing, after
    // lines the scan jumps over (in the captured logs such a record always follows one that
    // matched, so the scan is reading line by line there).
    let mut text = String::new();
    for i in 0..40 {
        text.push_str(&format!(
            "2026-11-29 15:45:{i:02},000 INFO  x [] - Task {i} switched from RUNNING to RUNNING.\n"
        ));
    }
    // Deeper in a trace the same text is no event (a jump must not pair it with an older line).
    text.push_str("2026-11-29 15:45:45,000 INFO  x [] - Job x switched from state RUNNING to RESTARTING.\n");
    text.push_str("org.apache.flink.runtime.JobException: Recovery is suppressed\n");
    text.push_str("Caused by: org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n");
    for i in 0..10 {
        text.push_str(&format!(
            "2026-11-29 15:45:46,{i:03} INFO  x [] - Task {i} switched from RUNNING to CANCELED.\n"
        ));
    }
    text.push_str("2026-11-29 15:45:50,000 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph [] - Job x switched from state RUNNING to FAILING.\n");
    text.push_str(
        "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.\n",
    );
    text.push_str("\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:212)\n");
    text.push_str("2026-11-29 15:45:51,000 INFO  x [] - Task 0 switched from RUNNING to FAILED.\n");
    let want = scan(text.as_bytes(), usize::MAX, true);
    assert_eq!(want.0.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(), ["tolerable_exceeded"]);
    assert_eq!(scan(text.as_bytes(), usize::MAX, false), want, "tolerable failure after skipped lines");

    let want = scan(&all, usize::MAX, true);
    assert!(want.0.len() > 1000, "{} events", want.0.len());
    assert_eq!(scan(&all, usize::MAX, false), want, "all fixture logs concatenated");
}

/// Files scanned on several threads fail as a serial scan would: at the first file that cannot
/// be read, with the files before it in the report and none after it.
#[test]
fn a_scan_on_several_threads_stops_at_the_first_unreadable_file_in_order() {
    let files = log_files();
    let missing = std::env::temp_dir().join("checkpoint-sentinel-no-such-log.log");
    let paths = vec![files[0].clone(), files[1].clone(), missing.clone(), files[2].clone(), files[3].clone()];
    for threads in [1, 2, 4] {
        let mut scanner = Scanner::new(Patterns::builtin(), 1 << 20).parallel(u64::MAX, threads);
        let err = scanner.scan_paths(&paths).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{threads} threads");
        assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
        let report = scanner.finish();
        let scanned: Vec<_> = report.files.iter().map(|f| f.path.clone()).collect();
        assert_eq!(scanned, &paths[..2], "{threads} threads");
    }
}
