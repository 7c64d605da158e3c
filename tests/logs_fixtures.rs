//! The log parser on every log captured from real Flink (2.3.0, 1.20.5, 1.14.6): expired and
//! declined events agree with the JobManager's own lines and with the REST failure history of
//! the same run, and `scan-logs` prints sensible text and JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use checkpoint_sentinel::commands::scan_logs::{ScanReport, scan_paths};
use checkpoint_sentinel::sources::logs::parse::Patterns;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every `flink-*/<scenario>/logs/` directory.
fn log_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for version in std::fs::read_dir(fixtures()).unwrap().flatten() {
        if !version.file_name().to_string_lossy().starts_with("flink-") {
            continue;
        }
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            let logs = scenario.path().join("logs");
            if logs.is_dir() {
                out.push(logs);
            }
        }
    }
    out.sort();
    out
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    files.sort();
    files
}

fn jobmanager_log(dir: &Path) -> PathBuf {
    files_in(dir).into_iter().find(|p| p.to_string_lossy().contains("standalonesession")).unwrap()
}

fn ids_of(report: &ScanReport, kind: &str) -> Vec<u64> {
    report.events.iter().filter(|e| e.kind == kind).filter_map(|e| e.checkpoint_id).collect()
}

/// The REST failure history of a scenario: every finished checkpoint in the poll series and the
/// final snapshot, id → (status, failure_message).
fn rest_history(scenario: &Path) -> Option<BTreeMap<u64, (String, Option<String>)>> {
    let last = scenario.join("rest/checkpoints.json");
    if !last.exists() {
        return None;
    }
    let mut files = vec![last];
    let index = scenario.join("rest/poll/index.tsv");
    if let Ok(text) = std::fs::read_to_string(index) {
        for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            files.push(scenario.join("rest/poll").join(line.split('\t').nth(2).unwrap()));
        }
    }
    let mut out = BTreeMap::new();
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        for h in v["history"].as_array().into_iter().flatten() {
            let status = h["status"].as_str().unwrap_or_default().to_string();
            if status == "IN_PROGRESS" {
                continue;
            }
            let message = h["failure_message"].as_str().map(str::to_string);
            out.insert(h["id"].as_u64().unwrap(), (status, message));
        }
    }
    Some(out)
}

/// `CheckpointFailureReason` messages of a checkpoint a task declined (mission-anchors §3.3).
const DECLINE_REASONS: &[&str] = &[
    "Asynchronous task checkpoint failed.",
    "Checkpoint was declined.",
    "Checkpoint was declined (tasks not ready)",
    "Checkpoint was declined (task is closing)",
    "Task local checkpoint failure.",
    "Checkpoint was canceled because a barrier from newer checkpoint was received.",
    "Task received cancellation from one of its inputs",
    "Checkpoint was declined because one input stream is finished",
];

const EXPIRED_REASON: &str = "Checkpoint expired before completing.";

