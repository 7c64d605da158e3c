//! `advise --replay DIR`: the advice from a folder of captured REST responses, as the
//! fixtures hold them (`DIR` or `DIR/rest`): `checkpoints-config.json` (required),
//! `checkpoints.json` and `poll/checkpoints-*.json` (merged by id), `checkpoint-details/`
//! (`checkpoint-<id>-subtasks-<vertex>.json`), `job.json`, `job-config.json`,
//! `job-jobmanager-config.json` (`/jobs/:id/jobmanager/config`), `jobmanager-config.json`,
//! `jobs-overview.json`, `overview.json` or `config.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::report::{AdviseError, AdviseReport, job_advice};
use crate::advice::Sample;
use crate::sources::flink::{convert, dto};

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, AdviseError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(AdviseError::Replay(format!("cannot read {}: {e}", path.display()))),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        AdviseError::Replay(format!("{} is not the Flink JSON it should be: {e}", path.display()))
    })
}

/// Reads the captured folder `dir` and advises its job.
pub fn read(dir: &Path, only_job: Option<&str>) -> Result<AdviseReport, AdviseError> {
    let rest: PathBuf = if dir.join("rest").is_dir() { dir.join("rest") } else { dir.to_path_buf() };
    let config: dto::CheckpointConfig =
        read_json(&rest.join("checkpoints-config.json"))?.ok_or_else(|| {
            AdviseError::Replay(format!(
                "{} has no checkpoints-config.json (a job's /checkpoints/config)",
                rest.display()
            ))
        })?;
    let mut responses: Vec<dto::CheckpointingStatistics> = Vec::new();
    let mut polls: Vec<PathBuf> = std::fs::read_dir(rest.join("poll"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    polls.sort();
    for path in polls.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        responses.extend(read_json::<dto::CheckpointingStatistics>(path)?);
    }
    responses.extend(read_json::<dto::CheckpointingStatistics>(&rest.join("checkpoints.json"))?);
    // The newest word on each id: later responses replace earlier ones, a final status stays.
    let mut by_id: BTreeMap<u64, dto::CheckpointStatistics> = BTreeMap::new();
    for cp in responses.iter().flat_map(|r| &r.history) {
        if convert::status(cp).is_some() || !by_id.contains_key(&cp.id) {
            by_id.insert(cp.id, cp.clone());
        }
    }
    let job: Option<dto::JobDetails> = read_json(&rest.join("job.json"))?;
    let names = crate::commands::diagnose::vertex_names(job.as_ref());
    let mut samples = Vec::new();
    for cp in by_id.values() {
        let mut per_vertex = Vec::new();
        for vid in names.keys() {
            let path =
                rest.join("checkpoint-details").join(format!("checkpoint-{}-subtasks-{vid}.json", cp.id));
            if let Some(d) = read_json::<dto::TaskCheckpointDetails>(&path)? {
                per_vertex.push((vid.clone(), d));
            }
        }
        let views: Vec<convert::VertexDetails<'_>> = per_vertex
            .iter()
            .map(|(vid, d)| convert::VertexDetails { vertex_id: vid, name: &names[vid], details: d })
            .collect();
        samples.extend(convert::finished(cp, &views).as_ref().and_then(Sample::from_finished));
    }
    let job_config: Option<dto::JobConfig> = read_json(&rest.join("job-config.json"))?;
    let cluster: Vec<dto::ConfigEntry> = read_json(&rest.join("jobmanager-config.json"))?.unwrap_or_default();
    let version = read_json::<dto::ClusterOverview>(&rest.join("overview.json"))?
        .and_then(|o| o.flink_version)
        .or(read_json::<dto::DashboardConfig>(&rest.join("config.json"))?.and_then(|c| c.flink_version));
    let overview: Option<dto::JobsOverview> = read_json(&rest.join("jobs-overview.json"))?;
    let listed = overview.as_ref().and_then(|o| o.jobs.first());
    let job_id =
        job.as_ref().and_then(|j| j.jid.clone()).or(listed.map(|j| j.jid.clone())).unwrap_or_default();
    if only_job.is_some_and(|id| id != job_id) {
        return Err(AdviseError::Replay(format!(
            "{} holds job {job_id}, not {}",
            rest.display(),
            only_job.unwrap_or("")
        )));
    }
    let name =
        job.as_ref().and_then(|j| j.name.clone()).or(listed.and_then(|j| j.name.clone())).unwrap_or_default();
    let job_options: Vec<dto::ConfigEntry> =
        read_json(&rest.join("job-jobmanager-config.json"))?.unwrap_or_default();
    let configuration =
        convert::configuration_of(&config, job_config.as_ref(), &job_options, &cluster, version.as_deref());
    Ok(AdviseReport {
        source: dir.display().to_string(),
        flink_version: version,
        jobs: vec![job_advice(job_id, name, &configuration, &samples)],
    })
}
