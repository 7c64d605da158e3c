//! Unit tests of the log-line recognition: every pattern on the lines of each Flink version,
//! records and stack traces, root causes, the splitter.

use regex::Regex;

use super::causes::{CAUSES, CHAIN_FIRST, CHAIN_LATER};
use super::records::{is_user_frame, operator_in};
use super::*;
use crate::observe::CAUSE_CATEGORIES;

fn one(line: &str) -> LogEvent {
    let events = parse_all(&Patterns::builtin(), line.as_bytes());
    assert_eq!(events.len(), 1, "{line}: {events:?}");
    events.into_iter().next().unwrap()
}

const JOB: &str = "e5977598408a0b50e1eb3e122b7bd082";

#[test]
fn trigger_lines_of_every_version() {
    for (line, detail) in [
        // 1.13.6 / 1.14.6
        (
            "2026-11-29 15:48:30,913 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 1 (type=CHECKPOINT) @ 1795967310912 for job e5977598408a0b50e1eb3e122b7bd082.",
            "CHECKPOINT",
        ),
        // 1.17+ / 2.x
        (
            "2026-11-29 15:04:08,723 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering checkpoint 1 (type=CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}) @ 1795964648723 for job e5977598408a0b50e1eb3e122b7bd082.",
            "CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}",
        ),
    ] {
        let e = one(line);
        assert_eq!(
            (e.kind.as_str(), e.checkpoint_id, e.job_id.as_deref()),
            ("triggered", Some(1), Some(JOB))
        );
        assert_eq!(e.detail.as_deref(), Some(detail));
        assert_eq!(e.logged_at.as_deref(), Some(&line[..23]));
    }
}

#[test]
fn completed_in_the_1_13_and_the_1_14_form() {
    let old = one(
        "2026-11-29 15:48:34,589 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Completed checkpoint 1 for job e5977598408a0b50e1eb3e122b7bd082 (45526 bytes in 3677 ms).",
    );
    assert_eq!((old.kind.as_str(), old.bytes, old.duration_ms), ("completed", Some(45526), Some(3677)));
    let new = one(
        "2026-11-29 15:04:08,771 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Completed checkpoint 1 for job e5977598408a0b50e1eb3e122b7bd082 (18561 bytes, checkpointDuration=47 ms, finalizationTime=1 ms).",
    );
    assert_eq!((new.kind.as_str(), new.bytes, new.duration_ms), ("completed", Some(18561), Some(47)));
}

#[test]
fn decline_names_vertex_subtask_and_taskmanager() {
    let e = one(
        "2026-11-29 15:15:20,699 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 3 by task 75334e7121a9e2403cff11302e29350e_857e9877747f27b5e758680f3644828a_1_0 of job e5977598408a0b50e1eb3e122b7bd082 at 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126).",
    );
    assert_eq!(e.kind, "declined");
    assert_eq!(e.task.as_deref(), Some("857e9877747f27b5e758680f3644828a"));
    assert_eq!(e.subtask, Some(1));
    assert_eq!(e.taskmanager.as_deref(), Some("127.0.0.1:19125-bd2dde @ localhost (dataPort=19126)"));
    // 1.13/1.14: a plain attempt id, no subtask.
    let e = one(
        "2026-11-29 15:35:40,853 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 3 by task 280fb2a913c1ac30a65f3a16353dcb76 of job e5977598408a0b50e1eb3e122b7bd082 at 127.0.0.1:22125-2961ac @ localhost (dataPort=22126).",
    );
    assert_eq!((e.kind.as_str(), e.subtask), ("declined", None));
}

