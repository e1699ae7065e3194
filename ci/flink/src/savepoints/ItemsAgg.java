package savepoints;

import org.apache.flink.table.functions.AggregateFunction;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * A user's aggregate function whose accumulator holds user structured types inside an ARRAY and a
 * MAP: Flink SQL extracts {@code STRUCTURED<'savepoints.ItemsAgg$Acc', items ARRAY<STRUCTURED<
 * 'savepoints.ItemsAgg$Item', x BIGINT, name STRING>>, byPrefix MAP<STRING, STRUCTURED<...Item>>>}
 * and keeps it in the aggregation's {@code accState} as nested RowData. Its value: the number of
 * items, the sum of their {@code x} and, per name prefix, the {@code x} of the last item with it
 * (so a restore that lost or garbled any of them emits another string).
 */
public final class ItemsAgg extends AggregateFunction<String, ItemsAgg.Acc> {
    private static final long serialVersionUID = 1L;

    /** One record's part of the accumulator. */
    public static final class Item {
        public long x;
        public String name;

        public Item() {}
    }

    /** The accumulator: every item, and the last item per name prefix. */
    public static final class Acc {
        public List<Item> items = new ArrayList<>();
        public Map<String, Item> byPrefix = new TreeMap<>();

        public Acc() {}
    }

    @Override
    public Acc createAccumulator() {
        return new Acc();
    }

    public void accumulate(Acc acc, Long x, String name) {
        Item item = new Item();
        item.x = x;
        item.name = name;
        acc.items.add(item);
        acc.byPrefix.put(name.substring(0, name.indexOf('-') + 1), item);
    }

    @Override
    public String getValue(Acc acc) {
        long sum = 0;
        for (Item i : acc.items) {
            sum += i.x;
        }
        StringBuilder b = new StringBuilder().append(acc.items.size()).append('|').append(sum);
        for (Map.Entry<String, Item> e : new TreeMap<>(acc.byPrefix).entrySet()) {
            b.append('|').append(e.getKey()).append(e.getValue().x).append(':').append(e.getValue().name);
        }
        return b.toString();
    }
}
