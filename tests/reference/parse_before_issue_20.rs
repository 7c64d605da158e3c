//! The log matcher as it was before issue 20 (src/logs/parse.rs at ea44093^, its unit tests
//! left out), kept as the reference `tests/matcher_reference.rs` compares the current one with:
//! every line through the per-line prefilter and the regexes (hand-written parsers only for
//! triggered/completed/expired/failed), stack lines kept as strings, root causes found needle
//! by needle. Do not optimise this file; it is the yardstick.
#![allow(dead_code, clippy::all)]

// Pure recognition of Flink log lines: line splitting, checkpoint patterns, stack-trace
// grouping and root-cause classification. No I/O and no clock: bytes in, `LogEvent`s out.
//
// A *record* is a line that starts with a log4j timestamp plus the lines after it that do
// not (the exception line, `at …`, `Caused by: …`, `... N more`). A record is finished when
// the next timestamped line arrives or the caller flushes it, so the caller can persist "the
// start of the unfinished record" as its read position and never emit a record twice.

use std::borrow::Cow;
use std::sync::Arc;

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex};

use checkpoint_sentinel::observe::{EventSeverity as Severity, LogEvent, RootCause};

/// Stack lines kept per event (the root cause is found in all of them).
pub(super) const MAX_STACK_LINES: usize = 40;
/// Characters kept of a message or stack line.
const MAX_TEXT: usize = 512;

/// The phrase of the job failure that checkpoints cause; it appears in an exception line, not
/// in a log message of its own.
const TOLERABLE: &str = "Exceeded checkpoint tolerable failure threshold";

/// Every built-in kind, in the order reports list them.
pub(super) const BUILTIN_KINDS: &[&str] = &[
    "triggered",
    "completed",
    "expired",
    "declined",
    "failed",
    "trigger_failed",
    "tolerable_exceeded",
    "late_message",
    "barrier_overtaken",
    "end_of_partition",
    "execution_delay",
    "async_snapshot_failed",
    "sync_snapshot_failed",
    "restored",
    "barrier_received",
    "barrier_missing",
];

/// A user pattern from the config (`[[logs.patterns]]`), already validated.
#[derive(Clone, Debug)]
pub(super) struct UserPattern {
    /// Its name (for messages).
    pub name: String,
    /// Matched against the message part of timestamped lines.
    pub regex: Regex,
    /// The event kind it produces.
    pub kind: String,
    /// Its severity.
    pub severity: Severity,
}

struct Builtin {
    kind: &'static str,
    severity: Severity,
    regex: Regex,
}

/// The compiled pattern set: built-in Flink patterns behind a literal prefilter, plus user
/// patterns. Shared (`Arc`) by every file a tailer follows.
pub(super) struct Patterns {
    builtins: Vec<Builtin>,
    /// Needle index → indexes into `builtins` that need it.
    needle_targets: Vec<Vec<usize>>,
    prefilter: AhoCorasick,
    /// The same needles searched over whole buffers (many lines at once), leftmost-first: a
    /// SIMD multi-literal search, several GB/s on lines that match nothing, where the per-line
    /// automaton pays a call per line.
    buffer_prefilter: BufferSearch,
    user: Vec<UserPattern>,
}

/// The whole-buffer needle search: SIMD Teddy where the CPU has it (several GB/s on lines that
/// match nothing, no automaton to confirm a literal), else a literal regex alternation.
enum BufferSearch {
    Packed(aho_corasick::packed::Searcher),
    Regex(regex::bytes::Regex),
}

