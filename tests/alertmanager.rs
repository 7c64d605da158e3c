//! Alerts reach a real Alertmanager (Debian's `prometheus-alertmanager`, started on loopback by
//! the test) and resolve there; an Alertmanager outage while an alert fires loses nothing.

use crate::common;
use common::port_for_another_program;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use checkpoint_sentinel::config::Config;
use common::{replay, sample, until};
use serde_json::Value;

/// A real Alertmanager on `port`, or `None` outside CI when the package is not installed.
fn alertmanager(port: u16, dir: &std::path::Path) -> Option<Child> {
    let config = dir.join("alertmanager.yml");
    std::fs::write(&config, "route:\n  receiver: 'null'\n  group_wait: 0s\nreceivers:\n  - name: 'null'\n")
        .unwrap();
    let child = Command::new("prometheus-alertmanager")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(c) => Some(c),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("prometheus-alertmanager not available ({e}); skipping");
            None
        }
        Err(e) => panic!("prometheus-alertmanager is required in CI: {e}"),
    }
}

/// The active alerts Alertmanager holds with this name.
async fn active(port: u16, name: &str) -> Option<Vec<Value>> {
    let url = format!("http://127.0.0.1:{port}/api/v2/alerts?filter=alertname%3D%22{name}%22&active=true");
    let response = reqwest::get(url).await.ok()?;
    let alerts: Vec<Value> = response.json().await.ok()?;
    Some(alerts.into_iter().filter(|a| a["status"]["state"] == "active").collect())
}

fn config(dir: &std::path::Path, flink: &str, am_port: u16, rule: &str) -> Config {
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[[clusters]]
name = "lab"
url = "{flink}"
poll_interval = "300ms"
[state]
dir = "{state}"
[alerting]
alertmanagers = ["http://127.0.0.1:{am_port}"]
evaluation_interval = "200ms"
resend_interval = "1s"
default_rules = false
external_url = "http://sentinel.example:9717"
[[rules]]
name = "FlinkCheckpointFailuresSeen"
expr = "{rule}"
for = "0s"
severity = "warning"
class = "failure"
summary = "{{{{ job_name }}}} has failing checkpoints"
description = "{{{{ value }}}} failed checkpoints of {{{{ job_name }}}} on {{{{ cluster }}}}"
runbook_url = "https://example.invalid/runbook#flinkcheckpointfailuresseen"
"#,
        state = dir.join("state").display()
    );
    let path = dir.join("sentinel.toml");
    std::fs::write(&path, text).unwrap();
    Config::load(&path).unwrap()
}

async fn daemon_alerts(addr: SocketAddr, state: &str) -> f64 {
    let m = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    let labels = [("alertname", "FlinkCheckpointFailuresSeen"), ("severity", "warning"), ("state", state)];
    sample(&m, "checkpoint_sentinel_alerts", &labels).unwrap_or(0.0)
}

async fn send_errors(addr: SocketAddr) -> f64 {
    let m = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    m.lines()
        .filter(|l| l.starts_with("checkpoint_sentinel_alertmanager_errors_total{"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_checkpoint_alert_fires_in_alertmanager_and_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let port = port_for_another_program();
    let Some(mut am) = alertmanager(port, dir.path()) else { return };
    until("alertmanager ready", Duration::from_secs(20), || active(port, "none"), Option::is_some).await;

    // The expired scenario: checkpoints fail while the series plays; then Flink's counts stand
    // still and the 2 s increase drops to zero.
    let flink = replay("2.3.0", "expired").await;
    let daemon = checkpoint_sentinel::daemon::start(
        config(dir.path(), &flink.url, port, "increase(checkpoints.failed, 2s) > 0"),
        None,
    )
    .await
    .unwrap();
    until(
        "the alert in Alertmanager",
        Duration::from_secs(30),
        || active(port, "FlinkCheckpointFailuresSeen"),
        |a| a.as_ref().is_some_and(|a| !a.is_empty()),
    )
    .await;
    let alerts = active(port, "FlinkCheckpointFailuresSeen").await.unwrap();
    let alert = &alerts[0];
    assert_eq!(alert["labels"]["job_id"], flink.scenario().job_id.as_str());
    assert_eq!(alert["labels"]["class"], "failure");
    assert_eq!(alert["annotations"]["summary"], "flink-lab-expired has failing checkpoints");
    assert_eq!(alert["generatorURL"], "http://sentinel.example:9717/");

    flink.wait_for_polls(1).await;
    until(
        "the alert resolved in Alertmanager",
        Duration::from_secs(30),
        || active(port, "FlinkCheckpointFailuresSeen"),
        |a| a.as_ref().is_some_and(|a| a.is_empty()),
    )
    .await;
    daemon.shutdown().await;
    am.kill().unwrap();
    am.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_firing_during_an_alertmanager_outage_arrives_once_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let port = port_for_another_program();
    let flink = replay("2.3.0", "declined").await;
    // Alertmanager is down when the alert starts firing.
    let daemon = checkpoint_sentinel::daemon::start(
        config(dir.path(), &flink.url, port, "checkpoints.failed > 0"),
        None,
    )
    .await
    .unwrap();
    let addr = daemon.addr;
    until(
        "the alert firing in the daemon",
        Duration::from_secs(30),
        || daemon_alerts(addr, "firing"),
        |n| *n >= 1.0,
    )
    .await;
    // The daemon tried to send it while Alertmanager was down.
    until("a send failed during the outage", Duration::from_secs(30), || send_errors(addr), |n| *n >= 1.0)
        .await;
    let Some(mut am) = alertmanager(port, dir.path()) else { return };
    until(
        "the alert in Alertmanager after its outage",
        Duration::from_secs(30),
        || active(port, "FlinkCheckpointFailuresSeen"),
        |a| a.as_ref().is_some_and(|a| !a.is_empty()),
    )
    .await;
    daemon.shutdown().await;
    am.kill().unwrap();
    am.wait().unwrap();
}
