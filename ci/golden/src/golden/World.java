package golden;

import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.base.BooleanSerializer;
import org.apache.flink.api.common.typeutils.base.ByteSerializer;
import org.apache.flink.api.common.typeutils.base.CharSerializer;
import org.apache.flink.api.common.typeutils.base.DoubleSerializer;
import org.apache.flink.api.common.typeutils.base.EnumSerializer;
import org.apache.flink.api.common.typeutils.base.FloatSerializer;
import org.apache.flink.api.common.typeutils.base.IntSerializer;
import org.apache.flink.api.common.typeutils.base.ListSerializer;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.api.common.typeutils.base.MapSerializer;
import org.apache.flink.api.common.typeutils.base.ShortSerializer;
import org.apache.flink.api.common.typeutils.base.StringSerializer;
import org.apache.flink.api.common.typeutils.base.array.BooleanPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.CharPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.DoublePrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.FloatPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.IntPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.LongPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.ShortPrimitiveArraySerializer;
import org.apache.flink.api.common.typeutils.base.array.StringArraySerializer;
import org.apache.flink.api.java.tuple.Tuple;
import org.apache.flink.api.java.typeutils.runtime.NullableSerializer;
import org.apache.flink.api.java.typeutils.runtime.PojoSerializer;
import org.apache.flink.api.java.typeutils.runtime.RowSerializer;
import org.apache.flink.api.java.typeutils.runtime.TupleSerializer;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;
import org.apache.flink.types.Row;
import org.apache.flink.types.RowKind;

import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import java.io.ByteArrayOutputStream;
import java.lang.reflect.Field;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * One "world": a class loader holding the Java enum and POJO classes that a SPEC names,
 * generated from the SPEC itself and compiled on the fly. The old and new side of a
 * compatibility case live in different worlds, so {@code p.Color} can gain a constant between
 * them exactly as it would between two versions of a job.
 */
final class World {
    private static final Map<String, World> CACHE = new HashMap<>();
    private static int counter;
    static Path buildDir;
    /** Set when the Avro jar is on the class path (see generate.sh). */
    static SpecCodec avro;

    final ClassLoader loader;

    private World(ClassLoader loader) {
        this.loader = loader;
    }

    /** The world for all classes named in {@code specs}. */
    static World of(Spec... specs) throws Exception {
        Map<String, Spec> defs = new LinkedHashMap<>();
        for (Spec s : specs) {
            List<Spec> found = new ArrayList<>();
            s.collectClasses(found);
            for (Spec c : found) {
                Spec prior = defs.get(c.cls);
                if (prior != null && !source(prior).equals(source(c))) {
                    throw new IllegalArgumentException("class " + c.cls + " defined twice differently");
                }
                defs.put(c.cls, c);
            }
        }
        StringBuilder key = new StringBuilder();
        for (Spec c : defs.values()) {
            key.append(source(c)).append('\n');
        }
        World w = CACHE.get(key.toString());
        if (w != null) {
            return w;
        }
        if (defs.isEmpty()) {
            w = new World(World.class.getClassLoader());
        } else {
            Path dir = buildDir.resolve("worlds").resolve("w" + (counter++));
            List<String> args = new ArrayList<>(Arrays.asList(
                    "-nowarn", "-classpath", System.getProperty("java.class.path"), "-d", dir.toString()));
            for (Spec c : defs.values()) {
                Path src = dir.resolve("src").resolve(c.cls.replace('.', '/') + ".java");
                Files.createDirectories(src.getParent());
                Files.write(src, source(c).getBytes(StandardCharsets.UTF_8));
                args.add(src.toString());
            }
            JavaCompiler jc = ToolProvider.getSystemJavaCompiler();
            ByteArrayOutputStream errs = new ByteArrayOutputStream();
            if (jc.run(null, null, errs, args.toArray(new String[0])) != 0) {
                throw new IllegalStateException("compiling generated classes failed: " + errs);
            }
            w = new World(new URLClassLoader(new URL[] {dir.toUri().toURL()}, World.class.getClassLoader()));
        }
        CACHE.put(key.toString(), w);
        return w;
    }

    private static String source(Spec c) {
        int dot = c.cls.lastIndexOf('.');
        String pkg = dot < 0 ? "" : "package " + c.cls.substring(0, dot) + ";\n";
        String simple = c.cls.substring(dot + 1);
        StringBuilder b = new StringBuilder(pkg);
        if (c.kind.equals("Enum")) {
            b.append("public enum ").append(simple).append(" { ").append(String.join(", ", c.consts)).append(" }\n");
        } else {
            b.append("public class ").append(simple).append(" {\n");
            for (int k = 0; k < c.fieldNames.size(); k++) {
                b.append("  public ").append(javaType(c.args.get(k))).append(' ').append(c.fieldNames.get(k)).append(";\n");
            }
            b.append("  public ").append(simple).append("() {}\n}\n");
        }
        return b.toString();
    }

