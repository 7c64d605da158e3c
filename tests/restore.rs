//! Restores: counted once each across the captured poll series of every version (and across a
//! daemon restart), timed on a live capture of a failover through the real poller, exported
//! and shown by the API.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::extract::{Path as UrlPath, State as AxumState};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use checkpoint_sentinel::app::AppState;
use checkpoint_sentinel::config::ClusterConfig;
use checkpoint_sentinel::observe::{JobKey, Observation, RestoreReport};
use checkpoint_sentinel::rules::AlertsView;
use checkpoint_sentinel::sources::flink::{convert, dto};
use checkpoint_sentinel::sources::poller::Poller;
use checkpoint_sentinel::state::restore::RestoreOutcome;
use checkpoint_sentinel::state::{State, persist};
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;
use serde_json::Value;

use crate::common::{self, Scenario, read_json};

const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

/// What a poll's `latest.restored` says, as the poller reports it before it looked at the
/// subtasks (the shared captures have no `subtasktimes`).
fn restore_of(poll: &Value, job_id: &str) -> Option<RestoreReport> {
    let stats: dto::CheckpointingStatistics = serde_json::from_value(poll.clone()).unwrap();
    let restored = convert::restored_from(stats.latest.as_ref()?.restored.as_ref()?)?;
    Some(RestoreReport {
        key: JobKey { cluster: "lab".into(), job_id: job_id.to_string() },
        restored,
        restarting_at: None,
        subtasks: None,
    })
}

