//! The JSON output of a scan, written one checkpoint at a time.

use std::collections::BTreeMap;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use serde_json::{Value, json};

use crate::time::log_time_utc_ms;

use super::aggregate::{Aggregate, CauseCounts, InternedCause, Timeline, TimelineEvent};
use super::json_bytes as jb;
use super::report::ScanReport;

/// Timeline events a chunk of the `checkpoints` array holds at least (but for the last), cut
/// at checkpoint bounds: ~230 KB of text, so that a buffer stays in the cache between its
/// writer thread and the write to stdout.
const CHUNK_EVENTS: usize = 512;

/// Buffers a writer thread of the `checkpoints` array has: one to write while the other waits
/// to go out.
const BUFFERS: usize = 2;

/// Spaces that indent `depth` levels of the pretty report (two a level).
const PAD: &[u8] = b"        ";

fn to_io(e: serde_json::Error) -> io::Error {
    io::Error::other(e)
}

/// `text`, a value written pretty at depth 0, written at `depth`: every line after the first
/// indented by two spaces a level (JSON strings hold no raw newline, so every newline is the
/// formatter's).
fn write_at_depth(out: &mut impl io::Write, text: &[u8], depth: usize) -> io::Result<()> {
    let pad = &PAD[..2 * depth];
    let mut rest = text;
    while let Some(i) = memchr::memchr(b'\n', rest) {
        out.write_all(&rest[..=i])?;
        out.write_all(pad)?;
        rest = &rest[i + 1..];
    }
    out.write_all(rest)
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

/// An event's `file`: the file name of the path it came from.
fn file_name(path: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
    path.and_then(|f| Path::new(f).file_name()).map(|n| n.to_string_lossy())
}

/// Each file's `file` as JSON text, worked out once per writer thread (every event names its
/// file; a scan has few).
#[derive(Default)]
struct FileNames(Vec<(u32, Vec<u8>)>);

impl FileNames {
    fn json(&mut self, a: &Aggregate, file: u32) -> &[u8] {
        let at = match self.0.iter().position(|(f, _)| *f == file) {
            Some(at) => at,
            None => {
                let mut text = Vec::new();
                jb::opt_string(&mut text, file_name(a.str(file)).as_deref());
                self.0.push((file, text));
                self.0.len() - 1
            }
        };
        &self.0[at].1
    }
}

/// A chunk of the `checkpoints` array written: its first checkpoint's index, its writer, its text.
struct Chunk {
    start: usize,
    worker: usize,
    text: Vec<u8>,
}

/// A writer thread's sender of chunks, which tells the thread writing them out when the writer
/// panics (`start` = `usize::MAX`), so that it stops waiting for the chunk that never comes.
struct PanicNotice(mpsc::Sender<Chunk>, usize);

impl Drop for PanicNotice {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.send(Chunk { start: usize::MAX, worker: self.1, text: Vec::new() });
        }
    }
}

