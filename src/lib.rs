//! checkpoint-sentinel watches Apache Flink checkpoints live and explains what is slow and why.
//!
//! Crate map, in the order data flows (see ARCHITECTURE.md for the invariants):
//! - [`time`] — `Timestamp`, time as a value.
//! - [`observe`] — the observation vocabulary shared by sources and the model.
//! - [`stats`] — sliding-window HDR histograms.
//! - [`config`] — the configuration tree, loading and validation.
//! - [`preflight`] — checks of a configuration against the machine (`check-config`, `run`).
//! - [`sources`] — I/O in: Flink's REST API and the poller, file and Kubernetes discovery, the log tailer.
//! - [`state`] — what the daemon knows; `State::apply`, its durable form and the checkpoint store.
//! - [`model`] — the reference model of Flink's checkpoint coordinator and barrier alignment.
//! - [`shadow`] — the reference model run beside every job, explaining each deviation.
//! - [`rules`] — rule conditions and the alert state machine.
//! - [`health`] — is a job healthy, and which subtask holds its checkpoints up.
//! - [`outputs`] — I/O out: `/metrics`, the JSON API, HTTP(S), access, Alertmanager.
//! - [`app`] — state shared between the daemon's tasks; [`counters`], the counters' types it keeps
//!   for sources and outputs; `process`, the daemon's own process figures.
//! - [`outbound`] — what the daemon's outgoing HTTP requests share: credentials on a request.
//! - [`daemon`] — wiring, reloads and shutdown.
//! - [`telemetry`] — logging and build facts.
//! - [`heap`] — allocator settings that keep the RSS close to the live heap.
//! - [`open_files`] — the soft limit of open files raised to the hard one at start.
//! - [`advice`] — the advisor: configuration findings with the model's prediction.
//! - [`commands`] — the one-shot commands: `diagnose`, `advise`, `simulate`, `scan-logs`, `demo`.

pub mod advice;
pub mod app;
pub mod commands;
pub mod config;
pub mod counters;
pub mod daemon;
pub mod health;
pub mod heap;
pub mod model;
pub mod observe;
pub mod open_files;
pub(crate) mod outbound;
pub mod outputs;
pub mod preflight;
pub(crate) mod process;
pub mod rules;
pub mod shadow;
pub mod sources;
pub mod state;
pub mod stats;
pub mod telemetry;
pub mod time;
