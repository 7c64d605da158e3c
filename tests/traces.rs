//! Flink's checkpoint trace spans as a second source of finished checkpoints: the parser on
//! the lines captured from real Flink 1.20.5 and 2.3.0 (`tests/fixtures/traces/`), the real
//! tailer reading them into `State`, and the exactly-once rule across spans and polls (both
//! orders, duplicates, Flink's REST answer lagging a span, a span after the poll counted its
//! checkpoint as unobserved, a restart in between).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use checkpoint_sentinel::config::StartAt;
use checkpoint_sentinel::observe::{
    CheckpointCounts, CheckpointSpan, CheckpointStatus, FinishedCheckpoint, JobKey, JobPoll, LogRead,
    Observation, SnapshotKind,
};
use checkpoint_sentinel::sources::logs::parse::Patterns;
use checkpoint_sentinel::sources::logs::tail::{TailCore, TailOptions};
use checkpoint_sentinel::sources::logs::trace;
use checkpoint_sentinel::state::{State, Totals, persist};
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;

const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/traces");

fn fixture(rel: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{rel}")).unwrap()
}

/// (job id, checkpoint id) pairs.
type Ids = BTreeSet<(String, u64)>;

/// Flink's own word on each checkpoint, from the CheckpointCoordinator's and the failure
/// manager's lines of the same log: (job, id) completed, and (job, id) failed.
fn coordinator_truth(log: &str) -> (Ids, Ids) {
    let (mut completed, mut failed) = (BTreeSet::new(), BTreeSet::new());
    for line in log.lines() {
        let grab = |after: &str, mid: &str| -> Option<(String, u64)> {
            let rest = &line[line.find(after)? + after.len()..];
            let (id, rest) = rest.split_once(mid)?;
            Some((rest.get(..32)?.to_string(), id.parse().ok()?))
        };
        if let Some(k) = grab("Completed checkpoint ", " for job ") {
            completed.insert(k);
        }
        if let Some(k) = grab("Failed to trigger or complete checkpoint ", " for job ") {
            failed.insert(k);
        }
    }
    (completed, failed)
}

/// Every fixture: (path, version).
const CAPTURES: [(&str, &str); 5] = [
    ("1.20.5/jobmanager.log", "1.20.5"),
    ("2.3.0/jobmanager.log", "2.3.0"),
    ("2.3.0/jobmanager-SPAN_PER_CHECKPOINT_WITH_TASKS.log", "2.3.0"),
    ("2.3.0/jobmanager-CHILDREN_SPANS_PER_TASK.log", "2.3.0"),
    ("2.3.0/jobmanager-CHILDREN_SPANS_PER_SUBTASK.log", "2.3.0"),
];

#[test]
fn every_checkpoint_span_of_the_captures_is_read_with_what_its_version_emits() {
    for (rel, version) in CAPTURES {
        let log = fixture(rel);
        let spans: Vec<CheckpointSpan> =
            log.lines().filter_map(|l| trace::parse_line(l.as_bytes())).collect();
        let (completed, failed) = coordinator_truth(&log);
        let of = |status| -> BTreeSet<(String, u64)> {
            spans.iter().filter(|s| s.status == status).map(|s| (s.job_id.clone(), s.id)).collect()
        };
        assert_eq!(of(CheckpointStatus::Completed), completed, "{rel}: completed spans = completed lines");
        let failed_spans = of(CheckpointStatus::Failed);
        assert_eq!(failed_spans, failed, "{rel}: failed spans = Flink's failure lines");
        assert_eq!(spans.len(), completed.len() + failed_spans.len(), "{rel}: one span per checkpoint");
        for s in &spans {
            assert!(s.full_state_bytes.is_some(), "{rel}: {s:?}");
            // No end only for a failure no subtask acknowledged.
            assert!(
                s.finished_at.is_some_and(|end| end >= s.triggered_at)
                    || s.status == CheckpointStatus::Failed
            );
            if version == "1.20.5" {
                assert_eq!((s.kind, s.max_phases_ms, s.processed_bytes), (None, [None; 4], None), "{rel}");
            } else {
                assert!(s.kind.is_some() && s.max_phases_ms.iter().all(Option::is_some), "{rel}: {s:?}");
                assert!(s.processed_bytes.is_some() && s.persisted_bytes.is_some(), "{rel}");
            }
        }
        if version == "2.3.0" {
            assert_eq!(
                spans.iter().filter(|s| s.kind == Some(SnapshotKind::Savepoint)).count(),
                1,
                "{rel}: the savepoint triggered through REST says so"
            );
        }
    }
}

