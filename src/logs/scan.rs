//! The offline analysis behind `checkpoint-sentinel scan-logs`: events per kind, a timeline per
//! checkpoint, the subtasks that held checkpoints up, and root causes, as text or JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::parse::{BUILTIN_KINDS, LineSplitter, Patterns, RecordParser, counts_root_cause};
use crate::observe::LogEvent;

/// Kinds that name a subtask holding a checkpoint up or failing it.
const BLOCKING_KINDS: &[&str] = &[
    "declined",
    "late_message",
    "async_snapshot_failed",
    "sync_snapshot_failed",
    "barrier_missing",
    "barrier_overtaken",
    "end_of_partition",
    "execution_delay",
];

/// One scanned file.
#[derive(Clone, Debug, Default)]
pub struct FileSummary {
    /// Its path.
    pub path: PathBuf,
    /// Bytes read.
    pub bytes: u64,
    /// Lines read.
    pub lines: u64,
    /// Lines cut at the line limit.
    pub oversize_lines: u64,
}

/// Everything a scan found.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// The files, in the order given.
    pub files: Vec<FileSummary>,
    /// Every event, in file order (files in the order given).
    pub events: Vec<LogEvent>,
}

/// Reads `paths` with the given line limit.
pub fn scan_paths(
    paths: &[PathBuf],
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
) -> io::Result<ScanReport> {
    let mut report = ScanReport::default();
    for path in paths {
        let file = std::fs::File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        scan_reader(path, file, patterns, max_line_bytes, &mut report)?;
    }
    Ok(report)
}

/// Reads one stream into `report`.
pub fn scan_reader(
    path: &Path,
    mut reader: impl Read,
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
    report: &mut ScanReport,
) -> io::Result<()> {
    let mut parser = RecordParser::new(patterns.clone());
    let mut splitter = LineSplitter::new(max_line_bytes, 0);
    let mut buf = vec![0u8; 1 << 20];
    let start = report.events.len();
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let events = &mut report.events;
        splitter.feed(&buf[..n], |line, offset| parser.push_line(line, offset, events));
    }
    let events = &mut report.events;
    splitter.finish(|line, offset| parser.push_line(line, offset, events));
    parser.flush(&mut report.events);
    let name = path.display().to_string();
    for e in &mut report.events[start..] {
        e.file.clone_from(&name);
    }
    report.files.push(FileSummary {
        path: path.to_path_buf(),
        bytes: splitter.offset(),
        lines: splitter.lines,
        oversize_lines: splitter.oversize,
    });
    Ok(())
}

/// How often a root-cause category was seen, and how often each (exception, message) of it.
type CauseCount = (u64, BTreeMap<(String, String), u64>);

/// A checkpoint and what the logs said about it.
#[derive(Debug)]
struct Timeline<'a> {
    job_id: String,
    id: u64,
    events: Vec<&'a LogEvent>,
}

impl Timeline<'_> {
    fn has(&self, kind: &str) -> bool {
        self.events.iter().any(|e| e.kind == kind)
    }

    fn outcome(&self) -> &'static str {
        if self.has("completed") {
            "completed"
        } else if self.has("expired") {
            "expired"
        } else if self.has("declined")
            || self.has("async_snapshot_failed")
            || self.has("sync_snapshot_failed")
        {
            "declined"
        } else if self.has("failed") || self.has("barrier_overtaken") || self.has("end_of_partition") {
            "failed"
        } else {
            "unknown"
        }
    }
}

/// A subtask that held checkpoints up.
#[derive(Debug, Default)]
struct Blocking {
    count: u64,
    kinds: BTreeSet<String>,
    checkpoints: BTreeSet<u64>,
    taskmanager: Option<String>,
}

/// Input channels whose barrier a task never received for a checkpoint that did not complete.
#[derive(Debug)]
struct MissingBarriers {
    task: String,
    checkpoint_id: u64,
    received: Vec<String>,
    missing: Vec<String>,
}

