//! A job's restores: each counted once (told apart by Flink's restore timestamp), timed from
//! the restore to the moment its last subtask was RUNNING again, with what it restored from.
//!
//! Pure like the rest of `state`. Why these end points (docs/metrics.md,
//! `flink_job_last_restore_duration_seconds`): the job's own status says little about a
//! restore. On a failover the job goes RESTARTING → RUNNING (it never passes INITIALIZING
//! again; its `timestamps.INITIALIZING` stays the submission time), and on a start from a
//! savepoint it is INITIALIZING only until the JobMaster runs, before any task is deployed.
//! In both cases the job is RUNNING within milliseconds of the JobManager restoring the
//! checkpoint (`latest.restored.restore_timestamp`: 0–16 ms apart in the 1.14.6, 1.20.5 and
//! 2.3.0 captures), while the state itself is restored by each task in its own INITIALIZING
//! state: a task processes records, and a checkpoint can complete, only once every task is
//! RUNNING. So a restore starts at Flink's `restore_timestamp` and ends when the last subtask
//! entered RUNNING (`/jobs/:id/vertices/:v/subtasktimes`, every version from 1.13 on).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::observe::{RestoreReport, RestoredFrom, SubtaskStart};
use crate::time::Timestamp;

/// How many restores per job are kept (and persisted) for the API and the status page.
pub(crate) const RECENT_RESTORES: usize = 16;

/// Where a restore stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoreOutcome {
    /// Not every subtask is RUNNING yet.
    Restoring,
    /// Every subtask was RUNNING again: timed.
    Measured,
    /// A newer restore came, or the job ended, before every subtask was seen RUNNING.
    Unmeasured,
}

impl RestoreOutcome {
    /// The API's word for it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RestoreOutcome::Restoring => "restoring",
            RestoreOutcome::Measured => "measured",
            RestoreOutcome::Unmeasured => "unmeasured",
        }
    }
}

/// The subtask that was RUNNING last after a restore.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSubtask {
    /// The operator chain's name.
    pub operator: String,
    /// The subtask index (0-based).
    pub subtask: u32,
    /// Its INITIALIZING → RUNNING, ms: the time it spent restoring its state.
    pub initializing_ms: Option<u64>,
}

/// One restore of a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreRecord {
    /// What it restored from, and when the JobManager restored it (the start).
    pub from: RestoredFrom,
    /// Where it stands.
    pub outcome: RestoreOutcome,
    /// When the last subtask entered RUNNING (the end), once measured.
    pub running_at: Option<Timestamp>,
    /// The restore's duration: `running_at` − `from.restored_at`, ms.
    pub duration_ms: Option<u64>,
    /// When the job entered RESTARTING before it (a failover; none for a start from a savepoint).
    pub restarting_at: Option<Timestamp>,
    /// `running_at` − `restarting_at`, ms: how long the job did not run, the restart delay of the
    /// restart strategy included.
    pub downtime_ms: Option<u64>,
    /// The subtask that was RUNNING last.
    pub last_subtask: Option<LastSubtask>,
    /// Subtasks of the job when measured.
    pub subtasks: u32,
}

/// Restores by what they restored from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreTotals {
    /// From a checkpoint.
    pub checkpoint: u64,
    /// From a savepoint.
    pub savepoint: u64,
}

/// A job's restores as the daemon saw them (persisted with the job).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreStats {
    /// Restores counted, each once.
    pub totals: RestoreTotals,
    /// The latest restores, oldest first, at most [`RECENT_RESTORES`].
    pub recent: VecDeque<RestoreRecord>,
    /// Records counted or changed since `State` last moved them into its outbox, for the
    /// checkpoint store (not persisted: the state file holds `recent`).
    #[serde(skip)]
    pub(crate) changed: Vec<RestoreRecord>,
}

