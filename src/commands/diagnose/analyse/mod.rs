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
use lines::{blocking, config_line, failures, load, pending, recent, top_subtasks, upload};
use shadow::shadow_view;

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

/// The diagnosis of one job (pure): the details of what was fetched, under the verdict and
/// headline the daemon's pipeline gave it (`judged`).
pub(crate) fn analyse(d: &JobData, judged: Judged) -> JobReport {
    use super::headline::{failover, restarts};
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
    // Recovered (the daemon's answer: every checkpoint since its latest restart completed, its
    // restore over), the failover is a detail.
    let recovered = super::headline::recovered(&view, &restarts, judged.recovered);
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
    if let Some((_, _, sample, frame)) = &in_user_code {
        next.insert(0, held_next_step(sample, frame));
    }
    let next = if next.is_empty() { vec![nothing_found_next(judged.verdict)] } else { next };
    let failover = failover(&view, &restarts);
    JobReport {
        job_id: d.job_id.clone(),
        name: d.name.clone(),
        state: d.state.clone(),
        verdict: judged.verdict,
        verdict_reasons: judged.reasons,
        advice: super::report::advice_of(d),
        headline: judged.headline,
        failover: failover.map(|f| match recovered {
            Some(r) => format!("{f}; {}", r.sentence()),
            None => f,
        }),
        taskmanager: job.single_tm.clone(),
        config: job.settings.as_ref().map(config_line),
        counts: [counts.completed, counts.failed, counts.in_progress, counts.restored],
        restarts_metric: d.status_metrics.as_ref().and_then(|m| m.restarts),
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
        storage: upload(&job),
    }
}