/// (needle, kind, severity, regex over the message). A line reaches a regex only if it
/// contains the needle, so lines that match nothing cost one multi-literal scan.
const BUILTINS: &[(&str, &str, Severity, &str)] = &[
    (
        "Triggering checkpoint ",
        "triggered",
        Severity::Info,
        r"^Triggering checkpoint (?P<id>\d+) (?:\(type=(?P<detail>.*)\) )?@ (?P<at>\d+) for job (?P<job>[0-9a-f]{32})\.?$",
    ),
    (
        "Completed checkpoint ",
        "completed",
        Severity::Info,
        r"^Completed checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32}) \((?P<bytes>\d+) bytes(?:, checkpointDuration=(?P<dur>\d+) ms(?:, finalizationTime=\d+ ms)?| in (?P<dur_old>\d+) ms)\)\.?$",
    ),
    (
        "expired before completing",
        "expired",
        Severity::Warning,
        r"^Checkpoint (?P<id>\d+) of job (?P<job>[0-9a-f]{32}) expired before completing\.?$",
    ),
    (
        "Decline checkpoint ",
        "declined",
        Severity::Warning,
        r"^Decline checkpoint (?P<id>\d+) by task (?P<attempt>\S+) of job (?P<job>[0-9a-f]{32})(?: at (?P<tm>.+?))?\.?$",
    ),
    (
        "Failed to trigger or complete checkpoint",
        "failed",
        Severity::Warning,
        r"^Failed to trigger or complete checkpoint (?P<id>-?\d+|\S+) for job (?P<job>[0-9a-f]{32})\. \((?P<n>\d+) consecutive failed attempts so far\)$",
    ),
    (
        "Failed to trigger checkpoint for job",
        "trigger_failed",
        Severity::Warning,
        r"^Failed to trigger checkpoint for job (?P<job>[0-9a-f]{32}) since (?P<reason>.*)$",
    ),
    (
        "Triggering Checkpoint ",
        "trigger_failed",
        Severity::Warning,
        r"^Triggering Checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32}) failed due to (?P<reason>.*)$",
    ),
    (
        "Received late message for now expired",
        "late_message",
        Severity::Warning,
        r"^Received late message for now expired checkpoint attempt (?P<id>\d+) from task (?P<attempt>\S+) of job (?P<job>[0-9a-f]{32})(?: at (?P<tm>.+?))?\.?$",
    ),
    (
        "before completing current checkpoint",
        "barrier_overtaken",
        Severity::Warning,
        r"^(?P<task>.+): Received checkpoint barrier for checkpoint (?P<detail>\d+) before completing current checkpoint (?P<id>\d+)\. Skipping current checkpoint\.?$",
    ),
    (
        "before completing current checkpoint",
        "end_of_partition",
        Severity::Warning,
        r"^(?P<task>.+): Received EndOfPartition\(-1\) before completing current checkpoint (?P<id>\d+)\. Skipping current checkpoint\.?$",
    ),
    (
        "to executing it exceeded threshold",
        "execution_delay",
        Severity::Warning,
        r"^Time from receiving all checkpoint barriers/RPC (?:for checkpoint (?P<id>\d+) )?to executing it exceeded threshold: (?P<dur>\d+) ?ms\.?$",
    ),
    (
        "asynchronous part of checkpoint",
        "async_snapshot_failed",
        Severity::Warning,
        r"^(?P<task>.+) - asynchronous part of checkpoint (?P<id>\d+) could not be completed\.?$",
    ),
    (
        "Could not complete snapshot ",
        "sync_snapshot_failed",
        Severity::Warning,
        r"^Could not complete snapshot (?P<id>\d+) for operator (?P<task>.+?)\.(?: Failure reason: (?P<reason>.*))?$",
    ),
    (
        "Restoring job ",
        "restored",
        Severity::Info,
        r"^Restoring job (?P<job>[0-9a-f]{32}) from (?P<detail>(?:(?:Checkpoint|Savepoint) (?P<id>\d+))?.*?)\.?$",
    ),
    (
        "Received barrier from channel",
        "barrier_received",
        Severity::Info,
        r"^(?P<task>.+?)(?: \((?P<attempt>[0-9a-f_]+)\))?: Received barrier from channel (?P<detail>.+) @ (?P<id>\d+)\.?$",
    ),
    (
        "Did not receive barrier from",
        "barrier_missing",
        Severity::Warning,
        r"Did not receive barrier from (?:source: )?(?P<task>.+?) \(subtask: (?P<subtask>\d+)\) after (?P<dur>\d+) ?ms",
    ),
    (
        TOLERABLE,
        "tolerable_exceeded",
        Severity::Error,
        r"^(?:[\w.$]+: )?Exceeded checkpoint tolerable failure threshold\.?(?: The latest checkpoint failed due to (?P<reason>.+?), view the)?",
    ),
];

