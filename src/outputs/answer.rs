//! The answer first, for the status page and the JSON API: per job what is wrong, where
//! (operator, subtask, TaskManager), the failure class and the one next step; the subtask that
//! held the job's recent checkpoints up; how they ended; and one headline per cluster.
//!
//! Pure views of the state, like `api`: no I/O, no clock. The sentences carry the numbers they
//! rest on, and "where" is said only when one subtask stands out.

use serde::Serialize;

use crate::health::culprit::{self, Culprit, Role};
use crate::health::{Health, Outcome, Reason, label};
use crate::observe::{CheckpointStatus, SnapshotKind};
use crate::rules::{Alert, AlertState, Class};
use crate::state::{CheckpointRecord, ClusterState, JobState, is_stop_failure};
use crate::time::human_ms;

/// How the job's recent finished checkpoints ended (the ones its page lists; savepoints and the
/// failures a cancel or stop causes are left out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct RecentOutcomes {
    /// Checkpoints counted.
    pub(crate) of: u64,
    /// Completed.
    pub(crate) completed: u64,
    /// Expired (ran into the timeout).
    pub(crate) expired: u64,
    /// Declined by a task.
    pub(crate) declined: u64,
    /// Failed otherwise.
    pub(crate) failed: u64,
}

impl RecentOutcomes {
    /// The counts over the job's recent checkpoints.
    pub(crate) fn of_job(j: &JobState) -> Self {
        let mut n = RecentOutcomes::default();
        for r in j.recent.iter().filter(|r| counts(r)) {
            n.of += 1;
            match outcome(r) {
                Outcome::Completed => n.completed += 1,
                Outcome::Expired => n.expired += 1,
                Outcome::Declined => n.declined += 1,
                Outcome::Failed => n.failed += 1,
            }
        }
        n
    }

    /// Failed ones, of any kind.
    pub(crate) fn failures(&self) -> u64 {
        self.expired + self.declined + self.failed
    }

    /// "6 of the last 19 checkpoints expired"; `None` when none failed.
    pub(crate) fn sentence(&self) -> Option<String> {
        let (n, of) = (self.failures(), self.of);
        let parts: Vec<String> =
            [(self.expired, "expired"), (self.declined, "declined"), (self.failed, "failed")]
                .into_iter()
                .filter(|(k, _)| *k > 0)
                .map(|(k, what)| format!("{k} {what}"))
                .collect();
        let how = match parts.as_slice() {
            [] => return None,
            [_] if self.expired > 0 => "expired".to_string(),
            [_] if self.declined > 0 => "were declined".to_string(),
            [_] => "failed".to_string(),
            _ => format!("failed ({})", parts.join(", ")),
        };
        Some(format!("{n} of the last {of} checkpoints {how}"))
    }
}

/// Whether a recent record counts among the job's checkpoints.
fn counts(r: &CheckpointRecord) -> bool {
    r.kind != SnapshotKind::Savepoint && !is_stop_failure(r.failure_message.as_deref())
}

fn outcome(r: &CheckpointRecord) -> Outcome {
    Outcome::of(r.status, r.failure_message.as_deref())
}

/// The subtask that held the job's recent checkpoints up: of the newest failed checkpoint the
/// one that did not acknowledge (never, late, or declined), else of the completed ones the one
/// that acknowledged latest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct WindowCulprit {
    /// The checkpoint it held up.
    pub(crate) checkpoint_id: u64,
    /// How that checkpoint ended.
    pub(crate) outcome: Outcome,
    /// The operator chain's name.
    pub(crate) operator: String,
    /// The subtask index (0-based).
    pub(crate) subtask: u32,
    /// How it held the checkpoint up.
    pub(crate) role: Role,
    /// Its acknowledgement − trigger; `null` when it never acknowledged.
    pub(crate) end_to_end_ms: Option<u64>,
    /// Its TaskManager, as far as known.
    pub(crate) taskmanager: Option<String>,
    /// Of the failed checkpoints counted, how many this subtask held up, and of how many;
    /// `null` when none failed.
    pub(crate) held_up: Option<(u64, u64)>,
    /// When none failed: of the completed checkpoints counted, in how many it acknowledged
    /// last, and of how many.
    pub(crate) last_in: Option<(u64, u64)>,
    /// The same in one sentence, e.g. "stateful-map #0 never acknowledged checkpoint 4
    /// (expired after 4.0 s), on 127.0.0.1:6122-demo01 (localhost:6121)".
    pub(crate) text: String,
}

