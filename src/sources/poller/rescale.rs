//! A job's rescales: Flink 2.3's rescale history where the job runs under the adaptive
//! scheduler and the history is on; elsewhere a restart that brought the job's vertices back
//! with another parallelism. Looked at only when the job restored or changed state (and on
//! first sight), never every round.

use super::Poller;
use super::cache::JobCache;
use crate::observe::{JobKey, Observation, Rescale, RescaleReport, RescaleSource, changed_vertices};
use crate::sources::flink::{convert, dto};

/// At most this many history entries are read in detail per look, the newest.
const MAX_RESCALES_PER_LOOK: usize = 8;
/// At most this many rescale ids are remembered per job as read.
const MAX_RESCALES_REMEMBERED: usize = 64;

impl Poller {
    /// Looks for rescales of `job` after a restore or a change of state (`/jobs/:id` and, under
    /// the adaptive scheduler, the rescale history) and applies what it found.
    pub(super) async fn look_for_rescales(&self, job: &dto::JobOverview, cache: &mut JobCache) {
        let details = self.fetch(self.client.job(&job.jid)).await.ok();
        let mut rescales = Vec::new();
        if let Some(details) = &details {
            let now = convert::vertex_parallelism(details);
            let vertices = changed_vertices(&cache.parallelism, &now);
            if !vertices.is_empty() {
                let restarting = details.timestamps.get("RESTARTING").copied().filter(|t| *t > 0);
                let created = details.timestamps.get("CREATED").copied().filter(|t| *t > 0);
                rescales.push(Rescale {
                    id: None,
                    source: RescaleSource::ParallelismChange,
                    started_at: None,
                    // The adaptive scheduler's restart passes CREATED, not RESTARTING (2.3.0).
                    restarted_at: restarting.max(created).map(crate::time::Timestamp),
                    at: self.app.now(),
                    cause: None,
                    outcome: None,
                    vertices,
                });
            }
            if !now.is_empty() {
                if let Some(topology) = convert::topology(details) {
                    cache.topology = Some(std::sync::Arc::new(topology));
                }
                cache.parallelism = now;
            }
        }
        if job.scheduler_type.as_deref() == Some("Adaptive")
            && !cache.rescale_history_off
            && let Some(history) = self.rescale_history(&job.jid, cache).await
            && !history.is_empty()
        {
            // The history tells the same rescales with their times and causes.
            rescales = history;
        }
        if !rescales.is_empty() {
            let key = JobKey { cluster: self.config.name.clone(), job_id: job.jid.clone() };
            self.app.apply(&Observation::Rescales(RescaleReport { key, rescales }));
        }
    }

    /// The rescales of Flink's history not read yet, each read in detail once (the history
    /// names no vertex); `None` where the history is off or does not answer (then not asked
    /// again for this job).
    async fn rescale_history(&self, job_id: &str, cache: &mut JobCache) -> Option<Vec<Rescale>> {
        let history = match self.fetch(self.client.rescale_history(job_id)).await {
            Ok(Some(h)) => h,
            Ok(None) | Err(_) => {
                tracing::info!(cluster = %self.config.name, job = %job_id, "no rescale history (web.adaptive-scheduler.rescale-history.size is 0?): rescales are told by parallelism changes");
                cache.rescale_history_off = true;
                return None;
            }
        };
        let mut out = Vec::new();
        for entry in history.iter().take(MAX_RESCALES_PER_LOOK) {
            let Some(summary) = convert::rescale(entry) else { continue };
            let Some(id) = summary.id.clone() else { continue };
            if cache.rescales_read.contains(&id) {
                continue;
            }
            let uuid = entry.rescale_uuid.as_deref().unwrap_or_default();
            let detailed = self.fetch(self.client.rescale_details(job_id, uuid)).await.ok().flatten();
            out.push(detailed.as_ref().and_then(convert::rescale).unwrap_or(summary));
            cache.rescales_read.push_back(id);
            if cache.rescales_read.len() > MAX_RESCALES_REMEMBERED {
                cache.rescales_read.pop_front();
            }
        }
        out.reverse(); // oldest first
        Some(out)
    }
}
