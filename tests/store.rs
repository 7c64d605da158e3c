//! The checkpoint store: exactly-once across a crash between the store write and the state
//! write, pruning to its bounds, the history API's range query, savepoints from captured Flink.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use checkpoint_sentinel::app::AppState;
use checkpoint_sentinel::observe::{
    CheckpointCounts, CheckpointStatus, FinishedCheckpoint, JobKey, JobPoll, Observation, SnapshotKind,
    SubtaskCheckpoint,
};
use checkpoint_sentinel::outputs::http::{HttpState, router};
use checkpoint_sentinel::sources::flink::{convert, dto};
use checkpoint_sentinel::state::store::{Bounds, Query, STORE_FILE, Store};
use checkpoint_sentinel::state::{State, persist};
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;
use tower::ServiceExt;

use crate::common;

pub(crate) const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };
pub(crate) const T0: i64 = 1_795_000_000_000;
pub(crate) const BOUNDS: Bounds =
    Bounds { max_age: Duration::from_secs(30 * 86_400), max_records: 1_000_000 };

fn checkpoint(id: u64, status: CheckpointStatus, kind: SnapshotKind) -> FinishedCheckpoint {
    let completed = status == CheckpointStatus::Completed;
    let subtasks = (0..2)
        .map(|i| SubtaskCheckpoint {
            index: i,
            acknowledged: completed || i == 0,
            end_to_end_ms: Some(400 + 100 * i as u64),
            start_delay_ms: Some(5),
            alignment_ms: Some(10),
            sync_ms: Some(20),
            async_ms: Some(300),
            ..SubtaskCheckpoint::default()
        })
        .collect();
    let checkpoint = FinishedCheckpoint::completed(id, Timestamp(T0 + id as i64 * 10_000), 500)
        .kind(kind)
        .sizes(4096, 8192)
        .acknowledged(if completed { 2 } else { 1 }, 2)
        .operator("v1", "map", subtasks);
    if completed { checkpoint } else { checkpoint.failed("Checkpoint expired before completing.") }
}

pub(crate) fn completed(id: u64) -> FinishedCheckpoint {
    checkpoint(id, CheckpointStatus::Completed, SnapshotKind::Checkpoint)
}

/// The poll after the first `end` checkpoints of `history`: Flink's counts over all of them
/// (they never go down), its history the last ten.
fn poll_after(history: &[FinishedCheckpoint], end: usize) -> Observation {
    let failed = history[..end].iter().filter(|c| c.status == CheckpointStatus::Failed).count() as u64;
    let Observation::JobPolled(mut p) = poll(history[end.saturating_sub(10)..end].to_vec()) else {
        unreachable!()
    };
    let newest = history[end - 1].id;
    p.counts = CheckpointCounts { completed: newest - failed, failed, in_progress: 0, restored: 0 };
    Observation::JobPolled(p)
}

/// A poll whose history holds `finished` (Flink's ten), with counts up to the newest.
pub(crate) fn poll(finished: Vec<FinishedCheckpoint>) -> Observation {
    let newest = finished.iter().map(|c| c.id).max().unwrap_or(0);
    let failed = finished.iter().filter(|c| c.status == CheckpointStatus::Failed).count() as u64;
    Observation::JobPolled(JobPoll {
        key: JobKey { cluster: "c".into(), job_id: "j".into() },
        job_name: "job".into(),
        job_state: "RUNNING".into(),
        polled_at: Timestamp(T0 + newest as i64 * 10_000 + 1_000),
        counts: CheckpointCounts { completed: newest - failed, failed, in_progress: 0, restored: 0 },
        settings: None,
        in_progress: Vec::new(),
        finished,
        latest_restore: None,
        deferred: Default::default(),
    })
}

pub(crate) fn state_with_outbox() -> State {
    let mut state = State::new(WINDOW);
    state.keep_for_store(true);
    state
}

pub(crate) fn all(store: &Store) -> Vec<u64> {
    let q = Query { limit: 10_000, ..Query::default() };
    store.query("c", "j", &q, |_| true).unwrap().0.iter().map(|r| r.record.id).collect()
}

