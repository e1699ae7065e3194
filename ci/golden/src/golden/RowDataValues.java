package golden;

import org.apache.flink.table.data.ArrayData;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericMapData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.MapData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RowType;

import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Tagged JSON to Flink's internal Table data structures (GenericRowData, StringData, ...) and
 * back from the BinaryRowData that RowDataSerializer reads. Driven by the LogicalType.
 */
final class RowDataValues {
    private RowDataValues() {}

    @SuppressWarnings("unchecked")
    static Object toInternal(LogicalType t, Object j) {
        if (j == null) {
            return null;
        }
        switch (t.getTypeRoot()) {
            case BOOLEAN: return (Boolean) j;
            case TINYINT: return Values.integer(j).byteValueExact();
            case SMALLINT: return Values.integer(j).shortValueExact();
            case INTEGER: return Values.integer(j).intValueExact();
            case BIGINT: return Values.integer(j).longValueExact();
            case FLOAT: return Values.flt(j);
            case DOUBLE: return Values.dbl(j);
            case DECIMAL: {
                DecimalType d = (DecimalType) t;
                BigDecimal v = new BigDecimal((String) ((Map<String, Object>) j).get("$dec"));
                DecimalData r = DecimalData.fromBigDecimal(v, d.getPrecision(), d.getScale());
                if (r == null) throw new IllegalArgumentException(v + " overflows " + t);
                return r;
            }
            case CHAR:
            case VARCHAR: return StringData.fromString(Values.str(j));
            case BINARY:
            case VARBINARY: return Values.bytes(j);
            case DATE: return (int) LocalDate.parse((String) ((Map<String, Object>) j).get("$date")).toEpochDay();
            case TIME_WITHOUT_TIME_ZONE:
                return (int) (LocalTime.parse((String) ((Map<String, Object>) j).get("$time")).toNanoOfDay() / 1_000_000L);
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE: {
                List<Object> ts = (List<Object>) ((Map<String, Object>) j).get("$ts");
                return TimestampData.fromEpochMillis(
                        Values.integer(ts.get(0)).longValueExact(), Values.integer(ts.get(1)).intValueExact());
            }
            case ARRAY: {
                LogicalType et = ((ArrayType) t).getElementType();
                List<Object> l = (List<Object>) j;
                Object[] a = new Object[l.size()];
                for (int k = 0; k < a.length; k++) a[k] = toInternal(et, l.get(k));
                return new GenericArrayData(a);
            }
            case MAP:
            case MULTISET: {
                LogicalType kt = keyType(t);
                LogicalType vt = valueType(t);
                Map<Object, Object> m = new LinkedHashMap<>();
                for (List<Object> kv : Values.mapEntries(j)) m.put(toInternal(kt, kv.get(0)), toInternal(vt, kv.get(1)));
                return new GenericMapData(m);
            }
            case ROW: {
                RowType rt = (RowType) t;
                Map<String, Object> m = (Map<String, Object>) j;
                List<Object> l = (List<Object>) m.get("$row");
                if (l.size() != rt.getFieldCount()) throw new IllegalArgumentException("row arity " + l.size() + " for " + t);
                GenericRowData r = new GenericRowData(Values.kind(m), l.size());
                for (int k = 0; k < l.size(); k++) r.setField(k, toInternal(rt.getTypeAt(k), l.get(k)));
                return r;
            }
            default: throw new IllegalArgumentException("unsupported logical type " + t);
        }
    }

    static LogicalType keyType(LogicalType t) {
        return t instanceof MapType ? ((MapType) t).getKeyType() : ((MultisetType) t).getElementType();
    }

    static LogicalType valueType(LogicalType t) {
        return t instanceof MapType ? ((MapType) t).getValueType() : new IntType(false);
    }

    static Object toJson(LogicalType t, Object v) {
        if (v == null) {
            return null;
        }
        switch (t.getTypeRoot()) {
            case BOOLEAN: return v;
            case TINYINT:
            case SMALLINT:
            case INTEGER:
            case BIGINT: return new Json.Num(v.toString());
            case FLOAT: return Values.floatJson((Float) v);
            case DOUBLE: return Values.doubleJson((Double) v);
            case DECIMAL: return Json.obj("$dec", ((DecimalData) v).toBigDecimal().toPlainString());
            case CHAR:
            case VARCHAR: return Values.strJson(v.toString());
            case BINARY:
            case VARBINARY: return Values.bytesJson((byte[]) v);
            case DATE: return Json.obj("$date", LocalDate.ofEpochDay((Integer) v).toString());
            case TIME_WITHOUT_TIME_ZONE: {
                int ms = (Integer) v;
                return Json.obj("$time", String.format("%02d:%02d:%02d.%03d",
                        ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000));
            }
            case TIMESTAMP_WITHOUT_TIME_ZONE:
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE: {
                TimestampData ts = (TimestampData) v;
                return Json.obj("$ts", Arrays.asList(
                        new Json.Num(Long.toString(ts.getMillisecond())),
                        new Json.Num(Integer.toString(ts.getNanoOfMillisecond()))));
            }
            case ARRAY: {
                LogicalType et = ((ArrayType) t).getElementType();
                ArrayData a = (ArrayData) v;
                ArrayData.ElementGetter g = ArrayData.createElementGetter(et);
                List<Object> l = new ArrayList<>();
                for (int k = 0; k < a.size(); k++) l.add(toJson(et, g.getElementOrNull(a, k)));
                return l;
            }
            case MAP:
            case MULTISET: {
                MapData m = (MapData) v;
                LogicalType kt = keyType(t);
                LogicalType vt = valueType(t);
                ArrayData.ElementGetter kg = ArrayData.createElementGetter(kt);
                ArrayData.ElementGetter vg = ArrayData.createElementGetter(vt);
                List<Object> l = new ArrayList<>();
                for (int k = 0; k < m.size(); k++) {
                    l.add(Arrays.asList(toJson(kt, kg.getElementOrNull(m.keyArray(), k)),
                            toJson(vt, vg.getElementOrNull(m.valueArray(), k))));
                }
                return Json.obj("$map", l);
            }
            case ROW: {
                RowType rt = (RowType) t;
                RowData r = (RowData) v;
                List<Object> l = new ArrayList<>();
                for (int k = 0; k < rt.getFieldCount(); k++) {
                    l.add(toJson(rt.getTypeAt(k), RowData.createFieldGetter(rt.getTypeAt(k), k).getFieldOrNull(r)));
                }
                return Json.obj("$row", l, "kind", r.getRowKind().shortString());
            }
            default: throw new IllegalArgumentException("unsupported logical type " + t);
        }
    }
}
