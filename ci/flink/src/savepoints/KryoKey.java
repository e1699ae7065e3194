package savepoints;

import golden.Json;

import java.io.Serializable;
import java.util.Map;
import java.util.Objects;

/**
 * The key of {@code key_type: kryo}: no no-arg constructor and no Flink POJO shape, so Flink keys
 * the state with Kryo ({@code KryoSerializer}, a serializer statemorph does not model) and the
 * key's bytes have a length only Kryo knows (an int, then a string). Its {@code hashCode} is
 * plain Java, so the key groups are reproducible.
 */
public final class KryoKey implements Serializable {
    private static final long serialVersionUID = 1L;
    private final int id;
    private final String name;

    public KryoKey(int id, String name) {
        this.id = id;
        this.name = name;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof KryoKey && ((KryoKey) o).id == id && Objects.equals(((KryoKey) o).name, name);
    }

    @Override
    public int hashCode() {
        return 31 * id + Objects.hashCode(name);
    }

    Map<String, Object> render() {
        return Json.obj("id", id, "name", name);
    }
}
