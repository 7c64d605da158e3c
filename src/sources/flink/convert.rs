//! Pure conversion from Flink's REST DTOs to observations; Flink's version semantics live here.

use crate::observe::{
    CheckpointCounts, CheckpointSettings, CheckpointStatus, FinishedCheckpoint, InProgressCheckpoint,
    JobStatus, JobTopology, OperatorCheckpoint, SnapshotKind, SubtaskCheckpoint, SubtaskLoad, TopologyEdge,
    TopologyVertex, VertexLoad,
};
use crate::sources::flink::dto;
use crate::time::Timestamp;

/// A non-negative quantity, or `None` for missing and for Flink's `-1` "unknown".
fn non_negative(value: Option<i64>) -> Option<u64> {
    value.and_then(|v| u64::try_from(v).ok())
}

/// A job's `state` (of `/jobs/overview`, `/jobs/:id`): Flink's status; none read as an empty
/// [`JobStatus::Other`].
pub(crate) fn job_status(state: Option<&str>) -> JobStatus {
    JobStatus::parse(state.unwrap_or_default())
}

/// Converts `/checkpoints/config`.
pub fn settings(config: &dto::CheckpointConfig) -> CheckpointSettings {
    // Periodic checkpointing is off when the interval is Long.MAX_VALUE.
    let interval_ms = non_negative(config.interval).filter(|&ms| ms < i64::MAX as u64);
    CheckpointSettings {
        exactly_once: !config.mode.as_deref().is_some_and(|m| m.eq_ignore_ascii_case("at_least_once")),
        interval_ms,
        timeout_ms: non_negative(config.timeout),
        min_pause_ms: non_negative(config.min_pause).unwrap_or(0),
        max_concurrent: non_negative(config.max_concurrent)
            .map(|n| n.min(u32::MAX as u64) as u32)
            .unwrap_or(1),
        tolerable_failures: non_negative(config.tolerable_failed_checkpoints)
            .map(|n| n.min(u32::MAX as u64) as u32),
        unaligned: config.unaligned_checkpoints.unwrap_or(false),
        aligned_checkpoint_timeout_ms: non_negative(config.aligned_checkpoint_timeout),
        state_backend: config.state_backend.clone(),
        interval_during_backlog_ms: None,
    }
}

/// A job's whole checkpoint configuration: `/checkpoints/config`, the restart strategy and
/// global job parameters of `/jobs/:id/config`, and the cluster's `/jobmanager/config` (a job
/// parameter wins over the cluster's option of the same key).
pub(crate) fn configuration(
    config: &dto::CheckpointConfig,
    job: Option<&dto::JobConfig>,
    cluster: &[dto::ConfigEntry],
    flink_version: Option<&str>,
) -> crate::observe::CheckpointConfiguration {
    configuration_of(config, job, &[], cluster, flink_version)
}

/// A key's generation: FLIP-406's keys (1.20+, 2.x), the older ones (`state.backend.*`,
/// `state.checkpoints.*`, `state.savepoints.*`, `execution.savepoint.path`), one both generations
/// read, or a connector's (a Kafka producer's, passed as a job parameter).
fn generation(key: &str) -> &'static str {
    const BOTH: [&str; 4] = [
        "execution.checkpointing.interval-during-backlog",
        "state.changelog.enabled",
        "state.backend.type",
        "restart-strategy.type",
    ];
    if BOTH.contains(&key) {
        "1.x and 2.x"
    } else if key.starts_with("execution.checkpointing.") || key.starts_with("execution.state-recovery.") {
        "2.x"
    } else if key.starts_with("state.") || key == "restart-strategy" || key == "execution.savepoint.path" {
        "1.x"
    } else {
        "connector"
    }
}

