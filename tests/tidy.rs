//! Architecture rules a machine can check: module docs, and a pure core without I/O or clocks.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_file_says_what_it_is_for() {
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        if root().join(dir).exists() {
            rust_files(&root().join(dir), &mut files);
        }
    }
    let undocumented: Vec<_> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().trim_start().starts_with("//!"))
        .collect();
    assert!(undocumented.is_empty(), "files without a //! header: {undocumented:?}");
}

/// The pure core: no network, no filesystem, no clock, no async runtime (ARCHITECTURE.md).
const PURE: &[&str] = &[
    "src/observe",
    "src/stats.rs",
    "src/state/mod.rs",
    "src/state/checkpoint_ids.rs",
    "src/state/cluster.rs",
    "src/state/failure_text.rs",
    "src/state/history.rs",
    "src/state/job",
    "src/state/logs.rs",
    "src/state/outbox.rs",
    "src/state/record.rs",
    "src/state/restore.rs",
    "src/state/tolerance.rs",
    "src/state/traced.rs",
    "src/state/threads.rs",
    // time.rs is not here: `Timestamp::now` reads the clock (for the I/O edges).
    "src/sources/flink/dto.rs",
    "src/sources/flink/convert.rs",
    "src/sources/flink/threads.rs",
    "src/state/evidence.rs",
    "src/state/storage.rs",
    "src/sources/storage/analyse.rs",
    "src/sources/flink/metrics.rs",
    "src/model",
    "src/shadow",
    "src/advice",
    // The log matcher; its unit tests (parse/tests.rs) read the fixtures.
    "src/sources/logs/parse/mod.rs",
    "src/sources/logs/parse/patterns.rs",
    "src/sources/logs/parse/fast.rs",
    "src/sources/logs/parse/records.rs",
    "src/sources/logs/parse/fields.rs",
    "src/sources/logs/parse/causes.rs",
    "src/sources/logs/parse/lines.rs",
    "src/sources/logs/trace.rs",
    "src/sources/file_sd.rs",
    "src/sources/poller/schedule.rs",
    "src/sources/poller/in_flight.rs",
    "src/sources/poller/phase.rs",
    "src/rules",
    "src/health",
];

const FORBIDDEN: &[&str] =
    &["tokio", "reqwest", "std::fs", "std::net", "SystemTime", "Instant::now", "Timestamp::now", "axum"];

#[test]
fn the_pure_core_does_no_io_and_reads_no_clock() {
    let mut files = Vec::new();
    for p in PURE {
        let path = root().join(p);
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else if path.exists() {
            files.push(path);
        }
    }
    assert!(files.len() >= 5);
    let mut violations = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Tests inside a pure file may use what they like.
        let code = text.split("#[cfg(test)]").next().unwrap();
        for word in FORBIDDEN {
            if code.lines().any(|l| !l.trim_start().starts_with("//") && l.contains(word)) {
                violations.push(format!("{}: {word}", f.strip_prefix(root()).unwrap().display()));
            }
        }
    }
    assert!(violations.is_empty(), "pure modules touching the outside world: {violations:?}");
}

