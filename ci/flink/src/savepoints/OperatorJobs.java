package savepoints;

import golden.Json;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.BroadcastState;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.lib.NumberSequenceSource;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.co.KeyedBroadcastProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.util.Collector;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Savepoints of a job whose state is operator state only: broadcast state and operator list /
 * union list state (what every source keeps), and restores of them.
 *
 * <pre>
 *   OperatorJobs generate WORK SPEC OUTDIR [SPEC OUTDIR ...]
 *   OperatorJobs restore  WORK SAVEPOINT SPEC OUT.jsonl [SAVEPOINT SPEC OUT.jsonl ...]
 * </pre>
 *
 * <p>Two stateful operators at the spec's parallelism, beside the sources {@code records} (the
 * spec's records) and {@code rules} (one per key index):
 * <ul>
 *   <li>{@code rules-op}: the keyed records connected to the broadcast rules; its broadcast state
 *   {@code rules} is a {@code MapStateDescriptor<String, RowData>} of the spec's {@code events_type}
 *   ({@code RowDataSerializer}); rule {@code i} is {@code "rule-i"} ({@code "règle-i"} for every 5th)
 *   to an events row ({@code metadata} null for every 7th). It keeps no keyed state.</li>
 *   <li>{@code list-op}: a map over the records (rebalanced) that is a {@code CheckpointedFunction}
 *   with the list state {@code buffer} ({@code ListState<Long>}, SPLIT_DISTRIBUTE: the record
 *   numbers the subtask saw) and the union list state {@code offsets} ({@code ListState<String>},
 *   UNION: {@code "subtask-i:count"}).</li>
 * </ul>
 *
 * <p>The entries both verbs write (one JSON object a line): {@code {"state": "rules", "subtask": i,
 * "value": {key: row}}} per subtask, {@code {"state": "buffer", "value": [sorted elements of every
 * subtask]}} (which subtask holds an element is Flink's choice), and {@code {"state": "offsets",
 * "subtask": i, "value": [sorted]}} per subtask (a union list gives each subtask every element).
 * {@code restore} starts both operators from the savepoint (probe sources in place of the old ones)
 * with the rules state registered with the spec's {@code events_type} and reports what each
 * subtask restored.
 */
public final class OperatorJobs {
    private OperatorJobs() {}

    static final String RULES = "rules";
    static final String BUFFER = "buffer";
    static final String OFFSETS = "offsets";

