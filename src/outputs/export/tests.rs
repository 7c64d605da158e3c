//! The exporter's tests: the text renderer byte-equal to `TextEncoder`, the table, the series.

use super::sink::MS;
use super::*;
use crate::model::alignment::{self, AlignmentConfig, Mode};
use crate::model::coordinator::{Coordinator, CoordinatorConfig, Event, Outcome, Schedule};
use crate::observe::{CheckpointSettings, EventSeverity, JobKey, LogEvent, Observation};
use crate::stats::WindowSpec;
use proptest::prelude::*;

const START: Timestamp = Timestamp(1_795_964_442_123);

/// Jobs driven by the coordinator model for `minutes`, with names that need escaping, an
/// expiring job, log events and the daemon's own counters: every kind of sample there is.
fn busy_state(jobs: usize, minutes: i64) -> (State, DaemonStats, Timestamp) {
    let graph = alignment::lab_job(2, 0, 0.0);
    let config = AlignmentConfig { mode: Mode::Aligned, ..AlignmentConfig::default() };
    let operators = alignment::simulate(&graph, &config, 7).operators(&graph);
    let mut state = State::new(WindowSpec { window_ms: 600_000, slots: 6 });
    state.retain_clusters(&["prod".to_string(), "lab \"b\\\n".to_string()]);
    let end = START.plus_millis(minutes * 60_000);
    for j in 0..jobs {
        let cluster = if j % 2 == 0 { "prod" } else { "lab \"b\\\n" };
        let cfg = CoordinatorConfig { num_subtasks: 4, ..CoordinatorConfig::default() };
        let mut c = Coordinator::new(cfg, START, Schedule::Seeded(j as u64));
        let mut outcomes = |id: u64, _: Timestamp| {
            if j == 1 && id.is_multiple_of(3) {
                Outcome::Hang
            } else {
                Outcome::Complete { duration_ms: 17 + (id * 37 + j as u64) % 3_001 }
            }
        };
        let key = JobKey { cluster: cluster.into(), job_id: format!("{j:032x}") };
        let settings = CheckpointSettings {
            interval_ms: Some(10_000),
            timeout_ms: Some(60_000),
            tolerable_failures: Some(3),
            ..CheckpointSettings::default()
        };
        let mut at = START;
        while at < end {
            at = at.plus_millis(2_500);
            c.run_until(at, &mut outcomes);
            for event in c.drain_events() {
                if let Event::Triggered { id, .. } = event
                    && let Some(cp) = c.checkpoint_mut(id)
                {
                    cp.operators = operators.clone();
                }
            }
            let name = format!("job \"{j}\" \\ of\nmany");
            let poll = c.job_poll(key.clone(), &name, at, Some(settings.clone()));
            state.apply(&Observation::JobPolled(poll), at);
        }
    }
    let mut event = LogEvent::new("expired".into(), EventSeverity::Warning, "Checkpoint 3 expired".into());
    event.cluster = "prod".into();
    event.job_id = Some(format!("{:032x}", 0));
    state.apply(&Observation::LogEvents(vec![event]), end);
    let daemon = DaemonStats {
        store: Some(crate::app::StoreCounters {
            records: 40,
            pruned: 3,
            errors: 1,
            files_set_aside: 1,
            failing: true,
            waiting: 7,
        }),
        persist_errors: 2,
        last_persisted: Some(end),
        alerts: vec![crate::app::RuleAlerts {
            name: "FlinkCheckpointSlow".into(),
            severity: "warning",
            pending: 1,
            firing: 2,
        }],
        alertmanagers: vec![crate::outputs::alerting::TargetStats {
            url: "http://am:9093".into(),
            sent_total: 5,
            errors_total: 1,
            queued: 0,
        }],
        tls_handshake_errors: Some([("plain_http", 1), ("failed", 3), ("timeout", 0)]),
        discovery: Some(crate::sources::discovery::DiscoveryStats {
            clusters: 3,
            dropped: [("limit", 1), ("duplicate", 0), ("invalid", 2)],
            file_errors: [("too_large", 0), ("unreadable", 1), ("invalid", 4), ("too_many_files", 0)],
            kubernetes: Some(crate::sources::kubernetes::KubernetesStats {
                objects: [2, 1, 0],
                relists: [1, 0, 0],
                clusters: 2,
                synced: true,
                jobs: vec![crate::sources::kubernetes::OperatorJob {
                    cluster: "flink.lab".into(),
                    resource: "flinkdeployment/lab".into(),
                    job_id: "8a3c1f0e2b4d6a8c0e1f3a5b7c9d1e2f".into(),
                    state: "RUNNING".into(),
                    lifecycle_state: "STABLE".into(),
                    last_savepoint_ms: Some(1_764_494_400_000),
                }],
                ..Default::default()
            }),
        }),
        process: crate::process::read(),
        metrics: crate::config::MetricsConfig::default(),
        requests_in_flight: vec![("prod".into(), 20)],
        ..DaemonStats::default()
    };
    (state, daemon, end.plus_millis(1_234))
}

