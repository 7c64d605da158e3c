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
pub struct ClustersResponse {
    /// The server's time, so clients compute ages against the same clock.
    pub now_ms: i64,
    /// Every watched cluster, by name.
    pub clusters: Vec<ClusterView>,
}

/// One watched cluster.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterView {
    /// The configured name.
    pub name: String,
    /// Whether the last poll round reached the JobManager.
    pub reachable: bool,
    /// Whether any poll round ever reached it.
    pub answered_once: bool,
    /// Flink's version from `/overview`.
    pub flink_version: Option<String>,
    /// Completed poll rounds.
    pub polls_total: u64,
    /// Poll errors by kind (`connect`, `timeout`, `http_status`, `decode`).
    pub poll_errors: BTreeMap<&'static str, u64>,
    /// Duration of the last poll round.
    pub last_poll_duration_ms: u64,
    /// When the JobManager last answered.
    pub last_success_at_ms: Option<i64>,
    /// Jobs known (listed now or recently).
    pub jobs: usize,
    /// The worst health of its jobs (`unknown` when unreachable).
    pub health: Health,
    /// Root causes classified from its log files, by category.
    pub root_causes: BTreeMap<&'static str, u64>,
}

pub use crate::health::Health;

/// `GET /api/v1/jobs`.
#[derive(Clone, Debug, Serialize)]
pub struct JobsResponse {
    /// The server's time.
    pub now_ms: i64,
    /// One line per cluster: how many of its jobs are not ok, and the worst.
    pub headlines: Vec<ClusterHeadline>,
    /// Every known job, worst first ([`jobs`]).
    pub jobs: Vec<JobSummaryView>,
}

pub use crate::outputs::answer::{Answer, ClusterHeadline, RecentOutcomes, WindowCulprit};

/// A job in the jobs table.
#[derive(Clone, Debug, Serialize)]
pub struct JobSummaryView {
    /// The configured cluster name.
    pub cluster: String,
    /// Flink's job id.
    pub job_id: String,
    /// The job name.
    pub name: String,
    /// Flink's job state (`RUNNING`, `RESTARTING`, …).
    pub state: JobStatus,
    /// Whether the JobManager listed it in the last poll round.
    pub listed: bool,
    /// How it is doing.
    pub health: Health,
    /// Why it is not `ok`, one short sentence each.
    pub health_reasons: Vec<String>,
    /// What is wrong, where, the class and the next step; `null` when it is ok.
    pub answer: Option<Answer>,
    /// How its recent checkpoints ended (the ones its page lists).
    pub recent_outcomes: RecentOutcomes,
    /// The newest finished checkpoint (completed or failed).
    pub last_checkpoint: Option<CheckpointView>,
    /// When the newest completed checkpoint completed.
    pub last_completed_at_ms: Option<i64>,
    /// Checkpoints in progress at the last poll.
    pub in_progress: usize,
    /// Age of the oldest checkpoint in progress.
    pub oldest_in_progress_age_ms: Option<u64>,
    /// Failed checkpoints since the last completed one (among the recent ones).
    pub consecutive_failures: u64,
    /// Checkpoints counted so far (equal to Flink's counts).
    pub completed_total: u64,
    /// Failed checkpoints counted so far.
    pub failed_total: u64,
    /// P95 per phase over the histogram window (completed checkpoints, slowest subtask each).
    pub p95_ms: PhaseValues,
    /// Configured interval.
    pub interval_ms: Option<u64>,
    /// Configured timeout.
    pub timeout_ms: Option<u64>,
    /// Firing alerts of this job.
    pub firing_alerts: Vec<AlertBrief>,
    /// Pending alerts of this job (condition holds, not yet for `for`).
    pub pending_alerts: usize,
    /// Those pending alerts.
    pub pending_alert_list: Vec<AlertBrief>,
    /// The other lane: the advisor's risk findings its configuration shows (`tolerable_too_high`,
    /// `timeout_tight`, `no_retention`; docs/advice.md), whatever its health. Advice never makes
    /// a job "not ok"; `/api/v1/jobs/{cluster}/{job_id}/advice` has the details.
    pub advice: Vec<&'static str>,
}

