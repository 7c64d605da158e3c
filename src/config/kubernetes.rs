//! `[discovery.kubernetes]`: which Kubernetes objects are Flink clusters, their defaults and
//! checks (namespaces, kinds, label selectors, the URL template). The watching is
//! `sources::kubernetes`.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
    pub(crate) service_selector: String,
    /// Label selector for FlinkDeployments and FlinkSessionJobs (empty: all).
    pub(crate) label_selector: String,
    /// The API server's URL, without credentials (e.g. `kubectl proxy`); else `kubeconfig`,
    /// else the in-cluster service account or the default kubeconfig.
    pub api_url: Option<String>,
    /// A kubeconfig file (its current context).
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The REST URL of a discovered cluster: `{scheme}` (`[discovery.defaults] scheme`),
    /// `{service}`, `{namespace}`, `{port}`, `{cluster_id}` are replaced.
    pub url_template: String,
    /// The REST port when the object does not say (Flink's `rest.port` default).
    pub(crate) rest_port: u16,
    /// At most this many objects (all kinds together) are kept; the rest are cut and counted.
    pub max_objects: usize,
    /// The API server ends each watch after this long (`timeoutSeconds`); it is then resumed.
    #[serde(with = "humantime_serde")]
    pub watch_timeout: Duration,
    /// Connect and write timeout of every request to the API server (reads: `watch_timeout`
    /// plus this).
    #[serde(with = "humantime_serde")]
    pub(crate) request_timeout: Duration,
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
    pub(crate) fn problems(&self, problems: &mut Vec<String>) {
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
