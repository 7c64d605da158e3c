//! Annotation templating: `{{ name | filter }}` placeholders filled from labels and series.

use std::collections::BTreeMap;

use super::expr;

/// Fills `{{ name }}` placeholders: labels (`cluster`, `job_name`, …), `value`, any series
/// (`duration.p95`) or a function of one (`increase(shadow.unexplained, 30m)`, computed as a
/// condition computes it); a `| duration`, `| bytes` or `| percent` filter formats the number.
pub fn render(
    template: &str,
    labels: &BTreeMap<&str, &str>,
    value: Option<f64>,
    ctx: &dyn expr::Context,
) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = rest[start + 2..start + end].trim();
        let (name, filter) = match inner.split_once('|') {
            Some((n, f)) => (n.trim(), Some(f.trim())),
            None => (inner, None),
        };
        let number = if name == "value" {
            value
        } else if name.contains('(') {
            expr::evaluate_number(name, ctx)
        } else {
            expr::Context::value(ctx, name)
        };
        let text = match (labels.get(name), number) {
            (Some(label), _) => label.to_string(),
            (None, Some(n)) => format_number(n, filter),
            (None, None) => "n/a".to_string(),
        };
        out.push_str(&text);
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

fn format_number(n: f64, filter: Option<&str>) -> String {
    match filter {
        Some("duration") => format_duration(n),
        Some("bytes") => format_bytes(n),
        Some("percent") => format!("{:.1}%", n * 100.0),
        _ => {
            if n.fract() == 0.0 && n.abs() < 1e15 {
                format!("{n:.0}")
            } else {
                format!("{n:.3}")
            }
        }
    }
}

/// `0.045` → `45ms`, `75` → `1m 15s`.
pub fn format_duration(seconds: f64) -> String {
    if seconds < 1.0 {
        return format!("{:.0}ms", seconds * 1000.0);
    }
    if seconds < 60.0 {
        return format!("{:.1}s", seconds).replace(".0s", "s");
    }
    let total = seconds.round() as u64;
    let (h, m, s) = (total / 3600, total % 3600 / 60, total % 60);
    if h > 0 { format!("{h}h {m}m") } else { format!("{m}m {s}s") }
}

/// `1536` → `1.5 KiB` (the `bytes` filter of alert texts; `time::bytes`).
pub fn format_bytes(bytes: f64) -> String {
    crate::time::bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_well() {
        assert_eq!(format_duration(0.045), "45ms");
        assert_eq!(format_duration(4.0), "4s");
        assert_eq!(format_duration(75.0), "1m 15s");
        assert_eq!(format_duration(7300.0), "2h 1m");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
    }
}
