//! Where the slowest subtask of a checkpoint ran: Flink's checkpoint statistics carry no
//! location, so the poller reads it from `/jobs/:id/vertices/:vid` with the job's load, and
//! fetches again soon when the subtasks were still being deployed (`(unassigned)`); an error
//! from another part of the load (`/backpressure` answering 500, seen live) does not lose it.

use crate::common;

use std::time::Duration;

use checkpoint_sentinel::sources::poller::LOAD_EVERY_POLLS;
use common::{replay_with_vertices, replay_without_graph_at_first};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slowest_subtask_names_its_taskmanager_once_the_subtasks_are_deployed() {
    // The vertex answers say "(unassigned)" over the first 3 polls, as while the job deploys.
    // (healthy: no checkpoint is pending long enough for a REST event to name a TaskManager.)
    let server = replay_with_vertices("2.3.0", "healthy", 3).await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::watching(&server.url, Duration::from_millis(100), dir.path());
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let url = format!("http://{}/api/v1/jobs/lab/{}", daemon.addr, server.scenario().job_id);

    let taskmanager = || async {
        let detail: Value = reqwest::get(&url).await.unwrap().json().await.unwrap_or(Value::Null);
        let tm = detail["checkpoints"]
            .as_array()
            .and_then(|c| c.last())
            .map(|c| c["slowest_subtask"]["taskmanager"].clone());
        (tm, server.polls_served(), server.vertex_requests())
    };
    let (tm, polls, vertex_requests) = common::until(
        "a TaskManager named for the slowest subtask",
        Duration::from_secs(30),
        taskmanager,
        |(tm, _, _)| matches!(tm, Some(Value::String(_))),
    )
    .await;
    daemon.shutdown().await;
    let Some(Value::String(tm)) = tm else { unreachable!("named") };
    assert_eq!(tm, "127.0.0.1:18125-6451c0 (localhost:18126)");
    // The unassigned answers were not kept, and the fetch after them came within a few poll
    // rounds, not after the usual LOAD_EVERY_POLLS (named after 17 polls here, 31 without the
    // early retry: the first checkpoints of the capture complete around poll 15).
    eprintln!("named after {polls} polls and {vertex_requests} vertex requests");
    assert!(polls >= 3 && (polls as u64) < LOAD_EVERY_POLLS, "named after {polls} polls");
}

/// Right after a submit Flink may list a job RUNNING while `/jobs/:id` still answers without
/// its vertices (seen live on 1.20.5): the graph is read again until it is there, so the
/// operators get their names instead of keeping their vertex ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_are_named_once_the_job_graph_arrives() {
    let server = replay_without_graph_at_first("2.3.0", "healthy", 3).await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::watching(&server.url, Duration::from_millis(100), dir.path());
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    server.wait_for_polls(2).await;
    let url = format!("http://{}/api/v1/jobs/lab/{}", daemon.addr, server.scenario().job_id);
    let detail: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    let metrics = common::scrape(daemon.addr).await;
    daemon.shutdown().await;
    let last = detail["checkpoints"].as_array().and_then(|c| c.last()).expect("a checkpoint");
    assert_eq!(last["slowest_subtask"]["operator"], "stateful-map", "{last:#}");
    let operators: Vec<&str> =
        detail["operators"].as_array().unwrap().iter().filter_map(|o| o["name"].as_str()).collect();
    assert!(operators.contains(&"stateful-map"), "{operators:?}");
    assert!(
        !metrics.contains("operator=\"857e9877747f27b5e758680f3644828a\""),
        "an operator is still exported under its vertex id"
    );
}
