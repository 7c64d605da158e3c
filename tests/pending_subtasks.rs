//! Flink never logs which subtask holds a checkpoint up; the poller names it from the REST
//! details of the in-progress checkpoint (the real `expired` capture: stateful-map subtask 0
//! sleeps in its snapshot; the sink behind it acknowledged, so it had passed the barrier on).
//! Such a subtask is in its snapshot phase (`snapshot_slow`), not waiting for barriers
//! (`barrier_missing`, class blocking), and FlinkCheckpointBarrierMissing must not fire.

use crate::common;

use checkpoint_sentinel::health::Outcome;
use std::time::Duration;

use common::replay;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subtask_that_has_not_acknowledged_is_named() {
    let server = replay("2.3.0", "expired").await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::watching(&server.url, Duration::from_millis(150), dir.path());
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    server.wait_for_polls(4).await;
    let events: Vec<_> = {
        let state = daemon.app.state.read();
        state.clusters()["lab"].logs.recent.iter().filter(|e| e.source == "rest").cloned().collect()
    };
    daemon.shutdown().await;
    assert!(!events.is_empty(), "no events from REST");
    // Checkpoints 7 and 10 were captured ~10 ms after their trigger, before the sink had the
    // barrier; the replay serves them with their old trigger times, so they look long
    // pending. Every other capture shows the sink done.
    let captured_early = [Some(7), Some(10)];
    for e in events.iter().filter(|e| !captured_early.contains(&e.checkpoint_id)) {
        assert_eq!(e.kind, "snapshot_slow", "{}", e.message);
        assert_eq!(e.job_id.as_deref(), Some(server.scenario().job_id.as_str()));
        assert!(e.message.contains("in its synchronous or asynchronous snapshot"), "{}", e.message);
    }
    // The subtask that sleeps in its snapshot is named, with its operator and its phase.
    assert!(
        events.iter().any(|e| e.kind == "snapshot_slow"
            && e.task.as_deref() == Some("stateful-map")
            && e.subtask == Some(0)),
        "{:#?}",
        events.iter().map(|e| &e.message).collect::<Vec<_>>()
    );
    // Each in-progress checkpoint is reported once, not on every poll.
    let mut keys: Vec<_> = events.iter().map(|e| (e.checkpoint_id, e.task.clone(), e.subtask)).collect();
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "reported twice");
}

/// The captured series of `scenario` through `State` and the job API.
fn job_view(
    version: &str,
    scenario: &str,
    edit: impl Fn(&mut checkpoint_sentinel::observe::FinishedCheckpoint),
) -> checkpoint_sentinel::outputs::api::JobDetailView {
    use checkpoint_sentinel::observe::{ClusterPoll, JobSummary, Observation};
    use checkpoint_sentinel::rules::AlertsView;
    use checkpoint_sentinel::state::State;
    use checkpoint_sentinel::stats::WindowSpec;
    use checkpoint_sentinel::time::Timestamp;
    let s = common::Scenario::load(version, scenario);
    let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
    let polls = s.job_polls();
    let first = polls[0].polled_at;
    state.apply(
        &Observation::ClusterPolled(ClusterPoll {
            cluster: "lab".into(),
            duration_ms: 1,
            flink_version: Some(version.into()),
            jobs: Some(vec![JobSummary {
                job_id: s.job_id.clone(),
                name: polls[0].job_name.clone(),
                state: "RUNNING".into(),
            }]),
            errors: Vec::new(),
            reachable: true,
        }),
        first,
    );
    let mut last = first;
    for mut poll in polls {
        poll.finished.iter_mut().for_each(&edit);
        last = poll.polled_at;
        state.apply(&Observation::JobPolled(poll), last);
    }
    checkpoint_sentinel::outputs::api::job(
        &state,
        &AlertsView::default(),
        "lab",
        &s.job_id,
        Timestamp(last.millis() + 1),
    )
    .unwrap()
}

/// The `expired` captures: stateful-map subtask 0 sleeps 6 s in its snapshot on every third
/// checkpoint, the timeout is 4 s. Its acknowledgement comes after the checkpoint expired (Flink
/// keeps it, marked aborted), so the slowest subtask of an expired checkpoint is that subtask,
/// named as the one that never acknowledged in time, not the slowest that did.
#[test]
fn an_expired_checkpoint_names_the_subtask_that_never_acknowledged() {
    for version in ["2.3.0", "1.20.5", "1.14.6"] {
        let d = job_view(version, "expired", |_| {});
        let expired: Vec<_> = d.checkpoints.iter().filter(|c| c.outcome == Outcome::Expired).collect();
        assert!(!expired.is_empty(), "{version}: no expired checkpoint");
        let mut with_details = 0;
        for c in expired {
            let Some(s) = &c.slowest_subtask else { continue };
            with_details += 1;
            println!("{version} #{}: {}", c.id, s.text);
            assert_eq!(
                (s.operator.as_str(), s.subtask, s.acknowledged),
                ("stateful-map", 0, false),
                "{version}"
            );
            assert!(
                s.text.starts_with("stateful-map #0 never acknowledged before the checkpoint expired after 4.0 s (5 of 6 acknowledged)"),
                "{version}: {}",
                s.text
            );
            assert!(s.text.contains("its sync phase took 6.0 s"), "{version}: {}", s.text);
            // Its own (late) acknowledgement, longer than the checkpoint lived.
            assert!(s.end_to_end_ms.is_some_and(|e| e > c.elapsed_ms), "{version}: {s:?}");
        }
        assert!(with_details >= 1, "{version}: no expired checkpoint with details");
        // A completed checkpoint still names the subtask that acknowledged last.
        let done = d
            .checkpoints
            .iter()
            .rev()
            .find(|c| c.outcome == Outcome::Completed && c.slowest_subtask.is_some());
        let s = done.unwrap().slowest_subtask.as_ref().unwrap();
        assert!(s.acknowledged && s.text.contains("acknowledged last, after"), "{version}: {s:?}");
    }
}

