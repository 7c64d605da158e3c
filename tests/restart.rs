//! `kill -9` of the real binary mid-stream, then a restart: no checkpoint lost, none counted
//! twice, because the state is persisted atomically and re-applied idempotently.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{replay, sample};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(config: &std::path::Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["run", "--config"])
        .arg(config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("SENTINEL_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

async fn scrape(port: u16) -> Option<String> {
    let response = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.ok()?;
    response.text().await.ok()
}

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
    let port = free_port();
    let mut first = spawn(&config, port);
    // Let it count part of the series and persist it.
    for _ in 0..200 {
        if server.polls_served() >= 8 && dir.path().join("state/state.json").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(server.polls_served() >= 8, "the daemon did not poll");
    first.kill().unwrap(); // SIGKILL: no shutdown hook runs.
    first.wait().unwrap();
    let served_before_restart = server.polls_served();
    assert!(served_before_restart < server.scenario().polls.len(), "killed too late to test anything");

    let mut second = spawn(&config, port);
    server.wait_for_polls(2).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let metrics = scrape(port).await.expect("restarted daemon serves /metrics");
    second.kill().unwrap();
    second.wait().unwrap();

    let s = server.scenario();
    let job_name = "flink-lab-expired";
    let labels = [("cluster", "lab"), ("job_id", s.job_id.as_str()), ("job_name", job_name)];
    let counts = s.last_counts();
    for status in ["completed", "failed"] {
        let got = sample(
            &metrics,
            "flink_checkpoints_total",
            &[labels[0], labels[1], labels[2], ("status", status)],
        );
        assert_eq!(got, Some(counts[status].as_u64().unwrap() as f64), "{status}");
    }
    let expected = s.distinct_completed().len() as f64;
    let got = sample(&metrics, "flink_checkpoint_duration_seconds_count", &labels);
    assert_eq!(got, Some(expected), "every completed checkpoint recorded exactly once across the kill");
}
