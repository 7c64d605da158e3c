//! The JSON API's response types: what `/api/v1/` serialises, and the few constructors that
//! turn one state part into one view (an alert, a restore, a blocked thread).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::health::Outcome;
use crate::observe::{JobStatus, LogKind};
use crate::rules::{Alert, AlertSeverity, AlertState, Labels};
use crate::shadow::{Deviation, Explanation};
use crate::time::Timestamp;

/// `GET /api/v1/clusters`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ClustersResponse {
    /// The server's time, so clients compute ages against the same clock.
    pub(crate) now_ms: i64,
    /// Every watched cluster, by name.
    pub(crate) clusters: Vec<ClusterView>,
}

/// One watched cluster.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ClusterView {
    /// The configured name.
    pub(crate) name: String,
    /// Whether the last poll round reached the JobManager.
    pub(crate) reachable: bool,
    /// Whether any poll round ever reached it.
    pub(crate) answered_once: bool,
    /// Flink's version from `/overview`.
    pub(crate) flink_version: Option<String>,
    /// Completed poll rounds.
    pub(crate) polls_total: u64,
    /// Poll errors by kind (`connect`, `timeout`, `http_status`, `decode`).
    pub(crate) poll_errors: BTreeMap<&'static str, u64>,
    /// Duration of the last poll round.
    pub(crate) last_poll_duration_ms: u64,
    /// When the JobManager last answered.
    pub(crate) last_success_at_ms: Option<i64>,
    /// Jobs known (listed now or recently).
    pub(crate) jobs: usize,
    /// The worst health of its jobs (`unknown` when unreachable).
    pub(crate) health: Health,
    /// Root causes classified from its log files, by category.
    pub(crate) root_causes: BTreeMap<&'static str, u64>,
}

pub(crate) use crate::health::Health;

/// `GET /api/v1/jobs`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct JobsResponse {
    /// The server's time.
    pub(crate) now_ms: i64,
    /// One line per cluster: how many of its jobs are not ok, and the worst.
    pub(crate) headlines: Vec<ClusterHeadline>,
    /// One page of the jobs the filter keeps, worst first ([`jobs_page`]).
    pub(crate) jobs: Vec<JobSummaryView>,
    /// Every known job, whatever the filter.
    pub(crate) total: usize,
    /// The jobs the filter keeps, on every page.
    pub(crate) matched: usize,
    /// Every known job by health, whatever the filter.
    pub(crate) counts: super::page::HealthCounts,
    /// The most jobs in one answer (`limit`, default [`super::page::DEFAULT_LIMIT`]).
    pub(crate) limit: usize,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub(crate) next_cursor: Option<String>,
}

/// `GET /api/v1/incidents`: many jobs, one cause (`rules::incidents`), largest first.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct IncidentsResponse {
    /// The server's time.
    pub(crate) now_ms: i64,
    /// The incidents of the rule loop's latest round; `members` left empty when not asked for.
    pub(crate) incidents: Vec<crate::rules::incidents::Incident>,
}

pub(crate) use crate::outputs::answer::{Answer, ClusterHeadline, RecentOutcomes, WindowCulprit};

