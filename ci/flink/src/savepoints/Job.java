package savepoints;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;

import java.nio.file.Path;

/**
 * What the generator's and the checker's jobs share: the configuration a spec stands for, the key
 * selector, and the stateful operator (same uid, max parallelism and parallelism on both sides).
 *
 * <p>Configuration keys are set under their Flink 2.x names and, where 1.20 used another name,
 * under that one too, so one source compiles and behaves the same against both releases.
 */
final class Job {
    private Job() {}

    static Configuration config(Spec spec, Path work) {
        Configuration c = new Configuration();
        c.setString("state.backend.type", spec.backend);
        c.setString("execution.checkpointing.snapshot-compression", Boolean.toString(spec.compression));
        c.setString("restart-strategy.type", "none");
        c.setString("execution.checkpointing.storage", spec.storage);
        c.setString("state.checkpoint-storage", spec.storage);
        if (spec.storage.equals("filesystem")) {
            String dir = work.resolve("checkpoints").toUri().toString();
            c.setString("execution.checkpointing.dir", dir);
            c.setString("state.checkpoints.dir", dir);
            c.setString("execution.checkpointing.data-inline-threshold", spec.inlineThreshold + "b");
            c.setString("state.storage.fs.memory-threshold", spec.inlineThreshold + "b");
        }
        if (spec.format.equals("checkpoint")) {
            c.setString("execution.checkpointing.interval", "100ms");
            c.setString("execution.checkpointing.externalized-checkpoint-retention", "RETAIN_ON_CANCELLATION");
            c.setString("execution.checkpointing.incremental", Boolean.toString(spec.incremental));
            c.setString("state.backend.incremental", Boolean.toString(spec.incremental));
            c.setString("execution.checkpointing.num-retained", "3");
            c.setString("state.checkpoints.num-retained", "3");
        }
        c.setString("state.backend.rocksdb.localdir", work.resolve("rocksdb").toString());
        c.setString("io.tmp.dirs", work.resolve("io").toString());
        return c;
    }

    static StreamExecutionEnvironment env(Configuration c, Spec spec) {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(c);
        env.setParallelism(spec.parallelism);
        return env;
    }

    static RowType rowType(String sql) {
        LogicalType t = LogicalTypeParser.parse(sql, Job.class.getClassLoader());
        if (!(t instanceof RowType)) {
            throw new IllegalArgumentException("events_type must be a ROW type: " + sql);
        }
        return (RowType) t;
    }

    /** The stateful operator: keyed by the spec's key of each sequence number, with the spec's uid. */
    static SingleOutputStreamOperator<String> stateful(
            Spec spec, DataStream<Long> input, KeyedProcessFunction<Object, Long, String> fn) {
        return placed(spec, keyed(spec, input).process(fn, Types.STRING));
    }

    /** The same position, uid and parallelism with another operator running the function (the checker's). */
    static SingleOutputStreamOperator<String> stateful(
            Spec spec, DataStream<Long> input, OneInputStreamOperator<Long, String> operator) {
        return placed(spec, keyed(spec, input).transform("state", Types.STRING, operator));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static KeyedStream<Long, Object> keyed(Spec spec, DataStream<Long> input) {
        return input.keyBy((KeySelector) new KeyOf(spec), (TypeInformation) spec.keyInfo());
    }

    private static SingleOutputStreamOperator<String> placed(Spec spec, SingleOutputStreamOperator<String> out) {
        out.uid(spec.uid).name("state").setParallelism(spec.parallelism).setMaxParallelism(spec.maxParallelism);
        return out;
    }

    static final class KeyOf implements KeySelector<Long, Object> {
        private static final long serialVersionUID = 1L;
        private final Spec spec;

        KeyOf(Spec spec) {
            this.spec = spec;
        }

        @Override
        public Object getKey(Long j) {
            return spec.key(spec.keyIndex(j));
        }
    }
}
