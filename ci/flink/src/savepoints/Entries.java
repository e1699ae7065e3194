package savepoints;

import golden.Json;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The one shape both sides report in: one {"key", "state", "value"} object per key and state,
 * ordered by state (spec order) then by the key's JSON text; timers are the sorted list of a
 * key's timer timestamps. expected.json (generator) and the checker's JSON lines use it, so a test
 * compares them with one equality.
 */
final class Entries {
    private Entries() {}

    static List<Map<String, Object>> sorted(
            Map<String, Map<String, Object>> values, Map<String, List<Long>> timers, Spec spec) {
        return sorted(values, timers, spec.states);
    }

    /** The same for a job whose states are not the matrix's (the POJO job's {@code profile}). */
    static List<Map<String, Object>> sorted(
            Map<String, Map<String, Object>> values, Map<String, List<Long>> timers, List<String> states) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (String state : states) {
            TreeMap<String, Object> byKey = new TreeMap<>();
            if (state.equals("timers")) {
                for (Map.Entry<String, List<Long>> e : timers.entrySet()) {
                    List<Long> ts = new ArrayList<>(e.getValue());
                    Collections.sort(ts);
                    byKey.put(e.getKey(), ts);
                }
            } else {
                for (Map.Entry<String, Map<String, Object>> e : values.entrySet()) {
                    byKey.put(e.getKey(), e.getValue().get(state));
                }
            }
            for (Map.Entry<String, Object> e : byKey.entrySet()) {
                out.add(Json.obj("key", Json.parse(e.getKey()), "state", state, "value", e.getValue()));
            }
        }
        return out;
    }
}
