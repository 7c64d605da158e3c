//! The checkpoint patterns: the built-in ones (a needle, a kind, a severity, a regex over the
//! message), user patterns from the config, the whole-buffer needle search and the per-line
//! prefilter, and the captures copied into events.

use std::sync::Arc;

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex};

use super::fields::refine;
use super::{OVERSIZED, TOLERABLE, blank, bounded, fast};
use crate::observe::{EventSeverity, LogEvent, LogKind};

/// Every built-in kind, in the order reports list them.
pub const BUILTIN_KINDS: &[LogKind] = &LogKind::BUILTIN;

/// A user pattern from the config (`[[logs.patterns]]`), already validated.
#[derive(Clone, Debug)]
pub struct UserPattern {
    /// Matched against the message part of timestamped lines.
    pub(crate) regex: Regex,
    /// The event kind it produces.
    pub(crate) kind: LogKind,
    /// Its severity.
    pub(crate) severity: EventSeverity,
}

struct Builtin {
    kind: LogKind,
    severity: EventSeverity,
    regex: Regex,
}

/// The compiled pattern set: built-in Flink patterns behind a literal prefilter, plus user
/// patterns. Shared (`Arc`) by every file a tailer follows.
pub struct Patterns {
    builtins: Vec<Builtin>,
    /// Needle index → indexes into `builtins` that need it.
    needle_targets: Vec<Vec<usize>>,
    prefilter: AhoCorasick,
    /// The same needles searched over whole buffers (many lines at once), leftmost-first: a
    /// SIMD multi-literal search, several GB/s on lines that match nothing, where the per-line
    /// automaton pays a call per line.
    buffer_prefilter: BufferSearch,
    /// Needles (bit per needle index) an occurrence of which may hide another needle from a
    /// leftmost, non-overlapping search (`expired before completing` ends where `before
    /// completing current checkpoint` begins): a line with one of them gets the overlapping
    /// per-line search; for every other line the buffer search's needles are all its needles.
    overlapping: u32,
    user: Vec<UserPattern>,
}

/// The needles of a line, as the buffer search found them: a bit per needle index, or unknown
/// (the line spans two read buffers, was cut at the line limit, or the caller did not search).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineNeedles {
    /// Ask the per-line search.
    Unknown,
    /// These needles (bit per needle index) start at these byte offsets of the line; none
    /// other occurs in it.
    Found {
        /// Bit per needle index.
        mask: u32,
        /// Offset of the first needle in the line (a needle before the message does not count).
        first: u32,
    },
}

/// Where a line of a searched buffer stands: `(candidate, needles)`. `needles` are the needles
/// [`Patterns::find_needles`] found in `chunk` (which starts at `chunk_start` in the file), and
/// `next` the index of the first of them not before the previous line (lines come in order).
/// A line that began in an earlier buffer, or whose needle the line limit cut, is asked with
/// the per-line search (`might_match`) and its needles are unknown.
pub fn line_needles(
    patterns: &Patterns,
    needles: &[(usize, usize, u32)],
    next: &mut usize,
    line: &[u8],
    offset: u64,
    chunk_start: u64,
) -> (bool, LineNeedles) {
    if offset < chunk_start {
        // Began in the previous buffer: the buffer search saw only part of it.
        return (patterns.might_match(line), LineNeedles::Unknown);
    }
    let start = (offset - chunk_start) as usize;
    let end = start + line.len();
    while *next < needles.len() && needles[*next].0 < start {
        *next += 1;
    }
    match needles.get(*next) {
        // A needle cut by the line limit: ask the line itself.
        Some(&(s, e, _)) if s < end && e > end => (patterns.might_match(line), LineNeedles::Unknown),
        Some(&(s, ..)) if s < end => {
            // Every needle of the line, if none of them was cut or is of unknown index.
            let mut mask = 0u32;
            let mut known = true;
            for &(_, e, id) in needles[*next..].iter().take_while(|n| n.0 < end) {
                if e > end || id >= 32 {
                    known = false;
                } else {
                    mask |= 1 << id;
                }
            }
            let found = if known {
                LineNeedles::Found { mask, first: (s - start) as u32 }
            } else {
                LineNeedles::Unknown
            };
            (true, found)
        }
        _ => (false, LineNeedles::Unknown),
    }
}

