package golden;

import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.streaming.api.graph.StreamGraphHasherV2;

import java.util.Map;

/**
 * The OperatorID Flink derives from a user-set uid: {@code StreamGraphHasherV2.generateUserSpecifiedHash},
 * the hasher a job graph uses for {@code uid(String)}, printed as {@code OperatorID.toHexString()}
 * (how savepoints, logs and statemorph's inspect show it).
 *
 * <p>Input line {@code {"case", "uid": STRING}} (a string, or {@code {"$s": [utf16 units]}} for a
 * lone surrogate); the output adds {@code "operator_id"}.
 */
final class OperatorIds {
    private OperatorIds() {}

    static Map<String, Object> derive(Map<String, Object> c) {
        String uid = Values.str(c.get("uid"));
        OperatorID id = new OperatorID(StreamGraphHasherV2.generateUserSpecifiedHash(uid));
        return Json.obj("case", c.get("case"), "uid", c.get("uid"), "operator_id", id.toHexString());
    }
}