    static final AtomicLong PROCESSED = new AtomicLong();
    static final AtomicLong RULES_SEEN = new AtomicLong();
    /** subtask -> what it holds (generate: at its last snapshot; restore: what it restored). */
    static final Map<Integer, Map<String, Object>> RULES_AT = new ConcurrentHashMap<>();
    static final Map<Integer, List<Long>> BUFFER_AT = new ConcurrentHashMap<>();
    static final Map<Integer, List<String>> OFFSETS_AT = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        Batch.program("OperatorJobs", args, (spec, out, w) -> generate(Spec.read(spec), out, w),
                (sp, spec, out, w) -> restore(sp, Spec.read(spec), out, w));
    }

    private static void clear() {
        PROCESSED.set(0);
        RULES_SEEN.set(0);
        RULES_AT.clear();
        BUFFER_AT.clear();
        OFFSETS_AT.clear();
    }

    static void generate(Spec spec, Path out, Path work) throws Exception {
        clear();
        StreamExecutionEnvironment env = Job.env(Job.config(spec, work), spec);
        DataStream<Long> records = env.fromSource(
                        new IdleSequenceSource(0, spec.totalRecords() - 1), WatermarkStrategy.noWatermarks(), "records")
                .uid("records").setParallelism(1);
        DataStream<Long> rules = env.fromSource(
                        new IdleSequenceSource(0, spec.keys - 1), WatermarkStrategy.noWatermarks(), "rules")
                .uid("rules").setParallelism(1);
        build(spec, records, rules, false);
        JobClient client = env.executeAsync("generate " + spec.name);
        Generate.awaitCount(client, PROCESSED, spec.totalRecords());
        Generate.awaitCount(client, RULES_SEEN, spec.keys * (long) spec.parallelism);
        Generate.stopWithSavepoint(client, out, work);
        Map<Integer, List<Long>> buffers = new TreeMap<>(BUFFER_AT);
        Map<Integer, List<String>> offsets = new TreeMap<>();
        List<String> union = new ArrayList<>();
        OFFSETS_AT.values().forEach(union::addAll);
        for (int s = 0; s < spec.parallelism; s++) {
            offsets.put(s, union);
        }
        Generate.writeExpected(spec.name, entries(spec, buffers, offsets), out);
    }

    static void restore(Path savepoint, Spec spec, Path out, Path work) throws Exception {
        clear();
        StreamExecutionEnvironment env = Job.env(Restore.restoring(savepoint, spec, work), spec);
        DataStream<Long> records = env.fromSource(new NumberSequenceSource(0, 0), WatermarkStrategy.noWatermarks(), "probe")
                .uid("probe").setParallelism(1);
        DataStream<Long> rules = env.fromSource(new NumberSequenceSource(0, 0), WatermarkStrategy.noWatermarks(), "probe-rules")
                .uid("probe-rules").setParallelism(1);
        build(spec, records, rules, true);
        try {
            env.execute("restore " + spec.name);
        } catch (Exception e) {
            throw new Restore.Failure(e);
        }
        StringBuilder b = new StringBuilder();
        for (Map<String, Object> e : entries(spec, new TreeMap<>(BUFFER_AT), new TreeMap<>(OFFSETS_AT))) {
            Json.write(e, b);
            b.append('\n');
        }
        Files.write(out, b.toString().getBytes(StandardCharsets.UTF_8));
    }

    private static List<Map<String, Object>> entries(
            Spec spec, Map<Integer, List<Long>> buffers, Map<Integer, List<String>> offsets) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (int s = 0; s < spec.parallelism; s++) {
            out.add(Json.obj("state", RULES, "subtask", s, "value", RULES_AT.getOrDefault(s, Map.of())));
        }
        List<Long> all = new ArrayList<>();
        buffers.values().forEach(all::addAll);
        all.sort(null);
        out.add(Json.obj("state", BUFFER, "value", all));
        for (Map.Entry<Integer, List<String>> e : offsets.entrySet()) {
            List<String> sorted = new ArrayList<>(e.getValue());
            sorted.sort(null);
            out.add(Json.obj("state", OFFSETS, "subtask", e.getKey(), "value", sorted));
        }
        return out;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static void build(Spec spec, DataStream<Long> records, DataStream<Long> rules, boolean restoring) {
        RowType type = Job.rowType(spec.eventsType);
        MapStateDescriptor<String, RowData> desc = new MapStateDescriptor<>(RULES, Types.STRING, InternalTypeInfo.of(type));
        records.keyBy((KeySelector) new Job.KeyOf(spec), (TypeInformation) spec.keyInfo())
                .connect(rules.broadcast(desc))
                .process(new RulesFn(desc, type, restoring), Types.STRING)
                .uid("rules-op").name("rules-op").setParallelism(spec.parallelism).setMaxParallelism(spec.maxParallelism)
                .sinkTo(new DiscardingSink<>()).setParallelism(1);
        records.rebalance()
                .map(new ListFn(restoring), Types.LONG)
                .uid("list-op").name("list-op").setParallelism(spec.parallelism)
                .sinkTo(new DiscardingSink<>()).setParallelism(1);
    }

    static String ruleKey(long i) {
        return (i % 5 == 4 ? "règle-" : "rule-") + i;
    }

    static RowData ruleRow(long i) {
        GenericRowData meta = i % 7 == 6 ? null
                : GenericRowData.of((int) i, StateSet.BASE_TS + i, i % 3 == 0 ? null : StringData.fromString("dev-" + i));
        return GenericRowData.of(i * 100, meta);
    }

    static final class RulesFn extends KeyedBroadcastProcessFunction<Object, Long, Long, String> {
        private static final long serialVersionUID = 1L;
        private final MapStateDescriptor<String, RowData> desc;
        private final RowType type;
        private final boolean restoring;

        RulesFn(MapStateDescriptor<String, RowData> desc, RowType type, boolean restoring) {
            this.desc = desc;
            this.type = type;
            this.restoring = restoring;
        }

        @Override
        public void processElement(Long j, ReadOnlyContext ctx, Collector<String> out) {}

        @Override
        public void processBroadcastElement(Long i, Context ctx, Collector<String> out) throws Exception {
            int subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            BroadcastState<String, RowData> state = ctx.getBroadcastState(desc);
            if (!restoring) {
                state.put(ruleKey(i), ruleRow(i));
            }
            Map<String, Object> rendered = new TreeMap<>();
            for (Map.Entry<String, RowData> e : state.immutableEntries()) {
                rendered.put(e.getKey(), e.getValue() == null ? null : Render.row(e.getValue(), type));
            }
            RULES_AT.put(subtask, rendered);
            RULES_SEEN.incrementAndGet();
        }
    }

    static final class ListFn extends RichMapFunction<Long, Long> implements CheckpointedFunction {
        private static final long serialVersionUID = 1L;
        private final boolean restoring;
        private transient ListState<Long> buffer;
        private transient ListState<String> offsets;
        private transient List<Long> seen;

        ListFn(boolean restoring) {
            this.restoring = restoring;
        }

        private int subtask() {
            return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        }

        @Override
        public void initializeState(FunctionInitializationContext ctx) throws Exception {
            buffer = ctx.getOperatorStateStore().getListState(new ListStateDescriptor<>(BUFFER, Types.LONG));
            offsets = ctx.getOperatorStateStore().getUnionListState(new ListStateDescriptor<>(OFFSETS, Types.STRING));
            seen = new ArrayList<>();
            if (restoring) {
                List<Long> b = new ArrayList<>();
                buffer.get().forEach(b::add);
                List<String> o = new ArrayList<>();
                offsets.get().forEach(o::add);
                BUFFER_AT.put(subtask(), b);
                OFFSETS_AT.put(subtask(), o);
            }
        }

        @Override
        public Long map(Long j) {
            if (!restoring) {
                seen.add(j);
                PROCESSED.incrementAndGet();
            }
            return j;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext ctx) throws Exception {
            if (restoring) {
                return;
            }
            buffer.update(seen);
            String o = "subtask-" + subtask() + ":" + seen.size();
            offsets.update(List.of(o));
            BUFFER_AT.put(subtask(), new ArrayList<>(seen));
            OFFSETS_AT.put(subtask(), List.of(o));
        }
    }
}
