//! `diagnose`'s analysis (pure): a job's fetched data to a [`JobReport`] — statuses, failures,
//! the subtasks that held checkpoints up and their TaskManagers, the failure class, likely causes
//! with the page that explains them, the shadow's explanation of the spacing, what to check next.
//!
//! `mod.rs` puts the report together; `job.rs` is what every finding reads, `lines.rs` what was
//! seen (statuses, failures, pending and slow subtasks, load), `classes.rs` the failure class and
//! the subtask to look at, `causes.rs` likely causes and next steps, `shadow.rs` the model's view.

mod causes;
mod classes;
mod job;
mod lines;
mod shadow;

use causes::{causes_and_next, nothing_found_next};
use classes::{classes, holder};
use job::Job;
use lines::{blocking, config_line, failures, load, pending, recent, top_subtasks};
use shadow::shadow_view;

use crate::health::{Snapshot, snapshot_verdict};
use crate::observe::FinishedCheckpoint;
use crate::rules::Class;
use crate::sources::flink::convert;

use crate::commands::diagnose::report::*;

/// A checkpoint in progress is held, not merely under way, once it has run this long and
/// twice as long as any recent completed one: a healthy job caught mid-checkpoint has its
/// threads in user code too (a source's throttle, a map), for a few milliseconds.
const HELD_AT_LEAST_MS: u64 = 1_000;

/// The thread sample of a checkpoint still in progress, held past [`HELD_AT_LEAST_MS`] and
/// twice the longest recent completed checkpoint, whose task thread sits in the user's code:
/// (checkpoint id, its age in ms, the sample, the user's frame).
fn held_in_user_code<'a>(
    d: &'a JobData,
    recent: &[CheckpointLine],
) -> Option<(u64, u64, &'a crate::observe::ThreadSample, &'a crate::observe::Frame)> {
    let sample = d.blocked_thread.as_ref()?;
    let frame = sample.user()?;
    let age = recent
        .iter()
        .find(|r| r.id == sample.checkpoint_id && r.status == "IN_PROGRESS")
        .and_then(|r| r.took_ms)?;
    let longest = recent.iter().filter(|r| r.status == "COMPLETED").filter_map(|r| r.took_ms).max();
    let held = age >= HELD_AT_LEAST_MS && longest.is_none_or(|l| age >= 2 * l);
    held.then_some((sample.checkpoint_id, age, sample, frame))
}

/// The next step when a task thread sits in the user's code: that code.
fn held_next_step(sample: &crate::observe::ThreadSample, frame: &crate::observe::Frame) -> String {
    format!(
        "the code at {}: it holds the task thread of {} #{}, and the checkpoint's barrier waits behind it \
         (move blocking calls off the task thread: Async I/O, or a timer)",
        frame.text(),
        sample.operator,
        sample.subtask
    )
}

