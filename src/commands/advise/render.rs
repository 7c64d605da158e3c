//! `advise` output: the JSON contract of `docs/advice.md` and the text for people, both
//! opening with the answer (the worst finding first).

use serde_json::json;

use super::report::AdviseReport;
use crate::advice::{Advice, Finding, Prediction, Severity};
use crate::time::human_ms;

/// One job's advice as the contract's JSON object (what the API serves for the job).
pub(crate) fn job_json(cluster: &str, job_id: &str, name: &str, advice: &Advice) -> serde_json::Value {
    let view = crate::outputs::api::AdviceView { cluster, job_id, job_name: name, advice };
    serde_json::to_value(&view).unwrap_or_default()
}

/// The whole report as JSON.
pub fn json(report: &AdviseReport) -> String {
    let jobs: Vec<serde_json::Value> =
        report.jobs.iter().map(|j| job_json(&report.source, &j.job_id, &j.name, &j.advice)).collect();
    let doc = json!({ "source": report.source, "flink_version": report.flink_version, "jobs": jobs });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// `current → recommended` of one figure, or the current one when nothing changes.
fn side_by_side(name: &str, current: &str, recommended: Option<&str>) -> String {
    match recommended {
        Some(r) if r != current => format!("{name} {current} → {r}"),
        _ => format!("{name} {current}"),
    }
}

/// A rate per hour with the decimals the prediction keeps (more than one below 10 an hour, so
/// that the spacing printed beside it can be checked against it).
fn per_hour(x: f64) -> String {
    format!("{x:.*}", crate::advice::predict::rate_decimals(x))
}

/// The prediction's figures, current beside recommended.
pub(crate) fn prediction_line(current: &Prediction, recommended: Option<&Prediction>) -> String {
    let window = |p: &Prediction| p.replay_window_ms.map_or("none".to_string(), human_ms);
    let mut parts = vec![
        side_by_side(
            "spacing",
            &human_ms(current.spacing_ms()),
            recommended.map(|r| human_ms(r.spacing_ms())).as_deref(),
        ),
        side_by_side(
            "checkpoints/h",
            &per_hour(current.checkpoints_per_hour()),
            recommended.map(|r| per_hour(r.checkpoints_per_hour())).as_deref(),
        ),
        side_by_side(
            "expiries/h",
            &per_hour(current.expiries_per_hour()),
            recommended.map(|r| per_hour(r.expiries_per_hour())).as_deref(),
        ),
        side_by_side("replay window", &window(current), recommended.map(window).as_deref()),
    ];
    // Failures other than expiries (declines) count in the spacing too: shown when there are
    // any, so that the rates printed add up to the spacing printed.
    let declines = |p: &Prediction| p.failures_per_hour() > p.expiries_per_hour();
    if declines(current) || recommended.is_some_and(declines) {
        parts.insert(
            3,
            side_by_side(
                "failures/h (expiries included)",
                &per_hour(current.failures_per_hour()),
                recommended.map(|r| per_hour(r.failures_per_hour())).as_deref(),
            ),
        );
    }
    if let Some(a) = current.alignment_ms {
        parts.push(side_by_side(
            "alignment",
            &human_ms(a),
            recommended.and_then(|r| r.alignment_ms).map(human_ms).as_deref(),
        ));
    }
    parts.join(", ")
}

fn finding_text(f: &Finding) -> String {
    let mut out = format!(
        "  [{}] {}: {}\n",
        match f.severity {
            Severity::Warning => "warning",
            Severity::Info => "info",
        },
        f.id,
        f.summary
    );
    for (key, value) in &f.recommendation.set {
        out += &format!("      set {key}: {value}\n");
    }
    out += &format!("      {}\n", f.recommendation.text);
    if let Some(current) = &f.predicted.current {
        out += &format!("      predicted: {}\n", prediction_line(current, f.predicted.recommended.as_ref()));
    }
    out
}

/// The configuration keys the advisor read, with their generation and where each was found
/// (FLIP-406 renamed many keys; both generations are read).
fn keys_read(keys: &[crate::observe::KeyRead]) -> String {
    if keys.is_empty() {
        return "  Keys read: none beyond /checkpoints/config.\n".to_string();
    }
    let listed: Vec<String> = keys
        .iter()
        .map(|k| format!("{} = {} ({} key, {})", k.key, k.value, k.generation, k.source))
        .collect();
    format!("  Keys read: {}.\n", listed.join("; "))
}

/// The report for people.
pub(crate) fn text(report: &AdviseReport) -> String {
    let mut out = String::new();
    for job in &report.jobs {
        let a = &job.advice;
        let warnings = a.findings.iter().filter(|f| f.severity == Severity::Warning).count();
        out += &format!(
            "{} ({}): {} finding{}, {warnings} warning{}\n",
            if job.name.is_empty() { "job" } else { &job.name },
            job.job_id,
            a.findings.len(),
            if a.findings.len() == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" },
        );
        if let Some(thin) = &a.thin {
            out += &format!("  Evidence is thin: {thin}.\n");
        }
        if let Some(p) = &a.predicted {
            out += &format!(
                "  Now ({} completed, {} failed checkpoints looked at): {}\n",
                a.observed.completed,
                a.observed.failed,
                prediction_line(p, None)
            );
        }
        for f in &a.findings {
            out += &finding_text(f);
        }
        out += &keys_read(&a.configuration.keys_read);
        out += "\n";
    }
    if report.jobs.is_empty() {
        out += "No running job with checkpointing on.\n";
    }
    out
}
