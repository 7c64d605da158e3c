//! Reference model: one simulated day of a 1,000-subtask job checkpointing every 60 s (the
//! coordinator with per-subtask details on every checkpoint), and one alignment run of a
//! 1,000-subtask graph.

use checkpoint_sentinel::model::alignment::{self, AlignmentConfig, Mode};
use checkpoint_sentinel::model::coordinator::{Coordinator, CoordinatorConfig, Event, Outcome, Schedule};
use checkpoint_sentinel::time::Timestamp;

fn main() {
    divan::main();
}

const DAY_MS: i64 = 86_400_000;
const START: Timestamp = Timestamp(1_795_964_442_000);

/// A day of the coordinator (1,440 checkpoints), each checkpoint carrying the per-subtask
/// phases of a 1,000-subtask graph (four precomputed alignment runs, as the demo does) and
/// turned into the `FinishedCheckpoint` the poller would see.
#[divan::bench(sample_count = 10)]
fn coordinator_day_1000_subtasks(bencher: divan::Bencher) {
    let graph = alignment::lab_job(250, 0, 0.0);
    let config = AlignmentConfig { mode: Mode::Aligned, ..AlignmentConfig::default() };
    let variants: Vec<_> =
        (0..4).map(|v| alignment::simulate(&graph, &config, v).operators(&graph)).collect();
    bencher.bench_local(|| {
        let cfg =
            CoordinatorConfig { num_subtasks: 1000, keep_checkpoints: 16, ..CoordinatorConfig::default() };
        let mut c = Coordinator::new(cfg, START, Schedule::Seeded(7));
        let mut outcomes = |id: u64, _: Timestamp| Outcome::Complete { duration_ms: 4_000 + id % 3_000 };
        let (mut finished, mut subtasks) = (0, 0);
        let mut at = START;
        while at < START.plus_millis(DAY_MS) {
            at = at.plus_millis(60_000);
            c.run_until(at, &mut outcomes);
            for event in c.drain_events() {
                match event {
                    Event::Triggered { id, .. } => {
                        if let Some(cp) = c.checkpoint_mut(id) {
                            cp.operators = variants[(id % 4) as usize].clone();
                        }
                    }
                    Event::Completed { id, .. } => {
                        let f = c.checkpoint(id).and_then(|cp| cp.to_finished(1000)).expect("finished");
                        finished += 1;
                        subtasks += f.operators.iter().map(|o| o.subtasks.len()).sum::<usize>();
                    }
                    _ => {}
                }
            }
        }
        assert!(finished >= 1_400, "{finished}");
        (finished, subtasks)
    });
}

/// The coordinator alone for a day (no per-subtask details).
#[divan::bench(sample_count = 10)]
fn coordinator_day_schedule_only() -> u64 {
    let cfg = CoordinatorConfig { num_subtasks: 1000, keep_checkpoints: 16, ..CoordinatorConfig::default() };
    let mut c = Coordinator::new(cfg, START, Schedule::Seeded(7));
    let mut outcomes = |id: u64, _: Timestamp| Outcome::Complete { duration_ms: 4_000 + id % 3_000 };
    c.run_until(START.plus_millis(DAY_MS), &mut outcomes);
    c.counts().completed
}

/// One barrier-alignment run over the lab graph at parallelism 250 (1,000 subtasks, two
/// all-to-all hash edges: 125,000 channels).
#[divan::bench(sample_count = 5)]
fn alignment_1000_subtasks(bencher: divan::Bencher) {
    let graph = alignment::lab_job(250, 0, 0.0);
    let config = AlignmentConfig { mode: Mode::Aligned, ..AlignmentConfig::default() };
    bencher.bench_local(|| alignment::simulate(&graph, &config, 1).subtasks.len());
}
