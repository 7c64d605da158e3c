//! One-shot commands of the binary besides `run`: they may use everything, and nothing on the
//! daemon's side uses them.
//!
//! - [`advise`] — `advise`: each job's checkpoint configuration, findings and predictions.
//! - [`diagnose`] — `diagnose`: a one-shot report of a live cluster.
//! - [`look`] — a one-shot look through the daemon's pipeline (poller, state, rules, health),
//!   shared by `diagnose` and `advise`.
//! - [`simulate`] — `simulate`: what-if and replay of the coordinator model.
//! - [`scan_logs`] — `scan-logs`: the offline analysis of log files.
//! - [`demo`] — `demo`: a simulated Flink cluster driven by the model, watched by the real daemon.

pub mod advise;
pub mod demo;
pub mod diagnose;
pub mod look;
pub mod scan_logs;
pub mod simulate;