/// One place a configuration key may be found.
type Getter<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// [`configuration`] with the job's own configuration (`/jobs/:id/jobmanager/config`, 1.17+)
/// between the job's parameters and the cluster's: a key is taken from the first that has it,
/// and within each, the 2.x key before the 1.x one. Every key read is named with its source.
pub(crate) fn configuration_of(
    config: &dto::CheckpointConfig,
    job: Option<&dto::JobConfig>,
    job_options: &[dto::ConfigEntry],
    cluster: &[dto::ConfigEntry],
    flink_version: Option<&str>,
) -> crate::observe::CheckpointConfiguration {
    let execution = job.and_then(|j| j.execution_config.as_ref());
    let read = std::cell::RefCell::new(Vec::new());
    let entry = |entries: &[dto::ConfigEntry], key: &str| {
        entries.iter().find(|e| e.key == key).and_then(|e| e.value.clone())
    };
    let lookup = |setting: &'static str, keys: &[&str]| -> Option<String> {
        let from_job = |key: &str| {
            execution.and_then(|e| e.user_config.get(key)).and_then(|v| {
                v.as_str().map(str::to_string).or_else(|| (!v.is_null()).then(|| v.to_string()))
            })
        };
        let sources: [(&'static str, &Getter); 3] = [
            ("job parameters", &from_job),
            ("job configuration", &|key| entry(job_options, key)),
            ("cluster configuration", &|key| entry(cluster, key)),
        ];
        sources.iter().find_map(|(source, get)| {
            keys.iter().find_map(|key| {
                let value = get(key)?;
                read.borrow_mut().push(crate::observe::KeyRead {
                    setting,
                    key: key.to_string(),
                    generation: generation(key),
                    source,
                    value: value.clone(),
                });
                Some(value)
            })
        })
    };
    let flag = |setting, keys: &[&str]| lookup(setting, keys).map(|v| v.trim().eq_ignore_ascii_case("true"));
    let retained_on_cancellation = config.externalization.map(|e| {
        // 2.x externalizes every checkpoint and reports `enabled: false` all the same; what
        // matters is whether cancelling deletes them.
        !e.delete_on_cancellation.unwrap_or(true)
    });
    let mut settings = settings(config);
    if settings.state_backend.is_none() {
        settings.state_backend = lookup("state backend", &["state.backend.type", "state.backend"]);
    }
    settings.interval_during_backlog_ms =
        lookup("interval during backlog", &["execution.checkpointing.interval-during-backlog"])
            .and_then(|v| flink_duration_ms(&v))
            .map(|ms| ms.min(u64::from(u32::MAX)) as u32);
    let incremental =
        flag("incremental", &["execution.checkpointing.incremental", "state.backend.incremental"]);
    let changelog =
        config.state_changelog_enabled.or_else(|| flag("changelog", &["state.changelog.enabled"]));
    let local_recovery =
        flag("local recovery", &["execution.state-recovery.from-local", "state.backend.local-recovery"]);
    let retained_checkpoints = lookup(
        "retained checkpoints",
        &["execution.checkpointing.num-retained", "state.checkpoints.num-retained"],
    )
    .and_then(|v| v.trim().parse().ok());
    // Read for the record (the advisor names them): where checkpoints and savepoints go.
    let storage =
        lookup("checkpoint storage", &["execution.checkpointing.storage", "state.checkpoint-storage"]);
    let checkpoint_dir =
        lookup("checkpoint directory", &["execution.checkpointing.dir", "state.checkpoints.dir"]);
    lookup("savepoint directory", &["execution.checkpointing.savepoint-dir", "state.savepoints.dir"]);
    let file_merging = lookup(
        "file merging",
        &["execution.checkpointing.file-merging.enabled", "state.checkpoints.file-merging.enabled"],
    )
    .map(|v| v.trim().eq_ignore_ascii_case("true"));
    let framesize_bytes =
        lookup("RPC frame size", &["pekko.framesize", "akka.framesize"]).and_then(|v| parse_bytes(&v));
    lookup("restore path", &["execution.state-recovery.path", "execution.savepoint.path"]);
    let restart_strategy = execution
        .and_then(|e| e.restart_strategy.clone())
        .or_else(|| lookup("restart strategy", &["restart-strategy.type", "restart-strategy"]));
    let transaction_timeout_ms = lookup(
        "Kafka transaction timeout",
        &["transaction.timeout.ms", "properties.transaction.timeout.ms", "sink.transaction.timeout.ms"],
    )
    .and_then(|v| flink_duration_ms(&v));
    let delivery = lookup("Kafka delivery guarantee", &["sink.delivery-guarantee", "delivery.guarantee"]);
    crate::observe::CheckpointConfiguration {
        settings,
        retained_on_cancellation,
        checkpoint_storage: config.checkpoint_storage.clone().or(storage),
        incremental,
        changelog,
        local_recovery,
        retained_checkpoints,
        restart_strategy,
        flink_version: flink_version.map(str::to_string),
        checkpoint_dir,
        file_merging,
        framesize_bytes,
        kafka_transaction_timeout_ms: transaction_timeout_ms,
        measured_restore_ms: None,
        kafka_exactly_once: delivery.map(|d| {
            d.trim().eq_ignore_ascii_case("exactly_once") || d.trim().eq_ignore_ascii_case("exactly-once")
        }),
        keys_read: read.into_inner(),
    }
}

/// A Flink memory size (`10485760b`, `10 mb`, `1g`, a bare number of bytes) in bytes.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit.trim() {
        "" | "b" | "bytes" => 1,
        "k" | "kb" | "kibibytes" => 1 << 10,
        "m" | "mb" | "mebibytes" => 1 << 20,
        "g" | "gb" | "gibibytes" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// A duration as Flink's `TimeUtils.parseDuration` reads it: a number and an optional unit