impl Patterns {
    /// The built-in Flink patterns plus `user` (checked first, so a user pattern can take over
    /// a line a built-in one would match).
    pub(super) fn new(user: Vec<UserPattern>) -> Arc<Patterns> {
        let builtins: Vec<Builtin> = BUILTINS
            .iter()
            .map(|(_, kind, severity, re)| Builtin {
                kind,
                severity: *severity,
                regex: Regex::new(re).expect("built-in patterns compile"),
            })
            .collect();
        let mut needles: Vec<&str> = Vec::new();
        let mut needle_targets: Vec<Vec<usize>> = Vec::new();
        for (i, (needle, ..)) in BUILTINS.iter().enumerate() {
            match needles.iter().position(|n| n == needle) {
                Some(j) => needle_targets[j].push(i),
                None => {
                    needles.push(needle);
                    needle_targets.push(vec![i]);
                }
            }
        }
        let prefilter = AhoCorasick::new(&needles).expect("needles build an automaton");
        let buffer_prefilter = match aho_corasick::packed::Searcher::new(needles.iter()) {
            Some(teddy) => BufferSearch::Packed(teddy),
            None => {
                let alternation: Vec<String> = needles.iter().map(|n| regex::escape(n)).collect();
                BufferSearch::Regex(
                    regex::bytes::RegexBuilder::new(&alternation.join("|"))
                        .unicode(false)
                        .build()
                        .expect("escaped needles compile"),
                )
            }
        };
        Arc::new(Patterns { builtins, needle_targets, prefilter, buffer_prefilter, user })
    }

    /// The built-in patterns only.
    pub(super) fn builtin() -> Arc<Patterns> {
        Patterns::new(Vec::new())
    }

    /// Whether a line can match anything: a cheap literal scan before any text is built.
    pub(super) fn might_match(&self, line: &[u8]) -> bool {
        !self.user.is_empty() || self.prefilter.is_match(line)
    }

    /// Whether user patterns are configured (they see every line, so no buffer prefilter applies).
    pub(super) fn has_user_patterns(&self) -> bool {
        !self.user.is_empty()
    }

    /// Appends the `(start, end)` of every built-in needle found in `haystack` (many lines at
    /// once), in order and non-overlapping. A line without one of them, and not the stack trace
    /// of a line with one, can produce no built-in event.
    pub(super) fn find_needles(&self, haystack: &[u8], out: &mut Vec<(usize, usize)>) {
        match &self.buffer_prefilter {
            BufferSearch::Packed(teddy) => {
                out.extend(teddy.find_iter(haystack).map(|m| (m.start(), m.end())))
            }
            BufferSearch::Regex(regex) => out.extend(regex.find_iter(haystack).map(|m| (m.start(), m.end()))),
        }
    }

    /// The event a log message stands for, if any.
    pub(super) fn recognise(&self, message: &str) -> Option<LogEvent> {
        for p in &self.user {
            if let Some(caps) = p.regex.captures(message) {
                let mut event = blank(p.kind.clone(), p.severity, message);
                fill(&caps, &mut event);
                return Some(event);
            }
        }
        if let Some(event) = fast::recognise(message) {
            return Some(event);
        }
        self.recognise_builtin(message)
    }

    /// [`recognise`](Self::recognise) by the regexes alone, without the hand-written parsers of
    /// the most frequent lines (which must give exactly the same events; tests compare them).
    #[doc(hidden)]
    pub(super) fn recognise_by_regex(&self, message: &str) -> Option<LogEvent> {
        for p in &self.user {
            if let Some(caps) = p.regex.captures(message) {
                let mut event = blank(p.kind.clone(), p.severity, message);
                fill(&caps, &mut event);
                return Some(event);
            }
        }
        self.recognise_builtin(message)
    }

    fn recognise_builtin(&self, message: &str) -> Option<LogEvent> {
        let mut candidates = [usize::MAX; 4];
        let mut n = 0;
        for m in self.prefilter.find_overlapping_iter(message) {
            for &target in &self.needle_targets[m.pattern().as_usize()] {
                if n < candidates.len() && !candidates[..n].contains(&target) {
                    candidates[n] = target;
                    n += 1;
                }
            }
        }
        candidates[..n].sort_unstable();
        for &i in &candidates[..n] {
            let b = &self.builtins[i];
            if let Some(caps) = b.regex.captures(message) {
                let mut event = blank(b.kind.to_string(), b.severity, message);
                fill(&caps, &mut event);
                refine(&mut event);
                return Some(event);
            }
        }
        None
    }

    /// The `tolerable_exceeded` event if an exception line carries that failure.
    fn tolerable(&self, exception_line: &str) -> Option<LogEvent> {
        if !exception_line.contains(TOLERABLE) {
            return None;
        }
        let b = self.builtins.iter().find(|b| b.kind == "tolerable_exceeded")?;
        let caps = b.regex.captures(exception_line)?;
        let mut event = blank(b.kind.to_string(), b.severity, exception_line);
        fill(&caps, &mut event);
        Some(event)
    }
}

