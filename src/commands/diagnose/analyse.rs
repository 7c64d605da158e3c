//! `diagnose`'s analysis (pure): a job's fetched data to a [`JobReport`] — statuses, failures,
//! the subtasks that held checkpoints up and their TaskManagers, the failure class, likely causes
//! with the page that explains them, the shadow's explanation of the spacing, what to check next.

use std::collections::BTreeMap;

use crate::health::Outcome;
use crate::health::culprit;
use crate::model::coordinator::CoordinatorConfig;
use crate::model::replay::replay;
use crate::observe::{
    CheckpointSettings, CheckpointStatus, FinishedCheckpoint, JobKey, JobPoll, JobStatus, SnapshotKind,
    SubtaskCheckpoint,
};
use crate::rules::Class;
use crate::shadow::Shadow;
use crate::sources::flink::convert::merge_history;
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;
use crate::time::human_ms;

use super::headline::Restarts;
use super::report::*;

use crate::health::links::{
    BACK_PRESSURE, CONFIGURATION, Doc, LARGE_STATE, MONITORING, RUNBOOK_FAILURES, RUNBOOK_TOLERANCE,
    UNDER_BACKPRESSURE,
};

/// A load ratio at or over which a vertex counts as backpressured.
const BACKPRESSURED: f64 = 0.5;
/// A busy ratio at or over which a subtask downstream of a backpressured vertex is its bottleneck.
const BUSY: f64 = 0.8;

/// The phase of a subtask that took longest: (name, ms), `("unknown", 0)` when none is known.
fn dominant(st: &SubtaskCheckpoint) -> (&'static str, u64) {
    culprit::dominant_phase(culprit::phases(st)).unwrap_or(("unknown", 0))
}

/// The lower median, `None` when there is nothing to take it of.
fn median(v: Vec<u64>) -> Option<u64> {
    (!v.is_empty()).then(|| crate::model::replay::median(v))
}

/// What every finding reads: the fetched data, the settings, and where each subtask runs.
struct Job<'a> {
    d: &'a JobData,
    settings: Option<CheckpointSettings>,
    interval: Option<u64>,
    timeout: Option<u64>,
    /// Vertex id by operator name.
    vertex_of: BTreeMap<&'a str, &'a str>,
    /// The one TaskManager every subtask runs on, if there is one (then said once, not on every
    /// line).
    single_tm: Option<Location>,
}

impl<'a> Job<'a> {
    fn new(d: &'a JobData) -> Self {
        let settings = d.config.as_ref().map(convert::settings);
        let vertex_of = d
            .details
            .iter()
            .flat_map(|j| {
                j.vertices.iter().map(|v| (v.name.as_deref().unwrap_or(v.id.as_str()), v.id.as_str()))
            })
            .collect();
        let distinct: std::collections::BTreeSet<&Location> = d.locations.values().collect();
        let single_tm = match distinct.into_iter().collect::<Vec<_>>().as_slice() {
            [only] => Some((*only).clone()),
            _ => None,
        };
        Job {
            d,
            interval: settings.as_ref().and_then(|s| s.interval_ms),
            timeout: settings.as_ref().and_then(|s| s.timeout_ms),
            settings,
            vertex_of,
            single_tm,
        }
    }

    /// Where a subtask runs, when the REST API said.
    fn location(&self, operator: &str, subtask: u32) -> Option<Location> {
        self.vertex_of
            .get(operator)
            .and_then(|vid| self.d.locations.get(&(vid.to_string(), subtask)))
            .cloned()
    }

    /// `operator #n`, with its TaskManager unless every subtask runs on the same one.
    fn located(&self, operator: &str, subtask: u32) -> String {
        match (self.location(operator, subtask), &self.single_tm) {
            (Some(_), Some(_)) => format!("{operator} #{subtask}"),
            (Some(l), None) => format!("{operator} #{subtask} on {}", l.text()),
            (None, _) => format!("{operator} #{subtask} (TaskManager unknown: the REST API did not name it)"),
        }
    }

