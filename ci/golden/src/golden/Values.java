package golden;

import org.apache.flink.types.RowKind;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** The tagged-JSON conventions of the vector files (tests/data/golden/README.md), one place. */
final class Values {
    private Values() {}

    static BigInteger integer(Object j) {
        if (!(j instanceof Json.Num)) {
            throw new IllegalArgumentException("expected an integer, got " + j);
        }
        return new BigDecimal(((Json.Num) j).text).toBigIntegerExact();
    }

    /**
     * A number, or {"$f": "NaN" | "Infinity" | "-Infinity" | "-0.0" | any decimal text}, or
     * {"$dbits": 16 hex digits}: the raw IEEE bits of a NaN with a payload or sign.
     */
    @SuppressWarnings("unchecked")
    static double dbl(Object j) {
        if (j instanceof Json.Num) {
            return Double.parseDouble(((Json.Num) j).text);
        }
        if (j instanceof Map && ((Map<String, Object>) j).containsKey("$f")) {
            return Double.parseDouble((String) ((Map<String, Object>) j).get("$f"));
        }
        if (j instanceof Map && ((Map<String, Object>) j).containsKey("$dbits")) {
            return Double.longBitsToDouble(Long.parseUnsignedLong((String) ((Map<String, Object>) j).get("$dbits"), 16));
        }
        throw new IllegalArgumentException("expected a double, got " + j);
    }

    /** As {@link #dbl}, for a 32-bit float: {"$fbits": 8 hex digits} instead of $dbits. */
    @SuppressWarnings("unchecked")
    static float flt(Object j) {
        if (j instanceof Map && ((Map<String, Object>) j).containsKey("$fbits")) {
            return Float.intBitsToFloat(Integer.parseUnsignedInt((String) ((Map<String, Object>) j).get("$fbits"), 16));
        }
        return (float) dbl(j);
    }

    /** A string, or {"$s": [utf16 code units]} for text that JSON cannot carry (lone surrogates). */
    @SuppressWarnings("unchecked")
    static String str(Object j) {
        if (j == null || j instanceof String) {
            return (String) j;
        }
        if (j instanceof Map && ((Map<String, Object>) j).containsKey("$s")) {
            List<Object> units = (List<Object>) ((Map<String, Object>) j).get("$s");
            char[] c = new char[units.size()];
            for (int k = 0; k < c.length; k++) {
                c[k] = (char) integer(units.get(k)).intValueExact();
            }
            return new String(c);
        }
        throw new IllegalArgumentException("expected a string, got " + j);
    }

    @SuppressWarnings("unchecked")
    static byte[] bytes(Object j) {
        if (j == null) {
            return null;
        }
        String hex = (String) ((Map<String, Object>) j).get("$b");
        if (hex == null) {
            throw new IllegalArgumentException("expected {\"$b\": hex}, got " + j);
        }
        return unhex(hex);
    }

    @SuppressWarnings("unchecked")
    static List<List<Object>> mapEntries(Object j) {
        Object e = ((Map<String, Object>) j).get("$map");
        if (e == null) {
            throw new IllegalArgumentException("expected {\"$map\": [[k, v], ...]}, got " + j);
        }
        return (List<List<Object>>) e;
    }

    @SuppressWarnings("unchecked")
    static RowKind kind(Map<String, Object> m) {
        Object k = m.get("kind");
        return k == null ? RowKind.INSERT : World.kindOf((String) k);
    }

    static Object floatJson(float f) {
        if (Float.isNaN(f) && Float.floatToRawIntBits(f) != 0x7fc00000) {
            return Json.obj("$fbits", String.format("%08x", Float.floatToRawIntBits(f)));
        }
        if (Float.isNaN(f) || Float.isInfinite(f) || Float.floatToRawIntBits(f) == 0x80000000) {
            return Json.obj("$f", Float.toString(f));
        }
        return doubleJson((double) f);
    }

    static Object doubleJson(double d) {
        if (Double.isNaN(d) && Double.doubleToRawLongBits(d) != 0x7ff8000000000000L) {
            return Json.obj("$dbits", String.format("%016x", Double.doubleToRawLongBits(d)));
        }
        if (Double.isNaN(d) || Double.isInfinite(d) || Double.doubleToRawLongBits(d) == 0x8000000000000000L) {
            return Json.obj("$f", Double.toString(d));
        }
        String t = Double.toString(d);
        if (Double.doubleToRawLongBits(Double.parseDouble(t)) != Double.doubleToRawLongBits(d)) {
            t = new BigDecimal(d).toString();
        }
        return new Json.Num(t);
    }

    static Object strJson(String s) {
        if (s == null || !Json.hasLoneSurrogate(s)) {
            return s;
        }
        List<Object> units = new ArrayList<>();
        for (int k = 0; k < s.length(); k++) {
            units.add(new Json.Num(Integer.toString(s.charAt(k))));
        }
        return Json.obj("$s", units);
    }

    static Object bytesJson(byte[] b) {
        return b == null ? null : Json.obj("$b", hex(b));
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        }
        return sb.toString();
    }

    static byte[] unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int k = 0; k < b.length; k++) {
            b[k] = (byte) Integer.parseInt(h.substring(2 * k, 2 * k + 2), 16);
        }
        return b;
    }
}
