package savepoints;

import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.GenericArrayData;
import org.apache.flink.table.data.GenericMapData;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.ArrayType;
import org.apache.flink.table.types.logical.DecimalType;
import org.apache.flink.table.types.logical.LocalZonedTimestampType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.MapType;
import org.apache.flink.table.types.logical.MultisetType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.TimestampType;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The events row of record {@code j} of key index {@code i} for any events row type other than
 * the old Events type: a deterministic value per field, computed from its logical type, so a spec
 * can put DECIMAL, TIMESTAMP(_LTZ), ARRAY, MAP, MULTISET and nested ROW fields into a savepoint
 * and the checker can read them back ({@link Render} renders both sides). Nullable fields are null
 * now and then (at different keys per field), collections vary in size (empty ones included), and
 * strings are non-ASCII for every fourth record.
 */
final class Values {
    private Values() {}

    static GenericRowData row(RowType t, long j, int i) {
        GenericRowData r = new GenericRowData(t.getFieldCount());
        for (int k = 0; k < t.getFieldCount(); k++) {
            LogicalType f = t.getTypeAt(k);
            r.setField(k, f.isNullable() && (i + k) % 6 == 5 ? null : value(f, j, i, k));
        }
        return r;
    }

    /** A value of {@code t}; {@code k} tells positions apart (fields, elements, entries). */
    static Object value(LogicalType t, long j, int i, int k) {
        long n = j * 31 + k;
        switch (t.getTypeRoot()) {
            case BOOLEAN:
                return n % 2 == 0;
            case TINYINT:
                return (byte) (n % 120 - 60);
            case SMALLINT:
                return (short) (n * 97 % 30000 - 15000);
            case INTEGER:
            case DATE:
                return (int) (19000 + n % 2000);
            case TIME_WITHOUT_TIME_ZONE:
                return (int) (n * 1000 % 86_400_000);
            case BIGINT:
                return n * 1_000_003L - 7;
            case FLOAT:
                return n / 4.0f;
            case DOUBLE:
                return n / 8.0 - 1.0;
            case CHAR:
            case VARCHAR:
                return StringData.fromString((j % 4 == 1 ? "ü-" : "s-") + n);
            case BINARY:
            case VARBINARY:
                return BigInteger.valueOf(n * 65_537).toByteArray();
            case DECIMAL:
                DecimalType d = (DecimalType) t;
                BigInteger limit = BigInteger.TEN.pow(d.getPrecision());
                BigInteger unscaled = BigInteger.valueOf(n * 7_919 - 40_000) // beyond a long where the precision allows
                        .multiply(BigInteger.TEN.pow(Math.max(d.getPrecision() - 12, 0))).add(BigInteger.valueOf(n)).mod(limit);
                BigDecimal v = new BigDecimal(n % 3 == 0 ? unscaled.negate() : unscaled, d.getScale());
                return DecimalData.fromBigDecimal(v, d.getPrecision(), d.getScale());
            case TIMESTAMP_WITHOUT_TIME_ZONE:
                return timestamp(((TimestampType) t).getPrecision(), n);
            case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return timestamp(((LocalZonedTimestampType) t).getPrecision(), n);
            case ROW:
                return row((RowType) t, j + k, i + k);
            case ARRAY:
                LogicalType e = ((ArrayType) t).getElementType();
                Object[] items = new Object[(int) ((i + k) % 4)];
                for (int x = 0; x < items.length; x++) {
                    items[x] = e.isNullable() && x == 2 ? null : value(e, j, i, k + x + 1);
                }
                return new GenericArrayData(items);
            case MAP:
                MapType m = (MapType) t;
                return map(m.getKeyType(), m.getValueType(), j, i, k);
            case MULTISET:
                LogicalType el = ((MultisetType) t).getElementType();
                Map<Object, Object> counts = new LinkedHashMap<>();
                for (int x = 0; x < (i + k) % 3; x++) {
                    counts.put(value(el, j, i, k + x + 1), x + 1);
                }
                return new GenericMapData(counts);
            default:
                throw new IllegalArgumentException("the generator has no values for " + t);
        }
    }

    private static GenericMapData map(LogicalType key, LogicalType val, long j, int i, int k) {
        Map<Object, Object> entries = new LinkedHashMap<>();
        for (int x = 0; x < (i + k) % 3; x++) {
            entries.put(value(key, j, i, k + x + 1), val.isNullable() && x == 1 ? null : value(val, j, i, k + x + 7));
        }
        return new GenericMapData(entries);
    }

    /** Milliseconds around the matrix's base time; the nanoseconds of the precision (none below 4 digits). */
    private static TimestampData timestamp(int precision, long n) {
        long millis = StateSet.BASE_TS + n * 1_001 - 5_000_000;
        if (precision < 3) {
            millis -= Math.floorMod(millis, (long) Math.pow(10, 3 - precision));
        }
        int nanos = precision <= 3 ? 0 : (int) (n * 123_457 % 1_000_000);
        if (precision > 3) {
            nanos -= nanos % (int) Math.pow(10, 9 - precision);
        }
        return TimestampData.fromEpochMillis(millis, nanos);
    }
}
