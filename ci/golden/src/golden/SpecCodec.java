package golden;

import org.apache.flink.api.common.typeutils.TypeSerializer;

/**
 * A serializer family the core generator cannot link against directly (Avro needs a jar that
 * pyflink does not ship), plugged in by reflection when its classes were compiled.
 */
interface SpecCodec {
    TypeSerializer<?> serializer(Spec s, World w) throws Exception;

    Object toJava(Spec s, Object json, World w) throws Exception;

    Object toJson(Spec s, Object value, World w) throws Exception;
}
