//! What a scan found: the files and the aggregate, and what both outputs read of them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::observe::LogEvent;
use crate::sources::logs::parse::BUILTIN_KINDS;

use super::aggregate::{Aggregate, BlockingSubtask};

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
    /// Lines that start with a log4j timestamp (`2026-11-29 15:04:08,723`), counted up to the
    /// first one: 0 in a file that has lines means it is not a Flink log.
    pub records: u64,
}

impl FileSummary {
    /// A file with lines of which none starts with a log4j timestamp: not a Flink log in
    /// Flink's layout (`%d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n`).
    pub(crate) fn is_not_a_flink_log(&self) -> bool {
        self.lines > 0 && self.records == 0
    }
}

/// Everything a scan found.
#[derive(Debug, Default)]
pub struct ScanReport {
    /// The files, in the order given.
    pub files: Vec<FileSummary>,
    /// Every event, in file order (files in the order given), with its stack trace — only when
    /// the scan keeps events (`Scanner::keep_events`, `scan_paths`); the report itself is
    /// built from the aggregate either way.
    pub events: Vec<LogEvent>,
    pub(super) aggregate: Aggregate,
}

impl ScanReport {
    /// Events per kind: every built-in kind (zero or not) plus user kinds.
    pub fn kind_counts(&self) -> BTreeMap<String, u64> {
        let mut counts: BTreeMap<String, u64> = BUILTIN_KINDS.iter().map(|k| (k.to_string(), 0)).collect();
        for (kind, n) in &self.aggregate.kinds {
            *counts.entry(kind.clone()).or_insert(0) += n;
        }
        counts
    }

    /// The blocking table's rows: (task, subtask, what it did), by task and subtask.
    pub(super) fn blocking_rows(&self) -> Vec<(&str, Option<u32>, &BlockingSubtask)> {
        let a = &self.aggregate;
        let mut rows: Vec<(&str, Option<u32>, &BlockingSubtask)> = a
            .blocking
            .iter()
            .map(|((task, subtask), b)| (a.str(*task).unwrap_or("?"), *subtask, b))
            .collect();
        rows.sort_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
        rows
    }

    /// The kinds of a blocking row's events, sorted.
    pub(super) fn kinds_of(&self, b: &BlockingSubtask) -> Vec<&str> {
        let mut kinds: Vec<&str> = b.kinds.iter().filter_map(|k| self.aggregate.str(*k)).collect();
        kinds.sort_unstable();
        kinds
    }

    /// The files that have lines but none in Flink's log layout.
    pub fn not_flink_logs(&self) -> Vec<&FileSummary> {
        self.files.iter().filter(|f| f.is_not_a_flink_log()).collect()
    }
}
