//! Log matching: the whole-buffer needle search, the per-line record parser and the streaming
//! `scan-logs` aggregate over a generated Flink log (≈3 % checkpoint lines, ≈1 % failures), and
//! the same over the real logs of the fixtures (`real_*`: every captured JobManager and
//! TaskManager log under tests/fixtures, DEBUG captures included, concatenated: ~6 MB).

use std::sync::Arc;

use checkpoint_sentinel::commands::scan_logs::Scanner;
use checkpoint_sentinel::sources::logs::parse::{LineSplitter, Patterns, RecordParser};
use checkpoint_sentinel::sources::logs::tail::feed_searched;
use divan::counter::BytesCount;

fn main() {
    divan::main();
}

const NOISE: &[&str] = &[
    "INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - stateful-map (3/8) (5a44ef70092224af50ee1c30c6ad3cec_0_0) switched from INITIALIZING to RUNNING.",
    "INFO  org.apache.flink.runtime.source.coordinator.SourceCoordinator [] - Marking checkpoint 812 as completed for source Source: kafka-orders.",
    "INFO  org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [] - [Consumer clientId=orders-3, groupId=orders] Committed offset 422325957 for partition orders-3",
    "INFO  org.apache.flink.runtime.checkpoint.CheckpointRequestDecider [] - checkpoint request time in queue: 1013",
    "INFO  org.apache.flink.connector.kafka.source.reader.KafkaSourceReader [] - Committing offsets for checkpoint 812",
    "INFO  org.apache.flink.runtime.taskexecutor.slot.TaskSlotTableImpl [] - Activate slot 7f1adbc60926f6967e7893f57fd14c16.",
];

/// About 8 MiB of log in the shape of benches/gen-flink-log.py.
fn log() -> Vec<u8> {
    let job = "e5977598408a0b50e1eb3e122b7bd082";
    let cc = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - ";
    let mut out = String::new();
    let mut id = 0u64;
    while out.len() < 8 << 20 {
        for (i, noise) in NOISE.iter().cycle().take(64).enumerate() {
            out.push_str(&format!("2026-11-29 15:00:{:02},{:03} {noise}\n", i % 60, id % 1000));
        }
        id += 1;
        out.push_str(&format!("2026-11-29 15:01:00,000 INFO  {cc}Triggering checkpoint {id} (type=CheckpointType{{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}}) @ 1795964442475 for job {job}.\n"));
        if id % 5 < 2 {
            out.push_str(&format!(
                "2026-11-29 15:01:01,000 INFO  {cc}Checkpoint {id} of job {job} expired before completing.\n"
            ));
            out.push_str("org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n");
            out.push_str(&format!("2026-11-29 15:01:01,000 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint {id} for job {job}. (0 consecutive failed attempts so far)\n"));
            out.push_str("org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n");
            out.push_str("\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator.receiveDeclineMessage(CheckpointCoordinator.java:1145) ~[flink-dist-1.20.5.jar:1.20.5]\n");
        } else {
            out.push_str(&format!("2026-11-29 15:01:01,000 INFO  {cc}Completed checkpoint {id} for job {job} (10098 bytes, checkpointDuration=547 ms, finalizationTime=38 ms).\n"));
        }
    }
    out.into_bytes()
}

/// The buffer search alone (what non-matching lines cost).
#[divan::bench]
fn needle_search_8mib(bencher: divan::Bencher) {
    needle_search(bencher, &log());
}

/// The streaming scan (`scan-logs` without the report rendering).
#[divan::bench]
fn scan_streaming_8mib(bencher: divan::Bencher) {
    scan_streaming(bencher, &log());
}

/// Every line through the record parser, as the live tailer does (per-line prefilter).
#[divan::bench]
fn record_parser_per_line_8mib(bencher: divan::Bencher) {
    let data = log();
    let patterns: Arc<Patterns> = Patterns::builtin();
    bencher.counter(BytesCount::new(data.len())).bench_local(|| {
        let mut parser = RecordParser::new(patterns.clone());
        let mut splitter = LineSplitter::new(1 << 20, 0);
        let mut events = Vec::new();
        splitter.feed(&data, |line, offset| parser.push_line(line, offset, &mut events));
        parser.flush(&mut events);
        events.len()
    });
}

