//! The layering of `src/`, checked over the paths the code uses (not words): the module graph
//! is built from every `use` and every `crate::`/`super::`/`self::`/child-module path of each
//! file (its code before `#[cfg(test)]`: tests may use what they like), and it must have no
//! cycle between files and no import against the flow that ARCHITECTURE.md describes
//! (sources -> state -> model, rules -> outputs; commands at the end).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `src/a/b.rs` -> `a::b`, `src/a/mod.rs` -> `a`; lib.rs and main.rs are the crate root.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["lib"] || parts == ["main"] {
            continue;
        }
        out.insert(parts.join("::"), f);
    }
    out
}

/// The code with comments, string and char literals blanked (so a path in a doc comment or a
/// message is no import).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !ident_char(b.get(i.wrapping_sub(1)))
        {
            // A raw string r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\'') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// `a::{b, c::{d, e}}` -> `a::b`, `a::c::d`, `a::c::e` (each as its segments).
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut depth = 0;
    let mut start = 0;
    let bytes: Vec<char> = tree.chars().collect();
    let mut items = Vec::new();
    for (i, c) in bytes.iter().enumerate() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(bytes[start..i].iter().collect::<String>());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(bytes[start..].iter().collect::<String>());
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let Some(open) = item.find('{') {
            let head: Vec<String> = segments(&item[..open]);
            let inner = &item[open + 1..item.rfind('}').unwrap()];
            let mut p = prefix.to_vec();
            p.extend(head);
            expand(inner, &p, out);
        } else {
            let path = item.split(" as ").next().unwrap();
            let mut p = prefix.to_vec();
            p.extend(segments(path));
            out.push(p);
        }
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::").map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
}

