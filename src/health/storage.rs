//! What the checkpoint storage says of a job, in words: `lines` for `diagnose`'s "Storage"
//! section (bytes against the state Flink reports, retained folders against `num-retained`,
//! orphans with their age and bytes, folders of jobs that no longer run, `_metadata` and its
//! trend against the frame size, throttled listings, what file merging hides) and `sentence`,
//! the one the page's and the API's answer adds when the storage is where the evidence points.
//! Pure: the listing's time and `now` are arguments.

use crate::observe::JobStorage;
use crate::state::storage::{ClusterStorage, JobStorageState};
use crate::time::bytes as format_bytes;
use crate::time::{Timestamp, human_ms};

fn bytes(b: u64) -> String {
    format_bytes(b as f64)
}

/// The share of the frame size past which the `_metadata` is worth saying (the rule's threshold).
const METADATA_SHARE: f64 = 0.5;

/// A `_metadata` that reaches the frame size within this many checkpoints at its growth is said.
const METADATA_REACH: f64 = 1_000.0;

/// Whether the storage is where the evidence points: orphans, a `_metadata` past half the frame
/// size or growing to it within [`METADATA_REACH`] checkpoints, throttled listings, or `shared/`
/// at three times the state.
pub(crate) fn points_there(s: &JobStorageState) -> bool {
    let Some(l) = s.listing() else { return s.throttled > 0 };
    s.throttled > 0 || !l.orphans.is_empty() || metadata_at_risk(s, l) || shared_outruns(l)
}

/// Checkpoints until the `_metadata` reaches the frame size at its growth (`None`: not growing).
fn checkpoints_to_frame(s: &JobStorageState, l: &JobStorage) -> Option<f64> {
    let (_, b) = l.metadata?;
    let g = s.metadata_growth_per_checkpoint().filter(|g| *g > 0.0)?;
    Some(l.framesize_bytes.saturating_sub(b) as f64 / g)
}

fn metadata_at_risk(s: &JobStorageState, l: &JobStorage) -> bool {
    metadata_share(l).is_some_and(|r| r > METADATA_SHARE)
        || checkpoints_to_frame(s, l).is_some_and(|n| n < METADATA_REACH)
}

fn metadata_share(l: &JobStorage) -> Option<f64> {
    let (_, b) = l.metadata?;
    (l.framesize_bytes > 0).then(|| b as f64 / l.framesize_bytes as f64)
}

fn shared_outruns(l: &JobStorage) -> bool {
    l.reported_state_bytes.is_some_and(|state| l.shared_bytes > 3 * state.max(1))
}

/// One sentence for the answer when the storage is where the evidence points, else `None`.
pub(crate) fn sentence(s: &JobStorageState) -> Option<String> {
    if !points_there(s) {
        return None;
    }
    let mut parts = Vec::new();
    if s.throttled > 0 {
        parts.push(format!("the storage answered {} of the daemon's listings 503 SlowDown", s.throttled));
    }
    if let Some(l) = s.listing() {
        if !l.orphans.is_empty() {
            parts.push(format!(
                "{} holds {} chk-N folder(s) no retained or in-progress checkpoint holds ({})",
                l.dir,
                l.orphans.len(),
                bytes(l.orphaned_bytes)
            ));
        }
        if let (Some((id, b)), Some(r)) = (l.metadata, metadata_share(l))
            && metadata_at_risk(s, l)
        {
            let growth = match (s.metadata_growth_per_checkpoint(), checkpoints_to_frame(s, l)) {
                (Some(g), Some(n)) => {
                    format!(
                        ", growing {} per checkpoint: the frame size in about {n:.0} checkpoints",
                        bytes(g as u64)
                    )
                }
                _ => String::new(),
            };
            parts.push(format!(
                "the _metadata of checkpoint {id} is {}, {:.1}% of the {} frame size{growth}",
                bytes(b),
                r * 100.0,
                bytes(l.framesize_bytes)
            ));
        }
        if shared_outruns(l) {
            parts.push(format!(
                "shared/ holds {} against {} of state Flink reports",
                bytes(l.shared_bytes),
                bytes(l.reported_state_bytes.unwrap_or(0))
            ));
        }
    }
    Some(format!("checkpoint storage: {}", parts.join("; ")))
}

