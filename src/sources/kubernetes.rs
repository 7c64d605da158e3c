//! Kubernetes discovery: Flink clusters found by watching the Kubernetes API (kube-rs).
//!
//! Three kinds of object, in the namespaces of `[discovery.kubernetes] namespaces` (empty: all):
//! * **Services of Flink's native Kubernetes integration.** Flink creates, per cluster, the REST
//!   service `<cluster-id>-rest` with its common labels `type=flink-native-kubernetes` and
//!   `app=<cluster-id>` and exactly one port, named `rest` by default, port `rest.port` (8081):
//!   `ServiceType::buildUpExternalRestService`
//!   (flink-kubernetes/src/main/java/org/apache/flink/kubernetes/kubeclient/services/ServiceType.java),
//!   the labels from `KubernetesUtils::getCommonLabels` and the constants `FLINK_REST_SERVICE_SUFFIX`,
//!   `LABEL_TYPE_NATIVE_TYPE`, `LABEL_APP_KEY`, `REST_PORT` in
//!   flink-kubernetes/src/main/java/org/apache/flink/kubernetes/utils/Constants.java. The internal
//!   service `<cluster-id>` carries the same labels and is not a REST endpoint: only `-rest`
//!   services count.
//! * **FlinkDeployment** (flink.apache.org/v1beta1, the Flink Kubernetes Operator's CRD,
//!   helm/flink-kubernetes-operator/crds/flinkdeployments.flink.apache.org-v1.yml): the operator
//!   deploys the cluster with `kubernetes.cluster-id` = the resource's name, so its REST service
//!   is `<name>-rest` on `spec.flinkConfiguration."rest.port"` (8081). A deployment that is
//!   suspended, being deleted, or whose JobManager is missing is not polled (it has no REST
//!   endpoint; polling it would only page "unreachable").
//! * **FlinkSessionJob** (flinksessionjobs.flink.apache.org-v1.yml): a job submitted to the session
//!   cluster `spec.deploymentName` of its namespace, which it makes discovered when
//!   FlinkDeployments are not watched (when they are, the session FlinkDeployment decides, so a
//!   suspended session is not polled because a job still names it); its status is exported
//!   either way.
//!
//! Every object becomes a discovered cluster named `<namespace>.<cluster-id>` (a namespace has
//! no dots, so the name is unambiguous) at `url_template` (default
//! `{scheme}://{service}.{namespace}.svc:{port}`), with the settings of `[discovery.defaults]`.
//! Objects naming the same cluster (a FlinkDeployment, the `-rest` Service Flink made for it,
//! its session jobs) are one cluster; its URL comes from the Service, else the FlinkDeployment.
//! The targets go to [`crate::sources::discovery::Discovery`], which merges them with the file targets
//! (files first, then Kubernetes) and hands the clusters to the daemon as it does for files.
//!
//! The watches are kube-rs `watcher`s: list, then watch from the list's `resourceVersion`; a
//! watch that ends resumes from the last version seen (bookmarks keep it fresh); a `410 Gone`
//! (the version was compacted away; at once, with no back-off) or a failed watch (after kube-rs'
//! back-off) re-lists, and a re-list replaces the
//! objects of that watch at once when it is complete (`InitDone`), so nothing is lost and
//! nothing is counted twice. Every request has the client's connect, read and write timeouts; a
//! watch asks the API server to end it after `watch_timeout`, and the client's read timeout is
//! longer than that, so a silent connection is cut.
//!
//! Bounds: at most `max_objects` objects are kept (the rest are cut and counted in
//! `checkpoint_sentinel_kubernetes_objects_cut_total`; a cut object is taken at its next change
//! or the next re-list once there is room), and only the few fields named above are kept of each.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use serde::Deserialize;
use tokio::sync::watch;

use crate::config::{KUBERNETES_KINDS, KubernetesConfig, render_url};
pub(crate) use crate::counters::{KubernetesStats, OperatorJob};
use crate::sources::target::Target;

/// The kinds of object watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A Service of Flink's native Kubernetes integration.
    Service,
    /// The operator's FlinkDeployment.
    FlinkDeployment,
    /// The operator's FlinkSessionJob.
    FlinkSessionJob,
}

/// Every kind, in metric order.
pub(crate) const KINDS: [Kind; 3] = [Kind::Service, Kind::FlinkDeployment, Kind::FlinkSessionJob];

