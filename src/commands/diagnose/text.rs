//! `diagnose`'s text output: the header, then per job its sections in a fixed order, one
//! function each.

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

/// The text being written, a line at a time.
#[derive(Default)]
struct Out(String);

impl Out {
    fn line(&mut self, s: impl AsRef<str>) {
        self.0.push_str(s.as_ref());
        self.0.push('\n');
    }
}

/// The report as text.
pub(crate) fn to_text(report: &Report) -> String {
    let mut o = Out::default();
    o.line(format!(
        "checkpoint-sentinel diagnose: {} (Flink {}), {} UTC",
        report.url,
        report.flink_version.as_deref().unwrap_or("?"),
        crate::time::log_time(Timestamp(report.at_ms)).replace(',', ".")
    ));
    use crate::health::headline::{TEXT_WIDTH, render, wrap};
    // Many jobs, one cause: first, as the daemon's page says it.
    for incident in &report.incidents {
        for line in wrap(incident, TEXT_WIDTH, "    ") {
            o.line(line);
        }
    }
    for line in wrap(&report.summary, TEXT_WIDTH, "    ") {
        o.line(line);
    }
    for h in &report.headline {
        for line in render(h) {
            o.line(line);
        }
    }
    let healthy: Vec<&str> =
        report.jobs.iter().filter(|j| j.verdict == Verdict::Healthy).map(|j| j.name.as_str()).collect();
    if !healthy.is_empty() && healthy.len() < report.jobs.len() {
        for line in wrap(&format!("Healthy: {}", healthy.join(", ")), TEXT_WIDTH, "    ") {
            o.line(line);
        }
    }
    // The other lane, after the health: it never counts as ill health.
    if let Some(advice) = &report.advice {
        o.line(format!("{advice} (advice, not ill health: `checkpoint-sentinel advise`)"));
    }
    if report.jobs.is_empty() {
        o.line("No running job.");
    }
    for j in worst_first(&report.jobs) {
        o.line("");
        verdict(&mut o, j);
        failover_and_culprit(&mut o, j);
        recent_table(&mut o, j);
        failures(&mut o, j);
        evidence(&mut o, j);
        if let Some(text) = super::blocked::text(j) {
            o.line(text);
        }
        storage(&mut o, j);
        o.line("");
        phase_tables(&mut o, j);
        blocking(&mut o, j);
        load(&mut o, j);
        o.line("");
        classes(&mut o, j);
        let pages = causes(&mut o, j);
        spacing(&mut o, j);
        next(&mut o, j);
        read_more(&mut o, &pages);
    }
    o.0
}

