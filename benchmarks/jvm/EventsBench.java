// Flink's own JVM RowDataSerializer on the Events workload, over bytes in memory.
//
// Usage: java -cp <flink jars>:. EventsBench <old-entries-file> <count> <warmup-rounds> <rounds> [<migrated-out>]
// The file holds <count> entries exactly as RowDataSerializer writes them (i32 BE length || BinaryRowData),
// concatenated; statemorph writes it from the same data its own kernels migrate.
// Prints one JSON line: entries/s for serialize, deserialize (+ reading every field) and migrate,
// best of <rounds> after warm-up. Migrate is Flink's own serializers end to end: the old
// RowDataSerializer deserializes, the new row is built field by field by name with Flink's
// RowData.FieldGetter (a generic remap computed once from the two RowTypes, nested rows by name,
// added fields null: Flink itself has no RowData schema migration, it refuses the changed type),
// and the new RowDataSerializer serializes it (to BinaryRowData). <migrated-out> receives the
// migrated bytes of the last round, so the caller can check they equal statemorph's.
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.BigIntType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.VarCharType;

public class EventsBench {
    static final LogicalType STRING = VarCharType.STRING_TYPE;

    public static void main(String[] args) throws Exception {
        byte[] data = Files.readAllBytes(Path.of(args[0]));
        int n = Integer.parseInt(args[1]);
        int warmup = Integer.parseInt(args[2]);
        int rounds = Integer.parseInt(args[3]);

        RowType oldMeta = RowType.of(new LogicalType[] {new IntType(), new BigIntType(), STRING},
                new String[] {"userId", "timestamp", "deviceType"});
        RowType oldType = RowType.of(new LogicalType[] {new BigIntType(), oldMeta}, new String[] {"eventId", "metadata"});
        RowType newMeta = RowType.of(
                new LogicalType[] {STRING, STRING, new IntType(), new BigIntType(), STRING, new BigIntType()},
                new String[] {"deviceType", "location", "userId", "timestamp", "appVersion", "sessionId"});
        RowType newType = RowType.of(new LogicalType[] {new BigIntType(), newMeta}, new String[] {"eventId", "metadata"});
        RowDataSerializer oldSer = new RowDataSerializer(oldType);
        RowDataSerializer newSer = new RowDataSerializer(newType);

        // decoded objects for the serialize benchmark
        GenericRowData[] rows = new GenericRowData[n];
        DataInputDeserializer in = new DataInputDeserializer(data);
        for (int i = 0; i < n; i++) {
            rows[i] = toGeneric(oldSer.deserialize(in));
        }
        DataOutputSerializer out = new DataOutputSerializer(data.length * 2 + 1024);
        Remap remap = new Remap(oldType, newType);

        double bestSer = 0, bestDe = 0, bestMig = 0;
        long sink = 0;
        for (int r = 0; r < warmup + rounds; r++) {
            long t0 = System.nanoTime();
            out.clear();
            for (int i = 0; i < n; i++) {
                oldSer.serialize(rows[i], out);
            }
            long t1 = System.nanoTime();
            in.setBuffer(data);
            for (int i = 0; i < n; i++) {
                GenericRowData g = toGeneric(oldSer.deserialize(in));
                sink += g.getArity();
            }
            long t2 = System.nanoTime();
            in.setBuffer(data);
            out.clear();
            for (int i = 0; i < n; i++) {
                newSer.serialize(remap.apply(oldSer.deserialize(in)), out);
            }
            long t3 = System.nanoTime();
            sink += out.length();
            if (r >= warmup) {
                bestSer = Math.max(bestSer, n / ((t1 - t0) / 1e9));
                bestDe = Math.max(bestDe, n / ((t2 - t1) / 1e9));
                bestMig = Math.max(bestMig, n / ((t3 - t2) / 1e9));
            }
        }
        if (args.length > 4) {
            Files.write(Path.of(args[4]), out.getCopyOfBuffer());
        }
        System.out.printf("{\"entries\": %d, \"serialize_per_s\": %.1f, \"deserialize_per_s\": %.1f, "
                + "\"migrate_per_s\": %.1f, \"migrated_bytes\": %d, \"sink\": %d}%n",
                n, bestSer, bestDe, bestMig, out.length(), sink);
    }

    /** Read every field into objects (what "decode" means for statemorph: values, not a lazy view). */
    static GenericRowData toGeneric(RowData r) {
        GenericRowData g = new GenericRowData(r.getRowKind(), 2);
        g.setField(0, r.isNullAt(0) ? null : r.getLong(0));
        if (!r.isNullAt(1)) {
            RowData m = r.getRow(1, 3);
            GenericRowData gm = new GenericRowData(3);
            gm.setField(0, m.isNullAt(0) ? null : m.getInt(0));
            gm.setField(1, m.isNullAt(1) ? null : m.getLong(1));
            gm.setField(2, m.isNullAt(2) ? null : StringData.fromBytes(m.getString(2).toBytes()));
            g.setField(1, gm);
        }
        return g;
    }

    /** Old row type → new row type by field name: nested rows remapped, fields the old type lacks null. */
    static final class Remap {
        final int arity;
        final RowData.FieldGetter[] getters; // per new field: the old field's getter, or null
        final Remap[] nested; // per new field: the remap of a nested row, or null

        Remap(RowType from, RowType to) {
            arity = to.getFieldCount();
            getters = new RowData.FieldGetter[arity];
            nested = new Remap[arity];
            for (int k = 0; k < arity; k++) {
                int at = from.getFieldIndex(to.getFieldNames().get(k));
                if (at < 0) {
                    continue;
                }
                LogicalType was = from.getTypeAt(at);
                LogicalType is = to.getTypeAt(k);
                if (was instanceof RowType && is instanceof RowType) {
                    nested[k] = new Remap((RowType) was, (RowType) is);
                }
                getters[k] = RowData.createFieldGetter(was, at);
            }
        }

        GenericRowData apply(RowData r) {
            GenericRowData g = new GenericRowData(r.getRowKind(), arity);
            for (int k = 0; k < arity; k++) {
                if (getters[k] == null) {
                    continue;
                }
                Object v = getters[k].getFieldOrNull(r);
                g.setField(k, v != null && nested[k] != null ? nested[k].apply((RowData) v) : v);
            }
            return g;
        }
    }
}