/// Reads a capture with the real tailer, cycle by cycle, as `LogRead`s.
fn tail(rel: &str) -> Vec<LogRead> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(format!("{FIXTURES}/{rel}"), dir.path().join("jobmanager.log")).unwrap();
    let options = TailOptions {
        id: "t".into(),
        cluster: "c".into(),
        paths: vec![dir.path().join("*.log").display().to_string()],
        start_at: StartAt::Beginning,
        max_line_bytes: 1 << 20,
        flush_after: Duration::from_millis(0),
        drop_after: Duration::from_secs(60),
        // Small reads: the spans arrive over many cycles, as they would live.
        read_budget: 16 << 10,
        max_files: 8,
    };
    let mut core = TailCore::new(options, Patterns::builtin(), None);
    let mut reads = Vec::new();
    loop {
        let events = core.cycle(Instant::now(), checkpoint_sentinel::time::Timestamp::now());
        let read = core.read(events);
        let done = !core.more && read.events.is_empty() && read.spans.is_empty();
        reads.push(read);
        if done {
            return reads;
        }
    }
}

fn job_poll(job: &str, at: i64, counts: CheckpointCounts, finished: Vec<FinishedCheckpoint>) -> Observation {
    Observation::JobPolled(JobPoll {
        key: JobKey { cluster: "c".into(), job_id: job.into() },
        job_name: format!("job {job}"),
        job_state: "RUNNING".into(),
        polled_at: Timestamp(at),
        counts,
        settings: None,
        in_progress: Vec::new(),
        finished,
        latest_restore: None,
        deferred: Default::default(),
    })
}

fn counts(completed: u64, failed: u64) -> CheckpointCounts {
    CheckpointCounts { completed, failed, in_progress: 0, restored: 0 }
}

#[test]
fn the_tailer_brings_every_captured_span_and_the_poll_finds_none_unobserved() {
    for (rel, _) in CAPTURES {
        let log = fixture(rel);
        let (completed, failed) = coordinator_truth(&log);
        let jobs: BTreeSet<String> = completed.iter().map(|(j, _)| j.clone()).collect();
        let mut state = State::new(WINDOW);
        state.keep_for_store(true);
        // The jobs are known (first poll, nothing finished yet), then the log is read twice
        // over: the second time every span is a duplicate.
        for job in &jobs {
            state.apply(&job_poll(job, 1, counts(0, 0), Vec::new()), Timestamp(1));
        }
        let reads = tail(rel);
        assert!(reads.len() > 5, "{rel}: read over several cycles");
        for read in reads.iter().chain(&tail(rel)) {
            state.apply(&Observation::LogRead(read.clone()), Timestamp(2));
        }
        // A poll long after: Flink's counts cover every checkpoint, its history none of them.
        for job in &jobs {
            let n = |set: &BTreeSet<(String, u64)>| set.iter().filter(|(j, _)| j == job).count() as u64;
            state.apply(&job_poll(job, 3, counts(n(&completed), n(&failed)), Vec::new()), Timestamp(3));
        }
        let mut stored: BTreeMap<(String, u64), usize> = BTreeMap::new();
        for o in state.take_store_batch().0 {
            *stored.entry((o.job_id.clone(), o.checkpoint.record.id)).or_default() += 1;
        }
        let cluster = &state.clusters()["c"];
        for job in &jobs {
            let j = &cluster.jobs[job];
            assert_eq!(j.unobserved, Totals::default(), "{rel} {job}: every checkpoint came by a span");
            assert_eq!(
                j.traced.by_trace.completed,
                completed.iter().filter(|(jj, _)| jj == job).count() as u64
            );
            assert_eq!(j.traced.by_rest, Totals::default(), "{rel}: the poll brought none");
            assert!(
                j.traced.duplicate_spans >= j.traced.by_trace.completed,
                "{rel}: read twice, counted once"
            );
        }
        assert!(stored.values().all(|n| *n == 1), "{rel}: each checkpoint once in the store");
        let spanned = log.lines().filter(|l| trace::parse_line(l.as_bytes()).is_some()).count();
        assert_eq!(stored.len(), spanned, "{rel}: every span's checkpoint in the store");
    }
}