/// The same with the details as a poller fetching them right at the expiry sees them: the
/// sleeping subtask still pending. The slowest that did acknowledge (a source subtask, 8–28 ms)
/// is not it.
#[test]
fn an_expired_checkpoint_fetched_at_expiry_names_the_pending_subtask() {
    use checkpoint_sentinel::observe::CheckpointStatus;
    for version in ["2.3.0", "1.20.5", "1.14.6"] {
        let d = job_view(version, "expired", |cp| {
            if cp.status != CheckpointStatus::Failed {
                return;
            }
            let lifetime = cp.finished_at.since(cp.triggered_at);
            for st in cp.operators.iter_mut().flat_map(|op| op.subtasks.iter_mut()) {
                if st.end_to_end_ms.is_some_and(|e| e > lifetime) {
                    *st = checkpoint_sentinel::observe::SubtaskCheckpoint {
                        index: st.index,
                        ..Default::default()
                    };
                }
            }
        });
        let mut n = 0;
        for c in d.checkpoints.iter().filter(|c| c.outcome == Outcome::Expired) {
            let Some(s) = &c.slowest_subtask else { continue };
            n += 1;
            println!("{version} #{}: {}", c.id, s.text);
            assert_eq!(s.text, "stateful-map #0 never acknowledged (5 of 6 acknowledged)", "{version}");
            assert_eq!((s.end_to_end_ms, s.acknowledged), (None, false), "{version}");
        }
        assert!(n >= 1, "{version}");
    }
}

/// The `declined` captures: stateful-map subtask 0's asynchronous snapshot fails; the other five
/// acknowledge. The one that did not is the one that declined.
#[test]
fn a_declined_checkpoint_names_the_subtask_that_declined() {
    for version in ["2.3.0", "1.20.5", "1.14.6"] {
        let d = job_view(version, "declined", |_| {});
        let mut n = 0;
        for c in d.checkpoints.iter().filter(|c| c.outcome != Outcome::Completed) {
            let Some(s) = &c.slowest_subtask else { continue };
            n += 1;
            println!("{version} #{} {}: {}", c.id, c.outcome, s.text);
            // 1.14.6 #21: another subtask acknowledged 1 ms after the decline had failed it.
            assert!(
                s.text == "stateful-map #0 declined the checkpoint (5 of 6 acknowledged)"
                    || s.text
                        == "stateful-map #0 declined the checkpoint (4 of 6 acknowledged, 1 more only after it had failed)",
                "{version}: {}",
                s.text
            );
            assert_eq!(
                (s.operator.as_str(), s.subtask, s.acknowledged, s.end_to_end_ms),
                ("stateful-map", 0, false, None)
            );
        }
        assert!(n >= 1, "{version}");
    }
}

#[test]
fn a_pending_subtask_is_in_its_snapshot_only_when_its_consumers_have_its_barrier() {
    use checkpoint_sentinel::observe::{JobTopology, TopologyEdge, TopologyVertex};
    use checkpoint_sentinel::sources::poller::{PendingPhase, pending_phase};
    use std::collections::HashSet;
    let vertex = |id: &str| TopologyVertex { id: id.into(), name: id.into(), parallelism: 2 };
    let edge = |from: &str, to: &str| TopologyEdge {
        from: from.into(),
        to: to.into(),
        ship_strategy: "HASH".into(),
    };
    let topology = JobTopology {
        vertices: vec![vertex("source"), vertex("map"), vertex("sink")],
        edges: vec![edge("source", "map"), edge("map", "sink")],
    };
    let done = |v: &[&'static str]| v.iter().copied().collect::<HashSet<&str>>();
    // expired: the sink has the barrier of the map subtask that sleeps in snapshotState.
    assert_eq!(pending_phase(&topology, "map", &done(&["source", "sink"])), PendingPhase::Snapshot);
    // backpressure: the barrier is queued in front of the map; the sink waits for it.
    assert_eq!(pending_phase(&topology, "map", &done(&["source"])), PendingPhase::Barriers);
    assert_eq!(pending_phase(&topology, "sink", &done(&["source"])), PendingPhase::BehindUpstream);
    // The last vertex has nobody downstream to show where the barrier is: no verdict.
    assert_eq!(pending_phase(&topology, "sink", &done(&["source", "map"])), PendingPhase::Unknown);
    // A source waits for no barrier: triggered by RPC, a pending one is in its snapshot.
    assert_eq!(pending_phase(&topology, "source", &done(&[])), PendingPhase::Snapshot);
}
