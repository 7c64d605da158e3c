//! Lines in Flink's log4j layout (`%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n`): the
//! record start, its header, and the bounded splitter that cuts a byte stream into lines.

use std::borrow::Cow;

/// The parts of a line in Flink's default layout
/// (`%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// `2026-11-29 15:04:08,723`.
    pub(crate) timestamp: &'a str,
    /// `INFO`, `WARN`, …
    pub(crate) level: &'a str,
    /// The message after ` - ` (the whole rest of the line if there is no ` - `).
    pub message: &'a str,
}

/// Whether a line starts with a log4j timestamp, i.e. starts a new record.
pub fn is_record_start(line: &[u8]) -> bool {
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

/// Splits a record's first line into timestamp, level and message.
pub fn split_header(line: &str) -> Option<Header<'_>> {
    if !is_record_start(line.as_bytes()) {
        return None;
    }
    let timestamp = &line[..23];
    let rest = line[23..].trim_start();
    let (level, after_level) = rest.split_once(' ').unwrap_or((rest, ""));
    // The logger name never contains " - "; the message follows the first one. One finder for
    // every line (`memmem::find` builds one per call: issue 42's profile).
    static DASH: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b" - "));
    let message = match DASH.find(after_level.as_bytes()) {
        Some(i) => &after_level[i + 3..],
        None => after_level.trim_start(),
    };
    Some(Header { timestamp, level, message })
}

pub(super) fn text_of(line: &[u8]) -> Cow<'_, str> {
    // Valid UTF-8 (nearly every line) is checked by the fast validator, without the lossy
    // decoder's chunking.
    match std::str::from_utf8(line) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(line),
    }
}

/// Splits a byte stream into lines with a bounded buffer: a line longer than `max` is cut to
/// its first `max` bytes (still recognised) and the rest is skipped up to its newline.
pub struct LineSplitter {
    buf: Vec<u8>,
    max: usize,
    discarding: bool,
    /// Offset of the next byte to be fed.
    offset: u64,
    /// Lines cut because they were longer than `max`.
    pub(crate) oversize: u64,
    /// Complete lines emitted.
    pub(crate) lines: u64,
}

impl LineSplitter {
    /// A splitter whose next byte is at `offset` in the file.
    pub fn new(max: usize, offset: u64) -> Self {
        LineSplitter { buf: Vec::new(), max: max.max(1), discarding: false, offset, oversize: 0, lines: 0 }
    }

    /// Feeds the next bytes; calls `line(bytes, start offset)` for each complete line.
    pub fn feed(&mut self, chunk: &[u8], mut line: impl FnMut(&[u8], u64)) {
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

    /// Accounts for `bytes` bytes holding `lines` complete lines that the caller handled
    /// itself. Only right after a newline (nothing buffered, no line being skipped), and only
    /// for lines not longer than the limit.
    pub(crate) fn skip(&mut self, bytes: usize, lines: u64) {
        debug_assert!(self.buf.is_empty() && !self.discarding);
        self.offset += bytes as u64;
        self.lines += lines;
    }

    /// Emits a last line without newline (a file that will not grow any more).
    pub fn finish(&mut self, mut line: impl FnMut(&[u8], u64)) {
        if !self.buf.is_empty() && !self.discarding {
            let start = self.offset - self.buf.len() as u64;
            self.lines += 1;
            line(strip_cr(&self.buf), start);
        }
        self.buf.clear();
        self.discarding = false;
    }

    /// Offset of the first byte not yet handed out as part of a line.
    pub(crate) fn line_start(&self) -> u64 {
        if self.discarding {
            // The cut line was handled already; resuming inside it is better than twice.
            self.offset
        } else {
            self.offset - self.buf.len() as u64
        }
    }

    /// Whether the next byte fed starts a line (nothing held, no cut line being skipped).
    pub(crate) fn at_line_start(&self) -> bool {
        self.buf.is_empty() && !self.discarding
    }

    /// Offset of the next byte to feed.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}
