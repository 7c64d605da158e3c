//! Concurrent polling within a cluster: many jobs behind a slow network are polled with up to
//! `max_concurrent_requests` requests in flight, so a round takes about the serial sum divided
//! by the concurrency; every checkpoint is still counted exactly once and details are fetched
//! once; and a slow cluster does not hold up another one (each has its own task).

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use checkpoint_sentinel::app::AppState;
use checkpoint_sentinel::config::ClusterConfig;
use checkpoint_sentinel::sources::poller::Poller;
use checkpoint_sentinel::state::State;
use common::many::replay_many;
use common::{sample, scrape_until, until};

const DELAY: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_over_many_jobs_takes_the_serial_sum_divided_by_the_concurrency() {
    let jobs = 24;
    let server = replay_many("2.3.0", "healthy", jobs, DELAY).await;
    let mut cluster = ClusterConfig::new("many", &server.url);
    cluster.max_concurrent_requests = 8;
    let app =
        Arc::new(AppState::new(State::new(checkpoint_sentinel::daemon::window_of(&Default::default()))));
    let mut poller = Poller::new(cluster, app).unwrap();
    for round in 0..3 {
        let before = server.requests();
        let started = Instant::now();
        assert!(poller.round().await);
        let took = started.elapsed();
        let requests = server.requests() - before;
        let serial = DELAY * requests as u32;
        println!("round {round}: {requests} requests in {took:?} (serial sum {serial:?})");
        assert!(requests >= jobs + 2, "round {round}: every job polled ({requests} requests)");
        // Ideally serial / 8; a loaded machine gets a wide margin, the serial poller none.
        assert!(took < serial / 3, "round {round}: {took:?} for {requests} requests of {DELAY:?}");
    }
    assert_eq!(server.max_in_flight(), 8, "the semaphore admits max_concurrent_requests, no more");
}

#[tokio::test]
async fn many_jobs_polled_concurrently_are_counted_exactly_once() {
    let jobs = 12;
    let server = replay_many("2.3.0", "healthy", jobs, Duration::from_millis(2)).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching(&server.url, Duration::from_millis(100), state.path());
    config.clusters[0].max_concurrent_requests = 6;
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
async fn a_slow_cluster_does_not_delay_another() {
    let slow = replay_many("2.3.0", "healthy", 4, Duration::from_secs(1)).await;
    let fast = replay_many("2.3.0", "healthy", 4, Duration::ZERO).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching(&fast.url, Duration::from_millis(100), state.path());
    let mut slow_cluster = ClusterConfig::new("slow", &slow.url);
    slow_cluster.poll_interval = Duration::from_millis(100);
    slow_cluster.max_concurrent_requests = 1;
    config.clusters.push(slow_cluster);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    // The slow cluster's first round needs /overview and /jobs/overview (2 s) before any job:
    // the fast cluster polls five rounds meanwhile.
    let fast_polls = until(
        "five rounds of the fast cluster",
        Duration::from_secs(30),
        || async { fast.min_polls() },
        |n| *n >= 5,
    )
    .await;
    let slow_polls = slow.min_polls();
    daemon.shutdown().await;
    assert_eq!(slow_polls, 0, "the slow cluster is still in its first round after {fast_polls} fast ones");
}
