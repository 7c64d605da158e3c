//! Records: a timestamped line and the lines under it (its stack trace), turned into events
//! with their root cause, the operator the trace names, and the reason of a decline.

use std::borrow::Cow;
use std::sync::Arc;

use super::causes::{SERIALIZED, classify_text, exception_of};
use super::fields::split_task;
use super::lines::{is_record_start, split_header, text_of};
use super::patterns::{LineNeedles, Patterns};
use super::{MAX_STACK_LINES, bounded, push_bounded};
use crate::observe::{LogEvent, LogKind, RootCause};

/// The operator a stack trace names: `… for operator stateful-map (1/2)#0.` (Flink's
/// "Could not materialize checkpoint", "Could not perform checkpoint", "Could not complete
/// snapshot" messages) → (`stateful-map`, 0-based subtask 0).
pub(super) fn operator_in(line: &str) -> Option<(String, u32)> {
    static FOR_OPERATOR: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b" for operator "));
    let at = FOR_OPERATOR.find(line.as_bytes())?;
    let rest = line[at + " for operator ".len()..].trim_end().trim_end_matches('.');
    let end = rest.rfind(')')?;
    let candidate = match rest[end + 1..].strip_prefix('#') {
        Some(n) if n.bytes().all(|b| b.is_ascii_digit()) => rest,
        _ => &rest[..=end],
    };
    match split_task(candidate) {
        (name, Some(subtask)) => Some((name.to_string(), subtask)),
        _ => None,
    }
}

