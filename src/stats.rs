//! Sliding-window HDR histograms: quantiles over a recent window, sum and count over a lifetime.
//!
//! The window is built from rotating sub-histograms ("slots"): a value goes into the slot of
//! its time, slots older than the window are dropped, and quantiles are computed over the
//! slots that remain. This is the Prometheus summary convention (client_golang's `MaxAge`):
//! quantiles describe the recent past, `_sum` and `_count` are cumulative.
//!
//! Precision is two significant figures (values below 256 are exact, larger ones within 1 %,
//! HDR's bucketing). A slot is stored sparse: its non-empty HDR buckets as sorted
//! `(bucket code, u32 count)` pairs, so it costs 8 bytes per distinct bucket (a slot of a job
//! checkpointing every minute holds about ten) instead of a dense counts array of 5–9 KiB; it
//! can never exceed the dense size. The pairs are an exact-size shared slice, replaced when a
//! value lands in the slot: the state snapshot taken every `persist_interval` shares them
//! instead of copying every histogram of every job. Quantiles are the nearest-rank walk HDR
//! does, over the merged slots, and are computed when the histogram changes, not per read. An
//! idle series frees its slots as they age out.

use std::collections::VecDeque;
use std::sync::Arc;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Significant figures kept by every histogram.
pub(crate) const SIGNIFICANT_FIGURES: u8 = 2;

/// Largest value recorded; larger values are clamped to it and counted as out of range.
pub(crate) const MAX_VALUE: u64 = 1 << 50;

/// The quantiles that are exported.
pub(crate) const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

/// Window shape: how long, in how many slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSpec {
    /// Length of the whole window, ms.
    pub window_ms: u64,
    /// Number of slots the window is cut into.
    pub slots: u32,
}

impl WindowSpec {
    fn slot_ms(self) -> i64 {
        (self.window_ms / u64::from(self.slots.max(1))).max(1) as i64
    }
}

/// A cached summary: the quantiles over the window, plus lifetime sum and count.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Values in the window.
    pub(crate) window_count: u64,
    /// `(quantile, value)` for each of [`QUANTILES`]; empty when the window is empty.
    pub quantiles: [Option<u64>; 3],
    /// Sum of every value ever recorded.
    pub(crate) sum: u64,
    /// Number of values ever recorded.
    pub count: u64,
}

#[derive(Clone, Debug, PartialEq)]
struct Slot {
    start: i64,
    /// Non-empty buckets: (the [`BucketCode`] of their lowest equivalent value, count), sorted.
    /// 8 bytes a bucket, not 16, and no spare capacity: at 10,000 jobs the slots were the
    /// largest part of the heap after an hour (issue 31). Shared with the snapshots of the
    /// state ([`WindowedHistogram::to_persisted`]), which copied them all every 5 s before.
    buckets: Buckets,
}

/// A slot's buckets: a checkpoint adds one value to a histogram, so replacing the slice per
/// value costs one small allocation per checkpoint and phase, and lets readers share it.
type Buckets = Arc<[(BucketCode, u32)]>;

/// An HDR bucket of [`SIGNIFICANT_FIGURES`] = 2 in 16 bits: its lowest equivalent value is a
/// mantissa below 256 shifted left (HDR's sub-bucket and bucket), stored as
/// `shift × 256 + mantissa`. Codes sort as their values do.
type BucketCode = u16;

fn encode_bucket(lowest_equivalent: u64) -> BucketCode {
    let shift = (u64::BITS - lowest_equivalent.leading_zeros()).saturating_sub(8);
    debug_assert_eq!((lowest_equivalent >> shift) << shift, lowest_equivalent, "not a bucket's lowest value");
    (shift * 256 + (lowest_equivalent >> shift) as u32) as BucketCode
}

fn decode_bucket(code: BucketCode) -> u64 {
    u64::from(code & 0xff) << (code >> 8)
}

impl Slot {
    /// Counts one `value`: since values come one at a time (a restore reads whole slots,
    /// [`buckets_of`]), this is the only way a live slot changes.
    fn record(&mut self, value: u64) {
        let bucket = encode_bucket(BUCKETS.lowest_equivalent(value));
        let buckets = &self.buckets;
        self.buckets = match buckets.binary_search_by_key(&bucket, |&(v, _)| v) {
            Ok(i) => {
                let (code, n) = buckets[i];
                let bumped = std::iter::once((code, n.saturating_add(1)));
                buckets[..i].iter().copied().chain(bumped).chain(buckets[i + 1..].iter().copied()).collect()
            }
            Err(i) => {
                let inserted = std::iter::once((bucket, 1));
                buckets[..i].iter().copied().chain(inserted).chain(buckets[i..].iter().copied()).collect()
            }
        };
    }
}