/// The whole-buffer needle search: SIMD Teddy where the CPU has it (several GB/s on lines that
/// match nothing, no automaton to confirm a literal), else a literal regex alternation.
enum BufferSearch {
    Packed(aho_corasick::packed::Searcher),
    Regex(regex::bytes::Regex),
}

/// (needle, kind, severity, regex over the message). A line reaches a regex only if it
/// contains the needle, so lines that match nothing cost one multi-literal scan.
const BUILTINS: &[(&str, LogKind, EventSeverity, &str)] = &[
    (
        "Triggering checkpoint ",
        LogKind::Triggered,
        EventSeverity::Info,
        r"^Triggering checkpoint (?P<id>\d+) (?:\(type=(?P<detail>.*)\) )?@ (?P<at>\d+) for job (?P<job>[0-9a-f]{32})\.?$",
    ),
    (
        "Completed checkpoint ",
        LogKind::Completed,
        EventSeverity::Info,
        r"^Completed checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32}) \((?P<bytes>\d+) bytes(?:, checkpointDuration=(?P<dur>\d+) ms(?:, finalizationTime=\d+ ms)?| in (?P<dur_old>\d+) ms)\)\.?$",
    ),
    (
        "expired before completing",
        LogKind::Expired,
        EventSeverity::Warning,
        r"^Checkpoint (?P<id>\d+) of job (?P<job>[0-9a-f]{32}) expired before completing\.?$",
    ),
    (
        "Decline checkpoint ",
        LogKind::Declined,
        EventSeverity::Warning,
        r"^Decline checkpoint (?P<id>\d+) by task (?P<attempt>\S+) of job (?P<job>[0-9a-f]{32})(?: at (?P<tm>.+?))?\.?$",
    ),
    (
        "Failed to trigger or complete checkpoint",
        LogKind::Failed,
        EventSeverity::Warning,
        r"^Failed to trigger or complete checkpoint (?P<id>-?\d+|\S+) for job (?P<job>[0-9a-f]{32})\. \((?P<n>\d+) consecutive failed attempts so far\)$",
    ),
    (
        "Failed to trigger checkpoint for job",
        LogKind::TriggerFailed,
        EventSeverity::Warning,
        r"^Failed to trigger checkpoint for job (?P<job>[0-9a-f]{32}) since (?P<reason>.*)$",
    ),
    (
        "Triggering Checkpoint ",
        LogKind::TriggerFailed,
        EventSeverity::Warning,
        r"^Triggering Checkpoint (?P<id>\d+) for job (?P<job>[0-9a-f]{32}) failed due to (?P<reason>.*)$",
    ),
    (
        "Received late message for now expired",
        LogKind::LateMessage,
        EventSeverity::Warning,
        r"^Received late message for now expired checkpoint attempt (?P<id>\d+) from task (?P<attempt>\S+) of job (?P<job>[0-9a-f]{32})(?: at (?P<tm>.+?))?\.?$",
    ),
    (
        "before completing current checkpoint",
        LogKind::BarrierOvertaken,
        EventSeverity::Warning,
        r"^(?P<task>.+): Received checkpoint barrier for checkpoint (?P<detail>\d+) before completing current checkpoint (?P<id>\d+)\. Skipping current checkpoint\.?$",
    ),
    (
        "before completing current checkpoint",
        LogKind::EndOfPartition,
        EventSeverity::Warning,
        r"^(?P<task>.+): Received EndOfPartition\(-1\) before completing current checkpoint (?P<id>\d+)\. Skipping current checkpoint\.?$",
    ),
    (
        "to executing it exceeded threshold",
        LogKind::ExecutionDelay,
        EventSeverity::Warning,
        r"^Time from receiving all checkpoint barriers/RPC (?:for checkpoint (?P<id>\d+) )?to executing it exceeded threshold: (?P<dur>\d+) ?ms\.?$",
    ),
    (
        "asynchronous part of checkpoint",
        LogKind::AsyncSnapshotFailed,
        EventSeverity::Warning,
        r"^(?P<task>.+) - asynchronous part of checkpoint (?P<id>\d+) could not be completed\.?$",
    ),
    (
        "Could not complete snapshot ",
        LogKind::SyncSnapshotFailed,
        EventSeverity::Warning,
        r"^Could not complete snapshot (?P<id>\d+) for operator (?P<task>.+?)\.(?: Failure reason: (?P<reason>.*))?$",
    ),
    // Pekko/Akka classic remoting, logged under "Transient association error (association remains
    // live)" on the sender (`EndpointWriter`) or "Transient error while reading from association"
    // on the receiver (`EndpointReader`); matched on that record's exception line.
    (
        "Discarding oversized payload",
        LogKind::OversizedPayload,
        EventSeverity::Warning,
        r"^(?:[\w.$]+: )?Discarding oversized payload (?:sent to Actor\[(?P<detail>[^\]#]+)[^\]]*\]: |received: )max allowed size \[?\d+\]? bytes, actual size (?:of encoded .*? was )?\[?(?P<bytes>\d+)\]? bytes",
    ),
    (
        "Successful registration at job manager ",
        LogKind::JobMasterRegistered,
        EventSeverity::Info,
        r"^Successful registration at job manager (?P<detail>\S+) for job (?P<job>[0-9a-f]{32})\.?$",
    ),
    (
        "Restoring job ",
        LogKind::Restored,
        EventSeverity::Info,
        r"^Restoring job (?P<job>[0-9a-f]{32}) from (?P<detail>(?:(?:Checkpoint|Savepoint) (?P<id>\d+))?.*?)\.?$",
    ),
    (
        "Received barrier from channel",
        LogKind::BarrierReceived,
        EventSeverity::Info,
        r"^(?P<task>.+?)(?: \((?P<attempt>[0-9a-f_]+)\))?: Received barrier from channel (?P<detail>.+) @ (?P<id>\d+)\.?$",
    ),
    (
        "Did not receive barrier from",
        LogKind::BarrierMissing,
        EventSeverity::Warning,
        r"Did not receive barrier from (?:source: )?(?P<task>.+?) \(subtask: (?P<subtask>\d+)\) after (?P<dur>\d+) ?ms",
    ),
    (
        TOLERABLE,
        LogKind::TolerableExceeded,
        EventSeverity::Error,
        r"^(?:[\w.$]+: )?Exceeded checkpoint tolerable failure threshold\.?(?: The latest checkpoint failed due to (?P<reason>.+?), view the)?",
    ),
];