/// A job in the jobs table.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct JobSummaryView {
    /// The configured cluster name.
    pub(crate) cluster: String,
    /// Flink's job id.
    pub(crate) job_id: String,
    /// The job name.
    pub(crate) name: String,
    /// Flink's job state (`RUNNING`, `RESTARTING`, …).
    pub(crate) state: JobStatus,
    /// Whether the JobManager listed it in the last poll round.
    pub(crate) listed: bool,
    /// How it is doing.
    pub(crate) health: Health,
    /// Why it is not `ok`, one short sentence each.
    pub(crate) health_reasons: Vec<String>,
    /// What is wrong, where, the class and the next step; `null` when it is ok.
    pub(crate) answer: Option<Answer>,
    /// How its recent checkpoints ended (the ones its page lists).
    pub(crate) recent_outcomes: RecentOutcomes,
    /// The newest finished checkpoint (completed or failed).
    pub(crate) last_checkpoint: Option<CheckpointView>,
    /// When the newest completed checkpoint completed.
    pub(crate) last_completed_at_ms: Option<i64>,
    /// Checkpoints in progress at the last poll.
    pub(crate) in_progress: usize,
    /// Age of the oldest checkpoint in progress.
    pub(crate) oldest_in_progress_age_ms: Option<u64>,
    /// Failed checkpoints since the last completed one (among the recent ones).
    pub(crate) consecutive_failures: u64,
    /// Checkpoints counted so far (equal to Flink's counts).
    pub(crate) completed_total: u64,
    /// Failed checkpoints counted so far.
    pub(crate) failed_total: u64,
    /// P95 per phase over the histogram window (completed checkpoints, slowest subtask each).
    pub(crate) p95_ms: PhaseValues,
    /// Configured interval.
    pub(crate) interval_ms: Option<u64>,
    /// Configured timeout.
    pub(crate) timeout_ms: Option<u64>,
    /// Firing alerts of this job.
    pub(crate) firing_alerts: Vec<AlertBrief>,
    /// Pending alerts of this job (condition holds, not yet for `for`).
    pub(crate) pending_alerts: usize,
    /// Those pending alerts.
    pub(crate) pending_alert_list: Vec<AlertBrief>,
    /// The other lane: the advisor's risk findings its configuration shows (`tolerable_too_high`,
    /// `timeout_tight`, `no_retention`; docs/advice.md), whatever its health. Advice never makes
    /// a job "not ok"; `/api/v1/jobs/{cluster}/{job_id}/advice` has the details.
    pub(crate) advice: Vec<&'static str>,
    /// The application it belongs to where Flink serves applications (2.3+, FLIP-549).
    pub(crate) application: Option<ApplicationView>,
}

/// An application (Flink 2.3+): several jobs under one id and name.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ApplicationView {
    /// The application id.
    pub(crate) id: String,
    /// Its name.
    pub(crate) name: String,
    /// Its status.
    pub(crate) status: String,
    /// The ids of its jobs.
    pub(crate) job_ids: Vec<String>,
}

/// One value per tracked phase (ms); `None` when unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct PhaseValues {
    /// Trigger to last acknowledgement.
    pub(crate) end_to_end: Option<u64>,
    /// Trigger to first barrier.
    pub(crate) start_delay: Option<u64>,
    /// First to last barrier.
    pub(crate) alignment: Option<u64>,
    /// Synchronous snapshot.
    pub(crate) sync: Option<u64>,
    /// Asynchronous snapshot.
    #[serde(rename = "async")]
    pub(crate) async_: Option<u64>,
}

/// An alert, briefly.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AlertBrief {
    /// `alertname`.
    pub(crate) name: String,
    /// `critical`, `warning` or `info`.
    pub(crate) severity: AlertSeverity,
    /// `blocking`, `timeout` or `failure`.
    pub(crate) class: String,
    /// The rendered summary.
    pub(crate) summary: String,
    /// When it started firing.
    pub(crate) fired_at_ms: Option<i64>,
    /// Since when its condition holds (pending, then firing).
    pub(crate) active_since_ms: i64,
}

/// A finished checkpoint.
#[derive(Clone, Debug, Serialize)]
pub struct CheckpointView {
    /// Checkpoint id.
    pub id: u64,
    /// `completed`, `expired`, `declined` or `failed`.
    pub outcome: Outcome,
    /// `checkpoint`, `unaligned_checkpoint` or `savepoint`.
    pub(crate) kind: &'static str,
    /// Trigger time.
    pub(crate) triggered_at_ms: i64,
    /// Completion or failure time.
    pub(crate) finished_at_ms: i64,
    /// Trigger to last acknowledgement (Flink's `end_to_end_duration`).
    pub(crate) end_to_end_ms: Option<u64>,
    /// Trigger to completion or failure.
    pub elapsed_ms: u64,
    /// The longest value of each phase over all acknowledged subtasks (each may be a different
    /// subtask); `None` when the per-subtask details could not be fetched.
    pub(crate) phases_ms: Option<PhaseValues>,
    /// The subtask that acknowledged last.
    pub slowest_subtask: Option<SlowestSubtask>,
    /// Why it failed, as Flink words it.
    pub(crate) failure_message: Option<String>,
    /// What the metrics said about its culprit subtask and TaskManager at that moment (a slow
    /// or failed checkpoint's: `text`, `class`, `used`, `thin` and the numbers), else `null`.
    pub(crate) evidence: Option<crate::state::evidence::CheckpointEvidence>,
    /// The stack of the subtask that held it up, when one was sampled while it was in progress
    /// (`[thread_dumps]`, docs/thread-dumps.md); `null` otherwise.
    pub(crate) blocked_thread: Option<BlockedThreadView>,
}

