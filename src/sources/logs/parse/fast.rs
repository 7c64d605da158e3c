//! Hand-written parsers of the most frequent checkpoint lines: triggered, completed, expired,
//! failed (the first four patterns, anchored on distinct literal prefixes, so no earlier
//! pattern could have taken the line), and the DEBUG barrier and asynchronous-part lines when
//! their needle is the line's only one. Each is byte for byte the language of its regex in
//! `BUILTINS`; a line it does not decide goes to the regex. Capturing with a regex costs a
//! microsecond or so per line; these cost a few dozen nanoseconds.

use std::sync::LazyLock;

use memchr::memmem;

use super::fields::refine;
use super::{EventSeverity, blank, bounded};
use crate::observe::{LogEvent, LogKind};

/// `s` split after its leading ASCII digits (at least one).
fn digits(s: &str) -> Option<(&str, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    (n > 0).then(|| s.split_at(n))
}

/// A job id: 32 lowercase hex digits.
fn job(s: &str) -> Option<(&str, &str)> {
    let id = s.get(..32)?;
    id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)).then(|| (id, &s[32..]))
}

fn event(kind: LogKind, severity: EventSeverity, message: &str, id: &str, job: &str) -> LogEvent {
    let mut e = blank(kind, severity, message);
    e.checkpoint_id = id.parse().ok();
    e.job_id = Some(job.to_string());
    e
}

pub(super) fn recognise(message: &str) -> Option<LogEvent> {
    match message.as_bytes().first()? {
        b'T' => triggered(message),
        b'C' => completed(message).or_else(|| expired(message)),
        b'F' => failed(message),
        _ => None,
    }
}

/// `^Triggering checkpoint (?P<id>\d+) (?:\(type=(?P<detail>.*)\) )?@ (?P<at>\d+) for job
/// (?P<job>[0-9a-f]{32})\.?$`
fn triggered(message: &str) -> Option<LogEvent> {
    let rest = message.strip_prefix("Triggering checkpoint ")?;
    let (id, rest) = digits(rest)?;
    let rest = rest.strip_prefix(' ')?;
    // From the end: `@ <at> for job <job>` and an optional full stop.
    let body = rest.strip_suffix('.').unwrap_or(rest);
    let cut = body.len().checked_sub(32)?;
    let (head, job) = (body.get(..cut)?, body.get(cut..)?);
    self::job(job)?;
    let head = head.strip_suffix(" for job ")?;
    let at_digits = head.bytes().rev().take_while(u8::is_ascii_digit).count();
    if at_digits == 0 {
        return None;
    }
    let middle = head[..head.len() - at_digits].strip_suffix("@ ")?;
    let detail =
        if middle.is_empty() { None } else { Some(middle.strip_prefix("(type=")?.strip_suffix(") ")?) };
    let mut e = event(LogKind::Triggered, EventSeverity::Info, message, id, job);
    e.detail = detail.filter(|d| !d.is_empty()).map(bounded);
    Some(e)
}

/// `^Completed checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32}) \((?P<bytes>\d+) bytes
/// (?:, checkpointDuration=(?P<dur>\d+) ms(?:, finalizationTime=\d+ ms)?| in (?P<dur_old>\d+)
/// ms)\)\.?$`
fn completed(message: &str) -> Option<LogEvent> {
    let rest = message.strip_prefix("Completed checkpoint ")?;
    let (id, rest) = digits(rest)?;
    let (job, rest) = job(rest.strip_prefix(" for job ")?)?;
    let (bytes, rest) = digits(rest.strip_prefix(" (")?)?;
    let rest = rest.strip_prefix(" bytes")?;
    let (dur, rest) = if let Some(r) = rest.strip_prefix(", checkpointDuration=") {
        let (dur, r) = digits(r)?;
        let r = r.strip_prefix(" ms")?;
        let r = match r.strip_prefix(", finalizationTime=") {
            Some(f) => digits(f)?.1.strip_prefix(" ms")?,
            None => r,
        };
        (dur, r)
    } else {
        let (dur, r) = digits(rest.strip_prefix(" in ")?)?;
        (dur, r.strip_prefix(" ms")?)
    };
    let rest = rest.strip_prefix(')')?;
    if !(rest.is_empty() || rest == ".") {
        return None;
    }
    let mut e = event(LogKind::Completed, EventSeverity::Info, message, id, job);
    e.bytes = bytes.parse().ok();
    e.duration_ms = dur.parse().ok();
    Some(e)
}

/// `^Checkpoint (?P<id>\d+) of job (?P<job>[0-9a-f]{32}) expired before completing\.?$`
fn expired(message: &str) -> Option<LogEvent> {
    let rest = message.strip_prefix("Checkpoint ")?;
    let (id, rest) = digits(rest)?;
    let (job, rest) = job(rest.strip_prefix(" of job ")?)?;
    let rest = rest.strip_prefix(" expired before completing")?;
    if !(rest.is_empty() || rest == ".") {
        return None;
    }
    Some(event(LogKind::Expired, EventSeverity::Warning, message, id, job))
}

