//! Sources: the I/O edges that read the outside world and turn it into `observe` values.
//!
//! - [`flink`] — Flink's REST API: wire models, their conversion, the HTTP client.
//! - [`poller`] — the per-cluster REST poller.
//! - [`discovery`] — clusters found in files (Prometheus `file_sd`), watched for changes.
//! - [`logs`] — the log tailer: JM/TM log files to checkpoint events.

pub mod discovery;
pub mod flink;
pub mod logs;
pub mod poller;