#[test]
fn expired_and_declined_counts_agree_with_jobmanager_lines_and_rest_history() {
    let patterns = Patterns::builtin();
    let dirs = log_dirs();
    assert!(dirs.len() >= 30, "expected the captured scenarios of three versions, found {}", dirs.len());
    let (mut with_expired, mut with_declined, mut checked_against_rest) = (0, 0, 0);
    for dir in &dirs {
        let scenario = dir.parent().unwrap();
        let name = scenario.strip_prefix(fixtures()).unwrap().display().to_string();
        let report = scan_paths(&files_in(dir), &patterns, 1 << 20).unwrap();
        let expired = ids_of(&report, "expired");
        let declined = ids_of(&report, "declined");

        // 1. The JobManager's own lines, counted by plain substring search (not our patterns):
        //    one "Checkpoint N of job J expired before completing." INFO line per expiry and one
        //    "Decline checkpoint N by task …" INFO line per decline.
        let jm = std::fs::read_to_string(jobmanager_log(dir)).unwrap();
        let timestamped =
            || jm.lines().filter(|l| l.len() > 23 && l.as_bytes()[4] == b'-' && l.as_bytes()[19] == b',');
        let jm_expired = timestamped()
            .filter(|l| l.contains(" - Checkpoint ") && l.ends_with(" expired before completing."))
            .count();
        let jm_declined = timestamped().filter(|l| l.contains(" - Decline checkpoint ")).count();
        assert_eq!(expired.len(), jm_expired, "{name}: expired events vs JobManager lines");
        assert_eq!(declined.len(), jm_declined, "{name}: declined events vs JobManager lines");
        assert!(
            report
                .events
                .iter()
                .filter(|e| e.kind == "expired" || e.kind == "declined")
                .all(|e| e.file.contains("standalonesession")),
            "{name}: expiries and declines are JobManager lines"
        );

        // 2. The REST failure history of the same run: among the checkpoint ids REST reported,
        //    the ids the log says expired are exactly those whose failure_message is the expiry,
        //    and the ids the log says were declined are exactly those failed with a decline reason.
        if let Some(history) = rest_history(scenario) {
            checked_against_rest += 1;
            let known = |ids: &[u64]| {
                ids.iter().copied().filter(|id| history.contains_key(id)).collect::<BTreeSet<u64>>()
            };
            let rest_with = |pred: &dyn Fn(&str) -> bool| {
                history
                    .iter()
                    .filter(|(_, (status, message))| {
                        status == "FAILED" && message.as_deref().is_some_and(pred)
                    })
                    .map(|(id, _)| *id)
                    .collect::<BTreeSet<u64>>()
            };
            let rest_expired = rest_with(&|m| m == EXPIRED_REASON);
            let rest_declined = rest_with(&|m| DECLINE_REASONS.contains(&m));
            assert_eq!(known(&expired), rest_expired, "{name}: expired ids vs REST failure_message");
            assert_eq!(known(&declined), rest_declined, "{name}: declined ids vs REST failure_message");
            // And every failure REST reports has its "Failed to trigger or complete checkpoint"
            // line (Flink 1.14+) with the same reason.
            for (id, (status, message)) in &history {
                if status != "FAILED" {
                    continue;
                }
                let failed =
                    report.events.iter().find(|e| e.kind == "failed" && e.checkpoint_id == Some(*id));
                let failed = failed.unwrap_or_else(|| panic!("{name}: no failed line for checkpoint {id}"));
                assert_eq!(failed.reason, *message, "{name}: reason of checkpoint {id}");
            }
        }
        with_expired += usize::from(!expired.is_empty());
        with_declined += usize::from(!declined.is_empty());
    }
    // Not vacuous: the expired, declined and tolerable-exceeded scenarios of every version count.
    assert!(with_expired >= 3, "{with_expired} scenarios with expiries");
    assert!(with_declined >= 6, "{with_declined} scenarios with declines");
    assert!(checked_against_rest >= 30, "{checked_against_rest} scenarios with REST history");
}

#[test]
fn every_fixture_line_is_read_and_every_completed_line_is_recognised() {
    let patterns = Patterns::builtin();
    for dir in log_dirs() {
        for file in files_in(&dir) {
            let bytes = std::fs::read(&file).unwrap();
            let report = scan_paths(std::slice::from_ref(&file), &patterns, 1 << 20).unwrap();
            assert_eq!(report.files[0].bytes, bytes.len() as u64);
            let text = String::from_utf8_lossy(&bytes);
            assert_eq!(report.files[0].lines, text.lines().count() as u64, "{}", file.display());
            for (needle, kind) in [
                (" - Completed checkpoint ", "completed"),
                (" - Triggering checkpoint ", "triggered"),
                (" - Received late message for now expired checkpoint", "late_message"),
                (" - Restoring job ", "restored"),
                ("Received barrier from channel", "barrier_received"),
            ] {
                let lines = text.lines().filter(|l| l.contains(needle)).count();
                let events = report.events.iter().filter(|e| e.kind == kind).count();
                assert_eq!(events, lines, "{}: {kind}", file.display());
            }
        }
    }
}