impl Patterns {
    /// The built-in Flink patterns plus `user` (checked first, so a user pattern can take over
    /// a line a built-in one would match).
    pub(crate) fn new(user: Vec<UserPattern>) -> Arc<Patterns> {
        let builtins: Vec<Builtin> = BUILTINS
            .iter()
            .map(|(_, kind, severity, re)| Builtin {
                kind: kind.clone(),
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
        let prefilter = AhoCorasick::builder()
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&needles)
            .expect("needles build an automaton");
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
        assert!(needles.len() <= 32, "needle masks are u32");
        let mut overlapping = 0u32;
        for (i, a) in needles.iter().enumerate() {
            let hides_one = needles.iter().enumerate().any(|(j, b)| {
                (i != j && (a.starts_with(b) || b.starts_with(a)))
                    || (1..a.len())
                        .any(|p| a.is_char_boundary(p) && (b.starts_with(&a[p..]) || a[p..].contains(b)))
            });
            if hides_one {
                overlapping |= 1 << i;
            }
        }
        Arc::new(Patterns { builtins, needle_targets, prefilter, buffer_prefilter, overlapping, user })
    }

    /// The built-in patterns only.
    pub fn builtin() -> Arc<Patterns> {
        Patterns::new(Vec::new())
    }

    /// Whether a line can match anything: a cheap literal scan before any text is built.
    pub(crate) fn might_match(&self, line: &[u8]) -> bool {
        !self.user.is_empty() || self.prefilter.is_match(line)
    }

    /// Whether user patterns are configured (they see every line, so no buffer prefilter applies).
    pub(crate) fn has_user_patterns(&self) -> bool {
        !self.user.is_empty()
    }

    /// Appends the `(start, end)` of every built-in needle found in `haystack` (many lines at
    /// once), in order and non-overlapping. A line without one of them, and not the stack trace
    /// of a line with one, can produce no built-in event.
    /// The third field is the needle's index (a bit of [`LineNeedles::Found`]'s mask); the regex
    /// fallback does not tell it (`u32::MAX`: the line gets the per-line search).
    pub fn find_needles(&self, haystack: &[u8], out: &mut Vec<(usize, usize, u32)>) {
        match &self.buffer_prefilter {
            BufferSearch::Packed(teddy) => {
                out.extend(teddy.find_iter(haystack).map(|m| (m.start(), m.end(), m.pattern().as_u32())))
            }
            BufferSearch::Regex(regex) => {
                out.extend(regex.find_iter(haystack).map(|m| (m.start(), m.end(), u32::MAX)))
            }
        }
    }

    /// The event a log message stands for, if any.
    pub fn recognise(&self, message: &str) -> Option<LogEvent> {
        self.recognise_with(message, None)
    }

    /// [`recognise`](Self::recognise) given the needles the buffer search found in the message
    /// (`Some(mask)`, a bit per needle index: exactly the needles in it), so the per-line
    /// overlapping search is skipped.
    pub(crate) fn recognise_with(&self, message: &str, needles: Option<u32>) -> Option<LogEvent> {
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
        self.recognise_builtin(message, true, needles.filter(|m| m & self.overlapping == 0))
    }

    /// [`recognise`](Self::recognise) by the regexes alone, without the hand-written parsers of
    /// the most frequent lines (which must give exactly the same events; tests compare them).
    #[doc(hidden)]
    pub fn recognise_by_regex(&self, message: &str) -> Option<LogEvent> {
        for p in &self.user {
            if let Some(caps) = p.regex.captures(message) {
                let mut event = blank(p.kind.clone(), p.severity, message);
                fill(&caps, &mut event);
                return Some(event);
            }
        }
        self.recognise_builtin(message, false, None)
    }

    /// The built-in patterns; `fast`: the hand-written parsers where they apply; `needles`:
    /// the needles of the message if known (else the overlapping per-line search finds them).
    fn recognise_builtin(&self, message: &str, fast: bool, needles: Option<u32>) -> Option<LogEvent> {
        let mut candidates = [usize::MAX; 4];
        let mut n = 0;
        let mut add = |needle: usize| {
            for &target in &self.needle_targets[needle] {
                if n < candidates.len() && !candidates[..n].contains(&target) {
                    candidates[n] = target;
                    n += 1;
                }
            }
        };
        match needles {
            Some(mut mask) => {
                while mask != 0 {
                    add(mask.trailing_zeros() as usize);
                    mask &= mask - 1;
                }
            }
            None => {
                for m in self.prefilter.find_overlapping_iter(message) {
                    add(m.pattern().as_usize());
                }
            }
        }
        candidates[..n].sort_unstable();
        if fast && n == 1 {
            let kind = &self.builtins[candidates[0]].kind;
            if *kind == LogKind::BarrierReceived
                && let Some(event) = fast::barrier_received(message)
            {
                return Some(event);
            }
            if *kind == LogKind::AsyncSnapshotFailed {
                match fast::async_snapshot_failed(message) {
                    fast::Parsed::Event(event) => return Some(*event),
                    fast::Parsed::NoMatch => return None,
                    fast::Parsed::AskRegex => {}
                }
            }
        }
        for &i in &candidates[..n] {
            let b = &self.builtins[i];
            if let Some(caps) = b.regex.captures(message) {
                let mut event = blank(b.kind.clone(), b.severity, message);
                fill(&caps, &mut event);
                refine(&mut event);
                return Some(event);
            }
        }
        None
    }

    /// The event an exception line stands for (the first line under a record's message): the
    /// `tolerable_exceeded` job failure, or Pekko's `oversized_payload`.
    pub(super) fn exception_event(&self, exception_line: &str) -> Option<LogEvent> {
        static TOLERABLE_AT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(TOLERABLE));
        static OVERSIZED_AT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(OVERSIZED));
        let kind = if TOLERABLE_AT.find(exception_line.as_bytes()).is_some() {
            LogKind::TolerableExceeded
        } else if OVERSIZED_AT.find(exception_line.as_bytes()).is_some() {
            LogKind::OversizedPayload
        } else {
            return None;
        };
        let b = self.builtins.iter().find(|b| b.kind == kind)?;
        let caps = b.regex.captures(exception_line)?;
        let mut event = blank(b.kind.clone(), b.severity, exception_line);
        fill(&caps, &mut event);
        Some(event)
    }
}

/// Copies the named captures every pattern may use into the event. User patterns use the same
/// names: `id`, `job`, `task`, `subtask`, `tm`, `dur`, `bytes`, `reason`, `detail`.
pub(super) fn fill(caps: &Captures, event: &mut LogEvent) {
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
