//! The shadow comparison: the reference model run beside every watched job, explaining each
//! deviation of what Flink does from what its configuration says.
//!
//! Pure like the rest of the core: no I/O, no clock, no tokio. `State::apply` feeds each job's
//! [`Shadow`] with the job's polls and load reports; outputs read it. It is not persisted: after
//! a restart it is rebuilt from new observations.
//!
//! - [`trigger`]: the coordinator model in lockstep with the observed triggers; deviations and
//!   their explanations; the expected next trigger and pending deadlines.
//! - [`alignment`]: the alignment engine on the job graph and measured load; the operator
//!   holding the barriers up, the unaligned what-if and contradictions.

pub(crate) mod alignment;
pub(crate) mod trigger;

use crate::model::coordinator::Binding;
use crate::observe::{JobLoadReport, JobPoll};

pub use trigger::{Deviation, DeviationKind};

/// What the shadow says about a job now (for the JSON API, the status page and alert
/// annotations).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Explanation {
    /// The schedule in one sentence ("checkpoints every 5.0 s, not 2.0 s: min-pause …").
    pub schedule: Option<String>,
    /// The rule that sets most triggers (`interval`, `min_pause`, `max_concurrent`, `timeout`).
    pub rule: Option<&'static str>,
    /// Median observed gap between triggers, ms.
    pub observed_interval_ms: Option<u64>,
    /// Median gap the model expected, ms.
    pub(crate) expected_interval_ms: Option<u64>,
    /// When the model expects the next trigger, epoch ms.
    pub(crate) expected_next_trigger_at_ms: Option<i64>,
    /// A stall in progress: no trigger although one was expected this long ago.
    pub(crate) stall: Option<String>,
    /// The latest deviation.
    pub last_deviation: Option<Deviation>,
    /// The latest unexplained deviation.
    pub last_unexplained: Option<Deviation>,
    /// The operator holding the barriers up, with predicted and observed numbers.
    pub alignment: Option<String>,
    /// The unaligned what-if.
    pub what_if: Option<String>,
    /// Contradictions between the configuration and what is observed.
    pub contradictions: Vec<String>,
    /// `execution.checkpointing.interval-during-backlog` where it is set and differs from the
    /// interval, ms (0: no checkpoints during backlog).
    pub backlog_interval_ms: Option<u64>,
    /// Whether the latest triggers were spaced by it (a source reports backlog).
    pub backlog_in_force: bool,
}

/// The shadow of one job.
#[derive(Clone, Debug, Default)]
pub struct Shadow {
    /// The coordinator in lockstep.
    pub trigger: trigger::TriggerShadow,
    /// The alignment engine on the job's graph.
    pub alignment: alignment::AlignmentShadow,
}

impl Shadow {
    /// An empty shadow.
    pub fn new() -> Self {
        Shadow::default()
    }

    /// Feeds one poll of the job; returns the |observed − expected| trigger times, ms, of the
    /// checkpoints it compared.
    pub fn observe_poll(&mut self, poll: &JobPoll) -> Vec<u64> {
        if let Some(settings) = &poll.settings {
            self.alignment.set_settings(settings);
        }
        for checkpoint in &poll.finished {
            self.alignment.observe(checkpoint);
        }
        self.trigger.observe_poll(poll)
    }

    /// Feeds a graph and load report.
    pub fn observe_load(&mut self, report: &JobLoadReport) {
        self.alignment.set_load(report.topology.as_ref(), &report.vertices);
    }

    /// The current explanation.
    pub fn explanation(&self) -> Explanation {
        let t = &self.trigger;
        let deviations: Vec<&Deviation> = t.deviations().collect();
        Explanation {
            schedule: t.headline(),
            rule: t.dominant_rule().map(Binding::as_str),
            observed_interval_ms: t.observed_interval_ms(),
            expected_interval_ms: t.expected_interval_ms(),
            expected_next_trigger_at_ms: t.expected_next().map(|(at, _)| at.millis()),
            stall: t.stalled_for_ms().map(|ms| {
                format!(
                    "no checkpoint triggered although the model expected one {} ago (coordinator stall, \
                     JobManager overload or GC pause?)",
                    crate::time::human_ms(ms)
                )
            }),
            last_deviation: deviations.last().map(|d| (*d).clone()),
            last_unexplained: deviations.iter().rev().find(|d| !d.explained).map(|d| (*d).clone()),
            alignment: self.alignment.headline(),
            what_if: self.alignment.what_if(),
            contradictions: self.alignment.contradictions(),
            backlog_interval_ms: t.backlog_interval_ms(),
            backlog_in_force: t.backlog_in_force(),
        }
    }
}
