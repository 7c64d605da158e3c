//! Every JSON response captured from real Flink (2.3.0, 1.20.5, 1.14.6) parses with our models,
//! and the conversions give the values Flink reported.

use crate::common;

use std::path::{Path, PathBuf};

use checkpoint_sentinel::observe::{CheckpointStatus, SnapshotKind};
use checkpoint_sentinel::sources::flink::{convert, dto};
use common::fixtures;

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(path: &Path) -> T {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Which model a captured file is a response of, from its name; `None` for endpoints we do
/// not read (metrics, exceptions, task managers, …), which must still be valid JSON.
fn check_file(path: &Path) -> Option<&'static str> {
    let name = path.file_name().unwrap().to_string_lossy();
    let kind = if name == "overview.json" {
        parse::<dto::ClusterOverview>(path);
        "overview"
    } else if name == "jobs-overview.json" {
        parse::<dto::JobsOverview>(path);
        "jobs-overview"
    } else if name == "job.json" || name == "job-after-cancel.json" {
        parse::<dto::JobDetails>(path);
        "job"
    } else if name == "checkpoints-config.json" {
        parse::<dto::CheckpointConfig>(path);
        "checkpoints-config"
    } else if name.starts_with("checkpoints") {
        let stats: dto::CheckpointingStatistics = parse(path);
        for cp in &stats.history {
            // Each history entry converts (finished ones) or is in progress.
            if convert::status(cp).is_some() {
                assert!(convert::finished(cp, &[]).is_some());
            }
        }
        "checkpoints"
    } else if name.starts_with("checkpoint-") && name.contains("-subtasks-") {
        let details: dto::TaskCheckpointDetails = parse(path);
        assert!(!details.subtasks.is_empty(), "{}", path.display());
        "subtasks"
    } else if name.starts_with("checkpoint-") {
        parse::<dto::CheckpointStatistics>(path);
        "details"
    } else {
        parse::<serde_json::Value>(path);
        return None;
    };
    Some(kind)
}

#[test]
fn every_captured_response_parses() {
    let mut files = Vec::new();
    json_files(&fixtures(), &mut files);
    assert!(files.len() > 3000, "fixtures missing? found {}", files.len());
    let mut by_kind = std::collections::BTreeMap::new();
    for f in &files {
        if let Some(kind) = check_file(f) {
            *by_kind.entry(kind).or_insert(0) += 1;
        }
    }
    for kind in
        ["overview", "jobs-overview", "job", "checkpoints-config", "checkpoints", "details", "subtasks"]
    {
        assert!(by_kind.get(kind).copied().unwrap_or(0) > 10, "few {kind} files: {by_kind:?}");
    }
}

fn fixture(version: &str, rest: &str) -> PathBuf {
    fixtures().join(format!("flink-{version}")).join(rest)
}

#[test]
fn both_type_tags_and_nan_percentiles_are_read() {
    for (version, tag) in [("1.14.6", "@class"), ("2.3.0", "className")] {
        let path = fixture(
            version,
            "backpressure/rest/checkpoint-details/checkpoint-16-subtasks-857e9877747f27b5e758680f3644828a.json",
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("{}", path.display()));
        assert!(text.contains(tag) && text.contains("\"NaN\""), "{version} fixture shape changed");
        let details: dto::TaskCheckpointDetails = parse(&path);
        assert!(details.subtasks.iter().all(|st| st.is_completed()), "{version}");
    }
}

