// ScenarioJob: the Flink job that checkpoint-sentinel's end-to-end harness (e2e/flink.sh) runs on a
// real local Flink cluster, so the daemon sees real checkpoint statistics and real JM/TM log lines:
// healthy checkpoints, expired ones (slow snapshot), declined ones (async snapshot failure),
// backpressure with long barrier alignment, min-pause spacing, task failover; and, for the evidence
// the daemon gathers from the TaskManagers: a task thread held by user code (blocked), a
// TaskManager under GC pressure (gc) and keyed state skewed onto subtask 0 (skew).
// Adapted from the flink-lab reference job (not needed at run time). One source file that compiles unchanged with
// `javac --release 11` against the lib/*.jar of Flink 1.14.x, 1.17.x, 1.20.x and 2.x: API differences between
// the versions are bridged by reflection, and checkpoint settings are passed as configuration
// keys instead of CheckpointConfig calls.
//
// Topology:
//   fast-source (fromSequence, throttled by a chained map)  \
//   [slow-source (optional, --slow-rate > 0)]                 > union -> keyBy -> stateful-map [-> blocking-map] -> discarding-sink
//   (blocking-map only with --block-ms > 0)
//
// All knobs are "--name value" command-line arguments (a repeated name: the last one wins);
// see usage() below. e2e/flink.sh maps scenario names to these arguments.
package sentinel.e2e;

import java.lang.reflect.Method;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource.NumberSequenceSplit;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

public class ScenarioJob {

    static final Logger LOG = LoggerFactory.getLogger(ScenarioJob.class);

    /** key, per-subtask sequence number, payload */
    public static final class Ev extends Tuple3<Long, Long, String> {
        public Ev() {}
        public Ev(long k, long s, String p) { super(k, s, p); }
    }

