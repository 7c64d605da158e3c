//! The simulated cluster of `demo`: job profiles, the coordinator and alignment models stepped
//! per job, the vertex load they imply, and the JobManager log lines they write. Pure but for the
//! time it is handed; `rest.rs` serves it and `mod.rs` runs it.

use std::sync::Arc;
use std::time::Duration;

use crate::model::alignment::{self, AlignmentConfig, JobGraph, Mode, Partitioner};
use crate::model::coordinator::{Coordinator, CoordinatorConfig, Event, Outcome, Schedule};
use crate::model::rng::SplitMix64;
use crate::observe::FailureReason;
use crate::observe::OperatorCheckpoint;
use crate::shadow::alignment::{BUFFER_BYTES, MAX_BUFFERS_PER_CHANNEL, unread_buffers};
use crate::time::{Timestamp, log_time};

/// How often the simulated cluster advances.
pub(crate) const TICK: Duration = Duration::from_millis(100);
/// Alignment variants computed per profile (checkpoints cycle through them).
const VARIANTS: u64 = 4;

/// What a demo job does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Profile {
    /// Short aligned checkpoints on the interval.
    Healthy,
    /// A backlog on the fast source and a hot key: alignment dominates.
    Backpressured,
    /// Every third checkpoint hangs in a snapshot and expires.
    Expiring,
    /// Interval 1 s, min-pause 3 s: checkpoints come every ~3 s.
    MinPauseBound,
    /// Every checkpoint is declined; tolerable 2 is exceeded and the job restarts.
    Failing,
}

impl Profile {
    /// All profiles, in the order jobs cycle through them.
    pub(crate) const ALL: [Profile; 5] = [
        Profile::Healthy,
        Profile::Backpressured,
        Profile::Expiring,
        Profile::MinPauseBound,
        Profile::Failing,
    ];

    /// The job-name part.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Profile::Healthy => "healthy",
            Profile::Backpressured => "backpressured",
            Profile::Expiring => "expiring",
            Profile::MinPauseBound => "minpause",
            Profile::Failing => "failing",
        }
    }

    /// The profile's coordinator with every interval, pause, timeout and restart delay
    /// multiplied by `scale` (1 for the demo; 30 gives production-like 60 s intervals).
    fn coordinator_scaled(self, scale: u64) -> CoordinatorConfig {
        let c = self.coordinator();
        let scale = scale.max(1);
        CoordinatorConfig {
            interval_ms: c.interval_ms * scale,
            min_pause_ms: c.min_pause_ms * scale,
            timeout_ms: c.timeout_ms.saturating_mul(scale),
            restart_delay_ms: c.restart_delay_ms.map(|d| d * scale),
            ..c
        }
    }

    fn coordinator(self) -> CoordinatorConfig {
        let base = CoordinatorConfig {
            tolerable_failures: 100,
            keep_checkpoints: 200,
            num_subtasks: 8,
            ..CoordinatorConfig::default()
        };
        match self {
            Profile::Healthy => CoordinatorConfig { interval_ms: 2_000, ..base },
            Profile::Backpressured => CoordinatorConfig { interval_ms: 3_000, ..base },
            Profile::Expiring => CoordinatorConfig { interval_ms: 2_000, timeout_ms: 3_000, ..base },
            Profile::MinPauseBound => CoordinatorConfig { interval_ms: 1_000, min_pause_ms: 3_000, ..base },
            Profile::Failing => CoordinatorConfig {
                interval_ms: 2_000,
                tolerable_failures: 2,
                restart_delay_ms: Some(3_000),
                ..base
            },
        }
    }

    /// The profile's job graph, one Flink could run: network buffers of Flink's default 32 KiB
    /// segment size, a backlog no larger than a back-pressured channel can hold, and source
    /// rates that its operators keep up with (where an edge is back-pressured, exactly what its
    /// slowest consumer takes). The demo's REST API reports this graph's load
    /// ([`steady_load`]), so the alignment shadow sees the same job that produced the
    /// checkpoints it compares against.
    fn graph(self) -> JobGraph {
        let mut g = match self {
            // A hot key (half the records) on a slow stateful map (a quarter of its peers'
            // rate): the map's hot subtask saturates, the fast source is back-pressured and its
            // channels hold what Flink's full output pool holds unread.
            Profile::Backpressured => {
                let mut g = alignment::lab_job(2, 0, 0.5);
                g.vertices[2].process_rate = 1_000.0;
                g.edges[0].backlog_bytes = full_channel_backlog();
                g
            }
            // The same skew without a bottleneck: every subtask keeps up.
            _ => {
                let mut g = alignment::lab_job(2, 0, 0.0);
                g.vertices[2].process_rate = 20_000.0;
                g
            }
        };
        g.buffer_bytes = BUFFER_BYTES;
        balance(&mut g);
        g
    }
}

