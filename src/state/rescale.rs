//! A job's rescales (persisted with the job, `state::persist`), and the checkpoint that gated
//! each: the one the new parallelism restored.

use std::collections::VecDeque;

use crate::observe::{Rescale, RescaleReport, RescaleSource};
use crate::state::restore::RestoreStats;
use crate::time::Timestamp;

/// How many rescales per job are kept for the API and the page.
pub(crate) const RECENT_RESCALES: usize = 16;
/// A parallelism change seen this close to a rescale of Flink's history is that rescale.
const SAME_RESCALE_MS: i64 = 60_000;

/// A job's latest rescales, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rescales {
    /// At most [`RECENT_RESCALES`].
    pub(crate) recent: VecDeque<Rescale>,
}

impl Rescales {
    /// Takes a report; returns the rescales new to the job. A rescale of Flink's history
    /// replaces the parallelism change the daemon saw of it (and is itself taken once, by id).
    pub(crate) fn observe(&mut self, report: &RescaleReport) -> Vec<Rescale> {
        let mut new = Vec::new();
        for r in &report.rescales {
            if r.id.is_some() && self.recent.iter().any(|k| k.id == r.id) {
                continue;
            }
            let near = |k: &Rescale, h: &Rescale| {
                let from = h.restarted_at.or(h.started_at).unwrap_or(h.at).0 - SAME_RESCALE_MS / 12;
                k.at.0 >= from && k.at.0 <= h.at.0 + SAME_RESCALE_MS
            };
            let known = match r.source {
                RescaleSource::RescaleHistory => {
                    let before = self.recent.len();
                    self.recent.retain(|k| !(k.source == RescaleSource::ParallelismChange && near(k, r)));
                    self.recent.len() < before
                }
                RescaleSource::ParallelismChange => {
                    self.recent.iter().any(|h| h.source == RescaleSource::RescaleHistory && near(r, h))
                }
            };
            if r.source == RescaleSource::ParallelismChange && known {
                continue;
            }
            self.recent.push_back(r.clone());
            if !known {
                new.push(r.clone());
            }
        }
        self.recent.make_contiguous().sort_by_key(|r| r.at);
        while self.recent.len() > RECENT_RESCALES {
            self.recent.pop_front();
        }
        new
    }
}

/// The checkpoint that gated a rescale: the one its new parallelism restored (the first restore
/// between the old execution's stop and the rescale's end), else the newest checkpoint that
/// completed before the old execution stopped (`completed`: id and completion time).
pub(crate) fn gating_checkpoint(
    rescale: &Rescale,
    restores: &RestoreStats,
    completed: impl Iterator<Item = (u64, Timestamp)>,
) -> Option<u64> {
    let stop = rescale.restarted_at.or(rescale.started_at).unwrap_or(rescale.at);
    let restored = restores
        .recent
        .iter()
        .find(|r| r.from.restored_at >= stop && r.from.restored_at <= rescale.at && !r.from.is_savepoint)
        .and_then(|r| r.from.checkpoint_id);
    restored.or_else(|| completed.filter(|(_, at)| *at <= stop).max_by_key(|(_, at)| *at).map(|(id, _)| id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{JobKey, RestoreReport, RestoredFrom, VertexRescale};

    fn rescale(source: RescaleSource, id: Option<&str>, restarted: i64, at: i64) -> Rescale {
        Rescale {
            id: id.map(str::to_string),
            source,
            started_at: None,
            restarted_at: Some(Timestamp(restarted)),
            at: Timestamp(at),
            cause: None,
            outcome: None,
            vertices: vec![VertexRescale { vertex: "map".into(), before: Some(2), after: Some(1) }],
        }
    }

    fn report(rescales: Vec<Rescale>) -> RescaleReport {
        RescaleReport { key: JobKey { cluster: "c".into(), job_id: "j".into() }, rescales }
    }

    #[test]
    fn the_history_replaces_the_parallelism_change_of_the_same_rescale() {
        let mut r = Rescales::default();
        let seen = rescale(RescaleSource::ParallelismChange, None, 10_000, 14_000);
        assert_eq!(r.observe(&report(vec![seen.clone()])).len(), 1);
        let told = rescale(RescaleSource::RescaleHistory, Some("u#1"), 10_000, 10_300);
        assert!(r.observe(&report(vec![told.clone()])).is_empty(), "the same rescale, not a new one");
        assert_eq!(r.recent, VecDeque::from([told.clone()]));
        assert!(r.observe(&report(vec![told.clone()])).is_empty(), "taken once by id");
        assert!(r.observe(&report(vec![seen])).is_empty(), "a late parallelism change of it");
        assert_eq!(r.recent.len(), 1);
        let later = rescale(RescaleSource::RescaleHistory, Some("v#1"), 200_000, 200_300);
        assert_eq!(r.observe(&report(vec![later])).len(), 1);
        assert_eq!(r.recent.len(), 2);
    }

    #[test]
    fn the_gate_is_the_restored_checkpoint_else_the_last_before_the_stop() {
        let r = rescale(RescaleSource::RescaleHistory, Some("u#1"), 365_436, 365_644);
        let completed =
            || [(6, Timestamp(363_408)), (7, Timestamp(365_422)), (8, Timestamp(366_352))].into_iter();
        let mut restores = RestoreStats::default();
        assert_eq!(gating_checkpoint(&r, &restores, completed()), Some(7));
        restores.observe(&RestoreReport {
            key: JobKey { cluster: "c".into(), job_id: "j".into() },
            restored: RestoredFrom {
                checkpoint_id: Some(5),
                is_savepoint: false,
                external_path: None,
                restored_at: Timestamp(365_613),
            },
            restarting_at: None,
            subtasks: None,
        });
        assert_eq!(gating_checkpoint(&r, &restores, completed()), Some(5), "what Flink restored wins");
    }
}