    static String usage() {
        return String.join("\n",
            "ScenarioJob options (all optional):",
            "  --job-name NAME                 job name (default sentinel-e2e)",
            "  --parallelism N                 (2)",
            "  --interval-ms MS                checkpoint interval (3000)",
            "  --timeout-ms MS                 checkpoint timeout (60000)",
            "  --min-pause-ms MS               min pause between checkpoints (0)",
            "  --max-concurrent N              max concurrent checkpoints (1)",
            "  --tolerable N                   tolerable failed checkpoints (100)",
            "  --unaligned true|false          unaligned checkpoints (false)",
            "  --aligned-timeout-ms MS         with --unaligned: start aligned, go unaligned after MS (unset)",
            "  --during-recovery true|false    checkpoints during recovery (FLIP-547, 2.3+): sets",
            "                                  execution.checkpointing.during-recovery.enabled and its prerequisite",
            "                                  execution.checkpointing.unaligned.recover-output-on-downstream.enabled (false)",
            "  --mode EXACTLY_ONCE|AT_LEAST_ONCE (EXACTLY_ONCE)",
            "  --rate N                        fast source records/s per subtask, 0 = unthrottled (500)",
            "  --slow-rate N                   second (slow) source records/s per subtask, 0 = no second source (0)",
            "  --payload-bytes N               payload size per record (64)",
            "  --max-keys N                    key space grows from 100 up to N (20000)",
            "  --skew F                        fraction of records sent to hot key 0 (0.0)",
            "  --proc-micros N                 processing cost per record in stateful-map (0)",
            "  --hot-proc-micros N             extra cost per hot-key record (0)",
            "  --snapshot-sleep-ms MS          sleep in snapshotState (0)",
            "  --snapshot-sleep-every N        ... on checkpoints with id % N == 0 (3)",
            "  --snapshot-fail-every N         snapshotState throws (sync phase -> task fails, job restarts) on checkpoints with id % N == 0 (0 = never)",
            "  --snapshot-decline-every N      async phase of the operator-state snapshot fails on checkpoints with id % N == 0",
            "                                  (-> task declines the checkpoint, task keeps running) (0 = never)",
            "  --inject-subtask I              subtask that sleeps/throws (0; -1 = all)",
            "  --fail-after-s S                stateful-map throws once, S seconds after start, unless restored (0 = never)",
            "  --fail-after-complete B         ... and only within 200 ms after a checkpoint completed, so that no",
            "                                  checkpoint is in flight when it fails (false)",
            "  --restart-attempts N            fixed-delay restart attempts (5)",
            "  --restored-slow-ms MS           a restored stateful-map sleeps MS per record for its first",
            "                                  --restored-slow-records records (the in-flight data it replays) (0)",
            "  --restored-slow-records N       (200)",
            "  --restored-init-sleep-ms MS     a restored stateful-map sleeps MS in initializeState (stays INITIALIZING) (0)",
            "  --restart-delay-ms MS           fixed-delay restart delay (3000)",
            "  --state-backend NAME            hashmap|rocksdb (default: not set -> cluster default, hashmap)",
            "  --incremental true|false        incremental checkpoints (rocksdb only; default: not set)",
            "  --rocksdb-metrics true|false    rocksdb: turn on the native metrics the daemon reads (pending compaction",
            "                                  bytes, running compactions, memtables, block cache, live data) (false)",
            "  --block-ms MS                   blocked: a blocking-map vertex after stateful-map holds the task thread of",
            "                                  subtask --inject-subtask for MS (BlockingMap.holdTheThread) (0 = no blocking-map)",
            "  --block-after-s S               ... first hold S seconds after the first record (10)",
            "  --block-pause-ms MS             ... then runs MS between two holds (5000)",
            "  --gc-retain-pct P               gc: stateful-map subtasks together keep P % of the TaskManager's max heap",
            "                                  reachable (0 = off)",
            "  --gc-churn-mb N                 ... and replace N MiB/s per subtask of that retained data, so old objects",
            "                                  die and the old generation must be collected (0)",
            "  --backlog-s S                   the fast source reports that it processes backlog (FLIP-309,",
            "                                  SplitEnumeratorContext.setIsProcessingBacklog, 1.19+) for its first S seconds (0)",
            "  --interval-during-backlog-ms MS execution.checkpointing.interval-during-backlog, set in the job's configuration",
            "                                  and named in its global job parameters (unset)",
            "  --skew-keys F                   skew: fraction F of the distinct keys (and of the records) whose key group",
            "                                  belongs to stateful-map subtask 0 (0.0 = off; sets max parallelism 128)",
            "  --retain-on-cancel true|false   keep the completed checkpoints when the job is cancelled (false)",
            "  --union-grow-bytes N            metadata-growth: stateful-map's union list state grows N bytes per",
            "                                  checkpoint and subtask (0 = no union state)",
            "  --inline-threshold SIZE         state below SIZE is inlined into _metadata (Flink's default 20kb; at most 1mb)");
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (argv[i].equals("--help")) { System.out.println(usage()); return; }
            if (argv[i].startsWith("--") && i + 1 < argv.length) { a.put(argv[i].substring(2), argv[++i]); }
            else throw new IllegalArgumentException("bad argument " + argv[i] + "\n" + usage());
        }
        String name = a.getOrDefault("job-name", "sentinel-e2e");
        int par = Integer.parseInt(a.getOrDefault("parallelism", "2"));

