//! The alignment shadow's input: each due job's graph load (per vertex: subtasks' I/O counters
//! and locations, backpressure, rates), a few jobs a round.

use super::Poller;
use super::schedule::{LOAD_EVERY_POLLS, LOCATION_RETRY_POLLS, MAX_LOAD_SUBTASKS, load_fetches_per_round};
use crate::observe::{JobKey, Observation};
use crate::sources::flink::client::FetchError;
use crate::sources::flink::convert;

impl Poller {
    /// Fetches the graph load of at most [`load_fetches_per_round`] jobs whose load is
    /// due, and reports it for the alignment shadow.
    pub(super) async fn fetch_due_loads(&mut self, errors: &mut Vec<&'static str>) {
        let rounds = self.rounds;
        let mut due: Vec<(u64, String)> = self
            .jobs
            .iter()
            .filter(|(_, c)| c.topology.is_some() && !c.final_poll_done && c.load_due <= rounds)
            .map(|(id, c)| (c.load_due, id.clone()))
            .collect();
        due.sort();
        let per_round = if self.all_loads { usize::MAX } else { load_fetches_per_round(self.jobs.len()) };
        let mut fetches = Vec::new();
        for (_, job_id) in due.into_iter().take(per_round) {
            let Some(c) = self.jobs.get_mut(&job_id) else { continue };
            c.load_due = rounds + LOAD_EVERY_POLLS;
            let Some(topology) = c.topology.clone() else { continue };
            fetches.push((job_id, topology));
        }
        // The due jobs' loads are fetched concurrently (requests bounded by the semaphore).
        let loads = {
            let this = &*self;
            let requests: Vec<_> = fetches
                .into_iter()
                .map(|(job_id, topology)| async move {
                    let mut errors = Vec::new();
                    let load = this.job_load(&job_id, &topology, &mut errors).await;
                    let status = this.job_status_metrics(&job_id).await;
                    (job_id, topology, load, errors, status)
                })
                .collect();
            futures_util::future::join_all(requests).await
        };
        for (job_id, topology, load, load_errors, status) in loads {
            errors.extend(load_errors);
            if let Some(status) = status {
                let key = JobKey { cluster: self.config.name.clone(), job_id: job_id.clone() };
                self.app.apply(&Observation::JobStatus(key, status));
            }
            match load {
                Ok(vertices) => {
                    let located = vertices.iter().any(|v| v.taskmanagers.iter().any(Option::is_some));
                    if let Some(c) = self.jobs.get_mut(&job_id).filter(|c| !located && c.location_retries > 0)
                    {
                        c.location_retries -= 1;
                        c.load_due = rounds + LOCATION_RETRY_POLLS;
                    }
                    self.app.apply(&Observation::JobLoad(crate::observe::JobLoadReport {
                        key: JobKey { cluster: self.config.name.clone(), job_id },
                        measured_at: self.app.now(),
                        topology: Some(topology),
                        vertices,
                    }));
                }
                Err(e) => {
                    self.log_error(&e);
                    errors.push(e.kind());
                }
            }
        }
    }

    /// The job's status metrics under the names its Flink lists (2.x's where they exist, the
    /// 1.x ones elsewhere), read with its load and in the rounds after a restore (its restart
    /// count changed): its metric list, then their values; `None` when either fails or the
    /// job lists none of them.
    pub(super) async fn job_status_metrics(&self, job_id: &str) -> Option<crate::observe::JobStatusMetrics> {
        use crate::sources::flink::metrics::{job_status, job_status_names};
        let listed = self.fetch(self.client.job_metrics(job_id, &[])).await.ok().flatten()?;
        let names = job_status_names(&listed);
        if names.is_empty() {
            return None;
        }
        let values = self.fetch(self.client.job_metrics(job_id, &names)).await.ok().flatten()?;
        Some(job_status(&values))
    }

    /// Per vertex: its subtasks' I/O counters and locations, backpressure and rates; a vertex
    /// whose endpoints are unknown (404) is left out. One endpoint answering an error status
    /// leaves only its part out (counted in `errors`): Flink answers 500 to `/backpressure` of
    /// a young job whose metrics are not collected yet, and that must not cost the rest (seen
    /// live: the subtasks' TaskManagers were lost with it). No connection, a timeout or a
    /// garbled answer still ends the fetch.
    async fn job_load(
        &self,
        job_id: &str,
        topology: &crate::observe::JobTopology,
        errors: &mut Vec<&'static str>,
    ) -> Result<Vec<crate::observe::VertexLoad>, FetchError> {
        // Every vertex's three requests go out at once (the semaphore bounds them); the answers
        // are taken in the vertices' order, so errors and the first failure that ends the fetch
        // are what the requests one after the other gave.
        let answers = futures_util::future::join_all(topology.vertices.iter().map(|v| async move {
            let subtasks = v.parallelism.clamp(1, MAX_LOAD_SUBTASKS);
            let ids: Vec<String> = (0..subtasks)
                .flat_map(|i| convert::LOAD_METRICS.iter().map(move |m| format!("{i}.{m}")))
                .collect();
            let (details, backpressure, metrics) = futures_util::future::join3(
                self.fetch(self.client.vertex(job_id, &v.id)),
                self.fetch(self.client.vertex_backpressure(job_id, &v.id)),
                self.fetch(self.client.vertex_metrics(job_id, &v.id, &ids)),
            )
            .await;
            (v, subtasks, details, backpressure, metrics)
        }))
        .await;
        let mut out = Vec::new();
        for (v, subtasks, details, backpressure, metrics) in answers {
            let details = self.part(details, errors)?;
            let backpressure = self.part(backpressure, errors)?;
            let metrics = self.part(metrics, errors)?;
            if details.is_none() && backpressure.is_none() && metrics.is_none() {
                continue;
            }
            out.push(convert::vertex_load(
                &v.id,
                subtasks,
                details.as_ref(),
                backpressure.as_ref(),
                metrics.as_deref().unwrap_or(&[]),
            ));
        }
        Ok(out)
    }

    /// One part of a job's load: an error status is logged, counted and taken as missing.
    fn part<T>(
        &self,
        answer: Result<Option<T>, FetchError>,
        errors: &mut Vec<&'static str>,
    ) -> Result<Option<T>, FetchError> {
        match answer {
            Err(e @ FetchError::HttpStatus { .. }) => {
                self.log_error(&e);
                errors.push(e.kind());
                Ok(None)
            }
            other => other,
        }
    }
}