/// The task thread of the subtask that held a checkpoint up, as sampled.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BlockedThreadView {
    /// The operator chain (job vertex) name.
    pub(crate) operator: String,
    /// The subtask index (0-based).
    pub(crate) subtask: u32,
    /// The TaskManager's id.
    pub(crate) taskmanager: String,
    /// The thread's name (`null` from a flame graph).
    pub(crate) thread: Option<String>,
    /// `RUNNABLE`, `BLOCKED`, `WAITING`, `TIMED_WAITING` (`null` from a flame graph).
    pub(crate) state: Option<&'static str>,
    /// When it was taken.
    pub(crate) taken_at_ms: i64,
    /// `thread_dump` or `flame_graph`.
    pub(crate) source: &'static str,
    /// The top frames, innermost first; the user's frame is marked.
    pub(crate) frames: Vec<FrameView>,
    /// The first frame outside Flink and the JDK, `class.method(File.java:42)`.
    pub(crate) user_frame: Option<String>,
    /// Whether the stack stopped before its end (`cluster.thread-dump.stacktrace-max-depth`,
    /// 8 frames before Flink 1.17): a user frame may lie below.
    pub(crate) stopped_early: bool,
    /// Of a flame graph, the samples in its user frame and all: `[hits, of]`.
    pub(crate) hits: Option<(u32, u32)>,
    /// The same in one line (`blocked in: … on tm-1 (thread …)`).
    pub(crate) text: String,
}

/// One frame of a [`BlockedThreadView`].
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FrameView {
    /// `class.method(File.java:42)`.
    pub(crate) text: String,
    /// Whether it is the user's frame.
    pub(crate) user: bool,
}

/// The API's view of a thread sample.
pub(crate) fn blocked_thread_view(s: &crate::observe::ThreadSample) -> BlockedThreadView {
    BlockedThreadView {
        operator: s.operator.clone(),
        subtask: s.subtask,
        taskmanager: s.taskmanager.clone(),
        thread: s.thread.clone(),
        state: s.state.map(|st| st.as_str()),
        taken_at_ms: s.taken_at.millis(),
        source: s.source.as_str(),
        frames: s
            .frames
            .iter()
            .take(crate::state::threads::RECORD_FRAMES.max(s.user_frame.map_or(0, |u| u + 1)))
            .enumerate()
            .map(|(i, f)| FrameView { text: f.text(), user: s.user_frame == Some(i) })
            .collect(),
        user_frame: s.user().map(|f| f.text()),
        stopped_early: s.stopped_early,
        hits: s.hits,
        text: s.text(),
    }
}

/// The subtask that held a checkpoint up: for a completed checkpoint the one that acknowledged
/// last; for a failed one the one that did not acknowledge before it failed (or, declined, the
/// one that declined), not the slowest that did acknowledge.
#[derive(Clone, Debug, Serialize)]
pub struct SlowestSubtask {
    /// The operator chain (job vertex) name.
    pub operator: String,
    /// The subtask index (0-based, as in the REST API).
    pub subtask: u32,
    /// Whether it acknowledged before the checkpoint completed or failed.
    pub acknowledged: bool,
    /// How it held the checkpoint up: `acknowledged_last`, `acknowledged_late`,
    /// `never_acknowledged` or `declined`.
    pub(crate) role: crate::health::culprit::Role,
    /// Its acknowledgement − trigger (for a subtask of a failed checkpoint, an acknowledgement
    /// that came only after the checkpoint had failed); `null` when it never acknowledged.
    pub end_to_end_ms: Option<u64>,
    /// Its own phases (they add up to about `end_to_end_ms`).
    pub(crate) phases_ms: Option<PhaseValues>,
    /// Its TaskManager: as a log line of this checkpoint named it, else where the subtask ran
    /// when the poller last fetched the job's vertices (Flink's per-subtask checkpoint
    /// statistics carry no location).
    pub(crate) taskmanager: Option<String>,
    /// The same in one plain sentence, e.g. "stateful-map #0 never acknowledged (5 of 6
    /// acknowledged)".
    pub text: String,
}

