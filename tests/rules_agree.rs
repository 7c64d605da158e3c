//! One source of truth for the rules: each Flink alert of the built-in pack
//! (`src/rules/builtin.rs`) and of `alerts/flink-checkpoints.rules.yml` must express the same
//! condition: the same series (through the Prometheus twin the series table,
//! `src/rules/series.rs`, gives each built-in series), the same thresholds, the same windows, and
//! the same `for`, `keep_firing_for`, severity and class. A change on one side only fails here.
//! The series table's twins name exported metrics, and docs/metrics.md lists the table
//! (`SENTINEL_BLESS=1`, the one bless variable, rewrites it).

use std::collections::BTreeSet;

use crate::common;

use checkpoint_sentinel::outputs::export::{Kind, METRICS};
use checkpoint_sentinel::rules::builtin;
use checkpoint_sentinel::rules::series::{self, SERIES, Scope};

/// What the exported metrics say for a built-in series: its Prometheus twin from the series
/// table (`rules::series`), read as PromQL (`progress_window`'s twin brings its constants 3
/// and 2 along).
fn exported(series: &str) -> Facts {
    // A name is a job's series, else a TaskManager's (the scopes share no name that matters).
    let twin =
        series::twin(Scope::Job, series).or_else(|| series::twin(Scope::TaskManager, series)).unwrap_or_else(
            || panic!("built-in series {series} has no Prometheus twin in src/rules/series.rs: add one"),
        );
    promql_facts(&twin)
}

/// What a condition refers to: metrics with matchers, numeric thresholds, windows (seconds).
#[derive(Debug, Default, PartialEq)]
struct Facts {
    series: BTreeSet<String>,
    numbers: BTreeSet<String>,
    windows: BTreeSet<u64>,
}

fn number_key(n: f64) -> String {
    format!("{n:.6}")
}

fn seconds(text: &str) -> u64 {
    let (n, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap());
    let n: u64 = n.parse().unwrap();
    n * match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => panic!("window unit {other}"),
    }
}

/// The facts of a built-in condition (`rules::expr` syntax).
fn builtin_facts(expr: &str) -> Facts {
    let mut facts = Facts::default();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut in_window_arg = false;
    // The functions whose parentheses are open, innermost last: a comma starts a window only
    // in `increase(series, 15m)` and `ago(series, 1d)`, not in `max(a, 5m)`.
    let mut open: Vec<String> = Vec::new();
    let mut last_word = String::new();
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let number: f64 = chars[start..i].iter().collect::<String>().parse().unwrap();
            let unit_start = i;
            while i < chars.len() && (chars[i].is_ascii_alphabetic() || chars[i] == '%') {
                i += 1;
            }
            let unit: String = chars[unit_start..i].iter().collect();
            if in_window_arg {
                facts.windows.insert(seconds(&format!("{}{unit}", number as u64)));
                continue;
            }
            let scale = match unit.as_str() {
                "" | "s" => 1.0,
                "ms" => 0.001,
                "m" => 60.0,
                "h" => 3600.0,
                "d" => 86_400.0,
                "%" => 0.01,
                "KB" => 1e3,
                "MB" => 1e6,
                "GB" => 1e9,
                other => panic!("unit {other} in {expr}"),
            };
            facts.numbers.insert(number_key(number * scale));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            if ["and", "or", "not", "max", "min", "increase", "ago"].contains(&word.as_str()) {
                last_word = word;
                continue;
            }
            last_word.clear();
            let twin = exported(&word);
            facts.series.extend(twin.series);
            facts.numbers.extend(twin.numbers);
            facts.windows.extend(twin.windows);
        } else {
            match c {
                '(' => open.push(std::mem::take(&mut last_word)),
                ',' => in_window_arg = open.last().is_some_and(|f| f == "increase" || f == "ago"),
                ')' => {
                    open.pop();
                    in_window_arg = false;
                }
                _ => {}
            }
            if !c.is_whitespace() && c != '(' {
                last_word.clear();
            }
            i += 1;
        }
    }
    facts
}