/// Bytes a back-pressured channel holds unread when its producer's output pool is full: what
/// the alignment shadow reads back from an `outPoolUsage` of 1 ([`unread_buffers`]).
fn full_channel_backlog() -> u64 {
    (unread_buffers(MAX_BUFFERS_PER_CHANNEL) * BUFFER_BYTES as f64).round() as u64
}

/// The incident the demo shows: its jobs run on several TaskManagers, a cycle of the five
/// profiles on each in turn (the first five jobs on the first), at most [`MAX_TASKMANAGERS`];
/// with two or more, TaskManager [`STALLED_TM`] stalls [`STALL_AFTER_MS`] after the start (not
/// scaled) and from then on every checkpoint of its jobs hangs until it expires. Its jobs have a
/// timeout of at most [`STALLED_TM_TIMEOUT_MS`] (times the interval scale) so that the expiries
/// come within minutes; the jobs on the other TaskManagers go on as before.
pub(crate) const MAX_TASKMANAGERS: usize = 16;
/// The TaskManager that stalls (0-based).
pub(crate) const STALLED_TM: usize = 1;
/// When it stalls, after the start, ms.
pub(crate) const STALL_AFTER_MS: i64 = 20_000;
/// The longest checkpoint timeout of the jobs on the stalled TaskManager, before scaling.
pub(crate) const STALLED_TM_TIMEOUT_MS: u64 = 6_000;

/// TaskManager `k` of the demo as `/jobs/:id/vertices/:vid` names it: (`taskmanager-id`,
/// `endpoint`). The first is the one TaskManager the demo always had.
pub(crate) fn taskmanager(k: usize) -> (String, String) {
    match k {
        0 => ("127.0.0.1:6122-demo01".to_string(), "localhost:6121".to_string()),
        k => (format!("10.0.0.{}:6122-demo{:02}", k + 1, k + 1), format!("10.0.0.{}:6121", k + 1)),
    }
}

/// The subtask that holds a failing checkpoint up (vertex index, subtask index): the hot key's
/// stateful-map subtask, which hangs in its snapshot (expiring job) or declines (failing job)
/// while the others acknowledge, as in the `expired` and `declined` captures.
pub(crate) const HOLDOUT: (usize, u32) = (2, 0);

/// Bytes per record the demo's vertices report (their I/O counters).
pub(crate) const RECORD_BYTES: f64 = 100.0;

/// What one subtask of a demo job reports about its load.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SubtaskRates {
    /// Bytes read per ms.
    pub(crate) in_bytes_per_ms: f64,
    /// Bytes written per ms (into each outgoing edge).
    pub(crate) out_bytes_per_ms: f64,
    /// Busy share of its time.
    pub(crate) busy: f64,
    /// Back-pressured share of its time.
    pub(crate) backpressured: f64,
    /// Share of its output buffer pool in use.
    pub(crate) out_pool_usage: f64,
}

/// The share of upstream subtask `i`'s output on an edge that downstream subtask `j` of `p`
/// receives, as the engine distributes it.
fn share(partitioner: Partitioner, i: u32, j: u32, p: u32) -> f64 {
    match partitioner {
        Partitioner::Forward => f64::from(u8::from(i % p == j)),
        Partitioner::Hash { hot_share } if j == 0 => hot_share + (1.0 - hot_share) / f64::from(p),
        Partitioner::Hash { hot_share } => (1.0 - hot_share) / f64::from(p),
        Partitioner::Rebalance => 1.0 / f64::from(p),
    }
}

/// A subtask's capacity, bytes per ms (the engine's: subtask 0 is `hot_slowdown` times slower).
fn capacity(spec: &alignment::VertexSpec, index: u32) -> f64 {
    spec.process_rate / if index == 0 { spec.hot_slowdown.max(1.0) } else { 1.0 }
}