/// Sorted, merged buckets of `(value, count)` pairs (values clamped to [`MAX_VALUE`]).
fn buckets_of(values: &[(u64, u64)]) -> Buckets {
    let mut buckets: Vec<(BucketCode, u32)> = values
        .iter()
        .map(|&(value, count)| {
            let code = encode_bucket(BUCKETS.lowest_equivalent(value.min(MAX_VALUE)));
            (code, u32::try_from(count).unwrap_or(u32::MAX))
        })
        .collect();
    buckets.sort_unstable_by_key(|&(code, _)| code);
    buckets.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 = kept.1.saturating_add(later.1);
        }
        same
    });
    buckets.into()
}

/// An empty histogram with the exported precision, used only for its bucket arithmetic.
static BUCKETS: std::sync::LazyLock<Histogram<u32>> = std::sync::LazyLock::new(|| {
    Histogram::new_with_max(MAX_VALUE, SIGNIFICANT_FIGURES)
        .expect("2 significant figures up to 2^50 are valid")
});

/// An HDR histogram over a sliding time window.
pub struct WindowedHistogram {
    spec: WindowSpec,
    slots: VecDeque<Slot>,
    sum: u64,
    count: u64,
    out_of_range: u64,
    /// The window's count and quantiles, computed when the histogram changes. Without the
    /// lifetime sum and count (above): 16 bytes less for each of a job's ten histograms keeps
    /// `JobState` inside a smaller allocation size class.
    window: (u64, [Option<u64>; 3]),
}

impl WindowedHistogram {
    /// An empty histogram with the given window.
    pub fn new(spec: WindowSpec) -> Self {
        WindowedHistogram {
            spec,
            slots: VecDeque::new(),
            sum: 0,
            count: 0,
            out_of_range: 0,
            window: (0, [None; 3]),
        }
    }

    /// Records `value` observed at `at`.
    pub fn record(&mut self, value: u64, at: Timestamp) {
        let value = if value > MAX_VALUE {
            self.out_of_range += 1;
            MAX_VALUE
        } else {
            value
        };
        self.sum = self.sum.saturating_add(value);
        self.count += 1;
        self.slot_for(at).record(value);
        self.expire(at);
        self.refresh();
    }

    /// Drops slots that fell out of the window at `now`; returns whether anything changed.
    pub(crate) fn expire(&mut self, now: Timestamp) -> bool {
        let horizon = now.millis() - self.spec.window_ms as i64;
        let before = self.slots.len();
        while self.slots.front().is_some_and(|s| s.start + self.spec.slot_ms() <= horizon) {
            self.slots.pop_front();
        }
        let changed = self.slots.len() != before;
        if changed {
            self.refresh();
        }
        changed
    }

    /// The cached summary (kept up to date by [`record`](Self::record) and [`expire`](Self::expire)).
    pub fn summary(&self) -> Summary {
        let (window_count, quantiles) = self.window;
        Summary { window_count, quantiles, sum: self.sum, count: self.count }
    }

    /// Values clamped because they exceeded [`MAX_VALUE`].
    pub(crate) fn out_of_range(&self) -> u64 {
        self.out_of_range
    }

    fn slot_for(&mut self, at: Timestamp) -> &mut Slot {
        let slot_ms = self.spec.slot_ms();
        let start = at.millis().div_euclid(slot_ms) * slot_ms;
        let position = match self.slots.iter().position(|s| s.start == start) {
            Some(i) => i,
            None => {
                // Keep slots ordered by start; a late value for an unknown old slot goes in order.
                let i = self.slots.iter().position(|s| s.start > start).unwrap_or(self.slots.len());
                self.slots.insert(i, Slot { start, buckets: Arc::new([]) });
                i
            }
        };
        &mut self.slots[position]
    }

    fn refresh(&mut self) {
        let mut merged: Vec<(u64, u32)> = Vec::new();
        if let [only] = self.slots.as_slices().0
            && self.slots.len() == 1
        {
            merged.extend(only.buckets.iter().map(|&(code, count)| (decode_bucket(code), count)));
        } else {
            for slot in &self.slots {
                merged.extend(slot.buckets.iter().map(|&(code, count)| (decode_bucket(code), count)));
            }
            merged.sort_unstable_by_key(|&(v, _)| v);
        }
        let window_count: u64 = merged.iter().map(|&(_, c)| u64::from(c)).sum();
        let mut quantiles = [None; 3];
        if window_count > 0 {
            for (slot, q) in quantiles.iter_mut().zip(QUANTILES) {
                *slot = Some(value_at_quantile(&merged, window_count, q));
            }
        }
        self.window = (window_count, quantiles);
    }