/// The jobs in the order of the headlines (worst first), then the healthy ones in the
/// cluster's order.
fn worst_first(jobs: &[JobReport]) -> Vec<&JobReport> {
    let mut all: Vec<(usize, &JobReport)> = jobs.iter().enumerate().collect();
    let rank =
        |j: &JobReport| j.headline.as_ref().map(|h| (h.severity, h.class.is_none(), h.class, h.job.clone()));
    all.sort_by(|(i, a), (k, b)| match (rank(a), rank(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => i.cmp(k),
    });
    all.into_iter().map(|(_, j)| j).collect()
}

/// Whether the job failed over (the headline names the culprit). The TaskManagers' own
/// evidence ("Evidence: …") and a thread dump's "Blocked in: …" line belong here, one line
/// each, under the job's verdict and before its configuration.
fn failover_and_culprit(o: &mut Out, j: &JobReport) {
    if let Some(f) = &j.failover {
        o.line(format!("Failover: {f}"));
    }
}

/// Where a subtask runs, unless every subtask runs on the same TaskManager (said once).
fn place(j: &JobReport, l: &Option<Location>) -> String {
    match (&j.taskmanager, l) {
        (Some(_), Some(_)) => String::new(),
        (_, Some(l)) => format!(", on {}", l.text()),
        (_, None) => ", on a TaskManager the REST API did not name".into(),
    }
}

/// The job, its verdict and why, its configuration, its TaskManager and Flink's counts.
fn verdict(o: &mut Out, j: &JobReport) {
    let verdict = match j.verdict {
        Verdict::Healthy => "HEALTHY",
        Verdict::AtRisk => "AT RISK",
        Verdict::Unhealthy => "UNHEALTHY",
    };
    o.line(format!("Job {} ({}) {}: {verdict}", j.name, j.job_id, j.state));
    // The reasons on as few lines as they fit (an expired job has five: a screen has 50 lines).
    if !j.verdict_reasons.is_empty() {
        let reasons = format!("  - {}", j.verdict_reasons.join("; "));
        for line in crate::health::headline::wrap(&reasons, crate::health::headline::TEXT_WIDTH, "    ") {
            o.line(line);
        }
    }
    if let Some(c) = &j.config {
        o.line(format!("Config: {c}"));
    }
    if !j.advice.is_empty() {
        o.line(format!(
            "Advice: {} (the configuration, not a failure: `checkpoint-sentinel advise`)",
            j.advice.join(", ")
        ));
    }
    if let Some(tm) = &j.taskmanager {
        o.line(format!("Every subtask runs on {}.", tm.text()));
    }
    let restarts = j.restarts_metric.map_or(String::new(), |(n, name)| {
        format!(", {n} restart{} ({name})", if n == 1 { "" } else { "s" })
    });
    o.line(format!(
        "Counts: {} completed, {} failed, {} in progress, {} restored{restarts}",
        j.counts[0], j.counts[1], j.counts[2], j.counts[3]
    ));
}

/// The newest checkpoints: ten fit a screen; older ones of Flink's history are counted by
/// status.
fn recent_table(o: &mut Out, j: &JobReport) {
    o.line("");
    o.line("Recent checkpoints (newest first):");
    o.line(format!(
        "  {:>6}  {:<11}  {:<12}  {:>8}  {:>10}  {:>5}",
        "id", "status", "triggered", "took", "size", "acked"
    ));
    for r in j.recent.iter().take(RECENT_ROWS) {
        o.line(format!(
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
        o.line(format!("  … and {} older: {}", j.recent.len() - RECENT_ROWS, counts.join(", ")));
    }
}

/// Failures that read the same (outcome, reason, summary), said once with their ids.
struct FailureGroup<'a> {
    members: Vec<&'a FailureLine>,
    outcome: &'static str,
    reason: Option<&'a str>,
    summary: &'a str,
}

fn failure_groups(failures: &[FailureLine]) -> Vec<FailureGroup<'_>> {
    let mut groups: Vec<FailureGroup<'_>> = Vec::new();
    for f in failures {
        let (outcome, reason, summary) = (f.outcome.as_str(), f.reason.as_deref(), f.summary.as_str());
        match groups.iter_mut().find(|g| (g.outcome, g.reason, g.summary) == (outcome, reason, summary)) {
            Some(g) => g.members.push(f),
            None => groups.push(FailureGroup { members: vec![f], outcome, reason, summary }),
        }
    }
    groups
}

/// Failed and expired checkpoints, grouped, and the subtasks of those still in progress.
fn failures(o: &mut Out, j: &JobReport) {
    if j.failures.is_empty() && j.pending.is_empty() {
        return;
    }
    o.line("");
    o.line("Failures, expirations, checkpoints in progress:");
    for g in failure_groups(&j.failures) {
        let ids: Vec<String> = g.members.iter().map(|f| f.id.to_string()).collect();
        let afters: Vec<u64> = g.members.iter().filter_map(|f| f.after_ms).collect();
        let after = match (afters.iter().min(), afters.iter().max()) {
            (Some(lo), Some(hi)) if human_ms(*lo) == human_ms(*hi) => human_ms(*lo),
            (Some(lo), Some(hi)) => format!("{} to {}", human_ms(*lo), human_ms(*hi)),
            _ => "?".into(),
        };
        o.line(format!(
            "  {} {} after {after}: {}",
            ids.join(", "),
            g.outcome.to_uppercase(),
            g.reason.unwrap_or("no reason given")
        ));
        o.line(format!("      {}", g.summary));
    }
    for p in &j.pending {
        o.line(format!("  {p}"));
    }
}

/// The evidence beside the newest failed or slow checkpoint (`diagnose::evidence`).
fn evidence(o: &mut Out, j: &JobReport) {
    if let Some(line) = &j.evidence {
        o.line(format!("  {line}"));
    }
}

/// The checkpoint storage: upload rates, what the job's directory holds.
fn storage(o: &mut Out, j: &JobReport) {
    if j.storage.is_empty() {
        return;
    }
    o.line("Storage:");
    for line in &j.storage {
        for l in crate::health::headline::wrap(line, crate::health::headline::TEXT_WIDTH - 2, "    ") {
            o.line(format!("  {l}"));
        }
    }
}

/// The subtasks whose alignment or start delay stands out.
fn phase_tables(o: &mut Out, j: &JobReport) {
    if j.top_alignment.is_empty() && j.top_start_delay.is_empty() {
        o.line("Alignment and start delay: no subtask stands out");
        return;
    }
    for (title, stats) in [("Top alignment:", &j.top_alignment), ("Top start delay:", &j.top_start_delay)] {
        if stats.is_empty() {
            o.line(format!("{title} no subtask stands out"));
        } else {
            o.line(title);
        }
        for s in stats {
            o.line(format!(
                "  {} #{}: {} in checkpoint {}{}{}",
                s.operator,
                s.subtask,
                human_ms(s.value_ms),
                s.checkpoint_id,
                s.siblings_median_ms
                    .map_or(String::new(), |m| format!(" (siblings' median {})", human_ms(m))),
                place(j, &s.location)
            ));
        }
    }
}

/// The subtasks that acknowledged last.
fn blocking(o: &mut Out, j: &JobReport) {
    if j.blocking.is_empty() {
        return;
    }
    o.line("Acknowledged last (held the completed checkpoints up):");
    for b in &j.blocking {
        o.line(format!(
            "  {} #{}: {} of {} checkpoints, mostly in {}{}",
            b.operator,
            b.subtask,
            b.times,
            b.of,
            b.dominant_phase,
            place(j, &b.location)
        ));
    }
}

/// Backpressure and the bottleneck.
fn load(o: &mut Out, j: &JobReport) {
    if j.load.is_empty() {
        return;
    }
    o.line("Load:");
    for l in &j.load {
        o.line(format!("  {l}"));
    }
}

/// The failure classes with their evidence.
fn classes(o: &mut Out, j: &JobReport) {
    if j.classes.is_empty() {
        o.line("Failure class: none (the classes are blocking, timeout and failure)");
    }
    for c in &j.classes {
        let name = match c.class {
            Class::Blocking => "blocking: barriers do not get through (backpressure, skew, alignment)",
            Class::Timeout => "timeout: the snapshot itself takes too long (state size, checkpoint storage)",
            Class::Failure => "failure: a checkpoint failed with an explicit error",
            Class::Advice => "advice: the configuration risks data or a stuck job (not a failure)",
        };
        o.line(format!("Failure class: {name}"));
        o.line(format!("  {}", c.evidence));
    }
}

/// The likely causes, each pointing to the page that explains it; returns those pages
/// (title, address), each once, in the order first cited.
fn causes<'a>(o: &mut Out, j: &'a JobReport) -> Vec<(&'a str, &'a str)> {
    let mut pages: Vec<(&str, &str)> = Vec::new();
    if j.causes.is_empty() {
        return pages;
    }
    o.line("Likely causes:");
    for c in &j.causes {
        let n = match pages.iter().position(|p| p.1 == c.url) {
            Some(i) => i + 1,
            None => {
                pages.push((c.source, &c.url));
                pages.len()
            }
        };
        o.line(format!("  - {} [{n}]", c.cause));
    }
    pages
}

/// The shadow model's explanation of the spacing.
fn spacing(o: &mut Out, j: &JobReport) {
    if j.spacing.is_empty() {
        return;
    }
    o.line("Spacing (shadow model):");
    for s in &j.spacing {
        o.line(format!("  {s}"));
    }
}

/// What to check next.
fn next(o: &mut Out, j: &JobReport) {
    o.line("Next, check:");
    for n in &j.next {
        o.line(format!("  → {n}"));
    }
}

/// The pages the causes cite, numbered.
fn read_more(o: &mut Out, pages: &[(&str, &str)]) {
    if pages.is_empty() {
        return;
    }
    o.line("Read more:");
    for (i, (title, url)) in pages.iter().enumerate() {
        o.line(format!("  [{}] {title}: {url}", i + 1));
    }
}