fn metric(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

fn metrics(state: &State, now: Timestamp) -> String {
    let daemon = checkpoint_sentinel::app::DaemonStats::default();
    checkpoint_sentinel::outputs::export::encode_text(&checkpoint_sentinel::outputs::export::render(
        state, &daemon, now,
    ))
}

/// The restores of the captured failover (one, from checkpoint 12) and snapshot-sync-failure
/// (the task fails every third checkpoint: the series sees the restores from 2, 5, 8, 11 and 14,
/// all five Flink counted)
/// runs of 1.14.6, 1.20.5 and 2.3.0, replayed poll by poll with a restore report at every poll
/// (as the poller sends while one is due): each counted once, with what it restored from, also
/// when the daemon is restarted from its state file half-way.
#[test]
fn every_captured_restore_is_counted_once_with_what_it_restored_from() {
    for version in ["1.14.6", "1.20.5", "2.3.0"] {
        for (scenario, want) in [("failover", vec![12]), ("snapshot-sync-failure", vec![2, 5, 8, 11, 14])] {
            let s = Scenario::load(version, scenario);
            let polls = s.job_polls();
            let mut state = State::new(WINDOW);
            let half = polls.len() / 2;
            for (i, (poll, raw)) in polls.iter().zip(&s.polls).enumerate() {
                if i == half {
                    // kill -9 and restart: the state file is all that is left.
                    let bytes = persist::to_bytes(&persist::snapshot(&state));
                    state = persist::restore(WINDOW, serde_json::from_slice(&bytes).unwrap());
                }
                state.apply(&Observation::JobPolled(poll.clone()), poll.polled_at);
                if let Some(report) = restore_of(raw, &s.job_id) {
                    // Twice: a due restore is reported at every poll until it is timed.
                    for _ in 0..2 {
                        state.apply(&Observation::Restore(report.clone()), poll.polled_at);
                    }
                }
            }
            let job = &state.clusters()["lab"].jobs[&s.job_id];
            let ids: Vec<u64> = job.restores.recent.iter().filter_map(|r| r.from.checkpoint_id).collect();
            let distinct: BTreeSet<i64> = s
                .polls
                .iter()
                .filter_map(|p| p["latest"]["restored"]["restore_timestamp"].as_i64())
                .collect();
            assert_eq!(ids, want, "{version} {scenario}");
            assert_eq!(job.restores.totals.checkpoint, distinct.len() as u64, "{version} {scenario}");
            assert_eq!(job.restores.totals.savepoint, 0, "{version} {scenario}");
            // Every restore Flink counted: the series saw each of them.
            assert_eq!(job.restores.totals.checkpoint, s.last_counts()["restored"].as_u64().unwrap());
            let last = job.restores.latest().unwrap();
            assert!(!last.from.is_savepoint);
            assert!(
                last.from
                    .external_path
                    .as_deref()
                    .unwrap()
                    .ends_with(&format!("/chk-{}", want.last().unwrap())),
                "{version} {scenario}: {:?}",
                last.from.external_path
            );
            // Without the subtasks' times nothing is timed, and nothing pretends to be.
            assert!(job.restores.recent.iter().all(|r| r.duration_ms.is_none()), "{version} {scenario}");
            let now = Timestamp(*s.poll_times().last().unwrap());
            let text = metrics(&state, now);
            let labels = [("job_id", s.job_id.as_str()), ("from", "checkpoint")];
            assert_eq!(metric(&text, "flink_job_restores_total", &labels), Some(want.len() as f64));
            assert_eq!(
                metric(&text, "flink_job_last_restore_checkpoint_id", &[("job_id", s.job_id.as_str())]),
                Some(*want.last().unwrap() as f64)
            );
            assert_eq!(metric(&text, "flink_job_last_restore_duration_seconds", &[]), None);
        }
    }
}

/// A live capture of the e2e failover scenario on Flink 2.3.0 or 1.20.5 (around its restart, about a
/// poll a second), served step by step.
struct Live {
    dir: PathBuf,
    job_id: String,
    steps: Vec<String>,
    step: AtomicUsize,
    subtasktimes_requests: AtomicUsize,
}

impl Live {
    fn current(&self) -> &str {
        &self.steps[self.step.load(Ordering::SeqCst).min(self.steps.len() - 1)]
    }

    fn read(&self, name: &str) -> Value {
        read_json(&self.dir.join(name))
    }
}

type L = AxumState<Arc<Live>>;

fn json(value: Value) -> Response {
    ([("content-type", "application/json")], value.to_string()).into_response()
}

async fn live_server(version: &str) -> (String, Arc<Live>) {
    let dir = common::fixtures().join(format!("flink-{version}/restore-failover"));
    let index = std::fs::read_to_string(dir.join("index.tsv")).unwrap();
    let steps: Vec<String> = index
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .map(|l| l.split('\t').nth(2).unwrap().to_string())
        .collect();
    let first: Value = read_json(&dir.join(format!("job-{}.json", steps[0])));
    let live = Arc::new(Live {
        job_id: first["jid"].as_str().unwrap().to_string(),
        dir,
        steps,
        step: AtomicUsize::new(0),
        subtasktimes_requests: AtomicUsize::new(0),
    });
    let v = version.to_string();
    let config = common::fixtures().join(format!("flink-{version}/failover/rest/checkpoints-config.json"));
    let app = Router::new()
        .route("/overview", get(move || async move { json(serde_json::json!({"flink-version": v, "taskmanagers": 1})) }))
        .route(
            "/jobs/overview",
            get(|AxumState(l): L| async move {
                let job = l.read(&format!("job-{}.json", l.current()));
                json(serde_json::json!({"jobs": [{"jid": l.job_id, "name": job["name"], "state": job["state"]}]}))
            }),
        )
        .route("/jobs/{job}", get(|AxumState(l): L| async move { json(l.read(&format!("job-{}.json", l.current()))) }))
        .route(
            "/jobs/{job}/checkpoints",
            get(|AxumState(l): L| async move {
                // Each round's /checkpoints moves the capture on by one step.
                let step = l.step.fetch_add(1, Ordering::SeqCst).min(l.steps.len() - 1);
                json(l.read(&format!("checkpoints-{}.json", l.steps[step])))
            }),
        )
        .route(
            "/jobs/{job}/checkpoints/config",
            get(move || async move { json(read_json(&config)) }),
        )
        .route(
            "/jobs/{job}/vertices/{vertex}/subtasktimes",
            get(|AxumState(l): L, UrlPath((_job, vertex)): UrlPath<(String, String)>| async move {
                l.subtasktimes_requests.fetch_add(1, Ordering::SeqCst);
                // As of the step whose /checkpoints was served last.
                let step = l.step.load(Ordering::SeqCst).saturating_sub(1).min(l.steps.len() - 1);
                json(l.read(&format!("subtasktimes-{}.json", l.steps[step]))[&vertex].clone())
            }),
        )
        .with_state(live.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), live)
}

