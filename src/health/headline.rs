//! The answer first: per unhealthy job one [`Headline`] (what is wrong, where, the class, the one
//! next step), ordered worst first by [`order`] and written in at most three parts by
//! [`render`] (each wrapped to [`TEXT_WIDTH`]); `diagnose` and `scan-logs` open with it (the
//! status page and the API answer through `outputs::answer`). Pure: no I/O, no clock.

use std::fmt;

use serde::Serialize;

use crate::rules::Class;

use super::links::{self, Doc};

/// How bad a job is, worst first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    /// The job fails over, is not running, or a critical alert fires.
    Critical,
    /// Checkpoints fail or expire while the job runs.
    Warning,
    /// Checkpoints complete, near a limit (or an alert is pending).
    AtRisk,
}

impl Severity {
    /// As the text shows it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Severity::Critical => "CRITICAL",
            Severity::Warning => "WARNING",
            Severity::AtRisk => "AT RISK",
        }
    }
}

/// What kind of trouble: the failure classes of the rule pack, and failover (the job itself
/// fails and restarts), the worst, first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum HeadlineClass {
    /// The job failed over: the tolerable-failure budget was exceeded, it restarted or FAILED.
    Failover,
    /// Checkpoints fail with an explicit error.
    Failure,
    /// The snapshot itself takes too long.
    Timeout,
    /// Barriers do not get through.
    Blocking,
    /// Configuration advice: a risk, not a failure (never a reason for "not ok").
    Advice,
}

impl HeadlineClass {
    /// Its name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HeadlineClass::Failover => "failover",
            HeadlineClass::Failure => "failure",
            HeadlineClass::Timeout => "timeout",
            HeadlineClass::Blocking => "blocking",
            HeadlineClass::Advice => "advice",
        }
    }
}

impl From<Class> for HeadlineClass {
    fn from(c: Class) -> Self {
        match c {
            Class::Blocking => HeadlineClass::Blocking,
            Class::Timeout => HeadlineClass::Timeout,
            Class::Failure => HeadlineClass::Failure,
            Class::Advice => HeadlineClass::Advice,
        }
    }
}

impl fmt::Display for HeadlineClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One unhealthy job in a few words each: the same fields on every surface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Headline {
    /// How bad.
    pub(crate) severity: Severity,
    /// The job's name.
    pub(crate) job: String,
    /// What is wrong, with its numbers.
    pub(crate) what: String,
    /// Where: operator, subtask, TaskManager (`None` when no subtask stands out).
    #[serde(rename = "where")]
    pub(crate) where_: Option<String>,
    /// The class of the trouble, when known.
    pub(crate) class: Option<HeadlineClass>,
    /// The one next step.
    pub(crate) next_step: String,
    /// The page that explains it (Flink's documentation or the runbook).
    pub(crate) doc_url: Option<String>,
}

/// Worst first: by severity, then class (failover first), then job name.
pub(crate) fn order(mut headlines: Vec<Headline>) -> Vec<Headline> {
    headlines.sort_by(|a, b| {
        (a.severity, a.class.is_none(), a.class, &a.job).cmp(&(
            b.severity,
            b.class.is_none(),
            b.class,
            &b.job,
        ))
    });
    headlines
}

/// The width the text surfaces keep their headline lines to: an 100-column terminal.
pub(crate) const TEXT_WIDTH: usize = 100;

/// `line` wrapped at word boundaries to at most `width` columns, the lines after the first
/// indented by `indent`. A word longer than a line (a URL) stays whole, on a line of its own.
pub(crate) fn wrap(line: &str, width: usize, indent: &str) -> Vec<String> {
    let lead = line.len() - line.trim_start().len();
    let mut out: Vec<String> = Vec::new();
    let mut current = line[..lead].to_string();
    let mut empty = true;
    for word in line[lead..].split(' ').filter(|w| !w.is_empty()) {
        let fits = current.chars().count() + usize::from(!empty) + word.chars().count() <= width;
        if !empty && !fits {
            out.push(std::mem::replace(&mut current, indent.to_string()));
            empty = true;
        }
        if !empty {
            current.push(' ');
        }
        current.push_str(word);
        empty = false;
    }
    out.push(current);
    out
}

/// At most three parts: `SEVERITY job: what`, `  where … · class …`, `  next: … (url)`, each
/// wrapped to [`TEXT_WIDTH`] (its continuation lines indented by four spaces).
pub(crate) fn render(h: &Headline) -> Vec<String> {
    render_parts(h).iter().flat_map(|part| wrap(part, TEXT_WIDTH, "    ")).collect()
}

