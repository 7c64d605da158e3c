//! Flink's checkpoint trace spans as the Slf4j trace reporter logs them: one `Checkpoint` span
//! per completed or failed checkpoint (Flink 1.19+), parsed into a [`CheckpointSpan`].
//!
//! Pure: a line in, an observation out. The reporter
//! (`traces.reporter.slf4j.factory.class: org.apache.flink.traces.slf4j.Slf4jTraceReporterFactory`)
//! writes `Reported span: {}` at INFO with `SimpleSpan.toString()`:
//!
//! ```text
//! … INFO  org.apache.flink.traces.slf4j.Slf4jTraceReporter [] - Reported span: SimpleSpan{scope=…CheckpointStatsTracker, name=Checkpoint, startTsMillis=…, endTsMillis=…, attributes={jobId=…, checkpointId=3, checkpointStatus=FAILED, fullSize=265, checkpointedSize=265}}
//! ```
//!
//! What each version writes (captured on real Flink, `tests/fixtures/traces/`): 1.20.5 only
//! `jobId`, `checkpointId`, `checkpointStatus`, `fullSize`, `checkpointedSize`; 2.3.0 also
//! `checkpointType` (`Checkpoint`, `Savepoint`, …), `isUnaligned`, `max…`/`sum…` over the
//! subtasks of the start delay, alignment, sync and async durations and of the processed and
//! persisted bytes, `metadataSize`, the reporter's `<job_id>`/`<job_name>`/`<host>` variables
//! and `children=[…]` (child spans per task or subtask at the finer
//! `traces.checkpoint.span-detail-level`s; only the checkpoint's own attributes are read).
//! The span starts at the trigger time and ends at the latest acknowledgement (`-1` for a
//! failed checkpoint no subtask acknowledged, e.g. one aborted at cancel: no end then).
//! `JobInitialization` spans (a job's start or restore) are not checkpoints and are left out.

use super::parse::is_record_start;
use crate::observe::{CheckpointSpan, CheckpointStatus, SnapshotKind};
use crate::time::Timestamp;

/// What every span line of the Slf4j trace reporter contains.
pub const SPAN_MARKER: &str = "Reported span: SimpleSpan{";

/// The longest attribute text read (the checkpoint's own attributes are about 1 KiB in 2.3.0;
/// `children=[…]` at the per-subtask detail level can be far longer and is not read).
const MAX_ATTRIBUTES: usize = 16 * 1024;

/// The checkpoint span a log line reports, if it is one. Any other line (a `JobInitialization`
/// span, a line cut short, a span without a job or checkpoint id) is `None`.
pub fn parse_line(line: &[u8]) -> Option<CheckpointSpan> {
    let at = memchr::memmem::find(line, SPAN_MARKER.as_bytes())?;
    let text = std::str::from_utf8(&line[at + SPAN_MARKER.len()..]).ok()?;
    let logged_at = std::str::from_utf8(&line[..at]).ok().and_then(line_timestamp);
    parse_span(text, logged_at)
}

/// `2026-12-01 18:20:33,137` from the start of a log4j line.
fn line_timestamp(prefix: &str) -> Option<String> {
    is_record_start(prefix.as_bytes()).then(|| prefix[..23].to_string())
}

/// Parses the text after `SimpleSpan{`.
fn parse_span(text: &str, logged_at: Option<String>) -> Option<CheckpointSpan> {
    let head_end = text.find("attributes={")?;
    let head = &text[..head_end];
    if field(head, "name")? != "Checkpoint" {
        return None;
    }
    let start: i64 = field(head, "startTsMillis")?.parse().ok()?;
    let end: i64 = field(head, "endTsMillis")?.parse().ok()?;
    let body_start = head_end + "attributes={".len();
    let rest = &text[body_start..];
    // The checkpoint's own attributes end where its children begin (2.x) or at the span's end.
    let body_end = rest.find("}, children=[").or_else(|| rest.trim_end().strip_suffix("}}").map(str::len))?;
    let body = &rest[..body_end.min(MAX_ATTRIBUTES)];
    let attrs = attributes(body);
    let get = |key: &str| attrs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let num = |key: &str| get(key).and_then(|v| v.parse::<i64>().ok()).and_then(|v| u64::try_from(v).ok());
    let job_id = get("jobId").or_else(|| get("<job_id>"))?;
    if job_id.len() != 32 || !job_id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let status = match get("checkpointStatus")? {
        "COMPLETED" => CheckpointStatus::Completed,
        "FAILED" => CheckpointStatus::Failed,
        _ => return None,
    };
    let kind = get("checkpointType").map(|t| {
        if t.contains("Savepoint") {
            SnapshotKind::Savepoint
        } else if get("isUnaligned") == Some("true") {
            SnapshotKind::UnalignedCheckpoint
        } else {
            SnapshotKind::Checkpoint
        }
    });
    Some(CheckpointSpan {
        cluster: String::new(),
        job_id: job_id.to_ascii_lowercase(),
        id: num("checkpointId")?,
        status,
        kind,
        triggered_at: Timestamp(start),
        finished_at: (end >= start).then_some(Timestamp(end)),
        checkpointed_bytes: num("checkpointedSize"),
        full_state_bytes: num("fullSize"),
        processed_bytes: num("sumProcessedDataBytes"),
        persisted_bytes: num("sumPersistedDataBytes"),
        max_phases_ms: [
            num("maxCheckpointStartDelayMs"),
            num("maxAlignmentDurationMs"),
            num("maxSyncCheckpointDurationMs"),
            num("maxAsyncCheckpointDurationMs"),
        ],
        logged_at,
    })
}