/// The real poller over the live 2.3.0 capture: the restore from checkpoint 12 is counted once
/// and timed from Flink's restore_timestamp (…336596) to the last subtask RUNNING
/// (`stateful-map` #0 at …337023): 427 ms, 3,454 ms after the job entered RESTARTING
/// (…333569), 236 ms of it in INITIALIZING; the subtasks are fetched only while it is due.
#[tokio::test]
async fn the_poller_times_a_live_failover_restore_from_the_restore_to_the_last_subtask_running() {
    let (url, live) = live_server("2.3.0").await;
    let view = poll_live(&url, &live).await;
    let r = &view.restore;
    assert_eq!(r.outcome, RestoreOutcome::Measured);
    assert_eq!(r.from.checkpoint_id, Some(12));
    assert_eq!(r.from.restored_at, Timestamp(1796149336596));
    assert_eq!(r.running_at, Some(Timestamp(1796149337023)));
    assert_eq!(r.duration_ms, Some(427));
    assert_eq!(r.restarting_at, Some(Timestamp(1796149333569)));
    assert_eq!(r.downtime_ms, Some(3_454));
    let last = r.last_subtask.as_ref().unwrap();
    assert_eq!((last.operator.as_str(), last.subtask, last.initializing_ms), ("stateful-map", 0, Some(236)));
    assert_eq!(r.subtasks, 6);

    let text = &view.metrics;
    let job_label = [("job_id", live.job_id.as_str())];
    assert_eq!(metric(text, "flink_job_last_restore_duration_seconds", &job_label), Some(0.427));
    assert_eq!(metric(text, "flink_job_last_restore_downtime_seconds", &job_label), Some(3.454));
    assert_eq!(metric(text, "flink_job_last_restore_timestamp_seconds", &job_label), Some(1796149336.596));
    assert_eq!(metric(text, "flink_job_last_restore_checkpoint_id", &job_label), Some(12.0));
    let from = |f| [("job_id", live.job_id.as_str()), ("from", f)];
    assert_eq!(metric(text, "flink_job_restores_total", &from("checkpoint")), Some(1.0));
    assert_eq!(metric(text, "flink_job_restores_total", &from("savepoint")), Some(0.0));

    let v = &view.api;
    assert_eq!(v["latest_restore"]["duration_ms"], 427);
    assert_eq!(v["latest_restore"]["status"], "measured");
    assert_eq!(v["restores"]["from_checkpoint"], 1);
    assert_eq!(
        v["latest_restore"]["text"],
        "Restored from checkpoint 12: all 6 subtasks RUNNING 427 ms after the JobManager restored it \
         (3.5 s after the job began restarting); the last was stateful-map #0, 236 ms of it restoring \
         its state (INITIALIZING)."
    );
}

/// The sentence's numbers are the record's: the same text for any restore the record holds.
#[test]
fn a_restore_still_running_says_so_and_an_untimed_one_says_why() {
    use checkpoint_sentinel::observe::{RestoredFrom, SubtaskStart};
    let mut state = State::new(WINDOW);
    let s = Scenario::load("2.3.0", "failover");
    let poll = s.job_polls().remove(8);
    state.apply(&Observation::JobPolled(poll.clone()), poll.polled_at);
    let restored = RestoredFrom {
        checkpoint_id: Some(7),
        is_savepoint: true,
        external_path: Some("file:/savepoints/savepoint-7".into()),
        restored_at: Timestamp(poll.polled_at.millis() + 1),
    };
    let subtask = SubtaskStart {
        operator: "stateful-map".into(),
        subtask: 1,
        initializing_at: Some(restored.restored_at),
        running_at: None,
        running_now: false,
    };
    let report = RestoreReport {
        key: poll.key.clone(),
        restored: restored.clone(),
        restarting_at: None,
        subtasks: Some(vec![subtask]),
    };
    state.apply(&Observation::Restore(report), poll.polled_at);
    let view = checkpoint_sentinel::outputs::api::job(
        &state,
        &AlertsView::default(),
        "lab",
        &s.job_id,
        poll.polled_at,
    )
    .unwrap();
    let v = serde_json::to_value(&view).unwrap();
    assert_eq!(v["latest_restore"]["text"], "Restoring from savepoint 7: not every subtask is RUNNING yet.");
    assert_eq!(v["restores"]["from_savepoint"], 1);
    // The job is cancelled before the subtask ran: not timed, and said so.
    let mut cancelled = poll.clone();
    cancelled.job_state = "CANCELED".into();
    state.apply(&Observation::JobPolled(cancelled), poll.polled_at);
    let view = checkpoint_sentinel::outputs::api::job(
        &state,
        &AlertsView::default(),
        "lab",
        &s.job_id,
        poll.polled_at,
    )
    .unwrap();
    let v = serde_json::to_value(&view).unwrap();
    assert_eq!(v["latest_restore"]["status"], "unmeasured");
    assert!(
        v["latest_restore"]["text"].as_str().unwrap().starts_with("Restored from savepoint 7; not timed")
    );
}

/// What the poller made of a live capture.
struct Polled {
    restore: checkpoint_sentinel::state::restore::RestoreRecord,
    metrics: String,
    api: Value,
}

/// Runs the real poller over every step of a live capture (and a few polls more): the restore
/// is counted once, and its subtasks are fetched once per vertex, since it was complete the
/// first time the poller looked (no request before the restore, none after it was timed).
async fn poll_live(url: &str, live: &Arc<Live>) -> Polled {
    let app = Arc::new(AppState::new(State::new(WINDOW)));
    let mut poller = Poller::new(ClusterConfig::new("lab", url), app.clone()).unwrap();
    for _ in 0..live.steps.len() + 3 {
        assert!(poller.round().await);
    }
    let state = app.state.read();
    let job = &state.clusters()["lab"].jobs[&live.job_id];
    let once = checkpoint_sentinel::state::restore::RestoreTotals { checkpoint: 1, savepoint: 0 };
    assert_eq!(job.restores.totals, once);
    assert_eq!(live.subtasktimes_requests.load(Ordering::SeqCst), 3, "3 vertices, looked at once");
    let restore = job.restores.latest().unwrap().clone();
    let now = restore.running_at.unwrap().plus_millis(3_000);
    let api =
        checkpoint_sentinel::outputs::api::job(&state, &AlertsView::default(), "lab", &live.job_id, now)
            .unwrap();
    Polled { restore, metrics: metrics(&state, now), api: serde_json::to_value(&api).unwrap() }
}