/// The three parts, unwrapped.
fn render_parts(h: &Headline) -> Vec<String> {
    let mut lines = vec![format!("{} {}: {}", h.severity.as_str(), h.job, h.what)];
    let place = h.where_.as_deref().map(|w| format!("at {w}"));
    let class = h.class.map(|c| format!("class: {c}"));
    let second: Vec<String> = place.into_iter().chain(class).collect();
    if !second.is_empty() {
        lines.push(format!("  {}", second.join("; ")));
    }
    let link = h.doc_url.as_ref().map(|u| format!(" ({u})")).unwrap_or_default();
    lines.push(format!("  next: {}{link}", h.next_step));
    lines
}

/// The headlines as text, worst first, each at most three lines.
pub(crate) fn render_all(headlines: &[Headline]) -> String {
    let mut out = String::new();
    for h in headlines {
        for line in render(h) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// The one next step of a class, and the page that explains it.
pub(crate) fn next_step(class: Option<HeadlineClass>, where_: Option<&str>) -> (String, Doc) {
    // The subtask without its TaskManager: the headline's "at" line names that already.
    let at = |w: Option<&str>, fallback: &str| {
        w.map_or(fallback.to_string(), |w| w.split(" on ").next().unwrap_or(w).to_string())
    };
    match class {
        Some(HeadlineClass::Failover) => (
            format!(
                "the exception that failed the job (Web UI Exceptions tab or GET /jobs/<id>/exceptions) and \
                 the TaskManager log of {}",
                at(where_, "the failing task")
            ),
            links::RUNBOOK_TOLERANCE,
        ),
        Some(HeadlineClass::Failure) => (
            format!("the deepest `Caused by:` in the TaskManager log of {}", at(where_, "the failing task")),
            links::RUNBOOK_FAILURES,
        ),
        Some(HeadlineClass::Advice) => (
            "the job's configuration advice (`checkpoint-sentinel advise`): the keys to set and their predicted \
             effect"
                .to_string(),
            links::CONFIGURATION,
        ),
        Some(HeadlineClass::Timeout) => (
            format!(
                "what {} does while it snapshots: a thread dump during a checkpoint, its state size, the \
                 storage's throughput",
                at(where_, "the slowest subtask")
            ),
            links::LARGE_STATE,
        ),
        Some(HeadlineClass::Blocking) => (
            format!(
                "backpressure upstream of {} and its busy time against its siblings (skew)",
                at(where_, "the slowest subtask")
            ),
            links::UNDER_BACKPRESSURE,
        ),
        None => ("the job's checkpoint history (Web UI Checkpoints tab)".to_string(), links::MONITORING),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headline(severity: Severity, job: &str, class: Option<HeadlineClass>) -> Headline {
        Headline {
            severity,
            job: job.into(),
            what: "w".into(),
            where_: None,
            class,
            next_step: "n".into(),
            doc_url: None,
        }
    }

    #[test]
    fn worst_first_then_failover_first_then_by_name() {
        let all = vec![
            headline(Severity::AtRisk, "a", Some(HeadlineClass::Blocking)),
            headline(Severity::Warning, "b", Some(HeadlineClass::Timeout)),
            headline(Severity::Critical, "c", Some(HeadlineClass::Failure)),
            headline(Severity::Critical, "d", Some(HeadlineClass::Failover)),
            headline(Severity::Warning, "e", None),
        ];
        let names: Vec<String> = order(all).into_iter().map(|h| h.job).collect();
        assert_eq!(names, ["d", "c", "b", "e", "a"]);
    }

    #[test]
    fn a_headline_is_at_most_three_lines_and_says_where_and_what_to_do() {
        let mut h = headline(Severity::Critical, "job", Some(HeadlineClass::Failure));
        h.where_ = Some("stateful-map #0".into());
        h.doc_url = Some("https://example.org/runbook".into());
        let lines = render(&h);
        assert_eq!(
            lines,
            [
                "CRITICAL job: w",
                "  at stateful-map #0; class: failure",
                "  next: n (https://example.org/runbook)"
            ]
        );
        assert_eq!(render(&headline(Severity::AtRisk, "j", None)).len(), 2);
    }

    #[test]
    fn long_lines_wrap_at_the_width_and_a_url_stays_whole() {
        let words = "word ".repeat(30);
        let url = format!("https://example.org/{}", "x".repeat(120));
        let lines = wrap(&format!("  next: {words}({url})"), 40, "    ");
        assert!(lines[0].starts_with("  next: word"), "{lines:?}");
        assert!(lines.iter().all(|l| l.len() <= 40 || l.trim_start().starts_with("(https://")), "{lines:?}");
        assert!(lines[1..].iter().all(|l| l.starts_with("    ")), "{lines:?}");
        assert_eq!(lines.last().unwrap().trim(), format!("({url})"));
        assert_eq!(lines.join(" ").split_whitespace().count(), 32, "no word lost");
        assert_eq!(wrap("short line", 40, "    "), ["short line"]);
    }
}
