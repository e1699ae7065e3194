package savepoints;

import golden.Json;

import org.apache.flink.table.data.RowData;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;

import java.util.LinkedHashMap;
import java.util.Map;

/** RowData as JSON: an object by field name (nested rows nested), so old and evolved types compare by name. */
final class Render {
    private Render() {}

    static Map<String, Object> row(RowData r, RowType t) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int k = 0; k < t.getFieldCount(); k++) {
            out.put(t.getFieldNames().get(k), field(r, k, t.getTypeAt(k)));
        }
        return out;
    }

    private static Object field(RowData r, int k, LogicalType t) {
        if (r.isNullAt(k)) {
            return null;
        }
        switch (t.getTypeRoot()) {
            case BOOLEAN:
                return r.getBoolean(k);
            case TINYINT:
                return (int) r.getByte(k);
            case SMALLINT:
                return (int) r.getShort(k);
            case INTEGER:
                return r.getInt(k);
            case BIGINT:
                return r.getLong(k);
            case FLOAT:
                return new Json.Num(Float.toString(r.getFloat(k)));
            case DOUBLE:
                return new Json.Num(Double.toString(r.getDouble(k)));
            case CHAR:
            case VARCHAR:
                return r.getString(k).toString();
            case ROW:
                RowType rt = (RowType) t;
                return row(r.getRow(k, rt.getFieldCount()), rt);
            default:
                throw new IllegalArgumentException("restore checker cannot render " + t);
        }
    }
}