/// `^(?P<task>.+?)(?: \((?P<attempt>[0-9a-f_]+)\))?: Received barrier from channel
/// (?P<detail>.+) @ (?P<id>\d+)\.?$`, the DEBUG line a TaskManager writes per channel and
/// checkpoint. Only for a message whose one needle is this one (no earlier pattern can take
/// it). The lazy task ends at the first marker, the greedy detail at the last ` @ `; any
/// other shape goes to the regex.
pub(super) fn barrier_received(message: &str) -> Option<LogEvent> {
    const MARKER: &str = ": Received barrier from channel ";
    // Finders built once (`memmem::find` builds one per call: issue 42's profile).
    static FIND_MARKER: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(MARKER));
    static FIND_AT: LazyLock<memmem::FinderRev<'static>> = LazyLock::new(|| memmem::FinderRev::new(b" @ "));
    let k = FIND_MARKER.find(message.as_bytes())?;
    let (head, rest) = (&message[..k], &message[k + MARKER.len()..]);
    let body = rest.strip_suffix('.').unwrap_or(rest);
    let at = FIND_AT.rfind(body.as_bytes())?;
    let (detail, id) = (&body[..at], &body[at + 3..]);
    if detail.is_empty() || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A detail or task with a line break, or a non-ASCII digit anywhere: the regex decides.
    if message.contains('\n') || !message.is_ascii() {
        return None;
    }
    let (task, attempt) = match head.strip_suffix(')').and_then(|h| h.rsplit_once(" (")) {
        Some((task, attempt))
            if !task.is_empty()
                && !attempt.is_empty()
                && attempt.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b) || b == b'_') =>
        {
            (task, Some(attempt))
        }
        _ => (head, None),
    };
    if task.is_empty() {
        return None;
    }
    let mut e = blank(LogKind::BarrierReceived, EventSeverity::Info, message);
    e.checkpoint_id = id.parse().ok();
    e.task = Some(task.to_string());
    e.detail = Some(bounded(detail));
    if let Some(attempt) = attempt {
        let parts: Vec<&str> = attempt.split('_').collect();
        if parts.len() == 4 && parts[1].len() == 32 {
            // The task is named, so only the subtask comes from the attempt id (as `fill`).
            e.subtask = parts[2].parse().ok();
        }
    }
    refine(&mut e);
    Some(e)
}

/// What a hand-written parser says about a message.
pub(super) enum Parsed {
    /// The regex would give this event.
    Event(Box<LogEvent>),
    /// The regex would not match.
    NoMatch,
    /// A shape the parser does not decide: ask the regex.
    AskRegex,
}

/// `^(?P<task>.+) - asynchronous part of checkpoint (?P<id>\d+) could not be completed\.?$`.
/// Most lines with this needle are the DEBUG "started executing / finished asynchronous part
/// of checkpoint N" lines, which do not end as the regex requires: rejected without it.
pub(super) fn async_snapshot_failed(message: &str) -> Parsed {
    const MARKER: &str = " - asynchronous part of checkpoint ";
    let body = message.strip_suffix('.').unwrap_or(message);
    let Some(body) = body.strip_suffix(" could not be completed") else {
        // `$` is the end of the text, `\.?` one optional full stop: no other ending matches.
        return Parsed::NoMatch;
    };
    if message.contains('\n') || !message.is_ascii() {
        return Parsed::AskRegex; // Unicode digits, a line break in the task: the regex decides.
    }
    let digits = body.bytes().rev().take_while(u8::is_ascii_digit).count();
    let (head, id) = body.split_at(body.len() - digits);
    let Some(task) = head.strip_suffix(MARKER) else { return Parsed::AskRegex };
    if id.is_empty() || task.is_empty() {
        return Parsed::AskRegex;
    }
    let mut e = blank(LogKind::AsyncSnapshotFailed, EventSeverity::Warning, message);
    e.checkpoint_id = id.parse().ok();
    e.task = Some(task.to_string());
    refine(&mut e);
    Parsed::Event(Box::new(e))
}

/// `^Failed to trigger or complete checkpoint (?P<id>-?\d+|\S+) for job
/// (?P<job>[0-9a-f]{32})\. \((?P<n>\d+) consecutive failed attempts so far\)$`
fn failed(message: &str) -> Option<LogEvent> {
    let rest = message.strip_prefix("Failed to trigger or complete checkpoint ")?;
    let id_len = rest.find(char::is_whitespace)?;
    let (id, rest) = rest.split_at(id_len);
    if id.is_empty() {
        return None;
    }
    let (job, rest) = job(rest.strip_prefix(" for job ")?)?;
    let (n, rest) = digits(rest.strip_prefix(". (")?)?;
    if rest != " consecutive failed attempts so far)" {
        return None;
    }
    let mut e = event(LogKind::Failed, EventSeverity::Warning, message, id, job);
    e.consecutive_failures = n.parse::<u64>().ok().and_then(|n| u32::try_from(n).ok());
    Some(e)
}
