//! The checkpoint storage's series: per job what its directory holds (bytes, objects, `shared/`,
//! orphans, complete folders against `num-retained`, the newest `_metadata` and the frame size it
//! must stay under, throttled listings); per cluster the rounds' requests, errors, what was cut,
//! the directories it cannot reach and the folders of jobs that no longer run, per base
//! directory. Written only once a storage round ran for the cluster.

use super::sink::{Sink, Value};
use crate::state::ClusterState;

/// Error kinds of the storage's listings (`sources::storage::ListError::kind`).
const STORAGE_ERROR_KINDS: [&str; 6] =
    ["throttled", "not_found", "denied", "timeout", "unsupported", "other"];

/// The storage series of cluster `c`.
pub(super) fn render_storage(out: &mut impl Sink, c: &str, cluster: &ClusterState) {
    let s = &cluster.storage;
    if s.rounds == 0 {
        return;
    }
    let failed: u64 = s.errors.values().sum();
    for (outcome, n) in [("made", s.requests), ("cut", s.requests_cut), ("failed", failed)] {
        out.push(
            family!("checkpoint_sentinel_storage_requests_total"),
            &[("cluster", c), ("outcome", outcome)],
            Value::Number(n as f64),
        );
    }
    for kind in STORAGE_ERROR_KINDS {
        out.push(
            family!("checkpoint_sentinel_storage_errors_total"),
            &[("cluster", c), ("kind", kind)],
            Value::Number(s.errors.get(kind).copied().unwrap_or(0) as f64),
        );
    }
    out.push(
        family!("checkpoint_sentinel_storage_entries_cut_total"),
        &[("cluster", c)],
        Value::Number(s.entries_cut as f64),
    );
    out.push(
        family!("checkpoint_sentinel_storage_unreachable"),
        &[("cluster", c)],
        Value::Number(s.unreachable.len() as f64),
    );
    for (base, b) in &s.bases {
        let labels = [("cluster", c), ("base", base.as_str())];
        out.push(
            family!("flink_checkpoint_storage_abandoned_bytes"),
            &labels,
            Value::Number(b.abandoned_bytes as f64),
        );
        out.push(
            family!("flink_checkpoint_storage_abandoned_jobs"),
            &labels,
            Value::Number(b.abandoned.len() as f64),
        );
    }
    for (job_id, job) in cluster.jobs.iter().filter(|(_, j)| j.listed) {
        let labels = [("cluster", c), ("job_id", job_id.as_str()), ("job_name", job.name.as_str())];
        if job.storage.throttled > 0 {
            out.push(
                family!("flink_checkpoint_storage_throttled_total"),
                &labels,
                Value::Number(job.storage.throttled as f64),
            );
        }
        let Some(l) = job.storage.listing() else { continue };
        let mut gauges = vec![
            (family!("flink_checkpoint_storage_bytes"), l.bytes as f64),
            (family!("flink_checkpoint_storage_shared_bytes"), l.shared_bytes as f64),
            (family!("flink_checkpoint_storage_objects"), l.objects as f64),
            (family!("flink_checkpoint_storage_complete_folders"), f64::from(l.complete_folders)),
            (family!("flink_checkpoint_num_retained"), f64::from(l.num_retained)),
            (family!("flink_checkpoint_frame_size_bytes"), l.framesize_bytes as f64),
        ];
        // With file merging on, what a folder holds alone is not known: no orphan series.
        if !l.file_merging {
            gauges.push((family!("flink_checkpoint_storage_orphaned_bytes"), l.orphaned_bytes as f64));
            gauges.push((family!("flink_checkpoint_storage_orphaned_folders"), l.orphans.len() as f64));
        }
        if let Some((_, bytes)) = l.metadata {
            gauges.push((family!("flink_checkpoint_metadata_bytes"), bytes as f64));
        }
        if let Some(state) = l.reported_state_bytes {
            gauges.push((family!("flink_checkpoint_storage_reported_state_bytes"), state as f64));
        }
        for (family, v) in gauges {
            out.push(family, &labels, Value::Number(v));
        }
    }
}
