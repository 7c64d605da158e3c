//! checkpoint-sentinel watches Apache Flink checkpoints live and explains what is slow and why.
//!
//! Crate map (see ARCHITECTURE.md for the invariants):
//! - [`time`] — `Timestamp`, time as a value.
//! - [`config`] — the configuration tree, loading and validation.
//! - [`observe`] — the observation vocabulary shared by sources and the model.
//! - [`flink`] — Flink's REST API: wire models, conversion, client.
//! - [`stats`] — sliding-window HDR histograms.
//! - [`model`] — the reference model of Flink's checkpoint coordinator and barrier alignment.
//! - [`shadow`] — the reference model run beside every job, explaining each deviation.
//! - [`state`] — what the daemon knows; `State::apply` and its durable form.
//! - [`store`] — the on-disk checkpoint store (every checkpoint and savepoint, by time).
//! - [`poller`] — the per-cluster REST poller.
//! - [`process`] — the daemon's own `process_*` figures from `/proc`.
//! - [`preflight`] — checks of a configuration against the machine (`check-config`, `run`).
//! - [`simulate`] — the `simulate` command (what-if and replay of the coordinator model).
//! - [`access`] — optional authentication of the HTTP endpoints.
//! - [`tls`] — HTTPS for the daemon's own listener.
//! - [`rules`] — rule conditions and the alert state machine.
//! - [`alerting`] — the Alertmanager client.
//! - [`logs`] — the log tailer and the offline log scan.
//! - [`export`] — the Prometheus collector.
//! - [`http`] — the HTTP routes.
//! - [`listener`] — bounds on the daemon's listener: connection cap, header and idle timeouts.
//! - [`api`] — the JSON API under `/api/v1/` as pure views of the state.
//! - [`diagnose`] — the one-shot `diagnose` command.
//! - [`app`] — state shared between tasks.
//! - [`daemon`] — wiring, reloads and shutdown.
//! - [`discovery`] — clusters found in files (Prometheus `file_sd`), watched for changes.
//! - [`kubernetes`] — clusters found by watching the Kubernetes API (Flink's services, the operator's resources).
//! - [`demo`] — a simulated Flink cluster driven by the model, watched by the real daemon.
//! - [`telemetry`] — logging.

pub mod access;
pub mod alerting;
pub mod api;
pub mod app;
pub mod config;
pub mod daemon;
pub mod demo;
pub mod diagnose;
pub mod discovery;
pub mod export;
pub mod flink;
pub mod http;
pub mod kubernetes;
pub mod listener;
pub mod logs;
pub mod model;
pub mod observe;
pub mod poller;
pub mod preflight;
pub mod process;
pub mod rules;
pub mod shadow;
pub mod simulate;
pub mod state;
pub mod stats;
pub mod store;
pub mod telemetry;
pub mod time;
pub mod tls;
