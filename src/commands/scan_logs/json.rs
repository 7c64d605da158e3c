//! The JSON output of a scan, written one checkpoint at a time.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde_json::{Value, json};

use crate::time::log_time_utc_ms;

use super::aggregate::{CauseCounts, InternedCause, Timeline, TimelineEvent};
use super::report::ScanReport;

/// Checkpoints written per batch: a batch is cut among the threads, each writes its part to
/// memory, and the parts go out in order (the memory of one batch's text, a few MB at most).
const BATCH: usize = 4_096;

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
    /// the checkpoints in batches instead of the whole tree, each batch written by one thread
    /// per core (issue 42: written on one thread after the scan, the JSON report's checkpoints
    /// were most of what it cost over the text report).
    pub fn write_json(&self, writer: impl io::Write) -> io::Result<()> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        self.write_json_in(writer, BATCH, threads)
    }

    /// [`write_json`](Self::write_json) with `batch` checkpoints a batch cut among `threads`.
    fn write_json_in(&self, mut out: impl io::Write, batch: usize, threads: usize) -> io::Result<()> {
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
                self.write_checkpoints_json(&mut out, batch.max(1), threads.max(1))?;
            } else {
                write_at_depth(&mut out, &serde_json::to_vec_pretty(&head[*key]).map_err(to_io)?, 1)?;
            }
        }
        out.write_all(b"\n}")
    }

    /// The `checkpoints` array at depth 1, a batch at a time, each batch's parts written to
    /// memory in parallel.
    fn write_checkpoints_json(
        &self,
        out: &mut impl io::Write,
        batch: usize,
        threads: usize,
    ) -> io::Result<()> {
        let timelines = self.aggregate.timelines();
        if timelines.is_empty() {
            return out.write_all(b"[]");
        }
        out.write_all(b"[")?;
        for (b, checkpoints) in timelines.chunks(batch).enumerate() {
            let per_thread = checkpoints.len().div_ceil(threads);
            let parts: Vec<io::Result<Vec<u8>>> = std::thread::scope(|scope| {
                let handles: Vec<_> = checkpoints
                    .chunks(per_thread)
                    .enumerate()
                    .map(|(p, part)| scope.spawn(move || self.checkpoints_text(part, b == 0 && p == 0)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| Err(io::Error::other("a JSON writer thread panicked")))
                    })
                    .collect()
            });
            for part in parts {
                out.write_all(&part?)?;
            }
        }
        out.write_all(b"\n  ]")
    }

    /// `part`'s checkpoints as they stand in the array: each on a line of its own at depth 2,
    /// after a comma unless it is the report's `first`.
    fn checkpoints_text(&self, part: &[Timeline<'_>], first: bool) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(part.len() * 1_024);
        let mut one = Vec::with_capacity(4_096);
        for (i, t) in part.iter().enumerate() {
            out.extend_from_slice(if first && i == 0 { b"\n    " } else { b",\n    " });
            one.clear();
            serde_json::to_writer_pretty(&mut one, &self.checkpoint_out(t)).map_err(to_io)?;
            write_at_depth(&mut out, &one, 2)?;
        }
        Ok(out)
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

    /// Every captured log's report, written in batches of any size cut among any number of
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
        for (batch, threads) in [(1, 1), (1, 3), (2, 2), (3, 7), (5, 1), (4_096, 2)] {
            let mut out = Vec::new();
            report.write_json_in(&mut out, batch, threads).unwrap();
            assert_eq!(String::from_utf8(out).unwrap(), tree, "batch {batch}, {threads} threads");
        }
        let empty = scan_paths_streaming(&[], &Patterns::builtin(), 1 << 20).unwrap();
        let mut out = Vec::new();
        empty.write_json_in(&mut out, 2, 2).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{:#}", empty.to_json()));
    }
}