/// The value of `key=` in the span's head (`scope=…, name=…, startTsMillis=…, endTsMillis=…, `).
fn field<'a>(head: &'a str, key: &str) -> Option<&'a str> {
    head.split(", ").find_map(|part| part.strip_prefix(key)?.strip_prefix('='))
}

/// `k=v, k=v, …` as pairs. A value may itself hold `, ` (a job name): a part that does not
/// start with a key (`[A-Za-z0-9_.<>-]+=`) belongs to the value before it.
fn attributes(body: &str) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    let mut offset = 0;
    for part in body.split(", ") {
        let key_len = part.find('=').filter(|&i| {
            i > 0 && part[..i].bytes().all(|b| b.is_ascii_alphanumeric() || b"_.<>-".contains(&b))
        });
        match (key_len, out.last_mut()) {
            (Some(i), _) => out.push((&part[..i], &part[i + 1..])),
            (None, Some(last)) => {
                // Widen the previous value to reach over this part.
                let value_start = last.1.as_ptr() as usize - body.as_ptr() as usize;
                last.1 = &body[value_start..offset + part.len()];
            }
            (None, None) => {}
        }
        offset += part.len() + 2;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_20: &str = "2026-12-01 18:20:34,934 INFO  org.apache.flink.traces.slf4j.Slf4jTraceReporter             [] - Reported span: SimpleSpan{scope=org.apache.flink.runtime.checkpoint.CheckpointStatsTracker, name=Checkpoint, startTsMillis=1796149234848, endTsMillis=1796149234882, attributes={jobId=8f3019ae5de0c0be280d6fe281f578a2, checkpointId=3, checkpointStatus=FAILED, fullSize=265, checkpointedSize=265}}";

    #[test]
    fn a_1_20_span_has_ids_times_status_and_sizes_only() {
        let s = parse_line(V1_20.as_bytes()).expect("a checkpoint span");
        assert_eq!(s.job_id, "8f3019ae5de0c0be280d6fe281f578a2");
        assert_eq!((s.id, s.status, s.kind), (3, CheckpointStatus::Failed, None));
        assert_eq!(
            (s.triggered_at, s.finished_at),
            (Timestamp(1796149234848), Some(Timestamp(1796149234882)))
        );
        assert_eq!((s.checkpointed_bytes, s.full_state_bytes), (Some(265), Some(265)));
        assert_eq!(s.max_phases_ms, [None; 4]);
        assert_eq!(s.logged_at.as_deref(), Some("2026-12-01 18:20:34,934"));
    }

    #[test]
    fn a_job_name_with_commas_and_equals_signs_does_not_shift_the_attributes() {
        let line = "Reported span: SimpleSpan{scope=x, name=Checkpoint, startTsMillis=10, endTsMillis=25, attributes={<job_name>=a, b=c, d, checkpointId=7, checkpointStatus=COMPLETED, jobId=8F3019AE5DE0C0BE280D6FE281F578A2, checkpointType=Savepoint, maxAlignmentDurationMs=4}, children=[SimpleSpan{scope=y, name=Checkpoint_Task, attributes={checkpointId=99}}]}";
        let s = parse_line(line.as_bytes()).expect("a checkpoint span");
        assert_eq!((s.id, s.kind), (7, Some(SnapshotKind::Savepoint)));
        assert_eq!(s.job_id, "8f3019ae5de0c0be280d6fe281f578a2");
        assert_eq!(s.max_phases_ms[1], Some(4));
        assert_eq!(attributes("<job_name>=a, b=c, d, x=1")[0], ("<job_name>", "a"));
        assert_eq!(attributes("<job_name>=a, d, x=1")[0], ("<job_name>", "a, d"));
    }

    #[test]
    fn other_spans_and_cut_lines_are_not_checkpoints() {
        let init = V1_20.replace("name=Checkpoint", "name=JobInitialization");
        assert!(parse_line(init.as_bytes()).is_none());
        assert!(parse_line(&V1_20.as_bytes()[..V1_20.len() - 40]).is_none());
        assert!(parse_line(V1_20.replace("checkpointId=3, ", "").as_bytes()).is_none());
        assert!(parse_line(b"2026-12-01 INFO Completed checkpoint 3 for job x").is_none());
    }
}
