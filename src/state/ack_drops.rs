//! Acknowledgements dropped as oversized: Pekko's (Akka's) "Discarding oversized payload" line
//! names no checkpoint, so it is attached to the checkpoint it hurt — the one in progress on its
//! job at that time, else the next one of that job to expire soon after. One function,
//! [`hurt_checkpoint`], for the daemon (`State::apply` at the line's arrival) and `scan-logs`
//! (the lines' timestamps). Pure.

use crate::observe::LogEvent;

/// How long after an oversized payload an expiry is still put down to it, ms, when no checkpoint
/// was known to be in progress at the line (Flink's default checkpoint timeout: an
/// acknowledgement dropped earlier than that cannot hold the checkpoint that expires).
pub(crate) const EXPIRY_WITHIN_MS: i64 = 10 * 60 * 1000;

/// Drops kept per cluster until a checkpoint of their job expires (the daemon).
pub(crate) const PENDING_DROPS: usize = 16;

/// Endpoint → job pairs a cluster remembers (`jobmaster_registered` lines).
pub(crate) const JOBMASTERS: usize = 1_024;

/// Drops remembered per job for its verdict.
pub(crate) const DROPS_PER_JOB: usize = 8;

/// A checkpoint as the correlation sees it: its job, id, trigger time (if known) and end (if it
/// ended), epoch ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window<J> {
    pub(crate) job: J,
    pub(crate) id: u64,
    pub(crate) triggered_ms: Option<i64>,
    pub(crate) ended_ms: Option<i64>,
    /// It ended without completing (expired, declined, its snapshot failed).
    pub(crate) failed: bool,
}

/// The checkpoint an oversized payload dropped at `at_ms` hurt, among `windows`: of `job` when
/// the line's recipient names it, else of any job as long as only one fits.
/// 1. The checkpoint in progress at `at_ms` (triggered at or before it, not ended before it, not
///    completed); the newest if several of one job are; none if several jobs' are.
/// 2. Else the first to fail at or after `at_ms` (within [`EXPIRY_WITHIN_MS`]) whose trigger
///    time is unknown or not after the line: it expired for want of the acknowledgement, or
///    (from FLINK-39738 on) the task's ask for it timed out and the task declined it.
///
/// `None` when nothing fits or two jobs fit alike: better no attachment than a wrong one.
pub(crate) fn hurt_checkpoint<J: Copy + Eq>(
    at_ms: i64,
    job: Option<J>,
    windows: impl IntoIterator<Item = Window<J>>,
) -> Option<(J, u64)> {
    let candidates: Vec<Window<J>> = windows.into_iter().filter(|w| job.is_none_or(|j| w.job == j)).collect();
    // A checkpoint that completed was not hurt: its acknowledgements all arrived.
    let in_progress: Vec<&Window<J>> = candidates
        .iter()
        .filter(|w| {
            w.triggered_ms.is_some_and(|t| t <= at_ms)
                && w.ended_ms.is_none_or(|e| e >= at_ms)
                && (w.failed || w.ended_ms.is_none())
        })
        .collect();
    if !in_progress.is_empty() {
        // Two jobs alike: no guess (not even the next failure).
        return one_job_max_by_key(in_progress.into_iter(), |w| (w.triggered_ms, w.id))
            .map(|w| (w.job, w.id));
    }
    let expiring = candidates.iter().filter(|w| {
        w.failed
            && w.triggered_ms.is_none_or(|t| t <= at_ms)
            && w.ended_ms.is_some_and(|e| e >= at_ms && e - at_ms <= EXPIRY_WITHIN_MS)
    });
    one_job_max_by_key(expiring, |w| std::cmp::Reverse(w.ended_ms)).map(|w| (w.job, w.id))
}

/// The window with the largest key, if all the windows belong to one job (else `None`).
fn one_job_max_by_key<'a, J: Copy + Eq + 'a, K: Ord>(
    windows: impl Iterator<Item = &'a Window<J>>,
    key: impl Fn(&Window<J>) -> K,
) -> Option<&'a Window<J>> {
    let mut best: Option<&Window<J>> = None;
    let mut jobs_seen: Option<J> = None;
    for w in windows {
        match jobs_seen {
            Some(j) if j != w.job => return None,
            _ => jobs_seen = Some(w.job),
        }
        if best.is_none_or(|b| key(w) > key(b)) {
            best = Some(w);
        }
    }
    best
}

/// (payload, frame size) in bytes from Pekko's or Akka's message: "… max allowed size 10485760
/// bytes, actual size of encoded class … was 15859121 bytes." (sent) or "… max allowed size
/// [10485760] bytes, actual size [15859121] bytes." (received).
pub(crate) fn oversized_sizes(text: &str) -> Option<(u64, u64)> {
    let number_after = |needle: &str, from: usize| -> Option<(u64, usize)> {
        let at = from + text.get(from..)?.find(needle)? + needle.len();
        let rest = text[at..].trim_start_matches('[');
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        Some((digits.parse().ok()?, at))
    };
    let (frame, at) = number_after("max allowed size ", 0)?;
    let (payload, _) = number_after(" was ", at).or_else(|| number_after("actual size ", at))?;
    Some((payload, frame))
}

/// The JobMaster endpoint a "sent to" line names, without the actor's `#uid`
/// (`pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_2`), if it is a JobMaster: a payload
/// to a TaskManager or the ResourceManager is no acknowledgement.
pub(crate) fn jobmaster_of(event: &LogEvent) -> Recipient<'_> {
    recipient(event.detail.as_deref())
}

