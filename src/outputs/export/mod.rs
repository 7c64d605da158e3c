//! The Prometheus exporter: renders `State` at scrape time.
//!
//! HDR quantiles go out as real `summary` families (quantiles over the sliding window, `_sum`
//! and `_count` over the lifetime). Every metric name, type and help text is in [`METRICS`]
//! (`families.rs`); `docs/metrics.md` lists the same names and `tests/metrics_doc.rs` keeps the
//! two in step. One walk over the state feeds a sink (`sink.rs`): `render` (the `prometheus`
//! crate's families) or [`TextRenderer`] (the text format, what `/metrics` serves); the walk is
//! split by what it renders: `daemon.rs`, `cluster.rs`, `job.rs`.

use prometheus::proto::MetricFamily;

use crate::app::DaemonStats;
use crate::state::{Phase, State};
use crate::time::Timestamp;

use families::MetricDef;
pub use families::{ERROR_KINDS, Kind, METRICS};
use sink::{Families, Sink, Value};

/// The index of a metric in [`METRICS`], resolved at compile time (`families::index_of`).
macro_rules! family {
    ($name:literal) => {
        const { $crate::outputs::export::families::index_of($name) }
    };
}

mod cluster;
mod daemon;
mod evidence;
mod families;
mod job;
mod sink;
mod storage;
#[cfg(test)]
mod tests;

/// Renders the state as metric families (the `prometheus` crate's form, for a registry). Pure: `now`
/// is only used for ages.
pub fn render(state: &State, daemon: &DaemonStats, now: Timestamp) -> Vec<MetricFamily> {
    let mut families = Families::new();
    for part in PARTS {
        render_into(state, daemon, now, &mut families, part);
    }
    families.finish()
}

/// A part of the exposition: each is rendered by its own walk over the state, so the server
/// can compress one part before it renders the next and never holds the whole plain body (for
/// 10,000 jobs ~125 MB even without the operators' summaries). Parts have disjoint families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Everything but the operators' summaries (jobs, clusters, logs, the daemon itself), of
    /// the families whose index in [`METRICS`] is this group modulo [`JOB_GROUPS`].
    Jobs(usize),
    /// The operators' summaries of one phase.
    Operators(Phase),
}

/// Into how many walks the [`Part::Jobs`] families are split: each walk formats a quarter of
/// them (the others are skipped before any formatting).
pub(crate) const JOB_GROUPS: usize = 4;

/// Every part, in the order the server sends them.
pub const PARTS: [Part; 9] = [
    Part::Jobs(0),
    Part::Jobs(1),
    Part::Jobs(2),
    Part::Jobs(3),
    Part::Operators(Phase::EndToEnd),
    Part::Operators(Phase::Alignment),
    Part::Operators(Phase::Sync),
    Part::Operators(Phase::Async),
    Part::Operators(Phase::StartDelay),
];

/// Every sample of `part`, family by family as the state is walked; the sink groups them.
fn render_into(state: &State, daemon: &DaemonStats, now: Timestamp, out: &mut impl Sink, part: Part) {
    out.show_quantiles(daemon.metrics.shown_quantiles());
    match part {
        Part::Jobs(group) => render_jobs(state, daemon, now, &mut OneGroup { sink: out, group }),
        Part::Operators(phase) if daemon.metrics.operators => job::render_operators(state, out, phase),
        Part::Operators(_) => {}
    }
}

/// A sink that passes on the samples of one [`Part::Jobs`] group's families only.
struct OneGroup<'a, S: Sink> {
    sink: &'a mut S,
    group: usize,
}

impl<S: Sink> Sink for OneGroup<'_, S> {
    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value) {
        if family % JOB_GROUPS == self.group {
            self.sink.push(family, labels, value);
        }
    }

    fn show_quantiles(&mut self, shown: [bool; 3]) {
        self.sink.show_quantiles(shown);
    }
}

/// The [`Part::Jobs`] walk: the daemon's opening series, each cluster's and its listed jobs',
/// then the daemon's closing ones (in this order: the sinks group samples by family).
fn render_jobs(state: &State, daemon: &DaemonStats, now: Timestamp, out: &mut impl Sink) {
    daemon::render_head(out, daemon);
    let mut clamped = 0u64;
    for (cluster_name, cluster) in state.clusters() {
        let c = cluster_name.as_str();
        cluster::render_cluster(out, c, cluster);
        for (job_id, job) in cluster.jobs.iter().filter(|(_, j)| j.listed) {
            clamped += job::render_job(out, c, job_id, job, now);
        }
    }
    daemon::render_tail(out, state, daemon, clamped);
}

