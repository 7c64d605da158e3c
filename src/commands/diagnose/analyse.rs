//! `diagnose`'s analysis (pure): a job's fetched data to a [`JobReport`] — statuses, failures,
//! the subtasks that held checkpoints up and their TaskManagers, the failure class, likely causes
//! with the page that explains them, the shadow's explanation of the spacing, what to check next.

use std::collections::BTreeMap;

use crate::model::coordinator::CoordinatorConfig;
use crate::model::replay::replay;
use crate::observe::{
    CheckpointStatus, FinishedCheckpoint, JobKey, JobPoll, JobStatus, SnapshotKind, SubtaskCheckpoint,
};
use crate::rules::Class;
use crate::shadow::Shadow;
use crate::sources::flink::convert::merge_history;
use crate::sources::flink::{convert, dto};
use crate::time::Timestamp;
use crate::time::human_ms;

use super::report::*;

/// A page a finding points the reader to: Flink's documentation or a runbook section.
#[derive(Clone, Copy, Debug)]
struct Doc {
    title: &'static str,
    url: &'static str,
}

const MONITORING: Doc = Doc {
    title: "Flink: Monitoring Checkpointing",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/checkpoint_monitoring/",
};
const LARGE_STATE: Doc = Doc {
    title: "Flink: Tuning Checkpoints and Large State",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/large_state_tuning/",
};
const UNDER_BACKPRESSURE: Doc = Doc {
    title: "Flink: Checkpointing under backpressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/state/checkpointing_under_backpressure/",
};
const BACK_PRESSURE: Doc = Doc {
    title: "Flink: Monitoring Back Pressure",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/ops/monitoring/back_pressure/",
};
const CONFIGURATION: Doc = Doc {
    title: "Flink: Configuration, checkpointing options",
    url: "https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/config/#checkpointing",
};
const RUNBOOK_FAILURES: Doc = Doc {
    title: "Runbook: FlinkCheckpointFailuresIncreasing",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointfailuresincreasing",
};
const RUNBOOK_TOLERANCE: Doc = Doc {
    title: "Runbook: FlinkCheckpointToleranceNearlySpent",
    url: "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md#flinkcheckpointtolerancenearlyspent",
};

fn outcome(cp: &FinishedCheckpoint) -> &'static str {
    crate::observe::outcome(cp.status, cp.failure_message.as_deref())
}

/// The phase of a subtask that took longest: (name, ms).
fn dominant(st: &SubtaskCheckpoint) -> (&'static str, u64) {
    [
        ("start delay", st.start_delay_ms),
        ("alignment", st.alignment_ms),
        ("sync", st.sync_ms),
        ("async", st.async_ms),
    ]
    .into_iter()
    .filter_map(|(n, v)| Some((n, v?)))
    .max_by_key(|(_, v)| *v)
    .unwrap_or(("unknown", 0))
}

/// The lower median, `None` when there is nothing to take it of.
fn median(v: Vec<u64>) -> Option<u64> {
    (!v.is_empty()).then(|| crate::model::replay::median(v))
}

