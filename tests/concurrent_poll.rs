//! Concurrent polling within a cluster: many jobs behind a slow network are polled with
//! `max_concurrent_requests` requests in flight, no fewer and no more (so a round takes about the
//! serial sum divided by the concurrency: `benches/run.sh`'s `rounds` measures that); every
//! checkpoint is still counted exactly once and details are fetched once; and a cluster that
//! does not answer does not hold up another one (each has its own task). The stub's gate holds
//! answers back, so what is checked is the concurrency reached and the rounds counted, never a
//! wall-clock time.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use checkpoint_sentinel::app::AppState;
use checkpoint_sentinel::config::ClusterConfig;
use checkpoint_sentinel::sources::poller::Poller;
use checkpoint_sentinel::state::State;
use common::many::replay_many;
use common::{sample, scrape_until, until};

const DELAY: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_over_many_jobs_keeps_max_concurrent_requests_in_flight() {
    let jobs = 24;
    let server = replay_many("2.3.0", "healthy", jobs, DELAY).await;
    let mut cluster = ClusterConfig::new("many", &server.url);
    cluster.max_concurrent_requests = Some(8);
    let app =
        Arc::new(AppState::new(State::new(checkpoint_sentinel::daemon::window_of(&Default::default()))));
    let mut poller = Poller::new(cluster, app).unwrap();
    for round in 0..3 {
        // The stub answers no job request until 8 are in flight at once: a poller that sent
        // fewer at a time would leave the count below 8 (the gate gives up after 30 s). Once
        // open, each answer still takes DELAY, time enough for a poller over its bound to send
        // a ninth.
        server.hold_until_in_flight(8);
        server.reset_max_in_flight();
        let before = server.requests();
        assert!(poller.round().await);
        let requests = server.requests() - before;
        println!("round {round}: {requests} requests, at most {} in flight", server.max_in_flight());
        assert!(requests >= jobs + 2, "round {round}: every job polled ({requests} requests)");
        assert_eq!(
            server.max_in_flight(),
            8,
            "round {round}: the semaphore admits max_concurrent_requests at once, no fewer, no more"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unset_the_requests_in_flight_grow_with_the_measured_answer_time_up_to_the_cap() {
    // 40 jobs answering in 50 ms each, polled every 100 ms: the first round assumes 5 ms per
    // answer and keeps a few requests in flight; from the second the measured 50 ms call for
    // more than the cap, 8 per REST thread of the JobManager (the capture names none: Flink's
    // default 4), so 32 exactly.
    let jobs = 40;
    let server = replay_many("2.3.0", "healthy", jobs, DELAY).await;
    let mut cluster = ClusterConfig::new("many", &server.url);
    cluster.poll_interval = Duration::from_millis(100);
    assert_eq!(cluster.max_concurrent_requests, None, "unset by default");
    let app =
        Arc::new(AppState::new(State::new(checkpoint_sentinel::daemon::window_of(&Default::default()))));
    let mut poller = Poller::new(cluster, app).unwrap();
    server.hold_until_in_flight(4);
    server.reset_max_in_flight();
    assert!(poller.round().await);
    let first = server.max_in_flight();
    println!("round 0: at most {first} in flight");
    assert!((4..=16).contains(&first), "first round: {first} in flight");
    for round in 1..3 {
        server.hold_until_in_flight(32);
        server.reset_max_in_flight();
        // What the stub still counts in flight between rounds (a handler whose connection the
        // client closed is never subtracted) is not the poller's.
        let between = server.max_in_flight();
        assert!(poller.round().await);
        println!("round {round}: at most {} in flight, {between} counted before", server.max_in_flight());
        assert_eq!(server.max_in_flight() - between, 32, "round {round}: the cap at 4 REST threads, no more");
    }
}

#[tokio::test]
async fn many_jobs_polled_concurrently_are_counted_exactly_once() {
    let jobs = 12;
    let server = replay_many("2.3.0", "healthy", jobs, Duration::from_millis(2)).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching(&server.url, Duration::from_millis(100), state.path());
    config.clusters[0].max_concurrent_requests = Some(6);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    server.wait_for_polls(2).await;
    let s = server.scenario();
    let counts = s.last_counts();
    let every_job_counted = |metrics: &str| {
        server.job_ids().iter().enumerate().all(|(i, id)| {
            let name = server.job_name(i);
            ["completed", "failed"].iter().all(|status| {
                let labels =
                    [("cluster", "lab"), ("job_id", id.as_str()), ("job_name", &name), ("status", status)];
                sample(metrics, "flink_checkpoints_total", &labels) == counts[*status].as_f64()
            })
        })
    };
    let metrics =
        scrape_until(daemon.addr, "Flink's counts of every job", Duration::from_secs(30), every_job_counted)
            .await;
    daemon.shutdown().await;

    for (i, id) in server.job_ids().iter().enumerate() {
        let name = server.job_name(i);
        for status in ["completed", "failed"] {
            let labels =
                [("cluster", "lab"), ("job_id", id.as_str()), ("job_name", &name), ("status", status)];
            let got = sample(&metrics, "flink_checkpoints_total", &labels);
            assert_eq!(got, counts[status].as_f64(), "job {i} {status}: Flink's own count");
        }
    }
    assert!(server.details_asked() >= jobs, "details were fetched");
    assert_eq!(server.details_asked_twice(), Vec::new(), "details of a checkpoint fetched once per job");
    assert!(server.max_in_flight() <= 6, "at most max_concurrent_requests in flight");
}

#[tokio::test]
async fn a_cluster_that_does_not_answer_does_not_delay_another() {
    let held = replay_many("2.3.0", "healthy", 4, Duration::ZERO).await;
    let fast = replay_many("2.3.0", "healthy", 4, Duration::ZERO).await;
    // Not one answer from this cluster until released: its first round stays at /overview.
    held.hold_everything();
    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching(&fast.url, Duration::from_millis(100), state.path());
    let mut held_cluster = ClusterConfig::new("held", &held.url);
    held_cluster.poll_interval = Duration::from_millis(100);
    held_cluster.max_concurrent_requests = Some(1);
    config.clusters.push(held_cluster);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let fast_polls = until(
        "five rounds of the fast cluster while the other holds its answers",
        Duration::from_secs(60),
        || async { fast.min_polls() },
        |n| *n >= 5,
    )
    .await;
    assert_eq!(
        held.min_polls(),
        0,
        "the held cluster is still in its first round after {fast_polls} fast ones"
    );
    // Released, it is polled too: it was waiting for its answers, not stopped.
    held.release();
    until(
        "a round of the released cluster",
        Duration::from_secs(60),
        || async { held.min_polls() },
        |n| *n >= 1,
    )
    .await;
    daemon.shutdown().await;
}
