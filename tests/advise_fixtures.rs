//! `advise --format json` on every captured scenario of every Flink version: the expected
//! findings (docs/advice.md), a min-pause spacing predicted within 10 % of the observed one, and
//! every prediction agreeing with itself, there and on the demo's jobs.

use std::path::{Path, PathBuf};

use checkpoint_sentinel::commands::advise::{render, replay};

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for version in std::fs::read_dir(&root).unwrap().flatten() {
        if !version.file_name().to_string_lossy().starts_with("flink-") {
            continue;
        }
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            if scenario.path().join("rest/checkpoints-config.json").is_file() {
                out.push(scenario.path());
            }
        }
    }
    out.sort();
    out
}

fn advise_json(dir: &Path) -> serde_json::Value {
    let report = replay::read(dir, None).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let doc: serde_json::Value = serde_json::from_str(&render::json(&report)).unwrap();
    doc["jobs"][0].clone()
}

fn ids(job: &serde_json::Value) -> Vec<String> {
    job["findings"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn every_capture_gets_the_expected_findings() {
    let mut checked = 0;
    let mut minpause = 0;
    for dir in captures() {
        let scenario = dir.file_name().unwrap().to_string_lossy().to_string();
        let job = advise_json(&dir);
        let found = ids(&job);
        let at = format!("{}: {found:?}", dir.display());
        // The contract: every finding carries these.
        for f in job["findings"].as_array().unwrap() {
            for key in ["id", "severity", "evidence", "summary"] {
                assert!(!f[key].is_null(), "{at}: {key} missing in {f}");
            }
            assert!(f["recommendation"]["set"].is_object(), "{at}: {f}");
            assert!(
                f["predicted"].get("current").is_some() && f["predicted"].get("recommended").is_some(),
                "{at}"
            );
        }
        assert!(found.contains(&"no_retention".to_string()), "{at}");
        let tolerable = job["configuration"]["settings"]["tolerable_failures"].as_u64().unwrap();
        assert_eq!(found.contains(&"tolerable_too_high".to_string()), tolerable > 10, "{at}");
        if job["thin"].is_string() {
            for id in checkpoint_sentinel::advice::TIMING {
                assert!(!found.contains(&id.to_string()), "{at}: thin evidence but {id}");
            }
        }
        match scenario.as_str() {
            "minpause" => {
                assert!(found.contains(&"min_pause_binds".to_string()), "{at}");
                let f = job["findings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|f| f["id"] == "min_pause_binds")
                    .unwrap();
                let predicted = f["predicted"]["current"]["spacing_ms"].as_f64().unwrap();
                let observed = job["observed"]["spacing_ms"].as_f64().unwrap();
                assert!(
                    (predicted - observed).abs() <= observed * 0.1,
                    "{at}: predicted {predicted}, observed {observed}"
                );
                minpause += 1;
            }
            "expired" => assert!(found.contains(&"timeout_tight".to_string()), "{at}"),
            s if s.starts_with("backpressure") && !s.contains("unaligned") => {
                assert!(found.contains(&"alignment_share_high".to_string()), "{at}")
            }
            "healthy" => {
                for id in checkpoint_sentinel::advice::TIMING {
                    assert!(!found.contains(&id.to_string()), "{at}: healthy but {id}");
                }
            }
            _ => {}
        }
        checked += 1;
    }
    assert!(checked >= 34, "only {checked} captures");
    assert_eq!(minpause, 3);
}

/// The expired scenario's timeout recommendation rests on the late acknowledgements: under it
/// the model predicts no expiry.
#[test]
fn the_expired_recommendation_predicts_no_expiry() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flink-2.3.0/expired");
    let job = advise_json(&dir);
    let f = job["findings"].as_array().unwrap().iter().find(|f| f["id"] == "timeout_tight").unwrap().clone();
    assert_eq!(f["recommendation"]["set"]["execution.checkpointing.timeout"], "10s");
    assert!(f["predicted"]["current"]["expiries_per_hour"].as_f64().unwrap() > 100.0);
    assert_eq!(f["predicted"]["recommended"]["expiries_per_hour"].as_f64().unwrap(), 0.0);
    // Subtask 0 of stateful-map sleeps 6 s on these checkpoints and acknowledges late.
    assert!((6_000..6_100).contains(&f["evidence"]["expired_needed_ms"].as_u64().unwrap()));
}

/// The daemon's advice of a polled job: the whole configuration read (the restart strategy from
/// `/jobs/:id/config`), the same findings as `advise`, the risk series and their count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_serves_the_advice_and_exports_the_risks() {
    let flink = crate::common::replay("2.3.0", "expired").await;
    let state = tempfile::tempdir().unwrap();
    let config = crate::common::watching(&flink.url, std::time::Duration::from_millis(100), state.path());
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let job_id = flink.scenario().job_id.clone();
    let url = format!("http://{}/api/v1/jobs/lab/{job_id}/advice", daemon.addr);
    let advice = crate::common::until(
        "the advice with enough checkpoints to time it",
        std::time::Duration::from_secs(60),
        || async { reqwest::get(&url).await.unwrap().json::<serde_json::Value>().await.unwrap() },
        |a| {
            a["thin"].is_null()
                && a["findings"].as_array().is_some_and(|f| f.iter().any(|f| f["id"] == "timeout_tight"))
        },
    )
    .await;
    let found = ids(&advice);
    for id in ["timeout_tight", "tolerable_too_high", "no_retention"] {
        assert!(found.contains(&id.to_string()), "{found:?}");
    }
    assert_eq!(advice["job_name"], "flink-lab-expired");
    assert!(
        advice["configuration"]["restart_strategy"].as_str().unwrap().starts_with("Restart with fixed delay")
    );
    assert_eq!(advice["configuration"]["flink_version"], "2.3.0");
    let metrics = crate::common::scrape(daemon.addr).await;
    for (finding, on) in [("tolerable_too_high", 1.0), ("timeout_tight", 1.0), ("no_retention", 1.0)] {
        let labels = [
            ("cluster", "lab"),
            ("job_id", job_id.as_str()),
            ("job_name", "flink-lab-expired"),
            ("finding", finding),
        ];
        assert_eq!(
            crate::common::sample(&metrics, "flink_checkpoint_config_risk", &labels),
            Some(on),
            "{finding}"
        );
    }
    let missing = reqwest::get(format!("http://{}/api/v1/jobs/lab/nope/advice", daemon.addr)).await.unwrap();
    assert_eq!(missing.status(), 404);
    // `advise --url` on the same cluster goes through the daemon's pipeline (`commands::look`):
    // the same findings as the daemon's API (the replay moves on between the two, so the counts
    // behind them may have grown).
    let args = checkpoint_sentinel::commands::advise::AdviseArgs {
        url: Some(flink.url.clone()),
        config: None,
        cluster: None,
        replay: None,
        job: Some(job_id.clone()),
        format: checkpoint_sentinel::commands::advise::Format::Json,
        checkpoints: 10,
        timeout: std::time::Duration::from_secs(10),
    };
    let live: serde_json::Value =
        serde_json::from_str(&checkpoint_sentinel::commands::advise::run(&args).await.unwrap()).unwrap();
    let one = &live["jobs"][0];
    assert_eq!(ids(one), found, "advise --url and the daemon's API");
    daemon.shutdown().await;
}

/// Keys that only the cluster's configuration sets (`/jobmanager/config`), captured from real
/// clusters started with them (`e2e/flink.sh start` with `SENTINEL_E2E_EXTRA_CONF`; 2.x names
/// and 1.x names both present, each version reads its own): incremental RocksDB checkpoints, 3
/// retained, local recovery. The job's own configuration says none of them, so the advisor's
/// configuration has them from the cluster, and the storage it asks for counts 3 retained.
#[test]
fn the_clusters_own_configuration_fills_what_the_job_does_not_say() {
    for version in ["2.3.0", "1.14.6"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/fixtures/flink-{version}/cluster-config"));
        let cluster: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("rest/jobmanager-config.json")).unwrap())
                .unwrap();
        let set = |key: &str| cluster.as_array().unwrap().iter().any(|e| e["key"] == key);
        assert!(
            set("execution.checkpointing.num-retained") && set("state.checkpoints.num-retained"),
            "{version}"
        );
        let job_config = std::fs::read_to_string(dir.join("rest/job-config.json")).unwrap();
        assert!(!job_config.contains("num-retained") && !job_config.contains("incremental"), "{version}");
        let job = advise_json(&dir);
        let c = &job["configuration"];
        assert_eq!(c["incremental"], true, "{version}: {c}");
        assert_eq!(c["retained_checkpoints"], 3, "{version}: {c}");
        assert_eq!(c["local_recovery"], true, "{version}: {c}");
        let need = job["findings"].as_array().unwrap().iter().find(|f| f["id"] == "storage_need");
        assert_eq!(need.map(|f| f["evidence"]["retained"].clone()), Some(3.into()), "{version}: {job}");
    }
}