impl ScanReport {
    /// Events per kind: every built-in kind (zero or not) plus user kinds.
    pub fn kind_counts(&self) -> BTreeMap<String, u64> {
        let mut counts: BTreeMap<String, u64> = BUILTIN_KINDS.iter().map(|k| (k.to_string(), 0)).collect();
        for e in &self.events {
            *counts.entry(e.kind.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// Root causes by category, counted once per (checkpoint, category) as the daemon does,
    /// with the most frequent exception of each.
    fn root_causes(&self) -> BTreeMap<&'static str, CauseCount> {
        let mut out: BTreeMap<&'static str, CauseCount> = BTreeMap::new();
        let mut counted = BTreeSet::new();
        for e in &self.events {
            let Some(cause) = e.root_cause.as_ref().filter(|_| counts_root_cause(&e.kind)) else { continue };
            if let Some(id) = e.checkpoint_id
                && !counted.insert((id, cause.category))
            {
                continue;
            }
            let entry = out.entry(cause.category).or_default();
            entry.0 += 1;
            *entry.1.entry((cause.exception.clone(), cause.message.clone())).or_insert(0) += 1;
        }
        out
    }

    fn timelines(&self) -> Vec<Timeline<'_>> {
        // TaskManager lines name no job: they join the one job that has a checkpoint with that id.
        let mut jobs_of_id: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
        for e in &self.events {
            if let (Some(id), Some(job)) = (e.checkpoint_id, e.job_id.as_deref()) {
                jobs_of_id.entry(id).or_default().insert(job);
            }
        }
        let mut map: BTreeMap<(String, u64), Vec<&LogEvent>> = BTreeMap::new();
        for e in self.events.iter().filter(|e| e.kind != "barrier_received" && e.kind != "restored") {
            let Some(id) = e.checkpoint_id else { continue };
            let job = match e.job_id.as_deref() {
                Some(job) => job.to_string(),
                None => match jobs_of_id.get(&id) {
                    Some(jobs) if jobs.len() == 1 => {
                        jobs.iter().next().map(|j| j.to_string()).unwrap_or_default()
                    }
                    _ => String::new(),
                },
            };
            map.entry((job, id)).or_default().push(e);
        }
        map.into_iter().map(|((job_id, id), events)| Timeline { job_id, id, events }).collect()
    }

    fn blocking(&self) -> BTreeMap<(String, Option<u32>), Blocking> {
        let mut out: BTreeMap<(String, Option<u32>), Blocking> = BTreeMap::new();
        for e in self.events.iter().filter(|e| BLOCKING_KINDS.contains(&e.kind.as_str())) {
            let task = e.task.clone().unwrap_or_else(|| "?".to_string());
            let b = out.entry((task, e.subtask)).or_default();
            b.count += 1;
            b.kinds.insert(e.kind.clone());
            if let Some(id) = e.checkpoint_id {
                b.checkpoints.insert(id);
            }
            if e.taskmanager.is_some() {
                b.taskmanager.clone_from(&e.taskmanager);
            }
        }
        out
    }

    /// From DEBUG "Received barrier from channel" lines: for each checkpoint that did not
    /// complete, the channels of each task whose barrier never came (the channels a task has
    /// are those it received a barrier on for any checkpoint).
    fn missing_barriers(&self) -> Vec<MissingBarriers> {
        let completed: BTreeSet<u64> =
            self.events.iter().filter(|e| e.kind == "completed").filter_map(|e| e.checkpoint_id).collect();
        let mut channels: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut received: BTreeMap<(&str, u64), BTreeSet<&str>> = BTreeMap::new();
        for e in self.events.iter().filter(|e| e.kind == "barrier_received") {
            let (Some(task), Some(channel), Some(id)) =
                (e.task.as_deref(), e.detail.as_deref(), e.checkpoint_id)
            else {
                continue;
            };
            channels.entry(task).or_default().insert(channel);
            received.entry((task, id)).or_default().insert(channel);
        }
        let mut out = Vec::new();
        for ((task, id), got) in &received {
            if completed.contains(id) {
                continue;
            }
            let missing: Vec<String> = channels[task].difference(got).map(|c| c.to_string()).collect();
            if !missing.is_empty() {
                out.push(MissingBarriers {
                    task: task.to_string(),
                    checkpoint_id: *id,
                    received: got.iter().map(|c| c.to_string()).collect(),
                    missing,
                });
            }
        }
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let files: Vec<Value> = self
            .files
            .iter()
            .map(|f| json!({"path": f.path.display().to_string(), "bytes": f.bytes, "lines": f.lines, "oversize_lines": f.oversize_lines}))
            .collect();
        let root_causes: BTreeMap<&str, u64> =
            self.root_causes().iter().map(|(k, (n, _))| (*k, *n)).collect();
        let examples: Vec<Value> = self
            .root_causes()
            .into_iter()
            .flat_map(|(category, (_, ex))| {
                ex.into_iter().map(move |((exception, message), count)| {
                    json!({"category": category, "exception": exception, "message": message, "count": count})
                })
            })
            .collect();
        let checkpoints: Vec<Value> = self
            .timelines()
            .iter()
            .map(|t| {
                let events: Vec<Value> = t.events.iter().map(|e| event_json(e)).collect();
                let duration = t.events.iter().find(|e| e.kind == "completed").and_then(|e| e.duration_ms);
                json!({"job_id": t.job_id, "id": t.id, "outcome": t.outcome(), "duration_ms": duration, "events": events})
            })
            .collect();
        let blocking: Vec<Value> = self
            .blocking()
            .into_iter()
            .map(|((task, subtask), b)| {
                json!({"task": task, "subtask": subtask, "taskmanager": b.taskmanager, "count": b.count,
                       "kinds": b.kinds, "checkpoints": b.checkpoints})
            })
            .collect();
        let missing: Vec<Value> = self
            .missing_barriers()
            .into_iter()
            .map(|m| json!({"task": m.task, "checkpoint_id": m.checkpoint_id, "received": m.received, "missing": m.missing}))
            .collect();
        json!({
            "files": files,
            "lines": self.files.iter().map(|f| f.lines).sum::<u64>(),
            "bytes": self.files.iter().map(|f| f.bytes).sum::<u64>(),
            "events": self.kind_counts(),
            "root_causes": root_causes,
            "root_cause_examples": examples,
            "checkpoints": checkpoints,
            "blocking_subtasks": blocking,
            "missing_barriers": missing,
        })
    }

    /// The report as text for a terminal.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let lines: u64 = self.files.iter().map(|f| f.lines).sum();
        let bytes: u64 = self.files.iter().map(|f| f.bytes).sum();
        let _ = writeln!(out, "Scanned {} file(s), {lines} lines, {bytes} bytes.", self.files.len());
        let oversize: u64 = self.files.iter().map(|f| f.oversize_lines).sum();
        if oversize > 0 {
            let _ = writeln!(out, "{oversize} line(s) longer than the line limit were cut.");
        }
        let _ = writeln!(out, "\nEvents by kind:");
        for (kind, n) in self.kind_counts().iter().filter(|(_, n)| **n > 0) {
            let _ = writeln!(out, "  {kind:<24} {n:>7}");
        }

        let timelines = self.timelines();
        let unfinished: Vec<&Timeline> = timelines.iter().filter(|t| t.outcome() != "completed").collect();
        let completed = timelines.len() - unfinished.len();
        let _ = writeln!(
            out,
            "\nCheckpoints: {} seen, {completed} completed, {} did not complete.",
            timelines.len(),
            unfinished.len()
        );
        for t in &unfinished {
            let job = if t.job_id.is_empty() { "?" } else { t.job_id.as_str() };
            let _ = writeln!(out, "  checkpoint {} of job {job}: {}", t.id, t.outcome());
            for e in &t.events {
                let mut who = String::new();
                if let Some(task) = &e.task {
                    let _ = write!(who, " task {task}");
                }
                if let Some(s) = e.subtask {
                    let _ = write!(who, " subtask {s}");
                }
                if let Some(tm) = &e.taskmanager {
                    let _ = write!(who, " at {tm}");
                }
                let why = e.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                let at = e.logged_at.as_deref().unwrap_or("?");
                let _ = writeln!(out, "    {at}  {:<22}{who}{why}", e.kind);
            }
        }

        let blocking = self.blocking();
        if !blocking.is_empty() {
            let _ = writeln!(out, "\nSubtasks that held checkpoints up or failed them:");
            let mut rows: Vec<_> = blocking.into_iter().collect();
            rows.sort_by_key(|(_, b)| std::cmp::Reverse(b.count));
            for ((task, subtask), b) in rows {
                let subtask = subtask.map_or("?".to_string(), |s| s.to_string());
                let ids: Vec<String> = b.checkpoints.iter().take(12).map(u64::to_string).collect();
                let more = if b.checkpoints.len() > 12 { ", …" } else { "" };
                let kinds: Vec<&str> = b.kinds.iter().map(String::as_str).collect();
                let tm = b.taskmanager.map(|t| format!(" on {t}")).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {task} subtask {subtask}{tm}: {} event(s) ({}), checkpoints {}{more}",
                    b.count,
                    kinds.join(", "),
                    ids.join(", ")
                );
            }
        }
        let missing = self.missing_barriers();
        if !missing.is_empty() {
            let _ = writeln!(out, "\nBarriers that never arrived (from DEBUG barrier lines):");
            for m in missing {
                let _ = writeln!(
                    out,
                    "  checkpoint {}: {} is missing {}",
                    m.checkpoint_id,
                    m.task,
                    m.missing.join(", ")
                );
            }
        }
        let causes = self.root_causes();
        if !causes.is_empty() {
            let _ = writeln!(out, "\nRoot causes (deepest \"Caused by:\", once per checkpoint):");
            for (category, (n, examples)) in causes {
                let _ = writeln!(out, "  {category:<18} {n:>5}");
                if let Some(((exception, message), _)) = examples.into_iter().max_by_key(|(_, c)| *c) {
                    let _ = writeln!(out, "      e.g. {exception}: {message}");
                }
            }
        }
        out
    }
}

fn event_json(e: &LogEvent) -> Value {
    json!({
        "kind": e.kind,
        "at": e.logged_at,
        "task": e.task,
        "subtask": e.subtask,
        "taskmanager": e.taskmanager,
        "duration_ms": e.duration_ms,
        "consecutive_failures": e.consecutive_failures,
        "reason": e.reason,
        "root_cause": e.root_cause.as_ref().map(|c| json!({"category": c.category, "exception": c.exception, "message": c.message})),
        "file": Path::new(&e.file).file_name().map(|n| n.to_string_lossy().into_owned()),
    })
}
