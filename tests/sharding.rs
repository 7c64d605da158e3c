//! Sharded deployments, several replicas in one process (`daemon::start_sharded`, as the Helm
//! StatefulSet's `SENTINEL_SHARD_INDEX`/`SENTINEL_SHARD_COUNT` make them): a session cluster
//! whose jobs are shared out (`shard_jobs`) has every job watched by exactly one replica, its
//! checkpoints counted once across them (the counts of all replicas sum to Flink's own), and
//! discovered clusters are split between the replicas like `[[clusters]]` entries.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use checkpoint_sentinel::config::Shard;
use checkpoint_sentinel::daemon::{Running, start_sharded};
use common::many::replay_many;
use common::{sample, scrape};

const REPLICAS: u32 = 3;

/// The jobs a replica's metrics have `flink_checkpoints_total` for: job id -> (completed, failed).
fn counted_jobs(metrics: &str, cluster: &str) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("flink_checkpoints_total{")) {
        if !line.contains(&format!("cluster=\"{cluster}\"")) {
            continue;
        }
        let id = line.split("job_id=\"").nth(1).unwrap().split('"').next().unwrap().to_string();
        let value: f64 = line.rsplit_once(' ').unwrap().1.parse().unwrap();
        let entry = out.entry(id).or_default();
        if line.contains("status=\"completed\"") {
            entry.0 = value;
        } else if line.contains("status=\"failed\"") {
            entry.1 = value;
        }
    }
    out
}

async fn replicas(config: impl Fn(usize) -> checkpoint_sentinel::config::Config) -> Vec<Running> {
    let mut out = Vec::new();
    for index in 0..REPLICAS {
        let shard = Some(Shard { index, count: REPLICAS });
        out.push(start_sharded(config(index as usize), None, shard).await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_of_a_shared_cluster_is_watched_by_exactly_one_replica_and_counts_sum_to_flinks() {
    let jobs = 30;
    let server = replay_many("2.3.0", "healthy", jobs, Duration::from_millis(1)).await;
    let dirs: Vec<_> = (0..REPLICAS).map(|_| tempfile::tempdir().unwrap()).collect();
    let daemons = replicas(|i| {
        let mut config = common::watching(&server.url, Duration::from_millis(100), dirs[i].path());
        config.clusters[0].shard_jobs = true;
        config
    })
    .await;
    // One more round than the series and the two stale answers: a job's polls follow one
    // another, so the request of the third means the second's answer was applied.
    server.wait_for_polls(3).await;
    let mut scrapes = Vec::new();
    for d in &daemons {
        scrapes.push(scrape(d.addr).await);
    }
    for d in daemons {
        d.shutdown().await;
    }

    let truth = server.scenario().last_counts();
    let truth = (truth["completed"].as_f64().unwrap(), truth["failed"].as_f64().unwrap());
    assert!(truth.0 > 0.0, "the scenario completes checkpoints");
    let mut owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let (mut completed, mut failed) = (0.0, 0.0);
    for (r, metrics) in scrapes.iter().enumerate() {
        let counted = counted_jobs(metrics, "lab");
        println!("replica {r}: {} jobs", counted.len());
        assert!(!counted.is_empty(), "replica {r} watches some of the {jobs} jobs");
        assert_eq!(
            sample(metrics, "checkpoint_sentinel_watched_jobs", &[("cluster", "lab")]),
            Some(counted.len() as f64),
            "replica {r}: watched_jobs is its own share, so the replicas' sum is the cluster's"
        );
        // Every replica polls the cluster's overview: it reaches the cluster.
        assert_eq!(sample(metrics, "checkpoint_sentinel_flink_up", &[("cluster", "lab")]), Some(1.0));
        for (id, (c, f)) in counted {
            assert_eq!((c, f), truth, "replica {r}, job {id}: Flink's own counts");
            completed += c;
            failed += f;
            owners.entry(id).or_default().push(r);
        }
    }
    let ids = server.job_ids();
    assert_eq!(owners.len(), jobs, "every job is watched");
    for id in ids {
        let who = &owners[id];
        assert_eq!(who.len(), 1, "job {id} watched by replicas {who:?}");
        let shard = Shard { index: who[0] as u32, count: REPLICAS };
        assert!(shard.owns_job("lab", id), "job {id}: its rendezvous owner");
    }
    assert_eq!((completed, failed), (truth.0 * jobs as f64, truth.1 * jobs as f64), "sums across replicas");
    // No two replicas fetched one checkpoint's details: each job had one poller.
    assert_eq!(server.details_asked_twice(), Vec::new());
    assert!(server.details_asked() >= jobs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovered_clusters_are_split_between_the_replicas_by_name() {
    let server = replay_many("2.3.0", "healthy", 1, Duration::ZERO).await;
    let sd = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..12).map(|i| format!("app-{i:02}")).collect();
    let mut yaml = String::from("# one application cluster per job, as a deploy pipeline writes them\n");
    for name in &names {
        yaml.push_str(&format!(
            "- targets: [\"{}\"]\n  labels:\n    cluster: {name}\n    team: data\n",
            server.url.trim_start_matches("http://")
        ));
    }
    std::fs::write(sd.path().join("apps.yaml"), yaml).unwrap();
    let dirs: Vec<_> = (0..REPLICAS).map(|_| tempfile::tempdir().unwrap()).collect();
    let daemons = replicas(|i| {
        let mut config = common::watching(&server.url, Duration::from_millis(100), dirs[i].path());
        config.clusters.clear();
        config.discovery.files = vec![format!("{}/*.yaml", sd.path().display())];
        config.discovery.defaults.poll_interval = Duration::from_millis(100);
        config
    })
    .await;
    let scrape_all = || async {
        let mut scrapes = Vec::new();
        for d in &daemons {
            scrapes.push(scrape(d.addr).await);
        }
        scrapes
    };
    let up =
        |metrics: &str, name: &str| sample(metrics, "checkpoint_sentinel_flink_up", &[("cluster", name)]);
    let every_cluster_polled = |scrapes: &Vec<String>| {
        scrapes.iter().all(|m| sample(m, "checkpoint_sentinel_discovered_clusters", &[]) == Some(12.0))
            && names.iter().all(|name| scrapes.iter().any(|m| up(m, name).is_some()))
    };
    let scrapes = common::until(
        "every cluster polled by a replica",
        Duration::from_secs(30),
        scrape_all,
        every_cluster_polled,
    )
    .await;
    let mut owners: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (r, metrics) in scrapes.iter().enumerate() {
        // Discovery reads every file on every replica; each keeps the clusters it owns.
        assert_eq!(sample(metrics, "checkpoint_sentinel_discovered_clusters", &[]), Some(12.0));
        for name in &names {
            if up(metrics, name).is_some() {
                owners.entry(name).or_default().push(r);
            }
        }
    }
    for d in daemons {
        d.shutdown().await;
    }
    for name in &names {
        let who = owners.get(name.as_str()).cloned().unwrap_or_default();
        assert_eq!(who.len(), 1, "{name} polled by replicas {who:?}");
        assert!(Shard { index: who[0] as u32, count: REPLICAS }.owns(name), "{name}: its rendezvous owner");
    }
    let shares: Vec<usize> =
        (0..REPLICAS as usize).map(|r| owners.values().filter(|w| w[0] == r).count()).collect();
    println!("clusters per replica: {shares:?}");
}
