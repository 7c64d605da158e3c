//! A cluster's applications (Flink 2.3+, FLIP-549): `/applications/overview` each round, and
//! `/applications/:id` only for an application whose jobs cannot be told from the overview (a
//! single-job application has its job's id) or changed in number since; none of it on a version
//! without applications (the overview answers 404: never asked again).

use std::collections::HashSet;

use super::Poller;
use crate::observe::{Application, ApplicationsReport, Observation};

/// At most this many applications are kept per round (the rest counted as cut).
pub(super) const MAX_APPLICATIONS: usize = 1_000;
/// At most this many `/applications/:id` requests per round; the others wait for later rounds.
const DETAILS_PER_ROUND: usize = 8;

impl Poller {
    /// Reads the cluster's applications and applies them; `listed` are the job ids
    /// `/jobs/overview` listed this round.
    pub(super) async fn poll_applications(&mut self, listed: &HashSet<String>) {
        if self.applications.unavailable || self.only.is_some() {
            return;
        }
        let overview = match self.fetch(self.client.applications_overview()).await {
            Ok(Some(overview)) => overview,
            Ok(None) => {
                self.applications.unavailable = true;
                return;
            }
            Err(e) => {
                self.log_error(&e);
                return;
            }
        };
        let mut listed_apps = overview.applications;
        if listed_apps.len() > MAX_APPLICATIONS {
            let cut = listed_apps.len() - MAX_APPLICATIONS;
            listed_apps.truncate(MAX_APPLICATIONS);
            self.app.count_cut(&self.config.name, "applications", cut as u64);
        }
        let mut details_left = DETAILS_PER_ROUND;
        let mut out = Vec::with_capacity(listed_apps.len());
        for a in &listed_apps {
            let total: u64 = a.jobs.values().sum();
            let known =
                self.applications.jobs.get(&a.id).filter(|(n, _)| *n == total).map(|(_, ids)| ids.clone());
            let job_ids = if total == 1 && listed.contains(&a.id) {
                vec![a.id.clone()]
            } else if let Some(ids) = known {
                ids
            } else if details_left > 0 {
                details_left -= 1;
                match self.fetch(self.client.application(&a.id)).await {
                    Ok(Some(details)) => {
                        let ids: Vec<String> = details.jobs.into_iter().map(|j| j.jid).collect();
                        self.applications.jobs.insert(a.id.clone(), (total, ids.clone()));
                        ids
                    }
                    Ok(None) => continue,
                    Err(e) => {
                        self.log_error(&e);
                        continue;
                    }
                }
            } else {
                continue;
            };
            out.push(Application {
                id: a.id.clone(),
                name: a.name.clone().unwrap_or_default(),
                status: a.status.clone().unwrap_or_default(),
                job_ids,
            });
        }
        let ids: HashSet<&str> = listed_apps.iter().map(|a| a.id.as_str()).collect();
        self.applications.jobs.retain(|id, _| ids.contains(id.as_str()));
        let report = ApplicationsReport { cluster: self.config.name.clone(), applications: out };
        self.app.apply(&Observation::Applications(report));
    }
}
