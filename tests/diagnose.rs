//! `checkpoint-sentinel diagnose` on the real captures: a local server answers like the captured
//! JobManager did at the end of the scenario (final `/checkpoints`, config, details, vertices,
//! backpressure), and the binary's report and exit code are checked for the expired and
//! backpressure scenarios. `cargo test --test integration diagnose:: -- --nocapture` prints the reports.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

struct Snapshot {
    dir: PathBuf,
    job_id: String,
}

type S = State<Arc<Snapshot>>;

fn file(path: PathBuf) -> Response {
    match std::fs::read_to_string(&path) {
        Ok(body) => ([("content-type", "application/json")], body).into_response(),
        Err(_) => (axum::http::StatusCode::NOT_FOUND, r#"{"errors":["Not found"]}"#).into_response(),
    }
}

/// Serves the end-of-scenario snapshot of `flink-<version>/<name>`; returns its URL and job id.
pub(crate) async fn serve(version: &str, name: &str) -> (String, String) {
    serve_behind(version, name, None).await
}

/// The same, answering 401 to any request without `Authorization: Bearer <token>` when a
/// token is given (a JobManager behind an authenticating proxy).
async fn serve_behind(version: &str, name: &str, token: Option<&str>) -> (String, String) {
    let (url, job, _) = serve_counted(version, name, token).await;
    (url, job)
}

/// Requests the server answered, by path and query.
type Requests = Arc<std::sync::Mutex<std::collections::BTreeMap<String, u32>>>;

/// [`serve_behind`], with the requests it answers counted by path.
async fn serve_counted(version: &str, name: &str, token: Option<&str>) -> (String, String, Requests) {
    let dir = common::fixtures().join(format!("flink-{version}")).join(name).join("rest");
    let meta = common::read_json(&dir.join("../scenario.json"));
    let job_id = meta["job_id"].as_str().unwrap().to_string();
    let state = Arc::new(Snapshot { dir, job_id: job_id.clone() });
    let app = Router::new()
        .route("/overview", get(|State(s): S| async move { file(s.dir.join("overview.json")) }))
        .route(
            "/jobs/overview",
            get(|State(s): S| async move {
                let mut all: Value = common::read_json(&s.dir.join("jobs-overview.json"));
                let jobs = all["jobs"].as_array_mut().unwrap();
                jobs.retain(|j| j["jid"] == s.job_id.as_str());
                for j in jobs.iter_mut() {
                    j["state"] = Value::from("RUNNING");
                }
                axum::Json(all)
            }),
        )
        .route("/jobs/{job}", get(|State(s): S| async move { file(s.dir.join("job.json")) }))
        .route(
            "/jobs/{job}/checkpoints",
            get(|State(s): S| async move { file(s.dir.join("checkpoints.json")) }),
        )
        .route(
            "/jobs/{job}/checkpoints/config",
            get(|State(s): S| async move { file(s.dir.join("checkpoints-config.json")) }),
        )
        .route(
            "/jobs/{job}/checkpoints/details/{cp}",
            get(|State(s): S, UrlPath((_j, cp)): UrlPath<(String, u64)>| async move {
                file(s.dir.join(format!("checkpoint-details/checkpoint-{cp}.json")))
            }),
        )
        .route(
            "/jobs/{job}/checkpoints/details/{cp}/subtasks/{v}",
            get(|State(s): S, UrlPath((_j, cp, v)): UrlPath<(String, u64, String)>| async move {
                file(s.dir.join(format!("checkpoint-details/checkpoint-{cp}-subtasks-{v}.json")))
            }),
        )
        .route(
            "/jobs/{job}/vertices/{v}",
            get(|State(s): S, UrlPath((_j, v)): UrlPath<(String, String)>| async move {
                file(s.dir.join(format!("vertices/{v}.json")))
            }),
        )
        .route(
            "/jobs/{job}/vertices/{v}/backpressure",
            get(|State(s): S, UrlPath((_j, v)): UrlPath<(String, String)>| async move {
                file(s.dir.join(format!("vertices/{v}-backpressure.json")))
            }),
        )
        .route(
            "/jobs/{job}/metrics",
            get(|State(s): S, axum::extract::RawQuery(query): axum::extract::RawQuery| async move {
                let name = if query.is_some() { "job-metrics-values.json" } else { "job-metrics-list.json" };
                file(s.dir.join(name))
            }),
        )
        .route(
            "/jobs/{job}/vertices/{v}/metrics",
            get(|State(s): S, UrlPath((_j, v)): UrlPath<(String, String)>| async move {
                file(s.dir.join(format!("vertices/{v}-metrics-values.json")))
            }),
        )
        .with_state(state);
    let requests = Requests::default();
    let counted = requests.clone();
    let app = app.layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            *counted.lock().unwrap().entry(request.uri().to_string()).or_default() += 1;
            next.run(request)
        },
    ));
    let app = match token {
        None => app,
        Some(token) => {
            let expected = format!("Bearer {token}");
            app.layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let authorized =
                        request.headers().get("authorization").is_some_and(|v| v == expected.as_str());
                    async move {
                        if authorized {
                            next.run(request).await
                        } else {
                            axum::http::StatusCode::UNAUTHORIZED.into_response()
                        }
                    }
                },
            ))
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), job_id, requests)
}

