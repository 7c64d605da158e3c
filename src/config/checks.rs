//! Checks: every value that parses but makes no sense, each problem naming its key
//! (`Config::problems`; a config with any is refused). The Kubernetes section's checks are
//! `kubernetes.rs`'s; `[discovery.defaults]` is checked here, as the cluster it makes.

use std::collections::BTreeSet;
use std::time::Duration;

/// The most recent checkpoints a job may keep (`[state] recent_checkpoints`).
const MAX_RECENT_CHECKPOINTS: usize = 1024;
/// The most connections the daemon's port may serve at once (`[server] max_connections`).
const MAX_CONNECTIONS_LIMIT: usize = 65_536;

use super::{BasicAuth, CLUSTER_PLACEHOLDER, Config, DiscoveryConfig, MAX_CLUSTERS_LIMIT, Secret};

impl Config {
    /// Every problem with the values, each naming its key.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        self.server_problems(&mut problems);
        self.alerting_problems(&mut problems);
        // The listener's secrets after the Alertmanagers' (the order problems are listed in).
        secret_problems(
            "server.",
            self.server.basic_auth.as_ref(),
            self.server.bearer_token.as_ref(),
            &mut problems,
        );
        self.rule_problems(&mut problems);
        self.cluster_problems(&mut problems);
        self.storage_problems(&mut problems);
        self.log_problems(&mut problems);
        self.metrics_problems(&mut problems);
        if self.evidence.interval < super::EvidenceConfig::MIN_INTERVAL {
            problems.push(format!(
                "evidence.interval: {}: at least 10s (Flink's metrics.fetcher.update-interval)",
                humantime::format_duration(self.evidence.interval)
            ));
        }
        if self.storage.interval < super::StorageConfig::MIN_INTERVAL {
            problems.push(format!(
                "storage.interval: {}: at least 10s",
                humantime::format_duration(self.storage.interval)
            ));
        }
        if self.storage.max_requests_per_round == 0 || self.storage.max_requests_per_round > 10_000 {
            problems.push(format!(
                "storage.max_requests_per_round: {}: expected 1 to 10000",
                self.storage.max_requests_per_round
            ));
        }
        if self.storage.max_entries_per_job == 0 {
            problems.push("storage.max_entries_per_job: 0: expected at least 1".to_string());
        }
        if self.evidence.max_requests_per_round == 0 || self.evidence.max_requests_per_round > 1000 {
            problems.push(format!(
                "evidence.max_requests_per_round: {}: expected 1 to 1000",
                self.evidence.max_requests_per_round
            ));
        }
        self.discovery.problems(&mut problems);
        problems.extend(self.thread_dumps.problems());
        problems
    }

    /// The shape of the listener's TLS settings (both files or neither). Reading and checking
    /// the files is the daemon's part (`outputs::tls::load`, called by `preflight::check` for
    /// `check-config` and `run`, and by a reload).
    fn server_problems(&self, problems: &mut Vec<String>) {
        if let Err(problem) = self.server.tls_files() {
            problems.push(problem);
        }
        if !(1..=MAX_CONNECTIONS_LIMIT).contains(&self.server.max_connections) {
            problems.push(format!(
                "server.max_connections: expected 1 to {MAX_CONNECTIONS_LIMIT}, got {}",
                self.server.max_connections
            ));
        }
        if let Some(probe) = self.server.probe_listen
            && probe == self.server.listen
            && probe.port() != 0
        {
            problems.push(format!(
                "server.probe_listen: {probe} is server.listen too; give the probes a port of their own"
            ));
        }
    }

    /// `[alerting]`: Alertmanager URLs, the external URL, intervals, secrets.
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
    }

    /// `alerting.disable_rules` naming built-in rules, and `[[rules]]`: names, conditions that
    /// parse, runbooks.
    fn rule_problems(&self, problems: &mut Vec<String>) {
        let builtin: Vec<String> = crate::rules::builtin::rules().into_iter().map(|r| r.name).collect();
        for (i, name) in self.alerting.disable_rules.iter().enumerate() {
            if !builtin.contains(name) {
                problems.push(format!(
                    "alerting.disable_rules[{i}]: {name:?}: expected the name of a built-in rule ({})",
                    builtin.join(", ")
                ));
            }
        }
        let mut names = BTreeSet::new();
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

    /// `[[clusters]]`: names unique and usable as labels, URLs, intervals, bounds, patterns,
    /// secrets.
    fn cluster_problems(&self, problems: &mut Vec<String>) {
        let mut names = BTreeSet::new();
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
            if c.max_concurrent_requests == Some(0) {
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
            secret_problems(&key(""), c.basic_auth.as_ref(), c.bearer_token.as_ref(), problems);
            if c.basic_auth.is_some() && c.bearer_token.is_some() {
                problems
                    .push(format!("{}: expected basic_auth or bearer_token, not both", key("bearer_token")));
            }
        }
    }

    /// `[stats]`, `[state]` and `[store]`: windows, the state directory, the store's bounds.
    fn storage_problems(&self, problems: &mut Vec<String>) {
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
        if !(1..=MAX_RECENT_CHECKPOINTS).contains(&self.state.recent_checkpoints) {
            problems.push(format!(
                "state.recent_checkpoints: expected 1 to {MAX_RECENT_CHECKPOINTS}, got {}",
                self.state.recent_checkpoints
            ));
        }
        let points = crate::state::history::P95_HISTORY_POINTS_RANGE;
        if !points.contains(&self.state.p95_history_points) {
            problems.push(format!(
                "state.p95_history_points: expected {} to {}, got {}",
                points.start(),
                points.end(),
                self.state.p95_history_points
            ));
        }
    }

    /// `[metrics]`: each quantile one of the summaries' and given once.
    fn metrics_problems(&self, problems: &mut Vec<String>) {
        let known = crate::stats::QUANTILES;
        for (i, q) in self.metrics.quantiles.iter().enumerate() {
            if !known.contains(q) {
                problems.push(format!("metrics.quantiles[{i}]: {q}: expected one of 0.5, 0.95, 0.99"));
            } else if self.metrics.quantiles[..i].contains(q) {
                problems.push(format!("metrics.quantiles[{i}]: {q}: given twice"));
            }
        }
    }

    /// `[[logs]]`: each bound to a cluster, named uniquely, with glob paths, sane intervals and
    /// bounds, and patterns that compile into a usable `kind`.
    fn log_problems(&self, problems: &mut Vec<String>) {
        let mut ids = BTreeSet::new();
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

// Here rather than in discovery.rs: the defaults are checked as the cluster they make, through
// `Config::problems`, and discovery.rs sits below `Config` (it is one of its sections).
impl DiscoveryConfig {
    /// Every problem with the values, each naming its key.
    pub(crate) fn problems(&self, problems: &mut Vec<String>) {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::StartAt;
    use crate::config::load::tests::{load, write};

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
    fn the_ports_connection_cap_is_bounded() {
        assert_eq!(load("[server]\nmax_connections = 64\n").unwrap().server.max_connections, 64);
        assert_eq!(load("").unwrap().server.max_connections, 512);
        for bad in ["0", "65537"] {
            let err = load(&format!("[server]\nmax_connections = {bad}\n")).unwrap_err().to_string();
            assert!(
                err.contains(&format!("server.max_connections: expected 1 to 65536, got {bad}")),
                "{err}"
            );
        }
    }

    #[test]
    fn recent_checkpoints_are_bounded() {
        assert_eq!(load("[state]\nrecent_checkpoints = 8\n").unwrap().state.recent_checkpoints, 8);
        assert_eq!(load("").unwrap().state.recent_checkpoints, 32);
        for bad in ["0", "1025"] {
            let err = load(&format!("[state]\nrecent_checkpoints = {bad}\n")).unwrap_err().to_string();
            assert!(
                err.contains(&format!("state.recent_checkpoints: expected 1 to 1024, got {bad}")),
                "{err}"
            );
        }
    }

    #[test]
    fn p95_history_points_are_bounded() {
        assert_eq!(load("[state]\np95_history_points = 30\n").unwrap().state.p95_history_points, 30);
        assert_eq!(load("").unwrap().state.p95_history_points, 120);
        for bad in ["1", "1025"] {
            let err = load(&format!("[state]\np95_history_points = {bad}\n")).unwrap_err().to_string();
            assert!(
                err.contains(&format!("state.p95_history_points: expected 2 to 1024, got {bad}")),
                "{err}"
            );
        }
    }

    #[test]
    fn an_empty_token_file_is_refused() {
        let token = write("\n");
        let text = format!("[server]\nbearer_token = {{ file = \"{}\" }}\n", token.path().display());
        let err = load(&text).unwrap_err().to_string();
        assert!(err.contains("server.bearer_token") && err.contains("the file is empty"), "{err}");
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
}