/// When the last subtask of a restore at `restored_at` entered RUNNING, and which one it was:
/// `None` while a subtask is not RUNNING (or FINISHED) now, or when no subtask entered RUNNING
/// after `restored_at` (an answer from before the restore: Flink's REST caches the job for a
/// few seconds). Subtasks that did not restart (a region failover restarts only the failed
/// region) entered RUNNING before the restore and do not count.
pub(crate) fn measure(
    restored_at: Timestamp,
    subtasks: &[SubtaskStart],
) -> Option<(Timestamp, &SubtaskStart)> {
    if subtasks.is_empty() || subtasks.iter().any(|s| !s.running_now || s.running_at.is_none()) {
        return None;
    }
    let last = subtasks.iter().max_by_key(|s| s.running_at)?;
    let at = last.running_at?;
    (at >= restored_at).then_some((at, last))
}

impl RestoreStats {
    /// The latest restore.
    pub fn latest(&self) -> Option<&RestoreRecord> {
        self.recent.back()
    }

    /// Whether a restore at `restored_at` is still to be counted or timed.
    pub(crate) fn due(&self, restored_at: Timestamp) -> bool {
        match self.latest() {
            None => true,
            Some(l) => {
                l.from.restored_at < restored_at
                    || (l.from.restored_at == restored_at && l.outcome == RestoreOutcome::Restoring)
            }
        }
    }

    /// Takes what the poller saw of the job's latest restore: a newer one is counted (once: by
    /// its restore time) and the one before it, if still restoring, left unmeasured; the
    /// latest is timed once every subtask is RUNNING. An older one (a stale answer) is ignored.
    pub(crate) fn observe(&mut self, report: &RestoreReport) {
        let at = report.restored.restored_at;
        match self.latest() {
            Some(l) if l.from.restored_at > at => return,
            Some(l) if l.from.restored_at == at => {}
            _ => {
                self.give_up();
                if report.restored.is_savepoint {
                    self.totals.savepoint += 1;
                } else {
                    self.totals.checkpoint += 1;
                }
                self.recent.push_back(RestoreRecord {
                    from: report.restored.clone(),
                    outcome: RestoreOutcome::Restoring,
                    running_at: None,
                    duration_ms: None,
                    restarting_at: None,
                    downtime_ms: None,
                    last_subtask: None,
                    subtasks: 0,
                });
                while self.recent.len() > RECENT_RESTORES {
                    self.recent.pop_front();
                }
                self.note_latest();
            }
        }
        let Some(latest) = self.recent.back_mut() else { return };
        if latest.outcome != RestoreOutcome::Restoring {
            return;
        }
        // The RESTARTING that led to this restore: before it, not one of an earlier restore.
        if let Some(r) = report.restarting_at.filter(|r| *r <= at) {
            latest.restarting_at = Some(r);
        }
        let Some(subtasks) = &report.subtasks else { return };
        let Some((running_at, last)) = measure(at, subtasks) else { return };
        latest.outcome = RestoreOutcome::Measured;
        latest.running_at = Some(running_at);
        latest.duration_ms = Some(running_at.since(at));
        latest.downtime_ms = latest.restarting_at.map(|r| running_at.since(r));
        latest.last_subtask = Some(LastSubtask {
            operator: last.operator.clone(),
            subtask: last.subtask,
            initializing_ms: last.initializing_at.map(|i| running_at.since(i)),
        });
        latest.subtasks = subtasks.len() as u32;
        self.note_latest();
    }

    /// Hands the latest record (counted or changed just now) to the store's outbox.
    fn note_latest(&mut self) {
        if let Some(latest) = self.recent.back() {
            self.changed.retain(|r| r.from.restored_at != latest.from.restored_at);
            self.changed.push(latest.clone());
        }
    }

    /// The job ended (or a newer restore came) before its latest restore could be timed.
    pub(crate) fn give_up(&mut self) {
        if let Some(l) = self.recent.back_mut().filter(|l| l.outcome == RestoreOutcome::Restoring) {
            l.outcome = RestoreOutcome::Unmeasured;
            self.note_latest();
        }
    }