        // Checkpoint settings as configuration keys: works across 1.20 .. 2.x, where the
        // CheckpointConfig/CheckpointingMode Java API moved or changed.
        Map<String, String> c = new HashMap<>();
        c.put("execution.checkpointing.interval", a.getOrDefault("interval-ms", "3000") + " ms");
        c.put("execution.checkpointing.mode", a.getOrDefault("mode", "EXACTLY_ONCE"));
        c.put("execution.checkpointing.timeout", a.getOrDefault("timeout-ms", "60000") + " ms");
        c.put("execution.checkpointing.min-pause", a.getOrDefault("min-pause-ms", "0") + " ms");
        c.put("execution.checkpointing.max-concurrent-checkpoints", a.getOrDefault("max-concurrent", "1"));
        c.put("execution.checkpointing.tolerable-failed-checkpoints", a.getOrDefault("tolerable", "100"));
        String ua = a.getOrDefault("unaligned", "false");
        c.put("execution.checkpointing.unaligned", ua);          // 1.x key
        c.put("execution.checkpointing.unaligned.enabled", ua);  // 1.20+/2.x key
        if (a.containsKey("aligned-timeout-ms")) {
            c.put("execution.checkpointing.aligned-checkpoint-timeout", a.get("aligned-timeout-ms") + " ms");
        }
        if (Boolean.parseBoolean(a.getOrDefault("during-recovery", "false"))) {
            // FLIP-547 (2.3): a checkpoint may complete while subtasks still recover their in-flight
            // data. Flink 2.3.0 gates it on both keys (CheckpointingOptions#isCheckpointingDuringRecoveryEnabled);
            // only the unaligned barrier handler takes such checkpoints (FLINK-40518), so pair it with --unaligned.
            c.put("execution.checkpointing.unaligned.recover-output-on-downstream.enabled", "true");
            c.put("execution.checkpointing.during-recovery.enabled", "true");
        }
        c.put("restart-strategy", "fixed-delay");                // 1.x key
        c.put("restart-strategy.type", "fixed-delay");           // 1.17+/2.x key
        c.put("restart-strategy.fixed-delay.attempts", a.getOrDefault("restart-attempts", "5"));
        c.put("restart-strategy.fixed-delay.delay", a.getOrDefault("restart-delay-ms", "3000") + " ms");
        if (a.containsKey("state-backend")) {
            c.put("state.backend", a.get("state-backend"));        // 1.x key
            c.put("state.backend.type", a.get("state-backend"));   // 1.17+/2.x key
        }
        if (a.containsKey("incremental")) c.put("state.backend.incremental", a.get("incremental"));
        if (Boolean.parseBoolean(a.getOrDefault("rocksdb-metrics", "false"))) {
            for (String m : new String[] {"estimate-pending-compaction-bytes", "num-running-compactions",
                    "size-all-mem-tables", "block-cache-usage", "estimate-live-data-size"}) {
                c.put("state.backend.rocksdb.metrics." + m, "true");
            }
        }
        if (Boolean.parseBoolean(a.getOrDefault("retain-on-cancel", "false"))) {
            c.put("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
        }
        if (a.containsKey("inline-threshold")) {
            c.put("execution.checkpointing.data-inline-threshold", a.get("inline-threshold")); // 2.x key
            c.put("state.storage.fs.memory-threshold", a.get("inline-threshold"));             // 1.x key
        }
        if (a.containsKey("interval-during-backlog-ms")) {
            String backlog = a.get("interval-during-backlog-ms") + " ms";
            c.put("execution.checkpointing.interval-during-backlog", backlog);
            // Also as a global job parameter: /jobs/:id/config shows those, not the job's configuration.
            c.put("pipeline.global-job-parameters", "execution.checkpointing.interval-during-backlog:" + backlog);
        }
        c.put("pipeline.name", name);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(Configuration.fromMap(c));
        env.setParallelism(par);
        if (a.containsKey("skew-keys")) env.setMaxParallelism(SKEW_MAX_PARALLELISM);

        Params p = new Params(a);
        long backlogS = Long.parseLong(a.getOrDefault("backlog-s", "0"));
        org.apache.flink.streaming.api.datastream.DataStreamSource<Long> fast = backlogS > 0
                ? env.fromSource(new BacklogSource(backlogS * 1000), WatermarkStrategy.noWatermarks(), "fast-source")
                : env.fromSequence(0, Long.MAX_VALUE);
        DataStream<Ev> in = fast.name("fast-source").uid("fast-source")
                .map(new Throttle(p.rate, p, 0)).name("fast-throttle").uid("fast-throttle");
        if (p.slowRate > 0) {
            DataStream<Ev> slow = env.fromSequence(0, Long.MAX_VALUE).name("slow-source").uid("slow-source")
                    .map(new Throttle(p.slowRate, p, 1)).name("slow-throttle").uid("slow-throttle");
            in = in.union(slow);
        }
        DataStream<Ev> out = in.keyBy(new KeyOf()).map(new StatefulMap(p)).name("stateful-map").uid("stateful-map");
        if (p.blockMs > 0) {
            out = out.map(new BlockingMap(p)).name("blocking-map").uid("blocking-map").disableChaining();
        }
        discard(out).name("discarding-sink").uid("discarding-sink").disableChaining();
        LOG.info("sentinel-e2e: submitting job '{}' with checkpoint config {} and params {}", name, c, a);
        env.execute(name);
    }