/// `GET /api/v1/jobs/{cluster}/{job_id}`.
#[derive(Clone, Debug, Serialize)]
pub struct JobDetailView {
    /// The server's time.
    pub(crate) now_ms: i64,
    /// Everything the jobs table shows.
    #[serde(flatten)]
    pub(crate) summary: JobSummaryView,
    /// The checkpoint configuration as last polled.
    pub(crate) settings: Option<SettingsView>,
    /// P50/P95/P99 per phase over the window.
    pub(crate) phases: PhaseQuantiles,
    /// P95 per phase over time, oldest first: a point whenever they changed, at most one per
    /// spacing (`state::history`); not persisted, so it starts empty after a restart.
    pub(crate) p95_history: Vec<P95Point>,
    /// Per operator chain: P95 of every subtask's phases.
    pub(crate) operators: Vec<OperatorView>,
    /// Recent finished checkpoints, oldest first.
    pub checkpoints: Vec<CheckpointView>,
    /// The subtask that held those checkpoints up: of the newest failed one the subtask that
    /// did not acknowledge it, else the one that acknowledged latest.
    pub(crate) slowest_in_window: Option<WindowCulprit>,
    /// Checkpoints in progress at the last poll.
    pub(crate) checkpoints_in_progress: Vec<InProgressView>,
    /// The latest restore.
    pub(crate) latest_restore: Option<RestoreView>,
    /// The job's latest restores the daemon saw, newest first (at most
    /// `state::restore::RECENT_RESTORES`), and how many it counted by what they restored from.
    pub(crate) restores: RestoresView,
    /// The job's latest rescales, oldest first (at most `state::rescale::RECENT_RESCALES`), each
    /// with the checkpoint that gated it.
    pub(crate) rescales: Vec<RescaleView>,
    /// The shadow model's expectation and explanation.
    pub(crate) shadow: ShadowView,
    /// This job's pending and firing alerts, and its recently resolved ones.
    pub(crate) alerts: JobAlerts,
    /// Recent non-routine log events of this job, newest first.
    pub(crate) events: Vec<EventView>,
    /// Per operator chain, the state skew of its latest completed checkpoint with per-subtask
    /// sizes (1 MiB of state or more; max over median, the hot subtask).
    pub(crate) state_skew: Vec<crate::state::evidence::StateSkew>,
}

/// The P95 of each phase at one time.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct P95Point {
    /// When the P95s had these values.
    pub(crate) at_ms: i64,
    /// P95 per phase over the window ending then; `null` for a phase without values.
    pub(crate) p95_ms: PhaseValues,
}

/// The checkpoint configuration.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct SettingsView {
    /// `exactly_once` or `at_least_once`.
    pub(crate) mode: CheckpointingMode,
    /// Interval (absent when periodic checkpoints are off).
    pub(crate) interval_ms: Option<u64>,
    /// Timeout.
    pub(crate) timeout_ms: Option<u64>,
    /// Minimum pause between checkpoints.
    pub(crate) min_pause_ms: u64,
    /// Maximum concurrent checkpoints.
    pub(crate) max_concurrent: u32,
    /// Tolerable consecutive failed checkpoints.
    pub(crate) tolerable_failures: Option<u32>,
    /// Unaligned checkpoints enabled.
    pub(crate) unaligned: bool,
    /// Aligned checkpoint timeout.
    pub(crate) aligned_checkpoint_timeout_ms: Option<u64>,
    /// State backend.
    pub(crate) state_backend: Option<String>,
}

