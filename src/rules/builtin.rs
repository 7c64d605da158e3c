//! The built-in rule pack: checkpoint duration, alignment, start delay, failures and progress
//! thresholds, each switchable off by name.
//!
//! They mirror the Flink alerts of `alerts/flink-checkpoints.rules.yml` (the same alerts for
//! Prometheus; `tests/rules_agree.rs` keeps the two sets equal), so an operator gets the same
//! names, labels and runbook sections from either path. Of the file's `CheckpointSentinel*`
//! alerts about the daemon itself only `CheckpointSentinelStoreFailing` is here too (the daemon
//! scope): a failing disk does not keep the daemon from reaching its Alertmanager, and the alert
//! should come within a minute even without Prometheus. The others are Prometheus-only.

use std::time::Duration;

use super::{AlertSeverity, Class, RuleSpec, Scope};

/// Where the runbook is published; `[alerting] runbook_base_url` points the built-in rules'
/// `runbook_url` elsewhere (an internal wiki), `#<alert name in lower case>` appended.
pub(crate) const RUNBOOK_BASE_URL: &str =
    "https://github.com/checkpoint-sentinel/checkpoint-sentinel/blob/main/docs/runbook.md";

/// The `runbook_url` of the built-in rule `name` under `base`.
pub(crate) fn runbook_url(base: &str, name: &str) -> String {
    format!("{}#{}", base.trim_end_matches('#'), name.to_lowercase())
}

struct Spec {
    name: &'static str,
    /// What it is evaluated for: each job, cluster or TaskManager.
    scope: Scope,
    expr: &'static str,
    for_s: u64,
    /// `keep_firing_for`, seconds.
    keep_s: u64,
    severity: AlertSeverity,
    class: Class,
    summary: &'static str,
    description: &'static str,
}