/// The code map of ARCHITECTURE.md and the tree of `src/` name the same folders and files: a
/// heading `src/<folder>/` or `src/<file>.rs` for each, where a file inside a folder may
/// instead be named `` `<file>.rs` `` in its folder's entry; every `src/…` path the code map
/// names exists, and so does every bullet's file.
#[test]
fn architecture_codemap_matches_the_tree() {
    let doc = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let map = doc.split("\n## Code map\n").nth(1).expect("a Code map section");
    let map = map.split("\n## ").next().unwrap();
    let src = root().join("src");
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    // Sections: (heading path, body).
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in map.lines() {
        let heading = line.trim_start_matches('#');
        if line.starts_with("###") && heading.trim().starts_with('`') {
            sections.push((heading.trim().trim_matches('`').to_string(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    for (path, body) in &sections {
        if !root().join(path).exists() {
            stale.push(path.clone());
        }
        if let Some(folder) = path.strip_suffix('/') {
            for line in body.lines().filter(|l| l.starts_with("* `")) {
                let file = line[3..].split('`').next().unwrap();
                if file.ends_with(".rs") && !root().join(folder).join(file).exists() {
                    stale.push(format!("{folder}/{file}"));
                }
            }
        }
    }
    for word in map.split('`').filter(|w| w.starts_with("src/")) {
        if !root().join(word).exists() {
            stale.push(word.to_string());
        }
    }
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut dirs = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
        let mut dir = std::path::Path::new(&rel).parent();
        while let Some(d) = dir.filter(|d| *d != std::path::Path::new("src")) {
            dirs.push(format!("{}/", d.to_string_lossy()));
            dir = d.parent();
        }
        let name = rel.rsplit('/').next().unwrap();
        if rel == "src/lib.rs" || rel == "src/main.rs" || name == "mod.rs" {
            continue;
        }
        let folder = &rel[..rel.len() - name.len()];
        let named = sections
            .iter()
            .any(|(p, body)| *p == rel || (*p == folder && body.contains(&format!("`{name}`"))));
        if !named {
            missing.push(rel);
        }
    }
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        if !sections.iter().any(|(p, _)| *p == d) {
            missing.push(d);
        }
    }
    assert!(missing.is_empty(), "in src/ but not in ARCHITECTURE.md's code map: {missing:?}");
    assert!(stale.is_empty(), "in ARCHITECTURE.md's code map but not in src/: {stale:?}");
}

#[test]
fn every_alert_has_severity_summary_description_and_a_runbook_section() {
    let rules = std::fs::read_to_string(root().join("alerts/flink-checkpoints.rules.yml")).unwrap();
    let runbook = std::fs::read_to_string(root().join("docs/runbook.md")).unwrap();
    let blocks: Vec<&str> = rules.split("- alert: ").skip(1).collect();
    assert!(blocks.len() >= 10);
    for block in blocks {
        let name = block.split_whitespace().next().unwrap();
        for key in ["severity: ", "class: ", "summary: ", "description: "] {
            assert!(block.contains(key), "{name}: no {key}");
        }
        let anchor = format!("runbook.md#{}", name.to_lowercase());
        assert!(block.contains(&anchor), "{name}: runbook_url must point at {anchor}");
        assert!(runbook.contains(&format!("\n## {name}\n")), "docs/runbook.md has no section for {name}");
    }
}

/// The daemon's built-in pack and the Prometheus rule file carry the same Flink alerts; the file
/// adds only alerts about checkpoint-sentinel itself (which the daemon cannot page about through
/// an Alertmanager it may not reach), of which the pack has only those in `IN_BOTH`.
#[test]
fn the_rule_file_and_the_built_in_pack_have_the_same_flink_alerts() {
    let rules = std::fs::read_to_string(root().join("alerts/flink-checkpoints.rules.yml")).unwrap();
    let in_file: std::collections::BTreeSet<String> = rules
        .split("- alert: ")
        .skip(1)
        .map(|block| block.split_whitespace().next().unwrap().to_string())
        .collect();
    let built_in: std::collections::BTreeSet<String> =
        checkpoint_sentinel::rules::builtin::rules().into_iter().map(|r| r.name).collect();
    // A failing disk does not cut the daemon off its Alertmanager: this one is raised by both.
    const IN_BOTH: [&str; 1] = ["CheckpointSentinelStoreFailing"];
    let (watcher, flink): (Vec<&String>, Vec<&String>) = in_file
        .iter()
        .partition(|name| name.starts_with("CheckpointSentinel") && !IN_BOTH.contains(&name.as_str()));
    assert_eq!(flink.into_iter().cloned().collect::<std::collections::BTreeSet<_>>(), built_in);
    assert!(watcher.len() >= 5, "the watcher's own alerts: {watcher:?}");
}

fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            text_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// CJK ideographs, kana, hangul, CJK punctuation and full-width forms.
fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x2E80..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFE30..=0xFE4F | 0xFF00..=0xFFEF)
}

/// Why a line of user-facing text breaks the rule, if it does.
fn foreign_or_seed(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    if lower.contains("seed 00") || lower.contains("seeds 00") {
        Some("cites a seed article the reader cannot open")
    } else if line.chars().any(is_cjk) {
        Some("is not English")
    } else {
        None
    }
}

/// What a user reads (output, alert text, runbook, docs, configuration) speaks English and cites
/// pages the user can open: never the background articles ("seed 000 §3.4") and no CJK text.
#[test]
fn user_facing_text_is_english_and_cites_no_seed_article() {
    let mut files = Vec::new();
    for dir in ["src", "alerts", "docs", "config"] {
        text_files(&root().join(dir), &mut files);
    }
    files.extend(["README.md", "ARCHITECTURE.md"].map(|f| root().join(f)));
    let mut violations = Vec::new();
    let mut read = 0;
    for f in &files {
        // Binary files (the screenshots) are not text.
        let Ok(text) = std::fs::read_to_string(f) else { continue };
        read += 1;
        for (i, line) in text.lines().enumerate() {
            if let Some(why) = foreign_or_seed(line) {
                violations.push(format!(
                    "{}:{}: {why}: {line}",
                    f.strip_prefix(root()).unwrap().display(),
                    i + 1
                ));
            }
        }
    }
    assert!(read >= 50, "only {read} text files read");
    assert!(violations.is_empty(), "user-facing text:\n{}", violations.join("\n"));
    // The check itself can fail.
    assert!(foreign_or_seed("see seed 000 §3.4").is_some());
    assert!(foreign_or_seed("TIMEOUT (\u{8d85}\u{65f6}\u{578b})").is_some());
    assert!(foreign_or_seed("timeout: the snapshot itself takes too long").is_none());
}

/// A file of `src/` holds at most this many lines before its tests: past it, it does several
/// jobs, and is split along their seams (ARCHITECTURE.md names each part).
const MAX_FILE_LINES: usize = 900;

/// A function (method, nested function) of `src/` is at most this many lines long, from its
/// `fn` line to its closing brace, tests aside.
const MAX_FN_LINES: usize = 150;

/// ARCHITECTURE.md is read whole, or not at all: it stays this short.
const MAX_ARCHITECTURE_LINES: usize = 300;

/// The files of `src/` that are test code only: declared `#[cfg(test)] mod name;` by their
/// parent (a `tests.rs`).
fn test_only_files(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        // A `mod.rs`, `lib.rs` or `main.rs` declares files beside it; `a.rs` declares them in `a/`.
        let stem = f.file_stem().unwrap().to_string_lossy();
        let dir = if ["mod", "lib", "main"].contains(&stem.as_ref()) {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for after in text.split("#[cfg(test)]").skip(1) {
            let Some((name, _)) = after.trim_start().strip_prefix("mod ").and_then(|r| r.split_once(';'))
            else {
                continue;
            };
            out.push(dir.join(format!("{}.rs", name.trim())));
            out.push(dir.join(name.trim()).join("mod.rs"));
        }
    }
    out
}

/// `src/`'s files that hold code besides tests, relative to the crate.
fn code_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let tests = test_only_files(&files);
    files.sort();
    files
        .iter()
        .filter(|f| !tests.contains(f))
        .map(|f| {
            let rel = f.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

#[test]
fn no_file_holds_more_than_900_lines_before_its_tests() {
    let long: Vec<String> = code_files()
        .iter()
        .map(|(path, text)| {
            let lines = text.lines().take_while(|l| !l.trim_start().starts_with("#[cfg(test)]")).count();
            (path, lines)
        })
        .filter(|(_, lines)| *lines > MAX_FILE_LINES)
        .map(|(path, lines)| format!("{path}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines before their tests (split them along their seams):\n{}",
        long.join("\n")
    );
}

/// Every function of a parsed file with its length in lines, test code left out: a `mod` or
/// function marked `#[cfg(test)]` or `#[test]`.
struct FnLengths {
    /// The enclosing functions and types, for the name.
    scope: Vec<String>,
    found: Vec<(String, usize)>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("test")
            || (a.path().is_ident("cfg")
                && a.parse_args::<syn::Meta>().is_ok_and(|m| m.path().is_ident("test")))
    })
}

impl FnLengths {
    fn record(&mut self, name: &syn::Ident, fn_token: &syn::token::Fn, block: &syn::Block) {
        let first = fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        let name = self.scope.iter().chain([&name.to_string()]).cloned().collect::<Vec<_>>().join("::");
        self.found.push((name, last + 1 - first));
    }
}

impl<'ast> syn::visit::Visit<'ast> for FnLengths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.record(&f.sig.ident, &f.sig.fn_token, &f.block);
        self.scope.push(f.sig.ident.to_string());
        syn::visit::visit_item_fn(self, f);
        self.scope.pop();
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_test(&i.attrs) {
            return;
        }
        let ty = match &*i.self_ty {
            syn::Type::Path(p) => p.path.segments.last().map_or("?".to_string(), |s| s.ident.to_string()),
            _ => "?".to_string(),
        };
        self.scope.push(ty);
        syn::visit::visit_item_impl(self, i);
        self.scope.pop();
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.record(&f.sig.ident, &f.sig.fn_token, &f.block);
        self.scope.push(f.sig.ident.to_string());
        syn::visit::visit_impl_item_fn(self, f);
        self.scope.pop();
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = f.default.as_ref().filter(|_| !is_test(&f.attrs)) {
            self.record(&f.sig.ident, &f.sig.fn_token, block);
        }
        syn::visit::visit_trait_item_fn(self, f);
    }
}

