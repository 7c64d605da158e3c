//! Checkpoints counted from Flink's trace spans ahead of the poll, and how they meet the poll.
//!
//! Pure bookkeeping for the exactly-once rule across the two sources (ARCHITECTURE.md, "Two
//! sources of one checkpoint"): a checkpoint is counted by whichever source reports it first,
//! keyed by (cluster, job id, checkpoint id) through the job's `SeenIds`. A span counts a
//! checkpoint and leaves a [`Mark`] here: the poll that later finds the checkpoint in Flink's
//! history fills in what the span lacked (the mark says the poller should fetch its details) without
//! counting it again, and each poll's count of checkpoints Flink finished meanwhile takes the
//! marks into account, so a checkpoint a span counted is not also counted as unobserved.
//! Persisted with the job, so a restart neither loses a mark nor counts one twice.

use std::collections::BTreeMap;

use super::record::Totals;
use crate::observe::CheckpointStatus;

/// How many marks a job keeps: more checkpoints than this counted from spans between two polls
/// (a poll interval over 1,024 checkpoints) count the oldest as unobserved as well.
pub(crate) const MAX_MARKS: usize = 1024;

/// A checkpoint counted from a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Mark {
    /// Completed or failed, as the span said.
    pub(crate) status: CheckpointStatus,
    /// A poll's counts have taken it in (it is not unobserved, and not newly seen again).
    pub(crate) reconciled: bool,
    /// The poll found it in Flink's history and filled in the details.
    pub(crate) filled: bool,
    /// A failed one whose cause no log line or poll has told yet: it joins the consecutive
    /// failures once one does (a failure of a stopping job never does).
    pub(crate) cause_pending: bool,
}

/// One job's span-counted checkpoints and its counts by source.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Traced {
    /// By checkpoint id (a list of pairs on disk: the state file's tagged enum cannot take
    /// number keys of a JSON object).
    #[serde(serialize_with = "marks_out", deserialize_with = "marks_in")]
    marks: BTreeMap<u64, Mark>,
    /// Checkpoints counted from the REST poll, lifetime.
    pub by_rest: Totals,
    /// Checkpoints counted from trace spans, lifetime.
    pub by_trace: Totals,
    /// Spans of checkpoints already counted (by the poll, or a span read twice).
    pub duplicate_spans: u64,
    /// Spans that came after a poll had counted their checkpoint as unobserved.
    pub late_spans: u64,
}

fn marks_out<S: serde::Serializer>(marks: &BTreeMap<u64, Mark>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(marks.iter())
}

fn marks_in<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<u64, Mark>, D::Error> {
    let pairs: Vec<(u64, Mark)> = serde::Deserialize::deserialize(d)?;
    Ok(pairs.into_iter().collect())
}

impl Traced {
    /// A span counted checkpoint `id`.
    pub(crate) fn counted_by_span(&mut self, id: u64, status: CheckpointStatus) {
        let cause_pending = status == CheckpointStatus::Failed;
        self.marks.insert(id, Mark { status, reconciled: false, filled: false, cause_pending });
        self.by_trace.add(status, 1);
        while self.marks.len() > MAX_MARKS {
            self.marks.pop_first();
        }
    }

    /// The poll counted a checkpoint itself.
    pub(crate) fn counted_by_rest(&mut self, status: CheckpointStatus) {
        self.by_rest.add(status, 1);
    }

    /// Whether the poller should fetch the details of `id`: a span counted it and no poll has
    /// filled it in yet.
    pub(crate) fn wants_details(&self, id: u64) -> bool {
        self.marks.get(&id).is_some_and(|m| !m.filled)
    }

    /// The poll brought `id` with its details: `true` (once) when a span counted it, so the
    /// caller fills in what the span lacked instead of counting it.
    pub(crate) fn fill(&mut self, id: u64) -> bool {
        match self.marks.get_mut(&id) {
            Some(m) if !m.filled => {
                m.filled = true;
                true
            }
            _ => false,
        }
    }

    /// Takes the cause of a span-counted failure as told (once): `true` when it was waiting for it.
    pub(crate) fn take_cause(&mut self, id: u64) -> bool {
        match self.marks.get_mut(&id) {
            Some(m) if m.cause_pending => {
                m.cause_pending = false;
                true
            }
            _ => false,
        }
    }

    /// A poll's counts went up by `room` more than the checkpoints it brought: that many of the
    /// oldest marks not yet taken in are (per status) the checkpoints behind the rise. Returns
    /// how many were taken in; the rest of the rise went by unobserved. A mark the poll's
    /// counts do not reach yet (its span was read before Flink's REST answer caught up) waits
    /// for the next poll.
    pub(crate) fn reconcile(&mut self, room: Totals) -> Totals {
        let mut taken = Totals::default();
        for mark in self.marks.values_mut().filter(|m| !m.reconciled) {
            let (left, got) = match mark.status {
                CheckpointStatus::Completed => (room.completed, &mut taken.completed),
                CheckpointStatus::Failed => (room.failed, &mut taken.failed),
            };
            if *got < left {
                *got += 1;
                mark.reconciled = true;
            }
        }
        taken
    }

    /// Forgets marks that are done: taken in by a poll, and filled or older than `oldest` (the
    /// oldest id of the poll's history: Flink no longer has its details).
    pub(crate) fn prune(&mut self, oldest: Option<u64>) {
        self.marks.retain(|id, m| !(m.reconciled && (m.filled || oldest.is_some_and(|o| *id < o))));
    }

    /// A new counting epoch (the ids restarted): the marks say nothing about the new ids.
    pub(crate) fn start_over(&mut self) {
        self.marks.clear();
    }

    /// Marks held (bounded by [`MAX_MARKS`]).
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    #[cfg(test)]
    /// Whether no mark is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CheckpointStatus::{Completed, Failed};

    #[test]
    fn a_rise_takes_in_the_oldest_marks_and_leaves_the_rest_for_the_next_poll() {
        let mut t = Traced::default();
        for id in 1..=4 {
            t.counted_by_span(id, Completed);
        }
        t.counted_by_span(5, Failed);
        // Flink's answer reached checkpoint 2 and the failure only.
        assert_eq!(t.reconcile(Totals { completed: 2, failed: 1 }), Totals { completed: 2, failed: 1 });
        assert_eq!(t.reconcile(Totals { completed: 5, failed: 0 }), Totals { completed: 2, failed: 0 });
        assert_eq!(t.reconcile(Totals { completed: 5, failed: 5 }), Totals::default());
        t.prune(Some(10));
        assert!(t.is_empty());
    }

    #[test]
    fn a_mark_is_filled_once_and_then_wants_no_details() {
        let mut t = Traced::default();
        t.counted_by_span(7, Failed);
        assert!(t.wants_details(7) && !t.wants_details(8));
        assert!(t.fill(7));
        assert!(!t.fill(7) && !t.wants_details(7));
        assert!(t.take_cause(7) && !t.take_cause(7));
    }

    #[test]
    fn marks_are_bounded() {
        let mut t = Traced::default();
        for id in 0..(MAX_MARKS as u64 + 10) {
            t.counted_by_span(id, Completed);
        }
        assert_eq!(t.len(), MAX_MARKS);
        assert!(!t.wants_details(9) && t.wants_details(10));
    }
}
