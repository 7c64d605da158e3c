//! Kubernetes discovery through the real daemon against the list/watch stub (tests/kube_stub.rs):
//! a cluster behind a Flink native `-rest` Service and one behind a FlinkDeployment are found
//! and polled to Flink's own counts; a watch that breaks off resumes from its resourceVersion
//! (no re-list) and sees the Service deleted (its series go); a 410 Gone makes it list again,
//! and the list brings the Service back and drops a session job deleted meanwhile (its series return with Flink's counts, nothing counted
//! twice); a suspended FlinkDeployment stops being polled.

use crate::common;
use crate::kube_stub::{KubeStub, Res, fixture};

use std::time::Duration;

use common::{replay, sample, scrape, scrape_until, until};

/// How long a scrape waits for what it checks.
const WAIT: Duration = Duration::from_secs(20);

fn counts(metrics: &str, cluster: &str, job_id: &str) -> (Option<f64>, Option<f64>) {
    let find = |status: &str| {
        metrics.lines().find_map(|l| {
            let ok = l.starts_with("flink_checkpoints_total{")
                && l.contains(&format!("cluster=\"{cluster}\""))
                && l.contains(&format!("job_id=\"{job_id}\""))
                && l.contains(&format!("status=\"{status}\""));
            ok.then(|| l.rsplit_once(' ')?.1.parse().ok()).flatten()
        })
    };
    (find("completed"), find("failed"))
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_follow_services_and_flink_deployments_through_drops_and_410() {
    let orders = replay("2.3.0", "healthy").await;
    let lab = replay("1.20.5", "healthy").await;
    // As Flink and the operator create them; the ports are the replay servers' (the daemon
    // reaches them at 127.0.0.1 through url_template instead of the cluster DNS name).
    let mut rest = fixture("service-native-rest.json");
    rest["spec"]["ports"][0]["port"] = port_of(&orders.url).into();
    let mut deployment = fixture("flinkdeployment-running.json");
    deployment["spec"]["flinkConfiguration"]["rest.port"] = port_of(&lab.url).to_string().into();
    let mut elsewhere = rest.clone();
    elsewhere["metadata"]["namespace"] = "other".into();
    // A session job submitted to lab: one cluster however many objects name it.
    let mut session_job = fixture("flinksessionjob.json");
    session_job["spec"]["deploymentName"] = "lab".into();
    let stub = KubeStub::start(vec![
        rest.clone(),
        fixture("service-native-internal.json"),
        deployment.clone(),
        elsewhere,
        session_job.clone(),
    ])
    .await;

    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching(&lab.url, Duration::from_millis(100), state.path());
    config.clusters.clear();
    let k = &mut config.discovery.kubernetes;
    k.enabled = true;
    k.api_url = Some(stub.url.clone());
    k.namespaces = vec!["flink".into()];
    k.kinds = vec!["services".into(), "flinkdeployments".into(), "flinksessionjobs".into()];
    k.url_template = "http://127.0.0.1:{port}".into();
    // Watches end every second (the API server's timeoutSeconds) and are resumed.
    k.watch_timeout = Duration::from_secs(1);
    config.discovery.defaults.poll_interval = Duration::from_millis(100);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();

    // Found and polled to Flink's counts: flink.orders (Service), flink.lab (FlinkDeployment);
    // the internal service and the other namespace's service are not clusters.
    orders.wait_for_polls(2).await;
    lab.wait_for_polls(2).await;
    let (o, l) = (orders.scenario(), lab.scenario());
    let want = |s: &common::Scenario| {
        let last = s.last_counts();
        (last["completed"].as_f64(), last["failed"].as_f64())
    };
    let first = scrape_until(daemon.addr, "both counted", WAIT, |m| {
        counts(m, "flink.orders", &o.job_id) == want(o) && counts(m, "flink.lab", &l.job_id) == want(l)
    })
    .await;
    assert_eq!(sample(&first, "checkpoint_sentinel_kubernetes_discovered_clusters", &[]), Some(2.0));
    assert_eq!(sample(&first, "checkpoint_sentinel_kubernetes_synced", &[]), Some(1.0));
    assert_eq!(sample(&first, "checkpoint_sentinel_kubernetes_objects", &[("kind", "services")]), Some(1.0));
    assert_eq!(
        sample(&first, "checkpoint_sentinel_kubernetes_objects", &[("kind", "flinkdeployments")]),
        Some(1.0)
    );
    assert!(!first.contains("cluster=\"other."), "only the namespaces configured");
    // What the operator's status says, beside what the daemon polls.
    let lab_info = [
        ("cluster", "flink.lab"),
        ("resource", "flinkdeployment/lab"),
        ("job_id", "8a3c1f0e2b4d6a8c0e1f3a5b7c9d1e2f"),
        ("state", "RUNNING"),
        ("lifecycle_state", "STABLE"),
    ];
    assert_eq!(sample(&first, "flink_operator_job_info", &lab_info), Some(1.0));
    crate::golden::promtool_check(&first);
    assert_eq!(
        sample(&first, "checkpoint_sentinel_kubernetes_objects", &[("kind", "flinksessionjobs")]),
        Some(1.0)
    );
    assert!(
        first.contains(r#"flink_operator_job_info{cluster="flink.lab",resource="flinksessionjob/top-speed""#)
    );
    assert_eq!(
        sample(
            &first,
            "flink_operator_last_savepoint_timestamp_seconds",
            &[("cluster", "flink.lab"), ("resource", "flinkdeployment/lab")]
        ),
        Some(1_764_494_400.0)
    );
    assert_eq!(stub.lists(Res::Services), 1);

    // Watches that the server ended were resumed, not re-listed.
    until("three watches of Services", WAIT, || async { stub.watches(Res::Services) }, |n| *n >= 3).await;
    assert_eq!(stub.lists(Res::Services), 1);

    // The watch breaks off; the Service is deleted meanwhile. The watcher resumes from the
    // version it saw (no new list) and gets the DELETED event: orders' series go.
    let watches = stub.watches(Res::Services);
    stub.drop_watches();
    stub.delete(Res::Services, "flink", "orders-rest");
    let t = std::time::Instant::now();
    // The series going and the broken watch being counted are two steps: wait for both.
    let gone = scrape_until(daemon.addr, "orders removed and the broken watch counted", WAIT, |m| {
        !m.contains("cluster=\"flink.orders\"")
            && sample(
                m,
                "checkpoint_sentinel_kubernetes_watch_errors_total",
                &[("kind", "services"), ("reason", "watch_stream")],
            ) >= Some(1.0)
    })
    .await;
    eprintln!("kubernetes: dropped watch + delete -> series gone in {:?}", t.elapsed());
    assert_eq!(stub.lists(Res::Services), 1, "resumed, not listed again");
    assert!(stub.watches(Res::Services) > watches, "a new watch");
    assert_eq!(
        sample(&gone, "checkpoint_sentinel_kubernetes_relists_total", &[("kind", "services")]),
        Some(0.0)
    );
    assert!(
        sample(
            &gone,
            "checkpoint_sentinel_kubernetes_watch_errors_total",
            &[("kind", "services"), ("reason", "watch_stream")]
        ) >= Some(1.0),
        "the broken watch is counted"
    );
    assert_eq!(counts(&gone, "flink.lab", &l.job_id), want(l), "lab untouched");
    let served_while_gone = orders.polls_served();
    // Four more rounds of lab: the daemon went on polling, not the deleted cluster.
    let lab_served = lab.polls_served() + 4;
    until("four more rounds of lab", WAIT, || async { lab.polls_served() }, |n| *n >= lab_served).await;
    assert_eq!(orders.polls_served(), served_while_gone, "not polled once deleted");

    // Re-added, but the history is compacted past it: the resumed watch gets 410 Gone, the
    // watcher lists again and the list has it. Back with Flink's counts, not doubled.
    // The session job is deleted in the same gap: only the new list says so, and the list
    // replaces what the watch had.
    stub.compact(|write| {
        write("ADDED", rest.clone());
        write("DELETED", session_job.clone());
    });
    let t = std::time::Instant::now();
    let back = scrape_until(daemon.addr, "orders back, the session job gone", WAIT, |m| {
        counts(m, "flink.orders", &o.job_id).0.is_some() && !m.contains("flinksessionjob/top-speed")
    })
    .await;
    eprintln!("kubernetes: 410 Gone + re-list -> series back in {:?}", t.elapsed());
    assert!(stub.lists(Res::Services) >= 2, "listed again");
    assert!(stub.bookmarks_and_gone().1 >= 1, "410 sent");
    assert!(
        sample(&back, "checkpoint_sentinel_kubernetes_relists_total", &[("kind", "services")]) >= Some(1.0)
    );
    assert!(
        sample(
            &back,
            "checkpoint_sentinel_kubernetes_watch_errors_total",
            &[("kind", "services"), ("reason", "gone")]
        ) >= Some(1.0)
    );
    assert_eq!(counts(&back, "flink.orders", &o.job_id), want(o), "restored with Flink's counts");
    let served_back = orders.polls_served() + 3;
    until("three more polls of orders", WAIT, || async { orders.polls_served() }, |n| *n >= served_back)
        .await;
    let after = scrape(daemon.addr).await;
    assert_eq!(counts(&after, "flink.orders", &o.job_id), want(o), "and not counted twice later");
    assert!(orders.polls_served() > served_while_gone, "polled again");
    assert_eq!(sample(&after, "checkpoint_sentinel_kubernetes_discovered_clusters", &[]), Some(2.0));

    // The operator suspends lab: no JobManager, so no cluster to poll.
    let mut suspended = deployment.clone();
    suspended["spec"]["job"]["state"] = "suspended".into();
    suspended["status"]["lifecycleState"] = "SUSPENDED".into();
    suspended["status"]["jobManagerDeploymentStatus"] = "MISSING".into();
    stub.apply(suspended);
    let off =
        scrape_until(daemon.addr, "lab removed", WAIT, |m| counts(m, "flink.lab", &l.job_id).0.is_none())
            .await;
    assert_eq!(sample(&off, "checkpoint_sentinel_kubernetes_discovered_clusters", &[]), Some(1.0));
    assert_eq!(counts(&off, "flink.orders", &o.job_id), want(o));
    assert!(stub.bookmarks_and_gone().0 >= 1, "bookmarks were sent and taken");
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_api_server_delays_the_start_by_initial_wait_only_and_is_counted() {
    let lab = replay("1.20.5", "healthy").await;
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching(&lab.url, Duration::from_millis(100), state.path());
    let k = &mut config.discovery.kubernetes;
    k.enabled = true;
    k.api_url = Some(api);
    k.initial_wait = Duration::from_millis(500);
    let started = std::time::Instant::now();
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    // Start waits `initial_wait` (0.5 s) for the API, not for it to answer: 15 s is a sanity
    // bound for a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(15), "started after {:?}", started.elapsed());
    // The static cluster is polled meanwhile; the failed lists are counted, nothing is synced.
    let m = scrape_until(daemon.addr, "lists counted", WAIT, |m| {
        sample(
            m,
            "checkpoint_sentinel_kubernetes_watch_errors_total",
            &[("kind", "services"), ("reason", "list")],
        ) >= Some(1.0)
            && sample(m, "checkpoint_sentinel_flink_up", &[("cluster", "lab")]) == Some(1.0)
    })
    .await;
    assert_eq!(sample(&m, "checkpoint_sentinel_kubernetes_synced", &[]), Some(0.0));
    assert_eq!(sample(&m, "checkpoint_sentinel_kubernetes_discovered_clusters", &[]), Some(0.0));
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_list_comes_in_pages_and_objects_past_max_objects_are_cut_and_counted() {
    // 1,200 REST services as Flink creates them, in three pages of 500; 50 are kept.
    let template = fixture("service-native-rest.json");
    let objects: Vec<_> = (0..1200)
        .map(|i| {
            let mut svc = template.clone();
            svc["metadata"]["name"] = format!("job-{i:04}-rest").into();
            svc["metadata"]["labels"]["app"] = format!("job-{i:04}").into();
            svc
        })
        .collect();
    let stub = KubeStub::start(objects).await;
    let state = tempfile::tempdir().unwrap();
    let mut config = common::watching("http://127.0.0.1:9", Duration::from_secs(60), state.path());
    config.clusters.clear();
    let k = &mut config.discovery.kubernetes;
    k.enabled = true;
    k.api_url = Some(stub.url.clone());
    k.kinds = vec!["services".into()];
    k.max_objects = 50;
    // Nothing listens there; the discovered clusters are polled once a minute.
    k.url_template = "http://127.0.0.1:9/{service}".into();
    config.discovery.defaults.poll_interval = Duration::from_secs(60);
    let daemon = checkpoint_sentinel::daemon::start(config, None).await.unwrap();
    let m = scrape_until(daemon.addr, "listed", WAIT, |m| {
        sample(m, "checkpoint_sentinel_kubernetes_synced", &[]) == Some(1.0)
    })
    .await;
    daemon.shutdown().await;
    assert_eq!((stub.lists(Res::Services), stub.pages(Res::Services)), (1, 3), "one list, three pages");
    assert_eq!(sample(&m, "checkpoint_sentinel_kubernetes_objects", &[("kind", "services")]), Some(50.0));
    assert_eq!(
        sample(&m, "checkpoint_sentinel_kubernetes_objects_cut_total", &[("kind", "services")]),
        Some(1150.0)
    );
    assert_eq!(sample(&m, "checkpoint_sentinel_kubernetes_discovered_clusters", &[]), Some(50.0));
    assert_eq!(sample(&m, "checkpoint_sentinel_discovered_clusters", &[]), Some(50.0));
}
