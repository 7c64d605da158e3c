//! The demo's `/metrics` at a fixed seed and time, compared byte for byte with a checked-in
//! golden (`tests/golden/demo/exposition.prom`, as node_exporter's
//! `collector/fixtures/e2e-output.txt`): any change to a name, label, help text, order or value
//! of the exposition shows up here. The state is built without a clock or a network: the demo
//! model's jobs are advanced to given times and their polls applied as the poller would.

use std::path::Path;

use checkpoint_sentinel::app::DaemonStats;
use checkpoint_sentinel::commands::demo::cluster::DemoCluster;
use checkpoint_sentinel::observe::{JobKey, Observation};
use checkpoint_sentinel::outputs::export::TextRenderer;
use checkpoint_sentinel::state::State;
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;

use crate::common;

/// The demo's seed, its jobs and their start (2026-11-29 15:00 UTC).
const SEED: u64 = 1;
const JOBS: usize = 5;
const START: i64 = 1_795_100_400_000;
/// Polled every second for five minutes.
const POLL_MS: i64 = 1_000;
const POLLS: i64 = 300;

/// The exposition after `POLLS` polls of the demo cluster, the build's own labels (version,
/// revision, compiler) replaced, as they change with every build.
fn exposition() -> String {
    let mut cluster = DemoCluster::new(JOBS, SEED, Timestamp(START));
    let mut state = State::new(WindowSpec { window_ms: 600_000, slots: 10 });
    let mut now = Timestamp(START);
    for poll in 1..=POLLS {
        now = Timestamp(START + poll * POLL_MS);
        cluster.advance(now);
        for job in &cluster.jobs {
            let key = JobKey { cluster: "demo".into(), job_id: job.id.clone() };
            let polled = job.coordinator.job_poll(key, &job.name, now, None);
            state.apply(&Observation::JobPolled(polled), now);
        }
    }
    let body = TextRenderer::default().render_to_vec(&state, &DaemonStats::default(), now);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .map(|line| {
            if line.starts_with("checkpoint_sentinel_build_info{") {
                "checkpoint_sentinel_build_info{version=\"-\",revision=\"-\",rustc_version=\"-\"} 1"
                    .to_string()
            } else {
                line.to_string()
            }
        })
        .map(|line| line + "\n")
        .collect()
}

#[test]
fn the_demo_exposition_at_a_fixed_seed_and_time_is_the_golden_byte_for_byte() {
    let got = exposition();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/demo/exposition.prom");
    if common::blessing() {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with SENTINEL_BLESS=1)", path.display()));
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{} differs from line {} (run with SENTINEL_BLESS=1 if the change is meant):\n  golden: {:?}\n  now:    {:?}",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or(""),
            got.lines().nth(line).unwrap_or("")
        );
    }
}

/// Built twice, the exposition is the same: nothing in it depends on the clock or on hashing.
#[test]
fn the_demo_exposition_is_deterministic() {
    assert!(exposition() == exposition());
}