impl Kind {
    /// The resource's plural (the config's and the metrics' name for it).
    pub(crate) fn plural(self) -> &'static str {
        KUBERNETES_KINDS[self.index()]
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Which object's URL wins when several name one cluster (lower first).
    fn rank(self) -> u8 {
        match self {
            Kind::Service => 0,
            Kind::FlinkDeployment => 1,
            Kind::FlinkSessionJob => 2,
        }
    }

    fn api_resource(self) -> ApiResource {
        let kind = match self {
            Kind::Service => return ApiResource::erase::<Service>(&()),
            Kind::FlinkDeployment => "FlinkDeployment",
            Kind::FlinkSessionJob => "FlinkSessionJob",
        };
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, kind), self.plural())
    }
}

/// The operator's API group and version.
pub(crate) const GROUP: &str = "flink.apache.org";
/// The operator's API version (the CRDs' served and stored version).
pub(crate) const VERSION: &str = "v1beta1";

/// The kinds configured (`[discovery.kubernetes] kinds`), in [`KINDS`] order.
pub(crate) fn kinds(config: &KubernetesConfig) -> Vec<Kind> {
    KINDS.into_iter().filter(|k| config.kinds.iter().any(|c| c == k.plural())).collect()
}

/// What an object says about a cluster (only these fields are kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// The kind of object.
    pub(crate) kind: Kind,
    /// Its namespace.
    pub(crate) namespace: String,
    /// Flink's cluster id (`kubernetes.cluster-id`).
    pub(crate) cluster_id: String,
    /// The REST service's name.
    pub(crate) service: String,
    /// The REST service's port.
    pub(crate) port: u16,
    /// What the operator's status says of the job (FlinkDeployment, FlinkSessionJob).
    pub(crate) job: Option<OperatorJob>,
}

/// `status.lifecycleState` values of the CRDs.
const LIFECYCLE_STATES: [&str; 10] = [
    "CREATED",
    "DELETED",
    "DELETING",
    "DEPLOYED",
    "FAILED",
    "ROLLED_BACK",
    "ROLLING_BACK",
    "STABLE",
    "SUSPENDED",
    "UPGRADING",
];

fn bounded(value: Option<&str>, allowed: &[&str]) -> String {
    match value {
        None | Some("") => String::new(),
        Some(v) if allowed.contains(&v) => v.to_string(),
        Some(_) => "other".to_string(),
    }
}

