//! The advisor: each job's checkpoint configuration against what its checkpoints showed,
//! as findings with their evidence, a recommendation (Flink keys and values) and the
//! reference model's prediction under the current and the recommended settings
//! (`docs/advice.md`). Pure: the surfaces (`advise`, the API, the status page, the
//! `flink_checkpoint_config_risk` series) hand in the configuration and the samples.
//!
//! - [`observed`]: the samples and the figures they give (percentiles, spacing, alignment).
//! - [`predict`]: the model run under one set of settings.
//! - [`findings`]: one function per finding, with its threshold.

pub(crate) mod findings;
pub(crate) mod observed;
pub(crate) mod predict;

use crate::observe::CheckpointConfiguration;

pub(crate) use findings::{Finding, Severity};
pub(crate) use observed::{Observed, Sample};
pub(crate) use predict::Prediction;

/// Findings about timing (the spacing, the timeout, alignment): a healthy job has none.
pub const TIMING: &[&str] = &[
    "min_pause_binds",
    "interval_below_duration",
    "timeout_tight",
    "alignment_share_high",
    "max_concurrent_with_min_pause",
];

/// Findings that risk data or a stuck job: the advice lane of every surface and
/// `FlinkCheckpointConfigRisk` read them ([`job_risk_findings`]); their tests are
/// `findings::RISK_TESTS`, in this order.
pub(crate) const RISKS: [&str; 3] = ["tolerable_too_high", "timeout_tight", "no_retention"];

/// Every finding id, in the order of `docs/advice.md` (the `finding` label's values).
pub(crate) const ALL: &[&str] = &[
    "min_pause_binds",
    "interval_below_duration",
    "timeout_tight",
    "tolerable_too_high",
    "tolerable_zero",
    "alignment_share_high",
    "max_concurrent_with_min_pause",
    "no_retention",
    "large_state_full_snapshots",
    "storage_need",
    "kafka_transaction_timeout",
];

/// The advice for one job.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Advice {
    /// The configuration read.
    pub(crate) configuration: CheckpointConfiguration,
    /// What the checkpoints showed.
    pub(crate) observed: Observed,
    /// Why the evidence is too thin for timing advice, when it is.
    pub(crate) thin: Option<String>,
    /// The model under the current settings (`None` when thin or periodic checkpoints are off).
    pub(crate) predicted: Option<Prediction>,
    /// The findings, warnings first.
    pub(crate) findings: Vec<Finding>,
}

#[cfg(test)]
impl Advice {
    /// Whether finding `id` is among the findings.
    pub(crate) fn has(&self, id: &str) -> bool {
        self.findings.iter().any(|f| f.id == id)
    }
}

/// The advice for a job configured as `configuration` whose finished checkpoints were
/// `samples` (any order; savepoints already left out).
pub(crate) fn advise(configuration: &CheckpointConfiguration, samples: &[Sample]) -> Advice {
    let observed = Observed::of(samples);
    let thin = observed.thin();
    let ctx = findings::Context::new(configuration, samples, &observed, thin.is_none());
    let mut found = findings::all(&ctx);
    found.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| index(a.id).cmp(&index(b.id))));
    Advice {
        configuration: configuration.clone(),
        predicted: ctx.current.clone(),
        observed,
        thin,
        findings: found,
    }
}

/// What the advisor reads of a job as the daemon knows it: its configuration and the samples of
/// its recent checkpoints; `None` before its first poll. The daemon's advice, its risk memo and
/// `advise` on a live cluster all start here.
pub(crate) fn job_inputs(
    job: &crate::state::JobState,
    flink_version: Option<&str>,
) -> Option<(CheckpointConfiguration, Vec<Sample>)> {
    let configuration = configuration_of(job, flink_version)?;
    Some((configuration, job.recent.iter().map(|r| &**r).filter_map(Sample::from_record).collect()))
}

