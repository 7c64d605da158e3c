//! `ConfiguredRule`: a `[[rules]]` entry, parsed once, when the config is read. The rules to
//! evaluate (the built-in pack with these) are `Config::effective_rules`.

use serde::{Deserialize, Serialize};

/// A `[[rules]]` entry: the rule as written and, parsed once when the config is read, the rule
/// ready to evaluate or why its `expr` does not parse. `Config::problems` reports the error
/// (`rules[i].expr`, so such a config is refused); `effective_rules` hands the parsed rule on.
/// Reads as its `RuleSpec` (`own.name`, …).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(from = "crate::rules::RuleSpec", into = "crate::rules::RuleSpec")]
pub struct ConfiguredRule {
    spec: crate::rules::RuleSpec,
    compiled: Result<crate::rules::Rule, crate::rules::expr::ParseError>,
}

impl ConfiguredRule {
    /// The parsed rule, or why its condition does not parse.
    pub(crate) fn rule(&self) -> Result<&crate::rules::Rule, &crate::rules::expr::ParseError> {
        self.compiled.as_ref()
    }
}

impl From<crate::rules::RuleSpec> for ConfiguredRule {
    fn from(spec: crate::rules::RuleSpec) -> Self {
        let compiled = crate::rules::Rule::new(spec.clone());
        ConfiguredRule { spec, compiled }
    }
}

impl From<ConfiguredRule> for crate::rules::RuleSpec {
    fn from(r: ConfiguredRule) -> Self {
        r.spec
    }
}

impl std::ops::Deref for ConfiguredRule {
    type Target = crate::rules::RuleSpec;
    fn deref(&self) -> &crate::rules::RuleSpec {
        &self.spec
    }
}

/// Two rules are the same when written the same (what a reload compares).
impl PartialEq for ConfiguredRule {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn patterns_and_rules_are_compiled_once_when_read_and_handed_on() {
        let text = "[[clusters]]\nname='c'\nurl='http://y'\ninclude_jobs=['^orders-', '(']\n\
                    [[rules]]\nname='Mine'\nexpr='checkpoints.failed > 0'\nseverity='warning'\nclass='failure'\n\
                    summary='s'\ndescription='d'\nrunbook_url='u'\n\
                    [[rules]]\nname='Bad'\nexpr='checkpoints.failed >'\nseverity='warning'\nclass='failure'\n\
                    summary='s'\ndescription='d'\nrunbook_url='u'\n";
        let config: Config = toml::from_str(text).unwrap();
        let c = &config.clusters[0];
        assert!(c.include_jobs[0].regex().unwrap().is_match("orders-eu"));
        let err = c.include_jobs[1].regex().unwrap_err().to_string();
        let problems = config.problems();
        assert!(
            problems.iter().any(|p| p.starts_with("clusters[0].include_jobs[1]: \"(\"") && p.contains(&err))
        );
        assert!(config.rules[0].rule().is_ok());
        assert!(problems.iter().any(|p| p.starts_with("rules[1].expr: ")), "{problems:?}");
        // The compiled copy is handed on; the bad rule is reported, never silently lost.
        let names: Vec<String> = config.effective_rules().into_iter().map(|r| r.spec.name).collect();
        assert!(names.contains(&"Mine".to_string()) && !names.contains(&"Bad".to_string()));
        // Written back as it was read.
        let back = toml::to_string(&config).unwrap();
        assert!(back.contains("include_jobs = [\"^orders-\", \"(\"]"), "{back}");
    }

    /// `[alerting] runbook_base_url` points every built-in rule's runbook_url at an internal
    /// copy, with the same anchors; a rule of one's own keeps its own.
    #[test]
    fn the_runbook_base_url_points_the_builtin_rules_elsewhere() {
        let text = "[alerting]\nrunbook_base_url = 'https://wiki.example.com/flink/runbook'\n\
                    [[rules]]\nname='Mine'\nexpr='checkpoints.failed > 0'\nseverity='warning'\nclass='failure'\n\
                    summary='s'\ndescription='d'\nrunbook_url='https://wiki.example.com/mine'\n";
        let config: Config = toml::from_str(text).unwrap();
        let rules = config.effective_rules();
        let url = |name: &str| rules.iter().find(|r| r.spec.name == name).unwrap().spec.runbook_url.clone();
        assert_eq!(
            url("FlinkCheckpointToleranceExceeded"),
            "https://wiki.example.com/flink/runbook#flinkcheckpointtoleranceexceeded"
        );
        assert_eq!(url("Mine"), "https://wiki.example.com/mine");
        let default: Config = toml::from_str("").unwrap();
        let rules = default.effective_rules();
        assert!(
            rules.iter().all(|r| r.spec.runbook_url.starts_with(crate::rules::builtin::RUNBOOK_BASE_URL))
        );
    }
}
