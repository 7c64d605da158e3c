//! The demo end to end: the model-driven cluster, served over the Flink-shaped REST API, is
//! read by the real poller, and the daemon's /metrics lists every demo job within 10 s.

use std::time::Duration;

use crate::common::{scrape_until, try_scrape, until};

use checkpoint_sentinel::commands::demo::{DemoOptions, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_list_every_demo_job_within_10_s() {
    let dir = tempfile::tempdir().unwrap();
    let demo = start(DemoOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        jobs: 5,
        seed: 1,
        dir: Some(dir.path().to_path_buf()),
        interval_scale: 1,
    })
    .await
    .unwrap();
    let addr = demo.daemon.addr;
    let ids: Vec<&str> = demo.jobs.iter().map(|(id, _)| id.as_str()).collect();
    let listed = |body: &str| ids.iter().all(|id| body.contains(&format!("job_id=\"{id}\"")));
    scrape_until(addr, "every demo job on /metrics", Duration::from_secs(10), listed).await;
    // Checkpoints with per-subtask phases arrive too (the healthy job checkpoints every 2 s),
    // and the JobManager log the tailer follows fills up.
    let sample = "flink_checkpoint_alignment_duration_seconds_count{";
    let log_file = &demo.log_file;
    let (body, log) = until(
        "alignment on /metrics and a completed checkpoint in the log",
        Duration::from_secs(15),
        || async {
            (
                try_scrape(addr).await.unwrap_or_default(),
                std::fs::read_to_string(log_file).unwrap_or_default(),
            )
        },
        |(body, log)| body.contains(sample) && log.contains("Completed checkpoint"),
    )
    .await;
    assert!(body.contains(sample), "{body}");
    assert!(log.contains("Triggering checkpoint") && log.contains("Completed checkpoint"), "{log}");
    demo.shutdown().await;
}

/// A demo in a folder of its own making (the `demo` command's case) leaves nothing behind:
/// not after a normal stop, and not after failing to start on a busy port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_removes_its_temporary_folder() {
    let demo = start(DemoOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        jobs: 1,
        seed: 1,
        dir: None,
        interval_scale: 1,
    })
    .await
    .unwrap();
    let dir = demo.dir.clone();
    assert!(dir.join("log").is_dir(), "{}", dir.display());
    demo.shutdown().await;
    assert!(!dir.exists(), "{} left after shutdown", dir.display());

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let before: Vec<_> = demo_dirs();
    let refused = start(DemoOptions {
        listen: busy.local_addr().unwrap(),
        jobs: 1,
        seed: 1,
        dir: None,
        interval_scale: 1,
    })
    .await;
    assert!(refused.is_err(), "a busy port must refuse the demo");
    assert_eq!(demo_dirs(), before, "a refused demo leaves no folder");
}

fn demo_dirs() -> Vec<std::path::PathBuf> {
    let prefix = format!("checkpoint-sentinel-demo-{}-", std::process::id());
    let mut dirs: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

/// The `demo` command removes its temporary folder on SIGTERM as on Ctrl-C, and takes
/// `--interval-scale` with the daemon (it used to be dropped without `--no-daemon`).
#[test]
fn the_demo_command_cleans_up_on_sigterm_and_takes_interval_scale() {
    use std::io::BufRead as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["demo", "--listen", "127.0.0.1:0", "--jobs", "1", "--interval-scale", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    let mut line = String::new();
    // The demo prints its URLs and its folder, then waits.
    while !printed.contains("stops the demo") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "the demo ended early: {printed}");
        printed.push_str(&line);
    }
    assert!(printed.contains("simulated Flink REST API: http://127.0.0.1:"), "{printed}");
    let dir = printed
        .lines()
        .find_map(|l| l.strip_prefix("Ctrl-C (or SIGTERM) stops the demo and removes "))
        .map(|d| std::path::PathBuf::from(d.trim_end_matches('.')))
        .unwrap_or_else(|| panic!("no folder in {printed}"));
    assert!(dir.is_dir(), "{}", dir.display());
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!dir.exists(), "{} left after SIGTERM", dir.display());
}

/// `interval_scale` reaches the simulated jobs when the daemon runs too: the healthy job's 2 s
/// interval is 60 s at scale 30, as its checkpoint config over the simulated REST API says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interval_scale_applies_with_the_daemon() {
    // A folder of the test's own: a temporary one of the demo's would race the test above,
    // which counts this process's demo folders.
    let dir = tempfile::tempdir().unwrap();
    let demo = start(DemoOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        jobs: 1,
        seed: 1,
        dir: Some(dir.path().to_path_buf()),
        interval_scale: 30,
    })
    .await
    .unwrap();
    let (id, _) = &demo.jobs[0];
    let url = format!("{}/jobs/{id}/checkpoints/config", demo.flink_url);
    let config: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    assert_eq!(config["interval"], 60_000, "{config}");
    demo.shutdown().await;
}