/// The steady load of a graph whose vertices are in topological order: sources emit at their
/// rate, every other subtask reads what its inputs send it and processes at most its capacity
/// (busy = read / capacity), writing what it processes. A source whose edges carry a backlog is
/// back-pressured (90 % of its time, its output pool full); nothing else is.
pub(crate) fn steady_load(graph: &JobGraph) -> Vec<Vec<SubtaskRates>> {
    let mut load: Vec<Vec<SubtaskRates>> = Vec::with_capacity(graph.vertices.len());
    for (v, spec) in graph.vertices.iter().enumerate() {
        let p = spec.parallelism.max(1);
        let rates = (0..p)
            .map(|j| {
                if let Some(rate) = spec.source_rate {
                    let backlogged = graph.edges.iter().any(|e| e.from == v && e.backlog_bytes > 0);
                    return SubtaskRates {
                        in_bytes_per_ms: 0.0,
                        out_bytes_per_ms: rate,
                        busy: if backlogged { 0.1 } else { 0.2 },
                        backpressured: if backlogged { 0.9 } else { 0.0 },
                        out_pool_usage: if backlogged { 1.0 } else { 0.0 },
                    };
                }
                let read: f64 = graph
                    .edges
                    .iter()
                    .filter(|e| e.to == v && e.from < v)
                    .map(|e| {
                        let up = &load[e.from];
                        up.iter()
                            .enumerate()
                            .map(|(i, u)| u.out_bytes_per_ms * share(e.partitioner, i as u32, j, p))
                            .sum::<f64>()
                    })
                    .sum();
                let cap = capacity(spec, j).max(1e-9);
                SubtaskRates {
                    in_bytes_per_ms: read,
                    out_bytes_per_ms: read.min(cap),
                    busy: (read / cap).min(1.0),
                    backpressured: 0.0,
                    out_pool_usage: 0.0,
                }
            })
            .collect();
        load.push(rates);
    }
    load
}

/// Scales the rates of the back-pressured sources (those with a backlog on an edge) so that
/// the slowest subtask they feed takes exactly what it can, and the other sources' rates so
/// that nothing is over its capacity: the steady state Flink's credit-based flow control
/// reaches.
fn balance(graph: &mut JobGraph) {
    let over = |g: &JobGraph| {
        steady_load(g).iter().zip(&g.vertices).any(|(rates, spec)| {
            spec.source_rate.is_none()
                && rates
                    .iter()
                    .enumerate()
                    .any(|(j, r)| r.in_bytes_per_ms > capacity(spec, j as u32) * (1.0 + 1e-9))
        })
    };
    let backlogged: Vec<usize> = (0..graph.vertices.len())
        .filter(|v| graph.edges.iter().any(|e| e.from == *v && e.backlog_bytes > 0))
        .collect();
    let sources: Vec<usize> =
        (0..graph.vertices.len()).filter(|v| graph.vertices[*v].source_rate.is_some()).collect();
    // The back-pressured sources first (they are the ones a saturated subtask slows down); if
    // they are none, or slowing them is not enough, every source.
    for group in [backlogged, sources] {
        if group.is_empty() || !over(graph) {
            continue;
        }
        let base: Vec<f64> = group.iter().map(|v| graph.vertices[*v].source_rate.unwrap_or(0.0)).collect();
        let scaled = |g: &mut JobGraph, f: f64| {
            for (v, rate) in group.iter().zip(&base) {
                g.vertices[*v].source_rate = Some(rate * f);
            }
        };
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..60 {
            let mid = (lo + hi) / 2.0;
            scaled(graph, mid);
            if over(graph) { hi = mid } else { lo = mid }
        }
        scaled(graph, lo);
    }
}

/// One alignment run a profile's checkpoints reuse.
#[derive(Clone, Debug)]
pub(crate) struct Variant {
    /// Trigger → last ack, ms.
    pub(crate) duration_ms: u64,
    /// Per-operator details.
    pub(crate) operators: Vec<OperatorCheckpoint>,
    /// Bytes of state written.
    pub(crate) state_bytes: u64,
    /// Bytes processed during alignment.
    pub(crate) processed_bytes: u64,
    /// In-flight bytes persisted.
    pub(crate) persisted_bytes: u64,
}

/// One simulated job.
pub struct DemoJob {
    /// Flink-style job id.
    pub id: String,
    /// Job name.
    pub name: String,
    /// Its behaviour.
    pub(crate) profile: Profile,
    /// When it was submitted.
    pub(crate) start: Timestamp,
    /// Its graph.
    pub(crate) graph: JobGraph,
    /// The coordinator model.
    pub coordinator: Coordinator,
    /// What its subtasks report about their load (per vertex, per subtask), from `graph`.
    pub(crate) load: Vec<Vec<SubtaskRates>>,
    /// The TaskManager its subtasks run on ([`taskmanager`]).
    pub(crate) taskmanager: usize,
    /// When its TaskManager stalls, if it does.
    stalls_at: Option<Timestamp>,
    variants: Arc<Vec<Variant>>,
}

