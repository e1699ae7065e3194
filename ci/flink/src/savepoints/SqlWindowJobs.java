package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;

import java.nio.file.Path;
import java.time.Instant;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Savepoints of Flink SQL window aggregations with every window open, and restores that fire them.
 *
 * <pre>
 *   SqlWindowJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   SqlWindowJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 * </pre>
 *
 * <p>Records as in {@link WindowJobs} (record {@code j}: key {@code k = j % keys}, {@code x = j},
 * event time {@link WindowJobs#T0}{@code + j}), as a table {@code src(k INT, x BIGINT, rt
 * TIMESTAMP_LTZ(3))} whose rowtime {@code rt} is the stream's timestamp and whose watermark is the
 * stream's ({@code SOURCE_WATERMARK()}: none before the savepoint). Two queries count and sum each
 * key's records per one-minute tumbling window:
 * <ul>
 *   <li>{@code group}: the group-window form, {@code GROUP BY k, TUMBLE(rt, INTERVAL '1' MINUTE)},
 *   whose operator keeps its accumulators in Flink SQL's {@code TimeWindow} namespace;
 *   <li>{@code tvf}: the window table function, {@code TABLE(TUMBLE(TABLE src, DESCRIPTOR(rt), ...))},
 *   whose operator keeps them under the window's end, a {@code Long} namespace.
 * </ul>
 * The planner names the operators ({@code table.exec.uid.generation=ALWAYS}, node ids from 1 per
 * job). {@code generate} stops the job with a canonical savepoint once the rows operator has seen
 * every record (the savepoint barrier follows them into the aggregations) and writes {@code expected.json}: the windows a restore fires. {@code restore}
 * sends one more record per key and ends the input; the final watermark fires every window. Lines:
 * {@code {"key", "state": query, "value": {"window": [start, end], "cnt", "total"}}}. The spec's
 * {@code sql_window_version} 2 is the evolved job a migrated savepoint restores into: both queries
 * also select {@code MAX(x) AS top} (same plan shape, so the same uids), whose accumulator joins the
 * end of the accumulator row; the lines then have {@code top}.
 */
public final class SqlWindowJobs {
    private SqlWindowJobs() {}

    static final List<String> QUERIES = List.of("group", "tvf");
    static final AtomicLong SEEN = new AtomicLong();
    static volatile boolean generating;

    public static void main(String[] args) throws Exception {
        Batch.program("SqlWindowJobs", args, (spec, out, w) -> generate(Spec.read(spec), version(spec), out, w),
                (sp, spec, out, w) -> restore(sp, Spec.read(spec), version(spec), out, w));
    }

    /** The spec's {@code sql_window_version}: 1 (count and sum) or 2 (also {@code MAX(x) AS top}). */
    static int version(Path specFile) throws java.io.IOException {
        return SqlJobs.version(specFile, "sql_window_version");
    }

    static void generate(Spec spec, int version, Path out, Path work) throws Exception {
        SEEN.set(0);
        generating = true;
        try {
            StreamExecutionEnvironment env = environment(Job.config(spec, work), spec);
            SingleOutputStreamOperator<Long> records = env.fromSource(
                    new IdleSequenceSource(0, spec.totalRecords() - 1), timestamps(), "records");
            job(env, records, spec, version).sinkTo(new DiscardingSink<>()).uid("discard").name("discard");
            JobClient client = env.executeAsync("generate sql windows " + spec.name);
            Generate.awaitCount(client, SEEN, spec.totalRecords()); // the barrier follows every row to the aggregations
            Generate.stopWithSavepoint(client, out, work);
        } finally {
            generating = false;
        }
        if (version != 1) {
            throw new IllegalArgumentException("generate takes version 1 (version 2 is what a migrated savepoint restores into)");
        }
        Generate.writeExpected(spec.name, Entries.sorted(expected(spec), Map.of(), QUERIES), out);
    }

    static void restore(Path savepoint, Spec spec, int version, Path out, Path work) throws Exception {
        StreamExecutionEnvironment env = environment(Restore.restoring(savepoint, spec, work), spec);
        SingleOutputStreamOperator<Long> probe = env.fromSource(
                new SqlJobs.ProbeSource(spec.totalRecords(), spec.totalRecords() + spec.keys - 1), timestamps(), "records");
        WindowJobs.writeFired(job(env, probe, spec, version), "restore " + spec.name, QUERIES, out);
    }

