//! Is this job healthy, and why: the one policy the API, the status page and `diagnose` read.
//!
//! [`job_health`]: the view of a watched job, led by the alerts of the rule pack ([`Health`],
//! [`Reason`], whose numbers render as the sentences the surfaces show). `diagnose` reads the
//! same: it watches its jobs for one round (`commands::look`) and maps the level onto its
//! verdict.
//!
//! Who held a checkpoint up is [`culprit`]. Pure: no I/O, no clock.

pub(crate) mod culprit;
pub(crate) mod headline;
pub(crate) mod links;
pub(crate) mod storage;

use std::fmt;

use serde::Serialize;

use crate::observe::{CheckpointStatus, JobStatus, SnapshotKind};
use crate::rules::{Alert, AlertSeverity, AlertState, AlertsView};
use crate::state::{ClusterState, JobState};
use crate::time::{Timestamp, human_ms};

pub use crate::observe::Outcome;

/// How a job is doing, worst first. The levels follow the alert states: an alert that fires
/// makes `critical` or `warning` (its severity), one that is pending (its condition holds, not
/// yet for its `for`) makes `pending`; `ok` only when nothing of the job is pending or firing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Health {
    /// A critical alert fires, or the job is failing or restarting.
    Critical,
    /// A warning (or info) alert fires, the latest checkpoint failed, or the schedule stalls.
    Warning,
    /// An alert of the job is pending: its condition holds, it fires if it still holds after
    /// the rule's `for`.
    Pending,
    /// Not enough known yet (no checkpoint seen, or the cluster does not answer).
    Unknown,
    /// Checkpoints complete and nothing is pending or firing.
    Ok,
}

/// Why a watched job is not [`Health::Ok`], with its numbers; displayed as one short sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// An alert of the job fires.
    AlertFires {
        /// `alertname`.
        alert: String,
    },
    /// An alert of the job is pending.
    AlertPending {
        /// `alertname`.
        alert: String,
        /// Its `severity` label.
        severity: String,
    },
    /// The job is neither running nor in a state that comes before or after running.
    JobState(JobStatus),
    /// The latest checkpoints failed, in a row.
    LatestFailed {
        /// How many in a row.
        count: u64,
        /// How the latest one ended.
        latest: Outcome,
    },
    /// No checkpoint triggered past the time the shadow model expected one.
    Stalled {
        /// How long past, ms.
        for_ms: u64,
    },
    /// The JobManager does not answer.
    Unreachable,
    /// Nothing counted yet.
    NoCheckpointYet,
    /// The job failed over and every checkpoint since completed: a detail of a healthy job
    /// while the failover's alert still fires.
    Recovered(Recovered),
}

/// A job that failed over (exceeded its tolerable failures, restarted) and completes its
/// checkpoints again: see [`recovered`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Recovered {
    /// The latest restart it recovered from: the later of the last time the job exceeded its
    /// tolerable failures and its latest restore.
    pub(crate) restart: Timestamp,
    /// When the first checkpoint triggered after the restart completed, or the restore ended
    /// (its last subtask RUNNING) if that was later.
    pub(crate) since: Timestamp,
    /// The restarts from checkpoints in the hour before the latest one (at least 1).
    pub(crate) restarts: u64,
}

/// The alerts about a failover that is over once the job completes its checkpoints again:
/// they hold for a while after it (`FlinkCheckpointToleranceExceeded` an hour).
pub(crate) const FAILOVER_ALERTS: [&str; 1] = ["FlinkCheckpointToleranceExceeded"];

