//! A cancelled job through the real poller: Flink lists it CANCELED at once while its
//! checkpoint statistics still show the checkpoint in progress (the REST cache lags the
//! cancel); the poller polls it until its counts settle, so the daemon ends with Flink's final
//! counts (the checkpoint the cancel failed included), nothing in progress, and then stops
//! polling it.

use crate::common;

use std::time::Duration;

use checkpoint_sentinel::sources::poller::MAX_FINAL_POLLS;
use common::{read_json, replay_then_cancel, sample, scrape};

#[tokio::test]
async fn a_cancelled_job_is_polled_until_its_counts_settle_then_left_alone() {
    for version in ["2.3.0", "1.20.5", "1.14.6"] {
        let server = replay_then_cancel(version, "backpressure").await;
        let state = tempfile::tempdir().unwrap();
        let config = common::watching(&server.url, Duration::from_millis(100), state.path());
        let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
        let series = server.scenario().polls.len();
        // The stale answer, the settled one, the same again: then the counts stopped changing.
        server.wait_for_polls(3).await;
        // At a 100 ms poll the counts cannot stay the same for FINAL_SETTLE_MS (longer than
        // Flink's REST cache) before MAX_FINAL_POLLS: the bound ends the polls here. Ended once
        // five rounds of the cluster went by without a poll of the job.
        let last_change = std::sync::Mutex::new((0, 0.0));
        let rounds_and_polls = || async {
            let metrics = scrape(daemon.addr).await;
            let rounds =
                sample(&metrics, "checkpoint_sentinel_polls_total", &[("cluster", "lab")]).unwrap_or(0.0);
            let served = server.polls_served();
            let mut last = last_change.lock().unwrap();
            if last.0 != served {
                *last = (served, rounds);
            }
            (served, rounds - last.1, metrics)
        };
        let (served, _, metrics) = common::until(
            "five rounds without a poll of the cancelled job",
            Duration::from_secs(60),
            rounds_and_polls,
            |(served, quiet_rounds, _)| *served >= series + 3 && *quiet_rounds >= 5.0,
        )
        .await;
        let served_later = server.polls_served();
        daemon.shutdown().await;

        let fin =
            read_json(&server.scenario().dir.join("rest/checkpoints-after-cancel.json"))["counts"].clone();
        let job = server.scenario().job_id.clone();
        let name = metrics
            .lines()
            .find(|l| l.starts_with("flink_job_info{") && l.contains(&job))
            .and_then(|l| l.split("job_name=\"").nth(1))
            .and_then(|r| r.split('"').next())
            .unwrap()
            .to_string();
        let with = |status: Option<&'static str>| {
            let mut labels = vec![("cluster", "lab"), ("job_id", job.as_str()), ("job_name", name.as_str())];
            labels.extend(status.map(|s| ("status", s)));
            labels
        };
        let completed = sample(&metrics, "flink_checkpoints_total", &with(Some("completed")));
        let failed = sample(&metrics, "flink_checkpoints_total", &with(Some("failed")));
        assert_eq!(
            (completed, failed),
            (fin["completed"].as_f64(), fin["failed"].as_f64()),
            "{version}: Flink's final counts, the checkpoint the cancel failed included"
        );
        assert_eq!(sample(&metrics, "flink_checkpoints_in_progress", &with(None)), Some(0.0), "{version}");
        assert_eq!(
            sample(&metrics, "flink_checkpoint_oldest_in_progress_age_seconds", &with(None)),
            Some(0.0),
            "{version}"
        );
        assert_eq!(
            sample(
                &metrics,
                "flink_job_info",
                &[("cluster", "lab"), ("job_id", &job), ("job_name", &name), ("state", "CANCELED")]
            ),
            Some(1.0),
            "{version}"
        );
        // Polled past the stale answer until settled or the bound, and then not again.
        let finals = served - series;
        assert!(
            (3..=usize::from(MAX_FINAL_POLLS)).contains(&finals),
            "{version}: {finals} polls after the series of {series}"
        );
        assert_eq!(served_later, served, "{version}: still polled after its final polls");
    }
}
