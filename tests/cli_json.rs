//! The JSON contracts of `diagnose --format json` and `scan-logs --format json`: the typed
//! examples in docs/cli-json.md against the output for every captured fixture (the goldens
//! under tests/golden/, which `golden_text` keeps equal to what the binary prints). A field the
//! output has and the page does not, a documented field no output has, or a value of another
//! type fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

type Shape = BTreeMap<String, BTreeSet<&'static str>>;

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every path (`jobs[].failures[].summary`) with the types its values have; the keys of an
/// object at a path in `maps` count as one key `*`.
fn shape(v: &Value, path: &str, maps: &BTreeSet<String>, out: &mut Shape) {
    out.entry(path.to_string()).or_default().insert(kind_of(v));
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let key = if maps.contains(path) || k.starts_with('<') { "*" } else { k.as_str() };
                shape(x, &format!("{path}.{key}"), maps, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                shape(x, &format!("{path}[]"), maps, out);
            }
        }
        _ => {}
    }
}

/// The example after "```json <name>" in docs/cli-json.md.
fn example(name: &str) -> Value {
    let doc = std::fs::read_to_string(root().join("docs/cli-json.md")).unwrap();
    let start = doc.find(&format!("```json {name}\n")).unwrap_or_else(|| panic!("no ```json {name} block"));
    let body = &doc[start..].split_once('\n').unwrap().1;
    let body = body.split("\n```").next().unwrap();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("the {name} example is not JSON: {e}"))
}

fn goldens(file: &str) -> Vec<(PathBuf, Value)> {
    let mut out = Vec::new();
    let dir = root().join("tests/golden");
    for version in std::fs::read_dir(&dir).unwrap().flatten() {
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            let path = scenario.path().join(file);
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path.clone(), serde_json::from_str(&text).unwrap()));
            }
        }
    }
    out
}

/// What is wrong between the documented example and the outputs.
fn mismatches(example: &Value, outputs: &[(PathBuf, Value)]) -> Vec<String> {
    let mut documented = Shape::new();
    shape(example, "", &BTreeSet::new(), &mut documented);
    let maps: BTreeSet<String> =
        documented.keys().filter_map(|p| p.strip_suffix(".*")).map(str::to_string).collect();
    let mut seen = Shape::new();
    for (_, v) in outputs {
        shape(v, "", &maps, &mut seen);
    }
    let mut bad = Vec::new();
    for (path, types) in &seen {
        match documented.get(path) {
            None => bad.push(format!("`{path}` is in the output but not documented")),
            Some(want) => {
                for t in types.iter().filter(|t| **t != "null") {
                    if !want.contains(t) && !want.contains("null") {
                        bad.push(format!("`{path}` is {t} in the output, {want:?} in the doc"));
                    }
                }
            }
        }
    }
    for path in documented.keys() {
        // An element of an array that is empty in every output cannot be seen; its array can.
        // So can the keys of a map that is empty in every output.
        let under_empty_array = path.match_indices("[]").any(|(i, _)| {
            let element = &path[..i + 2];
            !seen.contains_key(element) && seen.contains_key(&path[..i])
        }) || path.match_indices(".*").any(|(i, _)| {
            let element = &path[..i + 2];
            !seen.contains_key(element) && seen.contains_key(&path[..i])
        });
        if !seen.contains_key(path) && !under_empty_array {
            bad.push(format!("`{path}` is documented but no output has it"));
        }
    }
    bad
}

#[test]
fn diagnose_json_is_what_docs_cli_json_md_says() {
    let outputs = goldens("diagnose.json");
    assert!(outputs.len() >= 30, "{} diagnose goldens", outputs.len());
    let bad = mismatches(&example("diagnose"), &outputs);
    assert!(bad.is_empty(), "docs/cli-json.md vs diagnose --format json:\n{}", bad.join("\n"));
}

#[test]
fn scan_logs_json_is_what_docs_cli_json_md_says() {
    let outputs = goldens("scan-logs.json");
    assert!(outputs.len() >= 30, "{} scan-logs goldens", outputs.len());
    let bad = mismatches(&example("scan-logs"), &outputs);
    assert!(bad.is_empty(), "docs/cli-json.md vs scan-logs --format json:\n{}", bad.join("\n"));
}

/// The comparison notices an undocumented field, a stale one and a changed type.
#[test]
fn the_contract_check_can_fail() {
    let doc: Value = serde_json::json!({"a": 1, "b": [{"c": "x"}], "m": {"<k>": 1}});
    let out = |v: Value| vec![(Path::new("o").to_path_buf(), v)];
    assert!(mismatches(&doc, &out(serde_json::json!({"a": 2, "b": [], "m": {"p": 3, "q": 4}}))).is_empty());
    assert_eq!(mismatches(&doc, &out(serde_json::json!({"a": 2, "b": [], "m": {}, "new": 1}))).len(), 1);
    assert_eq!(mismatches(&doc, &out(serde_json::json!({"b": [], "m": {}}))).len(), 1);
    assert_eq!(mismatches(&doc, &out(serde_json::json!({"a": "2", "b": [], "m": {}}))).len(), 1);
}
