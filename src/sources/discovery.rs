//! File discovery of clusters (Prometheus `file_sd` convention): JSON files listing
//! `{"targets": ["host:port"], "labels": {"cluster": "orders"}}` groups become clusters.
//!
//! `[discovery] files` are glob patterns; every matching file is read on start, when a file in
//! a watched directory changes (notify), and every `refresh_interval` (the fallback when events
//! are lost, e.g. on network file systems). Each target becomes a `ClusterConfig` built from
//! `[discovery.defaults]`; the cluster's name is the `cluster` label, else the target. The
//! parsing and merging here are pure; [`spawn`] is the I/O edge, and the daemon turns what it
//! sends into running pollers through the same path as a config reload.
//!
//! Bounds: at most `max_files` files, each at most `max_file_bytes`, and at most `max_clusters`
//! discovered clusters (the rest are cut, counted in
//! `checkpoint_sentinel_discovery_targets_dropped`). A file that cannot be read or parsed is a
//! warning and `checkpoint_sentinel_discovery_file_errors_total`; what it gave before is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use crate::config::{BasicAuth, ClusterConfig, Secret};

/// `[discovery]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoveryConfig {
    /// Glob patterns of JSON files in Prometheus' `file_sd` format (empty: discovery off).
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
    pub include_jobs: Vec<String>,
    /// Regular expressions over job names: never watch matching jobs.
    pub exclude_jobs: Vec<String>,
    /// As `pending_subtask_after` of `[[clusters]]`.
    pub pending_subtask_after: f64,
    /// As `max_response_bytes` of `[[clusters]]`.
    pub max_response_bytes: u64,
    /// As `max_jobs` of `[[clusters]]`.
    pub max_jobs: usize,
    /// As `max_history_per_poll` of `[[clusters]]`.
    pub max_history_per_poll: usize,
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
        }
    }
}

/// Most discovered clusters `max_clusters` may allow.
pub const MAX_CLUSTERS_LIMIT: usize = 100_000;

impl DiscoveryConfig {
    /// Whether any file is to be watched.
    pub fn enabled(&self) -> bool {
        !self.files.is_empty()
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
        // The defaults are checked as the cluster they make, with their own key names (only
        // when discovery is on: the probe's own discovery is off, which ends the recursion).
        if !self.enabled() {
            return;
        }
        let probe = crate::config::Config {
            clusters: vec![self.defaults.cluster("discovered", "http://discovered:8081")],
            ..Default::default()
        };
        for p in probe.problems() {
            if let Some(rest) = p.strip_prefix("clusters[0].") {
                problems.push(format!("discovery.defaults.{rest}"));
            }
        }
    }
}

/// One group of a `file_sd` file.
#[derive(Clone, Debug, Deserialize)]
struct Group {
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// A target read from a file: (name, url).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The cluster name (the `cluster` label, else the target made a valid name).
    pub name: String,
    /// The JobManager's REST base URL.
    pub url: String,
}

/// Parses one file's contents into its targets; `scheme` for targets without one.
pub fn parse(text: &str, scheme: &str) -> Result<Vec<Target>, String> {
    let groups: Vec<Group> =
        serde_json::from_str(text).map_err(|e| format!("not a file_sd JSON list: {e}"))?;
    let mut out = Vec::new();
    for g in groups {
        let scheme = g.labels.get("__scheme__").map_or(scheme, String::as_str);
        for t in &g.targets {
            let url = if t.contains("://") { t.clone() } else { format!("{scheme}://{t}") };
            let name = g.labels.get("cluster").cloned().unwrap_or_else(|| name_of(t));
            out.push(Target { name, url });
        }
    }
    Ok(out)
}

