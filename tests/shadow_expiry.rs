//! The trigger shadow on the captures whose checkpoints expire while a task thread is blocked
//! (`blocked`: a map sleeps 40 s with a 10 s timeout) or the JobManager/TaskManager is in GC
//! (`gc`), every captured version: no trigger is unexplained, no stall, so
//! `FlinkCheckpointScheduleUnexplained` stays quiet.
//!
//! These captures poll `/checkpoints` every 5 s into `poll/NNN-checkpoints.json` (times in
//! `index.tsv`, ms after the job's submission); the snapshot `rest/checkpoints.json` is the
//! last step.

use std::path::Path;

use checkpoint_sentinel::observe::JobPoll;
use checkpoint_sentinel::shadow::{DeviationKind, Shadow};
use checkpoint_sentinel::time::Timestamp;
use serde_json::Value;

use crate::common::{Scenario, fixtures, read_json};

const VERSIONS: [&str; 4] = ["2.3.0", "1.20.5", "1.17.2", "1.14.6"];

/// A capture of the `poll/` layout as a scenario and its job polls.
pub(crate) fn polls_of(version: &str, name: &str) -> (Scenario, Vec<JobPoll>) {
    let dir = fixtures().join(format!("flink-{version}")).join(name);
    let meta = read_json(&dir.join("scenario.json"));
    let submitted = meta["submitted_ms"].as_i64().unwrap();
    let job_id = meta["job_id"].as_str().unwrap().to_string();
    let index = std::fs::read_to_string(dir.join("index.tsv")).unwrap();
    let suffix = format!("/jobs/{job_id}/checkpoints");
    let times: Vec<i64> = index
        .lines()
        .skip(1)
        .filter(|l| l.split('\t').nth(1) == Some(suffix.as_str()))
        .map(|l| submitted + l.split('\t').next().unwrap().parse::<i64>().unwrap())
        .collect();
    let mut files: Vec<_> = std::fs::read_dir(dir.join("poll"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-checkpoints.json"))
        .collect();
    files.sort();
    // The index also lists the snapshot's requests after the series.
    assert!(files.len() <= times.len(), "{version} {name}: one time per poll");
    let mut polls: Vec<Value> = files.iter().map(|p| read_json(p)).collect();
    let mut times = times[..files.len()].to_vec();
    polls.push(read_json(&dir.join("rest/checkpoints.json")));
    times.push(meta["captured_until_ms"].as_i64().unwrap());
    let scenario = Scenario { dir: dir.clone(), job_id, polls: polls.clone() };
    let job_polls = scenario.job_polls_at(&polls, &times);
    (scenario, job_polls)
}

fn run(version: &str, name: &str) -> (Shadow, Vec<String>) {
    replay(version, polls_of(version, name).1)
}

fn replay(version: &str, polls: Vec<JobPoll>) -> (Shadow, Vec<String>) {
    let mut shadow = Shadow::new();
    shadow.trigger.set_flink_version(Some(version));
    let mut stalls = Vec::new();
    for poll in &polls {
        shadow.observe_poll(poll);
        if let Some(ms) = shadow.trigger.stalled_for_ms() {
            stalls.push(format!("stall of {ms} ms at poll {}", poll.polled_at.millis()));
        }
    }
    (shadow, stalls)
}

#[test]
fn expiring_checkpoints_leave_no_trigger_unexplained_on_any_version() {
    let mut problems = Vec::new();
    for version in VERSIONS {
        for name in ["blocked", "gc"] {
            if !Path::new(&fixtures().join(format!("flink-{version}/{name}"))).exists() {
                continue;
            }
            let (shadow, stalls) = run(version, name);
            for d in shadow.trigger.deviations() {
                println!(
                    "{version} {name}: {} {} @{} {:?}: {}",
                    d.checkpoint_id,
                    d.explained,
                    d.at.millis(),
                    d.kind,
                    d.sentence
                );
                // Every deviation is a queued trigger: at an expiry, or when the blocked
                // checkpoint (or a queued one after it) completed.
                if !matches!(d.kind, DeviationKind::Timeout | DeviationKind::LongCheckpoint) {
                    problems.push(format!("{version} {name}: {:?}: {}", d.kind, d.sentence));
                }
            }
            println!("{version} {name}: {:?}", shadow.trigger.headline());
            problems.extend(stalls.into_iter().map(|s| format!("{version} {name}: {s}")));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_trigger_delayed_after_the_queue_drained_is_still_unexplained() {
    for version in VERSIONS {
        let (_, mut polls) = polls_of(version, "blocked");
        // Checkpoint 19 is on the grid again (nothing queued): 1.2 s late, no rule explains it.
        for poll in &mut polls {
            for cp in poll.finished.iter_mut().filter(|c| c.id == 19) {
                cp.triggered_at = Timestamp(cp.triggered_at.millis() + 1_200);
                cp.finished_at = Timestamp(cp.finished_at.millis() + 1_200);
            }
            for cp in poll.in_progress.iter_mut().filter(|c| c.id == 19) {
                cp.triggered_at = Timestamp(cp.triggered_at.millis() + 1_200);
            }
        }
        let (shadow, _) = replay(version, polls);
        let unexplained: Vec<_> =
            shadow.trigger.deviations().filter(|d| !d.explained).map(|d| (d.checkpoint_id, d.kind)).collect();
        assert_eq!(unexplained, vec![(19, DeviationKind::LateTrigger)], "{version}");
    }
}

/// What `diagnose` says of the spacing: the shadow over the one snapshot it fetches.
#[test]
fn the_spacing_diagnose_gives_from_the_last_snapshot_names_the_queue_or_the_timeout() {
    for version in VERSIONS {
        for name in ["blocked", "gc"] {
            let (scenario, polls) = polls_of(version, name);
            // Only the snapshot, as diagnose fetches it (its history: the last 10).
            let at = polls.last().unwrap().polled_at.millis();
            let all = scenario.job_polls_at(&scenario.polls[scenario.polls.len() - 1..], &[at]).remove(0);
            let mut shadow = Shadow::new();
            shadow.trigger.set_flink_version(Some(version));
            shadow.observe_poll(&all);
            let ex = shadow.explanation();
            let last = ex.last_unexplained.clone().or(ex.last_deviation.clone()).map(|d| d.sentence);
            println!("{version} {name}: {:?} | {:?}", ex.schedule, last);
            assert!(ex.last_unexplained.is_none(), "{version} {name}: {last:?}");
            let text = format!("{:?} {:?}", ex.schedule, last);
            assert!(!text.contains("manual trigger"), "{version} {name}: {text}");
        }
    }
}
