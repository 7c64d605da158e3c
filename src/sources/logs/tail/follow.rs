//! Following one file: its open handle, the fingerprint of its first bytes, reads that keep only
//! bytes of the content it still holds, and the position before the record still assembled.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::observe::{CheckpointSpan, LogEvent};
use crate::sources::logs::offsets::{self, FileId, FilePosition};
use crate::sources::logs::parse::{LineSplitter, Patterns, RecordParser, line_needles};
use crate::sources::logs::trace;

/// Size of one read.
pub(super) const CHUNK: usize = 256 << 10;

/// One file followed by its open handle (so a rotated-away or deleted file stays readable).
pub(super) struct Follower {
    pub(super) id: FileId,
    pub(super) path: PathBuf,
    file: File,
    /// The first bytes as last read (grows up to the fingerprint size).
    pub(super) head: Vec<u8>,
    pub(super) splitter: LineSplitter,
    pub(super) parser: RecordParser,
    /// The needles of the last buffer read (reused).
    needles: Vec<(usize, usize, u32)>,
    /// Its path leads elsewhere now (rotated away or deleted): read to the end, then close.
    pub(super) gone: bool,
    pub(super) last_growth: Instant,
    /// Size at the last look.
    pub(super) len: u64,
    /// The age of its content: lower is older and is read first.
    pub(super) seq: u64,
}

/// A file seen for the first time, and where it is to be followed from.
pub(super) struct Opened {
    pub(super) id: FileId,
    pub(super) path: PathBuf,
    pub(super) file: File,
    pub(super) head: Vec<u8>,
    pub(super) len: u64,
    pub(super) offset: u64,
    pub(super) seq: u64,
}

impl Follower {
    /// Follows `opened` from its offset, its records parsed with `patterns`.
    pub(super) fn open(
        mut opened: Opened,
        max_line_bytes: usize,
        patterns: Arc<Patterns>,
        now: Instant,
    ) -> io::Result<Self> {
        opened.file.seek(SeekFrom::Start(opened.offset))?;
        Ok(Follower {
            id: opened.id,
            path: opened.path,
            file: opened.file,
            head: opened.head,
            splitter: LineSplitter::new(max_line_bytes, opened.offset),
            parser: RecordParser::new(patterns),
            needles: Vec::new(),
            gone: false,
            last_growth: now,
            len: opened.len,
            seq: opened.seq,
        })
    }

    /// Every byte before this was turned into events.
    pub(super) fn committed(&self) -> u64 {
        let line_start = self.splitter.line_start();
        self.parser.pending_start().map_or(line_start, |p| p.min(line_start))
    }

    /// Where a restart resumes this file.
    pub(super) fn position(&self) -> FilePosition {
        FilePosition {
            id: self.id,
            head_len: self.head.len(),
            head_hash: offsets::fnv1a(&self.head),
            offset: self.committed(),
            path: self.path.display().to_string(),
        }
    }

    /// How long nothing new was read from the file.
    pub(super) fn quiet(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_growth)
    }

    /// Whether the file was truncated or had its content replaced in place.
    pub(super) fn truncated(&mut self, len: u64) -> io::Result<bool> {
        if len < self.splitter.offset() {
            return Ok(true);
        }
        let head = offsets::read_head(&self.file)?;
        let common = head.len().min(self.head.len());
        if head[..common] != self.head[..common] {
            return Ok(true);
        }
        if head.len() > self.head.len() {
            self.head = head;
        }
        Ok(false)
    }

    /// After a truncation: reads the file again from its start, with the fingerprint of what
    /// it holds now. Returns an error when it could not rewind (the rest is reset all the same).
    pub(super) fn start_over(&mut self, max_line_bytes: usize) -> io::Result<()> {
        let rewound = self.file.seek(SeekFrom::Start(0)).map(|_| ());
        self.splitter = LineSplitter::new(max_line_bytes, 0);
        self.head = offsets::read_head(&self.file).unwrap_or_default();
        rewound
    }

    /// Reads up to `budget` bytes; returns (bytes read, whether it reached the end of the file).
    pub(super) fn read(
        &mut self,
        chunk: &mut [u8],
        budget: usize,
        events: &mut Vec<LogEvent>,
        spans: &mut Vec<CheckpointSpan>,
    ) -> io::Result<(usize, bool)> {
        let mut total = 0;
        while total < budget {
            let want = chunk.len().min(budget - total);
            let n = match self.file.read(&mut chunk[..want]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok((total, true));
            }
            if !self.same_content()? {
                // Truncated and written again since the file was last looked at (a storm): these
                // bytes may be of the new content, read from the old position. Left to the next
                // look, which sees the truncation and reads the new content from its start.
                self.file.seek(SeekFrom::Start(self.splitter.offset()))?;
                return Ok((total, true));
            }
            total += n;
            extend_head(&mut self.head, self.splitter.offset(), &chunk[..n]);
            // A span line is taken as it is read: spans count by (job, checkpoint id), so one read
            // again after a restart (the position may stand before it, at a record held for its
            // stack trace) is a no-op.
            feed_searched(
                &mut self.splitter,
                &mut self.parser,
                &mut self.needles,
                &chunk[..n],
                events,
                spans,
            );
        }
        Ok((total, false))
    }

    /// The file is closed: its last line, even without a newline, and the record held for its
    /// stack trace become events.
    pub(super) fn finish(&mut self, events: &mut Vec<LogEvent>, spans: &mut Vec<CheckpointSpan>) {
        let parser = &mut self.parser;
        let mut tail = Vec::new();
        self.splitter.finish(|line, offset| {
            spans.extend(trace::parse_line(line));
            parser.push_line(line, offset, &mut tail)
        });
        parser.flush(&mut tail);
        events.extend(tail);
    }

    /// Whether the file still starts with the bytes its fingerprint holds.
    fn same_content(&self) -> io::Result<bool> {
        if self.head.is_empty() {
            return Ok(true);
        }
        let head = offsets::read_head(&self.file)?;
        Ok(head.starts_with(&self.head))
    }
}