/// A target as a cluster name: letters, digits, '-', '_' and '.' kept, anything else '_'
/// (`flink-orders-rest.team:8081` is `flink-orders-rest.team_8081`).
pub fn name_of(target: &str) -> String {
    let bare = target.split_once("://").map_or(target, |(_, rest)| rest).trim_end_matches('/');
    bare.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// What the last reading of the files gave, for metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiscoveryStats {
    /// Clusters discovered and handed to the daemon.
    pub clusters: usize,
    /// Targets left out at the last reading, by reason (`limit`, `duplicate`, `invalid`).
    pub dropped: [(&'static str, u64); 3],
    /// Failed file reads since start, by reason (`too_large`, `unreadable`, `invalid`,
    /// `too_many_files`).
    pub file_errors: [(&'static str, u64); 4],
}

/// Reasons a target is left out.
pub const DROP_REASONS: [&str; 3] = ["limit", "duplicate", "invalid"];
/// Reasons a file read fails.
pub const FILE_ERRORS: [&str; 4] = ["too_large", "unreadable", "invalid", "too_many_files"];

/// The discovered clusters from the files' targets (in path order): invalid names and URLs,
/// names already taken (by a `[[clusters]]` entry or an earlier target) and targets beyond
/// `max_clusters` are left out with a warning, and counted in `dropped`.
pub fn merge(
    files: &BTreeMap<PathBuf, Vec<Target>>,
    config: &DiscoveryConfig,
    static_names: &BTreeSet<String>,
    dropped: &mut [u64; 3],
) -> Vec<ClusterConfig> {
    let mut taken = static_names.clone();
    let mut out = Vec::new();
    for (path, targets) in files {
        for t in targets {
            let cluster = config.defaults.cluster(&t.name, &t.url);
            let probe = crate::config::Config { clusters: vec![cluster.clone()], ..Default::default() };
            let problems = probe.problems();
            if !problems.is_empty() {
                tracing::warn!(file = %path.display(), target = %t.url, "discovered target left out: {}", problems.join("; "));
                dropped[2] += 1;
                continue;
            }
            if !taken.insert(t.name.clone()) {
                tracing::warn!(file = %path.display(), cluster = %t.name, url = %t.url, "discovered cluster left out: the name is taken by a [[clusters]] entry or an earlier target");
                dropped[1] += 1;
                continue;
            }
            if out.len() >= config.max_clusters {
                dropped[0] += 1;
                continue;
            }
            out.push(cluster);
        }
    }
    if dropped[0] > 0 {
        tracing::warn!(
            max_clusters = config.max_clusters,
            left_out = dropped[0],
            "more discovered clusters than discovery.max_clusters; the rest are not polled"
        );
    }
    out
}

/// Reads the files the globs match now. `known` holds each file's targets from its last good
/// reading: a file that cannot be read keeps them; a file no longer matched is forgotten.
pub fn read_files(
    config: &DiscoveryConfig,
    known: &mut BTreeMap<PathBuf, Vec<Target>>,
    file_errors: &mut [u64; 4],
) {
    let mut paths = BTreeSet::new();
    for pattern in &config.files {
        match glob::glob(pattern) {
            Ok(matches) => paths.extend(matches.flatten().filter(|p| p.is_file())),
            Err(e) => tracing::warn!(pattern, "not a glob pattern: {e}"),
        }
    }
    if paths.len() > config.max_files {
        tracing::warn!(
            matched = paths.len(),
            max_files = config.max_files,
            "more discovery files than discovery.max_files; the last in path order are not read"
        );
        file_errors[3] += (paths.len() - config.max_files) as u64;
    }
    let paths: Vec<PathBuf> = paths.into_iter().take(config.max_files).collect();
    known.retain(|p, _| paths.contains(p));
    for path in paths {
        match read_file(&path, config) {
            Ok(targets) => {
                known.insert(path, targets);
            }
            Err((reason, message)) => {
                tracing::warn!(file = %path.display(), "discovery file not read, what it gave before is kept: {message}");
                file_errors[reason] += 1;
            }
        }
    }
}

fn read_file(path: &Path, config: &DiscoveryConfig) -> Result<Vec<Target>, (usize, String)> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| (1, format!("cannot open: {e}")))?;
    let mut text = String::new();
    // One byte over the cap tells a file at the cap from a larger one.
    file.take(config.max_file_bytes + 1)
        .read_to_string(&mut text)
        .map_err(|e| (1, format!("cannot read: {e}")))?;
    if text.len() as u64 > config.max_file_bytes {
        return Err((0, format!("larger than discovery.max_file_bytes ({} bytes)", config.max_file_bytes)));
    }
    parse(&text, &config.defaults.scheme).map_err(|e| (2, e))
}

/// The discovery task: reads the files at once, then on changes and every `refresh_interval`,
/// and sends the discovered clusters whenever they change. `static_names` are the names of
/// the `[[clusters]]` entries (they win a clash). Stops when `stop` turns true or the receiver
/// is dropped.
pub struct Discovery {
    config: DiscoveryConfig,
    static_names: BTreeSet<String>,
    known: BTreeMap<PathBuf, Vec<Target>>,
    file_errors: [u64; 4],
    /// The last clusters sent, and the stats of the last reading.
    pub clusters: Vec<ClusterConfig>,
    /// For metrics.
    pub stats: DiscoveryStats,
}

impl Discovery {
    /// A discovery over `config`, its first reading done.
    pub fn new(config: DiscoveryConfig, static_names: BTreeSet<String>) -> Self {
        let mut d = Discovery {
            config,
            static_names,
            known: BTreeMap::new(),
            file_errors: [0; 4],
            clusters: Vec::new(),
            stats: DiscoveryStats::default(),
        };
        d.refresh();
        d
    }

    /// Re-reads the files; returns whether the clusters changed.
    pub fn refresh(&mut self) -> bool {
        read_files(&self.config, &mut self.known, &mut self.file_errors);
        let mut dropped = [0u64; 3];
        let clusters = merge(&self.known, &self.config, &self.static_names, &mut dropped);
        self.stats = DiscoveryStats {
            clusters: clusters.len(),
            dropped: std::array::from_fn(|i| (DROP_REASONS[i], dropped[i])),
            file_errors: std::array::from_fn(|i| (FILE_ERRORS[i], self.file_errors[i])),
        };
        let changed = clusters != self.clusters;
        self.clusters = clusters;
        changed
    }

    /// Runs as a task: sends the clusters (after the first reading, already in `self`) on
    /// every change, publishes the stats into `stats`.
    pub async fn run(
        mut self,
        sender: watch::Sender<Vec<ClusterConfig>>,
        app: std::sync::Arc<crate::app::AppState>,
    ) {
        let (events_tx, mut events) = mpsc::channel::<()>(1);
        // Kept here too: without a watcher (notify failed) the periodic re-read goes on.
        let _events_tx = events_tx.clone();
        let _watcher = watch_dirs(&self.config.files, events_tx);
        let mut tick = tokio::time::interval(self.config.refresh_interval);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                got = events.recv() => {
                    if got.is_none() { return }
                    // A file written in place comes as several events: let the writes settle.
                    tokio::time::sleep(SETTLE).await;
                    while events.try_recv().is_ok() {}
                }
                () = sender.closed() => return,
            }
            // Reading files is blocking I/O: off the async workers.
            let Ok((back, changed)) = tokio::task::spawn_blocking(move || {
                let changed = self.refresh();
                (self, changed)
            })
            .await
            else {
                return;
            };
            self = back;
            *app.discovery.write().unwrap_or_else(|e| e.into_inner()) = Some(self.stats.clone());
            if changed {
                tracing::info!(clusters = self.clusters.len(), "discovered clusters changed");
                if sender.send(self.clusters.clone()).is_err() {
                    return;
                }
            }
        }
    }
}

