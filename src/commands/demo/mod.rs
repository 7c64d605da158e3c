//! `checkpoint-sentinel demo`: a simulated Flink cluster driven by the reference model, served
//! over a Flink-shaped REST API and logging like a JobManager, with the real daemon watching it.
//!
//! This is an I/O edge like `daemon`: it reads the clock once per tick and hands it to the
//! (pure) model, writes log files, and serves HTTP. Job profiles show one behaviour each:
//! healthy; backpressured and skewed so alignment dominates; expiring; min-pause bound; and
//! one that exceeds its tolerable failures and restarts.

pub mod cluster;
pub(crate) mod metrics;
pub mod rest;

use parking_lot::Mutex;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{ClusterConfig, Config, LogConfig, StartAt};
use crate::time::Timestamp;
use cluster::{DemoCluster, TICK};

/// Options of `demo`.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Where the daemon listens (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// How many jobs.
    pub jobs: usize,
    /// Seed of the simulation.
    pub seed: u64,
    /// Folder for the JM log and the daemon's state; a new temp folder when `None`.
    pub dir: Option<PathBuf>,
    /// Multiplies every job's checkpoint interval, min-pause and timeout (1: the demo's pace).
    pub interval_scale: u64,
}

/// Why the demo could not start.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A file or socket problem.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The daemon did not start.
    #[error(transparent)]
    Daemon(#[from] crate::daemon::StartError),
}

/// A running demo: the simulated cluster, its REST API and the daemon watching it.
pub struct RunningDemo {
    /// The simulated Flink REST API.
    pub flink_url: String,
    /// The daemon.
    pub daemon: crate::daemon::Running,
    /// Where the JM log is written.
    pub log_file: PathBuf,
    /// The folder of the log and the daemon's state.
    pub dir: PathBuf,
    /// (job id, job name) of every job.
    pub jobs: Vec<(String, String)>,
    /// Whether `dir` is a temporary folder of the demo's own, removed at shutdown.
    owns_dir: bool,
    ticker: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<()>,
}

impl RunningDemo {
    /// Stops the simulation, its server and the daemon, and removes the demo's temporary
    /// folder (its log and state) unless the caller chose the folder.
    pub async fn shutdown(self) {
        self.ticker.abort();
        self.server.abort();
        self.daemon.shutdown().await;
        if self.owns_dir {
            remove_demo_dir(&self.dir);
        }
    }
}

/// Removes a temporary demo folder; a failure is a warning, since nothing else depends on it.
fn remove_demo_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        tracing::warn!(dir = %dir.display(), "cannot remove the demo's temporary folder: {e}");
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DemoError {
    let what = what.into();
    move |source| DemoError::Io { what, source }
}

fn append(path: &Path, lines: &[String]) -> std::io::Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let mut text = lines.join("\n");
    text.push('\n');
    f.write_all(text.as_bytes())
}

/// Options of the simulated cluster alone (`demo --no-daemon`).
#[derive(Clone, Debug)]
pub struct SimulatorOptions {
    /// Where its REST API listens.
    pub listen: SocketAddr,
    /// How many jobs.
    pub jobs: usize,
    /// Seed of the simulation.
    pub seed: u64,
    /// Multiplies every profile's interval, min-pause, timeout and restart delay.
    pub interval_scale: u64,
    /// Where the JobManager log is written.
    pub log_file: PathBuf,
    /// Added before every REST answer (the round trip to a JobManager in another pod or zone),
    /// for measuring the poller; zero by default.
    pub rest_delay: std::time::Duration,
}

/// A running simulated cluster without a daemon: for measuring a separately started
/// `checkpoint-sentinel run` against it.
pub struct RunningSimulator {
    /// The simulated Flink REST API.
    pub flink_url: String,
    /// Where the JM log is written.
    pub log_file: PathBuf,
    /// (job id, job name) of every job.
    pub jobs: Vec<(String, String)>,
    ticker: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<()>,
}

impl RunningSimulator {
    /// Stops the simulation and its server.
    pub fn shutdown(self) {
        self.ticker.abort();
        self.server.abort();
    }
}

