//! The log tailer's vocabulary: events recognised in Flink's log lines with their kinds,
//! severities and root causes, the files' positions, trace spans and the tailers' reports.

/// How serious a log event is, by its kind (for the API and status page; not a metric label).
/// Not the line's log4j level, and unrelated to an alert's `rules::AlertSeverity`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EventSeverity {
    /// Routine: triggered, completed, restored, barrier received.
    Info,
    /// A checkpoint did not complete, or something held it up.
    Warning,
    /// The job fails because of checkpoints.
    Error,
}

/// The deepest `Caused by:` of a stack trace, classified.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RootCause {
    /// A fixed category (`disk_full`, `out_of_memory`, `timeout`, …): a metric label.
    #[serde(deserialize_with = "cause_category")]
    pub category: FixedLabel,
    /// The exception class, e.g. `java.io.IOException`.
    pub exception: String,
    /// Its message.
    pub message: String,
}

/// What a log event is: one of the kinds the built-in patterns recognise, or the kind of a
/// `[[logs.patterns]]` entry. Written as its name (the state file, the API, the `kind` label);
/// equal, hashed and ordered by that name, so a user pattern named like a built-in kind is
/// that kind.
#[derive(Clone, Debug)]
pub enum LogKind {
    /// The coordinator triggered a checkpoint.
    Triggered,
    /// A checkpoint completed.
    Completed,
    /// A checkpoint expired before completing.
    Expired,
    /// A task declined a checkpoint.
    Declined,
    /// The coordinator failed a checkpoint.
    Failed,
    /// A checkpoint could not be triggered.
    TriggerFailed,
    /// The job failed: too many checkpoints failed in a row.
    TolerableExceeded,
    /// A task acknowledged a checkpoint that had expired already.
    LateMessage,
    /// A newer barrier overtook the current checkpoint.
    BarrierOvertaken,
    /// An input ended before the current checkpoint completed.
    EndOfPartition,
    /// A subtask waited long between its barriers and its snapshot.
    ExecutionDelay,
    /// The asynchronous part of a snapshot failed.
    AsyncSnapshotFailed,
    /// The synchronous part of a snapshot failed.
    SyncSnapshotFailed,
    /// Pekko/Akka remoting dropped a message over the frame size (`pekko.framesize`): on a
    /// TaskManager's way to the JobManager, before FLINK-39738, a checkpoint's acknowledgement
    /// that is lost and lets the checkpoint expire. The line names no checkpoint: it is
    /// attached to the one it hurt (`state::ack_drops`).
    OversizedPayload,
    /// A TaskManager registered at a job's JobMaster (`…/user/rpc/jobmanager_N`): which job an
    /// oversized payload sent to that address belongs to.
    JobMasterRegistered,
    /// The job restored from a checkpoint or savepoint.
    Restored,
    /// A subtask received a barrier on a channel (DEBUG).
    BarrierReceived,
    /// A subtask waited for a barrier that did not come.
    BarrierMissing,
    /// A subtask has not acknowledged though everything downstream has: it is in its
    /// snapshot (synthesised from the REST API, never matched in a log).
    SnapshotSlow,
    /// A subtask with nothing downstream has not acknowledged (from the REST API).
    SubtaskPending,
    /// A `[[logs.patterns]]` kind (never a built-in name: [`LogKind::from_name`] sees to it).
    User(String),
}

impl LogKind {
    /// Every kind the built-in log patterns recognise, in the order reports list them.
    pub(crate) const BUILTIN: [LogKind; 18] = [
        LogKind::Triggered,
        LogKind::Completed,
        LogKind::Expired,
        LogKind::Declined,
        LogKind::Failed,
        LogKind::TriggerFailed,
        LogKind::TolerableExceeded,
        LogKind::LateMessage,
        LogKind::BarrierOvertaken,
        LogKind::EndOfPartition,
        LogKind::ExecutionDelay,
        LogKind::AsyncSnapshotFailed,
        LogKind::SyncSnapshotFailed,
        LogKind::OversizedPayload,
        LogKind::JobMasterRegistered,
        LogKind::Restored,
        LogKind::BarrierReceived,
        LogKind::BarrierMissing,
    ];

    /// The kinds only the poller synthesises, from what the REST API shows.
    pub(crate) const FROM_REST: [LogKind; 2] = [LogKind::SnapshotSlow, LogKind::SubtaskPending];

