//! The names of job vertices and jobs as the same logs give them: a JobManager's "Deploying
//! stateful-map (1/2) (attempt #0) with attempt id …_857e98…_0_0 and vertex id 857e98…_0 to …"
//! line maps the vertex id that later lines carry (a late message names only an attempt id) to
//! its operator, and its "Job flink-lab (b9a74d…) switched from state RUNNING to RESTARTING."
//! lines map a job id to the job's name.
//!
//! Found in the scan's own pass (issue 42: a second pass over the files, line by line, was
//! half of the scan's instructions): one SIMD substring search per read buffer for both
//! needles, the lines that hold one parsed by hand (the regex [`DEPLOYING`] decides any
//! non-ASCII line), lines cut at the scan's line limit as the scan cuts them. At most
//! [`MAX_VERTICES`] names of each are kept.

use std::collections::HashMap;
use std::sync::LazyLock;

use memchr::memmem;
use regex::Regex;

/// Vertices named at most (a job has tens; a log of many jobs a few thousand).
pub(super) const MAX_VERTICES: usize = 10_000;

/// What every line that names a vertex holds.
const NEEDLE: &[u8] = b" and vertex id ";
/// What every line that names a job holds (`Job <name> (<id>) switched from state A to B.`).
const JOB_NEEDLE: &[u8] = b") switched from state ";

static FINDER: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(NEEDLE));
static JOB_FINDER: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(JOB_NEEDLE));

/// The language of a line that names a vertex (the hand-written [`deploying`] is held equal to it).
static DEPLOYING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"Deploying (?P<name>.+?) \(\d+/\d+\) \(attempt #\d+\) with attempt id \S+ and vertex id (?P<vertex>[0-9a-f]{32})_\d+")
        .expect("the pattern compiles")
});

/// The vertex names one range of a file gives, in line order; a (vertex, name) pair equal to
/// the last one of its vertex in the range is not repeated (a failover deploys every task again).
#[derive(Debug, Default)]
pub(super) struct RangeNames {
    pub(super) found: Vec<(String, String)>,
    last: HashMap<String, String>,
    /// (job id, job name), likewise.
    pub(super) jobs: Vec<(String, String)>,
    last_job: HashMap<String, String>,
}

impl RangeNames {
    /// The lines of `chunk` (a read buffer) that hold [`NEEDLE`] and start in it, cut at
    /// `max` bytes as the line splitter cuts them. `starts_line`: the chunk's first byte
    /// starts a line. A line that ends in a later buffer is left out: the scan hands it to
    /// [`RangeNames::line`] whole when it ends (a line that began in an earlier buffer).
    pub(super) fn search_chunk(&mut self, chunk: &[u8], starts_line: bool, max: usize) {
        // One SIMD substring search per needle (an automaton of both, with its rare-byte
        // prefilter, cost 8x more on real logs).
        self.search_for(&FINDER, chunk, starts_line, max);
        self.search_for(&JOB_FINDER, chunk, starts_line, max);
    }

    fn search_for(&mut self, finder: &memmem::Finder<'_>, chunk: &[u8], starts_line: bool, max: usize) {
        let mut from = 0;
        while let Some(at) = finder.find(&chunk[from..]).map(|i| from + i) {
            let start = match memchr::memrchr(b'\n', &chunk[from..at]) {
                Some(i) => from + i + 1,
                None if from > 0 || starts_line => from,
                // The rest of a line that began in an earlier buffer (seen whole by `line`).
                None => match memchr::memchr(b'\n', &chunk[at..]) {
                    Some(end) => {
                        from = at + end + 1;
                        continue;
                    }
                    None => return,
                },
            };
            let end = memchr::memchr(b'\n', &chunk[at..]).map(|i| at + i);
            let cut = start.saturating_add(max);
            let line = match end {
                Some(end) => &chunk[start..end.min(cut)],
                // The splitter cuts a line that does not fit in it here (and skips its rest).
                None if cut < chunk.len() => &chunk[start..cut],
                None => return,
            };
            self.line(line.strip_suffix(b"\r").unwrap_or(line));
            match end {
                Some(end) => from = end + 1,
                None => return,
            }
        }
    }