// ---- the exactly-once rule on plain values

const JOB: &str = "0123456789abcdef0123456789abcdef";

fn span(id: u64, status: CheckpointStatus) -> CheckpointSpan {
    CheckpointSpan {
        cluster: "c".into(),
        job_id: JOB.into(),
        id,
        status,
        kind: Some(SnapshotKind::Checkpoint),
        triggered_at: Timestamp(id as i64 * 1000),
        finished_at: Some(Timestamp(id as i64 * 1000 + 40)),
        checkpointed_bytes: Some(100),
        full_state_bytes: Some(1000),
        processed_bytes: None,
        persisted_bytes: None,
        max_phases_ms: [None; 4],
        logged_at: None,
    }
}

fn spans(ids: impl IntoIterator<Item = u64>) -> Observation {
    Observation::LogRead(LogRead {
        cluster: "c".into(),
        tailer: "t".into(),
        events: Vec::new(),
        positions: Default::default(),
        spans: ids.into_iter().map(|id| span(id, CheckpointStatus::Completed)).collect(),
    })
}

/// What the poller brings for a checkpoint: its details (one subtask with its phases).
fn polled(id: u64) -> FinishedCheckpoint {
    use checkpoint_sentinel::observe::SubtaskCheckpoint;
    let subtask = SubtaskCheckpoint {
        index: 0,
        acknowledged: true,
        end_to_end_ms: Some(40),
        start_delay_ms: Some(1),
        alignment_ms: Some(2),
        sync_ms: Some(3),
        async_ms: Some(4),
        ..SubtaskCheckpoint::default()
    };
    FinishedCheckpoint::completed(id, Timestamp(id as i64 * 1000), 40)
        .sizes(100, 1000)
        .acknowledged(1, 1)
        .operator("v", "map", vec![subtask])
}

/// Flink's answer after checkpoint `newest` (all completed): counts, and its history of ten
/// narrowed to the ids the daemon would fetch (`State::unseen_entries`), as the poller does.
fn poll_at(state: &State, newest: u64) -> Observation {
    let history: Vec<(u64, Timestamp)> =
        (newest.saturating_sub(9).max(1)..=newest).map(|id| (id, Timestamp(id as i64 * 1000))).collect();
    let wanted = state.unseen_entries("c", JOB, &history);
    let finished = wanted.into_iter().map(polled).collect();
    job_poll(JOB, newest as i64 * 1000 + 500, counts(newest, 0), finished)
}

fn job(state: &State) -> &checkpoint_sentinel::state::JobState {
    &state.clusters()["c"].jobs[JOB]
}

fn stored_ids(state: &mut State) -> Vec<u64> {
    state.take_store_batch().0.into_iter().map(|o| o.checkpoint.record.id).collect()
}

fn new_state() -> State {
    let mut state = State::new(WINDOW);
    state.keep_for_store(true);
    state.apply(&poll_at(&State::new(WINDOW), 0), Timestamp(0));
    state
}

