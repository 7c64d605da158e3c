//! Build facts for `checkpoint_sentinel_build_info` and the start-up log line: the git commit
//! the binary is built from and the compiler's version ("unknown" when there is no git, e.g.
//! a source tarball; `SENTINEL_GIT_REVISION` set at build time wins, for image builds).

use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SENTINEL_GIT_REVISION");
    let revision = std::env::var("SENTINEL_GIT_REVISION").ok().filter(|r| !r.is_empty()).or_else(|| {
        // Rebuild when HEAD moves (a commit, a checkout): the reflog is written each time.
        for path in ["HEAD", "logs/HEAD"] {
            if let Some(p) = output("git", &["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        output("git", &["rev-parse", "--short=12", "HEAD"])
    });
    println!("cargo:rustc-env=SENTINEL_GIT_REVISION={}", revision.as_deref().unwrap_or("unknown"));
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = output(&rustc, &["--version"]);
    // "rustc 1.95.0 (59807616e 2026-…)" -> "1.95.0".
    let version = version.as_deref().and_then(|v| v.split_whitespace().nth(1)).unwrap_or("unknown");
    println!("cargo:rustc-env=SENTINEL_RUSTC_VERSION={version}");
}
