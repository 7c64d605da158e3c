//! The demo cluster's metrics endpoints for the evidence rounds, in Flink 2.x's shapes: a
//! vertex's subtasks aggregated (`…/subtasks/metrics?get=…&agg=…`), one subtask's
//! (`…/subtasks/:i/metrics`) and the one TaskManager's (`/taskmanagers/:tm/metrics`), from the
//! simulated load, and RocksDB's native metrics of the stateful vertices; names it does not know
//! are left out, as Flink does.

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::cluster::{DemoJob, SubtaskRates};
use super::rest::{Shared, not_found, vertex_index, with_job};

/// The simulated cluster's one TaskManager (as `/jobs/:jid/vertices/:vid` places subtasks).
pub(crate) const TASKMANAGER: &str = "127.0.0.1:6122-demo01";
/// Its heap, bytes.
const HEAP_MAX: f64 = 512.0 * 1024.0 * 1024.0;

type Params = Query<std::collections::HashMap<String, String>>;

/// The metrics routes, merged into the demo's router beside `rest::router`'s.
pub(crate) fn router(cluster: Shared) -> Router {
    Router::new()
        .route("/jobs/{jid}/vertices/{vid}/subtasks/metrics", get(subtasks_aggregated))
        .route("/jobs/{jid}/vertices/{vid}/subtasks/{index}/metrics", get(subtask))
        .route("/taskmanagers/{tm}/metrics", get(taskmanager))
        .with_state(cluster)
}

/// A subtask's metric by Flink's name.
fn value(l: &SubtaskRates, name: &str) -> Option<f64> {
    Some(match name {
        "busyTimeMsPerSecond" => l.busy * 1000.0,
        "backPressuredTimeMsPerSecond" => l.backpressured * 1000.0,
        "idleTimeMsPerSecond" => (1.0 - l.busy - l.backpressured).max(0.0) * 1000.0,
        "Shuffle.Netty.Output.Buffers.outPoolUsage" => l.out_pool_usage,
        // A busy subtask's input queue fills up.
        "Shuffle.Netty.Input.Buffers.inPoolUsage" => (l.busy * l.busy).min(1.0),
        _ => return None,
    })
}

/// A stateful vertex's RocksDB native metrics, as Flink lists them when the job turns them on:
/// per column family (the demo's stateful operators declare two states), `<operator>.<column
/// family>.rocksdb_<property>`.
const COLUMN_FAMILIES: [&str; 2] = ["count", "last"];

/// The RocksDB metric names of a vertex with state (none without).
fn rocksdb_names(vertex: &crate::model::alignment::VertexSpec) -> Vec<String> {
    if vertex.state_bytes == 0 {
        return Vec::new();
    }
    let properties = crate::sources::flink::metrics::ROCKSDB_METRICS.map(|(p, _)| p);
    COLUMN_FAMILIES
        .iter()
        .flat_map(|cf| properties.iter().map(move |p| format!("{}.{cf}.rocksdb_{p}", vertex.name)))
        .collect()
}

/// One subtask's value of a RocksDB metric: its state's half per column family as live data,
/// 1 MiB of memtables each, a 2.5 MiB block cache both share, compaction keeping up.
fn rocksdb_value(vertex: &crate::model::alignment::VertexSpec, name: &str) -> Option<f64> {
    let rest = name.strip_prefix(vertex.name.as_str())?.strip_prefix('.')?;
    let (cf, property) = rest.split_once(".rocksdb_")?;
    if vertex.state_bytes == 0 || !COLUMN_FAMILIES.contains(&cf) {
        return None;
    }
    Some(match property {
        "estimate-live-data-size" => (vertex.state_bytes / 2) as f64,
        "size-all-mem-tables" => 1_048_576.0,
        "block-cache-usage" => 2_621_440.0,
        "num-running-compactions" | "estimate-pending-compaction-bytes" => 0.0,
        _ => return None,
    })
}

fn names(query: &Params) -> Vec<String> {
    query.get("get").map(|g| g.split(',').map(str::to_string).collect()).unwrap_or_default()
}