impl DemoJob {
    /// The variant checkpoint `id` uses.
    pub(crate) fn variant(&self, id: u64) -> &Variant {
        &self.variants[(id % self.variants.len() as u64) as usize]
    }
}

/// The simulated cluster.
pub struct DemoCluster {
    /// Its jobs.
    pub jobs: Vec<DemoJob>,
    /// How many TaskManagers run them.
    pub(crate) taskmanagers: usize,
}

impl DemoCluster {
    /// `n` jobs cycling through the profiles, all submitted at `start`.
    pub fn new(n: usize, seed: u64, start: Timestamp) -> Self {
        DemoCluster::with_interval_scale(n, seed, start, 1)
    }

    /// As [`new`](Self::new), with every profile's intervals and timeouts times `scale`.
    pub(crate) fn with_interval_scale(n: usize, seed: u64, start: Timestamp, scale: u64) -> Self {
        let variants: Vec<Arc<Vec<Variant>>> =
            Profile::ALL.iter().map(|p| Arc::new(variants(*p, seed))).collect();
        let taskmanagers = n.div_ceil(Profile::ALL.len()).clamp(1, MAX_TASKMANAGERS);
        let jobs = (0..n)
            .map(|i| {
                let profile = Profile::ALL[i % Profile::ALL.len()];
                let tm = (i / Profile::ALL.len()) % taskmanagers;
                let stalls = taskmanagers > 1 && tm == STALLED_TM;
                let mut config = profile.coordinator_scaled(scale);
                if stalls {
                    config.timeout_ms = config.timeout_ms.min(STALLED_TM_TIMEOUT_MS * scale.max(1));
                }
                let mut rng = SplitMix64::fork(seed, i as u64);
                let id = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
                let graph = profile.graph();
                DemoJob {
                    id,
                    name: format!("demo-{}-{i}", profile.name()),
                    profile,
                    start,
                    load: steady_load(&graph),
                    graph,
                    coordinator: Coordinator::new(config, start, Schedule::Seeded(rng.next_u64())),
                    taskmanager: tm,
                    stalls_at: stalls.then(|| start.plus_millis(STALL_AFTER_MS)),
                    variants: variants[i % Profile::ALL.len()].clone(),
                }
            })
            .collect();
        DemoCluster { jobs, taskmanagers }
    }

    /// Advances every job to `now`; returns the JobManager log lines of what happened, in time
    /// order across jobs (a record and its continuation lines stay together).
    pub fn advance(&mut self, now: Timestamp) -> Vec<String> {
        let mut records: Vec<(Timestamp, Vec<String>)> = Vec::new();
        for job in &mut self.jobs {
            let profile = job.profile;
            let variants = job.variants.clone();
            let stalls_at = job.stalls_at;
            let mut outcomes = |id: u64, triggered_at: Timestamp| {
                // Its TaskManager stalled: no subtask on it acknowledges, the checkpoint expires.
                if stalls_at.is_some_and(|at| triggered_at >= at) {
                    return Outcome::Hang;
                }
                outcome(profile, id, &variants)
            };
            job.coordinator.run_until(now, &mut outcomes);
            for event in job.coordinator.drain_events() {
                if let Event::Triggered { id, .. } = event {
                    let operators = variants[(id % variants.len() as u64) as usize].operators.clone();
                    if let Some(c) = job.coordinator.checkpoint_mut(id) {
                        c.operators = operators;
                    }
                }
                records.push((event_time(&event), log_lines(job, &event)));
            }
        }
        records.sort_by_key(|(at, _)| *at);
        records.into_iter().flat_map(|(_, lines)| lines).collect()
    }
}

fn event_time(event: &Event) -> Timestamp {
    match *event {
        Event::Triggered { at, .. }
        | Event::Completed { at, .. }
        | Event::Failed { at, .. }
        | Event::RequestDropped { at, .. }
        | Event::JobFailed { at, .. }
        | Event::JobRestarted { at, .. } => at,
    }
}