/// One value per tracked phase (ms); `None` when unknown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseValues {
    /// Trigger to last acknowledgement.
    pub end_to_end: Option<u64>,
    /// Trigger to first barrier.
    pub start_delay: Option<u64>,
    /// First to last barrier.
    pub alignment: Option<u64>,
    /// Synchronous snapshot.
    pub sync: Option<u64>,
    /// Asynchronous snapshot.
    #[serde(rename = "async")]
    pub async_: Option<u64>,
}

/// An alert, briefly.
#[derive(Clone, Debug, Serialize)]
pub struct AlertBrief {
    /// `alertname`.
    pub name: String,
    /// `critical`, `warning` or `info`.
    pub severity: AlertSeverity,
    /// `blocking`, `timeout` or `failure`.
    pub class: String,
    /// The rendered summary.
    pub summary: String,
    /// When it started firing.
    pub fired_at_ms: Option<i64>,
    /// Since when its condition holds (pending, then firing).
    pub active_since_ms: i64,
}

/// A finished checkpoint.
#[derive(Clone, Debug, Serialize)]
pub struct CheckpointView {
    /// Checkpoint id.
    pub id: u64,
    /// `completed`, `expired`, `declined` or `failed`.
    pub outcome: Outcome,
    /// `checkpoint`, `unaligned_checkpoint` or `savepoint`.
    pub kind: &'static str,
    /// Trigger time.
    pub triggered_at_ms: i64,
    /// Completion or failure time.
    pub finished_at_ms: i64,
    /// Trigger to last acknowledgement (Flink's `end_to_end_duration`).
    pub end_to_end_ms: Option<u64>,
    /// Trigger to completion or failure.
    pub elapsed_ms: u64,
    /// The longest value of each phase over all acknowledged subtasks (each may be a different
    /// subtask); `None` when the per-subtask details could not be fetched.
    pub phases_ms: Option<PhaseValues>,
    /// The subtask that acknowledged last.
    pub slowest_subtask: Option<SlowestSubtask>,
    /// Why it failed, as Flink words it.
    pub failure_message: Option<String>,
    /// What the metrics said about its culprit subtask and TaskManager at that moment (a slow
    /// or failed checkpoint's: `text`, `class`, `used`, `thin` and the numbers), else `null`.
    pub evidence: Option<crate::state::evidence::CheckpointEvidence>,
    /// The stack of the subtask that held it up, when one was sampled while it was in progress
    /// (`[thread_dumps]`, docs/thread-dumps.md); `null` otherwise.
    pub blocked_thread: Option<BlockedThreadView>,
}

/// The task thread of the subtask that held a checkpoint up, as sampled.
#[derive(Clone, Debug, Serialize)]
pub struct BlockedThreadView {
    /// The operator chain (job vertex) name.
    pub operator: String,
    /// The subtask index (0-based).
    pub subtask: u32,
    /// The TaskManager's id.
    pub taskmanager: String,
    /// The thread's name (`null` from a flame graph).
    pub thread: Option<String>,
    /// `RUNNABLE`, `BLOCKED`, `WAITING`, `TIMED_WAITING` (`null` from a flame graph).
    pub state: Option<&'static str>,
    /// When it was taken.
    pub taken_at_ms: i64,
    /// `thread_dump` or `flame_graph`.
    pub source: &'static str,
    /// The top frames, innermost first; the user's frame is marked.
    pub frames: Vec<FrameView>,
    /// The first frame outside Flink and the JDK, `class.method(File.java:42)`.
    pub user_frame: Option<String>,
    /// Whether the stack stopped before its end (`cluster.thread-dump.stacktrace-max-depth`,
    /// 8 frames before Flink 1.17): a user frame may lie below.
    pub stopped_early: bool,
    /// Of a flame graph, the samples in its user frame and all: `[hits, of]`.
    pub hits: Option<(u32, u32)>,
    /// The same in one line (`blocked in: … on tm-1 (thread …)`).
    pub text: String,
}

/// One frame of a [`BlockedThreadView`].
#[derive(Clone, Debug, Serialize)]
pub struct FrameView {
    /// `class.method(File.java:42)`.
    pub text: String,
    /// Whether it is the user's frame.
    pub user: bool,
}

