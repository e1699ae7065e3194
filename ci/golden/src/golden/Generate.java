package golden;

import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSchemaCompatibility;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshotSerializationUtil;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;

import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Runs real Flink 2.3 serializers over case descriptions and records their bytes.
 *
 * <p>Usage: {@code Generate BUILD_DIR IN.jsonl OUT.jsonl [IN2 OUT2 ...]}. Each input line is one of
 *
 * <ul>
 *   <li>{@code {"case", "serializer": SPEC, "value": VALUE}}: Flink serializes VALUE; the output
 *       line adds {@code "hex"} and replaces VALUE by what Flink deserializes back from those bytes
 *       (so the recorded value is Flink's own reading, e.g. a float already rounded to 32 bits);
 *   <li>{@code {"case", "serializer": SPEC, "snapshot": true}}: the output has {@code "snapshot_hex"},
 *       the {@code writeVersionedSnapshot} bytes of {@code serializer.snapshotConfiguration()};
 *   <li>{@code {"case", "old": SPEC, "new": SPEC, "value": VALUE}}: a migration case: as below, plus
 *       {@code old_value, old_hex, new_value, new_hex}: the old value's bytes and what Flink's restore
 *       turns them into (see {@link #compat}); with {@code "restored": true} also {@code restored_hex}
 *       (the restored old serializer writing the value it read) and {@code restored_envelope_hex}
 *       (the snapshot of that serializer, in the envelope form);
 *   <li>{@code {"case", "logical_type": SQL}} / {@code {"case", "internal_serializer": SQL}}: the
 *       output adds {@code "javaser_hex"}, {@code InstantiationUtil.serializeObject} of the parsed
 *       LogicalType, or of {@code InternalSerializers.create(type)} (see {@link JavaSerialized});
 *   <li>{@code {"case", "old": SPEC, "new": SPEC}}: the old snapshot is written in the old world,
 *       read back in the new world (where classes may have changed) and judged by
 *       {@code newSnapshot.resolveSchemaCompatibility(oldSnapshot)}; the output adds {@code "result"};
 *   <li>{@code {"case", "uid": STRING}}: the output adds {@code "operator_id"}, the OperatorID Flink
 *       derives from that uid (see {@link OperatorIds}).
 * </ul>
 *
 * Any failure aborts the run: a vector file is either complete and checked, or not written.
 */
public final class Generate {
    private Generate() {}

    public static void main(String[] args) throws Exception {
        World.buildDir = Paths.get(args[0]);
        try {
            World.avro = (SpecCodec) Class.forName("golden.AvroCodec").getConstructor().newInstance();
        } catch (ClassNotFoundException | NoClassDefFoundError e) {
            System.err.println("note: Avro support not compiled in; Avro<...> cases will fail");
        }
        for (int a = 1; a + 1 < args.length; a += 2) {
            Path in = Paths.get(args[a]);
            Path out = Paths.get(args[a + 1]);
            List<String> lines = Files.readAllLines(in, StandardCharsets.UTF_8);
            Path tmp = out.resolveSibling(out.getFileName() + ".tmp");
            int n = 0;
            try (BufferedWriter w = Files.newBufferedWriter(tmp, StandardCharsets.UTF_8)) {
                for (String line : lines) {
                    if (line.isBlank()) {
                        continue;
                    }
                    @SuppressWarnings("unchecked")
                    Map<String, Object> c = (Map<String, Object>) Json.parse(line);
                    try {
                        w.write(Json.write(run(c)));
                    } catch (Exception | Error e) {
                        throw new IllegalStateException("case " + c.get("case") + " failed: " + e, e);
                    }
                    w.write('\n');
                    n++;
                }
            }
            Files.move(tmp, out, java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            System.err.println("wrote " + n + " cases to " + out);
        }
    }

    static Map<String, Object> run(Map<String, Object> c) throws Exception {
        if (c.containsKey("old")) {
            return compat(c);
        }
        if (c.containsKey("logical_type")) {
            return JavaSerialized.logicalType(c);
        }
        if (c.containsKey("internal_serializer")) {
            return JavaSerialized.internalSerializer(c);
        }
        if (c.containsKey("uid")) {
            return OperatorIds.derive(c);
        }
        Spec spec = Spec.parse((String) c.get("serializer"));
        World world = World.of(spec);
        TypeSerializer<Object> ser = world.serializer(spec);
        if (c.containsKey("value")) {
            Object value = world.toJava(spec, c.get("value"));
            byte[] bytes = serialize(ser, value);
            DataInputDeserializer in = new DataInputDeserializer(bytes);
            Object back = ser.deserialize(in);
            if (in.available() != 0) {
                throw new IllegalStateException("deserialize left " + in.available() + " bytes");
            }
            // Record the value as written when Flink reads back the same thing (maps compared
            // without order: Flink reads into a HashMap, while the bytes follow our LinkedHashMap).
            // Otherwise (e.g. a lone surrogate in StringData reads back as '?') record Flink's reading.
            Object written = world.toJson(spec, value);
            Object read = world.toJson(spec, back);
            Object recorded = written;
            if (!Json.write(canon(written)).equals(Json.write(canon(read)))) {
                if (!Arrays.equals(bytes, serialize(ser, back))) {
                    throw new IllegalStateException("re-serializing the read value changed the bytes");
                }
                System.err.println("note: " + c.get("case") + ": Flink reads back " + Json.write(read));
                recorded = read;
            }
            Map<String, Object> line = Json.obj("case", c.get("case"), "serializer", c.get("serializer"),
                    "value", recorded, "hex", Values.hex(bytes));
            if (!Json.write(canon(c.get("value"))).equals(Json.write(canon(recorded)))) {
                // The input differs from what Flink reads back (a float rounded to 32 bits, a lone
                // surrogate turned into '?', nanoseconds a TIMESTAMP(3) drops): keep it, since
                // writing it must give the same bytes.
                line.put("written", c.get("value"));
            }
            return line;
        }
        byte[] snap = snapshotBytes(ser);
        TypeSerializerSnapshot<?> read =
                TypeSerializerSnapshot.readVersionedSnapshot(new DataInputDeserializer(snap), world.loader);
        if (!read.restoreSerializer().equals(ser)) {
            System.err.println("note: " + c.get("case") + ": restored serializer is not equals() to the original");
        }
        // The top-level form state meta data holds (TypeSerializerSnapshotSerializationUtil).
        DataOutputSerializer env = new DataOutputSerializer(256);
        TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot(env, ser.snapshotConfiguration());
        return Json.obj("case", c.get("case"), "serializer", c.get("serializer"), "snapshot_hex", Values.hex(snap),
                "envelope_hex", Values.hex(env.getCopyOfBuffer()));
    }

    static Map<String, Object> compat(Map<String, Object> c) throws Exception {
        Spec oldSpec = Spec.parse((String) c.get("old"));
        Spec newSpec = Spec.parse((String) c.get("new"));
        World oldWorld = World.of(oldSpec);
        World newWorld = World.of(newSpec);
        TypeSerializer<Object> oldSer = oldWorld.serializer(oldSpec);
        byte[] oldSnap = snapshotBytes(oldSer);
        @SuppressWarnings("unchecked")
        TypeSerializerSnapshot<Object> restored = (TypeSerializerSnapshot<Object>)
                TypeSerializerSnapshot.readVersionedSnapshot(new DataInputDeserializer(oldSnap), newWorld.loader);
        TypeSerializer<Object> newSer = newWorld.serializer(newSpec);
        TypeSerializerSchemaCompatibility<Object> r = newSer.snapshotConfiguration().resolveSchemaCompatibility(restored);
        String result = resultName(r);
        Map<String, Object> line = Json.obj("case", c.get("case"), "old", c.get("old"), "new", c.get("new"), "result", result);
        if (!c.containsKey("value")) {
            return line;
        }
        // A migration case: what a Flink 2.3 restore does with one old value. The old bytes are
        // read by the restored old serializer (inside the new world, so a POJO comes back as an
        // instance of the NEW class: removed fields dropped, added ones null) and written by the
        // new serializer (AFTER_MIGRATION), or kept (AS_IS, RECONFIGURED: readable unchanged).
        byte[] oldBytes = serialize(oldSer, oldWorld.toJava(oldSpec, c.get("value")));
        Object migrated = restored.restoreSerializer().deserialize(new DataInputDeserializer(oldBytes));
        TypeSerializer<Object> target;
        if (r.isCompatibleAfterMigration() || r.isCompatibleAsIs()) {
            target = newSer;
        } else if (r.isCompatibleWithReconfiguredSerializer()) {
            target = r.getReconfiguredSerializer();
        } else {
            throw new IllegalStateException("a migration case must not be INCOMPATIBLE");
        }
        byte[] newBytes = serialize(target, migrated);
        if (!r.isCompatibleAfterMigration() && !Arrays.equals(newBytes, oldBytes)) {
            throw new IllegalStateException(result + " but the bytes changed");
        }
        DataInputDeserializer in = new DataInputDeserializer(newBytes);
        Object back = target.deserialize(in);
        line.put("old_value", oldWorld.toJson(oldSpec, oldWorld.toJava(oldSpec, c.get("value"))));
        line.put("old_hex", Values.hex(oldBytes));
        line.put("new_value", newWorld.toJson(newSpec, back));
        line.put("new_hex", Values.hex(newBytes));
        if (Boolean.TRUE.equals(c.get("restored"))) {
            // What the restored old serializer itself writes (a POJO field the new class lacks is
            // written as null) and the snapshot Flink takes of it (that field as missing-field-at-N).
            TypeSerializer<Object> old = restored.restoreSerializer();
            line.put("restored_hex", Values.hex(serialize(old, migrated)));
            DataOutputSerializer env = new DataOutputSerializer(256);
            TypeSerializerSnapshotSerializationUtil.writeSerializerSnapshot(env, old.snapshotConfiguration());
            line.put("restored_envelope_hex", Values.hex(env.getCopyOfBuffer()));
        }
        return line;
    }

    static String resultName(TypeSerializerSchemaCompatibility<?> r) {
        String result;
        if (r.isCompatibleAsIs()) {
            result = "COMPATIBLE_AS_IS";
        } else if (r.isCompatibleAfterMigration()) {
            result = "COMPATIBLE_AFTER_MIGRATION";
        } else if (r.isCompatibleWithReconfiguredSerializer()) {
            result = "COMPATIBLE_WITH_RECONFIGURED_SERIALIZER";
        } else if (r.isIncompatible()) {
            result = "INCOMPATIBLE";
        } else {
            throw new IllegalStateException("unknown result " + r);
        }
        return result;
    }

    /** The JSON tree with every {"$map": [...]} entry list sorted, for order-free comparison. */
    @SuppressWarnings("unchecked")
    static Object canon(Object j) {
        if (j instanceof List) {
            List<Object> l = new java.util.ArrayList<>();
            for (Object o : (List<Object>) j) l.add(canon(o));
            return l;
        }
        if (j instanceof Map) {
            Map<String, Object> m = new java.util.LinkedHashMap<>();
            for (Map.Entry<String, Object> e : ((Map<String, Object>) j).entrySet()) m.put(e.getKey(), canon(e.getValue()));
            if (m.containsKey("$map")) {
                List<Object> entries = (List<Object>) m.get("$map");
                entries.sort(java.util.Comparator.comparing(Json::write));
            }
            return m;
        }
        return j;
    }

    static byte[] serialize(TypeSerializer<Object> ser, Object value) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(64);
        ser.serialize(value, out);
        return out.getCopyOfBuffer();
    }

    static byte[] snapshotBytes(TypeSerializer<?> ser) throws Exception {
        DataOutputSerializer out = new DataOutputSerializer(256);
        TypeSerializerSnapshot.writeVersionedSnapshot(out, ser.snapshotConfiguration());
        return out.getCopyOfBuffer();
    }
}