fn variants(profile: Profile, seed: u64) -> Vec<Variant> {
    let graph = profile.graph();
    let config = AlignmentConfig { mode: Mode::Aligned, ..AlignmentConfig::default() };
    (0..VARIANTS)
        .map(|v| {
            let r = alignment::simulate(&graph, &config, seed ^ (v + 1) ^ (profile as u64) << 8);
            Variant {
                duration_ms: r.end_to_end_ms.unwrap_or(0.0).round() as u64,
                operators: r.operators(&graph),
                state_bytes: graph.vertices.iter().map(|x| x.state_bytes * x.parallelism as u64).sum(),
                processed_bytes: r.subtasks.iter().map(|s| s.processed_bytes).sum(),
                persisted_bytes: r.subtasks.iter().map(|s| s.persisted_bytes).sum(),
            }
        })
        .collect()
}

fn outcome(profile: Profile, id: u64, variants: &[Variant]) -> Outcome {
    let duration_ms = variants[(id % variants.len() as u64) as usize].duration_ms.max(1);
    match profile {
        Profile::Expiring if id.is_multiple_of(3) => Outcome::Hang,
        // After the other subtasks acknowledged (~50 ms), the holdout's asynchronous part fails.
        Profile::Failing => Outcome::Fail { after_ms: 80, reason: FailureReason::CheckpointAsyncException },
        _ => Outcome::Complete { duration_ms },
    }
}

fn line(at: Timestamp, level: &str, logger: &str, message: &str) -> String {
    format!("{} {level:<5} {logger:<60} [] - {message}", log_time(at))
}

const COORDINATOR: &str = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator";
const FAILURE_MANAGER: &str = "org.apache.flink.runtime.checkpoint.CheckpointFailureManager";
const EXECUTION_GRAPH: &str = "org.apache.flink.runtime.executiongraph.ExecutionGraph";