/// Why a prediction of the JSON contract contradicts itself, if it does (docs/advice.md): its
/// spacing is one hour over the completed and failed checkpoints per hour (the failed counting
/// the expired), within 5 %.
fn contradiction(p: &serde_json::Value) -> Option<String> {
    let spacing = p["spacing_ms"].as_f64()?;
    let per_hour = p["checkpoints_per_hour"].as_f64()? + p["failures_per_hour"].as_f64()?;
    let from_rates = 3_600_000.0 / per_hour;
    let off = (spacing - from_rates).abs() / from_rates;
    (per_hour <= 0.0 || off.is_nan() || off > 0.05).then(|| {
        format!(
            "spacing {spacing} ms, but {} completed + {} failed per hour give {from_rates:.0} ms",
            p["checkpoints_per_hour"], p["failures_per_hour"]
        )
    })
}

/// Every prediction of a job of the JSON contract, named: the current one, and each finding's
/// current and recommended ones (`null` ones left out).
fn predictions(job: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let mut out = vec![("current".to_string(), job["predicted"].clone())];
    for f in job["findings"].as_array().unwrap() {
        for side in ["current", "recommended"] {
            out.push((format!("{} {side}", f["id"].as_str().unwrap()), f["predicted"][side].clone()));
        }
    }
    out.retain(|(_, p)| !p.is_null());
    out
}