    /// A serialisable copy, for persisting across restarts. It shares the slots' buckets.
    pub(crate) fn to_persisted(&self) -> PersistedHistogram {
        PersistedHistogram {
            sum: self.sum,
            count: self.count,
            out_of_range: self.out_of_range,
            slots: self.slots.iter().map(|s| PersistedSlot(s.clone())).collect(),
        }
    }

    /// Rebuilds a histogram from its persisted form.
    pub(crate) fn from_persisted(spec: WindowSpec, persisted: &PersistedHistogram) -> Self {
        let mut h = WindowedHistogram::new(spec);
        h.sum = persisted.sum;
        h.count = persisted.count;
        h.out_of_range = persisted.out_of_range;
        h.slots = persisted.slots.iter().map(|s| s.0.clone()).collect();
        h.slots.make_contiguous().sort_by_key(|s| s.start);
        h.refresh();
        h
    }
}

/// HDR's `value_at_quantile` over sorted `(lowest equivalent value, count)` buckets: the
/// highest equivalent value of the bucket holding the nearest-rank sample.
fn value_at_quantile(buckets: &[(u64, u32)], total: u64, quantile: f64) -> u64 {
    let quantile = quantile.clamp(0.0, 1.0);
    let rank = ((quantile * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0u64;
    for &(value, count) in buckets {
        seen += u64::from(count);
        if seen >= rank {
            return if quantile == 0.0 { value } else { BUCKETS.highest_equivalent(value) };
        }
    }
    buckets.last().map_or(0, |&(v, _)| BUCKETS.highest_equivalent(v))
}

/// The on-disk form of a [`WindowedHistogram`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct PersistedHistogram {
    /// Lifetime sum.
    pub(crate) sum: u64,
    /// Lifetime count.
    pub(crate) count: u64,
    /// Clamped values.
    #[serde(default)]
    pub(crate) out_of_range: u64,
    /// Live slots.
    pub(crate) slots: Vec<PersistedSlot>,
}

/// One slot in its on-disk form, `{"start": epoch ms, "values": [[value, count], …]}` over
/// its non-empty buckets; in memory it shares the live slot's buckets.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PersistedSlot(Slot);

/// The JSON shape of a [`PersistedSlot`].
#[derive(Serialize, Deserialize)]
struct SlotOnDisk {
    start: i64,
    /// The highest value of each bucket, as HDR's `iter_recorded` reports it, and its count.
    values: Vec<(u64, u64)>,
}

impl PersistedSlot {
    /// A slot from its start and `(value, count)` pairs (as the file holds them).
    fn new(start: i64, values: &[(u64, u64)]) -> Self {
        PersistedSlot(Slot { start, buckets: buckets_of(values) })
    }

    /// Its non-empty buckets as `(highest value of the bucket, count)`.
    pub(crate) fn values(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0
            .buckets
            .iter()
            .map(|&(code, c)| (BUCKETS.highest_equivalent(decode_bucket(code)), u64::from(c)))
    }
}

impl Serialize for PersistedSlot {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        /// The pairs, written as they are read (no `Vec` of them per slot and snapshot).
        struct Values<'a>(&'a PersistedSlot);
        impl Serialize for Values<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_seq(self.0.values())
            }
        }
        let mut out = serializer.serialize_struct("SlotOnDisk", 2)?;
        out.serialize_field("start", &self.0.start)?;
        out.serialize_field("values", &Values(self))?;
        out.end()
    }
}

impl<'de> Deserialize<'de> for PersistedSlot {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let on_disk = SlotOnDisk::deserialize(deserializer)?;
        Ok(PersistedSlot::new(on_disk.start, &on_disk.values))
    }
}