    private static String javaType(Spec s) {
        switch (s.kind) {
            case "Boolean": return "Boolean";
            case "Byte": return "Byte";
            case "Short": return "Short";
            case "Int": return "Integer";
            case "Long": return "Long";
            case "Float": return "Float";
            case "Double": return "Double";
            case "Char": return "Character";
            case "String": return "String";
            case "Bytes": return "byte[]";
            case "List": return "java.util.List";
            case "Map": return "java.util.Map";
            case "Nullable": return javaType(s.args.get(0));
            case "Enum":
            case "Pojo": return s.cls;
            case "Tuple": return "org.apache.flink.api.java.tuple.Tuple" + s.args.size();
            case "Row": return "org.apache.flink.types.Row";
            case "RowData": return "org.apache.flink.table.data.RowData";
            default:
                Class<?> component = ARRAY_COMPONENTS.get(s.kind);
                return component == null ? "Object" : component.getSimpleName() + "[]";
        }
    }

    /** Java component type of each array atom; its elements are the atom named without "Array". */
    private static final Map<String, Class<?>> ARRAY_COMPONENTS = new HashMap<>();

    static {
        ARRAY_COMPONENTS.put("BooleanArray", boolean.class);
        ARRAY_COMPONENTS.put("ShortArray", short.class);
        ARRAY_COMPONENTS.put("CharArray", char.class);
        ARRAY_COMPONENTS.put("IntArray", int.class);
        ARRAY_COMPONENTS.put("LongArray", long.class);
        ARRAY_COMPONENTS.put("FloatArray", float.class);
        ARRAY_COMPONENTS.put("DoubleArray", double.class);
        ARRAY_COMPONENTS.put("StringArray", String.class);
    }

    private static Spec element(Spec array) {
        return Spec.parse(array.kind.substring(0, array.kind.length() - "Array".length()));
    }

    Class<?> cls(String name) throws ClassNotFoundException {
        return Class.forName(name, true, loader);
    }

    /** POJO fields in serializer order: sorted by name with String.compareTo, as PojoTypeInfo does. */
    Field[] pojoFields(Spec s) throws Exception {
        Class<?> c = cls(s.cls);
        Field[] fs = new Field[s.fieldNames.size()];
        for (int k = 0; k < fs.length; k++) {
            fs[k] = c.getField(s.fieldNames.get(k));
        }
        Arrays.sort(fs, Comparator.comparing(Field::getName));
        return fs;
    }

    Spec pojoFieldSpec(Spec s, String name) {
        return s.args.get(s.fieldNames.indexOf(name));
    }

    // ------------------------------------------------------------------------------- serializers

