//! The line engine: one range of a file read in large buffers, the needles searched over the
//! whole buffer, and only the lines that carry one (plus the stack trace of a record that produced
//! an event) handed to the record parser.

use std::io::{self, Read};
use std::sync::Arc;

use super::names::RangeNames;
use crate::observe::LogEvent;
use crate::sources::logs::parse::{
    LineNeedles, LineSplitter, Patterns, RecordParser, is_record_start, line_needles,
};

/// Bytes read per system call; the needle search runs over a whole buffer at a time. Small
/// enough to stay in the L2 cache between the kernel's copy and the search.
const READ_BUFFER: usize = 256 << 10;

/// What a range held (not `state::record::Totals`, a job's checkpoint totals by status).
#[derive(Default)]
pub(super) struct RangeTotals {
    /// Offset after its last byte.
    pub(super) end: u64,
    pub(super) lines: u64,
    pub(super) oversize: u64,
    /// Record starts seen (counting stops at the first).
    pub(super) records: u64,
    /// The vertices its "Deploying …" lines name, in order.
    pub(super) vertices: Vec<(String, String)>,
    /// The jobs its "Job … switched from state …" lines name, in order.
    pub(super) jobs: Vec<(String, String)>,
}

/// Scans `reader`, whose first byte is at `start` in its file and starts a line, and hands
/// every event to `emit`, in order. Only lines with a needle (and the stack traces of lines
/// that produced events) reach the record parser.
///
/// The needles are searched over the whole read buffer. Unless `by_lines` (the reference path
/// the tests compare with), the lines between two needles are not visited one by one: the scan
/// jumps to the start of the next needle's line (`memrchr`), and their newlines are counted in
/// one vectorised pass. Only a record that produced events (its stack trace follows) is read
/// line by line, up to the next record start.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_range(
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
    start: u64,
    mut reader: impl Read,
    buf: &mut Vec<u8>,
    by_lines: bool,
    keep_stack: bool,
    emit: &mut dyn FnMut(LogEvent),
) -> io::Result<RangeTotals> {
    let mut splitter = LineSplitter::new(max_line_bytes, start);
    // Every line is a candidate when user patterns are configured (they match anything).
    let all_lines = patterns.has_user_patterns();
    // A line within one buffer is shorter than the buffer, so no line the jump skips could have
    // been cut by the line limit; lines across buffers go through the splitter as before.
    let jump = !by_lines && !all_lines && max_line_bytes >= READ_BUFFER;
    if buf.len() != READ_BUFFER {
        *buf = vec![0u8; READ_BUFFER];
    }
    let mut needles = Vec::new();
    let mut lines = Lines {
        patterns,
        all_lines,
        parser: RecordParser::new(patterns.clone()).keep_stack(keep_stack),
        prev: PrevLine::default(),
        records: 0,
        events: Vec::new(),
        next: 0,
        vertices: RangeNames::default(),
    };
    loop {
        let n = match reader.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        let chunk_start = splitter.offset();
        lines.vertices.search_chunk(chunk, splitter.at_line_start(), max_line_bytes);
        needles.clear();
        if !all_lines {
            patterns.find_needles(chunk, &mut needles);
        }
        lines.next = 0;
        let newlines =
            if jump { memchr::memchr(b'\n', chunk).zip(memchr::memrchr(b'\n', chunk)) } else { None };
        match newlines {
            Some((first, last)) => {
                // The line the previous buffer began, or the first line; then the complete
                // lines between the first and the last newline; then the unfinished line.
                let (a, b) = (first + 1, last + 1);
                splitter.feed(&chunk[..a], |line, offset| {
                    lines.line(line, offset, chunk, chunk_start, &needles, emit)
                });
                lines.jump(chunk, a, b, chunk_start, &needles, emit);
                splitter.skip(b - a, memchr::memchr_iter(b'\n', &chunk[a..b]).count() as u64);
                splitter.feed(&chunk[b..], |line, offset| {
                    lines.line(line, offset, chunk, chunk_start, &needles, emit)
                });
            }
            None => splitter
                .feed(chunk, |line, offset| lines.line(line, offset, chunk, chunk_start, &needles, emit)),
        }
        lines.prev.keep(chunk, chunk_start);
    }
    let end = splitter.offset();
    splitter.finish(|line, offset| lines.line(line, offset, &[], end, &[], emit));
    lines.parser.flush(&mut lines.events);
    for e in lines.events.drain(..) {
        emit(e);
    }
    Ok(RangeTotals {
        end,
        lines: splitter.lines,
        oversize: splitter.oversize,
        records: lines.records,
        vertices: lines.vertices.found,
        jobs: lines.vertices.jobs,
    })
}

/// The per-line state of one range.
struct Lines<'p> {
    patterns: &'p Patterns,
    all_lines: bool,
    parser: RecordParser,
    /// The line before the current one, for a needle on a record's first continuation line
    /// (`Exceeded checkpoint tolerable failure threshold` under a line that matched nothing).
    prev: PrevLine,
    /// Record starts seen (counting stops at the first).
    records: u64,
    events: Vec<LogEvent>,
    /// Index of the first needle of the buffer not before the current line.
    next: usize,
    /// Vertex names (lines within a buffer are searched for by the buffer; a line that began
    /// in an earlier one is handed over here).
    vertices: RangeNames,
}

