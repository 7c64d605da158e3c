//! The JSON API under `/api/v1/` (documented in docs/api.md): pure functions from `State` and the
//! alerts view to serialisable structs; the thin axum handlers are in `http`.
//!
//! No I/O and no clock: the handler reads the time once and passes it in, like everywhere else
//! in the core. Every duration is in milliseconds (`_ms`), every time in epoch milliseconds
//! (`_at_ms`), as Flink reports them.

use std::collections::BTreeMap;

use crate::health::{Outcome, is_of_job, label};
use crate::observe::{CheckpointSettings, CheckpointStatus, LogEvent, LogKind, SnapshotKind};
use crate::rules::AlertsView;
use crate::rules::{Alert, AlertState};
use crate::state::{CheckpointRecord, ClusterState, JobState, Phase, PhaseHistograms, State};
use crate::stats::Summary;
use crate::time::Timestamp;

pub(crate) mod page;
mod views;
pub use views::*;

use page::ListQuery;

/// How many log events a job's detail lists (newest first).
pub(crate) const JOB_EVENTS: usize = 50;

/// `GET /api/v1/clusters`.
pub(crate) fn clusters(state: &State, alerts: &AlertsView, now: Timestamp) -> ClustersResponse {
    let clusters = state
        .clusters()
        .iter()
        .map(|(name, c)| {
            let health = if !c.reachable {
                Health::Unknown
            } else {
                c.jobs
                    .iter()
                    .filter(|(_, j)| j.listed)
                    .map(|(id, j)| job_health(c, name, id, j, alerts).0)
                    .min()
                    .unwrap_or(Health::Ok)
            };
            ClusterView {
                name: name.clone(),
                reachable: c.reachable,
                answered_once: c.answered_once,
                flink_version: c.flink_version.clone(),
                polls_total: c.polls_total,
                poll_errors: c.poll_errors.clone(),
                last_poll_duration_ms: c.last_poll_duration_ms,
                last_success_at_ms: c.last_success.map(Timestamp::millis),
                jobs: c.jobs.len(),
                health,
                root_causes: c.logs.root_causes.clone(),
            }
        })
        .collect();
    ClustersResponse { now_ms: now.millis(), clusters }
}

#[cfg(test)]
/// `GET /api/v1/jobs` with the defaults: the first [`page::DEFAULT_LIMIT`] jobs, worst first.
pub(crate) fn jobs(state: &State, alerts: &AlertsView, now: Timestamp) -> JobsResponse {
    let request = JobsRequest::of(&ListQuery::default()).expect("the default query is valid");
    jobs_page(state, alerts, now, &request)
}

/// A checked `/api/v1/jobs` query.
#[derive(Clone, Debug)]
pub(crate) struct JobsRequest {
    limit: usize,
    after: Option<String>,
    filter: page::JobFilter,
}

impl JobsRequest {
    /// The query string checked: a bad limit, cursor or health is an error naming it.
    pub(crate) fn of(query: &ListQuery) -> Result<Self, page::QueryError> {
        Ok(JobsRequest { limit: query.limit()?, after: query.cursor_key()?, filter: query.job_filter()? })
    }
}

/// `GET /api/v1/jobs`: the known jobs the filter keeps, worst first: by the severity of its
/// firing alerts, then its health, then by name (and cluster, job id); one page of them after
/// the cursor; a headline per cluster and the totals over every job. Only the page's jobs are
/// summarised: at 10,000 jobs a page of 500 is a twentieth of the work.
pub(crate) fn jobs_page(
    state: &State,
    alerts: &AlertsView,
    now: Timestamp,
    request: &JobsRequest,
) -> JobsResponse {
    const SEP: char = page::KEY_SEPARATOR;
    struct Row<'a> {
        key: String,
        cluster: &'a str,
        id: &'a str,
        c: &'a ClusterState,
        j: &'a JobState,
        health: Health,
    }
    let mut counts = page::HealthCounts::default();
    let mut total = 0;
    // Per cluster: (job id, name, health) of its listed jobs, and how many have advice.
    type Listed<'a> = Vec<(String, &'a str, &'a str, Health)>;
    let mut per_cluster: Vec<(&str, &ClusterState, Listed<'_>, usize)> = Vec::new();
    let mut rows: Vec<Row<'_>> = Vec::new();
    for (name, c) in state.clusters() {
        let mut listed = Vec::new();
        let mut with_advice = 0;
        for (id, j) in &c.jobs {
            let health = crate::health::job_health(c, name, id, j, alerts).0;
            total += 1;
            counts.add(health);
            let firing = alerts
                .of_job(name, id)
                .filter(|a| a.state == AlertState::Firing)
                .map(crate::health::alert_severity)
                .min()
                .map_or(3, |s| s as u8);
            let key = format!("{firing}{SEP}{}{SEP}{}{SEP}{name}{SEP}{id}", health as u8, j.name);
            if j.listed {
                listed.push((key.clone(), id.as_str(), j.name.as_str(), health));
                with_advice += usize::from(!crate::advice::job_risk_findings(j).is_empty());
            }
            if request.filter.keeps(name, j.job_state.as_str(), health, &j.name) {
                rows.push(Row { key, cluster: name, id, c, j, health });
            }
        }
        per_cluster.push((name, c, listed, with_advice));
    }
    rows.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    let (range, next_cursor) = page::page(&keys, request.after.as_deref(), request.limit);
    let jobs: Vec<JobSummaryView> = rows[range]
        .iter()
        .map(|r| {
            let view = job_summary(r.c, r.cluster, r.id, r.j, alerts, now);
            debug_assert_eq!(view.health, r.health, "one verdict");
            view
        })
        .collect();
    let headlines = per_cluster
        .into_iter()
        .map(|(name, c, mut listed, with_advice)| {
            // The worst first, as the jobs are listed, so the headline names the same job.
            listed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            let listed: Vec<(&str, &str, Health)> =
                listed.iter().map(|(_, id, n, h)| (*id, *n, *h)).collect();
            super::answer::cluster_headline(name, c.reachable, &listed, with_advice)
        })
        .collect();
    JobsResponse {
        now_ms: now.millis(),
        headlines,
        jobs,
        total,
        matched: rows.len(),
        counts,
        limit: request.limit,
        next_cursor,
    }
}

/// `GET /api/v1/alerts`: the pending and firing alerts by their labels, then the recently
/// resolved ones, oldest first; one page of them after the cursor (active ones first) and the
/// totals of both.
pub(crate) fn alerts_page(view: &AlertsView, query: &ListQuery) -> Result<AlertsResponse, page::QueryError> {
    let (limit, after) = (query.limit()?, query.cursor_key()?);
    const SEP: char = page::KEY_SEPARATOR;
    let labels = |a: &Alert| -> String {
        a.labels
            .iter()
            .map(|(k, v)| format!("{}\u{2}{}", k.as_str(), v.as_str()))
            .collect::<Vec<_>>()
            .join("\u{3}")
    };
    let mut items: Vec<(String, &Alert)> =
        view.active.iter().map(|a| (format!("0{SEP}{}", labels(a)), &**a)).collect();
    items.extend(view.resolved.iter().map(|a| {
        let at = a.resolved_at.map_or(0, Timestamp::millis).max(0);
        (format!("1{SEP}{at:020}{SEP}{}", labels(a)), a)
    }));
    items.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    items.dedup_by(|a, b| a.0 == b.0);
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    let (range, next_cursor) = page::page(&keys, after.as_deref(), limit);
    let (mut active, mut resolved) = (Vec::new(), Vec::new());
    for (key, alert) in &items[range] {
        if key.starts_with('0') {
            active.push(AlertView::from(*alert))
        } else {
            resolved.push(AlertView::from(*alert))
        }
    }
    Ok(AlertsResponse {
        active,
        resolved,
        total_active: view.active.len(),
        total_resolved: view.resolved.len(),
        limit,
        next_cursor,
    })
}

/// `GET /api/v1/incidents`: the incidents the rule loop found in its latest round (computed
/// once there, so the page, this answer, the alerts and `diagnose` say the same), each job
/// listed when `members` is asked for.
pub(crate) fn incidents(alerts: &AlertsView, members: bool, now: Timestamp) -> IncidentsResponse {
    let incidents = alerts
        .incidents
        .iter()
        .map(|i| {
            let mut i = i.clone();
            i.members.truncate(if members { crate::rules::incidents::MAX_LISTED } else { 0 });
            i
        })
        .collect();
    IncidentsResponse { now_ms: now.millis(), incidents }
}