    @SuppressWarnings({"unchecked", "rawtypes"})
    TypeSerializer<Object> serializer(Spec s) throws Exception {
        TypeSerializer<?> r;
        switch (s.kind) {
            case "Boolean": r = BooleanSerializer.INSTANCE; break;
            case "Byte": r = ByteSerializer.INSTANCE; break;
            case "Short": r = ShortSerializer.INSTANCE; break;
            case "Int": r = IntSerializer.INSTANCE; break;
            case "Long": r = LongSerializer.INSTANCE; break;
            case "Float": r = FloatSerializer.INSTANCE; break;
            case "Double": r = DoubleSerializer.INSTANCE; break;
            case "Char": r = CharSerializer.INSTANCE; break;
            case "String": r = StringSerializer.INSTANCE; break;
            case "Bytes": r = BytePrimitiveArraySerializer.INSTANCE; break;
            case "BooleanArray": r = BooleanPrimitiveArraySerializer.INSTANCE; break;
            case "ShortArray": r = ShortPrimitiveArraySerializer.INSTANCE; break;
            case "CharArray": r = CharPrimitiveArraySerializer.INSTANCE; break;
            case "IntArray": r = IntPrimitiveArraySerializer.INSTANCE; break;
            case "LongArray": r = LongPrimitiveArraySerializer.INSTANCE; break;
            case "FloatArray": r = FloatPrimitiveArraySerializer.INSTANCE; break;
            case "DoubleArray": r = DoublePrimitiveArraySerializer.INSTANCE; break;
            case "StringArray": r = StringArraySerializer.INSTANCE; break;
            case "List": r = new ListSerializer<>(serializer(s.args.get(0))); break;
            case "Map": r = new MapSerializer<>(serializer(s.args.get(0)), serializer(s.args.get(1))); break;
            case "Nullable":
                if (s.args.get(0).kind.equals("Nullable")) {
                    // NullableSerializer.wrap returns an already-nullable serializer unchanged
                    // (its constructor is private), so Flink has no nested-Nullable format.
                    throw new IllegalArgumentException("Nullable<Nullable<...>> does not exist in Flink: wrap() never nests");
                }
                r = NullableSerializer.wrap(serializer(s.args.get(0)), s.padded);
                break;
            case "Tuple": r = new TupleSerializer(Tuple.getTupleClass(s.args.size()), nested(s.args)); break;
            case "Row": r = new RowSerializer(nested(s.args), null, !s.legacy); break;
            case "Enum": r = new EnumSerializer(cls(s.cls)); break;
            case "Pojo": {
                Field[] fs = pojoFields(s);
                TypeSerializer<?>[] ser = new TypeSerializer<?>[fs.length];
                for (int k = 0; k < fs.length; k++) {
                    ser[k] = serializer(pojoFieldSpec(s, fs[k].getName()));
                }
                r = new PojoSerializer(cls(s.cls), ser, fs, new SerializerConfigImpl());
                break;
            }
            case "RowData": r = new RowDataSerializer(rowType(s)); break;
            case "Avro": r = requireAvro().serializer(s, this); break;
            default: throw new IllegalArgumentException("unknown spec kind " + s.kind);
        }
        return (TypeSerializer<Object>) r;
    }

    RowType rowType(Spec s) {
        LogicalType t = LogicalTypeParser.parse(s.raw, loader);
        if (!(t instanceof RowType)) {
            throw new IllegalArgumentException("RowData<...> needs a ROW type, got " + t);
        }
        return (RowType) t;
    }

    private static SpecCodec requireAvro() {
        if (avro == null) {
            throw new IllegalStateException("Avro<...> specs need the Avro jar on the class path (see generate.sh)");
        }
        return avro;
    }

    private TypeSerializer<?>[] nested(List<Spec> specs) throws Exception {
        TypeSerializer<?>[] r = new TypeSerializer<?>[specs.size()];
        for (int k = 0; k < r.length; k++) {
            r[k] = serializer(specs.get(k));
        }
        return r;
    }

    // ------------------------------------------------------------------------------- JSON -> Java

    @SuppressWarnings({"unchecked", "rawtypes"})
    Object toJava(Spec s, Object j) throws Exception {
        if (j == null && !s.kind.equals("RowData") && !s.kind.equals("Avro")) {
            return null;
        }
        if (ARRAY_COMPONENTS.containsKey(s.kind)) { // primitive arrays and String[]
            List<Object> l = (List<Object>) j;
            Spec element = element(s);
            Object a = java.lang.reflect.Array.newInstance(ARRAY_COMPONENTS.get(s.kind), l.size());
            for (int k = 0; k < l.size(); k++) {
                java.lang.reflect.Array.set(a, k, toJava(element, l.get(k)));
            }
            return a;
        }
        switch (s.kind) {
            case "Boolean": return (Boolean) j;
            case "Byte": return Values.integer(j).byteValueExact();
            case "Short": return Values.integer(j).shortValueExact();
            case "Int": return Values.integer(j).intValueExact();
            case "Long": return Values.integer(j).longValueExact();
            case "Float": return Values.flt(j);
            case "Double": return Values.dbl(j);
            case "Char": {
                String c = Values.str(j);
                if (c.length() != 1) {
                    throw new IllegalArgumentException("Char value must be one UTF-16 unit: " + j);
                }
                return c.charAt(0);
            }
            case "String": return Values.str(j);
            case "Bytes": return Values.bytes(j);
            case "List": {
                List<Object> out = new ArrayList<>();
                for (Object o : (List<Object>) j) out.add(toJava(s.args.get(0), o));
                return out;
            }
            case "Map": {
                Map<Object, Object> out = new LinkedHashMap<>();
                for (List<Object> kv : Values.mapEntries(j)) {
                    out.put(toJava(s.args.get(0), kv.get(0)), toJava(s.args.get(1), kv.get(1)));
                }
                return out;
            }
            case "Nullable": return toJava(s.args.get(0), j);
            case "Enum": {
                String name = Values.str(j);
                for (Object c : cls(s.cls).getEnumConstants()) {
                    if (((Enum) c).name().equals(name)) return c;
                }
                throw new IllegalArgumentException("no constant " + name + " in " + s.cls);
            }
            case "Tuple": {
                List<Object> l = (List<Object>) j;
                if (l.size() != s.args.size()) throw new IllegalArgumentException("tuple arity");
                Tuple t = Tuple.newInstance(l.size());
                for (int k = 0; k < l.size(); k++) t.setField(toJava(s.args.get(k), l.get(k)), k);
                return t;
            }
            case "Row": {
                Map<String, Object> m = (Map<String, Object>) j;
                List<Object> l = (List<Object>) m.get("$row");
                if (l.size() != s.args.size()) throw new IllegalArgumentException("row arity");
                Row r = Row.withPositions(Values.kind(m), l.size());
                for (int k = 0; k < l.size(); k++) r.setField(k, toJava(s.args.get(k), l.get(k)));
                return r;
            }
            case "Pojo": {
                Map<String, Object> m = (Map<String, Object>) j;
                for (String k : m.keySet()) {
                    if (!s.fieldNames.contains(k)) throw new IllegalArgumentException("no POJO field " + k);
                }
                Object o = cls(s.cls).getConstructor().newInstance();
                for (int k = 0; k < s.fieldNames.size(); k++) {
                    String f = s.fieldNames.get(k);
                    o.getClass().getField(f).set(o, toJava(s.args.get(k), m.get(f)));
                }
                return o;
            }
            case "RowData": return RowDataValues.toInternal(rowType(s), j);
            case "Avro": return requireAvro().toJava(s, j, this);
            default: throw new IllegalArgumentException("unknown spec kind " + s.kind);
        }
    }