fn blank(kind: String, severity: Severity, message: &str) -> LogEvent {
    LogEvent::new(kind.into(), severity, bounded(message))
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

/// Hand-written parsers of the four most frequent checkpoint lines (triggered, completed,
/// expired, failed), byte for byte the language of their regexes in [`BUILTINS`], which are the
/// first four and anchored on distinct literal prefixes, so no earlier pattern could have taken
/// the line. A line they do not accept goes to the regexes. Capturing with a regex costs a
/// microsecond or so per line; these cost a few dozen nanoseconds.
mod fast {
    use super::{Severity, blank};
    use checkpoint_sentinel::observe::LogEvent;

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

    fn event(kind: &str, severity: Severity, message: &str, id: &str, job: &str) -> LogEvent {
        let mut e = blank(kind.to_string(), severity, message);
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
        let mut e = event("triggered", Severity::Info, message, id, job);
        e.detail = detail.filter(|d| !d.is_empty()).map(super::bounded);
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
        let mut e = event("completed", Severity::Info, message, id, job);
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
        Some(event("expired", Severity::Warning, message, id, job))
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
        let mut e = event("failed", Severity::Warning, message, id, job);
        e.consecutive_failures = n.parse::<u64>().ok().and_then(|n| u32::try_from(n).ok());
        Some(e)
    }
}

/// Copies the named captures every pattern may use into the event. User patterns use the same
/// names: `id`, `job`, `task`, `subtask`, `tm`, `dur`, `bytes`, `reason`, `detail`.
fn fill(caps: &Captures, event: &mut LogEvent) {
    let text = |name: &str| caps.name(name).map(|m| m.as_str());
    let number = |name: &str| text(name).and_then(|s| s.parse::<u64>().ok());
    event.checkpoint_id = number("id").or_else(|| number("checkpoint_id"));
    event.job_id = text("job").or_else(|| text("job_id")).map(str::to_string);
    event.task = text("task").map(str::to_string);
    event.subtask = number("subtask").and_then(|n| u32::try_from(n).ok());
    event.taskmanager = text("tm").or_else(|| text("taskmanager")).map(str::to_string);
    event.duration_ms = number("dur").or_else(|| number("dur_old")).or_else(|| number("duration_ms"));
    event.bytes = number("bytes");
    event.consecutive_failures = number("n").and_then(|n| u32::try_from(n).ok());
    event.reason = text("reason").map(bounded);
    event.detail = text("detail").filter(|d| !d.is_empty()).map(bounded);
    if let Some(attempt) = text("attempt") {
        // Flink 1.15+ prints an ExecutionAttemptID as `<attempt>_<vertex id>_<subtask>_<attempt #>`:
        // the vertex id and subtask index tell which subtask it was. Older ids are plain hex.
        let parts: Vec<&str> = attempt.split('_').collect();
        if parts.len() == 4 && parts[1].len() == 32 {
            if event.task.is_none() {
                event.task = Some(parts[1].to_string());
            }
            if event.subtask.is_none() {
                event.subtask = parts[2].parse().ok();
            }
        } else if event.task.is_none() && event.detail.is_none() {
            event.detail = Some(format!("attempt {attempt}"));
        }
    }
}

/// Kind-specific clean-ups after the captures are in.
fn refine(event: &mut LogEvent) {
    if let Some(task) = &event.task {
        // `stateful-map (1/2)#0`: Flink counts subtasks from 1 in names, from 0 in REST; `#0`
        // is the attempt number, not a subtask. The task keeps the operator's name alone and
        // the subtask its 0-based index, as the REST API numbers it.
        let (name, subtask) = split_task(task);
        if event.subtask.is_none() {
            event.subtask = subtask;
        }
        if subtask.is_some() {
            event.task = Some(name.to_string());
        }
    }
    if event.kind == "trigger_failed"
        && let Some((_, why)) = event.reason.as_deref().and_then(|r| r.split_once("Failure reason: "))
    {
        event.reason = Some(why.trim_end_matches('.').to_string() + ".");
    }
}

/// The 0-based subtask index of a task name like `Map -> Sink (3/8)#0`.
pub(super) fn subtask_of(task: &str) -> Option<u32> {
    split_task(task).1
}

/// `Map -> Sink (3/8)#0` → (`Map -> Sink`, Some(2)): the operator's name and the 0-based
/// subtask index (Flink's `(k/n)` counts from 1; `#0` is the attempt number and is dropped).
/// A name without `(k/n)` comes back whole.
pub(super) fn split_task(task: &str) -> (&str, Option<u32>) {
    let task = task.trim_end();
    let without_attempt = match task.rfind(")#") {
        Some(i) if task[i + 2..].bytes().all(|b| b.is_ascii_digit()) => &task[..=i],
        _ => task,
    };
    let parsed = (|| {
        let inner = without_attempt.strip_suffix(')')?;
        let open = inner.rfind('(')?;
        let (index, parallelism) = inner[open + 1..].split_once('/')?;
        parallelism.parse::<u32>().ok()?;
        let index = index.parse::<u32>().ok()?.checked_sub(1)?;
        Some((inner[..open].trim_end(), index))
    })();
    match parsed {
        Some((name, index)) if !name.is_empty() => (name, Some(index)),
        _ => (task, None),
    }
}

/// The operator a stack trace names: `… for operator stateful-map (1/2)#0.` (Flink's
/// "Could not materialize checkpoint", "Could not perform checkpoint", "Could not complete
/// snapshot" messages) → (`stateful-map`, 0-based subtask 0).
fn operator_in(line: &str) -> Option<(String, u32)> {
    let at = line.find(" for operator ")?;
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
fn is_vertex_id(task: &str) -> bool {
    task.len() == 32 && task.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether a stack frame (`at flinklab.Job$Map.snapshotState(Job.java:237)`) is in the job's
/// own code rather than in Flink, the JDK or a client library.
fn is_user_frame(frame: &str) -> bool {
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

/// The parts of a line in Flink's default layout
/// (`%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header<'a> {
    /// `2026-11-29 15:04:08,723`.
    pub timestamp: &'a str,
    /// `INFO`, `WARN`, …
    pub level: &'a str,
    /// The message after ` - ` (the whole rest of the line if there is no ` - `).
    pub message: &'a str,
}

/// Whether a line starts with a log4j timestamp, i.e. starts a new record.
pub(super) fn is_record_start(line: &[u8]) -> bool {
    const DIGITS: [usize; 17] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22];
    line.len() >= 23
        && DIGITS.iter().all(|&i| line[i].is_ascii_digit())
        && line[4] == b'-'
        && line[7] == b'-'
        && (line[10] == b' ' || line[10] == b'T')
        && line[13] == b':'
        && line[16] == b':'
        && (line[19] == b',' || line[19] == b'.')
}

/// `2026-12-01 13:34:42,967` (log4j's `yyyy-MM-dd HH:mm:ss,SSS`, `T` and `.` accepted) read as
/// UTC → epoch ms.
pub(super) fn log_time_utc_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 23 || !is_record_start(b) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1_000 + ms)
}

