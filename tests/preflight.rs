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
        for args in [&["check-config"][..], &["run", "--config"][..]] {
            let (code, stderr) = sentinel(args, &path);
            assert_eq!(code, Some(2), "{what}, {args:?}: {stderr}");
            assert!(stderr.contains(needle), "{what}, {args:?}: {stderr}");
        }
    }
    // The good file: check-config says ok.
    let path = dir.path().join("sentinel.toml");
    std::fs::write(&path, format!("[state]\ndir = \"{}\"\n{cluster}", state.display())).unwrap();
    let (code, stderr) = sentinel(&["check-config"], &path);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!state.exists(), "check-config created the state directory");
}