/// Whether a job that failed over is healthy again: it runs, no checkpoint failed since its
/// latest restart (the later of the last time it exceeded its tolerable failures and its latest
/// restore), one triggered after it completed, and its latest restore is over (every subtask
/// RUNNING). `None` when it never failed over. With checkpointing during recovery (FLIP-547,
/// 2.3: `execution.checkpointing.during-recovery.enabled` with
/// `execution.checkpointing.unaligned.recover-output-on-downstream.enabled`) a checkpoint can
/// complete while subtasks still restore their in-flight data: the recovery ends at the later of
/// the two, never at the first completed checkpoint alone. The page, the API, the alerts and
/// `diagnose` read this one answer.
pub(crate) fn recovered(j: &JobState) -> Option<Recovered> {
    if j.job_state != JobStatus::Running || j.consecutive_failures() > 0 {
        return None;
    }
    let restart =
        j.tolerance.last_exceeded_at().into_iter().chain(j.latest_restore.map(|(_, at)| at)).max()?;
    let mut since_restart = j
        .recent
        .iter()
        .filter(|r| r.kind != SnapshotKind::Savepoint && r.triggered_at >= restart)
        .filter(|r| !crate::state::is_stop_failure(r.failure_message.as_deref()));
    let first = since_restart.next()?;
    if first.status != CheckpointStatus::Completed
        || since_restart.any(|r| r.status != CheckpointStatus::Completed)
    {
        return None;
    }
    let hour_before = Timestamp(restart.millis() - 3_600_000);
    let restarts = j
        .restores
        .recent
        .iter()
        .filter(|r| !r.from.is_savepoint && r.from.restored_at >= hour_before)
        .count() as u64;
    // The restore the poll reported, once the poller looked at it: still restoring, the job has
    // not recovered; timed, it recovered when both its last subtask ran and a checkpoint completed.
    let restore =
        j.restores.latest().filter(|r| Some(r.from.restored_at) == j.latest_restore.map(|(_, at)| at));
    if restore.is_some_and(|r| r.outcome == crate::state::restore::RestoreOutcome::Restoring) {
        return None;
    }
    let since =
        restore.and_then(|r| r.running_at).map_or(first.finished_at, |end| end.max(first.finished_at));
    Some(Recovered { restart, since, restarts: restarts.max(1) })
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::AlertFires { alert } => write!(f, "{alert} fires"),
            Reason::AlertPending { alert, severity } => write!(f, "{alert} is pending ({severity})"),
            Reason::JobState(state) => write!(f, "job is {state}"),
            Reason::LatestFailed { count: 1, latest } => write!(f, "the latest checkpoint {latest}"),
            Reason::LatestFailed { count, latest: Outcome::Failed } => {
                write!(f, "the latest {count} checkpoints failed")
            }
            Reason::LatestFailed { count, latest } => {
                write!(f, "the latest {count} checkpoints failed (latest: {latest})")
            }
            Reason::Stalled { for_ms } => {
                write!(f, "no checkpoint triggered for {} past the expected time", human_ms(*for_ms))
            }
            Reason::Unreachable => f.write_str("the cluster does not answer"),
            Reason::NoCheckpointYet => f.write_str("no checkpoint seen yet"),
            Reason::Recovered(Recovered { since, restarts, .. }) => {
                let t = crate::time::log_time(*since);
                let clock = t.get(11..19).unwrap_or(&t);
                let s = if *restarts == 1 { "" } else { "s" };
                write!(f, "healthy again since {clock} UTC, after {restarts} restart{s}")
            }
        }
    }
}

/// An alert's severity from its `severity` label; a label the pack does not use reads as
/// `warning` (every alert the evaluator makes has one of the pack's).
pub(crate) fn alert_severity(alert: &Alert) -> AlertSeverity {
    match label(alert, "severity") {
        "critical" => AlertSeverity::Critical,
        "info" => AlertSeverity::Info,
        _ => AlertSeverity::Warning,
    }
}

/// A label of an alert, `""` when it has none.
pub(crate) fn label<'a>(alert: &'a Alert, name: &str) -> &'a str {
    alert.labels.get(name).map_or("", |t| t.as_str())
}