async fn subtasks_aggregated(
    State(cluster): State<Shared>,
    Path((jid, vid)): Path<(String, String)>,
    query: Params,
) -> Response {
    with_job(&cluster, &jid, |j: &DemoJob| {
        let Some(v) = vertex_index(j, &vid) else { return not_found(format!("JobVertex {vid} not found")) };
        let wanted = names(&query);
        if wanted.is_empty() {
            let rocksdb = rocksdb_names(&j.graph.vertices[v]);
            let list: Vec<Value> =
                ["busyTimeMsPerSecond", "backPressuredTimeMsPerSecond", "idleTimeMsPerSecond"]
                    .iter()
                    .map(|id| id.to_string())
                    .chain(rocksdb)
                    .map(|id| json!({ "id": id }))
                    .collect();
            return Json(Value::Array(list)).into_response();
        }
        let values: Vec<Value> = wanted
            .iter()
            .filter_map(|name| {
                let vertex = &j.graph.vertices[v];
                let all: Vec<f64> = j.load[v]
                    .iter()
                    .filter_map(|l| value(l, name).or_else(|| rocksdb_value(vertex, name)))
                    .collect();
                if all.is_empty() {
                    return None;
                }
                let sum: f64 = all.iter().sum();
                let max = all.iter().copied().fold(f64::MIN, f64::max);
                let min = all.iter().copied().fold(f64::MAX, f64::min);
                Some(json!({ "id": name, "min": min, "max": max, "avg": sum / all.len() as f64, "sum": sum }))
            })
            .collect();
        Json(Value::Array(values)).into_response()
    })
}

async fn subtask(
    State(cluster): State<Shared>,
    Path((jid, vid, index)): Path<(String, String, usize)>,
    query: Params,
) -> Response {
    with_job(&cluster, &jid, |j: &DemoJob| {
        let Some(l) = vertex_index(j, &vid).and_then(|v| j.load[v].get(index)) else {
            return not_found(format!("Subtask {index} of {vid} not found"));
        };
        let values: Vec<Value> = names(&query)
            .iter()
            .filter_map(|name| Some(json!({ "id": name, "value": value(l, name)?.to_string() })))
            .collect();
        Json(Value::Array(values)).into_response()
    })
}

/// The TaskManager: a young collector spending 2 % of the time since the first job started, a
/// heap that fills and empties over a minute.
async fn taskmanager(State(cluster): State<Shared>, Path(tm): Path<String>, query: Params) -> Response {
    let cluster = cluster.lock();
    if tm != TASKMANAGER && !(1..cluster.taskmanagers).any(|k| super::cluster::taskmanager(k).0 == tm) {
        return not_found(format!("TaskManager {tm} not found"));
    }
    let Some(first) = cluster.jobs.first() else { return not_found("no TaskManager".into()) };
    let up_ms = first.coordinator.now().since(first.start) as f64;
    drop(cluster);
    let known = [
        ("Status.JVM.Memory.Heap.Used", HEAP_MAX * (0.3 + 0.4 * ((up_ms / 60_000.0) % 1.0))),
        ("Status.JVM.Memory.Heap.Max", HEAP_MAX),
        ("Status.JVM.CPU.Load", 0.35),
        ("Status.Flink.Memory.Managed.Used", 0.0),
        ("Status.Flink.Memory.Managed.Total", 128.0 * 1024.0 * 1024.0),
        ("Status.Shuffle.Netty.AvailableMemorySegments", 3_000.0),
        ("Status.Shuffle.Netty.TotalMemorySegments", 4_096.0),
        ("Status.JVM.GarbageCollector.G1_Young_Generation.Count", (up_ms / 5_000.0).floor()),
        ("Status.JVM.GarbageCollector.G1_Young_Generation.Time", (up_ms * 0.02).floor()),
        ("Status.JVM.GarbageCollector.G1_Old_Generation.Count", 0.0),
        ("Status.JVM.GarbageCollector.G1_Old_Generation.Time", 0.0),
    ];
    let wanted = names(&query);
    let values: Vec<Value> = known
        .iter()
        .filter(|(id, _)| wanted.is_empty() || wanted.iter().any(|w| w == id))
        .map(|(id, v)| {
            if wanted.is_empty() { json!({ "id": id }) } else { json!({ "id": id, "value": v.to_string() }) }
        })
        .collect();
    Json(Value::Array(values)).into_response()
}