/// The diagnosis of one job (pure).
pub fn analyse(d: &JobData) -> JobReport {
    use super::headline::{Finding, failover, restarts, verdict_headline};
    let job = Job::new(d);
    let counts = d.stats.counts.as_ref().map(convert::counts).unwrap_or_default();
    let recent = recent(d);
    let failures = failures(&job);
    let top_alignment = top_subtasks(&job, |s| s.alignment_ms);
    let top_start_delay = top_subtasks(&job, |s| s.start_delay_ms);
    let blocking = blocking(&job);
    let (load, bottleneck) = load(&job);
    let view = super::headline::Job { d, settings: job.settings.as_ref() };
    let restarts = restarts(&view);
    let (mut spacing, alignment_view) = shadow_view(&job, counts, &restarts);
    let classes = classes(&job, &failures, &top_alignment, &top_start_delay);
    let in_user_code = held_in_user_code(d, &recent);
    // The alignment engine's view matters when barriers are what is slow.
    if classes.iter().any(|c| c.class == Class::Blocking) {
        spacing.extend(alignment_view);
    }
    // A job that completed every checkpoint since its latest restart is judged on those: the
    // failures before the restart are history, the restart a detail.
    let recovered = super::headline::recovered(&view, &restarts);
    let since_restart: Vec<FinishedCheckpoint>;
    let finished = match recovered {
        Some(r) => {
            since_restart = d.finished.iter().filter(|c| c.triggered_at >= r.restart).cloned().collect();
            &since_restart
        }
        None => &d.finished,
    };
    let (verdict, reasons) = snapshot_verdict(&Snapshot {
        state: &d.state,
        finished,
        completed_total: counts.completed,
        interval_ms: job.interval,
        timeout_ms: job.timeout,
        oldest_in_progress_ms: recent
            .iter()
            .filter(|r| r.status == "IN_PROGRESS")
            .filter_map(|r| r.took_ms)
            .max(),
        top_alignment_ms: top_alignment.first().map(|a| a.value_ms),
        top_start_delay_ms: top_start_delay.first().map(|s| s.value_ms),
        held_in_user_code: in_user_code.as_ref().map(|(id, age, sample, frame)| {
            (*id, *age, format!("{} #{}", sample.operator, sample.subtask), frame.method_text())
        }),
    });
    let mut classes = classes;
    let mut held_by = holder(&job, bottleneck.as_ref(), &blocking);
    // A thread in the user's code holds the checkpoint up: that is where, and it blocks.
    if let Some((_, _, sample, _)) = &in_user_code {
        held_by = held_by.or_else(|| Some((sample.operator.clone(), sample.subtask)));
        if classes.is_empty() {
            classes.push(ClassFinding {
                class: Class::Blocking,
                evidence: format!(
                    "the task thread of {} #{} is in user code while a checkpoint waits on it",
                    sample.operator, sample.subtask
                ),
            });
        }
    }
    let holder = held_by.as_ref().map(|(op, st)| job.located(op, *st));
    let (causes, mut next) =
        causes_and_next(&job, &classes, &failures, &top_alignment, bottleneck.is_some(), holder);
    let held_next = in_user_code.as_ref().map(|(_, _, sample, frame)| held_next_step(sample, frame));
    if let Some(step) = &held_next {
        next.insert(0, step.clone());
    }
    let next = if next.is_empty() { vec![nothing_found_next(verdict)] } else { next };
    let failover = failover(&view, &restarts);
    let mut headline = verdict_headline(&Finding {
        job: &view,
        verdict,
        reasons: &reasons,
        // Recovered, the failover is a detail of the report, not the headline.
        failover: failover.as_deref().filter(|_| recovered.is_none()),
        class: classes.first().map(|c| c.class),
        held_by: held_by.as_ref().map(|(op, st)| job.located_with_taskmanager(op, *st)),
    });
    // When the held thread is the answer, its next step is the user's code, not backpressure.
    if let (Some(h), Some(step), Some(crate::health::VerdictReason::HeldByUserCode { .. })) =
        (headline.as_mut(), held_next, reasons.first())
    {
        h.next_step = step;
        h.doc_url = Some(crate::health::links::RUNBOOK_BLOCKED.url);
    }
    JobReport {
        job_id: d.job_id.clone(),
        name: d.name.clone(),
        state: d.state.clone(),
        verdict,
        verdict_reasons: reasons.iter().map(ToString::to_string).collect(),
        advice: super::report::advice_of(d),
        headline,
        failover: failover.map(|f| match recovered {
            Some(r) => format!("{f}; {}", r.sentence()),
            None => f,
        }),
        taskmanager: job.single_tm.clone(),
        config: job.settings.as_ref().map(config_line),
        counts: [counts.completed, counts.failed, counts.in_progress, counts.restored],
        pending: pending(&job),
        blocked_thread: d.blocked_thread.as_ref().map(super::blocked::line),
        recent,
        failures,
        top_alignment,
        top_start_delay,
        blocking,
        load,
        classes,
        causes,
        spacing,
        next,
        evidence: None,
    }
}
