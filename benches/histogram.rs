//! HDR histograms: recording into a sliding-window histogram (2 significant figures, u32
//! counts, 6 slots over an hour) and reading its quantiles, as `State::apply` does per
//! checkpoint and per subtask.

use checkpoint_sentinel::stats::{WindowSpec, WindowedHistogram};
use checkpoint_sentinel::time::Timestamp;

fn main() {
    divan::main();
}

const HOUR: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

/// A histogram an hour into a job checkpointing every 10 s (360 values over 6 slots).
fn filled() -> (WindowedHistogram, Timestamp) {
    let mut h = WindowedHistogram::new(HOUR);
    let mut at = Timestamp(1_795_964_442_000);
    for i in 0..360u64 {
        h.record(500 + (i * 7919) % 60_000, at);
        at = at.plus_millis(10_000);
    }
    (h, at)
}

/// One record: the value goes into its slot and the cached quantiles are recomputed.
#[divan::bench]
fn record_and_refresh(bencher: divan::Bencher) {
    let (mut h, mut at) = filled();
    let mut v = 0u64;
    bencher.bench_local(|| {
        v = (v + 7919) % 60_000;
        at = at.plus_millis(10);
        h.record(divan::black_box(500 + v), at);
    });
}

/// Reading the cached summary (what a scrape does per series).
#[divan::bench]
fn summary(bencher: divan::Bencher) {
    let (h, _) = filled();
    bencher.bench_local(|| divan::black_box(&h).summary().quantiles[1]);
}

/// Raw hdrhistogram cost for comparison: record and p95 at 2 significant figures.
#[divan::bench]
fn raw_hdr_record(bencher: divan::Bencher) {
    let mut h = hdrhistogram::Histogram::<u32>::new(2).unwrap();
    let mut v = 0u64;
    bencher.bench_local(|| {
        v = (v + 7919) % 60_000;
        h.saturating_record(divan::black_box(500 + v));
    });
}

/// Raw p95 over a 360-value histogram.
#[divan::bench]
fn raw_hdr_p95(bencher: divan::Bencher) {
    let mut h = hdrhistogram::Histogram::<u32>::new(2).unwrap();
    for i in 0..360u64 {
        h.saturating_record(500 + (i * 7919) % 60_000);
    }
    bencher.bench_local(|| divan::black_box(&h).value_at_quantile(0.95));
}