fn operator_job(cluster: String, resource: String, status: &DeploymentStatus) -> OperatorJob {
    let job = status.job_status.as_ref();
    let job_id = job
        .and_then(|j| j.job_id.as_deref())
        .filter(|id| id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_default()
        .to_string();
    OperatorJob {
        cluster,
        resource,
        job_id,
        // The CRDs' job states are Flink's `JobStatus` values.
        state: match job.and_then(|j| j.state.as_deref()).map(crate::observe::JobStatus::parse) {
            None => String::new(),
            Some(crate::observe::JobStatus::Other(s)) if s.is_empty() => String::new(),
            Some(crate::observe::JobStatus::Other(_)) => "other".to_string(),
            Some(known) => known.as_str().to_string(),
        },
        lifecycle_state: bounded(status.lifecycle_state.as_deref(), &LIFECYCLE_STATES),
        last_savepoint_ms: job
            .and_then(|j| j.savepoint_info.as_ref())
            .and_then(|s| s.last_savepoint.as_ref())
            .and_then(|s| s.time_stamp)
            .filter(|t| *t > 0),
    }
}

impl Found {
    /// The discovered cluster's name: `<namespace>.<cluster-id>`.
    pub(crate) fn name(&self) -> String {
        format!("{}.{}", self.namespace, self.cluster_id)
    }
}

/// Flink's suffix of the REST service's name (`Constants.FLINK_REST_SERVICE_SUFFIX`).
pub(crate) const REST_SERVICE_SUFFIX: &str = "-rest";

/// A Service as Flink's native integration creates it, as a [`Found`]; `None` for any other
/// Service (not `-rest`, no port).
pub(crate) fn from_service(svc: &Service, rest_port_name: &str) -> Option<Found> {
    let name = svc.metadata.name.as_deref()?;
    let namespace = svc.metadata.namespace.clone()?;
    let stem = name.strip_suffix(REST_SERVICE_SUFFIX).filter(|s| !s.is_empty())?;
    // `app` is Flink's cluster id label; the name's stem when it is missing.
    let cluster_id = svc.metadata.labels.as_ref().and_then(|l| l.get("app")).map_or(stem, String::as_str);
    let ports = svc.spec.as_ref()?.ports.as_ref()?;
    // Flink builds exactly one port; a port named like Flink's default if there are more.
    let port = match ports.as_slice() {
        [one] => one,
        many => many.iter().find(|p| p.name.as_deref() == Some(rest_port_name))?,
    };
    Some(Found {
        kind: Kind::Service,
        namespace,
        cluster_id: cluster_id.to_string(),
        service: name.to_string(),
        port: u16::try_from(port.port).ok().filter(|p| *p > 0)?,
        job: None,
    })
}

/// The parts of a FlinkDeployment read here (unknown fields ignored, every field optional).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct DeploymentData {
    spec: DeploymentSpec,
    status: DeploymentStatus,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct DeploymentSpec {
    flink_configuration: serde_json::Value,
    job: Option<JobSpec>,
    deployment_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct JobSpec {
    state: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct DeploymentStatus {
    lifecycle_state: Option<String>,
    job_manager_deployment_status: Option<String>,
    job_status: Option<JobStatus>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct JobStatus {
    job_id: Option<String>,
    state: Option<String>,
    savepoint_info: Option<SavepointInfo>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct SavepointInfo {
    last_savepoint: Option<Savepoint>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Savepoint {
    time_stamp: Option<i64>,
}

/// `rest.port` from a `flinkConfiguration` (flat `"rest.port": "8081"` or nested YAML form).
fn rest_port_of(conf: &serde_json::Value) -> Option<u16> {
    let v = conf.get("rest.port").or_else(|| conf.get("rest")?.get("port"))?;
    match v {
        serde_json::Value::String(s) => s.trim().parse().ok(),
        serde_json::Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        _ => None,
    }
    .filter(|p| *p > 0)
}

/// A FlinkDeployment as a [`Found`]; `None` when it has no JobManager to poll (suspended,
/// being deleted, JobManager missing).
pub(crate) fn from_flink_deployment(obj: &DynamicObject, default_port: u16) -> Option<Found> {
    let name = obj.metadata.name.clone()?;
    let namespace = obj.metadata.namespace.clone()?;
    if obj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let data: DeploymentData = serde_json::from_value(obj.data.clone()).ok()?;
    let lifecycle = data.status.lifecycle_state.as_deref();
    if matches!(lifecycle, Some("SUSPENDED" | "DELETING" | "DELETED"))
        || data.status.job_manager_deployment_status.as_deref() == Some("MISSING")
        || data.spec.job.as_ref().and_then(|j| j.state.as_deref()) == Some("suspended")
    {
        return None;
    }
    let job = operator_job(format!("{namespace}.{name}"), format!("flinkdeployment/{name}"), &data.status);
    Some(Found {
        kind: Kind::FlinkDeployment,
        namespace,
        service: format!("{name}{REST_SERVICE_SUFFIX}"),
        port: rest_port_of(&data.spec.flink_configuration).unwrap_or(default_port),
        cluster_id: name,
        job: Some(job),
    })
}

/// A FlinkSessionJob as its session cluster (`spec.deploymentName`), as a [`Found`].
pub(crate) fn from_session_job(obj: &DynamicObject, default_port: u16) -> Option<Found> {
    let namespace = obj.metadata.namespace.clone()?;
    if obj.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let data: DeploymentData = serde_json::from_value(obj.data.clone()).ok()?;
    let session = data.spec.deployment_name.filter(|d| !d.is_empty())?;
    let name = obj.metadata.name.clone().unwrap_or_default();
    let job = operator_job(format!("{namespace}.{session}"), format!("flinksessionjob/{name}"), &data.status);
    Some(Found {
        kind: Kind::FlinkSessionJob,
        namespace,
        service: format!("{session}{REST_SERVICE_SUFFIX}"),
        port: default_port,
        cluster_id: session,
        job: Some(job),
    })
}

/// The targets of everything found: one per cluster name, its URL from the best-ranked object
/// (a Service, else a FlinkDeployment, else a session job), in name order.
pub(crate) fn targets<'a>(
    found: impl IntoIterator<Item = &'a Found>,
    template: &str,
    scheme: &str,
) -> Vec<Target> {
    let mut best: BTreeMap<String, &Found> = BTreeMap::new();
    for f in found {
        best.entry(f.name())
            .and_modify(|b| {
                if (f.kind.rank(), &f.service) < (b.kind.rank(), &b.service) {
                    *b = f;
                }
            })
            .or_insert(f);
    }
    best.into_iter()
        .map(|(name, f)| Target {
            name,
            url: render_url(template, scheme, &f.service, &f.namespace, f.port, &f.cluster_id),
        })
        .collect()
}

/// What the Kubernetes task publishes: the targets and the stats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    /// One per cluster, in name order.
    pub(crate) targets: Vec<Target>,
    /// For metrics.
    pub(crate) stats: KubernetesStats,
}

/// The objects of one watch (a kind in one namespace, or in all).
#[derive(Default)]
struct WatchState {
    live: BTreeMap<(String, String), Found>,
    /// A re-list in progress: the objects listed so far.
    relist: Option<BTreeMap<(String, String), Found>>,
    inits: u64,
    synced: bool,
}

/// All watches' objects; pure bookkeeping (the events come in as arguments).
pub(crate) struct Objects {
    watches: Vec<(Kind, WatchState)>,
    max_objects: usize,
    stats: KubernetesStats,
}

/// One watch's event, reduced to what is kept.
pub(crate) enum Change {
    /// A (re-)list starts.
    Init,
    /// An object listed (`Some` when it names a cluster).
    InitApply((String, String), Option<Found>),
    /// The list is complete.
    InitDone,
    /// An object added or changed.
    Apply((String, String), Option<Found>),
    /// An object deleted.
    Delete((String, String)),
}

impl Objects {
    /// Bookkeeping for these watches.
    pub(crate) fn new(kinds: impl IntoIterator<Item = Kind>, max_objects: usize) -> Self {
        Objects {
            watches: kinds.into_iter().map(|k| (k, WatchState::default())).collect(),
            max_objects,
            stats: KubernetesStats::default(),
        }
    }

    /// Objects counted against the cap: of a watch re-listing, what it listed so far (that
    /// replaces its live objects when complete); the old set is held meanwhile, so at most
    /// twice the cap is in memory for a moment.
    fn kept(&self) -> usize {
        self.watches.iter().map(|(_, w)| w.relist.as_ref().unwrap_or(&w.live).len()).sum()
    }

    /// Applies one event of watch `i`.
    pub(crate) fn apply(&mut self, i: usize, change: Change) {
        let full = self.kept() >= self.max_objects;
        let kind = self.watches[i].0;
        let w = &mut self.watches[i].1;
        let mut cut = false;
        match change {
            Change::Init => {
                if w.inits > 0 {
                    self.stats.relists[kind.index()] += 1;
                }
                w.inits += 1;
                w.relist = Some(BTreeMap::new());
            }
            Change::InitApply(key, found) => {
                let buffer = w.relist.get_or_insert_with(BTreeMap::new);
                match found {
                    Some(f) if buffer.contains_key(&key) || !full => {
                        buffer.insert(key, f);
                    }
                    Some(_) => cut = true,
                    None => {
                        buffer.remove(&key);
                    }
                }
            }
            Change::InitDone => {
                w.live = w.relist.take().unwrap_or_default();
                w.synced = true;
            }
            Change::Apply(key, found) => match found {
                Some(f) if w.live.contains_key(&key) || !full => {
                    w.live.insert(key, f);
                }
                Some(_) => cut = true,
                None => {
                    w.live.remove(&key);
                }
            },
            Change::Delete(key) => {
                w.live.remove(&key);
                if let Some(buffer) = &mut w.relist {
                    buffer.remove(&key);
                }
            }
        }
        if cut {
            self.stats.cut[kind.index()] += 1;
        }
    }

    /// Counts an error of watch `i`.
    pub(crate) fn error(&mut self, i: usize, reason: usize) {
        let kind = self.watches[i].0;
        self.stats.errors[kind.index()][reason] += 1;
    }

    /// Counts an error of every watch (the client could not be built).
    pub(crate) fn client_error(&mut self) {
        for k in self.watches.iter().map(|(k, _)| *k).collect::<Vec<_>>() {
            self.stats.errors[k.index()][0] += 1;
        }
    }

    /// The targets and stats now.
    pub(crate) fn view(&self, template: &str, scheme: &str) -> View {
        let mut stats = self.stats.clone();
        stats.objects = [0; 3];
        for (k, w) in &self.watches {
            stats.objects[k.index()] += w.live.len() as u64;
        }
        stats.synced = self.watches.iter().all(|(_, w)| w.synced);
        stats.jobs =
            self.watches.iter().flat_map(|(_, w)| w.live.values()).filter_map(|f| f.job.clone()).collect();
        stats.jobs.sort();
        // With FlinkDeployments watched, a session job's cluster is its session deployment's
        // business (a suspended session is not polled because a job still names it).
        let deployments = self.watches.iter().any(|(k, _)| *k == Kind::FlinkDeployment);
        let found = self
            .watches
            .iter()
            .flat_map(|(_, w)| w.live.values())
            .filter(|f| !(deployments && f.kind == Kind::FlinkSessionJob));
        View { targets: targets(found, template, scheme), stats }
    }
}

/// The Kubernetes client from the config: `api_url` (no credentials), a kubeconfig file, or
/// inferred (the default kubeconfig, else the in-cluster service account).
async fn client(config: &KubernetesConfig) -> Result<kube::Client, String> {
    let mut kc = if let Some(url) = &config.api_url {
        kube::Config::new(url.parse::<axum::http::Uri>().map_err(|e| format!("api_url: {e}"))?)
    } else if let Some(path) = &config.kubeconfig {
        let file =
            kube::config::Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))?;
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("{}: {e}", path.display()))?
    } else {
        kube::Config::infer().await.map_err(|e| e.to_string())?
    };
    kc.connect_timeout = Some(config.request_timeout);
    kc.write_timeout = Some(config.request_timeout);
    kc.read_timeout = Some(config.watch_timeout + config.request_timeout.max(Duration::from_secs(5)));
    kube::Client::try_from(kc).map_err(|e| e.to_string())
}

/// A watcher error's reason index in [`crate::counters::ERROR_REASONS`].
fn reason(e: &watcher::Error) -> usize {
    match e {
        watcher::Error::InitialListFailed(_) => 1,
        watcher::Error::WatchStartFailed(_) => 2,
        watcher::Error::WatchFailed(_) | watcher::Error::NoResourceVersion => 3,
        watcher::Error::WatchError(status) if status.code == 410 => 4,
        watcher::Error::WatchError(_) => 5,
    }
}

/// The key of an object: (namespace, name).
fn key_of(meta: &kube::api::ObjectMeta) -> (String, String) {
    (meta.namespace.clone().unwrap_or_default(), meta.name.clone().unwrap_or_default())
}

/// A watch's item: `Some` event, or `None` for a 410 Gone (not an error to back off from: the
/// watcher lists again at once, as client-go does; other errors back off).
type Event = (usize, Result<Option<watcher::Event<DynamicObject>>, watcher::Error>);

/// Starts the watches; the returned receiver has the current view (and `stats.synced` once
/// every watch listed completely). The task ends when the receiver is dropped.
pub fn spawn(
    config: KubernetesConfig,
    scheme: String,
) -> (tokio::task::JoinHandle<()>, watch::Receiver<View>) {
    let (tx, rx) = watch::channel(View::default());
    let task = tokio::spawn(run(config, scheme, tx));
    (task, rx)
}

async fn run(config: KubernetesConfig, scheme: String, tx: watch::Sender<View>) {
    let watches = watch_list(&config);
    let mut objects = Objects::new(watches.iter().map(|(k, _)| *k), config.max_objects);
    let publish = |objects: &Objects| publish_view(objects, &config, &scheme, &tx);
    let Some(client) = connect(&config, &mut objects, &publish, &tx).await else { return };
    let mut events = futures_util::stream::select_all(watch_streams(&config, &client, &watches));
    publish(&objects);
    loop {
        // A watch waits for the API server's next event by design; each request under it has
        // the client's timeouts (see `client`).
        let next: Option<Event> = tokio::select! {
            next = events.next() => next,
            () = tx.closed() => return,
        };
        let Some(mut event) = next else { return };
        // Take every event already there before publishing once.
        loop {
            apply_event(&mut objects, &watches, event, config.rest_port);
            match events.next().now_or_never() {
                Some(Some(e)) => event = e,
                Some(None) => return,
                None => break,
            }
        }
        publish(&objects);
    }
}

/// The watches to run: every kind in every namespace (or in all namespaces) is one watch.
fn watch_list(config: &KubernetesConfig) -> Vec<(Kind, Option<String>)> {
    let scopes: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    kinds(config).into_iter().flat_map(|k| scopes.iter().map(move |s| (k, s.clone()))).collect()
}

/// Sends the current view to the receivers, waking them only when it changed.
fn publish_view(objects: &Objects, config: &KubernetesConfig, scheme: &str, tx: &watch::Sender<View>) {
    let view = objects.view(&config.url_template, scheme);
    tx.send_if_modified(|old| {
        let changed = *old != view;
        *old = view;
        changed
    });
}

/// The client: retried with a growing pause (a missing kubeconfig or service account is a
/// configuration problem the operator fixes while the daemon runs). `None` when the receiver
/// went away while waiting.
async fn connect(
    config: &KubernetesConfig,
    objects: &mut Objects,
    publish: &impl Fn(&Objects),
    tx: &watch::Sender<View>,
) -> Option<kube::Client> {
    let mut pause = Duration::from_secs(1);
    loop {
        let attempt = tokio::time::timeout(config.request_timeout * 3, client(config)).await;
        match attempt.unwrap_or_else(|_| Err("timed out".into())) {
            Ok(c) => return Some(c),
            Err(e) => {
                tracing::warn!("Kubernetes discovery: no API client, retrying in {pause:?}: {e}");
                objects.client_error();
                publish(objects);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = tx.closed() => return None,
                }
                pause = (pause * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// One watcher stream per watch, its items tagged with the watch's index.
fn watch_streams(
    config: &KubernetesConfig,
    client: &kube::Client,
    watches: &[(Kind, Option<String>)],
) -> Vec<futures_util::stream::BoxStream<'static, Event>> {
    watches
        .iter()
        .enumerate()
        .map(|(i, (kind, ns))| {
            let resource = kind.api_resource();
            let selector =
                if *kind == Kind::Service { &config.service_selector } else { &config.label_selector };
            let mut wc = watcher::Config::default().timeout(config.watch_timeout.as_secs().max(1) as u32);
            if !selector.trim().is_empty() {
                wc = wc.labels(selector.trim());
            }
            let api: Api<DynamicObject> = match ns {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            watcher(api, wc)
                .map(|r| match r {
                    Ok(e) => Ok(Some(e)),
                    Err(watcher::Error::WatchError(status)) if status.code == 410 => Ok(None),
                    Err(e) => Err(e),
                })
                .default_backoff()
                .map(move |event| (i, event))
                .boxed()
        })
        .collect()
}

/// The cluster an object of `kind` names, if any.
fn found_in(kind: Kind, obj: &DynamicObject, rest_port: u16) -> Option<Found> {
    match kind {
        Kind::Service => {
            let svc: Service = serde_json::to_value(obj).ok().and_then(|v| serde_json::from_value(v).ok())?;
            from_service(&svc, "rest")
        }
        Kind::FlinkDeployment => from_flink_deployment(obj, rest_port),
        Kind::FlinkSessionJob => from_session_job(obj, rest_port),
    }
}

/// Applies one watch event to the objects (logging the watch's expiries and failures).
fn apply_event(objects: &mut Objects, watches: &[(Kind, Option<String>)], event: Event, rest_port: u16) {
    let (i, result) = event;
    let kind = watches[i].0;
    match result {
        Ok(Some(watcher::Event::Init)) => objects.apply(i, Change::Init),
        Ok(Some(watcher::Event::InitApply(obj))) => {
            objects.apply(i, Change::InitApply(key_of(&obj.metadata), found_in(kind, &obj, rest_port)))
        }
        Ok(Some(watcher::Event::InitDone)) => objects.apply(i, Change::InitDone),
        Ok(Some(watcher::Event::Apply(obj))) => {
            objects.apply(i, Change::Apply(key_of(&obj.metadata), found_in(kind, &obj, rest_port)))
        }
        Ok(Some(watcher::Event::Delete(obj))) => objects.apply(i, Change::Delete(key_of(&obj.metadata))),
        Ok(None) => {
            let scope = watches[i].1.as_deref().unwrap_or("(all namespaces)");
            tracing::info!(
                kind = kind.plural(),
                namespace = scope,
                "Kubernetes watch expired (410 Gone); listing again"
            );
            objects.error(i, 4);
        }
        Err(e) => {
            let scope = watches[i].1.as_deref().unwrap_or("(all namespaces)");
            tracing::warn!(kind = kind.plural(), namespace = scope, "Kubernetes watch failed, retrying: {e}");
            objects.error(i, reason(&e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> serde_json::Value {
        let path = format!("{}/tests/fixtures/kubernetes/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    fn dynamic(name: &str) -> DynamicObject {
        serde_json::from_value(fixture(name)).unwrap()
    }

    #[test]
    fn a_native_rest_service_is_its_cluster_and_the_internal_service_is_not() {
        let rest: Service = serde_json::from_value(fixture("service-native-rest.json")).unwrap();
        let found = from_service(&rest, "rest").unwrap();
        assert_eq!(
            found,
            Found {
                kind: Kind::Service,
                namespace: "flink".into(),
                cluster_id: "orders".into(),
                service: "orders-rest".into(),
                port: 8081,
                job: None,
            }
        );
        assert_eq!(found.name(), "flink.orders");
        let internal: Service = serde_json::from_value(fixture("service-native-internal.json")).unwrap();
        assert_eq!(from_service(&internal, "rest"), None, "the headless rpc/blob service");
    }

    #[test]
    fn a_flink_deployment_is_its_cluster_unless_it_has_no_jobmanager() {
        let fd = dynamic("flinkdeployment-running.json");
        let found = from_flink_deployment(&fd, 8081).unwrap();
        assert_eq!(
            (found.name(), found.service.as_str(), found.port),
            ("flink.lab".to_string(), "lab-rest", 8081)
        );
        assert_eq!(
            found.job,
            Some(OperatorJob {
                cluster: "flink.lab".into(),
                resource: "flinkdeployment/lab".into(),
                job_id: "8a3c1f0e2b4d6a8c0e1f3a5b7c9d1e2f".into(),
                state: "RUNNING".into(),
                lifecycle_state: "STABLE".into(),
                last_savepoint_ms: Some(1_764_494_400_000),
            })
        );
        let mut odd = fd.clone();
        odd.data["status"]["jobStatus"]["state"] = "SOMETHING_NEW".into();
        odd.data["status"]["jobStatus"]["jobId"] = "not an id".into();
        let job = from_flink_deployment(&odd, 8081).unwrap().job.unwrap();
        assert_eq!((job.state.as_str(), job.job_id.as_str()), ("other", ""), "label values stay bounded");
        let mut suspended = fd.clone();
        suspended.data["status"]["lifecycleState"] = "SUSPENDED".into();
        assert_eq!(from_flink_deployment(&suspended, 8081), None);
        let mut missing = fd.clone();
        missing.data["status"]["jobManagerDeploymentStatus"] = "MISSING".into();
        assert_eq!(from_flink_deployment(&missing, 8081), None);
        let mut port = fd.clone();
        port.data["spec"]["flinkConfiguration"]["rest.port"] = "18081".into();
        assert_eq!(from_flink_deployment(&port, 8081).unwrap().port, 18081);
        let mut nested = fd;
        nested.data["spec"]["flinkConfiguration"] = serde_json::json!({"rest": {"port": 9091}});
        assert_eq!(from_flink_deployment(&nested, 8081).unwrap().port, 9091);
    }

    #[test]
    fn a_session_job_names_its_session_cluster_and_one_cluster_is_one_target() {
        let job = dynamic("flinksessionjob.json");
        let from_job = from_session_job(&job, 8081).unwrap();
        assert_eq!(from_job.name(), "flink.session");
        let session = from_flink_deployment(&dynamic("flinkdeployment-session.json"), 8081).unwrap();
        let rest: Service = serde_json::from_value(fixture("service-native-rest.json")).unwrap();
        let svc = from_service(&rest, "rest").unwrap();
        let got = targets([&from_job, &session, &svc], "{scheme}://{service}.{namespace}.svc:{port}", "http");
        let pairs: Vec<(&str, &str)> = got.iter().map(|t| (t.name.as_str(), t.url.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("flink.orders", "http://orders-rest.flink.svc:8081"),
                ("flink.session", "http://session-rest.flink.svc:8082"),
            ],
            "the FlinkDeployment's rest.port wins over the session job's default"
        );
    }

    fn f(ns: &str, id: &str) -> Found {
        Found {
            kind: Kind::Service,
            namespace: ns.into(),
            cluster_id: id.into(),
            service: format!("{id}-rest"),
            port: 8081,
            job: None,
        }
    }

    fn k(ns: &str, id: &str) -> (String, String) {
        (ns.into(), format!("{id}-rest"))
    }

    fn names(o: &Objects) -> Vec<String> {
        o.view("{scheme}://{service}.{namespace}.svc:{port}", "http")
            .targets
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    #[test]
    fn a_relist_replaces_a_watchs_objects_when_complete_and_deletes_go() {
        let mut o = Objects::new([Kind::Service], 10);
        o.apply(0, Change::Init);
        o.apply(0, Change::InitApply(k("a", "x"), Some(f("a", "x"))));
        assert!(names(&o).is_empty(), "nothing before the list is complete");
        o.apply(0, Change::InitApply(k("a", "y"), Some(f("a", "y"))));
        o.apply(0, Change::InitDone);
        assert_eq!(names(&o), ["a.x", "a.y"]);
        o.apply(0, Change::Delete(k("a", "x")));
        assert_eq!(names(&o), ["a.y"]);
        // 410 Gone: a re-list while `y` went and `z` came; the old set stays until InitDone.
        o.apply(0, Change::Init);
        o.apply(0, Change::InitApply(k("a", "z"), Some(f("a", "z"))));
        assert_eq!(names(&o), ["a.y"]);
        o.apply(0, Change::InitDone);
        assert_eq!(names(&o), ["a.z"]);
        let stats = o.view("{service}:{port}", "http").stats;
        assert_eq!((stats.relists[0], stats.objects[0], stats.synced), (1, 1, true));
        // An object that stops qualifying (e.g. relabelled) goes.
        o.apply(0, Change::Apply(k("a", "z"), None));
        assert!(names(&o).is_empty());
    }

    #[test]
    fn with_deployments_watched_a_session_job_alone_makes_no_cluster() {
        let job = from_session_job(&dynamic("flinksessionjob.json"), 8081).unwrap();
        let key = ("flink".to_string(), "top-speed".to_string());
        let mut alone = Objects::new([Kind::FlinkSessionJob], 10);
        let mut both = Objects::new([Kind::FlinkDeployment, Kind::FlinkSessionJob], 10);
        for (o, w) in [(&mut alone, 0), (&mut both, 1)] {
            o.apply(w, Change::Init);
            o.apply(w, Change::InitApply(key.clone(), Some(job.clone())));
            o.apply(w, Change::InitDone);
        }
        assert_eq!(names(&alone), ["flink.session"]);
        assert!(names(&both).is_empty(), "the session FlinkDeployment decides");
        let view = both.view("{service}:{port}", "http");
        assert_eq!(view.stats.jobs.len(), 1, "its status is still exported");
    }

    #[test]
    fn objects_beyond_the_cap_are_cut_and_counted() {
        let mut o = Objects::new([Kind::Service, Kind::FlinkDeployment], 2);
        for w in 0..2 {
            o.apply(w, Change::Init);
            o.apply(w, Change::InitDone);
        }
        o.apply(0, Change::Apply(k("a", "x"), Some(f("a", "x"))));
        o.apply(1, Change::Apply(k("a", "y"), Some(f("a", "y"))));
        o.apply(0, Change::Apply(k("a", "z"), Some(f("a", "z"))));
        assert_eq!(names(&o), ["a.x", "a.y"]);
        // A change of a kept object is not a new object.
        o.apply(0, Change::Apply(k("a", "x"), Some(f("a", "x"))));
        let stats = o.view("{service}:{port}", "http").stats;
        assert_eq!(stats.cut, [1, 0, 0]);
        o.apply(1, Change::Delete(k("a", "y")));
        o.apply(0, Change::Apply(k("a", "z"), Some(f("a", "z"))));
        assert_eq!(names(&o), ["a.x", "a.z"], "taken at its next change once there is room");
    }

    #[tokio::test]
    async fn an_https_api_client_builds_with_the_crates_tls_provider() {
        // The in-cluster case is HTTPS: building the client sets up rustls (a second crypto
        // provider in the tree would make it panic here, not in the HTTP tests).
        let config =
            KubernetesConfig { api_url: Some("https://127.0.0.1:6443".into()), ..Default::default() };
        assert!(client(&config).await.is_ok());
        let missing =
            KubernetesConfig { kubeconfig: Some("/nonexistent/kubeconfig".into()), ..Default::default() };
        let e = client(&missing).await.err().unwrap();
        assert!(e.contains("/nonexistent/kubeconfig"), "{e}");
    }

    #[test]
    fn the_config_is_checked_under_its_own_keys() {
        let config = KubernetesConfig {
            enabled: true,
            namespaces: vec!["Flink_Prod".into()],
            kinds: vec!["pods".into(), "services".into(), "services".into()],
            service_selector: "type=flink-native-kubernetes,app in (a,b),!canary".into(),
            label_selector: "a=(b".into(),
            api_url: Some("not a url".into()),
            kubeconfig: Some("/k".into()),
            url_template: "http://fixed:8081".into(),
            max_objects: 0,
            watch_timeout: Duration::ZERO,
            ..Default::default()
        };
        let mut problems = Vec::new();
        config.problems(&mut problems);
        let text = problems.join("\n");
        for key in [
            "discovery.kubernetes.namespaces[0]",
            "discovery.kubernetes.kinds[0]",
            "discovery.kubernetes.kinds[2]",
            "discovery.kubernetes.label_selector",
            "discovery.kubernetes.api_url",
            "discovery.kubernetes.kubeconfig",
            "discovery.kubernetes.url_template",
            "discovery.kubernetes.max_objects",
            "discovery.kubernetes.watch_timeout",
        ] {
            assert!(text.contains(key), "{key} in {text}");
        }
        assert!(!text.contains("service_selector"), "a valid selector: {text}");
        let mut none = Vec::new();
        KubernetesConfig { enabled: true, ..Default::default() }.problems(&mut none);
        assert!(none.is_empty(), "{none:?}");
    }
}