#[test]
fn the_other_checkpoint_lines() {
    let cases: &[(&str, &str, Option<u64>)] = &[
        (
            "Checkpoint 3 of job e5977598408a0b50e1eb3e122b7bd082 expired before completing.",
            "expired",
            Some(3),
        ),
        (
            "Failed to trigger or complete checkpoint 3 for job e5977598408a0b50e1eb3e122b7bd082. (2 consecutive failed attempts so far)",
            "failed",
            Some(3),
        ),
        (
            "Failed to trigger checkpoint for job e5977598408a0b50e1eb3e122b7bd082 since Checkpoint triggering task Source: fast-source -> fast-throttle (1/2) of job e5977598408a0b50e1eb3e122b7bd082 is not being executed at the moment. Aborting checkpoint. Failure reason: Not all required tasks are currently running.",
            "trigger_failed",
            None,
        ),
        (
            "Triggering Checkpoint 7 for job e5977598408a0b50e1eb3e122b7bd082 failed due to java.util.concurrent.TimeoutException",
            "trigger_failed",
            Some(7),
        ),
        (
            "Received late message for now expired checkpoint attempt 3 from task 12b102e25c31c396966057cecb6581a0_857e9877747f27b5e758680f3644828a_0_0 of job e5977598408a0b50e1eb3e122b7bd082 at 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126).",
            "late_message",
            Some(3),
        ),
        (
            "stateful-map (2/2)#0: Received checkpoint barrier for checkpoint 9 before completing current checkpoint 8. Skipping current checkpoint.",
            "barrier_overtaken",
            Some(8),
        ),
        (
            "Map (1/4)#0: Received EndOfPartition(-1) before completing current checkpoint 8. Skipping current checkpoint.",
            "end_of_partition",
            Some(8),
        ),
        (
            "Time from receiving all checkpoint barriers/RPC to executing it exceeded threshold: 31234ms",
            "execution_delay",
            None,
        ),
        (
            "Time from receiving all checkpoint barriers/RPC for checkpoint 12 to executing it exceeded threshold: 30001ms",
            "execution_delay",
            Some(12),
        ),
        (
            "Restoring job e5977598408a0b50e1eb3e122b7bd082 from Checkpoint 11 @ 1795964686475 for e5977598408a0b50e1eb3e122b7bd082 located at file:/opt/flink-lab/2.3.0/checkpoints/x/chk-11.",
            "restored",
            Some(11),
        ),
        (
            "stateful-map (1/2)#0 (2523204e22534449eaafda3e122aa716_857e9877747f27b5e758680f3644828a_0_0): Received barrier from channel InputChannelInfo{gateIdx=0, inputChannelIdx=1} @ 4.",
            "barrier_received",
            Some(4),
        ),
        (
            "stateful-map (1/2)#0 - asynchronous part of checkpoint 3 could not be completed.",
            "async_snapshot_failed",
            Some(3),
        ),
        (
            "Could not complete snapshot 3 for operator stateful-map (1/2)#0. Failure reason: Checkpoint was declined.",
            "sync_snapshot_failed",
            Some(3),
        ),
    ];
    for (message, kind, id) in cases {
        let line = format!(
            "2026-11-29 15:02:33,301 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - {message}"
        );
        let e = one(&line);
        assert_eq!((e.kind.as_str(), e.checkpoint_id), (*kind, *id), "{message}");
    }
    let delay = one(
        "2026-11-29 15:02:33,301 WARN  org.apache.flink.streaming.runtime.tasks.SubtaskCheckpointCoordinatorImpl [] - Time from receiving all checkpoint barriers/RPC for checkpoint 12 to executing it exceeded threshold: 30001ms",
    );
    assert_eq!(delay.duration_ms, Some(30001));
    let barrier = one(
        "2026-11-29 15:19:16,116 DEBUG org.apache.flink.streaming.runtime.io.checkpointing.SingleCheckpointBarrierHandler [] - stateful-map (1/2)#0 (2523204e22534449eaafda3e122aa716_857e9877747f27b5e758680f3644828a_0_0): Received barrier from channel InputChannelInfo{gateIdx=0, inputChannelIdx=1} @ 4.",
    );
    assert_eq!(barrier.task.as_deref(), Some("stateful-map"), "the name without (k/n)#attempt");
    assert_eq!(barrier.subtask, Some(0));
    assert_eq!(barrier.detail.as_deref(), Some("InputChannelInfo{gateIdx=0, inputChannelIdx=1}"));
    let trig = one(
        "2026-11-29 15:02:33,301 INFO  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger checkpoint for job e5977598408a0b50e1eb3e122b7bd082 since Checkpoint triggering task X (1/2) of job e5977598408a0b50e1eb3e122b7bd082 is not being executed at the moment. Aborting checkpoint. Failure reason: Not all required tasks are currently running.",
    );
    assert_eq!(trig.reason.as_deref(), Some("Not all required tasks are currently running."));
}

