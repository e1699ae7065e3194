package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.operators.KeyedProcessOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;

/**
 * The restore checker: starts the spec's stateful operator from a savepoint and reads back every
 * state of every key the savepoint holds.
 *
 * <p>The operator (same uid, key selector, max parallelism) registers the spec's states with the
 * types it is given (the events row type may differ from the one the savepoint was written with).
 * It does not read the keys the spec names: when its input ends it asks its keyed backend for
 * every key of every registered state ({@code getKeysAndNamespaces}) and emits every state's value
 * per key found, so a key too many or too few shows in the result. The final watermark at the end
 * of the probe fires every restored event-time timer, of whatever key. Before the job, the
 * savepoint's keyed-state headers ({@link Inventory}) must list no state the job does not
 * register; and the job claims all restored state ({@code ignore-unclaimed-state} is false, the
 * probe source takes the old source's uid), so Flink itself refuses a savepoint holding an
 * operator the job does not have. The result is written as JSON lines in the {@link Entries}
 * shape. A refused restore becomes a {@link Failure} carrying the exception chain.
 */
final class Restore {
    private Restore() {}

    /** Flink refused to run the job (a failed restore); {@code chain} is the cause chain, outermost first. */
    static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;
        final List<String> chain;
        final Throwable root;

        Failure(Throwable t) {
            super(t);
            chain = new ArrayList<>();
            Throwable r = t;
            for (Throwable c = t; c != null; c = c.getCause()) {
                chain.add(c.getClass().getName() + ": " + c.getMessage());
                r = c;
            }
            root = migrationCause(t, r);
        }

        /** The StateMigrationException if the chain has one (that is what a negative control asserts), else the root. */
        private static Throwable migrationCause(Throwable t, Throwable root) {
            for (Throwable c = t; c != null; c = c.getCause()) {
                if (c.getClass().getSimpleName().equals("StateMigrationException")) {
                    return c;
                }
            }
            return root;
        }