/// `GET /api/v1/jobs/{cluster}/{job_id}`; `None` when the job is unknown.
pub fn job(
    state: &State,
    alerts: &AlertsView,
    cluster: &str,
    job_id: &str,
    now: Timestamp,
) -> Option<JobDetailView> {
    let c = state.clusters().get(cluster)?;
    let j = c.jobs.get(job_id)?;
    let summary = job_summary(c, cluster, job_id, j, alerts, now);
    let of_job = |a: &&Alert| is_of_job(a, cluster, job_id);
    let explanation = j.shadow.explanation();
    Some(JobDetailView {
        now_ms: now.millis(),
        settings: j.settings.as_ref().map(settings_view),
        phases: phase_quantiles(&j.phases),
        p95_history: j
            .p95_history
            .samples()
            .map(|s| P95Point {
                at_ms: s.at.millis(),
                p95_ms: PhaseValues {
                    end_to_end: s.p95_ms(Phase::EndToEnd),
                    start_delay: s.p95_ms(Phase::StartDelay),
                    alignment: s.p95_ms(Phase::Alignment),
                    sync: s.p95_ms(Phase::Sync),
                    async_: s.p95_ms(Phase::Async),
                },
            })
            .collect(),
        operators: j
            .operators
            .iter()
            .map(|(vid, op)| OperatorView {
                vertex_id: vid.clone(),
                name: op.name.clone(),
                p95_ms: p95s(&op.phases),
            })
            .collect(),
        checkpoints: j.recent.iter().map(|r| checkpoint_view(c, job_id, r)).collect(),
        slowest_in_window: super::answer::window_culprit(c, job_id, j),
        checkpoints_in_progress: j
            .in_progress
            .iter()
            .map(|p| InProgressView {
                id: p.id,
                triggered_at_ms: p.triggered_at.millis(),
                num_subtasks: p.num_subtasks,
                num_acknowledged: p.num_acknowledged,
                blocked_thread: j.threads.for_record(p.id).as_ref().map(blocked_thread_view),
            })
            .collect(),
        latest_restore: latest_restore_view(j),
        restores: RestoresView {
            from_checkpoint: j.restores.totals.checkpoint,
            from_savepoint: j.restores.totals.savepoint,
            recent: j.restores.recent.iter().rev().map(restore_view).collect(),
        },
        rescales: j.reported.rescales.recent.iter().map(|r| views::rescale_view(j, r)).collect(),
        shadow: ShadowView {
            explanation,
            deviations: j.shadow.trigger.deviations().cloned().collect(),
            deviation_counts: j
                .shadow
                .trigger
                .deviation_counts()
                .iter()
                .map(|(k, n)| (k.as_str(), *n))
                .collect(),
            trigger_deviation_p95_ms: j.trigger_deviation.summary().quantiles[1],
        },
        alerts: JobAlerts {
            active: alerts.of_job(cluster, job_id).map(AlertView::from).collect(),
            resolved: alerts.resolved.iter().rev().filter(of_job).map(AlertView::from).collect(),
        },
        events: {
            let jobs = jobs_by_checkpoint(&c.logs.recent);
            c.logs
                .recent
                .iter()
                .rev()
                .filter(|e| job_of(e, &jobs) == Some(job_id))
                .take(JOB_EVENTS)
                .map(|e| event_view(e, &jobs))
                .collect()
        },
        state_skew: c.evidence.skew.get(job_id).map(|s| s.operators.clone()).unwrap_or_default(),
        summary,
    })
}

/// `GET /api/v1/events`: the newest `limit` non-routine log events of every cluster.
pub(crate) fn events(state: &State, limit: usize, now: Timestamp) -> EventsResponse {
    let mut events: Vec<(usize, ClusterEvent)> = Vec::new();
    for (name, c) in state.clusters() {
        // Each cluster's ring is in file order; keep its newest `limit` and interleave by age.
        let jobs = jobs_by_checkpoint(&c.logs.recent);
        for (age, e) in c.logs.recent.iter().rev().take(limit).enumerate() {
            let job_id = job_of(e, &jobs).map(str::to_string);
            events.push((age, ClusterEvent { cluster: name.clone(), job_id, event: event_view(e, &jobs) }));
        }
    }
    events.sort_by_key(|(age, _)| *age);
    EventsResponse { now_ms: now.millis(), events: events.into_iter().take(limit).map(|(_, e)| e).collect() }
}

/// Per checkpoint id, what a cluster's recent events say about it: the jobs whose lines name it
/// and the (task, subtask) its TaskManager snapshot failures name (at most two of each kept:
/// only "exactly one" matters).
#[derive(Default)]
struct RingIndex<'a> {
    jobs: BTreeMap<u64, std::collections::BTreeSet<&'a str>>,
    tasks: BTreeMap<u64, std::collections::BTreeSet<(&'a str, Option<u32>)>>,
}

fn jobs_by_checkpoint<'a>(events: impl IntoIterator<Item = &'a LogEvent>) -> RingIndex<'a> {
    let mut index = RingIndex::default();
    for e in events {
        let Some(id) = e.checkpoint_id else { continue };
        if let Some(job) = e.job_id.as_deref() {
            let set = index.jobs.entry(id).or_default();
            if set.len() < 2 {
                set.insert(job);
            }
        }
        if let (Some(task), LogKind::AsyncSnapshotFailed | LogKind::SyncSnapshotFailed) =
            (e.task.as_deref(), &e.kind)
        {
            let set = index.tasks.entry(id).or_default();
            if set.len() < 2 {
                set.insert((task, e.subtask));
            }
        }
    }
    index
}

/// The job an event is about: its own, or for a TaskManager line (which names no job: "Could
/// not materialize checkpoint 3 for operator stateful-map (1/2)#0") the one job whose
/// JobManager lines name the same checkpoint id.
fn job_of<'a>(e: &'a LogEvent, ring: &RingIndex<'a>) -> Option<&'a str> {
    e.job_id.as_deref().or_else(|| {
        let set = ring.jobs.get(&e.checkpoint_id?)?;
        (set.len() == 1).then(|| set.iter().next().copied()).flatten()
    })
}

fn job_summary(
    c: &ClusterState,
    cluster: &str,
    job_id: &str,
    j: &JobState,
    alerts: &AlertsView,
    now: Timestamp,
) -> JobSummaryView {
    let super::answer::JobVerdict { health, reasons, answer } =
        super::answer::job_verdict(c, cluster, job_id, j, alerts);
    let job_alerts: Vec<&Alert> = alerts.of_job(cluster, job_id).collect();
    let briefs = |state: AlertState| -> Vec<AlertBrief> {
        job_alerts
            .iter()
            .filter(|a| a.state == state)
            .map(|a| AlertBrief {
                name: a.name().to_string(),
                severity: crate::health::alert_severity(a),
                class: label(a, "class").to_string(),
                summary: a.annotations.get("summary").map(|t| t.to_string()).unwrap_or_default(),
                fired_at_ms: a.fired_at.map(Timestamp::millis),
                active_since_ms: a.active_since.millis(),
            })
            .collect()
    };
    let totals = j.totals();
    JobSummaryView {
        cluster: cluster.to_string(),
        job_id: job_id.to_string(),
        name: j.name.clone(),
        state: j.job_state.clone(),
        listed: j.listed,
        health,
        health_reasons: reasons.iter().map(ToString::to_string).collect(),
        answer,
        recent_outcomes: RecentOutcomes::of_job(j),
        last_checkpoint: j.recent.back().map(|r| checkpoint_view(c, job_id, r)),
        last_completed_at_ms: j.last_completed.as_ref().map(|r| r.finished_at.millis()),
        in_progress: j.in_progress.len(),
        oldest_in_progress_age_ms: j.in_progress.iter().map(|p| now.since(p.triggered_at)).max(),
        consecutive_failures: j.consecutive_failures(),
        completed_total: totals.completed,
        failed_total: totals.failed,
        p95_ms: p95s(&j.phases),
        interval_ms: j.settings.as_ref().and_then(|s| s.interval_ms),
        timeout_ms: j.settings.as_ref().and_then(|s| s.timeout_ms),
        firing_alerts: briefs(AlertState::Firing),
        pending_alerts: briefs(AlertState::Pending).len(),
        pending_alert_list: briefs(AlertState::Pending),
        advice: crate::advice::job_risk_findings(j),
        application: c.application_of(job_id).map(|a| ApplicationView {
            id: a.id.clone(),
            name: a.name.clone(),
            status: a.status.clone(),
            job_ids: a.job_ids.clone(),
        }),
    }
}

/// A job's health and the reasons for it, as sentences ([`crate::health::job_health`]).
pub(crate) fn job_health(
    c: &ClusterState,
    cluster: &str,
    job_id: &str,
    j: &JobState,
    alerts: &AlertsView,
) -> (Health, Vec<String>) {
    let (health, reasons) = crate::health::job_health(c, cluster, job_id, j, alerts);
    (health, reasons.iter().map(ToString::to_string).collect())
}

