//! Configuration: a TOML file plus `SENTINEL_…` environment overrides, strict and validated.
//!
//! Every value has a default in code (`Config::default()`); `config/checkpoint-sentinel.toml`
//! is the fully commented reference and a test checks it parses to exactly these defaults.
//! Environment variables override the file: `SENTINEL_SERVER__LISTEN=0.0.0.0:9717` sets
//! `server.listen` (prefix `SENTINEL_`, `__` between levels).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
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
}

/// `[metrics]`: per-operator series or not, and the quantiles of every summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Export the `flink_operator_checkpoint_*` summaries (five per operator chain).
    pub operators: bool,
    /// The quantiles of every summary, among 0.5, 0.95 and 0.99 (empty: `_sum` and `_count`
    /// only).
    pub quantiles: Vec<f64>,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { operators: true, quantiles: crate::stats::QUANTILES.to_vec() }
    }
}

impl MetricsConfig {
    /// For each of [`crate::stats::QUANTILES`], whether it is exported.
    pub fn shown_quantiles(&self) -> [bool; 3] {
        crate::stats::QUANTILES.map(|q| self.quantiles.contains(&q))
    }
}

/// `[alerting]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AlertingConfig {
    /// Alertmanager base URLs; alerts go to every one of them (v2 API).
    pub alertmanagers: Vec<String>,
    /// How often rules are evaluated.
    #[serde(with = "humantime_serde")]
    pub evaluation_interval: Duration,
    /// How often firing alerts are re-sent (well under Alertmanager's `resolve_timeout`).
    #[serde(with = "humantime_serde")]
    pub resend_interval: Duration,
    /// Timeout of each request to an Alertmanager.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// The daemon's URL as users reach it, for alerts' `generatorURL` (default: the listen address).
    pub external_url: Option<String>,
    /// Whether the built-in rule pack is evaluated.
    pub default_rules: bool,
    /// Built-in rules to switch off, by name.
    pub disable_rules: Vec<String>,
    /// HTTP basic authentication towards the Alertmanagers.
    pub basic_auth: Option<BasicAuth>,
    /// A bearer token towards the Alertmanagers.
    pub bearer_token: Option<Secret>,
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
            basic_auth: None,
            bearer_token: None,
        }
    }
}

/// This replica's part of a sharded deployment: shard `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based index of this replica.
    pub index: u32,
    /// Number of replicas.
    pub count: u32,
}

impl Shard {
    /// From `SENTINEL_SHARD_INDEX` and `SENTINEL_SHARD_COUNT` (the Helm chart's StatefulSet sets
    /// them); `None` when unset, and an error naming the variable when they make no sense.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<Shard>, String> {
        let read = |name: &str| -> Result<Option<u32>, String> {
            env(name)
                .map(|v| {
                    v.trim().parse::<u32>().map_err(|_| format!("{name}={v:?}: expected a whole number"))
                })
                .transpose()
        };
        match (read("SENTINEL_SHARD_INDEX")?, read("SENTINEL_SHARD_COUNT")?) {
            (None, None) => Ok(None),
            (Some(index), Some(count)) if count > 0 && index < count => Ok(Some(Shard { index, count })),
            (index, count) => Err(format!(
                "SENTINEL_SHARD_INDEX={index:?} and SENTINEL_SHARD_COUNT={count:?}: expected both, with index < count"
            )),
        }
    }

    /// Whether this shard owns `cluster`: rendezvous hashing, owner = the index maximising
    /// `mix(mix(fnv1a64(cluster)) ^ (index + 1) * φ)`, with `mix` MurmurHash3's 64-bit
    /// finaliser and φ 2⁶⁴ divided by the golden ratio. Stable across replicas (and versions)
    /// without coordination; going from N to N+1 shards moves about 1/(N+1) of the clusters.
    /// The mixing matters: FNV-1a of `"<cluster>/<index>"` alone (the first version) scored
    /// the indexes almost in a fixed order, and with 3 shards the last one owned half of every
    /// set of names (1,500 of 3,000).
    pub fn owns(self, cluster: &str) -> bool {
        fn mix(mut h: u64) -> u64 {
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 33;
            h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
            h ^ (h >> 33)
        }
        let mut key: u64 = 0xcbf2_9ce4_8422_2325;
        for b in cluster.bytes() {
            key ^= u64::from(b);
            key = key.wrapping_mul(0x0100_0000_01b3);
        }
        let key = mix(key);
        let score = |i: u32| mix(key ^ u64::from(i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (0..self.count).max_by_key(|&i| (score(i), std::cmp::Reverse(i))) == Some(self.index)
    }

    /// Whether this shard watches job `job_id` of a cluster whose jobs are shared out
    /// (`shard_jobs`): the same rendezvous hashing over `"<cluster>/<job id>"`, so each job has
    /// exactly one owner among the replicas, whichever replica owns the cluster itself.
    pub fn owns_job(self, cluster: &str, job_id: &str) -> bool {
        self.owns(&format!("{cluster}/{job_id}"))
    }
}

/// The clusters this replica polls, of `clusters` (configured or discovered): those it owns,
/// and every cluster whose jobs are shared out (`shard_jobs`), marked with the shard so its
/// poller keeps only the jobs this replica owns. All of them, unchanged, without sharding.
pub fn shard_clusters(clusters: Vec<ClusterConfig>, shard: Option<Shard>) -> Vec<ClusterConfig> {
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
    pub fn shard_from_env() -> Result<Option<Shard>, String> {
        Shard::from_env(|name| std::env::var(name).ok())
    }

    /// Keeps only the clusters this shard polls ([`shard_clusters`]: those it owns, and those
    /// whose jobs are shared out) and the `[[logs]]` of the clusters it owns: the logs of a
    /// cluster whose jobs are shared out are followed by the cluster's owner alone, so each
    /// line is counted once.
    pub fn for_shard(mut self, shard: Option<Shard>) -> Config {
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
    pub fn effective_rules(&self) -> Vec<crate::rules::Rule> {
        let mut rules: Vec<crate::rules::Rule> = if self.alerting.default_rules {
            crate::rules::builtin::compiled()
                .iter()
                .filter(|r| !self.alerting.disable_rules.contains(&r.spec.name))
                .filter(|r| !self.rules.iter().any(|own| own.name == r.spec.name))
                .cloned()
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

    /// The shape of the listener's TLS settings (both files or neither). Reading and checking
    /// the files is the daemon's part (`outputs::tls::load`, called by `preflight::check` for
    /// `check-config` and `run`, and by a reload).
    fn server_problems(&self, problems: &mut Vec<String>) {
        if let Err(problem) = self.server.tls_files() {
            problems.push(problem);
        }
    }

    fn alerting_problems(&self, problems: &mut Vec<String>) {
        let a = &self.alerting;
        for (i, url) in a.alertmanagers.iter().enumerate() {
            if !url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
                problems.push(format!(
                    "alerting.alertmanagers[{i}]: {url:?}: expected an http:// or https:// URL"
                ));
            }
        }
        if let Some(url) = a.external_url.as_ref().filter(|u| url::Url::parse(u).is_err()) {
            problems.push(format!("alerting.external_url: {url:?}: expected a URL"));
        }
        for (key, d) in [
            ("evaluation_interval", a.evaluation_interval),
            ("resend_interval", a.resend_interval),
            ("timeout", a.timeout),
        ] {
            if d < Duration::from_millis(100) {
                problems.push(format!("alerting.{key}: expected at least 100ms"));
            }
        }
        secret_problems("alerting.", a.basic_auth.as_ref(), a.bearer_token.as_ref(), problems);
        secret_problems(
            "server.",
            self.server.basic_auth.as_ref(),
            self.server.bearer_token.as_ref(),
            problems,
        );
        let builtin: Vec<String> = crate::rules::builtin::rules().into_iter().map(|r| r.name).collect();
        for (i, name) in a.disable_rules.iter().enumerate() {
            if !builtin.contains(name) {
                problems.push(format!(
                    "alerting.disable_rules[{i}]: {name:?}: expected the name of a built-in rule ({})",
                    builtin.join(", ")
                ));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.name.is_empty() || !rule.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                problems.push(format!("rules[{i}].name: {:?}: expected letters, digits or '_'", rule.name));
            } else if !names.insert(rule.name.clone()) {
                problems.push(format!(
                    "rules[{i}].name: {:?}: expected a name not used by another rule",
                    rule.name
                ));
            }
            if let Err(e) = rule.rule() {
                problems.push(format!("rules[{i}].expr: {e}"));
            }
            if rule.runbook_url.is_empty() {
                problems.push(format!("rules[{i}].runbook_url: expected a link to the rule's runbook"));
            }
        }
    }
}

/// A `[[rules]]` entry: the rule as written and, parsed once when the config is read, the rule
/// ready to evaluate or why its `expr` does not parse. `Config::problems` reports the error
/// (`rules[i].expr`, so such a config is refused); `effective_rules` hands the parsed rule on.
/// Reads as its `RuleSpec` (`own.name`, …).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "crate::rules::RuleSpec", into = "crate::rules::RuleSpec")]
pub struct ConfiguredRule {
    spec: crate::rules::RuleSpec,
    compiled: Result<crate::rules::Rule, crate::rules::expr::ParseError>,
}

impl ConfiguredRule {
    /// The parsed rule, or why its condition does not parse.
    pub fn rule(&self) -> Result<&crate::rules::Rule, &crate::rules::expr::ParseError> {
        self.compiled.as_ref()
    }
}

impl From<crate::rules::RuleSpec> for ConfiguredRule {
    fn from(spec: crate::rules::RuleSpec) -> Self {
        let compiled = crate::rules::Rule::new(spec.clone());
        ConfiguredRule { spec, compiled }
    }
}

impl From<ConfiguredRule> for crate::rules::RuleSpec {
    fn from(r: ConfiguredRule) -> Self {
        r.spec
    }
}

impl std::ops::Deref for ConfiguredRule {
    type Target = crate::rules::RuleSpec;
    fn deref(&self) -> &crate::rules::RuleSpec {
        &self.spec
    }
}

/// Two rules are the same when written the same (what a reload compares).
impl PartialEq for ConfiguredRule {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

/// `[server]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Address the HTTP server listens on.
    pub listen: SocketAddr,
    /// Require `Authorization: Bearer <token>` (except on /healthz and /readyz).
    pub bearer_token: Option<Secret>,
    /// Require HTTP basic authentication (except on /healthz and /readyz).
    pub basic_auth: Option<BasicAuth>,
    /// Serve HTTPS with this PEM certificate chain (leaf first); needs `tls_key_file`.
    pub tls_cert_file: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// Mutual TLS: PEM CA certificates; every request but /healthz and /readyz must then come
    /// with a client certificate signed by one of them.
    pub tls_client_ca_file: Option<PathBuf>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9717)),
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
    pub fn tls_files(&self) -> Result<Option<(&std::path::Path, &std::path::Path)>, String> {
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
    pub fn access(&self) -> Result<Credentials, String> {
        Credentials::resolve(self.basic_auth.as_ref(), self.bearer_token.as_ref(), "server.")
    }
}

/// `basic_auth` or `bearer_token` with the secret read: what the daemon sends to Flink and to
/// Alertmanager, or expects from its own readers.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Credentials {
    /// None (for the daemon's own endpoints: open to anyone).
    #[default]
    None,
    /// HTTP basic authentication.
    Basic {
        /// User.
        username: String,
        /// Password.
        password: String,
    },
    /// A bearer token.
    Bearer(String),
}

impl Credentials {
    /// Adds these credentials to an outgoing request (to Flink, to Alertmanager).
    pub fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Credentials::None => request,
            Credentials::Basic { username, password } => request.basic_auth(username, Some(password)),
            Credentials::Bearer(token) => request.bearer_auth(token),
        }
    }
}

