//! Hostile and huge inputs (issue 15): a Flink that misbehaves on purpose, clients that never
//! finish a request or never read, an Alertmanager that hangs. One test per row of
//! docs/reliability.md, "Hostile input": the daemon keeps answering `/healthz` within 1 s, keeps
//! polling its other cluster, and its counters never go down nor past Flink's.
//!
//! `cargo test --test integration hostile::`

use crate::common::{self, sample, scrape};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the hostile JobManager does.
#[derive(Clone, Debug)]
enum Behaviour {
    /// One job per parallelism: two vertices joined by a hash edge.
    Parallelism(Vec<u64>),
    /// One job whose `/checkpoints` walks through these answers, one per poll (the last repeated).
    Counts(Vec<Step>),
    /// `/jobs/overview` answers this many bytes (valid JSON, padded with spaces).
    HugeBody(u64),
    /// This many running jobs.
    ManyJobs(usize),
    /// One job with this many finished checkpoints in its history.
    LongHistory(u64),
}

/// One `/checkpoints` answer.
#[derive(Clone, Debug)]
struct Step {
    completed: u64,
    /// Finished checkpoints in the history: (id, trigger time ms).
    ids: Vec<(u64, i64)>,
    /// `latest.restored.restore_timestamp`.
    restore: Option<i64>,
}

struct Hostile {
    behaviour: Mutex<Behaviour>,
    checkpoint_polls: AtomicUsize,
    detail_requests: AtomicUsize,
    body_bytes_sent: AtomicU64,
}

type S = State<Arc<Hostile>>;

fn job_id(i: usize) -> String {
    format!("{i:032x}")
}

fn jobs(h: &Hostile) -> usize {
    match &*h.behaviour.lock().unwrap() {
        Behaviour::Parallelism(ps) => ps.len(),
        Behaviour::ManyJobs(n) => *n,
        _ => 1,
    }
}

async fn start(behaviour: Behaviour) -> (String, Arc<Hostile>) {
    let state = Arc::new(Hostile {
        behaviour: Mutex::new(behaviour),
        checkpoint_polls: AtomicUsize::new(0),
        detail_requests: AtomicUsize::new(0),
        body_bytes_sent: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/overview", get(|| async { axum::Json(json!({"flink-version": "1.20.5"})) }))
        .route("/jobs/overview", get(jobs_overview))
        .route("/jobs/{job}", get(job))
        .route("/jobs/{job}/checkpoints", get(checkpoints))
        .route("/jobs/{job}/checkpoints/config", get(config))
        .route("/jobs/{job}/checkpoints/details/{cp}", get(details))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), state)
}

async fn jobs_overview(State(h): S) -> Response {
    let behaviour = h.behaviour.lock().unwrap().clone();
    if let Behaviour::HugeBody(size) = behaviour {
        // Streamed lazily, counted as the client pulls it.
        let chunk = vec![b' '; 64 * 1024];
        let head = b"{\"jobs\":[".to_vec();
        let chunks = (size / chunk.len() as u64) as usize;
        let h2 = h.clone();
        let stream = futures_util::stream::iter(
            std::iter::once(head)
                .chain(std::iter::repeat_n(chunk, chunks))
                .chain(std::iter::once(b"]}".to_vec())),
        )
        .map(move |c| {
            h2.body_bytes_sent.fetch_add(c.len() as u64, Ordering::SeqCst);
            Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(c))
        });
        return ([("content-type", "application/json")], axum::body::Body::from_stream(stream))
            .into_response();
    }
    let jobs: Vec<Value> = (0..jobs(&h))
        .map(|i| json!({"jid": job_id(i), "name": format!("hostile-{i}"), "state": "RUNNING"}))
        .collect();
    axum::Json(json!({ "jobs": jobs })).into_response()
}

use futures_util::StreamExt;

async fn job(State(h): S, UrlPath(job): UrlPath<String>) -> Response {
    let i = usize::from_str_radix(&job, 16).unwrap_or(0);
    let parallelism = match &*h.behaviour.lock().unwrap() {
        Behaviour::Parallelism(ps) => ps.get(i).copied().unwrap_or(1),
        _ => 1,
    };
    let (src, map) = ("a".repeat(32), "b".repeat(32));
    axum::Json(json!({
        "jid": job, "name": format!("hostile-{i}"), "state": "RUNNING",
        "vertices": [
            {"id": src, "name": "Source: hostile", "parallelism": parallelism},
            {"id": map, "name": "keyed-map", "parallelism": parallelism},
        ],
        "plan": {"jid": job, "name": "hostile", "nodes": [
            {"id": map, "parallelism": parallelism, "inputs": [{"num": 0, "id": src, "ship_strategy": "HASH"}]},
            {"id": src, "parallelism": parallelism},
        ]},
    }))
    .into_response()
}