#[test]
fn a_crash_between_the_store_write_and_the_state_write_neither_loses_nor_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    let mut state = state_with_outbox();
    // Round 1 persisted as the daemon does: records, then the snapshot.
    state.apply(&poll((1..=3).map(completed).collect()), Timestamp(T0 + 40_000));
    let mut snapshot_1 = persist::snapshot(&state);
    store.write(&state.take_store_batch().0, Timestamp(T0 + 40_000)).unwrap();
    // In the store now: the snapshot no longer carries them (as the daemon's persister does).
    snapshot_1.clear_outbox();
    let snapshot_1 = persist::to_bytes(&snapshot_1);
    // Round 2: its records reach the store, then the daemon dies (kill -9) before the state
    // file is renamed into place: the state on disk is still round 1's.
    state.apply(&poll((1..=6).map(completed).collect()), Timestamp(T0 + 70_000));
    let w = store.write(&state.take_store_batch().0, Timestamp(T0 + 70_000)).unwrap();
    assert_eq!((w.inserted, w.rewritten), (3, 0));
    drop(store);

    // The restart: round 1's snapshot, the same store, and Flink's history shows 1..=8 now.
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    let mut restored = persist::restore(WINDOW, serde_json::from_slice(&snapshot_1).unwrap());
    restored.keep_for_store(true);
    restored.apply(&poll((1..=8).map(completed).collect()), Timestamp(T0 + 90_000));
    let records = restored.take_store_batch().0;
    // 4, 5, 6 are counted again (the snapshot did not have them), 7 and 8 for the first time.
    assert_eq!(records.iter().map(|r| r.checkpoint.record.id).collect::<Vec<_>>(), [4, 5, 6, 7, 8]);
    let w = store.write(&records, Timestamp(T0 + 90_000)).unwrap();
    assert_eq!((w.inserted, w.rewritten, w.records), (2, 3, 8));
    assert_eq!(all(&store), (1..=8).collect::<Vec<_>>(), "each checkpoint exactly once");
    assert_eq!(store.record_count().unwrap(), 8);
}

#[test]
fn a_checkpoint_id_used_again_after_a_restart_without_ha_is_a_second_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    let mut state = state_with_outbox();
    state.apply(&poll(vec![completed(1)]), Timestamp(T0));
    // The same id an hour later: a new JobMaster without HA numbers from 1 again.
    let first = state.take_store_batch().0;
    let mut second = first.clone();
    second[0].checkpoint.record.triggered_at = Timestamp(T0 + 3_600_000);
    store.write(&first, Timestamp(T0)).unwrap();
    store.write(&second, Timestamp(T0)).unwrap();
    assert_eq!(all(&store), [1, 1]);
}

#[test]
fn the_store_is_pruned_oldest_first_by_age_and_by_count() {
    let dir = tempfile::tempdir().unwrap();
    let bounds = Bounds { max_age: Duration::from_secs(3600), max_records: 50 };
    let store = Store::open(dir.path(), bounds).unwrap();
    let mut state = state_with_outbox();
    // 100 checkpoints 10 s apart, applied ten at a time as Flink's history shows them.
    let mut pruned = 0;
    for last in (10..=100).step_by(10) {
        state.apply(&poll(((last - 9)..=last).map(completed).collect()), Timestamp(T0));
        pruned +=
            store.write(&state.take_store_batch().0, Timestamp(T0 + last as i64 * 10_000)).unwrap().pruned;
    }
    assert_eq!(store.record_count().unwrap(), 50);
    assert_eq!(pruned, 50);
    assert_eq!(all(&store), (51..=100).collect::<Vec<_>>(), "the oldest went first");
    // Later, the age bound (1 h) takes every record triggered before checkpoint 81 was.
    let now = Timestamp(T0 + 81 * 10_000 + 3_600_000);
    let w = store.write(&[], now).unwrap();
    assert_eq!(w.pruned, 30);
    assert_eq!(all(&store), (81..=100).collect::<Vec<_>>());
}