/// The API's view of a thread sample.
pub fn blocked_thread_view(s: &crate::observe::ThreadSample) -> BlockedThreadView {
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
    pub role: crate::health::culprit::Role,
    /// Its acknowledgement − trigger (for a subtask of a failed checkpoint, an acknowledgement
    /// that came only after the checkpoint had failed); `null` when it never acknowledged.
    pub end_to_end_ms: Option<u64>,
    /// Its own phases (they add up to about `end_to_end_ms`).
    pub phases_ms: Option<PhaseValues>,
    /// Its TaskManager: as a log line of this checkpoint named it, else where the subtask ran
    /// when the poller last fetched the job's vertices (Flink's per-subtask checkpoint
    /// statistics carry no location).
    pub taskmanager: Option<String>,
    /// The same in one plain sentence, e.g. "stateful-map #0 never acknowledged (5 of 6
    /// acknowledged)".
    pub text: String,
}

/// `GET /api/v1/jobs/{cluster}/{job_id}`.
#[derive(Clone, Debug, Serialize)]
pub struct JobDetailView {
    /// The server's time.
    pub now_ms: i64,
    /// Everything the jobs table shows.
    #[serde(flatten)]
    pub summary: JobSummaryView,
    /// The checkpoint configuration as last polled.
    pub settings: Option<SettingsView>,
    /// P50/P95/P99 per phase over the window.
    pub phases: PhaseQuantiles,
    /// P95 per phase over time, oldest first: a point whenever they changed, at most one per
    /// spacing (`state::history`); not persisted, so it starts empty after a restart.
    pub p95_history: Vec<P95Point>,
    /// Per operator chain: P95 of every subtask's phases.
    pub operators: Vec<OperatorView>,
    /// Recent finished checkpoints, oldest first.
    pub checkpoints: Vec<CheckpointView>,
    /// The subtask that held those checkpoints up: of the newest failed one the subtask that
    /// did not acknowledge it, else the one that acknowledged latest.
    pub slowest_in_window: Option<WindowCulprit>,
    /// Checkpoints in progress at the last poll.
    pub checkpoints_in_progress: Vec<InProgressView>,
    /// The latest restore.
    pub latest_restore: Option<RestoreView>,
    /// The job's latest restores the daemon saw, newest first (at most
    /// `state::restore::RECENT_RESTORES`), and how many it counted by what they restored from.
    pub restores: RestoresView,
    /// The shadow model's expectation and explanation.
    pub shadow: ShadowView,
    /// This job's pending and firing alerts, and its recently resolved ones.
    pub alerts: JobAlerts,
    /// Recent non-routine log events of this job, newest first.
    pub events: Vec<EventView>,
    /// Per operator chain, the state skew of its latest completed checkpoint with per-subtask
    /// sizes (1 MiB of state or more; max over median, the hot subtask).
    pub state_skew: Vec<crate::state::evidence::StateSkew>,
}

/// The P95 of each phase at one time.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct P95Point {
    /// When the P95s had these values.
    pub at_ms: i64,
    /// P95 per phase over the window ending then; `null` for a phase without values.
    pub p95_ms: PhaseValues,
}

/// The checkpoint configuration.
#[derive(Clone, Debug, Serialize)]
pub struct SettingsView {
    /// `exactly_once` or `at_least_once`.
    pub mode: CheckpointingMode,
    /// Interval (absent when periodic checkpoints are off).
    pub interval_ms: Option<u64>,
    /// Timeout.
    pub timeout_ms: Option<u64>,
    /// Minimum pause between checkpoints.
    pub min_pause_ms: u64,
    /// Maximum concurrent checkpoints.
    pub max_concurrent: u32,
    /// Tolerable consecutive failed checkpoints.
    pub tolerable_failures: Option<u32>,
    /// Unaligned checkpoints enabled.
    pub unaligned: bool,
    /// Aligned checkpoint timeout.
    pub aligned_checkpoint_timeout_ms: Option<u64>,
    /// State backend.
    pub state_backend: Option<String>,
}

/// The guarantee checkpoints give (`execution.checkpointing.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointingMode {
    /// Barriers are aligned (or unaligned): every record counted once in the state.
    ExactlyOnce,
    /// Barriers are not aligned: records after a barrier may be in the state twice on restore.
    AtLeastOnce,
}

/// P50/P95/P99 of one phase.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Quantiles {
    /// Median.
    pub p50: Option<u64>,
    /// 95th percentile.
    pub p95: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
    /// Values in the window.
    pub window_count: u64,
}

