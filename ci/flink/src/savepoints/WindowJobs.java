package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.GlobalWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.triggers.CountTrigger;
import org.apache.flink.streaming.api.windowing.triggers.EventTimeTrigger;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.triggers.TriggerResult;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.streaming.api.windowing.windows.Window;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

import savepoints.pojo.WindowTotals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Savepoints of a DataStream job with open windows, and restores that fire them.
 *
 * <pre>
 *   WindowJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   WindowJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 *   WindowJobs vectors  WORK OUT.json
 * </pre>
 *
 * <p>Three window operators read the matrix's records (record {@code j} is key index {@code j %
 * keys}, event time {@link #T0}{@code + j}), keyed by the spec's key, with the spec's backend,
 * parallelism and max parallelism:
 * <ul>
 *   <li>{@code tumble}: one-minute tumbling event-time windows with an {@code AggregateFunction}
 *   whose accumulator is the POJO {@link WindowTotals} (state {@code window-contents}, aggregating,
 *   in the {@code TimeWindow} namespace, and an event-time timer per window);
 *   <li>{@code session}: event-time session windows (gap ten minutes) summing the records with a
 *   reduce function ({@code window-contents}, reducing, and the session's merging-window set,
 *   {@code merging-window-set}, a {@code ListState<Tuple2<TimeWindow, TimeWindow>>});
 *   <li>{@code count}: {@code GlobalWindows} with a {@code CountTrigger} of {@code records_per_key
 *   + 1} and a process function ({@code window-contents}, list, and the trigger's {@code count}
 *   reducing state, both in the {@code GlobalWindow} namespace).
 * </ul>
 * No watermark is emitted before the savepoint and every count stays below the trigger's, so no
 * window fires there (a fired window fails the generator). The restore's probe sends one more
 * record per key (event time inside every window) and ends: the count windows fire on that record
 * and the final watermark fires the time windows, each with everything restored plus the probe.
 * With the spec's {@code window_probe_keys} the probe reaches only that many keys: the others'
 * time windows fire from their restored timers alone (what a bootstrapped savepoint's timers must do).
 * {@code generate} writes {@code expected.json}: those fired windows, computed from the records.
 * Each line is {@code {"key", "state": operator, "value"}}; a POJO is rendered by its public fields
 * (whichever {@link WindowTotals} is on the class path: version 2 adds {@code max}).
 *
 * <p>{@code vectors} writes what Flink's window serializers write, for the namespaces no job here
 * takes a savepoint of (Flink SQL's {@code TimeWindow} and {@code CountWindow}) and for the
 * DataStream ones: per serializer, {@code getLength()}, the versioned snapshot bytes and the bytes of
 * a few windows, all in hex.
 */
public final class WindowJobs {
    private WindowJobs() {}

    /** Event time of record 0: a minute boundary, so every record of a small spec shares one tumbling window. */
    static final long T0 = 1_700_000_040_000L;
    static final long MINUTE = 60_000L;
    static final long GAP = 600_000L;
    static final List<String> OPERATORS = List.of("count", "session", "tumble");
    static final AtomicLong PROCESSED = new AtomicLong();
    static volatile boolean generating;

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        Path work = Path.of(args[1]);
        int failed = 0;
        if (Batch.is(args, "generate", 2)) {
            Batch.generate(args, work, (spec, out, w) -> generate(Spec.read(spec), out, w));
        } else if (Batch.is(args, "restore", 3)) {
            failed = Batch.restore(args, work, (sp, spec, out, w) -> restore(sp, Spec.read(spec), probeKeys(spec), out, w));
        } else if (args[0].equals("vectors") && args.length == 3) {
            vectors(Path.of(args[2]));
        } else {
            usage();
        }
        System.exit(failed == 0 ? 0 : 3);
    }

    private static void usage() {
        Batch.usage("WindowJobs", "\n       WindowJobs vectors WORK OUT.json");
    }

    static void generate(Spec spec, Path out, Path work) throws Exception {
        if (spec.totalRecords() + spec.keys >= MINUTE) {
            throw new IllegalArgumentException("the window job's records must fit one minute of event time");
        }
        PROCESSED.set(0);
        generating = true;
        try {
            StreamExecutionEnvironment env = Job.env(Job.config(spec, work), spec);
            DataStream<Long> records = env.fromSource(new IdleSequenceSource(0, spec.totalRecords() - 1),
                    timestamps(), "records").uid("records").setParallelism(1);
            windows(spec, records).sinkTo(new DiscardingSink<>()).setParallelism(1);
            JobClient client = env.executeAsync("generate " + spec.name);
            Generate.awaitCount(client, PROCESSED, OPERATORS.size() * spec.totalRecords());
            Generate.stopWithSavepoint(client, out, work);
        } finally {
            generating = false;
        }
        Generate.writeExpected(spec.name, Entries.sorted(expected(spec), Map.of(), OPERATORS), out);
    }

    /**
     * The spec's {@code window_probe_keys}: how many keys (key indices 0, 1, ...) the restore's
     * probe sends a record to; all of them when absent. The windows of the other keys fire only
     * from their restored end-of-window timers (count windows, which have none, do not fire).
     */
    @SuppressWarnings("unchecked")
    static int probeKeys(Path specFile) throws java.io.IOException {
        Map<String, Object> m = (Map<String, Object>) Json.parse(
                new String(Files.readAllBytes(specFile), StandardCharsets.UTF_8));
        Spec spec = Spec.read(specFile);
        Object v = m.get("window_probe_keys");
        int n = v == null ? spec.keys : Integer.parseInt(v.toString());
        if (n < 1 || n > spec.keys) {
            throw new IllegalArgumentException("spec: window_probe_keys must be in 1.." + spec.keys + ", not " + v);
        }
        return n;
    }

    static void restore(Path savepoint, Spec spec, int probeKeys, Path out, Path work) throws Exception {
        StreamExecutionEnvironment env = Job.env(Restore.restoring(savepoint, spec, work), spec);
        DataStream<Long> probe = env.fromSource(
                new NumberSequenceSource(spec.totalRecords(), spec.totalRecords() + probeKeys - 1), timestamps(), "probe")
                .uid("probe").setParallelism(1);
        writeFired(windows(spec, probe), "restore " + spec.name, OPERATORS, out);
    }

    /**
     * Runs {@code fired} (a window job's output: {@code {"key", "state": operator, "value"}} per
     * fired window) to its end and writes the windows sorted by key and {@code operators} to
     * {@code out}; a window firing twice is an error, a job Flink refuses a {@link Restore.Failure}.
     * The DataStream and the SQL window jobs restore through it.
     */
    static void writeFired(DataStream<String> fired, String jobName, List<String> operators, Path out)
            throws java.io.IOException, Restore.Failure {
        Map<String, Map<String, Object>> byKey = new HashMap<>();
        try (CloseableIterator<String> it = fired.executeAndCollect(jobName)) {
            while (it.hasNext()) {
                @SuppressWarnings("unchecked")
                Map<String, Object> m = (Map<String, Object>) Json.parse(it.next());
                Object prior = byKey.computeIfAbsent(Json.write(m.get("key")), x -> new LinkedHashMap<>())
                        .put((String) m.get("state"), m.get("value"));
                if (prior != null) {
                    throw new IllegalStateException("window fired twice: " + m);
                }
            }
        } catch (IllegalStateException e) {
            throw e;
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        StringBuilder b = new StringBuilder();
        for (Map<String, Object> e : Entries.sorted(byKey, Map.of(), operators)) {
            Json.write(e, b);
            b.append('\n');
        }
        Files.write(out, b.toString().getBytes(StandardCharsets.UTF_8));
    }

    static void vectors(Path out) throws Exception {
        long[][] spans = {{0L, 1L}, {T0, T0 + MINUTE}, {Long.MIN_VALUE, Long.MAX_VALUE}, {-5L, -1L}};
        Map<String, Object> m = new LinkedHashMap<>();
        List<Object> stream = new ArrayList<>();
        List<Object> sql = new ArrayList<>();
        List<Object> counts = new ArrayList<>();
        for (long[] s : spans) {
            stream.add(List.of(s[0], s[1], hex(new TimeWindow.Serializer(), new TimeWindow(s[0], s[1]))));
            sql.add(List.of(s[0], s[1], hex(new org.apache.flink.table.runtime.operators.window.TimeWindow.Serializer(),
                    org.apache.flink.table.runtime.operators.window.TimeWindow.of(s[0], s[1]))));
            counts.add(List.of(s[0], hex(new org.apache.flink.table.runtime.operators.window.CountWindow.Serializer(),
                    new org.apache.flink.table.runtime.operators.window.CountWindow(s[0]))));
        }
        m.put("TimeWindow", vector(new TimeWindow.Serializer(), stream));
        m.put("GlobalWindow", vector(new GlobalWindow.Serializer(), List.of(hex(new GlobalWindow.Serializer(), GlobalWindow.get()))));
        m.put("TableTimeWindow", vector(new org.apache.flink.table.runtime.operators.window.TimeWindow.Serializer(), sql));
        m.put("CountWindow", vector(new org.apache.flink.table.runtime.operators.window.CountWindow.Serializer(), counts));
        Files.write(out, Json.write(m).getBytes(StandardCharsets.UTF_8));
    }

    private static Map<String, Object> vector(org.apache.flink.api.common.typeutils.TypeSerializer<?> ser, List<Object> values)
            throws java.io.IOException {
        org.apache.flink.core.memory.DataOutputSerializer snap = new org.apache.flink.core.memory.DataOutputSerializer(64);
        org.apache.flink.api.common.typeutils.TypeSerializerSnapshot.writeVersionedSnapshot(snap, ser.snapshotConfiguration());
        return Json.obj("length", ser.getLength(), "snapshot", hexOf(snap.getCopyOfBuffer()), "values", values);
    }

    private static <T> String hex(org.apache.flink.api.common.typeutils.TypeSerializer<T> ser, T value) throws java.io.IOException {
        org.apache.flink.core.memory.DataOutputSerializer out = new org.apache.flink.core.memory.DataOutputSerializer(16);
        ser.serialize(value, out);
        return hexOf(out.getCopyOfBuffer());
    }

    private static String hexOf(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x & 0xFF));
        }
        return s.toString();
    }

    private static WatermarkStrategy<Long> timestamps() {
        return WatermarkStrategy.<Long>noWatermarks().withTimestampAssigner((SerializableTimestampAssigner<Long>) (j, ts) -> T0 + j);
    }

    /** The three window operators over {@code input}, their fired windows as one stream of JSON lines. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static DataStream<String> windows(Spec spec, DataStream<Long> input) {
        KeyedStream<Long, Object> keyed = input.keyBy((KeySelector) new Job.KeyOf(spec), (TypeInformation) spec.keyInfo());
        TypeInformation<WindowTotals> acc = TypeInformation.of(WindowTotals.class);
        if (!(acc instanceof PojoTypeInfo)) {
            throw new IllegalStateException("WindowTotals is not a Flink POJO here: " + acc);
        }
        SingleOutputStreamOperator<String> tumble = keyed
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(MINUTE)))
                .trigger(new Counting<>(EventTimeTrigger.create()))
                .aggregate(new Totals(), new EmitTotals(), acc, acc, Types.STRING);
        SingleOutputStreamOperator<String> session = keyed
                .window(EventTimeSessionWindows.withGap(Duration.ofMillis(GAP)))
                .trigger(new Counting<>(EventTimeTrigger.create()))
                .reduce((a, b) -> a + b, new EmitSum(), Types.STRING);
        SingleOutputStreamOperator<String> count = keyed
                .window(GlobalWindows.create())
                .trigger(new Counting<>(CountTrigger.of(spec.recordsPerKey + 1)))
                .process(new EmitElements(), Types.STRING);
        for (SingleOutputStreamOperator<String> op : List.of(tumble, session, count)) {
            op.setParallelism(spec.parallelism).setMaxParallelism(spec.maxParallelism);
        }
        tumble.uid("tumble").name("tumble");
        session.uid("session").name("session");
        count.uid("count").name("count");
        return tumble.union(session, count);
    }

    /** What the restore fires per key: every record of the key (generated and probe) in each operator's window. */
    static Map<String, Map<String, Object>> expected(Spec spec) throws IllegalAccessException {
        Map<String, Map<String, Object>> out = new HashMap<>();
        for (int i = 0; i < spec.keys; i++) {
            List<Long> js = new ArrayList<>();
            for (long j = i; j < spec.totalRecords(); j += spec.keys) {
                js.add(j);
            }
            js.add(spec.totalRecords() + i);
            WindowTotals t = new WindowTotals();
            for (long j : js) {
                add(t, j);
            }
            long sum = js.stream().mapToLong(Long::longValue).sum();
            Map<String, Object> states = new LinkedHashMap<>();
            states.put("tumble", Json.obj("window", List.of(T0, T0 + MINUTE), "acc", PojoJobs.render(t)));
            states.put("session", Json.obj("window", List.of(T0 + js.get(0), T0 + js.get(js.size() - 1) + GAP), "sum", sum));
            states.put("count", Json.obj("elements", js));
            out.put(Json.write(Spec.keyJson(spec.key(i))), states);
        }
        return out;
    }

    static void add(WindowTotals t, long j) {
        t.count += 1;
        t.sum += j;
        t.last = (j % 2 == 1 ? "wé-" : "w-") + j;
    }

    static String line(Object key, String state, Object value) {
        if (generating) {
            throw new IllegalStateException("no window may fire before the savepoint: " + state + " " + value);
        }
        return Json.write(Json.obj("key", Spec.keyJson(key), "state", state, "value", value));
    }

    static List<Long> window(TimeWindow w) {
        return List.of(w.getStart(), w.getEnd());
    }

    /** The tumbling window's aggregate: counts and sums the records, keeps the last one's name. */
    static final class Totals implements AggregateFunction<Long, WindowTotals, WindowTotals> {
        private static final long serialVersionUID = 1L;

        @Override
        public WindowTotals createAccumulator() {
            return new WindowTotals();
        }

        @Override
        public WindowTotals add(Long j, WindowTotals t) {
            WindowJobs.add(t, j);
            return t;
        }

        @Override
        public WindowTotals getResult(WindowTotals t) {
            return t;
        }

        @Override
        public WindowTotals merge(WindowTotals a, WindowTotals b) {
            throw new UnsupportedOperationException("tumbling windows do not merge");
        }
    }

    static final class EmitTotals extends ProcessWindowFunction<WindowTotals, String, Object, TimeWindow> {
        private static final long serialVersionUID = 1L;

        @Override
        public void process(Object key, Context ctx, Iterable<WindowTotals> in, Collector<String> out) throws Exception {
            for (WindowTotals t : in) {
                out.collect(line(key, "tumble", Json.obj("window", window(ctx.window()), "acc", PojoJobs.render(t))));
            }
        }
    }

    static final class EmitSum extends ProcessWindowFunction<Long, String, Object, TimeWindow> {
        private static final long serialVersionUID = 1L;

        @Override
        public void process(Object key, Context ctx, Iterable<Long> in, Collector<String> out) {
            for (Long sum : in) {
                out.collect(line(key, "session", Json.obj("window", window(ctx.window()), "sum", sum)));
            }
        }
    }

    static final class EmitElements extends ProcessWindowFunction<Long, String, Object, GlobalWindow> {
        private static final long serialVersionUID = 1L;

        @Override
        public void process(Object key, Context ctx, Iterable<Long> in, Collector<String> out) {
            List<Long> elements = new ArrayList<>();
            in.forEach(elements::add);
            out.collect(line(key, "count", Json.obj("elements", elements)));
        }
    }

    /**
     * A trigger that behaves exactly as {@code inner} (same state, same timers) and counts the
     * records it sees, so the generator knows when every operator has taken every record.
     */
    static final class Counting<W extends Window> extends Trigger<Object, W> {
        private static final long serialVersionUID = 1L;
        private final Trigger<Object, W> inner;

        @SuppressWarnings("unchecked")
        Counting(Trigger<?, ? super W> inner) {
            this.inner = (Trigger<Object, W>) inner;
        }

        @Override
        public TriggerResult onElement(Object element, long timestamp, W window, TriggerContext ctx) throws Exception {
            TriggerResult r = inner.onElement(element, timestamp, window, ctx);
            PROCESSED.incrementAndGet();
            return r;
        }

        @Override
        public TriggerResult onProcessingTime(long time, W window, TriggerContext ctx) throws Exception {
            return inner.onProcessingTime(time, window, ctx);
        }

        @Override
        public TriggerResult onEventTime(long time, W window, TriggerContext ctx) throws Exception {
            return inner.onEventTime(time, window, ctx);
        }

        @Override
        public boolean canMerge() {
            return inner.canMerge();
        }

        @Override
        public void onMerge(W window, OnMergeContext ctx) throws Exception {
            inner.onMerge(window, ctx);
        }

        @Override
        public void clear(W window, TriggerContext ctx) throws Exception {
            inner.clear(window, ctx);
        }
    }
}
