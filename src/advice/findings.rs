//! One function per finding, each with its threshold (`docs/advice.md` has the table and the
//! Flink documentation behind each): it reads the [`Context`] and returns the finding with its
//! evidence, the keys to set and the model's prediction under the current and the
//! recommended settings.

use std::collections::BTreeMap;

use crate::model::coordinator::CoordinatorConfig;
use crate::observe::CheckpointConfiguration;
use crate::time::human_ms;

use super::observed::{Observed, Sample};
use super::predict::{Knobs, Prediction, outcomes, predict, stuck_job_fails_after};

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Severity {
    /// Worth knowing; nothing is at risk.
    Info,
    /// Costs throughput, data on failure, or a stuck job's time.
    Warning,
}

/// One figure of a finding's evidence.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub(crate) enum Value {
    /// A count, a duration in ms or a size in bytes (the key says which).
    Int(u64),
    /// A ratio.
    Float(f64),
    /// A setting that is on or off.
    Bool(bool),
}

/// What to set.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Recommendation {
    /// Flink configuration keys and their values (empty: nothing to set, only to know).
    pub(crate) set: BTreeMap<String, String>,
    /// The advice in a sentence or two, with the numbers.
    pub(crate) text: String,
}

/// The model's prediction side by side.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub(crate) struct Predicted {
    /// Under the current settings; `None` when the evidence is thin.
    pub(crate) current: Option<Prediction>,
    /// Under the current settings with `recommendation.set` applied.
    pub(crate) recommended: Option<Prediction>,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Finding {
    /// Its id (`ALL`).
    pub(crate) id: &'static str,
    /// How much it matters.
    pub(crate) severity: Severity,
    /// What is wrong, in one sentence with its numbers.
    pub(crate) summary: String,
    /// The numbers it rests on.
    pub(crate) evidence: BTreeMap<&'static str, Value>,
    /// What to set.
    pub(crate) recommendation: Recommendation,
    /// What the model predicts before and after.
    pub(crate) predicted: Predicted,
}

/// `interval_below_duration`: the interval should be at least this many P95 durations.
pub(crate) const INTERVAL_PER_DURATION: u64 = 2;
/// `timeout_tight`: the timeout should be at least this many P99 durations (×10).
pub(crate) const TIMEOUT_PER_P99_TENTHS: u64 = 15;
/// `tolerable_too_high`: more tolerable failures than this keep a stuck job up for hours.
pub(crate) const MAX_TOLERABLE: u32 = 10;
/// What `tolerable_too_high` and `tolerable_zero` recommend.
pub(crate) const RECOMMENDED_TOLERABLE: u32 = 3;
/// `alignment_share_high`: alignment above this share of the cycle, in percent.
pub(crate) const ALIGNMENT_SHARE_PERCENT: u64 = 50;
/// `large_state_full_snapshots`: full snapshots of state above this size.
pub(crate) const LARGE_STATE_BYTES: u64 = 1 << 30;
/// `large_state_full_snapshots`: the heap backend above this size.
pub(crate) const HEAP_STATE_BYTES: u64 = 5 << 30;

/// One setting a recommendation changes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Setting {
    /// `execution.checkpointing.interval`, ms.
    Interval(u64),
    /// `execution.checkpointing.min-pause`, ms.
    MinPause(u64),
    /// `execution.checkpointing.timeout`, ms.
    Timeout(u64),
    /// `execution.checkpointing.max-concurrent-checkpoints`.
    MaxConcurrent(u32),
    /// `execution.checkpointing.tolerable-failed-checkpoints`.
    Tolerable(u32),
    /// Unaligned checkpoints on.
    Unaligned,
    /// `execution.checkpointing.aligned-checkpoint-timeout`, ms.
    AlignedTimeout(u64),
    /// Retain checkpoints on cancellation.
    RetainOnCancellation,
    /// Incremental snapshots on.
    Incremental,
    /// The RocksDB state backend.
    RocksDb,
}