/// (`ms`, `s`, `min`, `h`, `d` and their long forms; none means milliseconds), spaces allowed
/// between them; `None` for anything else.
pub(crate) fn flink_duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

/// What `latest.restored` of `/checkpoints` says the job last restored from; `None` without a
/// restore timestamp.
pub fn restored_from(restored: &dto::RestoredCheckpoint) -> Option<crate::observe::RestoredFrom> {
    let at = restored.restore_timestamp.filter(|&t| t > 0)?;
    Some(crate::observe::RestoredFrom {
        checkpoint_id: restored.id,
        is_savepoint: restored.is_savepoint.unwrap_or(false),
        external_path: restored.external_path.clone(),
        restored_at: Timestamp(at),
    })
}

/// The subtasks of one vertex's `subtasktimes`, named `operator`: when each current attempt
/// entered INITIALIZING and RUNNING, and whether RUNNING (or FINISHED) is its latest state.
pub(crate) fn subtask_starts(operator: &str, times: &dto::SubtaskTimes) -> Vec<crate::observe::SubtaskStart> {
    let at = |st: &dto::SubtaskTimesEntry, state: &str| {
        st.timestamps.get(state).copied().filter(|&t| t > 0).map(Timestamp)
    };
    times
        .subtasks
        .iter()
        .map(|st| {
            let latest = st.timestamps.iter().filter(|(_, t)| **t > 0).max_by_key(|(_, t)| **t);
            crate::observe::SubtaskStart {
                operator: operator.to_string(),
                subtask: st.subtask,
                initializing_at: at(st, "INITIALIZING"),
                running_at: at(st, "RUNNING"),
                running_now: latest.is_some_and(|(s, _)| s == "RUNNING" || s == "FINISHED"),
            }
        })
        .collect()
}

/// Converts `counts` of `/checkpoints`.
pub fn counts(counts: &dto::Counts) -> CheckpointCounts {
    CheckpointCounts {
        completed: counts.completed.unwrap_or(0),
        failed: counts.failed.unwrap_or(0),
        in_progress: counts.in_progress.unwrap_or(0),
        restored: counts.restored.unwrap_or(0),
    }
}

/// The final status of a history entry, `None` while it is in progress.
pub fn status(checkpoint: &dto::CheckpointStatistics) -> Option<CheckpointStatus> {
    let status = checkpoint.status.as_deref().or(checkpoint.class_name.as_deref())?;
    if status.eq_ignore_ascii_case("completed") {
        Some(CheckpointStatus::Completed)
    } else if status.eq_ignore_ascii_case("failed") {
        Some(CheckpointStatus::Failed)
    } else {
        None
    }
}

/// The in-progress entries of a history.
pub fn in_progress(history: &[dto::CheckpointStatistics]) -> Vec<InProgressCheckpoint> {
    let mut pending: Vec<InProgressCheckpoint> = history
        .iter()
        .filter(|cp| status(cp).is_none())
        .map(|cp| InProgressCheckpoint {
            id: cp.id,
            triggered_at: Timestamp(cp.trigger_timestamp.unwrap_or(0)),
            num_subtasks: cp.num_subtasks.unwrap_or(0),
            num_acknowledged: cp.num_acknowledged_subtasks.unwrap_or(0),
        })
        .collect();
    pending.sort_by_key(|cp| cp.id);
    pending
}

/// The subtask details of one vertex, as fetched for a finished checkpoint.
pub struct VertexDetails<'a> {
    /// The vertex id.
    pub vertex_id: &'a str,
    /// The vertex name from `/jobs/:id`.
    pub name: &'a str,
    /// `/checkpoints/details/:cp/subtasks/:vertex`.
    pub details: &'a dto::TaskCheckpointDetails,
}

