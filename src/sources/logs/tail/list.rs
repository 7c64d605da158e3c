//! Glob listing: the regular files an entry's globs match now, each once, with bounded walks of
//! `**` that enter no symlinked directory.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::sources::logs::offsets::FileId;

/// A `**` in a glob descends at most this many directories, and one listing looks at most at
/// [`MAX_LISTED`] entries: symlinked directories are not followed (a symlink loop under `**`
/// spun a thread at 100 % and then blocked shutdown), and a huge tree cannot stall a cycle.
pub(crate) const MAX_GLOB_DEPTH: usize = 16;
/// See [`MAX_GLOB_DEPTH`].
pub(crate) const MAX_LISTED: usize = 100_000;

/// What one listing found.
#[derive(Default)]
pub(super) struct Listing {
    /// The regular files the globs match, each file once (by identity) at the first path
    /// that leads to it.
    pub(super) found: Vec<(PathBuf, std::fs::Metadata)>,
    /// Paths that matched but could not be looked at (a file gone in between is not one).
    pub(super) failed: Vec<(PathBuf, io::Error)>,
}

/// Lists the files `patterns` match.
pub(super) fn list_all(patterns: &[String]) -> Listing {
    let mut listing = Listing::default();
    for pattern in patterns {
        for path in list(pattern) {
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {
                    let id = FileId::of(&meta);
                    if !listing.found.iter().any(|(_, m)| FileId::of(m) == id) {
                        listing.found.push((path, meta));
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {} // Gone between listing and stat.
                Err(e) => listing.failed.push((path, e)),
            }
        }
    }
    listing
}

/// The paths `pattern` matches, sorted. A `**` is walked here rather than by `glob::glob`,
/// which follows symlinked directories (a loop spun forever): symlinked directories are not
/// entered, at most [`MAX_GLOB_DEPTH`] levels and [`MAX_LISTED`] entries are looked at.
fn list(pattern: &str) -> Vec<PathBuf> {
    if !pattern.contains("**") {
        // Bounded by the pattern's own components: no recursion.
        let Ok(paths) = glob::glob(pattern) else { return Vec::new() };
        return paths.flatten().take(MAX_LISTED).collect();
    }
    let Ok(matcher) = glob::Pattern::new(pattern) else { return Vec::new() };
    let options = glob::MatchOptions { require_literal_separator: true, ..glob::MatchOptions::new() };
    let mut out = Vec::new();
    let mut looked = 0usize;
    let mut stack = vec![(fixed_prefix(Path::new(pattern)), 0usize)];
    'walk: while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            looked += 1;
            if looked > MAX_LISTED {
                break 'walk;
            }
            let path = entry.path();
            // The entry itself, not what a symlink leads to.
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if depth < MAX_GLOB_DEPTH {
                    stack.push((path, depth + 1));
                }
            } else if matcher.matches_path_with(&path, options) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The directory part of a glob before its first wildcard.
pub(super) fn fixed_prefix(pattern: &Path) -> PathBuf {
    let mut dir = PathBuf::new();
    for c in pattern.components() {
        let literal = match c {
            Component::Normal(s) => !s.to_string_lossy().contains(['*', '?', '[', '{']),
            _ => true,
        };
        if !literal {
            break;
        }
        dir.push(c);
    }
    if dir == pattern {
        dir.pop(); // The pattern is a plain file path: watch its directory.
    }
    if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watched_directory_is_the_fixed_part_of_the_glob() {
        assert_eq!(
            fixed_prefix(Path::new("/opt/flink/log/flink-*-taskexecutor-*.log")),
            PathBuf::from("/opt/flink/log")
        );
        assert_eq!(fixed_prefix(Path::new("/opt/*/log/x.log")), PathBuf::from("/opt"));
        assert_eq!(fixed_prefix(Path::new("/var/log/a.log")), PathBuf::from("/var/log"));
    }
}