#[test]
fn state_size_means_checkpointed_size_before_1_15() {
    // 1.14: no checkpointed_size; state_size is the (incremental) checkpointed size.
    let old: dto::CheckpointingStatistics = parse(&fixture("1.14.6", "incremental/rest/checkpoints.json"));
    let cp = old.history.iter().find_map(|h| convert::finished(h, &[])).unwrap();
    assert!(cp.checkpointed_bytes.is_some());
    assert_eq!(cp.full_state_bytes, None);
    // 1.15+: checkpointed_size is the upload, state_size the full size (equal for hashmap).
    let new: dto::CheckpointingStatistics = parse(&fixture("2.3.0", "healthy/rest/checkpoints.json"));
    let cp = new.history.iter().find_map(|h| convert::finished(h, &[])).unwrap();
    let raw = new.history.iter().find(|h| h.id == cp.id).unwrap();
    assert_eq!(cp.checkpointed_bytes, raw.checkpointed_size.map(|v| v as u64));
    assert_eq!(cp.full_state_bytes, raw.state_size.map(|v| v as u64));
}

#[test]
fn unaligned_checkpoints_are_recognised_in_every_version() {
    for version in ["1.14.6", "1.20.5", "2.3.0"] {
        let dir = fixture(version, "backpressure-unaligned/rest");
        let summary: dto::CheckpointingStatistics = parse(&dir.join("checkpoints.json"));
        let entry =
            summary.history.iter().find(|h| convert::status(h) == Some(CheckpointStatus::Completed)).unwrap();
        let details: dto::CheckpointStatistics =
            parse(&dir.join(format!("checkpoint-details/checkpoint-{}.json", entry.id)));
        let vertex_details: Vec<(String, dto::TaskCheckpointDetails)> = details
            .tasks
            .keys()
            .map(|vid| {
                (
                    vid.clone(),
                    parse(
                        &dir.join(format!("checkpoint-details/checkpoint-{}-subtasks-{vid}.json", entry.id)),
                    ),
                )
            })
            .collect();
        let views: Vec<convert::VertexDetails<'_>> = vertex_details
            .iter()
            .map(|(vid, d)| convert::VertexDetails { vertex_id: vid, name: vid, details: d })
            .collect();
        let cp = convert::finished(entry, &views).unwrap();
        assert_eq!(cp.kind, SnapshotKind::UnalignedCheckpoint, "{version}");
        assert!(cp.persisted_bytes.unwrap_or(0) > 0, "{version}");
    }
}

#[test]
fn failed_checkpoints_carry_their_reason() {
    let stats: dto::CheckpointingStatistics = parse(&fixture("2.3.0", "expired/rest/checkpoints.json"));
    let failed: Vec<_> = stats
        .history
        .iter()
        .filter_map(|h| convert::finished(h, &[]))
        .filter(|cp| cp.status == CheckpointStatus::Failed)
        .collect();
    assert!(!failed.is_empty());
    for cp in failed {
        assert_eq!(cp.failure_message.as_deref(), Some("Checkpoint expired before completing."));
        assert!(cp.finished_at > cp.triggered_at);
    }
}

#[test]
fn checkpoint_config_converts() {
    // The job ran with interval 2 s and min-pause 5 s. Flink 1.x reports the configured
    // interval; 2.3.0 reports the effective one, max(interval, min-pause).
    for (version, interval) in [("1.14.6", 2000), ("1.20.5", 2000), ("2.3.0", 5000)] {
        let config: dto::CheckpointConfig = parse(&fixture(version, "minpause/rest/checkpoints-config.json"));
        let s = convert::settings(&config);
        assert_eq!((s.interval_ms, s.min_pause_ms, s.max_concurrent), (Some(interval), 5000, 1), "{version}");
        assert!(s.exactly_once);
    }
}

/// Where each subtask runs, from `/jobs/:id/vertices/:vid` of every version: 1.14 lists the
/// host, 1.20 host and endpoint, 2.x the endpoint only; the TaskManager id in all of them.
#[test]
fn subtask_locations_are_read_in_every_version() {
    let vertex = "5a44ef70092224af50ee1c30c6ad3cec";
    for (version, want) in [
        ("1.14.6", "127.0.0.1:21125-a2bac7 (localhost)"),
        ("1.20.5", "127.0.0.1:19125-bd2dde (localhost:19126)"),
        ("2.3.0", "127.0.0.1:18125-6451c0 (localhost:18126)"),
    ] {
        let path = fixture(version, &format!("backpressure-debuglog/rest/vertices/{vertex}.json"));
        let details: dto::VertexDetails = parse(&path);
        let load = convert::vertex_load(vertex, 2, Some(&details), None, &[]);
        assert_eq!(load.taskmanagers.len(), details.subtasks.len(), "{version}");
        assert!(
            load.taskmanagers.iter().all(|tm| tm.as_deref() == Some(want)),
            "{version}: {:?}",
            load.taskmanagers
        );
    }
}

