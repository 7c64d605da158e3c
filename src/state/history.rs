//! A bounded history of a job's P95 per phase, for the status page's chart of P95 over time.
//!
//! Pure like the rest of `state`: time is an argument. A sample is taken whenever the job's
//! phase P95s change (a completed checkpoint was recorded, or old values left the window), and
//! samples closer together than the current spacing overwrite each other, so the newest sample
//! always holds the P95 the metrics show now.
//!
//! The spacing adapts so the chart is readable both right after start and for slow jobs: it
//! starts at [`MIN_SAMPLE_SPACING_MS`] (a job checkpointing every second gets a point per poll
//! at first), and each time the ring overflows it doubles and the samples are thinned to one per
//! spacing, up to `window / P95_HISTORY_POINTS`. From there on the oldest sample is dropped. So
//! a job checkpointing every 1 s ends up with a point every 30 s over the last hour (the default
//! 1 h window), and a job checkpointing every 10 min with a point per checkpoint over the last
//! 20 h.
//!
//! Not persisted (the state file format stays as it is): after a restart the history rebuilds.

use std::collections::VecDeque;

use super::record::{Phase, PhaseHistograms};
use crate::stats::WindowSpec;
use crate::time::Timestamp;

/// Most samples kept per job by default (`[state] p95_history_points`).
///
/// Memory: a sample is 32 bytes (an 8-byte timestamp and five 4-byte P95s), and the ring's
/// buffer holds at most 128 of them (`VecDeque` rounds up to a power of two), so a job's history
/// costs at most about 4 KiB: 4 MiB for 1,000 jobs, 40 MiB for 10,000 once every job has
/// checkpointed for two hours at one a minute (the large-estate settings keep 30).
pub(crate) const P95_HISTORY_POINTS: usize = 120;

/// The fewest and the most samples a job may be told to keep.
pub(crate) const P95_HISTORY_POINTS_RANGE: std::ops::RangeInclusive<usize> = 2..=1_024;

/// The finest spacing between two samples, ms (the poller's usual interval).
pub(crate) const MIN_SAMPLE_SPACING_MS: i64 = 1_000;

/// A P95 that is not known (the phase had no value in the window).
const UNKNOWN: u32 = u32::MAX;

/// The P95 of each phase at one time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct P95Sample {
    /// When the P95s had these values.
    pub(crate) at: Timestamp,
    /// ms, in the order of [`PhaseHistograms::iter`]; [`UNKNOWN`] when there is none. Four
    /// bytes each keep a sample small; a P95 of 49 days or more is stored as just under that.
    p95_ms: [u32; 5],
}

impl P95Sample {
    fn of(phases: &PhaseHistograms, at: Timestamp) -> Self {
        let p95_ms = phases
            .iter()
            .map(|(_, h)| h.summary().quantiles[1].map_or(UNKNOWN, |v| v.min(u64::from(UNKNOWN - 1)) as u32));
        P95Sample { at, p95_ms }
    }

    /// The P95 of `phase`, ms; `None` when the window had no value for it.
    pub(crate) fn p95_ms(&self, phase: Phase) -> Option<u64> {
        let index = match phase {
            Phase::EndToEnd => 0,
            Phase::Alignment => 1,
            Phase::Sync => 2,
            Phase::Async => 3,
            Phase::StartDelay => 4,
        };
        Some(self.p95_ms[index]).filter(|&v| v != UNKNOWN).map(u64::from)
    }
}

/// The recent P95s of a job's phases, oldest first, at most [`P95_HISTORY_POINTS`].
#[derive(Clone, Debug)]
pub(crate) struct P95History {
    spacing_ms: i64,
    max_spacing_ms: i64,
    window_ms: u64,
    /// Most samples kept ([`P95History::keep`]).
    points: usize,
    samples: VecDeque<P95Sample>,
}

impl P95History {
    /// An empty history for histograms over `window`.
    pub(crate) fn new(window: WindowSpec) -> Self {
        let mut history = P95History {
            spacing_ms: MIN_SAMPLE_SPACING_MS,
            max_spacing_ms: MIN_SAMPLE_SPACING_MS,
            window_ms: window.window_ms,
            points: P95_HISTORY_POINTS,
            samples: VecDeque::new(),
        };
        history.keep(P95_HISTORY_POINTS);
        history
    }

