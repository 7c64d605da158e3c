//! `/metrics` encoding and rule rounds over the state of 1,000 watched jobs (four operator chains each,
//! an hour of checkpoints in their histograms): the text renderer `/metrics` uses, and for
//! comparison the `prometheus` crate's path (metric families, then its text encoder).

use checkpoint_sentinel::app::DaemonStats;
use checkpoint_sentinel::model::alignment::{self, AlignmentConfig, Mode};
use checkpoint_sentinel::model::coordinator::{Coordinator, CoordinatorConfig, Event, Outcome, Schedule};
use checkpoint_sentinel::observe::{CheckpointSettings, EventSeverity, JobKey, LogEvent, Observation};
use checkpoint_sentinel::outputs::export::{PARTS, TextRenderer, encode_text, render};
use checkpoint_sentinel::state::State;
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;

fn main() {
    divan::main();
}

const START: Timestamp = Timestamp(1_795_964_442_000);

/// `jobs` jobs polled every 10 s for an hour, checkpointing every 60 s.
pub fn state(jobs: usize) -> (State, Timestamp) {
    let graph = alignment::lab_job(2, 0, 0.0);
    let config = AlignmentConfig { mode: Mode::Aligned, ..AlignmentConfig::default() };
    let variants: Vec<_> =
        (0..4).map(|v| alignment::simulate(&graph, &config, v).operators(&graph)).collect();
    let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
    let end = START.plus_millis(3_600_000);
    for j in 0..jobs {
        let cfg = CoordinatorConfig { num_subtasks: 8, keep_checkpoints: 16, ..CoordinatorConfig::default() };
        let mut c = Coordinator::new(cfg, START, Schedule::Seeded(j as u64));
        let mut outcomes =
            |id: u64, _: Timestamp| Outcome::Complete { duration_ms: 400 + (id * 37 + j as u64) % 3_000 };
        let key = JobKey { cluster: "bench".into(), job_id: format!("{j:032x}") };
        let settings = CheckpointSettings {
            interval_ms: Some(60_000),
            timeout_ms: Some(600_000),
            ..CheckpointSettings::default()
        };
        let mut at = START;
        while at < end {
            at = at.plus_millis(10_000);
            c.run_until(at, &mut outcomes);
            for event in c.drain_events() {
                if let Event::Triggered { id, .. } = event
                    && let Some(cp) = c.checkpoint_mut(id)
                {
                    cp.operators = variants[(id % 4) as usize].clone();
                }
            }
            let poll = c.job_poll(key.clone(), &format!("job-{j}"), at, Some(settings.clone()));
            state.apply(&Observation::JobPolled(poll), at);
        }
    }
    (state, end)
}

#[divan::bench(sample_count = 20)]
fn render_1000_jobs(bencher: divan::Bencher) {
    let (state, now) = state(1000);
    let daemon = DaemonStats::default();
    bencher.bench_local(|| render(&state, &daemon, now).len());
}

#[divan::bench(sample_count = 20)]
fn render_and_encode_1000_jobs(bencher: divan::Bencher) {
    let (state, now) = state(1000);
    let daemon = DaemonStats::default();
    bencher.bench_local(|| encode_text(&render(&state, &daemon, now)).len());
}

/// What `/metrics` does: the text format written straight from the state, part by part.
#[divan::bench(sample_count = 20)]
fn render_text_1000_jobs(bencher: divan::Bencher) {
    let (state, now) = state(1000);
    let daemon = DaemonStats::default();
    let mut renderer = TextRenderer::default();
    bencher.bench_local(|| {
        PARTS.iter().map(|&part| renderer.render(&state, &daemon, now, part).len()).sum::<usize>()
    });
}

/// One round of the built-in rules over the same 1,000 jobs: what the evaluation tick, and a
/// log event that wakes it, costs.
#[divan::bench(sample_count = 20)]
fn rules_round_1000_jobs(bencher: divan::Bencher) {
    use checkpoint_sentinel::rules::{Evaluator, Rule, builtin};
    let (mut state, now) = state(1000);
    // Each job's log has said something: the log series are looked up per job and kind.
    let events = (0..1000)
        .flat_map(|j| {
            ["expired", "declined", "completed"].map(|kind| {
                let mut e = LogEvent::new(kind.into(), EventSeverity::Warning, String::new());
                (e.cluster, e.job_id) = ("bench".into(), Some(format!("{j:032x}")));
                e
            })
        })
        .collect();
    state.apply(&Observation::LogEvents(events), now);
    let rules =
        builtin::rules().into_iter().map(|spec| Rule::new(spec).expect("built-in rules parse")).collect();
    let mut evaluator = Evaluator::new(rules);
    let mut at = now;
    bencher.bench_local(|| {
        at = at.plus_millis(250);
        evaluator.evaluate(&state, at).len()
    });
}