    /// The kind of that name: a built-in one, or a user pattern's.
    pub(crate) fn from_name(name: &str) -> LogKind {
        LogKind::BUILTIN
            .iter()
            .chain(&LogKind::FROM_REST)
            .find(|k| k.as_str() == name)
            .cloned()
            .unwrap_or_else(|| LogKind::User(name.to_string()))
    }

    /// Its name, as written.
    pub fn as_str(&self) -> &str {
        match self {
            LogKind::Triggered => "triggered",
            LogKind::Completed => "completed",
            LogKind::Expired => "expired",
            LogKind::Declined => "declined",
            LogKind::Failed => "failed",
            LogKind::TriggerFailed => "trigger_failed",
            LogKind::TolerableExceeded => "tolerable_exceeded",
            LogKind::LateMessage => "late_message",
            LogKind::BarrierOvertaken => "barrier_overtaken",
            LogKind::EndOfPartition => "end_of_partition",
            LogKind::ExecutionDelay => "execution_delay",
            LogKind::AsyncSnapshotFailed => "async_snapshot_failed",
            LogKind::SyncSnapshotFailed => "sync_snapshot_failed",
            LogKind::OversizedPayload => "oversized_payload",
            LogKind::JobMasterRegistered => "jobmaster_registered",
            LogKind::Restored => "restored",
            LogKind::BarrierReceived => "barrier_received",
            LogKind::BarrierMissing => "barrier_missing",
            LogKind::SnapshotSlow => "snapshot_slow",
            LogKind::SubtaskPending => "subtask_pending",
            LogKind::User(name) => name,
        }
    }

    /// Whether it happens on every healthy checkpoint (triggered, completed, a barrier received)
    /// or job (a TaskManager registering at its JobMaster).
    pub(crate) fn is_routine(&self) -> bool {
        matches!(
            self,
            LogKind::Triggered | LogKind::Completed | LogKind::BarrierReceived | LogKind::JobMasterRegistered
        )
    }
}

impl PartialEq for LogKind {
    fn eq(&self, other: &LogKind) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for LogKind {}

impl std::hash::Hash for LogKind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for LogKind {
    fn partial_cmp(&self, other: &LogKind) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for LogKind {
    fn cmp(&self, other: &LogKind) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::fmt::Display for LogKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for LogKind {
    fn eq(&self, name: &str) -> bool {
        self.as_str() == name
    }
}

impl PartialEq<&str> for LogKind {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl From<String> for LogKind {
    fn from(name: String) -> LogKind {
        LogKind::from_name(&name)
    }
}

impl From<&str> for LogKind {
    fn from(name: &str) -> LogKind {
        LogKind::from_name(name)
    }
}

impl std::str::FromStr for LogKind {
    type Err = std::convert::Infallible;

    fn from_str(name: &str) -> Result<LogKind, Self::Err> {
        Ok(LogKind::from_name(name))
    }
}

impl serde::Serialize for LogKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for LogKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<LogKind, D::Error> {
        <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)
            .map(|name| LogKind::from_name(&name))
    }
}

/// One checkpoint event recognised in a Flink log line (with the stack trace that followed it).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LogEvent {
    /// The configured cluster the log belongs to.
    pub cluster: String,
    /// What it is: a built-in kind or a `[[logs.patterns]]` one.
    pub kind: LogKind,
    /// `log` for a log line, `rest` for an event synthesised from the REST API.
    #[serde(deserialize_with = "event_source")]
    pub source: FixedLabel,
    /// How serious it is.
    pub(crate) severity: EventSeverity,
    /// The file it was read from.
    pub file: String,
    /// The line's own timestamp text (the writer's local time, as logged).
    pub logged_at: Option<String>,
    /// The message part of the line (bounded).
    pub message: String,
    /// Flink's job id, when the line names one.
    pub job_id: Option<String>,
    /// The checkpoint id.
    pub checkpoint_id: Option<u64>,
    /// The task (operator chain name, or the vertex id on JobManager lines).
    pub task: Option<String>,
    /// The subtask index, 0-based as in the REST API.
    pub subtask: Option<u32>,
    /// The TaskManager (location as Flink prints it).
    pub taskmanager: Option<String>,
    /// A duration the line states, ms (checkpoint duration, execution delay, wait time).
    pub duration_ms: Option<u64>,
    /// A size the line states, bytes.
    pub bytes: Option<u64>,
    /// `k` in "(k consecutive failed attempts so far)".
    pub consecutive_failures: Option<u32>,
    /// Why it failed, as Flink words it.
    pub reason: Option<String>,
    /// Kind-specific detail: the snapshot type, the input channel, what a restore used.
    pub detail: Option<String>,
    /// The classified deepest cause of the attached stack trace.
    pub root_cause: Option<RootCause>,
    /// The first lines of the attached stack trace (bounded).
    #[serde(default)]
    pub stack: Vec<String>,
}

/// A label from a fixed set (a metric label value), read back from text by interning. Named so
/// that serde's derive does not take the `&'static str` for text borrowed from its input.
pub(crate) type FixedLabel = &'static str;

/// The fixed source labels, read back from text (the persisted recent events).
pub(crate) fn intern_source(source: &str) -> &'static str {
    if source == "rest" { "rest" } else { "log" }
}