/// Every prediction of `job` agrees with itself; how many there were.
fn assert_self_consistent(at: &str, job: &serde_json::Value) -> usize {
    let all = predictions(job);
    for (which, p) in &all {
        // A missing field would make the check vacuous.
        for key in ["spacing_ms", "checkpoints_per_hour", "failures_per_hour", "expiries_per_hour"] {
            assert!(p[key].is_number(), "{at}: {which}: no {key} in {p}");
        }
        assert!(p["failures_per_hour"].as_f64() >= p["expiries_per_hour"].as_f64(), "{at}: {which}: {p}");
        if let Some(why) = contradiction(p) {
            panic!("{at}: {which}: {why}\n{p}");
        }
    }
    all.len()
}

/// One row of the table printed with `--nocapture`: a spacing and the one its rates imply.
fn spacing_pair(p: &serde_json::Value) -> String {
    if p.is_null() {
        return "-".into();
    }
    let per_hour = p["checkpoints_per_hour"].as_f64().unwrap() + p["failures_per_hour"].as_f64().unwrap();
    format!("{} ms / {:.0} ms", p["spacing_ms"], 3_600_000.0 / per_hour)
}

/// On every capture, every prediction's spacing is what the checkpoints per hour beside it
/// imply (`--nocapture` prints them: spacing / 3,600 s ÷ rate, current and recommended).
#[test]
fn every_prediction_on_every_capture_agrees_with_itself() {
    let (mut checked, mut scenarios) = (0, 0);
    let mut table = String::from("| scenario | finding | current | recommended |\n|---|---|---|---|\n");
    for dir in captures() {
        let job = advise_json(&dir);
        let name = dir.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")).unwrap();
        let n = assert_self_consistent(&name.display().to_string(), &job);
        checked += n;
        scenarios += usize::from(n > 0);
        for f in job["findings"].as_array().unwrap() {
            table += &format!(
                "| {} | {} | {} | {} |\n",
                name.display(),
                f["id"].as_str().unwrap(),
                spacing_pair(&f["predicted"]["current"]),
                spacing_pair(&f["predicted"]["recommended"])
            );
        }
    }
    println!("{table}");
    // Most captures have enough checkpoints to predict on (the thin ones have no prediction).
    assert!(scenarios >= 25 && checked >= 150, "{scenarios} scenarios, {checked} predictions");
}

