//! Where the walk over the state puts its samples: the [`Sink`] trait, the [`Value`] of a sample,
//! and [`Families`], the sink that builds the `prometheus` crate's metric families (the reference
//! `TextRenderer` is held byte-equal to).

use prometheus::proto::{self, MetricFamily, MetricType};

use super::families::{Kind, METRICS};
use crate::stats::{QUANTILES, Summary};

/// Where [`render_into`](super::render_into) puts samples: metric families for the `prometheus` crate ([`render`](super::render))
/// or the text exposition format written directly ([`TextRenderer`](super::TextRenderer)).
/// Both receive the same calls in the same order, so they cannot disagree on what is exported.
pub(super) trait Sink {
    /// One sample of the family `METRICS[family]`; `labels` are in the table's order.
    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value);
    /// Which of [`QUANTILES`] summaries show (`[metrics] quantiles`), from now on.
    fn show_quantiles(&mut self, shown: [bool; 3]);
}

pub(super) enum Value {
    Number(f64),
    /// A summary and the divisor from its stored unit (ms or bytes) to the exported one
    /// (dividing, not multiplying by 0.001, keeps 43 ms printed as 0.043).
    Summary(Summary, f64),
}

pub(super) const MS: f64 = 1000.0;
pub(super) const BYTES: f64 = 1.0;

pub(super) fn seconds(ms: u64) -> Value {
    Value::Number(ms as f64 / 1000.0)
}

/// Collects metric families, in the order of [`METRICS`].
pub(super) struct Families {
    families: Vec<MetricFamily>,
    shown: [bool; 3],
}

impl Families {
    pub(super) fn new() -> Self {
        let families = METRICS
            .iter()
            .map(|m| {
                let mut f = MetricFamily::default();
                f.set_name(m.name.to_string());
                f.set_help(m.help.to_string());
                f.set_field_type(match m.kind {
                    Kind::Gauge => MetricType::GAUGE,
                    Kind::Counter => MetricType::COUNTER,
                    Kind::Summary => MetricType::SUMMARY,
                });
                f
            })
            .collect();
        Families { families, shown: [true; 3] }
    }

    pub(super) fn finish(self) -> Vec<MetricFamily> {
        // A family without samples is left out, as client libraries do.
        self.families.into_iter().filter(|f| !f.get_metric().is_empty()).collect()
    }
}

impl Sink for Families {
    fn show_quantiles(&mut self, shown: [bool; 3]) {
        self.shown = shown;
    }

    fn push(&mut self, family: usize, labels: &[(&str, &str)], value: Value) {
        let def = &METRICS[family];
        debug_assert_eq!(def.labels.len(), labels.len(), "{}", def.name);
        let mut metric = proto::Metric::default();
        metric.set_label(
            labels
                .iter()
                .map(|(k, v)| {
                    let mut pair = proto::LabelPair::default();
                    pair.set_name(k.to_string());
                    pair.set_value(v.to_string());
                    pair
                })
                .collect(),
        );
        match (def.kind, value) {
            (Kind::Gauge, Value::Number(v)) => {
                let mut g = proto::Gauge::default();
                g.set_value(v);
                metric.set_gauge(g);
            }
            (Kind::Counter, Value::Number(v)) => {
                let mut c = proto::Counter::default();
                c.set_value(v);
                metric.set_counter(c);
            }
            (Kind::Summary, Value::Summary(s, divisor)) => {
                let mut summary = proto::Summary::default();
                summary.set_sample_count(s.count);
                summary.set_sample_sum(s.sum as f64 / divisor);
                summary.set_quantile(
                    QUANTILES
                        .iter()
                        .zip(s.quantiles)
                        .zip(self.shown)
                        .filter(|(_, shown)| *shown)
                        .map(|((&q, v), _)| {
                            let mut quantile = proto::Quantile::default();
                            quantile.set_quantile(q);
                            quantile.set_value(v.map_or(f64::NAN, |v| v as f64 / divisor));
                            quantile
                        })
                        .collect(),
                );
                metric.set_summary(summary);
            }
            _ => unreachable!("{}: value does not match the metric type", def.name),
        }
        self.families[family].mut_metric().push(metric);
    }
}
