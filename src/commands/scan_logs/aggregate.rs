//! The aggregate of a scan: every event folded in as it comes, in a compact form (interned
//! strings, no stack traces, every per-checkpoint collection capped), and what the reports read
//! of it (timelines, root causes, blocking subtasks, missing barriers).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::observe::{LogEvent, counts_root_cause};
use crate::sources::logs::parse::SYMPTOM_CATEGORIES;

/// Kinds that name a subtask holding a checkpoint up or failing it.
const BLOCKING_KINDS: &[&str] = &[
    "declined",
    "late_message",
    "async_snapshot_failed",
    "sync_snapshot_failed",
    "barrier_missing",
    "barrier_overtaken",
    "end_of_partition",
    "execution_delay",
];

/// Timeline events kept (≈ 80 bytes each); further ones are counted in `timeline_events_dropped`.
pub(super) const MAX_TIMELINE_EVENTS: usize = 1_000_000;
/// Checkpoint ids listed per blocking subtask.
const MAX_BLOCKING_IDS: usize = 10_000;
/// Distinct (exception, message) examples kept per root-cause category.
const MAX_CAUSE_EXAMPLES: usize = 100;
/// (subtask, checkpoint) pairs whose barrier times are kept (from DEBUG barrier lines).
const MAX_ALIGNMENTS: usize = 100_000;
/// Flink's message when the coordinator aborts the checkpoints in progress because the job
/// stops: a cancel, a stop-with-savepoint, a failover or a JobManager shutdown.
pub(super) const SUSPENDING: &str = "Checkpoint Coordinator is suspending";

/// What the aggregate reads of an event, borrowed (from a [`LogEvent`] or a packed unit's
/// text): not `outputs::api::EventView`, the API's owned event with its severity and message.
pub(super) struct BorrowedEvent<'a> {
    pub(super) kind: &'a str,
    pub(super) logged_at: Option<&'a str>,
    pub(super) job_id: Option<&'a str>,
    pub(super) checkpoint_id: Option<u64>,
    pub(super) task: Option<&'a str>,
    pub(super) subtask: Option<u32>,
    pub(super) taskmanager: Option<&'a str>,
    pub(super) duration_ms: Option<u64>,
    pub(super) consecutive_failures: Option<u32>,
    pub(super) reason: Option<&'a str>,
    pub(super) detail: Option<&'a str>,
    /// (category, exception, message)
    pub(super) root_cause: Option<(&'static str, &'a str, &'a str)>,
}

impl<'a> BorrowedEvent<'a> {
    pub(super) fn of(e: &'a LogEvent) -> Self {
        BorrowedEvent {
            kind: e.kind.as_str(),
            logged_at: e.logged_at.as_deref(),
            job_id: e.job_id.as_deref(),
            checkpoint_id: e.checkpoint_id,
            task: e.task.as_deref(),
            subtask: e.subtask,
            taskmanager: e.taskmanager.as_deref(),
            duration_ms: e.duration_ms,
            consecutive_failures: e.consecutive_failures,
            reason: e.reason.as_deref(),
            detail: e.detail.as_deref(),
            root_cause: e.root_cause.as_ref().map(|c| (c.category, c.exception.as_str(), c.message.as_str())),
        }
    }
}

/// A map with foldhash's fast hash, fixed seed, instead of SipHash: its keys are interned
/// strings and ids of the scanned logs, looked up for every event; not DoS-resistant (a scan
/// reads files the operator chose), and nothing iterates over it in an order that reaches a
/// report.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// Strings seen more than once (tasks, TaskManagers, reasons, channels, jobs), stored once.
#[derive(Debug, Default)]
struct Interner {
    ids: FastMap<Box<str>, u32>,
    strings: Vec<Box<str>>,
}

impl Interner {
    /// The symbol of `s`; 0 is "none".
    fn intern(&mut self, s: Option<&str>) -> u32 {
        let Some(s) = s else { return 0 };
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        self.strings.push(s.into());
        let id = self.strings.len() as u32;
        self.ids.insert(s.into(), id);
        id
    }

    fn get(&self, sym: u32) -> Option<&str> {
        (sym > 0).then(|| &*self.strings[sym as usize - 1])
    }
}

