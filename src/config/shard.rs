//! Sharding: this replica's part of a deployment (`Shard`) and who owns a cluster or a job
//! (rendezvous hashing). Which clusters a shard keeps of a config is `Config::for_shard`.

/// This replica's part of a sharded deployment: shard `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based index of this replica.
    pub index: u32,
    /// Number of replicas.
    pub count: u32,
}

impl Shard {
    /// From `SENTINEL_SHARD_INDEX` and `SENTINEL_SHARD_COUNT` (the Helm chart's StatefulSet sets
    /// them); `None` when unset, and an error naming the variable when they make no sense.
    pub(crate) fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<Shard>, String> {
        let read = |name: &str| -> Result<Option<u32>, String> {
            env(name)
                .map(|v| {
                    v.trim().parse::<u32>().map_err(|_| format!("{name}={v:?}: expected a whole number"))
                })
                .transpose()
        };
        match (read("SENTINEL_SHARD_INDEX")?, read("SENTINEL_SHARD_COUNT")?) {
            (None, None) => Ok(None),
            (Some(index), Some(count)) if count > 0 && index < count => Ok(Some(Shard { index, count })),
            (index, count) => Err(format!(
                "SENTINEL_SHARD_INDEX={index:?} and SENTINEL_SHARD_COUNT={count:?}: expected both, with index < count"
            )),
        }
    }

    /// Whether this shard owns `cluster`: rendezvous hashing, owner = the index maximising
    /// `mix(mix(fnv1a64(cluster)) ^ (index + 1) * φ)`, with `mix` MurmurHash3's 64-bit
    /// finaliser and φ 2⁶⁴ divided by the golden ratio. Stable across replicas (and versions)
    /// without coordination; going from N to N+1 shards moves about 1/(N+1) of the clusters.
    /// The mixing matters: FNV-1a of `"<cluster>/<index>"` alone (the first version) scored
    /// the indexes almost in a fixed order, and with 3 shards the last one owned half of every
    /// set of names (1,500 of 3,000).
    pub fn owns(self, cluster: &str) -> bool {
        fn mix(mut h: u64) -> u64 {
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 33;
            h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
            h ^ (h >> 33)
        }
        let mut fnv1a = fnv::FnvHasher::default();
        std::hash::Hasher::write(&mut fnv1a, cluster.as_bytes());
        let key = mix(std::hash::Hasher::finish(&fnv1a));
        let score = |i: u32| mix(key ^ u64::from(i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        (0..self.count).max_by_key(|&i| (score(i), std::cmp::Reverse(i))) == Some(self.index)
    }

    /// Whether this shard watches job `job_id` of a cluster whose jobs are shared out
    /// (`shard_jobs`): the same rendezvous hashing over `"<cluster>/<job id>"`, so each job has
    /// exactly one owner among the replicas, whichever replica owns the cluster itself.
    pub fn owns_job(self, cluster: &str, job_id: &str) -> bool {
        self.owns(&format!("{cluster}/{job_id}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClusterConfig, Config, LogConfig, shard_clusters};

    #[test]
    fn a_cluster_whose_jobs_are_shared_out_is_on_every_replica_and_its_logs_on_its_owner() {
        let mut shared = ClusterConfig::new("session", "http://s:1");
        shared.shard_jobs = true;
        let apps: Vec<ClusterConfig> =
            (0..6).map(|i| ClusterConfig::new(&format!("app-{i}"), "http://a:1")).collect();
        let config = Config {
            clusters: std::iter::once(shared).chain(apps).collect(),
            logs: vec![LogConfig {
                cluster: "session".into(),
                paths: vec!["/l/*.log".into()],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut app_owners = 0;
        let mut log_owners = 0;
        for index in 0..3 {
            let shard = Shard { index, count: 3 };
            let mine = config.clone().for_shard(Some(shard));
            let session = mine.clusters.iter().find(|c| c.name == "session").expect("on every replica");
            assert_eq!(session.job_shard, Some(shard));
            assert!(mine.clusters.iter().filter(|c| c.name != "session").all(|c| c.job_shard.is_none()));
            app_owners += mine.clusters.len() - 1;
            log_owners += mine.logs.len();
            assert_eq!(mine.logs.len(), usize::from(shard.owns("session")));
        }
        assert_eq!((app_owners, log_owners), (6, 1), "each app cluster once, the session's logs once");
        assert_eq!(
            shard_clusters(config.clusters.clone(), None),
            config.clusters,
            "unsharded: all, unmarked"
        );
    }

    #[test]
    fn shards_split_the_clusters_between_them() {
        // Evenly: within 10 % of 1/count each (FNV-1a without the finaliser gave 3 shards
        // 750, 750 and 1,500 of these).
        let many: Vec<String> = (0..3000).map(|i| format!("cluster-{i}")).collect();
        for count in 2..6u32 {
            for i in 0..count {
                let share = many.iter().filter(|n| Shard { index: i, count }.owns(n)).count();
                let fair = 3000 / count as usize;
                assert!(share.abs_diff(fair) < fair / 10, "shard {i}/{count} owns {share}, fair {fair}");
            }
        }
        // Jobs of one cluster too (ids differ in their first hex digits only).
        for i in 0..3 {
            let share = (0..3000)
                .filter(|j| Shard { index: i, count: 3 }.owns_job("session", &format!("{j:08x}2b1a1f0b4e0c")))
                .count();
            assert!(share.abs_diff(1000) < 100, "shard {i}/3 owns {share} of 3,000 jobs");
        }
        let names: Vec<String> = (0..300).map(|i| format!("cluster-{i}")).collect();
        for count in 1..5u32 {
            let owners: Vec<u32> = names
                .iter()
                .map(|n| {
                    let owners: Vec<u32> =
                        (0..count).filter(|&i| Shard { index: i, count }.owns(n)).collect();
                    assert_eq!(owners.len(), 1, "{n} owned by {owners:?}");
                    owners[0]
                })
                .collect();
            for i in 0..count {
                let share = owners.iter().filter(|&&o| o == i).count();
                assert!(share > 300 / count as usize / 2, "shard {i}/{count} owns only {share}");
            }
        }
        // Adding a shard moves only the clusters the new shard takes.
        let moved = names
            .iter()
            .filter(|n| {
                let before = (0..3).find(|&i| Shard { index: i, count: 3 }.owns(n));
                let after = (0..4).find(|&i| Shard { index: i, count: 4 }.owns(n));
                before != after && after != Some(3)
            })
            .count();
        assert_eq!(moved, 0);
        let env = |k: &str| match k {
            "SENTINEL_SHARD_INDEX" => Some("2".to_string()),
            "SENTINEL_SHARD_COUNT" => Some("2".to_string()),
            _ => None,
        };
        assert!(Shard::from_env(env).unwrap_err().contains("index < count"));
        assert_eq!(Shard::from_env(|_| None), Ok(None));
    }
}
