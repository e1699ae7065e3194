package savepoints;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A minimal restore job for timing (the benchmarks' real-Flink peer): the spec's stateful operator
 * starts from a savepoint, so its backend restores every key group of the savepoint, then a probe
 * source reads the states of the first {@code probe} keys of the spec (0 = none) and counts the
 * keys that have an {@code events} value. Nothing is collected or written: unlike {@link Restore},
 * whose JSON output of every key does not fit a savepoint of millions of keys, the time of this
 * job is the restore itself. Prints {@code restored PROBED NONNULL} on stdout.
 */
final class RestoreTimed {
    private RestoreTimed() {}

    static final AtomicLong PROBED = new AtomicLong();
    static final AtomicLong FOUND = new AtomicLong();

    static void run(Path savepoint, Spec spec, long probe, Path work) throws Exception {
        PROBED.set(0);
        FOUND.set(0);
        Configuration c = Job.config(spec, work);
        c.setString("execution.state-recovery.path", savepoint.toUri().toString());
        c.setString("execution.savepoint.path", savepoint.toUri().toString());
        c.setString("execution.state-recovery.ignore-unclaimed-state", "true");
        c.setString("execution.savepoint.ignore-unclaimed-state", "true");
        StreamExecutionEnvironment env = Job.env(c, spec);
        DataStream<Long> keys = env.fromSource(new NumberSequenceSource(0, probe - 1), WatermarkStrategy.noWatermarks(), "probe")
                .uid("probe")
                .setParallelism(1);
        Job.stateful(spec, keys, new Fn(spec)).sinkTo(new DiscardingSink<>()).setParallelism(1);
        try {
            env.execute("restore-timed " + spec.name);
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        System.out.println("restored " + PROBED.get() + " " + FOUND.get());
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
        }
    }
}