impl Lines<'_> {
    /// One line as the splitter cut it, starting at `offset` in the file; `chunk` is the
    /// buffer being read (starting at `chunk_start`) and `needles` the needles found in it.
    fn line(
        &mut self,
        line: &[u8],
        offset: u64,
        chunk: &[u8],
        chunk_start: u64,
        needles: &[(usize, usize, u32)],
        emit: &mut dyn FnMut(LogEvent),
    ) {
        if self.records == 0 && is_record_start(line) {
            self.records = 1;
        }
        if offset < chunk_start {
            self.vertices.line(line);
        }
        let (candidate, found) = if self.all_lines {
            (true, LineNeedles::Unknown)
        } else {
            line_needles(self.patterns, needles, &mut self.next, line, offset, chunk_start)
        };
        consider(
            line,
            offset,
            candidate,
            found,
            &mut self.parser,
            &mut self.prev,
            chunk,
            chunk_start,
            &mut self.events,
        );
        for e in self.events.drain(..) {
            emit(e);
        }
    }

    /// The complete lines `chunk[a..b]` (`b` follows a newline): a line without a needle,
    /// while no record that produced events is open, would only become the previous line, so
    /// the scan jumps from needle line to needle line and sets the previous line once per jump.
    fn jump(
        &mut self,
        chunk: &[u8],
        a: usize,
        b: usize,
        chunk_start: u64,
        needles: &[(usize, usize, u32)],
        emit: &mut dyn FnMut(LogEvent),
    ) {
        let mut pos = a;
        while pos < b {
            if self.records != 0 && !self.parser.wants_continuation() {
                while self.next < needles.len() && needles[self.next].0 < pos {
                    self.next += 1;
                }
                let target = match needles.get(self.next) {
                    Some(&(s, ..)) if s < b => s,
                    _ => b,
                };
                let line_start = memchr::memrchr(b'\n', &chunk[pos..target]).map_or(pos, |i| pos + i + 1);
                if line_start > pos {
                    let prev_end = line_start - 1;
                    let prev_start =
                        memchr::memrchr(b'\n', &chunk[pos..prev_end]).map_or(pos, |i| pos + i + 1);
                    self.prev.set(
                        strip_cr(&chunk[prev_start..prev_end]),
                        chunk_start + prev_start as u64,
                        chunk_start,
                    );
                    pos = line_start;
                    if pos >= b {
                        break;
                    }
                }
            }
            let end = memchr::memchr(b'\n', &chunk[pos..b]).map_or(b, |i| pos + i);
            self.line(
                strip_cr(&chunk[pos..end]),
                chunk_start + pos as u64,
                chunk,
                chunk_start,
                needles,
                emit,
            );
            pos = end + 1;
        }
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Hands a line to the parser if it can matter: it carries a needle (`candidate`), or it is part
/// of a record that produced events (its stack trace, or the line that ends it). A needle on a
/// continuation line counts only on the first line under a record start (where Flink prints the
/// thrown exception), and then that record start is pushed first.
#[allow(clippy::too_many_arguments)]
fn consider(
    line: &[u8],
    offset: u64,
    candidate: bool,
    needles: LineNeedles,
    parser: &mut RecordParser,
    prev: &mut PrevLine,
    chunk: &[u8],
    chunk_start: u64,
    events: &mut Vec<LogEvent>,
) {
    if parser.wants_continuation() || (candidate && is_record_start(line)) {
        parser.push_line_with_needles(line, offset, candidate, needles, events);
    } else if candidate && let Some(header) = prev.record_start_before(offset, chunk, chunk_start) {
        parser.push_line(header, prev.offset, events);
        parser.push_searched_line(line, offset, candidate, events);
    }
    prev.set(line, offset, chunk_start);
}

/// The previous line: its position, and a copy when it is not in the current buffer.
#[derive(Default)]
struct PrevLine {
    offset: u64,
    len: usize,
    in_chunk: bool,
    valid: bool,
    copy: Vec<u8>,
}

impl PrevLine {
    fn set(&mut self, line: &[u8], offset: u64, chunk_start: u64) {
        let in_chunk = offset >= chunk_start;
        (self.offset, self.len, self.in_chunk, self.valid) = (offset, line.len(), in_chunk, true);
        if !in_chunk {
            // Began in the previous buffer (at most one such line per buffer): copy it now.
            self.copy.clear();
            self.copy.extend_from_slice(line);
        }
    }

    /// At the end of a buffer: copy the last line, the next buffer cannot see it.
    fn keep(&mut self, chunk: &[u8], chunk_start: u64) {
        if self.in_chunk && self.valid {
            let start = (self.offset - chunk_start) as usize;
            self.copy.clear();
            self.copy.extend_from_slice(&chunk[start..start + self.len]);
            self.in_chunk = false;
        }
    }

    /// The previous line if it starts a record and directly precedes `offset`.
    fn record_start_before<'a>(&'a self, offset: u64, chunk: &'a [u8], chunk_start: u64) -> Option<&'a [u8]> {
        if !self.valid || self.offset >= offset {
            return None;
        }
        let line = if self.in_chunk {
            let start = (self.offset - chunk_start) as usize;
            &chunk[start..start + self.len]
        } else {
            &self.copy[..]
        };
        is_record_start(line).then_some(line)
    }
}
