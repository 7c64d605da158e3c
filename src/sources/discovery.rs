//! File discovery of clusters (Prometheus `file_sd` convention): JSON or YAML files (by
//! extension: `.yml`/`.yaml` are YAML) listing `{"targets": ["host:port"], "labels":
//! {"cluster": "orders"}}` groups become clusters.
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
//! `checkpoint_sentinel_discovery_targets_dropped{reason="limit"}`). A file is read group by
//! group (`file_sd`), keeping at most `max_clusters` of its targets, so what a reading holds
//! follows the target cap, not the file's size; a file whose size, times, device and inode have
//! not changed is not read again. A file that cannot be read or parsed is a warning and
//! `checkpoint_sentinel_discovery_file_errors_total`; what it gave before is kept.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::config::{ClusterConfig, DiscoveryConfig};

pub(crate) use super::file_sd::Format;
#[cfg(test)]
use super::file_sd::parse_as;
pub(crate) use super::target::Target;
pub(crate) use crate::counters::DiscoveryStats;

#[cfg(test)]
/// Parses one JSON file's contents into its targets; `scheme` for targets without one.
pub(crate) fn parse(text: &str, scheme: &str) -> Result<Vec<Target>, String> {
    parse_as(text, Format::Json, scheme)
}

/// Reasons a target is left out.
pub(crate) const DROP_REASONS: [&str; 3] = ["limit", "duplicate", "invalid"];
/// Reasons a file read fails.
pub(crate) const FILE_ERRORS: [&str; 4] = ["too_large", "unreadable", "invalid", "too_many_files"];

/// The discovered clusters from the files' targets (in path order): invalid names and URLs,
/// names already taken (by a `[[clusters]]` entry or an earlier target) and targets beyond
/// `max_clusters` are left out with a warning, and counted in `dropped`.
pub(crate) fn merge(
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

/// What discovery remembers of a file it read: its identity then, and how many targets past
/// the cap it listed. A file whose identity has not changed is not read again.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FileSeen {
    identity: FileIdentity,
    /// Targets past `max_clusters` the file listed (checked, counted, not kept).
    pub(crate) cut: u64,
}

/// A file's size, modification and change times (nanoseconds), device and inode: a file
/// written anew, in place or by a rename, changes at least one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileIdentity {
    len: u64,
    modified_ns: i128,
    changed_ns: i128,
    device: u64,
    inode: u64,
}

impl FileIdentity {
    fn of(meta: &std::fs::Metadata) -> FileIdentity {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
            FileIdentity {
                len: meta.len(),
                modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
                changed_ns: ns(meta.ctime(), meta.ctime_nsec()),
                device: meta.dev(),
                inode: meta.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
            let modified_ns = modified.map_or(0, |d| d.as_nanos() as i128);
            FileIdentity { len: meta.len(), modified_ns, changed_ns: 0, device: 0, inode: 0 }
        }
    }
}

/// A YAML file's parser holds the whole document's events, so its bytes are capped by the
/// target cap too: at most this many per discovered cluster (4 MB at the default 1,000), a
/// generous room for a group's labels. JSON is read group by group and needs no such cap.
pub(crate) const YAML_BYTES_PER_CLUSTER: u64 = 4096;

/// The most bytes of the file at `path` that are read.
fn byte_cap(path: &Path, config: &DiscoveryConfig) -> u64 {
    match Format::of(path) {
        Format::Json => config.max_file_bytes,
        Format::Yaml => {
            config.max_file_bytes.min(YAML_BYTES_PER_CLUSTER.saturating_mul(config.max_clusters as u64))
        }
    }
}

