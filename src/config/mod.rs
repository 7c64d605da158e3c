//! Configuration: a TOML file plus `SENTINEL_…` environment overrides, strict and validated.
//!
//! Every value has a default in code (`Config::default()`); `config/checkpoint-sentinel.toml`
//! is the fully commented reference and a test checks it parses to exactly these defaults.
//! Environment variables override the file: `SENTINEL_SERVER__LISTEN=0.0.0.0:9717` sets
//! `server.listen` (prefix `SENTINEL_`, `__` between levels).
//!
//! This file is the tree's root (`Config` and its small sections) and the crate's one path to
//! every type of it; the larger sections, the loading and the checks are files of their own.
//! The files below the root never import it back (tests/layering.rs): `load` and `checks`
//! (which read and check a whole `Config`) sit above it and are not re-exported.

mod checks;
mod clusters;
mod credentials;
mod discovery;
mod kubernetes;
mod load;
mod logs;
mod patterns;
mod rules;
mod shard;
mod thread_dumps;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use clusters::ClusterConfig;
pub(crate) use credentials::{BasicAuth, Credentials, Secret, redact_url};
pub use discovery::{CLUSTER_PLACEHOLDER, DiscoveryConfig, DiscoveryDefaults, MAX_CLUSTERS_LIMIT};
pub use kubernetes::{KUBERNETES_KINDS, KubernetesConfig, MAX_OBJECTS_LIMIT, render_url};
pub use logs::{LogConfig, LogPatternConfig, StartAt};
pub(crate) use patterns::Pattern;
pub(crate) use rules::ConfiguredRule;
pub use shard::Shard;
pub(crate) use thread_dumps::ThreadDumpsConfig;

/// `profile`: defaults for a kind of deployment, set under the file's own keys (a key the file
/// sets wins) and over the built-in defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// 2,000 to 10,000 jobs per replica (docs/deployment.md, "How many jobs per replica"): no
    /// per-operator series, the quantiles the alerts read, 8 recent checkpoints and 30 P95
    /// points per job.
    LargeEstate,
}

impl Profile {
    /// Every profile by its name in the file.
    pub(crate) const ALL: [(&'static str, Profile); 1] = [("large-estate", Profile::LargeEstate)];

    /// The keys the profile sets (dotted, as in the file) and their values.
    pub(crate) fn defaults(self) -> Vec<(&'static str, config::Value)> {
        match self {
            Profile::LargeEstate => vec![
                ("metrics.operators", false.into()),
                ("metrics.quantiles", vec![0.5, 0.95].into()),
                ("state.recent_checkpoints", 8_i64.into()),
                ("state.p95_history_points", 30_i64.into()),
            ],
        }
    }
}

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// A named set of defaults (`profile = "large-estate"`): the keys it sets are defaults
    /// under the file's own ([`Profile`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// The HTTP server: `/metrics`, `/healthz`, `/readyz`.
    pub server: ServerConfig,
    /// The Flink clusters to watch.
    pub clusters: Vec<ClusterConfig>,
    /// Statistics windows.
    pub stats: StatsConfig,
    /// Durable state.
    pub state: StateConfig,
    /// The checkpoint store: every checkpoint and savepoint seen, kept beyond Flink's history.
    pub store: StoreConfig,
    /// Flink log files to follow, each entry bound to a cluster.
    #[serde(default)]
    pub logs: Vec<LogConfig>,
    /// Rule evaluation and Alertmanager delivery.
    pub alerting: AlertingConfig,
    /// Rules of your own, in addition to (or instead of) the built-in pack.
    pub rules: Vec<ConfiguredRule>,
    /// What `/metrics` exports: its cardinality.
    pub metrics: MetricsConfig,
    /// Clusters found in files (Prometheus `file_sd`), beside the `[[clusters]]` entries.
    pub discovery: DiscoveryConfig,
    /// Looking at the thread of a subtask that holds a checkpoint about to expire.
    pub thread_dumps: ThreadDumpsConfig,
    /// Why checkpoints are slow, from Flink's metrics endpoints (subtasks, TaskManagers).
    pub evidence: EvidenceConfig,
    /// The jobs' checkpoint storage, listed (`sources::storage`).
    pub storage: StorageConfig,
}

/// `[storage]`: listing the jobs' checkpoint directories (`sources::storage`). Local and mounted
/// paths need nothing more; `s3://`, `gs://`, `az://`/`abfs://` take their credentials from the
/// environment as their SDKs do (`AWS_*`, instance roles and web identity; `GOOGLE_*`;
/// `AZURE_*`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// List the storage at all.
    pub enabled: bool,
    /// Also list object stores (`s3://`, `gs://`, Azure); off lists only local and mounted
    /// paths (`file:`), which cost nothing.
    pub object_stores: bool,
    /// How often a round runs per cluster (at least 10 s).
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// At most this many list requests per round per cluster (a request is a page of up to
    /// 1,000 entries, S3's page, or a local directory walk); what is left waits for later
    /// rounds, counted in `checkpoint_sentinel_storage_requests_total{outcome="cut"}`.
    pub max_requests_per_round: usize,
    /// A job's directory is read up to this many entries (the rest counted as cut).
    pub max_entries_per_job: usize,
    /// Timeout of each request.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
}

