//! The evidence on every captured version (2.3.0, 1.20.5, 1.14.6; 1.17.2 for RocksDB): Flink's
//! metrics answers of the `gc`, `skew`, `blocked` and `rocksdb` scenarios parsed, the GC share of the last minute, the state
//! skew and the sentence beside a checkpoint, each against numbers read from the raw JSON.

use std::path::PathBuf;

use checkpoint_sentinel::observe::{CheckpointStatus, EvidenceRound, SnapshotKind, SubtaskEvidence};
use checkpoint_sentinel::sources::flink::dto::{AggregatedMetric, MetricValue, TaskCheckpointDetails};
use checkpoint_sentinel::sources::flink::metrics;
use checkpoint_sentinel::state::evidence::{ClusterEvidence, skew_of};
use checkpoint_sentinel::state::evidence_at::at_checkpoint;
use checkpoint_sentinel::state::{CheckpointRecord, Holdout};
use checkpoint_sentinel::time::Timestamp;

const VERSIONS: [&str; 3] = ["2.3.0", "1.20.5", "1.14.6"];
const T0: i64 = 1_790_000_000_000;

fn dir(version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/evidence/flink-{version}"))
}

fn read<T: serde::de::DeserializeOwned>(version: &str, file: &str) -> T {
    let text = std::fs::read_to_string(dir(version).join(file)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{version} {file}: {e}"))
}

/// The raw `id → value` of a `get` answer, as numbers.
fn raw(values: &[MetricValue]) -> std::collections::HashMap<String, f64> {
    values.iter().filter_map(|m| Some((m.id.clone(), m.value.as_deref()?.parse().ok()?))).collect()
}

/// Time in GC between the two samples, from the raw counters (each collector, `All` left out).
fn gc_ms(first: &[MetricValue], last: &[MetricValue]) -> f64 {
    let (a, b) = (raw(first), raw(last));
    b.iter()
        .filter(|(k, _)| {
            k.starts_with("Status.JVM.GarbageCollector.") && k.ends_with(".Time") && !k.contains(".All.")
        })
        .map(|(k, v)| v - a[k])
        .sum()
}

/// The `gc` scenario's TaskManager sampled at its first and last capture.
fn gc_evidence(version: &str) -> (ClusterEvidence, Timestamp, f64) {
    let times: Vec<i64> = std::fs::read_to_string(dir(version).join("gc-tm-metrics-times.txt"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let first: Vec<MetricValue> = read(version, "gc-000-tm-metrics.json");
    let last: Vec<MetricValue> = read(version, "gc-last-tm-metrics.json");
    let expected = gc_ms(&first, &last) / (times[1] - times[0]) as f64;
    let mut evidence = ClusterEvidence::default();
    for (values, t) in [(&first, times[0]), (&last, times[1])] {
        evidence.apply(&EvidenceRound {
            cluster: "c".into(),
            at: Timestamp(T0 + t),
            taskmanagers: vec![metrics::taskmanager_sample("tm-1", values)],
            ..Default::default()
        });
    }
    (evidence, Timestamp(T0 + times[1]), expected)
}

#[test]
fn collectors_are_read_from_each_versions_list_without_the_all_sum() {
    for v in VERSIONS {
        let list: Vec<MetricValue> = read(v, "gc-taskmanager-metrics-list.json");
        let names = metrics::collector_metrics(&list);
        assert!(
            names.contains(&"Status.JVM.GarbageCollector.G1_Old_Generation.Time".to_string()),
            "{v}: {names:?}"
        );
        assert!(names.contains(&"Status.JVM.GarbageCollector.G1_Young_Generation.Count".to_string()), "{v}");
        assert!(names.iter().all(|n| !n.contains(".All.")), "{v}: {names:?}");
        // Flink's own rate over the last minute, from 1.19 on.
        let rate = "Status.JVM.GarbageCollector.G1_Old_Generation.TimeMsPerSecond".to_string();
        assert_eq!(names.contains(&rate), v != "1.14.6", "{v}: {names:?}");
    }
}

#[test]
fn the_gc_share_of_the_last_minute_equals_the_counters_on_every_version() {
    for v in VERSIONS {
        let (evidence, at, expected) = gc_evidence(v);
        assert!(expected > 0.5, "{v}: the gc scenario spends most of its time in GC ({expected})");
        let share = evidence.gc_share("tm-1", at).unwrap_or_else(|| panic!("{v}: no share"));
        assert!((share.ratio - expected).abs() < 1e-9, "{v}: {} vs {expected}", share.ratio);
        assert_eq!(share.collector.as_deref(), Some("G1_Old_Generation"), "{v}");
        assert!(share.window_ms >= 50_000, "{v}: {}", share.window_ms);
        // One sample alone gives Flink's own rate (1.19+: `TimeMsPerSecond`), else no share.
        let first = evidence.gc_share("tm-1", Timestamp(at.millis() - 40_000));
        let rates: f64 = raw(&read::<Vec<MetricValue>>(v, "gc-000-tm-metrics.json"))
            .iter()
            .filter(|(k, _)| k.ends_with(".TimeMsPerSecond") && !k.contains(".All."))
            .map(|(_, r)| r)
            .sum();
        match v {
            "1.14.6" => assert_eq!(first, None),
            _ => assert!((first.unwrap().ratio - rates / 1000.0).abs() < 1e-9, "{v}"),
        }
        let last = &evidence.taskmanagers["tm-1"].back().unwrap().value;
        let values = raw(&read::<Vec<MetricValue>>(v, "gc-last-tm-metrics.json"));
        assert_eq!(last.heap_used_bytes, Some(values["Status.JVM.Memory.Heap.Used"]), "{v}");
        assert_eq!(last.heap_max_bytes, Some(values["Status.JVM.Memory.Heap.Max"]), "{v}");
        assert_eq!(last.cpu_load, values.get("Status.JVM.CPU.Load").map(|c| c.min(1.0)), "{v}");
        assert!(last.network_segments_total.is_some() && last.managed_total_bytes.is_some(), "{v}");
    }
}

#[test]
fn operator_and_subtask_loads_equal_flinks_numbers_on_every_version() {
    for v in VERSIONS {
        for file in ["gc-stateful-map-subtasks-metrics.json", "blocked-blocking-map-subtasks-metrics.json"] {
            let values: Vec<AggregatedMetric> = read(v, file);
            let (max, avg, _) = metrics::operator_load(&values);
            let of = |id: &str| values.iter().find(|m| m.id == id);
            let busy = of("busyTimeMsPerSecond").unwrap();
            assert_eq!(max.busy, busy.max.map(|b| b / 1000.0), "{v} {file}");
            assert_eq!(avg.busy, busy.avg.map(|b| b / 1000.0), "{v} {file}");
            let input = of("Shuffle.Netty.Input.Buffers.inPoolUsage").and_then(|m| m.max);
            assert_eq!(max.input_pool_usage, input, "{v} {file}");
            assert!(
                max.backpressured.is_some() && max.idle.is_some() && max.output_pool_usage.is_some(),
                "{v}"
            );
            // Hard and soft backpressure exist from 1.14 on… but only where Flink lists them.
            assert_eq!(
                max.hard_backpressured.is_some(),
                of("hardBackPressuredTimeMsPerSecond").is_some(),
                "{v}"
            );
        }
        let values: Vec<MetricValue> = read(v, "gc-stateful-map-subtask-0-metrics.json");
        let load = metrics::subtask_load(&values, "");
        assert_eq!(load.busy, raw(&values).get("busyTimeMsPerSecond").map(|b| b / 1000.0), "{v}");
        assert!(load.input_pool_usage.is_some(), "{v}");
    }
}

/// The versions with a `rocksdb` capture (RocksDB with its native metrics turned on by the job).
const ROCKSDB_VERSIONS: [&str; 3] = ["2.3.0", "1.20.5", "1.17.2"];

/// Flink lists RocksDB's native metrics per column family as `<operator>.<column family>.rocksdb_<property>`
/// (the scenario's `stateful-map` declares two states, `count` and `last`): every one is found in
/// the vertex's list, and the operator's figures are each column family's largest subtask,
/// added up for the per-family properties and the largest for the shared ones (the block cache
/// reports the same number for both families).
#[test]
fn rocksdb_metrics_are_found_per_column_family_and_combined_on_every_version() {
    for v in ROCKSDB_VERSIONS {
        let list: Vec<AggregatedMetric> = read(v, "rocksdb-stateful-map-subtasks-metrics-list.json");
        let names = metrics::rocksdb_metrics(&list);
        let listed = list.iter().filter(|m| m.id.contains("rocksdb")).count();
        assert_eq!(names.len(), listed, "{v}: {names:?}");
        assert_eq!(names.len(), 10, "{v}: five properties of two column families: {names:?}");
        let values: Vec<AggregatedMetric> = read(v, "rocksdb-stateful-map-subtasks-metrics.json");
        let (_, _, rocksdb) = metrics::operator_load(&values);
        let max_of = |family: &str, property: &str| {
            values
                .iter()
                .find(|m| m.id == format!("stateful-map.{family}.rocksdb_{property}"))
                .and_then(|m| m.max)
                .unwrap_or_else(|| panic!("{v}: {family} {property}"))
        };
        let got = |property: &str| rocksdb.iter().find(|(p, _)| p == property).map(|(_, x)| *x);
        for property in
            ["estimate-pending-compaction-bytes", "size-all-mem-tables", "estimate-live-data-size"]
        {
            let sum = max_of("count", property) + max_of("last", property);
            assert_eq!(got(property), Some(sum), "{v} {property}");
        }
        for property in ["num-running-compactions", "block-cache-usage"] {
            let max = max_of("count", property).max(max_of("last", property));
            assert_eq!(got(property), Some(max), "{v} {property}");
        }
        assert!(got("size-all-mem-tables").unwrap() > 0.0 && got("block-cache-usage").unwrap() > 0.0, "{v}");
    }
}

#[test]
fn the_skew_scenarios_hot_subtask_is_named_on_every_version() {
    for v in VERSIONS {
        let details: TaskCheckpointDetails = read(v, "skew-subtasks-stateful-map.json");
        let sizes: Vec<(u32, Option<u64>)> =
            details.subtasks.iter().map(|s| (s.index, s.state_size.map(|b| b as u64))).collect();
        let skew = skew_of("stateful-map", sizes.iter().copied()).unwrap_or_else(|| panic!("{v}: no skew"));
        assert_eq!(skew.hot_subtask, 0, "{v}");
        assert_eq!(skew.subtasks, 4, "{v}");
        let mut known: Vec<u64> = sizes.iter().filter_map(|s| s.1).collect();
        known.sort();
        assert_eq!(skew.max_bytes, known[3], "{v}");
        assert_eq!(skew.median_bytes, (known[1] + known[2]) / 2, "{v}");
        assert!(skew.ratio > 20.0, "{v}: {}", skew.ratio);
    }
}

/// A checkpoint that expired pending on `stateful-map #0`, trigger 50 s before `at`.
fn expired(at: Timestamp) -> CheckpointRecord {
    CheckpointRecord {
        id: 7,
        status: CheckpointStatus::Failed,
        kind: SnapshotKind::Checkpoint,
        triggered_at: Timestamp(at.millis() - 50_000),
        finished_at: Timestamp(at.millis() - 1_000),
        end_to_end_ms: None,
        max_phases_ms: None,
        slowest_subtask: None,
        slowest_phases_ms: None,
        failure_message: Some("Checkpoint expired before completing.".into()),
        acknowledged: Some((3, 4)),
        holdout: Some(Box::new(Holdout {
            operator: "stateful-map".into(),
            subtask: 0,
            late_ack_ms: None,
            phases_ms: [None; 4],
            never_acknowledged: 1,
            acknowledged_late: 0,
        })),
        evidence: None,
        blocked_thread: None,
    }
}

#[test]
fn the_sentence_beside_an_expired_checkpoint_carries_the_gc_share_and_says_timeout() {
    for v in VERSIONS {
        let (mut evidence, at, expected) = gc_evidence(v);
        let values: Vec<MetricValue> = read(v, "gc-stateful-map-subtask-0-metrics.json");
        let load = metrics::subtask_load(&values, "");
        evidence.apply(&EvidenceRound {
            cluster: "c".into(),
            at,
            subtasks: vec![SubtaskEvidence {
                job_id: "j".into(),
                operator: "stateful-map".into(),
                subtask: 0,
                load,
            }],
            ..Default::default()
        });
        let e = at_checkpoint(&evidence, "j", &expired(at), Some("tm-1 (127.0.0.1:4000)")).unwrap();
        let gc = format!("GC {:.0} % of the last minute (G1 Old)", expected * 100.0);
        assert!(e.text.starts_with("stateful-map #0 on tm-1: busy "), "{v}: {}", e.text);
        assert!(e.text.contains(&gc), "{v}: {} lacks {gc}", e.text);
        assert!(e.text.contains(" of 416 MiB"), "{v}: {}", e.text);
        assert_eq!(e.class.as_deref(), Some("timeout"), "{v}");
        assert_eq!(e.used, ["gc"], "{v}");
        assert_eq!(e.thin, None, "{v}");
        assert!(e.own_subtask);
    }
}

#[test]
fn evidence_older_than_the_checkpoint_is_called_thin() {
    let (evidence, at, _) = gc_evidence("1.20.5");
    // A checkpoint ten minutes later: no sample near it.
    let later = Timestamp(at.millis() + 600_000);
    let e = at_checkpoint(&evidence, "j", &expired(later), Some("tm-1")).unwrap();
    assert_eq!(e.class, None);
    let thin = e.thin.unwrap();
    assert!(
        thin.contains("no sample of stateful-map's load") && thin.contains("no sample of tm-1"),
        "{thin}"
    );
    assert!(e.text.contains("evidence thin:"), "{}", e.text);
    // An unknown TaskManager is said so.
    let e = at_checkpoint(&evidence, "j", &expired(at), None).unwrap();
    assert!(e.thin.unwrap().contains("its TaskManager is not known"));
}

/// The evidence source against the demo's metrics endpoints: rounds every 10 s within the
/// request budget, the TaskManager's GC share once two samples are in, the operators' load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_evidence_per_taskmanager_and_operator_within_the_budget() {
    use checkpoint_sentinel::commands::demo::{DemoOptions, start};
    let dir = tempfile::tempdir().unwrap();
    let options = DemoOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        jobs: 5,
        seed: 1,
        dir: Some(dir.path().into()),
        interval_scale: 1,
    };
    let demo = start(options).await.unwrap();
    let tm = "flink_taskmanager_gc_time_ratio{cluster=\"demo\",taskmanager=\"127.0.0.1:6122-demo01\"}";
    let body = crate::common::scrape_until(
        demo.daemon.addr,
        "the GC share on /metrics",
        std::time::Duration::from_secs(45),
        |b| b.contains(tm) && b.contains("flink_operator_busy_ratio{"),
    )
    .await;
    let number = |prefix: &str| -> f64 {
        let line =
            body.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix} in {body}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    // The demo's young collector spends 2 % of the time.
    assert!((number(tm) - 0.02).abs() < 0.005, "{}", number(tm));
    let made = number("checkpoint_sentinel_evidence_requests_total{cluster=\"demo\",outcome=\"made\"}");
    let rounds_at_most = 5.0; // 45 s at one round per 10 s
    assert!(made > 0.0 && made <= 8.0 * rounds_at_most, "{made} requests");
    assert!(body.contains(
        "flink_taskmanager_heap_max_bytes{cluster=\"demo\",taskmanager=\"127.0.0.1:6122-demo01\"} 536870912"
    ));
    demo.shutdown().await;
}

/// The built-in side on a real timeline (1.20.5 `expired`, its polls and load as the poller
/// reports them) with evidence rounds beside it: the TaskManager that ran the culprit spends
/// 40 % of its time in GC. The failed checkpoints carry that evidence, the failure alert's
/// description quotes it, and FlinkTaskManagerGcPressure holds for that TaskManager only.
#[test]
fn failed_checkpoints_carry_the_evidence_into_the_store_record_and_the_alerts() {
    use checkpoint_sentinel::observe::{CollectorCounters, Observation, TaskManagerSample};
    use checkpoint_sentinel::rules::{Evaluator, Rule, builtin};
    use checkpoint_sentinel::state::State;
    use checkpoint_sentinel::stats::WindowSpec;
    let scenario = crate::common::Scenario::load("1.20.5", "expired");
    let polls = scenario.job_polls();
    let load = scenario.load_report();
    let tm = "127.0.0.1:19125-bd2dde";
    let mut state = State::new(WindowSpec { window_ms: 3_600_000, slots: 6 });
    state.keep_for_store(true);
    let rules = builtin::rules().into_iter().map(|s| Rule::new(s).unwrap()).collect();
    let mut evaluator = Evaluator::new(rules);
    let first = polls[0].polled_at.millis();
    let sample = |at: i64| TaskManagerSample {
        id: tm.into(),
        heap_used_bytes: Some(400e6),
        heap_max_bytes: Some(500e6),
        collectors: vec![CollectorCounters {
            name: "G1_Old_Generation".into(),
            count: Some(1),
            time_ms: Some(((at - first + 60_000) as f64 * 0.4) as u64 + 1_000),
            ..Default::default()
        }],
        ..Default::default()
    };
    // The first poll creates the job; its checkpoints are counted before the load places the
    // subtasks, so they have no TaskManager and no evidence: the later ones are checked.
    state.apply(&Observation::JobPolled(polls[0].clone()), polls[0].polled_at);
    state.apply(&Observation::JobLoad(load), polls[0].polled_at);
    let counted_first: Vec<u64> = polls[0].finished.iter().map(|c| c.id).collect();
    // The rounds start a minute before the capture, so every failure has a minute of GC behind it.
    let mut at = first - 60_000;
    for poll in &polls {
        // A round every 10 s up to this poll, then the poll.
        while at <= poll.polled_at.millis() {
            let subtask = SubtaskEvidence {
                job_id: poll.key.job_id.clone(),
                operator: "stateful-map".into(),
                subtask: 0,
                load: checkpoint_sentinel::observe::Load {
                    busy: Some(1.0),
                    backpressured: Some(0.0),
                    ..Default::default()
                },
            };
            let round = EvidenceRound {
                cluster: poll.key.cluster.clone(),
                at: Timestamp(at),
                subtasks: vec![subtask],
                taskmanagers: vec![sample(at)],
                ..Default::default()
            };
            state.apply(&Observation::Evidence(round), Timestamp(at));
            at += 10_000;
        }
        state.apply(&Observation::JobPolled(poll.clone()), poll.polled_at);
        evaluator.evaluate(&state, poll.polled_at);
    }
    let last = polls.last().unwrap().polled_at;
    // The records of the failed checkpoints: GC 40 %, class timeout.
    let cluster = &state.clusters()[&polls[0].key.cluster];
    let job = &cluster.jobs[&polls[0].key.job_id];
    let failed: Vec<_> = job
        .recent
        .iter()
        .filter(|r| r.status == CheckpointStatus::Failed && !counted_first.contains(&r.id))
        // A culprit needs the per-subtask details (the capture lacks some).
        .filter(|r| r.holdout.is_some())
        .collect();
    assert!(!failed.is_empty());
    for r in failed {
        let e = r.evidence.as_ref().unwrap_or_else(|| panic!("checkpoint {} has no evidence: {r:?}", r.id));
        assert!(e.text.starts_with(&format!("stateful-map #0 on {tm}: busy 100 %, backpressured 0 %, GC 40 % of the last minute (G1 Old), heap 80 % of 477 MiB")), "{}", e.text);
        assert_eq!((e.class.as_deref(), e.used.as_slice()), (Some("timeout"), &["gc".to_string()][..]));
    }
    // The store gets the same record.
    let (stored, _) = state.take_store_batch();
    assert!(
        stored.iter().any(|o| o.checkpoint.record.evidence.as_ref().is_some_and(|e| e.gc_ratio == Some(0.4)))
    );
    // The alerts: the failure's description quotes the evidence; GC pressure is pending on the
    // culprit's TaskManager (its `for` is 5 minutes).
    evaluator.evaluate(&state, last);
    let active: Vec<_> = evaluator.active().cloned().collect();
    let failed_alert = active
        .iter()
        .find(|a| a.labels["alertname"] == "FlinkCheckpointFailed")
        .expect("FlinkCheckpointFailed");
    let description = &failed_alert.annotations["description"];
    assert!(
        description.contains(" Beside checkpoint ")
            && description.contains("GC 40 % of the last minute (G1 Old)")
            && description.contains("(class timeout: gc)."),
        "{description}"
    );
    let gc: Vec<_> =
        active.iter().filter(|a| a.labels["alertname"] == "FlinkTaskManagerGcPressure").collect();
    assert_eq!(gc.len(), 1, "{active:#?}");
    assert!(gc[0].labels["taskmanager"].starts_with(tm), "{:?}", gc[0].labels);
    assert!(
        gc[0].annotations["summary"].contains("spends 40.0% of its time in GC"),
        "{:?}",
        gc[0].annotations
    );
}
