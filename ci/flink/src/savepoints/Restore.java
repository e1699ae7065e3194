package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The restore checker: starts the spec's stateful operator from a savepoint and reads back every
 * state of every key.
 *
 * <p>A bounded probe source emits each key index of the spec once; the operator (same uid, key
 * selector, max parallelism) registers the spec's states with the types it is given (the events
 * row type may differ from the one the savepoint was written with) and emits every state's value
 * per probed key. When the probe ends, the final watermark fires every restored event-time timer.
 * The result is written as JSON lines in the {@link Entries} shape. A restore that Flink refuses
 * becomes a {@link Failure} carrying the exception chain.
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

    /**
     * Starts {@code fn} as the stateful operator from {@code savepoint}, probes every key index of
     * the spec once and writes the {key, state, value} lines {@code fn} emits for {@code states}.
     */
    static void run(Path savepoint, Spec spec, KeyedProcessFunction<Object, Long, String> fn, List<String> states,
            Path out, Path work) throws Exception {
        StreamExecutionEnvironment env = Job.env(restoring(savepoint, spec, work), spec);
        DataStream<Long> probe = env.fromSource(new NumberSequenceSource(0, spec.keys - 1), WatermarkStrategy.noWatermarks(), "probe")
                .uid("probe")
                .setParallelism(1);
        DataStream<String> lines = Job.stateful(spec, probe, fn);
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

    /** The spec's configuration, starting from {@code savepoint} and ignoring state no operator claims. */
    static Configuration restoring(Path savepoint, Spec spec, Path work) {
        Configuration c = Job.config(spec, work);
        c.setString("execution.state-recovery.path", savepoint.toUri().toString());
        c.setString("execution.savepoint.path", savepoint.toUri().toString());
        c.setString("execution.state-recovery.ignore-unclaimed-state", "true");
        c.setString("execution.savepoint.ignore-unclaimed-state", "true");
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