/// Splits a record's first line into timestamp, level and message.
pub(super) fn split_header(line: &str) -> Option<Header<'_>> {
    if !is_record_start(line.as_bytes()) {
        return None;
    }
    let timestamp = &line[..23];
    let rest = line[23..].trim_start();
    let (level, after_level) = rest.split_once(' ').unwrap_or((rest, ""));
    // The logger name never contains " - "; the message follows the first one.
    let message = match after_level.find(" - ") {
        Some(i) => &after_level[i + 3..],
        None => after_level.trim_start(),
    };
    Some(Header { timestamp, level, message })
}

/// Flink's wrapper of an exception that crossed the network.
const SERIALIZED: &str = "org.apache.flink.util.SerializedThrowable";

/// One exception line unwrapped: Flink wraps remote causes in `SerializedThrowable` and
/// futures wrap theirs in `ExecutionException`/`CompletionException`; the class that matters
/// is the innermost one named on the line.
pub(super) fn exception_of(line: &str) -> (String, String) {
    const WRAPPERS: &[&str] =
        &[SERIALIZED, "java.util.concurrent.ExecutionException", "java.util.concurrent.CompletionException"];
    let mut text = line.trim().strip_prefix("Caused by: ").unwrap_or(line.trim());
    loop {
        let Some((class, message)) = split_class(text) else {
            return (String::new(), text.to_string());
        };
        match split_class(message) {
            Some(_) if WRAPPERS.contains(&class) => text = message,
            _ => return (class.to_string(), message.to_string()),
        }
    }
}