/// The same on the live 1.20.5 capture: restored from checkpoint 12 at …758750, the last
/// subtask (`stateful-map` #1, 357 ms INITIALIZING) RUNNING at …759419: 669 ms, and 3,694 ms
/// after RESTARTING (…755725).
#[tokio::test]
async fn the_poller_times_the_live_failover_restore_of_1_20_5() {
    let (url, live) = live_server("1.20.5").await;
    let view = poll_live(&url, &live).await;
    let r = &view.restore;
    assert_eq!(r.outcome, RestoreOutcome::Measured);
    assert_eq!((r.from.checkpoint_id, r.from.restored_at), (Some(12), Timestamp(1796149758750)));
    assert_eq!((r.running_at, r.duration_ms), (Some(Timestamp(1796149759419)), Some(669)));
    assert_eq!((r.restarting_at, r.downtime_ms), (Some(Timestamp(1796149755725)), Some(3_694)));
    let last = r.last_subtask.as_ref().unwrap();
    assert_eq!((last.operator.as_str(), last.subtask, last.initializing_ms), ("stateful-map", 1, Some(357)));
    let job_label = [("job_id", live.job_id.as_str())];
    assert_eq!(metric(&view.metrics, "flink_job_last_restore_duration_seconds", &job_label), Some(0.669));
    assert_eq!(view.api["latest_restore"]["downtime_ms"], 3_694);
}

/// The store keeps each restore once, under its job and Flink's restore time: counted (still
/// restoring), then timed, the same key written again; a crash after the store write and before
/// the state write makes the restarted daemon report the restore again and write the same key.
#[test]
fn the_store_holds_each_restore_once_across_a_crash_between_its_write_and_the_state_write() {
    use checkpoint_sentinel::observe::SubtaskStart;
    use checkpoint_sentinel::state::store::{Bounds, Query, Store};
    let s = Scenario::load("2.3.0", "failover");
    let polls = s.job_polls();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        dir.path(),
        Bounds { max_age: std::time::Duration::from_secs(86_400 * 7), max_records: 1000 },
    )
    .unwrap();
    let mut state = State::new(WINDOW);
    state.keep_for_store(true);
    let poll = &polls[8];
    let mut report = restore_of(&s.polls[8], &s.job_id).unwrap();
    state.apply(&Observation::JobPolled(poll.clone()), poll.polled_at);
    state.apply(&Observation::Restore(report.clone()), poll.polled_at);
    // The persister: the snapshot first, then the outbox into the store, then the state file.
    let persist = |state: &mut State| {
        let snapshot = persist::to_bytes(&persist::snapshot(state));
        let (records, restores) = state.take_store_batch();
        store.write_all(&records, &restores, poll.polled_at).unwrap();
        snapshot
    };
    let before = persist(&mut state);
    let at = report.restored.restored_at;
    let running = |ms: i64| SubtaskStart {
        operator: "stateful-map".into(),
        subtask: 0,
        initializing_at: Some(at.plus_millis(ms - 100)),
        running_at: Some(at.plus_millis(ms)),
        running_now: true,
    };
    report.subtasks = Some(vec![running(300)]);
    state.apply(&Observation::Restore(report.clone()), poll.polled_at);
    let _lost = persist(&mut state); // written to the store; the state write never happens
    let mut state = persist::restore(WINDOW, serde_json::from_slice(&before).unwrap());
    state.keep_for_store(true);
    assert!(state.restore_due("lab", &s.job_id, at), "the restarted daemon has it still restoring");
    state.apply(&Observation::JobPolled(poll.clone()), poll.polled_at);
    state.apply(&Observation::Restore(report), poll.polled_at);
    persist(&mut state);
    let all = Query { since: None, until: None, limit: 100 };
    let stored = store.query_restores("lab", &s.job_id, &all).unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!((stored[0].outcome, stored[0].duration_ms), (RestoreOutcome::Measured, Some(300)));
    assert_eq!(state.clusters()["lab"].jobs[&s.job_id].restores.totals.checkpoint, 1);
    // By range: the restore time is the key.
    let after = Query { since: Some(at.millis() + 1), until: None, limit: 100 };
    assert!(store.query_restores("lab", &s.job_id, &after).unwrap().is_empty());
    assert!(store.query_restores("lab", "another-job", &all).unwrap().is_empty());
}
