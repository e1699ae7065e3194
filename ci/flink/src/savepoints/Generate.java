package savepoints;

import golden.Json;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * Runs the matrix job of one spec on a local MiniCluster and takes a canonical savepoint of it.
 *
 * <p>The job reads {@code keys * records_per_key} sequence numbers from an {@link IdleSequenceSource}
 * (parallelism 1, so every key sees its records in order and the result is deterministic), updates
 * the spec's states per record and registers one event-time timer per record (no watermarks, so
 * none fires). Once the operator has processed every record the generator stops the job with a
 * CANONICAL savepoint, moves it to {@code OUT/savepoint} and writes {@code OUT/expected.json}:
 * the value of every state of every key as the job itself last wrote it (the MiniCluster runs in
 * this JVM, so the operator reports into a static map).
 */
final class Generate {
    private Generate() {}

    static final AtomicLong PROCESSED = new AtomicLong();
    /** key (as JSON) -> state -> value, as the job left it. */
    static final Map<String, Map<String, Object>> WRITTEN = new ConcurrentHashMap<>();
    static final Map<String, List<Long>> TIMERS = new ConcurrentHashMap<>();

    static void run(Spec spec, Path out, Path work) throws Exception {
        PROCESSED.set(0);
        WRITTEN.clear();
        TIMERS.clear();
        savepointAfterAll(spec, new Fn(spec), out, work);
        writeExpected(spec.name, Entries.sorted(WRITTEN, TIMERS, spec), out);
    }

    /**
     * Runs {@code fn} as the stateful operator over every record of the spec (the function bumps
     * {@link #PROCESSED} per record) and stops the job with a canonical savepoint in {@code OUT/savepoint}.
     */
    static void savepointAfterAll(Spec spec, KeyedProcessFunction<Object, Long, String> fn, Path out, Path work)
            throws Exception {
        savepointAfterAll(spec, records -> Job.stateful(spec, records, fn), out, work);
    }

    /** The same with {@code operator} as the stateful operator (one that keeps more than its function can). */
    static void savepointAfterAll(Spec spec, org.apache.flink.streaming.api.operators.OneInputStreamOperator<Long, String>
            operator, Path out, Path work) throws Exception {
        savepointAfterAll(spec, records -> Job.stateful(spec, records, operator), out, work);
    }

    private static void savepointAfterAll(Spec spec, java.util.function.Consumer<DataStream<Long>> stateful, Path out,
            Path work) throws Exception {
        StreamExecutionEnvironment env = Job.env(Job.config(spec, work), spec);
        DataStream<Long> records = env.fromSource(
                        new IdleSequenceSource(0, spec.totalRecords() - 1), WatermarkStrategy.noWatermarks(), "records")
                .uid("records")
                .setParallelism(1);
        stateful.accept(records);
        if (spec.extraUid != null) {
            records.map(new Tally()).uid(spec.extraUid).name("tally").setParallelism(1)
                    .sinkTo(new DiscardingSink<>()).setParallelism(1);
        }
        JobClient client = env.executeAsync("generate " + spec.name);
        awaitCount(client, PROCESSED, spec.totalRecords());
        if (spec.format.equals("checkpoint")) {
            retainCheckpoint(client, out, work);
        } else {
            stopWithSavepoint(client, out, work, savepointFormat(spec));
        }
    }