impl Setting {
    /// The Flink configuration key of this setting in Flink `major`.
    pub(crate) fn key(self, major: u32) -> &'static str {
        let two = major >= 2;
        match self {
            Setting::Interval(_) => "execution.checkpointing.interval",
            Setting::MinPause(_) => "execution.checkpointing.min-pause",
            Setting::Timeout(_) => "execution.checkpointing.timeout",
            Setting::MaxConcurrent(_) => "execution.checkpointing.max-concurrent-checkpoints",
            Setting::Tolerable(_) => "execution.checkpointing.tolerable-failed-checkpoints",
            Setting::Unaligned if two => "execution.checkpointing.unaligned.enabled",
            Setting::Unaligned => "execution.checkpointing.unaligned",
            Setting::AlignedTimeout(_) => "execution.checkpointing.aligned-checkpoint-timeout",
            Setting::RetainOnCancellation => "execution.checkpointing.externalized-checkpoint-retention",
            Setting::Incremental if two => "execution.checkpointing.incremental",
            Setting::Incremental => "state.backend.incremental",
            Setting::RocksDb if two => "state.backend.type",
            Setting::RocksDb => "state.backend",
        }
    }

    /// Its value as Flink reads it (durations like `10s`, `500ms`).
    pub(crate) fn value(self) -> String {
        let duration =
            |ms: u64| if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{ms}ms") };
        match self {
            Setting::Interval(ms)
            | Setting::MinPause(ms)
            | Setting::Timeout(ms)
            | Setting::AlignedTimeout(ms) => duration(ms),
            Setting::MaxConcurrent(n) | Setting::Tolerable(n) => n.to_string(),
            Setting::Unaligned | Setting::Incremental => "true".into(),
            Setting::RetainOnCancellation => "RETAIN_ON_CANCELLATION".into(),
            Setting::RocksDb => "rocksdb".into(),
        }
    }
}

/// What every finding reads.
pub(crate) struct Context<'a> {
    /// The configuration.
    pub(crate) config: &'a CheckpointConfiguration,
    /// The samples.
    pub(crate) samples: &'a [Sample],
    /// Their figures.
    pub(crate) observed: &'a Observed,
    /// The current settings as the model takes them (`None`: periodic checkpoints off).
    pub(crate) knobs: Option<Knobs>,
    /// The model under the current settings (`None` when thin).
    pub(crate) current: Option<Prediction>,
    /// Whether the evidence is enough for timing advice.
    pub(crate) enough: bool,
    observed_unaligned: bool,
}

impl<'a> Context<'a> {
    /// The context of one job; runs the model under the current settings when `enough`.
    pub(crate) fn new(
        config: &'a CheckpointConfiguration,
        samples: &'a [Sample],
        observed: &'a Observed,
        enough: bool,
    ) -> Self {
        let knobs = CoordinatorConfig::from_settings(&config.settings).map(|coordinator| Knobs {
            coordinator,
            unaligned: config.settings.unaligned,
            aligned_timeout_ms: config.settings.aligned_checkpoint_timeout_ms.unwrap_or(0),
        });
        let mut ctx = Context {
            config,
            samples,
            observed,
            knobs,
            current: None,
            enough,
            observed_unaligned: config.settings.unaligned,
        };
        ctx.current = if enough { ctx.knobs.as_ref().and_then(|k| ctx.run(k)) } else { None };
        ctx
    }

    fn run(&self, knobs: &Knobs) -> Option<Prediction> {
        let inflight = if self.observed_unaligned {
            self.observed.persisted_p50_bytes
        } else {
            self.observed.processed_p50_bytes
        };
        let outcomes =
            outcomes(self.samples, knobs, self.observed_unaligned, self.observed.expired_needed_ms);
        predict(knobs, &outcomes, self.observed.alignment_p50_ms, inflight)
    }

    /// The settings with `changes` applied.
    fn changed(&self, changes: &[Setting]) -> Option<Knobs> {
        let mut k = self.knobs.clone()?;
        for change in changes {
            match *change {
                Setting::Interval(ms) => k.coordinator.interval_ms = ms,
                Setting::MinPause(ms) => k.coordinator.min_pause_ms = ms,
                Setting::Timeout(ms) => k.coordinator.timeout_ms = ms,
                Setting::MaxConcurrent(n) => k.coordinator.max_concurrent = n.max(1),
                Setting::Tolerable(n) => k.coordinator.tolerable_failures = n,
                Setting::Unaligned => k.unaligned = true,
                Setting::AlignedTimeout(ms) => k.aligned_timeout_ms = ms,
                Setting::RetainOnCancellation | Setting::Incremental | Setting::RocksDb => {}
            }
        }
        Some(k)
    }

