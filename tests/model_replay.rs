//! Validates the coordinator model against real Flink: replays every captured scenario's
//! observed checkpoints and requires the predicted trigger times to be within 50 ms (median).

use std::path::{Path, PathBuf};

use checkpoint_sentinel::model::coordinator::{Binding, CoordinatorConfig};
use checkpoint_sentinel::model::replay::{ReplayReport, merge_history, replay};
use checkpoint_sentinel::sources::flink::{convert, dto};

const VERSIONS: [&str; 3] = ["2.3.0", "1.20.5", "1.14.6"];
const SCENARIOS: [&str; 5] = ["healthy", "minpause", "expired", "declined", "backpressure"];

fn rest_dir(version: &str, scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/flink-{version}/{scenario}/rest"))
}

/// The same inputs `checkpoint-sentinel simulate --checkpoint-config … --history …` reads:
/// every polled `/checkpoints` response plus the final one.
fn replay_fixture(version: &str, scenario: &str) -> ReplayReport {
    let dir = rest_dir(version, scenario);
    let config: dto::CheckpointConfig =
        serde_json::from_slice(&std::fs::read(dir.join("checkpoints-config.json")).unwrap()).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("poll"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("checkpoints-"))
        .collect();
    files.sort();
    files.push(dir.join("checkpoints.json"));
    let responses: Vec<dto::CheckpointingStatistics> =
        files.iter().map(|f| serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap()).collect();
    let settings = convert::settings(&config);
    let model = CoordinatorConfig::from_settings(&settings).expect("periodic checkpointing is on");
    replay(model, &merge_history(&responses))
}

#[test]
fn replay_of_real_flink_is_within_50_ms() {
    let mut failures = Vec::new();
    println!(
        "| Flink | scenario | paired | median abs dev (ms) | max abs dev (ms) | effective interval (ms) | binding |"
    );
    println!("|---|---|---:|---:|---:|---:|---|");
    for version in VERSIONS {
        for scenario in SCENARIOS {
            let r = replay_fixture(version, scenario);
            let max = r.rows.iter().map(|row| row.deviation_ms.unsigned_abs()).max().unwrap_or(0);
            println!(
                "| {version} | {scenario} | {} | {} | {max} | {} | {} |",
                r.rows.len(),
                r.median_abs_deviation_ms,
                r.effective_interval_ms,
                r.binding.as_str()
            );
            if r.rows.len() < 10 {
                failures.push(format!("{version}/{scenario}: only {} paired checkpoints", r.rows.len()));
            }
            if r.median_abs_deviation_ms > 50 {
                failures.push(format!(
                    "{version}/{scenario}: median |deviation| {} ms",
                    r.median_abs_deviation_ms
                ));
            }
            if !r.unpaired_observed.is_empty() {
                failures.push(format!("{version}/{scenario}: unpaired observed {:?}", r.unpaired_observed));
            }
            if scenario == "minpause" && r.binding != Binding::MinPause {
                failures.push(format!("{version}/{scenario}: binding {:?}", r.binding));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The expired scenario exercises the timeout rule: the request queued during an expiring
/// checkpoint runs at the expiry, and the next one when the slow follower completes.
#[test]
fn expired_scenario_is_explained_by_timeout_and_max_concurrent() {
    for version in VERSIONS {
        let r = replay_fixture(version, "expired");
        let bindings: std::collections::BTreeSet<Binding> = r.rows.iter().map(|row| row.binding).collect();
        assert!(bindings.contains(&Binding::Timeout), "{version}: {bindings:?}");
        assert!(bindings.contains(&Binding::MaxConcurrent), "{version}: {bindings:?}");
        for row in r.rows.iter().filter(|row| row.binding == Binding::Timeout) {
            assert!(
                row.deviation_ms.abs() <= 20,
                "{version}: checkpoint {} off by {} ms",
                row.id,
                row.deviation_ms
            );
        }
    }
}