/// `advise --url` against the demo's simulated cluster, stepped to several moments (each shows
/// the ten newest checkpoints, as Flink's history does): every prediction of every job agrees
/// with itself, the expiring job's 6 s timeout recommendation among them (it once predicted
/// 51 ms beside 1,770 checkpoints an hour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_prediction_on_the_demo_agrees_with_itself() {
    use checkpoint_sentinel::commands::advise::{AdviseArgs, Format};
    use checkpoint_sentinel::commands::demo::{cluster::DemoCluster, rest};
    use checkpoint_sentinel::time::Timestamp;
    use parking_lot::Mutex;
    use std::sync::Arc;

    let start = Timestamp(1_796_441_900_000);
    let cluster = Arc::new(Mutex::new(DemoCluster::new(5, 1, start)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(axum::serve(listener, rest::router(cluster.clone())).into_future());
    let args = AdviseArgs {
        url: Some(url),
        config: None,
        cluster: None,
        replay: None,
        job: None,
        format: Format::Json,
        checkpoints: 10,
        timeout: std::time::Duration::from_secs(10),
    };
    let (mut checked, mut expiring_recommended) = (0, 0);
    for seconds in [20, 45, 90, 180, 600] {
        cluster.lock().advance(start.plus_millis(seconds * 1_000));
        let doc: serde_json::Value =
            serde_json::from_str(&checkpoint_sentinel::commands::advise::run(&args).await.unwrap()).unwrap();
        for job in doc["jobs"].as_array().unwrap() {
            let at = format!("{} at {seconds} s", job["job_name"]);
            checked += assert_self_consistent(&at, job);
            if job["job_name"].as_str().unwrap().contains("expiring") {
                let tight = job["findings"].as_array().unwrap().iter().find(|f| f["id"] == "timeout_tight");
                expiring_recommended +=
                    usize::from(tight.is_some_and(|f| f["predicted"]["recommended"].is_object()));
            }
        }
    }
    server.abort();
    assert!(
        expiring_recommended >= 3,
        "the expiring job's timeout finding predicted {expiring_recommended} times"
    );
    assert!(checked >= 60, "only {checked} predictions");
}

#[test]
fn an_exactly_once_kafka_job_with_a_short_transaction_timeout_gets_the_warning_and_the_keys_read() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/advise/kafka-short-timeout");
    let job = advise_json(&dir);
    let finding = job["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "kafka_transaction_timeout")
        .unwrap_or_else(|| panic!("{:?}", ids(&job)));
    assert_eq!(finding["severity"], "warning");
    // Interval 5 s and the capture's P99 of 3,755 ms, no restore seen: 8,755 ms, over half of 15 s.
    assert_eq!(finding["evidence"]["need_ms"], 8_755);
    assert_eq!(finding["evidence"]["transaction_timeout_ms"], 15_000);
    let keys: Vec<(&str, &str)> = job["configuration"]["keys_read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["key"].as_str().unwrap(), k["source"].as_str().unwrap()))
        .collect();
    assert!(keys.contains(&("transaction.timeout.ms", "job parameters")), "{keys:?}");
}