#[test]
fn text_renderer_writes_what_the_prometheus_encoder_writes() {
    let (state, daemon, now) = busy_state(6, 30);
    let expected = encode_text(&render(&state, &daemon, now));
    let mut renderer = TextRenderer::default();
    let text = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
    assert!(text.contains("flink_operator_checkpoint_sync_duration_seconds{"), "{text}");
    assert!(text.contains("quantile=\"0.95\"} 0."), "{text}");
    assert!(text.contains("job_name=\"job \\\"1\\\" \\\\ of\\nmany\""), "{text}");
    assert!(text.contains("NaN"), "a summary with an empty window: {text}");
    for (line, (got, want)) in text.lines().zip(expected.lines()).enumerate() {
        assert_eq!(got, want, "line {}", line + 1);
    }
    assert_eq!(text, expected);
    // Reused buffers: the second scrape is the same text, not the first one doubled.
    let again = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
    assert_eq!(again, expected);
}

/// A log event of a polled job carries the job's name from the poll of the same job id, so the
/// Prometheus-side burst alerts can name the job.
#[test]
fn log_events_carry_the_job_name_of_the_poll() {
    let (state, daemon, now) = busy_state(2, 1);
    let text = String::from_utf8(TextRenderer::default().render_to_vec(&state, &daemon, now)).unwrap();
    let job = format!("{:032x}", 0);
    let line = text
        .lines()
        .find(|l| l.starts_with("flink_checkpoint_log_events_total{") && l.contains(&job))
        .unwrap_or_else(|| panic!("no log event line: {text}"));
    assert!(line.contains("job_name=\"job \\\"0\\\" \\\\ of\\nmany\""), "{line}");
}

#[test]
fn lean_settings_drop_operator_series_and_unchosen_quantiles() {
    let (state, mut daemon, now) = busy_state(6, 30);
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    let full = String::from_utf8(TextRenderer::default().render_to_vec(&state, &daemon, now)).unwrap();
    daemon.metrics = crate::config::MetricsConfig { operators: false, quantiles: vec![0.95] };
    let expected = encode_text(&render(&state, &daemon, now));
    let mut renderer = TextRenderer::default();
    let lean = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
    assert_eq!(lean, expected, "the text renderer and the encoder agree on lean settings");
    assert!(!lean.contains("flink_operator_checkpoint_"), "{lean}");
    assert!(lean.contains("flink_checkpoint_duration_seconds{") && lean.contains("quantile=\"0.95\""));
    assert!(!lean.contains("quantile=\"0.5\"") && !lean.contains("quantile=\"0.99\""), "{lean}");
    assert!(full.contains("flink_operator_checkpoint_") && full.contains("quantile=\"0.99\""));
    assert!(series(&lean) < series(&full) / 2, "{} lean, {} full", series(&lean), series(&full));
    // No quantiles: a summary is its _sum and _count.
    daemon.metrics.quantiles.clear();
    let bare = String::from_utf8(renderer.render_to_vec(&state, &daemon, now)).unwrap();
    assert!(!bare.contains("quantile="), "{bare}");
    assert_eq!(bare, encode_text(&render(&state, &daemon, now)));
}

#[test]
fn millisecond_values_print_as_rust_prints_them() {
    for ms in (0..200_000).chain([999_999_999_999, 1_795_964_442_123, 4_000_000_000_000]) {
        let mut out = Vec::new();
        write_scaled(&mut out, ms, MS);
        assert_eq!(String::from_utf8(out).unwrap(), (ms as f64 / 1000.0).to_string(), "{ms} ms");
    }
}

proptest! {
    #[test]
    fn numbers_print_as_rust_prints_them(
        value in prop_oneof![
            any::<f64>(),
            (-1e13f64..1e13).prop_map(|v| (v * 1000.0).round() / 1000.0),
            any::<i64>().prop_map(|v| v as f64),
            (0u64..u64::MAX).prop_map(|v| v as f64 / 1000.0),
        ]
    ) {
        let mut out = Vec::new();
        write_f64(&mut out, value);
        prop_assert_eq!(String::from_utf8(out).unwrap(), value.to_string());
    }

    #[test]
    fn label_values_escape_as_the_encoder_does(value in "[a-z\"\\\\\n ]{0,12}") {
        let mut out = Vec::new();
        escape_into(&mut out, &value, true);
        let expected = value.replace('\\', "\\\\").replace('\n', "\\n").replace('"', "\\\"");
        prop_assert_eq!(String::from_utf8(out).unwrap(), expected);
    }
}