/// `advice` with the retention and cleanup findings of the job's latest storage listing
/// (`findings::storage_findings`) added; the same advice when there are none.
pub(crate) fn with_storage(
    advice: std::sync::Arc<Advice>,
    listing: Option<&crate::observe::JobStorage>,
) -> std::sync::Arc<Advice> {
    let extra = listing.map(findings::storage_findings).unwrap_or_default();
    if extra.is_empty() {
        return advice;
    }
    let mut a = (*advice).clone();
    a.findings.extend(extra);
    a.findings.sort_by_key(|x| std::cmp::Reverse(x.severity));
    std::sync::Arc::new(a)
}

/// The configuration the advisor reads for a job: the whole one when the poller fetched it,
/// else the timing settings alone; `None` before the first poll.
pub(crate) fn configuration_of(
    job: &crate::state::JobState,
    flink_version: Option<&str>,
) -> Option<CheckpointConfiguration> {
    let mut c = match (&job.configuration, &job.settings) {
        (Some(c), _) => (**c).clone(),
        (None, Some(s)) => {
            CheckpointConfiguration { settings: s.clone(), ..CheckpointConfiguration::default() }
        }
        (None, None) => return None,
    };
    if let Some(s) = &job.settings {
        c.settings = s.clone();
    }
    if c.flink_version.is_none() {
        c.flink_version = flink_version.map(str::to_string);
    }
    c.measured_restore_ms = job.restores.latest().and_then(|r| r.duration_ms);
    Some(c)
}

