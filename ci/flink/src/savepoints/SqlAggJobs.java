package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.table.api.DataTypes;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.Collector;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Savepoints of Flink SQL aggregations whose state goes beyond a plain accumulator row: distinct
 * aggregates, FIRST_VALUE / LAST_VALUE / LISTAGG (with and without retraction) and over
 * aggregations, and restores that continue them.
 *
 * <pre>
 *   SqlAggJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   SqlAggJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 * </pre>
 *
 * <p>Records as in {@link SqlJobs} (record {@code j}: key {@code k = j % keys}, {@code x = j},
 * {@code name}) with event time {@link WindowJobs#T0}{@code + j}, as a table {@code src(k INT, x
 * BIGINT, name STRING[, note STRING], rt TIMESTAMP_LTZ(3) rowtime, pt AS PROCTIME())} whose
 * watermark is the stream's ({@code SOURCE_WATERMARK()}: none before the savepoint, so the
 * event-time over aggregations still buffer every row). The queries ({@link #QUERIES}):
 * <ul>
 *   <li>{@code distinct}: {@code COUNT(DISTINCT name), SUM(DISTINCT x % 3)} per key (the
 *   {@code distinctAcc_N} map states and the accumulator row);
 *   <li>{@code values}: {@code FIRST_VALUE(name), LAST_VALUE(name), LISTAGG(name)} per key on an
 *   insert-only input (LISTAGG's accumulator keeps a state-backed {@code ListView});
 *   <li>{@code retract}: the same three and a {@code COUNT(DISTINCT name)} over an updating input
 *   (each key's {@code MAX(name)}, grouped by {@code k % 3}): the retracting accumulators keep
 *   state-backed {@code MapView}s;
 *   <li>{@code over_rows}, {@code over_range}, {@code over_unbounded}: event-time over windows
 *   ({@code ROWS 2 PRECEDING}, {@code RANGE INTERVAL '10' SECOND PRECEDING}, {@code ROWS UNBOUNDED
 *   PRECEDING}): rows buffered by timestamp, accumulators, cleanup timestamps;
 *   <li>{@code over_proc}: a processing-time {@code RANGE INTERVAL '1' HOUR PRECEDING} window;
 *   <li>{@code items}: a user's aggregate function ({@link ItemsAgg}) whose accumulator keeps user
 *   structured types inside an ARRAY and a MAP.
 * </ul>
 * The spec's {@code sql_agg_version} 2 is the evolved job a migrated savepoint restores into:
 * {@code src} gains a nullable {@code note STRING} and the event-time over windows also select it (their
 * buffered input rows gain the column). The planner names the operators ({@code
 * table.exec.uid.generation=ALWAYS}, node ids from 1 per job; the evolved plan has the same shape).
 * {@code generate} stops the job with a canonical savepoint once the rows operator has seen every
 * record and writes an empty {@code expected.json} (the tests compare restores of the original and
 * of what statemorph wrote). {@code restore} sends one more record per key (waiting a second after
 * the last, so the processing-time window emits it), ends the input (the final watermark fires the
 * buffered event-time rows) and writes every changelog row the queries emitted, JSON lines
 * {@code {"query", "kind", "row"}}.
 */
public final class SqlAggJobs {
    private SqlAggJobs() {}

    static final List<String> QUERIES = List.of("distinct", "values", "retract", "over_rows", "over_range",
            "over_unbounded", "over_proc", "items");
    static final AtomicLong SEEN = new AtomicLong();

    public static void main(String[] args) throws Exception {
        Batch.program("SqlAggJobs", args, (spec, out, w) -> generate(Spec.read(spec), version(spec), out, w),
                (sp, spec, out, w) -> restore(sp, Spec.read(spec), version(spec), out, w));
    }

    /** The spec's {@code sql_agg_version}: 1 (the old job) or 2 (the evolved one). */
    static int version(Path specFile) throws java.io.IOException {
        return SqlJobs.version(specFile, "sql_agg_version");
    }

    static void generate(Spec spec, int version, Path out, Path work) throws Exception {
        if (version != 1) {
            throw new IllegalArgumentException("generate takes version 1 (version 2 is what a migrated savepoint restores into)");
        }
        SEEN.set(0);
        StreamExecutionEnvironment env = SqlWindowJobs.environment(Job.config(spec, work), spec);
        SingleOutputStreamOperator<Long> records = env.fromSource(
                new IdleSequenceSource(0, spec.totalRecords() - 1), timestamps(), "records");
        job(env, records, spec, version, -1).sinkTo(new DiscardingSink<>()).uid("discard").name("discard");
        JobClient client = env.executeAsync("generate sql aggregates " + spec.name);
        Generate.awaitCount(client, SEEN, spec.totalRecords()); // the barrier follows every row to the aggregations
        Generate.stopWithSavepoint(client, out, work); // retried while a task is still starting
        Generate.writeExpected(spec.name, List.of(), out);
    }

    static void restore(Path savepoint, Spec spec, int version, Path out, Path work) throws Exception {
        StreamExecutionEnvironment env = SqlWindowJobs.environment(Restore.restoring(savepoint, spec, work), spec);
        long last = spec.totalRecords() + spec.keys - 1;
        SingleOutputStreamOperator<Long> probe = env.fromSource(
                new SqlJobs.ProbeSource(spec.totalRecords(), last), timestamps(), "records");
        StringBuilder b = new StringBuilder();
        try (CloseableIterator<String> it = job(env, probe, spec, version, last).executeAndCollect("restore " + spec.name)) {
            while (it.hasNext()) {
                b.append(it.next()).append('\n');
            }
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        Files.write(out, b.toString().getBytes(StandardCharsets.UTF_8));
    }

    private static WatermarkStrategy<Long> timestamps() {
        return WatermarkStrategy.<Long>noWatermarks()
                .withTimestampAssigner((SerializableTimestampAssigner<Long>) (j, ts) -> WindowJobs.T0 + j);
    }

    /** The queries of version {@code v}, in {@link #QUERIES} order. */
    static List<String> sql(int v) {
        String note = v == 1 ? "" : ", note";
        String over = "SELECT k, x, name" + note + ", SUM(x) OVER w AS s, COUNT(name) OVER w AS c FROM src WINDOW w AS "
                + "(PARTITION BY k ORDER BY ";
        return List.of(
                "SELECT k, COUNT(DISTINCT name) AS names, SUM(DISTINCT x % 3) AS s3 FROM src GROUP BY k",
                "SELECT k, FIRST_VALUE(name) AS first_name, LAST_VALUE(name) AS last_name, LISTAGG(name) AS names"
                        + " FROM src GROUP BY k",
                "SELECT g, FIRST_VALUE(name) AS first_name, LAST_VALUE(name) AS last_name, LISTAGG(name, ';') AS names,"
                        + " COUNT(DISTINCT name) AS distinct_names"
                        + " FROM (SELECT k % 3 AS g, k, MAX(name) AS name FROM src GROUP BY k) GROUP BY g",
                over + "rt ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
                over + "rt RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW)",
                over + "rt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)",
                "SELECT k, x, name, SUM(x) OVER w AS s, COUNT(name) OVER w AS c FROM src WINDOW w AS "
                        + "(PARTITION BY k ORDER BY pt RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW)",
                "SELECT k, items_agg(x, name) AS items FROM src GROUP BY k");
    }

    /** The queries over {@code records}, their changelogs as JSON lines; {@code last}: the probe's last record (or -1). */
    static DataStream<String> job(StreamExecutionEnvironment env, SingleOutputStreamOperator<Long> records, Spec spec,
            int version, long last) {
        RowTypeInfo info = version == 1
                ? new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG, Types.STRING}, new String[] {"k", "x", "name"})
                : new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG, Types.STRING, Types.STRING},
                        new String[] {"k", "x", "name", "note"});
        DataStream<Row> rows = records.uid("records").setParallelism(1)
                .flatMap(new ToRow(spec, version, last)).returns(info).uid("rows").name("rows").setParallelism(1);
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        t.getConfig().set("table.exec.uid.generation", "ALWAYS");
        SqlJobs.resetNodeIds(t);
        t.createTemporarySystemFunction("items_agg", ItemsAgg.class);
        t.createTemporaryView("src", t.fromDataStream(rows, Schema.newBuilder()
                .columnByMetadata("rt", DataTypes.TIMESTAMP_LTZ(3), "rowtime")
                .columnByExpression("pt", "PROCTIME()")
                .watermark("rt", "SOURCE_WATERMARK()")
                .build()));
        return SqlJobs.changelogs(t, QUERIES, sql(version));
    }

    /** Record {@code j} as a row of version {@code v} ({@code note} set on even probe keys); counts what it saw. */
    static final class ToRow implements FlatMapFunction<Long, Row> {
        private static final long serialVersionUID = 1L;
        private final Spec spec;
        private final int version;
        private final long last;

        ToRow(Spec spec, int version, long last) {
            this.spec = spec;
            this.version = version;
            this.last = last;
        }

        @Override
        public void flatMap(Long j, Collector<Row> out) throws InterruptedException {
            SEEN.incrementAndGet();
            int k = (int) (j % spec.keys);
            String name = SqlJobs.name(j);
            Row r = version == 1 ? Row.of(k, j, name)
                    : Row.of(k, j, name, j >= spec.totalRecords() && k % 2 == 0 ? "note-" + k : null);
            out.collect(r);
            if (j == last) {
                Thread.sleep(1000); // the processing-time over window's timers fire before the input ends
            }
        }
    }
}
