//! Golden output: what an operator reads from `diagnose` (text and JSON) and `scan-logs` (text
//! and JSON) for every captured fixture, stored under `tests/golden/<version>/<scenario>/` and
//! compared byte for byte. Re-bless after an intended change with
//! `SENTINEL_BLESS=1 cargo test --test integration golden_text::` and read the diff: each file
//! must stay short (an expired report fits on one screen), English, free of seed citations, and
//! number subtasks one way (from 0, `#0`; never Flink's `(1/2)#0`).

use crate::common;

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (version, scenario) of every capture, sorted.
fn captures() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for version in std::fs::read_dir(common::fixtures()).unwrap().flatten() {
        let v = version.file_name().to_string_lossy().into_owned();
        let Some(v) = v.strip_prefix("flink-") else { continue };
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            if scenario.path().is_dir() {
                out.push((v.to_string(), scenario.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    out.sort();
    out
}

fn run(args: &[String]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .current_dir(root())
        .args(args)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap())
}

/// Compares `got` with the golden file (or writes it when blessing); returns a complaint.
fn compare(path: &Path, got: &str) -> Option<String> {
    if common::blessing() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, got).unwrap();
        return None;
    }
    match std::fs::read_to_string(path) {
        Ok(want) if want == got => None,
        Ok(want) => {
            let line = want.lines().zip(got.lines()).position(|(a, b)| a != b).unwrap_or(0);
            Some(format!(
                "{}: differs from line {}:\n  golden: {:?}\n  now:    {:?}",
                path.display(),
                line + 1,
                want.lines().nth(line).unwrap_or(""),
                got.lines().nth(line).unwrap_or("")
            ))
        }
        Err(_) => Some(format!("{}: missing (run with SENTINEL_BLESS=1)", path.display())),
    }
}

/// What every golden must be, whatever the scenario.
fn readable(path: &Path, text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    let lower = text.to_lowercase();
    if lower.contains("seed 00") || lower.contains('§') {
        bad.push(format!("{}: cites a seed article", path.display()));
    }
    if text.chars().any(|c| matches!(c as u32, 0x2E80..=0x9FFF | 0xAC00..=0xD7AF | 0xFF00..=0xFFEF)) {
        bad.push(format!("{}: text outside English", path.display()));
    }
    // Flink's 1-based "(k/n)" with an attempt number is not how we number subtasks.
    if text.contains(")#") {
        bad.push(format!("{}: a subtask numbered Flink's way, (k/n)#attempt", path.display()));
    }
    bad
}

/// The width of a text report's headline lines: an 100-column terminal (the daemon's
/// `TEXT_WIDTH`).
const HEADLINE_WIDTH: usize = 100;

/// The lines of a text report's headline block (up to its first empty line: the header, the
/// cluster's line and the headlines) wider than [`HEADLINE_WIDTH`]; a line that is one URL alone
/// cannot be wrapped and is left as it is.
fn wide_headline_lines(path: &Path, text: &str) -> Vec<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .filter(|l| l.chars().count() > HEADLINE_WIDTH)
        .filter(|l| !is_url_alone(l))
        .map(|l| format!("{}: a headline line of {} columns: {l}", path.display(), l.chars().count()))
        .collect()
}

/// A line that is one URL (in parentheses) and nothing else.
fn is_url_alone(line: &str) -> bool {
    line.trim().starts_with("(http") && !line.trim().contains(' ')
}

