//! A stub of the Kubernetes API server's list/watch protocol, enough for Kubernetes discovery:
//! Services (core/v1) and the Flink operator's FlinkDeployments and FlinkSessionJobs
//! (flink.apache.org/v1beta1), cluster-wide and per namespace, serving the objects of
//! tests/fixtures/kubernetes/ as the API server would.
//!
//! What it does as the real one does (https://kubernetes.io/docs/reference/using-api/api-concepts/):
//! * one global `resourceVersion`, raised by every write; each object carries the version of
//!   its last write; a list answers the objects with the current version in the list's
//!   `metadata.resourceVersion`;
//! * `?watch=true&resourceVersion=N` streams, one JSON object per line, every event after N
//!   (`ADDED`, `MODIFIED`, `DELETED` with the object as it was deleted), then new ones as they
//!   happen; `BOOKMARK` events with the current version when `allowWatchBookmarks=true`; ends
//!   after `timeoutSeconds`;
//! * a watch from a version older than the compaction point gets an `ERROR` event with a
//!   `Status` of code 410 (`Expired`, "too old resource version"), as a `200` stream;
//! * a list in pages of `limit` items, the next one asked for with the `continue` token;
//! * equality-based label selectors (`k=v`, `k==v`, `k!=v`, `k`, `!k`).
//!
//! The test drives it: `apply`, `delete`, `drop_watches` (every open watch breaks off
//! mid-stream, as a dropped connection), and `compact` (a write elsewhere and a compaction, so
//! every watch resuming from what it saw gets 410 and must list again).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// A resource the stub serves: (API path prefix, plural, kind, apiVersion).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Res {
    Services,
    FlinkDeployments,
    FlinkSessionJobs,
}

impl Res {
    fn kind(self) -> &'static str {
        match self {
            Res::Services => "Service",
            Res::FlinkDeployments => "FlinkDeployment",
            Res::FlinkSessionJobs => "FlinkSessionJob",
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            Res::Services => "v1",
            _ => "flink.apache.org/v1beta1",
        }
    }

    fn of(object: &Value) -> Res {
        match object["kind"].as_str() {
            Some("Service") => Res::Services,
            Some("FlinkDeployment") => Res::FlinkDeployments,
            Some("FlinkSessionJob") => Res::FlinkSessionJobs,
            other => panic!("the stub serves no {other:?}"),
        }
    }

    fn from_plural(plural: &str) -> Option<Res> {
        match plural {
            "services" => Some(Res::Services),
            "flinkdeployments" => Some(Res::FlinkDeployments),
            "flinksessionjobs" => Some(Res::FlinkSessionJobs),
            _ => None,
        }
    }
}

type Key = (Res, String, String);

#[derive(Default)]
struct Store {
    rv: u64,
    /// Watches from a version older than this get 410.
    compacted: u64,
    objects: BTreeMap<Key, Value>,
    /// (version, type, object) of every write.
    log: Vec<(u64, &'static str, Value)>,
    /// Raised by `drop_watches` and `compact`: open watches break off.
    generation: u64,
    /// Lists started (a first page) and pages served, per resource.
    lists: BTreeMap<Res, usize>,
    pages: BTreeMap<Res, usize>,
    watches: BTreeMap<Res, usize>,
    bookmarks_sent: usize,
    gone_sent: usize,
}

impl Store {
    fn write(&mut self, kind: &'static str, mut object: Value) {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let res = Res::of(&object);
        let key = (res, ns_of(&object).to_string(), object["metadata"]["name"].as_str().unwrap().to_string());
        if kind == "DELETED" {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, object.clone());
        }
        self.log.push((self.rv, kind, object));
    }
}

fn ns_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or("")
}

/// The running stub.
pub(crate) struct KubeStub {
    /// Its base URL (`http://127.0.0.1:port`).
    pub url: String,
    store: Arc<Mutex<Store>>,
}

