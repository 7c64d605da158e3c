//! One `file_sd` file (JSON or YAML) read group by group into its targets, keeping at most a
//! given number of them: what the reading holds follows the target cap, not the file's size.
//!
//! Pure: it reads from any `Read`. JSON is streamed (one group's labels and one target at a
//! time in memory, besides the targets kept); YAML's parser holds one document's events, so
//! `discovery` caps the bytes of a YAML file by the target cap as well. Targets past the cap
//! are still checked (a mistake anywhere fails the file, as before) and counted, not kept.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;

use serde::Deserialize as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::target::Target;

/// The format of a `file_sd` file, by its extension as Prometheus decides it: `.yml` and
/// `.yaml` are YAML, anything else JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// A JSON list of groups.
    Json,
    /// A YAML list of groups (the same shape).
    Yaml,
}

impl Format {
    /// The format of the file at `path`.
    pub(crate) fn of(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("yml") || e.eq_ignore_ascii_case("yaml") => Format::Yaml,
            _ => Format::Json,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Yaml => "YAML",
        }
    }
}

/// What a group of a `file_sd` file must be, for error messages.
const GROUP_SHAPE: &str = "{targets: [\"host:port\", …], labels: {name: value, …}} (labels optional)";

/// A file's targets: the first ones up to the cap, and how many more it listed.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    /// The targets kept, in the file's order.
    pub(crate) targets: Vec<Target>,
    /// Targets past the cap: checked, counted, not kept.
    pub(crate) cut: u64,
}

#[cfg(test)]
/// Parses one file's contents in `format` into its targets; `scheme` for targets without one.
/// A mistake is named the same way in either format: the entry (0-based), the key and what
/// was expected; a syntax error keeps the parser's line and column.
pub(crate) fn parse_as(text: &str, format: Format, scheme: &str) -> Result<Vec<Target>, String> {
    read(text.as_bytes(), format, scheme, usize::MAX).map(|p| p.targets)
}

/// Reads a file in `format` from `reader`, keeping its first `keep` targets.
pub(crate) fn read(reader: impl Read, format: Format, scheme: &str, keep: usize) -> Result<Parsed, String> {
    let mut reading = Reading { format, scheme, keep, parsed: Parsed::default(), problem: None };
    let outcome = match format {
        Format::Json => {
            let mut json = serde_json::Deserializer::from_reader(std::io::BufReader::new(reader));
            (&mut reading).deserialize(&mut json).and_then(|()| json.end()).map_err(|e| e.to_string())
        }
        Format::Yaml => (&mut reading)
            .deserialize(serde_norway::Deserializer::from_reader(reader))
            .map_err(|e| e.to_string()),
    };
    match (outcome, reading.problem) {
        (Ok(()), _) => Ok(reading.parsed),
        (Err(_), Some(problem)) => Err(problem),
        (Err(e), None) => Err(format!("not valid {}: {e}", format.name())),
    }
}

/// One reading under way.
struct Reading<'s> {
    format: Format,
    scheme: &'s str,
    keep: usize,
    parsed: Parsed,
    /// The first mistake in the file's shape, in our words (the parser's error then only
    /// stops the reading; its text would add a position only YAML and JSON word differently).
    problem: Option<String>,
}

/// Notes `problem` (the first one wins) and gives the parser an error to stop on.
fn fail<E: de::Error>(slot: &mut Option<String>, problem: String) -> E {
    let error = E::custom(&problem);
    slot.get_or_insert(problem);
    error
}

impl<'de> DeserializeSeed<'de> for &mut Reading<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(FileVisitor(self))
    }
}

/// Anything that is not the value a visitor wants, as a JSON value for the message.
macro_rules! other_as_value {
    ($on_other:ident) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            self.$on_other(Value::Bool(v))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            self.$on_other(Value::from(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            self.$on_other(Value::from(v))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            self.$on_other(Value::from(v))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            self.$on_other(Value::String(v.to_string()))
        }
    };
}