/// `java.io.IOException: msg` → (`java.io.IOException`, `msg`), if the text starts with a
/// fully qualified class name.
fn split_class(text: &str) -> Option<(&str, &str)> {
    let (class, message) = match text.find(": ") {
        Some(i) => (&text[..i], &text[i + 2..]),
        None => (text, ""),
    };
    let looks_like_class = class.contains('.')
        && !class.contains(' ')
        && class.split('.').all(|part| {
            part.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        });
    looks_like_class.then_some((class, message))
}

/// Root-cause categories, most specific first: (category, any of these substrings).
/// The starting table is the usual suspects of checkpoint failures (disk full behind a closed channel, OOM behind a
/// declined checkpoint, ClassCast for serializer changes, S3 socket timeouts, metadata store).
const CAUSES: &[(&str, &[&str])] = &[
    (
        "disk_full",
        &["No space left on device", "Disk quota exceeded", "DiskFullException", "not enough space"],
    ),
    (
        "out_of_memory",
        &[
            "OutOfMemoryError",
            "Java heap space",
            "GC overhead limit exceeded",
            "Direct buffer memory",
            "Metaspace",
            "Cannot allocate memory",
        ],
    ),
    (
        "permission",
        &[
            "AccessDeniedException",
            "Permission denied",
            "AccessControlException",
            "Access Denied",
            "403 Forbidden",
            "Operation not permitted",
        ],
    ),
    (
        "serialization",
        &[
            "ClassCastException",
            "NotSerializableException",
            "InvalidClassException",
            "SerializationException",
            "KryoException",
            "StateMigrationException",
            "serializer",
            "Serializer",
        ],
    ),
    (
        "closed_stream",
        &[
            "ClosedChannelException",
            "Stream is closed",
            "Stream closed",
            "stream closed",
            "Channel closed",
            "Broken pipe",
            "Connection reset",
            "closed before",
        ],
    ),
    ("expired", &["Checkpoint expired before completing"]),
    ("timeout", &["TimeoutException", "SocketTimeoutException", "timed out", "Timeout", "timeout"]),
    (
        "s3",
        &[
            "AmazonS3Exception",
            "S3Exception",
            "com.amazonaws",
            "software.amazon.awssdk",
            "s3a:",
            "s3://",
            "NoSuchBucket",
            "SlowDown",
        ],
    ),
    (
        "hdfs",
        &[
            "org.apache.hadoop.hdfs",
            "org.apache.hadoop.ipc.RemoteException",
            "BlockMissingException",
            "LeaseExpiredException",
            "hdfs://",
            "DataNode",
            "NameNode",
        ],
    ),
    ("file_not_found", &["FileNotFoundException", "NoSuchFileException"]),
    ("metadata_store", &["Failed to persist checkpoint metadata", "metadata store"]),
    (
        "task_failure",
        &[
            "Task has failed",
            "FailoverRegion is restarting",
            "Checkpoint Coordinator is suspending",
            "CheckpointCoordinator shutdown",
            "declined due to subtask failure",
        ],
    ),
    (
        "tasks_not_running",
        &["Not all required tasks are currently running", "not being executed at the moment"],
    ),
    ("declined", &["Checkpoint was declined", "Task received cancellation", "barrier from newer checkpoint"]),
    // The asynchronous part of a snapshot cancelled because its checkpoint was already aborted
    // (expired, declined elsewhere): what happened after, not why.
    ("cancelled", &["java.util.concurrent.CancellationException"]),
];

/// Whether an event's root cause counts as the cause of a checkpoint failure. The job failure
/// "Exceeded checkpoint tolerable failure threshold" is a consequence: its causes were counted
/// with the checkpoints that failed.
pub(super) fn counts_root_cause(kind: &str) -> bool {
    kind != "tolerable_exceeded"
}

/// Every category a root cause can get (the label values of the root-cause metric).
pub(super) const CAUSE_CATEGORIES: &[&str] = &[
    "disk_full",
    "out_of_memory",
    "permission",
    "serialization",
    "closed_stream",
    "expired",
    "timeout",
    "s3",
    "hdfs",
    "file_not_found",
    "metadata_store",
    "task_failure",
    "tasks_not_running",
    "declined",
    "cancelled",
    "io_error",
    "user_code",
    "other",
];

/// Categories that say what happened to a checkpoint rather than why: when a checkpoint has
/// another cause too (the exception a task threw), that is its root cause and these are
/// symptoms of it.
/// In this order, the first is the root cause of a checkpoint that has nothing else.
pub(super) const SYMPTOM_CATEGORIES: &[&str] =
    &["expired", "tasks_not_running", "task_failure", "declined", "cancelled"];