    /// The finished checkpoints with per-subtask details, savepoints left out (triggered by
    /// hand, other rules).
    fn with_details(&self) -> Vec<&'a FinishedCheckpoint> {
        self.d
            .finished
            .iter()
            .filter(|cp| !cp.operators.is_empty() && cp.kind != SnapshotKind::Savepoint)
            .collect()
    }
}

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
pub fn analyse(d: &JobData, judged: Judged) -> JobReport {
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
    // Recovered (every checkpoint since its latest restart completed), the failover is a detail.
    let recovered = super::headline::recovered(&view, &restarts);
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

/// Whether checkpoints are aligned or unaligned, as the config line says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alignment {
    Aligned,
    Unaligned,
}

impl Alignment {
    fn of(s: &CheckpointSettings) -> Alignment {
        if s.unaligned { Alignment::Unaligned } else { Alignment::Aligned }
    }

    fn as_str(self) -> &'static str {
        match self {
            Alignment::Aligned => "aligned",
            Alignment::Unaligned => "unaligned",
        }
    }
}

/// The checkpoint configuration in one line.
fn config_line(s: &CheckpointSettings) -> String {
    format!(
        "{}, interval {}, timeout {}, min pause {}, max concurrent {}, tolerable failures {}, {}{}",
        if s.exactly_once { "exactly once" } else { "at least once" },
        s.interval_ms.map_or("off".into(), human_ms),
        s.timeout_ms.map_or("?".into(), human_ms),
        human_ms(s.min_pause_ms),
        s.max_concurrent,
        s.tolerable_failures.map_or("?".into(), |n| n.to_string()),
        Alignment::of(s).as_str(),
        s.state_backend.as_deref().map_or(String::new(), |b| format!(", {b}")),
    )
}

/// Recent statuses, newest first.
fn recent(d: &JobData) -> Vec<CheckpointLine> {
    let mut history: Vec<&dto::CheckpointStatistics> = d.stats.history.iter().collect();
    history.sort_by_key(|c| std::cmp::Reverse(c.id));
    history
        .iter()
        .map(|cp| {
            // Only the newest `--checkpoints` were fetched in detail; an older finished entry of
            // the history still has its own outcome and end, not an age as if it were in progress.
            let finished =
                d.finished.iter().find(|f| f.id == cp.id).cloned().or_else(|| convert::finished(cp, &[]));
            let status = match &finished {
                Some(f) => Outcome::of_checkpoint(f).as_str().to_uppercase(),
                None => cp.status.clone().unwrap_or_default().to_uppercase(),
            };
            let took_ms = match &finished {
                Some(f) => Some(f.finished_at.since(f.triggered_at)),
                None => cp.trigger_timestamp.map(|t| d.fetched_at.since(Timestamp(t))),
            };
            CheckpointLine {
                id: cp.id,
                status,
                savepoint: cp.is_savepoint == Some(true),
                triggered_at_ms: cp.trigger_timestamp,
                took_ms,
                size_bytes: cp.checkpointed_size.or(cp.state_size).and_then(|s| u64::try_from(s).ok()),
                acknowledged: (cp.num_acknowledged_subtasks.unwrap_or(0), cp.num_subtasks.unwrap_or(0)),
            }
        })
        .collect()
}

/// Failures: what held them up or ended them, in one sentence each.
fn failures(job: &Job<'_>) -> Vec<FailureLine> {
    job.d
        .finished
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Failed)
        .map(|cp| failure(job, cp))
        .collect()
}

