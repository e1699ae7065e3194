package savepoints;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import golden.Json;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A minimal restore job for timing (the benchmarks' real-Flink peer): the spec's stateful operator
 * starts from a savepoint, so its backend restores every key group of the savepoint, then a probe
 * source reads the states of the first {@code probe} keys of the spec (0 = none) and counts the
 * keys that have an {@code events} value. Nothing is collected or written: unlike {@link Restore},
 * whose JSON output of every key does not fit a savepoint of millions of keys, the time of this
 * job is the restore itself. Prints {@code restored PROBED NONNULL} on stdout.
 *
 * <p>With {@code stride} and {@code out} (a sample check of a big restore), the probed key indices
 * are {@code 0, stride, 2*stride, ...} and every state of every probed key is written to {@code out}
 * as the JSON lines {@link Restore} writes ({@code key, state, value}), so a caller can compare a
 * sample spread over the whole savepoint with what it expects.
 */
final class RestoreTimed {
    private RestoreTimed() {}

    static final AtomicLong PROBED = new AtomicLong();
    static final AtomicLong FOUND = new AtomicLong();
    /** The probed keys' JSON lines when an output file is asked for (one JVM, a MiniCluster). */
    static final ConcurrentLinkedQueue<String> LINES = new ConcurrentLinkedQueue<>();
    static volatile boolean keepLines;

    static void run(Path savepoint, Spec spec, long probe, Path work) throws Exception {
        run(savepoint, spec, probe, 1, null, work);
    }

    static void run(Path savepoint, Spec spec, long probe, long stride, Path out, Path work) throws Exception {
        PROBED.set(0);
        FOUND.set(0);
        LINES.clear();
        keepLines = out != null;
        StreamExecutionEnvironment env = Job.env(Restore.restoring(savepoint, spec, work), spec);
        DataStream<Long> keys = env.fromSource(new NumberSequenceSource(0, probe - 1), WatermarkStrategy.noWatermarks(), "probe")
                .uid("probe")
                .setParallelism(1)
                .map(new Stride(stride))
                .uid("probe-stride")
                .setParallelism(1);
        Job.stateful(spec, keys, new Fn(spec)).sinkTo(new DiscardingSink<>()).setParallelism(1);
        try {
            env.execute("restore-timed " + spec.name);
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        if (out != null) {
            StringBuilder b = new StringBuilder();
            for (String line : LINES) {
                b.append(line).append('\n');
            }
            Files.write(out, b.toString().getBytes(StandardCharsets.UTF_8));
        }
        System.out.println("restored " + PROBED.get() + " " + FOUND.get());
    }

    /** Key index {@code j} of the probe source to {@code j * stride}. */
    static final class Stride implements MapFunction<Long, Long> {
        private static final long serialVersionUID = 1L;
        private final long stride;

        Stride(long stride) {
            this.stride = stride;
        }

        @Override
        public Long map(Long j) {
            return j * stride;
        }
    }

    static final class Fn extends StatefulFn {
        private static final long serialVersionUID = 1L;

        Fn(Spec spec) {
            super(spec);
        }

        @Override
        public void processElement(Long j, Context ctx, Collector<String> out) throws Exception {
            Map<String, Object> values = states.read();
            PROBED.incrementAndGet();
            if (values.get("events") != null) {
                FOUND.incrementAndGet();
            }
            if (keepLines) {
                for (Map.Entry<String, Object> e : values.entrySet()) {
                    LINES.add(Json.write(Json.obj("key", Spec.keyJson(ctx.getCurrentKey()), "state", e.getKey(),
                            "value", e.getValue())));
                }
            }
        }
    }
}
