//! Failure texts that say the job was stopping or not running rather than that a checkpoint
//! failed: the failure reasons of a coordinator that suspends or shuts down, and the phrases of a
//! cancelled task or of tasks not running yet.

/// Whether a failure message says the job was stopping (cancel, stop, suspend, failover): the
/// coordinator aborted what was pending. Such a failure says nothing about the checkpoints, so
/// it does not count as one of the job's consecutive failures (Flink's failure manager does not
/// count it towards the tolerable failures either).
pub fn is_stop_failure(message: Option<&str>) -> bool {
    use crate::observe::FailureReason;
    matches!(
        message.and_then(FailureReason::from_message),
        Some(FailureReason::CheckpointCoordinatorSuspend | FailureReason::CheckpointCoordinatorShutdown)
    )
}

/// Phrases of a failure that comes from the job stopping or (re)starting rather than from the
/// checkpoint: Flink's `CheckpointCoordinator.stopCheckpointScheduler` ("Checkpoint Coordinator
/// is suspending."), its shutdown, a task cancelled, tasks not running yet.
const SHUTDOWN_FAILURES: &[&str] = &[
    "Checkpoint Coordinator is suspending",
    "CheckpointCoordinator shutdown",
    "Task received cancellation",
    "not being executed at the moment",
    "Not all required tasks are currently running",
];

/// Whether a failure text names the job stopping or not running rather than the checkpoint.
pub fn is_shutdown_failure(text: &str) -> bool {
    SHUTDOWN_FAILURES.iter().any(|p| text.contains(p))
}
