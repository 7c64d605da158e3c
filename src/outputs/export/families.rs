//! The metric family table: every name, type, help text and label set the exporter writes
//! ([`METRICS`]), and `index_of`, which resolves a name to its index at compile time.

/// One exported metric family.
pub struct MetricDef {
    /// Full name (for counters, including `_total`).
    pub name: &'static str,
    /// HELP text.
    pub help: &'static str,
    /// Prometheus type.
    pub kind: Kind,
    /// Label names.
    pub labels: &'static [&'static str],
}

/// The metric types we export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A value that only goes up (resets on restart of its source).
    Counter,
    /// Quantiles with sum and count.
    Summary,
}

const JOB: &[&str] = &["cluster", "job_id", "job_name"];
const JOB_FINDING: &[&str] = &["cluster", "job_id", "job_name", "finding"];
const OPERATOR: &[&str] = &["cluster", "job_id", "job_name", "vertex_id", "operator"];
const TASKMANAGER: &[&str] = &["cluster", "taskmanager"];
const SKEW: &[&str] = &["cluster", "job_id", "job_name", "operator"];

macro_rules! metric {
    ($name:literal, $kind:ident, $labels:expr, $help:literal) => {
        MetricDef { name: $name, help: $help, kind: Kind::$kind, labels: $labels }
    };
}