/// The JobManager log lines Flink 2.x writes for `event` (formats from mission-anchors §3.1).
fn log_lines(job: &DemoJob, event: &Event) -> Vec<String> {
    let jid = &job.id;
    match *event {
        Event::Triggered { at, id } => vec![line(
            at,
            "INFO",
            COORDINATOR,
            &format!("Triggering checkpoint {id} (type=CheckpointType{{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}}) @ {} for job {jid}.", at.0),
        )],
        Event::Completed { at, id, duration_ms } => vec![line(
            at,
            "INFO",
            COORDINATOR,
            &format!(
                "Completed checkpoint {id} for job {jid} ({} bytes, checkpointDuration={duration_ms} ms, finalizationTime=0 ms).",
                job.variant(id).state_bytes
            ),
        )],
        Event::Failed { at, id, reason, consecutive_before } => {
            let mut out = Vec::new();
            match reason {
                FailureReason::CheckpointExpired => {
                    out.push(line(at, "INFO", COORDINATOR, &format!("Checkpoint {id} of job {jid} expired before completing.")))
                }
                FailureReason::CheckpointAsyncException | FailureReason::CheckpointDeclined => out.push(line(
                    at,
                    "INFO",
                    COORDINATOR,
                    &format!("Decline checkpoint {id} by task 5a44ef70092224af50ee1c30c6ad3cec_0_0 of job {jid} at localhost:41234-demo."),
                )),
                _ => {}
            }
            out.push(line(
                at,
                "WARN",
                FAILURE_MANAGER,
                &format!("Failed to trigger or complete checkpoint {id} for job {jid}. ({consecutive_before} consecutive failed attempts so far)"),
            ));
            out.push(format!("org.apache.flink.runtime.checkpoint.CheckpointException: {}", reason.message()));
            out
        }
        // As Flink 2.3.0 logs it (tolerable-exceeded capture): the exception carries no job id.
        Event::JobFailed { at, reason } => vec![
            line(at, "INFO", "org.apache.flink.runtime.jobmaster.JobMaster", "Trying to recover from a global failure."),
            format!(
                "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to {}, view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.",
                reason.message()
            ),
            "\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:212)".to_string(),
            line(at, "INFO", EXECUTION_GRAPH, &format!("Job {} ({jid}) switched from state RUNNING to RESTARTING.", job.name)),
        ],
        Event::JobRestarted { at, restored_from } => {
            let mut out = vec![line(at, "INFO", EXECUTION_GRAPH, &format!("Job {} ({jid}) switched from state RESTARTING to RUNNING.", job.name))];
            if let Some(id) = restored_from {
                out.push(line(at, "INFO", COORDINATOR, &format!("Restoring job {jid} from Checkpoint {id} @ {} for {jid} located at file:/tmp/demo/{jid}/chk-{id}.", at.0)));
            }
            out
        }
        Event::RequestDropped { .. } => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_time_is_utc_log4j() {
        assert_eq!(log_time(Timestamp(0)), "1970-01-01 00:00:00,000");
        // 1795964442535 is 2026-11-29 15:00:42,535 UTC (the 2.3.0 healthy capture).
        assert_eq!(log_time(Timestamp(1_795_964_442_535)), "2026-11-29 15:00:42,535");
    }

    /// Ten jobs on two TaskManagers: once the second stalls, only its five jobs' checkpoints
    /// expire; the first's healthy job completes every checkpoint.
    #[test]
    fn only_the_jobs_on_the_stalled_taskmanager_expire() {
        let start = Timestamp(1_795_964_442_000);
        let mut cluster = DemoCluster::new(10, 7, start);
        assert_eq!(cluster.taskmanagers, 2);
        let lines = cluster.advance(start.plus_millis(STALL_AFTER_MS + 30_000));
        let expired_after_stall = |j: &DemoJob| {
            j.coordinator.checkpoints().any(|c| {
                c.triggered_at >= start.plus_millis(STALL_AFTER_MS)
                    && c.to_finished(8).is_some_and(|f| {
                        f.failure_message.as_deref() == Some("Checkpoint expired before completing.")
                    })
            })
        };
        for j in &cluster.jobs {
            let on_stalled = j.taskmanager == STALLED_TM;
            assert_eq!(
                on_stalled,
                cluster.jobs.iter().position(|x| x.id == j.id).unwrap() >= 5,
                "{}",
                j.name
            );
            if on_stalled {
                assert!(expired_after_stall(j), "{} on the stalled TaskManager", j.name);
                assert!(
                    j.coordinator.checkpoints().all(|c| c.triggered_at < start.plus_millis(STALL_AFTER_MS)
                        || c.to_finished(8)
                            .is_none_or(|f| f.status != crate::observe::CheckpointStatus::Completed)),
                    "{}",
                    j.name
                );
            }
        }
        let healthy = &cluster.jobs[0];
        assert_eq!((healthy.profile, healthy.coordinator.counts().failed), (Profile::Healthy, 0));
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("of job {} expired before completing.", cluster.jobs[5].id)))
        );
        assert_eq!(taskmanager(1), ("10.0.0.2:6122-demo02".to_string(), "10.0.0.2:6121".to_string()));
    }

    #[test]
    fn profiles_behave_as_named() {
        let start = Timestamp(1_795_964_442_000);
        let mut cluster = DemoCluster::new(5, 7, start);
        let lines = cluster.advance(start.plus_millis(60_000));
        let by = |p: Profile| cluster.jobs.iter().find(|j| j.profile == p).unwrap();
        let completed = |p: Profile| by(p).coordinator.counts().completed;
        assert!(completed(Profile::Healthy) >= 25, "{}", completed(Profile::Healthy));
        assert!(by(Profile::Expiring).coordinator.counts().failed >= 5);
        let mp: Vec<i64> =
            by(Profile::MinPauseBound).coordinator.checkpoints().map(|c| c.triggered_at.0).collect();
        assert!(mp.windows(2).all(|w| w[1] - w[0] >= 3_000), "min-pause bound: {mp:?}");
        // Never completing a checkpoint, it restarts without a restore.
        assert!(lines.iter().any(|l| l.contains("switched from state RESTARTING to RUNNING.")));
        let bp =
            by(Profile::Backpressured).coordinator.checkpoints().find(|c| !c.operators.is_empty()).unwrap();
        let map0 = &bp.operators[2].subtasks[0];
        assert!(map0.alignment_ms.unwrap() > map0.sync_ms.unwrap() + map0.async_ms.unwrap(), "{map0:?}");
        assert!(lines.iter().any(|l| l.contains("Exceeded checkpoint tolerable failure threshold.")));
        assert!(lines.iter().any(|l| l.contains("expired before completing.")));
        assert!(lines[0].starts_with("2026-11-29 15:00:"), "{}", lines[0]);
        let stamps: Vec<&str> = lines.iter().filter(|l| l.starts_with("2026-")).map(|l| &l[..23]).collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "log lines in time order");
        let bp_durations: Vec<u64> = by(Profile::Backpressured)
            .coordinator
            .checkpoints()
            .filter_map(|c| c.to_finished(8)?.end_to_end_ms)
            .collect();
        assert!(
            bp_durations.iter().all(|d| (500..3_000).contains(d)),
            "alignment-bound but below the interval: {bp_durations:?}"
        );
    }
}
