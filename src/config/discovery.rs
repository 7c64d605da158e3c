//! `[discovery]`: the clusters found in `file_sd` files or the Kubernetes API, with the
//! settings (`[discovery.defaults]`) every discovered cluster gets. Their checks are
//! `checks.rs`'s (they are checked as the cluster they make); the discovering itself is
//! `sources::discovery` and `sources::kubernetes`.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::clusters::ClusterConfig;
use super::credentials::{BasicAuth, Secret};
use super::kubernetes::KubernetesConfig;
use super::logs::LogConfig;
use super::patterns::Pattern;

/// `[discovery]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryConfig {
    /// Glob patterns of JSON or YAML (`.yml`, `.yaml`) files in Prometheus' `file_sd` format
    /// (empty: discovery off).
    pub files: Vec<String>,
    /// Every file is re-read this often as well, in case a change event was missed.
    #[serde(with = "humantime_serde")]
    pub refresh_interval: Duration,
    /// At most this many discovered clusters; targets beyond are left out (in the order of
    /// file paths, then of the files' entries) and counted.
    pub(crate) max_clusters: usize,
    /// At most this many files are read (in path order); the others are counted as errors.
    pub(crate) max_files: usize,
    /// A larger file is not read (a warning and an error count; what it gave before is kept).
    pub(crate) max_file_bytes: u64,
    /// The settings of every discovered cluster.
    pub defaults: DiscoveryDefaults,
    /// `[discovery.kubernetes]`: Kubernetes discovery (src/sources/kubernetes.rs).
    pub kubernetes: KubernetesConfig,
}

impl Default for DiscoveryConfig {
    fn default() -> Self {
        DiscoveryConfig {
            files: Vec::new(),
            refresh_interval: Duration::from_secs(30),
            max_clusters: 1000,
            max_files: 1000,
            max_file_bytes: 1 << 20,
            defaults: DiscoveryDefaults::default(),
            kubernetes: Default::default(),
        }
    }
}

/// `[discovery.defaults]`: what a `[[clusters]]` entry would say, for every discovered cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryDefaults {
    /// `http` or `https`, for targets given as `host:port` (a target's `__scheme__` label wins).
    pub(crate) scheme: String,
    /// How often to poll.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Timeout of each HTTP request.
    #[serde(with = "humantime_serde")]
    pub(crate) timeout: Duration,
    /// Requests in flight to each cluster (unset: chosen each round, as for `[[clusters]]`).
    pub(crate) max_concurrent_requests: Option<usize>,
    /// HTTP basic authentication.
    pub(crate) basic_auth: Option<BasicAuth>,
    /// A bearer token.
    pub(crate) bearer_token: Option<Secret>,
    /// A PEM file with extra CA certificates for HTTPS.
    pub(crate) ca_file: Option<PathBuf>,
    /// Regular expressions over job names: watch only matching jobs (empty: all).
    pub(crate) include_jobs: Vec<Pattern>,
    /// Regular expressions over job names: never watch matching jobs.
    pub(crate) exclude_jobs: Vec<Pattern>,
    /// As `pending_subtask_after` of `[[clusters]]`.
    pub(crate) pending_subtask_after: f64,
    /// As `max_response_bytes` of `[[clusters]]`.
    pub(crate) max_response_bytes: u64,
    /// As `max_jobs` of `[[clusters]]`.
    pub(crate) max_jobs: usize,
    /// As `max_history_per_poll` of `[[clusters]]`.
    pub(crate) max_history_per_poll: usize,
    /// As `shard_jobs` of `[[clusters]]`: every discovered cluster's jobs are shared out
    /// between the replicas of a sharded deployment.
    pub(crate) shard_jobs: bool,
    /// `[discovery.defaults.logs]`: a `[[logs]]` entry for every discovered cluster, its
    /// `paths` templates in which `{cluster}` is the cluster's name (`cluster` and `name` are
    /// left out: they are the discovered cluster's).
    pub logs: Option<LogConfig>,
}