/// The subtask that held the recent checkpoints of job `job_id` up ([`WindowCulprit`]).
pub(crate) fn window_culprit(c: &ClusterState, job_id: &str, j: &JobState) -> Option<WindowCulprit> {
    let culprits: Vec<(&CheckpointRecord, Culprit)> = j
        .recent
        .iter()
        .map(|r| &**r)
        .filter(|r| counts(r))
        .filter_map(|r| Some((r, culprit::of_record(c, job_id, r)?)))
        .collect();
    let failed: Vec<&(&CheckpointRecord, Culprit)> =
        culprits.iter().filter(|(r, _)| r.status == CheckpointStatus::Failed).collect();
    let held = failed.iter().rev().find(|(_, cu)| cu.role.held_it_up());
    let (r, cu, held_up, last_in) = match held {
        Some((r, cu)) => {
            let same = |x: &&&(&CheckpointRecord, Culprit)| {
                x.1.role.held_it_up() && x.1.operator == cu.operator && x.1.subtask == cu.subtask
            };
            let of = j.recent.iter().filter(|r| counts(r) && r.status == CheckpointStatus::Failed).count();
            (*r, cu, Some((failed.iter().filter(same).count() as u64, of as u64)), None)
        }
        None => {
            let (r, cu) = culprits
                .iter()
                .filter(|(r, _)| r.status == CheckpointStatus::Completed)
                .max_by_key(|(r, cu)| (cu.end_to_end_ms, r.id))?;
            let completed: Vec<&(String, u32, u64)> = j
                .recent
                .iter()
                .filter(|r| counts(r) && r.status == CheckpointStatus::Completed)
                .filter_map(|r| r.slowest_subtask.as_ref())
                .collect();
            let same = completed.iter().filter(|(op, st, _)| *op == cu.operator && *st == cu.subtask).count();
            (*r, cu, None, Some((same as u64, completed.len() as u64)))
        }
    };
    let text = culprit_sentence(r, cu);
    Some(WindowCulprit {
        checkpoint_id: r.id,
        outcome: outcome(r),
        operator: cu.operator.clone(),
        subtask: cu.subtask,
        role: cu.role,
        end_to_end_ms: cu.end_to_end_ms,
        taskmanager: cu.taskmanager.clone(),
        held_up,
        last_in,
        text,
    })
}

/// What a culprit did to its checkpoint, naming it: "stateful-map #0 never acknowledged
/// checkpoint 4 (expired after 4.0 s), on tm-1".
fn culprit_sentence(r: &CheckpointRecord, cu: &Culprit) -> String {
    let fmt = human_ms;
    let (id, outcome, lived) = (r.id, outcome(r), fmt(r.finished_at.since(r.triggered_at)));
    let name = match cu.others_unacknowledged {
        0 => format!("{} #{}", cu.operator, cu.subtask),
        1 => format!("{} #{} and 1 other subtask", cu.operator, cu.subtask),
        k => format!("{} #{} and {k} other subtasks", cu.operator, cu.subtask),
    };
    let mut text = match (cu.role, cu.end_to_end_ms) {
        (Role::NeverAcknowledged, _) => {
            format!("{name} never acknowledged checkpoint {id} ({outcome} after {lived})")
        }
        (Role::AcknowledgedLate, Some(late)) => format!(
            "{name} never acknowledged checkpoint {id} before it {outcome} after {lived}; its acknowledgement \
             came {} after the trigger",
            fmt(late)
        ),
        (Role::AcknowledgedLate, None) => {
            format!("{name} never acknowledged checkpoint {id} before it {outcome} after {lived}")
        }
        (Role::Declined, _) => format!("{name} declined checkpoint {id} ({outcome} after {lived})"),
        (Role::AcknowledgedLast, e2e) => {
            format!("{name} acknowledged checkpoint {id} last, after {}", e2e.map_or("?".into(), fmt))
        }
    };
    if let Some(tm) = &cu.taskmanager {
        text.push_str(&format!(", on {tm}"));
    }
    text
}

