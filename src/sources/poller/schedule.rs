//! When the poller asks what: the statistics of a large cluster's jobs only when a checkpoint can
//! have come, the loads spread over the rounds, an ended job until its counts settle, a restore
//! with back-off. Pure: rounds and times are arguments.

use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;

/// The alignment shadow's load (vertex rates, busy and backpressure) is re-fetched for a job
/// every this many poll rounds (and on first sight, and after a state change).
pub const LOAD_EVERY_POLLS: u64 = 30;
/// A job's load is fetched at least once in this many rounds however many jobs the cluster
/// runs: the loads of a cluster are spread over the rounds (each costs 3 requests per vertex),
/// as few per round as that allows (see [`load_fetches_per_round`]).
pub const LOAD_REFRESH_WITHIN_ROUNDS: usize = 120;

/// How many jobs have their load fetched in one round: one for up to
/// [`LOAD_REFRESH_WITHIN_ROUNDS`] jobs (a sidecar's job every [`LOAD_EVERY_POLLS`] rounds), more
/// for a cluster with many, so that 1,000 jobs are not 1,000 rounds (2.8 h at 10 s) apart.
pub fn load_fetches_per_round(jobs: usize) -> usize {
    jobs.div_ceil(LOAD_REFRESH_WITHIN_ROUNDS).max(1)
}
/// A job whose subtasks had no TaskManager at a load fetch (still deploying) is fetched again
/// after this many rounds instead of [`LOAD_EVERY_POLLS`], at most [`LOCATION_RETRIES`] times.
pub(super) const LOCATION_RETRY_POLLS: u64 = 2;
pub(super) const LOCATION_RETRIES: u8 = 5;
/// Per-subtask metrics are asked for at most this many subtasks of a vertex.
pub const MAX_LOAD_SUBTASKS: u32 = 32;

/// A job that reached a terminal state is polled until its checkpoint counts stop changing
/// and nothing is in progress, at most this many times: Flink's REST answers from a cache, so
/// the first polls after a cancel may still show the snapshot from before it (the last
/// checkpoints, and the one the cancel failed, come a poll or two later).
pub const MAX_FINAL_POLLS: u8 = 12;

/// How long an ended job's counts must stay the same before they are taken as final: longer
/// than Flink's REST cache keeps an answer (`web.refresh-interval`, 3 s by default), so that
/// two polls of one cached, pre-cancel answer are not taken for settled counts. A live e2e
/// with a 1 s poll lost the last checkpoint that way.
pub const FINAL_SETTLE_MS: u64 = 4_000;

/// Whether the polls of an ended job are over: `previous` are the counts (completed, failed,
/// in progress) of its previous poll in a terminal state, `current` this poll's, and
/// `unchanged_ms` how long the counts have been `current` (0 when they just changed).
pub fn final_polls_done(
    previous: Option<(u64, u64, u64)>,
    current: (u64, u64, u64),
    polls: u8,
    unchanged_ms: u64,
) -> bool {
    polls >= MAX_FINAL_POLLS
        || (current.2 == 0 && previous == Some(current) && unchanged_ms >= FINAL_SETTLE_MS)
}

/// A cluster with more watched jobs than this polls each job's checkpoint statistics only when
/// they can have changed ([`stats_due`]); a smaller one polls every job every round.
pub const ADAPTIVE_ABOVE_JOBS: usize = 1_000;

/// Whatever the schedule says, a job's statistics are polled at least every this many rounds
/// (a savepoint or a manually triggered checkpoint shows within a minute at a 10 s poll; the
/// log tailer reports failures at once either way).
pub const MAX_SKIPPED_ROUNDS: u8 = 5;

/// Whether a job's checkpoint statistics (`/jobs/:id/checkpoints`) are fetched this round, in
/// a cluster with more than [`ADAPTIVE_ABOVE_JOBS`] jobs: always while a checkpoint was in
/// progress, and otherwise once the next checkpoint can have been triggered by the next round
/// (`next_checkpoint_at`, Flink's interval and min-pause after the newest one) or after
/// [`MAX_SKIPPED_ROUNDS`]. A job checkpointing every 60 s polled every 10 s is asked 3 times a
/// minute instead of 6: at 10,000 jobs half of a round's requests (issue 31).
pub fn stats_due(
    next_checkpoint_at: Option<Timestamp>,
    skipped_rounds: u8,
    now: Timestamp,
    poll_interval_ms: u64,
) -> bool {
    match next_checkpoint_at {
        None => true,
        Some(at) => {
            skipped_rounds >= MAX_SKIPPED_ROUNDS || now.millis() + poll_interval_ms as i64 >= at.millis()
        }
    }
}

/// When the next checkpoint can come at the earliest after a poll that saw `history` (newest
/// first, as Flink lists it): `None` while one is in progress or without an interval.
pub(super) fn next_checkpoint_at(
    history: &[dto::CheckpointStatistics],
    settings: &crate::observe::CheckpointSettings,
) -> Option<Timestamp> {
    let interval = settings.interval_ms?;
    if history.iter().any(|cp| convert::status(cp).is_none()) {
        return None;
    }
    let newest = history.iter().max_by_key(|cp| cp.trigger_timestamp.unwrap_or(0))?;
    let triggered = newest.trigger_timestamp?;
    let ended = newest.latest_ack_timestamp.filter(|&t| t > 0).unwrap_or(triggered);
    Some(Timestamp((triggered + interval as i64).max(ended + settings.min_pause_ms as i64)))
}

