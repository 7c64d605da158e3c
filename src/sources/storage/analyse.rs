//! Pure: what one job's listing says, as a function of (listing, what Flink reports of the job's
//! checkpoints, now): bytes and objects by area, the `chk-N` folders and their `_metadata`, which
//! folders no retained or in-progress checkpoint holds (orphans), and Flink paths turned into
//! the daemon's (the cluster's `storage_paths` mapping, the job and base directories).

use crate::observe::{AbandonedJob, CheckpointFolder, JobStorage, OrphanFolder};
use crate::time::Timestamp;

/// One object under a job's directory.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    /// Its path below the job's directory (`chk-7/_metadata`, `shared/abc`).
    pub(crate) path: String,
    /// Its size, bytes.
    pub(crate) size: u64,
    /// When it was last written.
    pub(crate) modified: Timestamp,
}

/// What Flink reports of a job's checkpoints, as the analysis needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct JobFacts {
    /// Flink's job id.
    pub(crate) job_id: String,
    /// Its checkpoint directory as Flink names it (`<base>/<job id>`).
    pub(crate) dir: String,
    /// Completed checkpoints Flink retains (`num-retained`).
    pub(crate) num_retained: u32,
    /// The newest completed checkpoint's id, when known.
    pub(crate) newest_completed: Option<u64>,
    /// Checkpoints in progress at the last poll.
    pub(crate) in_progress: Vec<u64>,
    /// The full state size Flink reports for the newest completed checkpoint.
    pub(crate) reported_state_bytes: Option<u64>,
    /// Whether file merging is on.
    pub(crate) file_merging: bool,
    /// The RPC frame size, bytes.
    pub(crate) framesize_bytes: u64,
    /// A folder written within this many ms is never an orphan (Flink deletes subsumed
    /// checkpoints asynchronously; a checkpoint may start between the poll and the listing).
    pub(crate) grace_ms: u64,
}

/// The analysis of one job's listing (`truncated`: it stopped at its bound).
pub(crate) fn analyse(entries: &[Entry], truncated: bool, facts: &JobFacts, now: Timestamp) -> JobStorage {
    let mut out = JobStorage {
        job_id: facts.job_id.clone(),
        dir: facts.dir.clone(),
        truncated,
        num_retained: facts.num_retained,
        reported_state_bytes: facts.reported_state_bytes,
        file_merging: facts.file_merging,
        framesize_bytes: facts.framesize_bytes,
        ..JobStorage::default()
    };
    let mut folders: std::collections::BTreeMap<u64, CheckpointFolder> = Default::default();
    for e in entries {
        out.bytes += e.size;
        out.objects += 1;
        let (top, rest) = e.path.split_once('/').unwrap_or((e.path.as_str(), ""));
        if top == "shared" {
            out.shared_bytes += e.size;
        } else if top == "taskowned" {
            out.taskowned_bytes += e.size;
        } else if let Some(id) = top.strip_prefix("chk-").and_then(|n| n.parse::<u64>().ok()) {
            let f = folders.entry(id).or_insert_with(|| CheckpointFolder { id, ..Default::default() });
            f.bytes += e.size;
            f.objects += 1;
            f.modified = f.modified.max(e.modified);
            if rest == "_metadata" {
                f.metadata_bytes = Some(e.size);
            }
        }
    }
    out.checkpoints = folders.into_values().collect();
    out.complete_folders = out.checkpoints.iter().filter(|f| f.metadata_bytes.is_some()).count() as u32;
    out.metadata = out.checkpoints.iter().rev().find_map(|f| Some((f.id, f.metadata_bytes?)));
    if facts.file_merging {
        // Checkpoints share physical files: a folder's bytes are not its own, and a folder no
        // checkpoint holds may still hold files a retained one reads. Not told.
        return out;
    }
    let retained = retained_ids(&out.checkpoints, facts);
    let newest_known = facts.newest_completed.into_iter().chain(facts.in_progress.iter().copied()).max();
    for f in &out.checkpoints {
        let age_ms = now.since(f.modified);
        let held = retained.contains(&f.id) || facts.in_progress.contains(&f.id);
        // A folder newer than anything the poll saw is a checkpoint that started since.
        let newer = newest_known.is_none_or(|n| f.id > n);
        if held || newer || age_ms < facts.grace_ms {
            continue;
        }
        out.orphaned_bytes += f.bytes;
        out.orphans.push(OrphanFolder {
            id: f.id,
            bytes: f.bytes,
            age_ms,
            completed: f.metadata_bytes.is_some(),
        });
    }
    out
}

/// The checkpoints Flink retains: the newest `num_retained` complete folders (with `_metadata`)
/// up to the newest completed checkpoint the poll saw.
fn retained_ids(folders: &[CheckpointFolder], facts: &JobFacts) -> Vec<u64> {
    let Some(newest) = facts.newest_completed else { return Vec::new() };
    folders
        .iter()
        .rev()
        .filter(|f| f.metadata_bytes.is_some() && f.id <= newest)
        .take(facts.num_retained.max(1) as usize)
        .map(|f| f.id)
        .collect()
}

