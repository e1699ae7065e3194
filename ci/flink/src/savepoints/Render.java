package savepoints;

import golden.Json;

import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RowType;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * RowData as JSON: an object by field name (nested rows nested), so old and evolved types compare
 * by name. Every value is rendered exactly, so two renderings are equal only when the values are:
 * DECIMAL as its plain decimal text (scale kept), TIMESTAMP as the ISO local date-time with every
 * nanosecond, TIMESTAMP_LTZ as the ISO instant, BINARY as hex, ARRAY as a list, MAP as the list of
 * its {@code [key, value]} pairs and MULTISET as the list of its {@code [element, count]} pairs
 * (both ordered by the key's JSON text; keys need not be strings).
 */
final class Render {
    private Render() {}

    static Map<String, Object> row(RowData r, RowType t) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int k = 0; k < t.getFieldCount(); k++) {
            out.put(t.getFieldNames().get(k), value(RowData.createFieldGetter(t.getTypeAt(k), k).getFieldOrNull(r), t.getTypeAt(k)));
        }
        return out;
    }

    /** One value of type {@code t} as Flink's internal data structures hold it (null stays null). */
    static Object value(Object v, LogicalType t) {
        if (v == null) {
            return null;
        }
        switch (t.getTypeRoot()) {
            case BOOLEAN:
            case INTEGER:
            case BIGINT:
            case DATE:
            case TIME_WITHOUT_TIME_ZONE:
            case INTERVAL_YEAR_MONTH:
            case INTERVAL_DAY_TIME:
                return v;
            case TINYINT:
                return (int) (Byte) v;
            case SMALLINT:
                return (int) (Short) v;
            case FLOAT:
                return new Json.Num(Float.toString((Float) v));
            case DOUBLE:
                return new Json.Num(Double.toString((Double) v));
            case CHAR:
            case VARCHAR:
                return v.toString();
            case BINARY:
            case VARBINARY:
                return hex((byte[]) v);
            case DECIMAL:
                return ((DecimalData) v).toBigDecimal().toPlainString();
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return ((TimestampData) v).toLocalDateTime().toString();
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return ((TimestampData) v).toInstant().toString();
            case ROW:
                RowType rt = (RowType) t;
                return row((RowData) v, rt);
            case ARRAY:
                return elements((ArrayData) v, ((ArrayType) t).getElementType());
            case MAP:
                return pairs((MapData) v, ((MapType) t).getKeyType(), ((MapType) t).getValueType());
            case MULTISET:
                return pairs((MapData) v, ((MultisetType) t).getElementType(), new org.apache.flink.table.types.logical.IntType(false));
            default:
                throw new IllegalArgumentException("restore checker cannot render " + t);
        }
    }

    private static List<Object> elements(ArrayData a, LogicalType element) {
        ArrayData.ElementGetter get = ArrayData.createElementGetter(element);
        List<Object> out = new ArrayList<>();
        for (int k = 0; k < a.size(); k++) {
            out.add(value(get.getElementOrNull(a, k), element));
        }
        return out;
    }

    private static List<Object> pairs(MapData m, LogicalType key, LogicalType val) {
        List<Object> keys = elements(m.keyArray(), key);
        List<Object> values = elements(m.valueArray(), val);
        TreeMap<String, List<Object>> sorted = new TreeMap<>();
        for (int k = 0; k < keys.size(); k++) {
            List<Object> pair = new ArrayList<>();
            pair.add(keys.get(k));
            pair.add(values.get(k));
            sorted.put(Json.write(keys.get(k)), pair);
        }
        return new ArrayList<>(sorted.values());
    }

    private static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }
}
