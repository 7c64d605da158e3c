//! `checkpoint-sentinel simulate`: the coordinator model from the command line (what-if and
//! replay), reading files and printing text or JSON; the model itself is in `model`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::model::coordinator::{
    Binding, Coordinator, CoordinatorConfig, CoordinatorStatus, End, Outcome, Schedule,
};
use crate::model::replay::{ReplayReport, dominant_binding, median, replay};
use crate::observe::FailureReason;
use crate::sources::flink::convert::merge_history;
use crate::sources::flink::{convert, dto};
use crate::time::{Timestamp, human_ms};

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A sentence and a table.
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `simulate`.
#[derive(Clone, Debug, clap::Args)]
pub struct SimulateArgs {
    /// Checkpoint interval (overrides the replayed config), e.g. `30s`.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) interval: Option<Duration>,
    /// Minimum pause between checkpoints [what-if default: 0s].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) min_pause: Option<Duration>,
    /// Maximum concurrent checkpoints [what-if default: 1].
    #[arg(long)]
    pub(crate) max_concurrent: Option<u32>,
    /// Checkpoint timeout [what-if default: 10m, Flink's; replay: the job's].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub(crate) timeout: Option<Duration>,
    /// Tolerable consecutive failed checkpoints [what-if default: 0, Flink's: the first counted
    /// failure fails the job; replay: the job's].
    #[arg(long)]
    pub(crate) tolerable_failures: Option<u32>,
    /// What-if: each checkpoint's outcome in turn, repeated: a duration (`50s`), `expired`, or
    /// `declined[:after]`; `@FILE` reads them from a file (commas or newlines).
    #[arg(long)]
    pub(crate) durations: Option<String>,
    /// What-if: how many checkpoints to simulate (default: the outcomes in turn until at least
    /// 12 checkpoints and twice through the list, enough to see their spacing).
    #[arg(long)]
    pub(crate) count: Option<usize>,
    /// What-if: seed of the random initial delay.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// What-if: also simulate the checkpoints unaligned, as the alignment model runs them:
    /// barriers overtake the queued buffers, so the alignment (`--alignment`) drops to ~0 and each
    /// checkpoint is as much shorter, at the cost of persisting the in-flight data the barriers
    /// overtook; prints what changes [default: aligned only].
    #[arg(long, requires = "alignment", conflicts_with = "checkpoint_config")]
    pub(crate) unaligned: bool,
    /// What-if with `--unaligned`: how much of each given duration is alignment (the slowest
    /// subtask's "Alignment Duration" in Flink's checkpoint details), e.g. `20s`.
    #[arg(long, value_parser = humantime::parse_duration, requires = "unaligned")]
    pub(crate) alignment: Option<Duration>,
    /// Replay: Flink's `/jobs/:id/checkpoints/config` JSON.
    #[arg(long, requires = "history")]
    pub(crate) checkpoint_config: Option<PathBuf>,
    /// Replay: one or more `/jobs/:id/checkpoints` JSON responses, merged by id.
    #[arg(long, num_args = 1.., requires = "checkpoint_config")]
    pub(crate) history: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: Format,
}

/// Why `simulate` cannot run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// A file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not the JSON it should be.
    #[error("{path} is not Flink's {what} JSON: {source}")]
    Parse {
        /// Which file.
        path: PathBuf,
        /// What it should be.
        what: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// Bad arguments.
    #[error("{0}")]
    Usage(String),
}

impl SimulateError {}