async fn config() -> Response {
    axum::Json(json!({
        "mode": "exactly_once", "interval": 1000, "timeout": 60000, "min_pause": 0, "max_concurrent": 1,
        "unaligned_checkpoints": false, "tolerable_failed_checkpoints": 100, "aligned_checkpoint_timeout": 0,
        "state_backend": "HashMapStateBackend",
    }))
    .into_response()
}

async fn details(State(h): S) -> Response {
    h.detail_requests.fetch_add(1, Ordering::SeqCst);
    (StatusCode::NOT_FOUND, r#"{"errors":["Not found"]}"#).into_response()
}

fn entry(id: u64, at: i64) -> Value {
    json!({
        "className": "completed", "id": id, "status": "COMPLETED", "is_savepoint": false,
        "trigger_timestamp": at, "latest_ack_timestamp": at + 50, "checkpointed_size": 1, "state_size": 1,
        "end_to_end_duration": 50, "alignment_buffered": 0, "processed_data": 0, "persisted_data": 0,
        "num_subtasks": 1, "num_acknowledged_subtasks": 1, "checkpoint_type": "CHECKPOINT", "tasks": {},
    })
}

fn answer(completed: u64, ids: &[(u64, i64)], restore: Option<i64>) -> Value {
    let mut history: Vec<Value> = ids.iter().map(|&(id, at)| entry(id, at)).collect();
    history.reverse();
    let restored = restore.map(|at| json!({"id": null, "restore_timestamp": at, "is_savepoint": false}));
    json!({
        "counts": {"restored": 0, "total": completed, "in_progress": 0, "completed": completed, "failed": 0},
        "latest": {"completed": null, "savepoint": null, "failed": null, "restored": restored},
        "history": history,
    })
}

async fn checkpoints(State(h): S) -> Response {
    let poll = h.checkpoint_polls.fetch_add(1, Ordering::SeqCst);
    let behaviour = h.behaviour.lock().unwrap().clone();
    let body = match behaviour {
        Behaviour::Counts(steps) => {
            let step = &steps[poll.min(steps.len() - 1)];
            answer(step.completed, &step.ids, step.restore)
        }
        Behaviour::LongHistory(n) => {
            let ids: Vec<(u64, i64)> = (1..=n).map(|id| (id, 1_000_000 + id as i64 * 1_000)).collect();
            answer(n, &ids, None)
        }
        _ => answer(1, &[(1, 1_000_000)], None),
    };
    axum::Json(body).into_response()
}

/// A daemon watching the hostile JobManager (`hostile`) and a well-behaved replay (`calm`).
async fn daemon(
    hostile_url: &str,
    dir: &std::path::Path,
    edit: impl FnOnce(&mut checkpoint_sentinel::config::Config),
) -> (checkpoint_sentinel::daemon::Running, common::ReplayServer) {
    use checkpoint_sentinel::config::ClusterConfig;
    let calm = common::replay("1.20.5", "declined").await;
    let mut config = common::watching(&calm.url, Duration::from_millis(100), dir);
    config.clusters[0].name = "calm".into();
    let mut hostile = ClusterConfig::new("hostile", hostile_url);
    hostile.poll_interval = Duration::from_millis(100);
    hostile.timeout = Duration::from_secs(5);
    config.clusters.push(hostile);
    edit(&mut config);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    (daemon, calm)
}

/// Probes `/healthz` over a new connection every 100 ms until stopped; the slowest answer.
struct Prober {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<(Duration, usize, usize)>,
}

impl Prober {
    fn start(addr: SocketAddr) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
            let (mut worst, mut probes, mut slow) = (Duration::ZERO, 0, 0);
            // At least five probes, however soon the test is done with the daemon.
            while !flag.load(Ordering::SeqCst) || probes < 5 {
                let started = Instant::now();
                let answer = tokio::time::timeout(
                    Duration::from_secs(5),
                    client.get(format!("http://{addr}/healthz")).send(),
                )
                .await;
                let took = started.elapsed();
                assert!(
                    answer.is_ok_and(|r| r.is_ok_and(|r| r.status() == 200)),
                    "/healthz failed after {took:?}"
                );
                worst = worst.max(took);
                probes += 1;
                slow += usize::from(took >= Duration::from_secs(1));
                // Part of the scenario: a probe every 100 ms, as a kubelet would.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (worst, probes, slow)
        });
        Prober { stop, task }
    }

    /// Stops probing; asserts the answers came within 1 s. The whole suite shares two cores
    /// in CI, so one probe in ten may miss that by scheduling alone, but none takes 5 s: the
    /// freezes this guards against lasted 15–17 s, every 30 rounds.
    async fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        let (worst, probes, slow) = self.task.await.unwrap();
        assert!(probes >= 5, "only {probes} probes");
        assert!(worst < Duration::from_secs(5), "/healthz took {worst:?}");
        assert!(
            slow * 10 <= probes,
            "{slow} of {probes} /healthz answers took 1 s or more (worst {worst:?})"
        );
    }
}

