//! The shadow in sentences: a deviation with its numbers, and the schedule as it is now.

use std::collections::BTreeSet;

use super::deviation::{DeviationKind, rule_name};
use super::predict::{Seen, ran_when_slot_freed};
use super::{TriggerShadow, tolerance_ms};
use crate::model::coordinator::{Binding, CoordinatorConfig};
use crate::model::replay::median;
use crate::time::human_ms;

impl TriggerShadow {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sentence(
        &self,
        kind: DeviationKind,
        c: &Seen,
        prev: &Seen,
        gap: u64,
        expected_gap: u64,
        dev: i64,
        binding: Binding,
        config: &CoordinatorConfig,
    ) -> String {
        let head = format!(
            "checkpoint {} came {} after checkpoint {}, not {}",
            c.id,
            human_ms(gap),
            prev.id,
            human_ms(config.interval_ms)
        );
        let d = human_ms(prev.duration_ms);
        match kind {
            DeviationKind::MinPause if binding == Binding::MinPause => {
                format!("{head}: min-pause {} binds after its {d} checkpoint", human_ms(config.min_pause_ms))
            }
            // A short checkpoint holds no trigger by itself: the request had queued behind an
            // earlier long or expiring one and ran when the slot was free again.
            DeviationKind::LongCheckpoint
                if (binding == Binding::MaxConcurrent && prev.duration_ms < config.interval_ms)
                    || (dev < 0 && ran_when_slot_freed(c, prev)) =>
            {
                format!(
                    "{head}: a periodic request queued while an earlier checkpoint was pending (max-concurrent 1) \
                     ran as soon as checkpoint {} finished ({d})",
                    prev.id
                )
            }
            DeviationKind::LongCheckpoint if binding == Binding::MaxConcurrent => format!(
                "{head}: checkpoint {} took {d} and max-concurrent 1 held the next trigger until it finished",
                prev.id
            ),
            DeviationKind::MaxConcurrent if binding == Binding::MaxConcurrent => format!(
                "{head}: {} checkpoints were pending (max-concurrent {}) and the trigger waited for a free slot",
                config.max_concurrent, config.max_concurrent
            ),
            DeviationKind::Timeout if binding == Binding::Timeout => format!(
                "{head}: checkpoint {} expired at its {} timeout and held the slot until then",
                prev.id,
                human_ms(config.timeout_ms)
            ),
            DeviationKind::MinPause
            | DeviationKind::LongCheckpoint
            | DeviationKind::MaxConcurrent
            | DeviationKind::Timeout => {
                format!(
                    "{head}: the fixed-rate schedule is back on its grid after the delayed checkpoint {}",
                    prev.id
                )
            }
            DeviationKind::Savepoint => {
                let manual = (prev.id + 1..c.id).find(|id| self.was_manual(*id));
                let what =
                    manual.map_or("a savepoint".to_string(), |id| format!("the manual checkpoint {id}"));
                format!(
                    "{head}: {} late against the expected {}, because {what} ran in between and held the slot",
                    human_ms(dev.unsigned_abs()),
                    human_ms(expected_gap)
                )
            }
            // At a job's start the scheduler itself restarts: the JobManager logs show a
            // trigger that failed because tasks were not running yet followed by a new
            // schedule (1.20.5: failed ticks 2.5 s apart, then 3.0 s), and 2.x starting the
            // scheduler again once every task runs (`ExecutionTrackingCheckpointCoordinatorDeActivator`).
            DeviationKind::ManualTrigger if prev.id == 1 => format!(
                "{head}: {} earlier than the {} the {} allows: the checkpoint scheduler restarted at the \
                 job's start (with a new random initial delay once every task runs), or a manual trigger",
                human_ms(dev.unsigned_abs()),
                human_ms(expected_gap),
                rule_name(binding)
            ),
            DeviationKind::ManualTrigger => format!(
                "{head}: {} earlier than the {} the {} allows: a manual trigger (REST POST \
                 /jobs/:jobid/checkpoints or flink checkpoint, 1.19+; Flink refuses an INCREMENTAL one, \
                 FLINK-33723), or a checkpoint scheduler restarted by the JobManager; the periodic \
                 schedule goes on",
                human_ms(dev.unsigned_abs()),
                human_ms(expected_gap),
                rule_name(binding)
            ),
            DeviationKind::LateTrigger => format!(
                "{head}: {} later than the {} the {} sets, with no rule to explain it (coordinator stall, \
                 JobManager overload or GC pause, clock jump?)",
                human_ms(dev.unsigned_abs()),
                human_ms(expected_gap),
                rule_name(binding)
            ),
            DeviationKind::TolerableFailures
            | DeviationKind::JobRestart
            | DeviationKind::Rescale
            | DeviationKind::BacklogInterval
            | DeviationKind::NotExpired
            | DeviationKind::IdSkip => head,
        }
    }

