//! The built-in rules over every captured scenario of every Flink version, at the captured pace.
//!
//! Each scenario's `rest/poll/` series (a poll every 2 s) and its snapshot are applied to a
//! `State` at their captured times shifted to now, the JobManager's and TaskManager's log
//! events at their logged times, and `rules::Evaluator` runs every second while the data is
//! fresh (up to one poll interval after each step: the capture has no polls in the ~45 s
//! before its snapshot, and a daemon that cannot poll is a different test). Then the job is
//! cancelled as Flink does it: the listing says CANCELED at once, the checkpoint statistics
//! lag (one stale answer still showing the checkpoint in progress), then the captured
//! `checkpoints-after-cancel.json` with the checkpoint the cancel failed, twice, and the rules
//! run for another minute. No wall-clock sleeping: time is an argument in the core.
//!
//! Asserted: nothing pending or firing on healthy and minpause, no flap anywhere (an alert
//! active again within [`FLAP_SPAN_MS`] of ending), the expected alert on expired, declined,
//! tolerable-exceeded and a doctored stall, and nothing active from the cancel on.
//!
//! `ALERT_QUALITY_TABLE=1 cargo test --test integration alert_replay:: -- --nocapture` prints
//! the table of docs/alert-quality.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use checkpoint_sentinel::observe::{ClusterPoll, JobPoll, JobStatus, JobSummary, LogEvent, Observation};
use checkpoint_sentinel::rules::{AlertState, Evaluator, Rule, builtin, format_duration};
use checkpoint_sentinel::sources::logs::parse::{LineSplitter, Patterns, RecordParser};
use checkpoint_sentinel::state::State;
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::{Timestamp, log_time_utc_ms};
use serde_json::Value;

use crate::common::{Scenario, fixtures, read_json};

const VERSIONS: [&str; 4] = ["2.3.0", "1.20.5", "1.17.2", "1.14.6"];
/// The capture's poll interval.
const POLL_MS: i64 = 2_000;
/// An alert active again within this long after it ended is a flap.
const FLAP_SPAN_MS: i64 = 5 * 60_000;
/// How long the rules run after the cancel.
const AFTER_CANCEL_MS: i64 = 60_000;

/// An edit of a captured poll series.
type Doctor = fn(Vec<Value>) -> Vec<Value>;

/// What happens at one instant of the replay.
enum Step {
    Job(Box<JobPoll>),
    Listing(&'static str),
    Logs(Vec<LogEvent>),
}

/// What the rules did for one scenario.
#[derive(Default)]
struct Outcome {
    /// Per alert name: times it became pending, times it fired, flaps.
    by_alert: BTreeMap<String, (u32, u32, u32)>,
    /// Alerts active at or after the cancel.
    after_cancel: BTreeSet<String>,
    /// Rule evaluations.
    evaluations: u32,
    /// Replayed span, ms.
    span_ms: i64,
    /// After the cancel: the counts differ from Flink's last answer, or something is still in
    /// progress.
    final_counts_problem: Option<String>,
    /// The first description of `FlinkCheckpointScheduleUnexplained`.
    stall_description: Option<String>,
    /// "Exceeded checkpoint tolerable failure threshold" events of the job's log.
    logged_exceeded: u64,
    /// Times the daemon's count of Flink's went past the tolerable number.
    counted_exceeded: u64,
}

impl Outcome {
    fn fired(&self) -> BTreeSet<&str> {
        self.by_alert.iter().filter(|(_, (_, f, _))| *f > 0).map(|(n, _)| n.as_str()).collect()
    }

    fn pending(&self) -> BTreeSet<&str> {
        self.by_alert.keys().map(String::as_str).collect()
    }