    /**
     * backlog: Flink's NumberSequenceSource whose split enumerator reports that the source
     * processes backlog (FLIP-309: SplitEnumeratorContext#setIsProcessingBacklog, 1.19+, as
     * HybridSource and CDC sources do during their snapshot phase) from its start for backlogMs,
     * then that it caught up. Called by reflection so that the file compiles against older Flink.
     */
    public static final class BacklogSource
            implements Source<Long, NumberSequenceSplit, java.util.Collection<NumberSequenceSplit>>,
                    ResultTypeQueryable<Long> {
        final NumberSequenceSource inner = new NumberSequenceSource(0, Long.MAX_VALUE);
        final long backlogMs;
        BacklogSource(long backlogMs) { this.backlogMs = backlogMs; }
        @Override public Boundedness getBoundedness() { return inner.getBoundedness(); }
        @Override public SourceReader<Long, NumberSequenceSplit> createReader(SourceReaderContext ctx) { return inner.createReader(ctx); }
        @Override public SplitEnumerator<NumberSequenceSplit, java.util.Collection<NumberSequenceSplit>> createEnumerator(
                SplitEnumeratorContext<NumberSequenceSplit> ctx) {
            return new BacklogEnumerator(inner.createEnumerator(ctx), ctx, backlogMs);
        }
        @Override public SplitEnumerator<NumberSequenceSplit, java.util.Collection<NumberSequenceSplit>> restoreEnumerator(
                SplitEnumeratorContext<NumberSequenceSplit> ctx, java.util.Collection<NumberSequenceSplit> checkpoint) {
            return inner.restoreEnumerator(ctx, checkpoint); // a restored source has caught up
        }
        @Override public SimpleVersionedSerializer<NumberSequenceSplit> getSplitSerializer() { return inner.getSplitSerializer(); }
        @Override public SimpleVersionedSerializer<java.util.Collection<NumberSequenceSplit>> getEnumeratorCheckpointSerializer() {
            return inner.getEnumeratorCheckpointSerializer();
        }
        @Override public TypeInformation<Long> getProducedType() { return inner.getProducedType(); }
    }

    static final class BacklogEnumerator implements SplitEnumerator<NumberSequenceSplit, java.util.Collection<NumberSequenceSplit>> {
        final SplitEnumerator<NumberSequenceSplit, java.util.Collection<NumberSequenceSplit>> inner;
        final SplitEnumeratorContext<NumberSequenceSplit> ctx;
        final long backlogMs;
        BacklogEnumerator(SplitEnumerator<NumberSequenceSplit, java.util.Collection<NumberSequenceSplit>> inner,
                SplitEnumeratorContext<NumberSequenceSplit> ctx, long backlogMs) {
            this.inner = inner; this.ctx = ctx; this.backlogMs = backlogMs;
        }
        void report(boolean backlog) {
            try {
                SplitEnumeratorContext.class.getMethod("setIsProcessingBacklog", boolean.class).invoke(ctx, backlog);
                LOG.info("sentinel-e2e: the source reports isProcessingBacklog={}", backlog);
            } catch (ReflectiveOperationException e) {
                LOG.warn("sentinel-e2e: this Flink has no SplitEnumeratorContext#setIsProcessingBacklog (1.19+)", e);
            }
        }
        @Override public void start() {
            inner.start();
            report(true);
            Thread t = new Thread(() -> {
                try { Thread.sleep(backlogMs); } catch (InterruptedException e) { return; }
                ctx.runInCoordinatorThread(() -> report(false));
            }, "sentinel-e2e-backlog-end");
            t.setDaemon(true);
            t.start();
        }
        @Override public void handleSplitRequest(int subtask, String host) { inner.handleSplitRequest(subtask, host); }
        @Override public void addSplitsBack(java.util.List<NumberSequenceSplit> splits, int subtask) { inner.addSplitsBack(splits, subtask); }
        @Override public void addReader(int subtask) { inner.addReader(subtask); }
        @Override public java.util.Collection<NumberSequenceSplit> snapshotState(long checkpointId) throws Exception { return inner.snapshotState(checkpointId); }
        @Override public void close() throws java.io.IOException { inner.close(); }
        @Override public void notifyCheckpointComplete(long checkpointId) throws Exception { inner.notifyCheckpointComplete(checkpointId); }
    }