/// `diagnose`'s "Storage" lines for a job (empty when its storage was not listed).
pub(crate) fn lines(s: &JobStorageState, cluster: &ClusterStorage, now: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    // Not listed (not readable from here: the daemon's log said so once, and
    // `checkpoint_sentinel_storage_unreachable` counts it): nothing to say.
    let Some(l) = s.listing() else { return out };
    let state =
        l.reported_state_bytes.map(|b| format!(", Flink reports {} of state", bytes(b))).unwrap_or_default();
    let cut = if l.truncated { " (listing cut at max_entries_per_job: at least)" } else { "" };
    out.push(format!(
        "{}: {} in {} objects, {} under shared/{state}{cut}",
        l.dir,
        bytes(l.bytes),
        l.objects,
        bytes(l.shared_bytes)
    ));
    out.push(format!(
        "{} complete checkpoint folder(s) (with _metadata) of {} retained (num-retained), {} folder(s) in all",
        l.complete_folders,
        l.num_retained,
        l.checkpoints.len()
    ));
    if l.file_merging {
        out.push(
            "file merging is on: checkpoints share physical files, so a folder's bytes are not its own and orphans \
             cannot be told from a listing (not guessed)"
                .to_string(),
        );
    } else if l.orphans.is_empty() {
        out.push("no orphaned chk-N folder".to_string());
    }
    for o in &l.orphans {
        let what = if o.completed { "completed, not deleted" } else { "no _metadata: expired or discarded" };
        out.push(format!(
            "orphan chk-{}: {}, written {} ago ({what})",
            o.id,
            bytes(o.bytes),
            human_ms(o.age_ms)
        ));
    }
    if let Some((id, b)) = l.metadata {
        let growth = s
            .metadata_growth_per_checkpoint()
            .map(|g| {
                format!(
                    ", {} {} per checkpoint over the last {}",
                    if g >= 0.0 { "growing" } else { "shrinking" },
                    bytes(g.abs() as u64),
                    s.metadata.len()
                )
            })
            .unwrap_or_default();
        out.push(format!(
            "_metadata of checkpoint {id}: {} ({:.2}% of the {} frame size, pekko.framesize){growth}",
            bytes(b),
            metadata_share(l).unwrap_or(0.0) * 100.0,
            bytes(l.framesize_bytes)
        ));
    }
    if s.throttled > 0 {
        out.push(format!(
            "{} listing(s) throttled (503 SlowDown or 429) since the daemon started",
            s.throttled
        ));
    }
    for base in
        cluster.bases.values().filter(|b| l.dir.starts_with(b.base.as_str()) && !b.abandoned.is_empty())
    {
        let named: Vec<String> = base
            .abandoned
            .iter()
            .take(3)
            .map(|a| {
                format!(
                    "{} ({}, {}, written {} ago)",
                    a.job_id,
                    a.status.as_deref().unwrap_or("not listed"),
                    bytes(a.bytes),
                    human_ms(a.age_ms)
                )
            })
            .collect();
        out.push(format!(
            "{}: {} folder(s) of jobs that no longer run, {}: {}",
            base.base,
            base.abandoned.len(),
            bytes(base.abandoned_bytes),
            named.join(", ")
        ));
    }
    if let Some((_, at)) = &s.latest
        && now.since(*at) >= 1_000
    {
        out.push(format!("listed {} ago", human_ms(now.since(*at))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{CheckpointFolder, OrphanFolder};

    fn listing(metadata: u64, orphans: Vec<OrphanFolder>) -> JobStorage {
        let orphaned_bytes = orphans.iter().map(|o| o.bytes).sum();
        JobStorage {
            dir: "file:/c/j".into(),
            bytes: 10_000,
            objects: 4,
            checkpoints: vec![CheckpointFolder {
                id: 9,
                metadata_bytes: Some(metadata),
                ..Default::default()
            }],
            complete_folders: 1,
            num_retained: 1,
            metadata: Some((9, metadata)),
            framesize_bytes: 10 << 20,
            orphaned_bytes,
            orphans,
            ..Default::default()
        }
    }

    #[test]
    fn a_quiet_storage_points_nowhere() {
        let mut s = JobStorageState::default();
        s.observe_listing(&listing(4_000, Vec::new()), Timestamp(0));
        assert!(!points_there(&s));
        assert_eq!(sentence(&s), None);
        let lines = lines(&s, &ClusterStorage::default(), Timestamp(5_000));
        assert!(lines.iter().any(|l| l == "no orphaned chk-N folder"), "{lines:?}");
        assert!(lines.iter().any(|l| l.starts_with("_metadata of checkpoint 9: 3.9 KiB")), "{lines:?}");
    }

    #[test]
    fn orphans_throttling_and_a_growing_metadata_are_said() {
        let orphan = OrphanFolder { id: 3, bytes: 2_048, age_ms: 7_200_000, completed: false };
        let mut s = JobStorageState::default();
        s.observe_listing(&listing(4_000, vec![orphan]), Timestamp(0));
        let said = sentence(&s).unwrap();
        assert!(
            said.contains("holds 1 chk-N folder(s) no retained or in-progress checkpoint holds (2 KiB)"),
            "{said}"
        );
        s.throttled = 2;
        assert!(sentence(&s).unwrap().contains("answered 2 of the daemon's listings 503 SlowDown"));
        // The _metadata grows 100 KiB a checkpoint: it reaches 10 MiB in about 100 checkpoints.
        let mut g = JobStorageState::default();
        for id in 0..4u64 {
            let mut l = listing(1_000_000 + id * 102_400, Vec::new());
            l.checkpoints[0].id = 10 + id;
            l.metadata = Some((10 + id, 1_000_000 + id * 102_400));
            g.observe_listing(&l, Timestamp(id as i64));
        }
        let said = sentence(&g).unwrap();
        assert!(
            said.contains("growing 100 KiB per checkpoint: the frame size in about 90 checkpoints"),
            "{said}"
        );
    }
}