/// An operator chain's RocksDB figures (from an evidence round) are exported per operator,
/// one family per property, in base units; a property the exporter does not know is left out.
#[test]
fn rocksdb_figures_are_exported_per_operator() {
    let (mut state, daemon, now) = busy_state(2, 1);
    let job_id = format!("{:032x}", 0);
    let vertex_id = state.clusters()["prod"].jobs[&job_id].operators.keys().next().unwrap().clone();
    let operator = state.clusters()["prod"].jobs[&job_id].operators[&vertex_id].name.clone();
    let rocksdb = vec![
        ("block-cache-usage".to_string(), 2_843_480.0),
        ("estimate-live-data-size".to_string(), 108_629.0),
        ("estimate-pending-compaction-bytes".to_string(), 0.0),
        ("num-running-compactions".to_string(), 1.0),
        ("size-all-mem-tables".to_string(), 2_101_264.0),
        ("some-other-property".to_string(), 7.0),
    ];
    let round = crate::observe::EvidenceRound {
        cluster: "prod".into(),
        at: now,
        operators: vec![crate::observe::OperatorLoad {
            job_id: job_id.clone(),
            vertex_id: vertex_id.clone(),
            operator: operator.clone(),
            rocksdb,
            ..Default::default()
        }],
        ..Default::default()
    };
    state.apply(&Observation::Evidence(round), now);
    let text = String::from_utf8(TextRenderer::default().render_to_vec(&state, &daemon, now)).unwrap();
    let value = |family: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(&vertex_id))
            .unwrap_or_else(|| panic!("no {family} in {text}"));
        assert!(line.contains(&format!("operator=\"{operator}\"")), "{line}");
        line.rsplit(' ').next().unwrap().parse::<f64>().unwrap()
    };
    assert_eq!(value("flink_operator_rocksdb_block_cache_usage_bytes"), 2_843_480.0);
    assert_eq!(value("flink_operator_rocksdb_live_data_bytes"), 108_629.0);
    assert_eq!(value("flink_operator_rocksdb_pending_compaction_bytes"), 0.0);
    assert_eq!(value("flink_operator_rocksdb_running_compactions"), 1.0);
    assert_eq!(value("flink_operator_rocksdb_memtable_bytes"), 2_101_264.0);
    assert!(!text.contains("some-other-property") && !text.contains("some_other"));
    assert_eq!(text, encode_text(&render(&state, &daemon, now)), "the renderer and the encoder agree");
}

/// Flink's job status metrics are exported under the name each was read (2.x's on one job, the
/// 1.x ones on another), and the reference encoder writes the same.
#[test]
fn job_status_metrics_are_exported_under_the_name_read() {
    let (mut state, daemon, now) = busy_state(2, 1);
    let v2 = crate::observe::JobStatusMetrics {
        restarts: Some((2, "numRestarts")),
        running_ms: Some((61_000, "runningTime")),
        restarting_ms: Some((0, "restartingTime")),
        last_metadata_bytes: Some(3_820),
        cancelling_ms: Some((0, "cancellingTime")),
        failing_ms: Some((0, "failingTime")),
    };
    let v1 = crate::observe::JobStatusMetrics {
        restarts: Some((1, "fullRestarts")),
        running_ms: Some((5_000, "uptime")),
        ..Default::default()
    };
    let key = |j: usize| JobKey {
        cluster: if j == 0 { "prod" } else { "lab \"b\\\n" }.into(),
        job_id: format!("{j:032x}"),
    };
    state.apply(&Observation::JobStatus(key(0), v2), now);
    state.apply(&Observation::JobStatus(key(1), v1), now);
    let text = String::from_utf8(TextRenderer::default().render_to_vec(&state, &daemon, now)).unwrap();
    let line = |family: &str, job: usize, has: &str| {
        let id = format!("{job:032x}");
        text.lines()
            .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(&id) && l.contains(has))
            .unwrap_or_else(|| panic!("no {family} {has} of job {job} in {text}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(line("flink_job_restarts", 0, "flink_metric=\"numRestarts\""), "2");
    assert_eq!(
        line("flink_job_status_time_seconds", 0, "status=\"running\",flink_metric=\"runningTime\""),
        "61"
    );
    assert_eq!(
        line("flink_job_status_time_seconds", 0, "status=\"failing\",flink_metric=\"failingTime\""),
        "0"
    );
    assert_eq!(line("flink_job_last_checkpoint_metadata_bytes", 0, ""), "3820");
    assert_eq!(line("flink_job_restarts", 1, "flink_metric=\"fullRestarts\""), "1");
    assert_eq!(line("flink_job_status_time_seconds", 1, "status=\"running\",flink_metric=\"uptime\""), "5");
    assert!(!text.contains("flink_job_last_checkpoint_metadata_bytes{cluster=\"lab"), "none read on 1.x");
    assert_eq!(text, encode_text(&render(&state, &daemon, now)));
}
