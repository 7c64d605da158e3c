//! `checkpoint-sentinel advise`: each job's checkpoint configuration against its own
//! checkpoints, as findings with the keys to set and the reference model's prediction before
//! and after (`docs/advice.md`), from a live cluster (`--url`, `--config`) or a captured folder
//! of Flink's JSON (`--replay`).
//!
//! Files: this one (arguments, the live fetch), [`report`] (what it found), [`replay`] (a
//! captured folder), [`render`] (text and the JSON contract). The advice itself is `crate::advice`, pure.

pub mod render;
pub mod replay;
pub(crate) mod report;

use std::path::PathBuf;
use std::time::Duration;

use crate::commands::diagnose::{self, DiagnoseArgs, DiagnoseError};
use crate::sources::flink::client::FlinkClient;
use crate::sources::flink::{convert, dto};
pub(crate) use report::{AdviseError, AdviseReport, job_advice};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Findings for people.
    Text,
    /// One JSON document (`docs/advice.md`).
    Json,
}

/// Arguments of `advise`.
#[derive(Clone, Debug, clap::Args)]
pub struct AdviseArgs {
    /// The JobManager's REST base URL, e.g. `http://127.0.0.1:8081`.
    #[arg(long, conflicts_with_all = ["config", "replay"])]
    pub url: Option<String>,
    /// Take the cluster's URL, credentials and CA from the daemon's configuration file.
    #[arg(long, conflicts_with = "replay")]
    pub config: Option<PathBuf>,
    /// With `--config`: which `[[clusters]]` entry (by `name`); needed when there are several.
    #[arg(long, requires = "config")]
    pub cluster: Option<String>,
    /// A folder of captured REST responses (`checkpoints-config.json`, `checkpoints.json`,
    /// `poll/`, `checkpoint-details/`, `job-config.json` …), read instead of a live cluster.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Advise only this job id (default: every job that has not ended).
    #[arg(long)]
    pub job: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// How many of the newest finished checkpoints to fetch in detail (for alignment).
    #[arg(long, default_value_t = 10)]
    pub checkpoints: usize,
    /// Timeout of each request.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub timeout: Duration,
}

/// Runs the command and returns what to print.
pub async fn run(args: &AdviseArgs) -> Result<String, AdviseError> {
    let report = match &args.replay {
        Some(dir) => replay::read(dir, args.job.as_deref())?,
        None if args.url.is_none() && args.config.is_none() => {
            return Err(AdviseError::Usage("give --url, --config (with --cluster) or --replay DIR".into()));
        }
        None => live(args).await?,
    };
    Ok(match args.format {
        Format::Json => render::json(&report),
        Format::Text => render::text(&report),
    })
}

/// A live cluster through the daemon's pipeline (`commands::look`): the poller's round into a
/// fresh `State`, then each job's advice from what the daemon would know of it
/// (`advice::job_inputs`, as its API's advice), not from a fetch of advise's own.
async fn live(args: &AdviseArgs) -> Result<AdviseReport, AdviseError> {
    let as_diagnose = DiagnoseArgs {
        url: args.url.clone(),
        config: args.config.clone(),
        cluster: args.cluster.clone(),
        job: args.job.clone(),
        format: diagnose::Format::Json,
        checkpoints: args.checkpoints,
        timeout: args.timeout,
    };
    let cluster = diagnose::cluster_config(&as_diagnose)?;
    let client = FlinkClient::new(&cluster).map_err(DiagnoseError::from)?.memoised();
    let overview = client.overview().await.map_err(DiagnoseError::from)?;
    let jobs = client.jobs_overview().await.map_err(DiagnoseError::from)?;
    let selected: Vec<&dto::JobOverview> = match &args.job {
        Some(id) => vec![
            jobs.jobs.iter().find(|j| &j.jid == id).ok_or_else(|| DiagnoseError::NoSuchJob(id.clone()))?,
        ],
        None => jobs.jobs.iter().filter(|j| !convert::job_status(j.state.as_deref()).has_ended()).collect(),
    };
    let (rules, window, _) = diagnose::rules_and_window(&as_diagnose)?;
    let look = crate::commands::look::look(&cluster, &client, &selected, rules, window, args.checkpoints)
        .await
        .map_err(DiagnoseError::from)?;
    let state = look.app.state.read();
    let mut out = Vec::new();
    if let Some(c) = state.clusters().get(&look.cluster) {
        for job in &selected {
            let Some(known) = c.jobs.get(&job.jid) else { continue };
            let Some((configuration, samples)) = crate::advice::job_inputs(known, c.flink_version.as_deref())
            else {
                continue;
            };
            let name = job.name.clone().unwrap_or_else(|| known.name.clone());
            let mut advice = job_advice(job.jid.clone(), name, &configuration, &samples);
            // The retention and cleanup findings of the look's storage round, as the API adds them.
            advice.advice = std::sync::Arc::unwrap_or_clone(crate::advice::with_storage(
                std::sync::Arc::new(advice.advice),
                known.storage.listing(),
            ));
            out.push(advice);
        }
    }
    Ok(AdviseReport {
        source: crate::config::redact_url(&cluster.url),
        flink_version: overview.flink_version,
        jobs: out,
    })
}