/// Reads the files the globs match now. `known` holds each file's targets from its last good
/// reading and `seen` what that reading found: a file that cannot be read keeps them; a file
/// whose identity did not change is not read again; a file no longer matched is forgotten.
pub(crate) fn read_files(
    config: &DiscoveryConfig,
    known: &mut BTreeMap<PathBuf, Vec<Target>>,
    seen: &mut BTreeMap<PathBuf, FileSeen>,
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
    seen.retain(|p, _| paths.contains(p));
    for path in paths {
        match read_file(&path, config, seen.get(&path)) {
            Ok(None) => {}
            Ok(Some((parsed, identity))) => {
                if parsed.cut > 0 {
                    tracing::warn!(
                        file = %path.display(),
                        kept = parsed.targets.len(),
                        cut = parsed.cut,
                        "the discovery file lists more targets than discovery.max_clusters; the rest are not read"
                    );
                }
                seen.insert(path.clone(), FileSeen { identity, cut: parsed.cut });
                known.insert(path, parsed.targets);
            }
            Err((reason, message)) => {
                tracing::warn!(file = %path.display(), "discovery file not read, what it gave before is kept: {message}");
                file_errors[reason] += 1;
                seen.remove(&path);
            }
        }
    }
}

/// The file's targets (at most `max_clusters`) and its identity, or `None` when it is the
/// file `last` read (unchanged: not read again).
fn read_file(
    path: &Path,
    config: &DiscoveryConfig,
    last: Option<&FileSeen>,
) -> Result<Option<(super::file_sd::Parsed, FileIdentity)>, (usize, String)> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| (1, format!("cannot open: {e}")))?;
    let identity = FileIdentity::of(&file.metadata().map_err(|e| (1, format!("cannot read: {e}")))?);
    if last.is_some_and(|l| l.identity == identity) {
        return Ok(None);
    }
    let cap = byte_cap(path, config);
    let too_large = || {
        let which = if cap < config.max_file_bytes {
            format!("{cap} bytes: {YAML_BYTES_PER_CLUSTER} per discovery.max_clusters for YAML")
        } else {
            format!("discovery.max_file_bytes ({cap} bytes)")
        };
        (0, format!("larger than {which}"))
    };
    if identity.len > cap {
        return Err(too_large());
    }
    // One byte over the cap tells a file at the cap from one that grew while it was read.
    let mut bounded = file.take(cap + 1);
    let parsed =
        super::file_sd::read(&mut bounded, Format::of(path), &config.defaults.scheme, config.max_clusters);
    if bounded.limit() == 0 {
        return Err(too_large());
    }
    parsed.map(|p| Some((p, identity))).map_err(|e| (2, e))
}

/// The discovery task: reads the files at once, then on changes and every `refresh_interval`,
/// and sends the discovered clusters whenever they change. `static_names` are the names of
/// the `[[clusters]]` entries (they win a clash). Stops when `stop` turns true or the receiver
/// is dropped.
pub(crate) struct Discovery {
    config: DiscoveryConfig,
    static_names: BTreeSet<String>,
    known: BTreeMap<PathBuf, Vec<Target>>,
    seen: BTreeMap<PathBuf, FileSeen>,
    file_errors: [u64; 4],
    /// Kubernetes discovery's watches and what they found last.
    kubernetes: Option<KubernetesWatch>,
    /// The last clusters sent, and the stats of the last reading.
    pub(crate) clusters: Vec<ClusterConfig>,
    /// For metrics.
    pub(crate) stats: DiscoveryStats,
}

impl Discovery {
    /// A discovery over `config`, its first reading done.
    pub(crate) fn new(config: DiscoveryConfig, static_names: BTreeSet<String>) -> Self {
        let mut d = Discovery {
            config,
            static_names,
            known: BTreeMap::new(),
            seen: BTreeMap::new(),
            file_errors: [0; 4],
            kubernetes: None,
            clusters: Vec::new(),
            stats: DiscoveryStats::default(),
        };
        d.refresh();
        d
    }

    /// Re-reads the files; returns whether the clusters changed.
    pub(crate) fn refresh(&mut self) -> bool {
        read_files(&self.config, &mut self.known, &mut self.seen, &mut self.file_errors);
        self.remerge()
    }