#[test]
fn tolerable_failures_and_root_causes_in_the_tolerable_scenarios() {
    let patterns = Patterns::builtin();
    for version in ["2.3.0", "1.20.5", "1.14.6"] {
        let dir = fixtures().join(format!("flink-{version}/tolerable-exceeded/logs"));
        let report = scan_paths(&files_in(&dir), &patterns, 1 << 20).unwrap();
        let jm = std::fs::read_to_string(jobmanager_log(&dir)).unwrap();
        // One job failure per "FlinkRuntimeException: Exceeded …" thrown (not "Caused by:") line.
        let thrown = jm
            .lines()
            .filter(|l| {
                l.starts_with("org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable")
            })
            .count();
        assert!(thrown > 0);
        assert_eq!(
            ids_of(&report, "tolerable_exceeded").len()
                + report
                    .events
                    .iter()
                    .filter(|e| e.kind == "tolerable_exceeded" && e.checkpoint_id.is_none())
                    .count(),
            thrown,
            "{version}"
        );
        // The injected failure is an IOException in the async phase, seen on the TaskManager.
        let async_failed: Vec<_> =
            report.events.iter().filter(|e| e.kind == "async_snapshot_failed").collect();
        assert!(!async_failed.is_empty(), "{version}");
        for e in async_failed {
            let cause = e.root_cause.as_ref().unwrap();
            assert_eq!(
                (cause.exception.as_str(), cause.category),
                ("java.io.IOException", "io_error"),
                "{version}"
            );
            assert_eq!(e.task.as_deref(), Some("stateful-map"), "the operator name without (k/n)#attempt");
            assert_eq!(e.subtask, Some(0));
        }
    }
}