    static StreamExecutionEnvironment environment(org.apache.flink.configuration.Configuration c, Spec spec) {
        StreamExecutionEnvironment env = Job.env(c, spec);
        env.setMaxParallelism(spec.maxParallelism);
        return env;
    }

    private static WatermarkStrategy<Long> timestamps() {
        return WatermarkStrategy.<Long>noWatermarks()
                .withTimestampAssigner((SerializableTimestampAssigner<Long>) (j, ts) -> WindowJobs.T0 + j);
    }

    /** The two window aggregations over {@code records}, their fired windows as JSON lines. */
    static DataStream<String> job(StreamExecutionEnvironment env, SingleOutputStreamOperator<Long> records, Spec spec,
            int version) {
        DataStream<Row> rows = records.uid("records").setParallelism(1)
                .map(new ToRow(spec)).returns(new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG},
                        new String[] {"k", "x"}))
                .uid("rows").name("rows").setParallelism(1);
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        t.getConfig().set("table.exec.uid.generation", "ALWAYS");
        SqlJobs.resetNodeIds(t);
        t.createTemporaryView("src", t.fromDataStream(rows, Schema.newBuilder()
                .columnByMetadata("rt", org.apache.flink.table.api.DataTypes.TIMESTAMP_LTZ(3), "rowtime")
                .watermark("rt", "SOURCE_WATERMARK()")
                .build()));
        String aggs = version == 1 ? "COUNT(*) AS cnt, SUM(x) AS total" : "COUNT(*) AS cnt, SUM(x) AS total, MAX(x) AS top";
        String group = "SELECT k, TUMBLE_START(rt, INTERVAL '1' MINUTE) AS ws, TUMBLE_END(rt, INTERVAL '1' MINUTE) AS we, "
                + aggs + " FROM src GROUP BY k, TUMBLE(rt, INTERVAL '1' MINUTE)";
        String tvf = "SELECT k, window_start, window_end, " + aggs
                + " FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(rt), INTERVAL '1' MINUTE)) GROUP BY k, window_start, window_end";
        DataStream<String> a = t.toDataStream(t.sqlQuery(group)).map(new Line("group")).returns(Types.STRING)
                .uid("lines-group").name("lines-group");
        DataStream<String> b = t.toDataStream(t.sqlQuery(tvf)).map(new Line("tvf")).returns(Types.STRING)
                .uid("lines-tvf").name("lines-tvf");
        return a.union(b);
    }

    static Map<String, Map<String, Object>> expected(Spec spec) {
        Map<String, Map<String, Object>> out = new HashMap<>();
        for (int k = 0; k < spec.keys; k++) {
            long cnt = 0;
            long total = 0;
            for (long j = k; j < spec.totalRecords() + spec.keys; j += spec.keys) {
                cnt++;
                total += j;
            }
            Map<String, Object> v = Json.obj("window", List.of(WindowJobs.T0, WindowJobs.T0 + WindowJobs.MINUTE),
                    "cnt", cnt, "total", total);
            Map<String, Object> states = new LinkedHashMap<>();
            states.put("group", v);
            states.put("tvf", v);
            out.put(Json.write(k), states);
        }
        return out;
    }

    static long millis(Object t) {
        if (t instanceof Instant) {
            return ((Instant) t).toEpochMilli();
        }
        return ((LocalDateTime) t).toInstant(java.time.ZoneOffset.UTC).toEpochMilli();
    }

    static final class ToRow implements MapFunction<Long, Row> {
        private static final long serialVersionUID = 1L;
        private final Spec spec;

        ToRow(Spec spec) {
            this.spec = spec;
        }

        @Override
        public Row map(Long j) {
            SEEN.incrementAndGet();
            return Row.of((int) (j % spec.keys), j);
        }
    }

    static final class Line implements MapFunction<Row, String> {
        private static final long serialVersionUID = 1L;
        private final String query;

        Line(String query) {
            this.query = query;
        }

        @Override
        public String map(Row r) {
            if (generating) {
                throw new IllegalStateException("no window may fire before the savepoint: " + r);
            }
            List<Long> window = new ArrayList<>(List.of(millis(r.getField(1)), millis(r.getField(2))));
            Map<String, Object> value = Json.obj("window", window, "cnt", r.getField(3), "total", r.getField(4));
            if (r.getArity() > 5) {
                value.put("top", r.getField(5));
            }
            return Json.write(Json.obj("key", r.getField(0), "state", query, "value", value));
        }
    }
}
