//! Pre-flight checks of a loaded configuration against the machine it runs on: secret files,
//! the listener's TLS files, the state directory, at least one cluster. `check-config` and `run` call the same
//! [`check`], so `check-config` never says ok to a file that `run` refuses.
//!
//! These are I/O checks, kept apart from `Config::problems` (pure checks of the values) so that
//! a test can build a `Config` without touching the filesystem.

use std::path::{Path, PathBuf};

use crate::config::{BasicAuth, Config, Secret};

/// Every reason `config` cannot run on this machine, one line each, naming the key.
pub fn check(config: &Config) -> Vec<String> {
    let mut problems = Vec::new();
    if config.clusters.is_empty() && !config.discovery.enabled() {
        problems.push(
            "clusters: no clusters configured: expected at least one [[clusters]] entry with a name \
             and the url of a JobManager's REST API, or [discovery] files or [discovery.kubernetes]"
                .to_string(),
        );
    }
    for (key, secret) in secrets(config) {
        if let Err(e) = secret_problem(secret) {
            problems.push(format!("{key}: {e}"));
        }
    }
    let k = &config.discovery.kubernetes;
    if let Some(path) = k.kubeconfig.as_ref().filter(|_| k.enabled)
        && let Err(e) = std::fs::File::open(path)
    {
        problems.push(format!(
            "discovery.kubernetes.kubeconfig: {}: expected a readable file ({e})",
            path.display()
        ));
    }
    // The listener's TLS files: read and checked as the daemon will load them, so that a
    // missing file, a file that is not PEM or a key that does not match is refused here.
    if let Err(tls_problems) = crate::outputs::tls::load(&config.server) {
        problems.extend(tls_problems);
    }
    if let Err(e) = state_dir_writable(&config.state.dir) {
        problems.push(format!(
            "state.dir: {}: {e}; set `state.dir` in the file, or SENTINEL_STATE__DIR=<a writable \
             directory> (e.g. SENTINEL_STATE__DIR=$HOME/.local/state/checkpoint-sentinel)",
            config.state.dir.display()
        ));
    }
    problems
}

/// Every secret in the configuration, with its key.
fn secrets(config: &Config) -> Vec<(String, &Secret)> {
    fn add<'a>(
        out: &mut Vec<(String, &'a Secret)>,
        prefix: &str,
        basic: Option<&'a BasicAuth>,
        bearer: Option<&'a Secret>,
    ) {
        if let Some(b) = basic {
            out.push((format!("{prefix}basic_auth.password"), &b.password));
        }
        if let Some(t) = bearer {
            out.push((format!("{prefix}bearer_token"), t));
        }
    }
    let mut out = Vec::new();
    add(&mut out, "server.", config.server.basic_auth.as_ref(), config.server.bearer_token.as_ref());
    add(&mut out, "alerting.", config.alerting.basic_auth.as_ref(), config.alerting.bearer_token.as_ref());
    for (i, c) in config.clusters.iter().enumerate() {
        add(&mut out, &format!("clusters[{i}]."), c.basic_auth.as_ref(), c.bearer_token.as_ref());
    }
    out
}

/// A secret in a file must be a readable file that is not empty; one in an environment
/// variable must be set and not empty.
fn secret_problem(secret: &Secret) -> Result<(), String> {
    if let Some(path) = &secret.file {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        if text.trim().is_empty() {
            return Err(format!("{}: the file is empty: expected the secret", path.display()));
        }
    } else if let Some(name) = &secret.env {
        match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => {}
            Ok(_) => return Err(format!("environment variable {name} is empty: expected the secret")),
            Err(_) => return Err(format!("environment variable {name} is not set")),
        }
    }
    Ok(())
}