/// The advice lane's line beside a headline: "1 job has configuration advice", "3 jobs have
/// configuration advice"; `None` for none. The page, the API and `diagnose` print it.
pub(crate) fn advice_line(with_advice: usize) -> Option<String> {
    match with_advice {
        0 => None,
        1 => Some("1 job has configuration advice".to_string()),
        n => Some(format!("{n} jobs have configuration advice")),
    }
}

/// Whether an alert is configuration advice (class `advice`): the other lane, which never makes a
/// job or a cluster "not ok".
pub(crate) fn is_advice(alert: &Alert) -> bool {
    label(alert, "class") == crate::rules::Class::Advice.as_str()
}

/// Whether an alert is about this job.
pub(crate) fn is_of_job(alert: &Alert, cluster: &str, job_id: &str) -> bool {
    label(alert, "cluster") == cluster && label(alert, "job_id") == job_id
}

/// A watched job's health and the reasons for it (see docs/api.md, "Health"), worst first
/// among equals in the order: alerts, job state, failures, schedule, what is unknown.
pub(crate) fn job_health(
    c: &ClusterState,
    cluster: &str,
    job_id: &str,
    j: &JobState,
    alerts: &AlertsView,
) -> (Health, Vec<Reason>) {
    let mut found: Vec<(Health, Reason)> = Vec::new();
    // Advice is the other lane: it is shown beside the job (`advice::job_risk_findings`), never
    // as ill health.
    let of_job = alerts.of_job(cluster, job_id).filter(|a| !is_advice(a));
    let recovered = recovered(j);
    for a in of_job.clone().filter(|a| a.state == AlertState::Firing) {
        // A failover that is over: the restart is a detail of a healthy job.
        if let Some(r) = recovered.filter(|_| FAILOVER_ALERTS.contains(&a.name())) {
            found.push((Health::Ok, Reason::Recovered(r)));
            continue;
        }
        let health = match alert_severity(a) {
            AlertSeverity::Critical => Health::Critical,
            _ => Health::Warning,
        };
        found.push((health, Reason::AlertFires { alert: a.name().to_string() }));
    }
    for a in of_job.filter(|a| a.state == AlertState::Pending) {
        let reason =
            Reason::AlertPending { alert: a.name().to_string(), severity: label(a, "severity").to_string() };
        found.push((Health::Pending, reason));
    }
    found.extend(job_state_health(&j.job_state));
    found.extend(failure_health(j));
    if let Some(for_ms) = j.shadow.trigger.stalled_for_ms() {
        found.push((Health::Warning, Reason::Stalled { for_ms }));
    }
    if !c.reachable {
        found.push((Health::Unknown, Reason::Unreachable));
    } else if j.recent.is_empty() && j.totals() == Default::default() && found.is_empty() {
        found.push((Health::Unknown, Reason::NoCheckpointYet));
    }
    let health = found.iter().map(|(h, _)| *h).min().unwrap_or(Health::Ok);
    (health, found.into_iter().map(|(_, r)| r).collect())
}

/// A job that is failing, restarting, suspended … is critical; one that runs, is starting or
/// has ended as asked is not.
fn job_state_health(state: &JobStatus) -> Option<(Health, Reason)> {
    match state {
        JobStatus::Running
        | JobStatus::Finished
        | JobStatus::Canceled
        | JobStatus::Created
        | JobStatus::Initializing => None,
        other => Some((Health::Critical, Reason::JobState(other.clone()))),
    }
}

