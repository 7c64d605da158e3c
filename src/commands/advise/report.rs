//! What `advise` found: per job its id, name and advice, and why it could not run.

use crate::advice::{self, Advice, Sample};
use crate::commands::diagnose::DiagnoseError;

/// Why `advise` cannot run.
#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    /// The cluster could not be reached or configured (as `diagnose` says).
    #[error(transparent)]
    Cluster(#[from] DiagnoseError),
    /// A captured file cannot be read or parsed.
    #[error("{0}")]
    Replay(String),
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
}

/// One job's advice and who it is.
#[derive(Clone, Debug)]
pub(crate) struct JobAdvice {
    /// The job id.
    pub(crate) job_id: String,
    /// The job name.
    pub(crate) name: String,
    /// The advice.
    pub(crate) advice: Advice,
}

/// What `advise` found.
#[derive(Clone, Debug)]
pub struct AdviseReport {
    /// The URL or folder read.
    pub(crate) source: String,
    /// Flink's version.
    pub(crate) flink_version: Option<String>,
    /// Per job.
    pub(crate) jobs: Vec<JobAdvice>,
}

/// The advice of `samples` under `configuration`.
pub(crate) fn job_advice(
    job_id: String,
    name: String,
    configuration: &crate::observe::CheckpointConfiguration,
    samples: &[Sample],
) -> JobAdvice {
    JobAdvice { job_id, name, advice: advice::advise(configuration, samples) }
}