/// A vertex id as Flink 1.15+ puts it in an attempt id: 32 hex digits.
pub(super) fn is_vertex_id(task: &str) -> bool {
    task.len() == 32 && task.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether a stack frame (`at flinklab.Job$Map.snapshotState(Job.java:237)`) is in the job's
/// own code rather than in Flink, the JDK or a client library.
pub(super) fn is_user_frame(frame: &str) -> bool {
    const LIBRARIES: &[&str] = &[
        "java.",
        "javax.",
        "jdk.",
        "sun.",
        "com.sun.",
        "org.apache.flink.",
        "scala.",
        "akka.",
        "org.apache.pekko.",
        "org.apache.hadoop.",
        "com.amazonaws.",
        "software.amazon.",
        "io.netty.",
        "org.rocksdb.",
        "com.esotericsoftware.",
        "com.google.",
        "org.slf4j.",
        "org.apache.logging.",
    ];
    let Some(target) = frame.trim_start().strip_prefix("at ") else { return false };
    // `java.base/java.lang.Thread.run` names the module first.
    let target = target.split_once('/').filter(|(m, _)| !m.contains('(')).map_or(target, |(_, t)| t);
    !target.is_empty() && !LIBRARIES.iter().any(|l| target.starts_with(l))
}

/// A record being assembled.
struct Pending {
    /// Offset of its first byte in the file.
    start: u64,
    /// The events its first line (and first exception line) stand for; empty if none.
    events: Vec<LogEvent>,
    /// The line's timestamp (`2026-11-29 15:04:08,723`: 23 ASCII bytes, checked by
    /// [`is_record_start`]), kept for every record: an event found on its first continuation
    /// line (`tolerable_exceeded` under a line that matched nothing) has it too.
    stamp: [u8; 23],
    /// Continuation lines seen so far.
    continuation: usize,
    /// Stack lines seen (bounded by [`MAX_STACK_LINES`]), each bounded and followed by `\n`:
    /// one buffer, searched at once for the root cause, and split into the events' stacks only
    /// when the parser keeps them.
    stack: String,
    stack_lines: usize,
    /// The first exception line (the thrown exception).
    first_exception: Option<String>,
    /// The deepest `Caused by:` so far.
    deepest: Option<String>,
    /// The first frame under the deepest exception line so far (where it was thrown).
    deepest_frame: Option<String>,
    /// The exception and `Caused by:` lines, in order (bounded): a `SerializedThrowable` whose
    /// message names no class is unwrapped with the line above it.
    exceptions: Vec<String>,
    /// The operator the trace names ("… for operator stateful-map (1/2)#0").
    operator: Option<(String, u32)>,
}

/// Turns lines into events, one record at a time. Feed complete lines in file order.
pub struct RecordParser {
    patterns: Arc<Patterns>,
    pending: Option<Pending>,
    /// Whether events carry their stack lines (the tailer: yes; an aggregating scan: no).
    keep_stack: bool,
    /// The stack buffer of the last record, reused.
    spare: String,
}

impl RecordParser {
    /// A parser with these patterns.
    pub fn new(patterns: Arc<Patterns>) -> Self {
        RecordParser { patterns, pending: None, keep_stack: true, spare: String::new() }
    }

    /// The patterns it recognises lines with.
    pub(crate) fn patterns(&self) -> &Arc<Patterns> {
        &self.patterns
    }

    /// Whether events carry their stack lines ([`LogEvent::stack`]); on by default. The root
    /// cause is classified either way.
    pub(crate) fn keep_stack(mut self, keep: bool) -> Self {
        self.keep_stack = keep;
        self
    }

    /// Takes one line (no newline) that starts at byte `offset`; pushes the events of the record
    /// it finishes, if any, to `out`.
    pub fn push_line(&mut self, line: &[u8], offset: u64, out: &mut Vec<LogEvent>) {
        self.push(line, offset, None, LineNeedles::Unknown, out);
    }

    /// As [`push_line`](Self::push_line), for a caller that already searched the line for the
    /// needles (`has_needle`), so the per-line prefilter is skipped.
    pub(crate) fn push_searched_line(
        &mut self,
        line: &[u8],
        offset: u64,
        has_needle: bool,
        out: &mut Vec<LogEvent>,
    ) {
        self.push(line, offset, Some(has_needle), LineNeedles::Unknown, out);
    }

    /// As [`push_searched_line`](Self::push_searched_line) with the needles the buffer search
    /// found in the line (`Found` only when those are all of them), so the recogniser skips its
    /// own search.
    pub(crate) fn push_line_with_needles(
        &mut self,
        line: &[u8],
        offset: u64,
        has_needle: bool,
        needles: LineNeedles,
        out: &mut Vec<LogEvent>,
    ) {
        self.push(line, offset, Some(has_needle), needles, out);
    }

    fn push(
        &mut self,
        line: &[u8],
        offset: u64,
        has_needle: Option<bool>,
        needles: LineNeedles,
        out: &mut Vec<LogEvent>,
    ) {
        if is_record_start(line) {
            self.flush(out);
            let mut stamp = [0u8; 23];
            stamp.copy_from_slice(&line[..23]);
            let might_match = self.patterns.has_user_patterns()
                || has_needle.unwrap_or_else(|| self.patterns.might_match(line));
            let events: Vec<LogEvent> = if might_match {
                let text = text_of(line);
                let Some(header) = split_header(&text) else { return };
                // The needles count if they are in the message, not in the header before it.
                let message_at = header.message.as_ptr() as usize - text.as_ptr() as usize;
                let known = match (needles, &text) {
                    (LineNeedles::Found { mask, first }, Cow::Borrowed(_))
                        if first as usize >= message_at =>
                    {
                        Some(mask)
                    }
                    _ => None,
                };
                self.patterns.recognise_with(header.message, known).into_iter().collect()
            } else {
                // Most lines: no needle, no user pattern. Remember only where the record starts.
                Vec::new()
            };
            self.pending = Some(Pending {
                start: offset,
                events,
                stamp,
                continuation: 0,
                stack: std::mem::take(&mut self.spare),
                stack_lines: 0,
                first_exception: None,
                deepest: None,
                deepest_frame: None,
                exceptions: Vec::new(),
                operator: None,
            });
            return;
        }
        let Some(pending) = &mut self.pending else {
            return; // Continuation of a record that started before we began reading.
        };
        pending.continuation += 1;
        if pending.events.is_empty() && pending.continuation > 1 {
            return; // The stack trace of a record nobody asked for: skip cheaply.
        }
        let line = text_of(line);
        let trimmed = line.trim_start();
        if pending.continuation == 1 {
            if let Some(event) = self.patterns.exception_event(trimmed) {
                pending.events.push(event);
            }
            if pending.events.is_empty() {
                return;
            }
        }
        let is_frame = trimmed.starts_with("at ") || trimmed.starts_with("... ");
        if !is_frame {
            if trimmed.starts_with("Caused by: ") {
                pending.deepest = Some(trimmed.to_string());
                pending.deepest_frame = None;
            } else if pending.first_exception.is_none() {
                pending.first_exception = Some(trimmed.to_string());
            }
            if pending.exceptions.len() < MAX_STACK_LINES {
                pending.exceptions.push(bounded(trimmed));
            }
            if pending.operator.is_none() {
                pending.operator = operator_in(trimmed);
            }
        } else if pending.deepest_frame.is_none() && trimmed.starts_with("at ") {
            pending.deepest_frame = Some(bounded(trimmed));
        }
        if pending.stack_lines < MAX_STACK_LINES {
            pending.stack_lines += 1;
            push_bounded(&mut pending.stack, line.trim_end());
            pending.stack.push('\n');
        }
    }

    /// Finishes the record in progress (at a new record, at the end of a file, or when the
    /// file has been idle long enough that no stack trace is coming).
    pub fn flush(&mut self, out: &mut Vec<LogEvent>) {
        let Some(mut pending) = self.pending.take() else { return };
        if pending.events.is_empty() {
            pending.stack.clear();
            self.spare = pending.stack;
            return;
        }
        let cause_line = pending.deepest.as_ref().or(pending.first_exception.as_ref());
        let root_cause = cause_line.map(|line| {
            let (mut exception, message) = exception_of(line);
            // Java prints a throwable without a message as `Class: null` in some paths.
            let message = if message == "null" { String::new() } else { message };
            if exception == SERIALIZED {
                // Flink 1.13/1.14 print the remote exception as `SerializedThrowable: <message>`
                // under the line that names its class: `SerializedThrowable: java.io.IOException:
                // <message>`.
                if let Some(class) = pending.exceptions.iter().rev().skip(1).find_map(|l| {
                    let (class, m) = exception_of(l);
                    (m == message && class != SERIALIZED && !class.is_empty()).then_some(class)
                }) {
                    exception = class;
                }
            }
            let mut category = classify_text(&exception, &message, &pending.stack);
            if category == "other" && pending.deepest_frame.as_deref().is_some_and(is_user_frame) {
                category = "user_code";
            }
            RootCause { category, exception, message: bounded(&message) }
        });
        let operator = pending.operator;
        let first = pending.first_exception.as_deref().map(exception_of);
        let last = pending.events.len().saturating_sub(1);
        // 23 ASCII bytes (digits, `-`, ` `/`T`, `:`, `,`/`.`), checked by `is_record_start`.
        let mut logged_at = String::from_utf8_lossy(&pending.stamp).into_owned();
        let mut stack: Vec<String> =
            if self.keep_stack { pending.stack.lines().map(str::to_string).collect() } else { Vec::new() };
        pending.stack.clear();
        self.spare = std::mem::take(&mut pending.stack);
        for (i, mut event) in pending.events.into_iter().enumerate() {
            // The last event takes the text, the others get copies (usually there is one).
            event.logged_at =
                Some(if i == last { std::mem::take(&mut logged_at) } else { logged_at.clone() });
            if event.reason.is_none()
                && matches!(event.kind, LogKind::Declined | LogKind::Failed | LogKind::AsyncSnapshotFailed)
            {
                event.reason = first
                    .as_ref()
                    .map(|(_, message)| bounded(message))
                    .filter(|m| !m.is_empty() && m != "null");
            }
            event.root_cause.clone_from(&root_cause);
            // A JobManager line names the task by an attempt id (plain hex up to 1.14, with the
            // vertex id from 1.15); the trace it carries names the operator and the subtask.
            if let Some((name, subtask)) = &operator
                && matches!(event.kind, LogKind::Declined | LogKind::LateMessage)
                && event.task.as_deref().is_none_or(is_vertex_id)
            {
                if let Some(vertex) = event.task.take() {
                    event.detail.get_or_insert_with(|| format!("vertex {vertex}"));
                }
                event.task = Some(name.clone());
                event.subtask = Some(*subtask);
            }
            event.stack = if i == last { std::mem::take(&mut stack) } else { stack.clone() };
            out.push(event);
        }
    }

    /// Where the unfinished record starts: every byte before it has been turned into events.
    pub(crate) fn pending_start(&self) -> Option<u64> {
        self.pending.as_ref().map(|p| p.start)
    }

    /// Whether a record is waiting for more lines.
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether the record in progress produced events, so its continuation lines (stack trace)
    /// matter; lines of other records need to be pushed only if they carry a needle.
    pub(crate) fn wants_continuation(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| !p.events.is_empty())
    }
}