/// Runs the binary; returns (exit code, stdout).
async fn diagnose(args: Vec<String>) -> (i32, String) {
    let (code, stdout, _) = diagnose_full(args).await;
    (code, stdout)
}

/// Runs the binary; returns (exit code, stdout, stderr).
async fn diagnose_full(args: Vec<String>) -> (i32, String, String) {
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
            .arg("diagnose")
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stdout}{stderr}");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn has(text: &str, needle: &str) {
    assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_is_unhealthy_timeout_class_held_by_the_sleeping_snapshot() {
    let (url, job) = serve("2.3.0", "expired").await;
    let (code, text) = diagnose(vec!["--url".into(), url.clone()]).await;
    assert_eq!(code, 1, "unhealthy");
    has(&text, "Job flink-lab-expired (fa0ff468ea40a97b00d7fc8a3075d65b) RUNNING: UNHEALTHY");
    // The daemon's answer and the health's reasons (one look: the failures Flink lists after the
    // baseline are seen, the checkpoint in progress at 3.6 s of 4.0 s is about to expire).
    has(&text, "WARNING flink-lab-expired: 3 of the last 9 checkpoints expired (timeout 4.0 s)");
    has(&text, "FlinkCheckpointAboutToExpire fires; FlinkCheckpointFailed fires");
    // The three expiries read the same, so they are said once.
    has(&text, "27, 24, 21 EXPIRED after 4.0 s: Checkpoint expired before completing.");
    // The late acknowledgement of the subtask whose snapshot slept 6 s; its TaskManager, the
    // only one, is named once.
    has(&text, "Every subtask runs on TaskManager 127.0.0.1:18125-6451c0 (localhost:18126).");
    has(
        &text,
        "5 of 6 subtasks acknowledged in time; stateful-map #0 acknowledged 6.0 s after the trigger, 2.0 s too late; its sync took 6.0 s",
    );
    // Only the culprits: no "2 ms (siblings' median 2 ms)" alignment rows.
    has(&text, "Top alignment: no subtask stands out");
    // The answer (the cluster's line and the job's headline, wrapped to 100 columns, up to the
    // first empty line), then a screen of details.
    let answer = text.lines().take_while(|l| !l.is_empty()).count();
    // (9: the daemon's next step names the subtask's TaskManager and takes three lines.)
    assert!(answer <= 9, "the answer is a few lines:\n{text}");
    assert!(
        text.lines().count() - answer <= 50,
        "an expired report fits on one screen under its answer:\n{text}"
    );
    has(&text, "Failure class: timeout");
    has(&text, "the synchronous part of the snapshot is slow");
    has(&text, "Spacing (shadow model):");
    has(&text, "timeout");
    has(&text, "Next, check:");

    let (code, json) =
        diagnose(vec!["--url".into(), url, "--job".into(), job, "--format".into(), "json".into()]).await;
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["jobs"][0]["verdict"], "unhealthy");
    assert_eq!(v["jobs"][0]["classes"][0]["class"], "timeout");
    assert_eq!(v["jobs"][0]["failures"].as_array().unwrap().len(), 3);
}

