//! Pure recognition of Flink log lines, split by job: the checkpoint patterns and the
//! needle prefilter ([`patterns`], the hand-written parsers of the frequent lines in `fast`),
//! records and stack traces ([`records`]), root-cause classification ([`causes`]), and lines in
//! Flink's log4j layout with the bounded line splitter ([`lines`]). No I/O and no clock: bytes
//! in, `LogEvent`s out.
//!
//! A *record* is a line that starts with a log4j timestamp plus the lines after it that do
//! not (the exception line, `at …`, `Caused by: …`, `... N more`). A record is finished when
//! the next timestamped line arrives or the caller flushes it, so the caller can persist "the
//! start of the unfinished record" as its read position and never emit a record twice.

pub(crate) mod causes;
mod fast;
mod fields;
pub(crate) mod lines;
pub(crate) mod patterns;
pub(crate) mod records;
#[cfg(test)]
mod tests;

pub use causes::{SYMPTOM_CATEGORIES, classify, classify_text, exception_of};
pub use fields::{split_task, subtask_of};
pub use lines::{Header, LineSplitter, is_record_start, split_header};
pub use patterns::{BUILTIN_KINDS, LineNeedles, Patterns, UserPattern, line_needles};
pub use records::RecordParser;

use crate::observe::{EventSeverity, LogEvent, LogKind};

/// Stack lines kept per event (the root cause is found in all of them).
pub(crate) const MAX_STACK_LINES: usize = 40;
/// Characters kept of a message or stack line.
const MAX_TEXT: usize = 512;

/// The phrase of the job failure that checkpoints cause; it appears in an exception line, not
/// in a log message of its own.
const TOLERABLE: &str = "Exceeded checkpoint tolerable failure threshold";
/// Pekko's (and Akka's) message when remoting drops a message over the frame size; it appears
/// in the exception line under "Transient association error (association remains live)".
const OVERSIZED: &str = "Discarding oversized payload";

fn blank(kind: LogKind, severity: EventSeverity, message: &str) -> LogEvent {
    LogEvent::new(kind, severity, bounded(message))
}

/// Appends [`bounded`]`(text)` to `out` without a `String` of its own.
fn push_bounded(out: &mut String, text: &str) {
    if text.len() <= MAX_TEXT {
        out.push_str(text);
        return;
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.push_str(&text[..end]);
    out.push('…');
}

fn bounded(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_string();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
/// Parses a whole buffer (tests and small inputs).
pub(crate) fn parse_all(patterns: &std::sync::Arc<Patterns>, bytes: &[u8]) -> Vec<LogEvent> {
    let mut parser = RecordParser::new(patterns.clone());
    let mut splitter = LineSplitter::new(1 << 20, 0);
    let mut out = Vec::new();
    splitter.feed(bytes, |line, offset| parser.push_line(line, offset, &mut out));
    splitter.finish(|line, offset| parser.push_line(line, offset, &mut out));
    parser.flush(&mut out);
    out
}