/// The facts of a PromQL expression: metric selectors (with their matchers), numbers outside
/// selectors, range windows and offsets; grouping label lists are skipped.
fn promql_facts(expr: &str) -> Facts {
    let mut facts = Facts::default();
    let chars: Vec<char> = expr.chars().collect();
    let mut i = 0;
    let mut offset_next = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            if offset_next {
                facts.windows.insert(seconds(&text));
                offset_next = false;
            } else {
                facts.numbers.insert(number_key(text.parse().unwrap()));
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            match word.as_str() {
                "offset" => offset_next = true,
                "without" | "by" | "on" | "ignoring" | "group_left" | "group_right" => {
                    while i < chars.len() && chars[i] != ')' {
                        i += 1;
                    }
                    i += 1;
                }
                w if w.starts_with("flink_") => {
                    let mut selector = word.clone();
                    if chars.get(i) == Some(&'{') {
                        let end = i + chars[i..].iter().position(|c| *c == '}').unwrap();
                        selector.extend(chars[i..=end].iter().filter(|c| !c.is_whitespace()));
                        i = end + 1;
                    }
                    facts.series.insert(selector);
                }
                _ => {}
            }
        } else if c == '[' {
            let end = i + chars[i..].iter().position(|c| *c == ']').unwrap();
            facts.windows.insert(seconds(&chars[i + 1..end].iter().collect::<String>()));
            i = end + 1;
        } else {
            i += 1;
        }
    }
    facts
}

/// One alert of the rule file: name, expr, for, keep_firing_for, severity, class.
#[derive(Debug)]
struct FileRule {
    name: String,
    expr: String,
    for_s: u64,
    keep_s: u64,
    severity: String,
    class: String,
}

fn file_rules() -> Vec<FileRule> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("alerts/flink-checkpoints.rules.yml")).unwrap();
    text.split("- alert: ")
        .skip(1)
        .map(|block| {
            let lines: Vec<&str> = block.lines().collect();
            let name = lines[0].trim().to_string();
            let value = |key: &str| {
                lines.iter().find_map(|l| l.trim().strip_prefix(key)).map(|v| v.trim().to_string())
            };
            let mut expr = value("expr:").unwrap();
            if expr == "|" {
                let at = lines.iter().position(|l| l.trim() == "expr: |").unwrap();
                let indent = |l: &str| l.len() - l.trim_start().len();
                let base = indent(lines[at]);
                expr = lines[at + 1..]
                    .iter()
                    .take_while(|l| indent(l) > base || l.trim().is_empty())
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" ");
            }
            let duration = |key: &str| value(key).map_or(0, |v| if v == "0m" { 0 } else { seconds(&v) });
            FileRule {
                name,
                expr,
                for_s: duration("for:"),
                keep_s: duration("keep_firing_for:"),
                severity: value("severity:").unwrap(),
                class: value("class:").unwrap(),
            }
        })
        .collect()
}

/// `expr` without a trailing clause that leaves out ended jobs, which the built-in evaluator
/// never evaluates.
fn strip_ended_jobs(expr: &str) -> &str {
    const ENDED: &str =
        "unless on (cluster, job_id) flink_job_info{state=~\"FINISHED|CANCELED|FAILED|SUSPENDED\"}";
    expr.trim_end().strip_suffix(ENDED).unwrap_or(expr)
}

#[test]
fn every_flink_alert_has_the_same_condition_in_the_pack_and_the_rule_file() {
    let file = file_rules();
    let pack = builtin::rules();
    assert!(pack.len() >= 14, "{} built-in rules", pack.len());
    let mut differences = Vec::new();
    for rule in &pack {
        let Some(theirs) = file.iter().find(|f| f.name == rule.name) else {
            differences.push(format!("{}: not in alerts/flink-checkpoints.rules.yml", rule.name));
            continue;
        };
        let ours = builtin_facts(&rule.expr);
        // The built-in evaluator does not evaluate ended jobs at all; in PromQL the same is a
        // clause that drops them (`unless on (cluster, job_id) flink_job_info{state=~…}`).
        let prom = promql_facts(strip_ended_jobs(&theirs.expr));
        if ours != prom {
            differences.push(format!(
                "{}:\n  built-in `{}` -> {ours:?}\n  promql   `{}` -> {prom:?}",
                rule.name, rule.expr, theirs.expr
            ));
        }
        let settings = (
            rule.for_.as_secs(),
            rule.keep_firing_for.as_secs(),
            rule.severity.as_str(),
            rule.class.as_str(),
        );
        let file_settings = (theirs.for_s, theirs.keep_s, theirs.severity.as_str(), theirs.class.as_str());
        if settings != file_settings {
            differences.push(format!(
                "{}: (for, keep_firing_for, severity, class) built-in {settings:?}, file {file_settings:?}",
                rule.name
            ));
        }
    }
    assert!(differences.is_empty(), "the two rule sets disagree:\n{}", differences.join("\n"));
}