fn run_cli(args: &[&str]) -> String {
    let out =
        std::process::Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel")).args(args).output().unwrap();
    // 0: no checkpoint failed; 1: some did (the report is printed either way).
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn scan_logs_prints_text_and_json() {
    let dir = fixtures().join("flink-1.20.5/expired/logs");
    let files: Vec<String> = files_in(&dir).iter().map(|p| p.display().to_string()).collect();
    let mut args = vec!["scan-logs", "--format", "json"];
    args.extend(files.iter().map(String::as_str));
    let json: Value = serde_json::from_str(&run_cli(&args)).unwrap();
    let events = &json["events"];
    for kind in ["triggered", "completed", "expired", "declined", "failed", "barrier_missing"] {
        assert!(events[kind].is_u64(), "{kind} missing in {events}");
    }
    assert_eq!(events["expired"], 10);
    assert_eq!(events["declined"], 0);
    assert_eq!(events["completed"], 20);
    let expired: Vec<&Value> =
        json["checkpoints"].as_array().unwrap().iter().filter(|c| c["outcome"] == "expired").collect();
    assert_eq!(expired.len(), 10);
    assert_eq!(json["root_causes"]["expired"], 10);
    // The subtask whose acknowledgement came late for the expired checkpoints.
    let blocking = json["blocking_subtasks"].as_array().unwrap();
    assert!(
        blocking
            .iter()
            .any(|b| b["subtask"] == 0
                && b["kinds"].as_array().unwrap().contains(&Value::from("late_message")))
    );

    args[2] = "text";
    let text = run_cli(&args);
    for needle in [
        "Events by kind:",
        "expired",
        "checkpoint 3 of job e5977598408a0b50e1eb3e122b7bd082: expired",
        "Root causes",
    ] {
        assert!(text.contains(needle), "{needle} missing in:\n{text}");
    }
}

#[test]
fn scan_logs_reports_missing_barriers_from_debug_lines() {
    // In the 1.14.6 debuglog capture the job was cancelled while checkpoint 19 was aligning.
    let dir = fixtures().join("flink-1.14.6/backpressure-debuglog/logs");
    let report = scan_paths(&files_in(&dir), &Patterns::builtin(), 1 << 20).unwrap();
    let json = report.to_json();
    let missing = json["missing_barriers"].as_array().unwrap();
    assert!(!missing.is_empty(), "{json:#}");
    for m in missing {
        assert!(!m["missing"].as_array().unwrap().is_empty());
        let completed = report
            .events
            .iter()
            .any(|e| e.kind == "completed" && e.checkpoint_id == m["checkpoint_id"].as_u64());
        assert!(!completed, "a completed checkpoint has every barrier");
    }
}

/// The 1.20.5 snapshot-sync-failure capture, as an operator reads it: the timeline in time order
/// (the TaskManager's line between the JobManager's), no reason-less colon, one subtask (the
/// attempt number `#0…#5` is not a subtask), the exception the job threw as the root cause and
/// "Checkpoint Coordinator is suspending" as its symptom.
#[test]
fn scan_logs_orders_the_timeline_and_names_the_real_cause() {
    let dir = fixtures().join("flink-1.20.5/snapshot-sync-failure/logs");
    let files: Vec<String> = files_in(&dir).iter().map(|p| p.display().to_string()).collect();
    let mut args = vec!["scan-logs"];
    args.extend(files.iter().map(String::as_str));
    let text = run_cli(&args);
    let three = text.split("  checkpoint 3 of job").nth(1).unwrap().split("  checkpoint 6").next().unwrap();
    let times: Vec<&str> =
        three.lines().filter_map(|l| l.trim().get(..23)).filter(|t| t.starts_with("2026")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "out of order:\n{three}");
    assert!(!text.contains(" : "), "a dangling colon:\n{text}");
    assert!(text.contains("failed: Checkpoint Coordinator is suspending."), "{text}");
    assert!(text.contains("  stateful-map #0: 6 event(s) (sync_snapshot_failed)"), "{text}");
    assert!(!text.contains("#1") && !text.contains("(1/2)"), "{text}");
    assert!(text.contains("  user_code              6\n"), "{text}");
    assert!(text.contains("Symptoms of those causes"), "{text}");

    args.insert(1, "--format");
    args.insert(2, "json");
    let json: Value = serde_json::from_str(&run_cli(&args)).unwrap();
    assert_eq!(json["root_causes"]["user_code"], 6, "{}", json["root_causes"]);
    assert!(json["root_causes"].get("task_failure").is_none());
    // "Checkpoint Coordinator is suspending": the job stopping, a symptom with a name of its own.
    assert_eq!(json["root_cause_symptoms"]["job_stopping"], 6);
    let cp3 = json["checkpoints"].as_array().unwrap().iter().find(|c| c["id"] == 3).unwrap();
    assert_eq!(cp3["root_cause"]["exception"], "java.lang.Exception");
}

/// A file that is not a Flink log is named as such, and the exit code says so.
#[test]
fn scan_logs_says_when_a_file_is_not_a_flink_log() {
    let readme = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["scan-logs", readme.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("README.md is not a Flink log"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a Flink log"));
}

/// Declines name the operator and the subtask on every captured version: 1.13's and 1.14's
/// plain attempt id and 1.17's/1.20's/2.3's vertex id give way to the operator the decline's
/// trace names (1.13.6 and 1.17.2: logs of live e2e runs).
#[test]
fn declines_name_the_operator_on_every_version() {
    for (version, scenario) in [
        ("1.13.6", "declined-e2e"),
        ("1.14.6", "declined"),
        ("1.17.2", "declined-e2e"),
        ("1.20.5", "declined"),
        ("2.3.0", "declined"),
    ] {
        let dir = fixtures().join(format!("flink-{version}/{scenario}/logs"));
        let report = scan_paths(&files_in(&dir), &Patterns::builtin(), 1 << 20).unwrap();
        let declined: Vec<_> = report.events.iter().filter(|e| e.kind == "declined").collect();
        assert!(!declined.is_empty(), "{version}");
        for e in declined {
            assert_eq!((e.task.as_deref(), e.subtask), (Some("stateful-map"), Some(0)), "{version}");
            assert!(e.job_id.is_some(), "{version}");
            let cause = e.root_cause.as_ref().unwrap();
            assert_eq!(cause.exception, "java.io.IOException", "{version}: SerializedThrowable unwrapped");
        }
    }
}

/// Without its stack trace (a layout that drops it, a grep of the timestamped lines), 1.13's
/// decline names only an attempt id; the TaskManager's "asynchronous part of checkpoint N could
/// not be completed" names the operator but no job. The scan joins them by checkpoint: the
/// decline names stateful-map #0 and the blocking table has no unnamed row for it.
#[test]
fn a_traceless_1_13_decline_takes_its_task_from_the_taskmanager_line() {
    let dir = fixtures().join("flink-1.13.6/declined-e2e/logs");
    let tmp = tempfile::tempdir().unwrap();
    let jm_text = std::fs::read_to_string(jobmanager_log(&dir)).unwrap();
    let jm = tmp.path().join("jm.log");
    let stripped: Vec<&str> = jm_text.lines().filter(|l| l.starts_with("2026-")).collect();
    std::fs::write(&jm, stripped.join("\n") + "\n").unwrap();
    let tm = files_in(&dir).into_iter().find(|p| p.to_string_lossy().contains("taskexecutor")).unwrap();
    let report = scan_paths(&[jm, tm], &Patterns::builtin(), 1 << 20).unwrap();
    let unnamed: Vec<_> = report.events.iter().filter(|e| e.kind == "declined" && e.task.is_none()).collect();
    assert!(!unnamed.is_empty(), "the stripped decline lines name no task themselves");
    let json = report.to_json();
    let mut named = 0;
    for cp in json["checkpoints"].as_array().unwrap() {
        for e in cp["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "declined") {
            assert_eq!((e["task"].as_str(), e["subtask"].as_u64()), (Some("stateful-map"), Some(0)), "{cp}");
            named += 1;
        }
    }
    assert_eq!(named, unnamed.len());
    for row in json["blocking_subtasks"].as_array().unwrap() {
        assert_ne!(row["task"], "?", "{row}");
    }
}

/// The answer first: on every tolerable-exceeded capture the first 10 lines say the job failed
/// over and why; no scan names a task by its vertex id where the same logs name it; a
/// checkpoint the job's stopping aborted is no root cause; failures make exit code 1.
#[test]
fn scan_logs_leads_with_the_failover_and_names_tasks() {
    let vertex_id = regex::Regex::new(r"[0-9a-f]{32} #").unwrap();
    for version in ["1.14.6", "1.20.5", "2.3.0"] {
        for scenario in ["tolerable-exceeded", "expired", "backpressure"] {
            let dir = fixtures().join(format!("flink-{version}/{scenario}/logs"));
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
                .arg("scan-logs")
                .args(files_in(&dir))
                .output()
                .unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            // The headline's wrapped lines joined again.
            let head: String = text.lines().take(10).collect::<Vec<_>>().join("\n").replace("\n    ", " ");
            assert!(!vertex_id.is_match(&text), "{version}/{scenario}: a vertex id for a task:\n{text}");
            match scenario {
                "tolerable-exceeded" => {
                    assert!(head.contains("the job failed over 3 times"), "{version}:\n{head}");
                    assert!(head.contains("tolerable-failed-checkpoints"), "{version}:\n{head}");
                    assert!(head.contains("java.io.IOException"), "{version}: the root cause:\n{head}");
                    assert_eq!(out.status.code(), Some(1));
                }
                "backpressure" => {
                    assert!(
                        !text.contains("root cause (task_failure)"),
                        "{version}: a cancel as a cause:\n{text}"
                    );
                    assert_eq!(out.status.code(), Some(0), "{version}: a stopped checkpoint is no failure");
                }
                _ => assert_eq!(out.status.code(), Some(1)),
            }
        }
    }
}
