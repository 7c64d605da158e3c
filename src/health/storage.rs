//! What the checkpoint storage says of a job, in words: `lines` for `diagnose`'s "Storage"
//! section (bytes against the state Flink reports, retained folders against `num-retained`,
//! orphans with their age and bytes, folders of jobs that no longer run, `_metadata` and its
//! trend against the frame size, throttled listings, what file merging hides) and `sentence`,
//! the one the page's and the API's answer adds when the storage is where the evidence points.
//! Pure: the listing's time and `now` are arguments.

use crate::observe::JobStorage;
use crate::state::storage::{ClusterStorage, JobStorageState, UploadSpread};
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
/// size or growing to it within [`METADATA_REACH`] checkpoints, throttled listings, `shared/`
/// at three times the state, or every subtask uploading slowly alike ([`slow_storage`]).
pub(crate) fn points_there(s: &JobStorageState) -> bool {
    if s.throttled > 0 || slow_storage(s).is_some() {
        return true;
    }
    s.listing().is_some_and(|l| !l.orphans.is_empty() || metadata_at_risk(s, l) || shared_outruns(l))
}

/// Whether the `_metadata` is where the evidence points (past half the frame size, or growing
/// to it).
pub(crate) fn metadata_points_there(s: &JobStorageState) -> bool {
    s.listing().is_some_and(|l| metadata_at_risk(s, l))
}

/// The newest rated checkpoint's uploads when they point at the storage: every subtask uploaded
/// slowly alike (the slowest within a third of its siblings' median) and the upload was half or
/// more of the checkpoint's time.
pub(crate) fn slow_storage(s: &JobStorageState) -> Option<&UploadSpread> {
    s.upload.as_ref().filter(|u| u.every_subtask() && u.upload_bound())
}

fn rate(bytes_per_s: f64) -> String {
    format!("{}/s", format_bytes(bytes_per_s))
}

/// When one subtask uploaded slowly among fast siblings and the upload was most of the
/// checkpoint's time: a sentence that names it (that subtask or its host, not the storage).
pub(crate) fn slow_subtask(s: &JobStorageState) -> Option<String> {
    let u = s.upload.as_ref().filter(|u| u.one_subtask() && u.upload_bound())?;
    let w = &u.slowest;
    Some(format!(
        "{} #{} uploaded its state at {} in checkpoint {} ({} in {}, {:.0}% of the checkpoint's time) where its \
         siblings' median was {}: that subtask or its host, not the storage",
        w.operator,
        w.index,
        rate(w.rate),
        u.checkpoint_id,
        bytes(w.bytes),
        human_ms(w.async_ms),
        u.async_share * 100.0,
        rate(u.siblings_median.unwrap_or_default())
    ))
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
    if let Some(u) = slow_storage(s) {
        parts.push(format!(
            "every subtask uploaded slowly alike in checkpoint {} ({} rated; the slowest, {} #{}, {}, its \
             siblings' median {}; the upload {:.0}% of the checkpoint's time): the storage's throughput",
            u.checkpoint_id,
            u.rated,
            u.slowest.operator,
            u.slowest.index,
            rate(u.slowest.rate),
            rate(u.siblings_median.unwrap_or_default()),
            u.async_share * 100.0
        ));
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
    use crate::observe::{CheckpointFolder, FinishedCheckpoint, OrphanFolder, SubtaskCheckpoint};

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

    /// Checkpoint `id` of `end_to_end` ms whose subtasks of "window" each persisted 1 MiB in the
    /// given async durations (a failed one: expired, the subtasks that did not acknowledge
    /// without details).
    fn uploaded(id: u64, end_to_end: u64, async_ms: &[u64]) -> FinishedCheckpoint {
        let subtasks = async_ms
            .iter()
            .enumerate()
            .map(|(i, ms)| SubtaskCheckpoint {
                index: i as u32,
                acknowledged: true,
                end_to_end_ms: Some(ms + 50),
                async_ms: Some(*ms),
                checkpointed_bytes: Some(1 << 20),
                ..Default::default()
            })
            .collect();
        FinishedCheckpoint::completed(id, Timestamp(0), end_to_end).operator("v1", "window", subtasks)
    }

    /// Issue 40: the verdict of a slow checkpoint names the storage when every subtask uploaded
    /// slowly alike and the upload was most of the checkpoint; one slow subtask among fast
    /// siblings is that subtask, not the storage; a fast upload in a slow checkpoint is neither.
    #[test]
    fn uploads_tell_the_storage_from_one_subtask() {
        // Every subtask 1 MiB in 9–10 s of a 12 s checkpoint: ~100 KiB/s alike.
        let mut s = JobStorageState::default();
        s.observe_poll(&[uploaded(7, 12_000, &[10_000, 9_000, 9_500, 9_800])]);
        let u = slow_storage(&s).expect("every subtask slow alike");
        assert_eq!((u.checkpoint_id, u.rated, u.slowest.index), (7, 4, 0));
        assert!(points_there(&s));
        assert_eq!(slow_subtask(&s), None);
        assert_eq!(
            sentence(&s).unwrap(),
            "checkpoint storage: every subtask uploaded slowly alike in checkpoint 7 (4 rated; the slowest, \
             window #0, 102 KiB/s, its siblings' median 108 KiB/s; the upload 83% of the checkpoint's time): \
             the storage's throughput"
        );
        // A newer checkpoint where one subtask took 10 s and its siblings 0.5 s: that subtask.
        s.observe_poll(&[uploaded(8, 10_100, &[500, 10_000, 520])]);
        assert!(slow_storage(&s).is_none() && !points_there(&s));
        assert_eq!(sentence(&s), None);
        assert_eq!(
            slow_subtask(&s).unwrap(),
            "window #1 uploaded its state at 102 KiB/s in checkpoint 8 (1 MiB in 10.0 s, 99% of the checkpoint's \
             time) where its siblings' median was 2 MiB/s: that subtask or its host, not the storage"
        );
        // An older checkpoint does not replace the newest one's spread.
        s.observe_poll(&[uploaded(6, 12_000, &[10_000, 9_000])]);
        assert_eq!(s.upload.as_ref().map(|u| u.checkpoint_id), Some(8));
        // Slow alike but the upload a small part of a 60 s expiry: the time went elsewhere.
        let mut e = JobStorageState::default();
        e.observe_poll(&[
            uploaded(9, 60_000, &[1_000, 1_100]).failed("Checkpoint expired before completing.")
        ]);
        let u = e.upload.as_ref().unwrap();
        assert!(u.every_subtask() && !u.completed && !u.upload_bound());
        assert!(!points_there(&e) && slow_subtask(&e).is_none());
        // Uploads under 200 ms rate nothing; a savepoint is not looked at.
        let mut q = JobStorageState::default();
        q.observe_poll(&[
            uploaded(10, 300, &[150, 199]),
            uploaded(11, 12_000, &[10_000, 9_000]).kind(crate::observe::SnapshotKind::Savepoint),
        ]);
        assert_eq!(q.upload, None);
    }
}
