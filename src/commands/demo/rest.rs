//! The demo cluster's REST API in Flink 2.x's JSON shapes (field names and type tags as in
//! the `flink-2.3.0` captures), so the real poller reads it unchanged.

use parking_lot::Mutex;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::commands::demo::cluster::{DemoCluster, DemoJob, HOLDOUT, RECORD_BYTES};
use crate::model::alignment::vertex_id;
use crate::model::coordinator::{CoordinatorStatus, End, Outcome, PredictedCheckpoint, REST_HISTORY};
use crate::observe::SubtaskCheckpoint;
use crate::time::Timestamp;

/// The simulated cluster, shared by the handlers.
pub(crate) type Shared = Arc<Mutex<DemoCluster>>;

/// The routes of the simulated JobManager.
pub fn router(cluster: Shared) -> Router {
    let router = Router::new()
        .route("/overview", get(overview))
        .route("/jobs/overview", get(jobs_overview))
        .route("/jobs/{jid}", get(job))
        .route("/jobs/{jid}/checkpoints", get(checkpoints))
        .route("/jobs/{jid}/checkpoints/config", get(checkpoint_config))
        .route("/jobs/{jid}/checkpoints/details/{cid}", get(details))
        .route("/jobs/{jid}/checkpoints/details/{cid}/subtasks/{vid}", get(subtasks))
        .route("/jobs/{jid}/vertices/{vid}", get(vertex))
        .route("/jobs/{jid}/vertices/{vid}/backpressure", get(backpressure))
        .route("/jobs/{jid}/vertices/{vid}/metrics", get(metrics));
    router.with_state(cluster)
}

/// A 404 with Flink's error body.
pub(crate) fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, Json(json!({ "errors": [what] }))).into_response()
}

/// Runs `f` on the job `jid`, or answers 404 like Flink.
pub(crate) fn with_job(cluster: &Shared, jid: &str, f: impl FnOnce(&DemoJob) -> Response) -> Response {
    let cluster = cluster.lock();
    match cluster.jobs.iter().find(|j| j.id == jid) {
        Some(job) => f(job),
        None => not_found(format!("Job {jid} not found")),
    }
}

async fn overview(State(cluster): State<Shared>) -> Response {
    let cluster = cluster.lock();
    let running =
        cluster.jobs.iter().filter(|j| j.coordinator.status() == CoordinatorStatus::Running).count();
    Json(json!({
        "taskmanagers": cluster.taskmanagers,
        "slots-total": 4 * cluster.jobs.len().max(1),
        "slots-available": 0,
        "jobs-running": running,
        "jobs-finished": 0,
        "jobs-cancelled": 0,
        "jobs-failed": 0,
        "flink-version": "2.3.0",
        "flink-commit": "demo",
    }))
    .into_response()
}

async fn jobs_overview(State(cluster): State<Shared>) -> Response {
    let cluster = cluster.lock();
    let now = Timestamp::now();
    let jobs: Vec<Value> = cluster
        .jobs
        .iter()
        .map(|j| {
            json!({
                "jid": j.id,
                "name": j.name,
                "state": j.coordinator.status().observed().as_str(),
                "start-time": j.start.0,
                "end-time": -1,
                "duration": now.since(j.start),
                "last-modification": j.start.0,
            })
        })
        .collect();
    Json(json!({ "jobs": jobs })).into_response()
}