impl StorageConfig {
    /// The shortest interval taken.
    pub const MIN_INTERVAL: Duration = Duration::from_secs(10);
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            enabled: true,
            object_stores: true,
            interval: Duration::from_secs(60),
            max_requests_per_round: 20,
            max_entries_per_job: 20_000,
            timeout: Duration::from_secs(10),
        }
    }
}

/// `[evidence]`: the metrics read beside the checkpoints (`sources::evidence`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EvidenceConfig {
    /// Read the evidence at all.
    pub(crate) enabled: bool,
    /// How often a round runs per cluster; at least [`EvidenceConfig::MIN_INTERVAL`], Flink's
    /// own metric fetcher's default (`metrics.fetcher.update-interval`): faster reads the same
    /// numbers again.
    #[serde(with = "humantime_serde")]
    pub(crate) interval: Duration,
    /// At most this many requests per round per cluster; the rest wait for later rounds
    /// (counted in `checkpoint_sentinel_evidence_requests_total{outcome="cut"}`).
    pub(crate) max_requests_per_round: usize,
}

impl EvidenceConfig {
    /// The shortest interval taken.
    pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(10);
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        EvidenceConfig { enabled: true, interval: Self::MIN_INTERVAL, max_requests_per_round: 8 }
    }
}

/// `[metrics]`: per-operator series or not, and the quantiles of every summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Export the `flink_operator_checkpoint_*` summaries (five per operator chain); without
    /// them the state keeps no per-operator histograms either.
    pub(crate) operators: bool,
    /// The quantiles of every summary, among 0.5, 0.95 and 0.99 (empty: `_sum` and `_count`
    /// only).
    pub(crate) quantiles: Vec<f64>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { operators: true, quantiles: crate::stats::QUANTILES.to_vec() }
    }
}

impl MetricsConfig {
    /// For each of [`crate::stats::QUANTILES`], whether it is exported.
    pub(crate) fn shown_quantiles(&self) -> [bool; 3] {
        crate::stats::QUANTILES.map(|q| self.quantiles.contains(&q))
    }
}

/// `[alerting]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertingConfig {
    /// Alertmanager base URLs; alerts go to every one of them (v2 API).
    pub(crate) alertmanagers: Vec<String>,
    /// How often rules are evaluated.
    #[serde(with = "humantime_serde")]
    pub evaluation_interval: Duration,
    /// How often firing alerts are re-sent (well under Alertmanager's `resolve_timeout`).
    #[serde(with = "humantime_serde")]
    pub(crate) resend_interval: Duration,
    /// Timeout of each request to an Alertmanager.
    #[serde(with = "humantime_serde")]
    pub(crate) timeout: Duration,
    /// The daemon's URL as users reach it, for alerts' `generatorURL` (default: the listen address).
    pub(crate) external_url: Option<String>,
    /// Whether the built-in rule pack is evaluated.
    pub(crate) default_rules: bool,
    /// Built-in rules to switch off, by name.
    pub(crate) disable_rules: Vec<String>,
    /// Where the built-in rules' `runbook_url` points (an internal wiki, a copy of
    /// docs/runbook.md), `#<alert name in lower case>` appended.
    pub(crate) runbook_base_url: String,
    /// HTTP basic authentication towards the Alertmanagers.
    pub(crate) basic_auth: Option<BasicAuth>,
    /// A bearer token towards the Alertmanagers.
    pub(crate) bearer_token: Option<Secret>,
}

impl Default for AlertingConfig {
    fn default() -> Self {
        AlertingConfig {
            alertmanagers: Vec::new(),
            evaluation_interval: Duration::from_secs(15),
            resend_interval: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
            external_url: None,
            default_rules: true,
            disable_rules: Vec::new(),
            runbook_base_url: crate::rules::builtin::RUNBOOK_BASE_URL.to_string(),
            basic_auth: None,
            bearer_token: None,
        }
    }
}