impl Credentials {
    /// Reads the secret of `basic` or, without it, of `bearer`; an error names the key under
    /// `prefix` (e.g. `alerting.basic_auth.password`).
    pub fn resolve(
        basic: Option<&BasicAuth>,
        bearer: Option<&Secret>,
        prefix: &str,
    ) -> Result<Credentials, String> {
        Ok(match (basic, bearer) {
            (Some(b), _) => Credentials::Basic {
                username: b.username.clone(),
                password: b.password.resolve().map_err(|e| format!("{prefix}basic_auth.password: {e}"))?,
            },
            (None, Some(t)) => {
                Credentials::Bearer(t.resolve().map_err(|e| format!("{prefix}bearer_token: {e}"))?)
            }
            (None, None) => Credentials::None,
        })
    }
}

/// `url` with the password of its user info (`http://user:pw@host/`) masked, for anything
/// printed or exported (check-config, logs, warnings, the `alertmanager` label).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { return url.to_string() };
    let authority_end = url[scheme_end..].find(['/', '?', '#']).map_or(url.len(), |i| scheme_end + i);
    let authority = &url[scheme_end..authority_end];
    let Some(at) = authority.rfind('@') else { return url.to_string() };
    let userinfo = &authority[..at];
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    format!("{}{user}:********{}", &url[..scheme_end], &url[scheme_end + at..])
}

/// Each given secret must say where it is in exactly one way; keys are named under `prefix`.
fn secret_problems(
    prefix: &str,
    basic: Option<&BasicAuth>,
    bearer: Option<&Secret>,
    problems: &mut Vec<String>,
) {
    let secrets = basic
        .map(|b| ("basic_auth.password", &b.password))
        .into_iter()
        .chain(bearer.map(|t| ("bearer_token", t)));
    for (field, secret) in secrets {
        let given = [secret.value.is_some(), secret.file.is_some(), secret.env.is_some()];
        if given.iter().filter(|g| **g).count() != 1 {
            problems.push(format!("{prefix}{field}: expected exactly one of value, file or env"));
        }
        // An empty token file would lock every reader out (or, towards Flink, send nothing).
        if let Some(path) = &secret.file
            && std::fs::read_to_string(path).is_ok_and(|s| s.trim().is_empty())
        {
            problems
                .push(format!("{prefix}{field}: {}: expected a secret, the file is empty", path.display()));
        }
        if secret.value.as_ref().is_some_and(|v| v.trim().is_empty()) {
            problems.push(format!("{prefix}{field}: expected a secret, the value is empty"));
        }
    }
}

/// A regular expression of the config (`include_jobs`, `exclude_jobs`, `[[logs.patterns]]
/// regex`), compiled once, when the config is read: its text as written and the compiled form,
/// or why it does not compile. `Config::problems` reports the error (so a config with a bad
/// pattern is refused) and the poller and the tailer take the compiled form from here: nothing
/// compiles a pattern a second time, and no compile error can be dropped on the way.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Pattern {
    text: String,
    compiled: Result<regex::Regex, regex::Error>,
}

impl Pattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The compiled regular expression, or why the text is not one.
    pub fn regex(&self) -> Result<&regex::Regex, &regex::Error> {
        self.compiled.as_ref()
    }
}

impl From<String> for Pattern {
    fn from(text: String) -> Self {
        let compiled = regex::Regex::new(&text);
        Pattern { text, compiled }
    }
}

impl From<&str> for Pattern {
    fn from(text: &str) -> Self {
        Pattern::from(text.to_string())
    }
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> Self {
        p.text
    }
}