/// Every metric the daemon exports.
pub const METRICS: &[MetricDef] = &[
    metric!(
        "flink_checkpoint_duration_seconds",
        Summary,
        JOB,
        "End-to-end duration (trigger to last acknowledgement) of completed checkpoints; quantiles over the sliding window, savepoints excluded."
    ),
    metric!(
        "flink_checkpoint_alignment_duration_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest barrier alignment of any subtask."
    ),
    metric!(
        "flink_checkpoint_sync_duration_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest synchronous snapshot phase of any subtask."
    ),
    metric!(
        "flink_checkpoint_async_duration_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest asynchronous snapshot phase of any subtask (for unaligned checkpoints it includes persisting in-flight data)."
    ),
    metric!(
        "flink_checkpoint_start_delay_seconds",
        Summary,
        JOB,
        "Per completed checkpoint, the longest time from trigger until the first barrier reached a subtask (backpressure shows here)."
    ),
    metric!(
        "flink_checkpoint_checkpointed_size_bytes",
        Summary,
        JOB,
        "Bytes persisted by each completed checkpoint (the incremental size for incremental checkpoints)."
    ),
    metric!(
        "flink_checkpoint_full_size_bytes",
        Summary,
        JOB,
        "Full state size of each completed checkpoint (Flink 1.15 and later only)."
    ),
    metric!(
        "flink_checkpoint_processed_data_bytes",
        Summary,
        JOB,
        "Bytes processed during alignment by each completed checkpoint."
    ),
    metric!(
        "flink_checkpoint_persisted_data_bytes",
        Summary,
        JOB,
        "In-flight bytes persisted by each completed checkpoint (unaligned checkpoints)."
    ),
    metric!(
        "flink_checkpoints_total",
        Counter,
        &["cluster", "job_id", "job_name", "status"],
        "Checkpoints (and savepoints) by final status; equals Flink's own counts, kept monotonic across JobManager failovers."
    ),
    metric!(
        "flink_checkpoint_restores_total",
        Counter,
        JOB,
        "Every restore Flink's current JobMaster counts (checkpoint or savepoint, between polls too; it starts over after a JobManager failover): use it for restore rates."
    ),
    metric!(
        "flink_job_restores_total",
        Counter,
        &["cluster", "job_id", "job_name", "from"],
        "Restores the daemon saw, by origin (from=checkpoint: a failover; savepoint: a deployment), kept across JobMasters; two between two polls count once."
    ),
    metric!(
        "flink_job_last_restore_duration_seconds",
        Gauge,
        JOB,
        "The latest timed restore: from the JobManager restoring the checkpoint or savepoint (Flink's restore_timestamp) until the last subtask was RUNNING again."
    ),
    metric!(
        "flink_job_restarts",
        Gauge,
        &["cluster", "job_id", "job_name", "flink_metric"],
        "Flink's restart count of the job, read with its load and after a restore (flink_metric: numRestarts, or fullRestarts where not listed); it starts over with a new JobMaster."
    ),
    metric!(
        "flink_job_status_time_seconds",
        Gauge,
        &["cluster", "job_id", "job_name", "status", "flink_metric"],
        "Time in the job's current status per Flink, 0 when not in it, read with its load: running (runningTime, 1.x uptime), restarting (restartingTime, 1.x downtime), cancelling, failing."
    ),
    metric!(
        "flink_job_last_checkpoint_metadata_bytes",
        Gauge,
        JOB,
        "Flink's lastCheckpointMetadataSize (2.x, FLINK-36679): the size of the latest completed checkpoint's _metadata, read with the job's load and after a restore."
    ),
    metric!(
        "flink_job_last_restore_downtime_seconds",
        Gauge,
        JOB,
        "The latest timed restore after a failover: from the job entering RESTARTING until the last subtask was RUNNING again (the restart strategy's delay included)."
    ),
    metric!(
        "flink_job_last_restore_timestamp_seconds",
        Gauge,
        JOB,
        "When the job last restored (Flink's restore_timestamp), Unix time."
    ),
    metric!(
        "flink_job_last_restore_checkpoint_id",
        Gauge,
        JOB,
        "The id of the checkpoint or savepoint the job last restored from (a value, not a label: one series per job)."
    ),
    metric!(
        "flink_checkpoint_failures_seen_total",
        Counter,
        JOB,
        "Failed checkpoints, each once, from the source that told first (a JobManager log line or the poll); failures of a job shutting down (suspend, cancel) left out."
    ),
    metric!(
        "flink_savepoints_total",
        Counter,
        &["cluster", "job_id", "job_name", "status"],
        "Savepoints (manual and periodic) the daemon saw finish, by final status; part of flink_checkpoints_total too, since Flink counts them there."
    ),
    metric!(
        "flink_savepoint_last_completed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest completed savepoint the daemon saw was acknowledged, Unix time (its age: time() minus this)."
    ),
    metric!(
        "flink_savepoint_last_duration_seconds",
        Gauge,
        JOB,
        "Trigger to last acknowledgement of the latest completed savepoint."
    ),
    metric!(
        "flink_savepoint_last_failed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest failed savepoint the daemon saw failed, Unix time."
    ),
    metric!("flink_checkpoints_in_progress", Gauge, JOB, "Checkpoints in progress at the last poll."),
    metric!(
        "flink_checkpoint_oldest_in_progress_age_seconds",
        Gauge,
        JOB,
        "Age of the oldest checkpoint in progress now, as the log and the last poll saw them, less those finished since or past their timeout (docs/metrics.md); 0 when none."
    ),
    metric!(
        "flink_checkpoint_blocked_by_user_code",
        Gauge,
        &["cluster", "job_id", "job_name", "operator", "subtask", "taskmanager", "frame"],
        "1 while the thread of the subtask holding a checkpoint up sits in the same frame of user code (class.method) in consecutive samples; absent otherwise (docs/thread-dumps.md)."
    ),
    metric!(
        "flink_checkpoint_trigger_failures_total",
        Counter,
        JOB,
        "Failed checkpoint triggers that got no id (e.g. 'Not all required tasks are currently running' while the job deploys): not checkpoint failures, not counted towards the tolerable ones."
    ),
    metric!(
        "flink_checkpoint_running_without_completed_since_timestamp_seconds",
        Gauge,
        JOB,
        "When the job entered RUNNING as the daemon saw it (its first poll if it was running then), Unix time; only while no checkpoint has completed since, for jobs with periodic checkpoints."
    ),
    metric!(
        "flink_checkpoint_failing_since_timestamp_seconds",
        Gauge,
        JOB,
        "When the first of the job's current consecutive checkpoint failures failed, Unix time; only while the last checkpoint failed."
    ),
    metric!(
        "flink_checkpoint_last_completed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest completed checkpoint was acknowledged, Unix time."
    ),
    metric!(
        "flink_checkpoint_last_failed_timestamp_seconds",
        Gauge,
        JOB,
        "When the latest failed checkpoint failed, Unix time."
    ),
    metric!(
        "flink_checkpoint_interval_seconds",
        Gauge,
        JOB,
        "Configured checkpoint interval (absent when periodic checkpoints are off)."
    ),
    metric!("flink_checkpoint_timeout_seconds", Gauge, JOB, "Configured checkpoint timeout."),
    metric!(
        "flink_checkpoint_min_pause_seconds",
        Gauge,
        JOB,
        "Configured minimum pause between checkpoints."
    ),
    metric!(
        "flink_checkpoint_max_concurrent",
        Gauge,
        JOB,
        "Configured maximum number of concurrent checkpoints."
    ),
    metric!(
        "flink_checkpoint_tolerable_failures",
        Gauge,
        JOB,
        "Configured tolerable consecutive checkpoint failures."
    ),
    metric!(
        "flink_checkpoint_config_risk",
        Gauge,
        JOB_FINDING,
        "1 when the advisor's finding (tolerable_too_high, timeout_tight, no_retention) applies to the job's checkpoint configuration, else 0 (docs/advice.md)."
    ),
    metric!(
        "flink_checkpoint_expected_interval_seconds",
        Gauge,
        JOB,
        "Median gap between recent consecutive triggers as the coordinator model expected them (max(interval, min-pause), or longer when min-pause, max-concurrent or a timeout binds)."
    ),
    metric!(
        "flink_checkpoint_observed_interval_seconds",
        Gauge,
        JOB,
        "Median gap between recent consecutive observed checkpoint triggers."
    ),
    metric!(
        "flink_checkpoint_trigger_deviation_seconds",
        Summary,
        JOB,
        "Per checkpoint, |observed - expected| trigger time, the expectation being the coordinator model's, re-anchored on the schedule; quantiles over the sliding window."
    ),
    metric!(
        "flink_checkpoint_schedule_stall_seconds",
        Gauge,
        JOB,
        "How long the trigger the coordinator model expected is overdue at the last poll, once beyond the stall tolerance, else 0 (the stall of FlinkCheckpointScheduleUnexplained)."
    ),
    metric!(
        "flink_checkpoint_deviations_total",
        Counter,
        &["cluster", "job_id", "job_name", "kind", "explained"],
        "Checkpoint triggers off the configured interval (and timeouts outlived, ids skipped), by what explains them (kind; explained=\"true\" or \"false\"; docs/metrics.md lists the kinds)."
    ),
    metric!(
        "flink_job_info",
        Gauge,
        &["cluster", "job_id", "job_name", "state"],
        "Watched jobs with their current state; always 1."
    ),
    metric!(
        "flink_operator_checkpoint_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's acknowledgement time (ack minus trigger) of completed checkpoints."
    ),
    metric!(
        "flink_operator_checkpoint_alignment_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's barrier alignment duration."
    ),
    metric!(
        "flink_operator_checkpoint_sync_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's synchronous snapshot duration."
    ),
    metric!(
        "flink_operator_checkpoint_async_duration_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's asynchronous snapshot duration."
    ),
    metric!(
        "flink_operator_checkpoint_start_delay_seconds",
        Summary,
        OPERATOR,
        "Per operator chain, every subtask's checkpoint start delay."
    ),
    metric!(
        "flink_checkpoint_log_events_total",
        Counter,
        &["cluster", "job_id", "job_name", "kind", "source"],
        "Checkpoint events in Flink logs (source log) or from REST (source rest) by kind: triggered, expired, declined, barrier_missing, …; job_id, job_name empty for lines that name no job."
    ),
    metric!(
        "flink_checkpoint_log_root_causes_total",
        Counter,
        &["cluster", "cause"],
        "Root causes of checkpoint failures in Flink logs (the deepest \"Caused by:\", classified: disk_full, out_of_memory, timeout, s3, …), once per checkpoint and cause."
    ),
    metric!(
        "checkpoint_sentinel_build_info",
        Gauge,
        &["version", "revision", "rustc_version"],
        "The daemon's version, the git commit it was built from (unknown without git at build time) and the Rust compiler's version; always 1. The Flink versions seen are in checkpoint_sentinel_flink_info."
    ),
    metric!("process_cpu_seconds_total", Counter, &[], "User and system CPU time of the daemon, seconds."),
    metric!("process_resident_memory_bytes", Gauge, &[], "Resident memory of the daemon, bytes."),
    metric!("process_virtual_memory_bytes", Gauge, &[], "Virtual memory of the daemon, bytes."),
    metric!("process_open_fds", Gauge, &[], "Open file descriptors of the daemon."),
    metric!("process_max_fds", Gauge, &[], "The daemon's limit of open file descriptors (soft limit)."),
    metric!("process_start_time_seconds", Gauge, &[], "Start of the daemon, seconds since the Unix epoch."),
    metric!("process_threads", Gauge, &[], "Threads of the daemon."),
    metric!(
        "checkpoint_sentinel_discovered_clusters",
        Gauge,
        &[],
        "Clusters found by file discovery and polled (when [discovery] files are set)."
    ),
    metric!(
        "checkpoint_sentinel_discovery_targets_dropped",
        Gauge,
        &["reason"],
        "Targets of the discovery files left out at the last reading, by reason: limit (over discovery.max_clusters), duplicate (a name taken), invalid (a bad name or URL)."
    ),
    metric!(
        "checkpoint_sentinel_discovery_file_errors_total",
        Counter,
        &["reason"],
        "Discovery file readings that failed (the file's earlier targets kept), by reason: too_large, unreadable, invalid (not a file_sd list), too_many_files."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_discovered_clusters",
        Gauge,
        &[],
        "Clusters found by Kubernetes discovery and polled (when [discovery.kubernetes] is enabled)."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_objects",
        Gauge,
        &["kind"],
        "Kubernetes objects kept by discovery, by kind (services, flinkdeployments, flinksessionjobs); several may name one cluster."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_objects_cut_total",
        Counter,
        &["kind"],
        "Kubernetes objects left out because discovery.kubernetes.max_objects were kept already, by kind."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_relists_total",
        Counter,
        &["kind"],
        "Full re-lists of a kind after the first listing: the watch could not resume (410 Gone, or it failed), by kind."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_watch_errors_total",
        Counter,
        &["kind", "reason"],
        "Errors of the Kubernetes watches by kind and reason: client, list, watch_start, watch_stream (broke off or unreadable), gone (410: listed again), api_error."
    ),
    metric!(
        "flink_operator_job_info",
        Gauge,
        &["cluster", "resource", "job_id", "state", "lifecycle_state"],
        "1 per FlinkDeployment or FlinkSessionJob that Kubernetes discovery keeps: the Flink Kubernetes Operator's status.jobStatus.jobId, .state and status.lifecycleState (other: a value not in the CRD)."
    ),
    metric!(
        "flink_operator_last_savepoint_timestamp_seconds",
        Gauge,
        &["cluster", "resource"],
        "The Flink Kubernetes Operator's status.jobStatus.savepointInfo.lastSavepoint.timeStamp (seconds since the Unix epoch), when it has one."
    ),
    metric!(
        "checkpoint_sentinel_kubernetes_synced",
        Gauge,
        &[],
        "1 once every Kubernetes watch has listed its objects completely at least once, else 0."
    ),
    metric!(
        "checkpoint_sentinel_tls_handshake_errors_total",
        Counter,
        &["reason"],
        "Failed TLS handshakes on the daemon's port (when it serves TLS) by reason: plain_http (an http:// request), failed (broken off, certificate not trusted, no acceptable client certificate), timeout."
    ),
    metric!(
        "checkpoint_sentinel_http_connections",
        Gauge,
        &[],
        "Connections to the daemon's port open now (at most server.max_connections, 512 by default; more wait in the accept queue)."
    ),
    metric!(
        "checkpoint_sentinel_http_connections_closed_total",
        Counter,
        &["reason"],
        "Connections the daemon closed, by reason: header_timeout (headers not complete within 10 s), idle_timeout (no byte moved either way for 30 s)."
    ),
    metric!(
        "checkpoint_sentinel_inputs_cut_total",
        Counter,
        &["cluster", "what"],
        "What the bounds on outside input cut, by what: response_bodies, jobs, history_entries (details deferred to a later round), log_files, log_job_ids, thread_dumps (docs/reliability.md, \"Bounds\")."
    ),
    metric!(
        "checkpoint_sentinel_poll_requests_in_flight",
        Gauge,
        &["cluster"],
        "Requests in flight the poller chose for its latest round: max_concurrent_requests, or from the jobs, answer time and rest.server.numThreads (docs/performance.md, \"Requests in flight\")."
    ),
    metric!(
        "checkpoint_sentinel_thread_dumps_total",
        Counter,
        &["cluster", "outcome"],
        "Looks at the thread of a subtask holding a checkpoint about to expire, by outcome: taken, sampled, thread_not_found, rate_limited, timeout, too_large, error (docs/thread-dumps.md)."
    ),
    metric!(
        "checkpoint_sentinel_flink_up",
        Gauge,
        &["cluster"],
        "1 if the cluster's JobManager REST API answered the last poll round, else 0."
    ),
    metric!(
        "checkpoint_sentinel_flink_info",
        Gauge,
        &["cluster", "version"],
        "The Flink version a cluster reports; always 1."
    ),
    metric!(
        "checkpoint_sentinel_poll_duration_seconds",
        Summary,
        &["cluster"],
        "Duration of poll rounds (the daemon polls in the background; metrics are rendered from its state at scrape time)."
    ),
    metric!("checkpoint_sentinel_polls_total", Counter, &["cluster"], "Poll rounds, successful or not."),
    metric!(
        "checkpoint_sentinel_poll_errors_total",
        Counter,
        &["cluster", "kind"],
        "Failed REST requests by kind: connect, timeout, http_status, decode, transport (the connection broke while the answer was read), too_large (an answer over max_response_bytes, cut off)."
    ),
    metric!(
        "checkpoint_sentinel_last_successful_poll_timestamp_seconds",
        Gauge,
        &["cluster"],
        "When the cluster's JobManager last answered, Unix time."
    ),
    metric!(
        "checkpoint_sentinel_watched_jobs",
        Gauge,
        &["cluster"],
        "Jobs with checkpointing that the daemon watches on the cluster."
    ),
    metric!(
        "checkpoint_sentinel_checkpoints_unobserved_total",
        Counter,
        &["cluster", "job_id", "job_name", "status"],
        "Checkpoints counted from Flink's counts without their own details: before the first poll, or more than web.checkpoints.history went by between two polls."
    ),
    metric!(
        "checkpoint_sentinel_checkpoints_observed_total",
        Counter,
        &["cluster", "job_id", "job_name", "source", "status"],
        "Checkpoints counted, by the source that reported each first: rest (the poll) or trace (a span of Flink's Slf4j trace reporter in the JobManager log); each once."
    ),
    metric!(
        "checkpoint_sentinel_clamped_values_total",
        Counter,
        &[],
        "Values too large for the histograms, recorded at the maximum instead."
    ),
    metric!("checkpoint_sentinel_log_read_bytes_total", Counter, &["cluster"], "Bytes the log tailers read."),
    metric!("checkpoint_sentinel_log_lines_total", Counter, &["cluster"], "Lines the log tailers read."),
    metric!(
        "checkpoint_sentinel_log_files_watched",
        Gauge,
        &["cluster"],
        "Log files followed now (rotated files are followed until read to their end)."
    ),
    metric!(
        "checkpoint_sentinel_log_rotations_total",
        Counter,
        &["cluster"],
        "Log rotations seen: renamed, truncated (copytruncate) or deleted and recreated files."
    ),
    metric!(
        "checkpoint_sentinel_log_rotation_gaps_total",
        Counter,
        &["cluster"],
        "Log rotations after which lines may be missing: a file created and gone before the tailer listed it, or a copytruncate whose copy is not followed."
    ),
    metric!(
        "checkpoint_sentinel_log_oversize_lines_total",
        Counter,
        &["cluster"],
        "Log lines longer than max_line_bytes; each was cut to that length."
    ),
    metric!(
        "checkpoint_sentinel_log_lag_bytes",
        Gauge,
        &["cluster"],
        "Bytes written to followed log files and not read yet."
    ),
    metric!(
        "checkpoint_sentinel_log_errors_total",
        Counter,
        &["cluster"],
        "Errors of the log tailers: files that could not be listed, opened or read."
    ),
    metric!(
        "flink_checkpoint_consecutive_failures",
        Gauge,
        JOB,
        "Failed checkpoints since the last completed one, whatever their reason; not those a cancel or stop causes. Flink's own count is flink_checkpoint_counted_failures."
    ),
    metric!(
        "flink_checkpoint_counted_failures",
        Gauge,
        JOB,
        "Flink's count towards tolerable-failed-checkpoints: failures it counts since the last completed checkpoint or since it last failed the job for exceeding it; once that number is known."
    ),
    metric!(
        "flink_checkpoint_tolerance_exceeded_total",
        Counter,
        JOB,
        "Times flink_checkpoint_counted_failures went past the tolerable failures: Flink failed the job ('Exceeded checkpoint tolerable failure threshold')."
    ),
    metric!(
        "flink_checkpoint_tolerance_exceeded_timestamp_seconds",
        Gauge,
        JOB,
        "When the failed checkpoint that last took flink_checkpoint_counted_failures past the tolerable failures ended (Flink failed the job then), Unix time; once one did."
    ),
    metric!(
        "checkpoint_sentinel_alerts",
        Gauge,
        &["alertname", "severity", "state"],
        "Alerts of the daemon's own rules by state (pending, firing); 0 for rules with none."
    ),
    metric!(
        "flink_checkpoint_incident_jobs",
        Gauge,
        &["cluster", "incident", "incident_cause", "incident_value"],
        "Troubled jobs of an incident: they share a cause (incident_cause, incident_value) no healthy job has (/api/v1/incidents); cluster empty when they span several; at most 10."
    ),
    metric!(
        "checkpoint_sentinel_alertmanager_sends_total",
        Counter,
        &["alertmanager"],
        "Successful posts of alerts to an Alertmanager."
    ),
    metric!(
        "checkpoint_sentinel_alertmanager_errors_total",
        Counter,
        &["alertmanager"],
        "Failed posts of alerts to an Alertmanager (retried with back-off; nothing still relevant is dropped)."
    ),
    metric!(
        "checkpoint_sentinel_alertmanager_queued_alerts",
        Gauge,
        &["alertmanager"],
        "Resolved alerts waiting to be delivered to an Alertmanager."
    ),
    metric!(
        "checkpoint_sentinel_store_records",
        Gauge,
        &[],
        "Checkpoint and savepoint records in the checkpoint store after its last write."
    ),
    metric!(
        "checkpoint_sentinel_store_pruned_records_total",
        Counter,
        &[],
        "Records pruned from the checkpoint store by [store] max_age or max_records, oldest first."
    ),
    metric!(
        "checkpoint_sentinel_store_write_errors_total",
        Counter,
        &[],
        "Failed writes (and re-opens) of the checkpoint store; the records wait in its outbox and in the state file, and are written once the store heals."
    ),
    metric!(
        "checkpoint_sentinel_store_dropped_records_total",
        Counter,
        &[],
        "Records dropped unwritten because the store kept failing and its queue was full (the log names the checkpoint ids)."
    ),
    metric!(
        "checkpoint_sentinel_store_files_set_aside_total",
        Counter,
        &[],
        "Damaged checkpoint store files moved aside (checkpoints.redb.corrupt-<UTC time>) and replaced by a new store."
    ),
    metric!(
        "checkpoint_sentinel_store_failing",
        Gauge,
        &[],
        "1 while the checkpoint store cannot be written (it is re-opened with back-off), else 0."
    ),
    metric!(
        "checkpoint_sentinel_store_waiting_records",
        Gauge,
        &[],
        "Records waiting in the outbox (and the state file) for the checkpoint store."
    ),
    metric!(
        "checkpoint_sentinel_state_persist_errors_total",
        Counter,
        &[],
        "Failed writes of the state file."
    ),
    metric!(
        "checkpoint_sentinel_state_last_persisted_timestamp_seconds",
        Gauge,
        &[],
        "When the state file was last written, Unix time."
    ),
    metric!(
        "checkpoint_sentinel_evidence_requests_total",
        Counter,
        &["cluster", "outcome"],
        "Requests of the evidence rounds to the cluster's metrics endpoints: made, cut (left for a later round by [evidence] max_requests_per_round) and failed."
    ),
    metric!(
        "checkpoint_sentinel_evidence_series_cut_total",
        Counter,
        &["cluster"],
        "Evidence samples not kept because their map (operators, culprit subtasks, TaskManagers) was at its cap."
    ),
    metric!(
        "checkpoint_sentinel_storage_requests_total",
        Counter,
        &["cluster", "outcome"],
        "List requests of the storage rounds (a page of up to 1,000 entries, or a local directory walk): made, cut (left for a later round by [storage] max_requests_per_round) and failed."
    ),
    metric!(
        "checkpoint_sentinel_storage_errors_total",
        Counter,
        &["cluster", "kind"],
        "Failed listings of the checkpoint storage by kind: throttled (503 SlowDown, 429), not_found, denied, timeout, unsupported (a scheme the daemon cannot read, or [storage] object_stores off), other."
    ),
    metric!(
        "checkpoint_sentinel_storage_entries_cut_total",
        Counter,
        &["cluster"],
        "Listings of a job's checkpoint directory stopped at [storage] max_entries_per_job."
    ),
    metric!(
        "checkpoint_sentinel_storage_unreachable",
        Gauge,
        &["cluster"],
        "Checkpoint directories the daemon cannot read now (said once in its log when they became so)."
    ),
    metric!(
        "flink_checkpoint_storage_abandoned_bytes",
        Gauge,
        &["cluster", "base"],
        "Bytes in the folders of jobs that no longer run (ended, or unknown to the cluster and quiet for 10 minutes) under a base checkpoint directory."
    ),
    metric!(
        "flink_checkpoint_storage_abandoned_jobs",
        Gauge,
        &["cluster", "base"],
        "Folders of jobs that no longer run under a base checkpoint directory (the 32 largest)."
    ),
    metric!(
        "flink_checkpoint_storage_bytes",
        Gauge,
        JOB,
        "Bytes under the job's checkpoint directory (every object: chk-N, shared/, taskowned/), from its latest listing."
    ),
    metric!(
        "flink_checkpoint_storage_shared_bytes",
        Gauge,
        JOB,
        "Of them, bytes under shared/ (incremental state shared between checkpoints)."
    ),
    metric!("flink_checkpoint_storage_objects", Gauge, JOB, "Objects under the job's checkpoint directory."),
    metric!(
        "flink_checkpoint_storage_reported_state_bytes",
        Gauge,
        JOB,
        "The full state size Flink reports for the job's newest completed checkpoint, beside what its directory holds."
    ),
    metric!(
        "flink_checkpoint_storage_orphaned_bytes",
        Gauge,
        JOB,
        "Bytes in chk-N folders no retained or in-progress checkpoint holds (leftovers of expired, discarded or never-deleted checkpoints); not written with file merging on."
    ),
    metric!("flink_checkpoint_storage_orphaned_folders", Gauge, JOB, "Those folders."),
    metric!(
        "flink_checkpoint_storage_complete_folders",
        Gauge,
        JOB,
        "chk-N folders with a _metadata file (complete checkpoints on storage), against flink_checkpoint_num_retained."
    ),
    metric!(
        "flink_checkpoint_num_retained",
        Gauge,
        JOB,
        "Completed checkpoints Flink retains (execution.checkpointing.num-retained, 1.x state.checkpoints.num-retained; default 1)."
    ),
    metric!(
        "flink_checkpoint_metadata_bytes",
        Gauge,
        JOB,
        "Size of the _metadata file of the job's newest checkpoint folder, from the listing (never read)."
    ),
    metric!(
        "flink_checkpoint_frame_size_bytes",
        Gauge,
        JOB,
        "The RPC frame size an acknowledgement must fit (pekko.framesize, 1.x akka.framesize; default 10485760)."
    ),
    metric!(
        "flink_checkpoint_storage_throttled_total",
        Counter,
        JOB,
        "Listings of the job's checkpoint directory the storage throttled (503 SlowDown, 429) since the daemon started."
    ),
    metric!(
        "flink_taskmanager_gc_time_ratio",
        Gauge,
        TASKMANAGER,
        "Share of the last minute the TaskManager's JVM spent in garbage collection (0-1), from its collectors' time counters."
    ),
    metric!("flink_taskmanager_heap_used_bytes", Gauge, TASKMANAGER, "The TaskManager's JVM heap in use."),
    metric!("flink_taskmanager_heap_max_bytes", Gauge, TASKMANAGER, "The TaskManager's JVM heap maximum."),
    metric!("flink_taskmanager_cpu_load", Gauge, TASKMANAGER, "The TaskManager JVM's recent CPU load (0-1)."),
    metric!(
        "flink_taskmanager_managed_memory_used_bytes",
        Gauge,
        TASKMANAGER,
        "Flink managed memory in use on the TaskManager (RocksDB, batch operators)."
    ),
    metric!(
        "flink_taskmanager_managed_memory_total_bytes",
        Gauge,
        TASKMANAGER,
        "Flink managed memory of the TaskManager."
    ),
    metric!(
        "flink_taskmanager_network_segments_available",
        Gauge,
        TASKMANAGER,
        "Network buffer memory segments available on the TaskManager."
    ),
    metric!(
        "flink_taskmanager_network_segments_capacity",
        Gauge,
        TASKMANAGER,
        "Network buffer memory segments of the TaskManager."
    ),
    metric!(
        "flink_taskmanager_checkpoint_culprits",
        Gauge,
        TASKMANAGER,
        "Recent checkpoints (the API's ring per job) whose culprit subtask (the last to acknowledge, or the one that held a failed checkpoint up) ran on the TaskManager."
    ),
    metric!(
        "flink_operator_busy_ratio",
        Gauge,
        OPERATOR,
        "Largest busy share over the operator chain's subtasks (busyTimeMsPerSecond / 1000)."
    ),
    metric!(
        "flink_operator_backpressured_ratio",
        Gauge,
        OPERATOR,
        "Largest backpressured share over the operator chain's subtasks (backPressuredTimeMsPerSecond / 1000)."
    ),
    metric!(
        "flink_operator_input_pool_usage",
        Gauge,
        OPERATOR,
        "Largest input buffer pool usage over the operator chain's subtasks (0-1; above 0.95 the chain cannot keep up)."
    ),
    metric!(
        "flink_operator_rocksdb_pending_compaction_bytes",
        Gauge,
        OPERATOR,
        "RocksDB's estimate of the bytes compaction still has to rewrite (estimate-pending-compaction-bytes), each column family's largest subtask, summed over the chain's column families."
    ),
    metric!(
        "flink_operator_rocksdb_running_compactions",
        Gauge,
        OPERATOR,
        "Compactions running in RocksDB (num-running-compactions), the largest over the chain's subtasks."
    ),
    metric!(
        "flink_operator_rocksdb_memtable_bytes",
        Gauge,
        OPERATOR,
        "RocksDB memtables, active and immutable (size-all-mem-tables), each column family's largest subtask, summed over the chain's column families."
    ),
    metric!(
        "flink_operator_rocksdb_block_cache_usage_bytes",
        Gauge,
        OPERATOR,
        "RocksDB block cache in use (block-cache-usage), the largest over the chain's subtasks (the column families share one cache)."
    ),
    metric!(
        "flink_operator_rocksdb_live_data_bytes",
        Gauge,
        OPERATOR,
        "RocksDB's estimate of the live data (estimate-live-data-size), each column family's largest subtask, summed over the chain's column families."
    ),
    metric!(
        "flink_checkpoint_state_skew_ratio",
        Gauge,
        SKEW,
        "State size of the operator chain's largest subtask over its median subtask's, in the job's latest completed checkpoint with per-subtask sizes."
    ),
    metric!(
        "flink_checkpoint_state_skew_hot_subtask",
        Gauge,
        SKEW,
        "The index (0-based) of the subtask with the most state, in the same checkpoint."
    ),
    metric!("flink_checkpoint_state_skew_max_bytes", Gauge, SKEW, "The state size of that subtask."),
];

/// The error kinds every cluster reports, zero or not, so `rate()` works from the start.
pub const ERROR_KINDS: [&str; 6] = ["connect", "timeout", "http_status", "decode", "transport", "too_large"];

/// Index of a metric in [`METRICS`], resolved at compile time: a name missing from the table is
/// a build error, and a scrape of 1,000 jobs (about 100 k samples) does no name lookups.
pub(super) const fn index_of(name: &str) -> usize {
    let mut i = 0;
    while i < METRICS.len() {
        if const_str_eq(METRICS[i].name, name) {
            return i;
        }
        i += 1;
    }
    panic!("metric is not in METRICS")
}

const fn const_str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest HELP text, in characters: a line a person reads on `/metrics`, not the
    /// manual (docs/metrics.md says the rest).
    const HELP_MAX_CHARS: usize = 200;

    #[test]
    fn help_lines_are_at_most_200_characters() {
        let long: Vec<String> = METRICS
            .iter()
            .filter(|m| m.help.chars().count() > HELP_MAX_CHARS)
            .map(|m| format!("{} ({} characters)", m.name, m.help.chars().count()))
            .collect();
        assert!(long.is_empty(), "HELP longer than {HELP_MAX_CHARS} characters: {long:#?}");
    }
}