    /**
     * Waits for a completed checkpoint triggered after the last record was processed (a {@code chk-N}
     * directory is made when checkpoint N starts, so one numbered above every directory present now),
     * then two more (so the retained ones share files), cancels the job and moves its checkpoint
     * directory ({@code chk-N}, {@code shared}, {@code taskowned}) to {@code OUT/savepoint}.
     */
    static void retainCheckpoint(JobClient client, Path out, Path work) throws Exception {
        Path root = work.resolve("checkpoints").resolve(client.getJobID().toString());
        long after = lastCheckpoint(root, false);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (lastCheckpoint(root, true) < after + 3) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out waiting for checkpoint " + (after + 3) + " in " + root);
            }
            Thread.sleep(20);
        }
        client.cancel().get(120, TimeUnit.SECONDS);
        try {
            client.getJobExecutionResult().get(120, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException expected) {
            // a cancelled job ends with a JobCancellationException
        }
        Files.createDirectories(out);
        Files.move(root, out.resolve("savepoint"));
    }

    /** The highest N of a {@code chk-N} directory under {@code root} (with a {@code _metadata} when {@code complete}); 0: none. */
    private static long lastCheckpoint(Path root, boolean complete) throws java.io.IOException {
        if (!Files.isDirectory(root)) {
            return 0;
        }
        long max = 0;
        try (Stream<Path> dirs = Files.list(root)) {
            for (Path d : (Iterable<Path>) dirs::iterator) {
                String n = d.getFileName().toString();
                if (n.startsWith("chk-") && (!complete || Files.exists(d.resolve("_metadata")))) {
                    max = Math.max(max, Long.parseLong(n.substring(4)));
                }
            }
        }
        return max;
    }

    /** Waits until {@code counter} reaches {@code target}; a job that ends first throws its failure. */
    static void awaitCount(JobClient client, AtomicLong counter, long target) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120 + target / 20_000);
        while (counter.get() < target) {
            JobStatus st = client.getJobStatus().get();
            if (st.isGloballyTerminalState()) {
                client.getJobExecutionResult().get(); // throws the job's failure
                throw new IllegalStateException("job ended before processing every record: " + st);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out: processed " + counter.get() + " of " + target);
            }
            Thread.sleep(20);
        }
    }

    /** The savepoint format a spec asks for ({@code canonical} or {@code native}); jobs without retained checkpoints refuse {@code checkpoint}. */
    static SavepointFormatType savepointFormat(Spec spec) {
        if (spec.format.equals("checkpoint")) {
            throw new IllegalArgumentException("spec: this job takes savepoints only (format canonical or native)");
        }
        return spec.format.equals("native") ? SavepointFormatType.NATIVE : SavepointFormatType.CANONICAL;
    }

    /** Stops the running job with a CANONICAL savepoint and moves it to {@code OUT/savepoint}. */
    static void stopWithSavepoint(JobClient client, Path out, Path work) throws Exception {
        stopWithSavepoint(client, out, work, SavepointFormatType.CANONICAL);
    }

    /**
     * Stops the running job with a savepoint of {@code format} and moves it to {@code OUT/savepoint};
     * retried while Flink refuses it because a task is still being deployed (the rows fit the network
     * buffers, so the source side may have taken every record while a stateful task, e.g. a RocksDB
     * aggregation at parallelism 2, is still starting).
     */
    static void stopWithSavepoint(JobClient client, Path out, Path work, SavepointFormatType format) throws Exception {
        Path target = work.resolve("savepoints");
        String written;
        for (int attempt = 0; ; attempt++) {
            try {
                written = client.stopWithSavepoint(false, target.toUri().toString(), format)
                        .get(1800, TimeUnit.SECONDS);
                break;
            } catch (java.util.concurrent.ExecutionException e) {
                if (attempt >= 100 || !String.valueOf(e.getMessage()).contains("Not all required tasks are currently running")) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
        client.getJobExecutionResult().get(120, TimeUnit.SECONDS);
        Path sp = Path.of(java.net.URI.create(written.startsWith("file:") ? written : "file:" + written));
        Files.createDirectories(out);
        Files.move(sp, out.resolve("savepoint"));
    }

    /** Writes {@code OUT/expected.json}: the case name and its entries, one a line. */
    static void writeExpected(String name, List<Map<String, Object>> entries, Path out) throws java.io.IOException {
        StringBuilder b = new StringBuilder();
        b.append("{\"name\": ");
        Json.write(name, b);
        b.append(", \"entries\": [\n");
        for (int k = 0; k < entries.size(); k++) {
            b.append("  ");
            Json.write(entries.get(k), b);
            b.append(k + 1 < entries.size() ? ",\n" : "\n");
        }
        b.append("]}\n");
        Files.write(out.resolve("expected.json"), b.toString().getBytes(StandardCharsets.UTF_8));
    }

    static final class Fn extends StatefulFn {
        private static final long serialVersionUID = 1L;

        Fn(Spec spec) {
            super(spec);
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            states.update(j, spec.keyIndex(j));
            String key = Json.write(Spec.keyJson(ctx.getCurrentKey()));
            WRITTEN.put(key, states.read());
            if (spec.has("timers")) {
                ctx.timerService().registerEventTimeTimer(StateSet.timerOf(j));
                TIMERS.computeIfAbsent(key, x -> new ArrayList<>()).add(StateSet.timerOf(j));
            }
            PROCESSED.incrementAndGet();
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) {
            throw new IllegalStateException("no timer may fire before the savepoint (fired " + ts + ")");
        }
    }

    /**
     * The spec's {@code extra_uid} operator: counts the records in an operator (list) state, so the
     * savepoint holds an operator the checker's job does not have.
     */
    static final class Tally implements MapFunction<Long, Long>, CheckpointedFunction {
        private static final long serialVersionUID = 1L;
        private transient ListState<Long> tally;
        private long seen;

        @Override
        public Long map(Long j) {
            seen++;
            return j;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            tally.update(java.util.Collections.singletonList(seen));
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            tally = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>("tally", Types.LONG));
        }
    }

    /**
     * Deletes a job's work directory, best effort: the MiniCluster may still be removing its own
     * files when the job has ended, and whatever is left goes with the caller's temporary directory.
     */
    static void deleteTree(Path p) {
        if (!Files.exists(p)) {
            return;
        }
        try (Stream<Path> s = Files.walk(p)) {
            s.sorted(java.util.Comparator.reverseOrder()).forEach(x -> x.toFile().delete());
        } catch (java.io.IOException | java.io.UncheckedIOException e) {
            System.err.println("note: could not remove all of " + p + ": " + e);
        }
    }
}
