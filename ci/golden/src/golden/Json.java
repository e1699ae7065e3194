package golden;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A minimal JSON reader/writer, so the generator needs nothing beyond the Flink jars.
 *
 * <p>Numbers are kept as their source text ({@link Num}) so that longs are exact and floats are
 * parsed once, correctly rounded, by whoever knows the target type. Objects keep key order.
 * Strings are Java strings (UTF-16), so lone surrogates written as {@code \\uD800} survive.
 *
 * <p>Public because the savepoint generator and restore checker (ci/flink) use it too.
 */
public final class Json {
    private Json() {}

    /** A JSON number, kept as text. */
    public static final class Num {
        final String text;

        public Num(String text) {
            this.text = text;
        }

        @Override
        public String toString() {
            return text;
        }
    }

    // ------------------------------------------------------------------------------- reading

    public static Object parse(String s) {
        Reader r = new Reader(s);
        r.ws();
        Object v = r.value();
        r.ws();
        if (r.i != s.length()) {
            throw new IllegalArgumentException("trailing characters at " + r.i);
        }
        return v;
    }

    private static final class Reader {
        final String s;
        int i;

        Reader(String s) {
            this.s = s;
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        IllegalArgumentException err(String what) {
            return new IllegalArgumentException("JSON: " + what + " at offset " + i);
        }

        Object value() {
            if (i >= s.length()) {
                throw err("unexpected end");
            }
            char c = s.charAt(i);
            switch (c) {
                case '{':
                    return object();
                case '[':
                    return array();
                case '"':
                    return string();
                case 't':
                    lit("true");
                    return Boolean.TRUE;
                case 'f':
                    lit("false");
                    return Boolean.FALSE;
                case 'n':
                    lit("null");
                    return null;
                default:
                    return number();
            }
        }

        void lit(String w) {
            if (!s.startsWith(w, i)) {
                throw err("expected " + w);
            }
            i += w.length();
        }

        Map<String, Object> object() {
            Map<String, Object> m = new LinkedHashMap<>();
            i++;
            ws();
            if (s.charAt(i) == '}') {
                i++;
                return m;
            }
            while (true) {
                ws();
                String k = string();
                ws();
                if (s.charAt(i++) != ':') {
                    throw err("expected ':'");
                }
                ws();
                m.put(k, value());
                ws();
                char c = s.charAt(i++);
                if (c == '}') {
                    return m;
                }
                if (c != ',') {
                    throw err("expected ',' or '}'");
                }
            }
        }

        List<Object> array() {
            List<Object> a = new ArrayList<>();
            i++;
            ws();
            if (s.charAt(i) == ']') {
                i++;
                return a;
            }
            while (true) {
                ws();
                a.add(value());
                ws();
                char c = s.charAt(i++);
                if (c == ']') {
                    return a;
                }
                if (c != ',') {
                    throw err("expected ',' or ']'");
                }
            }
        }

        String string() {
            if (s.charAt(i) != '"') {
                throw err("expected string");
            }
            i++;
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n':
                        b.append('\n');
                        break;
                    case 't':
                        b.append('\t');
                        break;
                    case 'r':
                        b.append('\r');
                        break;
                    case 'b':
                        b.append('\b');
                        break;
                    case 'f':
                        b.append('\f');
                        break;
                    case 'u':
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                        break;
                    default:
                        b.append(e);
                }
            }
        }

        Num number() {
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            if (start == i) {
                throw err("unexpected character '" + s.charAt(i) + "'");
            }
            return new Num(s.substring(start, i));
        }
    }

    // ------------------------------------------------------------------------------- writing

    public static String write(Object v) {
        StringBuilder b = new StringBuilder();
        write(v, b);
        return b.toString();
    }

    @SuppressWarnings("unchecked")
    public static void write(Object v, StringBuilder b) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Boolean || v instanceof Num) {
            b.append(v);
        } else if (v instanceof Integer || v instanceof Long) {
            b.append(v);
        } else if (v instanceof String) {
            writeString((String) v, b);
        } else if (v instanceof Map) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) {
                    b.append(", ");
                }
                first = false;
                writeString(e.getKey(), b);
                b.append(": ");
                write(e.getValue(), b);
            }
            b.append('}');
        } else if (v instanceof List) {
            b.append('[');
            boolean first = true;
            for (Object o : (List<Object>) v) {
                if (!first) {
                    b.append(", ");
                }
                first = false;
                write(o, b);
            }
            b.append(']');
        } else {
            throw new IllegalArgumentException("cannot write " + v.getClass() + " as JSON");
        }
    }

    /** Writes non-ASCII characters as they are (the file is UTF-8); callers must not pass lone surrogates. */
    static void writeString(String s, StringBuilder b) {
        b.append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20 || c == 0x7f) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }

    static boolean hasLoneSurrogate(String s) {
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (Character.isHighSurrogate(c)) {
                if (k + 1 < s.length() && Character.isLowSurrogate(s.charAt(k + 1))) {
                    k++;
                    continue;
                }
                return true;
            }
            if (Character.isLowSurrogate(c)) {
                return true;
            }
        }
        return false;
    }

    public static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int k = 0; k < kv.length; k += 2) {
            m.put((String) kv[k], kv[k + 1]);
        }
        return m;
    }
}