/// The state directory exists and a file can be created in it, or it does not exist and can be
/// created: its nearest existing ancestor is a directory in which a file can be created. Nothing
/// is left behind.
pub(crate) fn state_dir_writable(dir: &Path) -> Result<(), String> {
    let mut existing: PathBuf = dir.to_path_buf();
    loop {
        match std::fs::metadata(&existing) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(if existing == dir {
                    "not a directory".to_string()
                } else {
                    format!("cannot be created: {} is not a directory", existing.display())
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match existing.parent() {
                Some(p) if !p.as_os_str().is_empty() => existing = p.to_path_buf(),
                _ => existing = PathBuf::from("."),
            },
            Err(e) => return Err(format!("cannot read {}: {e}", existing.display())),
        }
    }
    let probe = existing.join(format!(".checkpoint-sentinel-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if existing == dir => Err(format!("cannot write a file in it ({e})")),
        Err(e) => Err(format!("does not exist and cannot be created in {} ({e})", existing.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClusterConfig;

    fn config(dir: &Path) -> Config {
        let mut c =
            Config { clusters: vec![ClusterConfig::new("a", "http://127.0.0.1:1")], ..Config::default() };
        c.state.dir = dir.join("state");
        c
    }

    #[test]
    fn a_good_config_passes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check(&config(dir.path())), Vec::<String>::new());
        // Nothing is left behind: the state directory is not created by the check.
        assert!(!dir.path().join("state").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn zero_clusters_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.clusters.clear();
        let problems = check(&c);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("no clusters configured"), "{problems:?}");
        // Clusters found in files are clusters too.
        c.discovery.files = vec![dir.path().join("*.json").to_string_lossy().into_owned()];
        assert!(check(&c).is_empty(), "{:?}", check(&c));
        // And those Kubernetes discovery finds; its kubeconfig must be readable.
        c.discovery.files.clear();
        c.discovery.kubernetes.enabled = true;
        assert!(check(&c).is_empty(), "{:?}", check(&c));
        c.discovery.kubernetes.kubeconfig = Some(dir.path().join("missing-kubeconfig"));
        let problems = check(&c);
        assert!(
            problems.len() == 1 && problems[0].starts_with("discovery.kubernetes.kubeconfig: "),
            "{problems:?}"
        );
    }

    #[test]
    fn secret_files_must_exist_and_hold_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        let missing = dir.path().join("missing");
        c.clusters[0].bearer_token = Some(Secret { file: Some(missing.clone()), ..Secret::default() });
        let problems = check(&c);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("clusters[0].bearer_token: "), "{problems:?}");
        assert!(problems[0].contains(&missing.display().to_string()), "{problems:?}");

        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        c.clusters[0].bearer_token = Some(Secret { file: Some(empty), ..Secret::default() });
        c.alerting.basic_auth = Some(BasicAuth {
            username: "u".into(),
            password: Secret { file: Some(dir.path().to_path_buf()), ..Secret::default() },
        });
        let problems = check(&c);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("alerting.basic_auth.password: "), "{problems:?}");
        assert!(problems[1].contains("the file is empty"), "{problems:?}");

        let good = dir.path().join("token");
        std::fs::write(&good, "s3cret\n").unwrap();
        c.clusters[0].bearer_token = Some(Secret { file: Some(good), ..Secret::default() });
        c.alerting.basic_auth = None;
        assert_eq!(check(&c), Vec::<String>::new());
    }

    #[test]
    fn the_state_dir_must_be_writable_or_creatable() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        // A file where the directory should be.
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        c.state.dir = file.join("state");
        let problems = check(&c);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("state.dir: "), "{problems:?}");
        assert!(problems[0].contains("SENTINEL_STATE__DIR="), "{problems:?}");
        c.state.dir = file;
        assert!(check(&c)[0].contains("not a directory"));

        // A directory nobody may write into (root may write anywhere: checked as a user only).
        use std::os::unix::fs::PermissionsExt as _;
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let writable_anyway = std::fs::File::create(locked.join("x")).is_ok();
        c.state.dir = locked.join("state");
        let problems = check(&c);
        if !writable_anyway {
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(problems[0].contains("cannot be created"), "{problems:?}");
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();

        // /proc takes no files, not even from root.
        c.state.dir = PathBuf::from("/proc/checkpoint-sentinel-test");
        let problems = check(&c);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "state.dir: /proc/checkpoint-sentinel-test: does not exist and cannot be created in /proc"
            ),
            "{problems:?}"
        );
    }
}