/// The diagnose report with what changes from run to run (the server's port, the time of the
/// report) replaced.
fn normalise_diagnose(text: &str, url: &str) -> String {
    let text = text.replace(url, "http://jobmanager:8081");
    let mut out = String::new();
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("checkpoint-sentinel diagnose: ") {
            // "... (Flink 2.3.0), 2026-12-01 15:21:02.485 UTC"
            let cut = head.rfind("), ").map_or(head.len(), |i| i + 1);
            out.push_str(&format!("checkpoint-sentinel diagnose: {}, <report time> UTC\n", &head[..cut]));
        } else if line.starts_with("  \"at_ms\": ") {
            out.push_str("  \"at_ms\": 0,\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnose_and_scan_logs_match_their_goldens_for_every_capture() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (version, scenario) in captures() {
        let dir = common::fixtures().join(format!("flink-{version}")).join(&scenario);
        let golden = root().join("tests/golden").join(&version).join(&scenario);
        let rest = dir.join("rest");
        if rest.join("overview.json").exists() && rest.join("jobs-overview.json").exists() {
            let (url, _) = crate::diagnose::serve(&version, &scenario).await;
            for (format, file) in [("text", "diagnose.txt"), ("json", "diagnose.json")] {
                let args =
                    vec!["diagnose".into(), "--url".into(), url.clone(), "--format".into(), format.into()];
                let (code, out) = tokio::task::spawn_blocking(move || run(&args)).await.unwrap();
                let out = normalise_diagnose(&out, &url);
                let out = format!(
                    "{out}{}",
                    if format == "text" { format!("(exit code {code})\n") } else { String::new() }
                );
                problems.extend(readable(&golden.join(file), &out));
                // A screen (50 lines) of details, under the answer (the header, the cluster's
                // line and the job's headline, wrapped to 100 columns: up to the first empty line).
                let answer = out.lines().take_while(|l| !l.is_empty()).count();
                if format == "text" && scenario == "expired" && out.lines().count() - answer > 50 {
                    problems.push(format!(
                        "{version}/{scenario}: the expired report has {} lines under its answer, more than a screen (50)",
                        out.lines().count() - answer
                    ));
                }
                problems.extend(compare(&golden.join(file), &out));
                checked += 1;
            }
        }
        let logs = dir.join("logs");
        if logs.is_dir() {
            let mut files: Vec<String> = std::fs::read_dir(&logs)
                .unwrap()
                .flatten()
                .map(|e| e.path().strip_prefix(root()).unwrap().display().to_string())
                .collect();
            files.sort();
            for (format, file) in [("text", "scan-logs.txt"), ("json", "scan-logs.json")] {
                let mut args: Vec<String> = vec!["scan-logs".into(), "--format".into(), format.into()];
                args.extend(files.iter().cloned());
                let (code, out) = tokio::task::spawn_blocking(move || run(&args)).await.unwrap();
                // 0: no checkpoint failed; 1: some failed or the job failed over.
                if code != 0 && code != 1 {
                    problems.push(format!("{version}/{scenario}: scan-logs exited {code}"));
                }
                let out = if format == "text" { format!("{out}(exit code {code})\n") } else { out };
                problems.extend(readable(&golden.join(file), &out));
                problems.extend(compare(&golden.join(file), &out));
                checked += 1;
            }
        }
    }
    assert!(checked >= 100, "only {checked} goldens checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every stored text golden keeps its headline lines to an 100-column terminal.
#[test]
fn every_text_goldens_headline_fits_an_100_column_terminal() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for (version, scenario) in captures() {
        let dir = root().join("tests/golden").join(&version).join(&scenario);
        for file in ["diagnose.txt", "scan-logs.txt"] {
            if let Ok(text) = std::fs::read_to_string(dir.join(file)) {
                bad.extend(wide_headline_lines(&dir.join(file), &text));
                checked += 1;
            }
        }
    }
    assert!(checked >= 50, "only {checked} text goldens checked");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The golden check fails on a changed report and on an unreadable one.
#[test]
fn the_golden_checks_can_fail() {
    let wide = format!(
        "CRITICAL job: {}\n  (https://example.org/{})\n\n{}\n",
        "x ".repeat(60),
        "y".repeat(99),
        "z".repeat(200)
    );
    assert_eq!(wide_headline_lines(Path::new("x"), &wide).len(), 1, "the first line only");
    assert!(!readable(Path::new("x"), "stateful-map (1/2)#0").is_empty());
    assert!(!readable(Path::new("x"), "see seed 000 §3.4").is_empty());
    assert!(readable(Path::new("x"), "stateful-map #0 on TaskManager tm-1").is_empty());
    if !common::blessing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("g.txt");
        std::fs::write(&file, "a\nb\n").unwrap();
        assert!(compare(&file, "a\nb\n").is_none());
        assert!(compare(&file, "a\nc\n").unwrap().contains("line 2"));
    }
}