impl Default for DiscoveryDefaults {
    fn default() -> Self {
        let c = ClusterConfig::default();
        DiscoveryDefaults {
            scheme: "http".to_string(),
            poll_interval: c.poll_interval,
            timeout: c.timeout,
            max_concurrent_requests: c.max_concurrent_requests,
            basic_auth: c.basic_auth,
            bearer_token: c.bearer_token,
            ca_file: c.ca_file,
            include_jobs: c.include_jobs,
            exclude_jobs: c.exclude_jobs,
            pending_subtask_after: c.pending_subtask_after,
            max_response_bytes: c.max_response_bytes,
            max_jobs: c.max_jobs,
            max_history_per_poll: c.max_history_per_poll,
            shard_jobs: c.shard_jobs,
            logs: None,
        }
    }
}

impl DiscoveryDefaults {
    /// The cluster `name` at `url` with these settings.
    pub(crate) fn cluster(&self, name: &str, url: &str) -> ClusterConfig {
        ClusterConfig {
            name: name.to_string(),
            url: url.to_string(),
            poll_interval: self.poll_interval,
            timeout: self.timeout,
            max_concurrent_requests: self.max_concurrent_requests,
            basic_auth: self.basic_auth.clone(),
            bearer_token: self.bearer_token.clone(),
            ca_file: self.ca_file.clone(),
            include_jobs: self.include_jobs.clone(),
            exclude_jobs: self.exclude_jobs.clone(),
            pending_subtask_after: self.pending_subtask_after,
            max_response_bytes: self.max_response_bytes,
            max_jobs: self.max_jobs,
            max_history_per_poll: self.max_history_per_poll,
            shard_jobs: self.shard_jobs,
            job_shard: None,
            storage_paths: Vec::new(),
        }
    }
}

/// The placeholder of `[discovery.defaults.logs] paths`.
pub const CLUSTER_PLACEHOLDER: &str = "{cluster}";

impl DiscoveryDefaults {
    /// The `[[logs]]` entries of `discovered` clusters from the `logs` template (none without
    /// one): each cluster's `{cluster}` filled in, bounded as a `[[logs]]` entry is (`max_files`
    /// files each, one entry per cluster, so at most `max_clusters` tailers). Left out, with a
    /// warning: a cluster named `.` or `..` (it would climb out of the templated directory),
    /// and one whose name a `[[logs]]` entry's `name` already takes (`taken`). In a sharded
    /// deployment a cluster whose jobs are shared out has its logs followed by the cluster's
    /// owner only, as `[[logs]]`.
    pub(crate) fn logs_of(&self, discovered: &[ClusterConfig], taken: &BTreeSet<String>) -> Vec<LogConfig> {
        let Some(template) = &self.logs else { return Vec::new() };
        discovered
            .iter()
            .filter(|c| c.job_shard.is_none_or(|s| s.owns(&c.name)))
            .filter(|c| {
                let ok = c.name != "." && c.name != ".." && !taken.contains(&c.name);
                if !ok {
                    tracing::warn!(cluster = %c.name, "discovered cluster's logs not followed: its name is `.`, `..` or a [[logs]] entry's name");
                }
                ok
            })
            .map(|c| LogConfig {
                cluster: c.name.clone(),
                name: None,
                paths: template.paths.iter().map(|p| p.replace(CLUSTER_PLACEHOLDER, &c.name)).collect(),
                ..template.clone()
            })
            .collect()
    }
}

/// Most discovered clusters `max_clusters` may allow.
pub const MAX_CLUSTERS_LIMIT: usize = 100_000;

impl DiscoveryConfig {
    /// Whether any file or the Kubernetes API is to be watched.
    pub(crate) fn enabled(&self) -> bool {
        !self.files.is_empty() || self.kubernetes.enabled
    }
}