#[test]
fn the_seed_missing_barrier_form() {
    let e = one(
        "2024-05-20 10:28:45,123 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator - Did not receive barrier from source: KafkaSource - Map - Filter (subtask: 7) after 300000 ms",
    );
    assert_eq!(e.kind, "barrier_missing");
    assert_eq!(e.task.as_deref(), Some("KafkaSource - Map - Filter"));
    assert_eq!((e.subtask, e.duration_ms), (Some(7), Some(300000)));
}

#[test]
fn lines_that_match_nothing_give_nothing() {
    let text = "2026-11-29 15:04:08,771 INFO  org.apache.flink.runtime.source.coordinator.SourceCoordinator [] - Marking checkpoint 1 as completed for source Source: fast-source.\n\
                2026-11-29 15:04:18,736 INFO  org.apache.flink.runtime.checkpoint.CheckpointRequestDecider [] - checkpoint request time in queue: 1013\n\
                \tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator.run(CheckpointCoordinator.java:1)\n";
    assert!(parse_all(&Patterns::builtin(), text.as_bytes()).is_empty());
}

#[test]
fn a_stack_trace_belongs_to_its_event_and_the_deepest_cause_is_the_root() {
    let text = "\
2026-11-29 15:15:20,699 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 3 by task 75334e7121a9e2403cff11302e29350e_857e9877747f27b5e758680f3644828a_0_0 of job e5977598408a0b50e1eb3e122b7bd082 at 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126).
org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.
\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.handleExecutionException(AsyncCheckpointRunnable.java:320) ~[flink-dist-1.20.5.jar:1.20.5]
Caused by: org.apache.flink.util.SerializedThrowable: java.lang.Exception: Could not materialize checkpoint 3 for operator stateful-map (1/2)#0.
\t... 5 more
Caused by: org.apache.flink.util.SerializedThrowable: java.nio.channels.ClosedChannelException
\tat sun.nio.ch.FileChannelImpl.ensureOpen(FileChannelImpl.java:110)
2026-11-29 15:15:20,704 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Checkpoint 4 of job e5977598408a0b50e1eb3e122b7bd082 expired before completing.
";
    let events = parse_all(&Patterns::builtin(), text.as_bytes());
    assert_eq!(events.len(), 2);
    let declined = &events[0];
    assert_eq!(declined.stack.len(), 6);
    assert_eq!(declined.reason.as_deref(), Some("Asynchronous task checkpoint failed."));
    let root = declined.root_cause.as_ref().unwrap();
    assert_eq!(root.exception, "java.nio.channels.ClosedChannelException");
    assert_eq!(root.category, "closed_stream");
    assert!(events[1].stack.is_empty() && events[1].root_cause.is_none());
}

