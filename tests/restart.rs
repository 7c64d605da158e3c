//! `kill -9` of the real binary mid-stream, then a restart: no checkpoint lost, none counted
//! twice, because the state is persisted atomically and re-applied idempotently.

use crate::common;
use common::spawn_daemon;

use std::net::SocketAddr;
use std::time::Duration;

use common::{replay, sample, scrape_until, try_scrape, until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_and_restart_neither_loses_nor_double_counts() {
    let server = replay("2.3.0", "expired").await;
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
    let mut first = spawn_daemon(&config);
    // Let it count part of the series and persist it.
    let state_file = dir.path().join("state/state.json");
    until(
        "8 polls and the state persisted",
        Duration::from_secs(10),
        || async { (server.polls_served(), state_file.exists()) },
        |(polls, persisted)| *polls >= 8 && *persisted,
    )
    .await;
    first.kill().unwrap(); // SIGKILL: no shutdown hook runs.
    first.wait().unwrap();
    let served_before_restart = server.polls_served();
    assert!(served_before_restart < server.scenario().polls.len(), "killed too late to test anything");

    let mut second = spawn_daemon(&config);
    server.wait_for_polls(2).await;
    let s = server.scenario();
    let job_name = "flink-lab-expired";
    let labels = [("cluster", "lab"), ("job_id", s.job_id.as_str()), ("job_name", job_name)];
    let counts = s.last_counts();
    let expected = s.distinct_completed().len() as f64;
    // Flink's counts and every completed checkpoint recorded: a checkpoint lost or counted twice
    // never gets there.
    let all_counted = |m: &str| {
        sample(m, "flink_checkpoints_total", &[labels[0], labels[1], labels[2], ("status", "completed")])
            == counts["completed"].as_f64()
            && sample(m, "flink_checkpoint_duration_seconds_count", &labels) == Some(expected)
    };
    let metrics =
        scrape_until(second.addr(), "the whole series counted", Duration::from_secs(30), all_counted).await;
    second.kill().unwrap();
    second.wait().unwrap();
    for status in ["completed", "failed"] {
        let got = sample(
            &metrics,
            "flink_checkpoints_total",
            &[labels[0], labels[1], labels[2], ("status", status)],
        );
        assert_eq!(got, Some(counts[status].as_u64().unwrap() as f64), "{status}");
    }
    let got = sample(&metrics, "flink_checkpoint_duration_seconds_count", &labels);
    assert_eq!(got, Some(expected), "every completed checkpoint recorded exactly once across the kill");
}

const JOB: &str = "82fe7f7e94abf06c0cd4b1017012a2cd";

/// Line `i` of the watched JobManager log, in Flink 1.20's format: checkpoint `i` expired (even
/// `i`) or was declined (odd `i`). The checkpoint id numbers the line.
fn jobmanager_line(i: u64) -> String {
    let ts = "2026-11-29 15:15:20,699";
    if i.is_multiple_of(2) {
        format!(
            "{ts} INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Checkpoint {i} of job {JOB} expired before completing.\n"
        )
    } else {
        format!(
            "{ts} INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint {i} by task 75334e7121a9e2403cff11302e29350e_857e9877747f27b5e758680f3644828a_0_0 of job {JOB} at 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126).\n"
        )
    }
}

/// Reads the log-event counters, the bytes of the log not read yet and the recent-events ring of
/// a running daemon.
async fn log_counts(addr: SocketAddr) -> Option<(u64, u64, u64, Vec<u64>)> {
    let metrics = try_scrape(addr).await?;
    let count = |kind| {
        let labels =
            [("cluster", "lab"), ("job_id", JOB), ("job_name", ""), ("kind", kind), ("source", "log")];
        sample(&metrics, "flink_checkpoint_log_events_total", &labels).map_or(0, |v| v as u64)
    };
    let lag = sample(&metrics, "checkpoint_sentinel_log_lag_bytes", &[("cluster", "lab")])
        .map_or(u64::MAX, |v| v as u64);
    let events: serde_json::Value =
        reqwest::get(format!("http://{addr}/api/v1/events?limit=256")).await.ok()?.json().await.ok()?;
    let ring = events["events"].as_array()?.iter().filter_map(|e| e["checkpoint_id"].as_u64()).collect();
    Some((count("expired"), count("declined"), lag, ring))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_a_log_is_written_counts_every_line_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("flink-root-standalonesession-0-vm.log");
    std::fs::write(&log, "").unwrap();
    let config = dir.path().join("sentinel.toml");
    // Nobody answers at the cluster's URL (a port bound for the test, never accepted on): the
    // poller fails, the tailer is what is tested.
    let no_flink = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std::fs::write(
        &config,
        format!(
            "[[clusters]]\nname = \"lab\"\nurl = \"http://127.0.0.1:{}\"\npoll_interval = \"1s\"\n\
             [[logs]]\ncluster = \"lab\"\npaths = [\"{}\"]\nstart_at = \"beginning\"\npoll_interval = \"50ms\"\nflush_after = \"50ms\"\n\
             [state]\ndir = \"{}\"\npersist_interval = \"70ms\"\n",
            no_flink.local_addr().unwrap().port(),
            log.display(),
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("seed {seed}");
    let mut rng = checkpoint_sentinel::model::rng::SplitMix64::new(seed);

    // The writer appends a numbered line every millisecond or so, in bursts, until told to stop.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for _ in 0..5 {
                    file.write_all(jobmanager_line(n).as_bytes()).unwrap();
                    n += 1;
                }
                // Part of the scenario: bursts of five lines, a few milliseconds apart.
                std::thread::sleep(Duration::from_millis(4));
            }
            n
        })
    };

    let kills = 6;
    for _ in 0..kills {
        let mut daemon = spawn_daemon(&config);
        // Part of the scenario: kill at a random moment, before, between or during tailer reads
        // and state writes.
        tokio::time::sleep(Duration::from_millis(rng.between(150, 700))).await;
        assert!(daemon.try_wait().unwrap().is_none(), "the daemon exited by itself");
        daemon.kill().unwrap(); // SIGKILL: no shutdown hook runs.
        daemon.wait().unwrap();
        // Part of the scenario: the log grows while no daemon runs.
        tokio::time::sleep(Duration::from_millis(rng.between(0, 100))).await;
    }
    let mut daemon = spawn_daemon(&config);
    // Part of the scenario: the last daemon reads while the log still grows.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 1000, "the writer wrote only {written} lines");
    let (want_expired, want_declined) = (written.div_ceil(2), written / 2);

    // Wait until the daemon has read the whole log (nothing left to read, so a line counted
    // twice would already show).
    let last = until(
        "every line read",
        Duration::from_secs(15),
        || log_counts(daemon.addr()),
        |counts| counts.as_ref().is_some_and(|(e, d, lag, _)| e + d >= written && *lag == 0),
    )
    .await;
    daemon.kill().unwrap();
    daemon.wait().unwrap();
    let (expired, declined, _, ring) = last.expect("the daemon serves /metrics and /api/v1/events");
    assert_eq!(
        (expired, declined),
        (want_expired, want_declined),
        "{written} lines written across {kills} kills (seed {seed}): each counted exactly once"
    );
    // The ring (newest first) holds the last 256 lines, each once, in order, across the kills.
    let want_ring: Vec<u64> = (written.saturating_sub(256)..written).rev().collect();
    assert_eq!(ring, want_ring, "recent events after {kills} kills (seed {seed})");
}
