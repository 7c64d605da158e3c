//! Loading: the file, then the `SENTINEL_…` environment variables over it, deserialised strictly
//! and checked; an error names the file or the variable, the key and what was expected.

use std::path::Path;

use super::{Config, ConfigError};

impl Config {
    /// Loads `file` with environment overrides, then validates it.
    pub fn load(file: &Path) -> Result<Config, ConfigError> {
        Self::load_with_env(file, std::env::vars())
    }

    /// Like [`load`](Self::load) with an explicit environment (for tests).
    pub(crate) fn load_with_env(
        file: &Path,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let load_error = |message: String| ConfigError::Load { file: file.to_path_buf(), message };
        let text = std::fs::read_to_string(file).map_err(|e| load_error(format!("cannot read: {e}")))?;
        // Custom rules missing several fields: all of them in one message, not one per run.
        if let Some(message) = missing_rule_fields(&text) {
            return Err(load_error(message));
        }
        // Only `SENTINEL_<SECTION>__<KEY>` variables are config keys (every top-level key is a
        // section); `SENTINEL_LOG`, `SENTINEL_CONFIG` and the like belong to the command line.
        let env: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.strip_prefix("SENTINEL_").is_some_and(|rest| rest.contains("__")))
            .collect();
        // The file alone first, so that a problem of the file is blamed on the file and one of a
        // variable on the variable.
        let profile = profile_of(&text).map_err(load_error)?;
        let from = |env: &[(String, String)]| -> Result<Config, config::ConfigError> {
            let mut builder = config::Config::builder();
            for (key, value) in profile.map(super::Profile::defaults).unwrap_or_default() {
                builder = builder.set_default(key, value)?;
            }
            builder
                .add_source(config::File::from_str(&text, config::FileFormat::Toml))
                .add_source(
                    config::Environment::with_prefix("SENTINEL")
                        .prefix_separator("_")
                        .separator("__")
                        .source(Some(env.iter().cloned().collect())),
                )
                .build()?
                .try_deserialize()
        };
        from(&[]).map_err(|e| load_error(describe(&e)))?;
        let config = match from(&env) {
            Ok(config) => config,
            Err(all) => {
                let mut sorted = env.clone();
                sorted.sort();
                for var in &sorted {
                    if let Err(e) = from(std::slice::from_ref(var)) {
                        return Err(ConfigError::Env {
                            variable: var.0.clone(),
                            message: describe(&e).replace("unknown field", "unknown key"),
                        });
                    }
                }
                let names: Vec<&str> = sorted.iter().map(|(k, _)| k.as_str()).collect();
                return Err(ConfigError::Env { variable: names.join(", "), message: describe(&all) });
            }
        };
        let problems = config.problems();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid { file: file.to_path_buf(), problems })
        }
    }
}

/// The file's `profile`, checked: an unknown name is an error naming the key and the profiles.
/// (A file that is not TOML: `None`, the loader says what is wrong with it.)
fn profile_of(text: &str) -> Result<Option<super::Profile>, String> {
    let Some(value) = text.parse::<toml::Table>().ok().and_then(|mut t| t.remove("profile")) else {
        return Ok(None);
    };
    let names: Vec<String> = super::Profile::ALL.iter().map(|(n, _)| format!("{n:?}")).collect();
    let expected = format!("expected one of {}", names.join(", "));
    let name = value.as_str().ok_or_else(|| format!("profile: {value}: {expected}"))?;
    super::Profile::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, p)| Some(*p))
        .ok_or_else(|| format!("profile: {name:?}: {expected}"))
}

/// The required fields of a `[[rules]]` entry (the others have defaults).
const RULE_FIELDS: [&str; 7] = ["name", "expr", "severity", "class", "summary", "description", "runbook_url"];

/// Every `[[rules]]` entry of the file missing required fields, all named in one message; `None`
/// when none is missing (or the file is not TOML: the loader says so).
fn missing_rule_fields(text: &str) -> Option<String> {
    let table: toml::Table = text.parse().ok()?;
    let rules = table.get("rules")?.as_array()?;
    let lines: Vec<String> = rules
        .iter()
        .enumerate()
        .filter_map(|(i, rule)| {
            let rule = rule.as_table()?;
            let missing: Vec<&str> = RULE_FIELDS.into_iter().filter(|f| !rule.contains_key(*f)).collect();
            (!missing.is_empty()).then(|| format!("rules[{i}]: missing {}", missing.join(", ")))
        })
        .collect();
    (!lines.is_empty())
        .then(|| format!("{}; every [[rules]] entry needs {}", lines.join("; "), RULE_FIELDS.join(", ")))
}