/// How long file events must be quiet before the files are read.
const SETTLE: Duration = Duration::from_millis(200);

/// The directory a glob pattern's matches live in: its part before the first component with a
/// wildcard (`/etc/cs/clusters/*.json` watches `/etc/cs/clusters`).
fn watch_dir(pattern: &str) -> PathBuf {
    let mut dir = PathBuf::new();
    for part in Path::new(pattern).components() {
        let s = part.as_os_str().to_string_lossy();
        if s.contains(['*', '?', '[']) {
            break;
        }
        dir.push(part);
    }
    // The pattern named a file: watch its directory.
    if dir.as_os_str() == pattern {
        dir.pop();
    }
    if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir }
}

fn watch_dirs(patterns: &[String], events: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher;
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !matches!(event.kind, notify::EventKind::Access(_))
        {
            let _ = events.try_send(());
        }
    })
    .map_err(|e| {
        tracing::warn!("cannot watch the discovery files, re-reading them every refresh_interval: {e}")
    })
    .ok()?;
    let dirs: BTreeSet<PathBuf> = patterns.iter().map(|p| watch_dir(p)).collect();
    for dir in dirs {
        // Recursive: a pattern like `clusters/*/*.json` has matches below the watched directory.
        if let Err(e) = watcher.watch(&dir, notify::RecursiveMode::Recursive) {
            tracing::warn!(dir = %dir.display(), "cannot watch this directory, re-reading it every refresh_interval: {e}");
        }
    }
    Some(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_named_by_their_cluster_label_else_by_the_target() {
        let text = r#"[
            {"targets": ["orders-rest.flink:8081"], "labels": {"cluster": "orders", "team": "a"}},
            {"targets": ["10.0.0.7:8081", "https://secure:443/"]},
            {"targets": ["tls:8443"], "labels": {"__scheme__": "https"}}
        ]"#;
        let got = parse(text, "http").unwrap();
        let pairs: Vec<(&str, &str)> = got.iter().map(|t| (t.name.as_str(), t.url.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("orders", "http://orders-rest.flink:8081"),
                ("10.0.0.7_8081", "http://10.0.0.7:8081"),
                ("secure_443", "https://secure:443/"),
                ("tls_8443", "https://tls:8443"),
            ]
        );
        assert!(parse("{\"targets\": []}", "http").is_err(), "an object, not a list");
    }

    #[test]
    fn clashes_invalid_targets_and_the_cap_are_left_out_deterministically() {
        let t = |name: &str, url: &str| Target { name: name.into(), url: url.into() };
        let mut files = BTreeMap::new();
        files.insert(PathBuf::from("/d/b.json"), vec![t("orders", "http://b:1"), t("x y", "http://c:1")]);
        files.insert(PathBuf::from("/d/a.json"), vec![t("orders", "http://a:1"), t("static", "http://s:1")]);
        files.insert(PathBuf::from("/d/c.json"), vec![t("one", "http://o:1"), t("two", "http://t:1")]);
        let config = DiscoveryConfig { max_clusters: 2, ..Default::default() };
        let mut dropped = [0; 3];
        let got = merge(&files, &config, &BTreeSet::from(["static".to_string()]), &mut dropped);
        let names: Vec<(&str, &str)> = got.iter().map(|c| (c.name.as_str(), c.url.as_str())).collect();
        // a.json comes first: its `orders` wins; `static` is a [[clusters]] entry's name.
        assert_eq!(names, [("orders", "http://a:1"), ("one", "http://o:1")]);
        assert_eq!(dropped, [1, 2, 1], "limit, duplicate, invalid");
    }

    #[test]
    fn a_bad_or_oversized_file_keeps_what_it_gave_before_and_a_removed_file_is_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        std::fs::write(&a, r#"[{"targets": ["a:1"], "labels": {"cluster": "a"}}]"#).unwrap();
        std::fs::write(&b, r#"[{"targets": ["b:1"], "labels": {"cluster": "b"}}]"#).unwrap();
        let config = DiscoveryConfig {
            files: vec![format!("{}/*.json", dir.path().display())],
            max_file_bytes: 1024,
            ..Default::default()
        };
        let mut d = Discovery::new(config, BTreeSet::new());
        assert_eq!(d.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        std::fs::write(&a, "[{\"targets\": [").unwrap();
        std::fs::write(&b, format!("[{}]", " ".repeat(2000))).unwrap();
        assert!(!d.refresh(), "nothing changes");
        assert_eq!(
            d.stats.file_errors,
            [("too_large", 1), ("unreadable", 0), ("invalid", 1), ("too_many_files", 0)]
        );
        std::fs::remove_file(&b).unwrap();
        assert!(d.refresh());
        assert_eq!(d.clusters.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["a"]);
    }

    #[test]
    fn watched_directories_are_the_patterns_fixed_parts() {
        assert_eq!(watch_dir("/etc/cs/clusters/*.json"), PathBuf::from("/etc/cs/clusters"));
        assert_eq!(watch_dir("/etc/cs/*/x.json"), PathBuf::from("/etc/cs"));
        assert_eq!(watch_dir("/etc/cs/one.json"), PathBuf::from("/etc/cs"));
        assert_eq!(watch_dir("*.json"), PathBuf::from("."));
    }

    #[test]
    fn the_defaults_are_checked_under_their_own_keys() {
        let mut config =
            DiscoveryConfig { files: vec!["[".into(), "/x/*.json".into()], ..Default::default() };
        config.defaults.poll_interval = Duration::from_millis(1);
        config.defaults.scheme = "ftp".into();
        let mut problems = Vec::new();
        config.problems(&mut problems);
        let text = problems.join("\n");
        for key in ["discovery.files[0]", "discovery.defaults.poll_interval", "discovery.defaults.scheme"] {
            assert!(text.contains(key), "{key} in {text}");
        }
    }
}
