//! A job's last thread samples (bounded) and the verdict they support: a checkpoint held up by
//! the user's code, when the pending subtask's thread sat in the same non-Flink frame in
//! consecutive samples. Pure; not persisted (a restart looks again).

use std::collections::VecDeque;

use crate::observe::{SampleSource, ThreadSample};
use crate::time::Timestamp;

/// Samples kept per job.
pub(crate) const SAMPLES_PER_JOB: usize = 6;

/// Frames a checkpoint's record keeps of its sample (the innermost, and the user's frame).
pub(crate) const RECORD_FRAMES: usize = 12;

/// How long a verdict holds after its latest sample while no checkpoint completes: samples
/// come at most every `[thread_dumps] min_interval` (10 minutes by default) and only while a
/// checkpoint is about to expire, so a still-blocked job is sampled again within this.
pub(crate) const VERDICT_HOLD_MS: u64 = 30 * 60 * 1000;

/// Consecutive samples in the same frame that make a verdict.
pub(crate) const CONSECUTIVE: u32 = 2;

/// Of one flame graph (many samples of the thread), the share in the user's frame that counts
/// as consecutive samples in it.
pub(crate) const FLAME_SHARE: f64 = 0.9;

/// A job's recent thread samples, oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct ThreadSamples {
    recent: VecDeque<ThreadSample>,
}

/// The verdict: the pending subtask's thread sits in the user's code.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Blocked<'a> {
    /// The latest sample.
    pub(crate) sample: &'a ThreadSample,
    /// Samples in a row (or, of a flame graph, its samples) in the same user frame.
    pub(crate) consecutive: u32,
}

impl Blocked<'_> {
    /// `class.method` of the user's frame.
    pub(crate) fn frame(&self) -> String {
        self.sample.user().map(|f| f.method_text()).unwrap_or_default()
    }
}

impl ThreadSamples {
    /// Keeps `sample`, dropping the oldest beyond [`SAMPLES_PER_JOB`].
    pub(crate) fn push(&mut self, sample: ThreadSample) {
        if self.recent.len() == SAMPLES_PER_JOB {
            self.recent.pop_front();
        }
        self.recent.push_back(sample);
    }

    #[cfg(test)]
    /// Oldest first.
    pub(crate) fn recent(&self) -> impl DoubleEndedIterator<Item = &ThreadSample> {
        self.recent.iter()
    }

    /// The latest sample taken for checkpoint `id`, cut to [`RECORD_FRAMES`] (and the user's
    /// frame) for its record.
    pub(crate) fn for_record(&self, id: u64) -> Option<ThreadSample> {
        let mut sample = self.recent.iter().rev().find(|s| s.checkpoint_id == id)?.clone();
        let keep = RECORD_FRAMES.max(sample.user_frame.map_or(0, |u| u + 1));
        if sample.frames.len() > keep {
            sample.frames.truncate(keep);
            sample.stopped_early = true;
        }
        Some(sample)
    }