async fn job(State(cluster): State<Shared>, Path(jid): Path<String>) -> Response {
    with_job(&cluster, &jid, |j| {
        let vertices: Vec<Value> = j
            .graph
            .vertices
            .iter()
            .enumerate()
            .map(|(v, spec)| json!({ "id": vertex_id(v), "name": spec.name, "parallelism": spec.parallelism, "status": j.coordinator.status().observed().as_str() }))
            .collect();
        let nodes: Vec<Value> = j
            .graph
            .vertices
            .iter()
            .enumerate()
            .map(|(v, spec)| {
                let inputs: Vec<Value> = j
                    .graph
                    .edges
                    .iter()
                    .filter(|e| e.to == v)
                    .map(|e| {
                        let strategy = match e.partitioner {
                            crate::model::alignment::Partitioner::Forward => "FORWARD",
                            crate::model::alignment::Partitioner::Hash { .. } => "HASH",
                            crate::model::alignment::Partitioner::Rebalance => "REBALANCE",
                        };
                        json!({ "num": 0, "id": vertex_id(e.from), "ship_strategy": strategy, "exchange": "pipelined_bounded" })
                    })
                    .collect();
                json!({ "id": vertex_id(v), "parallelism": spec.parallelism, "description": spec.name, "inputs": inputs })
            })
            .collect();
        Json(json!({
            "jid": j.id,
            "name": j.name,
            "state": j.coordinator.status().observed().as_str(),
            "start-time": j.start.0,
            "now": j.coordinator.now().0,
            "timestamps": j.coordinator.last_entered(),
            "vertices": vertices,
            "plan": { "jid": j.id, "name": j.name, "type": "STREAMING", "nodes": nodes },
        }))
        .into_response()
    })
}

/// The job's vertex with the REST id `vid`.
fn vertex_spec<'a>(job: &'a DemoJob, vid: &str) -> Option<&'a crate::model::alignment::VertexSpec> {
    vertex_index(job, vid).map(|v| &job.graph.vertices[v])
}

/// The index of the job's vertex with the REST id `vid`.
/// The index of vertex `vid` in the job's graph.
pub(crate) fn vertex_index(job: &DemoJob, vid: &str) -> Option<usize> {
    (0..job.graph.vertices.len()).find(|i| vertex_id(*i) == vid)
}

/// Where the subtasks run, as `/jobs/:jid/vertices/:vid` lists them (all of a job's on its one
/// TaskManager of the cluster's, `cluster::taskmanager`), and their I/O counters since the job started, from
/// the load of the graph the demo simulates ([`crate::commands::demo::cluster::steady_load`]).
async fn vertex(State(cluster): State<Shared>, Path((jid, vid)): Path<(String, String)>) -> Response {
    with_job(&cluster, &jid, |j| {
        let Some(v) = vertex_index(j, &vid) else {
            return not_found(format!("JobVertex {vid} not found"));
        };
        let spec = &j.graph.vertices[v];
        let running_ms = j.coordinator.now().since(j.start);
        let (tm_id, endpoint) = crate::commands::demo::cluster::taskmanager(j.taskmanager);
        let subtasks: Vec<Value> = (0..spec.parallelism)
            .map(|i| {
                let load = j.load[v].get(i as usize).copied().unwrap_or_default();
                let bytes = |per_ms: f64| (per_ms * running_ms as f64).round() as u64;
                let records = |per_ms: f64| (per_ms * running_ms as f64 / RECORD_BYTES).round() as u64;
                json!({
                    "subtask": i,
                    "status": j.coordinator.status().observed().as_str(),
                    "endpoint": endpoint,
                    "taskmanager-id": tm_id,
                    "start-time": j.start.0,
                    "duration": running_ms,
                    "metrics": {
                        "read-bytes": bytes(load.in_bytes_per_ms),
                        "read-bytes-complete": true,
                        "write-bytes": bytes(load.out_bytes_per_ms),
                        "write-bytes-complete": true,
                        "read-records": records(load.in_bytes_per_ms),
                        "read-records-complete": true,
                        "write-records": records(load.out_bytes_per_ms),
                        "write-records-complete": true,
                    },
                })
            })
            .collect();
        Json(json!({ "id": vid, "name": spec.name, "parallelism": spec.parallelism, "subtasks": subtasks }))
            .into_response()
    })
}