/// Whom a line's recipient (its `detail`: the actor a "sent to" line names, none for a
/// "received" line) is: the one rule for the daemon and `scan-logs`.
pub(crate) fn recipient(detail: Option<&str>) -> Recipient<'_> {
    match detail {
        None => Recipient::Unnamed,
        Some(d) if d.rsplit('/').next().is_some_and(|last| last.starts_with("jobmanager_")) => {
            Recipient::JobMaster(d.split('#').next().unwrap_or(d))
        }
        Some(_) => Recipient::Other,
    }
}

/// Whom an oversized payload was for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recipient<'a> {
    /// A JobMaster at this address: an acknowledgement, most likely.
    JobMaster(&'a str),
    /// A "received" line: the process that logged it received it (the JobManager, from a task).
    Unnamed,
    /// A TaskManager or ResourceManager: no checkpoint's acknowledgement.
    Other,
}

/// An acknowledgement dropped as oversized, attached to the checkpoint it hurt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AckDrop {
    /// The checkpoint it hurt.
    pub(crate) checkpoint_id: u64,
    /// The encoded message's size, bytes.
    pub(crate) payload_bytes: u64,
    /// The frame size it did not fit, bytes.
    pub(crate) frame_bytes: u64,
    /// The file the line was read from (the TaskManager's log).
    pub(crate) file: String,
}

impl AckDrop {
    /// From an `oversized_payload` event attached to `checkpoint_id`.
    pub(crate) fn of(event: &LogEvent, checkpoint_id: u64) -> Option<AckDrop> {
        let text = event.root_cause.as_ref().map_or(event.message.as_str(), |c| c.message.as_str());
        let (payload_bytes, frame_bytes) =
            oversized_sizes(text).or_else(|| oversized_sizes(&event.message))?;
        Some(AckDrop { checkpoint_id, payload_bytes, frame_bytes, file: event.file.clone() })
    }

    /// What the verdict of the checkpoint says.
    pub(crate) fn sentence(&self) -> String {
        format!(
            "the acknowledgement of checkpoint {} was dropped as oversized: {} encoded over the {} frame size \
             (pekko.framesize), so the checkpoint could only expire",
            self.checkpoint_id,
            crate::time::bytes(self.payload_bytes as f64),
            crate::time::bytes(self.frame_bytes as f64)
        )
    }
}

/// The next step when an acknowledgement was dropped as oversized.
pub(crate) const NEXT_STEP: &str = "Shrink what the acknowledgement carries — union list state (make it keyed or \
     plain list state), state inlined below execution.checkpointing.data-inline-threshold — or raise pekko.framesize \
     (akka.framesize before 1.18) past the payload on the JobManager and every TaskManager; from FLINK-39738 on such \
     a checkpoint fails at once instead of expiring.";

#[cfg(test)]
mod tests {
    use super::*;

    fn w(job: u8, id: u64, triggered: Option<i64>, ended: Option<i64>, failed: bool) -> Window<u8> {
        Window { job, id, triggered_ms: triggered, ended_ms: ended, failed }
    }

    #[test]
    fn the_checkpoint_in_progress_on_the_job_is_the_one_hurt() {
        let windows = [
            w(1, 8, Some(0), Some(500), false),
            w(1, 9, Some(1_000), Some(61_000), true),
            w(2, 4, Some(1_000), None, false),
        ];
        assert_eq!(hurt_checkpoint(30_000, Some(1), windows), Some((1, 9)));
        assert_eq!(hurt_checkpoint(30_000, Some(2), windows), Some((2, 4)));
        // Two jobs have one in progress and the line names none: no guess.
        assert_eq!(hurt_checkpoint(30_000, None, windows), None);
        assert_eq!(hurt_checkpoint(30_000, None, [windows[0], windows[1]]), Some((1, 9)));
        // The other job's checkpoint completed: its acknowledgements all arrived.
        let completed = w(2, 4, Some(1_000), Some(40_000), false);
        assert_eq!(hurt_checkpoint(30_000, None, [windows[1], completed]), Some((1, 9)));
        // Ambiguous in progress: not the next failure either.
        let later = w(1, 10, None, Some(70_000), true);
        assert_eq!(hurt_checkpoint(30_000, None, [windows[1], windows[2], later]), None);
    }

    #[test]
    fn without_a_trigger_time_the_next_expiry_soon_after_is_the_one_hurt() {
        let windows = [w(1, 9, None, Some(61_000), true), w(1, 10, None, Some(121_000), true)];
        assert_eq!(hurt_checkpoint(30_000, Some(1), windows), Some((1, 9)));
        // Long before any expiry: nothing.
        assert_eq!(hurt_checkpoint(61_000 - EXPIRY_WITHIN_MS - 1, Some(1), windows), None);
        // A completed checkpoint is never hurt by a drop before it ended.
        assert_eq!(hurt_checkpoint(30_000, Some(1), [w(1, 9, None, Some(31_000), false)]), None);
        // A checkpoint triggered after the line was not hurt by it.
        assert_eq!(hurt_checkpoint(30_000, Some(1), [w(1, 11, Some(40_000), Some(100_000), true)]), None);
    }

    #[test]
    fn sizes_come_from_both_shapes_of_the_message() {
        let sent = "Discarding oversized payload sent to Actor[pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_2#-1027346771]: max allowed size 10485760 bytes, actual size of encoded class org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation was 15859121 bytes.";
        assert_eq!(oversized_sizes(sent), Some((15_859_121, 10_485_760)));
        let received = "Discarding oversized payload received: max allowed size [10485760] bytes, actual size [15859121] bytes.";
        assert_eq!(oversized_sizes(received), Some((15_859_121, 10_485_760)));
        assert_eq!(oversized_sizes("Transient association error (association remains live)"), None);
    }
}