/// The answer for one job that is not ok: what is wrong, where, the class, the next step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Answer {
    /// What is wrong, in one sentence with its numbers.
    pub(crate) what: String,
    /// Where: the subtask that held the checkpoints up and its TaskManager, in one sentence;
    /// `null` when no one subtask stands out.
    #[serde(rename = "where")]
    pub(crate) where_: Option<String>,
    /// That subtask, when one stands out.
    pub(crate) culprit: Option<WindowCulprit>,
    /// `blocking`, `timeout` or `failure`; `null` when it is none of these (a cluster that
    /// does not answer, no checkpoint yet).
    pub(crate) class: Option<Class>,
    /// The one next step.
    pub(crate) next_step: String,
    /// The runbook section of the worst alert of the job.
    pub(crate) runbook_url: Option<String>,
}

/// The answer for a job of health `health` with `reasons` ([`crate::health::job_health`]) and
/// its pending and firing `alerts`; `None` when it is ok.
pub(crate) fn job_answer(
    c: &ClusterState,
    job_id: &str,
    j: &JobState,
    (health, reasons): (Health, &[Reason]),
    alerts: &[&Alert],
) -> Option<Answer> {
    if health == Health::Ok {
        return None;
    }
    let mut alerts: Vec<&Alert> = alerts.to_vec();
    // Firing before pending, then by severity.
    alerts.sort_by_key(|a| {
        (a.state != AlertState::Firing, crate::health::alert_severity(a), a.name().to_string())
    });
    let worst = alerts.first().copied();
    let counts = RecentOutcomes::of_job(j);
    let alert_class = worst.and_then(|a| class_of(label(a, "class")));
    let failing = counts.failures() > 0
        && (j.consecutive_failures() > 0 || matches!(alert_class, Some(Class::Failure | Class::Timeout)));
    let job_state = reasons.iter().find_map(|r| match r {
        Reason::JobState(s) => Some(s.to_string()),
        _ => None,
    });
    let mut what: Vec<String> = Vec::new();
    what.extend(job_state.as_ref().map(|s| format!("the job is {s}")));
    if failing && let Some(mut s) = counts.sentence() {
        if counts.expired > 0
            && let Some(t) = j.settings.as_ref().and_then(|s| s.timeout_ms)
        {
            s.push_str(&format!(" (timeout {})", human_ms(t)));
        }
        let streak = j.consecutive_failures();
        if streak > 1 && streak < counts.failures() {
            s.push_str(&format!(", the latest {streak} in a row"));
        }
        what.push(s);
    }
    if what.is_empty() {
        match worst {
            Some(a) => {
                let summary =
                    a.annotations.get("summary").map_or_else(|| a.name().to_string(), |t| t.to_string());
                what.push(if a.state == AlertState::Firing {
                    summary
                } else {
                    format!("{summary} (pending)")
                });
            }
            None => what.extend(reasons.first().map(ToString::to_string)),
        }
    }
    let what = capitalized(&what.join("; "));
    let culprit = window_culprit(c, job_id, j).filter(|w| stands_out(w, failing));
    let counted = failing
        .then(|| if counts.expired * 2 >= counts.failures() { Class::Timeout } else { Class::Failure });
    let class = match alert_class {
        // An alert of any failure (`FlinkCheckpointFailed`) says less than the outcomes: mostly
        // expiries are a timeout (without the log's `FlinkCheckpointExpiredBurst`, a REST-only
        // daemon and `diagnose` called expiries "failure").
        Some(Class::Failure) if counted.is_some() => counted,
        Some(c) => Some(c),
        None if counted.is_some() => counted,
        None if job_state.is_some() || reasons.iter().any(|r| matches!(r, Reason::Stalled { .. })) => {
            Some(Class::Failure)
        }
        None => None,
    };
    let where_ = culprit.as_ref().map(|w| match (w.held_up, w.last_in) {
        (Some((k, of)), _) if of > 1 => format!("{}; it held up {k} of the {of} failed checkpoints", w.text),
        (None, Some((k, of))) => {
            let tm = w.taskmanager.as_ref().map(|tm| format!(", on {tm}")).unwrap_or_default();
            let longest = w.end_to_end_ms.map(|ms| format!(", up to {}", human_ms(ms))).unwrap_or_default();
            format!(
                "{} #{} acknowledged last in {k} of the last {of} completed checkpoints{longest}{tm}",
                w.operator, w.subtask
            )
        }
        _ => w.text.clone(),
    });
    let mut next_step = next_step(class, culprit.as_ref(), job_state.is_some(), reasons);
    // The storage, when the evidence points there: its alert is the worst, or checkpoints time
    // out while its listings are throttled or its _metadata nears the frame size.
    let storage_alert = worst.map(|a| a.name()).filter(|n| is_storage_alert(n));
    let mut what = what;
    if let Some(sentence) = crate::health::storage::sentence(&j.storage)
        .filter(|_| storage_alert.is_some() || class == Some(Class::Timeout))
    {
        what.push_str(&format!("; {sentence}"));
        next_step = storage_step(storage_alert, &j.storage);
    } else if class == Some(Class::Timeout)
        && let Some(sentence) = crate::health::storage::slow_subtask(&j.storage)
    {
        what.push_str(&format!("; {sentence}"));
    }
    // An acknowledgement a TaskManager's log said was dropped as oversized: the expiry's cause,
    // whatever else the storage shows.
    if let Some(drop) = j.ack_drop_hurting().filter(|_| failing) {
        what.push_str(&format!("; {}", drop.sentence()));
        next_step = crate::state::ack_drops::NEXT_STEP.to_string();
    }
    let runbook_url = worst.and_then(|a| a.annotations.get("runbook_url").map(|t| t.to_string()));
    Some(Answer { what, where_, culprit, class, next_step, runbook_url })
}