/// How many deferred checkpoints per job the poller remembers from Flink's history. Beyond
/// this (a first poll of a job whose history holds thousands), the oldest are counted from
/// Flink's counts once it forgets them (unobserved), as before there was a deferral.
pub const MAX_DEFERRED_REMEMBERED: usize = 1024;

/// A restore's subtasks are fetched again after at most this many rounds while not all of
/// them run: Flink's timestamps say when each entered RUNNING, so a later look loses no
/// precision, and a restore of hours costs a few requests per minute, not per poll.
pub(super) const RESTORE_RECHECK_MAX_ROUNDS: u64 = 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_job_is_polled_until_its_counts_settle_with_nothing_in_progress() {
        // The REST cache still answers the snapshot from before the cancel.
        assert!(!final_polls_done(None, (36, 1, 1), 1, 0));
        // The cancel failed the in-progress checkpoint and the last one completed.
        assert!(!final_polls_done(Some((36, 1, 1)), (38, 2, 0), 2, 0));
        assert!(final_polls_done(Some((38, 2, 0)), (38, 2, 0), 3, 5_000));
        // Two polls of one cached answer a second apart are not settled counts: the cache
        // may still hide a checkpoint that completed just before the cancel.
        assert!(!final_polls_done(Some((121, 0, 0)), (121, 0, 0), 2, 1_000));
        assert!(final_polls_done(Some((121, 0, 0)), (121, 0, 0), 5, FINAL_SETTLE_MS));
        // Still in progress by Flink's word: polled again, but not forever.
        assert!(!final_polls_done(Some((38, 2, 1)), (38, 2, 1), 3, 10_000));
        assert!(final_polls_done(Some((38, 2, 1)), (38, 2, 1), MAX_FINAL_POLLS, 0));
    }

    #[test]
    fn a_large_clusters_job_is_polled_when_its_next_checkpoint_can_have_come() {
        let history = |json: &str| -> Vec<dto::CheckpointStatistics> { serde_json::from_str(json).unwrap() };
        let settings = crate::observe::CheckpointSettings {
            interval_ms: Some(60_000),
            min_pause_ms: 0,
            ..Default::default()
        };
        // The newest completed at 101 s, triggered at 100 s: the next comes at 160 s at the
        // earliest.
        let done = history(
            r#"[{"className": "completed", "id": 2, "trigger_timestamp": 100000, "latest_ack_timestamp": 101000},
                {"className": "completed", "id": 1, "trigger_timestamp": 40000, "latest_ack_timestamp": 41000}]"#,
        );
        let next = next_checkpoint_at(&done, &settings);
        assert_eq!(next, Some(Timestamp(160_000)));
        // Rounds every 10 s: skipped at 105..145 s, polled from 150 s (the next round is at 160 s).
        assert!(!stats_due(next, 0, Timestamp(105_000), 10_000));
        assert!(!stats_due(next, 3, Timestamp(145_000), 10_000));
        assert!(stats_due(next, 4, Timestamp(150_000), 10_000));
        // However far the next one is, never more than MAX_SKIPPED_ROUNDS rounds in a row.
        assert!(stats_due(Some(Timestamp(10_000_000)), MAX_SKIPPED_ROUNDS, Timestamp(105_000), 10_000));
        // The min-pause binds when the newest ended late.
        let paused = crate::observe::CheckpointSettings { min_pause_ms: 50_000, ..settings.clone() };
        let slow = history(
            r#"[{"className": "completed", "id": 2, "trigger_timestamp": 100000, "latest_ack_timestamp": 130000}]"#,
        );
        assert_eq!(next_checkpoint_at(&slow, &paused), Some(Timestamp(180_000)));
        // One in progress: polled every round.
        let running = history(
            r#"[{"className": "in_progress", "id": 3, "trigger_timestamp": 160000},
                {"className": "completed", "id": 2, "trigger_timestamp": 100000, "latest_ack_timestamp": 101000}]"#,
        );
        assert_eq!(next_checkpoint_at(&running, &settings), None);
        assert!(stats_due(None, 0, Timestamp(161_000), 10_000));
        // No checkpoint yet, or no interval: every round.
        assert_eq!(next_checkpoint_at(&[], &settings), None);
        let manual = crate::observe::CheckpointSettings { interval_ms: None, ..settings };
        assert_eq!(next_checkpoint_at(&done, &manual), None);
    }

    #[test]
    fn every_jobs_load_is_fetched_within_the_refresh_bound() {
        assert_eq!(load_fetches_per_round(0), 1);
        assert_eq!(load_fetches_per_round(10), 1);
        assert_eq!(load_fetches_per_round(LOAD_REFRESH_WITHIN_ROUNDS), 1);
        assert_eq!(load_fetches_per_round(LOAD_REFRESH_WITHIN_ROUNDS + 1), 2);
        for jobs in [1usize, 119, 121, 1_000, 10_000] {
            let rounds = jobs.div_ceil(load_fetches_per_round(jobs));
            assert!(rounds <= LOAD_REFRESH_WITHIN_ROUNDS, "{jobs} jobs: {rounds} rounds");
        }
        assert_eq!(load_fetches_per_round(1_000), 9);
    }
}