struct FileVisitor<'r, 's>(&'r mut Reading<'s>);

impl FileVisitor<'_, '_> {
    fn other<E: de::Error>(self, _: Value) -> Result<(), E> {
        let format = self.0.format.name();
        Err(fail(&mut self.0.problem, format!("expected a {format} list of groups, each {GROUP_SHAPE}")))
    }
}

impl<'de> Visitor<'de> for FileVisitor<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "a list of groups, each {GROUP_SHAPE}")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut groups: A) -> Result<(), A::Error> {
        let mut entry = 0;
        while groups.next_element_seed(GroupSeed { reading: &mut *self.0, entry })?.is_some() {
            entry += 1;
        }
        Ok(())
    }

    /// An empty YAML document (or only comments) is no groups, as Prometheus reads it.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        match self.0.format {
            Format::Yaml => Ok(()),
            Format::Json => self.other(Value::Null),
        }
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.other(Value::Null)
    }

    other_as_value!(other);
}

/// One group, the `entry`th.
struct GroupSeed<'r, 's> {
    reading: &'r mut Reading<'s>,
    entry: usize,
}

impl<'de> DeserializeSeed<'de> for GroupSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl GroupSeed<'_, '_> {
    fn other<E: de::Error>(self, _: Value) -> Result<(), E> {
        Err(fail(&mut self.reading.problem, format!("entry {}: expected {GROUP_SHAPE}", self.entry)))
    }
}