/// `completed`, `expired`, `declined` or `failed`.
pub(crate) fn outcome(r: &CheckpointRecord) -> Outcome {
    Outcome::of(r.status, r.failure_message.as_deref())
}

fn kind(k: SnapshotKind) -> &'static str {
    match k {
        SnapshotKind::Checkpoint => "checkpoint",
        SnapshotKind::UnalignedCheckpoint => "unaligned_checkpoint",
        SnapshotKind::Savepoint => "savepoint",
    }
}

fn checkpoint_view(c: &ClusterState, job_id: &str, r: &CheckpointRecord) -> CheckpointView {
    CheckpointView {
        id: r.id,
        outcome: outcome(r),
        kind: kind(r.kind),
        triggered_at_ms: r.triggered_at.millis(),
        finished_at_ms: r.finished_at.millis(),
        end_to_end_ms: r.end_to_end_ms,
        elapsed_ms: r.finished_at.since(r.triggered_at),
        phases_ms: r.max_phases_ms.map(|p| phase_values(r.end_to_end_ms, p)),
        slowest_subtask: slowest_subtask(c, job_id, r),
        failure_message: r.failure_message.clone(),
        blocked_thread: r
            .blocked_thread
            .as_deref()
            .cloned()
            .or_else(|| c.jobs.get(job_id)?.threads.for_record(r.id))
            .as_ref()
            .map(blocked_thread_view),
        evidence: r.evidence.as_deref().cloned(),
    }
}
/// Whether `outcome` is one a query may ask for: an outcome of [`outcome`], or `failed_any`
/// (every failed one, expired and declined included).
pub(crate) fn is_query_outcome(outcome: &str) -> bool {
    ["completed", "expired", "declined", "failed", "failed_any"].contains(&outcome)
}

/// Whether a record matches a query's `outcome`.
pub(crate) fn outcome_matches(r: &CheckpointRecord, wanted: &str) -> bool {
    match wanted {
        "failed_any" => r.status == CheckpointStatus::Failed,
        other => outcome(r).as_str() == other,
    }
}

/// A stored record as the API shows it: the TaskManager of its slowest subtask is the one
/// recorded when it was counted, else (older records) where that subtask runs now.
pub(crate) fn stored_checkpoint_view(
    c: &ClusterState,
    job_id: &str,
    stored: &crate::state::outbox::StoredCheckpoint,
) -> StoredCheckpointView {
    let mut checkpoint = checkpoint_view(c, job_id, &stored.record);
    if let (Some(sub), Some(tm)) = (checkpoint.slowest_subtask.as_mut(), &stored.taskmanager) {
        sub.taskmanager = Some(tm.clone());
    }
    StoredCheckpointView {
        checkpoint,
        checkpointed_bytes: stored.checkpointed_bytes,
        full_state_bytes: stored.full_state_bytes,
        processed_data_bytes: stored.processed_bytes,
        persisted_data_bytes: stored.persisted_bytes,
    }
}

fn phase_values(e2e: Option<u64>, [start_delay, alignment, sync, async_]: [u64; 4]) -> PhaseValues {
    PhaseValues {
        end_to_end: e2e,
        start_delay: Some(start_delay),
        alignment: Some(alignment),
        sync: Some(sync),
        async_: Some(async_),
    }
}

/// The subtask that held checkpoint `r` up (see [`SlowestSubtask`]).
fn slowest_subtask(c: &ClusterState, job_id: &str, r: &CheckpointRecord) -> Option<SlowestSubtask> {
    let culprit = crate::health::culprit::of_record(c, job_id, r)?;
    Some(SlowestSubtask {
        phases_ms: culprit.phases_ms.map(|[sd, al, sy, asy]| PhaseValues {
            end_to_end: culprit.end_to_end_ms,
            start_delay: sd,
            alignment: al,
            sync: sy,
            async_: asy,
        }),
        operator: culprit.operator,
        subtask: culprit.subtask,
        acknowledged: culprit.acknowledged,
        role: culprit.role,
        end_to_end_ms: culprit.end_to_end_ms,
        taskmanager: culprit.taskmanager,
        text: culprit.text,
    })
}

fn settings_view(s: &CheckpointSettings) -> SettingsView {
    SettingsView {
        mode: if s.exactly_once { CheckpointingMode::ExactlyOnce } else { CheckpointingMode::AtLeastOnce },
        interval_ms: s.interval_ms,
        timeout_ms: s.timeout_ms,
        min_pause_ms: s.min_pause_ms,
        max_concurrent: s.max_concurrent,
        tolerable_failures: s.tolerable_failures,
        unaligned: s.unaligned,
        aligned_checkpoint_timeout_ms: s.aligned_checkpoint_timeout_ms,
        state_backend: s.state_backend.clone(),
    }
}

fn quantiles(s: Summary) -> Quantiles {
    Quantiles { p50: s.quantiles[0], p95: s.quantiles[1], p99: s.quantiles[2], window_count: s.window_count }
}

fn phase_quantiles(p: &PhaseHistograms) -> PhaseQuantiles {
    PhaseQuantiles {
        end_to_end: quantiles(p.end_to_end.summary()),
        start_delay: quantiles(p.start_delay.summary()),
        alignment: quantiles(p.alignment.summary()),
        sync: quantiles(p.sync.summary()),
        async_: quantiles(p.async_.summary()),
    }
}

fn p95s(p: &PhaseHistograms) -> PhaseValues {
    PhaseValues {
        end_to_end: p.end_to_end.summary().quantiles[1],
        start_delay: p.start_delay.summary().quantiles[1],
        alignment: p.alignment.summary().quantiles[1],
        sync: p.sync.summary().quantiles[1],
        async_: p.async_.summary().quantiles[1],
    }
}