/// Flink 1.14.6's decline (the `declined` capture): the task is a plain 32-hex attempt id,
/// the class of the injected exception is only in the line above the deepest cause, and
/// the trace names the operator. 1.13 writes the same lines.
#[test]
fn a_1_14_decline_names_its_task_from_the_trace_and_unwraps_serialized_throwable() {
    let text = "\
2026-11-29 15:35:41,122 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 3 by task eb43ce77ee0597a0b932e00bbaec7da1 of job eb575a3e226571929499545b4e3ee233 at 127.0.0.1:21125-a2bac7 @ localhost (dataPort=21126).
org.apache.flink.util.SerializedThrowable: Asynchronous task checkpoint failed.
\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.handleExecutionException(AsyncCheckpointRunnable.java:301) ~[flink-dist_2.11-1.14.6.jar:1.14.6]
Caused by: org.apache.flink.util.SerializedThrowable: Could not materialize checkpoint 3 for operator stateful-map (1/2)#0.
\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.handleExecutionException(AsyncCheckpointRunnable.java:279) ~[flink-dist_2.11-1.14.6.jar:1.14.6]
\t... 4 more
Caused by: org.apache.flink.util.SerializedThrowable: java.io.IOException: flink-lab injected failure while writing operator state (async snapshot phase)
\tat java.util.concurrent.FutureTask.report(FutureTask.java:122) ~[?:?]
Caused by: org.apache.flink.util.SerializedThrowable: flink-lab injected failure while writing operator state (async snapshot phase)
\tat flinklab.FlinkLabJob$PoisonState.write(FlinkLabJob.java:301) ~[?:?]
";
    let events = parse_all(&Patterns::builtin(), text.as_bytes());
    let declined = &events[0];
    assert_eq!(declined.kind, "declined");
    assert_eq!(declined.job_id.as_deref(), Some("eb575a3e226571929499545b4e3ee233"));
    assert_eq!((declined.task.as_deref(), declined.subtask), (Some("stateful-map"), Some(0)));
    assert_eq!(declined.detail.as_deref(), Some("attempt eb43ce77ee0597a0b932e00bbaec7da1"));
    let root = declined.root_cause.as_ref().unwrap();
    assert_eq!(
        (root.exception.as_str(), root.message.as_str(), root.category),
        (
            "java.io.IOException",
            "flink-lab injected failure while writing operator state (async snapshot phase)",
            "io_error"
        )
    );
}

/// 1.17+: the attempt id gives the vertex id; the trace gives the operator's name.
#[test]
fn a_vertex_id_gives_way_to_the_operator_the_trace_names() {
    let text = "\
2026-11-29 15:15:20,699 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Decline checkpoint 3 by task 75334e7121a9e2403cff11302e29350e_857e9877747f27b5e758680f3644828a_1_0 of job e5977598408a0b50e1eb3e122b7bd082 at 127.0.0.1:19125-bd2dde @ localhost (dataPort=19126).
org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.
Caused by: org.apache.flink.util.SerializedThrowable: java.lang.Exception: Could not materialize checkpoint 3 for operator Map -> Sink (2/2)#3.
";
    let e = &parse_all(&Patterns::builtin(), text.as_bytes())[0];
    assert_eq!((e.task.as_deref(), e.subtask), (Some("Map -> Sink"), Some(1)));
    assert_eq!(e.detail.as_deref(), Some("vertex 857e9877747f27b5e758680f3644828a"));
}

/// An exception thrown by the job's own code (its top frame is not Flink's or the JDK's) is
/// `user_code`, not `other`.
#[test]
fn an_exception_from_the_jobs_code_is_user_code() {
    let text = "\
2026-11-29 15:17:04,471 INFO  org.apache.flink.streaming.runtime.tasks.RegularOperatorChain [] - Could not complete snapshot 3 for operator stateful-map (1/2)#0. Failure reason: Checkpoint was declined.
org.apache.flink.runtime.checkpoint.CheckpointException: Could not complete snapshot 3 for operator stateful-map (1/2)#0. Failure reason: Checkpoint was declined.
\tat org.apache.flink.streaming.api.operators.StreamOperatorStateHandler.snapshotState(StreamOperatorStateHandler.java:300) ~[flink-dist-1.20.5.jar:1.20.5]
Caused by: java.lang.Exception: flink-lab injected snapshot failure for checkpoint 3 on subtask 0
\tat flinklab.FlinkLabJob$StatefulMap.snapshotState(FlinkLabJob.java:237) ~[?:?]
\tat org.apache.flink.streaming.util.functions.StreamingFunctionUtils.trySnapshotFunctionState(StreamingFunctionUtils.java:118) ~[flink-dist-1.20.5.jar:1.20.5]
";
    let e = &parse_all(&Patterns::builtin(), text.as_bytes())[0];
    assert_eq!((e.task.as_deref(), e.subtask), (Some("stateful-map"), Some(0)));
    let root = e.root_cause.as_ref().unwrap();
    assert_eq!((root.exception.as_str(), root.category), ("java.lang.Exception", "user_code"));
    assert!(!is_user_frame("\tat java.base/java.lang.Thread.run(Thread.java:840) [?:?]"));
    assert!(!is_user_frame("at org.apache.flink.runtime.X.y(X.java:1)"));
}