/// The guarantee checkpoints give (`execution.checkpointing.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CheckpointingMode {
    /// Barriers are aligned (or unaligned): every record counted once in the state.
    ExactlyOnce,
    /// Barriers are not aligned: records after a barrier may be in the state twice on restore.
    AtLeastOnce,
}

/// P50/P95/P99 of one phase.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct Quantiles {
    /// Median.
    pub(crate) p50: Option<u64>,
    /// 95th percentile.
    pub(crate) p95: Option<u64>,
    /// 99th percentile.
    pub(crate) p99: Option<u64>,
    /// Values in the window.
    pub(crate) window_count: u64,
}

/// Quantiles per phase.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct PhaseQuantiles {
    /// Trigger to last acknowledgement.
    pub(crate) end_to_end: Quantiles,
    /// Trigger to first barrier.
    pub(crate) start_delay: Quantiles,
    /// First to last barrier.
    pub(crate) alignment: Quantiles,
    /// Synchronous snapshot.
    pub(crate) sync: Quantiles,
    /// Asynchronous snapshot.
    #[serde(rename = "async")]
    pub(crate) async_: Quantiles,
}

/// One operator chain.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct OperatorView {
    /// The vertex id.
    pub(crate) vertex_id: String,
    /// The operator chain's name.
    pub(crate) name: String,
    /// P95 of every acknowledged subtask's phases.
    pub(crate) p95_ms: PhaseValues,
}

/// A checkpoint in progress.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct InProgressView {
    /// Checkpoint id.
    pub(crate) id: u64,
    /// Trigger time.
    pub(crate) triggered_at_ms: i64,
    /// Subtasks that must acknowledge.
    pub(crate) num_subtasks: u32,
    /// Subtasks that acknowledged.
    pub(crate) num_acknowledged: u32,
    /// The stack of the subtask holding it up, when sampled ([`BlockedThreadView`]).
    pub(crate) blocked_thread: Option<BlockedThreadView>,
}

/// A restore.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RestoreView {
    /// The checkpoint restored from, when known.
    pub(crate) checkpoint_id: Option<u64>,
    /// When the JobManager restored it (Flink's `restore_timestamp`): the restore's start.
    pub(crate) at_ms: i64,
    /// Whether it was a savepoint (`null` until the daemon looked at the restore).
    pub(crate) is_savepoint: Option<bool>,
    /// Where the checkpoint or savepoint was stored.
    pub(crate) external_path: Option<String>,
    /// `restoring` (not every subtask RUNNING yet), `measured`, or `unmeasured` (the job
    /// restarted again or ended first); `null` until the daemon looked at the restore.
    pub(crate) status: Option<&'static str>,
    /// When the last subtask entered RUNNING: the restore's end.
    pub(crate) running_at_ms: Option<i64>,
    /// `running_at_ms` − `at_ms`.
    pub(crate) duration_ms: Option<u64>,
    /// When the job entered RESTARTING before it (a failover).
    pub(crate) restarting_at_ms: Option<i64>,
    /// `running_at_ms` − `restarting_at_ms`: how long the job did not run.
    pub(crate) downtime_ms: Option<u64>,
    /// The subtask that was RUNNING last.
    pub(crate) last_subtask: Option<crate::state::restore::LastSubtask>,
    /// Subtasks of the job when timed.
    pub(crate) subtasks: Option<u32>,
    /// The same in one sentence.
    pub(crate) text: String,
}

/// A job's restores.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RestoresView {
    /// Restores counted from a checkpoint (failovers).
    pub(crate) from_checkpoint: u64,
    /// Restores counted from a savepoint.
    pub(crate) from_savepoint: u64,
    /// The latest ones, newest first.
    pub(crate) recent: Vec<RestoreView>,
}

/// What a restore restored from, in words: "checkpoint 12", "savepoint 7".
fn restored_what(from: &crate::observe::RestoredFrom) -> String {
    let kind = if from.is_savepoint { "savepoint" } else { "checkpoint" };
    match from.checkpoint_id {
        Some(id) => format!("{kind} {id}"),
        None => kind.to_string(),
    }
}