    /// One whole line (already cut at the line limit).
    pub(super) fn line(&mut self, line: &[u8]) {
        if JOB_FINDER.find(line).is_some()
            && let Some((job, name)) = job_line(&String::from_utf8_lossy(line))
            && self.last_job.get(job).is_none_or(|n| n != name)
        {
            self.last_job.insert(job.to_string(), name.to_string());
            self.jobs.push((job.to_string(), name.to_string()));
        }
        if FINDER.find(line).is_none() {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let Some((vertex, name)) = deploying(&text) else { return };
        if self.last.get(vertex).is_some_and(|n| n == name) {
            return;
        }
        self.last.insert(vertex.to_string(), name.to_string());
        self.found.push((vertex.to_string(), name.to_string()));
    }
}

/// Adds a range's names to `names` (in file order), keeping at most [`MAX_VERTICES`].
pub(super) fn add_names(names: &mut HashMap<String, String>, found: Vec<(String, String)>) {
    for (vertex, name) in found {
        if names.len() >= MAX_VERTICES {
            return;
        }
        names.insert(vertex, name);
    }
}

/// (job id, job name) of `… - Job <name> (<32 hex>) switched from state …` (Flink's
/// `ExecutionGraph` since 1.x): the name is the message after `Job ` up to ` (<id>)`.
fn job_line(line: &str) -> Option<(&str, &str)> {
    let at = JOB_FINDER.find(line.as_bytes())?;
    let id = line.get(at.checked_sub(32)?..at)?;
    if !id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    let head = line.get(..at - 32)?.strip_suffix(" (")?;
    // The message follows the first ` - ` (a logger name holds none).
    static DASH: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b" - "));
    let message = &head[DASH.find(head.as_bytes())? + 3..];
    let name = message.strip_prefix("Job ")?;
    (!name.is_empty()).then_some((id, name))
}

/// (vertex id, operator name) of a line that matches [`DEPLOYING`], as its captures give
/// them: the leftmost `Deploying ` from which the line matches, the shortest name. Hand-written
/// for ASCII lines (the regex costs ~30 µs per such line, and a failover deploys every task again);
/// any other line goes to the regex (`\d` and `\S` are Unicode classes there).
fn deploying(line: &str) -> Option<(&str, &str)> {
    if !line.is_ascii() {
        let c = DEPLOYING.captures(line)?;
        let (v, n) = (c.name("vertex")?, c.name("name")?);
        return Some((&line[v.range()], &line[n.range()]));
    }
    for (start, _) in line.match_indices("Deploying ") {
        let from = start + "Deploying ".len();
        // The name is at least one character; it ends at the first ` (` the rest matches after.
        for (open, _) in line[from..].match_indices(" (").map(|(i, s)| (from + i, s)) {
            if open == from {
                continue;
            }
            if let Some(vertex) = after_name(&line[open..]) {
                return Some((vertex, &line[from..open]));
            }
        }
    }
    None
}

