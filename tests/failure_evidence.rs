//! The failure evidence behind FlinkCheckpointFailed on every JobManager log captured from real
//! Flink (2.3.0, 1.20.5, 1.14.6): each checkpoint the REST history says failed for a reason of
//! its own is counted from its log line, once, however many lines name it; the failures of a
//! job being cancelled or restarted ("Checkpoint Coordinator is suspending.") are not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use checkpoint_sentinel::commands::scan_logs::scan_paths;
use checkpoint_sentinel::observe::{CheckpointSettings, JobKey, JobPoll, Observation};
use checkpoint_sentinel::sources::logs::parse::Patterns;
use checkpoint_sentinel::state::{State, is_shutdown_failure};
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// id -> failure message of every failed checkpoint in a scenario's REST captures.
fn rest_failures(scenario: &Path) -> BTreeMap<u64, String> {
    let mut files =
        vec![scenario.join("rest/checkpoints.json"), scenario.join("rest/checkpoints-after-cancel.json")];
    if let Ok(text) = std::fs::read_to_string(scenario.join("rest/poll/index.tsv")) {
        for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            files.push(scenario.join("rest/poll").join(line.split('\t').nth(2).unwrap()));
        }
    }
    let mut out = BTreeMap::new();
    for f in files.iter().filter(|f| f.exists()) {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
        for h in v["history"].as_array().into_iter().flatten() {
            if h["status"] == "FAILED" {
                let message = h["failure_message"].as_str().unwrap_or_default().to_string();
                out.insert(h["id"].as_u64().unwrap(), message);
            }
        }
    }
    out
}

#[test]
fn every_real_failure_is_counted_once_from_the_log_and_shutdowns_not_at_all() {
    let mut checked = 0;
    let mut report = Vec::new();
    for version in ["flink-2.3.0", "flink-1.20.5", "flink-1.14.6"] {
        for scenario in ["healthy", "expired", "declined", "failover", "tolerable-exceeded", "minpause"] {
            let dir = fixtures().join(version).join(scenario);
            let Some(log) = std::fs::read_dir(dir.join("logs")).ok().and_then(|d| {
                d.flatten().map(|e| e.path()).find(|p| p.to_string_lossy().contains("standalonesession"))
            }) else {
                continue;
            };
            let events = scan_paths(&[log], &Patterns::builtin(), 1 << 20).unwrap().events;
            let mut jobs: BTreeMap<String, usize> = BTreeMap::new();
            for e in events.iter().filter(|e| e.kind == "triggered") {
                *jobs.entry(e.job_id.clone().unwrap_or_default()).or_default() += 1;
            }
            let Some((job, _)) = jobs.into_iter().max_by_key(|(_, n)| *n) else { continue };
            let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
            let poll = JobPoll {
                key: JobKey { cluster: "c".into(), job_id: job.clone() },
                job_name: scenario.into(),
                job_state: "RUNNING".into(),
                polled_at: Timestamp(0),
                counts: Default::default(),
                settings: Some(CheckpointSettings { timeout_ms: Some(60_000), ..Default::default() }),
                in_progress: Vec::new(),
                finished: Vec::new(),
                latest_restore: None,
                deferred: Default::default(),
            };
            state.apply(&Observation::JobPolled(poll), Timestamp(0));
            let mut events = events;
            for e in &mut events {
                e.cluster = "c".into();
            }
            state.apply(&Observation::LogEvents(events.clone()), Timestamp(1));
            let evidence = &state.clusters()["c"].jobs[&job].failures;

            let failed_in_log: BTreeSet<u64> = events
                .iter()
                .filter(|e| e.job_id.as_deref() == Some(job.as_str()))
                .filter(|e| ["expired", "declined", "failed"].contains(&e.kind.as_str()))
                .filter_map(|e| e.checkpoint_id)
                .collect();
            let rest = rest_failures(&dir);
            let (shutdown, real): (Vec<_>, Vec<_>) = rest.iter().partition(|(_, m)| is_shutdown_failure(m));
            for (id, message) in &real {
                // The log covers the job's whole life; REST's history is the last 10-20.
                if failed_in_log.contains(id) {
                    assert!(
                        evidence.counted(**id),
                        "{version}/{scenario}: checkpoint {id} ({message}) not counted"
                    );
                }
            }
            for (id, message) in &shutdown {
                assert!(!evidence.counted(**id), "{version}/{scenario}: checkpoint {id} ({message}) counted");
            }
            if scenario == "expired" {
                let expired: BTreeSet<u64> = events
                    .iter()
                    .filter(|e| e.kind == "expired" && e.job_id.as_deref() == Some(job.as_str()))
                    .filter_map(|e| e.checkpoint_id)
                    .collect();
                assert_eq!(evidence.total, expired.len() as u64, "{version}/{scenario}: one per expiry");
            }
            if scenario == "healthy" || scenario == "minpause" {
                assert_eq!(evidence.total, 0, "{version}/{scenario}");
            }
            assert!(evidence.total <= failed_in_log.len() as u64, "{version}/{scenario}: counted twice");
            report.push(format!(
                "{version}/{scenario}: {} counted, {} real and {} shutdown failures in REST",
                evidence.total,
                real.len(),
                shutdown.len()
            ));
            checked += 1;
        }
    }
    assert!(checked >= 15, "{report:#?}");
    println!("{}", report.join("\n"));
}