/// The diagnosis of one job (pure).
pub fn analyse(d: &JobData) -> JobReport {
    let settings = d.config.as_ref().map(convert::settings);
    let interval = settings.as_ref().and_then(|s| s.interval_ms);
    let timeout = settings.as_ref().and_then(|s| s.timeout_ms);
    let counts = d.stats.counts.as_ref().map(convert::counts).unwrap_or_default();
    let vertex_of: BTreeMap<&str, &str> = d
        .details
        .iter()
        .flat_map(|j| j.vertices.iter().map(|v| (v.name.as_deref().unwrap_or(v.id.as_str()), v.id.as_str())))
        .collect();
    let location = |operator: &str, subtask: u32| {
        vertex_of.get(operator).and_then(|vid| d.locations.get(&(vid.to_string(), subtask))).cloned()
    };
    // One TaskManager for every subtask: said once, not on every line.
    let distinct: std::collections::BTreeSet<&Location> = d.locations.values().collect();
    let single_tm = match distinct.into_iter().collect::<Vec<_>>().as_slice() {
        [only] => Some((*only).clone()),
        _ => None,
    };
    let located = |operator: &str, subtask: u32| match (location(operator, subtask), &single_tm) {
        (Some(_), Some(_)) => format!("{operator} #{subtask}"),
        (Some(l), None) => format!("{operator} #{subtask} on {}", l.text()),
        (None, _) => format!("{operator} #{subtask} (TaskManager unknown: the REST API did not name it)"),
    };

    // 1. Recent statuses, newest first.
    let mut history: Vec<&dto::CheckpointStatistics> = d.stats.history.iter().collect();
    history.sort_by_key(|c| std::cmp::Reverse(c.id));
    let recent: Vec<CheckpointLine> = history
        .iter()
        .map(|cp| {
            // Only the newest `--checkpoints` were fetched in detail; an older finished entry of
            // the history still has its own outcome and end, not an age as if it were in progress.
            let finished =
                d.finished.iter().find(|f| f.id == cp.id).cloned().or_else(|| convert::finished(cp, &[]));
            let status = match &finished {
                Some(f) => outcome(f).to_uppercase(),
                None => cp.status.clone().unwrap_or_default().to_uppercase(),
            };
            let took_ms = match &finished {
                Some(f) => Some(f.finished_at.since(f.triggered_at)),
                None => cp.trigger_timestamp.map(|t| d.fetched_at.since(Timestamp(t))),
            };
            CheckpointLine {
                id: cp.id,
                status,
                savepoint: cp.is_savepoint == Some(true),
                triggered_at_ms: cp.trigger_timestamp,
                took_ms,
                size_bytes: cp.checkpointed_size.or(cp.state_size).and_then(|s| u64::try_from(s).ok()),
                acknowledged: (cp.num_acknowledged_subtasks.unwrap_or(0), cp.num_subtasks.unwrap_or(0)),
            }
        })
        .collect();

    // 2. Failures: what held them up or ended them, in one sentence each.
    let failures: Vec<FailureLine> = d
        .finished
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Failed)
        .map(|cp| {
            let after = cp.finished_at.since(cp.triggered_at);
            let mut held_by = Vec::new();
            let mut never = Vec::new();
            let mut late = Vec::new();
            let mut total = 0u32;
            for op in &cp.operators {
                for st in &op.subtasks {
                    total += 1;
                    if !st.acknowledged {
                        held_by.push(format!("{} never acknowledged", located(&op.name, st.index)));
                        never.push((op.name.as_str(), st.index));
                    } else if let Some(e2e) = st.end_to_end_ms.filter(|e| *e > after) {
                        let (phase, ms) = dominant(st);
                        let text = format!(
                            "{} acknowledged {} after the trigger, {} too late; its {phase} took {}",
                            located(&op.name, st.index),
                            human_ms(e2e),
                            human_ms(e2e - after),
                            human_ms(ms)
                        );
                        held_by.push(text.clone());
                        late.push(text);
                    }
                }
            }
            let outcome = outcome(cp);
            // An expiry is held up by the late subtasks too; after an error, a subtask that
            // acknowledged a moment later was not what ended it.
            let late_counts = if outcome == "expired" { late.len() as u32 } else { 0 };
            let acknowledged = if total > 0 {
                (total - never.len() as u32 - late_counts, total)
            } else {
                (cp.num_acknowledged, cp.num_subtasks)
            };
            let summary = failure_summary(outcome, acknowledged, total > 0, &never, &late, &located);
            FailureLine {
                id: cp.id,
                outcome,
                after_ms: Some(after),
                reason: cp.failure_message.clone(),
                held_by,
                acknowledged,
                summary,
            }
        })
        .collect();

    let pending: Vec<String> = d
        .pending
        .iter()
        .flat_map(|(id, vertices)| {
            let names: BTreeMap<&str, &str> = vertex_of.iter().map(|(n, v)| (*v, *n)).collect();
            vertices.iter().flat_map(move |(vid, subtasks)| {
                let name = names.get(vid.as_str()).copied().unwrap_or(vid.as_str()).to_string();
                subtasks.iter().map(move |s| (id, name.clone(), *s))
            })
        })
        .fold(Vec::<(u64, Vec<String>)>::new(), |mut acc, (id, name, s)| {
            match acc.last_mut() {
                Some((last, list)) if last == id => list.push(located(&name, s)),
                _ => acc.push((*id, vec![located(&name, s)])),
            }
            acc
        })
        .into_iter()
        .map(|(id, list)| format!("checkpoint {id} in progress: {} not acknowledged yet", some_of(&list)))
        .collect();

    // 3. Top alignment and start delay: per subtask its longest over the recent checkpoints.
    // Savepoints (triggered by hand, other rules) are not in the tables.
    let with_details: Vec<&FinishedCheckpoint> = d
        .finished
        .iter()
        .filter(|cp| !cp.operators.is_empty() && cp.kind != SnapshotKind::Savepoint)
        .collect();
    let culprit = |s: &SubtaskStat| {
        let floor = interval.map_or(100, |iv| (iv / 10).max(100));
        s.value_ms >= floor
            && (s.siblings_median_ms.is_none_or(|m| s.value_ms >= 2 * m.max(1))
                || interval.is_some_and(|iv| s.value_ms * 2 > iv))
    };
    let top = |phase: fn(&SubtaskCheckpoint) -> Option<u64>| {
        let mut best: BTreeMap<(String, u32), SubtaskStat> = BTreeMap::new();
        for cp in &with_details {
            for op in &cp.operators {
                for st in op.subtasks.iter().filter(|s| s.acknowledged) {
                    let Some(v) = phase(st) else { continue };
                    let key = (op.name.clone(), st.index);
                    if best.get(&key).is_some_and(|b| b.value_ms >= v) {
                        continue;
                    }
                    let siblings =
                        op.subtasks.iter().filter(|o| o.index != st.index).filter_map(phase).collect();
                    best.insert(
                        key,
                        SubtaskStat {
                            operator: op.name.clone(),
                            subtask: st.index,
                            value_ms: v,
                            checkpoint_id: cp.id,
                            siblings_median_ms: median(siblings),
                            location: location(&op.name, st.index),
                        },
                    );
                }
            }
        }
        let mut all: Vec<SubtaskStat> = best.into_values().filter(culprit).collect();
        all.sort_by_key(|s| std::cmp::Reverse(s.value_ms));
        all.truncate(3);
        all
    };
    let top_alignment = top(|s| s.alignment_ms);
    let top_start_delay = top(|s| s.start_delay_ms);

    // 4. Who acknowledged last.
    let mut last_ack: BTreeMap<(String, u32), (usize, &'static str)> = BTreeMap::new();
    for cp in with_details.iter().filter(|cp| cp.status == CheckpointStatus::Completed) {
        let slowest = cp
            .operators
            .iter()
            .flat_map(|op| op.subtasks.iter().map(move |st| (op, st)))
            .filter(|(_, st)| st.acknowledged)
            .max_by_key(|(_, st)| st.end_to_end_ms);
        if let Some((op, st)) = slowest {
            let e = last_ack.entry((op.name.clone(), st.index)).or_insert((0, "unknown"));
            e.0 += 1;
            e.1 = dominant(st).0;
        }
    }
    let completed_with_details =
        with_details.iter().filter(|cp| cp.status == CheckpointStatus::Completed).count();
    let mut blocking: Vec<Blocking> = last_ack
        .into_iter()
        .map(|((operator, subtask), (times, dominant_phase))| Blocking {
            location: location(&operator, subtask),
            operator,
            subtask,
            times,
            of: completed_with_details,
            dominant_phase,
        })
        .collect();
    blocking.sort_by_key(|b| std::cmp::Reverse(b.times));
    let slowest_completed = with_details
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Completed)
        .filter_map(|cp| cp.end_to_end_ms)
        .max()
        .unwrap_or(0);
    let matters = slowest_completed >= interval.map_or(1_000, |iv| (iv / 10).clamp(100, 1_000));
    blocking.retain(|b| matters && b.times * 3 >= b.of);
    blocking.truncate(3);

    // Load: backpressured vertices and the busy subtasks downstream of them.
    let mut load = Vec::new();
    let mut bottleneck: Option<String> = None;
    if let Some(report) = &d.load {
        let name_of = |vid: &str| {
            report
                .topology
                .as_ref()
                .and_then(|t| t.vertices.iter().find(|v| v.id == vid))
                .map_or(vid.to_string(), |v| v.name.clone())
        };
        for v in &report.vertices {
            let bp = v.subtasks.iter().filter_map(|s| s.backpressure_ratio).fold(0.0, f64::max);
            if bp >= 0.5 {
                load.push(format!(
                    "{} is backpressured {:.0} % of the time",
                    name_of(&v.vertex_id),
                    bp * 100.0
                ));
            }
        }
        if let Some(t) = &report.topology {
            for e in &t.edges {
                let up = report.vertices.iter().find(|v| v.vertex_id == e.from);
                let down = report.vertices.iter().find(|v| v.vertex_id == e.to);
                let (Some(up), Some(down)) = (up, down) else { continue };
                let up_bp = up.subtasks.iter().filter_map(|s| s.backpressure_ratio).fold(0.0, f64::max);
                if up_bp < 0.5 {
                    continue;
                }
                for s in &down.subtasks {
                    let busy = s.busy_ratio.unwrap_or(0.0);
                    if busy >= 0.8 && s.backpressure_ratio.unwrap_or(0.0) < 0.5 {
                        let siblings: Vec<String> = down
                            .subtasks
                            .iter()
                            .filter(|o| o.index != s.index)
                            .filter_map(|o| o.busy_ratio.map(|b| format!("#{} {:.0} %", o.index, b * 100.0)))
                            .collect();
                        let text = format!(
                            "{} #{} is busy {:.0} % of the time (siblings: {}) while {} upstream waits on it: the bottleneck",
                            name_of(&e.to),
                            s.index,
                            busy * 100.0,
                            if siblings.is_empty() { "none".to_string() } else { siblings.join(", ") },
                            name_of(&e.from)
                        );
                        if !load.contains(&text) {
                            bottleneck.get_or_insert_with(|| located(&name_of(&e.to), s.index));
                            load.push(text);
                        }
                    }
                }
            }
        }
    }

    // The shadow model over what was fetched: spacing, deviations, alignment holder.
    let mut spacing = Vec::new();
    let mut alignment_view = Vec::new();
    if let Some(settings) = &settings {
        let mut shadow = Shadow::new();
        shadow.trigger.set_flink_version(d.flink_version.as_deref());
        if let Some(report) = &d.load {
            shadow.observe_load(report);
        }
        let mut ordered = d.finished.clone();
        ordered.sort_by_key(|cp| cp.id);
        shadow.observe_poll(&JobPoll {
            key: JobKey { cluster: "diagnose".into(), job_id: d.job_id.clone() },
            job_name: d.name.clone(),
            job_state: d.state.clone(),
            polled_at: d.fetched_at,
            counts,
            settings: Some(settings.clone()),
            in_progress: convert::in_progress(&d.stats.history),
            finished: ordered,
            latest_restore: None,
        });
        let ex = shadow.explanation();
        match (ex.schedule, CoordinatorConfig::from_settings(settings)) {
            (Some(s), _) => spacing.push(s),
            (None, Some(config)) => {
                let r = replay(config, &merge_history([&d.stats]));
                if r.rows.len() >= 2 {
                    spacing.push(crate::commands::simulate::explain(
                        &r.config,
                        r.effective_interval_ms,
                        r.median_duration_ms,
                        r.binding,
                    ));
                }
            }
            (None, None) => spacing.push("periodic checkpoints are off".into()),
        }
        spacing.extend(ex.last_unexplained.or(ex.last_deviation).map(|d| d.sentence));
        alignment_view.extend(ex.alignment);
        alignment_view.extend(ex.what_if);
        spacing.extend(ex.contradictions);
    }

    // Classes: failure (an error), timeout (a slow snapshot), blocking (barriers stuck).
    let mut classes: Vec<ClassFinding> = Vec::new();
    let errors: Vec<&FailureLine> = failures.iter().filter(|f| f.outcome != "expired").collect();
    if let Some(f) = errors.first() {
        classes.push(ClassFinding {
            class: Class::Failure,
            evidence: format!(
                "{} checkpoint(s) failed with an error, e.g. {}: {}",
                errors.len(),
                f.id,
                f.reason.as_deref().unwrap_or("no message")
            ),
        });
    }
    let expired: Vec<&FinishedCheckpoint> = d.finished.iter().filter(|cp| outcome(cp) == "expired").collect();
    if !expired.is_empty() {
        // What the subtasks that held the expired checkpoints were doing.
        let mut snapshot = 0;
        let mut barrier = 0;
        let mut unknown = 0;
        let mut no_details = 0;
        for cp in &expired {
            let after = cp.finished_at.since(cp.triggered_at);
            let holders: Vec<&SubtaskCheckpoint> = cp
                .operators
                .iter()
                .flat_map(|op| &op.subtasks)
                .filter(|st| !st.acknowledged || st.end_to_end_ms.is_some_and(|e| e > after))
                .collect();
            if holders.is_empty() {
                unknown += 1;
            }
            if cp.operators.is_empty() {
                no_details += 1;
            }
            for st in holders {
                match dominant(st).0 {
                    "sync" | "async" => snapshot += 1,
                    "alignment" | "start delay" => barrier += 1,
                    _ => unknown += 1,
                }
            }
        }
        let n = expired.len();
        let t = timeout.map_or("the timeout".to_string(), human_ms);
        if snapshot >= barrier && snapshot > 0 {
            classes.push(ClassFinding {
                class: Class::Timeout,
                evidence: format!(
                    "{n} checkpoint(s) expired at {t}; the subtasks that held them were in their snapshot (sync/async) phase, not waiting for barriers"
                ),
            });
        } else if barrier > 0 {
            classes.push(ClassFinding {
                class: Class::Blocking,
                evidence: format!(
                    "{n} checkpoint(s) expired at {t}; the subtasks that held them were waiting for barriers (alignment/start delay)"
                ),
            });
        } else if unknown > 0 {
            classes.push(ClassFinding {
                class: Class::Timeout,
                evidence: format!(
                    "{n} checkpoint(s) expired at {t}; {}, so blocking cannot be told from a slow snapshot",
                    if no_details == n {
                        "Flink no longer has their per-subtask details"
                    } else {
                        "the subtasks that held them never acknowledged, so Flink reports none of their phases"
                    }
                ),
            });
        }
    }
    // Alignment is the cause when both are long (downstream start delay follows from it).
    let half = |s: &&SubtaskStat| interval.is_some_and(|iv| s.value_ms * 2 > iv);
    let slow_barrier = match (top_alignment.first().filter(half), top_start_delay.first().filter(half)) {
        (Some(a), _) => Some(format!("alignment {}", human_ms(a.value_ms))),
        (None, Some(s)) => Some(format!("start delay {}", human_ms(s.value_ms))),
        (None, None) => None,
    };
    if let (Some(what), Some(iv)) = (slow_barrier, interval) {
        if let Some(timeout_finding) = classes.iter_mut().find(|c| c.class == Class::Timeout) {
            // A task thread stuck in a long synchronous snapshot takes the next barrier late too.
            timeout_finding.evidence.push_str(&format!(
                "; the {what} (over half the {} interval) of the checkpoints after them is the same task \
                 thread still busy in that snapshot",
                human_ms(iv)
            ));
        } else if !classes.iter().any(|c| c.class == Class::Blocking) {
            classes.push(ClassFinding {
                class: Class::Blocking,
                evidence: format!(
                    "barriers are slow to get through: {what} is over half the {} interval",
                    human_ms(iv)
                ),
            });
        }
    }

    // The alignment engine's view matters when barriers are what is slow.
    if classes.iter().any(|c| c.class == Class::Blocking) {
        spacing.extend(alignment_view);
    }

    // Verdict.
    let mut verdict = Verdict::Healthy;
    let mut reasons = Vec::new();
    let mut set = |v: Verdict, reason: String, reasons: &mut Vec<String>| {
        verdict = verdict.max(v);
        reasons.push(reason);
    };
    if !matches!(d.state, JobStatus::Running | JobStatus::Finished) {
        set(Verdict::Unhealthy, format!("the job is {}", d.state), &mut reasons);
    }
    let failed_n = d.finished.iter().filter(|cp| cp.status == CheckpointStatus::Failed).count();
    if failed_n > 0 {
        let exp = expired.len();
        let text = match (exp, failed_n - exp) {
            (e, 0) => format!("{e} of the last {} finished checkpoints expired", d.finished.len()),
            (0, f) => format!("{f} of the last {} finished checkpoints failed", d.finished.len()),
            (e, f) => {
                format!("{e} expired and {f} failed of the last {} finished checkpoints", d.finished.len())
            }
        };
        set(Verdict::Unhealthy, text, &mut reasons);
    }
    if counts.completed == 0 && interval.is_some() {
        set(Verdict::Unhealthy, "no checkpoint has completed".into(), &mut reasons);
    }
    if let (Some(t), Some(oldest)) =
        (timeout, recent.iter().filter(|r| r.status == "IN_PROGRESS").filter_map(|r| r.took_ms).max())
        && oldest > t
    {
        set(
            Verdict::Unhealthy,
            format!("a checkpoint has been in progress for {}, past the timeout", human_ms(oldest)),
            &mut reasons,
        );
    }
    let completed: Vec<&FinishedCheckpoint> = d
        .finished
        .iter()
        .filter(|cp| cp.status == CheckpointStatus::Completed && cp.kind != SnapshotKind::Savepoint)
        .collect();
    let longest = completed.iter().filter_map(|cp| cp.end_to_end_ms).max();
    if let (Some(t), Some(l)) = (timeout, longest)
        && l * 2 > t
    {
        set(
            Verdict::AtRisk,
            format!(
                "the longest recent completed checkpoint took {} of the {} timeout",
                human_ms(l),
                human_ms(t)
            ),
            &mut reasons,
        );
    }
    if let (Some(iv), Some(a)) = (interval, top_alignment.first())
        && a.value_ms * 2 > iv
    {
        set(
            Verdict::AtRisk,
            format!("alignment up to {} is over half the {} interval", human_ms(a.value_ms), human_ms(iv)),
            &mut reasons,
        );
    }
    if let (Some(iv), Some(s)) = (interval, top_start_delay.first())
        && s.value_ms * 2 > iv
    {
        set(
            Verdict::AtRisk,
            format!("start delay up to {} is over half the {} interval", human_ms(s.value_ms), human_ms(iv)),
            &mut reasons,
        );
    }

    // Likely causes and the next thing to check, by class.
    let mut causes = Vec::new();
    let mut next = Vec::new();
    let cause = |c: &str, doc: Doc| Cause { cause: c.to_string(), source: doc.title, url: doc.url };
    // The subtask that held the newest failed checkpoint up, if one did: when several never
    // acknowledged, none of them stands out and naming the first would be a guess.
    let failed_holder = d.finished.iter().find(|cp| cp.status == CheckpointStatus::Failed).and_then(|cp| {
        let after = cp.finished_at.since(cp.triggered_at);
        let holders: Vec<(String, u32)> = cp
            .operators
            .iter()
            .flat_map(|op| {
                op.subtasks
                    .iter()
                    .filter(move |st| !st.acknowledged || st.end_to_end_ms.is_some_and(|e| e > after))
                    .map(move |st| (op.name.clone(), st.index))
            })
            .collect();
        match holders.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    });
    let holder = failed_holder
        .map(|(op, st)| located(&op, st))
        .or(bottleneck.clone())
        .or_else(|| blocking.first().map(|b| located(&b.operator, b.subtask)));
    for finding in &classes {
        match finding.class {
            Class::Failure => {
                for f in &errors {
                    let m = f.reason.as_deref().unwrap_or("");
                    causes.push(failure_cause(m));
                }
                causes.dedup_by(|a, b| a.cause == b.cause);
                next.push(
                    "the TaskManager log around the failed checkpoint: the deepest `Caused by:` of its stack trace \
                     (`checkpoint-sentinel scan-logs` on the JobManager and TaskManager logs classifies it)"
                        .to_string(),
                );
            }
            Class::Timeout => {
                let phase = failures.iter().flat_map(|f| &f.held_by).find_map(|h| {
                    ["sync", "async"].into_iter().find(|p| h.contains(&format!("its {p} took")))
                });
                match phase {
                    Some("sync") => causes.push(cause(
                        "the synchronous part of the snapshot is slow: the operator's snapshotState() (user code, a \
                         blocking flush to an external system) or the state backend's synchronous part",
                        MONITORING,
                    )),
                    _ => causes.push(cause(
                        "writing the snapshot to checkpoint storage is slow: storage throughput or latency (HDFS/S3), \
                         or a state that grew",
                        LARGE_STATE,
                    )),
                }
                causes.push(cause(
                    "state too large or growing without TTL, so every snapshot takes longer",
                    LARGE_STATE,
                ));
                if settings
                    .as_ref()
                    .and_then(|s| s.state_backend.as_deref())
                    .is_some_and(|b| b.contains("RocksDB"))
                {
                    causes.push(cause(
                        "RocksDB without incremental checkpoints, or a small block cache / write buffer",
                        LARGE_STATE,
                    ));
                }
                match &holder {
                    Some(h) => next.push(format!(
                        "what {h} does while it snapshots: its TaskManager log and a thread dump (jstack) during a checkpoint, \
                         then its state size and the checkpoint storage's throughput; do not just raise the timeout \
                         (Flink: Tuning Checkpoints and Large State)"
                    )),
                    None => next.push(
                        "no single subtask stands out: the TaskManagers' logs and a thread dump (jstack) during a \
                         checkpoint, then the state size and the checkpoint storage's throughput; do not just raise \
                         the timeout (Flink: Tuning Checkpoints and Large State)"
                            .to_string(),
                    ),
                }
            }
            Class::Blocking => {
                causes.push(cause(
                    "backpressure: barriers queue behind buffered records, so alignment and start delay grow together",
                    UNDER_BACKPRESSURE,
                ));
                let skewed = top_alignment
                    .first()
                    .is_some_and(|a| a.siblings_median_ms.is_some_and(|m| a.value_ms > 4 * m.max(1)));
                if skewed || bottleneck.is_some() {
                    causes.push(cause(
                        "data skew: one subtask (a hot key) lags its siblings and every checkpoint waits for it",
                        BACK_PRESSURE,
                    ));
                }
                causes.push(cause(
                    "user code blocking the task thread (synchronous external calls, lock contention, heavy timers)",
                    UNDER_BACKPRESSURE,
                ));
                if let Some(h) = &holder {
                    next.push(format!(
                        "the records in/out and busy time of {h} against its siblings (key skew) and the backpressure of the \
                         operators upstream of it (Web UI BackPressure tab or GET /jobs/{}/vertices/<id>/backpressure); \
                         if its CPU is low while its input buffers are full, a thread dump",
                        d.job_id
                    ));
                }
                if settings.as_ref().is_some_and(|s| s.exactly_once && !s.unaligned) {
                    next.push(
                        "once skew and backpressure are addressed and alignment is still too long: unaligned checkpoints \
                         (Flink: Checkpointing under backpressure)"
                            .to_string(),
                    );
                }
            }
        }
    }
    if let Some(s) = &settings
        && let (Some(iv), Some(observed)) = (s.interval_ms, median(observed_gaps(&d.stats)))
        && observed > iv + iv / 2
    {
        causes.push(cause(
            &format!(
                "checkpoints come every {} although the interval is {}: min-pause or the concurrency limit holds the trigger",
                human_ms(observed),
                human_ms(iv)
            ),
            CONFIGURATION,
        ));
    }
    if next.is_empty() {
        next.push(if verdict == Verdict::Healthy {
            "nothing now; keep an eye on the P95 checkpoint duration against the timeout".into()
        } else {
            "the slowest phase in the recent checkpoints' details (Web UI Checkpoints → Details) and the TaskManager log of the \
             slowest subtask"
                .into()
        });
    }

    JobReport {
        job_id: d.job_id.clone(),
        name: d.name.clone(),
        state: d.state.clone(),
        verdict,
        verdict_reasons: reasons,
        taskmanager: single_tm,
        config: settings.as_ref().map(|s| {
            format!(
                "{}, interval {}, timeout {}, min pause {}, max concurrent {}, tolerable failures {}, {}{}",
                if s.exactly_once { "exactly once" } else { "at least once" },
                s.interval_ms.map_or("off".into(), human_ms),
                s.timeout_ms.map_or("?".into(), human_ms),
                human_ms(s.min_pause_ms),
                s.max_concurrent,
                s.tolerable_failures.map_or("?".into(), |n| n.to_string()),
                if s.unaligned { "unaligned" } else { "aligned" },
                s.state_backend.as_deref().map_or(String::new(), |b| format!(", {b}")),
            )
        }),
        counts: [counts.completed, counts.failed, counts.in_progress, counts.restored],
        recent,
        failures,
        pending,
        top_alignment,
        top_start_delay,
        blocking,
        load,
        classes,
        causes,
        spacing,
        next,
    }
}