/// Every path a file's code names: `use` trees and `crate::`, `super::`, `self::` paths, as
/// absolute module segments (a relative `use child::…` or `child::…` of a module declared in
/// the file too).
fn paths_of(module: &str, code: &str, all: &BTreeMap<String, PathBuf>) -> Vec<Vec<String>> {
    let here: Vec<String> = if module.is_empty() { vec![] } else { segments(module) };
    // Inline modules (`mod name { … }`) shift what `super` and `self` mean inside them.
    let chars: Vec<char> = code.chars().collect();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut raw = Vec::new();
    let mut i = 0;
    let word_at = |i: usize, w: &str| {
        w.chars().enumerate().all(|(k, c)| chars.get(i + k) == Some(&c))
            && !ident_char(chars.get(i.wrapping_sub(1)))
            && !ident_char(chars.get(i + w.len()))
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '{' {
            depth += 1;
        } else if c == '}' {
            depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
        }
        let scope: Vec<String> = here.iter().cloned().chain(inline.iter().map(|(n, _)| n.clone())).collect();
        if word_at(i, "mod") {
            let rest: String = chars[i + 3..].iter().take_while(|c| **c != ';' && **c != '{').collect();
            let end = i + 3 + rest.len();
            if chars.get(end) == Some(&'{') {
                inline.push((rest.trim().to_string(), depth));
            }
            i += 3;
            continue;
        }
        if word_at(i, "use") {
            let stmt: String = chars[i + 3..].iter().take_while(|c| **c != ';').collect();
            let mut found = Vec::new();
            expand(&stmt, &[], &mut found);
            for p in found {
                raw.push((scope.clone(), p));
            }
            i += 3 + stmt.len();
            continue;
        }
        if ident_char(Some(&c)) && !ident_char(chars.get(i.wrapping_sub(1))) {
            // A path: identifiers joined by `::`.
            let mut j = i;
            while j < chars.len()
                && (ident_char(chars.get(j)) || (chars[j] == ':' && chars.get(j + 1) == Some(&':')))
            {
                j += if chars[j] == ':' { 2 } else { 1 };
            }
            let text: String = chars[i..j].iter().collect();
            if text.contains("::") {
                raw.push((scope.clone(), segments(&text)));
            }
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
    let mut out = Vec::new();
    for (scope, p) in raw {
        let Some(first) = p.first() else { continue };
        let abs = match first.as_str() {
            "crate" => p[1..].to_vec(),
            "self" => scope.iter().cloned().chain(p[1..].iter().cloned()).collect(),
            "super" => {
                let mut base = scope.clone();
                let mut rest = &p[..];
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.into_iter().chain(rest.iter().cloned()).collect()
            }
            _ => {
                // A child module of this one, named relatively.
                let child: Vec<String> = scope.iter().cloned().chain(p.iter().cloned()).collect();
                if all.contains_key(&child[..scope.len() + 1].join("::")) { child } else { continue }
            }
        };
        out.push(abs);
    }
    out
}

/// The module graph: file module -> the file modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let all = modules(&root().join("src"));
    // A file declared `#[cfg(test)] mod name;` (a `tests.rs`) is all test code, like the
    // `#[cfg(test)]` part of a file: left out.
    let mut test_only = BTreeSet::new();
    for (module, file) in &all {
        let text = std::fs::read_to_string(file).unwrap();
        for after in text.split("#[cfg(test)]").skip(1) {
            if let Some(name) = after.trim_start().strip_prefix("mod ").and_then(|r| r.split_once(';')) {
                let name = name.0.trim();
                if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                test_only.insert(if module.is_empty() {
                    name.to_string()
                } else {
                    format!("{module}::{name}")
                });
            }
        }
    }
    let mut g = BTreeMap::new();
    for (module, file) in &all {
        let text = std::fs::read_to_string(file).unwrap();
        let text = if test_only.contains(module) { String::new() } else { text };
        let code = code_only(text.split("#[cfg(test)]").next().unwrap());
        let mut to = BTreeSet::new();
        for p in paths_of(module, &code, &all) {
            // The longest prefix that is a file of its own.
            let target = (1..=p.len()).rev().map(|n| p[..n].join("::")).find(|m| all.contains_key(m));
            if let Some(target) = target.filter(|t| t != module) {
                to.insert(target);
            }
        }
        g.insert(module.clone(), to);
    }
    g
}

/// Cycles (strongly connected components of more than one file), each sorted.
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan, iteratively simple enough for a few dozen files: recursion is fine.
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            if !t.index.contains_key(w.as_str()) {
                visit(t, w);
                let lw = t.low[w.as_str()];
                let lv = t.low[v];
                t.low.insert(v, lv.min(lw));
            } else if t.on.contains(w.as_str()) {
                let iw = t.index[w.as_str()];
                let lv = t.low[v];
                t.low.insert(v, lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        out: vec![],
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// Which layer a module is in (ARCHITECTURE.md, "Layers").
fn layer(module: &str) -> &'static str {
    let top = module.split("::").next().unwrap();
    match top {
        // The core, bottom up: each of its layers imports only those below it.
        "time" | "observe" | "stats" => "core:vocabulary",
        "model" | "shadow" => "core:model",
        "state" if matches!(module, "state::persist" | "state::store") => "state-io",
        "state" => "core:state",
        "advice" => "core:advice",
        "rules" => "core:rules",
        "health" => "core:health",
        "config" => "config",
        "sources" => "sources",
        // outbound puts credentials on the requests of sources (Flink) and outputs (Alertmanager);
        // counters holds the types of what sources and outputs count, kept in `app`.
        "app" | "counters" | "process" | "telemetry" | "outbound" | "heap" | "open_files" => "runtime",
        "outputs" => "outputs",
        // preflight reads the machine (secret and TLS files, the state directory) at start and
        // reload, with the outputs' TLS loader.
        "daemon" | "preflight" => "daemon",
        "commands" => "commands",
        other => panic!("module {other} has no layer: add it to tests/layering.rs and ARCHITECTURE.md"),
    }
}

/// What each layer may import besides itself.
fn allowed(from: &str, to: &str) -> bool {
    const CORE: [&str; 6] =
        ["core:vocabulary", "core:model", "core:state", "core:advice", "core:rules", "core:health"];
    let core_rank = |layer: &str| CORE.iter().position(|c| *c == layer);
    if let Some(f) = core_rank(from) {
        return core_rank(to).is_some_and(|t| t < f);
    }
    let to = if to.starts_with("core:") { "core" } else { to };
    match from {
        "state-io" => matches!(to, "core"),
        "config" => matches!(to, "core" | "state-io"),
        "sources" => matches!(to, "core" | "config" | "runtime"),
        "runtime" => matches!(to, "core" | "state-io" | "config"),
        "outputs" => matches!(to, "core" | "state-io" | "config" | "runtime"),
        "daemon" => !matches!(to, "commands"),
        "commands" => true,
        _ => unreachable!(),
    }
}

/// The layer table itself allows no cycle: some order of the layers has every allowed import
/// point down it (a table that let runtime import outputs and outputs import runtime would not).
#[test]
fn the_layer_table_allows_no_cycle() {
    const LAYERS: [&str; 13] = [
        "core:vocabulary",
        "core:model",
        "core:state",
        "core:advice",
        "core:rules",
        "core:health",
        "state-io",
        "config",
        "sources",
        "runtime",
        "outputs",
        "daemon",
        "commands",
    ];
    let mut left: Vec<&str> = LAYERS.to_vec();
    // Peel off, again and again, the layers that import nothing still left (Kahn's algorithm).
    while !left.is_empty() {
        let sinks: Vec<&str> =
            left.iter().copied().filter(|&a| !left.iter().any(|&b| a != b && allowed(a, b))).collect();
        assert!(!sinks.is_empty(), "the layer table allows a cycle among {left:?}");
        left.retain(|l| !sinks.contains(l));
    }
}

/// Imports against the flow, as `from -> to`.
fn back_edges(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut out = Vec::new();
    for (from, tos) in g {
        for to in tos {
            let (lf, lt) = (layer(from), layer(to));
            if lf != lt && !allowed(lf, lt) {
                out.push(format!("{from} ({lf}) -> {to} ({lt})"));
            }
        }
    }
    out
}

/// Cycles still in the tree, each named with why it is not broken yet (ARCHITECTURE.md says
/// so too). The test fails when one of them is gone as well, so this list stays true.
const KNOWN_CYCLES: &[&[&str]] = &[];

#[test]
fn the_module_graph_has_no_cycle_between_files() {
    let g = graph();
    assert!(g.len() >= 40, "the graph has {} files: the scan of src/ is broken", g.len());
    let found = cycles(&g);
    let known: Vec<Vec<String>> =
        KNOWN_CYCLES.iter().map(|c| c.iter().map(|s| s.to_string()).collect()).collect();
    let new: Vec<_> = found.iter().filter(|c| !known.contains(c)).collect();
    assert!(new.is_empty(), "import cycles between files: {new:?}");
    let gone: Vec<_> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(gone.is_empty(), "cycles in KNOWN_CYCLES no longer exist, remove them: {gone:?}");
}

/// Imports against the flow still in the tree, with the cycle above that they belong to. The
/// test fails when one of them is gone, so this list stays true.
const KNOWN_BACK_EDGES: &[&str] = &[];

#[test]
fn no_import_goes_against_the_flow() {
    let g = graph();
    let found = back_edges(&g);
    let wrong: Vec<_> = found.iter().filter(|w| !KNOWN_BACK_EDGES.contains(&w.as_str())).collect();
    assert!(
        wrong.is_empty(),
        "imports against the flow (ARCHITECTURE.md, Layers):\n{}",
        wrong.iter().map(|w| w.as_str()).collect::<Vec<_>>().join("\n")
    );
    let gone: Vec<_> = KNOWN_BACK_EDGES.iter().filter(|k| !found.iter().any(|f| f == *k)).collect();
    assert!(gone.is_empty(), "KNOWN_BACK_EDGES no longer in the tree, remove them: {gone:?}");
}

#[test]
fn the_graph_sees_the_imports_it_must() {
    // The scan itself: known edges of every kind of path are found.
    let g = graph();
    let has = |from: &str, to: &str| g.get(from).is_some_and(|t| t.contains(to));
    assert!(has("daemon", "app"), "a `use crate::…` edge");
    assert!(has("sources::logs::tail::cycle", "sources::logs::tail::follow"), "a `use super::…` edge");
    assert!(has("commands::demo::rest", "commands::demo::cluster"), "a `crate::…` use edge");
    assert!(has("commands::demo", "commands::demo::cluster"), "a relative child-module edge");
    assert!(has("sources::poller", "sources::flink::client"), "a `crate::…` path edge");
}

#[test]
fn cycles_and_back_edges_are_detected() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("state".into()).or_default().insert("outputs::export".into());
    g.entry("outputs::export".into()).or_default().insert("state".into());
    g.entry("daemon".into()).or_default().insert("commands::diagnose".into());
    // Inside the core: the state below health (health reads the state, never the other way).
    g.entry("state::mod_b".into()).or_default().insert("health::x".into());
    assert_eq!(cycles(&g), vec![vec!["outputs::export".to_string(), "state".to_string()]]);
    let wrong = back_edges(&g);
    assert!(wrong.iter().any(|w| w.starts_with("state (core:state) -> outputs::export")), "{wrong:?}");
    assert!(wrong.iter().any(|w| w.starts_with("state::mod_b (core:state) -> health::x")), "{wrong:?}");
    assert!(wrong.iter().any(|w| w.starts_with("daemon (daemon) -> commands::diagnose")), "{wrong:?}");
}
