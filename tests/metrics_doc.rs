//! docs/metrics.md lists exactly the metrics the exporter defines; `SENTINEL_BLESS=1` rewrites it.

use checkpoint_sentinel::outputs::export::{Kind, METRICS};

const BEGIN: &str = "<!-- BEGIN METRICS -->";
const END: &str = "<!-- END METRICS -->";

fn table() -> String {
    let mut out = String::from("\n| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n");
    for m in METRICS {
        let kind = match m.kind {
            Kind::Gauge => "gauge",
            Kind::Counter => "counter",
            Kind::Summary => "summary",
        };
        let labels = m.labels.iter().map(|l| format!("`{l}`")).collect::<Vec<_>>().join(", ");
        out.push_str(&format!("| `{}` | {kind} | {labels} | {} |\n", m.name, m.help));
    }
    out
}

#[test]
fn docs_list_every_metric() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = doc.split_once(BEGIN).expect("begin marker");
    let (current, tail) = rest.split_once(END).expect("end marker");
    let wanted = table();
    if crate::common::blessing() {
        std::fs::write(&path, format!("{head}{BEGIN}{wanted}{END}{tail}")).unwrap();
        return;
    }
    assert_eq!(
        current, wanted,
        "docs/metrics.md is out of date: run SENTINEL_BLESS=1 cargo test --test integration metrics_doc::"
    );
}

#[test]
fn names_follow_prometheus_conventions() {
    let mut names = std::collections::BTreeSet::new();
    for m in METRICS {
        assert!(names.insert(m.name), "{} defined twice", m.name);
        assert_eq!(
            m.kind == Kind::Counter,
            m.name.ends_with("_total"),
            "{}: counters and only counters end in _total",
            m.name
        );
        assert!(!m.name.contains("_ms") && !m.name.contains("millis"), "{}: base units", m.name);
        // `process_*`: the client libraries' standard names for a process's own figures.
        assert!(
            m.name.starts_with("flink_")
                || m.name.starts_with("checkpoint_sentinel_")
                || m.name.starts_with("process_"),
            "{}",
            m.name
        );
        assert!(!m.help.is_empty());
    }
}
