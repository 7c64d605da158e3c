//! The advice endpoint's cache: a job's advice is worked out again only when its configuration
//! or its recent checkpoints changed, and never more than one at a time (each runs the
//! reference model over up to 1,000 stored checkpoints, about 10 predictions).

use parking_lot::Mutex;
use std::num::NonZeroUsize;
use std::sync::Arc;

use lru::LruCache;

use crate::advice::{Advice, Sample};
use crate::observe::CheckpointConfiguration;

/// How many jobs' advice is kept; the least recently asked for goes first.
pub(crate) const CACHED_JOBS: NonZeroUsize = NonZeroUsize::new(256).unwrap();

/// What one job's advice was worked out from, and the advice.
struct Entry {
    configuration: CheckpointConfiguration,
    recent: Vec<Sample>,
    advice: Arc<Advice>,
}

/// The cached advice of up to [`CACHED_JOBS`] jobs by (cluster, job id), and the permit to
/// work out more.
pub(crate) struct AdviceCache {
    entries: Mutex<LruCache<(String, String), Entry>>,
    /// One computation at a time: a page of many jobs, or a script asking for all of them,
    /// waits rather than taking every core from the poller.
    pub(crate) computing: tokio::sync::Semaphore,
}

impl Default for AdviceCache {
    fn default() -> Self {
        AdviceCache {
            entries: Mutex::new(LruCache::new(CACHED_JOBS)),
            computing: tokio::sync::Semaphore::new(1),
        }
    }
}

impl AdviceCache {
    /// The cached advice of `cluster`/`job_id`, if it was worked out from this configuration
    /// and these recent checkpoints (a new checkpoint, or one that finished since, misses).
    pub(crate) fn get(
        &self,
        cluster: &str,
        job_id: &str,
        configuration: &CheckpointConfiguration,
        recent: &[Sample],
    ) -> Option<Arc<Advice>> {
        let mut entries = self.entries.lock();
        let entry = entries.get(&(cluster.to_string(), job_id.to_string()))?;
        (entry.configuration == *configuration && entry.recent == recent).then(|| entry.advice.clone())
    }

    /// Keeps `advice`, worked out from `configuration` and `recent`, dropping the least recently
    /// used job's when [`CACHED_JOBS`] are kept.
    pub(crate) fn put(
        &self,
        cluster: &str,
        job_id: &str,
        configuration: CheckpointConfiguration,
        recent: Vec<Sample>,
        advice: Arc<Advice>,
    ) {
        let key = (cluster.to_string(), job_id.to_string());
        self.entries.lock().put(key, Entry { configuration, recent, advice });
    }

    #[cfg(test)]
    /// How many jobs' advice is kept.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::CheckpointStatus;
    use crate::time::Timestamp;

    fn sample(id: u64) -> Sample {
        Sample::completed(id, Timestamp(id as i64 * 1_000), 100)
    }

    fn advice_of(configuration: &CheckpointConfiguration, recent: &[Sample]) -> Arc<Advice> {
        Arc::new(crate::advice::advise(configuration, recent))
    }

    #[test]
    fn advice_is_reused_until_the_checkpoints_or_the_configuration_change() {
        let cache = AdviceCache::default();
        let configuration = CheckpointConfiguration::default();
        let recent: Vec<Sample> = (1..=5).map(sample).collect();
        assert!(cache.get("c", "j", &configuration, &recent).is_none());
        let advice = advice_of(&configuration, &recent);
        cache.put("c", "j", configuration.clone(), recent.clone(), advice.clone());
        let hit = cache.get("c", "j", &configuration, &recent).expect("the same inputs hit");
        assert!(Arc::ptr_eq(&hit, &advice));

        let mut newer = recent.clone();
        newer.push(sample(6));
        assert!(cache.get("c", "j", &configuration, &newer).is_none(), "a new checkpoint misses");
        let mut finished_since = recent.clone();
        finished_since[4].status = CheckpointStatus::Failed;
        assert!(cache.get("c", "j", &configuration, &finished_since).is_none(), "a changed one misses");
        let mut reconfigured = configuration.clone();
        reconfigured.settings.interval_ms = Some(60_000);
        assert!(cache.get("c", "j", &reconfigured, &recent).is_none(), "a new configuration misses");
        assert!(cache.get("c", "other", &configuration, &recent).is_none());
    }

    #[test]
    fn at_most_cached_jobs_are_kept_and_the_least_recently_used_goes() {
        let cache = AdviceCache::default();
        let configuration = CheckpointConfiguration::default();
        let recent = vec![sample(1)];
        let advice = advice_of(&configuration, &recent);
        for i in 0..CACHED_JOBS.get() {
            cache.put("c", &i.to_string(), configuration.clone(), recent.clone(), advice.clone());
        }
        // Job 0 is asked for again, so job 1 is now the least recently used.
        assert!(cache.get("c", "0", &configuration, &recent).is_some());
        cache.put("c", "new", configuration.clone(), recent.clone(), advice.clone());
        assert_eq!(cache.len(), CACHED_JOBS.get());
        assert!(cache.get("c", "0", &configuration, &recent).is_some());
        assert!(cache.get("c", "1", &configuration, &recent).is_none());
        assert!(cache.get("c", "new", &configuration, &recent).is_some());
    }
}