/// An event as a timeline keeps it: what the text and JSON reports print, nothing more.
#[derive(Clone, Debug)]
pub(super) struct TimelineEvent {
    pub(super) seq: u64,
    pub(super) kind: u32,
    pub(super) file: u32,
    /// The line's timestamp (`2026-11-29 15:04:08,723`), inline: it differs for every event.
    pub(super) at: Option<Box<str>>,
    pub(super) task: u32,
    pub(super) subtask: Option<u32>,
    pub(super) taskmanager: u32,
    pub(super) duration_ms: Option<u64>,
    pub(super) consecutive_failures: Option<u32>,
    pub(super) reason: u32,
    pub(super) cause: u32,
}

/// A root cause, interned: not `diagnose`'s `Cause` (a likely cause with the page that
/// explains it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct InternedCause {
    pub(super) category: &'static str,
    pub(super) exception: u32,
    pub(super) message: u32,
}

/// A subtask that held checkpoints up or failed them, from its log lines: not `diagnose`'s
/// `Blocking` (a subtask that acknowledged last, from the REST API).
#[derive(Debug, Default)]
pub(super) struct BlockingSubtask {
    pub(super) count: u64,
    pub(super) kinds: BTreeSet<u32>,
    pub(super) checkpoints: BTreeSet<u64>,
    pub(super) taskmanager: u32,
}

/// How often a root-cause category was counted, and how often each interned (exception,
/// message) of it.
pub(super) type CauseCounts = (u64, BTreeMap<(u32, u32), u64>);

/// A subtask: (interned task name, 0-based index when the line gives one).
type SubtaskKey = (u32, Option<u32>);

fn count_cause(causes: &mut BTreeMap<&'static str, CauseCounts>, c: InternedCause) {
    let entry = causes.entry(c.category).or_default();
    entry.0 += 1;
    let examples = entry.1.len();
    match entry.1.get_mut(&(c.exception, c.message)) {
        Some(n) => *n += 1,
        None if examples < MAX_CAUSE_EXAMPLES => {
            entry.1.insert((c.exception, c.message), 1);
        }
        None => {}
    }
}

/// Everything the report needs, folded in event by event.
#[derive(Debug, Default)]
pub(super) struct Aggregate {
    strings: Interner,
    pub(super) next_seq: u64,
    files: Vec<u32>,
    pub(super) kinds: BTreeMap<String, u64>,
    /// Root causes of lines that name no checkpoint, by category: (count, (exception,
    /// message) → count).
    causes: BTreeMap<&'static str, CauseCounts>,
    /// Per checkpoint id, the first cause of each category its lines carried. Reports count a
    /// checkpoint's real cause and leave out the symptoms ([`SYMPTOM_CATEGORIES`]) it has
    /// besides.
    checkpoint_causes: BTreeMap<u64, Vec<InternedCause>>,
    pub(super) cause_ids: Vec<InternedCause>,
    cause_index: FastMap<InternedCause, u32>,
    /// Timeline events by (job symbol, 0 if the line names none; checkpoint id).
    timelines: BTreeMap<(u32, u64), Vec<TimelineEvent>>,
    timeline_events: usize,
    pub(super) timeline_events_dropped: u64,
    /// Jobs that have a checkpoint with this id (TaskManager lines name no job).
    jobs_of_id: FastMap<u64, BTreeSet<u32>>,
    pub(super) blocking: BTreeMap<(u32, Option<u32>), BlockingSubtask>,
    completed: BTreeSet<u64>,
    /// Channels by (task, subtask), and channels a barrier came from by ((task, subtask),
    /// checkpoint).
    channels: BTreeMap<SubtaskKey, BTreeSet<u32>>,
    received: BTreeMap<(SubtaskKey, u64), BTreeSet<u32>>,
    /// Per (subtask, checkpoint): its first and last barrier (epoch ms) and the channel of the
    /// last, from DEBUG barrier lines: the alignment.
    barrier_times: BTreeMap<(SubtaskKey, u64), BarrierTimes>,
    /// "Exceeded checkpoint tolerable failure threshold" lines by the reason they give.
    pub(super) failovers: BTreeMap<u32, u64>,
    /// Vertex id → operator name, from the "Deploying …" lines (`names.rs`).
    pub(super) vertex_names: HashMap<String, String>,
    /// Job id → job name, from the "Job <name> (<id>) switched from state …" lines.
    pub(super) job_names: HashMap<String, String>,
    /// Failovers (tolerable-failure lines) by job symbol: the line names no job, so the job is
    /// the last one an earlier line of the same file named (0: none did).
    pub(super) failovers_by_job: BTreeMap<u32, Failovers>,
    /// "Restoring job …" lines by job symbol.
    pub(super) restores_by_job: BTreeMap<u32, u64>,
    /// The file being folded in: the last job and checkpoint its lines named.
    context: FileContext,
    /// JobMaster endpoint symbol → job symbol, from the TaskManagers' registration lines.
    jobmasters: FastMap<u32, u32>,
    /// Oversized payloads (lines that name no checkpoint) waiting for [`Aggregate::attach_drops`].
    drops: Vec<PayloadDrop>,
    /// Oversized payloads past [`MAX_DROPS`] (their causes counted, never attached).
    pub(super) drops_cut: u64,
}