/// The view of one restore the daemon counted.
pub(crate) fn restore_view(r: &crate::state::restore::RestoreRecord) -> RestoreView {
    use crate::state::restore::RestoreOutcome;
    let fmt = crate::time::human_ms;
    let what = restored_what(&r.from);
    let text = match (r.outcome, r.duration_ms) {
        (RestoreOutcome::Measured, Some(ms)) => {
            let mut t = format!(
                "Restored from {what}: all {} subtasks RUNNING {} after the JobManager restored it",
                r.subtasks,
                fmt(ms)
            );
            if let Some(down) = r.downtime_ms {
                t.push_str(&format!(" ({} after the job began restarting)", fmt(down)));
            }
            if let Some(last) = &r.last_subtask {
                t.push_str(&format!("; the last was {} #{}", last.operator, last.subtask));
                if let Some(init) = last.initializing_ms {
                    t.push_str(&format!(", {} of it restoring its state (INITIALIZING)", fmt(init)));
                }
            }
            t.push('.');
            t
        }
        (RestoreOutcome::Restoring, _) => format!("Restoring from {what}: not every subtask is RUNNING yet."),
        _ => format!(
            "Restored from {what}; not timed: the job restarted again or ended before every subtask was RUNNING."
        ),
    };
    RestoreView {
        checkpoint_id: r.from.checkpoint_id,
        at_ms: r.from.restored_at.millis(),
        is_savepoint: Some(r.from.is_savepoint),
        external_path: r.from.external_path.clone(),
        status: Some(r.outcome.as_str()),
        running_at_ms: r.running_at.map(|t| t.millis()),
        duration_ms: r.duration_ms,
        restarting_at_ms: r.restarting_at.map(|t| t.millis()),
        downtime_ms: r.downtime_ms,
        last_subtask: r.last_subtask.clone(),
        subtasks: (r.outcome == RestoreOutcome::Measured).then_some(r.subtasks),
        text,
    }
}

/// A job's latest restore: the daemon's record of it, or (for a restore the poll reported
/// before the daemon looked at it) what the poll said.
pub(super) fn latest_restore_view(j: &crate::state::JobState) -> Option<RestoreView> {
    let counted = j.restores.latest();
    match (j.latest_restore, counted) {
        (Some((id, at)), c) if c.is_none_or(|c| c.from.restored_at < at) => Some(RestoreView {
            checkpoint_id: id,
            at_ms: at.millis(),
            is_savepoint: None,
            external_path: None,
            status: None,
            running_at_ms: None,
            duration_ms: None,
            restarting_at_ms: None,
            downtime_ms: None,
            last_subtask: None,
            subtasks: None,
            text: match id {
                Some(id) => format!("Restored from checkpoint or savepoint {id}."),
                None => "Restored.".to_string(),
            },
        }),
        (_, c) => c.map(restore_view),
    }
}

/// What the shadow model says.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ShadowView {
    /// The sentences and numbers (schedule, expected next trigger, stall, alignment holder, …).
    pub(crate) explanation: Explanation,
    /// Recent deviations of observed triggers from the model, oldest first.
    pub(crate) deviations: Vec<Deviation>,
    /// Deviations so far by kind.
    pub(crate) deviation_counts: BTreeMap<&'static str, u64>,
    /// P95 of |observed − expected| trigger time over the window.
    pub(crate) trigger_deviation_p95_ms: Option<u64>,
}

/// A job's alerts.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct JobAlerts {
    /// Pending and firing.
    pub(crate) active: Vec<AlertView>,
    /// Recently resolved, newest first.
    pub(crate) resolved: Vec<AlertView>,
}

/// `GET /api/v1/alerts`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AlertsResponse {
    /// This page's pending and firing alerts, by their labels.
    pub(crate) active: Vec<AlertView>,
    /// This page's recently resolved alerts, oldest first (after every active one).
    pub(crate) resolved: Vec<AlertView>,
    /// Every pending and firing alert.
    pub(crate) total_active: usize,
    /// Every recently resolved alert kept.
    pub(crate) total_resolved: usize,
    /// The most alerts in one answer (`limit`, default [`super::page::DEFAULT_LIMIT`]).
    pub(crate) limit: usize,
    /// Pass as `cursor` for the next page; `null` on the last.
    pub(crate) next_cursor: Option<String>,
}