/// `/jobs/:jid/vertices/:vid/backpressure` in Flink 2.x's shape, from the simulated load.
async fn backpressure(State(cluster): State<Shared>, Path((jid, vid)): Path<(String, String)>) -> Response {
    with_job(&cluster, &jid, |j| {
        let Some(v) = vertex_index(j, &vid) else {
            return not_found(format!("JobVertex {vid} not found"));
        };
        let level = |ratio: f64| {
            if ratio > 0.5 {
                "high"
            } else if ratio > 0.1 {
                "low"
            } else {
                "ok"
            }
        };
        let subtasks: Vec<Value> = j.load[v]
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let idle = (1.0 - l.busy - l.backpressured).max(0.0);
                json!({
                    "subtask": i,
                    "backpressureLevel": level(l.backpressured),
                    "ratio": l.backpressured,
                    "idleRatio": idle,
                    "busyRatio": l.busy,
                    "backpressure-level": level(l.backpressured),
                })
            })
            .collect();
        let worst = j.load[v].iter().map(|l| l.backpressured).fold(0.0, f64::max);
        Json(json!({
            "status": "ok",
            "backpressureLevel": level(worst),
            "end-timestamp": j.coordinator.now().0,
            "subtasks": subtasks,
            "backpressure-level": level(worst),
        }))
        .into_response()
    })
}

/// `/jobs/:jid/vertices/:vid/metrics?get=…`: the per-subtask rates, busy and back-pressured
/// time and output pool usage of the simulated load (values as strings, like Flink); ids it
/// does not know are left out, as Flink does.
async fn metrics(
    State(cluster): State<Shared>,
    Path((jid, vid)): Path<(String, String)>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    with_job(&cluster, &jid, |j| {
        let Some(v) = vertex_index(j, &vid) else {
            return not_found(format!("JobVertex {vid} not found"));
        };
        let wanted = query.get("get").map(String::as_str).unwrap_or("");
        let values: Vec<Value> = wanted
            .split(',')
            .filter_map(|id| {
                let (index, name) = id.split_once('.')?;
                let l = j.load[v].get(index.parse::<usize>().ok()?)?;
                let value = match name {
                    "numRecordsInPerSecond" => l.in_bytes_per_ms * 1000.0 / RECORD_BYTES,
                    "numRecordsOutPerSecond" => l.out_bytes_per_ms * 1000.0 / RECORD_BYTES,
                    "busyTimeMsPerSecond" => l.busy * 1000.0,
                    "backPressuredTimeMsPerSecond" => l.backpressured * 1000.0,
                    "idleTimeMsPerSecond" => (1.0 - l.busy - l.backpressured).max(0.0) * 1000.0,
                    "Shuffle.Netty.Output.Buffers.outPoolUsage" => l.out_pool_usage,
                    _ => return None,
                };
                Some(json!({ "id": id, "value": value.to_string() }))
            })
            .collect();
        Json(Value::Array(values)).into_response()
    })
}

async fn checkpoint_config(State(cluster): State<Shared>, Path(jid): Path<String>) -> Response {
    with_job(&cluster, &jid, |j| {
        let c = j.coordinator.config();
        Json(json!({
            "mode": "exactly_once",
            // Flink 2.x reports max(interval, minPause) here (see docs/model.md).
            "interval": c.base_interval(),
            "timeout": c.timeout_ms,
            "min_pause": c.min_pause_ms,
            "max_concurrent": c.max_concurrent,
            "externalization": { "enabled": false, "delete_on_cancellation": true },
            "state_backend": "HashMapStateBackend",
            "checkpoint_storage": "FileSystemCheckpointStorage",
            "unaligned_checkpoints": false,
            "tolerable_failed_checkpoints": c.tolerable_failures,
            "aligned_checkpoint_timeout": 0,
            "checkpoints_after_tasks_finish": true,
            "state_changelog_enabled": false,
        }))
        .into_response()
    })
}