/// The `config` crate's message, which names the key and the expected type. It writes a key
/// under an array element without its dot (`rules[0]class`); the key is put right. A number
/// where a duration belongs (`poll_interval = 5`) is explained as such.
fn describe(error: &config::ConfigError) -> String {
    let message = explain_duration(&error.to_string());
    let mut out = String::with_capacity(message.len() + 4);
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == ']' && chars.peek().is_some_and(|n| n.is_ascii_alphabetic() || *n == '_') {
            out.push('.');
        }
    }
    out
}

/// `invalid value: string "5", expected a duration for key `…`` (the TOML number 5 reaches the
/// deserializer as a string) becomes `key `…`: 5: expected a duration such as "5s" …`.
fn explain_duration(message: &str) -> String {
    static PATTERN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"invalid value: string "([^"]*)", expected a duration for key `([^`]+)`"#)
            .expect("a valid pattern")
    });
    PATTERN
        .replace(message, |c: &regex::Captures<'_>| {
            let value = &c[1];
            let shown = if value.parse::<f64>().is_ok() { value.to_string() } else { format!("{value:?}") };
            format!(
                "key `{}`: {shown}: expected a duration such as \"5s\" (a number and a unit: ms, s, m, h)",
                &c[2]
            )
        })
        .into_owned()
}

#[cfg(test)]
pub(super) mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::config::{ClusterConfig, Config, ConfigError};

    #[test]
    fn a_number_where_a_duration_belongs_is_explained() {
        let err =
            load("[[clusters]]\nname='a'\nurl='http://x:1'\npoll_interval=5\n").unwrap_err().to_string();
        assert!(
            err.contains("key `clusters[0].poll_interval`: 5: expected a duration such as \"5s\""),
            "{err}"
        );
        assert!(!err.contains("string \"5\""), "{err}");
    }

    #[test]
    fn a_bad_environment_variable_is_named_not_the_file() {
        let f = write("[[clusters]]\nname='a'\nurl='http://x:1'\n");
        let file = f.path().display().to_string();
        let env = |k: &str, v: &str| {
            vec![(k.to_string(), v.to_string()), ("SENTINEL_STATS__WINDOW".into(), "5m".into())]
        };
        let err =
            Config::load_with_env(f.path(), env("SENTINEL_SERVR__LISTEN", "1")).unwrap_err().to_string();
        assert!(err.starts_with("environment variable SENTINEL_SERVR__LISTEN: unknown key `servr`"), "{err}");
        assert!(!err.contains(&file), "{err}");
        let err =
            Config::load_with_env(f.path(), env("SENTINEL_SERVER__LISTEN", "1")).unwrap_err().to_string();
        assert!(err.starts_with("environment variable SENTINEL_SERVER__LISTEN: "), "{err}");
        assert!(err.contains("server.listen"), "{err}");
        // A problem of the file is still the file's, even with a variable set.
        let bad = write("[server]\nlistn='x'\n");
        let err = Config::load_with_env(bad.path(), env("SENTINEL_SERVER__LISTEN", "127.0.0.1:1"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&bad.path().display().to_string()) && err.contains("listn"), "{err}");
    }

    #[test]
    fn every_missing_rule_field_is_named_at_once() {
        let text = "[[clusters]]\nname='a'\nurl='http://x:1'\n[[rules]]\nname = \"Probe\"\nexpr = \"restores > 0\"\nsummary = \"s\"\n[[rules]]\nname = \"Other\"\nexpr = \"restores > 0\"\nseverity = \"info\"\nclass = \"unknown\"\nsummary = \"s\"\ndescription = \"d\"\n";
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains("rules[0]: missing severity, class, description, runbook_url"), "{err}");
        assert!(err.contains("rules[1]: missing runbook_url"), "{err}");
    }

    #[test]
    fn a_missing_key_under_an_array_element_is_named_with_its_dot() {
        let text = "[[rules]]\nname = \"Probe\"\nexpr = \"restores > 0\"\nseverity = \"info\"\nclass = \"nonsense\"\nsummary = \"s\"\ndescription = \"d\"\nrunbook_url = \"u\"\n";
        let err = load(text).unwrap_err().to_string();
        assert!(err.contains("rules[0].class"), "{err}");
    }

    pub(crate) fn write(text: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
        std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        f
    }

    pub(crate) fn load(text: &str) -> Result<Config, ConfigError> {
        let f = write(text);
        Config::load_with_env(f.path(), Vec::new())
    }

    #[test]
    fn reference_config_parses_to_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/checkpoint-sentinel.toml");
        let config = Config::load_with_env(&path, Vec::new()).unwrap();
        let expected = Config {
            clusters: vec![ClusterConfig::new("local", "http://127.0.0.1:8081")],
            ..Config::default()
        };
        assert_eq!(config, expected);
    }

    #[test]
    fn the_sharded_discovery_example_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let config = Config::load_with_env(&dir.join("discovery-sharded.toml"), Vec::new()).unwrap();
        assert!(config.clusters[0].shard_jobs);
        assert!(config.discovery.defaults.logs.as_ref().is_some_and(|l| l.paths[0].contains("{cluster}")));
        let text = std::fs::read_to_string(dir.join("file_sd/flink-apps.yml")).unwrap();
        let targets =
            crate::sources::file_sd::parse_as(&text, crate::sources::discovery::Format::Yaml, "http")
                .unwrap();
        assert_eq!(targets.len(), 4);
    }

    #[test]
    fn the_large_estate_profile_is_one_key_under_the_files_own() {
        let c = load("profile = \"large-estate\"\n[state]\nrecent_checkpoints = 16\n").unwrap();
        assert_eq!(c.profile, Some(super::super::Profile::LargeEstate));
        assert!(!c.metrics.operators);
        assert_eq!(c.metrics.quantiles, vec![0.5, 0.95]);
        assert_eq!(c.state.p95_history_points, 30);
        assert_eq!(c.state.recent_checkpoints, 16, "the file's own key wins");
        let plain = load("[state]\nrecent_checkpoints = 16\n").unwrap();
        assert!(plain.metrics.operators && plain.state.p95_history_points == 120);
    }

    #[test]
    fn an_unknown_profile_names_the_file_the_key_and_the_profiles() {
        let f = write("profile = \"huge\"\n");
        let err = Config::load_with_env(f.path(), Vec::new()).unwrap_err().to_string();
        assert!(err.contains(&f.path().display().to_string()), "{err}");
        assert!(err.contains(r#"profile: "huge": expected one of "large-estate""#), "{err}");
        let err = load("profile = 3\n").unwrap_err().to_string();
        assert!(err.contains(r#"profile: 3: expected one of "large-estate""#), "{err}");
    }

    #[test]
    fn durations_are_humane() {
        let c =
            load("[[clusters]]\nname='a'\nurl='http://x:1'\npoll_interval='250ms'\n[stats]\nwindow='5m'\n")
                .unwrap();
        assert_eq!(c.clusters[0].poll_interval, Duration::from_millis(250));
        assert_eq!(c.stats.window, Duration::from_secs(300));
    }

    #[test]
    fn a_wrong_type_names_the_file_and_key() {
        let f = write("[[clusters]]\nname='a'\nurl='http://x:1'\npoll_interval='often'\n");
        let err = Config::load_with_env(f.path(), Vec::new()).unwrap_err().to_string();
        assert!(err.contains(&f.path().display().to_string()), "{err}");
        assert!(err.contains("poll_interval"), "{err}");
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let err = load("[server]\nlisten='127.0.0.1:1'\nlistn='x'\n").unwrap_err().to_string();
        assert!(err.contains("listn"), "{err}");
    }

    #[test]
    fn environment_overrides_the_file() {
        let f = write("[server]\nlisten='127.0.0.1:1'\n");
        let env = vec![
            ("SENTINEL_SERVER__LISTEN".to_string(), "127.0.0.1:2".to_string()),
            ("SENTINEL_LOG".to_string(), "debug".to_string()),
        ];
        let c = Config::load_with_env(f.path(), env).unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:2".parse().unwrap());
    }
}