/// Converts a finished history entry, with its per-vertex details when they were fetched.
/// Returns `None` for an entry that is still in progress.
pub fn finished(
    checkpoint: &dto::CheckpointStatistics,
    vertices: &[VertexDetails<'_>],
) -> Option<FinishedCheckpoint> {
    let status = status(checkpoint)?;
    let operators: Vec<OperatorCheckpoint> = vertices.iter().map(operator).collect();
    let any_unaligned_subtask = operators.iter().flat_map(|op| &op.subtasks).any(|st| st.unaligned);
    let checkpoint_type = checkpoint.checkpoint_type.as_deref().unwrap_or("");
    let kind = if checkpoint.is_savepoint == Some(true) || checkpoint_type.contains("SAVEPOINT") {
        SnapshotKind::Savepoint
    } else if checkpoint_type == "UNALIGNED_CHECKPOINT" || any_unaligned_subtask {
        // 1.13/1.14 report unaligned checkpoints as CHECKPOINT; the subtask flag tells.
        SnapshotKind::UnalignedCheckpoint
    } else {
        SnapshotKind::Checkpoint
    };
    // Flink 1.15 (FLINK-25557) added `checkpointed_size` and made `state_size` the full size;
    // before, `state_size` was the checkpointed (possibly incremental) size.
    let (checkpointed_bytes, full_state_bytes) = match checkpoint.checkpointed_size {
        Some(checkpointed) => (non_negative(Some(checkpointed)), non_negative(checkpoint.state_size)),
        None => (non_negative(checkpoint.state_size), None),
    };
    let triggered_at = Timestamp(checkpoint.trigger_timestamp.unwrap_or(0));
    let finished_at = match status {
        CheckpointStatus::Completed => checkpoint.latest_ack_timestamp,
        CheckpointStatus::Failed => checkpoint.failure_timestamp.or(checkpoint.latest_ack_timestamp),
    }
    .map(Timestamp)
    .unwrap_or(triggered_at);
    Some(FinishedCheckpoint {
        id: checkpoint.id,
        status,
        kind,
        triggered_at,
        finished_at,
        end_to_end_ms: non_negative(checkpoint.end_to_end_duration),
        checkpointed_bytes,
        full_state_bytes,
        processed_bytes: non_negative(checkpoint.processed_data),
        persisted_bytes: non_negative(checkpoint.persisted_data),
        num_subtasks: checkpoint.num_subtasks.unwrap_or(0),
        num_acknowledged: checkpoint.num_acknowledged_subtasks.unwrap_or(0),
        failure_message: checkpoint.failure_message.clone(),
        operators,
        external_path: checkpoint.external_path.clone(),
    })
}

fn operator(vertex: &VertexDetails<'_>) -> OperatorCheckpoint {
    let mut subtasks: Vec<SubtaskCheckpoint> = vertex
        .details
        .subtasks
        .iter()
        .map(|st| {
            let acknowledged = st.is_completed();
            SubtaskCheckpoint {
                index: st.index,
                acknowledged,
                end_to_end_ms: non_negative(st.end_to_end_duration),
                start_delay_ms: non_negative(st.start_delay),
                alignment_ms: non_negative(st.alignment.and_then(|a| a.duration)),
                sync_ms: non_negative(st.checkpoint.and_then(|c| c.sync)),
                async_ms: non_negative(st.checkpoint.and_then(|c| c.async_)),
                processed_bytes: non_negative(st.alignment.and_then(|a| a.processed)),
                persisted_bytes: non_negative(st.alignment.and_then(|a| a.persisted)),
                unaligned: st.unaligned_checkpoint.unwrap_or(false),
                state_size_bytes: non_negative(st.state_size),
                // Before 1.15 `state_size` was what the checkpoint persisted.
                checkpointed_bytes: non_negative(st.checkpointed_size.or(st.state_size)),
            }
        })
        .collect();
    subtasks.sort_by_key(|st| st.index);
    OperatorCheckpoint { vertex_id: vertex.vertex_id.to_string(), name: vertex.name.to_string(), subtasks }
}

/// The largest parallelism Flink allows (`KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM`,
/// 2^15): a larger one in an answer is garbled and is taken as this.
pub(crate) const MAX_PARALLELISM: u32 = 1 << 15;

/// The job graph of `/jobs/:id`: vertices with names and parallelism (at most
/// [`MAX_PARALLELISM`]), edges from `plan`. `None` when there is no plan.
pub fn topology(job: &dto::JobDetails) -> Option<JobTopology> {
    let plan = job.plan.as_ref()?;
    // By id, so a huge plan costs n log n, not n².
    let nodes: std::collections::BTreeMap<&str, &dto::PlanNode> =
        plan.nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let vertices = job
        .vertices
        .iter()
        .map(|v| {
            let node = nodes.get(v.id.as_str()).copied();
            TopologyVertex {
                id: v.id.clone(),
                name: v.name.clone().unwrap_or_else(|| v.id.clone()),
                parallelism: v
                    .parallelism
                    .or(node.and_then(|n| n.parallelism))
                    .unwrap_or(1)
                    .clamp(1, MAX_PARALLELISM),
            }
        })
        .collect();
    let edges = plan
        .nodes
        .iter()
        .flat_map(|n| {
            n.inputs.iter().map(move |input| TopologyEdge {
                from: input.id.clone(),
                to: n.id.clone(),
                ship_strategy: input.ship_strategy.clone().unwrap_or_default(),
            })
        })
        .collect();
    Some(JobTopology { vertices, edges })
}

/// The per-subtask metric names the alignment shadow asks for (each prefixed `<subtask>.`).
pub(crate) const LOAD_METRICS: [&str; 5] = [
    "numRecordsInPerSecond",
    "numRecordsOutPerSecond",
    "busyTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "Shuffle.Netty.Output.Buffers.outPoolUsage",
];

/// How long Flink's per-second rates (`numRecordsInPerSecond`, …) need before they mean the
/// current rate, ms. They are `MeterView`s over 60 s whose history of counts starts at zero, so
/// until a task has run 60 s they are its count so far divided by 60 s, not by its running time
/// (`MeterView.update`: `(values[now] - values[now - 60 s]) / 60`); the views are updated every
/// 5 s. Forty seconds into a job the rates read two thirds of the real ones.
pub(crate) const RATE_WINDOW_MS: f64 = 65_000.0;

/// How long a subtask has been running as of the vertex details' counters, ms: Flink computes
/// `accumulated-busy-time` as now − task start − idle − back-pressured
/// (`TaskIOMetricGroup.getAccumulatedBusyTime`), so the three add up to the running time at the
/// moment the counters were fetched. Without them (1.14) the subtask's `duration` since it was
/// deployed, which also counts its start-up and may be newer than the counters.
fn running_ms(subtask: &dto::VertexSubtask) -> Option<f64> {
    let m = subtask.metrics.as_ref();
    let accumulated = m.and_then(|m| {
        let parts = [m.accumulated_busy_ms, m.accumulated_idle_ms, m.accumulated_backpressured_ms];
        parts.iter().map(|p| p.and_then(|p| p.0)).sum::<Option<f64>>()
    });
    accumulated.filter(|ms| *ms > 0.0).or(subtask.duration.filter(|ms| *ms > 0).map(|ms| ms as f64))
}

/// Where a subtask runs, as one text: `taskmanager-id (endpoint)`, falling back to whichever
/// of the two Flink lists (`host` before 1.17).
/// A subtask not deployed yet has none: Flink says `(unassigned)`.
pub fn taskmanager_of(subtask: &dto::VertexSubtask) -> Option<String> {
    fn known(v: &Option<String>) -> Option<&str> {
        v.as_deref().filter(|v| !v.is_empty() && *v != "(unassigned)")
    }
    let address = known(&subtask.endpoint).or(known(&subtask.host));
    match (known(&subtask.taskmanager_id), address) {
        (Some(id), Some(address)) => Some(format!("{id} ({address})")),
        (Some(id), None) => Some(id.to_string()),
        (None, address) => address.map(str::to_string),
    }
}

/// The load of one vertex from its three endpoints (any of which may be missing).
pub fn vertex_load(
    vertex_id: &str,
    parallelism: u32,
    details: Option<&dto::VertexDetails>,
    backpressure: Option<&dto::VertexBackPressure>,
    metrics: &[dto::MetricValue],
) -> VertexLoad {
    let metric = |index: u32, name: &str| {
        let id = format!("{index}.{name}");
        metrics
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.value.as_deref())
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    };
    let ratio = |v: Option<f64>| v.filter(|r| (0.0..=1.0).contains(r));
    let subtasks = (0..parallelism.max(1))
        .map(|index| {
            let io =
                details.and_then(|d| d.subtasks.iter().find(|s| s.subtask == index)).and_then(|s| s.metrics);
            let per_record = |bytes: Option<u64>, records: Option<u64>| match (bytes, records) {
                (Some(b), Some(r)) if r > 0 && b > 0 => Some(b as f64 / r as f64),
                _ => None,
            };
            let bp = backpressure.and_then(|b| b.subtasks.iter().find(|s| s.subtask == index));
            // A young subtask's per-second rates are still averaging in the zeros before it
            // started (see RATE_WINDOW_MS): its cumulative counts over its running time are
            // the better rate until the window has filled.
            let young = details
                .and_then(|d| d.subtasks.iter().find(|s| s.subtask == index))
                .and_then(running_ms)
                .filter(|ms| (1_000.0..RATE_WINDOW_MS).contains(ms));
            let rate = |meter: &str, count: Option<u64>| match (young, count) {
                (Some(ms), Some(count)) => Some(count as f64 * 1000.0 / ms),
                _ => metric(index, meter),
            };
            SubtaskLoad {
                index,
                records_in_per_s: rate("numRecordsInPerSecond", io.and_then(|m| m.read_records)),
                records_out_per_s: rate("numRecordsOutPerSecond", io.and_then(|m| m.write_records)),
                bytes_per_record_in: io.and_then(|m| per_record(m.read_bytes, m.read_records)),
                bytes_per_record_out: io.and_then(|m| per_record(m.write_bytes, m.write_records)),
                busy_ratio: ratio(
                    bp.and_then(|b| b.busy_ratio)
                        .or(metric(index, "busyTimeMsPerSecond").map(|ms| ms / 1000.0)),
                ),
                idle_ratio: ratio(bp.and_then(|b| b.idle_ratio)),
                backpressure_ratio: ratio(
                    bp.and_then(|b| b.ratio)
                        .or(metric(index, "backPressuredTimeMsPerSecond").map(|ms| ms / 1000.0)),
                ),
                out_pool_usage: ratio(
                    metric(index, "Shuffle.Netty.Output.Buffers.outPoolUsage")
                        .or(metric(index, "buffers.outPoolUsage")),
                ),
            }
        })
        .collect();
    let mut taskmanagers = Vec::new();
    for s in details.map_or(&[][..], |d| &d.subtasks[..]) {
        // Indexes come from Flink; a garbled one must not make a huge vector.
        if s.subtask < 65_536 {
            let index = s.subtask as usize;
            if taskmanagers.len() <= index {
                taskmanagers.resize(index + 1, None);
            }
            taskmanagers[index] = taskmanager_of(s);
        }
    }
    VertexLoad { vertex_id: vertex_id.to_string(), subtasks, taskmanagers }
}