/// An alert as the API shows it, its times under the API's convention (epoch ms, `…_at_ms`).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AlertView {
    /// Identity: `alertname`, `severity`, `class`, the subject's labels.
    pub(crate) labels: Labels,
    /// `summary`, `description`, `runbook_url`.
    pub(crate) annotations: Labels,
    /// `pending`, `firing` or `resolved`.
    pub(crate) state: AlertState,
    /// The latest value of the condition's left side.
    pub(crate) value: Option<f64>,
    /// Since when the condition holds, epoch ms.
    pub(crate) active_at_ms: i64,
    /// When it started firing, epoch ms.
    pub(crate) fired_at_ms: Option<i64>,
    /// When it resolved, epoch ms.
    pub(crate) resolved_at_ms: Option<i64>,
}

impl From<&Alert> for AlertView {
    fn from(alert: &Alert) -> Self {
        AlertView {
            labels: alert.labels.clone(),
            annotations: alert.annotations.clone(),
            state: alert.state,
            value: alert.value,
            active_at_ms: alert.active_since.millis(),
            fired_at_ms: alert.fired_at.map(Timestamp::millis),
            resolved_at_ms: alert.resolved_at.map(Timestamp::millis),
        }
    }
}

/// A log event.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct EventView {
    /// `expired`, `declined`, `failed`, `barrier_missing`, …
    pub(crate) kind: LogKind,
    /// `info`, `warning` or `error`.
    pub(crate) severity: crate::observe::EventSeverity,
    /// `log` or `rest`.
    pub(crate) source: &'static str,
    /// The line's own timestamp text (the writer's local time, no zone). Deprecated: read
    /// `logged_at_ms`.
    pub(crate) logged_at: Option<String>,
    /// The line's time, epoch ms, reading its text as UTC (Flink's log4j layout writes no zone;
    /// right when the JobManager and TaskManagers log in UTC, as the official images do).
    pub(crate) logged_at_ms: Option<i64>,
    /// The checkpoint it is about.
    pub(crate) checkpoint_id: Option<u64>,
    /// The task (operator chain) it names.
    pub(crate) task: Option<String>,
    /// The subtask index it names.
    pub(crate) subtask: Option<u32>,
    /// The TaskManager it names.
    pub(crate) taskmanager: Option<String>,
    /// Why, as Flink words it.
    pub(crate) reason: Option<String>,
    /// The classified deepest cause of its stack trace.
    pub(crate) root_cause: Option<crate::observe::RootCause>,
    /// The line's message.
    pub(crate) message: String,
    /// The file it came from.
    pub(crate) file: String,
}

/// `GET /api/v1/events`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct EventsResponse {
    /// The server's time.
    pub(crate) now_ms: i64,
    /// Recent non-routine log events of every cluster, newest first: (cluster, job id, event).
    pub(crate) events: Vec<ClusterEvent>,
}

/// An event with the cluster and job it belongs to.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ClusterEvent {
    /// The cluster.
    pub(crate) cluster: String,
    /// The job, when the line names one.
    pub(crate) job_id: Option<String>,
    /// The event.
    #[serde(flatten)]
    pub(crate) event: EventView,
}

/// `GET /api/v1/jobs/{cluster}/{job_id}/advice`: the advisor's findings (`docs/advice.md`),
/// the same object as one job of `advise --format json`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AdviceView<'a> {
    /// The cluster.
    pub(crate) cluster: &'a str,
    /// The job id.
    pub(crate) job_id: &'a str,
    /// The job name.
    pub(crate) job_name: &'a str,
    /// Configuration, observed figures, thin-evidence note, prediction and findings.
    #[serde(flatten)]
    pub(crate) advice: &'a crate::advice::Advice,
}