/// Whether subtask `st` of the vertex `vertex_id` has acknowledged checkpoint `c` by now: every
/// subtask of a completed checkpoint; otherwise those whose simulated acknowledgement came before
/// the checkpoint failed (or before now, while it runs), except the one that holds a failing
/// checkpoint up ([`crate::commands::demo::cluster::HOLDOUT`]: it hangs in its snapshot or declines), which never
/// does.
fn acknowledged(job: &DemoJob, c: &PredictedCheckpoint, vertex_id: &str, st: &SubtaskCheckpoint) -> bool {
    if matches!(c.end, Some(End::Completed(_))) {
        return true;
    }
    let (holdout_vertex, holdout_subtask) = HOLDOUT;
    let fails = !matches!(c.outcome, Outcome::Complete { .. });
    if fails && vertex_id == crate::model::alignment::vertex_id(holdout_vertex) && st.index == holdout_subtask
    {
        return false;
    }
    let until = match c.end {
        Some(End::Failed(at, _)) => at,
        _ => job.coordinator.now(),
    };
    st.acknowledged && st.end_to_end_ms.is_some_and(|e| c.triggered_at.plus_millis(e as i64) <= until)
}

/// How many subtasks of checkpoint `c` acknowledged (of one vertex, or of all).
fn acknowledged_count(job: &DemoJob, c: &PredictedCheckpoint, vertex: Option<&str>) -> u32 {
    c.operators
        .iter()
        .filter(|op| vertex.is_none_or(|v| v == op.vertex_id))
        .flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
        .filter(|(op, st)| acknowledged(job, c, &op.vertex_id, st))
        .count() as u32
}

/// A checkpoint as `/checkpoints` history and `/checkpoints/details/:id` show it.
fn checkpoint_json(job: &DemoJob, c: &PredictedCheckpoint, with_tasks: bool) -> Value {
    let variant = job.variant(c.id);
    let n = job.coordinator.config().num_subtasks;
    let (class, status) = match c.end {
        Some(End::Completed(_)) => ("completed", "COMPLETED"),
        Some(End::Failed(..)) => ("failed", "FAILED"),
        None => ("in_progress", "IN_PROGRESS"),
    };
    let finished = c.to_finished(n);
    let last_ack = finished.as_ref().map(|f| f.finished_at.0).unwrap_or(c.triggered_at.0);
    let completed = matches!(c.end, Some(End::Completed(_)));
    let mut v = json!({
        "className": class,
        "id": c.id,
        "status": status,
        "is_savepoint": false,
        "savepointFormat": null,
        "trigger_timestamp": c.triggered_at.0,
        "latest_ack_timestamp": if completed { last_ack } else { -1 },
        "checkpointed_size": if completed { variant.state_bytes as i64 } else { 0 },
        "state_size": if completed { variant.state_bytes as i64 } else { 0 },
        "end_to_end_duration": finished.as_ref().and_then(|f| f.end_to_end_ms).unwrap_or(0),
        "alignment_buffered": 0,
        "processed_data": if completed { variant.processed_bytes } else { 0 },
        "persisted_data": if completed { variant.persisted_bytes } else { 0 },
        "num_subtasks": n,
        "num_acknowledged_subtasks": if completed { n } else { acknowledged_count(job, c, None) },
        "checkpoint_type": "CHECKPOINT",
        "tasks": {},
    });
    if let Some(End::Failed(at, reason)) = c.end {
        v["failure_timestamp"] = json!(at.0);
        v["failure_message"] = json!(reason.message());
    }
    if completed {
        v["external_path"] = json!(format!("file:/tmp/demo/{}/chk-{}", job.id, c.id));
        v["discarded"] = json!(false);
    }
    if with_tasks {
        let tasks: serde_json::Map<String, Value> = job
            .graph
            .vertices
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let p = spec.parallelism;
                (
                    vertex_id(i),
                    json!({
                        "id": c.id,
                        "status": status,
                        "latest_ack_timestamp": if completed { last_ack } else { -1 },
                        "checkpointed_size": spec.state_bytes * p as u64,
                        "state_size": spec.state_bytes * p as u64,
                        "end_to_end_duration": finished.as_ref().and_then(|f| f.end_to_end_ms).unwrap_or(0),
                        "alignment_buffered": 0,
                        "processed_data": 0,
                        "persisted_data": 0,
                        "num_subtasks": p,
                        "num_acknowledged_subtasks": if completed { p } else { acknowledged_count(job, c, Some(&vertex_id(i))) },
                    }),
                )
            })
            .collect();
        v["tasks"] = Value::Object(tasks);
    }
    v
}