/// `a`, `a and b`, `a, b and c`, or the first three and how many more.
fn some_of(list: &[String]) -> String {
    match list {
        [] => "no subtask".into(),
        [one] => one.clone(),
        [init @ .., last] if list.len() <= 3 => format!("{} and {last}", init.join(", ")),
        _ => format!("{} and {} more", list[..3].join(", "), list.len() - 3),
    }
}

/// One sentence on a failed checkpoint: how many subtasks acknowledged in time, and the
/// subtasks that explain it (the late or missing ones of an expiry; the one that did not
/// acknowledge when an error ended it).
fn failure_summary(
    outcome: &str,
    (acked, total): (u32, u32),
    details: bool,
    never: &[(&str, u32)],
    late: &[String],
    located: &dyn Fn(&str, u32) -> String,
) -> String {
    if !details {
        return format!(
            "{acked} of {total} subtasks acknowledged; Flink no longer has its per-subtask details"
        );
    }
    let never_named: Vec<String> = never.iter().map(|(op, st)| located(op, *st)).collect();
    if outcome == "expired" {
        let mut parts: Vec<String> = late.to_vec();
        match never_named.len() {
            0 => {}
            1..=3 => parts.push(format!("{} never acknowledged", some_of(&never_named))),
            n => parts.push(format!("{n} subtasks never acknowledged ({})", per_operator(never))),
        }
        if parts.len() > 3 {
            let n = parts.len();
            parts.truncate(2);
            parts.push(format!("{} more", n - 2));
        }
        let holders = if parts.is_empty() { "no subtask was late".into() } else { parts.join("; ") };
        return format!("{acked} of {total} subtasks acknowledged in time; {holders}");
    }
    let head = format!("{acked} of {total} subtasks acknowledged");
    match never_named.as_slice() {
        [] => head,
        [one] if total > 1 => format!("{head}; the failure came from the one that did not, {one}"),
        [_] => format!("{head}; the failure came from its only subtask"),
        _ if acked == 0 => format!(
            "{head}; the error came before any subtask acknowledged, so no subtask was slow \
             (`scan-logs` names the task that threw it)"
        ),
        list if list.len() <= 3 => format!("{head}; not acknowledged: {}", some_of(list)),
        _ => format!("{head}; not acknowledged: {}", per_operator(never)),
    }
}