/// Writes the text exposition format (0.0.4) straight from `State`, byte for byte what
/// `prometheus::TextEncoder` makes of [`render`]'s families (a test holds the two equal), at a
/// fraction of the cost: no per-sample allocation, label sets escaped once per sample, numbers
/// formatted without `fmt` on the common paths. It renders one [`Part`] at a time, as one
/// chunk per family, which the server sends as they are.
#[derive(Default)]
pub struct TextRenderer {
    /// Per family, in the order of [`METRICS`]: its HELP and TYPE lines, then its samples
    /// (the format wants a family's lines together; the state is walked job by job).
    families: Vec<Vec<u8>>,
    /// The current sample's escaped label set.
    labels: Vec<u8>,
    /// Each family's size at the previous scrape, to allocate it once at the next.
    last_sizes: Vec<usize>,
    /// Which of [`QUANTILES`](crate::stats::QUANTILES) are left out (`[metrics] quantiles`).
    hidden: [bool; 3],
}

impl TextRenderer {
    /// Renders one part of the exposition: its chunks, one per family with samples, in the
    /// order of [`METRICS`]. Pure: `now` is only used for ages.
    pub fn render(
        &mut self,
        state: &State,
        daemon: &DaemonStats,
        now: Timestamp,
        part: Part,
    ) -> Vec<Vec<u8>> {
        self.render_part(state, daemon, now, part).into_iter().map(|(_, chunk)| chunk).collect()
    }

    /// Every part as one buffer, the families in the order of [`METRICS`].
    pub fn render_to_vec(&mut self, state: &State, daemon: &DaemonStats, now: Timestamp) -> Vec<u8> {
        let mut chunks: Vec<_> =
            PARTS.iter().flat_map(|&p| self.render_part(state, daemon, now, p)).collect();
        chunks.sort_by_key(|(family, _)| *family);
        chunks.into_iter().flat_map(|(_, chunk)| chunk).collect()
    }

    fn render_part(
        &mut self,
        state: &State,
        daemon: &DaemonStats,
        now: Timestamp,
        part: Part,
    ) -> Vec<(usize, Vec<u8>)> {
        self.last_sizes.resize(METRICS.len(), 0);
        self.families.resize_with(METRICS.len(), Vec::new);
        render_into(state, daemon, now, self, part);
        let mut chunks = Vec::new();
        for (family, lines) in self.families.iter_mut().enumerate() {
            if !lines.is_empty() {
                self.last_sizes[family] = lines.len();
                chunks.push((family, std::mem::take(lines)));
            }
        }
        chunks
    }
}

/// `# HELP` and `# TYPE`, which open a family's lines.
fn write_header(out: &mut Vec<u8>, def: &MetricDef) {
    out.extend_from_slice(b"# HELP ");
    out.extend_from_slice(def.name.as_bytes());
    out.push(b' ');
    escape_into(out, def.help, false);
    out.extend_from_slice(b"\n# TYPE ");
    out.extend_from_slice(def.name.as_bytes());
    out.extend_from_slice(match def.kind {
        Kind::Gauge => b" gauge\n".as_slice(),
        Kind::Counter => b" counter\n",
        Kind::Summary => b" summary\n",
    });
}

