//! The JSON output of a scan, written one checkpoint at a time.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde_json::{Value, json};

use crate::time::log_time_utc_ms;

use super::aggregate::{CauseCounts, InternedCause, Timeline, TimelineEvent};
use super::report::ScanReport;

/// The JSON report, serialised with `checkpoints` streamed (keys in the sorted order of
/// `serde_json::Map`, so the text equals that of the `Value`).
struct JsonReport<'a>(&'a ScanReport);

impl serde::Serialize for JsonReport<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let report = self.0;
        let head = report.json_head();
        let timelines = report.aggregate.timelines();
        let mut keys: Vec<&str> =
            head.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default();
        keys.push("checkpoints");
        keys.sort_unstable();
        let mut map = serializer.serialize_map(Some(keys.len()))?;
        for key in keys {
            if key == "checkpoints" {
                map.serialize_entry(key, &Checkpoints(report, &timelines))?;
            } else {
                map.serialize_entry(key, &head[key])?;
            }
        }
        map.end()
    }
}

struct Checkpoints<'a>(&'a ScanReport, &'a [Timeline<'a>]);

impl serde::Serialize for Checkpoints<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.1.iter().map(|t| self.0.checkpoint_out(t)))
    }
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
    /// one checkpoint at a time instead of building the whole tree.
    pub fn write_json(&self, writer: impl io::Write) -> io::Result<()> {
        serde_json::to_writer_pretty(writer, &JsonReport(self)).map_err(io::Error::other)
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