/// Oversized payloads kept for attaching to checkpoints at the end of a scan.
const MAX_DROPS: usize = 10_000;

/// An oversized payload as the scan keeps it until every checkpoint's times are known.
#[derive(Debug)]
struct PayloadDrop {
    at: Option<Box<str>>,
    /// The job its recipient's registration line names; `None`: any job, if only one fits.
    job: Option<u32>,
    cause: Option<InternedCause>,
    taskmanager: u32,
    file: u32,
    seq: u64,
}

/// What the lines of the file being folded in said last.
#[derive(Debug, Default)]
struct FileContext {
    job: u32,
    checkpoint: Option<u64>,
}

/// Checkpoint ids kept per job's failovers, to name them when no line names the job.
const MAX_FAILOVER_IDS: usize = 5;

/// The failovers of one job: how many, why, in which files, after which checkpoints.
#[derive(Debug, Default)]
pub(super) struct Failovers {
    pub(super) count: u64,
    /// Reason symbol → count.
    pub(super) reasons: BTreeMap<u32, u64>,
    pub(super) files: BTreeSet<u32>,
    /// The checkpoint the file's lines named last before each failover (the first few).
    pub(super) checkpoints: BTreeSet<u64>,
}

/// The barriers of one subtask for one checkpoint, from DEBUG lines.
#[derive(Clone, Copy, Debug)]
pub(super) struct BarrierTimes {
    pub(super) first_ms: i64,
    pub(super) last_ms: i64,
    pub(super) last_channel: u32,
    pub(super) channels: u32,
}

/// One subtask's alignment in one checkpoint: first to last barrier.
pub(super) struct Alignment<'a> {
    pub(super) task: &'a str,
    pub(super) subtask: Option<u32>,
    pub(super) checkpoint_id: u64,
    pub(super) ms: u64,
    pub(super) last_channel: &'a str,
    pub(super) channels: u32,
}

impl Aggregate {
    pub(super) fn add_file(&mut self, name: &str) -> u32 {
        let sym = self.strings.intern(Some(name));
        self.files.push(sym);
        self.context = FileContext::default();
        sym
    }

    /// Folds one event in: its kind counted; its job, root cause, blocking subtask and barrier
    /// noted; and, when it names a checkpoint, its place in that checkpoint's timeline. (The
    /// steps intern in this order, as they always did.)
    pub(super) fn add(&mut self, e: &BorrowedEvent<'_>, file: u32, seq: u64) {
        match e.kind {
            "jobmaster_registered" => return self.note_jobmaster(e),
            "oversized_payload" if e.checkpoint_id.is_none() => return self.keep_drop(e, file, seq),
            _ => {}
        }
        self.count_kind(e.kind);
        let job = self.note_job(e);
        let cause = self.note_cause(e);
        let kind = e.kind;
        if kind == "tolerable_exceeded" {
            let reason = self.strings.intern(e.reason);
            *self.failovers.entry(reason).or_insert(0) += 1;
            self.note_failover(job, reason, file);
        }
        if job != 0 {
            self.context.job = job;
        }
        if e.checkpoint_id.is_some() {
            self.context.checkpoint = e.checkpoint_id;
        }
        if kind == "completed"
            && let Some(id) = e.checkpoint_id
        {
            self.completed.insert(id);
        }
        if BLOCKING_KINDS.contains(&kind) {
            self.note_blocking(e);
        }
        if kind == "barrier_received" {
            self.note_barrier(e);
            return;
        }
        if kind == "restored" {
            *self.restores_by_job.entry(job).or_insert(0) += 1;
            return;
        }
        let Some(id) = e.checkpoint_id else { return };
        self.add_to_timeline(e, (job, id), cause, file, seq);
    }