fn failure(job: &Job<'_>, cp: &FinishedCheckpoint) -> FailureLine {
    let after = cp.finished_at.since(cp.triggered_at);
    let mut held_by = Vec::new();
    let mut never = Vec::new();
    let mut late = Vec::new();
    let mut total = 0u32;
    for (op, st) in culprit::subtasks(cp) {
        total += 1;
        if !culprit::held(cp, st) {
            continue;
        }
        if !st.acknowledged {
            held_by.push(format!("{} never acknowledged", job.located(&op.name, st.index)));
            never.push((op.name.as_str(), st.index));
        } else if let Some(e2e) = st.end_to_end_ms {
            let (phase, ms) = dominant(st);
            let text = format!(
                "{} acknowledged {} after the trigger, {} too late; its {phase} took {}",
                job.located(&op.name, st.index),
                human_ms(e2e),
                human_ms(e2e - after),
                human_ms(ms)
            );
            held_by.push(text.clone());
            late.push(text);
        }
    }
    let outcome = Outcome::of_checkpoint(cp);
    // An expiry is held up by the late subtasks too; after an error, a subtask that
    // acknowledged a moment later was not what ended it.
    let late_counts = if outcome == Outcome::Expired { late.len() as u32 } else { 0 };
    let acknowledged = if total > 0 {
        (total - never.len() as u32 - late_counts, total)
    } else {
        (cp.num_acknowledged, cp.num_subtasks)
    };
    let summary = failure_summary(outcome, acknowledged, total > 0, &never, &late, job);
    FailureLine {
        id: cp.id,
        outcome,
        after_ms: Some(after),
        reason: cp.failure_message.clone(),
        held_by,
        acknowledged,
        summary,
    }
}

/// Subtasks not acknowledged yet, one line per checkpoint in progress.
fn pending(job: &Job<'_>) -> Vec<String> {
    let names: BTreeMap<&str, &str> = job.vertex_of.iter().map(|(n, v)| (*v, *n)).collect();
    job.d
        .pending
        .iter()
        .map(|(id, vertices)| {
            let list: Vec<String> = vertices
                .iter()
                .flat_map(|(vid, subtasks)| {
                    let name = names.get(vid.as_str()).copied().unwrap_or(vid.as_str());
                    subtasks.iter().map(move |s| job.located(name, *s))
                })
                .collect();
            (id, list)
        })
        .filter(|(_, list)| !list.is_empty())
        .map(|(id, list)| format!("checkpoint {id} in progress: {} not acknowledged yet", some_of(&list)))
        .collect()
}

/// Whether a subtask's phase stands out: at least 100 ms and a tenth of the interval, and
/// twice its siblings' median or over half the interval.
fn stands_out(s: &SubtaskStat, interval: Option<u64>) -> bool {
    let floor = interval.map_or(100, |iv| (iv / 10).max(100));
    s.value_ms >= floor
        && (s.siblings_median_ms.is_none_or(|m| s.value_ms >= 2 * m.max(1))
            || interval.is_some_and(|iv| s.value_ms * 2 > iv))
}

/// The top three subtasks of a phase that stand out: per subtask its longest over the recent
/// checkpoints.
fn top_subtasks(job: &Job<'_>, phase: fn(&SubtaskCheckpoint) -> Option<u64>) -> Vec<SubtaskStat> {
    let mut best: BTreeMap<(String, u32), SubtaskStat> = BTreeMap::new();
    for cp in job.with_details() {
        for op in &cp.operators {
            for st in op.subtasks.iter().filter(|s| s.acknowledged) {
                let Some(v) = phase(st) else { continue };
                let key = (op.name.clone(), st.index);
                if best.get(&key).is_some_and(|b| b.value_ms >= v) {
                    continue;
                }
                let siblings = op.subtasks.iter().filter(|o| o.index != st.index).filter_map(phase).collect();
                best.insert(
                    key,
                    SubtaskStat {
                        operator: op.name.clone(),
                        subtask: st.index,
                        value_ms: v,
                        checkpoint_id: cp.id,
                        siblings_median_ms: median(siblings),
                        location: job.location(&op.name, st.index),
                    },
                );
            }
        }
    }
    let mut all: Vec<SubtaskStat> = best.into_values().filter(|s| stands_out(s, job.interval)).collect();
    all.sort_by_key(|s| std::cmp::Reverse(s.value_ms));
    all.truncate(3);
    all
}

