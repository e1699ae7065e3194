package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.typeutils.PojoTypeInfo;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import savepoints.pojo.Profile;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Savepoints of a DataStream job whose keyed state is a POJO, and restores of them with the POJO
 * class one field larger: the case where real Flink itself migrates state on restore.
 *
 * <pre>
 *   PojoJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   PojoJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 *   PojoJobs restore-savepoint WORK SAVEPOINT SPEC OUTDIR PROBE_KEYS STRIDE OUT.jsonl
 * </pre>
 *
 * <p>The state is {@code profile}, a {@code ValueState<Profile>} through Flink's own
 * {@code PojoTypeInfo} ({@code PojoSerializer}). Which {@link Profile} a run has is up to its class
 * path (ci/flink/setup.sh compiles version 1 and version 2 of the class into two directories): a
 * savepoint taken with version 1 and restored with version 2 makes Flink resolve the POJO snapshot
 * as COMPATIBLE_AFTER_MIGRATION and migrate every value on restore (RocksDB rewrites each value when
 * the state is registered; the heap backend reads the old bytes into new objects). The job code
 * knows version 1's fields and reads any others by reflection.
 *
 * <p>The job is the matrix's (same source, key selector, uid, max parallelism, backend, storage;
 * the spec's {@code states} are ignored). Record {@code j} of key index {@code i} sets {@code id =
 * j}, {@code name} (null for every 5th key, non-ASCII for every 4th record) and counts the key's
 * records in {@code count}. {@code generate} writes {@code OUT/savepoint} and, for at most
 * {@link #EXPECTED_LIMIT} keys, {@code OUT/expected.json}; {@code restore} writes every key's
 * {@code profile} as the {@link Entries} lines; both render a POJO as an object of its public
 * fields by name (doubles as JSON numbers).
 *
 * <p>{@code restore-savepoint} is the whole "restore with the new class, take a new savepoint"
 * cycle a user runs, timed from inside the JVM: it starts from SAVEPOINT, reads the states of the
 * key indices {@code 0, STRIDE, 2*STRIDE, ...} ({@code PROBE_KEYS} of them) into OUT.jsonl, then
 * stops the job with a canonical savepoint into {@code OUTDIR/savepoint}. It prints one JSON line
 * on stdout: {@code restored_s} (submission until every subtask's keyed backend has restored its
 * key groups), {@code ready_s} (until every subtask has registered the state, which is where RocksDB
 * migrates), {@code register_s} (the longest state registration), {@code probed_s} (until the
 * probe has been read) and {@code savepoint_s} (the stop-with-savepoint call).
 */
public final class PojoJobs {
    private PojoJobs() {}

    static final String STATE = "profile";
    static final List<String> STATES = List.of(STATE);
    /** Above this many keys generate writes no expected.json (its JSON would not fit the heap). */
    static final int EXPECTED_LIMIT = 100_000;

    static final Map<String, Map<String, Object>> WRITTEN = new java.util.concurrent.ConcurrentHashMap<>();
    static final AtomicLong PROBED = new AtomicLong();
    static final AtomicLong RESTORED_AT = new AtomicLong();
    static final AtomicLong READY_AT = new AtomicLong();
    static final AtomicLong REGISTER_NANOS = new AtomicLong();
    static final ConcurrentLinkedQueue<String> LINES = new ConcurrentLinkedQueue<>();

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        Path work = Path.of(args[1]);
        int failed = 0;
        if (Batch.is(args, "generate", 2)) {
            Batch.generate(args, work, (spec, out, w) -> generate(Spec.read(spec), out, w));
        } else if (Batch.is(args, "restore", 3)) {
            failed = Batch.restore(args, work,
                    (sp, spec, out, w) -> Restore.run(sp, Spec.read(spec), new ReadFn(), STATES, out, w));
        } else if (args[0].equals("restore-savepoint") && args.length == 8) {
            failed = Batch.single(work, w -> restoreSavepoint(Path.of(args[2]), Spec.read(Path.of(args[3])),
                    Path.of(args[4]), Long.parseLong(args[5]), Long.parseLong(args[6]), Path.of(args[7]), w));
        } else {
            usage();
        }
        System.exit(failed == 0 ? 0 : 3);
    }

    private static void usage() {
        Batch.usage("PojoJobs", "\n       PojoJobs restore-savepoint WORK SAVEPOINT SPEC OUTDIR PROBE_KEYS STRIDE OUT.jsonl");
    }

    static void generate(Spec spec, Path out, Path work) throws Exception {
        Generate.PROCESSED.set(0);
        WRITTEN.clear();
        Generate.savepointAfterAll(spec, new WriteFn(spec), out, work);
        if (spec.keys <= EXPECTED_LIMIT) {
            Generate.writeExpected(spec.name, Entries.sorted(WRITTEN, Map.of(), STATES), out);
        }
    }

    static void restoreSavepoint(Path savepoint, Spec spec, Path outDir, long probe, long stride, Path lines, Path work)
            throws Exception {
        if (probe < 1 || stride < 1) {
            throw new IllegalArgumentException("restore-savepoint needs PROBE_KEYS >= 1 and STRIDE >= 1");
        }
        PROBED.set(0);
        RESTORED_AT.set(0);
        READY_AT.set(0);
        REGISTER_NANOS.set(0);
        LINES.clear();
        StreamExecutionEnvironment env = Job.env(Restore.restoring(savepoint, spec, work), spec);
        DataStream<Long> keys = env.fromSource(new IdleSequenceSource(0, probe - 1), WatermarkStrategy.noWatermarks(), "probe")
                .uid("probe")
                .setParallelism(1)
                .map(new RestoreTimed.Stride(stride))
                .uid("probe-stride")
                .setParallelism(1);
        Job.stateful(spec, keys, new CycleFn(spec)).sinkTo(new DiscardingSink<>()).setParallelism(1);
        long t0 = System.nanoTime();
        JobClient client;
        try {
            client = env.executeAsync("restore-savepoint " + spec.name);
            Generate.awaitCount(client, PROBED, probe);
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        long probed = System.nanoTime();
        Generate.stopWithSavepoint(client, outDir, work);
        long done = System.nanoTime();
        StringBuilder b = new StringBuilder();
        for (String line : LINES) {
            b.append(line).append('\n');
        }
        Files.write(lines, b.toString().getBytes(StandardCharsets.UTF_8));
        System.out.println(Json.write(Json.obj(
                "restored_s", seconds(RESTORED_AT.get() - t0), "ready_s", seconds(READY_AT.get() - t0),
                "register_s", seconds(REGISTER_NANOS.get()), "probed_s", seconds(probed - t0),
                "savepoint_s", seconds(done - probed), "probed", PROBED.get())));
    }

    private static Json.Num seconds(long nanos) {
        return new Json.Num(String.format(java.util.Locale.ROOT, "%.3f", nanos / 1e9));
    }

    /** The state's descriptor: Flink's POJO type information of whichever {@link Profile} is on the class path. */
    static ValueStateDescriptor<Profile> descriptor() {
        TypeInformation<Profile> info = TypeInformation.of(Profile.class);
        if (!(info instanceof PojoTypeInfo)) {
            throw new IllegalStateException("Profile is not a Flink POJO here: " + info);
        }
        return new ValueStateDescriptor<>(STATE, info);
    }

    /** A POJO as JSON: its public instance fields by name, in name order; doubles as JSON numbers. */
    static Map<String, Object> render(Object pojo) throws IllegalAccessException {
        Field[] fields = Arrays.stream(pojo.getClass().getFields())
                .filter(f -> !Modifier.isStatic(f.getModifiers()))
                .sorted(Comparator.comparing(Field::getName))
                .toArray(Field[]::new);
        Map<String, Object> out = new LinkedHashMap<>();
        for (Field f : fields) {
            Object v = f.get(pojo);
            out.put(f.getName(), v instanceof Double || v instanceof Float ? new Json.Num(v.toString()) : v);
        }
        return out;
    }

    static String line(Object key, Profile p) throws IllegalAccessException {
        return Json.write(Json.obj("key", Spec.keyJson(key), "state", STATE, "value", p == null ? null : render(p)));
    }

    /** The name of record {@code j} of key index {@code i}: null for every 5th key, non-ASCII for every 4th record. */
    static String name(long j, int i) {
        return i % 5 == 4 ? null : (j % 4 == 1 ? "nöme-" : "name-") + j;
    }

    /** The generating job's operator: one Profile per key, updated by every record of the key. */
    static final class WriteFn extends KeyedProcessFunction<Object, Long, String> {
        private static final long serialVersionUID = 1L;
        private final Spec spec;
        private transient ValueState<Profile> profile;

        WriteFn(Spec spec) {
            this.spec = spec;
        }

        @Override
        public void open(OpenContext ctx) {
            profile = getRuntimeContext().getState(descriptor());
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            Profile p = profile.value();
            if (p == null) {
                p = new Profile();
            }
            p.id = j;
            p.name = name(j, spec.keyIndex(j));
            p.count += 1;
            profile.update(p);
            if (spec.keys <= EXPECTED_LIMIT) {
                Map<String, Object> states = new LinkedHashMap<>();
                states.put(STATE, render(p));
                WRITTEN.put(Json.write(Spec.keyJson(ctx.getCurrentKey())), states);
            }
            Generate.PROCESSED.incrementAndGet();
        }
    }

    /** The restore checker's operator: emits each probed key's profile. */
    static final class ReadFn extends KeyedProcessFunction<Object, Long, String> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Profile> profile;


        @Override
        public void open(OpenContext ctx) {
            profile = getRuntimeContext().getState(descriptor());
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            out.collect(line(ctx.getCurrentKey(), profile.value()));
        }
    }

    /**
     * restore-savepoint's operator: notes when its keyed backend has restored (initializeState runs
     * right after) and how long registering the state takes, keeps each probed key's line.
     */
    static final class CycleFn extends KeyedProcessFunction<Object, Long, String> implements CheckpointedFunction {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Profile> profile;

        CycleFn(Spec spec) {}

        @Override
        public void initializeState(FunctionInitializationContext ctx) {
            RESTORED_AT.accumulateAndGet(System.nanoTime(), Math::max);
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) {}

        @Override
        public void open(OpenContext ctx) {
            long t = System.nanoTime();
            profile = getRuntimeContext().getState(descriptor());
            long end = System.nanoTime();
            REGISTER_NANOS.accumulateAndGet(end - t, Math::max);
            READY_AT.accumulateAndGet(end, Math::max);
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            LINES.add(line(ctx.getCurrentKey(), profile.value()));
            PROBED.incrementAndGet();
        }
    }
}
