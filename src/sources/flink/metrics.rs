//! Flink's metric names for the evidence, by version, and their answers turned into `observe`
//! values (pure). Names come from Flink's `MetricNames`, `TaskIOMetricGroup`,
//! `NettyShuffleMetricFactory` and `MetricUtils` (1.14 … 2.x); a name a version does not have
//! is simply absent from its answer (`AbstractMetricsHandler` skips unknown names).

use crate::observe::{CollectorCounters, Load, TaskManagerSample};
use crate::sources::flink::dto::{AggregatedMetric, MetricValue};

/// Per-subtask metrics asked for (1.14 has all but hard/soft backpressure; 2.x dropped the
/// legacy `buffers.*` names, so the `Shuffle.Netty.*` ones, present from 1.9, are used).
pub(crate) const SUBTASK_METRICS: [&str; 9] = [
    "busyTimeMsPerSecond",
    "idleTimeMsPerSecond",
    "backPressuredTimeMsPerSecond",
    "hardBackPressuredTimeMsPerSecond",
    "softBackPressuredTimeMsPerSecond",
    "Shuffle.Netty.Input.Buffers.inPoolUsage",
    "Shuffle.Netty.Output.Buffers.outPoolUsage",
    "Shuffle.Netty.Input.Buffers.inputFloatingBuffersUsage",
    "Shuffle.Netty.Input.Buffers.inputExclusiveBuffersUsage",
];

/// TaskManager metrics asked for beside the collectors' (`Status.JVM.GarbageCollector.*`,
/// whose names come from the TaskManager's own list: the JVM names its collectors).
pub(crate) const TASKMANAGER_METRICS: [&str; 7] = [
    "Status.JVM.Memory.Heap.Used",
    "Status.JVM.Memory.Heap.Max",
    "Status.JVM.CPU.Load",
    "Status.Flink.Memory.Managed.Used",
    "Status.Flink.Memory.Managed.Total",
    "Status.Shuffle.Netty.AvailableMemorySegments",
    "Status.Shuffle.Netty.TotalMemorySegments",
];

const GC_PREFIX: &str = "Status.JVM.GarbageCollector.";

/// RocksDB native metrics worth showing (`state.backend.rocksdb.metrics.*`), by their property
/// name, and whether the operator's figure is their sum over its column families (a property of
/// each column family) or their largest value (a property of the whole database or of the
/// block cache the column families share: each reports the same number).
pub(crate) const ROCKSDB_METRICS: [(&str, RocksDbAcross); 5] = [
    ("estimate-pending-compaction-bytes", RocksDbAcross::Sum),
    ("num-running-compactions", RocksDbAcross::Max),
    ("size-all-mem-tables", RocksDbAcross::Sum),
    ("block-cache-usage", RocksDbAcross::Max),
    ("estimate-live-data-size", RocksDbAcross::Sum),
];

/// How a RocksDB property's values of one operator's column families combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RocksDbAcross {
    /// Added up.
    Sum,
    /// The largest.
    Max,
}

/// At most this many RocksDB metric names are asked for per vertex (the five properties of up
/// to eight column families, one per state the operator declares).
pub(crate) const MAX_ROCKSDB_NAMES: usize = 40;

/// The RocksDB property a metric id names, if one of [`ROCKSDB_METRICS`]. Flink registers them
/// per column family, `<operator>.<column family>.rocksdb_<property>` as the REST API lists
/// them (`rocksdb.<property>` is RocksDB's name, its dot turned into an underscore), or
/// `<operator>.rocksdb_<property>` with `column-family-as-variable`.
pub(crate) fn rocksdb_property(id: &str) -> Option<(&'static str, RocksDbAcross)> {
    let last = id.rsplit('.').next()?;
    let property = last.strip_prefix("rocksdb_").or_else(|| {
        // The dotted form, should a version keep RocksDB's own name.
        id.rsplit_once(".rocksdb.").map(|(_, p)| p).or_else(|| id.strip_prefix("rocksdb."))
    })?;
    ROCKSDB_METRICS.iter().find(|(name, _)| *name == property).copied()
}

/// The collectors' counter names in a TaskManager's metric list (Flink 1.19+'s `All` sum left
/// out), at most 12 (four collectors' `Count`, `Time` and, 1.19+, `TimeMsPerSecond`).
pub fn collector_metrics(list: &[MetricValue]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .map(|m| m.id.as_str())
        .filter(|id| {
            id.starts_with(GC_PREFIX)
                && (id.ends_with(".Count") || id.ends_with(".Time") || id.ends_with(".TimeMsPerSecond"))
        })
        .filter(|id| !id.starts_with(&format!("{GC_PREFIX}All.")))
        .map(str::to_string)
        .collect();
    names.sort();
    names.truncate(12);
    names
}

