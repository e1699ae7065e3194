package savepoints;

import org.apache.flink.core.fs.FSDataInputStream;
import org.apache.flink.core.memory.DataInputViewStreamWrapper;
import org.apache.flink.runtime.checkpoint.Checkpoints;
import org.apache.flink.runtime.checkpoint.OperatorState;
import org.apache.flink.runtime.checkpoint.OperatorSubtaskState;
import org.apache.flink.runtime.checkpoint.metadata.CheckpointMetadata;
import org.apache.flink.runtime.state.IncrementalKeyedStateHandle;
import org.apache.flink.runtime.state.KeyedBackendSerializationProxy;
import org.apache.flink.runtime.state.KeyedStateHandle;
import org.apache.flink.runtime.state.StreamStateHandle;
import org.apache.flink.runtime.state.metainfo.StateMetaInfoSnapshot;

import java.io.DataInputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The keyed states a savepoint holds, as Flink's own readers see them: {@code _metadata} through
 * {@link Checkpoints#loadCheckpointMetadata}, then the keyed-backend header
 * ({@link KeyedBackendSerializationProxy}) of every subtask's keyed-state stream, or of the meta
 * data stream of its RocksDB instance in a native savepoint. The checker
 * compares it with the states its job registers: Flink itself ignores a restored state that no
 * descriptor asks for, so a state too many would otherwise restore unnoticed.
 */
final class Inventory {
    private Inventory() {}

    /** Timer queues: the header lists both of every operator that has a timer service. */
    static final String TIMER_PREFIX = "_timer_state/";

    /**
     * The OperatorID Flink derives from a uid ({@code StreamGraphHasherV2}: murmur3_128 with seed 0
     * of the uid's UTF-8 bytes), through the Guava that Flink shades (found by reflection, since
     * the shaded package name changes between Flink releases and this source compiles against each).
     */
    static String operatorId(String uid) {
        for (String guava : new String[] {"guava33", "guava32", "guava31", "guava30"}) {
            String pkg = "org.apache.flink.shaded." + guava + ".com.google.common.hash.";
            try {
                Object fn = Class.forName(pkg + "Hashing").getMethod("murmur3_128", int.class).invoke(null, 0);
                Object code = Class.forName(pkg + "HashFunction").getMethod("hashString", CharSequence.class,
                        java.nio.charset.Charset.class).invoke(fn, uid, java.nio.charset.StandardCharsets.UTF_8);
                byte[] id = (byte[]) Class.forName(pkg + "HashCode").getMethod("asBytes").invoke(code);
                return new org.apache.flink.runtime.jobgraph.OperatorID(id).toHexString();
            } catch (ClassNotFoundException e) {
                continue;
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException("cannot hash uid " + uid, e);
            }
        }
        throw new IllegalStateException("no shaded Guava found to hash uid " + uid);
    }

    /** Operator (its OperatorID in hex) -> the names of its keyed states, for every operator that has any. */
    static Map<String, Set<String>> keyedStates(Path savepoint) throws IOException {
        ClassLoader cl = Inventory.class.getClassLoader();
        CheckpointMetadata meta;
        try (DataInputStream in = new DataInputStream(Files.newInputStream(savepoint.resolve("_metadata")))) {
            meta = Checkpoints.loadCheckpointMetadata(in, cl, savepoint.toUri().toString());
        }
        Map<String, Set<String>> out = new TreeMap<>();
        for (OperatorState op : meta.getOperatorStates()) {
            for (OperatorSubtaskState sub : op.getStates()) {
                for (KeyedStateHandle h : sub.getManagedKeyedState()) {
                    out.computeIfAbsent(op.getOperatorID().toHexString(), x -> new TreeSet<>()).addAll(names(h, cl));
                }
            }
        }
        return out;
    }

    private static Set<String> names(KeyedStateHandle h, ClassLoader cl) throws IOException {
        StreamStateHandle stream;
        if (h instanceof IncrementalKeyedStateHandle) {  // a native savepoint: the instance's meta data
            stream = ((IncrementalKeyedStateHandle) h).getMetaDataStateHandle();
        } else if (h instanceof StreamStateHandle) {
            stream = (StreamStateHandle) h;
        } else {
            throw new IOException("not a canonical or native savepoint's keyed-state handle: " + h.getClass().getName());
        }
        KeyedBackendSerializationProxy<Object> header = new KeyedBackendSerializationProxy<>(cl);
        try (FSDataInputStream in = stream.openInputStream()) {
            header.read(new DataInputViewStreamWrapper(in));
        }
        Set<String> names = new TreeSet<>();
        for (StateMetaInfoSnapshot s : header.getStateMetaInfoSnapshots()) {
            names.add(s.getName());
        }
        return names;
    }
}