async fn checkpoints(State(cluster): State<Shared>, Path(jid): Path<String>) -> Response {
    with_job(&cluster, &jid, |j| {
        let counts = j.coordinator.counts();
        // Newest first, like Flink; in-progress ones included; at most the history size.
        let mut recent: Vec<&PredictedCheckpoint> = j.coordinator.checkpoints().collect();
        recent.reverse();
        recent.truncate(REST_HISTORY);
        let history: Vec<Value> = recent.iter().map(|c| checkpoint_json(j, c, false)).collect();
        let latest = |pred: fn(&PredictedCheckpoint) -> bool| {
            j.coordinator.checkpoints().filter(|c| pred(c)).last().map(|c| checkpoint_json(j, c, false))
        };
        let restored = j.coordinator.job_poll(
            crate::observe::JobKey { cluster: String::new(), job_id: j.id.clone() },
            &j.name,
            j.coordinator.now(),
            None,
        );
        let restored = restored.latest_restore.map(|(id, at)| {
            json!({ "id": id, "restore_timestamp": at.0, "is_savepoint": false, "external_path": format!("file:/tmp/demo/{}/chk-{}", j.id, id.unwrap_or(0)) })
        });
        Json(json!({
            "counts": {
                "restored": counts.restored,
                "total": counts.completed + counts.failed + counts.in_progress,
                "in_progress": counts.in_progress,
                "completed": counts.completed,
                "failed": counts.failed,
            },
            "latest": {
                "completed": latest(|c| matches!(c.end, Some(End::Completed(_)))),
                "savepoint": null,
                "failed": latest(|c| matches!(c.end, Some(End::Failed(..)))),
                "restored": restored,
            },
            "history": history,
        }))
        .into_response()
    })
}

async fn details(State(cluster): State<Shared>, Path((jid, cid)): Path<(String, u64)>) -> Response {
    with_job(&cluster, &jid, |j| match j.coordinator.checkpoint(cid) {
        Some(c) => Json(checkpoint_json(j, c, true)).into_response(),
        None => not_found(format!("Could not find checkpointing statistics for checkpoint {cid}.")),
    })
}

async fn subtasks(
    State(cluster): State<Shared>,
    Path((jid, cid, vid)): Path<(String, u64, String)>,
) -> Response {
    with_job(&cluster, &jid, |j| {
        let Some(c) = j.coordinator.checkpoint(cid) else {
            return not_found(format!("Could not find checkpointing statistics for checkpoint {cid}."));
        };
        let Some(op) = c.operators.iter().find(|o| o.vertex_id == vid) else {
            return not_found(format!("There is no checkpoint statistics for task {vid}."));
        };
        let state_bytes = vertex_spec(j, &vid).map_or(0, |s| s.state_bytes);
        let subtasks: Vec<Value> = op
            .subtasks
            .iter()
            .map(|s| {
                if !acknowledged(j, c, &vid, s) {
                    return json!({ "className": "pending", "index": s.index, "status": "pending_or_failed" });
                }
                let e2e = s.end_to_end_ms.unwrap_or(0);
                json!({
                    "className": "completed",
                    "index": s.index,
                    "status": "completed",
                    "ack_timestamp": c.triggered_at.0 + e2e as i64,
                    "end_to_end_duration": e2e,
                    "state_size": state_bytes,
                    "checkpointed_size": state_bytes,
                    "checkpoint": { "sync": s.sync_ms, "async": s.async_ms },
                    "alignment": { "buffered": 0, "processed": s.processed_bytes, "persisted": s.persisted_bytes, "duration": s.alignment_ms },
                    "start_delay": s.start_delay_ms,
                    "unaligned_checkpoint": s.unaligned,
                    "aborted": false,
                })
            })
            .collect();
        Json(json!({
            "id": cid,
            "status": match c.end {
                Some(End::Completed(_)) => "COMPLETED",
                Some(End::Failed(..)) => "FAILED",
                None => "IN_PROGRESS",
            },
            "num_subtasks": op.subtasks.len(),
            "subtasks": subtasks,
        }))
        .into_response()
    })
}
