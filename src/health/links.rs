//! The pages a finding points the reader to: Flink's documentation and the runbook's sections,
//! one place for every surface (`diagnose`, `scan-logs`, the headlines).

/// A page: its title and address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Doc {
    /// As the text cites it.
    pub title: &'static str,
    /// Its address.
    pub url: &'static str,
}

/// Flink: how to read the checkpoint statistics.
pub const MONITORING: Doc = Doc {
    title: "Flink: Monitoring Checkpointing",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/checkpoint_monitoring/",
};
/// Flink: slow snapshots and large state.
pub const LARGE_STATE: Doc = Doc {
    title: "Flink: Tuning Checkpoints and Large State",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/large_state_tuning/",
};
/// Flink: barriers under backpressure, unaligned checkpoints.
pub const UNDER_BACKPRESSURE: Doc = Doc {
    title: "Flink: Checkpointing under backpressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/checkpointing_under_backpressure/",
};
/// Flink: finding the backpressure's source.
pub const BACK_PRESSURE: Doc = Doc {
    title: "Flink: Monitoring Back Pressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/back_pressure/",
};
/// Flink: the checkpointing options.
pub const CONFIGURATION: Doc = Doc {
    title: "Flink: Configuration, checkpointing options",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/config/#checkpointing",
};
/// Flink: restart strategies (what a failover does).
pub const TASK_FAILURE_RECOVERY: Doc = Doc {
    title: "Flink: Task Failure Recovery",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/task_failure_recovery/",
};
/// The runbook: checkpoints that fail.
pub const RUNBOOK_FAILURES: Doc = Doc {
    title: "Runbook: FlinkCheckpointFailuresIncreasing",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointfailuresincreasing",
};
/// The runbook: a task thread held in user code.
pub const RUNBOOK_BLOCKED: Doc = Doc {
    title: "Runbook: FlinkCheckpointBlockedByUserCode",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointblockedbyusercode",
};
/// The runbook: the tolerable-failure budget.
pub const RUNBOOK_TOLERANCE: Doc = Doc {
    title: "Runbook: FlinkCheckpointToleranceNearlySpent",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointtolerancenearlyspent",
};