        String toJson() {
            return Json.write(Json.obj(
                    "exception", root.getClass().getName(), "message", String.valueOf(root.getMessage()), "chain", chain));
        }
    }

    static void run(Path savepoint, Spec spec, Path out, Path work) throws Exception {
        run(savepoint, spec, new Fn(spec), spec.states, out, work);
    }

    /** {@link #run(Path, Spec, KeyedProcessFunction, List, List, Path, Path)} for a function whose keyed states are {@code states} (without "timers"). */
    static void run(Path savepoint, Spec spec, KeyedProcessFunction<Object, Long, String> fn, List<String> states,
            Path out, Path work) throws Exception {
        List<String> keyed = new ArrayList<>(states);
        keyed.remove("timers");
        run(savepoint, spec, fn, states, keyed, out, work);
    }

    /**
     * Starts {@code fn} as the stateful operator from {@code savepoint} and writes the {key, state,
     * value} lines {@code fn} emits for {@code states}, calling its {@code processElement} once per
     * key of the savepoint (with the value -1: a read needs only the current key).
     * {@code keyedStates} are the names of the keyed states {@code fn} registers: the keys are
     * taken from them, and the savepoint may hold no other (timer queues aside).
     */
    static void run(Path savepoint, Spec spec, KeyedProcessFunction<Object, Long, String> fn, List<String> states,
            List<String> keyedStates, Path out, Path work) throws Exception {
        run(savepoint, spec, new ScanOperator(fn, keyedStates), states, keyedStates, out, work);
    }

    /** The same with {@code scan} as the checker's operator (one that reads more than its function can). */
    static void run(Path savepoint, Spec spec, ScanOperator scan, List<String> states,
            List<String> keyedStates, Path out, Path work) throws Exception {
        unregistered(savepoint, Inventory.operatorId(spec.uid), keyedStates);
        StreamExecutionEnvironment env = Job.env(
                spec.allowUnclaimed ? restoring(savepoint, spec, work) : claimingAll(savepoint, spec, work), spec);
        DataStream<Long> probe = env.fromSource(new SqlJobs.ProbeSource(0, 0), WatermarkStrategy.noWatermarks(), "records")
                .uid("records")
                .setParallelism(1);
        DataStream<String> lines = Job.stateful(spec, probe, scan);
        Map<String, Map<String, Object>> values = new HashMap<>();
        Map<String, List<Long>> timers = new HashMap<>();
        try (CloseableIterator<String> it = lines.executeAndCollect("restore " + spec.name)) {
            while (it.hasNext()) {
                collect(Json.parse(it.next()), values, timers);
            }
        } catch (Exception e) {
            throw new Failure(e);
        }
        StringBuilder b = new StringBuilder();
        for (Map<String, Object> e : Entries.sorted(values, timers, states)) {
            Json.write(e, b);
            b.append('\n');
        }
        Files.write(out, b.toString().getBytes(StandardCharsets.UTF_8));
    }

    /**
     * A keyed state of the job's operator in the savepoint that the job does not register is a
     * failed check (Flink would drop it silently). Other operators are Flink's to refuse (unclaimed).
     */
    private static void unregistered(Path savepoint, String operatorId, List<String> keyedStates) throws Failure {
        Map<String, Set<String>> held;
        try {
            held = Inventory.keyedStates(savepoint);
        } catch (Exception e) { // Flink's own readers refuse the metadata or a keyed-state header
            throw new Failure(e);
        }
        for (String name : held.getOrDefault(operatorId, Set.of())) {
            if (!name.startsWith(Inventory.TIMER_PREFIX) && !keyedStates.contains(name)) {
                throw new Failure(new IllegalStateException("the savepoint holds keyed state '" + name + "' of operator "
                        + operatorId + ", which the job does not register (it registers " + keyedStates + ")"));
            }
        }
    }

    /** The spec's configuration, starting from {@code savepoint} and ignoring state no operator claims (the timed and sampled restores). */
    static Configuration restoring(Path savepoint, Spec spec, Path work) {
        Configuration c = Job.config(spec, work);
        c.setString("execution.state-recovery.path", savepoint.toUri().toString());
        c.setString("execution.savepoint.path", savepoint.toUri().toString());
        c.setString("execution.state-recovery.ignore-unclaimed-state", "true");
        c.setString("execution.savepoint.ignore-unclaimed-state", "true");
        return c;
    }

    /** The same, but every operator state of the savepoint must be claimed by an operator of the job (the checker). */
    static Configuration claimingAll(Path savepoint, Spec spec, Path work) {
        Configuration c = restoring(savepoint, spec, work);
        c.setString("execution.state-recovery.ignore-unclaimed-state", "false");
        c.setString("execution.savepoint.ignore-unclaimed-state", "false");
        return c;
    }

    @SuppressWarnings("unchecked")
    private static void collect(Object line, Map<String, Map<String, Object>> values, Map<String, List<Long>> timers) {
        Map<String, Object> m = (Map<String, Object>) line;
        String key = Json.write(m.get("key"));
        if (m.get("state").equals("timers")) {
            timers.computeIfAbsent(key, x -> new ArrayList<>()).add(Long.parseLong(m.get("value").toString()));
        } else {
            values.computeIfAbsent(key, x -> new LinkedHashMap<>()).put((String) m.get("state"), m.get("value"));
        }
    }

    /**
     * The checker's operator: the function of a {@link KeyedProcessOperator}, but its input (the
     * probe) only ends the job; when it ends, every key of every state in {@code keyedStates} is
     * read, one {@code processElement} call per key.
     */
    static class ScanOperator extends KeyedProcessOperator<Object, Long, String> {
        private static final long serialVersionUID = 1L;
        private final List<String> keyedStates;

        ScanOperator(KeyedProcessFunction<Object, Long, String> fn, List<String> keyedStates) {
            super(fn);
            this.keyedStates = new ArrayList<>(keyedStates);
        }

        @Override
        public void processElement(StreamRecord<Long> probe) {}

        @Override
        public void finish() throws Exception {
            KeyedStateBackend<Object> backend = getKeyedStateBackend();
            Set<Object> keys = new LinkedHashSet<>();
            for (String state : keyedStates) {
                try (Stream<Tuple2<Object, Object>> s = backend.getKeysAndNamespaces(state)) {
                    s.forEach(kn -> keys.add(kn.f0));
                }
            }
            for (Object key : keys) {
                setCurrentKey(key);
                scan(key);
            }
            super.finish();
        }

        /** Reads the current key's states: its function's {@code processElement}, by default. */
        protected void scan(Object key) throws Exception {
            super.processElement(new StreamRecord<>(-1L));
        }
    }

    static final class Fn extends StatefulFn {
        private static final long serialVersionUID = 1L;

        Fn(Spec spec) {
            super(spec);
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            for (Map.Entry<String, Object> e : states.read().entrySet()) {
                out.collect(Json.write(Json.obj("key", Spec.keyJson(ctx.getCurrentKey()), "state", e.getKey(), "value", e.getValue())));
            }
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<String> out) {
            out.collect(Json.write(Json.obj("key", Spec.keyJson(ctx.getCurrentKey()), "state", "timers", "value", ts)));
        }
    }
}