/// The latest checkpoints failed in a row. An ended job's last failures are its history, not a
/// present problem (and the failures a cancel or stop causes, "Checkpoint Coordinator is
/// suspending.", are not counted at all).
fn failure_health(j: &JobState) -> Option<(Health, Reason)> {
    let count = if j.job_state.has_ended() { 0 } else { j.consecutive_failures() };
    let latest =
        j.recent.back().map_or(Outcome::Failed, |r| Outcome::of(r.status, r.failure_message.as_deref()));
    (count > 0).then_some((Health::Warning, Reason::LatestFailed { count, latest }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::State;

    #[test]
    fn reasons_read_as_the_surfaces_said_them() {
        let failed = Reason::LatestFailed { count: 3, latest: Outcome::Expired };
        assert_eq!(failed.to_string(), "the latest 3 checkpoints failed (latest: expired)");
        let one = Reason::LatestFailed { count: 1, latest: Outcome::Declined };
        assert_eq!(one.to_string(), "the latest checkpoint declined");
    }

    /// Job `j` of cluster `c` ("orders", RUNNING): checkpoints 1-3 every 2 s, a failover restored
    /// checkpoint 3 at 100 s (RESTARTING at 99 s), and checkpoint 4 (triggered at 105 s) completed
    /// at 106 s while stateful-map #0 restored its in-flight data; `running`: when that subtask
    /// entered RUNNING (`None`: it still restores, INITIALIZING since 100.05 s). `diagnose`'s
    /// tests read it too.
    pub(crate) fn restored_during_recovery(running: Option<i64>) -> State {
        use crate::observe::{
            CheckpointCounts, FinishedCheckpoint, JobKey, JobPoll, Observation, RestoreReport, RestoredFrom,
            SubtaskStart,
        };
        use crate::stats::WindowSpec;
        let key = JobKey { cluster: "c".into(), job_id: "j".into() };
        let poll = |at: i64, finished: Vec<FinishedCheckpoint>| {
            Observation::JobPolled(JobPoll {
                key: key.clone(),
                job_name: "orders".into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(at),
                counts: CheckpointCounts {
                    completed: finished.len() as u64,
                    failed: 0,
                    in_progress: 0,
                    restored: 1,
                },
                settings: None,
                in_progress: Vec::new(),
                finished,
                latest_restore: Some((Some(3), Timestamp(100_000))),
                deferred: Default::default(),
            })
        };
        let restore = |running: Option<i64>| {
            Observation::Restore(RestoreReport {
                key: key.clone(),
                restored: RestoredFrom {
                    checkpoint_id: Some(3),
                    is_savepoint: false,
                    external_path: None,
                    restored_at: Timestamp(100_000),
                },
                restarting_at: Some(Timestamp(99_000)),
                subtasks: Some(vec![SubtaskStart {
                    operator: "stateful-map".into(),
                    subtask: 0,
                    initializing_at: Some(Timestamp(100_050)),
                    running_at: running.map(Timestamp),
                    running_now: running.is_some(),
                }]),
            })
        };
        let cps = |n: u64| {
            (1..=n)
                .map(|id| {
                    let t = if id <= 3 { 90_000 + id as i64 * 2_000 } else { 105_000 };
                    FinishedCheckpoint::completed(id, Timestamp(t), 1_000).acknowledged(1, 1)
                })
                .collect::<Vec<_>>()
        };
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        state.apply(&poll(99_000, cps(3)), Timestamp(99_000));
        state.apply(&restore(None), Timestamp(107_000));
        state.apply(&poll(107_000, cps(4)), Timestamp(107_000));
        if let Some(at) = running {
            state.apply(&restore(Some(at)), Timestamp(at + 1_000));
        }
        state
    }

    /// A failover restored from checkpoint 3 at 100 s; its subtasks restore their in-flight data
    /// until 130 s while checkpoint 4 (triggered at 105 s) completes at 106 s during the recovery
    /// (FLIP-547): the job has not recovered at the checkpoint, only once every subtask runs.
    #[test]
    fn a_checkpoint_completed_during_recovery_does_not_end_it() {
        let job = |s: &State| recovered(&s.clusters()["c"].jobs["j"]);
        assert_eq!(
            job(&restored_during_recovery(None)),
            None,
            "checkpoint 4 completed while the subtask still restored"
        );
        let r = job(&restored_during_recovery(Some(130_000))).expect("recovered once every subtask runs");
        assert_eq!(r.since, Timestamp(130_000), "at the restore's end, not at checkpoint 4's (106 s)");
        assert_eq!(r.restart, Timestamp(100_000), "from the restore");
    }
}