#[test]
fn task_names_split_into_operator_and_subtask() {
    assert_eq!(split_task("Map -> Sink (3/8)#0"), ("Map -> Sink", Some(2)));
    assert_eq!(split_task("stateful-map (1/2)"), ("stateful-map", Some(0)));
    assert_eq!(split_task("857e9877747f27b5e758680f3644828a"), ("857e9877747f27b5e758680f3644828a", None));
    assert_eq!(split_task("(1/2)"), ("(1/2)", None));
    assert_eq!(
        operator_in("Could not perform checkpoint 3 for operator stateful-map (1/2)#0."),
        Some(("stateful-map".into(), 0))
    );
}

#[test]
fn the_tolerable_failure_is_found_in_the_exception_line() {
    let text = "\
2026-11-29 15:45:09,725 INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Asynchronous task checkpoint failed., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.
\tat org.apache.flink.runtime.checkpoint.CheckpointFailureManager.checkFailureAgainstCounter(CheckpointFailureManager.java:212) ~[flink-dist-1.20.5.jar:1.20.5]
2026-11-29 15:45:09,726 INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job x (e5977598408a0b50e1eb3e122b7bd082) switched from state RUNNING to RESTARTING.
org.apache.flink.runtime.JobException: Recovery is suppressed
Caused by: org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold.
";
    let events = parse_all(&Patterns::builtin(), text.as_bytes());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].kind, "tolerable_exceeded");
    assert_eq!(events[0].reason.as_deref(), Some("Asynchronous task checkpoint failed."));
    assert_eq!(events[0].severity, EventSeverity::Error);
}

/// Issue 40: Pekko's (and Akka's) oversized-payload record, sender's and receiver's shapes
/// (Pekko's `EndpointWriter`/`EndpointReader`), is an event with the payload's size, the JobMaster
/// it was for and an `oversized_ack` root cause; a TaskManager's registration at a JobMaster
/// says which job that JobMaster runs.
#[test]
fn an_oversized_payload_and_a_jobmaster_registration_are_events() {
    let text = "\
2026-12-05 09:00:00,571 INFO  org.apache.flink.runtime.taskexecutor.DefaultJobLeaderService [] - Successful registration at job manager pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_4 for job e5977598408a0b50e1eb3e122b7bd082.
2026-12-05 09:01:02,310 ERROR org.apache.pekko.remote.EndpointWriter                        [] - Transient association error (association remains live)
org.apache.pekko.remote.OversizedPayloadException: Discarding oversized payload sent to Actor[pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_4#-1027346771]: max allowed size 10485760 bytes, actual size of encoded class org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation was 15859121 bytes.
2026-12-05 09:01:03,000 ERROR akka.remote.EndpointReader                                    [] - Transient error while reading from association (association remains live)
akka.remote.OversizedPayloadException: Discarding oversized payload received: max allowed size [10485760] bytes, actual size [15859121] bytes.
2026-12-05 09:01:04,000 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor           [] - This is usually caused by: Pekko failed sending the message silently, due to problems like oversized payload.
";
    let events = parse_all(&Patterns::builtin(), text.as_bytes());
    assert_eq!(events.len(), 3, "{events:#?}");
    assert_eq!(events[0].kind, "jobmaster_registered");
    assert_eq!(events[0].detail.as_deref(), Some("pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_4"));
    assert_eq!(events[0].job_id.as_deref(), Some("e5977598408a0b50e1eb3e122b7bd082"));
    for (e, recipient) in
        [(&events[1], Some("pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_4")), (&events[2], None)]
    {
        assert_eq!(e.kind, "oversized_payload");
        assert_eq!(e.severity, EventSeverity::Warning);
        assert_eq!(e.bytes, Some(15_859_121));
        assert_eq!(e.checkpoint_id, None, "the line names no checkpoint");
        assert_eq!(e.detail.as_deref(), recipient);
        assert_eq!(e.root_cause.as_ref().map(|c| c.category), Some("oversized_ack"));
        let (payload, frame) =
            crate::state::ack_drops::oversized_sizes(&e.root_cause.as_ref().unwrap().message).unwrap();
        assert_eq!((payload, frame), (15_859_121, 10_485_760));
    }
    assert_eq!(events[1].logged_at.as_deref(), Some("2026-12-05 09:01:02,310"));
}

/// The category of a root cause: first by the deepest cause alone, then by the whole chain
/// (frames show S3 or HDFS clients where the message does not), then by its class.
fn classify_by_needle(exception: &str, message: &str, chain: &[String]) -> &'static str {
    let root = format!("{exception}: {message}");
    for (category, needles) in CAUSES {
        if CHAIN_FIRST.contains(category) && needles.iter().any(|n| root.contains(n)) {
            return category;
        }
    }
    for (category, needles) in CAUSES {
        if CHAIN_FIRST.contains(category) && chain.iter().any(|line| needles.iter().any(|n| line.contains(n)))
        {
            return category;
        }
    }
    for (category, needles) in CAUSES {
        if needles.iter().any(|n| root.contains(n)) {
            return category;
        }
    }
    for (category, needles) in CAUSES {
        if CHAIN_LATER.contains(category) && chain.iter().any(|line| needles.iter().any(|n| line.contains(n)))
        {
            return category;
        }
    }
    if exception.ends_with("IOException") { "io_error" } else { "other" }
}