#[test]
fn the_range_query_returns_the_newest_within_range_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    let mut state = state_with_outbox();
    let mut history: Vec<FinishedCheckpoint> = (1..=30).map(completed).collect();
    history[4] = checkpoint(5, CheckpointStatus::Failed, SnapshotKind::Checkpoint);
    for end in (10..=history.len()).step_by(10) {
        state.apply(&poll_after(&history, end), Timestamp(T0));
    }
    store.write(&state.take_store_batch().0, Timestamp(T0 + 400_000)).unwrap();
    let at = |id: i64| Some(T0 + id * 10_000);
    let q = Query { since: at(10), until: at(20), limit: 5 };
    let (found, more) = store.query("c", "j", &q, |_| true).unwrap();
    assert_eq!(found.iter().map(|r| r.record.id).collect::<Vec<_>>(), [16, 17, 18, 19, 20]);
    assert!(more);
    let q = Query { since: at(10), until: at(20), limit: 20 };
    let (found, more) = store.query("c", "j", &q, |_| true).unwrap();
    assert_eq!(found.len(), 11);
    assert!(!more);
    assert!(store.query("c", "other", &q, |_| true).unwrap().0.is_empty());
    // What a record keeps: sizes and the slowest subtask's TaskManager is none here (no load
    // report), its phases and the failure of the failed one.
    let q = Query { limit: 100, ..Query::default() };
    let (failed, _) = store.query("c", "j", &q, |r| r.record.status == CheckpointStatus::Failed).unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].record.id, 5);
    assert_eq!(failed[0].record.failure_message.as_deref(), Some("Checkpoint expired before completing."));
    assert_eq!(failed[0].checkpointed_bytes, Some(4096));
}

async fn get(router: &axum::Router, path: &str) -> (StatusCode, serde_json::Value) {
    let response = router.clone().oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}