/// A job folder's listing summed up as the folder of a job that no longer runs.
pub(crate) fn abandoned(
    job_id: &str,
    status: Option<&str>,
    entries: &[Entry],
    now: Timestamp,
) -> AbandonedJob {
    let newest = entries.iter().map(|e| e.modified).max().unwrap_or(now);
    AbandonedJob {
        job_id: job_id.to_string(),
        status: status.map(str::to_string),
        bytes: entries.iter().map(|e| e.size).sum(),
        objects: entries.len() as u64,
        age_ms: now.since(newest),
    }
}

/// A path as Flink names it, rewritten by the longest matching `(flink, local)` prefix.
pub(crate) fn mapped(path: &str, mapping: &[(String, String)]) -> String {
    let best = mapping
        .iter()
        .filter(|(flink, _)| {
            let flink = flink.trim_end_matches('/');
            path == flink || path.strip_prefix(flink).is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|(flink, _)| flink.trim_end_matches('/').len());
    match best {
        Some((flink, local)) => {
            format!("{}{}", local.trim_end_matches('/'), &path[flink.trim_end_matches('/').len()..])
        }
        None => path.to_string(),
    }
}

/// The job directory of a completed checkpoint's path (`…/<job id>/chk-7` → `…/<job id>`).
pub(crate) fn job_dir_of(checkpoint_path: &str) -> Option<&str> {
    let trimmed = checkpoint_path.trim_end_matches('/');
    let (dir, last) = trimmed.rsplit_once('/')?;
    last.starts_with("chk-").then_some(dir)
}

/// The parent of a directory (`…/base/<job id>` → `…/base`).
pub(crate) fn parent_of(dir: &str) -> Option<&str> {
    let (parent, _) = dir.trim_end_matches('/').rsplit_once('/')?;
    (!parent.is_empty() && !parent.ends_with(':') && !parent.ends_with(":/")).then_some(parent)
}

/// Whether a folder name is a Flink job id (32 hex digits).
pub(crate) fn is_job_id(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(path: &str, size: u64, at: i64) -> Entry {
        Entry { path: path.into(), size, modified: Timestamp(at) }
    }

    fn facts() -> JobFacts {
        JobFacts {
            job_id: "j".into(),
            dir: "file:/c/j".into(),
            num_retained: 1,
            newest_completed: Some(12),
            in_progress: vec![13],
            reported_state_bytes: Some(500),
            file_merging: false,
            framesize_bytes: 10_485_760,
            grace_ms: 60_000,
        }
    }

    #[test]
    fn orphans_are_folders_no_checkpoint_holds() {
        let entries = [
            e("chk-3/x", 1_000, 0),      // an expired checkpoint's leftover: no _metadata
            e("chk-9/_metadata", 40, 0), // completed, subsumed, never deleted
            e("chk-9/y", 300, 0),
            e("chk-12/_metadata", 50, 990_000), // retained
            e("chk-13/z", 10, 999_000),         // in progress
            e("chk-14/z", 10, 999_500),         // started after the poll
            e("shared/a", 2_000, 0),
            e("taskowned/b", 7, 0),
        ];
        let s = analyse(&entries, false, &facts(), Timestamp(1_000_000));
        assert_eq!((s.bytes, s.objects, s.shared_bytes, s.taskowned_bytes), (3_417, 8, 2_000, 7));
        assert_eq!(s.complete_folders, 2);
        assert_eq!(s.metadata, Some((12, 50)));
        let ids: Vec<_> = s.orphans.iter().map(|o| (o.id, o.bytes, o.completed)).collect();
        assert_eq!(ids, vec![(3, 1_000, false), (9, 340, true)]);
        assert_eq!(s.orphaned_bytes, 1_340);
        assert_eq!(s.orphans[0].age_ms, 1_000_000);
    }

    #[test]
    fn young_folders_and_retained_ones_are_not_orphans() {
        let mut f = facts();
        f.num_retained = 2;
        let entries = [e("chk-9/_metadata", 40, 0), e("chk-12/_metadata", 50, 0), e("chk-11/x", 5, 990_000)];
        let s = analyse(&entries, false, &f, Timestamp(1_000_000));
        assert!(s.orphans.is_empty(), "{:?}", s.orphans);
    }

    #[test]
    fn file_merging_tells_no_orphans() {
        let mut f = facts();
        f.file_merging = true;
        let s = analyse(&[e("chk-3/x", 1_000, 0)], false, &f, Timestamp(1_000_000));
        assert!(s.orphans.is_empty());
        assert_eq!(s.bytes, 1_000);
    }

    #[test]
    fn paths_map_by_the_longest_prefix() {
        let m = vec![
            ("s3://b/ckpt".to_string(), "/mnt/ckpt".to_string()),
            ("s3://b/ckpt/team".to_string(), "/mnt/team/".to_string()),
        ];
        assert_eq!(mapped("s3://b/ckpt/j/chk-1", &m), "/mnt/ckpt/j/chk-1");
        assert_eq!(mapped("s3://b/ckpt/team/j", &m), "/mnt/team/j");
        assert_eq!(mapped("s3://b/ckptx/j", &m), "s3://b/ckptx/j");
        assert_eq!(job_dir_of("file:/c/abc/chk-7"), Some("file:/c/abc"));
        assert_eq!(job_dir_of("file:/c/abc/savepoint-1"), None);
        assert_eq!(parent_of("file:/c/abc"), Some("file:/c"));
        assert_eq!(parent_of("s3://b"), None);
        assert!(is_job_id("0123456789abcdef0123456789abcdef"));
    }
}
