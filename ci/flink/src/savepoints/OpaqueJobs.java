package savepoints;

import golden.Json;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeHint;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.java.typeutils.GenericTypeInfo;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.Collector;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

/**
 * Savepoints of a DataStream job whose states are the ones a real job keeps beside its
 * well-typed ones: a state Flink serializes with Kryo, a {@code Tuple2}, and a map of Java lists.
 *
 * <pre>
 *   OpaqueJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   OpaqueJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 * </pre>
 *
 * <p>The job is the matrix's (same source, key selector, uid, backend, storage, parallelism). It
 * keeps the spec's matrix states ({@code states}, through {@link StateSet}, usually just
 * {@code events}) and always these three:
 * <ul>
 *   <li>{@code session}: {@code ValueState<Session>}. {@link Session} has no no-arg constructor and
 *   a {@code java.util.UUID} field, so it is no Flink POJO: {@code TypeInformation.of} gives a
 *   {@link GenericTypeInfo}, serialized by Kryo ({@code KryoSerializer}). Record {@code j} of key
 *   index {@code i} writes {@code Session(UUID(i, j), user, hits)} with the key's record count;
 *   {@code user} is null for every 5th key and non-ASCII for every 4th.</li>
 *   <li>{@code visits}: {@code ListState<Session>}, Kryo again: each record appends
 *   {@code Session(UUID(j, i), user, j)}. Its elements cannot be told apart without Kryo (a list
 *   value is its elements joined by {@code ,}), so statemorph carries each key's list whole.</li>
 *   <li>{@code pair}: {@code ValueState<Tuple2<String, Long>>} through a {@code TypeHint}
 *   ({@code TupleSerializer}): {@code ("p-" + j, j)}.</li>
 *   <li>{@code lists}: {@code MapState<String, List<Long>>}, the value type through
 *   {@code TypeHint<List<Long>>}: each record appends {@code j} to the list under {@code "r" + (j % 2)}.</li>
 * </ul>
 * Both sides render a Session as {@code {"id", "user", "hits"}} (the UUID as its string), a tuple as
 * {@code {"f0", "f1"}}, the map as an object of arrays; {@code expected.json} and the checker's
 * lines are the {@link Entries} shape with the spec's states first.
 */
public final class OpaqueJobs {
    private OpaqueJobs() {}

