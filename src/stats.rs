//! Sliding-window HDR histograms: quantiles over a recent window, sum and count over a lifetime.
//!
//! The window is built from rotating sub-histograms ("slots"): a value goes into the slot of
//! its time, slots older than the window are dropped, and quantiles are computed over the
//! slots that remain. This is the Prometheus summary convention (client_golang's `MaxAge`):
//! quantiles describe the recent past, `_sum` and `_count` are cumulative.
//!
//! Precision is two significant figures (values below 256 are exact, larger ones within 1 %),
//! with counts as `u32` and the range growing only as far as the largest value recorded:
//! a few KiB per live slot, and an idle series frees its slots as they age out.

use std::collections::VecDeque;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Significant figures kept by every histogram.
pub const SIGNIFICANT_FIGURES: u8 = 2;

/// Largest value recorded; larger values are clamped to it and counted as out of range.
pub const MAX_VALUE: u64 = 1 << 50;

/// The quantiles that are exported.
pub const QUANTILES: [f64; 3] = [0.5, 0.95, 0.99];

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
    pub window_count: u64,
    /// `(quantile, value)` for each of [`QUANTILES`]; empty when the window is empty.
    pub quantiles: [Option<u64>; 3],
    /// Sum of every value ever recorded.
    pub sum: u64,
    /// Number of values ever recorded.
    pub count: u64,
}

struct Slot {
    start: i64,
    histogram: Histogram<u32>,
}

/// An HDR histogram over a sliding time window.
pub struct WindowedHistogram {
    spec: WindowSpec,
    slots: VecDeque<Slot>,
    sum: u64,
    count: u64,
    out_of_range: u64,
    summary: Summary,
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
            summary: Summary::default(),
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
        let slot = self.slot_for(at);
        // Auto-resizing histograms only fail on values beyond u64 range; clamp made that impossible,
        // but count rather than panic should it ever happen.
        if slot.histogram.record(value).is_err() {
            self.out_of_range += 1;
        }
        self.expire(at);
        self.refresh();
    }

    /// Drops slots that fell out of the window at `now`; returns whether anything changed.
    pub fn expire(&mut self, now: Timestamp) -> bool {
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
        self.summary
    }

    /// Values clamped because they exceeded [`MAX_VALUE`].
    pub fn out_of_range(&self) -> u64 {
        self.out_of_range
    }

    fn slot_for(&mut self, at: Timestamp) -> &mut Slot {
        let slot_ms = self.spec.slot_ms();
        let start = at.millis().div_euclid(slot_ms) * slot_ms;
        let position = match self.slots.iter().position(|s| s.start == start) {
            Some(i) => i,
            None => {
                let histogram = Histogram::new(SIGNIFICANT_FIGURES).expect("2 significant figures are valid");
                // Keep slots ordered by start; a late value for an unknown old slot goes in order.
                let i = self.slots.iter().position(|s| s.start > start).unwrap_or(self.slots.len());
                self.slots.insert(i, Slot { start, histogram });
                i
            }
        };
        &mut self.slots[position]
    }

    fn refresh(&mut self) {
        let mut merged: Option<Histogram<u32>> = None;
        for slot in &self.slots {
            match merged.as_mut() {
                None => merged = Some(slot.histogram.clone()),
                Some(m) => {
                    // Both auto-resize, so adding cannot fail for lack of range.
                    let _ = m.add(&slot.histogram);
                }
            }
        }
        let window_count = merged.as_ref().map_or(0, |m| m.len());
        let mut quantiles = [None; 3];
        if let Some(m) = merged.as_ref().filter(|m| !m.is_empty()) {
            for (slot, q) in quantiles.iter_mut().zip(QUANTILES) {
                *slot = Some(m.value_at_quantile(q));
            }
        }
        self.summary = Summary { window_count, quantiles, sum: self.sum, count: self.count };
    }

    /// A serialisable copy, for persisting across restarts.
    pub fn to_persisted(&self) -> PersistedHistogram {
        PersistedHistogram {
            sum: self.sum,
            count: self.count,
            out_of_range: self.out_of_range,
            slots: self
                .slots
                .iter()
                .map(|s| PersistedSlot {
                    start: s.start,
                    values: s
                        .histogram
                        .iter_recorded()
                        .map(|v| (v.value_iterated_to(), v.count_at_value() as u64))
                        .collect(),
                })
                .collect(),
        }
    }

    /// Rebuilds a histogram from its persisted form.
    pub fn from_persisted(spec: WindowSpec, persisted: &PersistedHistogram) -> Self {
        let mut h = WindowedHistogram::new(spec);
        h.sum = persisted.sum;
        h.count = persisted.count;
        h.out_of_range = persisted.out_of_range;
        for slot in &persisted.slots {
            let mut histogram: Histogram<u32> =
                Histogram::new(SIGNIFICANT_FIGURES).expect("2 significant figures are valid");
            for &(value, count) in &slot.values {
                let _ = histogram.record_n(value.min(MAX_VALUE), u32::try_from(count).unwrap_or(u32::MAX));
            }
            h.slots.push_back(Slot { start: slot.start, histogram });
        }
        h.slots.make_contiguous().sort_by_key(|s| s.start);
        h.refresh();
        h
    }
}

/// The on-disk form of a [`WindowedHistogram`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PersistedHistogram {
    /// Lifetime sum.
    pub sum: u64,
    /// Lifetime count.
    pub count: u64,
    /// Clamped values.
    #[serde(default)]
    pub out_of_range: u64,
    /// Live slots.
    pub slots: Vec<PersistedSlot>,
}

/// The on-disk form of one slot: `(value, count)` pairs of its non-empty buckets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PersistedSlot {
    /// Slot start, epoch ms.
    pub start: i64,
    /// Non-empty buckets.
    pub values: Vec<(u64, u64)>,
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
    fn persisted_form_round_trips() {
        let mut h = WindowedHistogram::new(HOUR);
        for i in 0..500u64 {
            h.record(i * i, Timestamp(i as i64 * 10_000));
        }
        let copy = WindowedHistogram::from_persisted(HOUR, &h.to_persisted());
        assert_eq!(copy.summary(), h.summary());
        assert_eq!(copy.to_persisted(), h.to_persisted());
    }
}