    /// Merges the files' targets and Kubernetes' (after the files: the source's key sorts
    /// after any path) into the clusters; returns whether they changed.
    fn remerge(&mut self) -> bool {
        let mut dropped = [0u64; 3];
        let clusters = match &self.kubernetes {
            Some(k) if !k.view.targets.is_empty() => {
                let mut all = self.known.clone();
                all.insert(PathBuf::from(KUBERNETES_SOURCE), k.view.targets.clone());
                merge(&all, &self.config, &self.static_names, &mut dropped)
            }
            _ => merge(&self.known, &self.config, &self.static_names, &mut dropped),
        };
        // Targets past the cap in a file were never kept: they are left out by the limit too.
        dropped[0] += self.seen.values().map(|s| s.cut).sum::<u64>();
        self.stats = DiscoveryStats {
            clusters: clusters.len(),
            dropped: std::array::from_fn(|i| (DROP_REASONS[i], dropped[i])),
            file_errors: std::array::from_fn(|i| (FILE_ERRORS[i], self.file_errors[i])),
            kubernetes: self.kubernetes.as_ref().map(|k| {
                let mut stats = k.view.stats.clone();
                let names: BTreeSet<&str> = k.view.targets.iter().map(|t| t.name.as_str()).collect();
                stats.clusters = clusters.iter().filter(|c| names.contains(c.name.as_str())).count();
                stats
            }),
        };
        let changed = clusters != self.clusters;
        self.clusters = clusters;
        changed
    }

    /// Runs as a task: sends the clusters (after the first reading, already in `self`) on
    /// every change, hands the stats to `publish` after every reading.
    pub(crate) async fn run(
        mut self,
        sender: watch::Sender<Vec<ClusterConfig>>,
        publish: impl Fn(DiscoveryStats) + Send + 'static,
    ) {
        let (events_tx, mut events) = mpsc::channel::<()>(1);
        // Without Kubernetes discovery this receiver never fires (its sender stays here).
        let (_no_kubernetes, idle) = watch::channel(crate::sources::kubernetes::View::default());
        let mut kube_rx = self.kubernetes.as_ref().map_or(idle, |k| k.rx.clone());
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
                Ok(()) = kube_rx.changed() => {
                    let view = kube_rx.borrow_and_update().clone();
                    if let Some(k) = &mut self.kubernetes {
                        k.view = view;
                    }
                    let changed = self.remerge();
                    self.send_update(&sender, &publish, changed);
                    continue;
                }
            }
            if self.config.files.is_empty() {
                continue;
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
            if !self.send_update(&sender, &publish, changed) {
                return;
            }
        }
    }

    /// Publishes the stats and, when they changed, the clusters; false when nobody listens.
    fn send_update(
        &self,
        sender: &watch::Sender<Vec<ClusterConfig>>,
        publish: &impl Fn(DiscoveryStats),
        changed: bool,
    ) -> bool {
        publish(self.stats.clone());
        if changed {
            tracing::info!(clusters = self.clusters.len(), "discovered clusters changed");
            return sender.send(self.clusters.clone()).is_ok();
        }
        true
    }

    /// Starts Kubernetes discovery when it is configured, and waits (at most
    /// `initial_wait`) for its first complete listing, so that the daemon's first clusters
    /// include what Kubernetes has. Must run inside the tokio runtime.
    pub(crate) async fn start_kubernetes(&mut self) {
        let config = &self.config.kubernetes;
        if !config.enabled || self.kubernetes.is_some() {
            return;
        }
        let (task, mut rx) =
            crate::sources::kubernetes::spawn(config.clone(), self.config.defaults.scheme.clone());
        let listed = tokio::time::timeout(config.initial_wait, rx.wait_for(|v| v.stats.synced))
            .await
            .is_ok_and(|r| r.is_ok());
        if !listed {
            tracing::warn!(
                initial_wait = ?config.initial_wait,
                "Kubernetes discovery has not listed every watched kind yet; going on with what it found"
            );
        }
        let view = rx.borrow_and_update().clone();
        self.kubernetes = Some(KubernetesWatch { view, rx, _task: AbortOnDrop(task) });
        self.remerge();
    }
}

/// The source key of Kubernetes' targets in [`merge`] (sorts after any path).
const KUBERNETES_SOURCE: &str = "~kubernetes";