/// Flink's per-second rates are 60 s meters whose history starts at zero: 42 s into the live
/// e2e backpressure job, stateful-map's hot subtask reports ~1085 records in per second while
/// its counters say ~1650 per second of running time, the rate the lab capture's meter shows
/// two minutes in. A subtask's rate is its count over its running time until the meter's
/// window has filled, and the meter after that.
#[test]
fn a_young_subtasks_rate_is_its_count_over_its_running_time() {
    let vertex = "857e9877747f27b5e758680f3644828a";
    let load = |version: &str, scenario: &str| {
        let dir = format!("{scenario}/rest/vertices/{vertex}");
        let details: dto::VertexDetails = parse(&fixture(version, &format!("{dir}.json")));
        let metrics: Vec<dto::MetricValue> = parse(&fixture(version, &format!("{dir}-metrics-values.json")));
        let meter = |i: u32| {
            let id = format!("{i}.numRecordsInPerSecond");
            metrics
                .iter()
                .find(|m| m.id == id)
                .and_then(|m| m.value.as_deref())
                .unwrap()
                .parse::<f64>()
                .unwrap()
        };
        let load = convert::vertex_load(vertex, 2, Some(&details), None, &metrics);
        (load.subtasks[1].records_in_per_s.unwrap(), meter(1))
    };
    let (lab, lab_meter) = load("2.3.0", "backpressure");
    assert_eq!(lab, lab_meter, "two minutes in, the meter is the rate");
    let (young, young_meter) = load("2.3.0", "backpressure-e2e");
    assert!(young_meter < 0.7 * lab_meter, "the capture is of a young job: {young_meter} vs {lab_meter}");
    assert!((young / lab - 1.0).abs() < 0.05, "{young} records/s at 42 s vs {lab} at two minutes");

    // Without the accumulated times (1.14), the time since the subtask was deployed.
    let details: dto::VertexDetails = serde_json::from_str(
        r#"{"subtasks": [{"subtask": 0, "duration": 30000, "metrics": {"read-records": 45000, "write-records": 15000}}]}"#,
    )
    .unwrap();
    let metrics: Vec<dto::MetricValue> =
        serde_json::from_str(r#"[{"id": "0.numRecordsInPerSecond", "value": "750.0"}, {"id": "0.numRecordsOutPerSecond", "value": "250.0"}]"#)
            .unwrap();
    let load = convert::vertex_load("v", 1, Some(&details), None, &metrics);
    assert_eq!(
        (load.subtasks[0].records_in_per_s, load.subtasks[0].records_out_per_s),
        (Some(1500.0), Some(500.0))
    );
}

/// A subtask that is not deployed yet has no location: Flink fills its fields with
/// `(unassigned)`, which must not be shown as a TaskManager.
#[test]
fn an_unassigned_subtask_has_no_taskmanager() {
    let subtask = |json: &str| -> dto::VertexSubtask { serde_json::from_str(json).unwrap() };
    let unassigned = r#"{"subtask": 0, "host": "(unassigned)", "endpoint": "(unassigned)", "taskmanager-id": "(unassigned)"}"#;
    assert_eq!(convert::taskmanager_of(&subtask(unassigned)), None);
    assert_eq!(
        convert::taskmanager_of(&subtask(
            r#"{"subtask": 1, "host": "tm-host", "taskmanager-id": "(unassigned)"}"#
        )),
        Some("tm-host".to_string())
    );
}