/// Merges `/checkpoints` responses by id: a finished entry wins over an in-progress one.
/// Savepoints are left out: they are not part of the periodic schedule. What the reference
/// model replays (`model::replay`), so that the model never sees a DTO.
pub fn merge_history<'a>(
    responses: impl IntoIterator<Item = &'a dto::CheckpointingStatistics>,
) -> Vec<crate::model::replay::ObservedCheckpoint> {
    let mut by_id: std::collections::BTreeMap<u64, crate::model::replay::ObservedCheckpoint> =
        Default::default();
    for response in responses {
        for cp in &response.history {
            let savepoint = cp.is_savepoint == Some(true)
                || cp.checkpoint_type.as_deref().is_some_and(|t| t.contains("SAVEPOINT"));
            let Some(trigger) = cp.trigger_timestamp else { continue };
            if savepoint {
                continue;
            }
            let status = status(cp);
            let duration_ms = match status {
                Some(CheckpointStatus::Failed) => cp
                    .failure_timestamp
                    .map(|f| f.saturating_sub(trigger).max(0) as u64)
                    .or(cp.end_to_end_duration.and_then(|d| u64::try_from(d).ok())),
                Some(CheckpointStatus::Completed) => {
                    cp.end_to_end_duration.and_then(|d| u64::try_from(d).ok())
                }
                None => None,
            };
            let observed = crate::model::replay::ObservedCheckpoint {
                id: cp.id,
                triggered_at: Timestamp(trigger),
                status,
                duration_ms,
                failure: cp.failure_message.as_deref().and_then(crate::observe::FailureReason::from_message),
            };
            match by_id.get(&cp.id) {
                Some(existing) if existing.status.is_some() && observed.status.is_none() => {}
                _ => {
                    by_id.insert(cp.id, observed);
                }
            }
        }
    }
    by_id.into_values().collect()
}

