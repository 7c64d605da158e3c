//! The demo end to end: the model-driven cluster, served over the Flink-shaped REST API, is
//! read by the real poller, and the daemon's /metrics lists every demo job within 10 s.

use std::time::Duration;

use crate::common::{scrape_until, try_scrape, until};

use checkpoint_sentinel::commands::demo::{DemoOptions, start};

/// The demo's five jobs (one of each behaviour) in `dir`, its daemon on a free port.
async fn five_jobs_in(dir: &std::path::Path) -> checkpoint_sentinel::commands::demo::RunningDemo {
    let options = DemoOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        jobs: 5,
        seed: 1,
        dir: Some(dir.to_path_buf()),
        interval_scale: 1,
    };
    start(options).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_list_every_demo_job_within_10_s() {
    let dir = tempfile::tempdir().unwrap();
    let demo = five_jobs_in(dir.path()).await;
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

/// One voice on the demo: the API and `diagnose` (over the same simulated cluster) give each job
/// the same advice, a job whose only trouble is configuration advice is `ok` with its advice
/// beside it (health and advice are two lanes), the headline counts health only and says the
/// advice on its own line; and every time field of the API ends in `_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_diagnose_agree_and_advice_is_not_ill_health() {
    use clap::Parser;
    use serde_json::Value;

    let dir = tempfile::tempdir().unwrap();
    let demo = five_jobs_in(dir.path()).await;
    let base = format!("http://{}", demo.daemon.addr);
    let get = |path: String| async move {
        match reqwest::get(&path).await {
            Ok(r) => r.json::<Value>().await.unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    };
    // Every demo job runs with no retention (and most with 100 tolerable failures): its advice is
    // there once its configuration is read; the healthy and the min-pause jobs are ok once a
    // checkpoint completed.
    let jobs = until(
        "every demo job polled, with its advice",
        Duration::from_secs(30),
        || get(format!("{base}/api/v1/jobs")),
        |v| {
            v["jobs"].as_array().is_some_and(|jobs| {
                let checkpointed = |j: &Value| {
                    !["demo-healthy-0", "demo-minpause-3"].contains(&j["name"].as_str().unwrap_or(""))
                        || j["completed_total"].as_u64().is_some_and(|n| n > 0)
                };
                jobs.len() == 5
                    && jobs.iter().all(|j| j["advice"].as_array().is_some_and(|a| !a.is_empty()))
                    && jobs.iter().all(checkpointed)
            })
        },
    )
    .await;
    let job =
        |name: &str| jobs["jobs"].as_array().unwrap().iter().find(|j| j["name"] == name).unwrap().clone();
    for name in ["demo-healthy-0", "demo-minpause-3"] {
        let j = job(name);
        assert_eq!(j["health"], "ok", "{name}: advice is not ill health: {j}");
        assert_eq!(j["advice"], serde_json::json!(["tolerable_too_high", "no_retention"]), "{name}");
    }
    let headline = &jobs["headlines"][0];
    assert_eq!(headline["advice"], "5 jobs have configuration advice", "{headline}");
    assert!(!headline["text"].as_str().unwrap().contains("5 of 5"), "{headline}");

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: checkpoint_sentinel::commands::diagnose::DiagnoseArgs,
    }
    let cli = Cli::parse_from(["diagnose", "--url", demo.flink_url.as_str(), "--format", "json"]);
    let report = checkpoint_sentinel::commands::diagnose::diagnose(&cli.args).await.unwrap();
    let report = serde_json::to_value(&report).unwrap();
    assert_eq!(report["advice"], "5 jobs have configuration advice");
    for j in report["jobs"].as_array().unwrap() {
        let name = j["name"].as_str().unwrap();
        assert_eq!(j["advice"], job(name)["advice"], "{name}: diagnose and the API give the same advice");
    }
    for name in ["demo-healthy-0", "demo-minpause-3"] {
        let j = report["jobs"].as_array().unwrap().iter().find(|j| j["name"] == name).unwrap();
        assert_eq!(j["verdict"], "healthy", "{name}: {j}");
    }

    // Every time in the API is epoch milliseconds under a name ending in `_ms`.
    fn times_not_in_ms(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let epoch_ms = v.as_f64().is_some_and(|n| (1.7e12..1.9e12).contains(&n));
                    if epoch_ms && !k.ends_with("_ms") {
                        out.push(format!("{path}.{k}"));
                    }
                    times_not_in_ms(v, &format!("{path}.{k}"), out);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| times_not_in_ms(v, &format!("{path}[]"), out)),
            _ => {}
        }
    }
    let ids: Vec<String> =
        jobs["jobs"].as_array().unwrap().iter().map(|j| j["job_id"].as_str().unwrap().to_string()).collect();
    let details = || async {
        let mut all = Vec::new();
        for id in &ids {
            all.push(get(format!("{base}/api/v1/jobs/demo/{id}")).await);
        }
        all
    };
    // A trigger deviation (the expiring and failing jobs' triggers wait) carries a time too.
    let details = until("a trigger deviation on some job", Duration::from_secs(60), details, |all| {
        all.iter().any(|v| v["shadow"]["deviations"].as_array().is_some_and(|d| !d.is_empty()))
    })
    .await;
    let mut wrong = Vec::new();
    for path in ["/api/v1/jobs", "/api/v1/clusters", "/api/v1/alerts"] {
        times_not_in_ms(&get(format!("{base}{path}")).await, path, &mut wrong);
    }
    for v in &details {
        times_not_in_ms(v, "job", &mut wrong);
    }
    assert!(wrong.is_empty(), "time fields not in _ms: {wrong:?}");
    demo.shutdown().await;
}