#[test]
fn the_comparison_sees_a_changed_threshold_series_or_window() {
    let base = builtin_facts("in_progress_age > 0.8 * timeout");
    assert_eq!(
        base,
        promql_facts(
            "flink_checkpoint_oldest_in_progress_age_seconds > on (cluster, job_id) group_left () 0.8 * flink_checkpoint_timeout_seconds"
        )
    );
    assert_ne!(base, builtin_facts("in_progress_age > 0.9 * timeout"));
    assert_ne!(base, builtin_facts("in_progress_age > 0.8 * interval"));
    assert_ne!(
        builtin_facts("increase(log.expired, 10m) >= 3"),
        promql_facts(
            "sum without (source) (increase(flink_checkpoint_log_events_total{kind=\"expired\"}[5m])) >= 3"
        )
    );
    assert_eq!(
        builtin_facts(
            "checkpointed_size.p50 > 100MB and checkpointed_size.p50 > 1.5 * ago(checkpointed_size.p50, 1d)"
        ),
        promql_facts(
            "max without (quantile) (flink_checkpoint_checkpointed_size_bytes{quantile=\"0.5\"}) > 100e6 and max without (quantile) (flink_checkpoint_checkpointed_size_bytes{quantile=\"0.5\"}) > 1.5 * max without (quantile) (flink_checkpoint_checkpointed_size_bytes{quantile=\"0.5\"} offset 1d)"
        )
    );
}

/// The metric names a PromQL twin reads (a summary's `_count` is its family's).
fn metric_names(promql: &str) -> Vec<String> {
    let selectors = promql.split(['{', '}']).step_by(2).collect::<Vec<_>>().join(" ");
    selectors
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("flink_") || w.starts_with("checkpoint_sentinel_"))
        .map(|name| {
            let family = name.strip_suffix("_count").unwrap_or(name);
            let summary = METRICS.iter().any(|m| m.name == family && m.kind == Kind::Summary);
            if summary { family.to_string() } else { name.to_string() }
        })
        .collect()
}

#[test]
fn every_prometheus_twin_reads_exported_metrics() {
    let mut unknown = Vec::new();
    for entry in SERIES {
        for name in series::names(entry) {
            let scope = entry.read.scope();
            let Some(twin) = series::twin(scope, &name.replace("KIND", "expired")) else { continue };
            let metrics = metric_names(&twin);
            assert!(!metrics.is_empty(), "{name}: the twin `{twin}` reads no metric");
            for metric in metrics {
                if !METRICS.iter().any(|m| m.name == metric) {
                    unknown.push(format!("{} {name}: `{metric}` is not exported", scope.as_str()));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "twins in src/rules/series.rs name metrics that do not exist:\n{}",
        unknown.join("\n")
    );
}

const BEGIN: &str = "<!-- BEGIN RULE SERIES -->";
const END: &str = "<!-- END RULE SERIES -->";

/// The series list of docs/metrics.md, from the series table.
fn series_table() -> String {
    let mut out =
        String::from("\n| scope | series | unit | meaning | Prometheus |\n| --- | --- | --- | --- | --- |\n");
    for entry in SERIES {
        let names = series::names(entry).iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" ");
        // A summary's twin is its family (one quantile per statistic, `_count` for `.count`).
        let twin = entry.prometheus.map_or("-".to_string(), |p| format!("`{}`", p.replace("{key}", "KIND")));
        let scope = entry.read.scope();
        out.push_str(&format!(
            "| {} | {names} | {} | {} | {twin} |\n",
            scope.as_str(),
            entry.unit.as_str(),
            entry.doc
        ));
    }
    out
}

#[test]
fn docs_list_every_rule_series() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = doc.split_once(BEGIN).expect("begin marker of the rule series");
    let (current, tail) = rest.split_once(END).expect("end marker of the rule series");
    let wanted = series_table();
    if common::blessing() {
        std::fs::write(&path, format!("{head}{BEGIN}{wanted}{END}{tail}")).unwrap();
        return;
    }
    assert_eq!(
        current, wanted,
        "docs/metrics.md's rule series are out of date: run SENTINEL_BLESS=1 cargo test --test integration rules_agree::"
    );
}
