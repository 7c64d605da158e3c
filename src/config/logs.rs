//! `[[logs]]`: the Flink log files of one cluster to follow, and the user's own patterns.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::patterns::Pattern;

/// One `[[logs]]` entry: log files of one cluster to follow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// The `[[clusters]]` entry these logs belong to (the `cluster` label of their events).
    pub cluster: String,
    /// Names the entry's read positions in the state directory; defaults to the cluster name
    /// (set it when two entries are bound to the same cluster).
    pub name: Option<String>,
    /// Glob patterns of the files to follow; new files that match are picked up.
    pub paths: Vec<String>,
    /// Where a file seen for the first time at daemon start is read from.
    pub start_at: StartAt,
    /// How often file metadata is polled (file events only wake the tailer up earlier).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// How long a file must be quiet before its last record (which a stack trace could still
    /// follow) is taken as complete.
    #[serde(with = "humantime_serde")]
    pub flush_after: Duration,
    /// Longer lines are cut to this many bytes (and counted).
    pub max_line_bytes: usize,
    /// At most this many files are followed at once (one file descriptor each); files the
    /// globs match beyond it are left out and counted in `checkpoint_sentinel_inputs_cut_total`.
    pub max_files: usize,
    /// Extra patterns, checked before the built-in ones.
    pub patterns: Vec<LogPatternConfig>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            cluster: String::new(),
            name: None,
            paths: Vec::new(),
            start_at: StartAt::End,
            poll_interval: Duration::from_secs(1),
            flush_after: Duration::from_millis(500),
            max_line_bytes: 1 << 20,
            max_files: 256,
            patterns: Vec::new(),
        }
    }
}

impl LogConfig {
    /// The entry's id: its name, or the cluster name.
    pub(crate) fn id(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.cluster)
    }
}

/// Where to start reading a file first seen at daemon start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartAt {
    /// At its end: only what is written from now on.
    #[default]
    End,
    /// At its beginning: everything it holds.
    Beginning,
}

/// One `[[logs.patterns]]` entry: a user pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogPatternConfig {
    /// A name for messages.
    pub(crate) name: String,
    /// A regular expression over the message part of a line (after ` - `). Named captures
    /// `id`, `job`, `task`, `subtask`, `tm`, `dur` (ms), `bytes`, `reason`, `detail` fill the event.
    pub(crate) regex: Pattern,
    /// The event kind (the `kind` label): lower-case letters, digits and `_`.
    pub(crate) kind: String,
    /// `info`, `warning` or `error`.
    #[serde(default = "default_severity")]
    pub(crate) severity: crate::observe::EventSeverity,
}

fn default_severity() -> crate::observe::EventSeverity {
    crate::observe::EventSeverity::Warning
}