/// `timelines` cut at checkpoint bounds into runs of at least `events` events (the last may
/// hold fewer).
fn chunks_of(timelines: &[Timeline<'_>], events: usize) -> Vec<Range<usize>> {
    let mut chunks = Vec::new();
    let (mut start, mut held) = (0, 0);
    for (i, t) in timelines.iter().enumerate() {
        held += t.events.len().max(1);
        if held >= events {
            chunks.push(start..i + 1);
            (start, held) = (i + 1, 0);
        }
    }
    if start < timelines.len() {
        chunks.push(start..timelines.len());
    }
    chunks
}

/// Writes the chunks to `out` in order as they come from `done`, each buffer handed back to its
/// writer once out.
fn write_in_order(
    out: &mut impl io::Write,
    done: &mpsc::Receiver<Chunk>,
    give_back: &[mpsc::Sender<Vec<u8>>],
    chunks: &[Range<usize>],
) -> io::Result<()> {
    let mut waiting: BTreeMap<usize, Chunk> = BTreeMap::new();
    for want in chunks.iter().map(|c| c.start) {
        while !waiting.contains_key(&want) {
            let chunk = done.recv().map_err(|_| io::Error::other("a JSON writer thread stopped"))?;
            if chunk.start == usize::MAX {
                return Err(io::Error::other("a JSON writer thread panicked"));
            }
            waiting.insert(chunk.start, chunk);
        }
        if let Some(chunk) = waiting.remove(&want) {
            out.write_all(&chunk.text)?;
            let _ = give_back[chunk.worker].send(chunk.text);
        }
    }
    Ok(())
}

impl ScanReport {
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
    /// the checkpoints in chunks instead of the whole tree, written by one thread per core
    /// (issue 42: written on one thread after the scan, the JSON report's checkpoints were most
    /// of what it cost over the text report).
    pub fn write_json(&self, writer: impl io::Write) -> io::Result<()> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        self.write_json_in(writer, CHUNK_EVENTS, threads)
    }

    /// [`write_json`](Self::write_json) with chunks of `chunk_events` events written by
    /// `threads` threads.
    fn write_json_in(&self, mut out: impl io::Write, chunk_events: usize, threads: usize) -> io::Result<()> {
        let head = match self.json_head() {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let mut keys: Vec<&str> = head.keys().map(String::as_str).collect();
        keys.push("checkpoints");
        keys.sort_unstable();
        for (i, key) in keys.iter().enumerate() {
            out.write_all(if i == 0 { b"{\n  " } else { b",\n  " })?;
            serde_json::to_writer(&mut out, key).map_err(to_io)?;
            out.write_all(b": ")?;
            if *key == "checkpoints" {
                self.write_checkpoints_json(&mut out, chunk_events, threads.max(1))?;
            } else {
                write_at_depth(&mut out, &serde_json::to_vec_pretty(&head[*key]).map_err(to_io)?, 1)?;
            }
        }
        out.write_all(b"\n}")
    }

    /// The `checkpoints` array at depth 1, cut into chunks of about `chunk_events` events at
    /// checkpoint bounds: `threads` workers take the next chunk as soon as they have a free
    /// buffer ([`BUFFERS`] each) and write it there; this thread writes the chunks out in order
    /// and hands each buffer back. Memory: `threads × BUFFERS` chunks' text, whatever the
    /// report's size (issue 42: the whole array in memory took the JSON report to 100 MB RSS
    /// on 322 MB of logs, where the text report held 40 MB).
    fn write_checkpoints_json(
        &self,
        out: &mut impl io::Write,
        chunk_events: usize,
        threads: usize,
    ) -> io::Result<()> {
        let timelines = self.aggregate.timelines();
        if timelines.is_empty() {
            return out.write_all(b"[]");
        }
        let chunks = chunks_of(&timelines, chunk_events);
        out.write_all(b"[")?;
        let next = AtomicUsize::new(0);
        let (done_tx, done_rx) = mpsc::channel::<Chunk>();
        std::thread::scope(|scope| {
            let mut give_back = Vec::new();
            let mut workers = Vec::new();
            for worker in 0..threads.min(chunks.len()) {
                let (free_tx, free_rx) = mpsc::channel::<Vec<u8>>();
                for _ in 0..BUFFERS {
                    let _ = free_tx.send(Vec::new());
                }
                give_back.push(free_tx);
                let done = PanicNotice(done_tx.clone(), worker);
                let (next, chunks, timelines) = (&next, &chunks, &timelines);
                workers.push(scope.spawn(move || {
                    // A buffer first, then a chunk: every chunk taken is written (no deadlock).
                    while let Ok(mut buf) = free_rx.recv() {
                        let Some(range) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                        buf.clear();
                        self.checkpoints_text(&mut buf, &timelines[range.clone()], range.start == 0);
                        if done.0.send(Chunk { start: range.start, worker, text: buf }).is_err() {
                            break;
                        }
                    }
                }));
            }
            drop(done_tx);
            let written = write_in_order(out, &done_rx, &give_back, &chunks);
            drop(give_back);
            let mut panicked = false;
            for w in workers {
                panicked |= w.join().is_err();
            }
            match written {
                Err(_) if panicked => Err(io::Error::other("a JSON writer thread panicked")),
                written => written,
            }
        })?;
        out.write_all(b"\n  ]")
    }

    /// `part`'s checkpoints as they stand in the array: each on a line of its own at depth 2,
    /// after a comma unless it is the report's `first`. Written by hand (`json_bytes.rs`), the
    /// text serde_json writes for [`CheckpointOut`] pretty at that depth (tests hold the two
    /// equal).
    fn checkpoints_text(&self, out: &mut Vec<u8>, part: &[Timeline<'_>], first: bool) {
        let mut files = FileNames::default();
        for (i, t) in part.iter().enumerate() {
            out.extend_from_slice(if first && i == 0 { b"\n    " } else { b",\n    " });
            self.write_checkpoint(out, t, &mut files);
        }
    }

    /// One checkpoint, its `{` at depth 2 (the array's line already started).
    fn write_checkpoint(&self, out: &mut Vec<u8>, t: &Timeline<'_>, files: &mut FileNames) {
        let a = &self.aggregate;
        out.extend_from_slice(b"{\n      \"duration_ms\": ");
        jb::opt_int(out, t.events.iter().find(|e| a.kind(e) == "completed").and_then(|e| e.duration_ms));
        out.extend_from_slice(b",\n      \"events\": ");
        if t.events.is_empty() {
            out.extend_from_slice(b"[]");
        } else {
            for (i, e) in t.events.iter().enumerate() {
                out.extend_from_slice(if i == 0 { b"[\n        " } else { b",\n        " });
                self.write_event(out, e, files);
            }
            out.extend_from_slice(b"\n      ]");
        }
        out.extend_from_slice(b",\n      \"id\": ");
        jb::int(out, t.id);
        out.extend_from_slice(b",\n      \"job_id\": ");
        jb::string(out, t.job_id);
        out.extend_from_slice(b",\n      \"outcome\": ");
        jb::string(out, t.outcome);
        out.extend_from_slice(b",\n      \"root_cause\": ");
        self.write_cause(out, a.cause_of(t.id), b"\n        ", b"\n      }");
        out.extend_from_slice(b"\n    }");
    }

    /// One event of a checkpoint, its `{` at depth 4: [`EventOut`]'s fields in order.
    fn write_event(&self, out: &mut Vec<u8>, e: &TimelineEvent, files: &mut FileNames) {
        let a = &self.aggregate;
        let at = e.at.as_deref();
        out.extend_from_slice(b"{\n          \"at\": ");
        jb::opt_string(out, at);
        out.extend_from_slice(b",\n          \"at_ms\": ");
        jb::opt_int(out, at.and_then(log_time_utc_ms));
        out.extend_from_slice(b",\n          \"consecutive_failures\": ");
        jb::opt_int(out, e.consecutive_failures);
        out.extend_from_slice(b",\n          \"duration_ms\": ");
        jb::opt_int(out, e.duration_ms);
        out.extend_from_slice(b",\n          \"file\": ");
        out.extend_from_slice(files.json(a, e.file));
        out.extend_from_slice(b",\n          \"kind\": ");
        jb::string(out, a.kind(e));
        out.extend_from_slice(b",\n          \"reason\": ");
        jb::opt_string(out, a.str(e.reason));
        out.extend_from_slice(b",\n          \"root_cause\": ");
        let cause = e.cause.checked_sub(1).and_then(|i| a.cause_ids.get(i as usize)).copied();
        self.write_cause(out, cause, b"\n            ", b"\n          }");
        out.extend_from_slice(b",\n          \"subtask\": ");
        jb::opt_int(out, e.subtask);
        out.extend_from_slice(b",\n          \"task\": ");
        jb::opt_string(out, a.str(e.task));
        out.extend_from_slice(b",\n          \"taskmanager\": ");
        jb::opt_string(out, a.str(e.taskmanager));
        out.extend_from_slice(b"\n        }");
    }

    /// A root cause ([`CauseOut`]) or `null`: its fields after `pad`, `close` after them.
    fn write_cause(&self, out: &mut Vec<u8>, cause: Option<InternedCause>, pad: &[u8], close: &[u8]) {
        let Some(c) = cause else {
            return out.extend_from_slice(b"null");
        };
        let a = &self.aggregate;
        out.push(b'{');
        out.extend_from_slice(pad);
        out.extend_from_slice(b"\"category\": ");
        jb::string(out, c.category);
        out.push(b',');
        out.extend_from_slice(pad);
        out.extend_from_slice(b"\"exception\": ");
        jb::opt_string(out, a.str(c.exception));
        out.push(b',');
        out.extend_from_slice(pad);
        out.extend_from_slice(b"\"message\": ");
        jb::opt_string(out, a.str(c.message));
        out.extend_from_slice(close);
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

    fn event_out<'a>(&'a self, e: &'a TimelineEvent) -> EventOut<'a> {
        let a = &self.aggregate;
        EventOut {
            at: e.at.as_deref(),
            at_ms: e.at.as_deref().and_then(log_time_utc_ms),
            consecutive_failures: e.consecutive_failures,
            duration_ms: e.duration_ms,
            file: file_name(a.str(e.file)),
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

    fn cause_out(&self, c: InternedCause) -> CauseOut<'_> {
        let a = &self.aggregate;
        CauseOut { category: c.category, exception: a.str(c.exception), message: a.str(c.message) }
    }

    /// Everything but `checkpoints`.
    fn json_head(&self) -> Value {
        let a = &self.aggregate;
        let (causes, symptoms) = a.root_causes();
        let root_causes: BTreeMap<&str, u64> = causes.iter().map(|(k, (n, _))| (*k, *n)).collect();
        let mut out = json!({
            "files": self.files_json(),
            "lines": self.files.iter().map(|f| f.lines).sum::<u64>(),
            "bytes": self.files.iter().map(|f| f.bytes).sum::<u64>(),
            "events": self.kind_counts(),
            "root_causes": root_causes,
            "root_cause_symptoms": symptoms,
            "root_cause_examples": self.root_cause_examples_json(&causes),
            "not_flink_logs": self.files.iter().filter(|f| f.is_not_a_flink_log()).map(|f| f.path.display().to_string()).collect::<Vec<_>>(),
            "blocking_subtasks": self.blocking_json(),
            "missing_barriers": self.missing_barriers_json(),
            "headline": self.headlines(),
            "alignment": self.alignment_json(),
        });
        if a.timeline_events_dropped > 0 {
            out["timeline_events_dropped"] = a.timeline_events_dropped.into();
        }
        out
    }

    fn files_json(&self) -> Vec<Value> {
        self.files
            .iter()
            .map(|f| json!({"path": f.path.display().to_string(), "bytes": f.bytes, "lines": f.lines, "oversize_lines": f.oversize_lines, "flink_log": !f.is_not_a_flink_log()}))
            .collect()
    }

    /// Every kept (exception, message) of every root-cause category with its count, sorted.
    fn root_cause_examples_json(&self, causes: &BTreeMap<&'static str, CauseCounts>) -> Vec<Value> {
        let a = &self.aggregate;
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
        examples
            .into_iter()
            .map(|(category, exception, message, count)| {
                json!({"category": category, "exception": exception, "message": message, "count": count})
            })
            .collect()
    }

    fn blocking_json(&self) -> Vec<Value> {
        let a = &self.aggregate;
        self.blocking_rows()
            .into_iter()
            .map(|(task, subtask, b)| {
                json!({"task": task, "subtask": subtask, "taskmanager": a.str(b.taskmanager), "count": b.count,
                       "kinds": self.kinds_of(b), "checkpoints": b.checkpoints})
            })
            .collect()
    }

    fn missing_barriers_json(&self) -> Vec<Value> {
        self.aggregate
            .missing_barriers()
            .into_iter()
            .map(|m| json!({"task": m.task, "subtask": m.subtask, "checkpoint_id": m.checkpoint_id, "received": m.received, "missing": m.missing}))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::commands::scan_logs::scan_paths_streaming;
    use crate::sources::logs::parse::Patterns;

    /// Every captured log's report, written in chunks of any size by any number of
    /// threads, is the text of the whole tree.
    #[test]
    fn batched_parallel_json_is_the_trees_text() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut files: Vec<PathBuf> =
            ["flink-1.20.5/expired/logs", "flink-2.3.0/expired/logs", "written/storage-causes/logs"]
                .iter()
                .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(|e| e.unwrap().path()))
                .collect();
        files.sort();
        let report = scan_paths_streaming(&files, &Patterns::builtin(), 1 << 20).unwrap();
        let tree = format!("{:#}", report.to_json());
        assert!(tree.matches("\"outcome\"").count() > 5, "{tree}");
        for (chunk, threads) in [(0, 2), (1, 1), (1, 3), (2, 2), (3, 7), (5, 1), (4_096, 2)] {
            let mut out = Vec::new();
            report.write_json_in(&mut out, chunk, threads).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), tree, "chunks of {chunk} events, {threads} threads");
        }
        let empty = scan_paths_streaming(&[], &Patterns::builtin(), 1 << 20).unwrap();
        let mut out = Vec::new();
        empty.write_json_in(&mut out, 2, 2).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{:#}", empty.to_json()));
    }

    /// Strings JSON must escape, non-ASCII text and bytes that are no UTF-8, in the task, the
    /// TaskManager, the root cause's message and the file's name: the hand-written checkpoints
    /// are the tree's text (serde_json's), and the escapes are there to be compared.
    #[test]
    fn strings_to_escape_are_written_as_serde_json_writes_them() {
        use std::os::unix::ffi::OsStrExt;
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let swaps: [(&[u8], &[u8]); 3] = [
            (b"stateful-map", "st\"ate\\ful\tmap\u{1}\u{1f}\u{7f} \u{e4}\u{1f600}".as_bytes()),
            (b"localhost", b"lo\"cal\\\\host\x08\x0c\r\xff\xfe end"),
            (b"Request ID", "Req\"uest\" \\u0041 \u{2028} \u{fffd}\u{0} ID".as_bytes()),
        ];
        let dir = tempfile::tempdir().unwrap();
        let names: [&[u8]; 3] =
            ["jm \"quoted\" \\ \t \u{e9}t\u{e9}.log".as_bytes(), b"tm.log", b"tm-\xff\xfe-\xc3(.log"];
        let mut files = Vec::new();
        for (from, name) in [
            "flink-1.20.5/expired/logs/flink-root-standalonesession-0-vm.log",
            "flink-1.20.5/expired/logs/flink-root-taskexecutor-0-vm.log",
            "written/storage-causes/logs/flink-root-taskexecutor-0-vm.log",
        ]
        .iter()
        .zip(names)
        {
            let mut data = std::fs::read(root.join(from)).unwrap();
            for (needle, with) in swaps {
                data = replace_all(&data, needle, with);
            }
            let path = dir.path().join(std::ffi::OsStr::from_bytes(name));
            std::fs::write(&path, data).unwrap();
            files.push(path);
        }
        let report = scan_paths_streaming(&files, &Patterns::builtin(), 1 << 20).unwrap();
        let tree = format!("{:#}", report.to_json());
        let checkpoints =
            &tree[tree.find("\n  \"checkpoints\"").unwrap()..tree.find("\n  \"events\"").unwrap()];
        for escaped in [
            r#""task": "st\"ate\\ful\tmap\u0001\u001f"#,
            "\u{7f} \u{e4}\u{1f600}\"",
            r#"lo\"cal\\\\host\b\f\r"#,
            r#"Req\"uest\" \\u0041 "#,
            "\u{2028} \u{fffd}\\u0000 ID",
            "\"file\": \"jm \\\"quoted\\\" \\\\ \\t \u{e9}t\u{e9}.log\"",
            "\"file\": \"tm-\u{fffd}\u{fffd}-\u{fffd}(.log\"",
        ] {
            assert!(checkpoints.contains(escaped), "{escaped} not in {checkpoints}");
        }
        for (chunk, threads) in [(1, 1), (3, 2), (4_096, 8)] {
            let mut out = Vec::new();
            report.write_json_in(&mut out, chunk, threads).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), tree, "chunks of {chunk} events, {threads} threads");
        }
    }

    /// A stdout that fails after `0` bytes.
    struct FailAfter(usize);

    impl std::io::Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = buf.len().min(self.0);
            self.0 -= n;
            if n == 0 && !buf.is_empty() {
                return Err(std::io::Error::other("disk full"));
            }
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A write that fails in the middle of the checkpoints stops the writer threads and says so
    /// (none waits for a buffer that never comes back).
    #[test]
    fn a_failing_output_stops_the_writers() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flink-1.20.5/expired/logs");
        let mut files: Vec<PathBuf> = std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let report = scan_paths_streaming(&files, &Patterns::builtin(), 1 << 20).unwrap();
        let mut whole = Vec::new();
        report.write_json_in(&mut whole, 1, 2).unwrap();
        let text = String::from_utf8(whole).unwrap();
        let (from, to) =
            (text.find("\n  \"checkpoints\": [").unwrap(), text.find("\n  \"events\": {").unwrap());
        assert!(text[from..to].matches("\"outcome\"").count() > 3, "{text}");
        let at = (from + to) / 2;
        for threads in [1, 2, 5] {
            let err = report.write_json_in(FailAfter(at), 1, threads).unwrap_err();
            assert_eq!(err.to_string(), "disk full");
        }
    }

    fn replace_all(data: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len());
        let mut rest = data;
        while let Some(i) = memchr::memmem::find(rest, needle) {
            out.extend_from_slice(&rest[..i]);
            out.extend_from_slice(with);
            rest = &rest[i + needle.len()..];
        }
        out.extend_from_slice(rest);
        out
    }
}