    // ------------------------------------------------------------------------------- Java -> JSON

    Object toJson(Spec s, Object v) throws Exception {
        if (v == null && !s.kind.equals("Avro")) {
            return null;
        }
        if (ARRAY_COMPONENTS.containsKey(s.kind)) {
            List<Object> l = new ArrayList<>();
            Spec element = element(s);
            for (int k = 0; k < java.lang.reflect.Array.getLength(v); k++) {
                l.add(toJson(element, java.lang.reflect.Array.get(v, k)));
            }
            return l;
        }
        switch (s.kind) {
            case "Boolean": return v;
            case "Byte":
            case "Short":
            case "Int":
            case "Long": return new Json.Num(v.toString());
            case "Float": return Values.floatJson((Float) v);
            case "Double": return Values.doubleJson((Double) v);
            case "Char": return Values.strJson(String.valueOf((char) (Character) v));
            case "String": return Values.strJson((String) v);
            case "Bytes": return Values.bytesJson((byte[]) v);
            case "List": {
                List<Object> l = new ArrayList<>();
                for (Object o : (List<?>) v) l.add(toJson(s.args.get(0), o));
                return l;
            }
            case "Map": {
                List<Object> l = new ArrayList<>();
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    l.add(Arrays.asList(toJson(s.args.get(0), e.getKey()), toJson(s.args.get(1), e.getValue())));
                }
                return Json.obj("$map", l);
            }
            case "Nullable": return toJson(s.args.get(0), v);
            case "Enum": return ((Enum<?>) v).name();
            case "Tuple": {
                List<Object> l = new ArrayList<>();
                Tuple t = (Tuple) v;
                for (int k = 0; k < s.args.size(); k++) l.add(toJson(s.args.get(k), t.getField(k)));
                return l;
            }
            case "Row": {
                Row r = (Row) v;
                List<Object> l = new ArrayList<>();
                for (int k = 0; k < s.args.size(); k++) l.add(toJson(s.args.get(k), r.getField(k)));
                return Json.obj("$row", l, "kind", r.getKind().shortString());
            }
            case "Pojo": {
                Map<String, Object> m = new LinkedHashMap<>();
                for (int k = 0; k < s.fieldNames.size(); k++) {
                    String f = s.fieldNames.get(k);
                    m.put(f, toJson(s.args.get(k), v.getClass().getField(f).get(v)));
                }
                return m;
            }
            case "RowData": return RowDataValues.toJson(rowType(s), v);
            case "Avro": return requireAvro().toJson(s, v, this);
            default: throw new IllegalArgumentException("unknown spec kind " + s.kind);
        }
    }

    static RowKind kindOf(String shortString) {
        for (RowKind k : RowKind.values()) {
            if (k.shortString().equals(shortString)) return k;
        }
        throw new IllegalArgumentException("unknown row kind " + shortString);
    }
}
