//! The text output of a scan, for a terminal.

use std::fmt::Write as _;

use super::aggregate::{MAX_TIMELINE_EVENTS, Timeline};
use super::report::ScanReport;

// Writing to a `String` cannot fail: the `fmt::Result`s below are ignored.
impl ScanReport {
    /// The report as text for a terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        self.write_files(&mut out);
        // The answer first: what failed and why, where, what to do; then the evidence.
        self.write_headlines(&mut out);
        self.write_blocking(&mut out);
        self.write_root_causes(&mut out);
        self.write_alignment(&mut out);
        self.write_missing_barriers(&mut out);
        let _ = writeln!(out, "\nDetails:");
        self.write_kind_counts(&mut out);
        self.write_checkpoints(&mut out);
        out
    }

    /// What was read: files, lines, bytes, files that are not Flink logs, lines cut.
    fn write_files(&self, out: &mut String) {
        let lines: u64 = self.files.iter().map(|f| f.lines).sum();
        let bytes: u64 = self.files.iter().map(|f| f.bytes).sum();
        let _ = writeln!(out, "Scanned {} file(s), {lines} lines, {bytes} bytes.", self.files.len());
        for f in self.not_flink_logs() {
            let _ = writeln!(
                out,
                "{} is not a Flink log: none of its {} line(s) starts with a log4j timestamp \
                 (yyyy-MM-dd HH:mm:ss,SSS, Flink's default layout).",
                f.path.display(),
                f.lines
            );
        }
        let oversize: u64 = self.files.iter().map(|f| f.oversize_lines).sum();
        if oversize > 0 {
            let _ = writeln!(out, "{oversize} line(s) longer than the line limit were cut.");
        }
    }

    /// Events per kind, the kinds seen only.
    fn write_kind_counts(&self, out: &mut String) {
        let counts: Vec<(String, u64)> = self.kind_counts().into_iter().filter(|(_, n)| *n > 0).collect();
        if counts.is_empty() {
            let _ = writeln!(out, "\nNo checkpoint events found.");
        } else {
            let _ = writeln!(out, "\nEvents by kind:");
        }
        for (kind, n) in &counts {
            let _ = writeln!(out, "  {kind:<24} {n:>7}");
        }
    }

    /// How many checkpoints were seen and completed, and the timeline of each one that did not
    /// complete.
    fn write_checkpoints(&self, out: &mut String) {
        let a = &self.aggregate;
        let timelines = a.timelines();
        let unfinished: Vec<&Timeline> = timelines.iter().filter(|t| t.outcome != "completed").collect();
        let completed = timelines.len() - unfinished.len();
        if !timelines.is_empty() {
            let _ = writeln!(
                out,
                "\nCheckpoints: {} seen, {completed} completed, {} did not complete.",
                timelines.len(),
                unfinished.len()
            );
        }
        if a.timeline_events_dropped > 0 {
            let _ = writeln!(
                out,
                "  ({} later checkpoint event(s) not kept: more than {MAX_TIMELINE_EVENTS}.)",
                a.timeline_events_dropped
            );
        }
        let names_subtasks = a.blocking.keys().any(|(_, s)| s.is_some())
            || unfinished.iter().any(|t| t.events.iter().any(|e| e.subtask.is_some()));
        if names_subtasks {
            let _ = writeln!(
                out,
                "Subtasks are numbered from 0 as in Flink's REST API (a log line's \"(1/n)\" is #0)."
            );
        }
        for t in &unfinished {
            self.write_timeline(out, t);
        }
    }

    /// One checkpoint that did not complete: its events and its root cause.
    fn write_timeline(&self, out: &mut String, t: &Timeline<'_>) {
        let a = &self.aggregate;
        let job = if t.job_id.is_empty() { "?" } else { t.job_id };
        let _ = writeln!(out, "  checkpoint {} of job {job}: {}", t.id, t.outcome);
        for e in &t.events {
            let who = who(a.str(e.task), e.subtask, a.str(e.taskmanager));
            let mut text = a.kind(e).to_string();
            if !who.is_empty() {
                let _ = write!(text, "{:pad$}  {who}", "", pad = 21usize.saturating_sub(text.len()));
            }
            if let Some(reason) = a.str(e.reason) {
                let _ = write!(text, ": {reason}");
            }
            let at = e.at.as_deref().unwrap_or("?");
            let _ = writeln!(out, "    {at}  {text}");
        }
        if t.outcome == "stopped" {
            let _ = writeln!(
                out,
                "    the job stopped: Flink aborts the checkpoint in progress when the job is canceled, stopped \
                 or fails over (not a root cause)"
            );
        }
        if let Some(c) = a.cause_of(t.id) {
            let _ = writeln!(
                out,
                "    root cause ({}): {}",
                c.category,
                exception_text(a.str(c.exception), a.str(c.message))
            );
        }
    }

    /// The subtasks that held checkpoints up or failed them, the most often first.
    fn write_blocking(&self, out: &mut String) {
        let a = &self.aggregate;
        let mut rows = self.blocking_rows();
        if rows.is_empty() {
            return;
        }
        let _ = writeln!(out, "\nSubtasks that held checkpoints up or failed them:");
        rows.sort_by_key(|(_, _, b)| std::cmp::Reverse(b.count));
        for (task, subtask, b) in rows {
            let ids: Vec<String> = b.checkpoints.iter().take(12).map(u64::to_string).collect();
            let more = if b.checkpoints.len() > 12 { ", …" } else { "" };
            let _ = writeln!(
                out,
                "  {}: {} event(s) ({}), checkpoint(s) {}{more}",
                match who(Some(task).filter(|t| *t != "?"), subtask, a.str(b.taskmanager)) {
                    w if w.starts_with("on ") => format!("a task the lines do not name, {w}"),
                    w => w,
                },
                b.count,
                self.kinds_of(b).join(", "),
                ids.join(", ")
            );
        }
    }

    /// Input channels whose barrier never came, from DEBUG barrier lines.
    fn write_missing_barriers(&self, out: &mut String) {
        let missing = self.aggregate.missing_barriers();
        if missing.is_empty() {
            return;
        }
        let _ = writeln!(out, "\nBarriers that never arrived (from DEBUG barrier lines):");
        for m in missing {
            let _ = writeln!(
                out,
                "  checkpoint {}: {} is missing {}",
                m.checkpoint_id,
                who(Some(m.task), m.subtask, None),
                m.missing.join(", ")
            );
        }
    }

    /// Root causes by category with the most frequent example of each, then the symptoms
    /// they explain.
    fn write_root_causes(&self, out: &mut String) {
        let a = &self.aggregate;
        let (causes, symptoms) = a.root_causes();
        if !causes.is_empty() {
            let _ = writeln!(out, "\nRoot causes (deepest \"Caused by:\", once per checkpoint):");
            for (category, (n, examples)) in &causes {
                let _ = writeln!(out, "  {category:<18} {n:>5}");
                let mut examples: Vec<(&str, &str, u64)> = examples
                    .iter()
                    .map(|((e, m), c)| (a.str(*e).unwrap_or_default(), a.str(*m).unwrap_or_default(), *c))
                    .collect();
                examples.sort_unstable();
                // The most frequent; of equals, the last in (exception, message) order.
                if let Some((exception, message, _)) = examples.into_iter().max_by_key(|x| x.2) {
                    let _ = writeln!(out, "      e.g. {}", exception_text(Some(exception), Some(message)));
                }
            }
        }
        if !symptoms.is_empty() && causes.is_empty() {
            let _ = writeln!(out, "\nCheckpoints that failed with no cause of their own:");
        } else if !symptoms.is_empty() {
            let _ = writeln!(out, "Symptoms of those causes (the same checkpoints; not counted as causes):");
            for (category, n) in &symptoms {
                let _ = writeln!(out, "  {category:<18} {n:>5}");
            }
        }
    }
}

/// `stateful-map #0 on 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126)`: a subtask numbered
/// from 0, as the REST API numbers it.
pub(super) fn who(task: Option<&str>, subtask: Option<u32>, taskmanager: Option<&str>) -> String {
    let mut out = match (task, subtask) {
        (Some(task), Some(s)) => format!("{task} #{s}"),
        (Some(task), None) => task.to_string(),
        (None, Some(s)) => format!("subtask #{s}"),
        (None, None) => String::new(),
    };
    if let Some(tm) = taskmanager {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("on ");
        out.push_str(tm);
    }
    out
}

/// `java.io.IOException: disk full`, or the part that is there.
pub(super) fn exception_text(exception: Option<&str>, message: Option<&str>) -> String {
    match (exception.filter(|e| !e.is_empty()), message.filter(|m| !m.is_empty())) {
        (Some(e), Some(m)) => format!("{e}: {m}"),
        (Some(e), None) => e.to_string(),
        (None, Some(m)) => m.to_string(),
        (None, None) => "no message".into(),
    }
}