#[test]
fn a_checkpoint_counts_once_whichever_source_saw_it_first() {
    // Spans first: 1..=30 counted from spans, then a poll whose history is 21..=30.
    let mut state = new_state();
    state.apply(&spans(1..=30), Timestamp(30_100));
    assert_eq!(stored_ids(&mut state), (1..=30).collect::<Vec<_>>());
    state.apply(&poll_at(&state, 30), Timestamp(30_500));
    let j = job(&state);
    assert_eq!(j.unobserved, Totals::default(), "the spans are behind the rise of Flink's counts");
    assert_eq!((j.traced.by_trace.completed, j.traced.by_rest.completed), (30, 0));
    // The poll filled in the ten it still had: their records again (same store key), with the
    // slowest subtask now, and nothing counted twice.
    assert_eq!(stored_ids(&mut state), (21..=30).collect::<Vec<_>>());
    let j = job(&state);
    assert_eq!(j.recent.back().unwrap().slowest_subtask, Some(("map".into(), 0, 40)));
    assert_eq!(j.phases.end_to_end.summary().count, 30, "end-to-end from the spans only");
    assert_eq!(j.phases.alignment.summary().count, 10, "alignment from the ten the poll filled in");
    // Poll first: 31..=35 counted by the poll, then their spans arrive: no-ops.
    state.apply(&poll_at(&state, 35), Timestamp(35_500));
    assert_eq!(stored_ids(&mut state), (31..=35).collect::<Vec<_>>());
    state.apply(&spans(31..=35), Timestamp(35_600));
    assert!(stored_ids(&mut state).is_empty());
    let j = job(&state);
    assert_eq!(
        (j.traced.by_trace.completed, j.traced.by_rest.completed, j.traced.duplicate_spans),
        (30, 5, 5)
    );
    assert_eq!(j.unobserved, Totals::default());
    assert_eq!(j.phases.end_to_end.summary().count, 35);
}

#[test]
fn a_span_ahead_of_flinks_rest_answer_waits_for_the_next_poll() {
    let mut state = new_state();
    state.apply(&spans(1..=12), Timestamp(12_100));
    // Flink's REST answer (cached for up to 3 s) is still at checkpoint 10.
    state.apply(&poll_at(&state, 10), Timestamp(12_200));
    assert_eq!(job(&state).unobserved, Totals::default());
    state.apply(&spans(13..=25), Timestamp(25_100));
    state.apply(&poll_at(&state, 25), Timestamp(25_600));
    let j = job(&state);
    assert_eq!(j.unobserved, Totals::default());
    assert_eq!(j.traced.by_trace.completed, 25);
    assert_eq!(j.traced.by_rest.completed, 0);
    assert!(j.traced.len() <= 10, "marks taken in and past Flink's history are forgotten");
}

#[test]
fn without_spans_the_gap_is_unobserved_and_a_late_span_does_not_count_it_again() {
    let mut state = new_state();
    state.apply(&spans(1..=5), Timestamp(5_100));
    // The tailer stalls; Flink goes on to 30; the poll sees 21..=30.
    state.apply(&poll_at(&state, 30), Timestamp(30_500));
    assert_eq!(job(&state).unobserved, Totals { completed: 15, failed: 0 }, "6..=20 went by unseen");
    stored_ids(&mut state);
    // The stalled spans arrive after all: counted already (as unobserved), so no-ops.
    state.apply(&spans(6..=20), Timestamp(31_000));
    let j = job(&state);
    assert_eq!(j.traced.late_spans, 15);
    assert_eq!(j.unobserved, Totals { completed: 15, failed: 0 });
    assert_eq!(j.traced.by_trace.completed + j.traced.by_rest.completed + j.unobserved.completed, 30);
    assert!(stored_ids(&mut state).is_empty());
}

#[test]
fn a_restart_between_a_span_and_the_poll_neither_loses_nor_double_counts() {
    let mut state = new_state();
    state.apply(&spans(1..=20), Timestamp(20_100));
    stored_ids(&mut state);
    // kill -9 after the state write: the restarted daemon has the marks.
    let bytes = persist::to_bytes(&persist::snapshot(&state));
    let mut state = persist::restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
    state.keep_for_store(true);
    state.apply(&spans(15..=25), Timestamp(25_100)); // the tailer read some again
    state.apply(&poll_at(&state, 25), Timestamp(25_500));
    let j = job(&state);
    assert_eq!(j.unobserved, Totals::default());
    assert_eq!((j.traced.by_trace.completed, j.traced.duplicate_spans), (25, 6));
    let mut ids = stored_ids(&mut state);
    ids.sort_unstable();
    // 21..=25 counted after the restart, 16..=25 filled in by the poll (rewritten, same key).
    assert_eq!(ids, [16, 17, 18, 19, 20, 21, 21, 22, 22, 23, 23, 24, 24, 25, 25]);
}

