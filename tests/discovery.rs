//! File discovery through the real daemon: a cluster listed in a `file_sd` file is polled
//! beside a `[[clusters]]` entry; a bad file keeps it; when it leaves the file its series go,
//! when it comes back they return with Flink's own counts (nothing counted twice); the static
//! cluster is left alone throughout.

use crate::common;

use std::time::Duration;

use common::{replay, sample, scrape, scrape_until, until};

/// How long a scrape waits for what it checks.
const WAIT: Duration = Duration::from_secs(15);

fn counts(metrics: &str, cluster: &str, job_id: &str, job_name: &str) -> (Option<f64>, Option<f64>) {
    let with =
        |status| [("cluster", cluster), ("job_id", job_id), ("job_name", job_name), ("status", status)];
    (
        sample(metrics, "flink_checkpoints_total", &with("completed")),
        sample(metrics, "flink_checkpoints_total", &with("failed")),
    )
}

fn job_name(metrics: &str, cluster: &str) -> Option<String> {
    let line = metrics.lines().find(|l| {
        l.starts_with("flink_checkpoints_total{") && l.contains(&format!("cluster=\"{cluster}\""))
    })?;
    Some(line.split("job_name=\"").nth(1)?.split('"').next()?.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovered_cluster_leaves_and_comes_back_without_double_counting() {
    let orders = replay("2.3.0", "healthy").await;
    let lab = replay("1.20.5", "healthy").await;
    let state = tempfile::tempdir().unwrap();
    let sd = tempfile::tempdir().unwrap();
    let file = sd.path().join("flink.json");
    let listed = format!(
        r#"[{{"targets": ["{}"], "labels": {{"cluster": "orders", "team": "payments"}}}}]"#,
        orders.url.trim_start_matches("http://")
    );
    std::fs::write(&file, &listed).unwrap();
    let mut config = common::watching(&lab.url, Duration::from_millis(100), state.path());
    config.discovery.files = vec![format!("{}/*.json", sd.path().display())];
    config.discovery.refresh_interval = Duration::from_secs(60);
    config.discovery.defaults.poll_interval = Duration::from_millis(100);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();

    // Polled from the start, beside the static cluster, to Flink's own counts.
    orders.wait_for_polls(2).await;
    lab.wait_for_polls(2).await;
    let s = orders.scenario();
    let last = s.last_counts();
    let want = (last["completed"].as_f64(), last["failed"].as_f64());
    let before = scrape_until(daemon.addr, "orders counted", WAIT, |m| {
        job_name(m, "orders").is_some_and(|n| counts(m, "orders", &s.job_id, &n) == want)
    })
    .await;
    let name = job_name(&before, "orders").unwrap();
    let lab_name = job_name(&before, "lab").unwrap();
    let lab_counts = counts(&before, "lab", &lab.scenario().job_id, &lab_name);
    assert_eq!(sample(&before, "checkpoint_sentinel_discovered_clusters", &[]), Some(1.0));

    // A file half-written or garbled: a warning and a count, the cluster stays.
    std::fs::write(&file, "[{\"targets\": [").unwrap();
    let garbled = scrape_until(daemon.addr, "bad file counted", WAIT, |m| {
        sample(m, "checkpoint_sentinel_discovery_file_errors_total", &[("reason", "invalid")]) >= Some(1.0)
    })
    .await;
    assert_eq!(counts(&garbled, "orders", &s.job_id, &name), want, "the previous good set is kept");

    // Gone from the file: its series go, the static cluster's stay.
    std::fs::write(&file, "[]").unwrap();
    let gone = scrape_until(daemon.addr, "orders removed", WAIT, |m| !m.contains("cluster=\"orders\"")).await;
    assert_eq!(sample(&gone, "checkpoint_sentinel_discovered_clusters", &[]), Some(0.0));
    assert_eq!(counts(&gone, "lab", &lab.scenario().job_id, &lab_name), lab_counts);
    let served_while_gone = orders.polls_served();
    // Four more rounds of the static cluster: the daemon went on polling, not the removed one.
    let lab_served = lab.polls_served() + 4;
    until(
        "four more rounds of the static cluster",
        WAIT,
        || async { lab.polls_served() },
        |n| *n >= lab_served,
    )
    .await;
    assert_eq!(orders.polls_served(), served_while_gone, "not polled once removed");

    // Back: Flink's counts again, not the old ones added to them.
    std::fs::write(&file, &listed).unwrap();
    let back =
        scrape_until(daemon.addr, "orders back", WAIT, |m| counts(m, "orders", &s.job_id, &name).0.is_some())
            .await;
    // Three more polls of it, and its counts as the third left them.
    let served_back = orders.polls_served() + 3;
    until("three more polls of orders", WAIT, || async { orders.polls_served() }, |n| *n >= served_back)
        .await;
    let after = scrape(daemon.addr).await;
    daemon.shutdown().await;
    assert_eq!(counts(&back, "orders", &s.job_id, &name), want, "restored with Flink's counts");
    assert_eq!(counts(&after, "orders", &s.job_id, &name), want, "and not counted twice later");
    assert!(orders.polls_served() > served_while_gone, "polled again");
    assert_eq!(
        counts(&after, "lab", &lab.scenario().job_id, &lab_name),
        lab_counts,
        "static cluster untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discovered_clusters_logs_are_followed_from_the_defaults_template() {
    use checkpoint_sentinel::config::{LogConfig, StartAt};
    let orders = replay("2.3.0", "healthy").await;
    let state = tempfile::tempdir().unwrap();
    let sd = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    // What the JobManager of `orders` wrote (a real 2.3.0 log), and a TaskManager's beside it.
    let dir = logs.path().join("orders");
    std::fs::create_dir(&dir).unwrap();
    let fixture = common::fixtures().join("flink-2.3.0/healthy/logs");
    let jm = std::fs::read_to_string(fixture.join("flink-root-standalonesession-0-vm.log")).unwrap();
    std::fs::write(dir.join("a-jobmanager.log"), &jm).unwrap();
    std::fs::copy(fixture.join("flink-root-taskexecutor-0-vm.log"), dir.join("b-taskmanager.log")).unwrap();
    let file = sd.path().join("flink.yml");
    let listed = format!(
        "- targets: [\"{}\"]\n  labels: {{cluster: orders}}\n",
        orders.url.trim_start_matches("http://")
    );
    std::fs::write(&file, &listed).unwrap();
    let mut config = common::watching(&orders.url, Duration::from_millis(100), state.path());
    config.clusters.clear();
    config.discovery.files = vec![format!("{}/*.yml", sd.path().display())];
    config.discovery.refresh_interval = Duration::from_secs(60);
    config.discovery.defaults.poll_interval = Duration::from_millis(100);
    config.discovery.defaults.logs = Some(LogConfig {
        paths: vec![format!("{}/{{cluster}}/*.log", logs.path().display())],
        start_at: StartAt::Beginning,
        poll_interval: Duration::from_millis(100),
        // Bounded like [[logs]]: one file of the two, the other counted as cut.
        max_files: 1,
        ..LogConfig::default()
    });
    assert_eq!(config.problems(), Vec::<String>::new());
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();

    let lines = jm.lines().count() as f64;
    let read = scrape_until(daemon.addr, "the JobManager log read", WAIT, |m| {
        sample(m, "checkpoint_sentinel_log_lines_total", &[("cluster", "orders")]) == Some(lines)
    })
    .await;
    assert_eq!(sample(&read, "checkpoint_sentinel_log_files_watched", &[("cluster", "orders")]), Some(1.0));
    assert_eq!(
        sample(
            &read,
            "checkpoint_sentinel_inputs_cut_total",
            &[("cluster", "orders"), ("what", "log_files")]
        ),
        Some(1.0)
    );
    let events: f64 = read
        .lines()
        .filter(|l| l.starts_with("flink_checkpoint_log_events_total{") && l.contains("cluster=\"orders\""))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert!(events > 0.0, "checkpoint lines became events");

    // Gone from the file: its tailer stops with its poller, and its series go.
    // (checkpoint_sentinel_inputs_cut_total is the daemon's own counter and stays.)
    let of_orders = |m: &str| {
        m.lines()
            .filter(|l| {
                l.contains("cluster=\"orders\"") && !l.starts_with("checkpoint_sentinel_inputs_cut_total")
            })
            .count()
    };
    std::fs::write(&file, "# no clusters\n").unwrap();
    scrape_until(daemon.addr, "orders removed", WAIT, |m| of_orders(m) == 0).await;
    std::fs::write(dir.join("a-jobmanager.log"), format!("{jm}{jm}")).unwrap();
    // Part of the scenario, not a wait for something: a quiet period of five of the tailer's
    // polls, in which a tailer left running would have read the lines just written (nothing
    // happens that could be waited on instead).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = scrape(daemon.addr).await;
    daemon.shutdown().await;
    assert_eq!(of_orders(&after), 0, "no tailer brought the cluster back");
}