    /// Keeps at most `points` samples (within [`P95_HISTORY_POINTS_RANGE`]) from now on,
    /// spaced by up to `window / points`; the oldest beyond them are dropped now.
    pub(crate) fn keep(&mut self, points: usize) {
        let points = points.clamp(*P95_HISTORY_POINTS_RANGE.start(), *P95_HISTORY_POINTS_RANGE.end());
        self.points = points;
        self.max_spacing_ms = ((self.window_ms / points as u64) as i64).max(MIN_SAMPLE_SPACING_MS);
        self.spacing_ms = self.spacing_ms.min(self.max_spacing_ms);
        if self.samples.len() > points {
            self.samples.drain(..self.samples.len() - points);
            self.samples.shrink_to_fit();
        }
    }

    /// Records the current P95s of `phases` at `at`.
    pub(crate) fn sample(&mut self, phases: &PhaseHistograms, at: Timestamp) {
        let sample = P95Sample::of(phases, at);
        let spacing = self.spacing_ms;
        if let Some(last) = self.samples.back_mut()
            && sample.at.millis().div_euclid(spacing) <= last.at.millis().div_euclid(spacing)
        {
            // Same spacing bucket (or a clock that went back): the newer values win, and the
            // time never goes backwards.
            *last = P95Sample { at: last.at.max(sample.at), ..sample };
            return;
        }
        self.samples.push_back(sample);
        while self.samples.len() > self.points && self.spacing_ms < self.max_spacing_ms {
            self.spacing_ms = (self.spacing_ms * 2).min(self.max_spacing_ms);
            self.thin();
        }
        while self.samples.len() > self.points {
            self.samples.pop_front();
        }
    }

    /// The samples, oldest first.
    pub(crate) fn samples(&self) -> impl Iterator<Item = &P95Sample> {
        self.samples.iter()
    }

    #[cfg(test)]
    /// The current spacing between samples, ms.
    pub(crate) fn spacing_ms(&self) -> u64 {
        self.spacing_ms as u64
    }