/// Two patterns are the same when written the same (what a reload compares).
impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

/// One `[[clusters]]` entry: a Flink JobManager's REST endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// A short name, used as the `cluster` label.
    pub name: String,
    /// The JobManager's REST base URL, e.g. `http://127.0.0.1:8081`.
    pub url: String,
    /// How often to poll.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Timeout of each HTTP request.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// At most this many requests in flight to this cluster (jobs are polled concurrently).
    /// The default, 8, is twice Flink's `rest.server.numThreads` (4): the JobManager answers
    /// most requests from its caches in well under a millisecond, so over a network round trip
    /// of milliseconds 8 in flight keep its 4 handler threads far from saturated while a round
    /// of 1,000 jobs at 5 ms fits in about a second.
    pub max_concurrent_requests: usize,
    /// HTTP basic authentication.
    pub basic_auth: Option<BasicAuth>,
    /// A bearer token.
    pub bearer_token: Option<Secret>,
    /// A PEM file with extra CA certificates for HTTPS.
    pub ca_file: Option<PathBuf>,
    /// Regular expressions over job names: watch only matching jobs (empty: all).
    pub include_jobs: Vec<Pattern>,
    /// Regular expressions over job names: never watch matching jobs.
    pub exclude_jobs: Vec<Pattern>,
    /// A subtask that has not acknowledged an in-progress checkpoint after this share of the
    /// checkpoint timeout is reported as a `barrier_missing` event (source `rest`).
    pub pending_subtask_after: f64,
    /// A REST answer larger than this many bytes is cut off and counted as an error
    /// (`kind="too_large"`) instead of being read into memory.
    pub max_response_bytes: u64,
    /// At most this many jobs of the cluster are watched (the first in `/jobs/overview`'s
    /// order, running ones first); the rest are counted in `checkpoint_sentinel_inputs_cut_total`.
    pub max_jobs: usize,
    /// At most this many newly finished checkpoints of a job have their details fetched in one
    /// poll round (the newest); older ones are counted from Flink's counts.
    pub max_history_per_poll: usize,
    /// In a sharded deployment, share this cluster's jobs out between the replicas instead of
    /// giving the whole cluster to one: every replica polls its overview and watches only the
    /// jobs it owns by rendezvous hashing on (cluster, job id). For a session cluster with more
    /// jobs than one replica should carry. No effect without sharding.
    pub shard_jobs: bool,
    /// Set by [`Config::for_shard`] / [`shard_clusters`], never read from a file: the shard
    /// whose jobs this replica watches, when the cluster's jobs are shared out.
    #[serde(skip)]
    pub job_shard: Option<Shard>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            name: String::new(),
            url: String::new(),
            poll_interval: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
            max_concurrent_requests: 8,
            basic_auth: None,
            bearer_token: None,
            ca_file: None,
            include_jobs: Vec::new(),
            exclude_jobs: Vec::new(),
            pending_subtask_after: 0.5,
            max_response_bytes: 16 * 1024 * 1024,
            max_jobs: 2_000,
            max_history_per_poll: 20,
            shard_jobs: false,
            job_shard: None,
        }
    }
}

impl ClusterConfig {
    /// A cluster with every other value at its default.
    pub fn new(name: &str, url: &str) -> Self {
        ClusterConfig { name: name.to_string(), url: url.to_string(), ..ClusterConfig::default() }
    }
}

/// Basic authentication credentials.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicAuth {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: Secret,
}

/// A secret given inline, in a file, or in an environment variable (exactly one of them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Secret {
    /// The secret itself (avoid in files under version control).
    pub value: Option<String>,
    /// A file holding the secret (trailing newline ignored), e.g. a Kubernetes Secret mount.
    pub file: Option<PathBuf>,
    /// The name of an environment variable holding the secret.
    pub env: Option<String>,
}

impl Secret {
    /// Reads the secret from wherever it is.
    pub fn resolve(&self) -> Result<String, String> {
        if let Some(v) = &self.value {
            return Ok(v.clone());
        }
        if let Some(f) = &self.file {
            let secret = std::fs::read_to_string(f)
                .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| format!("cannot read {}: {e}", f.display()))?;
            // An empty token would lock everyone out (or let an empty header in).
            if secret.trim().is_empty() {
                return Err(format!("{}: expected a secret, the file is empty", f.display()));
            }
            return Ok(secret);
        }
        if let Some(name) = &self.env {
            let secret =
                std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))?;
            if secret.trim().is_empty() {
                return Err(format!("environment variable {name}: expected a secret, it is empty"));
            }
            return Ok(secret);
        }
        Err("no value, file or env given".to_string())
    }

    /// The secret with its value hidden.
    fn masked(&self) -> Secret {
        Secret { value: self.value.as_ref().map(|_| "********".to_string()), ..self.clone() }
    }
}

/// `[stats]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatsConfig {
    /// The sliding window of the exported quantiles.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// How many sub-histograms the window is made of (its time resolution).
    pub window_slots: u32,
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
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            dir: PathBuf::from("/var/lib/checkpoint-sentinel"),
            persist_interval: Duration::from_secs(5),
        }
    }
}

/// `[store]`: the checkpoint store (`state.dir/checkpoints.redb`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Whether every finished checkpoint and savepoint is kept in the store.
    pub enabled: bool,
    /// Records whose checkpoint was triggered longer ago than this are pruned.
    #[serde(with = "humantime_serde")]
    pub max_age: Duration,
    /// At most this many records (all jobs together); the oldest go first. Restores are
    /// bounded to as many again, apart.
    pub max_records: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { enabled: true, max_age: Duration::from_secs(30 * 86_400), max_records: 250_000 }
    }
}

impl StoreConfig {
    /// The store's bounds.
    pub fn bounds(&self) -> crate::state::store::Bounds {
        crate::state::store::Bounds { max_age: self.max_age, max_records: self.max_records }
    }
}

/// One `[[logs]]` entry: log files of one cluster to follow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// The `[[clusters]]` entry these logs belong to (the `cluster` label of their events).
    pub cluster: String,
    /// Names the entry's read positions in the state directory; defaults to the cluster name
    /// (set it when two entries are bound to the same cluster).
    pub name: Option<String>,
    /// Glob patterns of the files to follow; new files that match are picked up.
    pub paths: Vec<String>,
    /// Where a file seen for the first time at daemon start is read from.
    pub start_at: StartAt,
    /// How often file metadata is polled (file events only wake the tailer up earlier).
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// How long a file must be quiet before its last record (which a stack trace could still
    /// follow) is taken as complete.
    #[serde(with = "humantime_serde")]
    pub flush_after: Duration,
    /// Longer lines are cut to this many bytes (and counted).
    pub max_line_bytes: usize,
    /// At most this many files are followed at once (one file descriptor each); files the
    /// globs match beyond it are left out and counted in `checkpoint_sentinel_inputs_cut_total`.
    pub max_files: usize,
    /// Extra patterns, checked before the built-in ones.
    pub patterns: Vec<LogPatternConfig>,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            cluster: String::new(),
            name: None,
            paths: Vec::new(),
            start_at: StartAt::End,
            poll_interval: Duration::from_secs(1),
            flush_after: Duration::from_millis(500),
            max_line_bytes: 1 << 20,
            max_files: 256,
            patterns: Vec::new(),
        }
    }
}

impl LogConfig {
    /// The entry's id: its name, or the cluster name.
    pub fn id(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.cluster)
    }
}

/// Where to start reading a file first seen at daemon start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartAt {
    /// At its end: only what is written from now on.
    #[default]
    End,
    /// At its beginning: everything it holds.
    Beginning,
}