fn polls(m: &str, cluster: &str) -> f64 {
    sample(m, "checkpoint_sentinel_polls_total", &[("cluster", cluster)]).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallelism_1000_and_4e9_are_not_modelled_and_nothing_freezes() {
    let (url, _h) = start(Behaviour::Parallelism(vec![1_000, 4_000_000_000, 3])).await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _calm) = daemon(&url, dir.path(), |_| {}).await;
    let prober = Prober::start(daemon.addr);
    let before = polls(&scrape(daemon.addr).await, "calm");
    let explanation = |i: usize| {
        let addr = daemon.addr;
        async move {
            let url = format!("http://{addr}/api/v1/jobs/hostile/{}", job_id(i));
            let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap_or(Value::Null);
            v["shadow"]["explanation"]["alignment"].as_str().map(str::to_string)
        }
    };
    let (big, huge) = common::until(
        "both explanations",
        Duration::from_secs(30),
        || async { (explanation(0).await, explanation(1).await) },
        |(big, huge)| big.is_some() && huge.is_some(),
    )
    .await;
    assert_eq!(
        big.as_deref(),
        Some(
            "alignment not modelled: parallelism 1000 exceeds the model's budget of 4096 channels (this job \
             graph has 1000000 channels between 2000 subtasks)"
        )
    );
    assert!(huge.as_deref().is_some_and(|a| a.contains("parallelism 32768 exceeds")), "{huge:?}");
    // The job at parallelism 3 is within the budget: no such sentence.
    assert!(!explanation(2).await.is_some_and(|a| a.contains("not modelled")));
    common::scrape_until(daemon.addr, "five more polls of the other cluster", Duration::from_secs(30), |m| {
        polls(m, "calm") >= before + 5.0
    })
    .await;
    prober.finish().await;
    daemon.shutdown().await;
}

