package golden;

import org.apache.flink.table.runtime.typeutils.InternalSerializers;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;
import org.apache.flink.util.InstantiationUtil;

import java.util.Map;

/**
 * The Java object serialization streams Flink's table snapshots embed: a {@code LogicalType}
 * ({@code RowDataSerializerSnapshot}, {@code ArrayDataSerializerSnapshot} ...) and the serializer
 * objects {@code InternalSerializers.create(type)} builds (which ArrayData / MapData snapshots
 * serialize). Each is {@code InstantiationUtil.serializeObject}: one fresh stream.
 */
final class JavaSerialized {
    private JavaSerialized() {}

    static Map<String, Object> logicalType(Map<String, Object> c) throws Exception {
        LogicalType t = parse((String) c.get("logical_type"));
        byte[] bytes = InstantiationUtil.serializeObject(t);
        Object back = InstantiationUtil.deserializeObject(bytes, JavaSerialized.class.getClassLoader());
        if (!t.equals(back)) {
            throw new IllegalStateException("LogicalType does not read back equal: " + back);
        }
        return Json.obj("case", c.get("case"), "logical_type", c.get("logical_type"),
                "serializable_string", t.asSerializableString(), "javaser_hex", Values.hex(bytes));
    }

    static Map<String, Object> internalSerializer(Map<String, Object> c) throws Exception {
        LogicalType t = parse((String) c.get("internal_serializer"));
        byte[] bytes = InstantiationUtil.serializeObject(InternalSerializers.create(t));
        return Json.obj("case", c.get("case"), "internal_serializer", c.get("internal_serializer"),
                "javaser_hex", Values.hex(bytes));
    }

    private static LogicalType parse(String sql) {
        return LogicalTypeParser.parse(sql, JavaSerialized.class.getClassLoader());
    }
}
