//! The daemon's own series: build info and process figures first, and after the clusters its
//! clamped values, alerts, Alertmanager queues, discovery, TLS, store, HTTP connections, cut
//! inputs and persistence.

use super::sink::{Sink, Value};
use crate::app::{DaemonStats, StoreCounters};
use crate::state::State;

/// The series that open the exposition: build info and the process figures.
pub(super) fn render_head(out: &mut impl Sink, daemon: &DaemonStats) {
    out.push(
        family!("checkpoint_sentinel_build_info"),
        &[
            ("version", crate::telemetry::VERSION),
            ("revision", crate::telemetry::REVISION),
            ("rustc_version", crate::telemetry::RUSTC_VERSION),
        ],
        Value::Number(1.0),
    );
    if let Some(p) = &daemon.process {
        for (family, value) in [
            (family!("process_cpu_seconds_total"), p.cpu_seconds),
            (family!("process_resident_memory_bytes"), p.resident_memory_bytes),
            (family!("process_virtual_memory_bytes"), p.virtual_memory_bytes),
            (family!("process_open_fds"), p.open_fds),
            (family!("process_max_fds"), p.max_fds),
            (family!("process_start_time_seconds"), p.start_time_seconds),
            (family!("process_threads"), p.threads),
        ] {
            // An "unlimited" descriptor limit is left out rather than exported as infinity.
            if value.is_finite() {
                out.push(family, &[], Value::Number(value));
            }
        }
    }
}

/// The series that close it; `clamped` is the clusters' count of clamped values.
pub(super) fn render_tail(out: &mut impl Sink, state: &State, daemon: &DaemonStats, clamped: u64) {
    out.push(family!("checkpoint_sentinel_clamped_values_total"), &[], Value::Number(clamped as f64));
    render_alerts(out, daemon);
    render_discovery(out, daemon);
    for (reason, n) in daemon.tls_handshake_errors.iter().flatten() {
        out.push(
            family!("checkpoint_sentinel_tls_handshake_errors_total"),
            &[("reason", reason)],
            Value::Number(*n as f64),
        );
    }
    if let Some(store) = daemon.store {
        render_store(out, state, store);
    }
    render_connections(out, daemon);
    for (cluster, what, n) in &daemon.inputs_cut {
        out.push(
            family!("checkpoint_sentinel_inputs_cut_total"),
            &[("cluster", cluster), ("what", what)],
            Value::Number(*n as f64),
        );
    }
    for (cluster, n) in &daemon.requests_in_flight {
        out.push(
            family!("checkpoint_sentinel_poll_requests_in_flight"),
            &[("cluster", cluster)],
            Value::Number(*n as f64),
        );
    }
    for (cluster, outcome, n) in &daemon.thread_dumps {
        out.push(
            family!("checkpoint_sentinel_thread_dumps_total"),
            &[("cluster", cluster), ("outcome", outcome)],
            Value::Number(*n as f64),
        );
    }
    render_persistence(out, daemon);
}

/// The alerts by rule and state, and each Alertmanager's deliveries.
fn render_alerts(out: &mut impl Sink, daemon: &DaemonStats) {
    // Many jobs, one cause: at most `incidents::MAX_INCIDENTS` series.
    for i in daemon.incidents.iter() {
        let first = i.members.first().map_or("", |m| m.cluster.as_str());
        let cluster = if i.members.iter().all(|m| m.cluster == first) { first } else { "" };
        let labels = [
            ("cluster", cluster),
            ("incident", i.id.as_str()),
            ("incident_cause", i.cause.kind.as_str()),
            ("incident_value", i.cause.value.as_str()),
        ];
        out.push(family!("flink_checkpoint_incident_jobs"), &labels, Value::Number(i.jobs as f64));
    }
    for rule in &daemon.alerts {
        for (state, n) in [("pending", rule.pending), ("firing", rule.firing)] {
            let labels = [("alertname", rule.name.as_str()), ("severity", rule.severity), ("state", state)];
            out.push(family!("checkpoint_sentinel_alerts"), &labels, Value::Number(n as f64));
        }
    }
    for am in &daemon.alertmanagers {
        let labels = [("alertmanager", am.url.as_str())];
        out.push(
            family!("checkpoint_sentinel_alertmanager_sends_total"),
            &labels,
            Value::Number(am.sent_total as f64),
        );
        out.push(
            family!("checkpoint_sentinel_alertmanager_errors_total"),
            &labels,
            Value::Number(am.errors_total as f64),
        );
        out.push(
            family!("checkpoint_sentinel_alertmanager_queued_alerts"),
            &labels,
            Value::Number(am.queued as f64),
        );
    }
}