/// The exported completed count of the hostile job, polled every 50 ms while `run` lasts;
/// asserts it never decreases and never exceeds `bound`; returns the last value.
async fn watch_counter(addr: SocketAddr, seconds: u64, bound: f64) -> f64 {
    let labels =
        [("cluster", "hostile"), ("job_id", &*job_id(0)), ("job_name", "hostile-0"), ("status", "completed")];
    let mut last = 0.0;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let m = scrape(addr).await;
        if let Some(v) = sample(&m, "flink_checkpoints_total", &labels) {
            assert!(v >= last, "the counter went down: {last} -> {v}");
            assert!(v <= bound, "{v} counted, Flink's count over its epochs is at most {bound}");
            last = v;
        }
        // Part of the scenario: the counter is watched for the whole period, every 50 ms.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_dips_and_ids_restarting_under_the_same_job_id_never_lie() {
    let t = 1_800_000_000_000i64;
    let run = |n: u64, from: i64| (1..=n).map(|id| (id, from + id as i64 * 1_000)).collect::<Vec<_>>();
    let mut steps = Vec::new();
    for n in 1..=10 {
        steps.push(Step { completed: n, ids: run(n, t), restore: None });
    }
    // Three dips by 5, with the stale history of that moment (issue 15: 1,255 counted while
    // Flink said 671).
    for _ in 0..3 {
        for _ in 0..2 {
            steps.push(Step { completed: 5, ids: run(5, t), restore: None });
        }
        steps.push(Step { completed: 12, ids: run(12, t), restore: None });
    }
    // Redeployed without state under the same job id: ids and counts start again at 1.
    let t2 = t + 3_600_000;
    for n in 1..=5 {
        steps.push(Step { completed: n, ids: run(n, t2), restore: None });
    }
    let polls = steps.len();
    let (url, h) = start(Behaviour::Counts(steps)).await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _calm) = daemon(&url, dir.path(), |_| {}).await;
    let prober = Prober::start(daemon.addr);
    let bound = 12.0 + 5.0;
    while h.checkpoint_polls.load(Ordering::SeqCst) < polls + 5 {
        watch_counter(daemon.addr, 1, bound).await;
    }
    let last = watch_counter(daemon.addr, 1, bound).await;
    assert_eq!(last, bound, "12 of the first run + 5 of the second");
    let url = format!("http://{}/api/v1/jobs/hostile/{}", daemon.addr, job_id(0));
    let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    let ids: Vec<u64> =
        v["checkpoints"].as_array().unwrap().iter().filter_map(|c| c["id"].as_u64()).collect();
    assert!(ids.contains(&5) && ids.contains(&1), "the new run's ids are recorded: {ids:?}");
    assert!(v["shadow"]["explanation"]["stall"].is_null(), "no false stall: {}", v["shadow"]["explanation"]);
    prober.finish().await;
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_near_u64_max_never_wrap_the_counter() {
    let top = u64::MAX;
    let steps = vec![
        Step { completed: 569, ids: vec![(569, 1_000_000)], restore: None },
        Step { completed: top - 1, ids: vec![(top - 1, 2_000_000)], restore: None },
        Step { completed: top, ids: vec![(top - 1, 2_000_000), (top, 3_000_000)], restore: None },
        Step { completed: 588, ids: vec![(588, 1_100_000)], restore: None },
    ];
    let (url, h) = start(Behaviour::Counts(steps)).await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _calm) = daemon(&url, dir.path(), |_| {}).await;
    while h.checkpoint_polls.load(Ordering::SeqCst) < 10 {
        watch_counter(daemon.addr, 1, top as f64).await;
    }
    assert_eq!(watch_counter(daemon.addr, 1, top as f64).await, top as f64);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gb_answer_is_cut_off_at_the_limit() {
    let (url, h) = start(Behaviour::HugeBody(1 << 30)).await;
    let dir = tempfile::tempdir().unwrap();
    let limit = 1u64 << 20;
    let (daemon, _calm) = daemon(&url, dir.path(), |c| c.clusters[1].max_response_bytes = limit).await;
    let prober = Prober::start(daemon.addr);
    let m = common::scrape_until(daemon.addr, "three answers cut", Duration::from_secs(20), |m| {
        sample(
            m,
            "checkpoint_sentinel_inputs_cut_total",
            &[("cluster", "hostile"), ("what", "response_bodies")],
        )
        .is_some_and(|n| n >= 3.0)
    })
    .await;
    let too_large =
        sample(&m, "checkpoint_sentinel_poll_errors_total", &[("cluster", "hostile"), ("kind", "too_large")]);
    assert!(too_large.is_some_and(|n| n >= 3.0), "{too_large:?}");
    // What was read stays near the limit: the rest of the gigabyte was never pulled (what the
    // server produced is bounded by the limit plus the socket buffers, per answer).
    let cut = sample(
        &m,
        "checkpoint_sentinel_inputs_cut_total",
        &[("cluster", "hostile"), ("what", "response_bodies")],
    )
    .unwrap();
    let sent = h.body_bytes_sent.load(Ordering::SeqCst);
    let per_answer = sent as f64 / (cut + 1.0);
    assert!(per_answer < 64.0 * 1024.0 * 1024.0, "{per_answer} bytes produced per answer for a 1 MiB limit");
    let calm_polls = polls(&scrape(daemon.addr).await, "calm") + 5.0;
    common::scrape_until(daemon.addr, "five more polls of the other cluster", Duration::from_secs(30), |m| {
        polls(m, "calm") >= calm_polls
    })
    .await;
    prober.finish().await;
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_thousand_jobs_are_cut_to_max_jobs() {
    let (url, _h) = start(Behaviour::ManyJobs(50_000)).await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _calm) = daemon(&url, dir.path(), |c| c.clusters[1].max_jobs = 20).await;
    let prober = Prober::start(daemon.addr);
    let m = common::scrape_until(daemon.addr, "the cut jobs counted", Duration::from_secs(30), |m| {
        sample(m, "checkpoint_sentinel_inputs_cut_total", &[("cluster", "hostile"), ("what", "jobs")])
            .is_some_and(|n| n >= 2.0 * 49_980.0)
    })
    .await;
    let watched = m
        .lines()
        .filter(|l| {
            l.starts_with("flink_checkpoints_total{")
                && l.contains("cluster=\"hostile\"")
                && l.contains("status=\"completed\"")
        })
        .count();
    assert_eq!(watched, 20, "only max_jobs jobs have series");
    prober.finish().await;
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_history_entries_cost_at_most_max_history_per_poll_requests_a_round() {
    let (url, h) = start(Behaviour::LongHistory(10_000)).await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, _calm) = daemon(&url, dir.path(), |_| {}).await;
    let prober = Prober::start(daemon.addr);
    // Each round parses the 10,000 entries (about 1 s in a debug build on busy cores): wait for
    // a few rounds rather than a fixed time.
    let started = Instant::now();
    let rounds = || async { h.checkpoint_polls.load(Ordering::SeqCst) };
    common::until("four rounds of the hostile cluster", Duration::from_secs(30), rounds, |n| *n >= 4).await;
    let polls_served = h.checkpoint_polls.load(Ordering::SeqCst);
    let details = h.detail_requests.load(Ordering::SeqCst);
    eprintln!("{polls_served} rounds in {:?}", started.elapsed());
    assert!(details <= 20 * polls_served, "{details} detail requests in {polls_served} rounds");
    let m = scrape(daemon.addr).await;
    let labels =
        [("cluster", "hostile"), ("job_id", &*job_id(0)), ("job_name", "hostile-0"), ("status", "completed")];
    assert_eq!(sample(&m, "flink_checkpoints_total", &labels), Some(10_000.0), "counted from Flink's counts");
    assert!(
        sample(
            &m,
            "checkpoint_sentinel_inputs_cut_total",
            &[("cluster", "hostile"), ("what", "history_entries")]
        )
        .is_some()
    );
    prober.finish().await;
    daemon.shutdown().await;
}