    /// "Successful registration at job manager <endpoint> for job <id>": whose that JobMaster is.
    fn note_jobmaster(&mut self, e: &BorrowedEvent<'_>) {
        self.count_kind(e.kind);
        if let (Some(endpoint), Some(job)) = (e.detail, e.job_id) {
            let endpoint = self.strings.intern(Some(endpoint));
            let job = self.strings.intern(Some(job));
            self.jobmasters.insert(endpoint, job);
        }
    }

    /// An oversized payload: counted, and kept to be attached to the checkpoint it hurt once the
    /// checkpoints' times are all known. One to a TaskManager or the ResourceManager is no
    /// acknowledgement: its cause counts alone.
    fn keep_drop(&mut self, e: &BorrowedEvent<'_>, file: u32, seq: u64) {
        self.count_kind(e.kind);
        let cause = e.root_cause.map(|(category, exception, message)| InternedCause {
            category,
            exception: self.strings.intern(Some(exception)),
            message: self.strings.intern(Some(message)),
        });
        use crate::state::ack_drops::{Recipient, recipient};
        let job = match recipient(e.detail) {
            Recipient::Unnamed => None,
            Recipient::JobMaster(endpoint) => {
                let endpoint = self.strings.intern(Some(endpoint));
                self.jobmasters.get(&endpoint).copied()
            }
            Recipient::Other => {
                if let Some(c) = cause {
                    count_cause(&mut self.causes, c);
                }
                return;
            }
        };
        if self.drops.len() >= MAX_DROPS {
            self.drops_cut += 1;
            if let Some(c) = cause {
                count_cause(&mut self.causes, c);
            }
            return;
        }
        let taskmanager = self.strings.intern(e.taskmanager);
        self.drops.push(PayloadDrop { at: e.logged_at.map(Box::from), job, cause, taskmanager, file, seq });
    }

    /// Every kept oversized payload attached to the checkpoint it hurt
    /// ([`hurt_checkpoint`](crate::state::ack_drops::hurt_checkpoint), as the daemon does): the
    /// one in progress on its job at the line's time, else the next to fail soon after. It
    /// joins that checkpoint's timeline and its cause is the checkpoint's; a drop that fits no
    /// checkpoint counts its cause alone.
    pub(super) fn attach_drops(&mut self) {
        use crate::state::ack_drops::{Window, hurt_checkpoint};
        if self.drops.is_empty() {
            return;
        }
        let mut windows = Vec::new();
        for ((job, id), events) in &self.timelines {
            let job = match *job {
                0 => match self.jobs_of_id.get(id) {
                    Some(jobs) if jobs.len() == 1 => jobs.first().copied().unwrap_or(0),
                    _ => 0,
                },
                j => j,
            };
            let at = |e: &TimelineEvent| e.at.as_deref().and_then(crate::time::log_time_utc_ms);
            let triggered_ms =
                events.iter().filter(|e| self.str(e.kind) == Some("triggered")).filter_map(at).min();
            // The first line that says it ended: completed, or failed (expired, declined, a
            // TaskManager's snapshot failure: from FLINK-39738 on the ask for the acknowledgement
            // times out and the task declines).
            let ended = events
                .iter()
                .filter_map(|e| match self.str(e.kind).unwrap_or_default() {
                    "completed" => at(e).map(|t| (t, false)),
                    "expired" | "failed" | "declined" | "async_snapshot_failed" => at(e).map(|t| (t, true)),
                    _ => None,
                })
                .min();
            windows.push(Window {
                job,
                id: *id,
                triggered_ms,
                ended_ms: ended.map(|(t, _)| t),
                failed: ended.is_some_and(|(_, failed)| failed),
            });
        }
        let kind_sym = self.strings.intern(Some("oversized_payload"));
        for d in std::mem::take(&mut self.drops) {
            let at_ms = d.at.as_deref().and_then(crate::time::log_time_utc_ms);
            let hurt = at_ms.and_then(|at| hurt_checkpoint(at, d.job, windows.iter().copied()));
            let Some((job, id)) = hurt else {
                if let Some(c) = d.cause {
                    count_cause(&mut self.causes, c);
                }
                continue;
            };
            if let Some(c) = d.cause {
                let known = self.checkpoint_causes.entry(id).or_default();
                if !known.iter().any(|k| k.category == c.category) {
                    known.push(c);
                }
            }
            let cause = d.cause.map_or(0, |c| self.cause_index_of(c));
            let event = TimelineEvent {
                seq: d.seq,
                kind: kind_sym,
                file: d.file,
                at: d.at,
                task: 0,
                subtask: None,
                taskmanager: d.taskmanager,
                duration_ms: None,
                consecutive_failures: None,
                reason: 0,
                cause,
            };
            // Under the job's own key when its checkpoint's lines are (a TaskManager's are not).
            let key = if self.timelines.contains_key(&(job, id)) { (job, id) } else { (0, id) };
            self.timeline_events += 1;
            self.timelines.entry(key).or_default().push(event);
        }
    }