    /** DiscardingSink: Sink V2 class in 1.18+/2.x, legacy SinkFunction before (fallback kept for older versions). */
    @SuppressWarnings("unchecked")
    static DataStreamSink<Ev> discard(DataStream<Ev> s) throws Exception {
        try {
            Class<?> v2 = Class.forName("org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink");
            Method m = DataStream.class.getMethod("sinkTo", Class.forName("org.apache.flink.api.connector.sink2.Sink"));
            return (DataStreamSink<Ev>) m.invoke(s, v2.getConstructor().newInstance());
        } catch (ClassNotFoundException e) {
            Class<?> legacy = Class.forName("org.apache.flink.streaming.api.functions.sink.DiscardingSink");
            Method m = DataStream.class.getMethod("addSink", Class.forName("org.apache.flink.streaming.api.functions.sink.SinkFunction"));
            return (DataStreamSink<Ev>) m.invoke(s, legacy.getConstructor().newInstance());
        }
    }

    /** RuntimeContext#getIndexOfThisSubtask / getAttemptNumber were removed in 2.0 (-> getTaskInfo()). */
    static int taskInfo(RuntimeContext rc, String what) {
        try {
            Object ti = RuntimeContext.class.getMethod("getTaskInfo").invoke(rc);
            return (Integer) Class.forName("org.apache.flink.api.common.TaskInfo").getMethod(what).invoke(ti);
        } catch (Exception e) {
            try { return (Integer) RuntimeContext.class.getMethod(what).invoke(rc); }
            catch (Exception e2) { return -1; }
        }
    }

    static final int SKEW_MAX_PARALLELISM = 128;

    static final class Params implements java.io.Serializable {
        final long rate, slowRate, procMicros, hotProcMicros, snapSleepMs, failAfterS;
        final int payload, maxKeys, snapSleepEvery, snapFailEvery, snapDeclineEvery, injectSubtask;
        final double skew;
        final int parallelism;
        final long blockMs, blockAfterS, blockPauseMs;
        final double gcRetainPct, gcChurnMb, skewKeys;
        final int unionGrowBytes;
        final long restoredSlowMs, restoredSlowRecords, restoredInitSleepMs;
        final boolean failAfterComplete;
        Params(Map<String, String> a) {
            failAfterComplete = Boolean.parseBoolean(a.getOrDefault("fail-after-complete", "false"));
            restoredInitSleepMs = Long.parseLong(a.getOrDefault("restored-init-sleep-ms", "0"));
            restoredSlowMs = Long.parseLong(a.getOrDefault("restored-slow-ms", "0"));
            restoredSlowRecords = Long.parseLong(a.getOrDefault("restored-slow-records", "200"));
            unionGrowBytes = Integer.parseInt(a.getOrDefault("union-grow-bytes", "0"));
            parallelism = Integer.parseInt(a.getOrDefault("parallelism", "2"));
            blockMs = Long.parseLong(a.getOrDefault("block-ms", "0"));
            blockAfterS = Long.parseLong(a.getOrDefault("block-after-s", "10"));
            blockPauseMs = Long.parseLong(a.getOrDefault("block-pause-ms", "5000"));
            gcRetainPct = Double.parseDouble(a.getOrDefault("gc-retain-pct", "0"));
            gcChurnMb = Double.parseDouble(a.getOrDefault("gc-churn-mb", "0"));
            skewKeys = Double.parseDouble(a.getOrDefault("skew-keys", "0"));
            rate = Long.parseLong(a.getOrDefault("rate", "500"));
            slowRate = Long.parseLong(a.getOrDefault("slow-rate", "0"));
            payload = Integer.parseInt(a.getOrDefault("payload-bytes", "64"));
            maxKeys = Integer.parseInt(a.getOrDefault("max-keys", "20000"));
            skew = Double.parseDouble(a.getOrDefault("skew", "0.0"));
            procMicros = Long.parseLong(a.getOrDefault("proc-micros", "0"));
            hotProcMicros = Long.parseLong(a.getOrDefault("hot-proc-micros", "0"));
            snapSleepMs = Long.parseLong(a.getOrDefault("snapshot-sleep-ms", "0"));
            snapSleepEvery = Integer.parseInt(a.getOrDefault("snapshot-sleep-every", "3"));
            snapFailEvery = Integer.parseInt(a.getOrDefault("snapshot-fail-every", "0"));
            snapDeclineEvery = Integer.parseInt(a.getOrDefault("snapshot-decline-every", "0"));
            injectSubtask = Integer.parseInt(a.getOrDefault("inject-subtask", "0"));
            failAfterS = Long.parseLong(a.getOrDefault("fail-after-s", "0"));
        }
    }

