package golden;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A parsed SPEC: the small text grammar (documented in tests/data/golden/README.md) that names a
 * serializer on both sides, e.g. {@code Map<String,Nullable<Int,padded>>}. tests/snapshots/specs.py
 * parses the same grammar into statemorph serializers.
 */
final class Spec {
    static final Set<String> ATOMS =
            new HashSet<>(
                    Arrays.asList(
                            "Boolean", "Byte", "Short", "Int", "Long", "Float", "Double", "Char",
                            "String", "Bytes", "BooleanArray", "ShortArray", "CharArray",
                            "IntArray", "LongArray", "FloatArray", "DoubleArray", "StringArray"));

    final String kind;
    final List<Spec> args = new ArrayList<>();
    /** Enum / Pojo: the Java class name. */
    String cls;
    /** Enum: constant names in declaration order. */
    final List<String> consts = new ArrayList<>();
    /** Pojo: field names, parallel to {@link #args}, in declaration order. */
    final List<String> fieldNames = new ArrayList<>();
    boolean padded;
    boolean legacy;
    /** RowData: the Flink SQL type text; Avro: the schema JSON text. */
    String raw;

    private Spec(String kind) {
        this.kind = kind;
    }

    static Spec parse(String text) {
        P p = new P(text);
        Spec s = p.spec();
        p.ws();
        if (p.i != text.length()) {
            throw p.err("trailing text");
        }
        return s;
    }

    private static final class P {
        final String s;
        int i;

        P(String s) {
            this.s = s;
        }

        IllegalArgumentException err(String what) {
            return new IllegalArgumentException("SPEC " + s + ": " + what + " at offset " + i);
        }

        void ws() {
            while (i < s.length() && s.charAt(i) == ' ') {
                i++;
            }
        }

        boolean peek(char c) {
            ws();
            return i < s.length() && s.charAt(i) == c;
        }

        void expect(char c) {
            if (!peek(c)) {
                throw err("expected '" + c + "'");
            }
            i++;
        }

        String ident(boolean dotted) {
            ws();
            int st = i;
            while (i < s.length()) {
                int c = s.codePointAt(i); // by code point: a name may hold letters beyond the BMP
                if (Character.isLetterOrDigit(c) || c == '_' || c == '$' || (dotted && c == '.')) {
                    i += Character.charCount(c);
                } else {
                    break;
                }
            }
            if (st == i) {
                throw err("expected a name");
            }
            return s.substring(st, i);
        }

        Spec spec() {
            String name = ident(false);
            Spec sp = new Spec(name);
            if (peek('[')) {
                i++;
                for (String f : ident(false).split(",")) {
                    if (name.equals("Row") && f.equals("legacy")) {
                        sp.legacy = true;
                    } else {
                        throw err("unknown flag " + f);
                    }
                }
                expect(']');
            }
            if (ATOMS.contains(name)) {
                return sp;
            }
            expect('<');
            switch (name) {
                case "List":
                    sp.args.add(spec());
                    break;
                case "Map":
                    sp.args.add(spec());
                    expect(',');
                    sp.args.add(spec());
                    break;
                case "Nullable":
                    sp.args.add(spec());
                    if (peek(',')) {
                        i++;
                        String f = ident(false);
                        if (!f.equals("padded")) {
                            throw err("Nullable flag must be 'padded'");
                        }
                        sp.padded = true;
                    }
                    break;
                case "Tuple":
                case "Row":
                    if (!peek('>')) {
                        sp.args.add(spec());
                        while (peek(',')) {
                            i++;
                            sp.args.add(spec());
                        }
                    }
                    if (name.equals("Tuple") && (sp.args.isEmpty() || sp.args.size() > 25)) {
                        throw err("Tuple takes 1 to 25 fields (Tuple0 has its own serializer)");
                    }
                    break;
                case "Enum":
                    sp.cls = ident(true);
                    expect(':');
                    sp.consts.add(ident(false));
                    while (peek(',')) {
                        i++;
                        sp.consts.add(ident(false));
                    }
                    break;
                case "Pojo":
                    sp.cls = ident(true);
                    expect(':');
                    if (!peek('>')) {
                        do {
                            if (peek(',')) {
                                i++;
                            }
                            sp.fieldNames.add(ident(false));
                            expect('=');
                            sp.args.add(spec());
                        } while (peek(','));
                    }
                    break;
                case "RowData":
                    sp.raw = balancedType();
                    return sp;
                case "Avro":
                    ws();
                    sp.raw = balancedJson();
                    break;
                default:
                    throw err("unknown serializer " + name);
            }
            expect('>');
            return sp;
        }

        /** The SQL type up to the '>' that closes RowData<; consumes that '>'. */
        String balancedType() {
            int depth = 0;
            int st = i;
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c == '`' || c == '\'') {
                    int e = i + 1;
                    while (true) {
                        e = s.indexOf(c, e);
                        if (e < 0) {
                            throw err("unterminated quote");
                        }
                        if (e + 1 < s.length() && s.charAt(e + 1) == c) {
                            e += 2; // doubled quote = escaped quote
                            continue;
                        }
                        break;
                    }
                    i = e + 1;
                    continue;
                }
                if (c == '<') {
                    depth++;
                } else if (c == '>') {
                    if (depth == 0) {
                        String t = s.substring(st, i).trim();
                        i++;
                        return t;
                    }
                    depth--;
                }
                i++;
            }
            throw err("unterminated RowData<");
        }

        String balancedJson() {
            int st = i;
            int depth = 0;
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c == '"') {
                    i++;
                    while (s.charAt(i) != '"') {
                        i += s.charAt(i) == '\\' ? 2 : 1;
                    }
                } else if (c == '{' || c == '[') {
                    depth++;
                } else if (c == '}' || c == ']') {
                    depth--;
                }
                i++;
                if (depth == 0) {
                    return s.substring(st, i);
                }
            }
            throw err("unterminated JSON");
        }
    }

    boolean contains(String k) {
        if (kind.equals(k)) {
            return true;
        }
        for (Spec a : args) {
            if (a.contains(k)) {
                return true;
            }
        }
        return false;
    }

    /** Every Enum/Pojo spec in this tree (depth first), for class generation. */
    void collectClasses(List<Spec> out) {
        if (kind.equals("Enum") || kind.equals("Pojo")) {
            out.add(this);
        }
        for (Spec a : args) {
            a.collectClasses(out);
        }
    }
}
