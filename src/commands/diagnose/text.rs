//! `diagnose`'s text output.

use crate::rules::Class;
use crate::time::Timestamp;
use crate::time::human_ms;

use super::report::*;

fn clock(ms: i64) -> String {
    let t = crate::time::log_time(Timestamp(ms));
    t.get(11..).unwrap_or(&t).replace(',', ".")
}

/// Rows of the recent-checkpoints table in the text report (the JSON has them all).
const RECENT_ROWS: usize = 10;

/// The report as text.
pub fn to_text(report: &Report) -> String {
    let mut o = String::new();
    let mut line = |s: String| {
        o.push_str(&s);
        o.push('\n');
    };
    line(format!(
        "checkpoint-sentinel diagnose: {} (Flink {}), {} UTC",
        report.url,
        report.flink_version.as_deref().unwrap_or("?"),
        crate::time::log_time(Timestamp(report.at_ms)).replace(',', ".")
    ));
    if report.jobs.is_empty() {
        line("No running job.".into());
    }
    for j in &report.jobs {
        line(String::new());
        let verdict = match j.verdict {
            Verdict::Healthy => "HEALTHY",
            Verdict::AtRisk => "AT RISK",
            Verdict::Unhealthy => "UNHEALTHY",
        };
        line(format!("Job {} ({}) {}: {verdict}", j.name, j.job_id, j.state));
        for r in &j.verdict_reasons {
            line(format!("  - {r}"));
        }
        if let Some(c) = &j.config {
            line(format!("Config: {c}"));
        }
        if let Some(tm) = &j.taskmanager {
            line(format!("Every subtask runs on {}.", tm.text()));
        }
        let place = |l: &Option<Location>| match (&j.taskmanager, l) {
            (Some(_), Some(_)) => String::new(),
            (_, Some(l)) => format!(", on {}", l.text()),
            (_, None) => ", on a TaskManager the REST API did not name".into(),
        };
        line(format!(
            "Counts: {} completed, {} failed, {} in progress, {} restored",
            j.counts[0], j.counts[1], j.counts[2], j.counts[3]
        ));
        line(String::new());
        line("Recent checkpoints (newest first):".into());
        line(format!(
            "  {:>6}  {:<11}  {:<12}  {:>8}  {:>10}  {:>5}",
            "id", "status", "triggered", "took", "size", "acked"
        ));
        // The newest ten fit a screen; older ones of Flink's history are counted by status.
        for r in j.recent.iter().take(RECENT_ROWS) {
            line(format!(
                "  {:>6}  {:<11}  {:<12}  {:>8}  {:>10}  {:>5}{}",
                r.id,
                r.status,
                r.triggered_at_ms.map_or("?".into(), clock),
                r.took_ms.map_or("?".into(), human_ms),
                r.size_bytes.map_or("?".into(), |b| crate::rules::format_bytes(b as f64)),
                format!("{}/{}", r.acknowledged.0, r.acknowledged.1),
                if r.savepoint { "  savepoint" } else { "" }
            ));
        }
        if j.recent.len() > RECENT_ROWS {
            let mut by_status: Vec<(&str, usize)> = Vec::new();
            for r in &j.recent[RECENT_ROWS..] {
                match by_status.iter_mut().find(|(s, _)| *s == r.status) {
                    Some((_, n)) => *n += 1,
                    None => by_status.push((&r.status, 1)),
                }
            }
            let counts: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
            line(format!("  … and {} older: {}", j.recent.len() - RECENT_ROWS, counts.join(", ")));
        }
        if !j.failures.is_empty() || !j.pending.is_empty() {
            line(String::new());
            line("Failures, expirations, checkpoints in progress:".into());
            // Failures that read the same (outcome, reason, summary) are said once.
            let mut groups: Vec<(Vec<&FailureLine>, &str, Option<&str>, &str)> = Vec::new();
            for f in &j.failures {
                let key = (f.outcome, f.reason.as_deref(), f.summary.as_str());
                match groups.iter_mut().find(|g| (g.1, g.2, g.3) == key) {
                    Some(g) => g.0.push(f),
                    None => groups.push((vec![f], key.0, key.1, key.2)),
                }
            }
            for (members, outcome, reason, summary) in groups {
                let ids: Vec<String> = members.iter().map(|f| f.id.to_string()).collect();
                let afters: Vec<u64> = members.iter().filter_map(|f| f.after_ms).collect();
                let after = match (afters.iter().min(), afters.iter().max()) {
                    (Some(lo), Some(hi)) if human_ms(*lo) == human_ms(*hi) => human_ms(*lo),
                    (Some(lo), Some(hi)) => format!("{} to {}", human_ms(*lo), human_ms(*hi)),
                    _ => "?".into(),
                };
                line(format!(
                    "  {} {} after {after}: {}",
                    ids.join(", "),
                    outcome.to_uppercase(),
                    reason.unwrap_or("no reason given")
                ));
                line(format!("      {summary}"));
            }
            for p in &j.pending {
                line(format!("  {p}"));
            }
        }
        let stat = |s: &SubtaskStat| {
            format!(
                "{} #{}: {} in checkpoint {}{}{}",
                s.operator,
                s.subtask,
                human_ms(s.value_ms),
                s.checkpoint_id,
                s.siblings_median_ms
                    .map_or(String::new(), |m| format!(" (siblings' median {})", human_ms(m))),
                place(&s.location)
            )
        };
        line(String::new());
        if j.top_alignment.is_empty() && j.top_start_delay.is_empty() {
            line("Alignment and start delay: no subtask stands out".into());
        } else {
            for (title, stats) in
                [("Top alignment:", &j.top_alignment), ("Top start delay:", &j.top_start_delay)]
            {
                if stats.is_empty() {
                    line(format!("{title} no subtask stands out"));
                } else {
                    line(title.into());
                }
                for s in stats {
                    line(format!("  {}", stat(s)));
                }
            }
        }
        if !j.blocking.is_empty() {
            line("Acknowledged last (held the completed checkpoints up):".into());
            for b in &j.blocking {
                line(format!(
                    "  {} #{}: {} of {} checkpoints, mostly in {}{}",
                    b.operator,
                    b.subtask,
                    b.times,
                    b.of,
                    b.dominant_phase,
                    place(&b.location)
                ));
            }
        }
        if !j.load.is_empty() {
            line("Load:".into());
            for l in &j.load {
                line(format!("  {l}"));
            }
        }
        line(String::new());
        if j.classes.is_empty() {
            line("Failure class: none (the classes are blocking, timeout and failure)".into());
        }
        for c in &j.classes {
            let name = match c.class {
                Class::Blocking => "blocking: barriers do not get through (backpressure, skew, alignment)",
                Class::Timeout => {
                    "timeout: the snapshot itself takes too long (state size, checkpoint storage)"
                }
                Class::Failure => "failure: a checkpoint failed with an explicit error",
            };
            line(format!("Failure class: {name}"));
            line(format!("  {}", c.evidence));
        }
        // Each cause points to the page that explains it, listed once under "Read more".
        let mut pages: Vec<(&str, &str)> = Vec::new();
        if !j.causes.is_empty() {
            line("Likely causes:".into());
            for c in &j.causes {
                let n = match pages.iter().position(|p| p.1 == c.url) {
                    Some(i) => i + 1,
                    None => {
                        pages.push((c.source, c.url));
                        pages.len()
                    }
                };
                line(format!("  - {} [{n}]", c.cause));
            }
        }
        if !j.spacing.is_empty() {
            line("Spacing (shadow model):".into());
            for s in &j.spacing {
                line(format!("  {s}"));
            }
        }
        line("Next, check:".into());
        for n in &j.next {
            line(format!("  → {n}"));
        }
        if !pages.is_empty() {
            line("Read more:".into());
            for (i, (title, url)) in pages.iter().enumerate() {
                line(format!("  [{}] {title}: {url}", i + 1));
            }
        }
    }
    o
}