/// The category of a root cause: first by the deepest cause alone, then by the whole chain
/// (frames show S3 or HDFS clients where the message does not), then by its class.
pub(super) fn classify(exception: &str, message: &str, chain: &[String]) -> &'static str {
    let root = format!("{exception}: {message}");
    for (category, needles) in CAUSES {
        if needles.iter().any(|n| root.contains(n)) {
            return category;
        }
    }
    for (category, needles) in CAUSES {
        if matches!(*category, "s3" | "hdfs" | "disk_full" | "out_of_memory")
            && chain.iter().any(|line| needles.iter().any(|n| line.contains(n)))
        {
            return category;
        }
    }
    if exception.ends_with("IOException") { "io_error" } else { "other" }
}

/// A record being assembled.
struct Pending {
    /// Offset of its first byte in the file.
    start: u64,
    /// The events its first line (and first exception line) stand for; empty if none.
    events: Vec<LogEvent>,
    /// The line's timestamp text.
    logged_at: String,
    /// Continuation lines seen so far.
    continuation: usize,
    /// Stack lines kept.
    stack: Vec<String>,
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
pub(super) struct RecordParser {
    patterns: Arc<Patterns>,
    pending: Option<Pending>,
}

impl RecordParser {
    /// A parser with these patterns.
    pub(super) fn new(patterns: Arc<Patterns>) -> Self {
        RecordParser { patterns, pending: None }
    }

    /// Takes one line (no newline) that starts at byte `offset`; pushes the events of the record
    /// it finishes, if any, to `out`.
    pub(super) fn push_line(&mut self, line: &[u8], offset: u64, out: &mut Vec<LogEvent>) {
        self.push(line, offset, None, out);
    }

    /// As [`push_line`](Self::push_line), for a caller that already searched the line for the
    /// needles (`has_needle`), so the per-line prefilter is skipped.
    pub(super) fn push_searched_line(
        &mut self,
        line: &[u8],
        offset: u64,
        has_needle: bool,
        out: &mut Vec<LogEvent>,
    ) {
        self.push(line, offset, Some(has_needle), out);
    }

