//! `[[clusters]]`: one Flink JobManager's REST endpoint and how it is polled.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::credentials::{BasicAuth, Secret};
use super::patterns::Pattern;
use super::shard::Shard;

/// One `[[clusters]]` entry: a Flink JobManager's REST endpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// A short name, used as the `cluster` label.
    pub name: String,
    /// The JobManager's REST base URL, e.g. `http://127.0.0.1:8081`.
    pub(crate) url: String,
    /// How often to poll.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
    /// Timeout of each HTTP request.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Requests in flight to this cluster (jobs are polled concurrently). Unset (the default),
    /// the poller chooses each round as many as keep the round within half the poll interval at
    /// the measured answer time and requests per job, at least 4 and at most 8 per REST handler
    /// thread of the JobManager (`rest.server.numThreads` from its `/jobmanager/config`, 4 when
    /// it does not say): `sources::poller::in_flight`. Set, exactly this many (an override).
    pub max_concurrent_requests: Option<usize>,
    /// HTTP basic authentication.
    pub(crate) basic_auth: Option<BasicAuth>,
    /// A bearer token.
    pub(crate) bearer_token: Option<Secret>,
    /// A PEM file with extra CA certificates for HTTPS.
    pub(crate) ca_file: Option<PathBuf>,
    /// Regular expressions over job names: watch only matching jobs (empty: all).
    pub(crate) include_jobs: Vec<Pattern>,
    /// Regular expressions over job names: never watch matching jobs.
    pub(crate) exclude_jobs: Vec<Pattern>,
    /// A subtask that has not acknowledged an in-progress checkpoint after this share of the
    /// checkpoint timeout is reported as a `barrier_missing` event (source `rest`).
    pub(crate) pending_subtask_after: f64,
    /// A REST answer larger than this many bytes is cut off and counted as an error
    /// (`kind="too_large"`) instead of being read into memory.
    pub max_response_bytes: u64,
    /// At most this many jobs of the cluster are watched (the first in `/jobs/overview`'s
    /// order, running ones first); the rest are counted in `checkpoint_sentinel_inputs_cut_total`.
    pub max_jobs: usize,
    /// At most this many newly finished checkpoints of a job have their details fetched in one
    /// poll round (the newest); the others in later rounds while Flink still lists them
    /// (`sources::poller`, deferral).
    pub max_history_per_poll: usize,
    /// In a sharded deployment, share this cluster's jobs out between the replicas instead of
    /// giving the whole cluster to one: every replica polls its overview and watches only the
    /// jobs it owns by rendezvous hashing on (cluster, job id). For a session cluster with more
    /// jobs than one replica should carry. No effect without sharding.
    pub shard_jobs: bool,
    /// Set by [`Config::for_shard`](super::Config::for_shard) /
    /// [`shard_clusters`](super::shard_clusters), never read from a file: the shard
    /// whose jobs this replica watches, when the cluster's jobs are shared out.
    #[serde(skip)]
    pub(crate) job_shard: Option<Shard>,
    /// Where a checkpoint path Flink names is found by the daemon: the longest `flink` prefix
    /// that matches is replaced by its `local` (a mount of the same storage), e.g.
    /// `{ flink = "s3://bucket/ckpt", local = "/mnt/ckpt" }`.
    pub storage_paths: Vec<StoragePath>,
}

/// One `storage_paths` entry of a cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoragePath {
    /// The prefix as Flink names it (`s3://bucket/ckpt`, `file:/flink/ckpt`).
    pub flink: String,
    /// Where the daemon reads it (`/mnt/ckpt`, `s3://other-bucket/ckpt`).
    pub local: String,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            name: String::new(),
            url: String::new(),
            poll_interval: Duration::from_secs(5),
            timeout: Duration::from_secs(10),
            max_concurrent_requests: None,
            basic_auth: None,
            bearer_token: None,
            ca_file: None,
            include_jobs: Vec::new(),
            exclude_jobs: Vec::new(),
            pending_subtask_after: 0.5,
            max_response_bytes: 16 * 1024 * 1024,
            max_jobs: 10_000,
            max_history_per_poll: 20,
            shard_jobs: false,
            job_shard: None,
            storage_paths: Vec::new(),
        }
    }
}

/// Requests in flight that other users of a cluster's settings (the evidence source, the HTTP
/// client's idle connections) plan for when `max_concurrent_requests` is unset: the poller's
/// cap at Flink's default 4 REST threads.
pub(crate) const UNSET_IN_FLIGHT_BOUND: usize = 32;

impl ClusterConfig {
    /// `max_concurrent_requests`, or [`UNSET_IN_FLIGHT_BOUND`] when the poller chooses.
    pub(crate) fn in_flight_bound(&self) -> usize {
        self.max_concurrent_requests.unwrap_or(UNSET_IN_FLIGHT_BOUND)
    }

    /// A cluster with every other value at its default.
    pub fn new(name: &str, url: &str) -> Self {
        ClusterConfig { name: name.to_string(), url: url.to_string(), ..ClusterConfig::default() }
    }
}