/// One `[[logs.patterns]]` entry: a user pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogPatternConfig {
    /// A name for messages.
    pub name: String,
    /// A regular expression over the message part of a line (after ` - `). Named captures
    /// `id`, `job`, `task`, `subtask`, `tm`, `dur` (ms), `bytes`, `reason`, `detail` fill the event.
    pub regex: Pattern,
    /// The event kind (the `kind` label): lower-case letters, digits and `_`.
    pub kind: String,
    /// `info`, `warning` or `error`.
    #[serde(default = "default_severity")]
    pub severity: crate::observe::EventSeverity,
}

fn default_severity() -> crate::observe::EventSeverity {
    crate::observe::EventSeverity::Warning
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

impl Config {
    /// Loads `file` with environment overrides, then validates it.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        Self::load_with_env(file, std::env::vars())
    }

    /// Like [`load`](Self::load) with an explicit environment (for tests).
    pub fn load_with_env(
        file: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let load_error = |message: String| ConfigError::Load { file: file.to_path_buf(), message };
        let text = std::fs::read_to_string(file).map_err(|e| load_error(format!("cannot read: {e}")))?;
        // Custom rules missing several fields: all of them in one message, not one per run.
        if let Some(message) = missing_rule_fields(&text) {
            return Err(load_error(message));
        }
        // Only `SENTINEL_<SECTION>__<KEY>` variables are config keys (every top-level key is a
        // section); `SENTINEL_LOG`, `SENTINEL_CONFIG` and the like belong to the command line.
        let env: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.strip_prefix("SENTINEL_").is_some_and(|rest| rest.contains("__")))
            .collect();
        // The file alone first, so that a problem of the file is blamed on the file and one of a
        // variable on the variable.
        let from = |env: &[(String, String)]| -> Result<Config, config::ConfigError> {
            config::Config::builder()
                .add_source(config::File::from_str(&text, config::FileFormat::Toml))
                .add_source(
                    config::Environment::with_prefix("SENTINEL")
                        .prefix_separator("_")
                        .separator("__")
                        .source(Some(env.iter().cloned().collect())),
                )
                .build()?
                .try_deserialize()
        };
        from(&[]).map_err(|e| load_error(describe(&e)))?;
        let config = match from(&env) {
            Ok(config) => config,
            Err(all) => {
                let mut sorted = env.clone();
                sorted.sort();
                for var in &sorted {
                    if let Err(e) = from(std::slice::from_ref(var)) {
                        return Err(ConfigError::Env {
                            variable: var.0.clone(),
                            message: describe(&e).replace("unknown field", "unknown key"),
                        });
                    }
                }
                let names: Vec<&str> = sorted.iter().map(|(k, _)| k.as_str()).collect();
                return Err(ConfigError::Env { variable: names.join(", "), message: describe(&all) });
            }
        };
        let problems = config.problems();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid { file: file.to_path_buf(), problems })
        }
    }

    /// Every problem with the values, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        self.server_problems(&mut problems);
        self.alerting_problems(&mut problems);
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.clusters.iter().enumerate() {
            let key = |k: &str| format!("clusters[{i}].{k}");
            if c.name.is_empty() || !c.name.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
            {
                problems.push(format!(
                    "{}: {:?}: expected a non-empty name of letters, digits, '-', '_' or '.'",
                    key("name"),
                    c.name
                ));
            } else if !names.insert(c.name.clone()) {
                problems.push(format!(
                    "{}: {:?}: expected a name not used by another cluster",
                    key("name"),
                    c.name
                ));
            }
            match url::Url::parse(&c.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => {}
                _ => problems.push(format!(
                    "{}: {:?}: expected an http:// or https:// URL of the JobManager's REST API",
                    key("url"),
                    c.url
                )),
            }
            if c.poll_interval < Duration::from_millis(100) {
                problems.push(format!("{}: expected at least 100ms", key("poll_interval")));
            }
            if c.timeout.is_zero() {
                problems.push(format!("{}: expected a positive duration", key("timeout")));
            }
            if !(c.pending_subtask_after > 0.0 && c.pending_subtask_after <= 1.0) {
                problems.push(format!(
                    "{}: expected a share of the timeout in (0, 1]",
                    key("pending_subtask_after")
                ));
            }
            if c.max_concurrent_requests == 0 {
                problems.push(format!("{}: expected at least 1", key("max_concurrent_requests")));
            }
            for (field, value) in [
                ("max_response_bytes", c.max_response_bytes as usize),
                ("max_jobs", c.max_jobs),
                ("max_history_per_poll", c.max_history_per_poll),
            ] {
                if value == 0 {
                    problems.push(format!("{}: expected at least 1", key(field)));
                }
            }
            for (field, patterns) in [("include_jobs", &c.include_jobs), ("exclude_jobs", &c.exclude_jobs)] {
                for (j, p) in patterns.iter().enumerate() {
                    if let Err(e) = p.regex() {
                        problems.push(format!(
                            "{}[{j}]: {:?}: expected a regular expression ({e})",
                            key(field),
                            p.as_str()
                        ));
                    }
                }
            }
            secret_problems(&key(""), c.basic_auth.as_ref(), c.bearer_token.as_ref(), &mut problems);
            if c.basic_auth.is_some() && c.bearer_token.is_some() {
                problems
                    .push(format!("{}: expected basic_auth or bearer_token, not both", key("bearer_token")));
            }
        }
        if self.stats.window_slots == 0 || self.stats.window_slots > 1000 {
            problems.push("stats.window_slots: expected 1 to 1000".to_string());
        }
        if self.stats.window < Duration::from_secs(1) {
            problems.push("stats.window: expected at least 1s".to_string());
        }
        if self.state.dir.as_os_str().is_empty() {
            problems.push("state.dir: expected a directory path".to_string());
        }
        if self.store.max_age < Duration::from_secs(60) {
            problems.push("store.max_age: expected at least 1m".to_string());
        }
        if self.store.max_records == 0 {
            problems.push("store.max_records: expected at least 1".to_string());
        }
        if self.state.persist_interval.is_zero() {
            problems.push("state.persist_interval: expected a positive duration".to_string());
        }
        self.log_problems(&mut problems);
        let known = crate::stats::QUANTILES;
        for (i, q) in self.metrics.quantiles.iter().enumerate() {
            if !known.contains(q) {
                problems.push(format!("metrics.quantiles[{i}]: {q}: expected one of 0.5, 0.95, 0.99"));
            } else if self.metrics.quantiles[..i].contains(q) {
                problems.push(format!("metrics.quantiles[{i}]: {q}: given twice"));
            }
        }
        self.discovery.problems(&mut problems);
        problems
    }

    fn log_problems(&self, problems: &mut Vec<String>) {
        let mut ids = std::collections::BTreeSet::new();
        for (i, l) in self.logs.iter().enumerate() {
            let key = |k: &str| format!("logs[{i}].{k}");
            if !self.clusters.iter().any(|c| c.name == l.cluster) {
                problems.push(format!(
                    "{}: {:?}: expected the name of a [[clusters]] entry",
                    key("cluster"),
                    l.cluster
                ));
            }
            let id_ok = !l.id().is_empty()
                && l.id().chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch));
            if !id_ok {
                problems.push(format!(
                    "{}: {:?}: expected a non-empty name of letters, digits, '-', '_' or '.'",
                    key("name"),
                    l.id()
                ));
            } else if !ids.insert(l.id().to_string()) {
                problems.push(format!("{}: {:?}: expected a name no other [[logs]] entry uses (set `name` when two entries share a cluster)", key("name"), l.id()));
            }
            if l.paths.is_empty() {
                problems.push(format!("{}: expected at least one glob pattern", key("paths")));
            }
            for (j, p) in l.paths.iter().enumerate() {
                if let Err(e) = glob::Pattern::new(p) {
                    problems.push(format!("{}[{j}]: {p:?}: expected a glob pattern ({e})", key("paths")));
                }
            }
            if l.poll_interval < Duration::from_millis(50) {
                problems.push(format!("{}: expected at least 50ms", key("poll_interval")));
            }
            if l.flush_after.is_zero() {
                problems.push(format!("{}: expected a positive duration", key("flush_after")));
            }
            if l.max_files == 0 {
                problems.push(format!("{}: expected at least 1", key("max_files")));
            }
            if !(1024..=64 << 20).contains(&l.max_line_bytes) {
                problems.push(format!("{}: expected 1024 to 67108864", key("max_line_bytes")));
            }
            for (j, p) in l.patterns.iter().enumerate() {
                let pkey = |k: &str| format!("logs[{i}].patterns[{j}].{k}");
                if p.name.is_empty() {
                    problems.push(format!("{}: expected a non-empty name", pkey("name")));
                }
                if let Err(e) = p.regex.regex() {
                    problems.push(format!(
                        "{}: {:?}: expected a regular expression ({e})",
                        pkey("regex"),
                        p.regex.as_str()
                    ));
                }
                let kind_ok = p.kind.starts_with(|c: char| c.is_ascii_lowercase())
                    && p.kind.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                if !kind_ok {
                    problems.push(format!(
                        "{}: {:?}: expected lower-case letters, digits and '_'",
                        pkey("kind"),
                        p.kind
                    ));
                }
            }
        }
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
        let mut out = String::new();
        let body = toml::to_string_pretty(&masked).unwrap_or_else(|e| format!("# cannot render: {e}\n"));
        let _ = write!(out, "{body}");
        out
    }
}