    static final List<String> OWN_STATES = List.of("session", "visits", "pair", "lists");
    static final Map<String, Map<String, Object>> WRITTEN = new java.util.concurrent.ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        Batch.program("OpaqueJobs", args, (spec, out, w) -> generate(Spec.read(spec), out, w), (sp, spec, out, w) -> {
            Spec s = Spec.read(spec);
            if (namespaced(s)) {
                List<String> keyed = new ArrayList<>(states(s));
                keyed.remove("timers");
                Restore.run(sp, s, new LabelScan(new ReadFn(s), keyed), states(s), keyed, out, w);
            } else {
                Restore.run(sp, s, new ReadFn(s), states(s), out, w);
            }
        });
    }

    /** The spec's matrix states, then this job's own ({@code labels} too under a Kryo key). */
    static List<String> states(Spec spec) {
        List<String> all = new ArrayList<>(spec.states);
        all.addAll(OWN_STATES);
        if (namespaced(spec)) {
            all.add(LABELS);
        }
        return all;
    }

    /**
     * Whether the job keeps {@code labels}: a {@code ValueState<Long>} in {@code String} namespaces
     * (through the operator's {@code getPartitionedState}, as a window operator keeps its window
     * contents), under the Kryo key ({@code key_type: kryo}): a key only Kryo can delimit before a
     * namespace of variable length, so Flink writes the composite key with both lengths after them.
     * Record {@code j} counts itself under the label {@link #label}.
     */
    static boolean namespaced(Spec spec) {
        return spec.keyType.equals("kryo");
    }

    static final String LABELS = "labels";
    static final Map<String, Map<String, Object>> LABELS_WRITTEN = new java.util.concurrent.ConcurrentHashMap<>();

    /** Record {@code j}'s namespace: 1 to 3 characters after "w", one of them non-ASCII for odd {@code j}. */
    static String label(long j) {
        return "w" + (j % 2 == 1 ? "é" : "e").repeat((int) (j % 3) + 1);
    }

    static ValueStateDescriptor<Long> labels() {
        return new ValueStateDescriptor<>(LABELS, Types.LONG);
    }

    static void generate(Spec spec, java.nio.file.Path out, java.nio.file.Path work) throws Exception {
        Generate.PROCESSED.set(0);
        WRITTEN.clear();
        LABELS_WRITTEN.clear();
        if (namespaced(spec)) {
            Generate.savepointAfterAll(spec, new LabelWriter(new WriteFn(spec)), out, work);
            for (Map.Entry<String, Map<String, Object>> e : LABELS_WRITTEN.entrySet()) {
                WRITTEN.get(e.getKey()).put(LABELS, new TreeMap<>(e.getValue()));
            }
        } else {
            Generate.savepointAfterAll(spec, new WriteFn(spec), out, work);
        }
        Generate.writeExpected(spec.name, Entries.sorted(WRITTEN, Map.of(), states(spec)), out);
    }

    /** The generator's operator under a Kryo key: the function's states, and {@code labels}. */
    static final class LabelWriter extends KeyedProcessOperator<Object, Long, String> {
        private static final long serialVersionUID = 1L;

        LabelWriter(WriteFn fn) {
            super(fn);
        }

        @Override
        public void processElement(StreamRecord<Long> r) throws Exception {
            long j = r.getValue();
            String ns = label(j);
            ValueState<Long> count = getPartitionedState(ns, StringSerializer.INSTANCE, labels());
            long n = count.value() == null ? 1 : count.value() + 1;
            count.update(n);
            LABELS_WRITTEN.computeIfAbsent(Json.write(Spec.keyJson(getCurrentKey())),
                    k -> new java.util.concurrent.ConcurrentHashMap<>()).put(ns, n);
            super.processElement(r); // the function's states, then PROCESSED
        }
    }

    /** The checker's operator under a Kryo key: the function's states, then each key's labels. */
    static final class LabelScan extends Restore.ScanOperator {
        private static final long serialVersionUID = 1L;
        private transient Map<Object, Map<String, Object>> byKey;

        LabelScan(ReadFn fn, List<String> keyedStates) {
            super(fn, keyedStates);
        }

        @Override
        public void open() throws Exception {
            super.open();
            getOrCreateKeyedState(StringSerializer.INSTANCE, labels()); // registered, as the job registers it
        }

        @Override
        protected void scan(Object key) throws Exception {
            super.scan(key);
            if (byKey == null) {
                byKey = new java.util.HashMap<>();
                try (java.util.stream.Stream<Tuple2<Object, String>> s = getKeyedStateBackend().getKeysAndNamespaces(LABELS)) {
                    s.forEach(kn -> byKey.computeIfAbsent(kn.f0, k -> new TreeMap<>()).put(kn.f1, null));
                }
            }
            Map<String, Object> mine = byKey.get(key);
            if (mine == null) {
                return;
            }
            for (String ns : new ArrayList<>(mine.keySet())) {
                mine.put(ns, getPartitionedState(ns, StringSerializer.INSTANCE, labels()).value());
            }
            output.collect(new StreamRecord<>(Json.write(Json.obj("key", Spec.keyJson(key), "state", LABELS,
                    "value", mine))));
        }
    }

    /** A session of a key: no no-arg constructor and a UUID, so Flink hands it to Kryo. */
    public static final class Session {
        private final UUID id;
        private final String user;
        private final long hits;

        public Session(UUID id, String user, long hits) {
            this.id = id;
            this.user = user;
            this.hits = hits;
        }

        Map<String, Object> render() {
            return Json.obj("id", id.toString(), "user", user, "hits", hits);
        }
    }

    static TypeInformation<Session> sessionInfo() {
        TypeInformation<Session> info = TypeInformation.of(Session.class);
        if (!(info instanceof GenericTypeInfo)) {
            throw new IllegalStateException("Session must be a Kryo (generic) type here: " + info);
        }
        return info;
    }

    /** What the three own states hold for the current key. */
    abstract static class OwnStates extends StatefulFn {
        private static final long serialVersionUID = 1L;
        protected transient ValueState<Session> session;
        protected transient ListState<Session> visits;
        protected transient ValueState<Tuple2<String, Long>> pair;
        protected transient MapState<String, List<Long>> lists;

        OwnStates(Spec spec) {
            super(spec);
        }

        @Override
        public void open(OpenContext ctx) {
            super.open(ctx);
            session = getRuntimeContext().getState(new ValueStateDescriptor<>("session", sessionInfo()));
            visits = getRuntimeContext().getListState(new ListStateDescriptor<>("visits", sessionInfo()));
            pair = getRuntimeContext().getState(new ValueStateDescriptor<>("pair",
                    TypeInformation.of(new TypeHint<Tuple2<String, Long>>() {})));
            lists = getRuntimeContext().getMapState(new MapStateDescriptor<>("lists", Types.STRING,
                    TypeInformation.of(new TypeHint<List<Long>>() {})));
        }

        Map<String, Object> read() throws Exception {
            Map<String, Object> out = states.read();
            Session s = session.value();
            out.put("session", s == null ? null : s.render());
            List<Object> v = new ArrayList<>();
            for (Session e : visits.get()) {
                v.add(e.render());
            }
            out.put("visits", v.isEmpty() ? null : v);
            Tuple2<String, Long> p = pair.value();
            out.put("pair", p == null ? null : Json.obj("f0", p.f0, "f1", p.f1));
            Map<String, Object> m = new TreeMap<>();
            for (Map.Entry<String, List<Long>> e : lists.entries()) {
                m.put(e.getKey(), new ArrayList<Object>(e.getValue()));
            }
            out.put("lists", m.isEmpty() ? null : m);
            return out;
        }
    }

    static final class WriteFn extends OwnStates {
        private static final long serialVersionUID = 1L;

        WriteFn(Spec spec) {
            super(spec);
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            int i = spec.keyIndex(j);
            states.update(j, i);
            Session old = session.value();
            String user = i % 5 == 4 ? null : (i % 4 == 1 ? "usér-" : "user-") + i;
            session.update(new Session(new UUID(i, j), user, old == null ? 1 : old.hits + 1));
            visits.add(new Session(new UUID(j, i), user, j));
            pair.update(Tuple2.of("p-" + j, j));
            String slot = "r" + (j % 2);
            List<Long> l = lists.get(slot);
            List<Long> next = l == null ? new ArrayList<>() : new ArrayList<>(l);
            next.add(j);
            lists.put(slot, next);
            WRITTEN.put(Json.write(Spec.keyJson(ctx.getCurrentKey())), read());
            Generate.PROCESSED.incrementAndGet();
        }
    }

    static final class ReadFn extends OwnStates {
        private static final long serialVersionUID = 1L;

        ReadFn(Spec spec) {
            super(spec);
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            for (Map.Entry<String, Object> e : read().entrySet()) {
                out.collect(Json.write(Json.obj("key", Spec.keyJson(ctx.getCurrentKey()), "state", e.getKey(),
                        "value", e.getValue())));
            }
        }
    }
}
