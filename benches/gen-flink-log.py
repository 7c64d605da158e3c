#!/usr/bin/env python3
"""Writes a realistic Flink JobManager log for the scan-logs benchmark (benches/run.sh).

Mostly non-checkpoint INFO lines (task state switches, Kafka offsets, slot manager, source
coordinator lines that mention checkpoints but are not checkpoint lifecycle lines), about 3 %
checkpoint lifecycle lines (triggered, completed) and about 1 % failure lines (expired, declined
and "Failed to trigger or complete" with their stack traces), in Flink 1.20's layout.

usage: gen-flink-log.py OUT_FILE [SIZE_MB] [SEED]
"""

import random
import sys

out_path = sys.argv[1]
size_mb = int(sys.argv[2]) if len(sys.argv) > 2 else 512
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 7)
target = size_mb * 1024 * 1024

JOBS = ["%032x" % rng.getrandbits(128) for _ in range(8)]
TASKS = ["Source: kafka-orders", "enrich -> Filter", "stateful-map", "window-agg", "Sink: kafka-out"]
HEX = "0123456789abcdef"


def hexid(n=32):
    return "".join(rng.choice(HEX) for _ in range(n))


ATTEMPTS = [hexid() + "_" + hexid() + "_%d_0" % i for i in range(8)]
CONTAINERS = ["10.0.%d.%d:6122-%s" % (rng.randrange(256), rng.randrange(256), hexid(6)) for _ in range(8)]

NOISE = [
    "INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - {task} ({i}/8) ({att}) switched from INITIALIZING to RUNNING.",
    "INFO  org.apache.flink.runtime.source.coordinator.SourceCoordinator [] - Marking checkpoint {cp} as completed for source Source: kafka-orders.",
    "INFO  org.apache.kafka.clients.consumer.internals.ConsumerCoordinator [] - [Consumer clientId=orders-{i}, groupId=orders] Committed offset {n} for partition orders-{i}",
    "INFO  org.apache.flink.runtime.checkpoint.CheckpointRequestDecider [] - checkpoint request time in queue: {n3}",
    "INFO  org.apache.flink.runtime.resourcemanager.slotmanager.FineGrainedSlotManager [] - Received resource requirements from job {job}: [ResourceRequirement{{resourceProfile=ResourceProfile{{UNKNOWN}}, numberOfRequiredSlots={i}}}]",
    "INFO  org.apache.flink.connector.kafka.source.reader.KafkaSourceReader [] - Committing offsets for checkpoint {cp}",
    "INFO  org.apache.flink.streaming.api.functions.sink.filesystem.Buckets [] - Subtask {i} checkpointing for checkpoint with id={cp} (max part counter={i}).",
    "INFO  org.apache.flink.runtime.taskexecutor.slot.TaskSlotTableImpl [] - Activate slot {slot}.",
    "INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Heartbeat of TaskManager with id {tm} timed out after {n3} ms, marking it as alive again.",
    "DEBUG org.apache.flink.runtime.io.network.partition.ResultPartition [] - {task} ({i}/8)#0 ({att}): Releasing ResultPartition {slot}#{i}.",
    "INFO  org.apache.flink.runtime.dispatcher.StandaloneDispatcher     [] - Job {job} reached globally terminal state RUNNING at {ts_ms}.",
    "WARN  org.apache.kafka.clients.NetworkClient                       [] - [Consumer clientId=orders-{i}, groupId=orders] Connection to node {i} (kafka-{i}.kafka:9092) could not be established. Broker may not be available.",
]

STACK_DECLINE = [
    "org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.",
    "\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.handleExecutionException(AsyncCheckpointRunnable.java:320) ~[flink-dist-1.20.5.jar:1.20.5]",
    "\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.run(AsyncCheckpointRunnable.java:155) ~[flink-dist-1.20.5.jar:1.20.5]",
    "\tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1136) [?:?]",
    "\tat java.base/java.lang.Thread.run(Thread.java:840) [?:?]",
    "Caused by: org.apache.flink.util.SerializedThrowable: java.lang.Exception: Could not materialize checkpoint {cp} for operator stateful-map ({i}/8)#0.",
    "\t... 5 more",
    "Caused by: org.apache.flink.util.SerializedThrowable: java.util.concurrent.ExecutionException: java.io.IOException: No space left on device",
    "\tat java.base/java.util.concurrent.FutureTask.report(FutureTask.java:122) ~[?:?]",
]
STACK_FAILED = [
    "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.",
    "\tat org.apache.flink.runtime.messages.checkpoint.SerializedCheckpointException.unwrap(SerializedCheckpointException.java:51) ~[flink-dist-1.20.5.jar:1.20.5]",
    "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator.receiveDeclineMessage(CheckpointCoordinator.java:1145) ~[flink-dist-1.20.5.jar:1.20.5]",
]
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "

ms = 1795964442475
cp = {job: 1 for job in JOBS}
failures = {job: 0 for job in JOBS}
written = 0
lines = 0
out = open(out_path, "w", buffering=1 << 22)


def stamp():
    s = ms // 1000
    h, m, sec = (s // 3600) % 24, (s // 60) % 60, s % 60
    return "2026-11-29 %02d:%02d:%02d,%03d " % (h, m, sec, ms % 1000)


def emit(text):
    global written, lines
    out.write(text)
    out.write("\n")
    written += len(text) + 1
    lines += 1


while written < target:
    batch = []
    # ~64 lines of noise per checkpoint round: the two lifecycle lines are ~3 % of all lines.
    for _ in range(64):
        ms += rng.randrange(1, 40)
        tmpl = rng.choice(NOISE)
        emit(stamp() + tmpl.format(
            task=rng.choice(TASKS), i=rng.randrange(1, 9), att=rng.choice(ATTEMPTS), cp=rng.randrange(1, 99999),
            n=rng.randrange(10**9), n3=rng.randrange(1000, 60000), job=rng.choice(JOBS), slot=hexid(),
            tm=rng.choice(CONTAINERS), ts_ms=ms))
    job = rng.choice(JOBS)
    n = cp[job]
    cp[job] += 1
    ms += 3
    emit(stamp() + "INFO  " + CC + "Triggering checkpoint %d (type=CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}) @ %d for job %s." % (n, ms, job))
    r = rng.random()
    if r < 0.40:
        # A failure: expiry, or a decline with the failure manager's line, with stack traces.
        ms += rng.randrange(100, 5000)
        if r < 0.20:
            emit(stamp() + "INFO  " + CC + "Checkpoint %d of job %s expired before completing." % (n, job))
            emit("org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.")
        else:
            i = rng.randrange(8)
            emit(stamp() + "INFO  " + CC + "Decline checkpoint %d by task %s of job %s at %s @ localhost (dataPort=%d)." % (n, ATTEMPTS[i], job, CONTAINERS[i], 6121 + i))
            for s in STACK_DECLINE:
                emit(s.format(cp=n, i=i + 1))
        emit(stamp() + "WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - Failed to trigger or complete checkpoint %d for job %s. (%d consecutive failed attempts so far)" % (n, job, failures[job]))
        failures[job] += 1
        for s in STACK_FAILED:
            emit(s)
    else:
        ms += rng.randrange(100, 5000)
        emit(stamp() + "INFO  " + CC + "Completed checkpoint %d for job %s (%d bytes, checkpointDuration=%d ms, finalizationTime=%d ms)." % (n, job, rng.randrange(10**4, 10**9), rng.randrange(50, 60000), rng.randrange(0, 50)))
        failures[job] = 0

out.close()
print("%s: %d bytes, %d lines" % (out_path, written, lines), file=sys.stderr)