/// `GET /api/v1/jobs/{cluster}/{job_id}/checkpoints`: records of the checkpoint store.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CheckpointHistoryView {
    /// The server's time.
    pub(crate) now_ms: i64,
    /// The cluster's name.
    pub(crate) cluster: String,
    /// The job id.
    pub(crate) job_id: String,
    /// The range asked for (trigger times, epoch ms, inclusive), `null` when open.
    pub(crate) since_ms: Option<i64>,
    /// The end of that range.
    pub(crate) until_ms: Option<i64>,
    /// The outcome asked for, if any.
    pub(crate) outcome: Option<String>,
    /// The limit applied.
    pub(crate) limit: usize,
    /// Whether more records matched than `limit`: these are the newest `limit`.
    pub(crate) truncated: bool,
    /// The records, oldest first, in the shape of the job's `checkpoints`.
    pub(crate) checkpoints: Vec<StoredCheckpointView>,
    /// The job's restores with a restore time in the range (the newest `limit`), oldest first,
    /// in the shape of the job's `latest_restore`.
    pub(crate) restores: Vec<RestoreView>,
}

/// A checkpoint or savepoint from the store.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct StoredCheckpointView {
    /// What the job's `checkpoints` show of it.
    #[serde(flatten)]
    pub(crate) checkpoint: CheckpointView,
    /// Bytes it persisted (the incremental size for incremental checkpoints).
    pub(crate) checkpointed_bytes: Option<u64>,
    /// Full state size (Flink 1.15 and later).
    pub(crate) full_state_bytes: Option<u64>,
    /// Bytes processed during alignment.
    pub(crate) processed_data_bytes: Option<u64>,
    /// In-flight bytes persisted.
    pub(crate) persisted_data_bytes: Option<u64>,
}

/// A rescale of a job.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RescaleView {
    /// When it ended (Flink's history), or when the daemon saw the new parallelism.
    pub(crate) at_ms: i64,
    /// When it was asked for (Flink's history only).
    pub(crate) started_at_ms: Option<i64>,
    /// When the old execution stopped.
    pub(crate) restarted_at_ms: Option<i64>,
    /// `rescale_history` (Flink 2.3's) or `parallelism_change` (a restart changed it).
    pub(crate) source: &'static str,
    /// Flink's trigger cause (`UPDATE_REQUIREMENT`, …), history only.
    pub(crate) cause: Option<String>,
    /// Flink's terminal state (`COMPLETED`, `FAILED`), history only.
    pub(crate) outcome: Option<String>,
    /// The vertices whose parallelism changed.
    pub(crate) vertices: Vec<crate::observe::VertexRescale>,
    /// The checkpoint that gated it: the one the new parallelism restored, else the newest
    /// completed before the old execution stopped.
    pub(crate) gated_by_checkpoint: Option<u64>,
    /// One sentence.
    pub(crate) text: String,
}

/// The view of one rescale of job `j`.
pub(crate) fn rescale_view(j: &crate::state::job::JobState, r: &crate::observe::Rescale) -> RescaleView {
    let completed = j
        .recent
        .iter()
        .filter(|c| c.status == crate::observe::CheckpointStatus::Completed)
        .map(|c| (c.id, c.finished_at));
    let gate = crate::state::rescale::gating_checkpoint(r, &j.restores, completed);
    let how = match (&r.cause, &r.outcome) {
        (Some(cause), Some(outcome)) => {
            format!(" ({}, {})", cause.to_lowercase().replace('_', " "), outcome.to_lowercase())
        }
        _ => String::new(),
    };
    let gated = gate.map_or(String::new(), |id| format!(", gated by checkpoint {id}"));
    RescaleView {
        at_ms: r.at.millis(),
        started_at_ms: r.started_at.map(|t| t.millis()),
        restarted_at_ms: r.restarted_at.map(|t| t.millis()),
        source: r.source.as_str(),
        cause: r.cause.clone(),
        outcome: r.outcome.clone(),
        vertices: r.vertices.clone(),
        gated_by_checkpoint: gate,
        text: format!("rescaled: {}{how}{gated}", r.parallelism_words()),
    }
}