/// The daemon's routes over `app`, on a bounded listener with these limits.
async fn serve_bounded(
    app: Arc<checkpoint_sentinel::app::AppState>,
    max_connections: usize,
    timeouts: checkpoint_sentinel::outputs::listener::Timeouts,
) -> SocketAddr {
    use checkpoint_sentinel::outputs::http::{HttpState, router};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let bounded = checkpoint_sentinel::outputs::listener::Bounded::new(
        listener,
        app.listener.clone(),
        max_connections,
        timeouts,
    );
    tokio::spawn(async move { axum::serve(bounded, router(HttpState::new(app))).await.unwrap() });
    addr
}

/// A state with `jobs` copies of a captured job (4 operator chains with per-subtask phases).
fn busy_app(jobs: usize) -> Arc<checkpoint_sentinel::app::AppState> {
    use checkpoint_sentinel::observe::{JobKey, Observation};
    use checkpoint_sentinel::state::State;
    use checkpoint_sentinel::stats::WindowSpec;
    let scenario = common::Scenario::load("1.20.5", "backpressure");
    let polls = scenario.job_polls();
    let mut state = State::new(WindowSpec { window_ms: 3_600_000_000, slots: 6 });
    for i in 0..jobs {
        for poll in &polls {
            let mut poll = poll.clone();
            poll.key = JobKey { cluster: "lab".into(), job_id: job_id(i) };
            state.apply(&Observation::JobPolled(poll.clone()), poll.polled_at);
        }
    }
    Arc::new(checkpoint_sentinel::app::AppState::new(state))
}

fn short() -> checkpoint_sentinel::outputs::listener::Timeouts {
    checkpoint_sentinel::outputs::listener::Timeouts {
        header_read: Duration::from_secs(1),
        idle: Duration::from_secs(2),
    }
}