/// The one-search classification against the needle-by-needle one on every line of every
/// fixture log, as a message alone and as a chain.
#[test]
fn classification_by_one_search_is_classification_by_needles() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut lines: Vec<String> = Vec::new();
    for version in std::fs::read_dir(root).unwrap().flatten().filter(|v| v.path().is_dir()) {
        for scenario in std::fs::read_dir(version.path()).unwrap().flatten() {
            for f in std::fs::read_dir(scenario.path().join("logs")).into_iter().flatten().flatten() {
                let text = String::from_utf8_lossy(&std::fs::read(f.path()).unwrap()).into_owned();
                lines.extend(text.lines().map(str::to_string));
            }
        }
    }
    for (_, needles) in CAUSES {
        lines.extend(needles.iter().map(|n| format!("x {n} y")));
    }
    assert!(lines.len() > 10_000, "{}", lines.len());
    let mut categories = std::collections::BTreeSet::new();
    for (i, line) in lines.iter().enumerate() {
        let (exception, message) = exception_of(line);
        let want = classify_by_needle(&exception, &message, &[]);
        assert_eq!(classify(&exception, &message, &[]), want, "{line}");
        categories.insert(want);
        let chain = &lines[i.saturating_sub(20)..(i + 20).min(lines.len())];
        assert_eq!(classify("x", "y", chain), classify_by_needle("x", "y", chain), "chain at {line}");
    }
    assert!(categories.len() >= 12, "{categories:?}");
}