    /// The verdict at `now`, given when the job's last checkpoint completed: the latest sample
    /// is in the user's code, younger than [`VERDICT_HOLD_MS`], no checkpoint completed since,
    /// and the same subtask's samples before it sat in the same frame, method and line
    /// ([`CONSECUTIVE`] in a row), or it is a flame graph with [`FLAME_SHARE`] of at least two
    /// samples there (its nodes are lines already).
    pub(crate) fn blocked(
        &self,
        last_completed_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Option<Blocked<'_>> {
        let latest = self.recent.back()?;
        // The same line, not only the same method: a thread parked in a call sits on one line,
        // while busy code that merely is slow moves between lines (and is not "blocked").
        let frame = latest.user()?.text();
        if now.since(latest.taken_at) > VERDICT_HOLD_MS
            || last_completed_at.is_some_and(|c| c > latest.taken_at)
        {
            return None;
        }
        let consecutive = match (latest.source, latest.hits) {
            (SampleSource::FlameGraph, Some((hits, of)))
                if of >= CONSECUTIVE && f64::from(hits) >= FLAME_SHARE * f64::from(of) =>
            {
                of
            }
            _ => self
                .recent
                .iter()
                .rev()
                .filter(|s| s.operator == latest.operator && s.subtask == latest.subtask)
                .take_while(|s| s.user().is_some_and(|f| f.text() == frame))
                .count() as u32,
        };
        (consecutive >= CONSECUTIVE).then_some(Blocked { sample: latest, consecutive })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::Frame;

    fn sample(at: i64, method: &str) -> ThreadSample {
        let frames = vec![
            Frame { class: "java.lang.Thread".into(), method: "sleep".into(), file: None, line: None },
            Frame {
                class: "my.Job$Map".into(),
                method: method.into(),
                file: Some("Job.java".into()),
                line: Some(9),
            },
        ];
        ThreadSample {
            checkpoint_id: at as u64,
            operator: "Map".into(),
            subtask: 0,
            taskmanager: "tm-1".into(),
            thread: Some("Map (1/1)#0".into()),
            taken_at: Timestamp(at),
            state: None,
            frames,
            user_frame: Some(1),
            stopped_early: false,
            source: SampleSource::ThreadDump,
            hits: None,
        }
    }

    #[test]
    fn two_samples_in_the_same_user_frame_are_a_verdict_until_a_checkpoint_completes() {
        let mut t = ThreadSamples::default();
        t.push(sample(1_000, "map"));
        assert_eq!(t.blocked(None, Timestamp(2_000)), None, "one sample is not enough");
        t.push(sample(600_000, "map"));
        let b = t.blocked(None, Timestamp(700_000)).unwrap();
        assert_eq!((b.consecutive, b.frame().as_str()), (2, "my.Job$Map.map"));
        assert_eq!(
            t.blocked(Some(Timestamp(650_000)), Timestamp(700_000)),
            None,
            "a checkpoint completed since"
        );
        assert_eq!(t.blocked(None, Timestamp(600_000 + VERDICT_HOLD_MS as i64 + 1)), None, "too old");
        let mut moved = sample(800_000, "map");
        moved.frames[1].line = Some(10);
        t.push(moved);
        assert_eq!(t.blocked(None, Timestamp(800_001)), None, "busy code moves between lines: not blocked");
        t.push(sample(900_000, "flatMap"));
        assert_eq!(t.blocked(None, Timestamp(900_001)), None, "another frame starts a new run");
    }

    #[test]
    fn a_flame_graph_of_many_samples_in_one_frame_is_a_verdict() {
        let mut t = ThreadSamples::default();
        let mut s = sample(1_000, "map");
        s.source = SampleSource::FlameGraph;
        s.hits = Some((95, 100));
        t.push(s.clone());
        assert_eq!(t.blocked(None, Timestamp(1_000)).map(|b| b.consecutive), Some(100));
        s.hits = Some((50, 100));
        t.push(s);
        assert_eq!(
            t.blocked(None, Timestamp(1_000)).map(|b| b.consecutive),
            Some(2),
            "falls back to the samples"
        );
    }

    #[test]
    fn the_ring_is_bounded_and_a_record_keeps_the_top_frames() {
        let mut t = ThreadSamples::default();
        for i in 0..10 {
            t.push(sample(i, "map"));
        }
        assert_eq!(t.recent().count(), SAMPLES_PER_JOB);
        let mut deep = sample(42, "map");
        let (jdk, user) = (deep.frames[0].clone(), deep.frames[1].clone());
        deep.frames = [vec![jdk.clone(); 20], vec![user], vec![jdk; 20]].concat();
        deep.user_frame = Some(20);
        t.push(deep);
        let kept = t.for_record(42).unwrap();
        assert_eq!((kept.frames.len(), kept.stopped_early), (21, true), "down to the user's frame");
        assert!(t.for_record(2).is_none(), "dropped from the ring");
    }
}