/// Feeds one buffer read from a file into its parser: one whole-buffer needle search, and
/// each line's needles (or none) handed over with it, so only lines with a needle reach the
/// recogniser and none is searched twice (as `scan-logs` does). With user patterns every line
/// is a candidate and goes the per-line way.
pub fn feed_searched(
    splitter: &mut LineSplitter,
    parser: &mut RecordParser,
    needles: &mut Vec<(usize, usize, u32)>,
    chunk: &[u8],
    events: &mut Vec<LogEvent>,
    spans: &mut Vec<CheckpointSpan>,
) {
    let patterns = parser.patterns().clone();
    let chunk_start = splitter.offset();
    // Span lines are rare: one search of the buffer says whether any line wholly in it can be
    // one; a line begun in an earlier buffer is looked at whatever this one holds.
    let any_span = memchr::memmem::find(chunk, trace::SPAN_MARKER.as_bytes()).is_some();
    let mut take_span = |line: &[u8], offset: u64| {
        if any_span || offset < chunk_start {
            spans.extend(trace::parse_line(line));
        }
    };
    if patterns.has_user_patterns() {
        splitter.feed(chunk, |line, offset| {
            take_span(line, offset);
            parser.push_line(line, offset, events)
        });
        return;
    }
    needles.clear();
    patterns.find_needles(chunk, needles);
    let mut next = 0;
    splitter.feed(chunk, |line, offset| {
        take_span(line, offset);
        let (candidate, found) = line_needles(&patterns, needles, &mut next, line, offset, chunk_start);
        parser.push_line_with_needles(line, offset, candidate, found, events);
    });
}

/// Grows a file's fingerprint with bytes read at `pos`, so it always covers what was read: the
/// head read when the file was (re)opened may be shorter than what the same cycle then read
/// (the writer went on in between), and a fingerprint that lags behind would not tell that
/// content from the next.
fn extend_head(head: &mut Vec<u8>, pos: u64, bytes: &[u8]) {
    let have = head.len() as u64;
    if have >= offsets::FINGERPRINT_BYTES as u64 || have < pos || have >= pos + bytes.len() as u64 {
        return;
    }
    let from = (have - pos) as usize;
    let to = bytes.len().min(from + offsets::FINGERPRINT_BYTES - head.len());
    head.extend_from_slice(&bytes[from..to]);
}

/// Names the file and the cluster on events that do not name them yet.
pub(super) fn set_file(events: &mut [LogEvent], cluster: &str, path: &Path) {
    for e in events {
        if e.file.is_empty() {
            e.file = path.display().to_string();
        }
        if e.cluster.is_empty() {
            e.cluster = cluster.to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_grows_with_what_was_read() {
        let mut head = b"ab".to_vec();
        extend_head(&mut head, 0, b"abcd");
        assert_eq!(head, b"abcd");
        extend_head(&mut head, 10, b"xyz"); // Not adjacent: the fingerprint stays as it is.
        assert_eq!(head, b"abcd");
        extend_head(&mut head, 4, &[b'e'; 2000]);
        assert_eq!(head.len(), offsets::FINGERPRINT_BYTES);
        assert_eq!(&head[..5], b"abcde");
    }
}