    #[cfg(test)]
    /// Bytes held by the ring (for sizing).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.samples.capacity() * std::mem::size_of::<P95Sample>()
    }

    /// Keeps the newest sample of each bucket of the current spacing.
    fn thin(&mut self) {
        let spacing = self.spacing_ms;
        let bucket = |s: &P95Sample| s.at.millis().div_euclid(spacing);
        let mut kept: VecDeque<P95Sample> = VecDeque::with_capacity(self.points + 1);
        for sample in self.samples.drain(..) {
            match kept.back_mut() {
                Some(last) if bucket(last) == bucket(&sample) => *last = sample,
                _ => kept.push_back(sample),
            }
        }
        self.samples = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

    fn phases() -> PhaseHistograms {
        PhaseHistograms::new(HOUR)
    }

    /// Records one checkpoint of `e2e` ms (alignment a tenth of it) at `at`.
    fn record(p: &mut PhaseHistograms, e2e: u64, at: Timestamp) {
        p.end_to_end.record(e2e, at);
        p.alignment.record(e2e / 10, at);
    }

    /// A job checkpointing every `every_ms` for `for_ms`, sampled after each checkpoint.
    fn run(every_ms: i64, for_ms: i64) -> P95History {
        let (mut p, mut h) = (phases(), P95History::new(HOUR));
        for t in (0..for_ms).step_by(every_ms as usize) {
            record(&mut p, 100 + (t / every_ms % 7) as u64, Timestamp(t));
            h.sample(&p, Timestamp(t));
        }
        h
    }

    fn times(h: &P95History) -> Vec<i64> {
        h.samples().map(|s| s.at.millis()).collect()
    }

    #[test]
    fn a_job_checkpointing_every_second_keeps_a_point_every_30_s_over_the_window() {
        let h = run(1_000, 10 * 3_600_000);
        let t = times(&h);
        assert_eq!(t.len(), P95_HISTORY_POINTS);
        assert_eq!(h.spacing_ms(), 30_000);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 30_000), "{t:?}");
        // The newest point is the newest checkpoint's: the chart ends at the current P95.
        assert_eq!(*t.last().unwrap(), 10 * 3_600_000 - 1_000);
        assert!(t[0] >= 9 * 3_600_000 - 30_000, "covers about the last window: {}", t[0]);
    }

    #[test]
    fn right_after_start_every_poll_is_a_point() {
        let t = times(&run(2_000, 60_000));
        assert_eq!(t, (0..60_000).step_by(2_000).collect::<Vec<_>>());
        // When the ring fills, the spacing doubles: the chart still reaches back to the start
        // and keeps most of its points rather than dropping to a handful.
        let t = times(&run(1_000, 240_000));
        assert!(t.len() >= P95_HISTORY_POINTS / 2 && t[0] < 4_000, "{} points from {}", t.len(), t[0]);
    }

    #[test]
    fn a_job_checkpointing_every_10_min_keeps_a_point_per_checkpoint() {
        let t = times(&run(600_000, 100 * 600_000));
        assert_eq!(t.len(), 100);
        let t = times(&run(600_000, 500 * 600_000));
        assert_eq!(t.len(), P95_HISTORY_POINTS);
        assert!(t.windows(2).all(|w| w[1] - w[0] == 600_000));
        assert_eq!(*t.last().unwrap(), 499 * 600_000);
    }

    #[test]
    fn a_history_told_to_keep_fewer_points_drops_its_oldest_and_spaces_the_rest_over_the_window() {
        // Every 10 min for 500 checkpoints, then told to keep 30: the newest 30, as before.
        let mut h = run(600_000, 500 * 600_000);
        h.keep(30);
        let t = times(&h);
        assert_eq!((t.len(), *t.last().unwrap()), (30, 499 * 600_000));
        assert!(h.heap_bytes() <= 32 * std::mem::size_of::<P95Sample>(), "{} bytes kept", h.heap_bytes());
        // A job checkpointing every second, kept at 30 points: at most one every 2 minutes
        // (the hour's window over 30), so the 30 still span the hour.
        let (mut p, mut h) = (phases(), P95History::new(HOUR));
        h.keep(30);
        for t in (0..2 * 3_600_000).step_by(1_000) {
            record(&mut p, 100 + (t / 1_000 % 7) as u64, Timestamp(t));
            h.sample(&p, Timestamp(t));
        }
        let t = times(&h);
        assert_eq!((t.len(), h.spacing_ms()), (30, 120_000));
        assert!(t[29] - t[0] >= 3_300_000, "{t:?}");
        // Out of range asks are held to it.
        h.keep(0);
        assert_eq!(times(&h).len(), *P95_HISTORY_POINTS_RANGE.start());
    }

    #[test]
    fn samples_hold_each_phase_and_unknown_phases_are_none() {
        let (mut p, mut h) = (phases(), P95History::new(HOUR));
        record(&mut p, 200, Timestamp(0));
        h.sample(&p, Timestamp(0));
        let s = h.samples().next().unwrap();
        assert_eq!(s.p95_ms(Phase::EndToEnd), Some(200));
        assert_eq!(s.p95_ms(Phase::Alignment), Some(20));
        assert_eq!(s.p95_ms(Phase::Sync), None);
        // Values past what four bytes hold are kept as the largest known value, not as unknown.
        p.sync.record(u64::from(u32::MAX) + 5, Timestamp(0));
        h.sample(&p, Timestamp(0));
        assert_eq!(h.samples().count(), 1);
        assert!(h.samples().next().unwrap().p95_ms(Phase::Sync).is_some());
    }

    #[test]
    fn a_sample_in_the_same_spacing_overwrites_and_time_never_goes_back() {
        let (mut p, mut h) = (phases(), P95History::new(HOUR));
        record(&mut p, 100, Timestamp(10_000));
        h.sample(&p, Timestamp(10_000));
        record(&mut p, 5_000, Timestamp(10_500));
        h.sample(&p, Timestamp(10_500));
        h.sample(&p, Timestamp(9_000));
        let all: Vec<_> = h.samples().collect();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].at, Timestamp(10_500));
        assert!(all[0].p95_ms(Phase::EndToEnd).is_some_and(|v| v >= 4_950));
    }

    #[test]
    fn a_histogram_that_emptied_samples_as_unknown() {
        let (mut p, mut h) = (phases(), P95History::new(HOUR));
        record(&mut p, 100, Timestamp(0));
        h.sample(&p, Timestamp(0));
        let later = Timestamp(2 * 3_600_000);
        assert!(p.end_to_end.expire(later));
        p.alignment.expire(later);
        h.sample(&p, later);
        assert_eq!(h.samples().last().unwrap().p95_ms(Phase::EndToEnd), None);
    }

    #[test]
    fn memory_per_job_stays_bounded() {
        let h = run(1_000, 3 * 3_600_000);
        assert_eq!(std::mem::size_of::<P95Sample>(), 32);
        assert!(h.heap_bytes() <= 128 * 32, "{}", h.heap_bytes());
    }
}