    /// One sentence on the schedule as it is now, with the numbers in it.
    pub fn headline(&self) -> Option<String> {
        if let Some(backlog) = self.backlog_headline() {
            return Some(backlog);
        }
        let settings = self.settings.as_ref()?;
        let config = self.config.as_ref()?;
        let observed = self.observed_interval_ms()?;
        let interval = config.interval_ms;
        let mp = config.min_pause_ms;
        let d = human_ms(median(self.durations.iter().copied().collect()));
        let every = human_ms(observed);
        let as_configured = observed.abs_diff(interval) <= tolerance_ms(config.base_interval());
        let rule = match self.dominant_rule()? {
            // The schedule keeps the interval; other rules moved only some triggers.
            Binding::MaxConcurrent | Binding::Timeout if as_configured => Binding::Interval,
            rule => rule,
        };
        let text = match rule {
            Binding::MinPause if interval < mp => format!(
                "checkpoints every {every}, not {}: min-pause {} binds after each ~{d} checkpoint",
                human_ms(interval),
                human_ms(mp)
            ),
            Binding::MinPause if interval == mp && self.flink_major.is_none_or(|m| m >= 2) => format!(
                "checkpoints every {every} = max(interval, min-pause {}): min-pause binds after each ~{d} \
                 checkpoint (Flink {} reports max(interval, min-pause) as the interval, so the configured \
                 interval is {} or less and cannot be told apart)",
                human_ms(mp),
                self.flink_major.map_or("2.x".to_string(), |m| format!("{m}.x")),
                human_ms(mp)
            ),
            Binding::MinPause => format!(
                "checkpoints every {every}, not {}: each ~{d} checkpoint plus min-pause {} outlasts the interval",
                human_ms(interval),
                human_ms(mp)
            ),
            Binding::MaxConcurrent if config.max_concurrent > 1 => format!(
                "checkpoints every {every}, not {}: each ~{d} checkpoint keeps {} pending (max-concurrent {}) \
                 and the next one waits for a free slot",
                human_ms(interval),
                config.max_concurrent,
                config.max_concurrent
            ),
            // A backlog draining: the ticks queued while a checkpoint was pending (blocked or
            // expiring) run one after another as each short checkpoint completes.
            Binding::MaxConcurrent if median(self.durations.iter().copied().collect()) < interval => format!(
                "checkpoints every {every}, not {}: periodic triggers queued while a checkpoint was pending \
                 (max-concurrent 1) run back to back as each ~{d} checkpoint completes",
                human_ms(interval)
            ),
            Binding::MaxConcurrent => format!(
                "checkpoints every {every}, not {}: each ~{d} checkpoint outlasts the interval and \
                 max-concurrent 1 makes the next one wait for it",
                human_ms(interval)
            ),
            Binding::Timeout => format!(
                "checkpoints every {every}, not {}: checkpoints expire at the {} timeout and the next one \
                 starts at the expiry",
                human_ms(interval),
                human_ms(settings.timeout_ms.unwrap_or(config.timeout_ms))
            ),
            Binding::Interval | Binding::Initial if !as_configured => format!(
                "checkpoints every {every}, not the configured {}; each takes ~{d}",
                human_ms(interval)
            ),
            Binding::Interval | Binding::Initial => {
                let mut text =
                    format!("checkpoints every {every} as configured (interval {})", human_ms(interval));
                if !self.durations.is_empty() {
                    text.push_str(&format!("; each takes ~{d}"));
                }
                let moved: Vec<Binding> = self
                    .recent
                    .iter()
                    .filter_map(|c| c.binding)
                    .filter(|b| matches!(b, Binding::MaxConcurrent | Binding::Timeout | Binding::MinPause))
                    .collect();
                if !moved.is_empty() {
                    let names: BTreeSet<&str> = moved.iter().map(|b| rule_name(*b)).collect();
                    let names: Vec<&str> = names.into_iter().collect();
                    text.push_str(&format!(
                        "; {} of the last {} triggers were moved by the {}",
                        moved.len(),
                        self.recent.len(),
                        names.join(" and ")
                    ));
                }
                text
            }
        };
        Some(text)
    }
}