/// ` \(\d+/\d+\) \(attempt #\d+\) with attempt id \S+ and vertex id (?P<vertex>[0-9a-f]{32})_\d+`
/// at the start of `s` (ASCII): the vertex id.
fn after_name(s: &str) -> Option<&str> {
    fn digits(s: &str) -> Option<&str> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (n > 0).then(|| &s[n..])
    }
    let s = digits(s.strip_prefix(" (")?)?;
    let s = digits(s.strip_prefix('/')?)?;
    let s = digits(s.strip_prefix(") (attempt #")?)?;
    let s = s.strip_prefix(") with attempt id ")?;
    // `\S+` then a space: the whole run of non-space characters.
    let run = s.bytes().take_while(|b| !b.is_ascii_whitespace() && *b != 0x0b).count();
    if run == 0 {
        return None;
    }
    let s = s[run..].strip_prefix(" and vertex id ")?;
    let vertex = s.get(..32)?;
    if !vertex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    digits(s[32..].strip_prefix('_')?)?;
    Some(vertex)
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::path::{Path, PathBuf};

    use super::*;

    const LINE: &str = "2026-11-29 15:15:09,566 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - \
         Deploying stateful-map (1/2) (attempt #0) with attempt id \
         92faa29a077a5adcd3e5771fbe4230c7_857e9877747f27b5e758680f3644828a_0_0 and vertex id \
         857e9877747f27b5e758680f3644828a_0 to 127.0.0.1:18125-6451c0 @ localhost (dataPort=18126) with \
         allocation id 8bb0";

    /// The second pass this module replaced: every line read again, cut at `max`, through the regex.
    fn second_pass(paths: &[PathBuf], max: usize) -> HashMap<String, String> {
        let mut names = HashMap::new();
        for path in paths {
            let mut reader = BufReader::new(std::fs::File::open(path).unwrap());
            let mut line = Vec::new();
            loop {
                line.clear();
                if reader.read_until(b'\n', &mut line).unwrap() == 0 {
                    break;
                }
                line.truncate(max);
                if names.len() >= MAX_VERTICES || memmem::find(&line, NEEDLE).is_none() {
                    continue;
                }
                if let Some(c) = DEPLOYING.captures(&String::from_utf8_lossy(&line)) {
                    names.insert(c["vertex"].to_string(), c["name"].to_string());
                }
            }
        }
        names
    }

    fn regex_of(line: &str) -> Option<(String, String)> {
        DEPLOYING.captures(line).map(|c| (c["vertex"].to_string(), c["name"].to_string()))
    }

    #[test]
    fn a_deploying_line_names_its_vertex() {
        let mut names = RangeNames::default();
        names.line(LINE.as_bytes());
        assert_eq!(
            names.found,
            [("857e9877747f27b5e758680f3644828a".to_string(), "stateful-map".to_string())]
        );
        // The same pair again (a failover) is not repeated; another name for it is.
        names.line(LINE.as_bytes());
        names.line(LINE.replace("stateful-map", "map-2").as_bytes());
        assert_eq!(names.found.len(), 2);
    }

    #[test]
    fn the_hand_written_parser_is_the_regex() {
        let mut lines: Vec<String> = vec![
            LINE.to_string(),
            LINE.replace("stateful-map", "Source: kafka (in) -> Map (x"),
            LINE.replace("Deploying ", "Deploying Deploying "),
            LINE.replace("(1/2)", "(1/2) (3/4)"),
            LINE.replace("_0 to", "_ to"),
            LINE.replace("857e9877747f27b5e758680f3644828a_0 ", "857E9877747f27b5e758680f3644828a_0 "),
            LINE.replace("with attempt id 92f", "with attempt id  92f"),
            LINE.replace("(attempt #0)", "(attempt #)"),
            LINE.replace("Deploying stateful-map", "Deploying  (1/2) (attempt #0) x"),
            LINE.replace("stateful-map", "stätefül-map"),
            LINE.replace("(1/2)", "(١/2)"),
            format!(
                "{LINE} Deploying other (1/1) (attempt #1) with attempt id x and vertex id {}_1",
                "a".repeat(32)
            ),
        ];
        // Every prefix of the line (a line cut at the limit).
        lines.extend((0..LINE.len()).map(|n| LINE[..n].to_string()));
        for line in &lines {
            let got = deploying(line).map(|(v, n)| (v.to_string(), n.to_string()));
            assert_eq!(got, regex_of(line), "{line}");
        }
    }

    fn fixture_logs() -> Vec<PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut out: Vec<PathBuf> =
            glob::glob(&format!("{}/flink-*/*/logs/*", root.display())).unwrap().flatten().collect();
        out.sort();
        out
    }

    #[test]
    fn every_deploying_line_of_the_fixtures_is_parsed_as_the_regex_parses_it() {
        let mut seen = 0;
        for path in fixture_logs() {
            for line in std::fs::read_to_string(&path).unwrap_or_default().lines() {
                if line.contains("Deploying ") {
                    seen += 1;
                    let got = deploying(line).map(|(v, n)| (v.to_string(), n.to_string()));
                    assert_eq!(got, regex_of(line), "{}: {line}", path.display());
                }
            }
        }
        assert!(seen > 100, "{seen} Deploying lines");
    }

    /// The names the scan finds in its own pass, per file, are those of the second pass it
    /// replaced, whatever the reads, the line limit and the ranges.
    #[test]
    fn the_scan_names_the_vertices_the_second_pass_named() {
        use crate::commands::scan_logs::Scanner;
        use crate::sources::logs::parse::Patterns;
        let logs = fixture_logs();
        let mut named = 0;
        for (max, threads) in [(1usize << 20, 1usize), (1 << 20, 3), (120, 1), (200, 2)] {
            let want = second_pass(&logs, max);
            let mut scanner = Scanner::new(Patterns::builtin(), max).parallel(1 << 16, threads);
            scanner.scan_paths(&logs).unwrap();
            assert_eq!(scanner.vertex_names(), &want, "line limit {max}, {threads} thread(s)");
            named = named.max(want.len());
        }
        assert!(named >= 5, "{named} vertices named");
    }

    /// A reader that hands out `n` bytes at a time, so lines span reads.
    struct Dribble<'a>(&'a [u8], usize);

    impl std::io::Read for Dribble<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn lines_that_span_reads_name_their_vertices_too() {
        use crate::commands::scan_logs::Scanner;
        use crate::sources::logs::parse::Patterns;
        for path in fixture_logs().into_iter().filter(|p| p.to_string_lossy().contains("standalonesession")) {
            let data = std::fs::read(&path).unwrap();
            for (reads, max) in [(61, 1 << 20), (4096, 1 << 20), (333, 150), (97, 1 << 10)] {
                let want = second_pass(std::slice::from_ref(&path), max);
                let mut scanner = Scanner::new(Patterns::builtin(), max);
                scanner.scan_reader(&path, Dribble(&data, reads)).unwrap();
                assert_eq!(
                    scanner.vertex_names(),
                    &want,
                    "{} in reads of {reads}, cut at {max}",
                    path.display()
                );
            }
        }
    }
}
