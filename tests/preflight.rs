//! `check-config` and `run` accept and refuse the same files: each pre-flight problem makes both
//! exit with code 2 and the same message, naming the key.

use std::process::Command;

fn sentinel(args: &[&str], config: &std::path::Path) -> (Option<i32>, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"));
    cmd.args(args).arg(config).env("SENTINEL_LOG", "warn");
    if args[0] == "run" {
        cmd.args(["--listen", "127.0.0.1:0"]);
    }
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn check_config_and_run_refuse_the_same_files() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let cluster = "[[clusters]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n";
    let cases = [
        (
            "missing secret file",
            format!(
                "[state]\ndir = \"{}\"\n{cluster}bearer_token = {{ file = \"{}\" }}\n",
                state.display(),
                dir.path().join("missing-token").display()
            ),
            "clusters[0].bearer_token: ",
        ),
        ("zero clusters", format!("[state]\ndir = \"{}\"\n", state.display()), "no clusters configured"),
        (
            "state dir not writable",
            format!("[state]\ndir = \"/proc/checkpoint-sentinel-test\"\n{cluster}"),
            "state.dir: /proc/checkpoint-sentinel-test: ",
        ),
    ];
    for (what, text, needle) in cases {
        let path = dir.path().join("sentinel.toml");
        std::fs::write(&path, text).unwrap();
        // Both commands take the file either way: `--config FILE` or `FILE`.
        let forms = [&["check-config"][..], &["check-config", "--config"], &["run", "--config"], &["run"]];
        for args in forms {
            let (code, stderr) = sentinel(args, &path);
            assert_eq!(code, Some(2), "{what}, {args:?}: {stderr}");
            assert!(stderr.contains(needle), "{what}, {args:?}: {stderr}");
        }
    }
    // The good file: check-config says ok.
    let path = dir.path().join("sentinel.toml");
    std::fs::write(&path, format!("[state]\ndir = \"{}\"\n{cluster}", state.display())).unwrap();
    for args in [&["check-config"][..], &["check-config", "--config"]] {
        let (code, stderr) = sentinel(args, &path);
        assert_eq!(code, Some(0), "{args:?}: {stderr}");
    }
    assert!(!state.exists(), "check-config created the state directory");
}

#[test]
fn two_different_files_are_refused_and_none_is_asked_for() {
    let out = Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["check-config", "a.toml", "--config", "b.toml"])
        .env_remove("SENTINEL_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("two configuration files"));
    let out = Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["run"])
        .env_remove("SENTINEL_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --config FILE"));
}

/// `logs = []` and `alertmanagers = []` switch off the log-based alerts and paging: the
/// daemon says so at start-up, one line each.
#[test]
fn the_daemon_says_at_start_what_empty_logs_and_alertmanagers_switch_off() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentinel.toml");
    let text = format!(
        "[state]\ndir = \"{}\"\n[[clusters]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n",
        dir.path().join("state").display()
    );
    std::fs::write(&path, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_checkpoint-sentinel"))
        .args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(&path)
        .env("SENTINEL_LOG", "warn,checkpoint_sentinel::daemon=info")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    let mut line = String::new();
    while !seen.contains("listening") {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(seen.matches("no [[logs]]").count(), 1, "{seen}");
    assert!(seen.contains("log-based alerts"), "{seen}");
    assert_eq!(seen.matches("no [alerting] alertmanagers").count(), 1, "{seen}");
    assert!(seen.contains("page nobody"), "{seen}");
}
