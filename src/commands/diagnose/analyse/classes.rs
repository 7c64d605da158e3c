//! The failure classes (failure, timeout, blocking), most important first, with their evidence,
//! and the subtask to look at.

use crate::health::Outcome;
use crate::health::culprit;
use crate::observe::{CheckpointStatus, FinishedCheckpoint, SubtaskCheckpoint};
use crate::rules::Class;
use crate::time::human_ms;

use super::job::{Job, dominant};
use crate::commands::diagnose::report::*;

/// The failure classes: failure (an error), timeout (a slow snapshot), blocking (barriers
/// stuck), most important first.
pub(super) fn classes(
    job: &Job<'_>,
    failures: &[FailureLine],
    top_alignment: &[SubtaskStat],
    top_start_delay: &[SubtaskStat],
) -> Vec<ClassFinding> {
    let mut classes: Vec<ClassFinding> = Vec::new();
    classes.extend(failure_class(failures));
    classes.extend(expiry_class(job));
    slow_barrier_class(job, top_alignment, top_start_delay, &mut classes);
    classes
}

/// `failure`: checkpoints that failed with an error.
fn failure_class(failures: &[FailureLine]) -> Option<ClassFinding> {
    let errors: Vec<&FailureLine> = failures.iter().filter(|f| f.outcome != Outcome::Expired).collect();
    let f = errors.first()?;
    Some(ClassFinding {
        class: Class::Failure,
        evidence: format!(
            "{} checkpoint(s) failed with an error, e.g. {}: {}",
            errors.len(),
            f.id,
            f.reason.as_deref().unwrap_or("no message")
        ),
    })
}

/// `timeout` or `blocking` for expired checkpoints: what the subtasks that held them up were
/// doing.
fn expiry_class(job: &Job<'_>) -> Option<ClassFinding> {
    let expired: Vec<&FinishedCheckpoint> =
        job.d.finished.iter().filter(|cp| Outcome::of_checkpoint(cp) == Outcome::Expired).collect();
    if expired.is_empty() {
        return None;
    }
    let (mut snapshot, mut barrier, mut unknown, mut no_details) = (0, 0, 0, 0);
    for cp in &expired {
        let holders: Vec<&SubtaskCheckpoint> = culprit::held_up(cp).map(|(_, st)| st).collect();
        if holders.is_empty() {
            unknown += 1;
        }
        if cp.operators.is_empty() {
            no_details += 1;
        }
        for st in holders {
            match dominant(st).0 {
                "sync" | "async" => snapshot += 1,
                "alignment" | "start delay" => barrier += 1,
                _ => unknown += 1,
            }
        }
    }
    let n = expired.len();
    let t = job.timeout.map_or("the timeout".to_string(), human_ms);
    if snapshot >= barrier && snapshot > 0 {
        Some(ClassFinding {
            class: Class::Timeout,
            evidence: format!(
                "{n} checkpoint(s) expired at {t}; the subtasks that held them were in their snapshot (sync/async) phase, not waiting for barriers"
            ),
        })
    } else if barrier > 0 {
        Some(ClassFinding {
            class: Class::Blocking,
            evidence: format!(
                "{n} checkpoint(s) expired at {t}; the subtasks that held them were waiting for barriers (alignment/start delay)"
            ),
        })
    } else if unknown > 0 {
        Some(ClassFinding {
            class: Class::Timeout,
            evidence: format!(
                "{n} checkpoint(s) expired at {t}; {}, so blocking cannot be told from a slow snapshot",
                if no_details == n {
                    "Flink no longer has their per-subtask details"
                } else {
                    "the subtasks that held them never acknowledged, so Flink reports none of their phases"
                }
            ),
        })
    } else {
        None
    }
}

/// Barriers slow to get through (alignment or start delay over half the interval): blocking,
/// unless a timeout explains it. Alignment is the cause when both are long (downstream start
/// delay follows from it).
fn slow_barrier_class(
    job: &Job<'_>,
    top_alignment: &[SubtaskStat],
    top_start_delay: &[SubtaskStat],
    classes: &mut Vec<ClassFinding>,
) {
    let Some(iv) = job.interval else { return };
    let half = |s: &&SubtaskStat| s.value_ms * 2 > iv;
    let what = match (top_alignment.first().filter(half), top_start_delay.first().filter(half)) {
        (Some(a), _) => format!("alignment {}", human_ms(a.value_ms)),
        (None, Some(s)) => format!("start delay {}", human_ms(s.value_ms)),
        (None, None) => return,
    };
    if let Some(timeout_finding) = classes.iter_mut().find(|c| c.class == Class::Timeout) {
        // A task thread stuck in a long synchronous snapshot takes the next barrier late too.
        timeout_finding.evidence.push_str(&format!(
            "; the {what} (over half the {} interval) of the checkpoints after them is the same task \
             thread still busy in that snapshot",
            human_ms(iv)
        ));
    } else if !classes.iter().any(|c| c.class == Class::Blocking) {
        classes.push(ClassFinding {
            class: Class::Blocking,
            evidence: format!(
                "barriers are slow to get through: {what} is over half the {} interval",
                human_ms(iv)
            ),
        });
    }
}

/// The subtask to look at: the one that alone held the newest failed checkpoint up, else the
/// bottleneck, else the one that most often acknowledged last.
pub(super) fn holder(
    job: &Job<'_>,
    bottleneck: Option<&(String, u32)>,
    blocking: &[Blocking],
) -> Option<(String, u32)> {
    job.d
        .finished
        .iter()
        .find(|cp| cp.status == CheckpointStatus::Failed)
        .and_then(culprit::sole_holder)
        .map(|(op, st)| (op.name.clone(), st.index))
        .or(bottleneck.cloned())
        .or_else(|| blocking.first().map(|b| (b.operator.clone(), b.subtask)))
}
