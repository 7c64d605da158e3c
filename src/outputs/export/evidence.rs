//! A cluster's evidence series: per TaskManager (heap, GC share, CPU, memory, culprits hosted)
//! and per operator chain (busy, backpressured, input buffers: max over subtasks; RocksDB's
//! compaction, memtables, block cache and live data where the job turns them on; state skew).
//! Bounded: per TaskManager and per operator, never per subtask.

use super::sink::{Sink, Value};
use crate::state::ClusterState;
use crate::state::evidence::taskmanager_id;
use crate::time::Timestamp;

/// The family of a RocksDB property of `sources::flink::metrics::ROCKSDB_METRICS`.
fn rocksdb_family(property: &str) -> Option<usize> {
    Some(match property {
        "estimate-pending-compaction-bytes" => family!("flink_operator_rocksdb_pending_compaction_bytes"),
        "num-running-compactions" => family!("flink_operator_rocksdb_running_compactions"),
        "size-all-mem-tables" => family!("flink_operator_rocksdb_memtable_bytes"),
        "block-cache-usage" => family!("flink_operator_rocksdb_block_cache_usage_bytes"),
        "estimate-live-data-size" => family!("flink_operator_rocksdb_live_data_bytes"),
        _ => return None,
    })
}

/// The evidence series of cluster `c`.
pub(super) fn render_evidence(out: &mut impl Sink, c: &str, cluster: &ClusterState) {
    let e = &cluster.evidence;
    let requests = [("made", e.requests), ("cut", e.requests_cut), ("failed", e.errors)];
    for (outcome, n) in requests {
        out.push(
            family!("checkpoint_sentinel_evidence_requests_total"),
            &[("cluster", c), ("outcome", outcome)],
            Value::Number(n as f64),
        );
    }
    out.push(
        family!("checkpoint_sentinel_evidence_series_cut_total"),
        &[("cluster", c)],
        Value::Number(e.series_cut as f64),
    );
    let culprits = crate::rules::subjects::taskmanagers(cluster);
    for (tm, ring) in &e.taskmanagers {
        let Some(last) = ring.back() else { continue };
        let labels = [("cluster", c), ("taskmanager", tm.as_str())];
        let s = &last.value;
        let gauges = [
            (
                family!("flink_taskmanager_gc_time_ratio"),
                e.gc_share(tm, Timestamp(i64::MAX)).map(|g| g.ratio),
            ),
            (family!("flink_taskmanager_heap_used_bytes"), s.heap_used_bytes),
            (family!("flink_taskmanager_heap_max_bytes"), s.heap_max_bytes),
            (family!("flink_taskmanager_cpu_load"), s.cpu_load),
            (family!("flink_taskmanager_managed_memory_used_bytes"), s.managed_used_bytes),
            (family!("flink_taskmanager_managed_memory_total_bytes"), s.managed_total_bytes),
            (family!("flink_taskmanager_network_segments_available"), s.network_segments_available),
            (family!("flink_taskmanager_network_segments_capacity"), s.network_segments_total),
        ];
        for (family, value) in gauges {
            if let Some(v) = value {
                out.push(family, &labels, Value::Number(v));
            }
        }
        let hosted: u64 = culprits
            .iter()
            .filter(|(location, _)| taskmanager_id(location) == tm)
            .map(|(_, f)| f.slowest_subtasks + f.holdouts)
            .sum();
        out.push(family!("flink_taskmanager_checkpoint_culprits"), &labels, Value::Number(hosted as f64));
    }
    for ((job_id, operator), ring) in &e.operators {
        let Some(job) = cluster.jobs.get(job_id).filter(|j| j.listed) else { continue };
        let Some(last) = ring.back() else { continue };
        let op = &last.value;
        let labels = [
            ("cluster", c),
            ("job_id", job_id.as_str()),
            ("job_name", job.name.as_str()),
            ("vertex_id", op.vertex_id.as_str()),
            ("operator", operator.as_str()),
        ];
        let gauges = [
            (family!("flink_operator_busy_ratio"), op.max.busy),
            (family!("flink_operator_backpressured_ratio"), op.max.backpressured),
            (family!("flink_operator_input_pool_usage"), op.max.input_pool_usage),
        ];
        for (family, value) in gauges {
            if let Some(v) = value {
                out.push(family, &labels, Value::Number(v));
            }
        }
        for (property, value) in &op.rocksdb {
            if let Some(family) = rocksdb_family(property) {
                out.push(family, &labels, Value::Number(*value));
            }
        }
    }
    for (job_id, skew) in &e.skew {
        let Some(job) = cluster.jobs.get(job_id).filter(|j| j.listed) else { continue };
        for s in &skew.operators {
            let labels = [
                ("cluster", c),
                ("job_id", job_id.as_str()),
                ("job_name", job.name.as_str()),
                ("operator", s.operator.as_str()),
            ];
            out.push(family!("flink_checkpoint_state_skew_ratio"), &labels, Value::Number(s.ratio));
            out.push(
                family!("flink_checkpoint_state_skew_hot_subtask"),
                &labels,
                Value::Number(f64::from(s.hot_subtask)),
            );
            out.push(
                family!("flink_checkpoint_state_skew_max_bytes"),
                &labels,
                Value::Number(s.max_bytes as f64),
            );
        }
    }
}