/// The required fields of a `[[rules]]` entry (the others have defaults).
const RULE_FIELDS: [&str; 7] = ["name", "expr", "severity", "class", "summary", "description", "runbook_url"];

/// Every `[[rules]]` entry of the file missing required fields, all named in one message; `None`
/// when none is missing (or the file is not TOML: the loader says so).
fn missing_rule_fields(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    let rules = table.get("rules")?.as_array()?;
    let lines: Vec<String> = rules
        .iter()
        .enumerate()
        .filter_map(|(i, rule)| {
            let rule = rule.as_table()?;
            let missing: Vec<&str> = RULE_FIELDS.into_iter().filter(|f| !rule.contains_key(*f)).collect();
            (!missing.is_empty()).then(|| format!("rules[{i}]: missing {}", missing.join(", ")))
        })
        .collect();
    (!lines.is_empty())
        .then(|| format!("{}; every [[rules]] entry needs {}", lines.join("; "), RULE_FIELDS.join(", ")))
}

/// The `config` crate's message, which names the key and the expected type. It writes a key
/// under an array element without its dot (`rules[0]class`); the key is put right. A number
/// where a duration belongs (`poll_interval = 5`) is explained as such.
fn describe(error: &config::ConfigError) -> String {
    let message = explain_duration(&error.to_string());
    let mut out = String::with_capacity(message.len() + 4);
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == ']' && chars.peek().is_some_and(|n| n.is_ascii_alphabetic() || *n == '_') {
            out.push('.');
        }
    }
    out
}

/// `invalid value: string "5", expected a duration for key `…`` (the TOML number 5 reaches the
/// deserializer as a string) becomes `key `…`: 5: expected a duration such as "5s" …`.
fn explain_duration(message: &str) -> String {
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"invalid value: string "([^"]*)", expected a duration for key `([^`]+)`"#)
            .expect("a valid pattern")
    });
    PATTERN
        .replace(message, |c: &regex::Captures<'_>| {
            let value = &c[1];
            let shown = if value.parse::<f64>().is_ok() { value.to_string() } else { format!("{value:?}") };
            format!(
                "key `{}`: {shown}: expected a duration such as \"5s\" (a number and a unit: ms, s, m, h)",
                &c[2]
            )
        })
        .into_owned()
}

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
    pub max_clusters: usize,
    /// At most this many files are read (in path order); the others are counted as errors.
    pub max_files: usize,
    /// A larger file is not read (a warning and an error count; what it gave before is kept).
    pub max_file_bytes: u64,
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
    pub scheme: String,
    /// How often to poll.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Timeout of each HTTP request.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// At most this many requests in flight to each cluster.
    pub max_concurrent_requests: usize,
    /// HTTP basic authentication.
    pub basic_auth: Option<BasicAuth>,
    /// A bearer token.
    pub bearer_token: Option<Secret>,
    /// A PEM file with extra CA certificates for HTTPS.
    pub ca_file: Option<PathBuf>,
    /// Regular expressions over job names: watch only matching jobs (empty: all).
    pub include_jobs: Vec<Pattern>,
    /// Regular expressions over job names: never watch matching jobs.
    pub exclude_jobs: Vec<Pattern>,
    /// As `pending_subtask_after` of `[[clusters]]`.
    pub pending_subtask_after: f64,
    /// As `max_response_bytes` of `[[clusters]]`.
    pub max_response_bytes: u64,
    /// As `max_jobs` of `[[clusters]]`.
    pub max_jobs: usize,
    /// As `max_history_per_poll` of `[[clusters]]`.
    pub max_history_per_poll: usize,
    /// As `shard_jobs` of `[[clusters]]`: every discovered cluster's jobs are shared out
    /// between the replicas of a sharded deployment.
    pub shard_jobs: bool,
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
    pub fn cluster(&self, name: &str, url: &str) -> ClusterConfig {
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
    pub fn logs_of(&self, discovered: &[ClusterConfig], taken: &BTreeSet<String>) -> Vec<LogConfig> {
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
    pub fn enabled(&self) -> bool {
        !self.files.is_empty() || self.kubernetes.enabled
    }

    /// Every problem with the values, each naming its key.
    pub fn problems(&self, problems: &mut Vec<String>) {
        for (i, p) in self.files.iter().enumerate() {
            if let Err(e) = glob::Pattern::new(p) {
                problems.push(format!("discovery.files[{i}]: {p:?}: expected a glob pattern ({e})"));
            }
        }
        if self.refresh_interval < Duration::from_secs(1) {
            problems.push("discovery.refresh_interval: expected at least 1s".to_string());
        }
        if !(1..=MAX_CLUSTERS_LIMIT).contains(&self.max_clusters) {
            problems.push(format!("discovery.max_clusters: expected 1 to {MAX_CLUSTERS_LIMIT}"));
        }
        if !(1..=100_000).contains(&self.max_files) {
            problems.push("discovery.max_files: expected 1 to 100000".to_string());
        }
        if !(1024..=64 << 20).contains(&self.max_file_bytes) {
            problems.push("discovery.max_file_bytes: expected 1024 to 67108864".to_string());
        }
        if !matches!(self.defaults.scheme.as_str(), "http" | "https") {
            problems.push(format!(
                "discovery.defaults.scheme: {:?}: expected http or https",
                self.defaults.scheme
            ));
        }
        self.kubernetes.problems(problems);
        // The defaults are checked as the cluster they make, with their own key names (only
        // when discovery is on: the probe's own discovery is off, which ends the recursion).
        if !self.enabled() {
            return;
        }
        let cluster = self.defaults.cluster("discovered", "http://discovered:8081");
        let logs = self.defaults.logs_of(std::slice::from_ref(&cluster), &BTreeSet::new());
        let probe = Config { clusters: vec![cluster], logs, ..Default::default() };
        for p in probe.problems() {
            if let Some(rest) = p.strip_prefix("clusters[0].") {
                problems.push(format!("discovery.defaults.{rest}"));
            } else if let Some(rest) = p.strip_prefix("logs[0].") {
                problems.push(format!("discovery.defaults.logs.{rest}"));
            }
        }
        if let Some(logs) = &self.defaults.logs {
            if !logs.cluster.is_empty() || logs.name.is_some() {
                problems.push(
                    "discovery.defaults.logs: expected no `cluster` or `name` (each discovered cluster's own)"
                        .to_string(),
                );
            }
            for (i, p) in logs.paths.iter().enumerate() {
                if !p.contains(CLUSTER_PLACEHOLDER) {
                    problems.push(format!(
                        "discovery.defaults.logs.paths[{i}]: {p:?}: expected {CLUSTER_PLACEHOLDER} in it (every cluster would follow the same files)"
                    ));
                }
            }
        }
    }
}

/// `[discovery.kubernetes]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KubernetesConfig {
    /// Watch the Kubernetes API for Flink clusters.
    pub enabled: bool,
    /// Namespaces to watch (empty: every namespace, which needs a ClusterRole).
    pub namespaces: Vec<String>,
    /// Which kinds to watch: `services`, `flinkdeployments`, `flinksessionjobs`.
    pub kinds: Vec<String>,
    /// Label selector for Services (Flink's native integration labels its services so).
    pub service_selector: String,
    /// Label selector for FlinkDeployments and FlinkSessionJobs (empty: all).
    pub label_selector: String,
    /// The API server's URL, without credentials (e.g. `kubectl proxy`); else `kubeconfig`,
    /// else the in-cluster service account or the default kubeconfig.
    pub api_url: Option<String>,
    /// A kubeconfig file (its current context).
    pub kubeconfig: Option<PathBuf>,
    /// The REST URL of a discovered cluster: `{scheme}` (`[discovery.defaults] scheme`),
    /// `{service}`, `{namespace}`, `{port}`, `{cluster_id}` are replaced.
    pub url_template: String,
    /// The REST port when the object does not say (Flink's `rest.port` default).
    pub rest_port: u16,
    /// At most this many objects (all kinds together) are kept; the rest are cut and counted.
    pub max_objects: usize,
    /// The API server ends each watch after this long (`timeoutSeconds`); it is then resumed.
    #[serde(with = "humantime_serde")]
    pub watch_timeout: Duration,
    /// Connect and write timeout of every request to the API server (reads: `watch_timeout`
    /// plus this).
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// At start (and when discovery restarts on a reload), wait at most this long for the first
    /// complete listing before the daemon goes on with what it has.
    #[serde(with = "humantime_serde")]
    pub initial_wait: Duration,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            enabled: false,
            namespaces: Vec::new(),
            kinds: KUBERNETES_KINDS.iter().map(|k| k.to_string()).collect(),
            service_selector: "type=flink-native-kubernetes".to_string(),
            label_selector: String::new(),
            api_url: None,
            kubeconfig: None,
            url_template: "{scheme}://{service}.{namespace}.svc:{port}".to_string(),
            rest_port: 8081,
            max_objects: 5000,
            watch_timeout: Duration::from_secs(290),
            request_timeout: Duration::from_secs(10),
            initial_wait: Duration::from_secs(10),
        }
    }
}