    /// The index (from 1) of a cause in `cause_ids`.
    fn cause_index_of(&mut self, c: InternedCause) -> u32 {
        let next = self.cause_ids.len() as u32 + 1;
        *self.cause_index.entry(c).or_insert_with(|| {
            self.cause_ids.push(c);
            next
        })
    }

    /// A failover, for its job: the one it names, else the last one its file named before it.
    fn note_failover(&mut self, job: u32, reason: u32, file: u32) {
        let job = if job != 0 { job } else { self.context.job };
        let f = self.failovers_by_job.entry(job).or_default();
        f.count += 1;
        *f.reasons.entry(reason).or_insert(0) += 1;
        f.files.insert(file);
        if let Some(id) = self.context.checkpoint
            && f.checkpoints.len() < MAX_FAILOVER_IDS
        {
            f.checkpoints.insert(id);
        }
    }

    /// The symbol of a string already seen (0 if never).
    pub(super) fn sym_of(&self, s: &str) -> u32 {
        self.strings.ids.get(s).copied().unwrap_or(0)
    }

    fn count_kind(&mut self, kind: &str) {
        match self.kinds.get_mut(kind) {
            Some(n) => *n += 1,
            None => {
                self.kinds.insert(kind.to_string(), 1);
            }
        }
    }

    /// The event's job symbol (0: none), noted among the jobs of its checkpoint id.
    fn note_job(&mut self, e: &BorrowedEvent<'_>) -> u32 {
        let job = self.strings.intern(e.job_id);
        if let (Some(id), true) = (e.checkpoint_id, job != 0) {
            let jobs = self.jobs_of_id.entry(id).or_default();
            if jobs.len() < 2 {
                jobs.insert(job); // only "exactly one job" matters
            }
        }
        job
    }

    /// The event's root cause, interned, and counted for its checkpoint (or alone, for a line
    /// that names none) when its kind counts root causes.
    fn note_cause(&mut self, e: &BorrowedEvent<'_>) -> Option<InternedCause> {
        let cause = e.root_cause.map(|(category, exception, message)| InternedCause {
            category,
            exception: self.strings.intern(Some(exception)),
            message: self.strings.intern(Some(message)),
        });
        if let Some(c) = cause.filter(|_| counts_root_cause(e.kind)) {
            match e.checkpoint_id {
                Some(id) => {
                    let known = self.checkpoint_causes.entry(id).or_default();
                    if !known.iter().any(|k| k.category == c.category) {
                        known.push(c);
                    }
                }
                None => count_cause(&mut self.causes, c),
            }
        }
        cause
    }

    /// An event of a [`BLOCKING_KINDS`] kind, counted for its subtask.
    fn note_blocking(&mut self, e: &BorrowedEvent<'_>) {
        let task = self.strings.intern(Some(e.task.unwrap_or("?")));
        let kind_sym = self.strings.intern(Some(e.kind));
        let b = self.blocking.entry((task, e.subtask)).or_default();
        b.count += 1;
        b.kinds.insert(kind_sym);
        if let Some(id) = e.checkpoint_id
            && b.checkpoints.len() < MAX_BLOCKING_IDS
        {
            b.checkpoints.insert(id);
        }
        if e.taskmanager.is_some() {
            b.taskmanager = self.strings.intern(e.taskmanager);
        }
    }