/// Who acknowledged last in the completed checkpoints: the subtasks that did in at least a
/// third of them, when those take long enough to matter.
fn blocking(job: &Job<'_>) -> Vec<Blocking> {
    let completed: Vec<&FinishedCheckpoint> =
        job.with_details().into_iter().filter(|cp| cp.status == CheckpointStatus::Completed).collect();
    let mut last_ack: BTreeMap<(String, u32), (usize, &'static str)> = BTreeMap::new();
    for (op, st) in completed.iter().filter_map(|cp| culprit::last_acknowledger(cp)) {
        let e = last_ack.entry((op.name.clone(), st.index)).or_insert((0, "unknown"));
        e.0 += 1;
        e.1 = dominant(st).0;
    }
    let mut blocking: Vec<Blocking> = last_ack
        .into_iter()
        .map(|((operator, subtask), (times, dominant_phase))| Blocking {
            location: job.location(&operator, subtask),
            operator,
            subtask,
            times,
            of: completed.len(),
            dominant_phase,
        })
        .collect();
    blocking.sort_by_key(|b| std::cmp::Reverse(b.times));
    let slowest_completed = completed.iter().filter_map(|cp| cp.end_to_end_ms).max().unwrap_or(0);
    let matters = slowest_completed >= job.interval.map_or(1_000, |iv| (iv / 10).clamp(100, 1_000));
    blocking.retain(|b| matters && b.times * 3 >= b.of);
    blocking.truncate(3);
    blocking
}

/// Load: backpressured vertices and the busy subtasks downstream of them (the first of which is
/// the bottleneck).
fn load(job: &Job<'_>) -> (Vec<String>, Option<(String, u32)>) {
    let mut load = Vec::new();
    let mut bottleneck: Option<(String, u32)> = None;
    let Some(report) = &job.d.load else { return (load, bottleneck) };
    let name_of = |vid: &str| {
        report
            .topology
            .as_ref()
            .and_then(|t| t.vertices.iter().find(|v| v.id == vid))
            .map_or(vid.to_string(), |v| v.name.clone())
    };
    let max_backpressure = |v: &crate::observe::VertexLoad| {
        v.subtasks.iter().filter_map(|s| s.backpressure_ratio).fold(0.0, f64::max)
    };
    for v in &report.vertices {
        let bp = max_backpressure(v);
        if bp >= BACKPRESSURED {
            load.push(format!("{} is backpressured {:.0} % of the time", name_of(&v.vertex_id), bp * 100.0));
        }
    }
    let Some(t) = &report.topology else { return (load, bottleneck) };
    for e in &t.edges {
        let up = report.vertices.iter().find(|v| v.vertex_id == e.from);
        let down = report.vertices.iter().find(|v| v.vertex_id == e.to);
        let (Some(up), Some(down)) = (up, down) else { continue };
        if max_backpressure(up) < BACKPRESSURED {
            continue;
        }
        let busy_and_free = |s: &&crate::observe::SubtaskLoad| {
            s.busy_ratio.unwrap_or(0.0) >= BUSY && s.backpressure_ratio.unwrap_or(0.0) < BACKPRESSURED
        };
        for s in down.subtasks.iter().filter(busy_and_free) {
            let busy = s.busy_ratio.unwrap_or(0.0);
            let siblings: Vec<String> = down
                .subtasks
                .iter()
                .filter(|o| o.index != s.index)
                .filter_map(|o| o.busy_ratio.map(|b| format!("#{} {:.0} %", o.index, b * 100.0)))
                .collect();
            let text = format!(
                "{} #{} is busy {:.0} % of the time (siblings: {}) while {} upstream waits on it: the bottleneck",
                name_of(&e.to),
                s.index,
                busy * 100.0,
                if siblings.is_empty() { "none".to_string() } else { siblings.join(", ") },
                name_of(&e.from)
            );
            if !load.contains(&text) {
                bottleneck.get_or_insert_with(|| (name_of(&e.to), s.index));
                load.push(text);
            }
        }
    }
    (load, bottleneck)
}

/// The shadow model over what was fetched: the spacing of the triggers (schedule, deviation,
/// contradictions), and apart its view of alignment (shown when barriers are what is slow).
fn shadow_view(
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

/// The failure classes: failure (an error), timeout (a slow snapshot), blocking (barriers
/// stuck), most important first.
fn classes(
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
fn holder(job: &Job<'_>, bottleneck: Option<&(String, u32)>, blocking: &[Blocking]) -> Option<(String, u32)> {
    job.d
        .finished
        .iter()
        .find(|cp| cp.status == CheckpointStatus::Failed)
        .and_then(culprit::sole_holder)
        .map(|(op, st)| (op.name.clone(), st.index))
        .or(bottleneck.cloned())
        .or_else(|| blocking.first().map(|b| (b.operator.clone(), b.subtask)))
}

fn cause(c: &str, doc: Doc) -> Cause {
    Cause { cause: c.to_string(), source: doc.title, url: doc.url }
}

/// Likely causes and the next thing to check, by class, then the spacing's own cause.
fn causes_and_next(
    job: &Job<'_>,
    classes: &[ClassFinding],
    failures: &[FailureLine],
    top_alignment: &[SubtaskStat],
    has_bottleneck: bool,
    holder: Option<String>,
) -> (Vec<Cause>, Vec<String>) {
    let mut causes = Vec::new();
    let mut next = Vec::new();
    for finding in classes {
        match finding.class {
            Class::Failure => failure_causes(failures, &mut causes, &mut next),
            Class::Timeout => timeout_causes(job, failures, holder.as_deref(), &mut causes, &mut next),
            Class::Blocking => {
                blocking_causes(job, top_alignment, has_bottleneck, holder.as_deref(), &mut causes, &mut next)
            }
            // Advice is not a failure class of a checkpoint: no cause to name here.
            Class::Advice => {}
        }
    }
    causes.extend(spacing_cause(job));
    (causes, next)
}

/// `failure`: the cause behind each error's message.
fn failure_causes(failures: &[FailureLine], causes: &mut Vec<Cause>, next: &mut Vec<String>) {
    for f in failures.iter().filter(|f| f.outcome != Outcome::Expired) {
        causes.push(failure_cause(f.reason.as_deref().unwrap_or("")));
    }
    causes.dedup_by(|a, b| a.cause == b.cause);
    next.push(
        "the TaskManager log around the failed checkpoint: the deepest `Caused by:` of its stack trace \
         (`checkpoint-sentinel scan-logs` on the JobManager and TaskManager logs classifies it)"
            .to_string(),
    );
}

/// `timeout`: the slow part of the snapshot, the state, and the subtask to look at.
fn timeout_causes(
    job: &Job<'_>,
    failures: &[FailureLine],
    holder: Option<&str>,
    causes: &mut Vec<Cause>,
    next: &mut Vec<String>,
) {
    let phase = failures
        .iter()
        .flat_map(|f| &f.held_by)
        .find_map(|h| ["sync", "async"].into_iter().find(|p| h.contains(&format!("its {p} took"))));
    match phase {
        Some("sync") => causes.push(cause(
            "the synchronous part of the snapshot is slow: the operator's snapshotState() (user code, a \
             blocking flush to an external system) or the state backend's synchronous part",
            MONITORING,
        )),
        _ => causes.push(cause(
            "writing the snapshot to checkpoint storage is slow: storage throughput or latency (HDFS/S3), \
             or a state that grew",
            LARGE_STATE,
        )),
    }
    causes.push(cause("state too large or growing without TTL, so every snapshot takes longer", LARGE_STATE));
    if job.settings.as_ref().and_then(|s| s.state_backend.as_deref()).is_some_and(|b| b.contains("RocksDB")) {
        causes.push(cause(
            "RocksDB without incremental checkpoints, or a small block cache / write buffer",
            LARGE_STATE,
        ));
    }
    match holder {
        Some(h) => next.push(format!(
            "what {h} does while it snapshots: its TaskManager log and a thread dump (jstack) during a checkpoint, \
             then its state size and the checkpoint storage's throughput; do not just raise the timeout \
             (Flink: Tuning Checkpoints and Large State)"
        )),
        None => next.push(
            "no single subtask stands out: the TaskManagers' logs and a thread dump (jstack) during a \
             checkpoint, then the state size and the checkpoint storage's throughput; do not just raise \
             the timeout (Flink: Tuning Checkpoints and Large State)"
                .to_string(),
        ),
    }
}

/// `blocking`: backpressure, skew, blocking user code, and what to compare.
fn blocking_causes(
    job: &Job<'_>,
    top_alignment: &[SubtaskStat],
    has_bottleneck: bool,
    holder: Option<&str>,
    causes: &mut Vec<Cause>,
    next: &mut Vec<String>,
) {
    causes.push(cause(
        "backpressure: barriers queue behind buffered records, so alignment and start delay grow together",
        UNDER_BACKPRESSURE,
    ));
    let skewed = top_alignment
        .first()
        .is_some_and(|a| a.siblings_median_ms.is_some_and(|m| a.value_ms > 4 * m.max(1)));
    if skewed || has_bottleneck {
        causes.push(cause(
            "data skew: one subtask (a hot key) lags its siblings and every checkpoint waits for it",
            BACK_PRESSURE,
        ));
    }
    causes.push(cause(
        "user code blocking the task thread (synchronous external calls, lock contention, heavy timers)",
        UNDER_BACKPRESSURE,
    ));
    if let Some(h) = holder {
        next.push(format!(
            "the records in/out and busy time of {h} against its siblings (key skew) and the backpressure of the \
             operators upstream of it (Web UI BackPressure tab or GET /jobs/{}/vertices/<id>/backpressure); \
             if its CPU is low while its input buffers are full, a thread dump",
            job.d.job_id
        ));
    }
    if job.settings.as_ref().is_some_and(|s| s.exactly_once && Alignment::of(s) == Alignment::Aligned) {
        next.push(
            "once skew and backpressure are addressed and alignment is still too long: unaligned checkpoints \
             (Flink: Checkpointing under backpressure)"
                .to_string(),
        );
    }
}

/// Checkpoints that come much later than the interval: min-pause or the concurrency limit.
fn spacing_cause(job: &Job<'_>) -> Option<Cause> {
    let iv = job.settings.as_ref()?.interval_ms?;
    let observed = median(observed_gaps(&job.d.stats))?;
    (observed > iv + iv / 2).then(|| {
        cause(
            &format!(
                "checkpoints come every {} although the interval is {}: min-pause or the concurrency limit holds the trigger",
                human_ms(observed),
                human_ms(iv)
            ),
            CONFIGURATION,
        )
    })
}

/// What to check when no class was found.
fn nothing_found_next(verdict: Verdict) -> String {
    if verdict == Verdict::Healthy {
        "nothing now; keep an eye on the P95 checkpoint duration against the timeout".into()
    } else {
        "the slowest phase in the recent checkpoints' details (Web UI Checkpoints → Details) and the TaskManager log of the \
         slowest subtask"
            .into()
    }
}

/// `a`, `a and b`, `a, b and c`, or the first three and how many more.
fn some_of(list: &[String]) -> String {
    match list {
        [] => "no subtask".into(),
        [one] => one.clone(),
        [init @ .., last] if list.len() <= 3 => format!("{} and {last}", init.join(", ")),
        _ => format!("{} and {} more", list[..3].join(", "), list.len() - 3),
    }
}

/// One sentence on a failed checkpoint: how many subtasks acknowledged in time, and the
/// subtasks that explain it (the late or missing ones of an expiry; the one that did not
/// acknowledge when an error ended it).
fn failure_summary(
    outcome: Outcome,
    (acked, total): (u32, u32),
    details: bool,
    never: &[(&str, u32)],
    late: &[String],
    job: &Job<'_>,
) -> String {
    if !details {
        return format!(
            "{acked} of {total} subtasks acknowledged; Flink no longer has its per-subtask details"
        );
    }
    let never_named: Vec<String> = never.iter().map(|(op, st)| job.located(op, *st)).collect();
    if outcome == Outcome::Expired {
        let mut parts: Vec<String> = late.to_vec();
        match never_named.len() {
            0 => {}
            1..=3 => parts.push(format!("{} never acknowledged", some_of(&never_named))),
            n => parts.push(format!("{n} subtasks never acknowledged ({})", per_operator(never))),
        }
        if parts.len() > 3 {
            let n = parts.len();
            parts.truncate(2);
            parts.push(format!("{} more", n - 2));
        }
        let holders = if parts.is_empty() { "no subtask was late".into() } else { parts.join("; ") };
        return format!("{acked} of {total} subtasks acknowledged in time; {holders}");
    }
    let head = format!("{acked} of {total} subtasks acknowledged");
    match never_named.as_slice() {
        [] => head,
        [one] if total > 1 => format!("{head}; the failure came from the one that did not, {one}"),
        [_] => format!("{head}; the failure came from its only subtask"),
        _ if acked == 0 => format!(
            "{head}; the error came before any subtask acknowledged, so no subtask was slow \
             (`scan-logs` names the task that threw it)"
        ),
        list if list.len() <= 3 => format!("{head}; not acknowledged: {}", some_of(list)),
        _ => format!("{head}; not acknowledged: {}", per_operator(never)),
    }
}

/// `2 of stateful-map, 4 of Sink`: subtasks counted per operator, in first-seen order.
fn per_operator(subtasks: &[(&str, u32)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (op, _) in subtasks {
        match counts.iter_mut().find(|(o, _)| o == op) {
            Some((_, n)) => *n += 1,
            None => counts.push((op, 1)),
        }
    }
    counts.iter().map(|(op, n)| format!("{n} of {op}")).collect::<Vec<_>>().join(", ")
}

fn observed_gaps(stats: &dto::CheckpointingStatistics) -> Vec<u64> {
    let mut t: Vec<i64> = stats
        .history
        .iter()
        .filter(|c| c.is_savepoint != Some(true))
        .filter_map(|c| c.trigger_timestamp)
        .collect();
    t.sort_unstable();
    t.windows(2).map(|w| (w[1] - w[0]).max(0) as u64).collect()
}

/// The likely cause behind a failure message, with the page that explains it.
fn failure_cause(message: &str) -> Cause {
    let table: [(&str, &str, Doc); 10] = [
        (
            "Failed to persist checkpoint metadata",
            "the checkpoint metadata storage is not writable (ZooKeeper, disk space, permissions)",
            RUNBOOK_FAILURES,
        ),
        (
            "Could not materialize checkpoint",
            "the state backend failed writing (e.g. an HDFS DataNode down)",
            RUNBOOK_FAILURES,
        ),
        (
            "Asynchronous task checkpoint failed",
            "the asynchronous part of a subtask's snapshot threw: writing the state to checkpoint storage \
             failed (Flink's `Could not materialize checkpoint`: storage unavailable, a full disk)",
            RUNBOOK_FAILURES,
        ),
        (
            "ClassCastException",
            "a state class that does not serialise, or a serializer changed by an upgrade",
            RUNBOOK_FAILURES,
        ),
        ("OutOfMemoryError", "a subtask ran out of memory", RUNBOOK_FAILURES),
        (
            "SocketTimeoutException",
            "the checkpoint storage client timed out (network, S3 throttling)",
            RUNBOOK_FAILURES,
        ),
        (
            "No space left on device",
            "a full disk (the `Stream is closed` that follows is a symptom)",
            RUNBOOK_FAILURES,
        ),
        (
            "Stream is closed",
            "the stream to checkpoint storage was closed underneath: look for a full disk or a closed connection",
            RUNBOOK_FAILURES,
        ),
        (
            "tolerable failure threshold",
            "the tolerable-failure budget is spent: the job fails over because of checkpoints",
            RUNBOOK_TOLERANCE,
        ),
        (
            "declined",
            "a subtask declined the checkpoint: a task failure (OOM, user code exception) or a task not ready",
            RUNBOOK_FAILURES,
        ),
    ];
    table
        .iter()
        .find(|(needle, _, _)| message.to_lowercase().contains(&needle.to_lowercase()))
        .map(|(_, cause, doc)| Cause { cause: (*cause).to_string(), source: doc.title, url: doc.url })
        .unwrap_or_else(|| Cause {
            cause: format!(
                "Flink says: {}; the stack trace in the TaskManager log names the cause",
                message.trim_end_matches('.')
            ),
            source: RUNBOOK_FAILURES.title,
            url: RUNBOOK_FAILURES.url,
        })
}