/// Discovery: clusters found, targets dropped, file errors, and Kubernetes' series.
fn render_discovery(out: &mut impl Sink, daemon: &DaemonStats) {
    let Some(d) = &daemon.discovery else { return };
    out.push(family!("checkpoint_sentinel_discovered_clusters"), &[], Value::Number(d.clusters as f64));
    for (reason, n) in d.dropped {
        out.push(
            family!("checkpoint_sentinel_discovery_targets_dropped"),
            &[("reason", reason)],
            Value::Number(n as f64),
        );
    }
    for (reason, n) in d.file_errors {
        out.push(
            family!("checkpoint_sentinel_discovery_file_errors_total"),
            &[("reason", reason)],
            Value::Number(n as f64),
        );
    }
    render_kubernetes(out, daemon);
}

/// Kubernetes discovery's series (bounded: three kinds, six reasons).
fn render_kubernetes(out: &mut impl Sink, daemon: &DaemonStats) {
    let Some(k) = daemon.discovery.as_ref().and_then(|d| d.kubernetes.as_ref()) else { return };
    out.push(
        family!("checkpoint_sentinel_kubernetes_discovered_clusters"),
        &[],
        Value::Number(k.clusters as f64),
    );
    out.push(
        family!("checkpoint_sentinel_kubernetes_synced"),
        &[],
        Value::Number(f64::from(u8::from(k.synced))),
    );
    // One family after the other (the text format groups a family's samples).
    for (family, values) in [
        (family!("checkpoint_sentinel_kubernetes_objects"), &k.objects),
        (family!("checkpoint_sentinel_kubernetes_objects_cut_total"), &k.cut),
        (family!("checkpoint_sentinel_kubernetes_relists_total"), &k.relists),
    ] {
        for (kind, n) in k.kind_names().into_iter().zip(values) {
            out.push(family, &[("kind", kind)], Value::Number(*n as f64));
        }
    }
    for j in &k.jobs {
        out.push(
            family!("flink_operator_job_info"),
            &[
                ("cluster", &j.cluster),
                ("resource", &j.resource),
                ("job_id", &j.job_id),
                ("state", &j.state),
                ("lifecycle_state", &j.lifecycle_state),
            ],
            Value::Number(1.0),
        );
    }
    for j in &k.jobs {
        if let Some(ms) = j.last_savepoint_ms {
            out.push(
                family!("flink_operator_last_savepoint_timestamp_seconds"),
                &[("cluster", &j.cluster), ("resource", &j.resource)],
                Value::Number(ms as f64 / 1000.0),
            );
        }
    }
    for (i, kind) in k.kind_names().into_iter().enumerate() {
        for (r, reason) in k.error_reasons().into_iter().enumerate() {
            out.push(
                family!("checkpoint_sentinel_kubernetes_watch_errors_total"),
                &[("kind", kind), ("reason", reason)],
                Value::Number(k.errors[i][r] as f64),
            );
        }
    }
}

/// The checkpoint store: records kept, pruned, lost to write errors or to a full outbox.
fn render_store(out: &mut impl Sink, state: &State, store: StoreCounters) {
    out.push(family!("checkpoint_sentinel_store_records"), &[], Value::Number(store.records as f64));
    out.push(
        family!("checkpoint_sentinel_store_pruned_records_total"),
        &[],
        Value::Number(store.pruned as f64),
    );
    out.push(
        family!("checkpoint_sentinel_store_write_errors_total"),
        &[],
        Value::Number(store.errors as f64),
    );
    out.push(
        family!("checkpoint_sentinel_store_dropped_records_total"),
        &[],
        Value::Number(state.outbox().dropped() as f64),
    );
    out.push(
        family!("checkpoint_sentinel_store_files_set_aside_total"),
        &[],
        Value::Number(store.files_set_aside as f64),
    );
    out.push(
        family!("checkpoint_sentinel_store_failing"),
        &[],
        Value::Number(u8::from(store.failing) as f64),
    );
    out.push(family!("checkpoint_sentinel_store_waiting_records"), &[], Value::Number(store.waiting as f64));
}

/// The daemon's HTTP connections: open now, and closed by reason.
fn render_connections(out: &mut impl Sink, daemon: &DaemonStats) {
    out.push(
        family!("checkpoint_sentinel_http_connections"),
        &[],
        Value::Number(daemon.http_connections as f64),
    );
    for (reason, n) in &daemon.http_closed {
        out.push(
            family!("checkpoint_sentinel_http_connections_closed_total"),
            &[("reason", reason)],
            Value::Number(*n as f64),
        );
    }
}

/// Persistence of the state: errors and the last success.
fn render_persistence(out: &mut impl Sink, daemon: &DaemonStats) {
    out.push(
        family!("checkpoint_sentinel_state_persist_errors_total"),
        &[],
        Value::Number(daemon.persist_errors as f64),
    );
    if let Some(at) = daemon.last_persisted {
        out.push(
            family!("checkpoint_sentinel_state_last_persisted_timestamp_seconds"),
            &[],
            Value::Number(at.seconds()),
        );
    }
}