    /// A DEBUG "Received barrier from channel" line: the channel, among the task's channels and
    /// those its barrier for the checkpoint came from.
    fn note_barrier(&mut self, e: &BorrowedEvent<'_>) {
        if let (Some(task), Some(channel), Some(id)) = (e.task, e.detail, e.checkpoint_id) {
            let task = (self.strings.intern(Some(task)), e.subtask);
            let channel = self.strings.intern(Some(channel));
            self.channels.entry(task).or_default().insert(channel);
            let fresh = self.received.entry((task, id)).or_default().insert(channel);
            let Some(at) = e.logged_at.and_then(crate::time::log_time_utc_ms) else { return };
            let full = self.barrier_times.len() >= MAX_ALIGNMENTS;
            match self.barrier_times.get_mut(&(task, id)) {
                Some(t) => {
                    t.first_ms = t.first_ms.min(at);
                    if at >= t.last_ms {
                        (t.last_ms, t.last_channel) = (at, channel);
                    }
                    t.channels += u32::from(fresh);
                }
                None if !full => {
                    let times =
                        BarrierTimes { first_ms: at, last_ms: at, last_channel: channel, channels: 1 };
                    self.barrier_times.insert((task, id), times);
                }
                None => {}
            }
        }
    }

    /// Per (subtask, checkpoint) with barriers from more than one channel: first to last
    /// barrier, the alignment (DEBUG barrier lines), by checkpoint then task.
    pub(super) fn alignments(&self) -> Vec<Alignment<'_>> {
        self.barrier_times
            .iter()
            .filter(|(_, t)| t.channels > 1)
            .map(|(((task, subtask), id), t)| Alignment {
                task: self.str(*task).unwrap_or("?"),
                subtask: *subtask,
                checkpoint_id: *id,
                ms: (t.last_ms - t.first_ms).max(0) as u64,
                last_channel: self.str(t.last_channel).unwrap_or("?"),
                channels: t.channels,
            })
            .collect()
    }

    /// Gives the tasks named by a vertex id (`857e98…`, from an attempt id) the name the same
    /// logs give that vertex (`stateful-map`), when some task is named so.
    pub(super) fn name_vertices(&mut self) {
        if self.vertex_names.is_empty() || !self.has_vertex_ids() {
            return;
        }
        for s in self.strings.strings.iter_mut() {
            if let Some(name) = self.vertex_names.get(&**s) {
                *s = name.as_str().into();
            }
        }
    }

    /// Whether some task is named by a 32-hex vertex id.
    pub(super) fn has_vertex_ids(&self) -> bool {
        self.blocking.keys().chain(self.channels.keys()).any(|(t, _)| self.str(*t).is_some_and(is_vertex_id))
            || self.timelines.values().flatten().any(|e| self.str(e.task).is_some_and(is_vertex_id))
    }

    /// The event in the timeline of checkpoint `(job, id)`, unless the cap is reached.
    fn add_to_timeline(
        &mut self,
        e: &BorrowedEvent<'_>,
        (job, id): (u32, u64),
        cause: Option<InternedCause>,
        file: u32,
        seq: u64,
    ) {
        if self.timeline_events >= MAX_TIMELINE_EVENTS {
            self.timeline_events_dropped += 1;
            return;
        }
        let cause = cause.map_or(0, |c| self.cause_index_of(c));
        let kind = e.kind;
        let event = TimelineEvent {
            seq,
            kind: self.strings.intern(Some(kind)),
            file,
            at: e.logged_at.map(Box::from),
            task: self.strings.intern(e.task),
            subtask: e.subtask,
            taskmanager: self.strings.intern(e.taskmanager),
            duration_ms: e.duration_ms,
            consecutive_failures: e.consecutive_failures,
            reason: self.strings.intern(e.reason),
            cause,
        };
        self.timeline_events += 1;
        let (task, subtask) = (event.task, event.subtask);
        self.timelines.entry((job, id)).or_default().push(event);
        if matches!(kind, "async_snapshot_failed" | "sync_snapshot_failed") && job == 0 && task != 0 {
            self.name_unnamed_declines(id, task, subtask);
        }
    }

    /// A TaskManager's snapshot failure names the operator but no job ("stateful-map (1/2)#0 -
    /// asynchronous part of checkpoint 3 could not be completed."); a decline of the same
    /// checkpoint that the JobManager logged naming only an attempt id (a 1.13/1.14 line whose
    /// trace was not logged) takes that operator, in its timeline and in the blocking table.
    fn name_unnamed_declines(&mut self, id: u64, task: u32, subtask: Option<u32>) {
        let Some(job) =
            self.jobs_of_id.get(&id).filter(|jobs| jobs.len() == 1).and_then(|j| j.first().copied())
        else {
            return;
        };
        let declined = self.strings.intern(Some("declined"));
        let unnamed = self.strings.intern(Some("?"));
        let Some(events) = self.timelines.get_mut(&(job, id)) else { return };
        let mut moved = 0;
        let mut taskmanager = 0;
        for ev in events.iter_mut().filter(|ev| ev.kind == declined && ev.task == 0) {
            (ev.task, ev.subtask) = (task, subtask);
            moved += 1;
            if ev.taskmanager != 0 {
                taskmanager = ev.taskmanager;
            }
        }
        if moved == 0 {
            return;
        }
        if let Some(row) = self.blocking.get_mut(&(unnamed, None)) {
            row.count = row.count.saturating_sub(moved);
            row.checkpoints.remove(&id);
            if row.count == 0 {
                self.blocking.remove(&(unnamed, None));
            }
        }
        let row = self.blocking.entry((task, subtask)).or_default();
        row.count += moved;
        row.kinds.insert(declined);
        if row.checkpoints.len() < MAX_BLOCKING_IDS {
            row.checkpoints.insert(id);
        }
        if taskmanager != 0 {
            row.taskmanager = taskmanager;
        }
    }

    pub(super) fn str(&self, sym: u32) -> Option<&str> {
        self.strings.get(sym)
    }

    /// A checkpoint's causes split into the root cause(s) and the symptoms: a symptom
    /// ("Checkpoint Coordinator is suspending", "Checkpoint was declined", expired) is the root
    /// cause only when nothing else was logged for the checkpoint, and then only the first of
    /// them in [`SYMPTOM_CATEGORIES`] order.
    fn split_causes(&self, causes: &[InternedCause]) -> (Vec<InternedCause>, Vec<InternedCause>) {
        let (mut symptoms, real): (Vec<InternedCause>, Vec<InternedCause>) =
            causes.iter().partition(|c| SYMPTOM_CATEGORIES.contains(&c.category));
        if !real.is_empty() {
            return (real, symptoms);
        }
        // The job stopping (a cancel, a stop, a failover) aborted it: that is no cause of its own.
        if symptoms.iter().any(|c| self.is_suspending(c)) {
            return (Vec::new(), symptoms);
        }
        // Only symptoms: the most telling one stands for the cause.
        symptoms.sort_by_key(|c| SYMPTOM_CATEGORIES.iter().position(|s| *s == c.category));
        let rest = symptoms.split_off(symptoms.len().min(1));
        (symptoms, rest)
    }

    /// Whether a cause is the coordinator suspending (the job stopping).
    fn is_suspending(&self, c: &InternedCause) -> bool {
        self.str(c.message).is_some_and(|m| m.contains(SUSPENDING))
    }

    /// Whether a checkpoint was aborted because the job stopped, and by nothing else.
    pub(super) fn stopped_only(&self, id: u64) -> bool {
        self.checkpoint_causes.get(&id).is_some_and(|known| {
            self.split_causes(known).0.is_empty() && known.iter().any(|c| self.is_suspending(c))
        })
    }

    /// Root causes by category (once per checkpoint and category, plus lines without a
    /// checkpoint), and the symptoms they explain, by category.
    pub(super) fn root_causes(&self) -> (BTreeMap<&'static str, CauseCounts>, BTreeMap<&'static str, u64>) {
        let mut causes = self.causes.clone();
        let mut symptoms = BTreeMap::new();
        for known in self.checkpoint_causes.values() {
            let (real, explained) = self.split_causes(known);
            for c in real {
                count_cause(&mut causes, c);
            }
            for c in explained {
                let category = if self.is_suspending(&c) { "job_stopping" } else { c.category };
                *symptoms.entry(category).or_insert(0) += 1;
            }
        }
        (causes, symptoms)
    }

    /// The root cause of one checkpoint, if its lines carried one.
    pub(super) fn cause_of(&self, id: u64) -> Option<InternedCause> {
        self.checkpoint_causes.get(&id).and_then(|known| self.split_causes(known).0.first().copied())
    }

    pub(super) fn kind(&self, e: &TimelineEvent) -> &str {
        self.str(e.kind).unwrap_or_default()
    }

    /// Timelines by (job, id) in order; lines that name no job join the one job that has a
    /// checkpoint with that id.
    pub(super) fn timelines(&self) -> Vec<Timeline<'_>> {
        let mut map: BTreeMap<(&str, u64), Vec<&TimelineEvent>> = BTreeMap::new();
        for ((job, id), events) in &self.timelines {
            let job = match self.str(*job) {
                Some(job) => job,
                None => match self.jobs_of_id.get(id) {
                    Some(jobs) if jobs.len() == 1 => {
                        jobs.iter().next().and_then(|j| self.str(*j)).unwrap_or_default()
                    }
                    _ => "",
                },
            };
            map.entry((job, *id)).or_default().extend(events.iter());
        }
        map.into_iter()
            .map(|((job_id, id), mut events)| {
                let id_of = id;
                // In time order: the files' lines interleave (the JobManager's and the
                // TaskManagers' logs); lines with the same timestamp keep their file order.
                events.sort_by(|a, b| (&a.at, a.seq).cmp(&(&b.at, b.seq)));
                let has = |kind: &str| events.iter().any(|e| self.kind(e) == kind);
                let outcome = if has("completed") {
                    "completed"
                } else if has("expired") {
                    "expired"
                } else if has("declined") || has("async_snapshot_failed") || has("sync_snapshot_failed") {
                    "declined"
                } else if self.stopped_only(id_of) {
                    "stopped"
                } else if has("failed") || has("barrier_overtaken") || has("end_of_partition") {
                    "failed"
                } else {
                    "unknown"
                };
                Timeline { job_id, id, outcome, events }
            })
            .collect()
    }

    /// From DEBUG "Received barrier from channel" lines: for each checkpoint that did not
    /// complete, the channels of each task whose barrier never came (the channels a task has
    /// are those it received a barrier on for any checkpoint).
    pub(super) fn missing_barriers(&self) -> Vec<MissingBarriers<'_>> {
        let name = |s: &u32| self.str(*s).unwrap_or_default();
        let sorted = |set: &BTreeSet<u32>| {
            let mut names: Vec<&str> = set.iter().map(name).collect();
            names.sort_unstable();
            names
        };
        let mut out = Vec::new();
        for ((task, id), got) in &self.received {
            if self.completed.contains(id) {
                continue;
            }
            let received = sorted(got);
            let missing: Vec<&str> = sorted(&self.channels[task])
                .into_iter()
                .filter(|c| received.binary_search(c).is_err())
                .collect();
            if !missing.is_empty() {
                out.push(MissingBarriers {
                    task: name(&task.0),
                    subtask: task.1,
                    checkpoint_id: *id,
                    received,
                    missing,
                });
            }
        }
        out.sort_by(|a, b| (a.task, a.subtask, a.checkpoint_id).cmp(&(b.task, b.subtask, b.checkpoint_id)));
        out
    }
}

/// A checkpoint and what the logs said about it.
pub(super) struct Timeline<'a> {
    pub(super) job_id: &'a str,
    pub(super) id: u64,
    pub(super) outcome: &'static str,
    pub(super) events: Vec<&'a TimelineEvent>,
}

/// Input channels whose barrier a task never received for a checkpoint that did not complete.
pub(super) struct MissingBarriers<'a> {
    pub(super) task: &'a str,
    pub(super) subtask: Option<u32>,
    pub(super) checkpoint_id: u64,
    pub(super) received: Vec<&'a str>,
    pub(super) missing: Vec<&'a str>,
}

/// A 32-hex job vertex id.
pub(super) fn is_vertex_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit())
}
