//! Config reload: clusters added or removed in the file take effect without a restart, and a
//! bad file is refused while the running configuration stays.

use crate::common;

use std::time::Duration;

use checkpoint_sentinel::config::Config;
use common::{replay, sample, scrape, scrape_until};

fn cluster(name: &str, url: &str) -> String {
    format!("[[clusters]]\nname = \"{name}\"\nurl = \"{url}\"\npoll_interval = \"100ms\"\n")
}

/// How long a scrape waits for what it checks. 30 s: generous, because it only matters when
/// the test fails, and a loaded CI machine (the whole suite runs two tests at a time on two
/// cores) once needed more than 10 s.
const WAIT: Duration = Duration::from_secs(30);

fn up(m: &str, cluster: &str) -> Option<f64> {
    sample(m, "checkpoint_sentinel_flink_up", &[("cluster", cluster)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_come_and_go_with_the_file_and_bad_files_are_refused() {
    let a = replay("2.3.0", "healthy").await;
    let b = replay("1.20.5", "healthy").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentinel.toml");
    let state = format!(
        "[state]\ndir = \"{}\"\n[server]\nlisten = \"127.0.0.1:0\"\n",
        dir.path().join("state").display()
    );
    std::fs::write(&path, format!("{state}{}", cluster("a", &a.url))).unwrap();
    let config = Config::load(&path).unwrap();
    let daemon = checkpoint_sentinel::daemon::start(config, Some(path.clone())).await.unwrap();
    let addr = daemon.addr;
    scrape_until(addr, "cluster a up", WAIT, |m| up(m, "a") == Some(1.0)).await;

    // Add a cluster: it is polled without a restart.
    std::fs::write(&path, format!("{state}{}{}", cluster("a", &a.url), cluster("b", &b.url))).unwrap();
    scrape_until(addr, "cluster b up", WAIT, |m| up(m, "b") == Some(1.0)).await;

    // A broken file is refused: both clusters keep being polled.
    std::fs::write(&path, format!("{state}{}poll_interval = \"often\"\n", cluster("c", &b.url))).unwrap();
    let polls =
        |m: &str, c: &str| sample(m, "checkpoint_sentinel_polls_total", &[("cluster", c)]).unwrap_or(0.0);
    // Five more rounds of each: the file was looked at meanwhile, and both go on.
    let before = scrape(addr).await;
    let after = scrape_until(addr, "both clusters still polled", WAIT, |m| {
        polls(m, "a") >= polls(&before, "a") + 5.0 && polls(m, "b") >= polls(&before, "b") + 5.0
    })
    .await;
    assert_eq!(up(&after, "c"), None);

    // Remove a cluster: its series go away.
    std::fs::write(&path, format!("{state}{}", cluster("b", &b.url))).unwrap();
    scrape_until(addr, "cluster a gone", WAIT, |m| up(m, "a").is_none() && up(m, "b") == Some(1.0)).await;
    daemon.shutdown().await;
}

/// A file that loads but that a start would refuse is refused by a reload too: the reload runs
/// `preflight::check` as `run` and `check-config` do (here a `state.dir` that cannot be made,
/// under a plain file), and the running configuration stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_preflight_refuses_is_not_reloaded() {
    let a = replay("2.3.0", "healthy").await;
    let b = replay("1.20.5", "healthy").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sentinel.toml");
    let state_in = |state_dir: &std::path::Path| {
        format!("[state]\ndir = \"{}\"\n[server]\nlisten = \"127.0.0.1:0\"\n", state_dir.display())
    };
    let state = state_in(&dir.path().join("state"));
    std::fs::write(&path, format!("{state}{}", cluster("a", &a.url))).unwrap();
    let config = Config::load(&path).unwrap();
    let daemon = checkpoint_sentinel::daemon::start(config, Some(path.clone())).await.unwrap();
    let addr = daemon.addr;
    scrape_until(addr, "cluster a up", WAIT, |m| up(m, "a") == Some(1.0)).await;

    // Config::load takes this file; preflight does not (state.dir cannot be created).
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "a file, not a directory").unwrap();
    let unusable = state_in(&blocker.join("state"));
    let refused = format!("{unusable}{}{}", cluster("a", &a.url), cluster("b", &b.url));
    std::fs::write(&path, refused).unwrap();
    let problems = checkpoint_sentinel::preflight::check(&Config::load(&path).unwrap());
    assert!(problems.iter().any(|p| p.starts_with("state.dir")), "{problems:?}");
    let polls = |m: &str| sample(m, "checkpoint_sentinel_polls_total", &[("cluster", "a")]).unwrap_or(0.0);
    // Ten more rounds of a (the file was looked at meanwhile): b is not polled.
    let before = scrape(addr).await;
    let after =
        scrape_until(addr, "cluster a still polled", WAIT, |m| polls(m) >= polls(&before) + 10.0).await;
    assert_eq!(up(&after, "b"), None, "a file preflight refuses was reloaded");

    // The same clusters with a usable state.dir: taken.
    std::fs::write(&path, format!("{state}{}{}", cluster("a", &a.url), cluster("b", &b.url))).unwrap();
    scrape_until(addr, "cluster b up", WAIT, |m| up(m, "b") == Some(1.0)).await;
    daemon.shutdown().await;
}