/// `2 of stateful-map, 4 of Sink`: subtasks counted per operator, in first-seen order.
fn per_operator(subtasks: &[(&str, u32)]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for (op, _) in subtasks {
        match counts.iter_mut().find(|(o, _)| o == op) {
            Some((_, n)) => *n += 1,
            None => counts.push((op, 1)),
        }
    }
    counts.iter().map(|(op, n)| format!("{n} of {op}")).collect::<Vec<_>>().join(", ")
}

fn observed_gaps(stats: &dto::CheckpointingStatistics) -> Vec<u64> {
    let mut t: Vec<i64> = stats
        .history
        .iter()
        .filter(|c| c.is_savepoint != Some(true))
        .filter_map(|c| c.trigger_timestamp)
        .collect();
    t.sort_unstable();
    t.windows(2).map(|w| (w[1] - w[0]).max(0) as u64).collect()
}

/// The likely cause behind a failure message, with the page that explains it.
fn failure_cause(message: &str) -> Cause {
    let table: [(&str, &str, Doc); 10] = [
        (
            "Failed to persist checkpoint metadata",
            "the checkpoint metadata storage is not writable (ZooKeeper, disk space, permissions)",
            RUNBOOK_FAILURES,
        ),
        (
            "Could not materialize checkpoint",
            "the state backend failed writing (e.g. an HDFS DataNode down)",
            RUNBOOK_FAILURES,
        ),
        (
            "Asynchronous task checkpoint failed",
            "the asynchronous part of a subtask's snapshot threw: writing the state to checkpoint storage \
             failed (Flink's `Could not materialize checkpoint`: storage unavailable, a full disk)",
            RUNBOOK_FAILURES,
        ),
        (
            "ClassCastException",
            "a state class that does not serialise, or a serializer changed by an upgrade",
            RUNBOOK_FAILURES,
        ),
        ("OutOfMemoryError", "a subtask ran out of memory", RUNBOOK_FAILURES),
        (
            "SocketTimeoutException",
            "the checkpoint storage client timed out (network, S3 throttling)",
            RUNBOOK_FAILURES,
        ),
        (
            "No space left on device",
            "a full disk (the `Stream is closed` that follows is a symptom)",
            RUNBOOK_FAILURES,
        ),
        (
            "Stream is closed",
            "the stream to checkpoint storage was closed underneath: look for a full disk or a closed connection",
            RUNBOOK_FAILURES,
        ),
        (
            "tolerable failure threshold",
            "the tolerable-failure budget is spent: the job fails over because of checkpoints",
            RUNBOOK_TOLERANCE,
        ),
        (
            "declined",
            "a subtask declined the checkpoint: a task failure (OOM, user code exception) or a task not ready",
            RUNBOOK_FAILURES,
        ),
    ];
    table
        .iter()
        .find(|(needle, _, _)| message.to_lowercase().contains(&needle.to_lowercase()))
        .map(|(_, cause, doc)| Cause { cause: (*cause).to_string(), source: doc.title, url: doc.url })
        .unwrap_or_else(|| Cause {
            cause: format!(
                "Flink says: {}; the stack trace in the TaskManager log names the cause",
                message.trim_end_matches('.')
            ),
            source: RUNBOOK_FAILURES.title,
            url: RUNBOOK_FAILURES.url,
        })
}
