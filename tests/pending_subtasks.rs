//! Flink never logs which subtask holds a checkpoint up; the poller names it from the REST
//! details of the in-progress checkpoint (the real `expired` capture: stateful-map subtask 0
//! sleeps in its snapshot; the sink behind it acknowledged, so it had passed the barrier on).
//! Such a subtask is in its snapshot phase (`snapshot_slow`), not waiting for barriers
//! (`barrier_missing`, class blocking), and FlinkCheckpointBarrierMissing must not fire.

use crate::common;

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
        let state = daemon.app.state.read().unwrap();
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

#[test]
fn a_pending_subtask_is_in_its_snapshot_only_when_its_consumers_have_its_barrier() {
    use checkpoint_sentinel::observe::{JobTopology, TopologyEdge, TopologyVertex};
    use checkpoint_sentinel::poller::{PendingPhase, pending_phase};
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
