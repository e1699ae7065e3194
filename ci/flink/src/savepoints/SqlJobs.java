package savepoints;

import golden.Json;

import org.apache.flink.api.common.JobStatus;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.typeutils.RowTypeInfo;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamNode;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.table.api.internal.TableEnvironmentImpl;
import org.apache.flink.types.Row;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Savepoints of a real Flink SQL job, and restores of its evolved version.
 *
 * <pre>
 *   SqlJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   SqlJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 * </pre>
 *
 * <p>One job runs three queries over one table {@code src} of records: a {@code GROUP BY}
 * aggregation ({@code agg}) and two {@code ROW_NUMBER()} deduplications on processing time, keep
 * the first row ({@code first}) and keep the last row ({@code last}). Record {@code j} of the
 * spec's {@code keys * records_per_key} belongs to key {@code k = j % keys} and carries {@code x =
 * j} and {@code name = "n-j"} (some non-ASCII). The spec's {@code sql_version} picks the query
 * version: {@code 1} (the old job) or {@code 2} (the evolved job: {@code src} gains a nullable
 * column {@code note STRING}, the aggregation gains {@code MAX(note)} and both deduplications
 * select {@code note}). Everything else comes from the common {@link Spec} fields (backend,
 * storage, parallelism, max_parallelism, keys, records_per_key).
 *
 * <p>Operator uids: with the spec's {@code sql_uids} = {@code always} (default) the planner names
 * them itself ({@code table.exec.uid.generation=ALWAYS}: {@code <node id>_<transformation>}, e.g.
 * {@code 4_group-aggregate}); the node ids depend on the shape of the plan only, so the evolved job
 * (same shape, one more column) keeps them. With {@code plan_only} (Flink's default) the SQL
 * operators have no uid and the savepoint names them by the hashes Flink derives from the topology.
 *
 * <p>{@code generate} waits until the aggregation has counted every record (the savepoint barrier
 * then follows every record in every operator), stops the job with a CANONICAL savepoint and
 * writes {@code OUT/expected.json}: the uid of each stateful SQL operator and the last row each
 * query emitted per key. {@code restore} starts the spec's query version from a savepoint, in the
 * generator's topology with a bounded probe in place of the source: one record per old key
 * ({@code j = total + k}, {@code note} set for even keys) and one record of a new key ({@code k =
 * keys}); it writes {@code {"uids": [...]}} and then every changelog row the queries emitted, as
 * JSON lines {@code {"query", "kind", "row"}} in emission order per key. A restore Flink refuses
 * writes {@code OUT.jsonl.error} like
 * {@link Restore}.
 */
public final class SqlJobs {
    private SqlJobs() {}

    static final List<String> QUERIES = List.of("agg", "first", "last");
    static final AtomicCounter COUNTED = new AtomicCounter();
    /** query -> key -> last row emitted (generate). */
    static final Map<String, Map<Integer, Object>> LAST = new ConcurrentHashMap<>();
    /** Every changelog line the job emitted, in emission order (per subtask). */
    static final List<String> LINES = java.util.Collections.synchronizedList(new ArrayList<>());

    /** A counter the sink (in this JVM's MiniCluster) bumps; a class so it stays static-final. */
    static final class AtomicCounter {
        private final Map<Integer, Long> counts = new ConcurrentHashMap<>();

        void set(int key, long count) {
            counts.put(key, count);
        }

        long total() {
            return counts.values().stream().mapToLong(Long::longValue).sum();
        }

        void clear() {
            counts.clear();
        }
    }

    public static void main(String[] args) throws Exception {
        Batch.program("SqlJobs", args, SqlJobs::generate, SqlJobs::restore);
    }

    /** The query version a spec asks for (1: the old job, 2: the evolved job). */
    static int version(Path specFile) throws java.io.IOException {
        return version(specFile, "sql_version");
    }

    /** A spec's query version {@code field}: 1 (the old query, also when absent) or 2 (the evolved one). */
    @SuppressWarnings("unchecked")
    static int version(Path specFile, String field) throws java.io.IOException {
        Map<String, Object> m = (Map<String, Object>) Json.parse(
                new String(Files.readAllBytes(specFile), StandardCharsets.UTF_8));
        Object v = m.get(field);
        int n = v == null ? 1 : Integer.parseInt(v.toString());
        if (n != 1 && n != 2) {
            throw new IllegalArgumentException("spec: " + field + " must be 1 or 2, not " + v);
        }
        return n;
    }

    /** The row type of {@code src} in version {@code v}. */
    static RowTypeInfo rowInfo(int v) {
        return v == 1
                ? new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG, Types.STRING},
                        new String[] {"k", "x", "name"})
                : new RowTypeInfo(new TypeInformation<?>[] {Types.INT, Types.LONG, Types.STRING, Types.STRING},
                        new String[] {"k", "x", "name", "note"});
    }

    /** The queries of version {@code v}, in {@link #QUERIES} order. */
    static List<String> sql(int v) {
        String cols = v == 1 ? "k, x, name" : "k, x, name, note";
        String agg = v == 1
                ? "SELECT k, COUNT(*) AS cnt, SUM(x) AS total FROM src GROUP BY k"
                : "SELECT k, COUNT(*) AS cnt, SUM(x) AS total, MAX(note) AS top_note FROM src GROUP BY k";
        String first = "SELECT " + cols + " FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt) AS rn"
                + " FROM src) WHERE rn = 1";
        String last = "SELECT " + cols + " FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt DESC) AS rn"
                + " FROM src) WHERE rn = 1";
        return List.of(agg, first, last);
    }

    static String name(long j) {
        return (j % 4 == 1 ? "nö-" : "n-") + j;
    }

    /** Record {@code j} of the generating job, as a row of version {@code v}. */
    static Row record(Spec spec, long j, int v) {
        int k = (int) (j % spec.keys);
        return v == 1 ? Row.of(k, j, name(j)) : Row.of(k, j, name(j), null);
    }

    /** Probe record {@code p} of a restore: old keys first, then one new key. */
    static Row probe(Spec spec, long p, int v) {
        long j = spec.totalRecords() + p;
        int k = (int) p;
        String note = p % 2 == 0 ? "note-" + p : null;
        return v == 1 ? Row.of(k, j, name(j)) : Row.of(k, j, name(j), note);
    }

    /**
     * The spec's {@code sql_uids}: {@code ALWAYS} (default; the planner names every operator) or
     * {@code PLAN_ONLY} (Flink's default: no uids outside compiled plans, so the savepoint knows
     * the SQL operators by the uid hashes Flink derives from the topology).
     */
    @SuppressWarnings("unchecked")
    static String uidGeneration(Path specFile) throws java.io.IOException {
        Map<String, Object> m = (Map<String, Object>) Json.parse(
                new String(Files.readAllBytes(specFile), StandardCharsets.UTF_8));
        String v = String.valueOf(m.getOrDefault("sql_uids", "always")).toUpperCase(java.util.Locale.ROOT);
        if (!v.equals("ALWAYS") && !v.equals("PLAN_ONLY")) {
            throw new IllegalArgumentException("spec: sql_uids must be always or plan_only, not " + v);
        }
        return v;
    }

    static StreamTableEnvironment tables(StreamExecutionEnvironment env, DataStream<Row> rows, String uids) {
        StreamTableEnvironment t = StreamTableEnvironment.create(env);
        t.getConfig().set("table.exec.uid.generation", uids);
        resetNodeIds(t);
        t.createTemporaryView("src", t.fromDataStream(rows,
                Schema.newBuilder().columnByExpression("pt", "PROCTIME()").build()));
        return t;
    }

    /**
     * Numbers this job's plan nodes from 1, as in a fresh JVM. The planner takes node ids (the
     * {@code <id>} of the uids) from one counter per JVM, so the second job a JVM plans gets other
     * uids than the same job planned alone; a deployment plans each job in its own client JVM, and
     * the generator and checker run several jobs in one JVM, so they reset the counter first
     * (ExecNodeContext.resetIdCounter, through the planner's own class loader).
     */
    static void resetNodeIds(StreamTableEnvironment t) {
        try {
            ClassLoader planner = ((TableEnvironmentImpl) t).getPlanner().getClass().getClassLoader();
            planner.loadClass("org.apache.flink.table.planner.plan.nodes.exec.ExecNodeContext")
                    .getMethod("resetIdCounter").invoke(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot reset the planner's node ids", e);
        }
    }

    /** This job's queries of version {@code v} as changelogs (see the three-argument form). */
    static DataStream<String> changelogs(StreamTableEnvironment t, int v) {
        return changelogs(t, QUERIES, sql(v));
    }

    /**
     * Each query's changelog as JSON lines {"query", "kind", "row"}, unioned; {@code tags.get(i)} names
     * {@code queries.get(i)} and its sink's uid ({@code lines-<tag>}): every SQL job of the generator.
     */
    static DataStream<String> changelogs(StreamTableEnvironment t, List<String> tags, List<String> queries) {
        DataStream<String> all = null;
        for (int q = 0; q < tags.size(); q++) {
            Table table = t.sqlQuery(queries.get(q));
            String tag = tags.get(q);
            DataStream<String> lines = t.toChangelogStream(table)
                    .map(r -> line(tag, r)).returns(Types.STRING).uid("lines-" + tag).name("lines-" + tag);
            all = all == null ? lines : all.union(lines);
        }
        return all;
    }

    static String line(String query, Row r) {
        List<Object> fields = new ArrayList<>();
        for (int i = 0; i < r.getArity(); i++) {
            fields.add(r.getField(i));
        }
        return Json.write(Json.obj("query", query, "kind", r.getKind().shortString(), "row", fields));
    }

    /** The uid of each stateful SQL operator of the job (every node whose uid names a SQL transformation). */
    static List<String> sqlUids(StreamExecutionEnvironment env) {
        List<String> uids = new ArrayList<>();
        for (StreamNode n : env.getStreamGraph(false).getStreamNodes()) {
            String uid = n.getTransformationUID();
            if (uid != null && (uid.endsWith("group-aggregate") || uid.endsWith("deduplicate") || uid.endsWith("rank"))) {
                uids.add(uid);
            }
        }
        uids.sort(null);
        return uids;
    }

    static void generate(Path specFile, Path out, Path work) throws Exception {
        Spec spec = Spec.read(specFile);
        int v = version(specFile);
        COUNTED.clear();
        LAST.clear();
        LINES.clear();
        StreamExecutionEnvironment env = Job.env(Job.config(spec, work), spec);
        env.setParallelism(spec.parallelism);
        env.setMaxParallelism(spec.maxParallelism);
        SingleOutputStreamOperator<Long> records = env.fromSource(new IdleSequenceSource(0, spec.totalRecords() - 1),
                WatermarkStrategy.noWatermarks(), "records");
        job(env, records, j -> record(spec, j, v), v, uidGeneration(specFile));
        List<String> uids = sqlUids(env);
        JobClient client = env.executeAsync("generate sql " + spec.name);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (COUNTED.total() < spec.totalRecords()) {
            JobStatus st = client.getJobStatus().get();
            if (st.isGloballyTerminalState()) {
                client.getJobExecutionResult().get();
                throw new IllegalStateException("job ended before counting every record: " + st);
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out: counted " + COUNTED.total() + " of " + spec.totalRecords());
            }
            Thread.sleep(20);
        }
        Generate.stopWithSavepoint(client, out, work, Generate.savepointFormat(spec));
        Map<String, Object> outputs = new LinkedHashMap<>();
        for (String q : QUERIES) {
            List<Object> rowsOut = new ArrayList<>(new TreeMap<>(LAST.getOrDefault(q, Map.of())).values());
            outputs.put(q, rowsOut);
        }
        String json = Json.write(Json.obj("name", spec.name, "uids", uids, "outputs", outputs));
        Files.write(out.resolve("expected.json"), (json + "\n").getBytes(StandardCharsets.UTF_8));
    }

    /**
     * The job around the queries, the same for the generator and the checker: the source (uid
     * {@code records}), its rows, the queries' changelogs and the {@link Remember} map into a
     * discarding sink. The checker must build the very same topology: without uids (PLAN_ONLY)
     * Flink identifies the SQL operators by hashes of the whole graph, sources and sinks included.
     */
    static void job(StreamExecutionEnvironment env, SingleOutputStreamOperator<Long> records,
            MapFunction<Long, Row> toRow, int v, String uidGeneration) {
        DataStream<Row> rows = records.uid("records").setParallelism(1)
                .map(toRow).returns(rowInfo(v)).uid("rows").name("rows").setParallelism(1);
        StreamTableEnvironment t = tables(env, rows, uidGeneration);
        changelogs(t, v).map(new Remember()).returns(Types.STRING).uid("remember").name("remember")
                .sinkTo(new DiscardingSink<>()).uid("discard").name("discard");
    }

    /**
     * Keeps every changelog line in emission order, the last row each query emitted per key, and
     * the aggregation's count per key (the MiniCluster runs in this JVM).
     */
    static final class Remember implements MapFunction<String, String> {
        private static final long serialVersionUID = 1L;

        @Override
        @SuppressWarnings("unchecked")
        public String map(String value) {
            LINES.add(value);
            Map<String, Object> m = (Map<String, Object>) Json.parse(value);
            List<Object> row = (List<Object>) m.get("row");
            int key = Integer.parseInt(row.get(0).toString());
            String kind = (String) m.get("kind");
            if (kind.equals("-U") || kind.equals("-D")) {
                return value;
            }
            String q = (String) m.get("query");
            LAST.computeIfAbsent(q, x -> new ConcurrentHashMap<>()).put(key, row);
            if (q.equals("agg")) {
                COUNTED.set(key, Long.parseLong(row.get(1).toString()));
            }
            return value;
        }
    }

    static void restore(Path savepoint, Path specFile, Path out, Path work) throws Exception {
        Spec spec = Spec.read(specFile);
        int v = version(specFile);
        Configuration c = Job.config(spec, work);
        c.setString("execution.state-recovery.path", savepoint.toUri().toString());
        c.setString("execution.state-recovery.ignore-unclaimed-state", "true");
        StreamExecutionEnvironment env = Job.env(c, spec);
        env.setParallelism(spec.parallelism);
        env.setMaxParallelism(spec.maxParallelism);
        LINES.clear();
        SingleOutputStreamOperator<Long> probes = env.fromSource(new ProbeSource(0, spec.keys), WatermarkStrategy.noWatermarks(),
                "records");
        job(env, probes, p -> probe(spec, p, v), v, uidGeneration(specFile));
        List<String> uids = sqlUids(env);
        try {
            env.execute("restore sql " + spec.name);
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        StringBuilder b = new StringBuilder();
        Json.write(Json.obj("uids", uids), b);
        b.append('\n');
        synchronized (LINES) {
            for (String line : LINES) {
                b.append(line).append('\n');
            }
        }
        Files.write(out, b.toString().getBytes(StandardCharsets.UTF_8));
    }

    /**
     * The probe records, in place of the old job's source (same uid and position in the graph, so
     * the topology is the generator's): bounded, and restored with its own splits rather than the
     * old source's leftovers.
     */
    static final class ProbeSource extends NumberSequenceSource {
        private static final long serialVersionUID = 1L;

        ProbeSource(long from, long to) {
            super(from, to);
        }

        @Override
        public SplitEnumerator<NumberSequenceSplit, Collection<NumberSequenceSplit>> restoreEnumerator(
                SplitEnumeratorContext<NumberSequenceSplit> ctx, Collection<NumberSequenceSplit> checkpoint) {
            return createEnumerator(ctx);
        }
    }
}