/// The kinds of object `[discovery.kubernetes] kinds` may name (the resources' plurals), in the
/// order of `sources::kubernetes::KINDS` (the metrics' order).
pub const KUBERNETES_KINDS: [&str; 3] = ["services", "flinkdeployments", "flinksessionjobs"];

/// Most objects `max_objects` may allow.
pub const MAX_OBJECTS_LIMIT: usize = 100_000;

impl KubernetesConfig {
    /// Every problem with the values, each naming its key (`discovery.kubernetes.…`).
    pub fn problems(&self, problems: &mut Vec<String>) {
        let key = |k: &str| format!("discovery.kubernetes.{k}");
        for (i, ns) in self.namespaces.iter().enumerate() {
            if !is_dns_label(ns) {
                problems.push(format!(
                    "{}[{i}]: {ns:?}: expected a namespace name (lowercase letters, digits and '-', at most 63)",
                    key("namespaces")
                ));
            }
        }
        for (i, k) in self.kinds.iter().enumerate() {
            if !KUBERNETES_KINDS.contains(&k.as_str()) {
                problems.push(format!(
                    "{}[{i}]: {k:?}: expected services, flinkdeployments or flinksessionjobs",
                    key("kinds")
                ));
            } else if self.kinds[..i].contains(k) {
                problems.push(format!("{}[{i}]: {k:?}: expected each kind once", key("kinds")));
            }
        }
        if self.enabled && self.kinds.is_empty() {
            problems.push(format!("{}: expected at least one kind when enabled", key("kinds")));
        }
        for (name, selector) in
            [("service_selector", &self.service_selector), ("label_selector", &self.label_selector)]
        {
            if let Err(e) = check_selector(selector) {
                problems.push(format!("{}: {selector:?}: expected a label selector ({e})", key(name)));
            }
        }
        if let Some(api) = &self.api_url {
            let ok = url::Url::parse(api)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
                .is_some()
                && api.parse::<axum::http::Uri>().is_ok();
            if !ok {
                problems.push(format!("{}: {api:?}: expected an http or https URL", key("api_url")));
            }
            if self.kubeconfig.is_some() {
                problems.push(format!("{}: expected api_url or kubeconfig, not both", key("kubeconfig")));
            }
        }
        let sample = render_url(&self.url_template, "https", "orders-rest", "flink", 8081, "orders");
        if !self.url_template.contains("{port}") && !self.url_template.contains("{service}") {
            problems.push(format!(
                "{}: {:?}: expected {{service}} or {{port}} in it (else every cluster has one URL)",
                key("url_template"),
                self.url_template
            ));
        } else if url::Url::parse(&sample).ok().filter(|u| u.host().is_some()).is_none() {
            problems.push(format!(
                "{}: {:?}: expected a URL template (it gives {sample:?})",
                key("url_template"),
                self.url_template
            ));
        }
        if self.rest_port == 0 {
            problems.push(format!("{}: expected 1 to 65535", key("rest_port")));
        }
        if !(1..=MAX_OBJECTS_LIMIT).contains(&self.max_objects) {
            problems.push(format!("{}: expected 1 to {MAX_OBJECTS_LIMIT}", key("max_objects")));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.watch_timeout) {
            problems.push(format!("{}: expected 1s to 1h", key("watch_timeout")));
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(300)).contains(&self.request_timeout) {
            problems.push(format!("{}: expected 100ms to 5m", key("request_timeout")));
        }
        if self.initial_wait > Duration::from_secs(300) {
            problems.push(format!("{}: expected at most 5m", key("initial_wait")));
        }
    }
}