/// Opens a connection that sends a request's headers a line every 200 ms, forever; returns
/// how long until the daemon closed it.
async fn slowloris(addr: SocketAddr) -> Duration {
    let started = Instant::now();
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    if tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: sentinel\r\n").await.is_err() {
        return started.elapsed();
    }
    let mut buf = [0u8; 256];
    loop {
        tokio::select! {
            read = tcp.read(&mut buf) => if matches!(read, Ok(0) | Err(_)) { return started.elapsed() },
            // Part of the scenario: one more header line every 200 ms, never the end.
            () = tokio::time::sleep(Duration::from_millis(200)) => {
                if tcp.write_all(b"X-Slow: 1\r\n").await.is_err() {
                    return started.elapsed();
                }
            }
        }
        assert!(started.elapsed() < Duration::from_secs(30), "a slowloris connection was never closed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_connections_are_closed_after_the_header_timeout() {
    let app = busy_app(1);
    let addr = serve_bounded(app.clone(), 512, short()).await;
    let prober = Prober::start(addr);
    let attackers: Vec<_> = (0..300).map(|_| tokio::spawn(slowloris(addr))).collect();
    let mut longest = Duration::ZERO;
    for a in attackers {
        longest = longest.max(a.await.unwrap());
    }
    // Each was closed by the header timeout (1 s after its first byte here), counted as such:
    // the count, not the time it took on a loaded machine, is the check (`slowloris` gives up
    // after 30 s, the sanity bound).
    eprintln!("300 slowloris connections, the last closed after {longest:?}");
    assert!(app.listener.closed[0].load(Ordering::SeqCst) >= 300, "closed by the header timeout");
    prober.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_cap_holds_and_frees_up_after_the_timeouts() {
    let app = busy_app(1);
    let addr = serve_bounded(app.clone(), 8, short()).await;
    let attackers: Vec<_> = (0..8).map(|_| tokio::spawn(slowloris(addr))).collect();
    let connections = || async { app.listener.connections.load(Ordering::SeqCst) };
    common::until("8 slow connections", Duration::from_secs(10), connections, |n| *n == 8).await;
    let started = Instant::now();
    // 30 s: a sanity bound only (the slow ones are closed after the 1 s header timeout).
    let answer =
        tokio::time::timeout(Duration::from_secs(30), reqwest::get(format!("http://{addr}/healthz")))
            .await
            .expect("served once a slot is free")
            .unwrap();
    let waited = started.elapsed();
    assert_eq!(answer.status(), 200);
    // It waited for a slot: the cap held until the header timeout closed a slow one. (A lower
    // bound: a loaded machine only makes it longer.)
    assert!(waited >= Duration::from_millis(400), "served after {waited:?}, before a slot was free");
    assert!(app.listener.closed[0].load(Ordering::SeqCst) >= 1, "a slot freed by the header timeout");
    for a in attackers {
        a.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_read_metrics_do_not_hold_up_a_scrape() {
    let app = busy_app(400);
    let addr =
        serve_bounded(app.clone(), 512, checkpoint_sentinel::outputs::listener::Timeouts::default()).await;
    let size = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().bytes().await.unwrap().len();
    // Five clients ask and never read.
    let mut stalled = Vec::new();
    for _ in 0..5 {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: sentinel\r\n\r\n").await.unwrap();
        stalled.push(tcp);
    }
    let connections = || async { app.listener.connections.load(Ordering::SeqCst) };
    common::until("5 stalled connections", Duration::from_secs(10), connections, |n| *n >= 5).await;
    let prober = Prober::start(addr);
    let started = Instant::now();
    let body = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().bytes().await.unwrap();
    let took = started.elapsed();
    eprintln!("a {size}-byte scrape with 5 stalled clients: {took:?}");
    assert!(body.len() > size / 2 && body.ends_with(b"\n"));
    // A generous bound, for a debug build on a loaded machine: a scrape that waited for the
    // stalled clients took 10 s per stalled chunk each (49.7 s before issue 15).
    assert!(
        took < Duration::from_secs(25),
        "the scrape waited {took:?} (before: 10 s per stalled chunk each)"
    );
    // Part of the scenario: the probes go on a second more beside the stalled clients.
    tokio::time::sleep(Duration::from_secs(1)).await;
    prober.finish().await;
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_scrapes_all_answer() {
    let app = busy_app(10);
    let addr =
        serve_bounded(app.clone(), 512, checkpoint_sentinel::outputs::listener::Timeouts::default()).await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    // Each scrape costs a descriptor on each side: under a soft limit of 1,024 fewer at once.
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let soft = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1_024);
    let n = 1_000.min(soft.saturating_sub(256) / 2);
    let jobs: Vec<String> = (0..10).map(job_id).collect();
    let jobs = Arc::new(jobs);
    let resets = Arc::new(AtomicUsize::new(0));
    let scrapes: Vec<_> = (0..n)
        .map(|_| {
            let (client, jobs, resets) = (client.clone(), jobs.clone(), resets.clone());
            tokio::spawn(async move {
                let body = scrape_retrying_resets(&client, addr, &resets).await;
                if let Err(wrong) = complete_exposition(&body, &jobs) {
                    panic!("{wrong}: {} bytes", body.len());
                }
            })
        })
        .collect();
    for s in scrapes {
        s.await.unwrap();
    }
    // Connections beyond the cap wait in the kernel's accept queue (listener.rs); only those
    // can be reset, when that queue overflows. The latency budget of these scrapes (issue 15:
    // P50 9.9 s before the shared render) is benches/run.sh's `scrapes` row, not this test's.
    let resets = resets.load(Ordering::SeqCst);
    eprintln!("{n} concurrent scrapes all answered, {resets} retried after a reset");
    assert!(resets <= n.saturating_sub(512), "{resets} resets with {n} scrapes and 512 connection slots");
}

/// Connection attempts per scrape: a reset before any answer is retried this many times less one.
const SCRAPE_ATTEMPTS: usize = 4;

/// `/metrics` at `addr`. A connection reset by the peer before any answer is retried (at most
/// [`SCRAPE_ATTEMPTS`] in all) and counted in `resets`: the listener leaves connections beyond its
/// cap in the kernel's accept queue, which on a loaded machine may overflow and reset one
/// (seen once in a full `cargo test` run). Any other failure fails the scrape.
async fn scrape_retrying_resets(client: &reqwest::Client, addr: SocketAddr, resets: &AtomicUsize) -> String {
    for attempt in 1.. {
        let answer = match client.get(format!("http://{addr}/metrics")).send().await {
            Err(e) if attempt < SCRAPE_ATTEMPTS && was_reset(&e) => {
                resets.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            sent => sent.unwrap(),
        };
        assert_eq!(answer.status(), 200);
        return answer.text().await.unwrap();
    }
    unreachable!("the last attempt returns or panics")
}

/// Whether an error is a connection the kernel refused before any answer, anywhere in its chain
/// of causes: reset by the peer, or a connect that timed out (an overflowing accept queue drops
/// the SYN instead of resetting it; on a machine loaded by other builds the kernel's retries ran
/// out once, after two minutes, in a full `cargo test`).
fn was_reset(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(io.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::TimedOut)
        }) {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Whether `body` is a whole exposition: every line a comment or a series with a number, the
/// last one ended, and every job's checkpoint counters in it.
fn complete_exposition(body: &str, jobs: &[String]) -> Result<(), String> {
    if !body.ends_with('\n') {
        return Err("the last line is cut".into());
    }
    for line in body.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let value = line.rsplit_once(' ').map(|(_, v)| v).unwrap_or("");
        if !matches!(value, "+Inf" | "-Inf" | "NaN") && value.parse::<f64>().is_err() {
            return Err(format!("not a series: {line:?}"));
        }
    }
    for job in jobs {
        let counted = body
            .lines()
            .any(|l| l.starts_with("flink_checkpoints_total{") && l.contains(&format!("job_id=\"{job}\"")));
        if !counted {
            return Err(format!("no flink_checkpoints_total of job {job}"));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_alertmanager_does_not_delay_the_other() {
    // The first Alertmanager accepts the post and never answers; the second records posts.
    let hang = Router::new().route(
        "/api/v2/alerts",
        post(|| async {
            // Part of the scenario: this Alertmanager never answers.
            tokio::time::sleep(Duration::from_secs(600)).await;
            StatusCode::OK
        }),
    );
    let received = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let record = received.clone();
    let ok = Router::new().route(
        "/api/v2/alerts",
        post(move || {
            let record = record.clone();
            async move {
                record.lock().unwrap().push(Instant::now());
                StatusCode::OK
            }
        }),
    );
    let mut ams = Vec::new();
    for app in [hang, ok] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        ams.push(format!("http://{}", listener.local_addr().unwrap()));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    let flink = common::replay("2.3.0", "expired").await;
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
[[clusters]]
name = "lab"
url = "{}"
poll_interval = "200ms"
[state]
dir = "{}"
[alerting]
alertmanagers = ["{}", "{}"]
evaluation_interval = "200ms"
resend_interval = "1s"
timeout = "20s"
default_rules = false
[[rules]]
name = "FlinkCheckpointFailuresSeen"
expr = "checkpoints.failed > 0"
for = "0s"
severity = "warning"
class = "failure"
summary = "failing checkpoints"
description = "failing checkpoints"
runbook_url = "https://example.invalid/runbook"
"#,
        flink.url,
        dir.path().join("state").display(),
        ams[0],
        ams[1]
    );
    let path = dir.path().join("sentinel.toml");
    std::fs::write(&path, text).unwrap();
    let config = checkpoint_sentinel::config::Config::load(&path).unwrap();
    let started = Instant::now();
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let posts = || async { received.lock().unwrap().len() };
    common::until("4 posts to the healthy Alertmanager", Duration::from_secs(15), posts, |n| *n >= 4).await;
    let times = received.lock().unwrap().clone();
    let first = times[0] - started;
    eprintln!(
        "first post to the healthy Alertmanager after {first:?}; resends every ~{:?}",
        times[1] - times[0]
    );
    // It fires once the replay shows a failed checkpoint (a few polls) and is re-sent every
    // second, while the other post hangs for its 20 s timeout. The bounds are generous (a
    // loaded machine), below what waiting for the hanging post would take: 20 s for the first,
    // 60 s for three resends.
    assert!(first < Duration::from_secs(15), "{first:?}");
    assert!(times[3] - times[0] < Duration::from_secs(15), "resends held up: {times:?}");
    daemon.shutdown().await;
}

fn tail_options(
    dir: &std::path::Path,
    glob: &str,
    max_files: usize,
) -> checkpoint_sentinel::sources::logs::tail::TailOptions {
    checkpoint_sentinel::sources::logs::tail::TailOptions {
        id: "t".into(),
        cluster: "c".into(),
        paths: vec![dir.join(glob).display().to_string()],
        start_at: checkpoint_sentinel::config::StartAt::Beginning,
        max_line_bytes: 4096,
        flush_after: Duration::from_millis(30),
        drop_after: Duration::from_millis(150),
        read_budget: 8 << 20,
        max_files,
    }
}

#[test]
fn a_symlink_loop_under_a_double_star_glob_is_not_followed() {
    use checkpoint_sentinel::sources::logs::{parse::Patterns, tail::TailCore};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
    std::fs::write(dir.path().join("a/b/jobmanager.log"), "a line\n").unwrap();
    // a/b/loop-N -> a: every path a/b/loop-1/b/loop-3/… exists, 3^k of them k loops deep
    // (glob::glob followed them until the 40-symlink limit: effectively forever).
    for n in 1..=3 {
        std::os::unix::fs::symlink(dir.path().join("a"), dir.path().join(format!("a/b/loop-{n}"))).unwrap();
    }
    let options = tail_options(dir.path(), "**/*.log", 256);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut core = TailCore::new(options, Patterns::builtin(), None);
        core.cycle(std::time::Instant::now(), checkpoint_sentinel::time::Timestamp::now());
        let _ = tx.send(core.report().files);
    });
    let files = rx.recv_timeout(Duration::from_secs(10)).expect("a cycle over the loop never ended");
    assert_eq!(files, 1, "the file once, not once per loop");
}

#[test]
fn files_past_max_files_are_left_out_and_counted_once() {
    use checkpoint_sentinel::sources::logs::{parse::Patterns, tail::TailCore};
    let dir = tempfile::tempdir().unwrap();
    for i in 0..300 {
        std::fs::write(dir.path().join(format!("tm-{i:03}.log")), format!("a line of TaskManager {i}\n"))
            .unwrap();
    }
    let mut core = TailCore::new(tail_options(dir.path(), "*.log", 50), Patterns::builtin(), None);
    core.cycle(std::time::Instant::now(), checkpoint_sentinel::time::Timestamp::now());
    assert_eq!(core.report().files, 50, "at most max_files open");
    assert_eq!(core.take_files_cut(), 250);
    core.cycle(std::time::Instant::now(), checkpoint_sentinel::time::Timestamp::now());
    assert_eq!(core.take_files_cut(), 0, "each left-out file is counted once");
    assert_eq!(core.report().files, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_on_the_same_state_directory_refuses_to_start() {
    let calm = common::replay("1.20.5", "declined").await;
    let dir = tempfile::tempdir().unwrap();
    let config = common::watching(&calm.url, Duration::from_millis(100), dir.path());
    let first = checkpoint_sentinel::daemon::start(config.clone(), None).await.unwrap();
    let second = checkpoint_sentinel::daemon::start(config.clone(), None).await;
    let err = second.err().expect("the second daemon started").to_string();
    assert!(err.contains("another checkpoint-sentinel is using this directory"), "{err}");
    first.shutdown().await;
    // Once the first is gone, the directory is free again.
    let third = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    third.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_no_clusters_is_refused_and_the_counts_stay() {
    let calm = common::replay("1.20.5", "declined").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentinel.toml");
    let with_cluster = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[state]\ndir = \"{}\"\n[[clusters]]\nname = \"lab\"\nurl = \"{}\"\npoll_interval = \"100ms\"\n",
        dir.path().join("state").display(),
        calm.url
    );
    std::fs::write(&path, &with_cluster).unwrap();
    let config = checkpoint_sentinel::config::Config::load(&path).unwrap();
    let daemon = checkpoint_sentinel::daemon::start(config, Some(path.clone())).await.unwrap();
    calm.wait_for_polls(0).await;
    let count = |m: &str| {
        m.lines()
            .filter(|l| l.starts_with("flink_checkpoints_total{") && l.contains("cluster=\"lab\""))
            .count()
    };
    let before = count(&scrape(daemon.addr).await);
    assert!(before > 0);
    // A mistake: the file loses its clusters for a few seconds.
    let without = with_cluster.split("[[clusters]]").next().unwrap().to_string();
    std::fs::write(&path, without).unwrap();
    // Part of the scenario, not a wait for something: the file stays without clusters a while,
    // and the series are kept all along (nothing marks that the daemon looked and kept them).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(count(&scrape(daemon.addr).await), before, "the clusters' series were kept");
    std::fs::write(&path, &with_cluster).unwrap();
    // The same, with the clusters back.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(count(&scrape(daemon.addr).await), before);
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_reset_mid_body_is_a_transport_error_not_decode() {
    // Every answer promises 100,000 bytes, sends 20 and closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else { return };
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = tcp.read(&mut buf).await;
                let _ = tcp
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{\"flink-version\": \"")
                    .await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::watching(&url, Duration::from_millis(100), dir.path());
    config.clusters[0].timeout = Duration::from_secs(2);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let m = common::scrape_until(daemon.addr, "a transport error", Duration::from_secs(10), |m| {
        sample(m, "checkpoint_sentinel_poll_errors_total", &[("cluster", "lab"), ("kind", "transport")])
            .is_some_and(|n| n >= 1.0)
    })
    .await;
    assert_eq!(
        sample(&m, "checkpoint_sentinel_poll_errors_total", &[("cluster", "lab"), ("kind", "decode")]),
        Some(0.0)
    );
    daemon.shutdown().await;
}

/// Peak resident memory of a process, bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_daemon_stays_under_200_mb_against_a_1_gb_body_and_parallelism_3000() {
    let (huge, body) = start(Behaviour::HugeBody(1 << 30)).await;
    let (wide, _) = start(Behaviour::Parallelism(vec![3_000, 1_000])).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sentinel.toml");
    std::fs::write(
        &config,
        format!(
            "[state]\ndir = \"{}\"\n[[clusters]]\nname = \"huge\"\nurl = \"{huge}\"\npoll_interval = \"200ms\"\n\
             [[clusters]]\nname = \"wide\"\nurl = \"{wide}\"\npoll_interval = \"200ms\"\n",
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let daemon = common::spawn_daemon(&config);
    let addr = daemon.addr();
    let prober = Prober::start(addr);
    // Both at once: which cluster gets ahead depends on the machine's load.
    let m = common::scrape_until(
        addr,
        "three 1 GB answers cut and the wide cluster polled",
        Duration::from_secs(30),
        |m| {
            sample(
                m,
                "checkpoint_sentinel_inputs_cut_total",
                &[("cluster", "huge"), ("what", "response_bodies")],
            )
            .is_some_and(|n| n >= 3.0)
                && polls(m, "wide") >= 3.0
        },
    )
    .await;
    assert!(polls(&m, "wide") >= 3.0, "the wide cluster is polled");
    let url = format!("http://{addr}/api/v1/jobs/wide/{}", job_id(0));
    let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert!(
        v["shadow"]["explanation"]["alignment"]
            .as_str()
            .is_some_and(|a| a.contains("parallelism 3000 exceeds"))
    );
    prober.finish().await;
    let peak = peak_rss(daemon.id());
    eprintln!(
        "peak RSS {:.1} MB after {} MB of answers were produced",
        peak as f64 / 1e6,
        body.body_bytes_sent.load(Ordering::SeqCst) / 1_000_000
    );
    // The chart's memory limit is 256 Mi (before: 2.27 GB for the body, 1.1 GB for the graph).
    assert!(peak < 200_000_000, "peak RSS {peak} bytes");
}