/// Whether an alert is about the checkpoint storage: the built-in `FlinkCheckpointStorage*` and
/// `FlinkCheckpointMetadataNearFrameSize`, and rules of one's own named alike.
fn is_storage_alert(name: &str) -> bool {
    name.contains("Storage") || name.contains("Metadata")
}

/// The next step when the storage is where the evidence points.
fn storage_step(alert: Option<&str>, s: &crate::state::storage::JobStorageState) -> String {
    let throttled = alert.is_some_and(|a| a.contains("Throttled")) || (alert.is_none() && s.throttled > 0);
    let orphans = s.listing().is_some_and(|l| !l.orphans.is_empty());
    let slow = alert.is_none() && crate::health::storage::slow_storage(s).is_some();
    let metadata = alert.is_some_and(|a| a.contains("Metadata"))
        || (alert.is_none() && !orphans && (!slow || crate::health::storage::metadata_points_there(s)));
    if throttled {
        "The checkpoint storage throttles (503 SlowDown): spread the checkpoint keys over more prefixes \
         (s3.entropy.key), ask for a higher request rate, or checkpoint less often; compare every subtask's \
         upload rate in `checkpoint-sentinel diagnose`."
            .to_string()
    } else if slow && !metadata {
        "Every subtask uploads its state slowly alike: the checkpoint storage's throughput. Look at the \
         storage's latency and error rate and the network from the TaskManagers to it, cut what each checkpoint \
         uploads (incremental checkpoints, fewer small files), and raise execution.checkpointing.timeout meanwhile."
            .to_string()
    } else if metadata {
        "Shrink what every checkpoint's acknowledgements carry: the union list state (make it keyed or plain list \
         state), state inlined below execution.checkpointing.data-inline-threshold; or raise pekko.framesize. \
         Past the frame size an acknowledgement is dropped and the checkpoint expires."
            .to_string()
    } else {
        "Delete the chk-N folders no retained or in-progress checkpoint holds (`checkpoint-sentinel diagnose` lists \
         them with their age) and the folders of cancelled jobs you will not restore from; read the JobManager log \
         around their checkpoint ids for why Flink did not discard them."
            .to_string()
    }
}

/// Whether the window's culprit is worth naming: it held a failed checkpoint up while
/// checkpoints fail, or it acknowledged last in most of the recent completed checkpoints (at
/// least three).
fn stands_out(w: &WindowCulprit, failing: bool) -> bool {
    match (w.held_up, w.last_in) {
        (Some(_), _) => failing,
        (None, Some((k, of))) => k >= 3 && k * 2 > of,
        (None, None) => false,
    }
}

