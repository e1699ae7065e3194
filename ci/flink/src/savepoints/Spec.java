package savepoints;

import golden.Json;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.runtime.typeutils.InternalTypeInfo;
import org.apache.flink.table.runtime.typeutils.RowDataSerializer;
import org.apache.flink.table.types.logical.IntType;
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;
import org.apache.flink.table.types.logical.VarCharType;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * One savepoint of the test matrix, read from a small JSON file.
 *
 * <p>The generator and the restore checker both derive everything from it (the keys, the record
 * each sequence number stands for, which states exist), so a checker run needs nothing but the
 * spec the savepoint was made from. Fields: {@code name}, {@code backend} (hashmap | rocksdb),
 * {@code compression}, {@code parallelism}, {@code max_parallelism}, {@code key_type} (int | long |
 * string | row | kryo: a {@link KryoKey}), {@code keys}, {@code records_per_key}, {@code states} (a subset of {@link #ALL_STATES}),
 * {@code storage} (jobmanager: every stream inline in _metadata | filesystem: files above
 * {@code inline_threshold} bytes), {@code uid} of the stateful operator, {@code events_type}
 * (the Flink SQL row type of the events state; the checker may be given a different one), and
 * {@code key_values} (explicit int or string keys instead of the generated ones, so the checker
 * can probe a savepoint written outside Flink, e.g. bootstrapped by statemorph), and, for the
 * generator only, {@code extra_uid} (one more operator, holding operator state, which the checker's
 * job does not have), {@code format} (canonical | native savepoint | retained checkpoint) and
 * {@code incremental} (checkpoints: incremental, the default, or full), and, for the checker only, {@code allow_unclaimed} (restore one operator of
 * a savepoint whose other operators another restore checks). The
 * driver also reads {@code flink} (which release takes the savepoint); Java ignores it.
 */
final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;

    /** The row type the events state is written with (the "old" Events type). */
    static final String OLD_EVENTS_TYPE =
            "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>";

    /** The row key of {@code key_type: row}, like the grouping key of a Flink SQL aggregation. */
    static final RowType KEY_ROW_TYPE = RowType.of(
            new LogicalType[] {new IntType(), new VarCharType(VarCharType.MAX_LENGTH)}, new String[] {"id", "name"});

    static final List<String> ALL_STATES =
            Arrays.asList("events", "count", "last", "recent", "totals", "ttl_count", "ttl_events", "ttl_recent",
                    "ttl_totals", "timers");

    final String name;
    final String backend;
    final boolean compression;
    final int parallelism;
    final int maxParallelism;
    final String keyType;
    final int keys;
    final int recordsPerKey;
    final List<String> states;
    final String storage;
    final long inlineThreshold;
    final String uid;
    final String eventsType;
    /** Explicit keys (JSON ints or strings), e.g. of a savepoint bootstrapped outside Flink; null: the generated keys. */
    final List<Object> keyValues;
    /** Generator only: the uid of one more operator, which holds operator state; null: none. */
    final String extraUid;
    /**
     * Generator only: what the job is stopped with: {@code canonical} (a canonical savepoint, the default),
     * {@code native} (a native savepoint: the backend's own files) or {@code checkpoint} (retained checkpoints:
     * incremental on RocksDB, taken every 100 ms; the job is cancelled after one that follows the last
     * record, and its whole checkpoint directory is kept).
     */
    final String format;
    /** Generator only, with {@code format: checkpoint}: incremental checkpoints (true, the default) or full ones. */
    final boolean incremental;
    /** Checker only: restore although the savepoint holds operators the job does not have (a test checking them in another restore). */
    final boolean allowUnclaimed;

    @SuppressWarnings("unchecked")
    private Spec(Map<String, Object> m) {
        name = str(m, "name", null);
        backend = oneOf(str(m, "backend", "hashmap"), "backend", "hashmap", "rocksdb");
        compression = Boolean.TRUE.equals(m.getOrDefault("compression", Boolean.FALSE));
        parallelism = (int) num(m, "parallelism", 1);
        maxParallelism = (int) num(m, "max_parallelism", 128);
        keyType = oneOf(str(m, "key_type", "int"), "key_type", "int", "long", "string", "row", "kryo");
        List<Object> given = (List<Object>) m.get("key_values");
        if (given != null && (keyType.equals("row") || keyType.equals("long") || keyType.equals("kryo"))) {
            throw new IllegalArgumentException("spec: key_values takes int or string keys, not " + keyType + " keys");
        }
        keyValues = given == null ? null : new ArrayList<>();
        for (Object v : given == null ? new ArrayList<>() : given) { // plain Integer / String: the spec is serialized
            keyValues.add(keyType.equals("int") ? (Object) Integer.valueOf(v.toString()) : (Object) v.toString());
        }
        keys = keyValues != null ? keyValues.size() : (int) num(m, "keys", 10);
        recordsPerKey = (int) num(m, "records_per_key", 3);
        states = new ArrayList<>((List<String>) m.getOrDefault("states", ALL_STATES));
        for (String s : states) {
            if (!ALL_STATES.contains(s)) {
                throw new IllegalArgumentException("spec: unknown state " + s + " (known: " + ALL_STATES + ")");
            }
        }
        storage = oneOf(str(m, "storage", "jobmanager"), "storage", "jobmanager", "filesystem");
        inlineThreshold = num(m, "inline_threshold", 20 * 1024);
        uid = str(m, "uid", "state-op");
        eventsType = str(m, "events_type", OLD_EVENTS_TYPE);
        extraUid = str(m, "extra_uid", null);
        format = oneOf(str(m, "format", "canonical"), "format", "canonical", "native", "checkpoint");
        incremental = !Boolean.FALSE.equals(m.getOrDefault("incremental", Boolean.TRUE));
        if (format.equals("checkpoint") && !str(m, "storage", "jobmanager").equals("filesystem")) {
            throw new IllegalArgumentException("spec: format checkpoint needs storage filesystem");
        }
        allowUnclaimed = Boolean.TRUE.equals(m.getOrDefault("allow_unclaimed", Boolean.FALSE));
        if (name == null || keys <= 0 || recordsPerKey <= 0 || parallelism <= 0 || maxParallelism < parallelism) {
            throw new IllegalArgumentException("spec: name, keys, records_per_key, parallelism, max_parallelism");
        }
    }

    @SuppressWarnings("unchecked")
    static Spec read(Path file) throws IOException {
        Object v = Json.parse(new String(Files.readAllBytes(file), StandardCharsets.UTF_8));
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException(file + ": a spec is a JSON object");
        }
        return new Spec((Map<String, Object>) v);
    }

    boolean has(String state) {
        return states.contains(state);
    }

    long totalRecords() {
        return (long) keys * recordsPerKey;
    }

    /** Key index of record {@code j}: records go round-robin over the keys. */
    int keyIndex(long j) {
        return (int) (j % keys);
    }

    /**
     * The key of key index {@code i}: ints (or longs) spread over negative and positive values, strings with
     * some non-ASCII, or (as Flink SQL keys its state) a {@code BinaryRowData} of {@link #KEY_ROW_TYPE}
     * holding both.
     */
    Object key(int i) {
        if (keyValues != null) {
            return keyValues.get(i);
        }
        int n = i * 7919 - 40000;
        String s = (i % 5 == 3 ? "clé-ü-" : "user-") + i;
        switch (keyType) {
            case "int":
                return n;
            case "long":
                return (long) i * 7919L - 40000L; // no wrap-around, however many keys
            case "string":
                return s;
            case "kryo":
                return new KryoKey(n, s);
            default:
                return new RowDataSerializer(KEY_ROW_TYPE).toBinaryRow(GenericRowData.of(n, StringData.fromString(s))).copy();
        }
    }

    TypeInformation<?> keyInfo() {
        switch (keyType) {
            case "int":
                return Types.INT;
            case "long":
                return Types.LONG;
            case "string":
                return Types.STRING;
            case "kryo":
                return TypeInformation.of(KryoKey.class); // a GenericTypeInfo: Kryo
            default:
                return InternalTypeInfo.of(KEY_ROW_TYPE);
        }
    }

    /** A key as JSON: rows as objects by field name. */
    static Object keyJson(Object key) {
        if (key instanceof KryoKey) {
            return ((KryoKey) key).render();
        }
        return key instanceof RowData ? Render.row((RowData) key, KEY_ROW_TYPE) : key;
    }

    private static String str(Map<String, Object> m, String k, String dflt) {
        Object v = m.get(k);
        return v == null ? dflt : v.toString();
    }

    private static long num(Map<String, Object> m, String k, long dflt) {
        Object v = m.get(k);
        return v == null ? dflt : Long.parseLong(v.toString());
    }

    private static String oneOf(String v, String field, String... allowed) {
        if (!Arrays.asList(allowed).contains(v)) {
            throw new IllegalArgumentException("spec: " + field + " must be one of " + Arrays.toString(allowed) + ", not " + v);
        }
        return v;
    }
}
