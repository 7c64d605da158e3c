//! The names of job vertices as the same logs give them: a JobManager's "Deploying stateful-map
//! (1/2) (attempt #0) with attempt id …_857e98…_0_0 and vertex id 857e98…_0 to …" line maps the
//! vertex id that later lines carry (a late message names only an attempt id) to its operator.
//!
//! A second pass over the files, only when a task is named by a vertex id: it reads each file
//! line by line (lines cut at the scan's line limit) and keeps at most [`MAX_VERTICES`] names.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;

/// Vertices named at most (a job has tens; a log of many jobs a few thousand).
pub(crate) const MAX_VERTICES: usize = 10_000;

static DEPLOYING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Deploying (?P<name>.+?) \(\d+/\d+\) \(attempt #\d+\) with attempt id \S+ and vertex id (?P<vertex>[0-9a-f]{32})_\d+")
        .expect("the pattern compiles")
});

/// Vertex id → operator name, from the "Deploying …" lines of `paths`.
pub(crate) fn vertex_names(paths: &[PathBuf], max_line_bytes: usize) -> io::Result<HashMap<String, String>> {
    let mut names = HashMap::new();
    for path in paths {
        let mut reader = BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            line.truncate(max_line_bytes);
            if names.len() >= MAX_VERTICES || memchr::memmem::find(&line, b" and vertex id ").is_none() {
                continue;
            }
            if let Some(c) = DEPLOYING.captures(&String::from_utf8_lossy(&line)) {
                names.insert(c["vertex"].to_string(), c["name"].to_string());
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deploying_line_names_its_vertex() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("jm.log");
        std::fs::write(
            &log,
            "2026-11-29 15:15:09,566 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - \
             Deploying stateful-map (1/2) (attempt #0) with attempt id \
             92faa29a077a5adcd3e5771fbe4230c7_857e9877747f27b5e758680f3644828a_0_0 and vertex id \
             857e9877747f27b5e758680f3644828a_0 to 127.0.0.1:18125-6451c0 @ localhost (dataPort=18126) with \
             allocation id 8bb0\n",
        )
        .unwrap();
        let names = vertex_names(&[log], 1 << 20).unwrap();
        assert_eq!(names["857e9877747f27b5e758680f3644828a"], "stateful-map");
    }
}