/// Connections the daemon's port serves at once by default (`[server] max_connections`);
/// further ones wait in the kernel's accept queue until one closes.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// `[server]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    /// A second, plain-HTTP address that serves only /healthz and /readyz, with connection
    /// slots of its own: Kubernetes probes pointed at it are answered when `listen` is full.
    pub probe_listen: Option<SocketAddr>,
    /// Connections `listen` serves at once; further ones wait in the kernel's accept queue.
    /// Each takes a file descriptor (`open_files`).
    pub max_connections: usize,
    /// Require `Authorization: Bearer <token>` (except on /healthz and /readyz).
    pub(crate) bearer_token: Option<Secret>,
    /// Require HTTP basic authentication (except on /healthz and /readyz).
    pub(crate) basic_auth: Option<BasicAuth>,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs `tls_key_file`.
    pub(crate) tls_cert_file: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `tls_cert_file`.
    pub(crate) tls_key_file: Option<PathBuf>,
    /// Mutual TLS: PEM CA certificates; every request but /healthz and /readyz must then come
    /// with a client certificate signed by one of them.
    pub(crate) tls_client_ca_file: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9717)),
            probe_listen: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            bearer_token: None,
            basic_auth: None,
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
        }
    }
}

impl ServerConfig {
    /// The certificate and key files when the listener serves TLS, or why the settings do not
    /// fit together.
    pub(crate) fn tls_files(&self) -> Result<Option<(&std::path::Path, &std::path::Path)>, String> {
        match (&self.tls_cert_file, &self.tls_key_file) {
            (Some(cert), Some(key)) => Ok(Some((cert, key))),
            (None, None) if self.tls_client_ca_file.is_some() => Err(
                "server.tls_client_ca_file: expected tls_cert_file and tls_key_file as well (client certificates are asked for in the TLS handshake)".to_string(),
            ),
            (None, None) => Ok(None),
            (Some(_), None) => Err(
                "server.tls_key_file: expected the private key of server.tls_cert_file (give both or neither)"
                    .to_string(),
            ),
            (None, Some(_)) => Err(
                "server.tls_cert_file: expected the certificate of server.tls_key_file (give both or neither)"
                    .to_string(),
            ),
        }
    }

    /// What a client must send to read the endpoints, with secrets resolved.
    pub(crate) fn access(&self) -> Result<Credentials, String> {
        Credentials::resolve(self.basic_auth.as_ref(), self.bearer_token.as_ref(), "server.")
    }
}

/// `[stats]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// The sliding window of the exported quantiles.
    #[serde(with = "humantime_serde")]
    pub(crate) window: Duration,
    /// How many sub-histograms the window is made of (its time resolution).
    pub(crate) window_slots: u32,
}

impl Default for StatsConfig {
    fn default() -> Self {
        StatsConfig { window: Duration::from_secs(3600), window_slots: 6 }
    }
}

/// `[state]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateConfig {
    /// Directory for what must survive a restart (counted checkpoint ids, histograms).
    pub dir: PathBuf,
    /// How often the state is written to disk (it is also written on shutdown).
    #[serde(with = "humantime_serde")]
    pub persist_interval: Duration,
    /// How many recent checkpoints each job keeps (the API, the status page, diagnose).
    pub(crate) recent_checkpoints: usize,
    /// How many points of P95 over time each job keeps for the status page's chart (32 bytes
    /// each; 120 by default, 4 KiB a job).
    pub(crate) p95_history_points: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: PathBuf::from("/var/lib/checkpoint-sentinel"),
            persist_interval: Duration::from_secs(5),
            recent_checkpoints: crate::state::RECENT_CHECKPOINTS,
            p95_history_points: crate::state::history::P95_HISTORY_POINTS,
        }
    }
}

/// `[store]`: the checkpoint store (`state.dir/checkpoints.redb`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Whether every finished checkpoint and savepoint is kept in the store.
    pub(crate) enabled: bool,
    /// Records whose checkpoint was triggered longer ago than this are pruned.
    #[serde(with = "humantime_serde")]
    pub(crate) max_age: Duration,
    /// At most this many records (all jobs together); the oldest go first. Restores are
    /// bounded to as many again, apart.
    pub(crate) max_records: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { enabled: true, max_age: Duration::from_secs(30 * 86_400), max_records: 250_000 }
    }
}

impl StoreConfig {
    /// The store's bounds.
    pub(crate) fn bounds(&self) -> crate::state::store::Bounds {
        crate::state::store::Bounds { max_age: self.max_age, max_records: self.max_records }
    }
}

