//! The log tailer: follows Flink JobManager/TaskManager log files and turns checkpoint lines into
//! `Observation::LogEvents`, rotation-safe and resuming exactly where it stopped.
//!
//! * [`parse`]: pure line recognition, stack-trace grouping and root-cause classification.
//! * [`offsets`]: file fingerprints and the atomically persisted read positions.
//! * [`tail`]: the follower (metadata polling, `notify` events as a wake-up hint).
//!
//! The offline analysis behind `checkpoint-sentinel scan-logs` is a command:
//! [`crate::commands::scan_logs`].

pub mod offsets;
pub mod parse;
pub mod tail;