/// The verdict is the daemon's after one look, and the look asks each path once: its poller
/// round and the report's own fetch share the answers. Without the log, the expiries Flink lists
/// after the baseline are seen (`FlinkCheckpointFailed`) though the latest checkpoint completed,
/// and the answer calls them a timeout, not a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_look_judges_as_the_daemon_and_asks_each_path_once() {
    let (url, _, requests) = serve_counted("1.20.5", "expired", None).await;
    let (code, json) = diagnose(vec!["--url".into(), url, "--format".into(), "json".into()]).await;
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&json).unwrap();
    let job = &v["jobs"][0];
    assert_eq!(job["verdict"], "unhealthy");
    let reasons: Vec<&str> =
        job["verdict_reasons"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(reasons[0], "FlinkCheckpointFailed fires", "{reasons:?}");
    assert!(
        !reasons.iter().any(|r| r.starts_with("the latest")),
        "the latest checkpoint completed: {reasons:?}"
    );
    assert_eq!(job["headline"]["class"], "timeout");
    assert_eq!(job["headline"]["what"], "3 of the last 9 checkpoints expired (timeout 4.0 s)");
    let requests = requests.lock().unwrap();
    let twice: Vec<(&String, &u32)> = requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "asked more than once: {twice:?}");
    // The round's details of the newest checkpoints are the report's: 10 finished checkpoints
    // and the one in progress, 3 vertices each, and a handful of other paths (the job's own
    // configuration, its status metrics' list and values among them).
    let total: u32 = requests.values().sum();
    assert!(total <= 53, "{total} requests: {requests:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_is_at_risk_blocking_class_names_the_hot_subtask() {
    let (url, _) = serve("2.3.0", "backpressure").await;
    let (code, text) = diagnose(vec!["--url".into(), url]).await;
    assert_eq!(code, 3, "at risk");
    has(&text, "Job flink-lab-backpressure (1fcc7ceab6f610b2a49aeb835024514f) RUNNING: AT RISK");
    has(&text, "is over half the 5.0 s interval");
    has(&text, "Top alignment:\n  stateful-map #1: 3.");
    // stateful-map #0's 32 ms against its sibling's 3.1 s is not a culprit.
    assert!(!text.contains("stateful-map #0: 32 ms"), "{text}");
    has(&text, "Every subtask runs on TaskManager 127.0.0.1:18125-6451c0 (localhost:18126).");
    has(&text, "Source: fast-source -> fast-throttle is backpressured");
    has(&text, "stateful-map #1 is busy 100 % of the time");
    has(&text, "Failure class: blocking");
    has(&text, "data skew");
    has(&text, "backpressure: barriers queue behind buffered records");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_passes_and_older_versions_name_the_host() {
    let (url, _) = serve("2.3.0", "healthy").await;
    let (code, text) = diagnose(vec!["--url".into(), url]).await;
    assert_eq!(code, 0, "healthy");
    has(&text, ": HEALTHY");
    has(&text, "Failure class: none");
    let (url, _) = serve("1.14.6", "expired").await;
    let (code, text) = diagnose(vec!["--url".into(), url]).await;
    assert_eq!(code, 1);
    has(&text, "(localhost)");
    let (url, _) = serve("1.20.5", "declined").await;
    let (code, text) = diagnose(vec!["--url".into(), url]).await;
    assert_eq!(code, 1);
    has(&text, "Failure class: failure");
    has(&text, "writing the state to checkpoint storage failed");
    let (code, _) =
        diagnose(vec!["--url".into(), "http://127.0.0.1:9".into(), "--timeout".into(), "2s".into()]).await;
    assert_eq!(code, 2, "cannot connect");
    let (code, _, err) = diagnose_full(vec!["--url".into(), "not-a-url".into()]).await;
    assert_eq!(code, 2);
    has(
        &err,
        "--url \"not-a-url\" is not the JobManager's REST address: expected an http:// or https:// URL",
    );
}

/// A JobManager behind authentication: `--config` takes the cluster's URL and credentials from
/// the daemon's configuration file; a wrong choice of cluster is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_file_supplies_the_url_and_the_credentials() {
    let (url, job_id) = serve_behind("2.3.0", "expired", Some("s3cret")).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let config = dir.path().join("sentinel.toml");
    std::fs::write(
        &config,
        format!(
            "[[clusters]]\nname = \"other\"\nurl = \"http://127.0.0.1:9\"\n\n\
             [[clusters]]\nname = \"secured\"\nurl = \"{url}\"\nbearer_token = {{ file = \"{}\" }}\n\n\
             [[clusters]]\nname = \"no-token\"\nurl = \"{url}\"\n",
            token.display()
        ),
    )
    .unwrap();
    let args = |extra: &[&str]| {
        let mut a =
            vec!["--config".to_string(), config.display().to_string(), "--job".into(), job_id.clone()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };

    let (code, out, _) = diagnose_full(args(&["--cluster", "secured"])).await;
    assert_eq!(code, 1, "the expired job is unhealthy");
    has(&out, &format!("checkpoint-sentinel diagnose: {url} (Flink 2.3.0)"));
    has(&out, "Failure class: timeout");

    let (code, _, err) = diagnose_full(args(&["--cluster", "no-token"])).await;
    assert_eq!(code, 2, "refused without the token: {err}");
    has(&err, "401");

    let (code, _, err) = diagnose_full(args(&[])).await;
    assert_eq!(code, 2);
    has(&err, "choose one of its clusters with --cluster (clusters: other, secured, no-token)");

    let (code, _, err) = diagnose_full(args(&["--cluster", "nope"])).await;
    assert_eq!(code, 2);
    has(&err, "no cluster named \"nope\"");
}
