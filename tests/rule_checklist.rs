//! Adding a rule is one entry in `src/rules/builtin.rs`, its twin in `alerts/*.rules.yml`, a
//! promtool test in `alerts/tests/` that expects it to fire, and a runbook section in
//! `docs/runbook.md`. For every built-in rule this checks the last three exist and names the one
//! that is missing (`tests/rules_agree.rs` checks that the twin says the same thing).

use std::path::{Path, PathBuf};

use checkpoint_sentinel::rules::builtin;
use serde_norway::Value;

/// Where the checklist's parts live, read once.
struct Parts {
    /// Alert names of every `alerts/*.rules.yml`.
    twins: Vec<String>,
    /// Per `alert_rule_test` case of every `alerts/tests/*.yml`: the alert name and whether it
    /// expects the alert (a case of `exp_alerts: []` alone tests nothing about firing).
    promtool_cases: Vec<(String, bool)>,
    /// The section titles (`## Name`) of docs/runbook.md.
    runbook_sections: Vec<String>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn yaml_files(dir: &str, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(suffix)))
        .collect();
    files.sort();
    files
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The items of the sequence at `key` of `value`, none when it has none.
fn items<'v>(value: &'v Value, key: &str) -> impl Iterator<Item = &'v Value> {
    value.get(key).and_then(Value::as_sequence).into_iter().flatten()
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_string)
}

fn parts() -> Parts {
    let twins = yaml_files("alerts", ".rules.yml")
        .iter()
        .flat_map(|path| {
            let file = read_yaml(path);
            items(&file, "groups")
                .flat_map(|group| items(group, "rules"))
                .filter_map(|rule| text(rule, "alert"))
                .collect::<Vec<_>>()
        })
        .collect();
    let promtool_cases = yaml_files("alerts/tests", ".yml")
        .iter()
        .flat_map(|path| {
            let file = read_yaml(path);
            items(&file, "tests")
                .flat_map(|test| items(test, "alert_rule_test"))
                .filter_map(|case| {
                    let expects =
                        case.get("exp_alerts").and_then(Value::as_sequence).is_some_and(|a| !a.is_empty());
                    Some((text(case, "alertname")?, expects))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let runbook = std::fs::read_to_string(root().join("docs/runbook.md")).unwrap();
    let runbook_sections =
        runbook.lines().filter_map(|l| l.strip_prefix("## ")).map(|l| l.trim().to_string()).collect();
    Parts { twins, promtool_cases, runbook_sections }
}

/// What the checklist misses for the rule `name`, one line each.
fn missing(name: &str, parts: &Parts) -> Vec<String> {
    let mut out = Vec::new();
    if !parts.twins.iter().any(|t| t == name) {
        out.push(format!("rule {name}: no twin in alerts/*.rules.yml (no `- alert: {name}`)"));
    }
    if !parts.promtool_cases.iter().any(|(alert, expects)| alert == name && *expects) {
        out.push(format!(
            "rule {name}: no promtool test in alerts/tests/ (no alert_rule_test case with `alertname: {name}` and a non-empty exp_alerts)"
        ));
    }
    if !parts.runbook_sections.iter().any(|s| s == name) {
        out.push(format!("rule {name}: no runbook section in docs/runbook.md (no `## {name}`)"));
    }
    out
}

#[test]
fn every_builtin_rule_has_its_twin_a_promtool_test_and_a_runbook_section() {
    let parts = parts();
    let rules = builtin::rules();
    assert!(rules.len() >= 14, "{} built-in rules", rules.len());
    let mut problems = Vec::new();
    for rule in &rules {
        problems.extend(missing(&rule.name, &parts));
        let anchor = format!("docs/runbook.md#{}", rule.name.to_lowercase());
        if !rule.runbook_url.ends_with(&anchor) {
            problems.push(format!(
                "rule {}: runbook_url {} does not end in {anchor}",
                rule.name, rule.runbook_url
            ));
        }
    }
    assert!(problems.is_empty(), "the checklist of a new rule is not complete:\n{}", problems.join("\n"));
}

#[test]
fn the_checklist_names_each_missing_part() {
    let parts = parts();
    let problems = missing("FlinkNoSuchRule", &parts);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    for (problem, part) in problems.iter().zip(["no twin", "no promtool test", "no runbook section"]) {
        assert!(problem.starts_with(&format!("rule FlinkNoSuchRule: {part}")), "{problem}");
    }
    // A rule the file has but whose only promtool case expects silence has no test of firing.
    let silent = Parts {
        twins: vec!["FlinkQuiet".into()],
        promtool_cases: vec![("FlinkQuiet".into(), false)],
        runbook_sections: vec!["FlinkQuiet".into()],
    };
    let problems = missing("FlinkQuiet", &silent);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("rule FlinkQuiet: no promtool test in alerts/tests/"), "{problems:?}");
}
