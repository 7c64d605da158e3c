//! The counters' types the runtime keeps for the sources and the outputs (the listener, the
//! Alertmanager targets, discovery), so that `app` imports neither layer: they fill them, the
//! exporter reads them through `AppState`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};

use crate::config::KUBERNETES_KINDS;

/// Why the daemon closed a connection ([`ListenerStats::closed`]).
pub(crate) const CLOSE_REASONS: [&str; 2] = ["header_timeout", "idle_timeout"];

/// Why a TLS handshake on the daemon's port failed: a plain `http://` request, a client that
/// broke it off or did not trust the certificate (or offered none that mutual TLS accepts),
/// a client that did not finish in time.
pub(crate) const TLS_HANDSHAKE_ERRORS: [&str; 3] = ["plain_http", "failed", "timeout"];

/// The counters of the daemon's port, kept by the listener (and the TLS listener inside it) and
/// read by the exporter through `AppState::listener`.
#[derive(Debug, Default)]
pub struct ListenerStats {
    /// Connections open now.
    pub connections: AtomicI64,
    /// Connections the daemon closed, in the order of [`CLOSE_REASONS`].
    pub closed: [AtomicU64; 2],
    /// Whether the port serves TLS.
    pub(crate) tls_serving: AtomicBool,
    /// Failed TLS handshakes, in the order of [`TLS_HANDSHAKE_ERRORS`].
    pub(crate) tls_handshake_errors: [AtomicU64; 3],
}

/// Delivery counters of one Alertmanager, for metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct TargetStats {
    /// The Alertmanager's URL.
    pub(crate) url: String,
    /// Successful posts.
    pub(crate) sent_total: u64,
    /// Failed posts.
    pub(crate) errors_total: u64,
    /// Resolved alerts waiting for delivery.
    pub(crate) queued: usize,
}

/// What the last reading of the files gave, for metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DiscoveryStats {
    /// Clusters discovered and handed to the daemon.
    pub(crate) clusters: usize,
    /// Targets left out at the last reading, by reason (`limit`, `duplicate`, `invalid`).
    pub(crate) dropped: [(&'static str, u64); 3],
    /// Failed file reads since start, by reason (`too_large`, `unreadable`, `invalid`,
    /// `too_many_files`).
    pub(crate) file_errors: [(&'static str, u64); 4],
    /// What Kubernetes discovery did, when it is on.
    pub(crate) kubernetes: Option<KubernetesStats>,
}

/// What the operator's status says of a job, for `flink_operator_*` series. Label values are
/// bounded: states outside the CRD's enums become `other`, an odd job id is left empty.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct OperatorJob {
    /// The discovered cluster's name.
    pub(crate) cluster: String,
    /// `flinkdeployment/<name>` or `flinksessionjob/<name>`.
    pub(crate) resource: String,
    /// `status.jobStatus.jobId` (empty when none yet).
    pub(crate) job_id: String,
    /// `status.jobStatus.state` (RUNNING, FAILED, …; empty when none yet).
    pub(crate) state: String,
    /// `status.lifecycleState` (STABLE, UPGRADING, …; empty when none yet).
    pub(crate) lifecycle_state: String,
    /// `status.jobStatus.savepointInfo.lastSavepoint.timeStamp`, epoch milliseconds.
    pub(crate) last_savepoint_ms: Option<i64>,
}

/// Reasons a watch reported an error.
pub(crate) const ERROR_REASONS: [&str; 6] =
    ["client", "list", "watch_start", "watch_stream", "gone", "api_error"];

/// What the watches did, for metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct KubernetesStats {
    /// Objects kept, by kind ([`KUBERNETES_KINDS`] order).
    pub(crate) objects: [u64; 3],
    /// Objects cut (beyond `max_objects`), by kind, since start.
    pub(crate) cut: [u64; 3],
    /// Re-lists after the first listing (a watch that could not resume), by kind.
    pub(crate) relists: [u64; 3],
    /// Errors by kind and reason ([`ERROR_REASONS`] order).
    pub(crate) errors: [[u64; 6]; 3],
    /// Whether every watch has listed its objects completely at least once.
    pub(crate) synced: bool,
    /// Clusters from Kubernetes among the discovered clusters polled (set by discovery).
    pub(crate) clusters: usize,
    /// What the operator says of each job kept (FlinkDeployments, FlinkSessionJobs), in order.
    pub(crate) jobs: Vec<OperatorJob>,
}

impl KubernetesStats {
    /// The `kind` label of each position of the per-kind arrays.
    pub(crate) fn kind_names(&self) -> [&'static str; 3] {
        KUBERNETES_KINDS
    }

    /// The `reason` label of each position of an `errors` row.
    pub(crate) fn error_reasons(&self) -> [&'static str; 6] {
        ERROR_REASONS
    }
}