    fn push(&mut self, line: &[u8], offset: u64, has_needle: Option<bool>, out: &mut Vec<LogEvent>) {
        if is_record_start(line) {
            self.flush(out);
            let might_match = self.patterns.has_user_patterns()
                || has_needle.unwrap_or_else(|| self.patterns.might_match(line));
            if !might_match {
                // Most lines: no needle, no user pattern. Remember only where the record starts.
                self.pending = Some(Pending {
                    start: offset,
                    events: Vec::new(),
                    logged_at: String::new(),
                    continuation: 0,
                    stack: Vec::new(),
                    first_exception: None,
                    deepest: None,
                    deepest_frame: None,
                    exceptions: Vec::new(),
                    operator: None,
                });
                return;
            }
            let line = text_of(line);
            let Some(header) = split_header(&line) else { return };
            let events: Vec<LogEvent> = self.patterns.recognise(header.message).into_iter().collect();
            self.pending = Some(Pending {
                start: offset,
                events,
                logged_at: header.timestamp.to_string(),
                continuation: 0,
                stack: Vec::new(),
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
            if let Some(event) = self.patterns.tolerable(trimmed) {
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
        if pending.stack.len() < MAX_STACK_LINES {
            pending.stack.push(bounded(line.trim_end()));
        }
    }

    /// Finishes the record in progress (at a new record, at the end of a file, or when the
    /// file has been idle long enough that no stack trace is coming).
    pub(super) fn flush(&mut self, out: &mut Vec<LogEvent>) {
        let Some(pending) = self.pending.take() else { return };
        if pending.events.is_empty() {
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
            let mut category = classify(&exception, &message, &pending.stack);
            if category == "other" && pending.deepest_frame.as_deref().is_some_and(is_user_frame) {
                category = "user_code";
            }
            RootCause { category, exception, message: bounded(&message) }
        });
        let operator = pending.operator;
        let first = pending.first_exception.as_deref().map(exception_of);
        let last = pending.events.len().saturating_sub(1);
        let (mut logged_at, mut stack) = (pending.logged_at, pending.stack);
        for (i, mut event) in pending.events.into_iter().enumerate() {
            // The last event takes the text, the others get copies (usually there is one).
            event.logged_at =
                Some(if i == last { std::mem::take(&mut logged_at) } else { logged_at.clone() });
            if event.reason.is_none()
                && matches!(event.kind.as_str(), "declined" | "failed" | "async_snapshot_failed")
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
                && matches!(event.kind.as_str(), "declined" | "late_message")
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
    pub(super) fn pending_start(&self) -> Option<u64> {
        self.pending.as_ref().map(|p| p.start)
    }

    /// Whether a record is waiting for more lines.
    pub(super) fn has_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether the record in progress produced events, so its continuation lines (stack trace)
    /// matter; lines of other records need to be pushed only if they carry a needle.
    pub(super) fn wants_continuation(&self) -> bool {
        self.pending.as_ref().is_some_and(|p| !p.events.is_empty())
    }
}

fn text_of(line: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(line)
}

/// Splits a byte stream into lines with a bounded buffer: a line longer than `max` is cut to
/// its first `max` bytes (still recognised) and the rest is skipped up to its newline.
pub(super) struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    discarding: bool,
    /// Offset of the next byte to be fed.
    offset: u64,
    /// Lines cut because they were longer than `max`.
    pub oversize: u64,
    /// Complete lines emitted.
    pub lines: u64,
}

impl LineSplitter {
    /// A splitter whose next byte is at `offset` in the file.
    pub(super) fn new(max: usize, offset: u64) -> Self {
        LineSplitter { buf: Vec::new(), max: max.max(1), discarding: false, offset, oversize: 0, lines: 0 }
    }

    /// Feeds the next bytes; calls `line(bytes, start offset)` for each complete line.
    pub(super) fn feed(&mut self, chunk: &[u8], mut line: impl FnMut(&[u8], u64)) {
        let mut pos = 0;
        for nl in memchr::memchr_iter(b'\n', chunk) {
            let segment = &chunk[pos..nl];
            let start = self.offset + pos as u64 - self.buf.len() as u64;
            if self.discarding {
                self.discarding = false;
            } else if self.buf.is_empty() {
                let cut = segment.len() > self.max;
                if cut {
                    self.oversize += 1;
                }
                self.lines += 1;
                line(strip_cr(&segment[..segment.len().min(self.max)]), start);
            } else {
                let room = self.max - self.buf.len();
                if segment.len() > room {
                    self.oversize += 1;
                }
                self.buf.extend_from_slice(&segment[..segment.len().min(room)]);
                self.lines += 1;
                let whole = std::mem::take(&mut self.buf);
                line(strip_cr(&whole), start);
                self.buf = whole;
                self.buf.clear();
            }
            pos = nl + 1;
        }
        let rest = &chunk[pos..];
        if !self.discarding && !rest.is_empty() {
            if self.buf.len() + rest.len() > self.max {
                // Too long to hold: handle what fits now, skip the rest of this line.
                let start = self.offset + pos as u64 - self.buf.len() as u64;
                let room = self.max - self.buf.len();
                self.buf.extend_from_slice(&rest[..room]);
                self.oversize += 1;
                self.lines += 1;
                line(strip_cr(&self.buf), start);
                self.buf.clear();
                self.discarding = true;
            } else {
                self.buf.extend_from_slice(rest);
            }
        }
        self.offset += chunk.len() as u64;
    }

    /// Emits a last line without newline (a file that will not grow any more).
    pub(super) fn finish(&mut self, mut line: impl FnMut(&[u8], u64)) {
        if !self.buf.is_empty() && !self.discarding {
            let start = self.offset - self.buf.len() as u64;
            self.lines += 1;
            line(strip_cr(&self.buf), start);
        }
        self.buf.clear();
        self.discarding = false;
    }

    /// Offset of the first byte not yet handed out as part of a line.
    pub(super) fn line_start(&self) -> u64 {
        if self.discarding {
            // The cut line was handled already; resuming inside it is better than twice.
            self.offset
        } else {
            self.offset - self.buf.len() as u64
        }
    }

    /// Offset of the next byte to feed.
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Parses a whole buffer (tests and small inputs).
pub(super) fn parse_all(patterns: &Arc<Patterns>, bytes: &[u8]) -> Vec<LogEvent> {
    let mut parser = RecordParser::new(patterns.clone());
    let mut splitter = LineSplitter::new(1 << 20, 0);
    let mut out = Vec::new();
    splitter.feed(bytes, |line, offset| parser.push_line(line, offset, &mut out));
    splitter.finish(|line, offset| parser.push_line(line, offset, &mut out));
    parser.flush(&mut out);
    out
}