#[test]
fn root_causes_are_classified() {
    let cases = [
        ("java.io.IOException: No space left on device", "disk_full"),
        ("java.lang.OutOfMemoryError: Java heap space", "out_of_memory"),
        ("java.net.SocketTimeoutException: Read timed out", "timeout"),
        ("java.io.IOException: Stream is closed", "closed_stream"),
        ("java.nio.channels.ClosedChannelException", "closed_stream"),
        (
            "java.lang.ClassCastException: class com.example.User cannot be cast to class org.apache.flink.api.java.tuple.Tuple2",
            "serialization",
        ),
        ("java.nio.file.AccessDeniedException: /flink/checkpoints", "permission"),
        ("com.amazonaws.services.s3.model.AmazonS3Exception: Service Unavailable", "s3"),
        (
            "org.apache.hadoop.ipc.RemoteException: File could only be written to 0 of the 1 minReplication nodes",
            "hdfs",
        ),
        ("java.io.IOException: Failed to persist checkpoint metadata", "metadata_store"),
        (
            "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.",
            "expired",
        ),
        (
            "java.io.IOException: flink-lab injected failure while writing operator state (async snapshot phase)",
            "io_error",
        ),
        ("java.lang.IllegalStateException: something else", "other"),
        // Issue 40: the storage and the acknowledgement, in the words of the AWS SDKs, Hadoop's
        // S3A, Pekko and Flink.
        (
            "com.amazonaws.services.s3.model.AmazonS3Exception: Please reduce your request rate. (Service: Amazon S3; Status Code: 503; Error Code: SlowDown; Request ID: 7N5W3DTKQ0; S3 Extended Request ID: x/y=; Proxy: null)",
            "storage_throttled",
        ),
        (
            "org.apache.hadoop.fs.s3a.AWSServiceThrottledException: PUT 0-byte object  on flink/checkpoints/chk-7: com.amazonaws.services.s3.model.AmazonS3Exception: Slow Down",
            "storage_throttled",
        ),
        (
            "software.amazon.awssdk.services.s3.model.S3Exception: Too Many Requests (Service: S3, Status Code: 429, Request ID: 17E0C6F1)",
            "storage_throttled",
        ),
        (
            "org.apache.pekko.remote.OversizedPayloadException: Discarding oversized payload sent to Actor[pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_2#-1027346771]: max allowed size 10485760 bytes, actual size of encoded class org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation was 15859121 bytes.",
            "oversized_ack",
        ),
        (
            "java.util.concurrent.TimeoutException: Invocation of [RemoteRpcInvocation(CheckpointCoordinatorGateway.acknowledgeCheckpoint(JobID, ExecutionAttemptID, long, CheckpointMetrics, TaskStateSnapshot))] at recipient [pekko.tcp://flink@10.0.3.7:6123/user/rpc/jobmanager_2] timed out. This is usually caused by: 1) Pekko failed sending the message silently, due to problems like oversized payload or serialization failures.",
            "oversized_ack",
        ),
        (
            "com.amazonaws.services.s3.model.AmazonS3Exception: The specified bucket does not exist (Service: Amazon S3; Status Code: 404; Error Code: NoSuchBucket; Request ID: 3B3C)",
            "storage_error",
        ),
        (
            "java.io.IOException: Could not flush to file and close the file system output stream to s3://flink/checkpoints/4f1e/chk-7/7c2b in order to obtain the stream state handle",
            "storage_error",
        ),
        (
            "java.nio.file.AccessDeniedException: s3a://flink/checkpoints/4f1e/chk-7: getFileStatus on s3a://flink/checkpoints/4f1e/chk-7: com.amazonaws.services.s3.model.AmazonS3Exception: Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied)",
            "permission",
        ),
        // Any ask that timed out says "oversized payload" among its usual causes: not one.
        (
            "java.util.concurrent.TimeoutException: Invocation of [RemoteRpcInvocation(TaskExecutorThreadInfoGateway.requestThreadInfoSamples(Collection, ThreadInfoSamplesRequest, Time))] at recipient [pekko.tcp://flink@127.0.0.1:21125/user/rpc/taskmanager_0] timed out. This is usually caused by: 1) Pekko failed sending the message silently, due to problems like oversized payload or serialization failures.",
            "timeout",
        ),
    ];
    for (line, category) in cases {
        let (exception, message) =
            exception_of(&format!("Caused by: org.apache.flink.util.SerializedThrowable: {line}"));
        assert_eq!(classify(&exception, &message, &[]), category, "{line}");
        assert!(CAUSE_CATEGORIES.contains(&category));
    }
    // An IOException whose frames show the S3 client.
    let chain = vec!["\tat com.amazonaws.http.AmazonHttpClient.execute(AmazonHttpClient.java:1)".to_string()];
    assert_eq!(classify("java.io.IOException", "boom", &chain), "s3");
    // A throttled write whose deepest cause is the retry's last timeout.
    let chain = vec![
        "java.io.IOException: Could not flush to file and close the file system output stream to s3://flink/chk-7/x in order to obtain the stream state handle".to_string(),
        "Caused by: org.apache.hadoop.fs.s3a.AWSServiceThrottledException: PUT on flink/chk-7/x: com.amazonaws.services.s3.model.AmazonS3Exception: Please reduce your request rate. (Service: Amazon S3; Status Code: 503; Error Code: SlowDown)".to_string(),
        "Caused by: java.net.SocketTimeoutException: Read timed out".to_string(),
    ];
    assert_eq!(classify("java.net.SocketTimeoutException", "Read timed out", &chain), "storage_throttled");
}