fn event_view(e: &LogEvent, ring: &RingIndex<'_>) -> EventView {
    // A decline that names no task (1.13/1.14 without its trace) takes the one operator the
    // TaskManager's snapshot failure of the same checkpoint names.
    let (task, subtask) = match (&e.task, &e.kind, e.checkpoint_id) {
        (None, LogKind::Declined, Some(id)) => {
            match ring.tasks.get(&id).map(|t| t.iter().collect::<Vec<_>>()) {
                Some(only) if only.len() == 1 => (Some(only[0].0.to_string()), only[0].1),
                _ => (None, e.subtask),
            }
        }
        _ => (e.task.clone(), e.subtask),
    };
    EventView {
        kind: e.kind.clone(),
        severity: e.severity,
        source: e.source,
        logged_at: e.logged_at.clone(),
        logged_at_ms: e.logged_at.as_deref().and_then(crate::time::log_time_utc_ms),
        checkpoint_id: e.checkpoint_id,
        task,
        subtask,
        taskmanager: e.taskmanager.clone(),
        reason: e.reason.clone(),
        root_cause: e.root_cause.clone(),
        message: e.message.clone(),
        file: e.file.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{
        CheckpointCounts, ClusterPoll, FinishedCheckpoint, JobKey, JobPoll, JobSummary, Observation,
        SubtaskCheckpoint,
    };
    use crate::rules::Labels;
    use crate::stats::WindowSpec;
    use std::sync::Arc;

    fn checkpoint(id: u64, failed: bool) -> FinishedCheckpoint {
        let t = 1_000_000 + id as i64 * 5_000;
        let end_to_end_ms = if failed { 4_000 } else { 900 };
        let subtasks = (0..2)
            .map(|i| SubtaskCheckpoint {
                index: i,
                acknowledged: true,
                end_to_end_ms: Some(100 + 800 * u64::from(i)),
                start_delay_ms: Some(5),
                alignment_ms: Some(700 * u64::from(i)),
                sync_ms: Some(1),
                async_ms: Some(3),
                ..SubtaskCheckpoint::default()
            })
            .collect();
        let checkpoint = FinishedCheckpoint::completed(id, Timestamp(t), end_to_end_ms)
            .sizes(10, 10)
            .acknowledged(if failed { 1 } else { 2 }, 2)
            .operator("v", "stateful-map", subtasks);
        if failed { checkpoint.failed("Checkpoint expired before completing.") } else { checkpoint }
    }

    fn state(last_failed: bool) -> State {
        let mut s = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        s.apply(
            &Observation::ClusterPolled(ClusterPoll {
                cluster: "prod".into(),
                duration_ms: 3,
                flink_version: Some("2.3.0".into()),
                jobs: Some(vec![JobSummary {
                    job_id: "j1".into(),
                    name: "orders".into(),
                    state: "RUNNING".into(),
                }]),
                errors: Vec::new(),
                reachable: true,
            }),
            Timestamp(1_016_000),
        );
        let finished = vec![checkpoint(1, false), checkpoint(2, false), checkpoint(3, last_failed)];
        s.apply(
            &Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
                job_name: "orders".into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(1_016_000),
                counts: CheckpointCounts {
                    completed: if last_failed { 2 } else { 3 },
                    failed: u64::from(last_failed),
                    in_progress: 0,
                    restored: 0,
                },
                settings: Some(CheckpointSettings {
                    exactly_once: true,
                    interval_ms: Some(5_000),
                    timeout_ms: Some(4_000),
                    max_concurrent: 1,
                    ..CheckpointSettings::default()
                }),
                in_progress: Vec::new(),
                finished,
                latest_restore: None,
                deferred: Default::default(),
            }),
            Timestamp(1_016_000),
        );
        s
    }

    /// Clusters `a` (30 jobs) and `b` (17): every third job's last checkpoint failed
    /// (warning), every fifth has no checkpoint yet (unknown), the rest complete (ok).
    fn estate() -> State {
        let mut s = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let now = Timestamp(1_016_000);
        for (cluster, n) in [("a", 30), ("b", 17)] {
            let ids: Vec<String> = (0..n).map(|i| format!("{cluster}{i:02}")).collect();
            let listed = ids
                .iter()
                .map(|id| JobSummary {
                    job_id: id.clone(),
                    name: format!("job-{id}"),
                    state: "RUNNING".into(),
                })
                .collect();
            s.apply(
                &Observation::ClusterPolled(ClusterPoll {
                    cluster: cluster.into(),
                    duration_ms: 3,
                    flink_version: Some("2.3.0".into()),
                    jobs: Some(listed),
                    errors: Vec::new(),
                    reachable: true,
                }),
                now,
            );
            for (i, id) in ids.iter().enumerate() {
                let failed = i % 3 == 0;
                let finished =
                    if i % 5 == 0 { Vec::new() } else { vec![checkpoint(1, false), checkpoint(2, failed)] };
                let completed = finished.iter().filter(|c| c.status == CheckpointStatus::Completed).count();
                s.apply(
                    &Observation::JobPolled(JobPoll {
                        key: JobKey { cluster: cluster.into(), job_id: id.clone() },
                        job_name: format!("job-{id}"),
                        job_state: if i == 7 { "RESTARTING" } else { "RUNNING" }.into(),
                        polled_at: now,
                        counts: CheckpointCounts {
                            completed: completed as u64,
                            failed: (finished.len() - completed) as u64,
                            in_progress: 0,
                            restored: 0,
                        },
                        settings: None,
                        in_progress: Vec::new(),
                        finished,
                        latest_restore: None,
                        deferred: Default::default(),
                    }),
                    now,
                );
            }
        }
        s
    }

    fn query_of(query: &str) -> ListQuery {
        let uri: axum::http::Uri = format!("/?{query}").parse().unwrap();
        axum::extract::Query::<ListQuery>::try_from_uri(&uri).unwrap().0
    }

    fn ask(s: &State, query: &str) -> JobsResponse {
        let q = query_of(query);
        jobs_page(s, &AlertsView::default(), Timestamp(1_016_000), &JobsRequest::of(&q).unwrap())
    }

    #[test]
    fn a_cursor_walks_every_job_once_worst_first_with_the_totals_on_every_page() {
        let s = estate();
        let all = ask(&s, "limit=10000");
        assert_eq!((all.total, all.matched, all.jobs.len(), all.next_cursor.as_deref()), (47, 47, 47, None));
        let c = all.counts;
        assert_eq!(c.critical + c.warning + c.pending + c.unknown + c.ok, 47);
        assert!(c.warning > 0 && c.unknown > 0 && c.ok > 0, "{c:?}");
        let order: Vec<(String, String)> =
            all.jobs.iter().map(|j| (j.cluster.clone(), j.job_id.clone())).collect();
        let ranks: Vec<Health> = all.jobs.iter().map(|j| j.health).collect();
        assert!(ranks.is_sorted(), "worst first: {ranks:?}");
        let mut walked = Vec::new();
        let mut query = "limit=7".to_string();
        loop {
            let page = ask(&s, &query);
            assert_eq!((page.total, page.matched, page.counts, page.limit), (47, 47, c, 7));
            assert!(page.jobs.len() <= 7);
            walked.extend(page.jobs.iter().map(|j| (j.cluster.clone(), j.job_id.clone())));
            match page.next_cursor {
                Some(next) => query = format!("limit=7&cursor={next}"),
                None => break,
            }
        }
        assert_eq!(walked, order, "every job once, in the one-page order");
        // Fewer jobs than the default limit: one answer with all of them, as before paging.
        let default = ask(&s, "");
        assert_eq!((default.jobs.len(), default.limit, default.next_cursor), (47, page::DEFAULT_LIMIT, None));
    }

    #[test]
    fn filters_page_through_what_they_keep_and_count_every_job() {
        let s = estate();
        let warning = ask(&s, "health=warning&limit=3");
        assert_eq!(warning.matched, warning.counts.warning);
        assert_eq!(warning.total, 47);
        assert!(warning.jobs.iter().all(|j| j.health == Health::Warning));
        assert!(warning.next_cursor.is_some());
        let b = ask(&s, "cluster=b");
        assert_eq!((b.matched, b.jobs.len()), (17, 17));
        assert!(b.jobs.iter().all(|j| j.cluster == "b"));
        // The headlines stay the whole estate's: one per cluster.
        assert_eq!(b.headlines.len(), 2);
        let named = ask(&s, "name=JOB-A1");
        assert_eq!(named.matched, 10, "a10..a19");
        let restarting = ask(&s, "state=restarting,failed");
        assert_eq!(restarting.matched, 2, "a07, b07");
        let both = ask(&s, "cluster=a&health=ok,unknown");
        assert!(
            both.jobs.iter().all(|j| j.cluster == "a" && matches!(j.health, Health::Ok | Health::Unknown))
        );
        assert_eq!(ask(&s, "cluster=nope").matched, 0);
        assert!(JobsRequest::of(&query_of("health=sick")).is_err());
    }

    #[test]
    fn alerts_page_active_then_resolved_with_their_totals() {
        let alert = |job: &str, resolved: Option<i64>| {
            let labels: Labels =
                [("alertname".into(), "CheckpointFailing".into()), ("job_id".into(), job.into())].into();
            Alert {
                labels,
                annotations: Labels::default(),
                state: if resolved.is_some() { AlertState::Resolved } else { AlertState::Firing },
                active_since: Timestamp(500),
                fired_at: Some(Timestamp(600)),
                resolved_at: resolved.map(Timestamp),
                value: None,
            }
        };
        let mut view = AlertsView::default();
        view.set_active((0..9).map(|i| Arc::new(alert(&format!("j{i}"), None))).collect());
        view.resolved = (0..4).map(|i| alert(&format!("r{i}"), Some(1_000 + i))).collect();
        let ask = |q: &str| alerts_page(&view, &query_of(q)).unwrap();
        let one = ask("");
        assert_eq!(
            (one.active.len(), one.resolved.len(), one.total_active, one.total_resolved),
            (9, 4, 9, 4)
        );
        assert_eq!(one.next_cursor, None);
        let mut seen = Vec::new();
        let mut q = "limit=4".to_string();
        loop {
            let p = ask(&q);
            assert_eq!((p.total_active, p.total_resolved), (9, 4));
            seen.extend(p.active.iter().chain(&p.resolved).map(|a| a.labels["job_id"].to_string()));
            match p.next_cursor {
                Some(c) => q = format!("limit=4&cursor={c}"),
                None => break,
            }
        }
        let expected: Vec<String> =
            (0..9).map(|i| format!("j{i}")).chain((0..4).map(|i| format!("r{i}"))).collect();
        assert_eq!(seen, expected);
        assert!(alerts_page(&view, &query_of("limit=0")).is_err());
    }

    #[test]
    fn a_job_names_its_application_where_flink_serves_them() {
        let mut s = state(false);
        assert!(jobs(&s, &AlertsView::default(), Timestamp(1_016_000)).jobs[0].application.is_none());
        // As Flink 2.3.0 answered /applications/overview for a single-job application.
        let overview: crate::sources::flink::dto::ApplicationsOverview = serde_json::from_str(
            r#"{"applications":[{"id":"j1","name":"SingleJobApplication(orders)","start-time":1796457130034,
                "end-time":-1,"duration":38229,"status":"RUNNING","jobs":{"RUNNING":1}}]}"#,
        )
        .unwrap();
        let a = &overview.applications[0];
        assert_eq!(a.jobs.values().sum::<u64>(), 1);
        s.apply(
            &Observation::Applications(crate::observe::ApplicationsReport {
                cluster: "prod".into(),
                applications: vec![crate::observe::Application {
                    id: a.id.clone(),
                    name: a.name.clone().unwrap(),
                    status: a.status.clone().unwrap(),
                    job_ids: vec!["j1".into()],
                }],
            }),
            Timestamp(1_016_000),
        );
        let r = jobs(&s, &AlertsView::default(), Timestamp(1_016_000));
        let app = r.jobs[0].application.as_ref().expect("the application");
        assert_eq!((app.name.as_str(), app.status.as_str()), ("SingleJobApplication(orders)", "RUNNING"));
    }

    #[test]
    fn a_job_with_completing_checkpoints_is_ok_with_p95_per_phase() {
        let s = state(false);
        let r = jobs(&s, &AlertsView::default(), Timestamp(1_016_000));
        let j = &r.jobs[0];
        assert_eq!((j.cluster.as_str(), j.name.as_str(), j.health), ("prod", "orders", Health::Ok));
        assert!(j.p95_ms.alignment.is_some_and(|v| v.abs_diff(700) <= 7), "{:?}", j.p95_ms);
        assert!(j.p95_ms.end_to_end.is_some_and(|v| v.abs_diff(900) <= 9));
        let last = j.last_checkpoint.as_ref().unwrap();
        assert_eq!((last.id, last.outcome), (3, Outcome::Completed));
        let slowest = last.slowest_subtask.as_ref().unwrap();
        assert_eq!(
            (slowest.operator.as_str(), slowest.subtask, slowest.end_to_end_ms),
            ("stateful-map", 1, Some(900))
        );
        assert_eq!(slowest.text, "stateful-map #1 acknowledged last, after 900 ms");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["jobs"][0]["p95_ms"]["async"], 3);
        assert_eq!(json["jobs"][0]["health"], "ok");
    }

    #[test]
    fn an_expired_checkpoint_makes_a_warning_and_shows_in_the_detail() {
        let s = state(true);
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_016_000)).unwrap();
        assert_eq!(d.summary.health, Health::Warning);
        assert_eq!(d.summary.health_reasons, vec!["the latest checkpoint expired".to_string()]);
        assert_eq!(
            d.checkpoints.iter().map(|c| c.outcome).collect::<Vec<_>>(),
            [Outcome::Completed, Outcome::Completed, Outcome::Expired]
        );
        assert!(d.phases.alignment.p95.is_some_and(|v| v.abs_diff(700) <= 7));
        assert_eq!(d.settings.as_ref().unwrap().interval_ms, Some(5_000));
        assert_eq!(d.operators[0].name, "stateful-map");
        assert!(job(&s, &AlertsView::default(), "prod", "nope", Timestamp(0)).is_none());
        let c = clusters(&s, &AlertsView::default(), Timestamp(0));
        assert_eq!(c.clusters[0].health, Health::Warning);
    }

    /// Issue 40: Pekko's "Discarding oversized payload" read while no checkpoint of the job was
    /// in progress waits for the job's next failure; the expiry line of checkpoint 3 takes it,
    /// and the job's answer says the acknowledgement was dropped, with both sizes, and what to do.
    #[test]
    fn an_expiry_with_a_dropped_acknowledgement_says_so_in_the_answer() {
        use crate::observe::{EventSeverity, LogEvent, LogKind, RootCause};
        let mut s = state(true);
        let message = "Discarding oversized payload sent to Actor[pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_4#-1027346771]: max allowed size 10485760 bytes, actual size of encoded class org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation was 15859121 bytes.";
        let mut drop = LogEvent::new(LogKind::OversizedPayload, EventSeverity::Warning, message.into());
        drop.cluster = "prod".into();
        drop.detail = Some("pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_4".into());
        drop.root_cause = Some(RootCause {
            category: "oversized_ack",
            exception: "org.apache.pekko.remote.OversizedPayloadException".into(),
            message: message.into(),
        });
        let mut expired = LogEvent::new(LogKind::Expired, EventSeverity::Warning, "expired".into());
        (expired.cluster, expired.job_id, expired.checkpoint_id) =
            ("prod".into(), Some("j1".into()), Some(3));
        s.apply(&Observation::LogEvents(vec![drop]), Timestamp(1_016_100));
        let before = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_016_000)).unwrap();
        let what = before.summary.answer.map(|a| a.what).unwrap_or_default();
        assert!(!what.contains("dropped as oversized"), "{what}");
        s.apply(&Observation::LogEvents(vec![expired]), Timestamp(1_016_200));
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_016_300)).unwrap();
        let a = d.summary.answer.unwrap();
        assert!(
            a.what.contains(
                "the acknowledgement of checkpoint 3 was dropped as oversized: 15 MiB encoded over the 10 MiB \
                 frame size (pekko.framesize), so the checkpoint could only expire"
            ),
            "{}",
            a.what
        );
        assert!(a.next_step.contains("raise pekko.framesize"), "{}", a.next_step);
    }

    /// The same from the poll alone (no JobManager log tailed): the poll that counts checkpoint
    /// 4 failed takes the drop a TaskManager's log gave before.
    #[test]
    fn a_failure_the_poll_counts_takes_a_waiting_dropped_acknowledgement() {
        use crate::observe::{EventSeverity, LogEvent, LogKind};
        let mut s = state(false);
        let message = "Discarding oversized payload received: max allowed size [10485760] bytes, actual size [15859121] bytes.";
        let mut drop = LogEvent::new(LogKind::OversizedPayload, EventSeverity::Warning, message.into());
        drop.cluster = "prod".into();
        s.apply(&Observation::LogEvents(vec![drop]), Timestamp(1_017_000));
        poll_job(&mut s, "j1", "orders", vec![checkpoint(4, true)], (3, 1), 1_025_000);
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_025_000)).unwrap();
        let a = d.summary.answer.unwrap();
        assert!(
            a.what.contains("the acknowledgement of checkpoint 4 was dropped as oversized: 15 MiB"),
            "{}",
            a.what
        );
    }

    #[test]
    fn a_cancelled_job_is_no_warning_for_its_last_failures_nor_for_its_cluster() {
        let mut s = state(true);
        // The cancel fails the checkpoint in progress: "Checkpoint Coordinator is suspending."
        let mut stop = checkpoint(4, true);
        stop.failure_message = Some("Checkpoint Coordinator is suspending.".into());
        s.apply(
            &Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
                job_name: "orders".into(),
                job_state: "CANCELED".into(),
                polled_at: Timestamp(1_030_000),
                counts: CheckpointCounts { completed: 2, failed: 2, in_progress: 0, restored: 0 },
                settings: None,
                in_progress: Vec::new(),
                finished: vec![stop],
                latest_restore: None,
                deferred: Default::default(),
            }),
            Timestamp(1_030_000),
        );
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_031_000)).unwrap();
        assert_eq!(d.summary.consecutive_failures, 1, "the stop failure is not the job's");
        assert_eq!((d.summary.health, d.summary.health_reasons.clone()), (Health::Ok, Vec::new()));
        let c = clusters(&s, &AlertsView::default(), Timestamp(1_031_000));
        assert_eq!(c.clusters[0].health, Health::Ok);
    }

    #[test]
    fn the_job_detail_has_the_p95_per_phase_over_time() {
        let mut s = state(false);
        // A later poll brings a slower checkpoint: the P95s rise and the series gets a point.
        let mut slow = checkpoint(4, false);
        slow.end_to_end_ms = Some(3_000);
        slow.operators[0].subtasks[1].alignment_ms = Some(2_500);
        s.apply(
            &Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
                job_name: "orders".into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(1_031_000),
                counts: CheckpointCounts { completed: 4, failed: 0, in_progress: 0, restored: 0 },
                settings: None,
                in_progress: Vec::new(),
                finished: vec![slow],
                latest_restore: None,
                deferred: Default::default(),
            }),
            Timestamp(1_031_000),
        );
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_032_000)).unwrap();
        let json = serde_json::to_value(&d).unwrap();
        let series = json["p95_history"].as_array().unwrap();
        assert_eq!(series.len(), 2, "{series:?}");
        assert_eq!(series[0]["at_ms"], 1_016_000);
        assert_eq!(series[1]["at_ms"], 1_031_000);
        let p95 = |i: usize, phase: &str| series[i]["p95_ms"][phase].as_u64();
        assert!(p95(0, "alignment").is_some_and(|v| v.abs_diff(700) <= 7), "{series:?}");
        assert!(p95(1, "alignment").is_some_and(|v| v.abs_diff(2_500) <= 25), "{series:?}");
        assert!(p95(1, "end_to_end").is_some_and(|v| v.abs_diff(3_000) <= 30));
        assert_eq!((p95(1, "start_delay"), p95(1, "sync"), p95(1, "async")), (Some(5), Some(1), Some(3)));
        // The newest point is what the jobs table shows now.
        assert_eq!(series[1]["p95_ms"], serde_json::to_value(d.summary.p95_ms).unwrap());
    }

    #[test]
    fn the_slowest_subtask_names_its_taskmanager_from_a_log_line_else_from_the_vertex() {
        use crate::observe::{
            EventSeverity, JobLoadReport, JobTopology, LogEvent, TopologyVertex, VertexLoad,
        };
        let mut s = state(false);
        let slowest_tm = |s: &State| {
            let d = job(s, &AlertsView::default(), "prod", "j1", Timestamp(1_016_000)).unwrap();
            d.checkpoints
                .iter()
                .map(|c| c.slowest_subtask.as_ref().unwrap().taskmanager.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(slowest_tm(&s), [None, None, None]);
        // The load fetch lists where the subtasks run: subtask 1, the slowest, is on tm-b.
        let load = JobLoadReport {
            key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
            measured_at: Timestamp(1_016_000),
            topology: Some(std::sync::Arc::new(JobTopology {
                vertices: vec![TopologyVertex {
                    id: "v".into(),
                    name: "stateful-map".into(),
                    parallelism: 2,
                }],
                edges: Vec::new(),
            })),
            vertices: vec![VertexLoad {
                vertex_id: "v".into(),
                subtasks: Vec::new(),
                taskmanagers: vec![Some("tm-a (h:1)".into()), Some("tm-b (h:2)".into())],
            }],
        };
        s.apply(&Observation::JobLoad(load.clone()), Timestamp(1_016_000));
        assert_eq!(
            slowest_tm(&s),
            [Some("tm-b (h:2)".to_string()), Some("tm-b (h:2)".into()), Some("tm-b (h:2)".into())]
        );
        // A later fetch that could not read the locations forgets nothing.
        let mut unknown = load;
        unknown.vertices[0].taskmanagers = vec![None, None];
        s.apply(&Observation::JobLoad(unknown), Timestamp(1_017_000));
        assert_eq!(slowest_tm(&s)[2].as_deref(), Some("tm-b (h:2)"));
        // A log line of checkpoint 3 that names the subtask's TaskManager wins for that checkpoint.
        let mut event = LogEvent::new("declined".into(), EventSeverity::Warning, "declined".into());
        event.cluster = "prod".into();
        event.job_id = Some("j1".into());
        event.checkpoint_id = Some(3);
        event.task = Some("stateful-map".into());
        event.subtask = Some(1);
        event.taskmanager = Some("tm-old @ h (dataPort=2)".into());
        s.apply(&Observation::LogEvents(vec![event]), Timestamp(1_017_000));
        assert_eq!(slowest_tm(&s)[2].as_deref(), Some("tm-old @ h (dataPort=2)"));
        assert_eq!(slowest_tm(&s)[1].as_deref(), Some("tm-b (h:2)"));
    }

    /// A failed checkpoint names the subtask that did not acknowledge, not the slowest that did,
    /// and says how many more did not.
    #[test]
    fn a_failed_checkpoint_names_the_subtasks_that_never_acknowledged() {
        let text = |unacked: &[u32], message: &str| {
            let mut cp = checkpoint(4, true);
            cp.failure_message = Some(message.to_string());
            cp.num_acknowledged = 2 - unacked.len() as u32;
            for st in &mut cp.operators[0].subtasks {
                if unacked.contains(&st.index) {
                    *st = SubtaskCheckpoint { index: st.index, ..SubtaskCheckpoint::default() };
                }
            }
            let mut s = state(false);
            s.apply(
                &Observation::JobPolled(JobPoll {
                    key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
                    job_name: "orders".into(),
                    job_state: "RUNNING".into(),
                    polled_at: Timestamp(1_020_000),
                    counts: CheckpointCounts { completed: 3, failed: 1, in_progress: 0, restored: 0 },
                    settings: None,
                    in_progress: Vec::new(),
                    finished: vec![cp.clone()],
                    latest_restore: None,
                    deferred: Default::default(),
                }),
                Timestamp(1_020_000),
            );
            let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_020_000)).unwrap();
            let last = d.checkpoints.last().unwrap().slowest_subtask.clone().unwrap();
            (last.acknowledged, last.end_to_end_ms, last.text)
        };
        let expired = "Checkpoint expired before completing.";
        assert_eq!(
            text(&[0], expired),
            (false, None, "stateful-map #0 never acknowledged (1 of 2 acknowledged)".into())
        );
        assert_eq!(
            text(&[0, 1], expired).2,
            "stateful-map #0 and 1 other subtask never acknowledged (0 of 2 acknowledged)"
        );
        let declined = "Checkpoint was declined.";
        assert_eq!(text(&[1], declined).2, "stateful-map #1 declined the checkpoint (1 of 2 acknowledged)");
        assert_eq!(
            text(&[0, 1], declined).2,
            "stateful-map #0 and 1 other subtask never acknowledged (0 of 2 acknowledged)"
        );
    }

    /// Applies one poll of job `id` with these finished checkpoints and Flink's counts so far.
    fn poll_job(
        s: &mut State,
        id: &str,
        name: &str,
        finished: Vec<FinishedCheckpoint>,
        (completed, failed): (u64, u64),
        at: i64,
    ) {
        s.apply(
            &Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "prod".into(), job_id: id.into() },
                job_name: name.into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(at),
                counts: CheckpointCounts { completed, failed, in_progress: 0, restored: 0 },
                settings: Some(CheckpointSettings {
                    exactly_once: true,
                    interval_ms: Some(5_000),
                    timeout_ms: Some(4_000),
                    max_concurrent: 1,
                    ..CheckpointSettings::default()
                }),
                in_progress: Vec::new(),
                finished,
                latest_restore: None,
                deferred: Default::default(),
            }),
            Timestamp(at),
        );
    }

    /// Checkpoint `id` expired: subtask 0 never acknowledged it, subtask 1 did after 900 ms.
    fn expired(id: u64) -> FinishedCheckpoint {
        let mut cp = checkpoint(id, true);
        cp.operators[0].subtasks[0] = SubtaskCheckpoint { index: 0, ..SubtaskCheckpoint::default() };
        cp
    }

    /// The issue's case: the completed checkpoints' last acknowledger (#1) is fast; an expired
    /// checkpoint that #0 never acknowledged is what held the job up, and the window, the
    /// counts and the answer say so, with the numbers.
    #[test]
    fn the_window_names_the_subtask_that_never_acknowledged_an_expired_checkpoint() {
        use crate::health::culprit::Role;
        let mut s = state(false);
        poll_job(&mut s, "j1", "orders", vec![expired(4), checkpoint(5, false)], (4, 1), 1_031_000);
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_031_000)).unwrap();
        let w = d.slowest_in_window.clone().unwrap();
        assert_eq!(w.text, "stateful-map #0 never acknowledged checkpoint 4 (expired after 4.0 s)");
        assert_eq!(
            (w.checkpoint_id, w.role, w.subtask, w.held_up),
            (4, Role::NeverAcknowledged, 0, Some((1, 1)))
        );
        assert_eq!(d.checkpoints[3].slowest_subtask.as_ref().unwrap().role, Role::NeverAcknowledged);
        assert_eq!(
            d.summary.recent_outcomes,
            RecentOutcomes { of: 5, completed: 4, expired: 1, declined: 0, failed: 0 }
        );
        // The job completed since, so it is ok and the table shows no answer, only the counts.
        assert_eq!((d.summary.health, d.summary.answer.is_none()), (Health::Ok, true));

        // A second expiry, the latest: warning, and the answer leads with the counts and the
        // subtask that held both up, and a next step that names it.
        poll_job(&mut s, "j1", "orders", vec![expired(6)], (4, 2), 1_036_000);
        let r = jobs(&s, &AlertsView::default(), Timestamp(1_036_000));
        let a = r.jobs[0].answer.clone().unwrap();
        assert_eq!(a.what, "2 of the last 6 checkpoints expired (timeout 4.0 s)");
        assert_eq!(
            a.where_.as_deref(),
            Some(
                "stateful-map #0 never acknowledged checkpoint 6 (expired after 4.0 s); it held up 2 of the 2 failed checkpoints"
            )
        );
        assert_eq!(a.class, Some(crate::rules::Class::Timeout));
        assert!(
            a.next_step.starts_with("See what stateful-map #0 does while it snapshots"),
            "{}",
            a.next_step
        );
        let json = serde_json::to_value(&r.jobs[0]).unwrap();
        assert_eq!(json["answer"]["where"].as_str(), a.where_.as_deref());
        assert_eq!(json["recent_outcomes"]["expired"], 2);
        assert_eq!(r.headlines[0].text, "prod: its one job, orders, is not ok (1 warning)");

        // With only completed checkpoints the window names the one that acknowledged latest;
        // the answer of a job with a pending alert names it when it was last in most of them.
        let s = state(false);
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_016_000)).unwrap();
        let w = d.slowest_in_window.unwrap();
        assert_eq!(w.text, "stateful-map #1 acknowledged checkpoint 3 last, after 900 ms");
        assert_eq!((w.held_up, w.last_in), (None, Some((3, 3))));
        let view = AlertsView {
            active: vec![Arc::new(alert("FlinkCheckpointAlignmentHigh", "warning", AlertState::Pending))],
            ..AlertsView::default()
        };
        let a = jobs(&s, &view, Timestamp(1_016_000)).jobs[0].answer.clone().unwrap();
        assert_eq!(
            a.where_.as_deref(),
            Some("stateful-map #1 acknowledged last in 3 of the last 3 completed checkpoints, up to 900 ms")
        );
        assert!(a.next_step.starts_with("Find where the backpressure starts"), "{}", a.next_step);
        assert!(a.next_step.contains("downstream of stateful-map #1"), "{}", a.next_step);
    }

    /// A decline names the subtask that declined; a late acknowledgement says when it came.
    #[test]
    fn the_window_says_how_a_subtask_held_a_failed_checkpoint_up() {
        let mut s = state(false);
        let mut late = expired(4);
        late.operators[0].subtasks[0] = SubtaskCheckpoint {
            index: 0,
            acknowledged: true,
            end_to_end_ms: Some(6_000),
            sync_ms: Some(5_900),
            ..SubtaskCheckpoint::default()
        };
        poll_job(&mut s, "j1", "orders", vec![late], (3, 1), 1_031_000);
        let w =
            job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_031_000)).unwrap().slowest_in_window;
        assert_eq!(
            w.unwrap().text,
            "stateful-map #0 never acknowledged checkpoint 4 before it expired after 4.0 s; its \
             acknowledgement came 6.0 s after the trigger"
        );
        let mut declined = expired(5);
        declined.failure_message = Some("Checkpoint was declined.".into());
        poll_job(&mut s, "j1", "orders", vec![declined], (3, 2), 1_036_000);
        let w =
            job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_036_000)).unwrap().slowest_in_window;
        let w = w.unwrap();
        assert_eq!(w.text, "stateful-map #0 declined checkpoint 5 (declined after 4.0 s)");
        assert_eq!(w.held_up, Some((2, 2)));
    }

    fn alert_of(job_id: &str, name: &str, severity: &str, state: AlertState) -> Alert {
        let mut a = alert(name, severity, state);
        a.labels.insert("job_id".into(), job_id.into());
        a
    }

    /// The jobs table is worst first: firing critical, firing warning, then by health (a failed
    /// latest checkpoint, pending), ok last; by name among equals. The headline counts them.
    #[test]
    fn the_jobs_come_worst_first_with_a_headline_per_cluster() {
        let mut s = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let names = [
            ("j1", "a-ok"),
            ("j2", "b-pending"),
            ("j3", "c-critical"),
            ("j4", "d-failing"),
            ("j5", "e-warning"),
        ];
        s.apply(
            &Observation::ClusterPolled(ClusterPoll {
                cluster: "prod".into(),
                duration_ms: 3,
                flink_version: Some("2.3.0".into()),
                jobs: Some(
                    names
                        .iter()
                        .map(|(id, name)| JobSummary {
                            job_id: id.to_string(),
                            name: name.to_string(),
                            state: "RUNNING".into(),
                        })
                        .collect(),
                ),
                errors: Vec::new(),
                reachable: true,
            }),
            Timestamp(1_016_000),
        );
        for (id, name) in names {
            let failing = id == "j4";
            let counts = if failing { (1, 1) } else { (2, 0) };
            poll_job(&mut s, id, name, vec![checkpoint(1, false), checkpoint(2, failing)], counts, 1_016_000);
        }
        let view = AlertsView {
            active: vec![
                Arc::new(alert_of("j2", "FlinkCheckpointAlignmentHigh", "warning", AlertState::Pending)),
                Arc::new(alert_of("j3", "FlinkCheckpointNoProgress", "critical", AlertState::Firing)),
                Arc::new(alert_of("j5", "FlinkCheckpointDurationHigh", "warning", AlertState::Firing)),
            ],
            ..AlertsView::default()
        };
        let r = jobs(&s, &view, Timestamp(1_016_000));
        let order: Vec<&str> = r.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(order, ["c-critical", "e-warning", "d-failing", "b-pending", "a-ok"]);
        assert_eq!(r.headlines.len(), 1);
        assert_eq!(
            r.headlines[0].text,
            "prod: 4 of 5 jobs are not ok (1 critical, 2 warning, 1 pending); the worst is c-critical"
        );
        assert_eq!(r.headlines[0].worst_job_id.as_deref(), Some("j3"));
        // Each answer leads with what is wrong: the alert's summary, or the failure counts.
        let answer = |name: &str| r.jobs.iter().find(|j| j.name == name).unwrap().answer.clone();
        assert_eq!(answer("c-critical").unwrap().what, "FlinkCheckpointNoProgress summary");
        let pending = answer("b-pending").unwrap();
        assert_eq!(pending.what, "FlinkCheckpointAlignmentHigh summary (pending)");
        assert_eq!(pending.class, Some(crate::rules::Class::Blocking));
        // Subtask 1 acknowledged last in both checkpoints: too few to say it stands out.
        assert_eq!((pending.where_, pending.culprit.map(|w| w.last_in)), (None, None));
        let failing = answer("d-failing").unwrap();
        assert_eq!(failing.what, "1 of the last 2 checkpoints expired (timeout 4.0 s)");
        assert!(answer("a-ok").is_none());
        // Nothing wrong: the headline says so.
        let calm = jobs(&s, &AlertsView::default(), Timestamp(1_016_000));
        assert_eq!(calm.jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>()[0], "d-failing");
        assert_eq!(calm.headlines[0].text, "prod: 1 of 5 jobs is not ok (1 warning): d-failing");
    }

    /// Health and advice are two lanes: a job whose only alert is configuration advice (class
    /// `advice`, firing) and whose configuration shows a risk is `ok`, with the finding beside
    /// it; the headline counts health only and says the advice on a line of its own.
    #[test]
    fn advice_never_makes_a_job_not_ok() {
        let mut s = state(false);
        poll_job(&mut s, "j2", "failing", vec![checkpoint(1, false), checkpoint(2, true)], (1, 1), 1_025_000);
        poll_job(&mut s, "j1", "risky", vec![checkpoint(1, false), checkpoint(2, false)], (2, 0), 1_025_000);
        // j1 keeps 100 tolerable failures: `tolerable_too_high`.
        let mut poll = JobPoll {
            key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
            job_name: "risky".into(),
            job_state: "RUNNING".into(),
            polled_at: Timestamp(1_026_000),
            counts: CheckpointCounts { completed: 2, failed: 0, in_progress: 0, restored: 0 },
            settings: None,
            in_progress: Vec::new(),
            finished: Vec::new(),
            latest_restore: None,
            deferred: Default::default(),
        };
        poll.settings = Some(CheckpointSettings {
            exactly_once: true,
            interval_ms: Some(5_000),
            timeout_ms: Some(4_000),
            max_concurrent: 1,
            tolerable_failures: Some(100),
            ..CheckpointSettings::default()
        });
        s.apply(&Observation::JobPolled(poll), Timestamp(1_026_000));
        let mut advice = alert("FlinkCheckpointConfigRiskJob", "info", AlertState::Firing);
        advice.labels.insert("class".into(), "advice".into());
        let view = AlertsView { active: vec![Arc::new(advice)], ..AlertsView::default() };
        let r = jobs(&s, &view, Timestamp(1_026_000));
        let risky = r.jobs.iter().find(|j| j.name == "risky").unwrap();
        assert_eq!((risky.health, risky.answer.is_none()), (Health::Ok, true), "{:?}", risky.health_reasons);
        assert_eq!(risky.advice, ["tolerable_too_high"]);
        assert_eq!(r.headlines[0].text, "prod: 1 of 2 jobs is not ok (1 warning): failing");
        assert_eq!(r.headlines[0].advice.as_deref(), Some("1 job has configuration advice"));
        // The cluster's health reads the same lane.
        let c = clusters(&s, &view, Timestamp(1_026_000));
        assert_eq!(c.clusters[0].health, Health::Warning);
        // Without the risk, no advice line.
        let calm = jobs(&s, &AlertsView::default(), Timestamp(1_026_000));
        assert_eq!(calm.jobs.iter().find(|j| j.name == "failing").unwrap().advice, Vec::<&str>::new());
    }

    fn alert(name: &str, severity: &str, state: AlertState) -> Alert {
        let labels: Labels = [
            ("alertname", name),
            ("severity", severity),
            ("class", "blocking"),
            ("cluster", "prod"),
            ("job_id", "j1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        Alert {
            labels,
            annotations: Labels::from([("summary".into(), format!("{name} summary").into())]),
            state,
            active_since: Timestamp(1_000_000),
            fired_at: (state == AlertState::Firing).then_some(Timestamp(1_010_000)),
            resolved_at: None,
            value: Some(0.69),
        }
    }

    /// A job that exceeded its tolerable failures and restarted, and whose checkpoints complete
    /// again, is ok while `FlinkCheckpointToleranceExceeded` still fires (for an hour): the
    /// restart is a detail of its health ("healthy again since …, after 1 restart").
    #[test]
    fn a_job_healthy_again_after_a_failover_is_ok_and_names_the_restart() {
        let mut s = state(false);
        poll_job(&mut s, "j1", "orders", vec![expired(4)], (3, 1), 1_025_000);
        let view = AlertsView {
            active: vec![Arc::new(alert("FlinkCheckpointToleranceExceeded", "critical", AlertState::Firing))],
            ..AlertsView::default()
        };
        let before = jobs(&s, &view, Timestamp(1_025_000));
        assert_eq!(before.jobs[0].health, Health::Critical, "no completed checkpoint since the failure");
        s.apply(
            &Observation::JobPolled(JobPoll {
                key: JobKey { cluster: "prod".into(), job_id: "j1".into() },
                job_name: "orders".into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(1_031_000),
                counts: CheckpointCounts { completed: 4, failed: 1, in_progress: 0, restored: 1 },
                settings: None,
                in_progress: Vec::new(),
                finished: vec![checkpoint(5, false)],
                latest_restore: Some((Some(3), Timestamp(1_024_500))),
                deferred: Default::default(),
            }),
            Timestamp(1_031_000),
        );
        let after = jobs(&s, &view, Timestamp(1_031_000));
        let j = &after.jobs[0];
        assert_eq!((j.health, j.answer.is_none()), (Health::Ok, true), "{:?}", j.health_reasons);
        assert_eq!(j.health_reasons.len(), 1, "{:?}", j.health_reasons);
        assert!(j.health_reasons[0].starts_with("healthy again since "), "{:?}", j.health_reasons);
        assert!(j.health_reasons[0].ends_with(" UTC, after 1 restart"), "{:?}", j.health_reasons);
        assert_eq!(after.headlines[0].text, "prod: its one job is ok");
    }

    /// The demo's backpressured job: checkpoints complete, two alerts pending. Not `ok`.
    #[test]
    fn a_pending_alert_makes_the_job_pending_not_ok() {
        let s = state(false);
        let view = AlertsView {
            active: vec![
                Arc::new(alert("FlinkCheckpointAlignmentHigh", "warning", AlertState::Pending)),
                Arc::new(alert("FlinkCheckpointStartDelayHigh", "warning", AlertState::Pending)),
            ],
            ..AlertsView::default()
        };
        let r = jobs(&s, &view, Timestamp(1_016_000));
        let j = &r.jobs[0];
        assert_eq!(j.health, Health::Pending);
        assert_eq!(
            j.health_reasons,
            [
                "FlinkCheckpointAlignmentHigh is pending (warning)",
                "FlinkCheckpointStartDelayHigh is pending (warning)"
            ]
        );
        assert_eq!(j.pending_alerts, 2);
        assert_eq!(j.pending_alert_list[0].name, "FlinkCheckpointAlignmentHigh");
        assert_eq!(j.pending_alert_list[0].active_since_ms, 1_000_000);
        assert!(j.firing_alerts.is_empty());
        assert_eq!(serde_json::to_value(j).unwrap()["health"], "pending");
        assert_eq!(clusters(&s, &view, Timestamp(0)).clusters[0].health, Health::Pending);
        // A firing warning outranks a pending alert; a failed checkpoint too.
        let mut both = view.clone();
        both.active.push(Arc::new(alert("FlinkCheckpointExpiredBurst", "warning", AlertState::Firing)));
        assert_eq!(jobs(&s, &both, Timestamp(1_016_000)).jobs[0].health, Health::Warning);
        assert_eq!(jobs(&state(true), &view, Timestamp(1_016_000)).jobs[0].health, Health::Warning);
        // Nothing pending or firing: ok.
        assert_eq!(jobs(&s, &AlertsView::default(), Timestamp(1_016_000)).jobs[0].health, Health::Ok);
    }

    #[test]
    fn a_firing_critical_alert_makes_the_job_critical() {
        let s = state(false);
        let labels: Labels = [
            ("alertname", "FlinkCheckpointsFailing"),
            ("severity", "critical"),
            ("class", "failure"),
            ("cluster", "prod"),
            ("job_id", "j1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let alert = Alert {
            labels,
            annotations: Labels::from([("summary".into(), "checkpoints fail".into())]),
            state: AlertState::Firing,
            active_since: Timestamp(0),
            fired_at: Some(Timestamp(1)),
            resolved_at: None,
            value: Some(1.0),
        };
        let view = AlertsView { active: vec![Arc::new(alert)], ..AlertsView::default() };
        let r = jobs(&s, &view, Timestamp(1_016_000));
        assert_eq!(r.jobs[0].health, Health::Critical);
        assert_eq!(r.jobs[0].firing_alerts[0].summary, "checkpoints fail");
        let d = job(&s, &view, "prod", "j1", Timestamp(1_016_000)).unwrap();
        assert_eq!(d.alerts.active.len(), 1);
        // The API's convention (epoch ms, `…_at_ms`) only: the deprecated names are gone.
        let json = serde_json::to_value(&d.alerts.active[0]).unwrap();
        assert_eq!((json["active_at_ms"].as_i64(), json["fired_at_ms"].as_i64()), (Some(0), Some(1)));
        assert!(json["resolved_at_ms"].is_null() && json.get("resolved_at_ms").is_some());
        for gone in ["active_since", "fired_at", "resolved_at"] {
            assert!(json.get(gone).is_none(), "{gone} in {json}");
        }
        assert_eq!((json["state"].as_str(), json["value"].as_f64()), (Some("firing"), Some(1.0)));
        assert_eq!(json["labels"]["alertname"], "FlinkCheckpointsFailing");
        let detail = serde_json::to_value(&d).unwrap();
        assert!(detail["shadow"]["explanation"].get("expected_next_trigger").is_none());
        assert!(detail["shadow"]["explanation"].get("expected_next_trigger_at_ms").is_some());
    }

    /// A TaskManager line names no job; it belongs to the one job whose JobManager lines name
    /// the same checkpoint, on the job's page and in /api/v1/events.
    #[test]
    fn a_taskmanager_event_joins_the_job_of_its_checkpoint() {
        let mut s = state(false);
        let event = |kind: &str, job: Option<&str>, task: Option<&str>| {
            let mut e = LogEvent::new(kind.into(), crate::observe::EventSeverity::Warning, kind.into());
            e.cluster = "prod".into();
            e.job_id = job.map(str::to_string);
            e.checkpoint_id = Some(3);
            e.task = task.map(str::to_string);
            e.subtask = Some(0);
            e.logged_at = Some("2026-11-29 15:35:41,094".into());
            e
        };
        // A 1.13 decline whose trace was not logged names no task.
        let mut declined = event("declined", Some("j1"), None);
        declined.subtask = None;
        s.apply(
            &Observation::LogEvents(vec![
                event("async_snapshot_failed", None, Some("stateful-map")),
                declined,
            ]),
            Timestamp(1_017_000),
        );
        let d = job(&s, &AlertsView::default(), "prod", "j1", Timestamp(1_017_000)).unwrap();
        let kinds: Vec<&str> = d.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["declined", "async_snapshot_failed"]);
        assert_eq!(d.events[1].task.as_deref(), Some("stateful-map"));
        assert_eq!((d.events[0].task.as_deref(), d.events[0].subtask), (Some("stateful-map"), Some(0)));
        assert_eq!(d.events[1].logged_at_ms, Some(1_795_966_541_094));
        let all = events(&s, 10, Timestamp(1_017_000));
        assert!(all.events.iter().all(|e| e.job_id.as_deref() == Some("j1")));
    }

    #[test]
    fn log_times_read_as_utc_epoch_ms() {
        use crate::time::log_time_utc_ms;
        assert_eq!(log_time_utc_ms("2026-12-01 13:34:42,967"), Some(1_796_132_082_967));
        assert_eq!(log_time_utc_ms("1970-01-01 00:00:00,000"), Some(0));
        assert_eq!(log_time_utc_ms("2024-02-29T23:59:59.999"), Some(1_709_251_199_999));
        assert_eq!(log_time_utc_ms("2026-13-01 13:34:42,967"), None);
        assert_eq!(log_time_utc_ms("yesterday"), None);
    }
}