fn class_of(label: &str) -> Option<Class> {
    match label {
        "blocking" => Some(Class::Blocking),
        "timeout" => Some(Class::Timeout),
        "failure" => Some(Class::Failure),
        "advice" => Some(Class::Advice),
        _ => None,
    }
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The one next step, by class, naming the subtask when one stands out.
fn next_step(
    class: Option<Class>,
    culprit: Option<&WindowCulprit>,
    job_state: bool,
    reasons: &[Reason],
) -> String {
    let who = culprit.map(|w| match &w.taskmanager {
        Some(tm) => format!("{} #{} (on {tm})", w.operator, w.subtask),
        None => format!("{} #{}", w.operator, w.subtask),
    });
    if reasons.iter().any(|r| matches!(r, Reason::Unreachable)) {
        return "Check that the JobManager is up and that the daemon reaches its REST address; until it \
                answers, what is shown is its last answer."
            .to_string();
    }
    match (class, who) {
        (Some(Class::Timeout), Some(who)) => format!(
            "See what {who} does while it snapshots: its TaskManager log and a thread dump during a \
             checkpoint, then its state size and the checkpoint storage's throughput. Raising the \
             timeout only hides it."
        ),
        (Some(Class::Timeout), None) => "No single subtask stands out: the TaskManagers' logs and a thread dump \
                                         during a checkpoint, then the state size and the checkpoint storage's \
                                         throughput. Raising the timeout only hides it."
            .to_string(),
        (Some(Class::Failure), Some(who)) if culprit.is_some_and(|w| w.role.held_it_up()) => format!(
            "Read the deepest \"Caused by:\" in the TaskManager log of {who} around checkpoint {} \
             (checkpoint-sentinel scan-logs classifies it){}.",
            culprit.map_or(0, |w| w.checkpoint_id),
            if job_state { ", and the job's exception history for why it fails over" } else { "" }
        ),
        (Some(Class::Failure), _) if job_state => "Read why the job fails over: the JobManager log and the job's \
                                                   exception history (Flink web UI, Exceptions)."
            .to_string(),
        (Some(Class::Failure), _) if reasons.iter().any(|r| matches!(r, Reason::Stalled { .. })) => {
            "Look at the JobManager: its log and a thread dump (a GC pause, overload or a stalled checkpoint \
             coordinator)."
                .to_string()
        }
        (Some(Class::Failure), _) => "Read the failure reasons of the checkpoints below and the deepest \"Caused \
                                      by:\" in the TaskManager logs (checkpoint-sentinel scan-logs classifies \
                                      them)."
            .to_string(),
        (Some(Class::Blocking), who) => format!(
            "Find where the backpressure starts: the busy and backpressured operators downstream of {} \
             (Flink web UI, BackPressure), and whether its input is skewed. Unaligned checkpoints let \
             barriers overtake the queued records.",
            who.unwrap_or_else(|| "the slowest subtasks".to_string())
        ),
        (Some(Class::Advice), _) => "Read the job's configuration advice (`checkpoint-sentinel advise`, or its advice \
                                     in the API): the keys to set and their predicted effect."
            .to_string(),
        (None, _) => "Wait for the first checkpoint; if none comes, check that checkpointing is enabled \
                      (execution.checkpointing.interval)."
            .to_string(),
    }
}

/// A job's health, its reasons and its answer: the one verdict the page, the API and `diagnose`
/// (through `commands::look`) render.
#[derive(Clone, Debug)]
pub(crate) struct JobVerdict {
    /// The level.
    pub(crate) health: Health,
    /// Why, worst first.
    pub(crate) reasons: Vec<Reason>,
    /// What is wrong, where, the class, the next step; `None` when ok.
    pub(crate) answer: Option<Answer>,
}

/// The verdict of job `job_id` of `cluster` under `alerts` ([`JobVerdict`]).
pub(crate) fn job_verdict(
    c: &ClusterState,
    cluster: &str,
    job_id: &str,
    j: &JobState,
    alerts: &crate::rules::AlertsView,
) -> JobVerdict {
    let (health, reasons) = crate::health::job_health(c, cluster, job_id, j, alerts);
    let of_job: Vec<&Alert> = alerts.of_job(cluster, job_id).collect();
    let answer = job_answer(c, job_id, j, (health, &reasons), &of_job);
    JobVerdict { health, reasons, answer }
}

/// One cluster's headline: how many of its jobs are not ok, and which is worst.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct ClusterHeadline {
    /// The cluster.
    pub(crate) cluster: String,
    /// The line, e.g. "demo: 3 of 5 jobs are not ok (1 critical, 1 warning, 1 pending); the
    /// worst is demo-failing-4".
    pub(crate) text: String,
    /// The worst job's id, when one is not ok: its row (first of the cluster's in `jobs`)
    /// carries its answer.
    pub(crate) worst_job_id: Option<String>,
    /// The other lane, on its own line: "3 jobs have configuration advice"; `null` when none
    /// has. Advice never counts in `text`.
    pub(crate) advice: Option<String>,
}