#[test]
fn spans_of_a_job_not_polled_yet_count_when_its_first_poll_comes() {
    let mut state = State::new(WINDOW);
    state.apply(&spans(1..=15), Timestamp(15_100));
    assert!(state.clusters()["c"].jobs.is_empty());
    // A restart keeps them.
    let bytes = persist::to_bytes(&persist::snapshot(&state));
    let state_back = persist::restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
    let mut state = state_back;
    state.apply(&poll_at(&state, 15), Timestamp(15_500));
    let j = job(&state);
    assert_eq!(j.unobserved, Totals::default());
    assert_eq!(j.traced.by_trace.completed, 15);
}

#[test]
fn a_failed_span_joins_the_consecutive_failures_only_once_its_cause_is_told() {
    use checkpoint_sentinel::observe::{EventSeverity, LogEvent};
    let failure = |id: u64, reason: &str| {
        let mut e = LogEvent::new("failed".into(), EventSeverity::Warning, String::new());
        e.cluster = "c".into();
        e.job_id = Some(JOB.into());
        e.checkpoint_id = Some(id);
        e.reason = Some(reason.into());
        e
    };
    let read = |spans: Vec<CheckpointSpan>, events: Vec<LogEvent>| {
        Observation::LogRead(LogRead {
            cluster: "c".into(),
            tailer: "t".into(),
            events,
            positions: Default::default(),
            spans,
        })
    };
    let mut state = new_state();
    state.apply(&read(vec![span(1, CheckpointStatus::Failed)], vec![]), Timestamp(1_100));
    assert_eq!(job(&state).consecutive_failures(), 0, "the cause is not known yet");
    state.apply(&read(vec![], vec![failure(1, "Checkpoint Coordinator is suspending.")]), Timestamp(1_200));
    assert_eq!(job(&state).consecutive_failures(), 0, "a job stopping is no checkpoint failure");
    state.apply(&read(vec![span(2, CheckpointStatus::Failed)], vec![]), Timestamp(2_100));
    state.apply(&read(vec![], vec![failure(2, "Checkpoint expired before completing.")]), Timestamp(2_200));
    assert_eq!(job(&state).consecutive_failures(), 1);
    // The line first, then its span, in one read: known at once.
    state.apply(
        &read(
            vec![span(3, CheckpointStatus::Failed)],
            vec![failure(3, "Checkpoint expired before completing.")],
        ),
        Timestamp(3_100),
    );
    assert_eq!(job(&state).consecutive_failures(), 2);
    state.apply(&spans([4]), Timestamp(4_100));
    assert_eq!(job(&state).consecutive_failures(), 0);
}

/// The tailer looks for span lines only in buffers that hold the marker, and in lines begun in
/// an earlier buffer: a span line cut anywhere between two reads is still taken, once.
#[test]
fn a_span_line_cut_between_two_reads_is_taken_once() {
    use checkpoint_sentinel::sources::logs::parse::{LineSplitter, RecordParser};
    use checkpoint_sentinel::sources::logs::tail::feed_searched;
    let log = fixture("2.3.0/jobmanager.log");
    // The log up to the end of its first span line: the second read holds no marker of its own.
    let line_at = log
        .split_inclusive('\n')
        .scan(0, |at, line| {
            let start = *at;
            *at += line.len();
            Some((start, line))
        })
        .find(|(_, line)| trace::parse_line(line.as_bytes()).is_some())
        .unwrap()
        .0;
    let first = line_at + log[line_at..].find(trace::SPAN_MARKER).unwrap();
    let end = first + log[first..].find('\n').unwrap() + 1;
    let bytes = &log.as_bytes()[..end];
    let want = 1;
    // Every cut from before the line's marker to the end of the line, and one early.
    for cut in (first.saturating_sub(40)..end).chain([1]) {
        let mut splitter = LineSplitter::new(1 << 20, 0);
        let mut parser = RecordParser::new(Patterns::builtin());
        let (mut needles, mut events, mut spans) = (Vec::new(), Vec::new(), Vec::new());
        for chunk in [&bytes[..cut], &bytes[cut..]] {
            feed_searched(&mut splitter, &mut parser, &mut needles, chunk, &mut events, &mut spans);
        }
        assert_eq!(spans.len(), want, "cut at byte {cut}");
    }
}