impl<'de> Visitor<'de> for GroupSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(GROUP_SHAPE)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut group: A) -> Result<(), A::Error> {
        let i = self.entry;
        let reading = self.reading;
        let mut has_targets = false;
        let mut unknown: Option<String> = None;
        let mut targets = Targets { entry: i, room: 0, kept: Vec::new(), listed: 0 };
        targets.room = reading.keep.saturating_sub(reading.parsed.targets.len());
        let mut labels = BTreeMap::new();
        while let Some(key) = group.next_key::<String>()? {
            match key.as_str() {
                "targets" => {
                    has_targets = true;
                    group.next_value_seed(TargetsSeed {
                        targets: &mut targets,
                        problem: &mut reading.problem,
                    })?;
                }
                "labels" => {
                    let value: Value = group.next_value()?;
                    labels = labels_of(i, value).map_err(|p| fail(&mut reading.problem, p))?;
                }
                // Other keys are ignored (as Prometheus does for JSON), unless `targets` is
                // missing: then a key like `target` is a mistake, not an extension.
                _ => {
                    unknown.get_or_insert(key);
                    group.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !has_targets && let Some(key) = unknown {
            let problem = format!("entry {i}: unknown key `{key}` and no `targets`: expected {GROUP_SHAPE}");
            return Err(fail(&mut reading.problem, problem));
        }
        let scheme = labels.get("__scheme__").map_or(reading.scheme, String::as_str);
        reading.parsed.cut += targets.listed - targets.kept.len() as u64;
        for t in targets.kept {
            let url = if t.contains("://") { t.clone() } else { format!("{scheme}://{t}") };
            let name = labels.get("cluster").cloned().unwrap_or_else(|| name_of(&t));
            reading.parsed.targets.push(Target { name, url });
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        self.other(Value::Null)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.other(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.other(Value::Null)
    }

    other_as_value!(other);
}

/// A group's `targets` as they are read: those kept (at most `room`) and how many were listed.
struct Targets {
    entry: usize,
    room: usize,
    kept: Vec<String>,
    listed: u64,
}

struct TargetsSeed<'t> {
    targets: &'t mut Targets,
    problem: &'t mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for TargetsSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl TargetsSeed<'_> {
    fn other<E: de::Error>(self, got: Value) -> Result<(), E> {
        let problem = format!("entry {}: targets: expected a list of strings, got {got}", self.targets.entry);
        Err(fail(self.problem, problem))
    }
}

impl<'de> Visitor<'de> for TargetsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of strings \"host:port\"")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut list: A) -> Result<(), A::Error> {
        let t = self.targets;
        // One target at a time: the file's size does not decide what is held.
        while let Some(target) = list.next_element::<Value>()? {
            let j = t.listed;
            let Some(text) = target.as_str().filter(|s| !s.trim().is_empty()) else {
                let problem = format!(
                    "entry {}: targets[{j}]: expected a non-empty string \"host:port\", got {target}",
                    t.entry
                );
                return Err(fail(self.problem, problem));
            };
            if t.kept.len() < t.room {
                t.kept.push(text.to_string());
            }
            t.listed += 1;
        }
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let got = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.other(got)
    }

    other_as_value!(other);
}

/// A target as a cluster name: letters, digits, '-', '_' and '.' kept, anything else '_'
/// (`flink-orders-rest.team:8081` is `flink-orders-rest.team_8081`).
pub(crate) fn name_of(target: &str) -> String {
    let bare = target.split_once("://").map_or(target, |(_, rest)| rest).trim_end_matches('/');
    bare.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect()
}

/// A group's labels, every value as a string (YAML writes `port: 8081` unquoted; Prometheus
/// takes scalars as strings).
fn labels_of(i: usize, value: Value) -> Result<BTreeMap<String, String>, String> {
    let mut labels = BTreeMap::new();
    match value {
        Value::Null => {}
        Value::Object(ls) => {
            for (k, v) in ls {
                let v = match v {
                    Value::String(s) => s,
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => return Err(format!("entry {i}: labels.{k}: expected a string, got {other}")),
                };
                labels.insert(k, v);
            }
        }
        other => return Err(format!("entry {i}: labels: expected a map of names to strings, got {other}")),
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(n: usize) -> String {
        let group =
            |i: usize| format!(r#"{{"targets": ["h{i}:1", "g{i}:1"], "labels": {{"team": "t{i}"}}}}"#);
        format!("[{}]", (0..n).map(group).collect::<Vec<_>>().join(","))
    }

    #[test]
    fn targets_past_the_cap_are_counted_and_not_kept() {
        let text = groups(1000);
        let all = read(text.as_bytes(), Format::Json, "http", usize::MAX).unwrap();
        assert_eq!((all.targets.len(), all.cut), (2000, 0));
        let capped = read(text.as_bytes(), Format::Json, "http", 3).unwrap();
        assert_eq!(capped.targets, all.targets[..3]);
        assert_eq!(capped.cut, 1997);
        // A mistake past the cap still fails the file, as it did when the whole file was read.
        let bad = text.replace(r#""g999:1""#, "7");
        let err = read(bad.as_bytes(), Format::Json, "http", 3).unwrap_err();
        assert_eq!(err, "entry 999: targets[1]: expected a non-empty string \"host:port\", got 7");
    }

    #[test]
    fn a_yaml_file_is_capped_the_same_way() {
        let text = "- targets: [a:1, b:1]\n  labels: {cluster: x}\n- targets: [c:1]\n";
        let parsed = read(text.as_bytes(), Format::Yaml, "https", 2).unwrap();
        let urls: Vec<&str> = parsed.targets.iter().map(|t| t.url.as_str()).collect();
        assert_eq!((urls, parsed.cut), (vec!["https://a:1", "https://b:1"], 1));
    }

    #[test]
    fn trailing_garbage_and_a_json_null_are_mistakes() {
        assert!(parse_as("[] x", Format::Json, "http").unwrap_err().starts_with("not valid JSON: "));
        assert!(parse_as("null", Format::Json, "http").unwrap_err().starts_with("expected a JSON list"));
        assert_eq!(parse_as("", Format::Yaml, "http").unwrap(), []);
        assert_eq!(parse_as("[{\"targets\": null}]", Format::Json, "http").unwrap(), []);
    }
}