/// The headline of `cluster`, from its jobs' (id, name, health), worst first, and how many of
/// them have configuration advice.
pub(crate) fn cluster_headline(
    cluster: &str,
    reachable: bool,
    jobs: &[(&str, &str, Health)],
    with_advice: usize,
) -> ClusterHeadline {
    let not_ok: Vec<&(&str, &str, Health)> = jobs.iter().filter(|(_, _, h)| *h != Health::Ok).collect();
    let n = jobs.len();
    let worst = not_ok.first();
    let text = if !reachable {
        format!("{cluster}: the JobManager does not answer; what is shown is from its last answer")
    } else if n == 0 {
        format!("{cluster}: no jobs yet")
    } else if let Some((_, name, _)) = worst {
        let mut levels: Vec<String> = Vec::new();
        for level in [Health::Critical, Health::Warning, Health::Pending, Health::Unknown] {
            let k = not_ok.iter().filter(|(_, _, h)| *h == level).count();
            if k > 0 {
                levels.push(format!("{k} {}", health_word(level)));
            }
        }
        let levels = levels.join(", ");
        match (n, not_ok.len()) {
            (1, _) => format!("{cluster}: its one job, {name}, is not ok ({levels})"),
            (_, 1) => format!("{cluster}: 1 of {n} jobs is not ok ({levels}): {name}"),
            (_, k) => format!("{cluster}: {k} of {n} jobs are not ok ({levels}); the worst is {name}"),
        }
    } else if n == 1 {
        format!("{cluster}: its one job is ok")
    } else {
        format!("{cluster}: all {n} jobs are ok")
    };
    ClusterHeadline {
        cluster: cluster.to_string(),
        text,
        worst_job_id: worst.map(|(id, _, _)| id.to_string()),
        advice: crate::health::advice_line(with_advice),
    }
}

fn health_word(h: Health) -> &'static str {
    match h {
        Health::Critical => "critical",
        Health::Warning => "warning",
        Health::Pending => "pending",
        Health::Unknown => "unknown",
        Health::Ok => "ok",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::storage::{JobStorageState, SubtaskUpload, UploadSpread};

    fn spread(siblings_median: f64, async_share: f64) -> UploadSpread {
        UploadSpread {
            checkpoint_id: 7,
            completed: false,
            rated: 4,
            slowest: SubtaskUpload {
                operator: "window".into(),
                index: 0,
                rate: 100_000.0,
                bytes: 1 << 20,
                async_ms: 10_000,
            },
            siblings_median: Some(siblings_median),
            async_share,
        }
    }

    /// Issue 40: slow uploads on every subtask make the storage's throughput the next step; one
    /// slow subtask, or an upload that was a small part of the checkpoint, do not.
    #[test]
    fn slow_uploads_on_every_subtask_ask_for_the_storages_throughput() {
        let s = JobStorageState { upload: Some(spread(110_000.0, 0.8)), ..Default::default() };
        assert!(storage_step(None, &s).starts_with("Every subtask uploads its state slowly alike"));
        // A throttling alert still says throttling first.
        assert!(
            storage_step(Some("FlinkCheckpointStorageThrottled"), &s)
                .starts_with("The checkpoint storage throttles")
        );
        for other in [spread(2_000_000.0, 0.8), spread(110_000.0, 0.2)] {
            let s = JobStorageState { upload: Some(other), ..Default::default() };
            assert!(crate::health::storage::slow_storage(&s).is_none());
            assert!(!storage_step(None, &s).starts_with("Every subtask"));
        }
    }
}
