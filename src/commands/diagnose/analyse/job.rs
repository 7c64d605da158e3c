//! What every finding of the analysis reads: the fetched data, the settings, where each
//! subtask runs; and the small measures they share.

use std::collections::BTreeMap;

use crate::health::culprit;
use crate::observe::{CheckpointSettings, FinishedCheckpoint, SnapshotKind, SubtaskCheckpoint};
use crate::sources::flink::convert;

use crate::commands::diagnose::report::*;

/// The phase of a subtask that took longest: (name, ms), `("unknown", 0)` when none is known.
pub(super) fn dominant(st: &SubtaskCheckpoint) -> (&'static str, u64) {
    culprit::dominant_phase(culprit::phases(st)).unwrap_or(("unknown", 0))
}

/// The lower median, `None` when there is nothing to take it of.
pub(super) fn median(v: Vec<u64>) -> Option<u64> {
    (!v.is_empty()).then(|| crate::model::replay::median(v))
}

/// What every finding reads: the fetched data, the settings, and where each subtask runs.
pub(super) struct Job<'a> {
    pub(super) d: &'a JobData,
    pub(super) settings: Option<CheckpointSettings>,
    pub(super) interval: Option<u64>,
    pub(super) timeout: Option<u64>,
    /// Vertex id by operator name.
    pub(super) vertex_of: BTreeMap<&'a str, &'a str>,
    /// The one TaskManager every subtask runs on, if there is one (then said once, not on every
    /// line).
    pub(super) single_tm: Option<Location>,
}

impl<'a> Job<'a> {
    pub(super) fn new(d: &'a JobData) -> Self {
        let settings = d.config.as_ref().map(convert::settings);
        let vertex_of = d
            .details
            .iter()
            .flat_map(|j| {
                j.vertices.iter().map(|v| (v.name.as_deref().unwrap_or(v.id.as_str()), v.id.as_str()))
            })
            .collect();
        let distinct: std::collections::BTreeSet<&Location> = d.locations.values().collect();
        let single_tm = match distinct.into_iter().collect::<Vec<_>>().as_slice() {
            [only] => Some((*only).clone()),
            _ => None,
        };
        Job {
            d,
            interval: settings.as_ref().and_then(|s| s.interval_ms),
            timeout: settings.as_ref().and_then(|s| s.timeout_ms),
            settings,
            vertex_of,
            single_tm,
        }
    }

    /// Where a subtask runs, when the REST API said.
    pub(super) fn location(&self, operator: &str, subtask: u32) -> Option<Location> {
        self.vertex_of
            .get(operator)
            .and_then(|vid| self.d.locations.get(&(vid.to_string(), subtask)))
            .cloned()
    }

    /// `operator #n`, with its TaskManager unless every subtask runs on the same one.
    pub(super) fn located(&self, operator: &str, subtask: u32) -> String {
        match (self.location(operator, subtask), &self.single_tm) {
            (Some(_), Some(_)) => format!("{operator} #{subtask}"),
            (Some(l), None) => format!("{operator} #{subtask} on {}", l.text()),
            (None, _) => format!("{operator} #{subtask} (TaskManager unknown: the REST API did not name it)"),
        }
    }

    /// The finished checkpoints with per-subtask details, savepoints left out (triggered by
    /// hand, other rules).
    pub(super) fn with_details(&self) -> Vec<&'a FinishedCheckpoint> {
        self.d
            .finished
            .iter()
            .filter(|cp| !cp.operators.is_empty() && cp.kind != SnapshotKind::Savepoint)
            .collect()
    }
}
