package golden;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.Decoder;
import org.apache.avro.io.Encoder;
import org.apache.avro.util.Utf8;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Avro values as Flink's AvroSerializer writes them in state: Avro's GenericDatumWriter driving
 * an Encoder that writes java.io.DataOutput primitives (flink-avro's DataOutputEncoder).
 *
 * <p>pyflink ships neither flink-avro nor Avro, so this runs the real Avro GenericDatumWriter /
 * GenericDatumReader (Debian's libavro-java) over an encoder/decoder pair written here from the
 * byte-level description in docs/formats.md §2.11 (big-endian ints/longs/floats, i32 length +
 * UTF-8 strings and bytes, i32 union index and enum index, unsigned 7-bit varint block counts
 * with a single 00 end byte). That section's example is checked in tests/data/golden/avro.jsonl.
 * AvroSerializer snapshots are not produced (no flink-avro jar).
 */
public final class AvroCodec implements SpecCodec {
    public AvroCodec() {}

    @Override
    public TypeSerializer<?> serializer(Spec s, World w) {
        return new AvroStateSerializer(new Schema.Parser().parse(s.raw));
    }

    private static Schema schema(Spec s) {
        return new Schema.Parser().parse(s.raw);
    }

    @Override
    public Object toJava(Spec s, Object j, World w) {
        return toAvro(schema(s), j);
    }

    @Override
    public Object toJson(Spec s, Object v, World w) {
        return fromAvro(schema(s), v);
    }

    // --------------------------------------------------------------------------------- values

    /** The union branch a tagged-JSON value belongs to: the first branch that accepts its shape. */
    @SuppressWarnings("unchecked")
    static Schema branch(Schema union, Object j) {
        for (Schema b : union.getTypes()) {
            Schema.Type t = b.getType();
            boolean ok;
            if (j == null) {
                ok = t == Schema.Type.NULL;
            } else if (j instanceof Boolean) {
                ok = t == Schema.Type.BOOLEAN;
            } else if (j instanceof Json.Num) {
                String x = ((Json.Num) j).text;
                boolean integral = !x.contains(".") && !x.contains("e") && !x.contains("E");
                ok = (integral && t == Schema.Type.INT && fitsInt(x)) || (integral && t == Schema.Type.LONG)
                        || t == Schema.Type.FLOAT || t == Schema.Type.DOUBLE;
            } else if (j instanceof String) {
                ok = t == Schema.Type.STRING || (t == Schema.Type.ENUM && b.hasEnumSymbol((String) j));
            } else if (j instanceof List) {
                ok = t == Schema.Type.ARRAY;
            } else {
                Map<String, Object> m = (Map<String, Object>) j;
                if (m.containsKey("$f")) ok = t == Schema.Type.FLOAT || t == Schema.Type.DOUBLE;
                else if (m.containsKey("$s")) ok = t == Schema.Type.STRING;
                else if (m.containsKey("$b")) ok = t == Schema.Type.BYTES || t == Schema.Type.FIXED;
                else if (m.containsKey("$map")) ok = t == Schema.Type.MAP;
                else ok = t == Schema.Type.RECORD;
            }
            if (ok) {
                return b;
            }
        }
        throw new IllegalArgumentException("no branch of " + union + " for " + j);
    }

    private static boolean fitsInt(String x) {
        try {
            Integer.parseInt(x);
            return true;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    @SuppressWarnings("unchecked")
    static Object toAvro(Schema sc, Object j) {
        switch (sc.getType()) {
            case NULL: return null;
            case BOOLEAN: return (Boolean) j;
            case INT: return Values.integer(j).intValueExact();
            case LONG: return Values.integer(j).longValueExact();
            case FLOAT: return Values.flt(j);
            case DOUBLE: return Values.dbl(j);
            case STRING: return Values.str(j);
            case BYTES: return ByteBuffer.wrap(Values.bytes(j));
            case FIXED: return new GenericData.Fixed(sc, Values.bytes(j));
            case ENUM: return new GenericData.EnumSymbol(sc, (String) j);
            case ARRAY: {
                List<Object> out = new ArrayList<>();
                for (Object o : (List<Object>) j) out.add(toAvro(sc.getElementType(), o));
                return out;
            }
            case MAP: {
                Map<String, Object> out = new LinkedHashMap<>();
                for (List<Object> kv : Values.mapEntries(j)) out.put(Values.str(kv.get(0)), toAvro(sc.getValueType(), kv.get(1)));
                return out;
            }
            case RECORD: {
                Map<String, Object> m = (Map<String, Object>) j;
                GenericData.Record r = new GenericData.Record(sc);
                for (Schema.Field f : sc.getFields()) r.put(f.name(), toAvro(f.schema(), m.get(f.name())));
                return r;
            }
            case UNION: return toAvro(branch(sc, j), j);
            default: throw new IllegalArgumentException("unsupported Avro type " + sc);
        }
    }

    static Object fromAvro(Schema sc, Object v) {
        switch (sc.getType()) {
            case NULL: return null;
            case BOOLEAN: return v;
            case INT:
            case LONG: return new Json.Num(v.toString());
            case FLOAT: return Values.floatJson((Float) v);
            case DOUBLE: return Values.doubleJson((Double) v);
            case STRING: return Values.strJson(v.toString());
            case BYTES: {
                ByteBuffer bb = ((ByteBuffer) v).duplicate();
                byte[] b = new byte[bb.remaining()];
                bb.get(b);
                return Values.bytesJson(b);
            }
            case FIXED: return Values.bytesJson(((GenericFixed) v).bytes());
            case ENUM: return v.toString();
            case ARRAY: {
                List<Object> out = new ArrayList<>();
                for (Object o : (List<?>) v) out.add(fromAvro(sc.getElementType(), o));
                return out;
            }
            case MAP: {
                List<Object> out = new ArrayList<>();
                for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                    out.add(Arrays.asList(Values.strJson(e.getKey().toString()), fromAvro(sc.getValueType(), e.getValue())));
                }
                return Json.obj("$map", out);
            }
            case RECORD: {
                GenericRecord r = (GenericRecord) v;
                Map<String, Object> out = new LinkedHashMap<>();
                for (Schema.Field f : sc.getFields()) out.put(f.name(), fromAvro(f.schema(), r.get(f.name())));
                return out;
            }
            case UNION: return fromAvro(sc.getTypes().get(GenericData.get().resolveUnion(sc, v)), v);
            default: throw new IllegalArgumentException("unsupported Avro type " + sc);
        }
    }

    // --------------------------------------------------------------------------------- serializer

    /** Just enough TypeSerializer to run values through the generator; no snapshot. */
    static final class AvroStateSerializer extends TypeSerializer<Object> {
        private static final long serialVersionUID = 1L;
        private final transient Schema schema;

        AvroStateSerializer(Schema schema) {
            this.schema = schema;
        }

        @Override public boolean isImmutableType() { return false; }
        @Override public TypeSerializer<Object> duplicate() { return this; }
        @Override public Object createInstance() { return null; }
        @Override public Object copy(Object from) { return from; }
        @Override public Object copy(Object from, Object reuse) { return from; }
        @Override public int getLength() { return -1; }

        @Override
        public void serialize(Object record, DataOutputView target) throws IOException {
            StateEncoder enc = new StateEncoder(target);
            new GenericDatumWriter<Object>(schema).write(record, enc);
        }

        @Override
        public Object deserialize(DataInputView source) throws IOException {
            return new GenericDatumReader<Object>(schema).read(null, new StateDecoder(source));
        }

        @Override
        public Object deserialize(Object reuse, DataInputView source) throws IOException {
            return deserialize(source);
        }

        @Override
        public void copy(DataInputView source, DataOutputView target) throws IOException {
            serialize(deserialize(source), target);
        }

        @Override public boolean equals(Object o) { return o == this; }
        @Override public int hashCode() { return schema.hashCode(); }

        @Override
        public TypeSerializerSnapshot<Object> snapshotConfiguration() {
            throw new UnsupportedOperationException("no flink-avro jar: Avro snapshots are not generated");
        }
    }

    /** Writes Avro's primitives in java.io.DataOutput form (see the class comment). */
    static final class StateEncoder extends Encoder {
        private final DataOutput out;

        StateEncoder(DataOutput out) {
            this.out = out;
        }

        @Override public void flush() {}
        @Override public void writeNull() {}
        @Override public void writeBoolean(boolean b) throws IOException { out.writeBoolean(b); }
        @Override public void writeInt(int n) throws IOException { out.writeInt(n); }
        @Override public void writeLong(long n) throws IOException { out.writeLong(n); }
        @Override public void writeFloat(float f) throws IOException { out.writeFloat(f); }
        @Override public void writeDouble(double d) throws IOException { out.writeDouble(d); }
        @Override public void writeEnum(int e) throws IOException { out.writeInt(e); }
        @Override public void writeIndex(int i) throws IOException { out.writeInt(i); }

        @Override
        public void writeString(Utf8 utf8) throws IOException {
            writeBytes(utf8.getBytes(), 0, utf8.getByteLength());
        }

        @Override
        public void writeString(String s) throws IOException {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            writeBytes(b, 0, b.length);
        }

        @Override
        public void writeBytes(ByteBuffer bytes) throws IOException {
            ByteBuffer d = bytes.duplicate();
            byte[] b = new byte[d.remaining()];
            d.get(b);
            writeBytes(b, 0, b.length);
        }

        @Override
        public void writeBytes(byte[] bytes, int start, int len) throws IOException {
            out.writeInt(len);
            out.write(bytes, start, len);
        }

        @Override
        public void writeFixed(byte[] bytes, int start, int len) throws IOException {
            out.write(bytes, start, len);
        }

        @Override public void writeArrayStart() {}
        @Override public void startItem() {}
        @Override public void writeMapStart() {}

        @Override
        public void setItemCount(long n) throws IOException {
            if (n > 0) {
                while ((n & ~0x7FL) != 0) {
                    out.write((int) ((n & 0x7F) | 0x80));
                    n >>>= 7;
                }
                out.write((int) n);
            }
        }

        @Override public void writeArrayEnd() throws IOException { out.write(0); }
        @Override public void writeMapEnd() throws IOException { out.write(0); }
    }

    /** The reading half of {@link StateEncoder}. */
    static final class StateDecoder extends Decoder {
        private final DataInput in;

        StateDecoder(DataInput in) {
            this.in = in;
        }

        private long count() throws IOException {
            long v = 0;
            int shift = 0;
            while (true) {
                int b = in.readUnsignedByte();
                v |= (long) (b & 0x7F) << shift;
                if ((b & 0x80) == 0) return v;
                shift += 7;
            }
        }

        @Override public void readNull() {}
        @Override public boolean readBoolean() throws IOException { return in.readBoolean(); }
        @Override public int readInt() throws IOException { return in.readInt(); }
        @Override public long readLong() throws IOException { return in.readLong(); }
        @Override public float readFloat() throws IOException { return in.readFloat(); }
        @Override public double readDouble() throws IOException { return in.readDouble(); }
        @Override public int readEnum() throws IOException { return in.readInt(); }
        @Override public int readIndex() throws IOException { return in.readInt(); }

        @Override
        public Utf8 readString(Utf8 old) throws IOException {
            byte[] b = new byte[in.readInt()];
            in.readFully(b);
            return new Utf8(b);
        }

        @Override public String readString() throws IOException { return readString(null).toString(); }
        @Override public void skipString() throws IOException { in.skipBytes(in.readInt()); }

        @Override
        public ByteBuffer readBytes(ByteBuffer old) throws IOException {
            byte[] b = new byte[in.readInt()];
            in.readFully(b);
            return ByteBuffer.wrap(b);
        }

        @Override public void skipBytes() throws IOException { in.skipBytes(in.readInt()); }
        @Override public void readFixed(byte[] b, int start, int len) throws IOException { in.readFully(b, start, len); }
        @Override public void skipFixed(int len) throws IOException { in.skipBytes(len); }
        @Override public long readArrayStart() throws IOException { return count(); }
        @Override public long arrayNext() throws IOException { return count(); }
        @Override public long skipArray() throws IOException { return count(); }
        @Override public long readMapStart() throws IOException { return count(); }
        @Override public long mapNext() throws IOException { return count(); }
        @Override public long skipMap() throws IOException { return count(); }
    }
}