/// Kubernetes discovery's task, its receiver and the last view taken from it.
struct KubernetesWatch {
    view: crate::sources::kubernetes::View,
    rx: watch::Receiver<crate::sources::kubernetes::View>,
    _task: AbortOnDrop,
}

/// Ends the task when dropped (discovery restarted or stopped).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
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
    use crate::config::{DiscoveryDefaults, LogConfig};

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

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/file_sd").join(name)
    }

    #[test]
    fn a_yaml_file_gives_the_same_targets_as_its_json_twin() {
        let read = |name: &str| {
            let path = fixture(name);
            parse_as(&std::fs::read_to_string(&path).unwrap(), Format::of(&path), "http").unwrap()
        };
        let yaml = read("flink-apps.yml");
        assert_eq!(yaml, read("flink-apps.json"));
        let pairs: Vec<(&str, &str)> = yaml.iter().map(|t| (t.name.as_str(), t.url.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("orders", "http://orders-rest.payments.svc:8081"),
                ("refunds", "http://refunds-rest.payments.svc:8081"),
                ("fraud-session", "https://fraud-session.payments.svc:8443"),
                ("10.20.0.17_8081", "http://10.20.0.17:8081"),
            ]
        );
        assert_eq!(Format::of(Path::new("/x/a.YAML")), Format::Yaml);
        assert_eq!(Format::of(Path::new("/x/a.json")), Format::Json);
        assert_eq!(Format::of(Path::new("/x/a")), Format::Json);
        assert_eq!(parse_as("# nothing yet\n", Format::Yaml, "http").unwrap(), []);
    }

    #[test]
    fn a_bad_entry_is_named_with_what_was_expected() {
        let path = fixture("broken.yaml");
        let err = parse_as(&std::fs::read_to_string(&path).unwrap(), Format::Yaml, "http").unwrap_err();
        assert_eq!(
            err,
            "entry 1: targets: expected a list of strings, got \"orders-rest.payments.svc:8081\""
        );
        let cases = [
            ("targets: [a:1]", Format::Yaml, "expected a YAML list of groups"),
            ("- [a:1]", Format::Yaml, "entry 0: expected {targets"),
            ("- target: [a:1]", Format::Yaml, "entry 0: unknown key `target` and no `targets`"),
            ("- targets: [a:1, 7]", Format::Yaml, "entry 0: targets[1]: expected a non-empty string"),
            (
                "- targets: [a:1]\n  labels: {cluster: [x]}",
                Format::Yaml,
                "entry 0: labels.cluster: expected a string",
            ),
            ("- targets: [a:1\n", Format::Yaml, "not valid YAML: "),
            ("[{\"targets\": [", Format::Json, "not valid JSON: "),
            ("[{\"targets\": [\"a:1\"]}, 3]", Format::Json, "entry 1: expected {targets"),
        ];
        for (text, format, want) in cases {
            let err = parse_as(text, format, "http").unwrap_err();
            assert!(err.starts_with(want), "{text:?}: {err}");
        }
        // YAML syntax errors keep the parser's position.
        let err = parse_as("- targets: [a:1\n", Format::Yaml, "http").unwrap_err();
        assert!(err.contains("line"), "{err}");
    }

    #[test]
    fn a_broken_yaml_file_keeps_its_last_good_targets_and_is_counted() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("flink.yml");
        std::fs::copy(fixture("flink-apps.yml"), &file).unwrap();
        let config =
            DiscoveryConfig { files: vec![format!("{}/*.yml", dir.path().display())], ..Default::default() };
        let mut d = Discovery::new(config, BTreeSet::new());
        assert_eq!(d.clusters.len(), 4);
        std::fs::copy(fixture("broken.yaml"), &file).unwrap();
        assert!(!d.refresh(), "the last good set stays");
        assert_eq!(d.clusters.len(), 4);
        assert_eq!(d.stats.file_errors[2], ("invalid", 1));
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
    fn an_unchanged_file_is_not_read_again_and_a_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, r#"[{"targets": ["a:1"]}]"#).unwrap();
        let config = DiscoveryConfig::default();
        let (parsed, identity) = read_file(&path, &config, None).unwrap().expect("read the first time");
        let seen = FileSeen { identity, cut: parsed.cut };
        assert_eq!(read_file(&path, &config, Some(&seen)).unwrap(), None, "unchanged: not read");
        // Rewritten in place with the same size: its times change.
        std::fs::write(&path, r#"[{"targets": ["b:1"]}]"#).unwrap();
        let (parsed, _) = read_file(&path, &config, Some(&seen)).unwrap().expect("changed: read");
        assert_eq!(parsed.targets[0].url, "http://b:1");
    }

    #[test]
    fn targets_past_the_cap_in_a_file_are_not_kept_and_count_as_left_out_by_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let targets: Vec<String> = (0..50).map(|i| format!("\"h{i}:1\"")).collect();
        std::fs::write(dir.path().join("a.json"), format!("[{{\"targets\": [{}]}}]", targets.join(",")))
            .unwrap();
        let config = DiscoveryConfig {
            files: vec![format!("{}/*.json", dir.path().display())],
            max_clusters: 5,
            ..Default::default()
        };
        let d = Discovery::new(config, BTreeSet::new());
        assert_eq!(d.clusters.len(), 5);
        assert_eq!(d.known.values().map(Vec::len).sum::<usize>(), 5, "only the cap is held");
        assert_eq!(d.stats.dropped[0], ("limit", 45));
    }

    #[test]
    fn a_yaml_file_is_capped_in_bytes_by_the_target_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.yml");
        std::fs::write(&path, format!("- targets: [a:1]\n# {}\n", "x".repeat(9000))).unwrap();
        let config = DiscoveryConfig { max_clusters: 2, max_file_bytes: 1 << 20, ..Default::default() };
        let (reason, message) = read_file(&path, &config, None).unwrap_err();
        assert_eq!(
            (reason, message.as_str()),
            (0, "larger than 8192 bytes: 4096 per discovery.max_clusters for YAML")
        );
        let roomy = DiscoveryConfig { max_clusters: 3, ..config };
        assert!(read_file(&path, &roomy, None).is_ok());
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
    fn the_logs_template_gives_each_discovered_cluster_its_own_logs_entry() {
        let template =
            LogConfig { paths: vec!["/var/log/flink/{cluster}/*.log".into()], ..Default::default() };
        let defaults = DiscoveryDefaults { logs: Some(template), ..Default::default() };
        let clusters: Vec<ClusterConfig> =
            ["orders", "..", "taken"].iter().map(|n| defaults.cluster(n, "http://x:1")).collect();
        let logs = defaults.logs_of(&clusters, &BTreeSet::from(["taken".to_string()]));
        assert_eq!(logs.len(), 1, "`..` and a taken name are left out");
        assert_eq!((logs[0].cluster.as_str(), logs[0].id()), ("orders", "orders"));
        assert_eq!(logs[0].paths, ["/var/log/flink/orders/*.log"]);
        // A shared-out cluster's logs are followed by the replica owning the cluster only.
        let mut shared = defaults.cluster("session", "http://x:1");
        let followed: usize = (0..3)
            .map(|index| {
                shared.job_shard = Some(crate::config::Shard { index, count: 3 });
                defaults.logs_of(std::slice::from_ref(&shared), &BTreeSet::new()).len()
            })
            .sum();
        assert_eq!(followed, 1);
        assert!(DiscoveryDefaults::default().logs_of(&clusters, &BTreeSet::new()).is_empty());

        let mut config = DiscoveryConfig { files: vec!["/x/*.yml".into()], defaults, ..Default::default() };
        let mut problems = Vec::new();
        config.problems(&mut problems);
        assert_eq!(problems, Vec::<String>::new());
        let logs = config.defaults.logs.as_mut().unwrap();
        logs.paths = vec!["/var/log/flink/*.log".into()];
        logs.max_files = 0;
        config.problems(&mut problems);
        let text = problems.join("\n");
        assert!(
            text.contains("discovery.defaults.logs.paths[0]: \"/var/log/flink/*.log\": expected {cluster}"),
            "{text}"
        );
        assert!(text.contains("discovery.defaults.logs.max_files: expected at least 1"), "{text}");
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