/// The nearest-rank quantile of `values` (the definition HDR uses), for tests and checks.
pub fn nearest_rank(values: &[u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

    #[test]
    fn quantiles_match_nearest_rank_within_precision() {
        let values: Vec<u64> = (1..=1000).map(|i| i * 37 % 5000 + 3).collect();
        let mut h = WindowedHistogram::new(HOUR);
        for (i, &v) in values.iter().enumerate() {
            h.record(v, Timestamp(1_000_000 + i as i64));
        }
        let s = h.summary();
        for (got, q) in s.quantiles.iter().zip(QUANTILES) {
            let want = nearest_rank(&values, q).unwrap() as f64;
            let got = got.unwrap() as f64;
            assert!((got - want).abs() <= want * 0.01, "q{q}: got {got}, want {want}");
        }
        assert_eq!(s.count, 1000);
        assert_eq!(s.sum, values.iter().sum::<u64>());
    }

    #[test]
    fn old_slots_leave_the_window_but_sum_and_count_stay() {
        let mut h = WindowedHistogram::new(HOUR);
        h.record(10_000, Timestamp(0));
        h.record(20, Timestamp(3_000_000));
        let p99 = h.summary().quantiles[2].unwrap();
        assert!((10_000..=10_100).contains(&p99), "{p99}");
        assert!(h.expire(Timestamp(4_300_000)));
        let s = h.summary();
        assert_eq!(s.window_count, 1);
        assert_eq!(s.quantiles[2], Some(20));
        assert_eq!((s.count, s.sum), (2, 10_020));
        h.expire(Timestamp(10_000_000));
        assert_eq!(h.summary().quantiles, [None; 3]);
    }

    #[test]
    fn huge_values_are_clamped_and_counted() {
        let mut h = WindowedHistogram::new(HOUR);
        h.record(u64::MAX, Timestamp(0));
        assert_eq!(h.out_of_range(), 1);
        assert_eq!(h.summary().quantiles[0].map(|v| v >= MAX_VALUE), Some(true));
    }

    #[test]
    fn quantiles_are_exactly_those_of_a_dense_hdr_histogram() {
        let mut h = WindowedHistogram::new(HOUR);
        let mut dense = Histogram::<u32>::new(SIGNIFICANT_FIGURES).unwrap();
        let mut x = 7u64;
        for i in 0..5_000i64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = (x >> 33) % [300, 70_000, 9_000_000_000][i as usize % 3] + 1;
            h.record(v, Timestamp(1_000_000 + i * 100));
            dense.record(v).unwrap();
        }
        let want: Vec<Option<u64>> = QUANTILES.iter().map(|&q| Some(dense.value_at_quantile(q))).collect();
        assert_eq!(h.summary().quantiles.to_vec(), want);
        assert_eq!(h.summary().window_count, dense.len());
        // Sparse: no more buckets than HDR's non-empty ones, 8 bytes each.
        assert_eq!(std::mem::size_of::<(BucketCode, u32)>(), 8);
        let buckets: usize = h.slots.iter().map(|s| s.buckets.len()).sum();
        assert!(buckets <= 6 * dense.iter_recorded().count(), "{buckets}");
    }

    #[test]
    fn bucket_codes_are_exact_and_sort_as_their_values() {
        let mut last: Option<(u64, BucketCode)> = None;
        let mut value = 0u64;
        while value <= MAX_VALUE {
            let lowest = BUCKETS.lowest_equivalent(value);
            let code = encode_bucket(lowest);
            assert_eq!(decode_bucket(code), lowest, "value {value}");
            if let Some((previous, previous_code)) = last {
                assert_eq!(previous.cmp(&lowest), previous_code.cmp(&code), "{previous} vs {lowest}");
            }
            last = Some((lowest, code));
            // Every bucket below 2^20, then a spread of the ones above.
            value = if value < 1 << 20 { value + 1 } else { value + value / 97 + 1 };
        }
    }

    #[test]
    fn persisted_form_round_trips() {
        let mut h = WindowedHistogram::new(HOUR);
        for i in 0..500u64 {
            h.record(i * i, Timestamp(i as i64 * 10_000));
        }
        let copy = WindowedHistogram::from_persisted(HOUR, &h.to_persisted());
        assert_eq!(copy.summary(), h.summary());
        assert_eq!(copy.to_persisted(), h.to_persisted());
        let json = serde_json::to_string(&h.to_persisted()).unwrap();
        let read: PersistedHistogram = serde_json::from_str(&json).unwrap();
        assert_eq!(WindowedHistogram::from_persisted(HOUR, &read).summary(), h.summary());
    }

    #[test]
    fn the_on_disk_form_is_value_count_pairs_and_duplicates_merge() {
        let json = r#"{"sum":30,"count":3,"slots":[{"start":0,"values":[[10,1],[10,1],[5,1]]}]}"#;
        let read: PersistedHistogram = serde_json::from_str(json).unwrap();
        assert_eq!(read.slots[0].values().collect::<Vec<_>>(), vec![(5, 1), (10, 2)]);
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            r#"{"sum":30,"count":3,"out_of_range":0,"slots":[{"start":0,"values":[[5,1],[10,2]]}]}"#
        );
    }

    #[test]
    fn a_snapshot_shares_the_slots_and_a_later_value_does_not_change_it() {
        let mut h = WindowedHistogram::new(HOUR);
        h.record(100, Timestamp(0));
        h.record(200, Timestamp(1));
        let snapshot = h.to_persisted();
        assert!(Arc::ptr_eq(&snapshot.slots[0].0.buckets, &h.slots[0].buckets), "copied, not shared");
        h.record(300, Timestamp(2));
        h.record(100, Timestamp(3));
        assert_eq!(snapshot.slots[0].values().map(|(_, c)| c).sum::<u64>(), 2);
        assert_eq!(h.to_persisted().slots[0].values().map(|(_, c)| c).sum::<u64>(), 4);
        // No spare capacity: exactly the three buckets.
        assert_eq!(h.slots[0].buckets.len(), 3);
    }
}