/// Which of the [`RISKS`] a job's configuration and recent checkpoints show: the same tests
/// as [`advise`]'s findings (`findings::RISK_TESTS`), without the model runs.
pub(crate) fn risks(
    configuration: &CheckpointConfiguration,
    samples: &[Sample],
) -> [(&'static str, bool); 3] {
    let observed = Observed::of(samples);
    let enough = observed.thin().is_none();
    findings::RISK_TESTS.map(|(id, applies)| (id, applies(configuration, &observed, enough)))
}

/// [`risks`] of a job as the daemon knows it (its recent checkpoints); `None` before its
/// first poll. Worked out again only when what they read changed ([`risk_inputs`]): the
/// scrapes, rule rounds and API answers in between read the job's memo.
pub(crate) fn job_risks(
    job: &crate::state::JobState,
    flink_version: Option<&str>,
) -> Option<[(&'static str, bool); 3]> {
    let fingerprint = risk_inputs(job, flink_version)?;
    let on = job.risks.get_or_compute(fingerprint, || {
        let configuration = configuration_of(job, flink_version).unwrap_or_default();
        let samples: Vec<Sample> = job.recent.iter().map(|r| &**r).filter_map(Sample::from_record).collect();
        risks(&configuration, &samples).map(|(_, on)| on)
    });
    Some(std::array::from_fn(|i| (RISKS[i], on[i])))
}

/// A fingerprint of what [`risks`] reads of a job: the settings `findings::RISK_TESTS` read (a
/// test that reads another must add it here), the retention, and what the recent checkpoints'
/// samples are made of; `None` before its first poll.
fn risk_inputs(job: &crate::state::JobState, flink_version: Option<&str>) -> Option<u64> {
    use std::hash::{BuildHasher, Hash, Hasher};
    let settings = job.settings.as_ref().or(job.configuration.as_ref().map(|c| &c.settings))?;
    let mut h = foldhash::fast::FixedState::default().build_hasher();
    (settings.interval_ms, settings.timeout_ms, settings.tolerable_failures, flink_version).hash(&mut h);
    job.configuration.as_ref().and_then(|c| c.retained_on_cancellation).hash(&mut h);
    for r in &job.recent {
        (r.id, r.triggered_at.millis(), r.finished_at.millis(), r.status as u8, r.kind as u8).hash(&mut h);
        (r.end_to_end_ms, r.slowest_phases_ms, r.max_phases_ms).hash(&mut h);
        (r.failure_message.as_deref(), r.holdout.as_ref().and_then(|x| x.late_ack_ms)).hash(&mut h);
    }
    Some(h.finish())
}

/// A job's advice lane: the [`RISKS`] its configuration and recent checkpoints show, by id,
/// whatever its health; empty before its first poll. The page, the API, `diagnose` and the
/// `FlinkCheckpointConfigRisk` alert read it.
pub(crate) fn job_risk_findings(job: &crate::state::JobState) -> Vec<&'static str> {
    job_risks(job, None).into_iter().flatten().filter_map(|(finding, on)| on.then_some(finding)).collect()
}

fn index(id: &str) -> usize {
    ALL.iter().position(|a| *a == id).unwrap_or(ALL.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{CheckpointSettings, CheckpointStatus, FailureReason};
    use crate::time::Timestamp;
    use findings::Value;

    fn config(interval: u64, min_pause: u64, tolerable: u32) -> CheckpointConfiguration {
        CheckpointConfiguration {
            settings: CheckpointSettings {
                exactly_once: true,
                interval_ms: Some(interval),
                timeout_ms: Some(600_000),
                min_pause_ms: min_pause,
                max_concurrent: 1,
                tolerable_failures: Some(tolerable),
                ..CheckpointSettings::default()
            },
            retained_on_cancellation: Some(true),
            flink_version: Some("1.20.5".into()),
            ..CheckpointConfiguration::default()
        }
    }

    fn completed(n: u64, every: u64, duration: u64) -> Vec<Sample> {
        (0..n).map(|i| Sample::completed(i + 1, Timestamp((i * every) as i64), duration)).collect()
    }

    #[test]
    fn thin_evidence_says_so_and_gives_no_timing_advice() {
        let a = advise(&config(30_000, 60_000, 3), &completed(3, 110_000, 50_000));
        assert!(a.thin.as_deref().unwrap().starts_with("only 3 completed checkpoints"));
        assert!(a.predicted.is_none());
        assert!(a.findings.is_empty(), "{:?}", a.findings);
    }

    /// Interval 30 s, min-pause 60 s, 50 s checkpoints: a 110 s cycle.
    #[test]
    fn min_pause_binds_with_its_spacing_predicted() {
        let a = advise(&config(30_000, 60_000, 3), &completed(12, 110_000, 50_000));
        assert!(a.has("min_pause_binds") && a.has("interval_below_duration"), "{:?}", a.findings);
        let f = a.findings.iter().find(|f| f.id == "min_pause_binds").unwrap();
        assert_eq!(f.predicted.current.as_ref().unwrap().spacing_ms(), 110_000);
        assert_eq!(
            f.summary,
            "checkpoints every 110.0 s, not every 30.0 s: min-pause 60.0 s binds after each ~50.0 s checkpoint"
        );
        assert_eq!(f.recommendation.set["execution.checkpointing.min-pause"], "0s");
        // Without the pause, the 50 s checkpoints hold the next trigger: every 50 s.
        assert_eq!(f.predicted.recommended.as_ref().unwrap().spacing_ms(), 50_000);
        assert!(!a.has("tolerable_too_high") && !a.has("no_retention"));
    }

    #[test]
    fn an_exactly_once_kafka_sink_with_a_short_transaction_timeout_is_a_warning() {
        // Interval 10 s, checkpoints of 20 s, a 15 s restore: a transaction may live 45 s.
        let mut c = config(10_000, 0, 3);
        c.kafka_exactly_once = Some(true);
        c.kafka_transaction_timeout_ms = Some(60_000);
        c.measured_restore_ms = Some(15_000);
        let samples = completed(12, 30_000, 20_000);
        let a = advise(&c, &samples);
        let f = a.findings.iter().find(|f| f.id == "kafka_transaction_timeout").expect("the finding");
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.evidence["need_ms"], Value::Int(45_000));
        assert_eq!(f.evidence["transaction_timeout_ms"], Value::Int(60_000));
        assert!(
            f.summary.contains("interval 10.0 s + P99 checkpoint 20.0 s + restore 15.0 s"),
            "{}",
            f.summary
        );
        assert!(f.recommendation.text.contains("to 2.0 min or more"), "{}", f.recommendation.text);
        // A 15-minute timeout has the headroom: no finding.
        c.kafka_transaction_timeout_ms = Some(900_000);
        assert!(!advise(&c, &samples).has("kafka_transaction_timeout"));
        // No restore seen yet: said so, and the interval and P99 alone are compared.
        c.kafka_transaction_timeout_ms = Some(50_000);
        c.measured_restore_ms = None;
        let f =
            advise(&c, &samples).findings.into_iter().find(|f| f.id == "kafka_transaction_timeout").unwrap();
        assert!(f.summary.contains("restore not measured yet (no restore seen)"), "{}", f.summary);
        // Exactly-once, the timeout not exposed: an info that says so.
        c.kafka_transaction_timeout_ms = None;
        let f =
            advise(&c, &samples).findings.into_iter().find(|f| f.id == "kafka_transaction_timeout").unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert!(f.summary.contains("does not expose the producer's transaction.timeout.ms"), "{}", f.summary);
        // No Kafka sink known: nothing.
        c.kafka_exactly_once = None;
        assert!(!advise(&c, &samples).has("kafka_transaction_timeout"));
    }

    #[test]
    fn tolerable_failures_too_many_or_none() {
        let mut c = config(5_000, 0, 100);
        c.settings.timeout_ms = Some(60_000);
        let a = advise(&c, &completed(10, 5_000, 100));
        let f = a.findings.iter().find(|f| f.id == "tolerable_too_high").unwrap();
        // 101 expiries of 60 s each.
        let Value::Int(stuck) = f.evidence["stuck_job_fails_after_ms"] else { panic!() };
        assert!((101 * 60_000..102 * 60_000).contains(&stuck), "{stuck}");
        assert_eq!(f.recommendation.set["execution.checkpointing.tolerable-failed-checkpoints"], "3");
        assert!(advise(&config(5_000, 0, 0), &completed(10, 5_000, 100)).has("tolerable_zero"));
        assert!(!advise(&config(5_000, 0, 10), &completed(10, 5_000, 100)).has("tolerable_too_high"));
    }

    #[test]
    fn large_heap_state_gets_rocksdb_and_incremental_with_the_version_s_keys() {
        let mut c = config(60_000, 0, 3);
        c.flink_version = Some("2.3.0".into());
        c.settings.state_backend = Some("HashMapStateBackend".into());
        let mut samples = completed(10, 60_000, 1_000);
        for s in &mut samples {
            s.full_state_bytes = Some(6 << 30);
            s.checkpointed_bytes = Some(6 << 30);
        }
        let a = advise(&c, &samples);
        let f = a.findings.iter().find(|f| f.id == "large_state_full_snapshots").unwrap();
        assert_eq!(f.recommendation.set["state.backend.type"], "rocksdb");
        assert_eq!(f.recommendation.set["execution.checkpointing.incremental"], "true");
        let need = a.findings.iter().find(|f| f.id == "storage_need").unwrap();
        assert_eq!(need.evidence["need_bytes"], Value::Int(9 << 30));
    }

    /// Interval 3 s, every third checkpoint 6 s (the expired scenario with its timeout raised):
    /// the slow one holds the next trigger, the queued one follows at once. The gaps are uneven
    /// and their median moves between clusters; the spacing is their mean, which agrees with
    /// the triggers per hour, and a restart's long gap is no part of it.
    #[test]
    fn spacing_is_the_mean_gap_and_agrees_with_the_rate() {
        let mut samples = completed(30, 3_000, 500);
        for (i, s) in samples.iter_mut().enumerate() {
            if i % 3 == 0 {
                s.duration_ms = Some(6_000);
            }
        }
        let mut c = config(3_000, 0, 3);
        c.settings.timeout_ms = Some(10_000);
        let a = advise(&c, &samples);
        let now = a.predicted.as_ref().unwrap();
        let per_hour_spacing = 3_600_000.0 / now.checkpoints_per_hour();
        assert!(
            (now.spacing_ms() as f64 - per_hour_spacing).abs() < 0.05 * per_hour_spacing,
            "spacing {} ms against {per_hour_spacing:.0} ms from {} per hour",
            now.spacing_ms(),
            now.checkpoints_per_hour()
        );
        assert_eq!(observed::spacing(&[6_000, 100, 2_900, 3_000]), Some(3_000));
        assert_eq!(observed::spacing(&[3_000, 3_000, 3_000, 600_000, 3_000]), Some(3_000));
        assert_eq!(observed::spacing(&[]), None);
    }

    /// Why `p` contradicts itself, if it does: its spacing must be one hour over every
    /// checkpoint it counts per hour (completed + failed, the failed counting the expired),
    /// within 5 %.
    fn contradiction(p: &Prediction) -> Option<String> {
        let per_hour = p.checkpoints_per_hour() + p.failures_per_hour();
        let from_rates = 3_600_000.0 / per_hour;
        let off = (p.spacing_ms() as f64 - from_rates).abs() / from_rates;
        (per_hour.is_nan() || per_hour <= 0.0 || off.is_nan() || off > 0.05).then(|| {
            format!(
                "spacing {} ms, but {} completed + {} failed per hour give {from_rates:.0} ms",
                p.spacing_ms(),
                p.checkpoints_per_hour(),
                p.failures_per_hour()
            )
        })
    }

    /// Every prediction `advice` holds, named: the current one and each finding's two.
    fn predictions(a: &Advice) -> Vec<(String, &Prediction)> {
        let mut out: Vec<(String, &Prediction)> = a.predicted.iter().map(|p| ("current".into(), p)).collect();
        for f in &a.findings {
            out.extend(f.predicted.current.iter().map(|p| (format!("{} current", f.id), p)));
            out.extend(f.predicted.recommended.iter().map(|p| (format!("{} recommended", f.id), p)));
        }
        out
    }

    /// One generated checkpoint: what happened to it (0–5 completed, 6–7 expired, 8 declined),
    /// its duration in thousandths of the timeout, its gap to the next trigger in hundredths of
    /// the interval, whether an expired one told (late acknowledgements) how long it needed, and
    /// its alignment in hundredths of its duration (0: none reported).
    type Generated = (u8, u64, u64, bool, u64);

    /// Interval, min-pause (% of it), timeout (tenths of it), max-concurrent, tolerable failures
    /// (few, many or unlimited), unaligned.
    fn knobs() -> impl proptest::strategy::Strategy<Value = (u64, u64, u64, u32, u32, bool)> {
        (
            100u64..=60_000,
            0u64..=200,
            5u64..=200,
            1u32..=4,
            proptest::prop_oneof![0u32..=5, 6u32..=200, proptest::strategy::Just(i32::MAX as u32)],
            proptest::bool::ANY,
        )
    }

    /// Up to 40 generated checkpoints ([`Generated`]).
    fn checkpoints() -> impl proptest::strategy::Strategy<Value = Vec<Generated>> {
        proptest::collection::vec((0u8..=8, 1u64..=950, 50u64..=300, proptest::bool::ANY, 0u64..=100), 1..40)
    }

    /// A job configured by the generated knobs whose checkpoints were `generated`.
    fn generated_case(
        (interval, min_pause_pct, timeout_tenths, max_concurrent, tolerable, unaligned): (
            u64,
            u64,
            u64,
            u32,
            u32,
            bool,
        ),
        generated: &[Generated],
    ) -> (CheckpointConfiguration, Vec<Sample>) {
        let timeout = (interval * timeout_tenths / 10).max(100);
        let mut c =
            config(interval, if min_pause_pct < 50 { 0 } else { interval * min_pause_pct / 100 }, tolerable);
        c.settings.timeout_ms = Some(timeout);
        c.settings.max_concurrent = max_concurrent;
        c.settings.unaligned = unaligned;
        c.retained_on_cancellation = Some(tolerable % 2 == 0);
        let mut at = 1_700_000_000_000i64;
        let samples = generated
            .iter()
            .enumerate()
            .map(|(i, &(kind, duration_permille, gap_pct, told, alignment_pct))| {
                let duration = (timeout * duration_permille / 1000).max(1);
                let mut s = Sample::completed(i as u64 + 1, Timestamp(at), duration);
                s.alignment_ms = (alignment_pct > 0).then_some(duration * alignment_pct / 100);
                s.processed_bytes = Some(duration * 1_000);
                s.full_state_bytes = Some(duration << 20);
                match kind {
                    6 | 7 => {
                        s.status = CheckpointStatus::Failed;
                        s.failure = Some(FailureReason::CheckpointExpired);
                        s.needed_ms = told.then_some(timeout + duration);
                        s.duration_ms = Some(timeout);
                    }
                    8 => {
                        s.status = CheckpointStatus::Failed;
                        s.failure = Some(FailureReason::CheckpointDeclined);
                    }
                    _ => {}
                }
                at += (interval * gap_pct / 100).max(1) as i64;
                s
            })
            .collect();
        (c, samples)
    }

    /// The demo's expiring job as `advise --url` read it from `checkpoint-sentinel demo`
    /// (demo-expiring-2: interval 2 s, timeout 3 s, tolerable 100; every third checkpoint hangs
    /// in its snapshot and expires, the others take 51 ms). The 6 s timeout recommended lets
    /// each hang last 6 s while three ticks queue, and the two queued behind it run back to
    /// back: the spacing was 51 ms (the mean of the short gaps, every hang's gap left out as
    /// over 10× their median) beside 1,179.8 completed and 589.9 expired an hour.
    #[test]
    fn the_demo_s_expiring_job_gets_a_spacing_its_rates_agree_with() {
        let mut c = config(2_000, 0, 100);
        c.settings.timeout_ms = Some(3_000);
        c.retained_on_cancellation = Some(false);
        // (id, trigger ms after the first, duration ms; expired when `None`), from the demo's
        // `/jobs/:id/checkpoints`.
        let seen = [
            (14, 0, Some(51)),
            (15, 2_000, None),
            (16, 5_000, Some(52)),
            (17, 6_000, Some(51)),
            (18, 8_000, None),
            (19, 11_000, Some(51)),
            (20, 12_000, Some(52)),
            (21, 14_000, None),
            (22, 17_000, Some(51)),
            (23, 18_000, Some(51)),
        ];
        let samples: Vec<Sample> = seen
            .iter()
            .map(|&(id, at, duration)| {
                let mut s =
                    Sample::completed(id, Timestamp(1_796_441_995_220 + at), duration.unwrap_or(3_000));
                if duration.is_none() {
                    s.status = CheckpointStatus::Failed;
                    s.failure = Some(FailureReason::CheckpointExpired);
                }
                s
            })
            .collect();
        let a = advise(&c, &samples);
        let f = a.findings.iter().find(|f| f.id == "timeout_tight").unwrap();
        assert_eq!(f.recommendation.set["execution.checkpointing.timeout"], "6s");
        for (which, p) in predictions(&a) {
            assert_eq!(contradiction(p), None, "{which}");
        }
        let now = f.predicted.current.as_ref().unwrap();
        let after = f.predicted.recommended.as_ref().unwrap();
        assert!((1_900..=2_100).contains(&now.spacing_ms()), "{now:?}");
        // Three checkpoints per 6 s hang + two 51 ms ones: about 2.03 s apart, a third expiring.
        assert!((1_950..=2_150).contains(&after.spacing_ms()), "{after:?}");
        assert!(after.expiries_per_hour() > 500.0, "{after:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, ..Default::default() })]
        /// Whatever the configuration and the checkpoints, every prediction agrees with itself:
        /// the spacing is what the checkpoints per hour beside it imply.
        #[test]
        fn every_prediction_s_spacing_agrees_with_its_rates(
            knobs in knobs(),
            generated in checkpoints(),
        ) {
            let (c, samples) = generated_case(knobs, &generated);
            let a = advise(&c, &samples);
            for (which, p) in predictions(&a) {
                if let Some(why) = contradiction(p) {
                    proptest::prop_assert!(false, "{which}: {why}\n{c:?}\n{p:?}");
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
        /// The risk findings are tested once: the daemon's cheap check (`risks`, no model run)
        /// says a risk exactly when the advisor's findings have it, whatever the configuration
        /// (periodic checkpoints on or off, retention unknown, kept or deleted) and checkpoints.
        #[test]
        fn the_risks_are_the_advisor_s_own_findings(
            knobs in knobs(),
            periodic in proptest::bool::ANY,
            retained in proptest::prop_oneof![
                proptest::strategy::Just(None), proptest::strategy::Just(Some(true)), proptest::strategy::Just(Some(false))
            ],
            generated in checkpoints(),
        ) {
            let (mut c, samples) = generated_case(knobs, &generated);
            c.retained_on_cancellation = retained;
            if !periodic {
                c.settings.interval_ms = None;
            }
            let a = advise(&c, &samples);
            for (id, on) in risks(&c, &samples) {
                proptest::prop_assert_eq!(on, a.has(id), "{} on {:?}", id, c);
            }
        }
    }

    /// A job's risks are worked out once per change of what they read: a poll that brings
    /// nothing new reads the memo, a new checkpoint or a new setting works them out again.
    #[test]
    fn a_job_s_risks_follow_its_inputs_and_are_kept_between() {
        use crate::observe::{CheckpointCounts, FinishedCheckpoint, JobKey, JobPoll, Observation};
        use crate::state::State;
        use crate::stats::WindowSpec;
        let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
        let poll = |state: &mut State, tolerable: u32, finished: Vec<FinishedCheckpoint>, at: i64| {
            let settings = CheckpointSettings {
                interval_ms: Some(10_000),
                timeout_ms: Some(60_000),
                tolerable_failures: Some(tolerable),
                max_concurrent: 1,
                ..CheckpointSettings::default()
            };
            let completed = finished.len() as u64;
            state.apply(
                &Observation::JobPolled(JobPoll {
                    key: JobKey { cluster: "c".into(), job_id: "j".into() },
                    job_name: "orders".into(),
                    job_state: "RUNNING".into(),
                    polled_at: Timestamp(at),
                    counts: CheckpointCounts { completed, ..CheckpointCounts::default() },
                    settings: Some(settings),
                    in_progress: Vec::new(),
                    finished,
                    latest_restore: None,
                    deferred: Default::default(),
                }),
                Timestamp(at),
            );
        };
        let job = |state: &State| -> Option<[(&'static str, bool); 3]> {
            job_risks(&state.clusters()["c"].jobs["j"], None)
        };
        let cp = |id: u64| FinishedCheckpoint::completed(id, Timestamp(id as i64 * 10_000), 500);
        poll(&mut state, 100, vec![cp(1)], 10_000);
        let first = job(&state).unwrap();
        assert_eq!(first[0], ("tolerable_too_high", true));
        let fingerprint = risk_inputs(&state.clusters()["c"].jobs["j"], None);
        // Nothing new: the same inputs, the memo's answer.
        poll(&mut state, 100, vec![cp(1)], 20_000);
        assert_eq!(risk_inputs(&state.clusters()["c"].jobs["j"], None), fingerprint);
        assert_eq!(job(&state).unwrap(), first);
        // A new checkpoint, then a new setting: new inputs, worked out again.
        poll(&mut state, 100, vec![cp(1), cp(2)], 30_000);
        assert_ne!(risk_inputs(&state.clusters()["c"].jobs["j"], None), fingerprint);
        poll(&mut state, 3, vec![cp(1), cp(2)], 40_000);
        assert_eq!(job(&state).unwrap()[0], ("tolerable_too_high", false));
    }

    #[test]
    fn predictions_are_deterministic() {
        let samples = completed(20, 10_000, 2_000);
        assert_eq!(advise(&config(10_000, 0, 3), &samples), advise(&config(10_000, 0, 3), &samples));
    }
}