/// The RocksDB metrics in a vertex's metric list ([`rocksdb_property`]).
pub fn rocksdb_metrics(list: &[AggregatedMetric]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .map(|m| m.id.as_str())
        .filter(|id| rocksdb_property(id).is_some())
        .map(str::to_string)
        .collect();
    names.sort();
    names.truncate(MAX_ROCKSDB_NAMES);
    names
}

fn number(value: Option<&str>) -> Option<f64> {
    value?.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

fn share(ms_per_second: Option<f64>) -> Option<f64> {
    ms_per_second.map(|v| (v / 1000.0).clamp(0.0, 1.0))
}

fn usage(v: Option<f64>) -> Option<f64> {
    v.map(|v| v.clamp(0.0, 1.0))
}

/// A [`Load`] from a name → value lookup.
fn load_from(get: impl Fn(&str) -> Option<f64>) -> Load {
    Load {
        busy: share(get(SUBTASK_METRICS[0])),
        idle: share(get(SUBTASK_METRICS[1])),
        backpressured: share(get(SUBTASK_METRICS[2])),
        hard_backpressured: share(get(SUBTASK_METRICS[3])),
        soft_backpressured: share(get(SUBTASK_METRICS[4])),
        input_pool_usage: usage(get(SUBTASK_METRICS[5])),
        output_pool_usage: usage(get(SUBTASK_METRICS[6])),
        input_floating_usage: usage(get(SUBTASK_METRICS[7])),
        input_exclusive_usage: usage(get(SUBTASK_METRICS[8])),
    }
}

/// One subtask's load from `…/subtasks/:i/metrics?get=…` (or `…/vertices/:v/metrics` with
/// `prefix` `"<i>."`).
pub fn subtask_load(values: &[MetricValue], prefix: &str) -> Load {
    load_from(|name| {
        values
            .iter()
            .find(|m| m.id.strip_prefix(prefix) == Some(name))
            .and_then(|m| number(m.value.as_deref()))
    })
}

/// The (max, avg) loads of a vertex from `…/subtasks/metrics?get=…&agg=max,avg`, and the
/// largest value of each RocksDB metric (by its last part, over the chain's operators).
pub fn operator_load(values: &[AggregatedMetric]) -> (Load, Load, Vec<(String, f64)>) {
    let find = |name: &str| values.iter().find(|m| m.id == name);
    let max = load_from(|name| find(name).and_then(|m| m.max).filter(|v| v.is_finite()));
    let avg = load_from(|name| find(name).and_then(|m| m.avg).filter(|v| v.is_finite()));
    // Each column family's largest value over the subtasks, combined over the column families.
    let mut rocksdb: Vec<(String, f64)> = Vec::new();
    for m in values {
        let Some((property, across)) = rocksdb_property(&m.id) else { continue };
        let Some(v) = m.max.filter(|v| v.is_finite()) else { continue };
        match rocksdb.iter_mut().find(|(n, _)| n == property) {
            Some((_, old)) if across == RocksDbAcross::Sum => *old += v,
            Some((_, old)) => *old = old.max(v),
            None => rocksdb.push((property.to_string(), v)),
        }
    }
    rocksdb.sort_by(|a, b| a.0.cmp(&b.0));
    (max, avg, rocksdb)
}

/// A TaskManager's sample from `/taskmanagers/:tm/metrics?get=…`.
pub fn taskmanager_sample(id: &str, values: &[MetricValue]) -> TaskManagerSample {
    let get = |name: &str| values.iter().find(|m| m.id == name).and_then(|m| number(m.value.as_deref()));
    let mut collectors: Vec<CollectorCounters> = Vec::new();
    for m in values {
        let Some(rest) = m.id.strip_prefix(GC_PREFIX) else { continue };
        let Some((name, field)) = rest.rsplit_once('.') else { continue };
        if name == "All" {
            continue;
        }
        let number = number(m.value.as_deref()).filter(|v| *v >= 0.0);
        let value = number.map(|v| v as u64);
        let index = match collectors.iter().position(|c| c.name == name) {
            Some(i) => i,
            None => {
                collectors.push(CollectorCounters { name: name.to_string(), ..Default::default() });
                collectors.len() - 1
            }
        };
        match field {
            "Count" => collectors[index].count = value,
            "Time" => collectors[index].time_ms = value,
            "TimeMsPerSecond" => collectors[index].time_ms_per_second = number,
            _ => {}
        }
    }
    collectors.sort_by(|a, b| a.name.cmp(&b.name));
    TaskManagerSample {
        id: id.to_string(),
        heap_used_bytes: get(TASKMANAGER_METRICS[0]),
        heap_max_bytes: get(TASKMANAGER_METRICS[1]).filter(|v| *v > 0.0),
        collectors,
        cpu_load: get(TASKMANAGER_METRICS[2]).filter(|v| *v >= 0.0).map(|v| v.min(1.0)),
        managed_used_bytes: get(TASKMANAGER_METRICS[3]),
        managed_total_bytes: get(TASKMANAGER_METRICS[4]),
        network_segments_available: get(TASKMANAGER_METRICS[5]),
        network_segments_total: get(TASKMANAGER_METRICS[6]),
    }
}
/// Job-level status metrics by generation: Flink 2.x's name, and the 1.x one it replaced
/// (`fullRestarts` is gone in 2.0, `uptime` and `downtime` deprecated for the `…Time` gauges;
/// `lastCheckpointMetadataSize` is new, FLINK-36679). The newer is read where the job lists it,
/// the older where it does not.
pub(crate) const JOB_STATUS_METRICS: [(&str, Option<&str>); 6] = [
    ("numRestarts", Some("fullRestarts")),
    ("runningTime", Some("uptime")),
    ("restartingTime", Some("downtime")),
    ("lastCheckpointMetadataSize", None),
    ("cancellingTime", None),
    ("failingTime", None),
];

/// The job status metrics to ask for, given the job's metric list (`/jobs/:id/metrics`): per
/// row of [`JOB_STATUS_METRICS`], the newer name when listed, else the older when listed.
pub(crate) fn job_status_names(list: &[MetricValue]) -> Vec<&'static str> {
    let listed = |name: &str| list.iter().any(|m| m.id == name);
    JOB_STATUS_METRICS
        .iter()
        .filter_map(|(new, old)| if listed(new) { Some(*new) } else { old.filter(|o| listed(o)) })
        .collect()
}