/// Recognising one "Completed checkpoint" message (captures, event built).
#[divan::bench]
fn recognise_completed_line() -> usize {
    static PATTERNS: std::sync::LazyLock<Arc<Patterns>> = std::sync::LazyLock::new(Patterns::builtin);
    let message = "Completed checkpoint 3 for job e5977598408a0b50e1eb3e122b7bd082 (10098 bytes, checkpointDuration=547 ms, finalizationTime=38 ms).";
    PATTERNS.recognise(divan::black_box(message)).map_or(0, |e| e.message.len())
}

/// Every captured log under tests/fixtures, concatenated (the real-log corpus of
/// benches/real-logs.sh before it is repeated).
fn real_logs() -> Vec<u8> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    for version in std::fs::read_dir(root).unwrap().flatten().filter(|v| v.path().is_dir()) {
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            if let Ok(logs) = std::fs::read_dir(scenario.path().join("logs")) {
                files.extend(logs.flatten().map(|f| f.path()).filter(|p| p.is_file()));
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        out.extend(std::fs::read(f).unwrap());
        if out.last().is_some_and(|&b| b != b'\n') {
            out.push(b'\n');
        }
    }
    out
}

/// The buffer search alone over real logs.
#[divan::bench]
fn real_needle_search(bencher: divan::Bencher) {
    needle_search(bencher, &real_logs());
}

/// `scan-logs` over real logs, one thread: jumping from needle line to needle line.
#[divan::bench]
fn real_scan_streaming(bencher: divan::Bencher) {
    scan_streaming(bencher, &real_logs());
}

/// The same, visiting every line (the reference path, what `scan-logs` did before).
#[divan::bench]
fn real_scan_by_lines(bencher: divan::Bencher) {
    let data = real_logs();
    let patterns = Patterns::builtin();
    bencher.counter(BytesCount::new(data.len())).bench_local(|| {
        let mut scanner = Scanner::new(patterns.clone(), 1 << 20).by_lines(true);
        scanner.scan_reader(std::path::Path::new("bench.log"), &data[..]).unwrap();
        scanner.finish().kind_counts().len()
    });
}

/// What the live tailer did with the same bytes before: every line through the record parser.
#[divan::bench]
fn real_tailer_per_line(bencher: divan::Bencher) {
    let data = real_logs();
    let patterns: Arc<Patterns> = Patterns::builtin();
    bencher.counter(BytesCount::new(data.len())).bench_local(|| {
        let mut parser = RecordParser::new(patterns.clone());
        let mut splitter = LineSplitter::new(1 << 20, 0);
        let mut events = Vec::new();
        splitter.feed(&data, |line, offset| parser.push_line(line, offset, &mut events));
        parser.flush(&mut events);
        events.len()
    });
}

/// What the live tailer does with the same bytes now: one buffer search per read (256 KiB, the
/// tailer's read size), each line's needles handed to the record parser (`tail::feed_searched`).
#[divan::bench]
fn real_tailer_searched(bencher: divan::Bencher) {
    let data = real_logs();
    let patterns: Arc<Patterns> = Patterns::builtin();
    bencher.counter(BytesCount::new(data.len())).bench_local(|| {
        let mut parser = RecordParser::new(patterns.clone());
        let mut splitter = LineSplitter::new(1 << 20, 0);
        let (mut needles, mut events, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        for chunk in data.chunks(256 << 10) {
            feed_searched(&mut splitter, &mut parser, &mut needles, chunk, &mut events, &mut spans);
        }
        parser.flush(&mut events);
        events.len()
    });
}

/// The buffer search alone over `data`.
fn needle_search(bencher: divan::Bencher, data: &[u8]) {
    let patterns = Patterns::builtin();
    let mut hits = Vec::new();
    bencher.counter(BytesCount::new(data.len())).bench_local(|| {
        hits.clear();
        patterns.find_needles(divan::black_box(data), &mut hits);
        hits.len()
    });
}

/// The streaming scan of `data` (`scan-logs` without the report rendering), one thread.
fn scan_streaming(bencher: divan::Bencher, data: &[u8]) {
    let patterns = Patterns::builtin();
    bencher.counter(BytesCount::new(data.len())).bench_local(|| {
        let mut scanner = Scanner::new(patterns.clone(), 1 << 20);
        scanner.scan_reader(std::path::Path::new("bench.log"), data).unwrap();
        scanner.finish().kind_counts().len()
    });
}
