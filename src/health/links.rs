//! The pages a finding points the reader to: Flink's documentation and the runbook's sections,
//! one place for every surface (`diagnose`, `scan-logs`, the headlines).

/// A page: its title and address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Doc {
    /// As the text cites it.
    pub(crate) title: &'static str,
    /// Its address.
    pub(crate) url: &'static str,
}

/// Flink: how to read the checkpoint statistics.
pub(crate) const MONITORING: Doc = Doc {
    title: "Flink: Monitoring Checkpointing",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/checkpoint_monitoring/",
};
/// Flink: slow snapshots and large state.
pub(crate) const LARGE_STATE: Doc = Doc {
    title: "Flink: Tuning Checkpoints and Large State",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/large_state_tuning/",
};
/// Flink: barriers under backpressure, unaligned checkpoints.
pub(crate) const UNDER_BACKPRESSURE: Doc = Doc {
    title: "Flink: Checkpointing under backpressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/checkpointing_under_backpressure/",
};
/// Flink: finding the backpressure's source.
pub(crate) const BACK_PRESSURE: Doc = Doc {
    title: "Flink: Monitoring Back Pressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/back_pressure/",
};
/// Flink: the checkpointing options.
pub(crate) const CONFIGURATION: Doc = Doc {
    title: "Flink: Configuration, checkpointing options",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/config/#checkpointing",
};
/// The runbook: checkpoints that fail.
pub(crate) const RUNBOOK_FAILURES: Doc = Doc {
    title: "Runbook: FlinkCheckpointFailuresIncreasing",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointfailuresincreasing",
};
/// The runbook: the tolerable-failure budget.
pub(crate) const RUNBOOK_TOLERANCE: Doc = Doc {
    title: "Runbook: FlinkCheckpointToleranceNearlySpent",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointtolerancenearlyspent",
};