pub use crate::observe::JobStatusMetrics;

/// Reads the values of `/jobs/:id/metrics?get=…` asked for by [`job_status_names`]; Flink's
/// `-1` (no value) is none.
pub(crate) fn job_status(values: &[MetricValue]) -> JobStatusMetrics {
    let get = |name: &'static str| -> Option<(u64, &'static str)> {
        let v = values.iter().find(|m| m.id == name)?.value.as_deref()?.trim().parse::<f64>().ok()?;
        (v >= 0.0).then_some((v as u64, name))
    };
    let either = |row: usize| {
        let (new, old) = JOB_STATUS_METRICS[row];
        get(new).or_else(|| old.and_then(get))
    };
    JobStatusMetrics {
        restarts: either(0),
        running_ms: either(1),
        restarting_ms: either(2),
        last_metadata_bytes: get("lastCheckpointMetadataSize").map(|(v, _)| v),
        cancelling_ms: either(4),
        failing_ms: either(5),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(path: &str) -> Vec<MetricValue> {
        let text =
            std::fs::read_to_string(format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn the_2_x_names_are_read_where_the_job_lists_them_and_the_old_ones_elsewhere() {
        let v2 = list("flink-2.3.0/backpressure-debuglog/rest/job-metrics-list.json");
        assert_eq!(
            job_status_names(&v2),
            [
                "numRestarts",
                "runningTime",
                "restartingTime",
                "lastCheckpointMetadataSize",
                "cancellingTime",
                "failingTime"
            ]
        );
        let v1_20 = list("flink-1.20.5/backpressure-debuglog/rest/job-metrics-list.json");
        assert_eq!(
            job_status_names(&v1_20),
            ["numRestarts", "runningTime", "restartingTime", "cancellingTime", "failingTime"]
        );
        let v1_14 = list("flink-1.14.6/backpressure-debuglog/rest/job-metrics-list.json");
        assert_eq!(job_status_names(&v1_14), ["numRestarts", "uptime", "restartingTime"]);
        // A list with the old names only.
        let old: Vec<MetricValue> = ["fullRestarts", "uptime", "downtime"]
            .iter()
            .map(|id| MetricValue { id: id.to_string(), value: None })
            .collect();
        assert_eq!(job_status_names(&old), ["fullRestarts", "uptime", "downtime"]);
    }

    #[test]
    fn the_values_carry_the_name_they_were_read_under() {
        let values = list("flink-2.3.0/healthy/rest/job-metrics-values.json");
        let m = job_status(&values);
        assert_eq!(m.restarts, Some((0, "numRestarts")));
        assert_eq!(m.restarting_ms, Some((0, "restartingTime")));
        assert_eq!(m.last_metadata_bytes, Some(3820));
        assert_eq!(m.failing_ms, Some((0, "failingTime")));
        let old = [
            MetricValue { id: "fullRestarts".into(), value: Some("2".into()) },
            MetricValue { id: "downtime".into(), value: Some("-1".into()) },
        ];
        let m = job_status(&old);
        assert_eq!(m.restarts, Some((2, "fullRestarts")));
        assert_eq!(m.restarting_ms, None);
    }
}
