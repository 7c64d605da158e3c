//! Flink never logs which subtask holds a checkpoint up; the poller names it from the REST
//! details of the in-progress checkpoint (the real `expired` capture: stateful-map subtask 0
//! sleeps in its snapshot, so it and the sink subtask behind it never acknowledge).

use crate::common;

use std::time::Duration;

use common::replay;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subtask_that_has_not_acknowledged_is_named() {
    let server = replay("2.3.0", "expired").await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::watching(&server.url, Duration::from_millis(150), dir.path());
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    server.wait_for_polls(1).await;
    let events: Vec<_> = {
        let state = daemon.app.state.read().unwrap();
        state.clusters()["lab"].logs.recent.iter().filter(|e| e.source == "rest").cloned().collect()
    };
    daemon.shutdown().await;
    assert!(!events.is_empty(), "no barrier_missing events from REST");
    for e in &events {
        assert_eq!(e.kind, "barrier_missing");
        assert_eq!(e.job_id.as_deref(), Some(server.scenario().job_id.as_str()));
    }
    // The subtask that sleeps in its snapshot is named, with its operator.
    assert!(
        events.iter().any(|e| e.task.as_deref() == Some("stateful-map") && e.subtask == Some(0)),
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