    /// The latest timed restore.
    pub(crate) fn last_measured(&self) -> Option<&RestoreRecord> {
        self.recent.iter().rev().find(|r| r.outcome == RestoreOutcome::Measured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::JobKey;

    fn from(at: i64, id: u64) -> RestoredFrom {
        RestoredFrom {
            checkpoint_id: Some(id),
            is_savepoint: false,
            external_path: None,
            restored_at: Timestamp(at),
        }
    }

    fn subtask(i: u32, init: i64, run: Option<i64>, running: bool) -> SubtaskStart {
        SubtaskStart {
            operator: "stateful-map".into(),
            subtask: i,
            initializing_at: Some(Timestamp(init)),
            running_at: run.map(Timestamp),
            running_now: running,
        }
    }

    fn report(at: i64, subtasks: Option<Vec<SubtaskStart>>) -> RestoreReport {
        RestoreReport {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            restored: from(at, 12),
            restarting_at: Some(Timestamp(at - 3_000)),
            subtasks,
        }
    }

    #[test]
    fn a_restore_is_counted_once_and_timed_when_every_subtask_runs() {
        let mut stats = RestoreStats::default();
        assert!(stats.due(Timestamp(10_000)));
        // First seen while a subtask still initialises: counted, not timed.
        stats.observe(&report(
            10_000,
            Some(vec![subtask(0, 10_100, Some(10_300), true), subtask(1, 10_150, None, false)]),
        ));
        assert_eq!(stats.totals, RestoreTotals { checkpoint: 1, savepoint: 0 });
        assert_eq!(stats.latest().unwrap().outcome, RestoreOutcome::Restoring);
        assert!(stats.due(Timestamp(10_000)));
        // Seen again, all running: timed; counted still once.
        stats.observe(&report(
            10_000,
            Some(vec![subtask(0, 10_100, Some(10_300), true), subtask(1, 10_150, Some(10_450), true)]),
        ));
        let l = stats.latest().unwrap();
        assert_eq!(
            (l.outcome, l.duration_ms, l.downtime_ms),
            (RestoreOutcome::Measured, Some(450), Some(3_450))
        );
        assert_eq!(
            l.last_subtask,
            Some(LastSubtask { operator: "stateful-map".into(), subtask: 1, initializing_ms: Some(300) })
        );
        assert_eq!(stats.totals.checkpoint, 1);
        assert!(!stats.due(Timestamp(10_000)));
        stats.observe(&report(10_000, Some(vec![subtask(0, 10_100, Some(10_300), true)])));
        assert_eq!(stats.totals.checkpoint, 1);
        assert_eq!(stats.latest().unwrap().duration_ms, Some(450));
    }

    #[test]
    fn an_answer_from_before_the_restore_does_not_time_it() {
        // Every subtask RUNNING, but since before the restore: Flink's cached graph.
        assert!(measure(Timestamp(10_000), &[subtask(0, 1_000, Some(2_000), true)]).is_none());
        // A region failover: one subtask restarted, the other ran on.
        let subtasks = [subtask(0, 1_000, Some(2_000), true), subtask(1, 10_050, Some(10_200), true)];
        assert_eq!(
            measure(Timestamp(10_000), &subtasks).map(|(at, s)| (at, s.subtask)),
            Some((Timestamp(10_200), 1))
        );
        // A subtask failing again (its latest state is not RUNNING): not timed.
        assert!(measure(Timestamp(10_000), &[subtask(0, 10_050, Some(10_200), false)]).is_none());
        assert!(measure(Timestamp(10_000), &[]).is_none());
    }

    #[test]
    fn a_newer_restore_leaves_the_one_still_restoring_unmeasured_and_an_older_is_ignored() {
        let mut stats = RestoreStats::default();
        stats.observe(&report(10_000, None));
        stats.observe(&report(20_000, None));
        stats.observe(&report(15_000, Some(vec![subtask(0, 15_100, Some(15_200), true)])));
        let outcomes: Vec<_> =
            stats.recent.iter().map(|r| (r.from.restored_at.millis(), r.outcome)).collect();
        assert_eq!(outcomes, [(10_000, RestoreOutcome::Unmeasured), (20_000, RestoreOutcome::Restoring)]);
        assert_eq!(stats.totals.checkpoint, 2);
        let mut savepoint = report(30_000, None);
        savepoint.restored.is_savepoint = true;
        stats.observe(&savepoint);
        assert_eq!(stats.totals, RestoreTotals { checkpoint: 2, savepoint: 1 });
        for i in 0..40 {
            stats.observe(&report(40_000 + i, None));
        }
        assert_eq!(stats.recent.len(), RECENT_RESTORES);
        assert_eq!(stats.totals.checkpoint, 42);
    }
}
