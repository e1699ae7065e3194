package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.SerializableTimestampAssigner;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
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

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Savepoints of Flink SQL's Top-N, regular join and interval join operators, and restores of the
 * same or the evolved queries.
 *
 * <pre>
 *   SqlJoinJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   SqlJoinJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 * </pre>
 *
 * <p>Records as in {@link SqlWindowJobs} (record {@code j}: key {@code k = j % keys}, {@code x = j},
 * {@code name} as {@link SqlJobs#name}, event time {@link WindowJobs#T0}{@code + j}) as a table
 * {@code src(k INT, x BIGINT, name STRING[, note STRING], rt TIMESTAMP_LTZ(3) rowtime)} whose
 * watermark is the stream's (none before the savepoint). Three queries:
 * <ul>
 *   <li>{@code topn}: the two largest {@code x} per key ({@code ROW_NUMBER() OVER (PARTITION BY k
 *   ORDER BY x DESC) <= 2}; Flink's AppendOnlyTopNFunction: a map of sort key to the list of rows);
 *   <li>{@code join}: every record joined with its key's {@code MAX(x)} and {@code MAX(name)} (a regular inner join; the
 *   left side has no unique key: a map of row to count, the right side's join key is its unique
 *   key: a value of row);
 *   <li>{@code interval}: {@code x} divisible by 3 joined with the other {@code x} of the same key within ten
 *   minutes of event time (an interval join: per side a map of timestamp to a list of (row,
 *   emitted) pairs, and its cleanup timers);
 *   <li>{@code ranked}: per {@code MOD(k, 2)} the two keys of the largest {@code SUM(x)} (Top-N over
 *   an updating input, Flink's RetractableTopNFunction: a map of sort key to the list of rows and a
 *   value of the sorted map of sort key to count);
 *   <li>{@code outer}: each key's {@code MIN(x)} and {@code COUNT(*)} left-joined with the record of
 *   that {@code x} (an outer join: the left side's unique key {@code k} is not the join key, so a map
 *   of unique key to (row, number of matches); the right side a map of row to count).
 * </ul>
 * The spec's {@code sql_join_version} 2 is the evolved job: {@code src} gains a nullable
 * {@code note STRING}; Top-N selects it, the right side of the join also selects {@code MAX(note)},
 * the interval join selects both sides' notes, the ranked keys {@code MAX(note)} and the outer join's
 * left side {@code MIN(note)}, so every state's rows gain a nullable column
 * (the plan's shape, and so the uids, stay the same; the join's left rows, map keys, keep their
 * columns). {@code generate} stops the job with a canonical savepoint once the rows operator has
 * seen every record and writes {@code expected.json} (the stateful SQL operators' uids);
 * {@code restore} sends one probe record per key and one of a new key ({@code j = total + p},
 * {@code note} set for even {@code p}), ends the input and writes every changelog row the queries
 * emitted, as JSON lines {@code {"query", "kind", "row"}}.
 */
public final class SqlJoinJobs {
    private SqlJoinJobs() {}

    static final List<String> QUERIES = List.of("topn", "join", "interval", "ranked", "outer", "fast", "proc_interval");
    static final AtomicLong SEEN = new AtomicLong();

    public static void main(String[] args) throws Exception {
        Batch.program("SqlJoinJobs", args, (spec, out, w) -> generate(Spec.read(spec), version(spec), out, w),
                (sp, spec, out, w) -> restore(sp, Spec.read(spec), version(spec), out, w));
    }

    /** The spec's {@code sql_join_version}: 1 (the old queries) or 2 (the rows gain {@code note}). */
    static int version(Path specFile) throws java.io.IOException {
        return SqlJobs.version(specFile, "sql_join_version");
    }

    static void generate(Spec spec, int version, Path out, Path work) throws Exception {
        SEEN.set(0);
        StreamExecutionEnvironment env = SqlWindowJobs.environment(Job.config(spec, work), spec);
        SingleOutputStreamOperator<Long> records = env.fromSource(
                new IdleSequenceSource(0, spec.totalRecords() - 1), timestamps(), "records");
        StreamTableEnvironment t = tables(env, records, spec, version, false);
        changelogs(t, version).sinkTo(new DiscardingSink<>()).uid("discard").name("discard");
        List<String> uids = new ArrayList<>();
        for (org.apache.flink.streaming.api.graph.StreamNode n : env.getStreamGraph(false).getStreamNodes()) {
            String uid = n.getTransformationUID();
            if (uid != null && uid.matches("\\d+_(rank|join|interval-join|group-aggregate)")) {
                uids.add(uid);
            }
        }
        uids.sort(null);
        JobClient client = env.executeAsync("generate sql joins " + spec.name);
        Generate.awaitCount(client, SEEN, spec.totalRecords()); // the barrier follows every row to the operators
        Generate.stopWithSavepoint(client, out, work); // retried while a task is still starting
        String json = Json.write(Json.obj("name", spec.name, "uids", uids));
        Files.write(out.resolve("expected.json"), (json + "\n").getBytes(StandardCharsets.UTF_8));
    }

    static void restore(Path savepoint, Spec spec, int version, Path out, Path work) throws Exception {
        StreamExecutionEnvironment env = SqlWindowJobs.environment(Restore.claimingAll(savepoint, spec, work), spec);
        SingleOutputStreamOperator<Long> probe = env.fromSource(
                new SqlJobs.ProbeSource(spec.totalRecords(), spec.totalRecords() + spec.keys), timestamps(), "records");
        StreamTableEnvironment t = tables(env, probe, spec, version, true);
        DataStream<String> lines = changelogs(t, version);
        StringBuilder b = new StringBuilder();
        try (CloseableIterator<String> it = lines.executeAndCollect("restore sql joins " + spec.name)) {
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

    /** {@code src} over {@code records}: the generator's records, or (restoring) the probe's. */
    static StreamTableEnvironment tables(StreamExecutionEnvironment env, SingleOutputStreamOperator<Long> records,
            Spec spec, int version, boolean probing) {
        RowTypeInfo info = version == 1
                ? new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG, Types.STRING},
                        new String[] {"k", "x", "name"})
                : new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG, Types.STRING, Types.STRING},
                        new String[] {"k", "x", "name", "note"});
        DataStream<Row> rows = records.uid("records").setParallelism(1)
                .map(new ToRow(spec, version, probing)).returns(info).uid("rows").name("rows").setParallelism(1);
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        t.getConfig().set("table.exec.uid.generation", "ALWAYS");
        SqlJobs.resetNodeIds(t);
        t.createTemporaryView("src", t.fromDataStream(rows, Schema.newBuilder()
                .columnByMetadata("rt", DataTypes.TIMESTAMP_LTZ(3), "rowtime")
                .watermark("rt", "SOURCE_WATERMARK()")
                .build()));
        // the same rows with a processing-time attribute, for the processing-time interval join
        t.createTemporaryView("psrc", t.fromDataStream(rows, Schema.newBuilder()
                .columnByExpression("pt", "PROCTIME()")
                .build()));
        return t;
    }

    /** The queries of version {@code v}, in {@link #QUERIES} order. */
    static List<String> sql(int v) {
        boolean two = v == 2;
        String topn = "SELECT k, x, name" + (two ? ", note" : "") + " FROM (SELECT *, ROW_NUMBER() OVER ("
                + "PARTITION BY k ORDER BY x DESC) AS rn FROM src) WHERE rn <= 2";
        String join = "SELECT a.k, a.x, b.mx, b.top_name" + (two ? ", b.top_note" : "") + " FROM src AS a JOIN (SELECT k,"
                + " MAX(x) AS mx, MAX(name) AS top_name" + (two ? ", MAX(note) AS top_note" : "")
                + " FROM src GROUP BY k) AS b ON a.k = b.k";
        String interval = "SELECT a.k, a.x, b.x" + (two ? ", a.note, b.note" : "") + " FROM src AS a, src AS b"
                + " WHERE a.k = b.k AND MOD(a.x, 3) = 0 AND MOD(b.x, 3) <> 0"
                + " AND a.rt BETWEEN b.rt - INTERVAL '10' MINUTE AND b.rt + INTERVAL '10' MINUTE";
        // (low_note before b.x: the join's own field order, so version 2 plans no extra Calc and the
        // later queries' node ids, and so their uids, stay version 1's)
        String outer = "SELECT a.k, a.mn, a.cnt" + (two ? ", a.low_note" : "") + ", b.x FROM (SELECT k, MIN(x) AS mn,"
                + " COUNT(*) AS cnt" + (two ? ", MIN(note) AS low_note" : "") + " FROM src GROUP BY k) AS a"
                + " LEFT JOIN src AS b ON a.mn = b.x";
        String ranked = "SELECT g, k, total, top_name" + (two ? ", top_note" : "") + " FROM (SELECT *, ROW_NUMBER()"
                + " OVER (PARTITION BY g ORDER BY total DESC) AS rn FROM (SELECT MOD(k, 2) AS g, k, SUM(x) AS total,"
                + " MAX(name) AS top_name" + (two ? ", MAX(note) AS top_note" : "") + " FROM src GROUP BY k)) WHERE rn <= 2";
        // MAX(x) only grows (its input is insert-only) and the partition key g is inside the upsert
        // key (g, k): the planner's UpdateFastStrategy, UpdatableTopNFunction (Top-2, not Top-1)
        String fast = "SELECT g, k, top, top_name" + (two ? ", top_note" : "") + " FROM (SELECT *, ROW_NUMBER()"
                + " OVER (PARTITION BY g ORDER BY top DESC) AS rn FROM (SELECT MOD(k, 2) AS g, k, MAX(x) AS top,"
                + " MAX(name) AS top_name" + (two ? ", MAX(note) AS top_note" : "")
                + " FROM src GROUP BY MOD(k, 2), k)) WHERE rn <= 2";
        // processing time: ten years wide, so a committed savepoint's buffered rows still match
        // (and their cleanup timers stay in the future) whenever a test restores it
        String procInterval = "SELECT a.k, a.x, b.x" + (two ? ", a.note, b.note" : "") + " FROM psrc AS a, psrc AS b"
                + " WHERE a.k = b.k AND MOD(a.x, 3) = 0 AND MOD(b.x, 3) <> 0"
                + " AND a.pt BETWEEN b.pt - INTERVAL '99' DAY * 37 AND b.pt + INTERVAL '99' DAY * 37";
        return List.of(topn, join, interval, ranked, outer, fast, procInterval);
    }

    /** Each query's changelog as JSON lines {"query", "kind", "row"}, unioned. */
    static DataStream<String> changelogs(StreamTableEnvironment t, int v) {
        return SqlJobs.changelogs(t, QUERIES, sql(v));
    }

    /** Record {@code j} as a row of version {@code v}; a probe's {@code note} is set for even {@code p = j - total}. */
    static final class ToRow implements MapFunction<Long, Row> {
        private static final long serialVersionUID = 1L;
        private final Spec spec;
        private final int version;
        private final boolean probing;

        ToRow(Spec spec, int version, boolean probing) {
            this.spec = spec;
            this.version = version;
            this.probing = probing;
        }

        @Override
        public Row map(Long j) {
            SEEN.incrementAndGet();
            long p = j - spec.totalRecords();
            int k = (int) (probing ? p : j % spec.keys);
            String name = SqlJobs.name(j);
            if (version == 1) {
                return Row.of(k, j, name);
            }
            return Row.of(k, j, name, probing && p % 2 == 0 ? "note-" + p : null);
        }
    }
}
