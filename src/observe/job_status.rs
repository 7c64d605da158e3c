//! A job's status metrics as its Flink serves them (`/jobs/:id/metrics`), each with the name it
//! was read under: 2.x's where the job lists them, the 1.x ones they replaced elsewhere.

/// A job's status metrics, each with the name it was read under.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct JobStatusMetrics {
    /// Restarts since the job was submitted (`numRestarts`, 1.x `fullRestarts`).
    pub restarts: Option<(u64, &'static str)>,
    /// Time in RUNNING since the last restart, ms (`runningTime`, 1.x `uptime`).
    pub running_ms: Option<(u64, &'static str)>,
    /// Time in RESTARTING now, ms (`restartingTime`, 1.x `downtime`: FAILING or RESTARTING).
    pub restarting_ms: Option<(u64, &'static str)>,
    /// The last checkpoint's `_metadata` size, bytes (2.x).
    pub last_metadata_bytes: Option<u64>,
    /// Time in CANCELLING now, ms (`cancellingTime`; 1.20.5 and 2.3.0 list it, 1.14.6 does not).
    pub cancelling_ms: Option<(u64, &'static str)>,
    /// Time in FAILING now, ms (`failingTime`; 1.20.5 and 2.3.0 list it, 1.14.6 does not).
    pub failing_ms: Option<(u64, &'static str)>,
}
