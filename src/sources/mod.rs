//! Sources: the I/O edges that read the outside world and turn it into `observe` values.
//!
//! - [`flink`] — Flink's REST API: wire models, their conversion, the HTTP client.
//! - [`poller`] — the per-cluster REST poller.
//! - [`evidence`] — the per-cluster evidence rounds (Flink's metrics endpoints).
//! - [`discovery`] — clusters found in files (Prometheus `file_sd`), watched for changes.
//! - [`file_sd`] — one such file read group by group, within the target cap.
//! - [`kubernetes`] — clusters found by watching the Kubernetes API (Flink's services, the operator's resources).
//! - [`target`] — a discovered cluster (name, REST URL), what both discoveries give.
//! - [`logs`] — the log tailer: JM/TM log files to checkpoint events.
//! - [`storage`] — the per-cluster storage rounds: the jobs' checkpoint directories listed.

pub(crate) mod discovery;
pub(crate) mod evidence;
pub mod file_sd;
pub mod flink;
pub mod kubernetes;
pub mod logs;
pub mod poller;
pub(crate) mod storage;
pub(crate) mod target;
pub(crate) mod threads;