/// Quantiles per phase.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PhaseQuantiles {
    /// Trigger to last acknowledgement.
    pub end_to_end: Quantiles,
    /// Trigger to first barrier.
    pub start_delay: Quantiles,
    /// First to last barrier.
    pub alignment: Quantiles,
    /// Synchronous snapshot.
    pub sync: Quantiles,
    /// Asynchronous snapshot.
    #[serde(rename = "async")]
    pub async_: Quantiles,
}

/// One operator chain.
#[derive(Clone, Debug, Serialize)]
pub struct OperatorView {
    /// The vertex id.
    pub vertex_id: String,
    /// The operator chain's name.
    pub name: String,
    /// P95 of every acknowledged subtask's phases.
    pub p95_ms: PhaseValues,
}

/// A checkpoint in progress.
#[derive(Clone, Debug, Serialize)]
pub struct InProgressView {
    /// Checkpoint id.
    pub id: u64,
    /// Trigger time.
    pub triggered_at_ms: i64,
    /// Subtasks that must acknowledge.
    pub num_subtasks: u32,
    /// Subtasks that acknowledged.
    pub num_acknowledged: u32,
    /// The stack of the subtask holding it up, when sampled ([`BlockedThreadView`]).
    pub blocked_thread: Option<BlockedThreadView>,
}

/// A restore.
#[derive(Clone, Debug, Serialize)]
pub struct RestoreView {
    /// The checkpoint restored from, when known.
    pub checkpoint_id: Option<u64>,
    /// When the JobManager restored it (Flink's `restore_timestamp`): the restore's start.
    pub at_ms: i64,
    /// Whether it was a savepoint (`null` until the daemon looked at the restore).
    pub is_savepoint: Option<bool>,
    /// Where the checkpoint or savepoint was stored.
    pub external_path: Option<String>,
    /// `restoring` (not every subtask RUNNING yet), `measured`, or `unmeasured` (the job
    /// restarted again or ended first); `null` until the daemon looked at the restore.
    pub status: Option<&'static str>,
    /// When the last subtask entered RUNNING: the restore's end.
    pub running_at_ms: Option<i64>,
    /// `running_at_ms` − `at_ms`.
    pub duration_ms: Option<u64>,
    /// When the job entered RESTARTING before it (a failover).
    pub restarting_at_ms: Option<i64>,
    /// `running_at_ms` − `restarting_at_ms`: how long the job did not run.
    pub downtime_ms: Option<u64>,
    /// The subtask that was RUNNING last.
    pub last_subtask: Option<crate::state::restore::LastSubtask>,
    /// Subtasks of the job when timed.
    pub subtasks: Option<u32>,
    /// The same in one sentence.
    pub text: String,
}