    /// A finding: the keys of `changes`, the prediction before and after.
    fn finding(
        &self,
        id: &'static str,
        severity: Severity,
        summary: String,
        evidence: Vec<(&'static str, Value)>,
        changes: &[Setting],
        text: String,
    ) -> Finding {
        let major = self.config.major_version();
        let recommended =
            if self.current.is_some() { self.changed(changes).and_then(|k| self.run(&k)) } else { None };
        Finding {
            id,
            severity,
            summary,
            evidence: evidence.into_iter().collect(),
            recommendation: Recommendation {
                set: changes
                    .iter()
                    .map(|c| (c.key(major).to_string(), c.value()))
                    .collect::<BTreeMap<_, _>>(),
                text,
            },
            predicted: Predicted { current: self.current.clone(), recommended },
        }
    }

    fn interval(&self) -> Option<u64> {
        self.knobs.as_ref().map(|k| k.coordinator.interval_ms)
    }
}

/// Every finding that applies.
pub(crate) fn all(ctx: &Context) -> Vec<Finding> {
    let timing: [fn(&Context) -> Option<Finding>; 5] = [
        min_pause_binds,
        interval_below_duration,
        timeout_tight,
        alignment_share_high,
        max_concurrent_with_min_pause,
    ];
    let always: [fn(&Context) -> Option<Finding>; 6] = [
        tolerable_too_high,
        tolerable_zero,
        no_retention,
        large_state_full_snapshots,
        storage_need,
        kafka_transaction_timeout,
    ];
    let mut found: Vec<Finding> = Vec::new();
    if ctx.enough {
        found.extend(timing.iter().filter_map(|f| f(ctx)));
    }
    found.extend(always.iter().filter_map(|f| f(ctx)));
    found
}

fn ceil_to(ms: u64, step: u64) -> u64 {
    ms.div_ceil(step) * step
}

fn ms(v: u64) -> Value {
    Value::Int(v)
}

/// Min-pause sets the spacing: most triggers wait for the pause after the previous checkpoint.
fn min_pause_binds(ctx: &Context) -> Option<Finding> {
    let current = ctx.current.as_ref()?;
    let k = ctx.knobs.as_ref()?;
    let (interval, min_pause) = (k.coordinator.interval_ms, k.coordinator.min_pause_ms);
    if min_pause == 0 || current.binding != "min_pause" {
        return None;
    }
    let p95 = ctx.observed.duration_p95_ms?;
    let p50 = ctx.observed.duration_p50_ms.unwrap_or(p95);
    let wanted = (interval.saturating_sub(p95) / 100) * 100;
    let spacing = ctx.observed.spacing_ms.unwrap_or(current.spacing_ms());
    let severity = if spacing * 10 > interval * 11 { Severity::Warning } else { Severity::Info };
    // Flink 2.x reports the interval as max(interval, min-pause): the configured one is unknown.
    let unknown_interval = ctx.config.major_version() >= 2 && interval == min_pause;
    let head = if human_ms(spacing) == human_ms(interval) {
        format!("checkpoints every {}, set by min-pause {}", human_ms(spacing), human_ms(min_pause))
    } else {
        format!(
            "checkpoints every {}, not every {}: min-pause {} binds",
            human_ms(spacing),
            human_ms(interval),
            human_ms(min_pause)
        )
    };
    let (changes, text) = if unknown_interval {
        (
            vec![],
            format!(
                "Flink 2.x reports the interval as max(interval, min-pause), so the configured interval is shorter \
                 than {} or equal to it. For the interval to set the spacing, keep min-pause at most interval − P95 \
                 duration ({}).",
                human_ms(min_pause),
                human_ms(p95)
            ),
        )
    } else {
        (
            vec![Setting::MinPause(wanted)],
            format!(
                "The spacing is duration + min-pause, not the interval. For checkpoints every {}, lower min-pause to \
                 {} (interval − P95 duration {}); if {} is the spacing you want, set the interval to it instead so \
                 the configuration says what happens.",
                human_ms(interval),
                human_ms(wanted),
                human_ms(p95),
                human_ms(spacing)
            ),
        )
    };
    Some(ctx.finding(
        "min_pause_binds",
        severity,
        format!("{head} after each ~{} checkpoint", human_ms(p50)),
        vec![
            ("interval_ms", ms(interval)),
            ("min_pause_ms", ms(min_pause)),
            ("duration_p50_ms", ms(p50)),
            ("duration_p95_ms", ms(p95)),
            ("observed_spacing_ms", ms(spacing)),
            ("predicted_spacing_ms", ms(current.spacing_ms())),
        ],
        &changes,
        text,
    ))
}

/// The interval is shorter than about twice the P95 duration: checkpoints run back to back.
fn interval_below_duration(ctx: &Context) -> Option<Finding> {
    let interval = ctx.interval()?;
    let p95 = ctx.observed.duration_p95_ms?;
    if p95 == 0 || interval >= INTERVAL_PER_DURATION * p95 {
        return None;
    }
    let wanted = ceil_to(INTERVAL_PER_DURATION * p95, 1000);
    Some(ctx.finding(
        "interval_below_duration",
        Severity::Warning,
        format!(
            "the interval {} is under {INTERVAL_PER_DURATION}× the P95 checkpoint duration {}: checkpoints run \
             nearly back to back and leave little time for processing between them",
            human_ms(interval),
            human_ms(p95)
        ),
        vec![("interval_ms", ms(interval)), ("duration_p95_ms", ms(p95))],
        &[Setting::Interval(wanted)],
        format!(
            "Set the interval to at least {INTERVAL_PER_DURATION}× the P95 duration: {}. A shorter replay window \
             needs faster checkpoints, not a shorter interval.",
            human_ms(wanted)
        ),
    ))
}

/// The three findings that risk data or a stuck job (`advice::RISKS`), each tested once here:
/// their finding functions and `advice::risks` (the daemon's check without the model run) ask
/// the same test. Each reads the configuration, the observed figures, and whether they are
/// enough for timing advice.
pub(crate) type RiskTest = fn(&CheckpointConfiguration, &Observed, bool) -> bool;

/// `timeout_tight` applies: (timeout, P99) when it does.
fn timeout_tight_test(
    config: &CheckpointConfiguration,
    observed: &Observed,
    enough: bool,
) -> Option<(u64, u64)> {
    let timeout = CoordinatorConfig::from_settings(&config.settings)?.timeout_ms;
    let p99 = observed.duration_p99_ms?;
    let tight = timeout * 10 < TIMEOUT_PER_P99_TENTHS * p99;
    (enough && (observed.expired > 0 || tight)).then_some((timeout, p99))
}

/// `tolerable_too_high` applies: the tolerable count when it does (periodic checkpoints on).
fn tolerable_too_high_test(config: &CheckpointConfiguration) -> Option<u32> {
    let tolerable = config.settings.tolerable_failures?;
    (tolerable > MAX_TOLERABLE && config.settings.interval_ms.is_some()).then_some(tolerable)
}

/// `no_retention` applies.
fn no_retention_test(config: &CheckpointConfiguration) -> bool {
    config.retained_on_cancellation == Some(false)
}

/// The risk tests by finding id, in `advice::RISKS`'s order.
pub(crate) const RISK_TESTS: [(&str, RiskTest); 3] = [
    ("tolerable_too_high", |c, _, _| tolerable_too_high_test(c).is_some()),
    ("timeout_tight", |c, o, enough| timeout_tight_test(c, o, enough).is_some()),
    ("no_retention", |c, _, _| no_retention_test(c)),
];

/// The timeout is under about 1.5× the P99 duration, or checkpoints expire.
fn timeout_tight(ctx: &Context) -> Option<Finding> {
    let (timeout, p99) = timeout_tight_test(ctx.config, ctx.observed, ctx.enough)?;
    let expired = ctx.observed.expired;
    let by_p99 = ceil_to(TIMEOUT_PER_P99_TENTHS * p99 / 10, 1000);
    let needed = ctx.observed.expired_needed_ms;
    let wanted = match (expired, needed) {
        (0, _) => by_p99,
        (_, Some(n)) => by_p99.max(ceil_to(TIMEOUT_PER_P99_TENTHS * n / 10, 1000)),
        (_, None) => by_p99.max(2 * timeout),
    };
    let looked_at = ctx.observed.completed + ctx.observed.failed;
    let why = match (expired, needed) {
        (0, _) => {
            format!("the {} timeout is under 1.5× the P99 duration {}", human_ms(timeout), human_ms(p99))
        }
        (_, Some(n)) => format!(
            "{expired} of {looked_at} checkpoints expired at the {} timeout; the late acknowledgements of {} of them \
             show they needed up to {}",
            human_ms(timeout),
            ctx.observed.expired_needed_known,
            human_ms(n)
        ),
        (_, None) => {
            format!("{expired} of {looked_at} checkpoints expired at the {} timeout", human_ms(timeout))
        }
    };
    let unknown = if expired > 0 && needed.is_none() {
        " The prediction counts an expired checkpoint as never finishing: how long it really needed is not known."
    } else {
        ""
    };
    let mut evidence = vec![
        ("timeout_ms", ms(timeout)),
        ("duration_p99_ms", ms(p99)),
        ("expired", Value::Int(expired as u64)),
        ("checkpoints", Value::Int(looked_at as u64)),
    ];
    evidence.extend(needed.map(|n| ("expired_needed_ms", ms(n))));
    Some(ctx.finding(
        "timeout_tight",
        Severity::Warning,
        why,
        evidence,
        &[Setting::Timeout(wanted)],
        format!(
            "Do not just raise the timeout: find what holds the expiring checkpoints up first (`checkpoint-sentinel \
             diagnose` names the subtask). Then a timeout of {} leaves 1.5× room above what they need.{unknown}",
            human_ms(wanted),
        ),
    ))
}

/// Alignment (start delay + alignment) takes more than half of the cycle.
fn alignment_share_high(ctx: &Context) -> Option<Finding> {
    let alignment = ctx.observed.alignment_p50_ms?;
    let cycle = ctx.observed.spacing_ms.or(ctx.current.as_ref().map(|p| p.spacing_ms()))?;
    if cycle == 0 || alignment * 100 <= ALIGNMENT_SHARE_PERCENT * cycle {
        return None;
    }
    let s = &ctx.config.settings;
    let aligned_timeout = ceil_to((ctx.interval()? / 10).max(100), 100);
    let (changes, advice) = if s.unaligned {
        (vec![], "Unaligned checkpoints are already on: the backpressure itself has to go (scale the slow operator, fix the skew)".to_string())
    } else if !s.exactly_once {
        (vec![], "At-least-once checkpoints cannot be unaligned: fix the backpressure (scale the slow operator, fix the skew)".to_string())
    } else {
        (
            vec![Setting::Unaligned, Setting::AlignedTimeout(aligned_timeout)],
            format!(
                "Fix the backpressure first (scale the slow operator, fix the skew). If it stays, go unaligned with an \
                 aligned timeout of {}: barriers then overtake the buffered data, which is persisted with the \
                 checkpoint instead{}",
                human_ms(aligned_timeout),
                ctx.observed
                    .processed_p50_bytes
                    .map(|b| format!(
                        " (about {} per checkpoint, the data processed during alignment now)",
                        bytes(b)
                    ))
                    .unwrap_or_default()
            ),
        )
    };
    Some(ctx.finding(
        "alignment_share_high",
        Severity::Warning,
        format!(
            "barriers take {} (start delay + alignment, median) of each {} cycle: {}%",
            human_ms(alignment),
            human_ms(cycle),
            alignment * 100 / cycle
        ),
        vec![
            ("alignment_p50_ms", ms(alignment)),
            ("cycle_ms", ms(cycle)),
            ("share", Value::Float((alignment as f64 / cycle as f64 * 100.0).round() / 100.0)),
            ("unaligned", Value::Bool(s.unaligned)),
        ],
        &changes,
        advice + ".",
    ))
}

/// Max-concurrent above 1 does nothing while a min-pause is set.
fn max_concurrent_with_min_pause(ctx: &Context) -> Option<Finding> {
    let s = &ctx.config.settings;
    if s.max_concurrent <= 1 || s.min_pause_ms == 0 {
        return None;
    }
    Some(ctx.finding(
        "max_concurrent_with_min_pause",
        Severity::Info,
        format!(
            "max-concurrent {} has no effect: with min-pause {} Flink never runs two checkpoints at once",
            s.max_concurrent,
            human_ms(s.min_pause_ms)
        ),
        vec![("max_concurrent", Value::Int(s.max_concurrent as u64)), ("min_pause_ms", ms(s.min_pause_ms))],
        &[Setting::MaxConcurrent(1)],
        "Set max-concurrent to 1 so the configuration says what happens, or drop min-pause if overlapping \
         checkpoints are what you want."
            .into(),
    ))
}

/// More than 10 tolerable failures: a job whose checkpoints all fail stays up for hours.
fn tolerable_too_high(ctx: &Context) -> Option<Finding> {
    let tolerable = tolerable_too_high_test(ctx.config)?;
    let k = ctx.knobs.as_ref()?;
    let stuck = stuck_job_fails_after(&k.coordinator);
    let after = CoordinatorConfig { tolerable_failures: RECOMMENDED_TOLERABLE, ..k.coordinator.clone() };
    let stuck_after = stuck_job_fails_after(&after);
    let mut evidence = vec![
        ("tolerable_failures", Value::Int(tolerable as u64)),
        ("timeout_ms", ms(k.coordinator.timeout_ms)),
    ];
    evidence.extend(stuck.map(|t| ("stuck_job_fails_after_ms", ms(t))));
    Some(ctx.finding(
        "tolerable_too_high",
        Severity::Warning,
        format!(
            "{tolerable} tolerable failed checkpoints: a job whose checkpoints all expire fails only after {}, \
             replaying everything since its last checkpoint",
            stuck.map_or("never".to_string(), human_ms)
        ),
        evidence,
        &[Setting::Tolerable(RECOMMENDED_TOLERABLE)],
        format!(
            "Tolerate {RECOMMENDED_TOLERABLE} consecutive failures: a stuck job then restarts after {} instead.",
            stuck_after.map_or("never".to_string(), human_ms)
        ),
    ))
}

/// No tolerable failures: the first failed checkpoint fails the job.
fn tolerable_zero(ctx: &Context) -> Option<Finding> {
    if ctx.config.settings.tolerable_failures != Some(0) {
        return None;
    }
    Some(ctx.finding(
        "tolerable_zero",
        Severity::Warning,
        "0 tolerable failed checkpoints: the first failed or expired checkpoint fails the job".into(),
        vec![("tolerable_failures", Value::Int(0))],
        &[Setting::Tolerable(RECOMMENDED_TOLERABLE)],
        format!(
            "Tolerate {RECOMMENDED_TOLERABLE} consecutive failures, so one slow checkpoint does not restart the job."
        ),
    ))
}

/// Checkpoints are deleted when the job is cancelled.
fn no_retention(ctx: &Context) -> Option<Finding> {
    if !no_retention_test(ctx.config) {
        return None;
    }
    Some(ctx.finding(
        "no_retention",
        Severity::Warning,
        "checkpoints are deleted when the job is cancelled: a cancel (or a redeploy that cancels) loses the state"
            .into(),
        vec![("retained_on_cancellation", Value::Bool(false))],
        &[Setting::RetainOnCancellation],
        "Retain checkpoints on cancellation, so a cancelled job can be resumed from its latest checkpoint (remove old \
         ones yourself)."
            .into(),
    ))
}

/// Large state snapshotted in full, or held on the heap.
fn large_state_full_snapshots(ctx: &Context) -> Option<Finding> {
    let state = ctx.observed.state_bytes?;
    if state < LARGE_STATE_BYTES {
        return None;
    }
    let heap = ctx.config.heap_backend();
    let incremental = ctx.config.incremental == Some(true) || ctx.observed.incremental_seen;
    let changes: Vec<Setting> = if heap && state >= HEAP_STATE_BYTES {
        vec![Setting::RocksDb, Setting::Incremental]
    } else if !heap && !incremental {
        vec![Setting::Incremental]
    } else {
        return None;
    };
    Some(ctx.finding(
        "large_state_full_snapshots",
        Severity::Warning,
        if heap {
            format!("{} of state on the heap backend: every checkpoint writes all of it", bytes(state))
        } else {
            format!(
                "{} of state without incremental snapshots: every checkpoint writes all of it",
                bytes(state)
            )
        },
        vec![("state_bytes", Value::Int(state)), ("incremental", Value::Bool(incremental))],
        &changes,
        "Use RocksDB with incremental checkpoints: each checkpoint then uploads only what changed.".into(),
    ))
}

/// `kafka_transaction_timeout`: the producer's transaction timeout should be at least this many
/// times what a transaction may have to live through.
pub(crate) const TRANSACTION_HEADROOM: u64 = 2;
/// The broker's `transaction.max.timeout.ms` by default (15 minutes): a producer asking for more
/// is refused.
pub(crate) const BROKER_MAX_TRANSACTION_TIMEOUT_MS: u64 = 15 * 60_000;

/// An exactly-once Kafka sink whose transactions may outlive the producer's
/// `transaction.timeout.ms`: a transaction opened after one checkpoint's barrier is committed when
/// the next checkpoint completes (the interval plus its duration, P99 here), and after a failure
/// only once the job has restored (the measured restore time). Past the timeout the broker aborts
/// it: the commit fails (`ProducerFencedException`), and until then `read_committed` consumers
/// wait behind the open transaction. Where the configuration does not expose the timeout, the
/// finding says so (Flink's `KafkaSink` asks for 1 hour; the broker caps it at 15 minutes).
fn kafka_transaction_timeout(ctx: &Context) -> Option<Finding> {
    let config = ctx.config;
    if config.kafka_exactly_once != Some(true) && config.kafka_transaction_timeout_ms.is_none() {
        return None;
    }
    let interval = config.settings.interval_ms.unwrap_or(0);
    let p99 = ctx.observed.duration_p99_ms;
    let restore = config.measured_restore_ms;
    let need = interval + p99.unwrap_or(0) + restore.unwrap_or(0);
    let parts = format!(
        "interval {} + P99 checkpoint {} + restore {}",
        human_ms(interval),
        p99.map_or("not measured yet".to_string(), human_ms),
        restore.map_or("not measured yet (no restore seen)".to_string(), human_ms)
    );
    let mut evidence = vec![("interval_ms", ms(interval)), ("need_ms", ms(need))];
    evidence.extend(p99.map(|v| ("duration_p99_ms", ms(v))));
    evidence.extend(restore.map(|v| ("restore_ms", ms(v))));
    let Some(timeout) = config.kafka_transaction_timeout_ms else {
        return Some(ctx.finding(
            "kafka_transaction_timeout",
            Severity::Info,
            format!(
                "an exactly-once Kafka sink, but the job's configuration does not expose the producer's \
                 transaction.timeout.ms: its transactions must outlive {} ({parts})",
                human_ms(need)
            ),
            evidence,
            &[],
            format!(
                "Pass transaction.timeout.ms as a job parameter so it can be checked; keep it at least {}× {} and \
                 within the broker's transaction.max.timeout.ms ({} by default).",
                TRANSACTION_HEADROOM,
                human_ms(need),
                human_ms(BROKER_MAX_TRANSACTION_TIMEOUT_MS)
            ),
        ));
    };
    evidence.push(("transaction_timeout_ms", ms(timeout)));
    if need * TRANSACTION_HEADROOM <= timeout {
        return None;
    }
    let want = ceil_to(need * TRANSACTION_HEADROOM, 60_000);
    let advice = if want <= BROKER_MAX_TRANSACTION_TIMEOUT_MS {
        format!(
            "Raise the producer's transaction.timeout.ms to {} or more (the broker's transaction.max.timeout.ms, {} by \
             default, must allow it), or checkpoint more often.",
            human_ms(want),
            human_ms(BROKER_MAX_TRANSACTION_TIMEOUT_MS)
        )
    } else {
        format!(
            "{} is past the broker's default transaction.max.timeout.ms ({}): shorten the interval, speed up \
             checkpoints and restores, or raise both timeouts.",
            human_ms(want),
            human_ms(BROKER_MAX_TRANSACTION_TIMEOUT_MS)
        )
    };
    Some(ctx.finding(
        "kafka_transaction_timeout",
        Severity::Warning,
        format!(
            "the Kafka producer's transaction.timeout.ms {} leaves less than {}× headroom over what a transaction \
             may have to live through, {} ({parts}): past it the broker aborts the transaction \
             (ProducerFencedException at commit, read_committed consumers held up)",
            human_ms(timeout),
            TRANSACTION_HEADROOM,
            human_ms(need)
        ),
        evidence,
        &[],
        advice,
    ))
}

/// What the retained checkpoints need on the checkpoint storage.
fn storage_need(ctx: &Context) -> Option<Finding> {
    let state = ctx.observed.state_bytes.filter(|&b| b > 0)?;
    let retained = ctx.config.retained_checkpoints.unwrap_or(1).max(1) as u64;
    let need = state * retained * 3 / 2;
    Some(ctx.finding(
        "storage_need",
        Severity::Info,
        format!("the checkpoint storage needs about {}: {} × {retained} retained × 1.5", bytes(need), bytes(state)),
        vec![("state_bytes", Value::Int(state)), ("retained", Value::Int(retained)), ("need_bytes", Value::Int(need))],
        &[],
        "Provision the checkpoint storage for it (the 1.5 covers a checkpoint being written while the retained ones \
         are kept)."
            .into(),
    ))
}

/// Retention and cleanup advice from what the job's checkpoint storage holds (its latest
/// listing): orphaned folders to delete, more complete folders than Flink retains, a `_metadata`
/// past half the frame size, `shared/` at three times the state. No model run: these are facts
/// of the storage, not of the schedule.
pub(crate) fn storage_findings(l: &crate::observe::JobStorage) -> Vec<Finding> {
    let finding = |id,
                   severity,
                   summary: String,
                   evidence: Vec<(&'static str, Value)>,
                   set: Vec<(&str, String)>,
                   text: &str| {
        Finding {
            id,
            severity,
            summary,
            evidence: evidence.into_iter().collect(),
            recommendation: Recommendation {
                set: set.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
                text: text.to_string(),
            },
            predicted: Predicted::default(),
        }
    };
    let mut out = Vec::new();
    if !l.file_merging && !l.orphans.is_empty() {
        let oldest = l.orphans.iter().map(|o| o.age_ms).max().unwrap_or(0);
        out.push(finding(
            "orphaned_checkpoints",
            Severity::Warning,
            format!(
                "{} chk-N folder(s) in {} hold {} that no retained or in-progress checkpoint needs (the oldest written {} ago)",
                l.orphans.len(),
                l.dir,
                bytes(l.orphaned_bytes),
                human_ms(oldest)
            ),
            vec![("orphaned_bytes", Value::Int(l.orphaned_bytes)), ("orphaned_folders", Value::Int(l.orphans.len() as u64))],
            vec![],
            "Delete them (never a folder a retained or in-progress checkpoint holds); if they keep coming, read the \
             JobManager log for why Flink did not discard them.",
        ));
    }
    if l.complete_folders > l.num_retained + 1 {
        out.push(finding(
            "retained_beyond_setting",
            Severity::Info,
            format!(
                "{} complete checkpoints on storage where Flink retains {} (num-retained)",
                l.complete_folders, l.num_retained
            ),
            vec![("complete_folders", Value::Int(u64::from(l.complete_folders))), ("retained", Value::Int(u64::from(l.num_retained)))],
            vec![],
            "The extra ones are not restored from by Flink's own recovery: keep those you want as savepoints, delete \
             the rest.",
        ));
    }
    if let Some((id, b)) = l.metadata
        && l.framesize_bytes > 0
        && 2 * b > l.framesize_bytes
    {
        out.push(finding(
            "metadata_near_frame_size",
            Severity::Warning,
            format!("the _metadata of checkpoint {id} is {}, past half the {} frame size", bytes(b), bytes(l.framesize_bytes)),
            vec![("metadata_bytes", Value::Int(b)), ("framesize_bytes", Value::Int(l.framesize_bytes))],
            vec![("pekko.framesize", format!("{}b", 2 * l.framesize_bytes))],
            "Shrink the union list state or lower execution.checkpointing.data-inline-threshold; until then a larger \
             frame size keeps acknowledgements from being dropped (set on the JobManager and every TaskManager).",
        ));
    }
    if let Some(state) = l.reported_state_bytes.filter(|s| *s > 0 && l.shared_bytes > 3 * s) {
        out.push(finding(
            "shared_outruns_state",
            Severity::Info,
            format!("shared/ holds {} against {} of state Flink reports", bytes(l.shared_bytes), bytes(state)),
            vec![("shared_bytes", Value::Int(l.shared_bytes)), ("state_bytes", Value::Int(state))],
            vec![],
            "Incremental state that never shrinks: give the state a TTL, and check that compaction runs and subsumed \
             checkpoints are discarded.",
        ));
    }
    out
}

/// Bytes in binary units (`time::bytes`).
fn bytes(b: u64) -> String {
    crate::time::bytes(b as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{JobStorage, OrphanFolder};

    #[test]
    fn storage_findings_follow_the_listing() {
        let quiet = JobStorage {
            complete_folders: 1,
            num_retained: 1,
            framesize_bytes: 10 << 20,
            ..Default::default()
        };
        assert!(storage_findings(&quiet).is_empty());
        let leaking = JobStorage {
            orphans: vec![OrphanFolder { id: 3, bytes: 500, age_ms: 60_000, completed: true }],
            orphaned_bytes: 500,
            complete_folders: 4,
            metadata: Some((9, 6 << 20)),
            shared_bytes: 4_000,
            reported_state_bytes: Some(1_000),
            ..quiet
        };
        let ids: Vec<&str> = storage_findings(&leaking).iter().map(|f| f.id).collect();
        assert_eq!(
            ids,
            [
                "orphaned_checkpoints",
                "retained_beyond_setting",
                "metadata_near_frame_size",
                "shared_outruns_state"
            ]
        );
        let frame = &storage_findings(&leaking)[2];
        assert_eq!(frame.recommendation.set.get("pekko.framesize").map(String::as_str), Some("20971520b"));
        // With file merging, orphans are not told.
        let merged = JobStorage { file_merging: true, ..leaking };
        assert!(!storage_findings(&merged).iter().any(|f| f.id == "orphaned_checkpoints"));
    }
}
