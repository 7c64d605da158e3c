//! Flink misbehaving — refusing, erroring, timing out, answering garbage — is an error metric
//! and a log line, never a dead poll loop; once it behaves again, the counts are right.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use checkpoint_sentinel::config::{ClusterConfig, Config};
use common::{replay, sample, scrape, scrape_until};

/// What the proxy does to `/checkpoints` answers.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    Status500,
    Truncated,
    Malformed,
    WrongType,
    Slow,
}

const FAULTS: [Fault; 6] =
    [Fault::None, Fault::Status500, Fault::Truncated, Fault::Malformed, Fault::WrongType, Fault::Slow];

struct Proxy {
    upstream: String,
    fault: AtomicUsize,
    http: reqwest::Client,
}

async fn forward(State(p): State<Arc<Proxy>>, request: Request) -> Response {
    let path = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
    let fault = FAULTS[p.fault.load(Ordering::SeqCst)];
    let is_checkpoints = path.ends_with("/checkpoints");
    if is_checkpoints && fault == Fault::Status500 {
        return (StatusCode::INTERNAL_SERVER_ERROR, r#"{"errors":["Internal server error."]}"#)
            .into_response();
    }
    if is_checkpoints && fault == Fault::Slow {
        // Part of the scenario: an answer slower than the cluster's timeout.
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // Only forward while the fault does not consume the request (a 500 must not advance the
    // replay series: a real JobManager that errors has not moved on either).
    if is_checkpoints && matches!(fault, Fault::Malformed | Fault::Truncated | Fault::WrongType) {
        let body = match fault {
            Fault::Malformed => "<html>502 Bad Gateway</html>".to_string(),
            Fault::Truncated => {
                r#"{"counts":{"restored":0,"total":8,"in_progress":0,"completed":7,"fai"#.to_string()
            }
            _ => r#"{"counts":{"completed":"seven","failed":1},"history":[]}"#.to_string(),
        };
        return ([("content-type", "application/json")], body).into_response();
    }
    match p.http.get(format!("{}{}", p.upstream, path)).send().await {
        Ok(r) => {
            let status = StatusCode::from_u16(r.status().as_u16()).unwrap();
            let body = r.bytes().await.unwrap_or_default();
            Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap()
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_counted_and_polling_goes_on() {
    let upstream = replay("1.20.5", "declined").await;
    let proxy = Arc::new(Proxy {
        upstream: upstream.url.clone(),
        fault: AtomicUsize::new(0),
        http: reqwest::Client::new(),
    });
    let app = Router::new().fallback(forward).with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let dir = tempfile::tempdir().unwrap();
    let mut config = common::watching(&proxy_url, Duration::from_millis(100), dir.path());
    config.clusters[0].timeout = Duration::from_secs(1);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let metrics = || scrape(daemon.addr);
    let errors = |m: &str, kind: &str| {
        sample(m, "checkpoint_sentinel_poll_errors_total", &[("cluster", "lab"), ("kind", kind)])
            .unwrap_or(0.0)
    };

    let rounds = |m: &str| sample(m, "checkpoint_sentinel_polls_total", &[("cluster", "lab")]).unwrap_or(0.0);
    let wait = Duration::from_secs(30);
    scrape_until(daemon.addr, "two healthy rounds", wait, |m| rounds(m) >= 2.0).await;
    for (i, fault, kind) in [
        (1, Fault::Status500, "http_status"),
        (2, Fault::Truncated, "decode"),
        (3, Fault::Malformed, "decode"),
        (4, Fault::WrongType, "decode"),
        (5, Fault::Slow, "timeout"),
    ] {
        let before = errors(&metrics().await, kind);
        proxy.fault.store(i, Ordering::SeqCst);
        let what = format!("{fault:?} counted as {kind}");
        let m = scrape_until(daemon.addr, &what, wait, |m| errors(m, kind) > before).await;
        proxy.fault.store(0, Ordering::SeqCst);
        // The JobManager itself answered /overview all along: the cluster stays up.
        assert_eq!(sample(&m, "checkpoint_sentinel_flink_up", &[("cluster", "lab")]), Some(1.0), "{fault:?}");
        // Two rounds after the fault, before the next one.
        let after = rounds(&metrics().await) + 2.0;
        scrape_until(daemon.addr, "two rounds after the fault", wait, |m| rounds(m) >= after).await;
    }

    // After the faults: the series plays to its end and the counts are Flink's.
    // One more round than the series and the two stale answers: the cluster's rounds follow
    // one another, so the request of the third means the second's answer was applied.
    upstream.wait_for_polls(3).await;
    let m = metrics().await;
    let s = upstream.scenario();
    let counts = s.last_counts();
    let job_name = "flink-lab-declined";
    for status in ["completed", "failed"] {
        let labels =
            [("cluster", "lab"), ("job_id", s.job_id.as_str()), ("job_name", job_name), ("status", status)];
        assert_eq!(
            sample(&m, "flink_checkpoints_total", &labels),
            Some(counts[status].as_u64().unwrap() as f64),
            "{status}"
        );
    }
    let labels = [("cluster", "lab"), ("job_id", s.job_id.as_str()), ("job_name", job_name)];
    assert_eq!(
        sample(&m, "flink_checkpoint_duration_seconds_count", &labels),
        Some(s.distinct_completed().len() as f64),
        "each completed checkpoint recorded once despite the faults"
    );
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_refuses_connections_is_down_and_backs_off() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut cluster = ClusterConfig::new("gone", &format!("http://127.0.0.1:{port}"));
    cluster.poll_interval = Duration::from_millis(100);
    let mut config = Config { clusters: vec![cluster], ..Config::default() };
    config.server.listen = "127.0.0.1:0".parse().unwrap();
    config.state.dir = dir.path().to_path_buf();
    let started = std::time::Instant::now();
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let polls = |m: &str| sample(m, "checkpoint_sentinel_polls_total", &[("cluster", "gone")]).unwrap_or(0.0);
    let m = scrape_until(daemon.addr, "four rounds", Duration::from_secs(30), |m| polls(m) >= 4.0).await;
    let took = started.elapsed();
    assert_eq!(sample(&m, "checkpoint_sentinel_flink_up", &[("cluster", "gone")]), Some(0.0));
    // Without back-off four rounds at 100 ms take 0.3 s; with doubling waits (0.2, 0.4, 0.8 s)
    // 1.4 s.
    assert!(took >= Duration::from_millis(1_200), "{} rounds in {took:?}", polls(&m));
    let readyz = reqwest::get(format!("http://{}/readyz", daemon.addr)).await.unwrap();
    assert_eq!(readyz.status(), 503);
    daemon.shutdown().await;
}