const PACK: &[Spec] = &[
    Spec {
        name: "FlinkCheckpointDurationHigh",
        scope: Scope::Job,
        expr: "duration.p95 > 0.5 * timeout",
        for_s: 600,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "Checkpoint P95 of {{ job_name }} is above half its timeout",
        description: "The P95 end-to-end checkpoint duration of job {{ job_name }} ({{ job_id }}) on {{ cluster }} is {{ value | duration }}, more than half of the {{ timeout | duration }} timeout. Checkpoints will start to expire if it keeps growing.{{ evidence }}",
    },
    Spec {
        name: "FlinkCheckpointDurationRising",
        scope: Scope::Job,
        expr: "duration.p95 > 1s and duration.p95 > 2 * ago(duration.p95, 1d)",
        for_s: 1800,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "Checkpoint P95 of {{ job_name }} doubled against yesterday",
        description: "The P95 checkpoint duration of job {{ job_name }} on {{ cluster }} is {{ value | duration }}, more than twice its value a day ago. Watch the P95, not the success rate: checkpoints slow down long before they fail.",
    },
    Spec {
        name: "FlinkCheckpointAlignmentHigh",
        scope: Scope::Job,
        expr: "alignment.p95 > 0.5 * interval",
        for_s: 600,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Blocking,
        summary: "Barrier alignment of {{ job_name }} takes over half the checkpoint interval",
        description: "The slowest subtask's barrier alignment (P95) of job {{ job_name }} on {{ cluster }} is {{ value | duration }}, more than 50 % of the {{ interval | duration }} checkpoint interval. An input is skewed or backpressured.",
    },
    Spec {
        name: "FlinkCheckpointStartDelayHigh",
        scope: Scope::Job,
        expr: "start_delay.p95 > 0.5 * interval",
        for_s: 600,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Blocking,
        summary: "Barriers of {{ job_name }} take long to reach the tasks",
        description: "The P95 checkpoint start delay of job {{ job_name }} on {{ cluster }} is {{ value | duration }}, more than half the {{ interval | duration }} checkpoint interval: barriers queue behind backpressured data, or the TaskManagers are overloaded.",
    },
    Spec {
        name: "FlinkCheckpointFailuresIncreasing",
        scope: Scope::Job,
        // Triggers that failed before the checkpoint got an id (tasks still deploying) are not
        // failed checkpoints: every fresh job has one, and it kept this pending for minutes.
        // Savepoints are in Flink's counts too; a failed one is FlinkSavepointFailed's.
        expr: "(increase(checkpoints.failed, 15m) - increase(checkpoints.trigger_failed, 15m) - increase(savepoints.failed, 15m)) / (increase(checkpoints.total, 15m) - increase(checkpoints.trigger_failed, 15m) - increase(savepoints.completed, 15m) - increase(savepoints.failed, 15m)) > 10%",
        for_s: 300,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "More than 10 % of {{ job_name }}'s checkpoints fail",
        description: "{{ value | percent }} of the checkpoints of job {{ job_name }} on {{ cluster }} failed in the last 15 minutes.",
    },
    Spec {
        name: "FlinkCheckpointNoProgress",
        scope: Scope::Job,
        expr: "since_last_completed > progress_window",
        for_s: 60,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Failure,
        summary: "{{ job_name }} has not completed a checkpoint for too long",
        description: "Job {{ job_name }} on {{ cluster }} completed its last checkpoint {{ value | duration }} ago, longer than max(interval, timeout) x (min(tolerable failures, 3) + 2) = {{ progress_window | duration }}. A restart now replays everything since then.",
    },
    Spec {
        name: "FlinkCheckpointNeverCompleted",
        scope: Scope::Job,
        expr: "running_without_checkpoint > max(2 * max(interval, timeout), 5m)",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Failure,
        summary: "{{ job_name }} has run for {{ value | duration }} without completing a checkpoint",
        description: "Job {{ job_name }} on {{ cluster }} entered RUNNING {{ value | duration }} ago and has not completed a checkpoint since, longer than twice max(interval {{ interval | duration }}, timeout {{ timeout | duration }}) (at least 5 minutes). Its first checkpoint is stuck or keeps failing; a failure now restores from an old checkpoint, or from nothing.",
    },
    Spec {
        name: "FlinkCheckpointFailureStreak",
        scope: Scope::Job,
        expr: "consecutive_failures >= 3 and failing_for >= 2 * interval",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "{{ job_name }} failed its last {{ value }} checkpoints in a row",
        description: "The last {{ value }} checkpoints of job {{ job_name }} on {{ cluster }} failed in a row, the first {{ failing_for | duration }} ago (interval {{ interval | duration }}), whatever its tolerable-failed-checkpoints ({{ tolerable_failures }}) allows.{{ evidence }}",
    },
    Spec {
        name: "FlinkCheckpointAboutToExpire",
        scope: Scope::Job,
        // `in_progress_age` is the oldest checkpoint in progress *now* (the poll's and the
        // log's, minus those the log said finished since and those past their timeout), so
        // this holds only between 80 % and 100 % of the timeout: before the expiry, never
        // after. The daemon wakes the rules at those instants (rules::next_age_wake). The
        // hold keeps one alert while checkpoints keep running out of time.
        expr: "in_progress_age > 0.8 * timeout",
        for_s: 0,
        keep_s: 300,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "A checkpoint of {{ job_name }} is close to its timeout",
        description: "A checkpoint of job {{ job_name }} on {{ cluster }} has been running for {{ value | duration }}, over 80 % of the {{ timeout | duration }} timeout: it expires at the timeout unless it completes first. The alert stays firing until 5 minutes after the last checkpoint that came this close.",
    },
    Spec {
        name: "FlinkCheckpointToleranceNearlySpent",
        scope: Scope::Job,
        // Flink's own count (`counted_failures`: only the reasons its failure manager counts,
        // reset by a completed checkpoint and when exceeded), before it is exceeded: never at
        // tolerable 0, where the first counted failure fails the job. Once exceeded within the
        // hour, FlinkCheckpointToleranceExceeded tells it instead.
        expr: "counted_failures > 0 and counted_failures >= 0.8 * tolerable_failures and counted_failures <= tolerable_failures and (tolerance_exceeded == 0 or since_tolerance_exceeded >= 1h)",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Failure,
        summary: "{{ job_name }} is about to exceed its tolerable checkpoint failures ({{ value }} of {{ tolerable_failures }} spent)",
        description: "Flink counts {{ value }} consecutive failed checkpoints of job {{ job_name }} on {{ cluster }} towards its tolerable-failed-checkpoints of {{ tolerable_failures }} (its JobManager logs the next failure with '({{ value }} consecutive failed attempts so far)'). {{ remaining_tolerable }} more counted failure(s) (expired, declined, asynchronous or I/O) are tolerated; the one after fails the job ('Exceeded checkpoint tolerable failure threshold'). A completed checkpoint resets the count.",
    },
    Spec {
        name: "FlinkCheckpointToleranceExceeded",
        scope: Scope::Job,
        // From the time of the checkpoint that went past the tolerable number (not when the
        // daemon saw it): a daemon that starts after the failover still tells it.
        expr: "since_tolerance_exceeded < 1h",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Failure,
        summary: "Flink failed {{ job_name }} {{ value | duration }} ago: it exceeded its tolerable checkpoint failures",
        description: "Job {{ job_name }} on {{ cluster }} exceeded its tolerable-failed-checkpoints of {{ tolerable_failures }} {{ value | duration }} ago: more than {{ tolerable_failures }} counted checkpoint failures in a row, and Flink failed the job ('Exceeded checkpoint tolerable failure threshold'). It restarted from its latest completed checkpoint, or failed if its restart strategy gave up. Flink's count started over; it stands at {{ counted_failures }} now. The alert holds for an hour after the last time.",
    },
    Spec {
        name: "FlinkJobFrequentRestores",
        scope: Scope::Job,
        expr: "increase(restores, 1h) > 3",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "{{ job_name }} restored from checkpoints {{ value }} times in an hour",
        description: "Job {{ job_name }} on {{ cluster }} keeps failing over and restoring from its latest checkpoint.",
    },
    Spec {
        name: "FlinkCheckpointBlockedByUserCode",
        scope: Scope::Job,
        expr: "blocked_by_user_code > 0",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Blocking,
        summary: "User code holds {{ operator }} #{{ subtask }} of {{ job_name }}: its checkpoints cannot complete",
        description: "The task thread of {{ operator }} #{{ subtask }} of job {{ job_name }} on {{ cluster }} (TaskManager {{ taskmanager }}) sat in {{ frame }} in {{ samples }} samples in a row while checkpoint {{ checkpoint }} waited for it to acknowledge ({{ frame_at }}, thread {{ thread }}). The barrier cannot pass until that user code returns: look for a blocking call, a lock or a sleep there.",
    },
    Spec {
        name: "FlinkSavepointFailed",
        scope: Scope::Job,
        expr: "increase(savepoints.failed, 1h) > 0",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "A savepoint of {{ job_name }} failed",
        description: "{{ value }} savepoint(s) of job {{ job_name }} on {{ cluster }} failed in the last hour. An upgrade, rescale or migration would start from the last successful savepoint instead: check its age before relying on it.",
    },
    Spec {
        // One alert per cluster, not one per job: at 10,000 jobs with the same risky default
        // it is one notice with the count, not 10,000 (issue 39). Class `advice`: it never
        // makes a job "not ok". A per-job twin is a `[[rules]]` entry (docs/runbook.md).
        name: "FlinkCheckpointConfigRisk",
        scope: Scope::Cluster,
        expr: "jobs.config_risk > 0",
        for_s: 600,
        keep_s: 0,
        severity: AlertSeverity::Info,
        class: Class::Advice,
        summary: "{{ value }} jobs on {{ cluster }} have a checkpoint configuration that risks data or a stuck job",
        description: "{{ value }} of the {{ jobs }} watched jobs on {{ cluster }} show one of the advisor's risk findings (tolerable_too_high, timeout_tight, no_retention); the most at risk: {{ config_risk_jobs }}. Too many tolerable failures keep a stuck job up for hours, a tight timeout expires checkpoints, and checkpoints deleted on cancellation lose the state. This is advice, not a failure: the jobs' health is not affected. Each job's advice in the API (`/api/v1/jobs`, `advice`) or `checkpoint-sentinel advise` names the findings, the keys to set and the predicted effect.",
    },
    Spec {
        name: "FlinkCheckpointSizeGrowing",
        scope: Scope::Job,
        expr: "checkpointed_size.p50 > 100MB and checkpointed_size.p50 > 1.5 * ago(checkpointed_size.p50, 1d)",
        for_s: 3600,
        keep_s: 0,
        severity: AlertSeverity::Info,
        class: Class::Timeout,
        summary: "Checkpoints of {{ job_name }} grew by half within a day",
        description: "The median checkpointed size of job {{ job_name }} on {{ cluster }} is {{ value | bytes }} and growing steadily: state without a TTL, or a window that never purges.",
    },
    Spec {
        name: "FlinkCheckpointFailed",
        scope: Scope::Job,
        // The first line that says a checkpoint expired, was declined or failed moves
        // `checkpoints.failed_seen` and wakes the rules: the alert reaches Alertmanager within
        // about a second of it, the poll confirming (and standing in when no log is tailed).
        // One failure is `info`; the burst alerts below page when failures repeat.
        expr: "increase(checkpoints.failed_seen, 10m) > 0",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Info,
        class: Class::Failure,
        summary: "A checkpoint of {{ job_name }} failed",
        description: "{{ value }} checkpoint(s) of job {{ job_name }} on {{ cluster }} failed in the last 10 minutes, as the JobManager log or the REST API said first. One failure is for the record; FlinkCheckpointExpiredBurst, FlinkCheckpointDeclinedBurst and FlinkCheckpointFailuresIncreasing page when failures repeat.{{ evidence }}",
    },
    Spec {
        name: "FlinkCheckpointExpiredBurst",
        scope: Scope::Job,
        expr: "increase(log.expired, 10m) >= 3",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "{{ job_name }} logged {{ value }} expired checkpoints in 10 minutes",
        description: "The JobManager of {{ cluster }} logged {{ value }} 'Checkpoint … expired before completing' lines for job {{ job_name }} in the last 10 minutes, at least 3 (timeout {{ timeout | duration }}).{{ evidence }}",
    },
    Spec {
        name: "FlinkCheckpointDeclinedBurst",
        scope: Scope::Job,
        expr: "increase(log.declined, 10m) >= 3",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "Tasks of {{ job_name }} declined {{ value }} checkpoints in 10 minutes",
        description: "The JobManager of {{ cluster }} logged {{ value }} 'Decline checkpoint … by task …' lines for job {{ job_name }} in the last 10 minutes, at least 3; the TaskManager log has the exception.",
    },
    Spec {
        name: "FlinkCheckpointBarrierMissing",
        scope: Scope::Job,
        expr: "increase(log.barrier_missing, 10m) > 0",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Blocking,
        summary: "Barriers of {{ job_name }} did not arrive",
        description: "{{ value }} missing-barrier events for job {{ job_name }} on {{ cluster }} in the last 10 minutes (any is too many): a subtask held the checkpoint up.",
    },
    Spec {
        name: "FlinkCheckpointScheduleUnexplained",
        scope: Scope::Job,
        expr: "increase(shadow.unexplained, 30m) > 0 or shadow.stall > 0",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "Checkpoints of {{ job_name }} trigger off the schedule Flink's rules predict",
        description: "Checkpoints of job {{ job_name }} on {{ cluster }} trigger off the schedule the reference model of Flink's checkpoint coordinator predicts: {{ increase(shadow.unexplained, 30m) }} trigger deviation(s) in the last 30 minutes that no rule explains; the expected next trigger is {{ shadow.stall | duration }} overdue with no checkpoint running (0ms when it is not; a missing trigger counts as a stall past {{ shadow.stall_tolerance | duration }}, the trigger jitter plus the REST answer's observed lag (at least 3s, how long Flink's REST caches checkpoint statistics by default) plus one poll interval, at two polls in a row). Causes: a coordinator stall, JobManager overload or GC pause, a clock jump.",
    },
    Spec {
        name: "CheckpointSentinelStoreFailing",
        scope: Scope::Daemon,
        // Firing 30 s after the first refused write: the persister tries every 5 s and the
        // rules run every 15 s, so within a minute of the disk failing.
        expr: "store_failing > 0",
        for_s: 30,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Failure,
        summary: "checkpoint-sentinel cannot write its checkpoint store",
        description: "checkpoint-sentinel has not been able to write its checkpoint store for 30 seconds; {{ store_waiting_records }} records wait in its outbox and state file and are written once the store takes writes again. Beyond the outbox's bound they are dropped ({{ store_dropped_records }} so far), and the log names their checkpoint ids.",
    },
    Spec {
        name: "FlinkTaskManagerGcPressure",
        scope: Scope::TaskManager,
        expr: "gc_time_ratio > 25% and checkpoint_culprits > 0",
        for_s: 300,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "TaskManager {{ taskmanager }} spends {{ value | percent }} of its time in GC",
        description: "TaskManager {{ taskmanager }} on {{ cluster }} spent {{ gc_time_ratio | percent }} of the last minute in garbage collection, and ran the culprit subtask of {{ checkpoint_culprits }} recent checkpoint(s). GC pauses hold barriers and snapshots up: give it more heap, or keep less on the heap (state on RocksDB, smaller windows).",
    },
    Spec {
        name: "FlinkCheckpointIncident",
        scope: Scope::Incident,
        // Many jobs, one cause (`rules::incidents`): an incident groups at least 2 jobs already;
        // a minute lets the round after confirm it.
        expr: "jobs >= 2",
        for_s: 60,
        keep_s: 0,
        severity: AlertSeverity::Critical,
        class: Class::Failure,
        summary: "{{ value }} Flink jobs in trouble at once, all sharing {{ incident_cause }} {{ incident_value }}",
        description: "{{ incident_text }}. Jobs: {{ incident_jobs }}. Their trouble started within minutes of each other, and no healthy job shares the cause: look at it first. Their own alerts carry incident={{ incident }} for Alertmanager to group or inhibit them.",
    },
    Spec {
        name: "FlinkCheckpointStateSkew",
        scope: Scope::Job,
        expr: "state_skew > 4 and state_skew_max_size > 100MB",
        for_s: 1800,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Blocking,
        summary: "State of {{ job_name }} is skewed onto one subtask",
        description: "In the latest checkpoint of job {{ job_name }} on {{ cluster }}, operator {{ skew_operator }} holds {{ state_skew_max_size | bytes }} on subtask #{{ state_skew_hot_subtask }}, {{ value }} times its median subtask's state. That subtask snapshots, restores and aligns slowest: spread the keys (a better key, salting, or a higher max parallelism).",
    },
    Spec {
        name: "FlinkCheckpointStorageLeaking",
        scope: Scope::Job,
        expr: "storage_orphaned_bytes > 100MB or (storage_shared_bytes > 3 * storage_state and storage_shared_bytes > 1GB)",
        for_s: 3600,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Failure,
        summary: "The checkpoint storage of {{ job_name }} holds what no checkpoint needs",
        description: "The checkpoint directory of job {{ job_name }} on {{ cluster }} holds {{ storage_orphaned_bytes | bytes }} in {{ storage_orphaned_folders }} chk-N folder(s) that no retained or in-progress checkpoint holds (expired, discarded or never-deleted checkpoints), and {{ storage_shared_bytes | bytes }} under shared/ against {{ storage_state | bytes }} of state Flink reports. Delete the orphaned folders; for shared/ growth, check that subsumed checkpoints are discarded (JobManager log) and compaction runs.",
    },
    Spec {
        name: "FlinkCheckpointMetadataNearFrameSize",
        scope: Scope::Job,
        expr: "metadata_bytes > 0.5 * frame_size",
        for_s: 600,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "The checkpoint _metadata of {{ job_name }} is {{ value | bytes }}, past half the RPC frame size",
        description: "The newest checkpoint of job {{ job_name }} on {{ cluster }} wrote a _metadata of {{ metadata_bytes | bytes }}, more than half of the {{ frame_size | bytes }} frame size (pekko.framesize) its acknowledgements travel in. Before FLINK-39738 an acknowledgement over the frame size is dropped and the checkpoint simply expires. Union list state and state inlined into the metadata grow it: shrink the union state, lower execution.checkpointing.data-inline-threshold, or raise pekko.framesize.",
    },
    Spec {
        name: "FlinkCheckpointStorageThrottled",
        scope: Scope::Job,
        expr: "increase(storage_throttled, 10m) > 0",
        for_s: 0,
        keep_s: 0,
        severity: AlertSeverity::Warning,
        class: Class::Timeout,
        summary: "The checkpoint storage of {{ job_name }} throttles requests",
        description: "{{ value }} listing(s) of the checkpoint directory of job {{ job_name }} on {{ cluster }} were answered 503 SlowDown (or 429) in the last 10 minutes: the storage throttles, and the uploads of the checkpoints' async phase meet the same limit. Spread the keys over prefixes, ask for a higher request rate, or checkpoint less often.",
    },
];