impl KubeStub {
    /// Starts the stub with these objects (each written once, in order).
    pub(crate) async fn start(objects: Vec<Value>) -> KubeStub {
        let store = Arc::new(Mutex::new(Store { rv: 1000, ..Default::default() }));
        {
            let mut s = store.lock().unwrap();
            for o in objects {
                let kind = if s.objects.contains_key(&key_of(&o)) { "MODIFIED" } else { "ADDED" };
                s.write(kind, o);
            }
        }
        let app = Router::new()
            .route("/api/v1/{plural}", get(all))
            .route("/api/v1/namespaces/{ns}/{plural}", get(namespaced))
            .route("/apis/flink.apache.org/v1beta1/{plural}", get(all))
            .route("/apis/flink.apache.org/v1beta1/namespaces/{ns}/{plural}", get(namespaced))
            .with_state(store.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        KubeStub { url, store }
    }

    /// Creates or replaces an object (`ADDED` or `MODIFIED`).
    pub(crate) fn apply(&self, object: Value) {
        let mut s = self.store.lock().unwrap();
        let kind = if s.objects.contains_key(&key_of(&object)) { "MODIFIED" } else { "ADDED" };
        s.write(kind, object);
    }

    /// Deletes an object (`DELETED` with its last state).
    pub(crate) fn delete(&self, res: Res, ns: &str, name: &str) {
        let mut s = self.store.lock().unwrap();
        let object =
            s.objects.get(&(res, ns.to_string(), name.to_string())).cloned().expect("no such object");
        s.write("DELETED", object);
    }

    /// Every open watch breaks off mid-stream (the connection drops).
    pub(crate) fn drop_watches(&self) {
        self.store.lock().unwrap().generation += 1;
    }

    /// `change` happens, then the history is compacted past it (as by other writes, which in a
    /// real cluster never stop) and open watches break off: a watch resuming from any version
    /// it saw gets 410 Gone, and only a new list shows the change.
    pub(crate) fn compact(&self, change: impl FnOnce(&mut dyn FnMut(&'static str, Value))) {
        let mut s = self.store.lock().unwrap();
        change(&mut |kind, object| s.write(kind, object));
        s.rv += 1;
        s.compacted = s.rv;
        s.generation += 1;
    }

    /// Lists served per resource.
    pub(crate) fn lists(&self, res: Res) -> usize {
        self.store.lock().unwrap().lists.get(&res).copied().unwrap_or(0)
    }

    /// List pages served per resource.
    pub(crate) fn pages(&self, res: Res) -> usize {
        self.store.lock().unwrap().pages.get(&res).copied().unwrap_or(0)
    }

    /// Watches opened per resource.
    pub(crate) fn watches(&self, res: Res) -> usize {
        self.store.lock().unwrap().watches.get(&res).copied().unwrap_or(0)
    }

    /// Bookmarks sent, 410s sent.
    pub(crate) fn bookmarks_and_gone(&self) -> (usize, usize) {
        let s = self.store.lock().unwrap();
        (s.bookmarks_sent, s.gone_sent)
    }
}

fn key_of(object: &Value) -> Key {
    (Res::of(object), ns_of(object).to_string(), object["metadata"]["name"].as_str().unwrap().to_string())
}

type Shared = State<Arc<Mutex<Store>>>;

async fn all(
    state: Shared,
    Path(plural): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    serve(state, None, plural, q)
}

async fn namespaced(
    state: Shared,
    Path((ns, plural)): Path<(String, String)>,
    Query(q): Query<BTreeMap<String, String>>,
) -> Response {
    serve(state, Some(ns), plural, q)
}

/// Whether `labels` satisfy an equality-based selector.
fn selects(selector: &str, labels: &Value) -> bool {
    selector.split(',').map(str::trim).filter(|r| !r.is_empty()).all(|req| {
        let label = |k: &str| labels.get(k.trim()).and_then(Value::as_str);
        if let Some((k, v)) = req.split_once("!=") {
            label(k) != Some(v.trim())
        } else if let Some((k, v)) = req.split_once("==").or_else(|| req.split_once('=')) {
            label(k) == Some(v.trim())
        } else if let Some(k) = req.strip_prefix('!') {
            label(k).is_none()
        } else {
            label(req).is_some()
        }
    })
}

fn matches(res: Res, ns: &Option<String>, selector: &str, object: &Value) -> bool {
    Res::of(object) == res
        && ns.as_deref().is_none_or(|ns| ns_of(object) == ns)
        && selects(selector, &object["metadata"]["labels"])
}

fn serve(State(store): Shared, ns: Option<String>, plural: String, q: BTreeMap<String, String>) -> Response {
    let Some(res) = Res::from_plural(&plural) else {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("the server could not find the requested resource"), "reason": "NotFound",
            "details": {}, "code": 404});
        return (StatusCode::NOT_FOUND, axum::Json(status)).into_response();
    };
    let selector = q.get("labelSelector").cloned().unwrap_or_default();
    if !matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
        let mut s = store.lock().unwrap();
        *s.pages.entry(res).or_default() += 1;
        // Pages: `limit` items from the `continue` token on; the token carries the offset and
        // the list's version, which every page reports (the stub pages over the objects as they
        // are now; the tests do not write while a list is being paged).
        let (offset, version) = match q.get("continue").and_then(|c| c.split_once('@')) {
            Some((o, v)) => (o.parse().unwrap_or(0), v.parse().unwrap_or(s.rv)),
            None => {
                *s.lists.entry(res).or_default() += 1;
                (0usize, s.rv)
            }
        };
        let all: Vec<&Value> = s.objects.values().filter(|o| matches(res, &ns, &selector, o)).collect();
        let limit = q.get("limit").and_then(|l| l.parse().ok()).filter(|l| *l > 0).unwrap_or(usize::MAX);
        let items: Vec<Value> = all.iter().skip(offset).take(limit).map(|o| (*o).clone()).collect();
        let mut metadata = json!({"resourceVersion": version.to_string()});
        if offset + items.len() < all.len() {
            metadata["continue"] = json!(format!("{}@{version}", offset + items.len()));
        }
        let list = json!({
            "kind": format!("{}List", res.kind()),
            "apiVersion": res.api_version(),
            "metadata": metadata,
            "items": items,
        });
        return axum::Json(list).into_response();
    }
    let from: u64 = q.get("resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true" || v == "1");
    let timeout = Duration::from_secs(q.get("timeoutSeconds").and_then(|v| v.parse().ok()).unwrap_or(1800));
    let generation = {
        let mut s = store.lock().unwrap();
        *s.watches.entry(res).or_default() += 1;
        s.generation
    };
    let started = Instant::now();
    let body = futures_util::stream::unfold(
        (store, from, false, Instant::now()),
        move |(store, mut seen, done, mut last_bookmark)| {
            let ns = ns.clone();
            let selector = selector.clone();
            async move {
                if done {
                    return None;
                }
                loop {
                    {
                        let mut s = store.lock().unwrap();
                        if s.generation != generation {
                            // Broken off mid-stream: the client sees the body fail.
                            let e = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "dropped");
                            return Some((Err(e), (store.clone(), seen, true, last_bookmark)));
                        }
                        if seen < s.compacted {
                            s.gone_sent += 1;
                            let status = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                                "metadata": {}, "status": "Failure",
                                "message": format!("too old resource version: {seen} ({})", s.compacted),
                                "reason": "Expired", "code": 410}});
                            return Some((Ok(line(&status)), (store.clone(), seen, true, last_bookmark)));
                        }
                        let next = s
                            .log
                            .iter()
                            .find(|(rv, _, o)| *rv > seen && matches(res, &ns, &selector, o))
                            .map(|(rv, kind, o)| (*rv, json!({"type": kind, "object": o})));
                        if let Some((rv, event)) = next {
                            seen = rv;
                            return Some((Ok(line(&event)), (store.clone(), seen, false, last_bookmark)));
                        }
                        // Nothing of ours up to the current version.
                        seen = s.rv;
                        if bookmarks && last_bookmark.elapsed() >= BOOKMARK_EVERY {
                            s.bookmarks_sent += 1;
                            last_bookmark = Instant::now();
                            let mark = json!({"type": "BOOKMARK", "object": {"kind": res.kind(),
                                "apiVersion": res.api_version(), "metadata": {"resourceVersion": s.rv.to_string()}}});
                            return Some((Ok(line(&mark)), (store.clone(), seen, false, last_bookmark)));
                        }
                    }
                    if started.elapsed() >= timeout {
                        return None;
                    }
                    // Part of the stub, not a wait in a test: how often the watch stream looks
                    // for new events, as the API server pushes them.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(body))
        .unwrap()
}

const BOOKMARK_EVERY: Duration = Duration::from_millis(300);

fn line(v: &Value) -> Bytes {
    let mut text = serde_json::to_vec(v).unwrap();
    text.push(b'\n');
    Bytes::from(text)
}

/// A fixture of tests/fixtures/kubernetes/.
pub(crate) fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/kubernetes/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