/// A job's restores.
#[derive(Clone, Debug, Serialize)]
pub struct RestoresView {
    /// Restores counted from a checkpoint (failovers).
    pub from_checkpoint: u64,
    /// Restores counted from a savepoint.
    pub from_savepoint: u64,
    /// The latest ones, newest first.
    pub recent: Vec<RestoreView>,
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
pub fn restore_view(r: &crate::state::restore::RestoreRecord) -> RestoreView {
    use crate::state::restore::RestoreOutcome;
    let fmt = crate::time::fmt_duration;
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
pub struct ShadowView {
    /// The sentences and numbers (schedule, expected next trigger, stall, alignment holder, …).
    pub explanation: Explanation,
    /// Recent deviations of observed triggers from the model, oldest first.
    pub deviations: Vec<Deviation>,
    /// Deviations so far by kind.
    pub deviation_counts: BTreeMap<&'static str, u64>,
    /// P95 of |observed − expected| trigger time over the window.
    pub trigger_deviation_p95_ms: Option<u64>,
}

/// A job's alerts.
#[derive(Clone, Debug, Serialize)]
pub struct JobAlerts {
    /// Pending and firing.
    pub active: Vec<AlertView>,
    /// Recently resolved, newest first.
    pub resolved: Vec<AlertView>,
}

/// An alert as the API shows it, its times under the API's convention (epoch ms, `…_at_ms`).
#[derive(Clone, Debug, Serialize)]
pub struct AlertView {
    /// Identity: `alertname`, `severity`, `class`, the subject's labels.
    pub labels: Labels,
    /// `summary`, `description`, `runbook_url`.
    pub annotations: Labels,
    /// `pending`, `firing` or `resolved`.
    pub state: AlertState,
    /// The latest value of the condition's left side.
    pub value: Option<f64>,
    /// Since when the condition holds, epoch ms.
    pub active_at_ms: i64,
    /// When it started firing, epoch ms.
    pub fired_at_ms: Option<i64>,
    /// When it resolved, epoch ms.
    pub resolved_at_ms: Option<i64>,
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
pub struct EventView {
    /// `expired`, `declined`, `failed`, `barrier_missing`, …
    pub kind: LogKind,
    /// `info`, `warning` or `error`.
    pub severity: crate::observe::EventSeverity,
    /// `log` or `rest`.
    pub source: &'static str,
    /// The line's own timestamp text (the writer's local time, no zone). Deprecated: read
    /// `logged_at_ms`.
    pub logged_at: Option<String>,
    /// The line's time, epoch ms, reading its text as UTC (Flink's log4j layout writes no zone;
    /// right when the JobManager and TaskManagers log in UTC, as the official images do).
    pub logged_at_ms: Option<i64>,
    /// The checkpoint it is about.
    pub checkpoint_id: Option<u64>,
    /// The task (operator chain) it names.
    pub task: Option<String>,
    /// The subtask index it names.
    pub subtask: Option<u32>,
    /// The TaskManager it names.
    pub taskmanager: Option<String>,
    /// Why, as Flink words it.
    pub reason: Option<String>,
    /// The classified deepest cause of its stack trace.
    pub root_cause: Option<crate::observe::RootCause>,
    /// The line's message.
    pub message: String,
    /// The file it came from.
    pub file: String,
}

/// `GET /api/v1/events`.
#[derive(Clone, Debug, Serialize)]
pub struct EventsResponse {
    /// The server's time.
    pub now_ms: i64,
    /// Recent non-routine log events of every cluster, newest first: (cluster, job id, event).
    pub events: Vec<ClusterEvent>,
}

/// An event with the cluster and job it belongs to.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterEvent {
    /// The cluster.
    pub cluster: String,
    /// The job, when the line names one.
    pub job_id: Option<String>,
    /// The event.
    #[serde(flatten)]
    pub event: EventView,
}

/// `GET /api/v1/jobs/{cluster}/{job_id}/advice`: the advisor's findings (`docs/advice.md`),
/// the same object as one job of `advise --format json`.
#[derive(Clone, Debug, Serialize)]
pub struct AdviceView<'a> {
    /// The cluster.
    pub cluster: &'a str,
    /// The job id.
    pub job_id: &'a str,
    /// The job name.
    pub job_name: &'a str,
    /// Configuration, observed figures, thin-evidence note, prediction and findings.
    #[serde(flatten)]
    pub advice: &'a crate::advice::Advice,
}

/// `GET /api/v1/jobs/{cluster}/{job_id}/checkpoints`: records of the checkpoint store.
#[derive(Clone, Debug, Serialize)]
pub struct CheckpointHistoryView {
    /// The server's time.
    pub now_ms: i64,
    /// The cluster's name.
    pub cluster: String,
    /// The job id.
    pub job_id: String,
    /// The range asked for (trigger times, epoch ms, inclusive), `null` when open.
    pub since_ms: Option<i64>,
    /// The end of that range.
    pub until_ms: Option<i64>,
    /// The outcome asked for, if any.
    pub outcome: Option<String>,
    /// The limit applied.
    pub limit: usize,
    /// Whether more records matched than `limit`: these are the newest `limit`.
    pub truncated: bool,
    /// The records, oldest first, in the shape of the job's `checkpoints`.
    pub checkpoints: Vec<StoredCheckpointView>,
    /// The job's restores with a restore time in the range (the newest `limit`), oldest first,
    /// in the shape of the job's `latest_restore`.
    pub restores: Vec<RestoreView>,
}

/// A checkpoint or savepoint from the store.
#[derive(Clone, Debug, Serialize)]
pub struct StoredCheckpointView {
    /// What the job's `checkpoints` show of it.
    #[serde(flatten)]
    pub checkpoint: CheckpointView,
    /// Bytes it persisted (the incremental size for incremental checkpoints).
    pub checkpointed_bytes: Option<u64>,
    /// Full state size (Flink 1.15 and later).
    pub full_state_bytes: Option<u64>,
    /// Bytes processed during alignment.
    pub processed_data_bytes: Option<u64>,
    /// In-flight bytes persisted.
    pub persisted_data_bytes: Option<u64>,
}