/// Every function of `src/`'s code (tests aside) as (file, name, lines), longest first.
fn function_lengths() -> Vec<(String, String, usize)> {
    let mut all = Vec::new();
    for (path, text) in code_files() {
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{path}: cannot parse: {e}"));
        let mut lengths = FnLengths { scope: Vec::new(), found: Vec::new() };
        syn::visit::Visit::visit_file(&mut lengths, &file);
        all.extend(lengths.found.into_iter().map(|(name, lines)| (path.clone(), name, lines)));
    }
    all.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.cmp(b)));
    all
}

#[test]
fn no_function_is_longer_than_150_lines() {
    let all = function_lengths();
    // The scan itself: it sees functions, methods and nested functions.
    assert!(all.len() > 500, "only {} functions found in src/: the scan is broken", all.len());
    assert!(all.iter().any(|(_, n, _)| n == "start_sharded"), "a free function");
    assert!(all.iter().any(|(_, n, _)| n == "Poller::round"), "a method");
    assert!(all.iter().any(|(_, n, _)| n == "shutdown_signal::received"), "a nested function");
    let long: Vec<String> = all
        .iter()
        .filter(|(_, _, lines)| *lines > MAX_FN_LINES)
        .map(|(path, name, lines)| format!("{path}: fn {name}: {lines} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them where their steps part):\n{}",
        long.join("\n")
    );
}

#[test]
fn architecture_md_is_at_most_300_lines() {
    let lines = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap().lines().count();
    assert!(
        lines <= MAX_ARCHITECTURE_LINES,
        "ARCHITECTURE.md has {lines} lines, at most {MAX_ARCHITECTURE_LINES}: tighten it, keep every invariant"
    );
}
