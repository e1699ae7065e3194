package savepoints;

import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.MapState;
import org.apache.flink.api.common.state.MapStateDescriptor;
import org.apache.flink.api.common.state.StateDescriptor;
import org.apache.flink.api.common.state.StateTtlConfig;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.types.logical.RowType;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The keyed states of the matrix job, registered the same way by the generator and the checker.
 *
 * <p>{@link #update} is what the generator's job does per record; {@link #read} renders every
 * state of the current key as JSON values, which is both what the generator records in
 * expected.json and what the checker reads back after a restore. Timers are handled by the
 * caller (they are not a state handle).
 */
final class StateSet {
    /** Far enough that nothing expires between generating and checking, small enough not to overflow. */
    static final Duration TTL = Duration.ofDays(100 * 365);
    static final long BASE_TS = 1_700_000_000_000L;
    private static final String[] DEVICES = {"phone", "tablet", "desktop"};

    private final Spec spec;
    private final RowType eventsType;
    private ValueState<RowData> events;
    private ValueState<Long> count;
    private ValueState<String> last;
    private ListState<Long> recent;
    private MapState<String, Long> totals;
    private ValueState<Long> ttlCount;
    private ValueState<RowData> ttlEvents;
    private ListState<Long> ttlRecent;
    private MapState<String, Long> ttlTotals;

    StateSet(Spec spec, RowType eventsType) {
        this.spec = spec;
        this.eventsType = eventsType;
    }

    void open(RuntimeContext ctx) {
        if (spec.has("events")) {
            events = ctx.getState(new ValueStateDescriptor<>("events", InternalTypeInfo.of(eventsType)));
        }
        if (spec.has("count")) {
            count = ctx.getState(new ValueStateDescriptor<>("count", Types.LONG));
        }
        if (spec.has("last")) {
            last = ctx.getState(new ValueStateDescriptor<>("last", Types.STRING));
        }
        if (spec.has("recent")) {
            recent = ctx.getListState(new ListStateDescriptor<>("recent", Types.LONG));
        }
        if (spec.has("totals")) {
            totals = ctx.getMapState(new MapStateDescriptor<>("totals", Types.STRING, Types.LONG));
        }
        if (spec.has("ttl_count")) {
            ttlCount = ctx.getState(withTtl(new ValueStateDescriptor<>("ttl_count", Types.LONG)));
        }
        if (spec.has("ttl_events")) {
            ttlEvents = ctx.getState(withTtl(new ValueStateDescriptor<>("ttl_events", InternalTypeInfo.of(eventsType))));
        }
        if (spec.has("ttl_recent")) {
            ttlRecent = ctx.getListState(withTtl(new ListStateDescriptor<>("ttl_recent", Types.LONG)));
        }
        if (spec.has("ttl_totals")) {
            ttlTotals = ctx.getMapState(withTtl(new MapStateDescriptor<>("ttl_totals", Types.STRING, Types.LONG)));
        }
    }

    /** Processing-time TTL, refreshed on write, expired values never returned. */
    private static <D extends StateDescriptor<?, ?>> D withTtl(D d) {
        d.enableTimeToLive(StateTtlConfig.newBuilder(TTL)
                .setUpdateType(StateTtlConfig.UpdateType.OnCreateAndWrite)
                .setStateVisibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
                .build());
        return d;
    }

    /** The generator's per-record work: record {@code j} of key index {@code i}. */
    void update(long j, int i) throws Exception {
        if (events != null) {
            events.update(eventRow(j, i));
        }
        if (count != null) {
            count.update(count.value() == null ? 1L : count.value() + 1);
        }
        if (last != null) {
            last.update((j % 4 == 1 ? "último-" : "v-") + j);
        }
        if (recent != null) {
            recent.add(j);
        }
        if (totals != null) {
            String d = "d" + ((j / spec.keys) % 3); // the record's round: one map entry per round
            Long old = totals.get(d);
            totals.put(d, (old == null ? 0L : old) + j);
            if (spec.backend.equals("rocksdb") && i % 4 == 0) {
                totals.put("none", null); // the heap backend cannot write null map values into a savepoint
            }
        }
        if (ttlCount != null) {
            ttlCount.update(ttlCount.value() == null ? 1L : ttlCount.value() + 1);
        }
        if (ttlEvents != null) {
            ttlEvents.update(eventRow(j, i));
        }
        if (ttlRecent != null) {
            ttlRecent.add(-j);
        }
        if (ttlTotals != null) {
            ttlTotals.put("t" + ((j / spec.keys) % 2), j);
        }
    }

    /** The event-time timer record {@code j} registers. */
    static long timerOf(long j) {
        return BASE_TS + j;
    }

    /**
     * The events row of record {@code j}: of the old Events type, nested row null for every 7th key
     * and deviceType null for every 5th; of any other {@code events_type}, {@link Values}' row.
     */
    private RowData eventRow(long j, int i) {
        if (!spec.eventsType.equals(Spec.OLD_EVENTS_TYPE)) {
            return Values.row(eventsType, j, i);
        }
        GenericRowData meta = null;
        if (i % 7 != 6) {
            meta = GenericRowData.of(i, BASE_TS + j * 1000, i % 5 == 4 ? null : StringData.fromString(DEVICES[(int) (j % 3)]));
        }
        return GenericRowData.of(j, meta);
    }

    /** Every state of the current key as a JSON value (state name -> value), in spec order. */
    Map<String, Object> read() throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        for (String s : spec.states) {
            switch (s) {
                case "events":
                    out.put(s, row(events.value()));
                    break;
                case "ttl_events":
                    out.put(s, row(ttlEvents.value()));
                    break;
                case "count":
                    out.put(s, count.value());
                    break;
                case "last":
                    out.put(s, last.value());
                    break;
                case "ttl_count":
                    out.put(s, ttlCount.value());
                    break;
                case "recent":
                    out.put(s, list(recent.get()));
                    break;
                case "ttl_recent":
                    out.put(s, list(ttlRecent.get()));
                    break;
                case "totals":
                    out.put(s, map(totals.entries()));
                    break;
                case "ttl_totals":
                    out.put(s, map(ttlTotals.entries()));
                    break;
                default: // timers: reported by the caller
                    break;
            }
        }
        return out;
    }

    private Object row(RowData r) {
        return r == null ? null : Render.row(r, eventsType);
    }

    private static List<Object> list(Iterable<Long> it) {
        if (it == null) {
            return null;
        }
        List<Object> l = new ArrayList<>();
        for (Long v : it) {
            l.add(v);
        }
        return l;
    }

    private static Map<String, Object> map(Iterable<Map.Entry<String, Long>> entries) throws Exception {
        Map<String, Object> m = new TreeMap<>();
        for (Map.Entry<String, Long> e : entries) {
            m.put(e.getKey(), e.getValue());
        }
        return m;
    }
}