/// Starts the simulated cluster and its REST API only.
pub async fn start_simulator(options: SimulatorOptions) -> Result<RunningSimulator, DemoError> {
    let now = Timestamp::now();
    if let Some(dir) = options.log_file.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    }
    let cluster = Arc::new(Mutex::new(DemoCluster::with_interval_scale(
        options.jobs,
        options.seed,
        now,
        options.interval_scale,
    )));
    let jobs = {
        let c = cluster.lock();
        c.jobs.iter().map(|j| (j.id.clone(), j.name.clone())).collect()
    };
    let listener =
        tokio::net::TcpListener::bind(options.listen).await.map_err(io("cannot bind the demo REST API"))?;
    let flink_addr = listener.local_addr().map_err(io("cannot bind the demo REST API"))?;
    let delay = options.rest_delay;
    let router = rest::router(cluster.clone()).merge(metrics::router(cluster.clone())).layer(
        axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                next.run(request).await
            },
        ),
    );
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!("demo REST API failed: {e}");
        }
    });
    let log_file = options.log_file.clone();
    let ticker_log = log_file.clone();
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        loop {
            tick.tick().await;
            let lines = cluster.lock().advance(Timestamp::now());
            if let Err(e) = append(&ticker_log, &lines) {
                tracing::warn!(file = %ticker_log.display(), "cannot write the demo log: {e}");
            }
        }
    });
    Ok(RunningSimulator { flink_url: format!("http://{flink_addr}"), log_file, jobs, ticker, server })
}

/// Starts the simulated cluster, its REST API on a free local port, and the daemon.
pub async fn start(options: DemoOptions) -> Result<RunningDemo, DemoError> {
    let now = Timestamp::now();
    let owns_dir = options.dir.is_none();
    let dir = match options.dir.clone() {
        Some(d) => d,
        None => {
            std::env::temp_dir().join(format!("checkpoint-sentinel-demo-{}-{}", std::process::id(), now.0))
        }
    };
    let started = start_in(options, now, &dir).await;
    if started.is_err() && owns_dir {
        remove_demo_dir(&dir);
    }
    let mut demo = started?;
    demo.owns_dir = owns_dir;
    Ok(demo)
}

async fn start_in(options: DemoOptions, now: Timestamp, dir: &Path) -> Result<RunningDemo, DemoError> {
    let dir = dir.to_path_buf();
    let log_dir = dir.join("log");
    std::fs::create_dir_all(&log_dir).map_err(io(format!("cannot create {}", log_dir.display())))?;
    let log_file = log_dir.join("flink-demo-standalonesession-0-localhost.log");
    let cluster = Arc::new(Mutex::new(DemoCluster::with_interval_scale(
        options.jobs,
        options.seed,
        now,
        options.interval_scale.max(1),
    )));
    let jobs = {
        let c = cluster.lock();
        c.jobs.iter().map(|j| (j.id.clone(), j.name.clone())).collect()
    };

    let listener =
        tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.map_err(io("cannot bind the demo REST API"))?;
    let flink_addr = listener.local_addr().map_err(io("cannot bind the demo REST API"))?;
    let router = rest::router(cluster.clone()).merge(metrics::router(cluster.clone()));
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!("demo REST API failed: {e}");
        }
    });

    let ticker_cluster = cluster.clone();
    let ticker_log = log_file.clone();
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        loop {
            tick.tick().await;
            let lines = ticker_cluster.lock().advance(Timestamp::now());
            if let Err(e) = append(&ticker_log, &lines) {
                tracing::warn!(file = %ticker_log.display(), "cannot write the demo log: {e}");
            }
        }
    });

    let flink_url = format!("http://{flink_addr}");
    let mut config = Config::default();
    config.server.listen = options.listen;
    config.state.dir = dir.join("state");
    config.clusters = vec![ClusterConfig {
        name: "demo".into(),
        url: flink_url.clone(),
        poll_interval: Duration::from_secs(1),
        ..ClusterConfig::default()
    }];
    config.logs = vec![LogConfig {
        cluster: "demo".into(),
        paths: vec![log_dir.join("*.log").to_string_lossy().into_owned()],
        start_at: StartAt::Beginning,
        ..LogConfig::default()
    }];
    let daemon = match crate::daemon::start(config, None).await {
        Ok(daemon) => daemon,
        Err(e) => {
            ticker.abort();
            server.abort();
            return Err(e.into());
        }
    };
    Ok(RunningDemo { flink_url, daemon, log_file, dir, jobs, owns_dir: false, ticker, server })
}