#[test]
fn exceptions_are_unwrapped() {
    assert_eq!(
        exception_of("java.util.concurrent.ExecutionException: java.io.IOException: disk"),
        ("java.io.IOException".to_string(), "disk".to_string())
    );
    assert_eq!(
        exception_of("Caused by: java.nio.channels.ClosedChannelException").0,
        "java.nio.channels.ClosedChannelException"
    );
}

#[test]
fn user_patterns_come_first_and_use_named_captures() {
    let user = UserPattern {
        regex: Regex::new(r"^Sink (?P<task>\S+) flushed checkpoint (?P<id>\d+) in (?P<dur>\d+) ms$").unwrap(),
        kind: "slow_flush".into(),
        severity: EventSeverity::Warning,
    };
    let patterns = Patterns::new(vec![user]);
    let events = parse_all(
        &patterns,
        b"2026-11-29 15:02:33,301 INFO  my.Sink [] - Sink kafka flushed checkpoint 9 in 4100 ms\n",
    );
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].kind.as_str(), events[0].checkpoint_id, events[0].duration_ms),
        ("slow_flush", Some(9), Some(4100))
    );
}

#[test]
fn subtask_indexes_come_from_task_names() {
    assert_eq!(subtask_of("Map -> Sink (3/8)#0"), Some(2));
    assert_eq!(subtask_of("Map -> Sink (1/8)"), Some(0));
    assert_eq!(subtask_of("Map"), None);
}

#[test]
fn the_splitter_bounds_long_lines_and_keeps_partial_ones() {
    let mut s = LineSplitter::new(8, 100);
    let mut got: Vec<(String, u64)> = Vec::new();
    let mut push = |l: &[u8], o: u64| got.push((String::from_utf8_lossy(l).into_owned(), o));
    s.feed(b"abc\r\nde", &mut push);
    s.feed(b"f\n0123456789abcdef", &mut push);
    s.feed(b"ghij\nxy", &mut push);
    assert_eq!(s.line_start(), 100 + 5 + 4 + 21);
    s.finish(&mut push);
    assert_eq!(
        got,
        vec![("abc".into(), 100), ("def".into(), 105), ("01234567".into(), 109), ("xy".into(), 130)]
    );
    assert_eq!((s.oversize, s.lines), (1, 4));
    // A long line split over chunks is cut once and the next line is intact.
    let mut s = LineSplitter::new(4, 0);
    let mut got = Vec::new();
    s.feed(b"ab", |l, _| got.push(l.to_vec()));
    s.feed(b"cdefg", |l, _| got.push(l.to_vec()));
    s.feed(b"h\nok\n", |l, _| got.push(l.to_vec()));
    assert_eq!(got, vec![b"abcd".to_vec(), b"ok".to_vec()]);
    assert_eq!(s.oversize, 1);
}

#[test]
fn pending_start_is_the_first_byte_of_the_unfinished_record() {
    let mut p = RecordParser::new(Patterns::builtin());
    let mut out = Vec::new();
    let l1 = "2026-11-29 15:02:33,301 INFO  x [] - Checkpoint 3 of job e5977598408a0b50e1eb3e122b7bd082 expired before completing.";
    p.push_line(l1.as_bytes(), 0, &mut out);
    assert_eq!(p.pending_start(), Some(0));
    p.push_line(l1.as_bytes(), 200, &mut out);
    assert_eq!((out.len(), p.pending_start()), (1, Some(200)));
    p.flush(&mut out);
    assert_eq!((out.len(), p.pending_start()), (2, None));
}