#[tokio::test]
async fn the_history_api_serves_the_store_by_range_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    let mut state = state_with_outbox();
    // 40 checkpoints seen ten at a time: the job's in-memory ring keeps 32, the store all 40.
    let mut history: Vec<FinishedCheckpoint> = (1..=40).map(completed).collect();
    history[2] = checkpoint(3, CheckpointStatus::Failed, SnapshotKind::Checkpoint);
    history[9] = checkpoint(10, CheckpointStatus::Completed, SnapshotKind::Savepoint);
    for end in (10..=history.len()).step_by(10) {
        state.apply(&poll_after(&history, end), Timestamp(T0));
    }
    store.write(&state.take_store_batch().0, Timestamp(T0 + 500_000)).unwrap();
    assert_eq!(state.clusters()["c"].jobs["j"].recent.len(), 32);
    let app = Arc::new(AppState::new(state));
    let _ = app.store.set(Arc::new(store));
    let router = router(HttpState::new(app));

    let (status, body) = get(&router, "/api/v1/jobs/c/j/checkpoints").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let ids: Vec<u64> =
        body["checkpoints"].as_array().unwrap().iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (1..=40).collect::<Vec<_>>());
    assert_eq!(body["truncated"], false);
    let first = &body["checkpoints"][0];
    assert_eq!(first["outcome"], "completed");
    assert_eq!(first["checkpointed_bytes"], 4096);
    assert_eq!(first["slowest_subtask"]["operator"], "map");
    assert_eq!(first["slowest_subtask"]["phases_ms"]["async"], 300);
    assert_eq!(body["checkpoints"][9]["kind"], "savepoint");

    let (since, until) = (T0 + 5 * 10_000, T0 + 15 * 10_000);
    let (_, body) =
        get(&router, &format!("/api/v1/jobs/c/j/checkpoints?since={since}&until={until}&limit=3")).await;
    let ids: Vec<u64> =
        body["checkpoints"].as_array().unwrap().iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [13, 14, 15]);
    assert_eq!(body["truncated"], true);

    let (_, body) = get(&router, "/api/v1/jobs/c/j/checkpoints?outcome=expired").await;
    let ids: Vec<u64> =
        body["checkpoints"].as_array().unwrap().iter().map(|c| c["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, [3]);
    assert_eq!(body["checkpoints"][0]["slowest_subtask"]["subtask"], 1, "the subtask that held it up");

    for bad in ["outcome=slow", "limit=0", "limit=10001", "since=5&until=4", "since=yesterday"] {
        let (status, _) = get(&router, &format!("/api/v1/jobs/c/j/checkpoints?{bad}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }
    assert_eq!(get(&router, "/api/v1/jobs/nope/j/checkpoints").await.0, StatusCode::NOT_FOUND);
}

#[test]
fn savepoints_of_captured_flink_are_counted_and_stored_apart_from_checkpoints() {
    for (version, id) in [("1.14.6", 20), ("1.20.5", 21), ("2.3.0", 20)] {
        let path = common::fixtures().join(format!("flink-{version}/healthy/rest/checkpoints.json"));
        let stats: dto::CheckpointingStatistics =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let latest =
            stats.latest.as_ref().and_then(|l| l.savepoint.as_ref()).expect("the capture has a savepoint");
        let savepoint = convert::finished(latest, &[]).unwrap();
        assert_eq!((savepoint.id, savepoint.kind), (id, SnapshotKind::Savepoint), "{version}");
        let mut history: Vec<FinishedCheckpoint> =
            stats.history.iter().filter_map(|h| convert::finished(h, &[])).collect();
        history.push(savepoint.clone());
        let mut state = state_with_outbox();
        let Observation::JobPolled(mut p) = poll(history.clone()) else { unreachable!() };
        p.counts = convert::counts(stats.counts.as_ref().unwrap());
        state.apply(&Observation::JobPolled(p), Timestamp(T0));
        let job = &state.clusters()["c"].jobs["j"];
        assert_eq!(job.savepoints.totals.completed, 1, "{version}");
        assert_eq!(job.savepoints.totals.failed, 0, "{version}");
        assert_eq!(job.savepoints.last_completed_at, Some(savepoint.finished_at), "{version}");
        assert_eq!(job.savepoints.last_duration_ms, savepoint.end_to_end_ms, "{version}");
        let (stored, _) = state.take_store_batch();
        assert_eq!(stored.len(), history.len(), "{version}: one record per checkpoint and savepoint");
        let kinds = stored.iter().filter(|r| r.checkpoint.record.kind == SnapshotKind::Savepoint).count();
        assert_eq!(kinds, 1, "{version}");
    }
}

#[test]
fn savepoint_metrics_are_exported_for_completed_and_failed_savepoints() {
    let mut state = state_with_outbox();
    let history = vec![
        completed(1),
        checkpoint(2, CheckpointStatus::Completed, SnapshotKind::Savepoint),
        checkpoint(3, CheckpointStatus::Failed, SnapshotKind::Savepoint),
        checkpoint(4, CheckpointStatus::Failed, SnapshotKind::Checkpoint),
    ];
    state.apply(&poll(history), Timestamp(T0));
    let daemon = checkpoint_sentinel::app::DaemonStats::default();
    let families = checkpoint_sentinel::outputs::export::render(&state, &daemon, Timestamp(T0 + 60_000));
    let text = checkpoint_sentinel::outputs::export::encode_text(&families);
    let value = |name: &str, status: Option<&str>| {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .find(|l| status.is_none_or(|s| l.contains(&format!("status=\"{s}\""))))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    assert_eq!(value("flink_savepoints_total", Some("completed")), Some(1.0));
    assert_eq!(value("flink_savepoints_total", Some("failed")), Some(1.0));
    assert_eq!(
        value("flink_checkpoints_total", Some("completed")),
        Some(2.0),
        "savepoints stay in Flink's counts"
    );
    assert_eq!(value("flink_checkpoints_total", Some("failed")), Some(2.0));
    let at = (T0 + 20_000 + 500) as f64 / 1000.0;
    assert_eq!(value("flink_savepoint_last_completed_timestamp_seconds", None), Some(at));
    assert_eq!(value("flink_savepoint_last_duration_seconds", None), Some(0.5));
    assert_eq!(value("flink_savepoint_last_failed_timestamp_seconds", None), Some(at + 10.0));
}

#[test]
fn the_builtin_pack_fires_on_a_failed_savepoint_and_not_on_a_completed_one() {
    use checkpoint_sentinel::rules::{AlertState, Evaluator, Rule, builtin};
    let rules: Vec<Rule> = builtin::rules()
        .into_iter()
        .filter(|r| r.name == "FlinkSavepointFailed")
        .map(|r| Rule::new(r).unwrap())
        .collect();
    assert_eq!(rules.len(), 1);
    let mut evaluator = Evaluator::new(rules);
    let mut state = State::new(WINDOW);
    let mut history = vec![completed(1), checkpoint(2, CheckpointStatus::Completed, SnapshotKind::Savepoint)];
    state.apply(&poll(history.clone()), Timestamp(T0 + 30_000));
    evaluator.evaluate(&state, Timestamp(T0 + 30_000));
    state.apply(&poll(history.clone()), Timestamp(T0 + 60_000));
    evaluator.evaluate(&state, Timestamp(T0 + 60_000));
    assert_eq!(evaluator.active().count(), 0, "a completed savepoint is no alert");
    history.push(checkpoint(3, CheckpointStatus::Failed, SnapshotKind::Savepoint));
    state.apply(&poll(history.clone()), Timestamp(T0 + 90_000));
    evaluator.evaluate(&state, Timestamp(T0 + 90_000));
    let firing: Vec<_> = evaluator.active().filter(|a| a.state == AlertState::Firing).collect();
    assert_eq!(firing.len(), 1);
    assert_eq!(firing[0].name(), "FlinkSavepointFailed");
    // A failed checkpoint is not a failed savepoint.
    let mut state = State::new(WINDOW);
    let mut evaluator = Evaluator::new(vec![
        Rule::new(builtin::rules().into_iter().find(|r| r.name == "FlinkSavepointFailed").unwrap()).unwrap(),
    ]);
    state.apply(&poll(vec![completed(1)]), Timestamp(T0 + 30_000));
    evaluator.evaluate(&state, Timestamp(T0 + 30_000));
    state.apply(
        &poll(vec![completed(1), checkpoint(2, CheckpointStatus::Failed, SnapshotKind::Checkpoint)]),
        Timestamp(T0 + 60_000),
    );
    evaluator.evaluate(&state, Timestamp(T0 + 60_000));
    assert_eq!(evaluator.active().count(), 0);
}

/// The store's ids of a job, through the real daemon's API.
async fn stored_ids(addr: std::net::SocketAddr, job_id: &str) -> Option<Vec<u64>> {
    let url = format!("http://{addr}/api/v1/jobs/lab/{job_id}/checkpoints?limit=10000");
    let body: serde_json::Value = reqwest::get(url).await.ok()?.json().await.ok()?;
    Some(body["checkpoints"].as_array()?.iter().filter_map(|c| c["id"].as_u64()).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_daemon_killed_with_sigkill_keeps_every_checkpoint_once_in_the_store() {
    let server = common::replay("2.3.0", "expired").await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sentinel.toml");
    std::fs::write(
        &config,
        format!(
            "[[clusters]]\nname = \"lab\"\nurl = \"{}\"\npoll_interval = \"150ms\"\n[state]\ndir = \"{}\"\npersist_interval = \"50ms\"\n",
            server.url,
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let mut first = common::spawn_daemon(&config);
    let state_file = dir.path().join("state/state.json");
    common::until(
        "8 polls and the state persisted",
        Duration::from_secs(10),
        || async { (server.polls_served(), state_file.exists()) },
        |(polls, persisted)| *polls >= 8 && *persisted,
    )
    .await;
    first.kill().unwrap(); // SIGKILL: no shutdown hook runs.
    first.wait().unwrap();
    assert!(server.polls_served() < server.scenario().polls.len(), "killed too late to test anything");

    let s = server.scenario();
    let mut expected = std::collections::BTreeSet::new();
    for poll in &s.polls {
        for h in poll["history"].as_array().unwrap() {
            if h["status"] == "COMPLETED" || h["status"] == "FAILED" {
                expected.insert(h["id"].as_u64().unwrap());
            }
        }
    }
    let expected: Vec<u64> = expected.into_iter().collect();
    let second = common::spawn_daemon(&config);
    let ids = common::until(
        "the whole series polled and stored",
        Duration::from_secs(10),
        || async { (stored_ids(second.addr(), &s.job_id).await, server.polls_served()) },
        |(ids, polls)| ids.as_ref().is_some_and(|ids| ids.len() >= expected.len()) && *polls >= s.polls.len(),
    )
    .await
    .0;
    let mut second = second;
    second.kill().unwrap();
    second.wait().unwrap();
    let mut ids = ids.expect("the restarted daemon serves the history API");
    ids.sort_unstable();
    assert_eq!(ids, expected, "every finished checkpoint of the series once, none twice");
}

/// A store of checkpoints 1..=`n` in `dir`, closed again; the file's length.
fn filled_store(dir: &std::path::Path, n: u64) -> u64 {
    let store = Store::open(dir, BOUNDS).unwrap();
    let mut state = state_with_outbox();
    for last in (10..=n).step_by(10) {
        state.apply(&poll(((last - 9)..=last).map(completed).collect()), Timestamp(T0));
        store.write(&state.take_store_batch().0, Timestamp(T0 + last as i64 * 10_000)).unwrap();
    }
    assert_eq!(store.record_count().unwrap(), n);
    drop(store);
    std::fs::metadata(dir.join(STORE_FILE)).unwrap().len()
}

/// The files moved aside in `dir`.
fn set_aside(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{STORE_FILE}.corrupt-")))
        .collect()
}

/// Opens the damaged store in `dir` (no panic), checks the file was moved aside, and stores
/// new checkpoints 2001..=2010 in the new one: exactly those.
fn opens_sets_aside_and_stores_anew(dir: &std::path::Path) {
    let store = Store::open(dir, BOUNDS).expect("a damaged file is no reason to fail");
    assert_eq!(store.files_set_aside(), 1);
    assert_eq!(set_aside(dir).len(), 1, "{:?}", set_aside(dir));
    let mut state = state_with_outbox();
    state.apply(&poll((2001..=2010).map(completed).collect()), Timestamp(T0));
    store.write(&state.take_store_batch().0, Timestamp(T0 + 2011 * 10_000)).unwrap();
    assert_eq!(all(&store), (2001..=2010).collect::<Vec<_>>());
    assert!(store.failing().is_none());
}

fn truncate(path: &std::path::Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(len).unwrap();
}

#[test]
fn a_store_file_truncated_by_a_page_is_moved_aside_and_a_new_one_started() {
    let dir = tempfile::tempdir().unwrap();
    let len = filled_store(dir.path(), 2000);
    // `truncate -s -4096`: redb 2.6 asserted in page_manager.rs:243, every start exited 101.
    truncate(&dir.path().join(STORE_FILE), len - 4096);
    opens_sets_aside_and_stores_anew(dir.path());
}

#[test]
fn a_store_file_truncated_to_half_is_moved_aside_and_a_new_one_started() {
    let dir = tempfile::tempdir().unwrap();
    let len = filled_store(dir.path(), 2000);
    truncate(&dir.path().join(STORE_FILE), len / 2);
    opens_sets_aside_and_stores_anew(dir.path());
}

#[test]
fn a_store_file_with_garbled_pages_is_moved_aside_and_a_new_one_started() {
    use std::io::{Seek, SeekFrom, Write};
    let dir = tempfile::tempdir().unwrap();
    let len = filled_store(dir.path(), 2000);
    // Random pages in the middle overwritten (redb 2.6 panicked in btree.rs:797 on them).
    let mut file = std::fs::OpenOptions::new().write(true).open(dir.path().join(STORE_FILE)).unwrap();
    let pages = len / 4096;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..8 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let page = 2 + (seed >> 33) % (pages - 4);
        let garbage: Vec<u8> = (0..4096u64).map(|i| (seed.rotate_left(i as u32 % 64) ^ i) as u8).collect();
        file.seek(SeekFrom::Start(page * 4096)).unwrap();
        file.write_all(&garbage).unwrap();
    }
    drop(file);
    opens_sets_aside_and_stores_anew(dir.path());
}