/// A configuration that cannot be used, with everything an operator needs to fix it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is missing, unreadable, not TOML, or has a key of the wrong type.
    #[error("{file}: {message}")]
    Load {
        /// The config file.
        file: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A `SENTINEL_…` environment variable names an unknown key or has a value of the wrong type
    /// (the file alone is fine).
    #[error("environment variable {variable}: {message}")]
    Env {
        /// The variable, e.g. `SENTINEL_SERVER__LISTEN`.
        variable: String,
        /// What is wrong with it.
        message: String,
    },
    /// Values that parse but make no sense.
    #[error("{file}: invalid configuration:\n{}", problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid {
        /// The config file.
        file: PathBuf,
        /// One line per problem: key, value and what was expected.
        problems: Vec<String>,
    },
}

/// The clusters this replica polls, of `clusters` (configured or discovered): those it owns,
/// and every cluster whose jobs are shared out (`shard_jobs`), marked with the shard so its
/// poller keeps only the jobs this replica owns. All of them, unchanged, without sharding.
pub(crate) fn shard_clusters(clusters: Vec<ClusterConfig>, shard: Option<Shard>) -> Vec<ClusterConfig> {
    let Some(shard) = shard else { return clusters };
    clusters
        .into_iter()
        .filter(|c| c.shard_jobs || shard.owns(&c.name))
        .map(|mut c| {
            c.job_shard = c.shard_jobs.then_some(shard);
            c
        })
        .collect()
}

impl Config {
    /// The shard from the process environment.
    pub(crate) fn shard_from_env() -> Result<Option<Shard>, String> {
        Shard::from_env(|name| std::env::var(name).ok())
    }

    /// Keeps only the clusters this shard polls ([`shard_clusters`]: those it owns, and those
    /// whose jobs are shared out) and the `[[logs]]` of the clusters it owns: the logs of a
    /// cluster whose jobs are shared out are followed by the cluster's owner alone, so each
    /// line is counted once.
    pub(crate) fn for_shard(mut self, shard: Option<Shard>) -> Config {
        if let Some(shard) = shard {
            self.clusters = shard_clusters(std::mem::take(&mut self.clusters), Some(shard));
            let kept: Vec<String> = self.clusters.iter().map(|c| c.name.clone()).collect();
            self.logs.retain(|l| kept.contains(&l.cluster) && shard.owns(&l.cluster));
        }
        self
    }

    /// The rules to evaluate: the built-in pack (minus disabled ones) and the configured ones.
    /// A configured rule with a built-in rule's name replaces it.
    /// Each rule was parsed once: a configured one when the config was read (`ConfiguredRule`;
    /// `problems()` refuses a config with one that does not parse), the built-in pack once per
    /// process (`rules::builtin::compiled`).
    pub(crate) fn effective_rules(&self) -> Vec<crate::rules::Rule> {
        let mut rules: Vec<crate::rules::Rule> = if self.alerting.default_rules {
            crate::rules::builtin::compiled()
                .iter()
                .filter(|r| !self.alerting.disable_rules.contains(&r.spec.name))
                .filter(|r| !self.rules.iter().any(|own| own.name == r.spec.name))
                .map(|r| {
                    let mut rule = r.clone();
                    let base = &self.alerting.runbook_base_url;
                    rule.spec.runbook_url = crate::rules::builtin::runbook_url(base, &rule.spec.name);
                    rule
                })
                .collect()
        } else {
            Vec::new()
        };
        for (i, own) in self.rules.iter().enumerate() {
            match own.rule() {
                Ok(rule) => rules.push(rule.clone()),
                // Only a config that skipped `problems()` gets here; never silently.
                Err(e) => tracing::error!("rules[{i}].expr: {e}; rule {:?} left out", own.name),
            }
        }
        rules
    }

    /// The configuration as TOML with every secret masked, for `check-config`.
    pub fn to_masked_toml(&self) -> String {
        let mut masked = self.clone();
        if let Some(b) = &mut masked.server.basic_auth {
            b.password = b.password.masked();
        }
        if let Some(t) = &mut masked.server.bearer_token {
            *t = t.masked();
        }
        if let Some(b) = &mut masked.alerting.basic_auth {
            b.password = b.password.masked();
        }
        if let Some(t) = &mut masked.alerting.bearer_token {
            *t = t.masked();
        }
        for url in &mut masked.alerting.alertmanagers {
            *url = redact_url(url);
        }
        if let Some(b) = &mut masked.discovery.defaults.basic_auth {
            b.password = b.password.masked();
        }
        if let Some(t) = &mut masked.discovery.defaults.bearer_token {
            *t = t.masked();
        }
        for c in &mut masked.clusters {
            c.url = redact_url(&c.url);
            if let Some(b) = &mut c.basic_auth {
                b.password = b.password.masked();
            }
            if let Some(t) = &mut c.bearer_token {
                *t = t.masked();
            }
        }
        toml::to_string_pretty(&masked).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}