impl Sink for TextRenderer {
    fn show_quantiles(&mut self, shown: [bool; 3]) {
        self.hidden = shown.map(|s| !s);
    }

    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value) {
        let def = &METRICS[family];
        debug_assert_eq!(def.labels.len(), labels.len(), "{}", def.name);
        // `{name="value",…}` once per sample (a summary writes it five times), `` without labels.
        self.labels.clear();
        for (i, (name, value)) in labels.iter().enumerate() {
            self.labels.push(if i == 0 { b'{' } else { b',' });
            self.labels.extend_from_slice(name.as_bytes());
            self.labels.extend_from_slice(b"=\"");
            escape_into(&mut self.labels, value, true);
            self.labels.push(b'"');
        }
        if !labels.is_empty() {
            self.labels.push(b'}');
        }
        let (name, braced) = (def.name.as_bytes(), self.labels.as_slice());
        let out = &mut self.families[family];
        if out.is_empty() {
            let expected = self.last_sizes[family];
            out.reserve(expected + expected / 8);
            write_header(out, def);
        }
        // `name{…} ` and `name_suffix{…} `: few copies per line, as these are most of the body.
        let start = |out: &mut Vec<u8>, suffix: &[u8]| {
            out.extend_from_slice(name);
            out.extend_from_slice(suffix);
            out.extend_from_slice(braced);
            out.push(b' ');
        };
        match (def.kind, value) {
            (Kind::Gauge | Kind::Counter, Value::Number(v)) => {
                start(out, b"");
                write_f64(out, v);
                out.push(b'\n');
            }
            (Kind::Summary, Value::Summary(s, divisor)) => {
                for ((tail, v), _) in
                    QUANTILE_LABELS.iter().zip(s.quantiles).zip(self.hidden).filter(|(_, hidden)| !hidden)
                {
                    out.extend_from_slice(name);
                    match braced.split_last() {
                        Some((_, open)) => {
                            out.extend_from_slice(open);
                            out.push(b',');
                        }
                        None => out.push(b'{'),
                    }
                    out.extend_from_slice(tail);
                    match v {
                        Some(v) => write_scaled(out, v, divisor),
                        None => out.extend_from_slice(b"NaN"),
                    }
                    out.push(b'\n');
                }
                start(out, b"_sum");
                write_scaled(out, s.sum, divisor);
                out.push(b'\n');
                start(out, b"_count");
                write_f64(out, s.count as f64);
                out.push(b'\n');
            }
            _ => unreachable!("{}: value does not match the metric type", def.name),
        }
    }
}

/// The end of a quantile line's label set, [`QUANTILES`](crate::stats::QUANTILES) as `f64::to_string` prints them.
const QUANTILE_LABELS: [&[u8]; 3] = [b"quantile=\"0.5\"} ", b"quantile=\"0.95\"} ", b"quantile=\"0.99\"} "];

/// Appends `text` with the text format's escapes: backslash and newline, and in label values
/// the double quote.
fn escape_into(out: &mut Vec<u8>, text: &str, quote: bool) {
    let bytes = text.as_bytes();
    // Label values almost never need an escape: one SIMD search, then one copy.
    let first =
        if quote { memchr::memchr3(b'\\', b'\n', b'"', bytes) } else { memchr::memchr2(b'\\', b'\n', bytes) };
    let Some(first) = first else {
        out.extend_from_slice(bytes);
        return;
    };
    out.extend_from_slice(&bytes[..first]);
    for b in &bytes[first..] {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'"' if quote => out.extend_from_slice(b"\\\""),
            _ => out.push(*b),
        }
    }
}

/// `value / divisor` as `f64::to_string` prints it; integer arithmetic for whole units and
/// milliseconds (every duration and size we export), `fmt` otherwise.
fn write_scaled(out: &mut Vec<u8>, value: u64, divisor: f64) {
    if divisor == 1.0 && value < (1 << 53) {
        out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
    } else if divisor == 1000.0 && value < 1_000_000_000_000_000 {
        write_millis(out, value);
    } else {
        write_f64(out, value as f64 / divisor);
    }
}

/// `value` as `f64::to_string` prints it (shortest round-trip digits, never an exponent).
fn write_f64(out: &mut Vec<u8>, value: f64) {
    if value.is_finite() && value.abs() < 1e15 && !(value == 0.0 && value.is_sign_negative()) {
        if value.fract() == 0.0 {
            out.extend_from_slice(itoa::Buffer::new().format(value as i64).as_bytes());
            return;
        }
        // Seconds from milliseconds (timestamps, durations): the decimal with at most three
        // fraction digits is the shortest string that parses back to `value` when it does.
        let millis = (value.abs() * 1000.0).round();
        if value.abs() < 1e12 && millis / 1000.0 == value.abs() {
            if value < 0.0 {
                out.push(b'-');
            }
            write_millis(out, millis as u64);
            return;
        }
    }
    use std::io::Write as _;
    let _ = write!(out, "{value}");
}

/// `millis / 1000` in decimal, trailing fraction zeros dropped.
fn write_millis(out: &mut Vec<u8>, millis: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(millis / 1000).as_bytes());
    let fraction = millis % 1000;
    if fraction == 0 {
        return;
    }
    let digits = [fraction / 100, fraction / 10 % 10, fraction % 10].map(|d| b'0' + d as u8);
    let len = digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count();
    out.push(b'.');
    out.extend_from_slice(&digits[..len]);
}

/// Encodes metric families in the Prometheus text format (0.0.4).
pub fn encode_text(families: &[MetricFamily]) -> String {
    prometheus::TextEncoder::new()
        .encode_to_string(families)
        .unwrap_or_else(|e| format!("# encoding failed: {e}\n"))
}
