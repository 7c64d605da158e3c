//! The probe port (`[server] probe_listen`): /healthz and /readyz answered while the main port
//! is at its cap of connections (issue 30: 2 of 12 probes timed out at 10 s while 10,000
//! clients connected, and a kubelet would have restarted a healthy daemon).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use crate::common;

use checkpoint_sentinel::config::DEFAULT_MAX_CONNECTIONS;

/// The main port's cap in the flood test: smaller than the default's 512, so that the flood's
/// ends and the daemon's, all in this one process, stay far below any limit of open files.
const FLOOD_CAP: usize = 64;

/// The real daemon watching a replay, with a probe port and `max_connections` on its main port.
async fn daemon_with_probe_port(
    dir: &std::path::Path,
    max_connections: usize,
) -> (common::ReplayServer, checkpoint_sentinel::daemon::Running) {
    let server = common::replay("1.20.5", "backpressure").await;
    let mut config = common::watching(&server.url, Duration::from_millis(200), dir);
    config.server.probe_listen = Some("127.0.0.1:0".parse().unwrap());
    config.server.max_connections = max_connections;
    let running = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    (server, running)
}

/// A client that opens a connection to `addr`, sends nothing and waits until the daemon closes
/// it, then opens the next, until `stop`: a flood that keeps the port at its cap.
async fn idle_client(addr: SocketAddr, stop: Arc<AtomicBool>) {
    let mut buf = [0u8; 64];
    while !stop.load(Ordering::Relaxed) {
        let Ok(Ok(mut tcp)) =
            tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr)).await
        else {
            continue;
        };
        // Until the daemon closes it (its header timeout) or the flood stops.
        while !stop.load(Ordering::Relaxed) {
            let read = tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut buf)).await;
            if let Ok(Ok(0) | Err(_)) = read {
                break;
            }
        }
    }
}

/// A GET of `path` at `addr` on a fresh connection: its status and how long it took, or
/// `None` when it was not answered within `timeout`.
async fn probe(addr: SocketAddr, path: &str, timeout: Duration) -> Option<(u16, Duration)> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let started = Instant::now();
    let answer = tokio::time::timeout(timeout, client.get(format!("http://{addr}{path}")).send()).await;
    answer.ok()?.ok().map(|r| (r.status().as_u16(), started.elapsed()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_port_answers_while_the_main_port_is_full_of_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, daemon) = daemon_with_probe_port(dir.path(), FLOOD_CAP).await;
    let probe_addr = daemon.probe_addr.expect("a probe port");
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let flood: Vec<_> =
        (0..FLOOD_CAP + 64).map(|_| tokio::spawn(idle_client(daemon.addr, stop.clone()))).collect();
    let connections = || async { daemon.app.listener.connections.load(Ordering::SeqCst) };
    let full = |n: &i64| *n == FLOOD_CAP as i64;
    common::until("the main port at its cap", Duration::from_secs(20), connections, full).await;

    // The main port is full: a probe there waits in the accept queue (this is what the probe
    // port is for). Only while no idle connection can have hit its 10 s header timeout yet.
    let main = probe(daemon.addr, "/healthz", Duration::from_secs(1)).await;
    if started.elapsed() < Duration::from_secs(8) {
        assert_eq!(main, None, "the main port answered at its cap: the flood did not fill it");
    }
    // The probe port answers every time, at once, the flood going on.
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let (status, took) =
            probe(probe_addr, "/healthz", Duration::from_secs(2)).await.expect("/healthz on the probe port");
        assert_eq!(status, 200);
        slowest = slowest.max(took);
        let (status, _) =
            probe(probe_addr, "/readyz", Duration::from_secs(2)).await.expect("/readyz on the probe port");
        assert!(status == 200 || status == 503, "/readyz answered {status}");
    }
    assert!(daemon.app.listener.connections.load(Ordering::SeqCst) >= FLOOD_CAP as i64 / 2);
    eprintln!("main port at its cap: 10 probes on the probe port, the slowest in {slowest:?}");
    // Only probes are served there.
    assert_eq!(probe(probe_addr, "/metrics", Duration::from_secs(2)).await.map(|(s, _)| s), Some(404));

    stop.store(true, Ordering::Relaxed);
    for client in flood {
        client.await.unwrap();
    }
    daemon.shutdown().await;
}

/// Latency of /healthz on both ports while `clients` clients connect and hold idle connections
/// (the figure in docs/performance.md). Ignored: it takes a minute and 10,000 descriptors.
/// `cargo test --test integration probe_port::healthz_latency -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn healthz_latency_while_10000_clients_connect() {
    let clients: usize =
        std::env::var("SENTINEL_FLOOD_CLIENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let (_server, daemon) = daemon_with_probe_port(dir.path(), DEFAULT_MAX_CONNECTIONS).await;
    let probe_addr = daemon.probe_addr.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flood: Vec<_> = (0..clients).map(|_| tokio::spawn(idle_client(daemon.addr, stop.clone()))).collect();
    // Part of the scenario: a probe every 2 s for 30 s on each port, a kubelet's 10 s timeout.
    let mut main = Vec::new();
    let mut probes = Vec::new();
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (a, b) = tokio::join!(
            probe(daemon.addr, "/healthz", Duration::from_secs(10)),
            probe(probe_addr, "/healthz", Duration::from_secs(10))
        );
        main.push(a.map(|(_, t)| t));
        probes.push(b.map(|(_, t)| t));
    }
    let summary = |name: &str, seen: &[Option<Duration>]| {
        let mut answered: Vec<Duration> = seen.iter().flatten().copied().collect();
        answered.sort();
        let missed = seen.len() - answered.len();
        let median = answered.get(answered.len() / 2).copied().unwrap_or_default();
        let max = answered.last().copied().unwrap_or_default();
        eprintln!(
            "{name}: {} of {} probes answered within 10 s (median {median:?}, max {max:?}), {missed} timed out",
            answered.len(),
            seen.len()
        );
    };
    eprintln!(
        "{clients} clients, {} connections open at the end",
        daemon.app.listener.connections.load(Ordering::SeqCst)
    );
    summary("main port /healthz", &main);
    summary("probe port /healthz", &probes);
    stop.store(true, Ordering::Relaxed);
    for client in flood {
        client.await.unwrap();
    }
    assert!(probes.iter().all(Option::is_some), "a probe on the probe port timed out");
    daemon.shutdown().await;
}