    /** Turns the sequence into events at a bounded rate (sleeping backs up into the source). */
    public static final class Throttle extends RichMapFunction<Long, Ev> {
        final long rate; final Params p; final int stream;
        transient long start, n; transient String pad; transient java.util.Random rnd;
        transient long[] hotKeys, coldKeys;
        Throttle(long rate, Params p, int stream) { this.rate = rate; this.p = p; this.stream = stream; }
        @Override public Ev map(Long ignored) throws Exception {
            if (pad == null) {
                StringBuilder sb = new StringBuilder();
                while (sb.length() < p.payload) sb.append("sentinel-e2e-").append(stream);
                pad = sb.substring(0, p.payload); start = System.nanoTime(); rnd = new java.util.Random();
            }
            n++;
            if (rate > 0) {
                long due = start + n * 1_000_000_000L / rate;
                long now = System.nanoTime();
                if (due > now + 200_000) LockSupport.parkNanos(due - now);
            }
            if (p.skewKeys > 0) return new Ev(skewedKey(), n, pad);
            long space = Math.min(p.maxKeys, 100 + n / 20);
            long key = (p.skew > 0 && rnd.nextDouble() < p.skew) ? 0L : 1 + (n * 7919 + stream) % space;
            return new Ev(key, n, pad);
        }

        /** skew: keys 1..max-keys whose key group Flink assigns to stateful-map subtask 0 ("hot"),
         *  and only as many of the others as make the hot ones a fraction skew-keys of all distinct keys. */
        long skewedKey() {
            if (hotKeys == null) {
                java.util.List<Long> hot = new java.util.ArrayList<>(), cold = new java.util.ArrayList<>();
                for (long k = 1; k <= p.maxKeys; k++) {
                    int op = org.apache.flink.runtime.state.KeyGroupRangeAssignment.assignKeyToParallelOperator(
                            k, SKEW_MAX_PARALLELISM, p.parallelism);
                    (op == 0 ? hot : cold).add(k);
                }
                int coldWanted = (int) Math.max(1, Math.round(hot.size() * (1 - p.skewKeys) / p.skewKeys));
                hotKeys = hot.stream().mapToLong(Long::longValue).toArray();
                coldKeys = cold.stream().limit(coldWanted).mapToLong(Long::longValue).toArray();
            }
            long i = n * 7919 + stream;
            return rnd.nextDouble() < p.skewKeys ? hotKeys[(int) (i % hotKeys.length)] : coldKeys[(int) (i % coldKeys.length)];
        }
    }

    /** Long serializer that throws when asked to write POISON: used in the ASYNC part of the
     *  operator-state snapshot, so the task declines the checkpoint instead of failing. */
    public static final class PoisonLongSerializer extends org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton<Long> {
        static final long POISON = Long.MIN_VALUE;
        @Override public boolean isImmutableType() { return true; }
        @Override public Long createInstance() { return 0L; }
        @Override public Long copy(Long from) { return from; }
        @Override public Long copy(Long from, Long reuse) { return from; }
        @Override public int getLength() { return 8; }
        @Override public void serialize(Long v, org.apache.flink.core.memory.DataOutputView out) throws java.io.IOException {
            if (v == POISON) throw new java.io.IOException("sentinel-e2e injected failure while writing operator state (async snapshot phase)");
            out.writeLong(v);
        }
        @Override public Long deserialize(org.apache.flink.core.memory.DataInputView in) throws java.io.IOException { return in.readLong(); }
        @Override public Long deserialize(Long reuse, org.apache.flink.core.memory.DataInputView in) throws java.io.IOException { return in.readLong(); }
        @Override public void copy(org.apache.flink.core.memory.DataInputView in, org.apache.flink.core.memory.DataOutputView out) throws java.io.IOException { out.writeLong(in.readLong()); }
        @Override public org.apache.flink.api.common.typeutils.TypeSerializerSnapshot<Long> snapshotConfiguration() { return new Snap(); }
        public static final class Snap extends org.apache.flink.api.common.typeutils.SimpleTypeSerializerSnapshot<Long> {
            public Snap() { super(PoisonLongSerializer::new); }
        }
    }