/// Whether an event's root cause counts as the cause of a checkpoint failure. The job failure
/// "Exceeded checkpoint tolerable failure threshold" is a consequence: its causes were counted
/// with the checkpoints that failed.
pub(crate) fn counts_root_cause(kind: &str) -> bool {
    kind != LogKind::TolerableExceeded.as_str()
}

/// Every category a root cause can get (the label values of the root-cause metric).
pub(crate) const CAUSE_CATEGORIES: &[&str] = &[
    "oversized_ack",
    "storage_throttled",
    "disk_full",
    "out_of_memory",
    "permission",
    "serialization",
    "closed_stream",
    "storage_error",
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

/// A root-cause category read back from text; an unknown one (from a newer version) is `other`.
pub(crate) fn intern_cause(category: &str) -> &'static str {
    CAUSE_CATEGORIES.iter().find(|c| **c == category).copied().unwrap_or("other")
}

fn event_source<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    <String as serde::Deserialize>::deserialize(d).map(|s| intern_source(&s))
}

fn cause_category<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    <String as serde::Deserialize>::deserialize(d).map(|s| intern_cause(&s))
}

/// Device and inode of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct FileId {
    /// Device number.
    pub(crate) dev: u64,
    /// Inode number.
    pub(crate) ino: u64,
}

/// Where a tailer stands in one file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FilePosition {
    /// Device and inode.
    pub(crate) id: FileId,
    /// How many leading bytes the fingerprint covers.
    pub(crate) head_len: usize,
    /// FNV-1a of those bytes.
    pub(crate) head_hash: u64,
    /// Every byte before this was turned into events.
    pub offset: u64,
    /// Where the file was last seen (for people reading the state file).
    pub(crate) path: String,
}

/// Where a tailer stands in every file it follows.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TailerPositions {
    /// When the tailer last listed the files, Unix ms: a file modified since then and not
    /// among `files` appeared after that listing and is read from its beginning.
    pub(crate) written_at_ms: i64,
    /// The files.
    pub files: Vec<FilePosition>,
}

impl LogEvent {
    /// An event of `kind` from a log line (`source` "log"), with nothing but its message known;
    /// the recogniser and the poller fill in what they extract.
    pub fn new(kind: LogKind, severity: EventSeverity, message: String) -> LogEvent {
        LogEvent {
            cluster: String::new(),
            kind,
            source: "log",
            severity,
            file: String::new(),
            logged_at: None,
            message,
            job_id: None,
            checkpoint_id: None,
            task: None,
            subtask: None,
            taskmanager: None,
            duration_ms: None,
            bytes: None,
            consecutive_failures: None,
            reason: None,
            detail: None,
            root_cause: None,
            stack: Vec::new(),
        }
    }
}

/// Cumulative counters of one log tailer; the latest report replaces the previous one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TailerReport {
    /// The cluster its `[[logs]]` entry is bound to.
    pub(crate) cluster: String,
    /// The entry's id (its `name`, or the cluster name).
    pub(crate) tailer: String,
    /// Bytes read.
    pub(crate) bytes: u64,
    /// Complete lines read.
    pub(crate) lines: u64,
    /// Files followed now.
    pub files: u64,
    /// Rotations seen (rename, copytruncate, delete and recreate).
    pub rotations: u64,
    /// Rotations after which lines may be missing: a file created and gone again before the
    /// tailer opened it (seen through file events), or a truncation whose copy it does not follow.
    pub rotation_gaps: u64,
    /// Lines longer than the line limit (cut, counted once each).
    pub oversize_lines: u64,
    /// Bytes written to followed files and not read yet.
    pub lag_bytes: u64,
    /// Errors reading files.
    pub(crate) errors: u64,
}