/// The built-in rules.
pub fn rules() -> Vec<RuleSpec> {
    PACK.iter()
        .map(|s| RuleSpec {
            name: s.name.to_string(),
            scope: s.scope,
            expr: s.expr.to_string(),
            for_: Duration::from_secs(s.for_s),
            keep_firing_for: Duration::from_secs(s.keep_s),
            severity: s.severity,
            class: s.class,
            labels: Default::default(),
            summary: s.summary.to_string(),
            description: s.description.to_string(),
            runbook_url: runbook_url(RUNBOOK_BASE_URL, s.name),
        })
        .collect()
}

/// The pack parsed, once per process (the daemon takes it at start and on every reload). A
/// built-in rule that does not parse is a bug the test below catches, so it panics rather than
/// being left out.
pub(crate) fn compiled() -> &'static [super::Rule] {
    static COMPILED: std::sync::OnceLock<Vec<super::Rule>> = std::sync::OnceLock::new();
    COMPILED.get_or_init(|| {
        rules()
            .into_iter()
            .map(|spec| {
                let name = spec.name.clone();
                super::Rule::new(spec).unwrap_or_else(|e| panic!("built-in rule {name}: {e}"))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_rule_parses() {
        for spec in rules() {
            let name = spec.name.clone();
            super::super::Rule::new(spec).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
