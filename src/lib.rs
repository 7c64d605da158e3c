//! checkpoint-sentinel watches Apache Flink checkpoints live and explains what is slow and why.
//!
//! Crate map (see ARCHITECTURE.md for the invariants):
//! - [`time`]: `Timestamp`, time as a value.
//! - [`config`]: the configuration tree, loading and validation.
//! - [`observe`]: the observation vocabulary shared by sources and the model.
//! - [`flink`]: Flink's REST API: wire models, conversion, client.
//! - [`stats`]: sliding-window HDR histograms.
//! - [`model`]: the reference model of Flink's checkpoint coordinator and barrier alignment.
//! - [`state`]: what the daemon knows; `State::apply` and its durable form.
//! - [`poller`]: the per-cluster REST poller.
//! - [`logs`]: the log tailer and the offline log scan.
//! - [`export`]: the Prometheus collector.
//! - [`http`]: the HTTP routes.
//! - [`app`]: state shared between tasks.
//! - [`daemon`]: wiring, reloads and shutdown.
//! - [`telemetry`]: logging.

pub mod app;
pub mod config;
pub mod daemon;
pub mod export;
pub mod flink;
pub mod http;
pub mod model;
pub mod logs;
pub mod observe;
pub mod poller;
pub mod state;
pub mod stats;
pub mod telemetry;
pub mod time;
