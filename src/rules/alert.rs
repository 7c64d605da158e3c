//! The alert types readers see: an alert, its state, and the evaluator's conclusions copied out
//! for readers and indexed by job.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::labels::Labels;
use crate::time::Timestamp;

/// Where an alert is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    /// The condition holds, not yet for `for`.
    Pending,
    /// The condition has held for `for`.
    Firing,
    /// It fired, and the condition no longer holds.
    Resolved,
}

impl AlertState {}

/// One alert instance: a rule for one job, cluster or TaskManager.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// Identity: alertname, severity, class, the subject's labels (`cluster`, and `job_id` and
    /// `job_name` or `taskmanager`) and the rule's labels.
    pub labels: Labels,
    /// summary, description, runbook_url (rendered with the latest values).
    pub annotations: Labels,
    /// Where it is.
    pub state: AlertState,
    /// Since when the condition holds.
    pub(crate) active_since: Timestamp,
    /// When it started firing.
    pub(crate) fired_at: Option<Timestamp>,
    /// When it resolved.
    pub(crate) resolved_at: Option<Timestamp>,
    /// The latest value of the condition's left side.
    pub value: Option<f64>,
}

impl Alert {
    /// The alert's name.
    pub fn name(&self) -> &str {
        self.labels.get("alertname").map_or("", |s| s.as_str())
    }
}

/// Indices of alerts by (cluster, job id).
pub(crate) type AlertsByJob = HashMap<(String, String), Vec<usize>>;

/// What the rule evaluator last concluded, copied out for readers (the API, `/metrics`).
#[derive(Debug, Default)]
pub struct AlertsView {
    /// Per rule: (name, severity label).
    pub(crate) rules: Vec<(String, &'static str)>,
    /// Pending and firing alerts, shared with the evaluator (`Evaluator::active_shared`).
    pub active: Vec<Arc<Alert>>,
    /// Recently resolved alerts, oldest first.
    pub(crate) resolved: Vec<Alert>,
    /// Indices into `active` by (cluster, job id), built on first use: the health of every job
    /// asks for its own alerts, and a scan of all alerts per job was quadratic (three quarters
    /// of the daemon's CPU at 2,000 jobs, issue 31). Reset by [`AlertsView::set_active`] and
    /// by a clone; kept with the length of `active` it was built for, and not used when that
    /// changed since (an alert pushed onto `active` directly).
    pub(crate) by_job: std::sync::OnceLock<(usize, AlertsByJob)>,
    /// The incidents of the same evaluation (`rules::incidents`): many jobs, one cause.
    pub(crate) incidents: Arc<Vec<super::incidents::Incident>>,
}

impl Clone for AlertsView {
    fn clone(&self) -> Self {
        AlertsView {
            rules: self.rules.clone(),
            active: self.active.clone(),
            resolved: self.resolved.clone(),
            by_job: std::sync::OnceLock::new(),
            incidents: Arc::clone(&self.incidents),
        }
    }
}

impl AlertsView {
    /// Replaces the active alerts (and forgets the index of the old ones).
    pub(crate) fn set_active(&mut self, active: Vec<Arc<Alert>>) {
        self.active = active;
        self.by_job = std::sync::OnceLock::new();
    }

    /// The active alerts of one job, in the order of `active`.
    pub(crate) fn of_job<'a>(
        &'a self,
        cluster: &str,
        job_id: &str,
    ) -> impl Iterator<Item = &'a Alert> + Clone + 'a {
        let (built_for, index) = self.by_job.get_or_init(|| {
            let mut index = AlertsByJob::new();
            for (i, a) in self.active.iter().enumerate() {
                if let (Some(c), Some(j)) = (a.labels.get("cluster"), a.labels.get("job_id")) {
                    index.entry((c.to_string(), j.to_string())).or_default().push(i);
                }
            }
            (self.active.len(), index)
        });
        let indices: Vec<usize> = if *built_for == self.active.len() {
            index.get(&(cluster.to_string(), job_id.to_string())).cloned().unwrap_or_default()
        } else {
            let of_job = |a: &Alert| {
                a.labels.get("cluster").is_some_and(|c| c == cluster)
                    && a.labels.get("job_id").is_some_and(|j| j == job_id)
            };
            (0..self.active.len()).filter(|&i| of_job(&self.active[i])).collect()
        };
        indices.into_iter().map(|i| &*self.active[i])
    }
}