/// Each vertex of `/jobs/:id` with its parallelism: (id, name, parallelism), for the rescale
/// check (a vertex without one is left out).
pub(crate) fn vertex_parallelism(job: &dto::JobDetails) -> Vec<(String, String, u32)> {
    job.vertices
        .iter()
        .filter_map(|v| {
            let p = v.parallelism?.clamp(1, MAX_PARALLELISM);
            Some((v.id.clone(), v.name.clone().unwrap_or_else(|| v.id.clone()), p))
        })
        .collect()
}

/// A rescale of Flink's history (2.3+) as the daemon keeps it: `None` for the initial schedule
/// (no rescale), an ignored one (nothing changed) and one still in progress (no end yet).
pub(crate) fn rescale(d: &dto::RescaleDetails) -> Option<crate::observe::Rescale> {
    use crate::observe::{Rescale, RescaleSource, VertexRescale};
    let outcome = d.terminal_state.clone()?;
    if outcome == "IGNORED" || d.trigger_cause.as_deref() == Some("INITIAL_SCHEDULE") {
        return None;
    }
    let at = Timestamp(d.end.filter(|t| *t > 0)?);
    let vertices = d
        .vertices
        .iter()
        .filter(|(_, v)| v.pre_rescale_parallelism != v.post_rescale_parallelism)
        .map(|(id, v)| VertexRescale {
            vertex: v.job_vertex_name.clone().unwrap_or_else(|| id.clone()),
            before: v.pre_rescale_parallelism,
            after: v.post_rescale_parallelism,
        })
        .collect();
    let id = d.rescale_uuid.as_ref().map(|u| format!("{u}#{}", d.rescale_attempt_id.unwrap_or(1)));
    let restarted_at = d
        .scheduler_states
        .iter()
        .filter(|s| s.state.as_deref() == Some("Restarting"))
        .filter_map(|s| s.enter.filter(|t| *t > 0))
        .max()
        .map(Timestamp);
    Some(Rescale {
        id,
        source: RescaleSource::RescaleHistory,
        started_at: d.start.filter(|t| *t > 0).map(Timestamp),
        restarted_at,
        at,
        cause: d.trigger_cause.clone(),
        outcome: Some(outcome),
        vertices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, &str)]) -> Vec<dto::ConfigEntry> {
        pairs
            .iter()
            .map(|(k, v)| dto::ConfigEntry { key: k.to_string(), value: Some(v.to_string()) })
            .collect()
    }

    const CHECKPOINTS_CONFIG_2_3_0: &str =
        include_str!("../../../tests/fixtures/flink-2.3.0/failover/rest/checkpoints-config.json");

    #[test]
    fn flink_durations_read_as_flink_reads_them() {
        assert_eq!(flink_duration_ms("10 s"), Some(10_000));
        assert_eq!(flink_duration_ms("5min"), Some(300_000));
        assert_eq!(flink_duration_ms("300000"), Some(300_000));
        assert_eq!(flink_duration_ms("2500 ms"), Some(2_500));
        assert_eq!(flink_duration_ms("1 h"), Some(3_600_000));
        assert_eq!(flink_duration_ms("0"), Some(0));
        assert_eq!(flink_duration_ms("soon"), None);
        assert_eq!(flink_duration_ms("PT5M"), None);
    }

    #[test]
    fn both_generations_of_keys_are_read_and_named_with_their_source() {
        let config: dto::CheckpointConfig = serde_json::from_str(CHECKPOINTS_CONFIG_2_3_0).unwrap();
        let job: dto::JobConfig = serde_json::from_str(
            r#"{"execution-config":{"user-config":{"execution.checkpointing.interval-during-backlog":"10 s"}}}"#,
        )
        .unwrap();
        // A 1.x cluster: the old keys.
        let old = entries(&[("state.backend.incremental", "true"), ("state.checkpoints.num-retained", "3")]);
        let c = configuration_of(&config, Some(&job), &[], &old, Some("1.20.5"));
        assert_eq!(c.settings.interval_during_backlog_ms, Some(10_000));
        assert_eq!(c.incremental, Some(true));
        assert_eq!(c.retained_checkpoints, Some(3));
        let named: Vec<(&str, &str, &str)> =
            c.keys_read.iter().map(|k| (k.key.as_str(), k.generation, k.source)).collect();
        assert!(
            named.contains(&(
                "execution.checkpointing.interval-during-backlog",
                "1.x and 2.x",
                "job parameters"
            )),
            "{named:?}"
        );
        assert!(named.contains(&("state.backend.incremental", "1.x", "cluster configuration")), "{named:?}");
        // A 2.x cluster, and the job's own configuration over it.
        let new = entries(&[
            ("execution.checkpointing.incremental", "false"),
            ("execution.checkpointing.num-retained", "5"),
            ("execution.checkpointing.dir", "s3://bucket/checkpoints"),
        ]);
        let own = entries(&[("execution.checkpointing.incremental", "true")]);
        let c = configuration_of(&config, None, &own, &new, Some("2.3.0"));
        assert_eq!(c.settings.interval_during_backlog_ms, None);
        assert_eq!(c.incremental, Some(true));
        assert_eq!(c.retained_checkpoints, Some(5));
        let named: Vec<(&str, &str, &str)> =
            c.keys_read.iter().map(|k| (k.key.as_str(), k.generation, k.source)).collect();
        assert!(
            named.contains(&("execution.checkpointing.incremental", "2.x", "job configuration")),
            "{named:?}"
        );
        assert!(
            named.contains(&("execution.checkpointing.dir", "2.x", "cluster configuration")),
            "{named:?}"
        );
        // Where both generations are set in one place, the 2.x key wins.
        let both = entries(&[
            ("state.backend.incremental", "false"),
            ("execution.checkpointing.incremental", "true"),
        ]);
        assert_eq!(configuration_of(&config, None, &[], &both, None).incremental, Some(true));
    }

    #[test]
    fn merge_prefers_finished_entries() {
        let in_progress: dto::CheckpointingStatistics = serde_json::from_str(
            r#"{"history":[{"className":"in_progress","id":7,"status":"IN_PROGRESS","trigger_timestamp":100}]}"#,
        )
        .unwrap();
        let done: dto::CheckpointingStatistics = serde_json::from_str(
            r#"{"history":[{"className":"failed","id":7,"status":"FAILED","trigger_timestamp":100,"failure_timestamp":4100,"failure_message":"Checkpoint expired before completing."}]}"#,
        )
        .unwrap();
        for order in [[&in_progress, &done], [&done, &in_progress]] {
            let merged = merge_history(order);
            assert_eq!(merged.len(), 1);
            assert_eq!(merged[0].status, Some(crate::observe::CheckpointStatus::Failed));
            assert_eq!(merged[0].duration_ms, Some(4_000));
            assert_eq!(merged[0].failure, Some(crate::observe::FailureReason::CheckpointExpired));
        }
    }

    /// Flink 2.3.0's history and details of a rescale from 2 to 1 by
    /// `PUT /jobs/:id/resource-requirements` (adaptive scheduler), as served live.
    #[test]
    fn a_rescale_of_flink_2_3_history() {
        let history: Vec<dto::RescaleDetails> = serde_json::from_str(r#"[{"rescaleUuid":"60f4ba392742a0616c3ef72c86cc2040","resourceRequirementsUuid":"7a2f4fe8650e991f6da26289b9594977","rescaleAttemptId":1,"vertices":{},"slots":{},"schedulerStates":[],"startTimestampInMillis":1796468364400,"endTimestampInMillis":1796468365644,"terminalState":"COMPLETED","triggerCause":"UPDATE_REQUIREMENT","terminatedReason":"SUCCEEDED"},{"rescaleUuid":"4924763de2759c19645a07fc265bff0c","resourceRequirementsUuid":"e68b8a5759d72b2ed47d47be75e0cfc3","rescaleAttemptId":1,"vertices":{},"slots":{},"schedulerStates":[],"startTimestampInMillis":1796468350931,"endTimestampInMillis":1796468352167,"terminalState":"COMPLETED","triggerCause":"INITIAL_SCHEDULE","terminatedReason":"SUCCEEDED"}]"#).unwrap();
        assert!(rescale(&history[1]).is_none(), "the initial schedule is no rescale");
        let details: dto::RescaleDetails = serde_json::from_str(r#"{"rescaleUuid":"60f4ba392742a0616c3ef72c86cc2040","resourceRequirementsUuid":"7a2f4fe8650e991f6da26289b9594977","rescaleAttemptId":1,"vertices":{"5a44ef70092224af50ee1c30c6ad3cec":{"jobVertexId":"5a44ef70092224af50ee1c30c6ad3cec","jobVertexName":"discarding-sink: Writer","slotSharingGroupId":"4c04c999f659abe85347933ed4a05705","slotSharingGroupName":"default","desiredParallelism":1,"sufficientParallelism":1,"preRescaleParallelism":2,"postRescaleParallelism":1},"857e9877747f27b5e758680f3644828a":{"jobVertexId":"857e9877747f27b5e758680f3644828a","jobVertexName":"stateful-map","slotSharingGroupId":"4c04c999f659abe85347933ed4a05705","slotSharingGroupName":"default","desiredParallelism":1,"sufficientParallelism":1,"preRescaleParallelism":2,"postRescaleParallelism":1}},"slots":{},"schedulerStates":[{"state":"Executing","enterTimestampInMillis":1796468352151,"leaveTimestampInMillis":1796468365436,"durationInMillis":13285,"stringifiedException":null},{"state":"Restarting","enterTimestampInMillis":1796468365436,"leaveTimestampInMillis":1796468365609,"durationInMillis":173,"stringifiedException":null}],"startTimestampInMillis":1796468364400,"endTimestampInMillis":1796468365644,"terminalState":"COMPLETED","triggerCause":"UPDATE_REQUIREMENT","terminatedReason":"SUCCEEDED"}"#).unwrap();
        let r = rescale(&details).unwrap();
        assert_eq!(r.id.as_deref(), Some("60f4ba392742a0616c3ef72c86cc2040#1"));
        assert_eq!((r.started_at, r.at), (Some(Timestamp(1796468364400)), Timestamp(1796468365644)));
        assert_eq!(
            (r.cause.as_deref(), r.outcome.as_deref()),
            (Some("UPDATE_REQUIREMENT"), Some("COMPLETED"))
        );
        assert_eq!(r.parallelism_words(), "discarding-sink: Writer 2 → 1, stateful-map 2 → 1");
        assert_eq!(r.restarted_at, Some(Timestamp(1796468365436)), "the Restarting state's entry");
        assert!(rescale(&history[0]).unwrap().vertices.is_empty(), "the history names no vertex");
    }
}