    public static final class KeyOf implements KeySelector<Ev, Long> {
        @Override public Long getKey(Ev e) { return e.f0; }
    }

    /** Keyed state per key (count + last payload); operator state + failure/slowness injection. */
    public static final class StatefulMap extends RichMapFunction<Ev, Ev>
            implements CheckpointedFunction, org.apache.flink.api.common.state.CheckpointListener {
        final Params p;
        transient ValueState<Long> count; transient ValueState<String> last;
        transient ListState<Long> processedState, poisonState; transient long processed; transient boolean restored;
        transient ListState<String> unionState; transient java.util.List<String> grown;
        transient long startNanos, debtNanos, processedSinceRestore; transient Integer subtask; // transient: null after deserialization
        transient long lastCompleteNanos; // when the latest checkpoint completed (the task thread's notification)
        transient GarbageMaker garbage;
        StatefulMap(Params p) { this.p = p; }

        @Override public void initializeState(FunctionInitializationContext ctx) throws Exception {
            processedState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("processed", Long.class));
            poisonState = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("poison", new PoisonLongSerializer()));
            restored = ctx.isRestored();
            for (Long v : processedState.get()) processed += v;
            if (p.unionGrowBytes > 0) {
                unionState = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>("grow", String.class));
                grown = new java.util.ArrayList<>();
            }
            LOG.info("sentinel-e2e: stateful-map initializeState restored={} processedSoFar={}", restored, processed);
            if (restored && p.restoredInitSleepMs > 0) {
                LOG.info("sentinel-e2e: restored stateful-map sleeps {} ms in initializeState", p.restoredInitSleepMs);
                Thread.sleep(p.restoredInitSleepMs);
            }
        }

        @Override public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            long id = ctx.getCheckpointId();
            int st = sub();
            boolean me = p.injectSubtask < 0 || p.injectSubtask == st;
            if (p.snapFailEvery > 0 && id % p.snapFailEvery == 0 && me) {
                LOG.warn("sentinel-e2e: injecting snapshotState failure for checkpoint {} on subtask {}", id, st);
                throw new Exception("sentinel-e2e injected snapshot failure for checkpoint " + id + " on subtask " + st);
            }
            if (p.snapSleepMs > 0 && id % p.snapSleepEvery == 0 && me) {
                LOG.warn("sentinel-e2e: sleeping {} ms in snapshotState for checkpoint {} on subtask {}", p.snapSleepMs, id, st);
                Thread.sleep(p.snapSleepMs);
            }
            processedState.update(java.util.Collections.singletonList(processed));
            if (unionState != null) {
                // metadata-growth: the union list state gains N bytes per checkpoint (inlined into
                // _metadata below the inline threshold), as union state does in real jobs.
                char[] chunk = new char[p.unionGrowBytes];
                java.util.Arrays.fill(chunk, (char) ('a' + (int) (id % 26)));
                grown.add(new String(chunk));
                unionState.update(grown);
            }
            boolean poison = p.snapDeclineEvery > 0 && id % p.snapDeclineEvery == 0 && me;
            if (poison) LOG.warn("sentinel-e2e: poisoning operator state so the async snapshot of checkpoint {} fails on subtask {}", id, st);
            poisonState.update(java.util.Collections.singletonList(poison ? PoisonLongSerializer.POISON : id));
        }

        @Override public void notifyCheckpointComplete(long checkpointId) { lastCompleteNanos = System.nanoTime(); }

        int sub() { if (subtask == null) subtask = taskInfo(getRuntimeContext(), "getIndexOfThisSubtask"); return subtask; }

        @Override public Ev map(Ev e) throws Exception {
            if (count == null) {
                count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Long.class));
                last = getRuntimeContext().getState(new ValueStateDescriptor<>("last", String.class));
                startNanos = System.nanoTime();
            }
            processed++;
            if (p.gcRetainPct > 0) {
                if (garbage == null) garbage = new GarbageMaker(p);
                garbage.churn();
            }
            if (p.failAfterS > 0 && !restored && sub() == 0
                    && System.nanoTime() - startNanos > p.failAfterS * 1_000_000_000L
                    && (!p.failAfterComplete
                        || (lastCompleteNanos != 0 && System.nanoTime() - lastCompleteNanos < 200_000_000L))) {
                LOG.warn("sentinel-e2e: injecting processing failure after {} records", processed);
                throw new RuntimeException("sentinel-e2e injected failure in stateful-map after " + processed + " records");
            }
            if (restored && p.restoredSlowMs > 0 && processedSinceRestore < p.restoredSlowRecords) {
                // recovery-checkpoint: the restored attempt replays its first records (the
                // in-flight data of the unaligned checkpoint it restored) slowly.
                Thread.sleep(p.restoredSlowMs);
                if (++processedSinceRestore == p.restoredSlowRecords) {
                    LOG.info("sentinel-e2e: restored stateful-map subtask {} replayed its first {} records at epoch ms {}",
                            sub(), processedSinceRestore, System.currentTimeMillis());
                }
            }
            long cost = p.procMicros + (e.f0 == 0L ? p.hotProcMicros : 0);
            if (cost > 0) {
                debtNanos += cost * 1000;
                if (debtNanos >= 1_000_000) { LockSupport.parkNanos(debtNanos); debtNanos = 0; }
            }
            Long c = count.value();
            count.update(c == null ? 1L : c + 1);
            last.update(e.f2);
            return e;
        }
    }

    /** blocked: stands for user code that waits on something slow (a remote call, a lock) on the task
     *  thread. While it holds the thread, the checkpoint barrier waits behind the record in hand, so
     *  the checkpoint stays pending on this subtask until it expires; a thread dump of the
     *  TaskManager shows holdTheThread as the first frame outside Flink and the JDK. */
    public static final class BlockingMap extends RichMapFunction<Ev, Ev> {
        final Params p;
        transient long nextHoldNanos; transient Integer subtask;
        BlockingMap(Params p) { this.p = p; }

        @Override public Ev map(Ev e) throws Exception {
            if (subtask == null) {
                subtask = taskInfo(getRuntimeContext(), "getIndexOfThisSubtask");
                nextHoldNanos = System.nanoTime() + p.blockAfterS * 1_000_000_000L;
            }
            boolean me = p.injectSubtask < 0 || p.injectSubtask == subtask;
            if (me && System.nanoTime() >= nextHoldNanos) {
                LOG.warn("sentinel-e2e: blocking-map subtask {} holds the task thread for {} ms", subtask, p.blockMs);
                holdTheThread(p.blockMs);
                nextHoldNanos = System.nanoTime() + p.blockPauseMs * 1_000_000L;
            }
            return e;
        }

        void holdTheThread(long ms) throws InterruptedException {
            Thread.sleep(ms); // interrupted (and so released) when Flink cancels the task
        }
    }

    /** gc: keeps a share of the JVM's max heap reachable (split over the stateful-map subtasks) and
     *  keeps replacing random pieces of it, so old objects die in the old generation and the
     *  collector has to run mixed/full collections over a nearly full heap. Held by the function
     *  instance, so it becomes garbage when the job is cancelled. */
    static final class GarbageMaker {
        static final int CHUNK = 16 * 1024; // below G1's humongous threshold for small heaps
        final byte[][] retained;
        final double churnBytesPerNano;
        final java.util.Random rnd = new java.util.Random(42);
        int filled; long lastNanos = System.nanoTime(); double churnDebt;

        GarbageMaker(Params p) {
            long target = (long) (Runtime.getRuntime().maxMemory() * p.gcRetainPct / 100 / Math.max(1, p.parallelism));
            retained = new byte[(int) Math.max(1, target / CHUNK)][];
            churnBytesPerNano = p.gcChurnMb * 1024 * 1024 / 1e9;
            LOG.info("sentinel-e2e: gc pressure: retaining {} MiB in this subtask (max heap {} MiB), churn {} MiB/s",
                    target >> 20, Runtime.getRuntime().maxMemory() >> 20, p.gcChurnMb);
        }

        void churn() {
            // fill up to 4 MiB per record, so the retained set builds up over a few seconds
            for (int i = 0; i < 256 && filled < retained.length; i++) retained[filled++] = new byte[CHUNK];
            long now = System.nanoTime();
            churnDebt += (now - lastNanos) * churnBytesPerNano;
            lastNanos = now;
            while (churnDebt >= CHUNK && filled > 0) {
                retained[rnd.nextInt(filled)] = new byte[CHUNK];
                churnDebt -= CHUNK;
            }
        }
    }
}
