//! What a deviation is attributed to (`DeviationKind`, a metric label), one deviation with its
//! sentence, and the coordinator's rules by the names Flink's documentation gives them.

use crate::model::coordinator::Binding;
use crate::time::Timestamp;

/// What a deviation is attributed to. A bounded set: it is a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviationKind {
    /// The minimum pause after the previous checkpoint set the trigger.
    MinPause,
    /// `max-concurrent` (> 1) checkpoints were pending; the trigger waited for a slot.
    MaxConcurrent,
    /// The previous checkpoint outlasted the interval and max-concurrent 1 held the trigger.
    LongCheckpoint,
    /// The previous checkpoint expired at its timeout and held the slot until then.
    Timeout,
    /// The job restarted after the tolerable-failure budget was consumed.
    TolerableFailures,
    /// The job restarted (task failure, failover) and the scheduler started again.
    JobRestart,
    /// The job was rescaled (its parallelism changed; the adaptive scheduler's rescale waits for
    /// a completed checkpoint) and the new execution's scheduler started again.
    Rescale,
    /// A savepoint ran in between and held the slot.
    Savepoint,
    /// A checkpoint came earlier than any rule allows: a manual trigger.
    ManualTrigger,
    /// The interval during backlog (FLIP-309) set the trigger: a source reports backlog, or
    /// stopped reporting it and Flink rescheduled the next trigger one interval later.
    BacklogInterval,
    /// A trigger came late and no rule explains it.
    LateTrigger,
    /// A checkpoint outlived its timeout.
    NotExpired,
    /// Checkpoint ids advanced by more than Flink counted checkpoints.
    IdSkip,
}

impl DeviationKind {
    /// Every kind, in label order.
    pub(crate) const ALL: [DeviationKind; 13] = [
        DeviationKind::MinPause,
        DeviationKind::MaxConcurrent,
        DeviationKind::LongCheckpoint,
        DeviationKind::Timeout,
        DeviationKind::TolerableFailures,
        DeviationKind::JobRestart,
        DeviationKind::Rescale,
        DeviationKind::Savepoint,
        DeviationKind::ManualTrigger,
        DeviationKind::BacklogInterval,
        DeviationKind::LateTrigger,
        DeviationKind::NotExpired,
        DeviationKind::IdSkip,
    ];

    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DeviationKind::MinPause => "min_pause",
            DeviationKind::MaxConcurrent => "max_concurrent",
            DeviationKind::LongCheckpoint => "long_checkpoint",
            DeviationKind::Timeout => "timeout",
            DeviationKind::TolerableFailures => "tolerable_failures",
            DeviationKind::JobRestart => "job_restart",
            DeviationKind::Rescale => "rescale",
            DeviationKind::Savepoint => "savepoint",
            DeviationKind::ManualTrigger => "manual_trigger",
            DeviationKind::BacklogInterval => "backlog_interval",
            DeviationKind::LateTrigger => "late_trigger",
            DeviationKind::NotExpired => "not_expired",
            DeviationKind::IdSkip => "id_skip",
        }
    }

    /// Whether a rule or an observed event explains deviations of this kind.
    pub fn explained(self) -> bool {
        !matches!(self, DeviationKind::LateTrigger | DeviationKind::NotExpired | DeviationKind::IdSkip)
    }
}

/// One deviation with its explanation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Deviation {
    /// The checkpoint it is about.
    pub checkpoint_id: u64,
    /// Its trigger time (or, for `not_expired` and `id_skip`, when it was noticed); `at_ms` in
    /// the API, like every other time.
    #[serde(rename = "at_ms")]
    pub at: Timestamp,
    /// What it is attributed to.
    pub kind: DeviationKind,
    /// Whether a rule explains it.
    pub explained: bool,
    /// One sentence with the numbers.
    pub sentence: String,
}

pub(super) fn rule_name(binding: Binding) -> &'static str {
    match binding {
        Binding::Initial | Binding::Interval => "interval",
        Binding::MinPause => "min-pause",
        Binding::MaxConcurrent => "max-concurrent",
        Binding::Timeout => "timeout",
    }
}
