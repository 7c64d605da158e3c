//! The checkpoint store (`src/state/store.rs`, redb): what a persister round costs (a batch of new
//! records committed durably, with the prune check), a history query, and the size on disk per
//! 1,000 checkpoints, printed before the benchmarks run.

use std::time::Duration;

use checkpoint_sentinel::observe::{CheckpointStatus, SnapshotKind};
use checkpoint_sentinel::state::outbox::{Outboxed, StoredCheckpoint};
use checkpoint_sentinel::state::store::{Bounds, Query, Store};
use checkpoint_sentinel::state::{CheckpointRecord, Holdout};
use checkpoint_sentinel::time::Timestamp;

const T0: i64 = 1_795_964_442_000;
const BOUNDS: Bounds = Bounds { max_age: Duration::from_secs(30 * 86_400), max_records: 1_000_000 };

/// A realistic record: job vertex names as Flink writes them, one checkpoint in 20 failed with
/// Flink's message and the subtask that held it up.
fn record(job: usize, id: u64) -> Outboxed {
    let failed = id.is_multiple_of(20);
    let at = T0 + id as i64 * 10_000;
    let record = CheckpointRecord {
        id,
        status: if failed { CheckpointStatus::Failed } else { CheckpointStatus::Completed },
        kind: SnapshotKind::Checkpoint,
        triggered_at: Timestamp(at),
        finished_at: Timestamp(at + 1_234),
        end_to_end_ms: Some(1_234),
        max_phases_ms: Some([12, 340, 25, 830]),
        slowest_subtask: Some(("Source: orders -> Map -> Filter".into(), 3, 1_230)),
        slowest_phases_ms: Some([10, 340, 22, 820]),
        failure_message: failed.then(|| "Checkpoint expired before completing.".into()),
        acknowledged: Some((if failed { 7 } else { 8 }, 8)),
        holdout: failed.then(|| {
            Box::new(Holdout {
                operator: "KeyedProcess -> Sink: enriched".into(),
                subtask: 5,
                late_ack_ms: None,
                phases_ms: [Some(10), None, None, None],
                never_acknowledged: 1,
                acknowledged_late: 0,
            })
        }),
        blocked_thread: None,
        evidence: None,
    };
    Outboxed {
        cluster: "prod".into(),
        job_id: format!("{job:032x}"),
        checkpoint: StoredCheckpoint {
            record,
            checkpointed_bytes: Some(12_345_678),
            full_state_bytes: Some(987_654_321),
            processed_bytes: Some(0),
            persisted_bytes: Some(0),
            taskmanager: Some("10.0.3.17:6122-8f2a1c (flink-taskmanager-3:6122)".into()),
        },
    }
}

fn main() {
    // Size on disk: 10,000 records of 10 jobs written as the persister does, 10 per commit.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    let records: Vec<Outboxed> = (0..10_000u64).map(|i| record((i % 10) as usize, i / 10 + 1)).collect();
    let started = std::time::Instant::now();
    for batch in records.chunks(10) {
        store.write(batch, Timestamp(T0 + 20_000_000)).unwrap();
    }
    let took = started.elapsed();
    let bytes =
        std::fs::metadata(dir.path().join(checkpoint_sentinel::state::store::STORE_FILE)).unwrap().len();
    let json = serde_json::to_vec(&records[0].checkpoint).unwrap().len();
    println!(
        "store: 10,000 records in 1,000 commits of 10: {:.1} s, {:.2} ms per commit; file {} bytes = {:.0} KiB per 1,000 checkpoints (record JSON {} bytes)",
        took.as_secs_f64(),
        took.as_secs_f64() * 1000.0 / 1000.0,
        bytes,
        bytes as f64 / 10.0 / 1024.0,
        json
    );
    divan::main();
}

/// One persister round that brings 10 new checkpoints (one job's history after a long pause,
/// or ten jobs' newest), committed durably (fsync), into a store of 10,000 records.
#[divan::bench(sample_count = 30, sample_size = 1)]
fn write_10_records(bencher: divan::Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    for chunk in (1..=10_000u64).collect::<Vec<_>>().chunks(1_000) {
        let batch: Vec<Outboxed> = chunk.iter().map(|&i| record(0, i)).collect();
        store.write(&batch, Timestamp(T0 + 200_000_000)).unwrap();
    }
    let mut next = 10_001u64;
    bencher.bench_local(|| {
        let batch: Vec<Outboxed> = (next..next + 10).map(|i| record(0, i)).collect();
        next += 10;
        store.write(&batch, Timestamp(T0 + 200_000_000)).unwrap();
    });
}

/// The job page's "24 h" at a 10 s interval: the newest 2,000 of 8,640 records.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn query_2000_of_a_day(bencher: divan::Bencher) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), BOUNDS).unwrap();
    for chunk in (1..=8_640u64).collect::<Vec<_>>().chunks(1_000) {
        let batch: Vec<Outboxed> = chunk.iter().map(|&i| record(0, i)).collect();
        store.write(&batch, Timestamp(T0 + 90_000_000)).unwrap();
    }
    let query = Query { since: Some(T0), until: None, limit: 2_000 };
    bencher.bench_local(|| store.query("prod", &format!("{:032x}", 0), &query, |_| true).unwrap().0.len());
}
