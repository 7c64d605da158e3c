//! The shadow model over what `diagnose` fetched: the spacing of the triggers and, apart, its
//! view of alignment.

use crate::model::coordinator::CoordinatorConfig;
use crate::model::replay::replay;
use crate::observe::{CheckpointStatus, FinishedCheckpoint, JobKey, JobPoll, JobStatus};
use crate::shadow::Shadow;
use crate::sources::flink::convert;
use crate::sources::flink::convert::merge_history;
use crate::time::Timestamp;

use super::job::Job;
use crate::commands::diagnose::headline::Restarts;

/// The shadow model over what was fetched: the spacing of the triggers (schedule, deviation,
/// contradictions), and apart its view of alignment (shown when barriers are what is slow).
pub(super) fn shadow_view(
    job: &Job<'_>,
    counts: crate::observe::CheckpointCounts,
    restarts: &Restarts,
) -> (Vec<String>, Vec<String>) {
    let d = job.d;
    let mut spacing = Vec::new();
    let mut alignment_view = Vec::new();
    let Some(settings) = &job.settings else { return (spacing, alignment_view) };
    let mut shadow = Shadow::new();
    shadow.trigger.set_flink_version(d.flink_version.as_deref());
    if let Some(report) = &d.load {
        shadow.observe_load(report);
    }
    let mut ordered = d.finished.clone();
    ordered.sort_by_key(|cp| cp.id);
    let poll = |finished: Vec<FinishedCheckpoint>, polled_at: Timestamp, job_state: JobStatus| JobPoll {
        key: JobKey { cluster: "diagnose".into(), job_id: d.job_id.clone() },
        job_name: d.name.clone(),
        job_state,
        polled_at,
        // Flink's counts as they stood then: without the checkpoints that finished later.
        counts: counts_before(counts, &ordered, &finished),
        settings: Some(settings.clone()),
        in_progress: Vec::new(),
        finished,
        latest_restore: None,
        deferred: Default::default(),
    };
    // A restart between two checkpoints is told to the shadow as the daemon's poller sees it
    // (a poll that finds the job RESTARTING), so it explains that gap as the daemon does.
    // (Only with Flink's counts: the polls before carry them less what finished later.)
    for at in restarts.all().into_iter().filter(|_| d.stats.counts.is_some()) {
        let before: Vec<FinishedCheckpoint> =
            ordered.iter().filter(|c| c.finished_at <= at).cloned().collect();
        shadow.observe_poll(&poll(before.clone(), at, JobStatus::Running));
        shadow.observe_poll(&poll(before, at.plus_millis(1), JobStatus::Restarting));
    }
    let mut last = poll(ordered.clone(), d.fetched_at, d.state.clone());
    last.in_progress = convert::in_progress(&d.stats.history);
    shadow.observe_poll(&last);
    let ex = shadow.explanation();
    match (ex.schedule, CoordinatorConfig::from_settings(settings)) {
        (Some(s), _) => spacing.push(s),
        (None, Some(config)) => {
            let r = replay(config, &merge_history([&d.stats]));
            if r.rows.len() >= 2 {
                spacing.push(crate::commands::simulate::explain(
                    &r.config,
                    r.effective_interval_ms,
                    r.median_duration_ms,
                    r.binding,
                ));
            }
        }
        (None, None) => spacing.push("periodic checkpoints are off".into()),
    }
    spacing.extend(ex.last_unexplained.or(ex.last_deviation).map(|d| match restarts.inferred {
        Some((id, _)) if d.checkpoint_id == id => format!(
            "{} (inferred: the failed checkpoints before it continue a run older than the history Flink \
             keeps, and the gap is the restart's)",
            d.sentence
        ),
        _ => d.sentence,
    }));
    alignment_view.extend(ex.alignment);
    alignment_view.extend(ex.what_if);
    spacing.extend(ex.contradictions);
    (spacing, alignment_view)
}

/// Flink's counts without the checkpoints of `all` that `seen` leaves out (finished later).
fn counts_before(
    mut counts: crate::observe::CheckpointCounts,
    all: &[FinishedCheckpoint],
    seen: &[FinishedCheckpoint],
) -> crate::observe::CheckpointCounts {
    for later in all.iter().filter(|c| !seen.iter().any(|s| s.id == c.id)) {
        match later.status {
            CheckpointStatus::Completed => counts.completed = counts.completed.saturating_sub(1),
            CheckpointStatus::Failed => counts.failed = counts.failed.saturating_sub(1),
        }
    }
    if seen.len() < all.len() {
        counts.in_progress = 0;
    }
    counts
}