/// A DNS-1123 label (a namespace's or a Service's name part).
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A Kubernetes label selector, checked for form (the API server has the last word):
/// comma-separated `key`, `!key`, `key=value`, `key==value`, `key!=value`,
/// `key in (a,b)`, `key notin (a,b)`.
fn check_selector(s: &str) -> Result<(), String> {
    let key_ok = |k: &str| {
        !k.is_empty() && k.len() <= 317 && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    };
    let value_ok =
        |v: &str| v.len() <= 63 && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    // Split on commas outside parentheses.
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err("unbalanced parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    parts.push(&s[start..]);
    if s.trim().is_empty() {
        return Ok(());
    }
    for part in parts {
        let p = part.trim();
        let ok = if let Some((k, v)) =
            p.split_once("!=").or_else(|| p.split_once("==")).or_else(|| p.split_once('='))
        {
            key_ok(k.trim()) && value_ok(v.trim())
        } else if let Some((k, rest)) = p.split_once(" in ").or_else(|| p.split_once(" notin ")) {
            let set = rest.trim();
            key_ok(k.trim())
                && set.starts_with('(')
                && set.ends_with(')')
                && set[1..set.len() - 1].split(',').all(|v| value_ok(v.trim()))
        } else {
            key_ok(p.strip_prefix('!').unwrap_or(p).trim())
        };
        if !ok {
            return Err(format!("{p:?} is not a requirement"));
        }
    }
    Ok(())
}

/// The URL template with its placeholders replaced.
pub fn render_url(
    template: &str,
    scheme: &str,
    service: &str,
    namespace: &str,
    port: u16,
    cluster_id: &str,
) -> String {
    template
        .replace("{scheme}", scheme)
        .replace("{service}", service)
        .replace("{namespace}", namespace)
        .replace("{port}", &port.to_string())
        .replace("{cluster_id}", cluster_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_settings_are_validated() {
        let c = load("[metrics]\noperators=false\nquantiles=[0.95]\n").unwrap();
        assert_eq!(c.metrics.shown_quantiles(), [false, true, false]);
        assert!(!c.metrics.operators);
        let err = load("[metrics]\nquantiles=[0.9, 0.95, 0.95]\n").unwrap_err().to_string();
        assert!(err.contains("metrics.quantiles[0]: 0.9: expected one of 0.5, 0.95, 0.99"), "{err}");
        assert!(err.contains("metrics.quantiles[2]: 0.95: given twice"), "{err}");
    }

    #[test]
    fn a_number_where_a_duration_belongs_is_explained() {
        let err =
            load("[[clusters]]\nname='a'\nurl='http://x:1'\npoll_interval=5\n").unwrap_err().to_string();
        assert!(
            err.contains("key `clusters[0].poll_interval`: 5: expected a duration such as \"5s\""),
            "{err}"
        );
        assert!(!err.contains("string \"5\""), "{err}");
    }

    #[test]
    fn a_bad_environment_variable_is_named_not_the_file() {
        let f = write("[[clusters]]\nname='a'\nurl='http://x:1'\n");
        let file = f.path().display().to_string();
        let env = |k: &str, v: &str| {
            vec![(k.to_string(), v.to_string()), ("SENTINEL_STATS__WINDOW".into(), "5m".into())]
        };
        let err =
            Config::load_with_env(f.path(), env("SENTINEL_SERVR__LISTEN", "1")).unwrap_err().to_string();
        assert!(err.starts_with("environment variable SENTINEL_SERVR__LISTEN: unknown key `servr`"), "{err}");
        assert!(!err.contains(&file), "{err}");
        let err =
            Config::load_with_env(f.path(), env("SENTINEL_SERVER__LISTEN", "1")).unwrap_err().to_string();
        assert!(err.starts_with("environment variable SENTINEL_SERVER__LISTEN: "), "{err}");
        assert!(err.contains("server.listen"), "{err}");
        // A problem of the file is still the file's, even with a variable set.
        let bad = write("[server]\nlistn='x'\n");
        let err = Config::load_with_env(bad.path(), env("SENTINEL_SERVER__LISTEN", "127.0.0.1:1"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&bad.path().display().to_string()) && err.contains("listn"), "{err}");
    }

    #[test]
    fn every_missing_rule_field_is_named_at_once() {
        let text = "[[clusters]]\nname='a'\nurl='http://x:1'\n[[rules]]\nname = \"Probe\"\nexpr = \"restores > 0\"\nsummary = \"s\"\n[[rules]]\nname = \"Other\"\nexpr = \"restores > 0\"\nseverity = \"info\"\nclass = \"unknown\"\nsummary = \"s\"\ndescription = \"d\"\n";
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains("rules[0]: missing severity, class, description, runbook_url"), "{err}");
        assert!(err.contains("rules[1]: missing runbook_url"), "{err}");
    }

    #[test]
    fn a_missing_key_under_an_array_element_is_named_with_its_dot() {
        let text = "[[rules]]\nname = \"Probe\"\nexpr = \"restores > 0\"\nseverity = \"info\"\nclass = \"nonsense\"\nsummary = \"s\"\ndescription = \"d\"\nrunbook_url = \"u\"\n";
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains("rules[0].class"), "{err}");
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    fn load(text: &str) -> Result<Config, ConfigError> {
        let f = write(text);
        Config::load_with_env(f.path(), Vec::new())
    }

    #[test]
    fn a_password_in_a_url_is_masked() {
        assert_eq!(redact_url("http://u:pw@flink:8081/x"), "http://u:********@flink:8081/x");
        assert_eq!(redact_url("https://token@am:9093"), "https://token:********@am:9093");
        assert_eq!(
            redact_url("http://flink:8081/a@b"),
            "http://flink:8081/a@b",
            "an @ in the path is no user info"
        );
        assert_eq!(redact_url("http://flink:8081"), "http://flink:8081");
        let text = "[[clusters]]\nname = \"a\"\nurl = \"http://admin:hunter2@flink:8081\"\n\
                    [alerting]\nalertmanagers = [\"http://am:s3cret@am:9093\"]\n";
        let shown = load(text).unwrap().to_masked_toml();
        assert!(!shown.contains("hunter2") && !shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("http://admin:********@flink:8081"), "{shown}");
    }

    #[test]
    fn an_empty_token_file_is_refused() {
        let token = write("\n");
        let text = format!("[server]\nbearer_token = {{ file = \"{}\" }}\n", token.path().display());
        let err = load(&text).unwrap_err().to_string();
        assert!(err.contains("server.bearer_token") && err.contains("the file is empty"), "{err}");
    }

    #[test]
    fn reference_config_parses_to_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/checkpoint-sentinel.toml");
        let config = Config::load_with_env(&path, Vec::new()).unwrap();
        let expected = Config {
            clusters: vec![ClusterConfig::new("local", "http://127.0.0.1:8081")],
            ..Config::default()
        };
        assert_eq!(config, expected);
    }

    #[test]
    fn the_sharded_discovery_example_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let config = Config::load_with_env(&dir.join("discovery-sharded.toml"), Vec::new()).unwrap();
        assert!(config.clusters[0].shard_jobs);
        assert!(config.discovery.defaults.logs.as_ref().is_some_and(|l| l.paths[0].contains("{cluster}")));
        let text = std::fs::read_to_string(dir.join("file_sd/flink-apps.yml")).unwrap();
        let targets =
            crate::sources::discovery::parse_as(&text, crate::sources::discovery::Format::Yaml, "http")
                .unwrap();
        assert_eq!(targets.len(), 4);
    }

    #[test]
    fn durations_are_humane() {
        let c =
            load("[[clusters]]\nname='a'\nurl='http://x:1'\npoll_interval='250ms'\n[stats]\nwindow='5m'\n")
                .unwrap();
        assert_eq!(c.clusters[0].poll_interval, Duration::from_millis(250));
        assert_eq!(c.stats.window, Duration::from_secs(300));
    }

    #[test]
    fn a_wrong_type_names_the_file_and_key() {
        let f = write("[[clusters]]\nname='a'\nurl='http://x:1'\npoll_interval='often'\n");
        let err = Config::load_with_env(f.path(), Vec::new()).unwrap_err().to_string();
        assert!(err.contains(&f.path().display().to_string()), "{err}");
        assert!(err.contains("poll_interval"), "{err}");
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let err = load("[server]\nlisten='127.0.0.1:1'\nlistn='x'\n").unwrap_err().to_string();
        assert!(err.contains("listn"), "{err}");
    }

    #[test]
    fn invalid_values_are_all_reported_with_their_keys() {
        let err = load("[[clusters]]\nname='a b'\nurl='ftp://x'\n[[clusters]]\nname='c'\nurl='http://y'\ninclude_jobs=['(']\n")
            .unwrap_err()
            .to_string();
        for needle in ["clusters[0].name", "clusters[0].url", "clusters[1].include_jobs[0]"] {
            assert!(err.contains(needle), "{needle} missing in {err}");
        }
    }

    #[test]
    fn patterns_and_rules_are_compiled_once_when_read_and_handed_on() {
        let text = "[[clusters]]\nname='c'\nurl='http://y'\ninclude_jobs=['^orders-', '(']\n\
                    [[rules]]\nname='Mine'\nexpr='checkpoints.failed > 0'\nseverity='warning'\nclass='failure'\n\
                    summary='s'\ndescription='d'\nrunbook_url='u'\n\
                    [[rules]]\nname='Bad'\nexpr='checkpoints.failed >'\nseverity='warning'\nclass='failure'\n\
                    summary='s'\ndescription='d'\nrunbook_url='u'\n";
        let config: Config = toml::from_str(text).unwrap();
        let c = &config.clusters[0];
        assert!(c.include_jobs[0].regex().unwrap().is_match("orders-eu"));
        let err = c.include_jobs[1].regex().unwrap_err().to_string();
        let problems = config.problems();
        assert!(
            problems.iter().any(|p| p.starts_with("clusters[0].include_jobs[1]: \"(\"") && p.contains(&err))
        );
        assert!(config.rules[0].rule().is_ok());
        assert!(problems.iter().any(|p| p.starts_with("rules[1].expr: ")), "{problems:?}");
        // The compiled copy is handed on; the bad rule is reported, never silently lost.
        let names: Vec<String> = config.effective_rules().into_iter().map(|r| r.spec.name).collect();
        assert!(names.contains(&"Mine".to_string()) && !names.contains(&"Bad".to_string()));
        // Written back as it was read.
        let back = toml::to_string(&config).unwrap();
        assert!(back.contains("include_jobs = [\"^orders-\", \"(\"]"), "{back}");
    }

    #[test]
    fn environment_overrides_the_file() {
        let f = write("[server]\nlisten='127.0.0.1:1'\n");
        let env = vec![
            ("SENTINEL_SERVER__LISTEN".to_string(), "127.0.0.1:2".to_string()),
            ("SENTINEL_LOG".to_string(), "debug".to_string()),
        ];
        let c = Config::load_with_env(f.path(), env).unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:2".parse().unwrap());
    }

    #[test]
    fn log_entries_parse_and_are_validated() {
        let c = load("[[clusters]]\nname='a'\nurl='http://x:1'\n[[logs]]\ncluster='a'\npaths=['/var/log/flink/*.log']\nstart_at='beginning'\n[[logs.patterns]]\nname='p'\nregex='^x (?P<id>\\d+)$'\nkind='my_kind'\n").unwrap();
        assert_eq!(c.logs[0].start_at, StartAt::Beginning);
        assert_eq!(c.logs[0].poll_interval, Duration::from_secs(1));
        assert_eq!(c.logs[0].patterns[0].severity, crate::observe::EventSeverity::Warning);
        let err = load("[[clusters]]\nname='a'\nurl='http://x:1'\n[[logs]]\ncluster='b'\npaths=['[']\n[[logs.patterns]]\nname='p'\nregex='('\nkind='Bad'\n[[logs]]\ncluster='a'\n")
            .unwrap_err()
            .to_string();
        for needle in [
            "logs[0].cluster",
            "logs[0].paths[0]",
            "logs[0].patterns[0].regex",
            "logs[0].patterns[0].kind",
            "logs[1].paths",
        ] {
            assert!(err.contains(needle), "{needle} missing in {err}");
        }
    }

    #[test]
    fn a_cluster_whose_jobs_are_shared_out_is_on_every_replica_and_its_logs_on_its_owner() {
        let mut shared = ClusterConfig::new("session", "http://s:1");
        shared.shard_jobs = true;
        let apps: Vec<ClusterConfig> =
            (0..6).map(|i| ClusterConfig::new(&format!("app-{i}"), "http://a:1")).collect();
        let config = Config {
            clusters: std::iter::once(shared).chain(apps).collect(),
            logs: vec![LogConfig {
                cluster: "session".into(),
                paths: vec!["/l/*.log".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut app_owners = 0;
        let mut log_owners = 0;
        for index in 0..3 {
            let shard = Shard { index, count: 3 };
            let mine = config.clone().for_shard(Some(shard));
            let session = mine.clusters.iter().find(|c| c.name == "session").expect("on every replica");
            assert_eq!(session.job_shard, Some(shard));
            assert!(mine.clusters.iter().filter(|c| c.name != "session").all(|c| c.job_shard.is_none()));
            app_owners += mine.clusters.len() - 1;
            log_owners += mine.logs.len();
            assert_eq!(mine.logs.len(), usize::from(shard.owns("session")));
        }
        assert_eq!((app_owners, log_owners), (6, 1), "each app cluster once, the session's logs once");
        assert_eq!(
            shard_clusters(config.clusters.clone(), None),
            config.clusters,
            "unsharded: all, unmarked"
        );
    }

    #[test]
    fn shards_split_the_clusters_between_them() {
        // Evenly: within 10 % of 1/count each (FNV-1a without the finaliser gave 3 shards
        // 750, 750 and 1,500 of these).
        let many: Vec<String> = (0..3000).map(|i| format!("cluster-{i}")).collect();
        for count in 2..6u32 {
            for i in 0..count {
                let share = many.iter().filter(|n| Shard { index: i, count }.owns(n)).count();
                let fair = 3000 / count as usize;
                assert!(share.abs_diff(fair) < fair / 10, "shard {i}/{count} owns {share}, fair {fair}");
            }
        }
        // Jobs of one cluster too (ids differ in their first hex digits only).
        for i in 0..3 {
            let share = (0..3000)
                .filter(|j| Shard { index: i, count: 3 }.owns_job("session", &format!("{j:08x}2b1a1f0b4e0c")))
                .count();
            assert!(share.abs_diff(1000) < 100, "shard {i}/3 owns {share} of 3,000 jobs");
        }
        let names: Vec<String> = (0..300).map(|i| format!("cluster-{i}")).collect();
        for count in 1..5u32 {
            let owners: Vec<u32> = names
                .iter()
                .map(|n| {
                    let owners: Vec<u32> =
                        (0..count).filter(|&i| Shard { index: i, count }.owns(n)).collect();
                    assert_eq!(owners.len(), 1, "{n} owned by {owners:?}");
                    owners[0]
                })
                .collect();
            for i in 0..count {
                let share = owners.iter().filter(|&&o| o == i).count();
                assert!(share > 300 / count as usize / 2, "shard {i}/{count} owns only {share}");
            }
        }
        // Adding a shard moves only the clusters the new shard takes.
        let moved = names
            .iter()
            .filter(|n| {
                let before = (0..3).find(|&i| Shard { index: i, count: 3 }.owns(n));
                let after = (0..4).find(|&i| Shard { index: i, count: 4 }.owns(n));
                before != after && after != Some(3)
            })
            .count();
        assert_eq!(moved, 0);
        let env = |k: &str| match k {
            "SENTINEL_SHARD_INDEX" => Some("2".to_string()),
            "SENTINEL_SHARD_COUNT" => Some("2".to_string()),
            _ => None,
        };
        assert!(Shard::from_env(env).unwrap_err().contains("index < count"));
        assert_eq!(Shard::from_env(|_| None), Ok(None));
    }

    #[test]
    fn secrets_are_masked_when_printed() {
        let c = load("[[clusters]]\nname='a'\nurl='http://x:1'\n[clusters.basic_auth]\nusername='u'\npassword={value='hunter2'}\n").unwrap();
        let shown = c.to_masked_toml();
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("********"), "{shown}");
    }
}