    fn flaps(&self) -> u32 {
        self.by_alert.values().map(|(_, _, f)| f).sum()
    }
}

/// The log events of a scenario's `logs/` with their logged times.
fn log_events(dir: &Path) -> Vec<(i64, LogEvent)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("logs")) else { return out };
    let mut files: Vec<_> = entries.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect();
    files.sort();
    for file in files {
        let bytes = std::fs::read(&file).unwrap();
        let mut parser = RecordParser::new(Patterns::builtin());
        let mut events = Vec::new();
        let mut splitter = LineSplitter::new(1 << 20, 0);
        splitter.feed(&bytes, |line, offset| parser.push_line(line, offset, &mut events));
        splitter.finish(|line, offset| parser.push_line(line, offset, &mut events));
        parser.flush(&mut events);
        for mut event in events {
            let Some(at) = event.logged_at.as_deref().and_then(log_time_utc_ms) else { continue };
            event.cluster = "lab".into();
            out.push((at, event));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

/// A scenario's polls and cancel as timed steps (captured times), and when the cancel began.
fn timeline(scenario: &Scenario, doctor: Option<Doctor>) -> (Vec<(i64, Step)>, i64) {
    let mut polls = scenario.polls.clone();
    let mut times = scenario.poll_times();
    if let Some(doctor) = doctor {
        polls = doctor(polls);
    }
    let snapshot_at = *times.last().unwrap();
    let cancel_at = snapshot_at + 1_000;
    let last = polls.last().unwrap().clone();
    let after_cancel = match doctor {
        // A doctored series has no capture of its cancel: the stale answer stays.
        Some(_) => None,
        None => Some(scenario.dir.join("rest/checkpoints-after-cancel.json"))
            .filter(|p| p.exists())
            .map(|p| read_json(&p)),
    };
    let settled = after_cancel.unwrap_or_else(|| {
        // Flink's answer once the cancel failed the pending checkpoint: nothing in progress.
        let mut v = last.clone();
        if let Some(h) = v["history"].as_array_mut() {
            h.retain(|c| c["status"] != "IN_PROGRESS");
        }
        if let Some(c) = v["counts"].as_object_mut() {
            c.insert("in_progress".into(), 0.into());
        }
        v
    });
    let n = polls.len();
    polls.extend([last, settled.clone(), settled]);
    times.extend([cancel_at + 500, cancel_at + 500 + POLL_MS, cancel_at + 500 + 2 * POLL_MS]);
    let mut job_polls = scenario.job_polls_at(&polls, &times);
    for p in &mut job_polls[n..] {
        p.job_state = "CANCELED".into();
    }
    let mut steps: Vec<(i64, Step)> = Vec::new();
    for (i, poll) in job_polls.into_iter().enumerate() {
        let at = poll.polled_at.millis();
        steps.push((at, Step::Job(Box::new(poll))));
        steps.push((at, Step::Listing(if i < n { "RUNNING" } else { "CANCELED" })));
    }
    let job_id = scenario.job_id.clone();
    let first = times[0];
    for (at, event) in log_events(&scenario.dir) {
        // Only this job's run (a log may hold the start of the next scenario's job).
        if event.job_id.as_deref().is_some_and(|j| j != job_id) || at > cancel_at {
            continue;
        }
        steps.push((at.max(first - 60_000), Step::Logs(vec![event])));
    }
    steps.sort_by_key(|(at, _)| *at);
    (steps, cancel_at)
}

/// Replays the steps shifted to now; returns what the built-in rules did.
fn replay(scenario: &Scenario, steps: Vec<(i64, Step)>, cancel_at: i64) -> Outcome {
    let rules = builtin::rules().into_iter().map(|s| Rule::new(s).unwrap()).collect();
    let mut evaluator = Evaluator::new(rules);
    let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
    let first = steps.iter().find(|(_, s)| matches!(s, Step::Job(_))).map(|(at, _)| *at).unwrap();
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let shift = now_ms - first;
    let shifted = |t: i64| Timestamp(t + shift);
    let cluster = "lab".to_string();
    let job_name = steps
        .iter()
        .find_map(|(_, s)| if let Step::Job(p) = s { Some(p.job_name.clone()) } else { None })
        .unwrap();

    // Evaluation instants: every second up to one poll interval after each poll, and for a
    // minute after the cancel.
    let poll_times: Vec<i64> =
        steps.iter().filter_map(|(at, s)| matches!(s, Step::Job(_)).then_some(*at)).collect();
    let mut instants = BTreeSet::new();
    for &t in &poll_times {
        for k in 0..POLL_MS / 1000 {
            instants.insert(t + k * 1000);
        }
    }
    for k in 0..=AFTER_CANCEL_MS / 1000 {
        instants.insert(cancel_at + k * 1000);
    }

    let mut outcome = Outcome::default();
    let mut ended_at: BTreeMap<String, i64> = BTreeMap::new();
    let mut active_before: BTreeMap<String, AlertState> = BTreeMap::new();
    let mut steps = steps.into_iter().peekable();
    let mut cancelled = false;
    for t in instants.into_iter().filter(|t| *t >= first) {
        while let Some((at, _)) = steps.peek() {
            if *at > t {
                break;
            }
            let (at, step) = steps.next().unwrap();
            match step {
                Step::Job(mut poll) => {
                    poll.polled_at = shifted(at);
                    shift_poll(&mut poll, shift);
                    let ended = poll.job_state == JobStatus::Canceled;
                    cancelled |= ended;
                    state.apply(&Observation::JobPolled(*poll), shifted(at));
                    let job = &state.clusters()["lab"].jobs[&scenario.job_id];
                    if ended && !job.in_progress.is_empty() {
                        // The stale answer right after the cancel still lists the checkpoint in
                        // progress: an ended job must not keep it (nor its growing age).
                        outcome.final_counts_problem =
                            Some(format!("in progress after the cancel: {:?}", job.in_progress));
                    }
                }
                Step::Listing(job_state) => {
                    let jobs = vec![JobSummary {
                        job_id: scenario.job_id.clone(),
                        name: job_name.clone(),
                        state: JobStatus::parse(job_state),
                    }];
                    let poll = ClusterPoll {
                        cluster: cluster.clone(),
                        duration_ms: 5,
                        flink_version: None,
                        jobs: Some(jobs),
                        errors: Vec::new(),
                        reachable: true,
                    };
                    state.apply(&Observation::ClusterPolled(poll), shifted(at));
                }
                Step::Logs(events) => {
                    outcome.logged_exceeded += events
                        .iter()
                        .filter(|e| e.kind == checkpoint_sentinel::observe::LogKind::TolerableExceeded)
                        .count() as u64;
                    state.apply(&Observation::LogEvents(events), shifted(at))
                }
            }
        }
        evaluator.evaluate(&state, shifted(t));
        outcome.evaluations += 1;
        let now: BTreeMap<String, AlertState> =
            evaluator.active().map(|a| (a.name().to_string(), a.state)).collect();
        let stall_ms = state.clusters()["lab"].jobs[&scenario.job_id].shadow.trigger.stalled_for_ms();
        for a in evaluator.active().filter(|a| a.name() == "FlinkCheckpointScheduleUnexplained") {
            // Every sentence agrees with the numbers: a stall that makes it fire is stated with
            // its length (not "found 0 deviations").
            let text = &a.annotations["description"];
            if let Some(ms) = stall_ms.filter(|ms| *ms > 0) {
                let stated = format_duration(ms as f64 / 1000.0);
                if !text.contains(&stated) {
                    outcome.final_counts_problem = Some(format!("the stall of {stated} is not in: {text}"));
                }
            }
            outcome.stall_description.get_or_insert_with(|| text.to_string());
        }
        for a in evaluator.active() {
            // The tolerance alerts agree with Flink's own count: "about to exceed" never quotes
            // more than the tolerable number, and never once Flink failed the job in the hour.
            let job = &state.clusters()["lab"].jobs[&scenario.job_id];
            let tolerable = job.settings.as_ref().and_then(|s| s.tolerable_failures);
            if a.name() == "FlinkCheckpointToleranceNearlySpent" {
                let quoted = a.value.unwrap_or(f64::NAN);
                let exceeded_too = now.contains_key("FlinkCheckpointToleranceExceeded");
                if tolerable.is_none_or(|t| quoted > f64::from(t) || t == 0) || exceeded_too {
                    outcome.final_counts_problem = Some(format!(
                        "about to exceed with {quoted} of {tolerable:?} ({} exceeded): {}",
                        job.tolerance.exceeded(),
                        a.annotations["description"]
                    ));
                }
            }
        }
        for (name, st) in &now {
            let entry = outcome.by_alert.entry(name.clone()).or_default();
            let was = active_before.get(name);
            if was.is_none() {
                entry.0 += 1;
                if ended_at.get(name).is_some_and(|end| t - end <= FLAP_SPAN_MS) {
                    entry.2 += 1;
                }
            }
            if *st == AlertState::Firing && was != Some(&AlertState::Firing) {
                entry.1 += 1;
            }
            if cancelled {
                outcome.after_cancel.insert(name.clone());
            }
        }
        for name in active_before.keys().filter(|n| !now.contains_key(*n)) {
            ended_at.insert(name.clone(), t);
        }
        active_before = now;
        outcome.span_ms = t - first;
    }
    let job = &state.clusters()["lab"].jobs[&scenario.job_id];
    if outcome.final_counts_problem.is_some() {
        return outcome;
    }
    outcome.counted_exceeded = job.tolerance.exceeded();
    let totals = job.totals();
    let flink = job.flink_counts;
    if (totals.completed, totals.failed) != (flink.completed, flink.failed)
        || !job.in_progress.is_empty()
        || job.consecutive_failures() > flink.failed
    {
        outcome.final_counts_problem = Some(format!(
            "after the cancel: totals {totals:?}, Flink {flink:?}, in progress {:?}",
            job.in_progress
        ));
    }
    outcome
}

/// Moves a poll's checkpoint times by `shift` ms (to now).
fn shift_poll(poll: &mut JobPoll, shift: i64) {
    for cp in &mut poll.finished {
        cp.triggered_at = Timestamp(cp.triggered_at.millis() + shift);
        cp.finished_at = Timestamp(cp.finished_at.millis() + shift);
    }
    for cp in &mut poll.in_progress {
        cp.triggered_at = Timestamp(cp.triggered_at.millis() + shift);
    }
    if let Some((id, at)) = poll.latest_restore {
        poll.latest_restore = Some((id, Timestamp(at.millis() + shift)));
    }
}

/// Every captured scenario with a poll series, per version.
fn scenarios(version: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(fixtures().join(format!("flink-{version}")))
        .unwrap()
        .flatten()
        .filter(|e| !crate::common::poll_series(&e.path()).is_empty())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// What each scenario must and may bring: (must fire, may become pending or fire). "May"
/// holds only conditions that are true of the captured data (an alert pending on a true
/// condition is right; its `for` is longer than the capture).
fn expected(scenario: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match scenario {
        "healthy" | "minpause" | "incremental" | "backpressure-unaligned" => (&[], &[]),
        // Every third checkpoint sleeps 6 s in its snapshot and expires at the 4 s timeout: the
        // JobManager logs it; before each expiry the checkpoint is close to its timeout; the
        // completed ones take ~2 s (P95 above half the timeout) and a third of them fail.
        "expired" => (
            &["FlinkCheckpointFailed", "FlinkCheckpointExpiredBurst", "FlinkCheckpointAboutToExpire"],
            &[
                "FlinkCheckpointDurationHigh",
                "FlinkCheckpointStartDelayHigh",
                "FlinkCheckpointFailuresIncreasing",
            ],
        ),
        // Every third checkpoint is declined by a task: a third of them fail.
        "declined" => (
            &["FlinkCheckpointFailed", "FlinkCheckpointDeclinedBurst"],
            &["FlinkCheckpointFailuresIncreasing"],
        ),
        // Every checkpoint is declined with tolerable 2: the budget is spent, the job restarts
        // and the failures go on. `FlinkCheckpointFailed` tells of failures after the daemon's
        // first look at the job: some captures begin with every failure already counted.
        // Flink's count goes 0, 1, 2 and the third counted failure fails the job: the
        // exceedance pages (the job failed over); "about to exceed" may come before the first.
        "tolerable-exceeded" | "tolerable-exceeded-debuglog" => (
            &["FlinkCheckpointToleranceExceeded", "FlinkCheckpointFailureStreak"],
            &[
                "FlinkCheckpointToleranceNearlySpent",
                "FlinkCheckpointFailed",
                "FlinkCheckpointFailuresIncreasing",
                "FlinkCheckpointDeclinedBurst",
                "FlinkJobFrequentRestores",
            ],
        ),
        // The synchronous snapshot fails the task every third checkpoint: the job restores from
        // its latest checkpoint each time (4 and more restores).
        "snapshot-sync-failure" => (
            &["FlinkJobFrequentRestores"],
            &["FlinkCheckpointFailed", "FlinkCheckpointFailuresIncreasing", "FlinkCheckpointDeclinedBurst"],
        ),
        // A task failure fails the checkpoint in progress and the job restores.
        "failover" => (&[], &["FlinkCheckpointFailuresIncreasing", "FlinkJobFrequentRestores"]),
        // Backpressure: alignment and start delay are over half the interval (true; their
        // alerts wait 10 minutes, longer than the captures). Nothing else.
        "backpressure" | "backpressure-debuglog" | "backpressure-e2e" => {
            (&[], &["FlinkCheckpointAlignmentHigh", "FlinkCheckpointStartDelayHigh"])
        }
        // User code holds a task thread for 40 s against a 10 s timeout: the checkpoints in its
        // way expire one after the other. The thread itself is named by the thread sampler,
        // which a replay of REST answers does not run (`tests/thread_looker.rs` covers it).
        "blocked" | "blocked-max-depth-4" => (
            &["FlinkCheckpointFailed", "FlinkCheckpointExpiredBurst", "FlinkCheckpointFailureStreak"],
            &[
                "FlinkCheckpointAboutToExpire",
                "FlinkCheckpointDurationHigh",
                "FlinkCheckpointStartDelayHigh",
                "FlinkCheckpointFailuresIncreasing",
            ],
        ),
        // A TaskManager kept ~80 % full with garbage against a 3 s timeout: checkpoints expire,
        // how many depends on the version's collector timing (1.20.5 had two, not a burst; on
        // 1.17.2 none completed after the first, so no progress for longer than its 15 s window).
        // Its GC share is evidence, read by evidence rounds a REST replay does not run
        // (`tests/evidence.rs` covers FlinkTaskManagerGcPressure on a real timeline).
        "gc" => (
            &["FlinkCheckpointFailed"],
            &[
                "FlinkCheckpointAboutToExpire",
                "FlinkCheckpointExpiredBurst",
                "FlinkCheckpointFailureStreak",
                "FlinkCheckpointNoProgress",
                "FlinkCheckpointDurationHigh",
                "FlinkCheckpointStartDelayHigh",
                "FlinkCheckpointFailuresIncreasing",
            ],
        ),
        // 90 % of the keys on subtask 0 of 4: its state is 25× the median's, but 2.7 MB, under
        // FlinkCheckpointStateSkew's 100 MB floor, and every checkpoint completes: nothing.
        "skew" => (&[], &[]),
        other => panic!("no expectation for the scenario {other}: add one"),
    }
}

/// May become pending on every capture: its condition is true of them all (tolerable failures of
/// 100 or 1,000 are `tolerable_too_high`); its `for` of 10 minutes is longer than any capture.
const PENDING_ANYWHERE: &[&str] = &["FlinkCheckpointConfigRisk"];

/// Flaps known and accepted (none): the test fails when a listed flap is gone, so that an
/// entry is removed with its fix. `FlinkCheckpointAboutToExpire` was one (it fired once per
/// expiring checkpoint, every 9 s on `expired`) until it kept firing while checkpoints keep
/// expiring (`keep_firing_for`).
const KNOWN_FLAPS: &[(&str, &str)] = &[];

/// The healthy series with its history frozen from poll 8 on: the job keeps running but no
/// checkpoint is triggered any more.
fn stall(polls: Vec<Value>) -> Vec<Value> {
    let frozen = polls[7].clone();
    polls.iter().enumerate().map(|(i, p)| if i < 8 { p.clone() } else { frozen.clone() }).collect()
}

fn row(version: &str, scenario: &str, outcome: &Outcome, must: &[&str], may: &[&str]) -> String {
    let alerts = if outcome.by_alert.is_empty() {
        "none".to_string()
    } else {
        outcome
            .by_alert
            .iter()
            .map(|(n, (p, f, _))| format!("{n} (pending {p}×, fired {f}×)"))
            .collect::<Vec<_>>()
            .join("<br>")
    };
    let expectation = match (must.is_empty(), may.is_empty()) {
        (true, true) => "nothing".to_string(),
        (false, true) => must.join(", "),
        (true, false) => format!("nothing; allowed: {}", may.join(", ")),
        (false, false) => format!("{}; allowed: {}", must.join(", "), may.join(", ")),
    };
    format!(
        "| {version} | {scenario} | {:.0} s | {alerts} | {expectation} | {} | {} |",
        outcome.span_ms as f64 / 1000.0,
        outcome.flaps(),
        if outcome.after_cancel.is_empty() {
            "none".to_string()
        } else {
            outcome.after_cancel.iter().cloned().collect::<Vec<_>>().join(", ")
        },
    )
}

#[test]
fn the_builtin_rules_on_every_capture_at_its_pace_fire_what_they_should_and_nothing_else() {
    let mut table = vec![
        "| Flink | scenario | replayed | alerts (became pending, fired) | expected | flaps | active after the cancel |"
            .to_string(),
        "| --- | --- | --- | --- | --- | --- | --- |".to_string(),
    ];
    let mut problems = Vec::new();
    let mut cases: Vec<(String, String, Option<Doctor>)> = Vec::new();
    for version in VERSIONS {
        for scenario in scenarios(version) {
            cases.push((version.to_string(), scenario, None));
        }
        // 1.17.2 was captured for the TaskManager evidence only: no healthy series to doctor.
        if fixtures().join(format!("flink-{version}/healthy")).exists() {
            cases.push((version.to_string(), "healthy, doctored stall".to_string(), Some(stall)));
        }
    }
    for (version, name, doctor) in cases {
        let (dir, must, may): (&str, &[&str], &[&str]) = if doctor.is_some() {
            ("healthy", &["FlinkCheckpointScheduleUnexplained"], &[])
        } else {
            let (must, may) = expected(&name);
            (name.as_str(), must, may)
        };
        let scenario = Scenario::load(&version, dir);
        let (steps, cancel_at) = timeline(&scenario, doctor);
        let outcome = replay(&scenario, steps, cancel_at);
        if let Some(text) =
            outcome.stall_description.as_ref().filter(|_| doctor.is_some() && version == "2.3.0")
        {
            println!("{version} {name}: {text}");
        }
        let may: Vec<&str> = may.iter().chain(PENDING_ANYWHERE).copied().collect();
        let may = may.as_slice();
        table.push(row(&version, &name, &outcome, must, may));
        let fired = outcome.fired();
        for m in must {
            if !fired.contains(m) {
                problems.push(format!("{version} {name}: {m} did not fire"));
            }
        }
        for p in outcome.pending() {
            if !must.contains(&p) && !may.contains(&p) {
                problems.push(format!(
                    "{version} {name}: {p} became pending or fired: {:?}",
                    outcome.by_alert[p]
                ));
            }
        }
        for (alert, (_, _, flaps)) in &outcome.by_alert {
            let known = KNOWN_FLAPS.contains(&(name.as_str(), alert.as_str()));
            if *flaps > 0 && !known {
                problems.push(format!("{version} {name}: {alert} flaps {flaps}×: {:?}", outcome.by_alert));
            }
            if *flaps == 0 && known {
                problems
                    .push(format!("{version} {name}: {alert} no longer flaps: remove it from KNOWN_FLAPS"));
            }
        }
        if name.starts_with("tolerable-exceeded") {
            // Each time the JobManager logged that the job failed for it, the daemon's count of
            // Flink's went past the tolerable number.
            println!(
                "{version} {name}: exceeded {} times as counted, {} as logged",
                outcome.counted_exceeded, outcome.logged_exceeded
            );
            if outcome.counted_exceeded != outcome.logged_exceeded || outcome.counted_exceeded == 0 {
                problems.push(format!(
                    "{version} {name}: tolerance exceeded {} times as counted, {} as logged",
                    outcome.counted_exceeded, outcome.logged_exceeded
                ));
            }
        }
        if let Some(problem) = &outcome.final_counts_problem {
            problems.push(format!("{version} {name}: {problem}"));
        }
        if !outcome.after_cancel.is_empty() {
            problems.push(format!("{version} {name}: active after the cancel: {:?}", outcome.after_cancel));
        }
    }
    let table = table.join("\n");
    if std::env::var_os("ALERT_QUALITY_TABLE").is_some() {
        println!("{table}");
    }
    check_doc(&table);
    assert!(problems.is_empty(), "{}\n\n{table}", problems.join("\n"));
}

const BEGIN: &str = "<!-- BEGIN ALERT QUALITY -->\n";
const END: &str = "\n<!-- END ALERT QUALITY -->";

/// docs/alert-quality.md holds this run's table; `SENTINEL_BLESS=1` rewrites it.
fn check_doc(table: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/alert-quality.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = doc.split_once(BEGIN).expect("begin marker");
    let (current, tail) = rest.split_once(END).expect("end marker");
    if crate::common::blessing() {
        std::fs::write(&path, format!("{head}{BEGIN}{table}{END}{tail}")).unwrap();
        return;
    }
    assert_eq!(
        current, table,
        "docs/alert-quality.md is out of date: run SENTINEL_BLESS=1 cargo test --test integration alert_replay::"
    );
}

#[test]
fn log_times_are_read_as_utc() {
    assert_eq!(log_time_utc_ms("2026-11-29 15:00:59,544"), Some(1_795_964_459_544));
    assert_eq!(log_time_utc_ms("1970-01-01 00:00:00,000"), Some(0));
}