/// Runs `simulate` and returns what to print.
pub fn run(args: &SimulateArgs) -> Result<String, SimulateError> {
    match &args.checkpoint_config {
        Some(config_path) => {
            let config: dto::CheckpointConfig = read_json(config_path, "/checkpoints/config")?;
            let mut responses = Vec::new();
            for path in &args.history {
                responses.push(read_json::<dto::CheckpointingStatistics>(path, "/checkpoints")?);
            }
            let settings = convert::settings(&config);
            let mut model = CoordinatorConfig::from_settings(&settings)
                .ok_or_else(|| SimulateError::Usage("periodic checkpointing is off in this config".into()))?;
            apply_overrides(&mut model, args);
            let report = replay(model, &merge_history(&responses));
            if report.rows.is_empty() {
                return Err(SimulateError::Usage(
                    "the history has no checkpoints with a trigger time".into(),
                ));
            }
            Ok(match args.format {
                Format::Json => replay_json(&report),
                Format::Text => replay_text(&report),
            })
        }
        None => {
            let spec = args.durations.as_deref().ok_or_else(|| {
                SimulateError::Usage(
                    "give --durations (what-if) or --checkpoint-config with --history (replay)".into(),
                )
            })?;
            let outcomes = parse_outcomes(&read_list(spec)?)?;
            let interval =
                args.interval.ok_or_else(|| SimulateError::Usage("what-if needs --interval".into()))?;
            let mut model = CoordinatorConfig {
                interval_ms: interval.as_millis() as u64,
                ..CoordinatorConfig::default()
            };
            apply_overrides(&mut model, args);
            let count = args.count.unwrap_or_else(|| default_count(outcomes.len()));
            let report = what_if(model.clone(), &outcomes, count, args.seed);
            let Some(alignment) = args.alignment.filter(|_| args.unaligned) else {
                return Ok(match args.format {
                    Format::Json => what_if_json(&report),
                    Format::Text => what_if_text(&report),
                });
            };
            let alignment_ms = alignment.as_millis() as u64;
            let unaligned = what_if(model, &unaligned_outcomes(&outcomes, alignment_ms), count, args.seed);
            Ok(match args.format {
                Format::Json => unaligned_json(&report, &unaligned, alignment_ms),
                Format::Text => unaligned_text(&report, &unaligned, alignment_ms),
            })
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &PathBuf, what: &'static str) -> Result<T, SimulateError> {
    let bytes = std::fs::read(path).map_err(|source| SimulateError::Read { path: path.clone(), source })?;
    serde_json::from_slice(&bytes).map_err(|source| SimulateError::Parse { path: path.clone(), what, source })
}

fn read_list(spec: &str) -> Result<String, SimulateError> {
    match spec.strip_prefix('@') {
        Some(file) => {
            let path = PathBuf::from(file);
            std::fs::read_to_string(&path).map_err(|source| SimulateError::Read { path, source })
        }
        None => Ok(spec.to_string()),
    }
}

fn apply_overrides(model: &mut CoordinatorConfig, args: &SimulateArgs) {
    if let Some(d) = args.interval {
        model.interval_ms = d.as_millis() as u64;
    }
    if let Some(d) = args.min_pause {
        model.min_pause_ms = d.as_millis() as u64;
    }
    if let Some(n) = args.max_concurrent {
        model.max_concurrent = n.max(1);
    }
    if let Some(d) = args.timeout {
        model.timeout_ms = d.as_millis() as u64;
    }
    if let Some(n) = args.tolerable_failures {
        model.tolerable_failures = n;
    }
}

/// The outcomes unaligned: a completed checkpoint takes its alignment less (barriers overtake
/// the queued buffers, so a subtask snapshots on its first barrier: alignment ~0, as the
/// alignment model's unaligned mode has it); an expiry or a decline stays what it was.
pub(crate) fn unaligned_outcomes(outcomes: &[Outcome], alignment_ms: u64) -> Vec<Outcome> {
    outcomes
        .iter()
        .map(|o| match *o {
            Outcome::Complete { duration_ms } => {
                Outcome::Complete { duration_ms: duration_ms.saturating_sub(alignment_ms).max(1) }
            }
            other => other,
        })
        .collect()
}

/// In-flight data an unaligned checkpoint persists at most per back-pressured input channel:
/// the buffers a full channel holds unread, which the barrier overtakes (the alignment model's
/// backlog of a channel whose producer's output pool is full, Flink's default buffers).
pub(crate) fn persisted_per_channel_bytes() -> u64 {
    use crate::shadow::alignment::{BUFFER_BYTES, MAX_BUFFERS_PER_CHANNEL, unread_buffers};
    (unread_buffers(MAX_BUFFERS_PER_CHANNEL) * BUFFER_BYTES as f64).round() as u64
}

/// Expired checkpoints of a what-if.
fn expired(r: &WhatIf) -> usize {
    r.checkpoints
        .iter()
        .filter(|c| matches!(c.3, Some(End::Failed(_, FailureReason::CheckpointExpired))))
        .count()
}

/// What changes unaligned, one line each.
fn unaligned_changes(aligned: &WhatIf, unaligned: &WhatIf, alignment_ms: u64) -> Vec<String> {
    let mut out = vec![format!(
        "alignment ~{} -> ~0: each completed checkpoint ~{} -> ~{}",
        human_ms(alignment_ms),
        human_ms(aligned.median_duration_ms),
        human_ms(unaligned.median_duration_ms)
    )];
    let every = |r: &WhatIf| human_ms(r.gaps_ms.map_or(r.effective_interval_ms, |(_, mean, _)| mean));
    out.push(format!("checkpoints every {} -> {} on average", every(aligned), every(unaligned)));
    let (a, u) = (expired(aligned), expired(unaligned));
    if a != u {
        out.push(format!("expired checkpoints {a} -> {u} of {}", unaligned.checkpoints.len()));
    }
    match (aligned.job_failed_at_ms, unaligned.job_failed_at_ms) {
        (Some(at), None) => {
            out.push(format!("the job no longer fails (aligned it fails at {})", human_ms(at as u64)))
        }
        (None, Some(at)) => out.push(format!("the job fails at {}", human_ms(at as u64))),
        _ => {}
    }
    out.push(format!(
        "the cost: in-flight data persisted with each checkpoint, up to ~{} KiB per back-pressured input \
         channel (the buffers the barrier overtakes), more to write and to read back on recovery",
        persisted_per_channel_bytes() / 1024
    ));
    out
}

fn unaligned_text(aligned: &WhatIf, unaligned: &WhatIf, alignment_ms: u64) -> String {
    let mut out = String::from("Unaligned checkpoints, what changes:\n");
    for line in unaligned_changes(aligned, unaligned, alignment_ms) {
        out += &format!("  {line}\n");
    }
    out += "\nAligned, as given:\n";
    out += &what_if_text(aligned);
    out += &format!("\nUnaligned (each completed checkpoint {} shorter):\n", human_ms(alignment_ms));
    out += &what_if_text(unaligned);
    out
}

fn unaligned_json(aligned: &WhatIf, unaligned: &WhatIf, alignment_ms: u64) -> String {
    let parse = |s: String| serde_json::from_str::<serde_json::Value>(&s).unwrap_or_default();
    let doc = json!({
        "aligned": parse(what_if_json(aligned)),
        "unaligned": parse(what_if_json(unaligned)),
        "alignment_ms": alignment_ms,
        "persisted_per_channel_bytes": persisted_per_channel_bytes(),
        "changes": unaligned_changes(aligned, unaligned, alignment_ms),
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// Parses `50s,52s,expired,declined:2s` (commas, whitespace or newlines between items).
pub(crate) fn parse_outcomes(list: &str) -> Result<Vec<Outcome>, SimulateError> {
    let parse_ms = |s: &str| {
        humantime::parse_duration(s.trim())
            .map(|d| d.as_millis() as u64)
            .map_err(|e| SimulateError::Usage(format!("bad duration {s:?}: {e}")))
    };
    let outcomes: Vec<Outcome> = list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|item| match item {
            "expired" | "hang" => Ok(Outcome::Hang),
            "declined" => Ok(Outcome::Fail { after_ms: 0, reason: FailureReason::CheckpointDeclined }),
            _ => match item.strip_prefix("declined:") {
                Some(after) => Ok(Outcome::Fail {
                    after_ms: parse_ms(after)?,
                    reason: FailureReason::CheckpointDeclined,
                }),
                None => Ok(Outcome::Complete { duration_ms: parse_ms(item)? }),
            },
        })
        .collect::<Result<_, _>>()?;
    if outcomes.is_empty() {
        return Err(SimulateError::Usage("--durations is empty".into()));
    }
    Ok(outcomes)
}

/// Checkpoints a what-if simulates by default for `n` given outcomes: whole rounds of the list,
/// at least two and at least 12 checkpoints, so the spacing they make shows (one duration is
/// one checkpoint, which has no spacing).
pub(crate) fn default_count(n: usize) -> usize {
    let n = n.max(1);
    n * 2.max(12usize.div_ceil(n))
}

/// The result of a what-if run.
#[derive(Clone, Debug)]
pub(crate) struct WhatIf {
    /// The configuration.
    pub(crate) config: CoordinatorConfig,
    /// (id, trigger ms since start, binding, end).
    pub(crate) checkpoints: Vec<(u64, i64, Binding, Option<End>)>,
    /// Median gap between triggers, ms.
    pub(crate) effective_interval_ms: u64,
    /// Shortest, mean and longest gap between triggers, ms (`None` with fewer than two).
    pub(crate) gaps_ms: Option<(u64, u64, u64)>,
    /// Median duration of the given completed outcomes, ms.
    pub(crate) median_duration_ms: u64,
    /// Dominant binding.
    pub(crate) binding: Binding,
    /// When the job failed (tolerable failures exceeded), ms since start.
    pub(crate) job_failed_at_ms: Option<i64>,
}

/// Runs the model on `outcomes` (repeated) until `count` checkpoints ended.
pub(crate) fn what_if(config: CoordinatorConfig, outcomes: &[Outcome], count: usize, seed: u64) -> WhatIf {
    let start = Timestamp(0);
    let mut model = Coordinator::new(config.clone(), start, Schedule::Seeded(seed));
    let mut next = 0usize;
    let mut supply = |_: u64, _: Timestamp| {
        let o = outcomes[next % outcomes.len()];
        next += 1;
        o
    };
    model.run_checkpoints(count, &mut supply);
    let checkpoints: Vec<(u64, i64, Binding, Option<End>)> =
        model.checkpoints().take(count).map(|c| (c.id, c.triggered_at.0, c.binding, c.end)).collect();
    let gaps: Vec<u64> = checkpoints.windows(2).map(|w| (w[1].1 - w[0].1).max(0) as u64).collect();
    let gaps_ms = match (gaps.iter().min(), gaps.iter().max()) {
        (Some(&lo), Some(&hi)) => Some((lo, gaps.iter().sum::<u64>() / gaps.len() as u64, hi)),
        _ => None,
    };
    let bindings: Vec<Binding> = checkpoints.iter().map(|c| c.2).collect();
    let job_failed_at_ms = match model.status() {
        CoordinatorStatus::Failed => model.drain_events().iter().find_map(|e| match e {
            crate::model::coordinator::Event::JobFailed { at, .. } => Some(at.0),
            _ => None,
        }),
        _ => None,
    };
    WhatIf {
        median_duration_ms: median(
            outcomes
                .iter()
                .filter_map(|o| match o {
                    Outcome::Complete { duration_ms } => Some(*duration_ms),
                    _ => None,
                })
                .collect(),
        ),
        config,
        effective_interval_ms: median(gaps),
        gaps_ms,
        binding: dominant_binding(&bindings),
        checkpoints,
        job_failed_at_ms,
    }
}

/// The one-sentence explanation of the effective interval (a median gap between triggers).
pub(crate) fn explain(
    config: &CoordinatorConfig,
    effective_ms: u64,
    median_duration_ms: u64,
    binding: Binding,
) -> String {
    explain_spacing(config, &human_ms(effective_ms), effective_ms, Some(median_duration_ms), binding, false)
}

/// `checkpoints every {every}` and why, never "every X, not X": a binding other than the
/// interval that leaves the spacing at the interval (as printed) says so.
fn explain_spacing(
    config: &CoordinatorConfig,
    every: &str,
    effective_ms: u64,
    median_duration_ms: Option<u64>,
    binding: Binding,
    some_failed: bool,
) -> String {
    let what = if some_failed { "completed " } else { "" };
    let interval = human_ms(config.interval_ms);
    let at_interval = human_ms(effective_ms) == interval;
    let head = if at_interval {
        format!("checkpoints every {every}, the interval")
    } else {
        format!("checkpoints every {every}, not {interval}")
    };
    let took = median_duration_ms.filter(|d| *d > 0).map(human_ms);
    let each = took.as_ref().map_or("each checkpoint".to_string(), |t| format!("each ~{t} {what}checkpoint"));
    match binding {
        Binding::MinPause => {
            format!("{head}: min-pause {} binds after {each}", human_ms(config.min_pause_ms))
        }
        Binding::MaxConcurrent => format!(
            "{head}: {each} outlasts the interval and max-concurrent {} holds the next one until it ends",
            config.max_concurrent
        ),
        Binding::Timeout => format!(
            "{head}: a checkpoint that expires holds the slot until the {} timeout and the next one starts only then",
            human_ms(config.timeout_ms)
        ),
        Binding::Interval | Binding::Initial => {
            let ends = match median_duration_ms {
                Some(d) if d > 0 && d * 2 <= effective_ms => {
                    format!(": {each} ends well before the next trigger")
                }
                Some(d) if d > 0 && d < effective_ms => format!(": {each} ends before the next trigger"),
                _ => String::new(),
            };
            if at_interval {
                format!("checkpoints every {every}, as configured (interval {interval}){ends}")
            } else {
                format!("checkpoints every {every}, not {interval}{ends}")
            }
        }
    }
}

/// The spacing Flink's rules give after a checkpoint that lasts `duration_ms`: the interval,
/// and with max-concurrent 1 or a min-pause at least until `min-pause` after it ended (a
/// request that finds the slot taken waits for it, one that comes before the pause is over is
/// rescheduled to its end: `CheckpointRequestDecider`).
pub(crate) fn rule_spacing_ms(config: &CoordinatorConfig, duration_ms: u64) -> u64 {
    if config.max_concurrent <= 1 || config.min_pause_ms > 0 {
        config.interval_ms.max(duration_ms + config.min_pause_ms)
    } else {
        config.interval_ms
    }
}

/// What a what-if run computed, in one sentence: the spacing of the simulated triggers (every
/// gap alike, or their mean and range when the outcomes make them differ) and the rule behind
/// it; with fewer than two checkpoints, the spacing Flink's rules give.
pub(crate) fn explain_what_if(r: &WhatIf) -> String {
    let durations: Vec<u64> = r
        .checkpoints
        .iter()
        .filter_map(|(_, t, _, end)| match end {
            Some(End::Completed(f)) | Some(End::Failed(f, _)) => Some((f.0 - t).max(0) as u64),
            None => None,
        })
        .collect();
    let completed = (r.median_duration_ms > 0).then_some(r.median_duration_ms);
    let some_failed = r.checkpoints.iter().any(|c| matches!(c.3, Some(End::Failed(..))));
    match r.gaps_ms {
        None => {
            let n = r.checkpoints.len();
            let Some(d) = durations.first() else {
                return format!("{n} checkpoint simulated and it did not end: no spacing to see");
            };
            format!(
                "{n} checkpoint simulated, so no spacing to see; by the rules the next would come {} after it \
                 (max(interval {}, {} checkpoint + min-pause {}))",
                human_ms(rule_spacing_ms(&r.config, *d)),
                human_ms(r.config.interval_ms),
                human_ms(*d),
                human_ms(r.config.min_pause_ms)
            )
        }
        Some((lo, mean, hi)) if human_ms(lo) == human_ms(hi) => {
            explain_spacing(&r.config, &human_ms(mean), mean, completed, r.binding, some_failed)
        }
        Some((lo, mean, hi)) => explain_spacing(
            &r.config,
            &format!("{} on average (gaps from {} to {})", human_ms(mean), human_ms(lo), human_ms(hi)),
            mean,
            completed,
            r.binding,
            some_failed,
        ),
    }
}

fn end_json(end: Option<End>, trigger: i64) -> serde_json::Value {
    match end {
        Some(End::Completed(t)) => {
            json!({"status": "completed", "finished_ms": t.0, "duration_ms": t.0 - trigger})
        }
        Some(End::Failed(t, r)) => {
            json!({"status": "failed", "finished_ms": t.0, "duration_ms": t.0 - trigger, "failure_message": r.message()})
        }
        None => json!({"status": "in_progress"}),
    }
}

fn config_json(c: &CoordinatorConfig) -> serde_json::Value {
    json!({
        "interval_ms": c.interval_ms,
        "min_pause_ms": c.min_pause_ms,
        "max_concurrent": c.max_concurrent,
        "timeout_ms": c.timeout_ms,
        "tolerable_failures": c.tolerable_failures,
        "base_interval_ms": c.base_interval(),
    })
}

fn what_if_json(r: &WhatIf) -> String {
    let checkpoints: Vec<serde_json::Value> = r
        .checkpoints
        .iter()
        .map(|(id, t, b, end)| {
            let mut v = json!({
                "id": id,
                "observed_trigger_ms": null,
                "predicted_trigger_ms": t,
                "deviation_ms": null,
                "binding": b.as_str(),
            });
            if let (Some(obj), serde_json::Value::Object(e)) = (v.as_object_mut(), end_json(*end, *t)) {
                obj.extend(e);
            }
            v
        })
        .collect();
    let doc = json!({
        "config": config_json(&r.config),
        "checkpoints": checkpoints,
        "summary": {
            "median_abs_deviation_ms": null,
            "effective_interval_ms": r.effective_interval_ms,
            "binding": r.binding.as_str(),
            "job_failed_at_ms": r.job_failed_at_ms,
            "explanation": explain_what_if(r),
        },
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn what_if_text(r: &WhatIf) -> String {
    let mut out = explain_what_if(r) + ".\n";
    if let Some(at) = r.job_failed_at_ms {
        out += &format!(
            "The job fails at {}: more than {} consecutive counted failures (Exceeded checkpoint tolerable failure threshold).\n",
            human_ms(at.max(0) as u64),
            r.config.tolerable_failures
        );
    }
    let c = &r.config;
    out += &format!(
        "Settings: interval {}, min-pause {}, max-concurrent {}, timeout {}, tolerable failures {}.\n",
        human_ms(c.interval_ms),
        human_ms(c.min_pause_ms),
        c.max_concurrent,
        human_ms(c.timeout_ms),
        c.tolerable_failures
    );
    out += "\n   id   triggered at   binding          outcome\n";
    for (id, t, b, end) in &r.checkpoints {
        let outcome = match end {
            Some(End::Completed(f)) => format!("completed after {}", human_ms((f.0 - t).max(0) as u64)),
            Some(End::Failed(f, reason)) => {
                format!("failed after {}: {}", human_ms((f.0 - t).max(0) as u64), reason.message())
            }
            None => "in progress".into(),
        };
        let at = format!("+{}", human_ms((*t).max(0) as u64));
        out += &format!("{id:>5} {at:>14}   {:<16} {outcome}\n", b.as_str());
    }
    out
}

fn replay_json(r: &ReplayReport) -> String {
    let checkpoints: Vec<serde_json::Value> = r
        .rows
        .iter()
        .map(|row| {
            json!({
                "id": row.id,
                "model_id": row.model_id,
                "observed_trigger_ms": row.observed_trigger.0,
                "predicted_trigger_ms": row.predicted_trigger.0,
                "deviation_ms": row.deviation_ms,
                "binding": row.binding.as_str(),
            })
        })
        .collect();
    let doc = json!({
        "config": config_json(&r.config),
        "checkpoints": checkpoints,
        "summary": {
            "median_abs_deviation_ms": r.median_abs_deviation_ms,
            "max_abs_deviation_ms": r.rows.iter().map(|row| row.deviation_ms.unsigned_abs()).max().unwrap_or(0),
            "effective_interval_ms": r.effective_interval_ms,
            "binding": r.binding.as_str(),
            "median_duration_ms": r.median_duration_ms,
            "unpaired_observed": r.unpaired_observed,
            "unobserved_predicted": r.unobserved_predicted,
            "explanation": explain(&r.config, r.effective_interval_ms, r.median_duration_ms, r.binding),
        },
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

fn replay_text(r: &ReplayReport) -> String {
    let max = r.rows.iter().map(|row| row.deviation_ms.unsigned_abs()).max().unwrap_or(0);
    let mut out = explain(&r.config, r.effective_interval_ms, r.median_duration_ms, r.binding) + ".\n";
    out += &format!(
        "Replayed {} observed checkpoints from the first trigger on: predicted − observed trigger time has median |{}| ms, max |{}| ms.\n",
        r.rows.len(),
        r.median_abs_deviation_ms,
        max
    );
    if r.config.interval_ms == r.config.min_pause_ms && r.binding == Binding::MinPause {
        out += "Note: Flink 2.x reports interval = max(interval, min-pause) in /checkpoints/config; pass --interval to name the configured one.\n";
    }
    out += "\n   id   observed (ms)    predicted (ms)   deviation   binding\n";
    for row in &r.rows {
        out += &format!(
            "{:>5} {:>15} {:>17} {:>+10}   {}\n",
            row.id,
            row.observed_trigger.0,
            row.predicted_trigger.0,
            row.deviation_ms,
            row.binding.as_str()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_parse() {
        let o = parse_outcomes("50s, 52s\nexpired,declined:2s declined").unwrap();
        assert_eq!(o[0], Outcome::Complete { duration_ms: 50_000 });
        assert_eq!(o[2], Outcome::Hang);
        assert_eq!(o[3], Outcome::Fail { after_ms: 2_000, reason: FailureReason::CheckpointDeclined });
        assert!(parse_outcomes("fast").is_err());
        assert!(parse_outcomes(" , ").is_err());
    }

    #[test]
    fn seed_000_what_if_explains_min_pause() {
        let config =
            CoordinatorConfig { interval_ms: 30_000, min_pause_ms: 60_000, ..CoordinatorConfig::default() };
        let r = what_if(config, &[Outcome::Complete { duration_ms: 50_000 }], 5, 0);
        assert_eq!(r.binding, Binding::MinPause);
        assert_eq!(r.effective_interval_ms, 110_000);
        let text = explain(&r.config, r.effective_interval_ms, r.median_duration_ms, r.binding);
        assert_eq!(
            text,
            "checkpoints every 110.0 s, not 30.0 s: min-pause 60.0 s binds after each ~50.0 s checkpoint"
        );
    }

    #[test]
    fn what_if_reports_the_job_failure() {
        let config =
            CoordinatorConfig { interval_ms: 1_000, tolerable_failures: 2, ..CoordinatorConfig::default() };
        let r = what_if(
            config,
            &[Outcome::Fail { after_ms: 10, reason: FailureReason::CheckpointDeclined }],
            10,
            0,
        );
        assert_eq!(r.checkpoints.len(), 3);
        assert!(r.job_failed_at_ms.is_some());
    }

    /// The what-if says the settings it ran with (Flink's defaults for what was not given) and
    /// when each checkpoint was triggered as a duration since the start, not raw ms.
    #[test]
    fn what_if_text_shows_its_settings_and_trigger_times_as_durations() {
        let text = run(&args("30s", None, None, "5s")).unwrap();
        assert!(
            text.contains(
                "Settings: interval 30.0 s, min-pause 0 ms, max-concurrent 1, timeout 10.0 min, tolerable failures 0."
            ),
            "{text}"
        );
        assert!(text.contains("triggered at"), "{text}");
        // Seed 0 starts after a 26.5 s initial delay; the next trigger is an interval later.
        let first = text.lines().find(|l| l.trim_start().starts_with("1 ")).unwrap();
        let second = text.lines().find(|l| l.trim_start().starts_with("2 ")).unwrap();
        assert!(first.contains("+26.5 s") && second.contains("+56.5 s"), "{first}\n{second}");
        assert!(!text.contains("trigger (ms)"), "{text}");
    }

    fn args(interval: &str, min_pause: Option<&str>, timeout: Option<&str>, durations: &str) -> SimulateArgs {
        let d = |s: &str| humantime::parse_duration(s).unwrap();
        SimulateArgs {
            interval: Some(d(interval)),
            min_pause: min_pause.map(d),
            max_concurrent: None,
            timeout: timeout.map(d),
            tolerable_failures: None,
            durations: Some(durations.into()),
            count: None,
            seed: 0,
            unaligned: false,
            alignment: None,
            checkpoint_config: None,
            history: Vec::new(),
            format: Format::Text,
        }
    }

    /// Unaligned, a checkpoint whose alignment pushed it past the timeout completes: the
    /// alignment drops to ~0, the expiries and the job failure go, and the cost is said.
    #[test]
    fn unaligned_what_if_drops_the_alignment_and_says_what_changes() {
        let a = SimulateArgs {
            unaligned: true,
            alignment: Some(Duration::from_secs(20)),
            tolerable_failures: Some(5),
            ..args("30s", None, Some("40s"), "25s,45s")
        };
        let text = run(&a).unwrap();
        let head: Vec<&str> = text.lines().take(6).collect();
        assert_eq!(head[0], "Unaligned checkpoints, what changes:", "{text}");
        assert_eq!(
            head[1], "  alignment ~20.0 s -> ~0: each completed checkpoint ~25.0 s -> ~5.0 s",
            "{text}"
        );
        assert!(
            head.iter().any(|l| l.starts_with("  expired checkpoints ") && l.contains(" -> 0 of ")),
            "{text}"
        );
        assert!(text.contains("up to ~272 KiB per back-pressured input channel"), "{text}");
        assert!(text.contains("\nUnaligned (each completed checkpoint 20.0 s shorter):\n"), "{text}");
        // Aligned, the 45 s one expires at 40 s; unaligned (25 s) it completes.
        assert!(text.contains("completed after 25.0 s"), "{text}");
        let json: serde_json::Value =
            serde_json::from_str(&run(&SimulateArgs { format: Format::Json, ..a.clone() }).unwrap()).unwrap();
        assert_eq!(json["alignment_ms"], 20_000);
        assert!(json["unaligned"]["checkpoints"].as_array().is_some_and(|c| !c.is_empty()));
        // Without --unaligned nothing changes in the output.
        assert!(!run(&args("30s", None, None, "5s")).unwrap().contains("Unaligned"));
    }

    fn first_line(a: &SimulateArgs) -> String {
        run(a).unwrap().lines().next().unwrap().to_string()
    }

    /// "every X, not Y" with X and Y printed alike would contradict itself.
    fn not_x_not_x(line: &str) -> bool {
        let Some(rest) = line.strip_prefix("checkpoints every ") else { return false };
        let Some((every, after)) = rest.split_once(", not ") else { return false };
        let every = every.split(" on average").next().unwrap_or(every);
        let not = after.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        let not = not.trim_end_matches([':', ',', '.']);
        every.trim() == not.trim()
    }

    /// One duration used to simulate one checkpoint: no gap, "every 0 ms, as configured".
    #[test]
    fn one_duration_simulates_enough_checkpoints_to_show_the_min_pause_spacing() {
        let a = args("30s", Some("60s"), None, "50s");
        assert_eq!(
            first_line(&a),
            "checkpoints every 110.0 s, not 30.0 s: min-pause 60.0 s binds after each ~50.0 s checkpoint."
        );
        assert_eq!(run(&a).unwrap().lines().filter(|l| l.contains("completed after 50.0 s")).count(), 12);
        // Asked for one checkpoint: the spacing Flink's rules give, not "every 0 ms".
        let one = SimulateArgs { count: Some(1), ..a };
        assert_eq!(
            first_line(&one),
            "1 checkpoint simulated, so no spacing to see; by the rules the next would come 110.0 s after it \
             (max(interval 30.0 s, 50.0 s checkpoint + min-pause 60.0 s))."
        );
    }

    /// `--interval 10s --durations 8s,expired --timeout 20s` printed "every 10.0 s, not 10.0 s".
    #[test]
    fn an_expiring_what_if_says_the_spacing_it_computed() {
        let a = args("10s", None, Some("20s"), "8s,expired");
        // Tolerable failures 0 (Flink's default): the first expiry fails the job.
        assert_eq!(
            first_line(&a),
            "checkpoints every 10.0 s, as configured (interval 10.0 s): each ~8.0 s completed checkpoint ends \
             before the next trigger."
        );
        assert!(run(&a).unwrap().contains("The job fails at 38.8 s"));
        // Tolerating the failures: 8 s and 20 s gaps alternate.
        let tolerant = SimulateArgs { tolerable_failures: Some(5), ..a };
        assert_eq!(
            first_line(&tolerant),
            "checkpoints every 13.6 s on average (gaps from 8.0 s to 20.0 s), not 10.0 s: a checkpoint that \
             expires holds the slot until the 20.0 s timeout and the next one starts only then."
        );
    }

    #[test]
    fn no_what_if_says_every_x_not_x() {
        let mut checked = 0;
        for interval in ["1s", "10s", "30s"] {
            for min_pause in [None, Some("5s"), Some("60s")] {
                for timeout in [None, Some("10s"), Some("20s")] {
                    for durations in ["500ms", "8s", "50s", "8s,expired", "expired", "declined:2s,3s"] {
                        for tolerable in [None, Some(3)] {
                            let a = SimulateArgs {
                                tolerable_failures: tolerable,
                                ..args(interval, min_pause, timeout, durations)
                            };
                            let line = first_line(&a);
                            assert!(!not_x_not_x(&line), "{a:?}: {line}");
                            assert!(!line.contains("every 0 ms"), "{a:?}: {line}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 324);
        // The replay's median gap can sit at the interval while another rule binds most triggers.
        let config =
            CoordinatorConfig { interval_ms: 10_000, timeout_ms: 20_000, ..CoordinatorConfig::default() };
        let line = explain(&config, 10_000, 8_000, Binding::Timeout);
        assert_eq!(
            line,
            "checkpoints every 10.0 s, the interval: a checkpoint that expires holds the slot until the 20.0 s \
             timeout and the next one starts only then"
        );
        assert!(not_x_not_x("checkpoints every 10.0 s, not 10.0 s: a checkpoint that expires …"));
        assert!(not_x_not_x(
            "checkpoints every 10.0 s on average (gaps from 8.0 s to 20.0 s), not 10.0 s: …"
        ));
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_ms(40), "40 ms");
        assert_eq!(human_ms(5_000), "5.0 s");
        assert_eq!(human_ms(600_000), "10.0 min");
    }
}
