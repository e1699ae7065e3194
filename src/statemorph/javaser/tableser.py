"""The table serializer objects Flink's ArrayData / MapData snapshots Java-serialize.

Why: ``ArrayDataSerializerSnapshot`` writes ``serializeObject(elementSerializer)`` and
``MapDataSerializerSnapshot`` the key and value serializers: whole serializer objects, with
their element getters, which are serialized lambdas (``SerializedLambda`` records naming
compiler-generated methods of Flink 2.3's ``ArrayData``). statemorph never runs them; it reads
them as whitelisted data (the element *types* come from the snapshot's own type streams) and,
to write a snapshot for a new type, builds the object tree ``InternalSerializers.create(type)``
would serialize:

- singletons (``IntSerializer``, ``StringDataSerializer``, ``BytePrimitiveArraySerializer`` ...):
  no fields, one object per stream (back references after the first);
- ``DecimalDataSerializer(precision, scale)``, ``TimestampDataSerializer(precision)``;
- ``ArrayDataSerializer(eleSer, eleType, elementGetter)`` and ``MapDataSerializer(keyGetter,
  keySerializer, keyType, valueGetter, valueSerializer, valueType)``: the type objects are the
  very instances inside the enclosing type (so they are back references when repeated), and each
  getter is ``(array, pos) -> array.isNullAt(pos) ? null : inner(array, pos)`` around the
  per-root accessor in :data:`_ACCESSORS`. A non-capturing accessor (``ArrayData::getInt``) is a
  singleton in the JVM, so a second use in the same stream is a back reference.

A ROW element is a ``RowDataSerializer`` object: its ``BinaryRowDataSerializer``, one field getter
per field (``RowData.createFieldGetter``: a null check capturing the position around the
per-root accessor in :data:`_FIELD_ACCESSORS`), the field serializers and the row's own field
type objects. Small boxed Integers (positions, precisions) are the JVM's cached instances, so
equal ones are back references.

A STRUCTURED element is stored as a ROW: the same serializer of its attributes, the same getters
(Flink's ``createElementGetter`` / ``createFieldGetter`` share ROW's case). Types outside this
table (RAW, intervals ...) are refused with a
:class:`JavaSerializationError` naming the type.
"""

from __future__ import annotations

from typing import Any

from ..errors import JavaSerializationError
from ..types import IntType, LogicalType, RowType, StructuredType
from .classes import BASE, RUNTIME, desc
from .logical import UNMODIFIABLE_LIST, TypeTreeBuilder
from .nodes import JArray, JClass, JInterned, JObject

ARRAY_DATA = "org.apache.flink.table.data.ArrayData"
_AD = "org/apache/flink/table/data/ArrayData"
_GETTER_IFACE = _AD + "$ElementGetter"
_GETTER_SIG = "(L" + _AD + ";I)Ljava/lang/Object;"
_WRAPPER = ("lambda$createElementGetter$95d74a6c$1", "(L" + _GETTER_IFACE + ";L" + _AD + ";I)Ljava/lang/Object;")
_INVOKE_STATIC = 6
_INVOKE_INTERFACE = 9

# type root -> (implMethodKind, implMethodName, implMethodSignature, captured int parameters)
_ACCESSORS: dict[str, tuple[int, str, str, tuple[str, ...]]] = {
    "BOOLEAN": (_INVOKE_INTERFACE, "getBoolean", "(I)Z", ()),
    "TINYINT": (_INVOKE_INTERFACE, "getByte", "(I)B", ()),
    "SMALLINT": (_INVOKE_INTERFACE, "getShort", "(I)S", ()),
    "INTEGER": (_INVOKE_INTERFACE, "getInt", "(I)I", ()),
    "DATE": (_INVOKE_INTERFACE, "getInt", "(I)I", ()),
    "TIME_WITHOUT_TIME_ZONE": (_INVOKE_INTERFACE, "getInt", "(I)I", ()),
    "BIGINT": (_INVOKE_INTERFACE, "getLong", "(I)J", ()),
    "FLOAT": (_INVOKE_INTERFACE, "getFloat", "(I)F", ()),
    "DOUBLE": (_INVOKE_INTERFACE, "getDouble", "(I)D", ()),
    "CHAR": (_INVOKE_INTERFACE, "getString", "(I)Lorg/apache/flink/table/data/StringData;", ()),
    "VARCHAR": (_INVOKE_INTERFACE, "getString", "(I)Lorg/apache/flink/table/data/StringData;", ()),
    "BINARY": (_INVOKE_INTERFACE, "getBinary", "(I)[B", ()),
    "VARBINARY": (_INVOKE_INTERFACE, "getBinary", "(I)[B", ()),
    "DECIMAL": (_INVOKE_STATIC, "lambda$createElementGetter$55d7a3db$1",
                "(IIL" + _AD + ";I)Ljava/lang/Object;", ("precision", "scale")),
    "TIMESTAMP_WITHOUT_TIME_ZONE": (_INVOKE_STATIC, "lambda$createElementGetter$644eb446$1",
                                    "(IL" + _AD + ";I)Ljava/lang/Object;", ("precision",)),
    "TIMESTAMP_WITH_LOCAL_TIME_ZONE": (_INVOKE_STATIC, "lambda$createElementGetter$644eb446$1",
                                       "(IL" + _AD + ";I)Ljava/lang/Object;", ("precision",)),
    "ARRAY": (_INVOKE_INTERFACE, "getArray", "(I)Lorg/apache/flink/table/data/ArrayData;", ()),
    "ROW": (_INVOKE_STATIC, "lambda$createElementGetter$3705b7fb$1", "(IL" + _AD + ";I)Ljava/lang/Object;", ("arity",)),
    "MAP": (_INVOKE_INTERFACE, "getMap", "(I)Lorg/apache/flink/table/data/MapData;", ()),
    "MULTISET": (_INVOKE_INTERFACE, "getMap", "(I)Lorg/apache/flink/table/data/MapData;", ()),
}

ROW_DATA = "org.apache.flink.table.data.RowData"
_RD = "org/apache/flink/table/data/RowData"
_FIELD_GETTER_IFACE = _RD + "$FieldGetter"
_FIELD_GETTER_SIG = "(L" + _RD + ";)Ljava/lang/Object;"
_FIELD_WRAPPER = (
    "lambda$createFieldGetter$25774257$1",
    "(IL" + _FIELD_GETTER_IFACE + ";L" + _RD + ";)Ljava/lang/Object;",
)
_BY_POS = "(IL" + _RD + ";)Ljava/lang/Object;"

# ``RowData.createFieldGetter``: type root -> (implMethodName, implMethodSignature, captured int
# parameters after the field position); every one is a static lambda capturing the position
_FIELD_ACCESSORS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "CHAR": ("lambda$createFieldGetter$245ca7d1$1", _BY_POS, ()),
    "VARCHAR": ("lambda$createFieldGetter$245ca7d1$1", _BY_POS, ()),
    "BOOLEAN": ("lambda$createFieldGetter$245ca7d1$2", _BY_POS, ()),
    "BINARY": ("lambda$createFieldGetter$245ca7d1$3", _BY_POS, ()),
    "VARBINARY": ("lambda$createFieldGetter$245ca7d1$3", _BY_POS, ()),
    "TINYINT": ("lambda$createFieldGetter$245ca7d1$4", _BY_POS, ()),
    "SMALLINT": ("lambda$createFieldGetter$245ca7d1$5", _BY_POS, ()),
    "INTEGER": ("lambda$createFieldGetter$245ca7d1$6", _BY_POS, ()),
    "DATE": ("lambda$createFieldGetter$245ca7d1$6", _BY_POS, ()),
    "TIME_WITHOUT_TIME_ZONE": ("lambda$createFieldGetter$245ca7d1$6", _BY_POS, ()),
    "BIGINT": ("lambda$createFieldGetter$245ca7d1$7", _BY_POS, ()),
    "FLOAT": ("lambda$createFieldGetter$245ca7d1$8", _BY_POS, ()),
    "DOUBLE": ("lambda$createFieldGetter$245ca7d1$9", _BY_POS, ()),
    "ARRAY": ("lambda$createFieldGetter$245ca7d1$10", _BY_POS, ()),
    "MAP": ("lambda$createFieldGetter$245ca7d1$11", _BY_POS, ()),
    "MULTISET": ("lambda$createFieldGetter$245ca7d1$11", _BY_POS, ()),
    "DECIMAL": ("lambda$createFieldGetter$89bd9445$1", "(IIIL" + _RD + ";)Ljava/lang/Object;", ("precision", "scale")),
    "TIMESTAMP_WITHOUT_TIME_ZONE": ("lambda$createFieldGetter$39385f9c$1", "(IIL" + _RD + ";)Ljava/lang/Object;",
                                    ("precision",)),
    "TIMESTAMP_WITH_LOCAL_TIME_ZONE": ("lambda$createFieldGetter$39385f9c$1", "(IIL" + _RD + ";)Ljava/lang/Object;",
                                       ("precision",)),
    "ROW": ("lambda$createFieldGetter$1547cee5$1", "(IIL" + _RD + ";)Ljava/lang/Object;", ("arity",)),
}

_SINGLETONS: dict[str, str] = {
    "BOOLEAN": BASE + "BooleanSerializer",
    "TINYINT": BASE + "ByteSerializer",
    "SMALLINT": BASE + "ShortSerializer",
    "INTEGER": BASE + "IntSerializer",
    "DATE": BASE + "IntSerializer",
    "TIME_WITHOUT_TIME_ZONE": BASE + "IntSerializer",
    "BIGINT": BASE + "LongSerializer",
    "FLOAT": BASE + "FloatSerializer",
    "DOUBLE": BASE + "DoubleSerializer",
    "CHAR": RUNTIME + "StringDataSerializer",
    "VARCHAR": RUNTIME + "StringDataSerializer",
    "BINARY": BASE + "array.BytePrimitiveArraySerializer",
    "VARBINARY": BASE + "array.BytePrimitiveArraySerializer",
}


def _getter_root(t: LogicalType) -> str:
    """The type root whose getter Flink's ``createElementGetter`` / ``createFieldGetter`` give ``t``
    (``case ROW: case STRUCTURED_TYPE:`` share one lambda)."""
    return "ROW" if isinstance(t, StructuredType) else t.type_root


class SerializerTreeBuilder(TypeTreeBuilder):
    """Builds one stream's tree of table serializer objects (sharing what the JVM shares:
    enum constants, small boxed Integers, interned class-file strings, the type instances)."""

    def __init__(self) -> None:
        super().__init__()
        self._ints: dict[int, JObject] = {}
        self._class_literals: dict[str, JClass] = {}
        self._method_refs: dict[tuple[int, str, str], JObject] = {}
        self._singletons: dict[str, JObject] = {}

    def boxed(self, value: int) -> JObject:
        """``Integer.valueOf``: one cached object per value in -128..127, a new one otherwise."""
        if -128 <= value <= 127:
            node = self._ints.get(value)
            if node is None:
                node = self._ints[value] = JObject(desc("java.lang.Integer"), {"value": value})
            return node
        return JObject(desc("java.lang.Integer"), {"value": value})

    def class_literal(self, name: str) -> JClass:
        node = self._class_literals.get(name)
        if node is None:
            node = self._class_literals[name] = JClass(desc(name))
        return node

    def lambda_(self, kind: int, name: str, signature: str, captured: list[Any], row: bool = False) -> JObject:
        """A ``SerializedLambda`` of ``ArrayData.createElementGetter`` (or, with ``row``, of
        ``RowData.createFieldGetter``)."""
        iface, method, sig, impl = ((_FIELD_GETTER_IFACE, "getFieldOrNull", _FIELD_GETTER_SIG, _RD) if row
                                    else (_GETTER_IFACE, "getElementOrNull", _GETTER_SIG, _AD))
        return JObject(desc("java.lang.invoke.SerializedLambda"), {
            "implMethodKind": kind,
            "capturedArgs": JArray(desc("[Ljava.lang.Object;"), captured),
            "capturingClass": self.class_literal(ROW_DATA if row else ARRAY_DATA),
            "functionalInterfaceClass": JInterned(iface),
            "functionalInterfaceMethodName": JInterned(method),
            "functionalInterfaceMethodSignature": JInterned(sig),
            "implClass": JInterned(impl),
            "implMethodName": JInterned(name),
            "implMethodSignature": JInterned(signature),
            "instantiatedMethodType": JInterned(sig),
        })

    def field_getter(self, t: LogicalType, pos: int) -> JObject:
        """``RowData.createFieldGetter(t, pos)``: a null check around the per-root accessor."""
        accessor = _FIELD_ACCESSORS.get(_getter_root(t))
        if accessor is None:
            raise JavaSerializationError(f"statemorph cannot write Flink's field getter for {t}")
        name, signature, params = accessor
        captured = [self.boxed(pos)] + [self.boxed(getattr(t, p)) for p in params]
        inner = self.lambda_(_INVOKE_STATIC, name, signature, captured, row=True)
        return self.lambda_(_INVOKE_STATIC, _FIELD_WRAPPER[0], _FIELD_WRAPPER[1], [self.boxed(pos), inner], row=True)

    def element_getter(self, t: LogicalType) -> JObject:
        accessor = _ACCESSORS.get(_getter_root(t))
        if accessor is None:
            raise JavaSerializationError(f"statemorph cannot write Flink's element getter for {t}")
        kind, name, signature, params = accessor
        if params:
            inner = self.lambda_(kind, name, signature, [self.boxed(getattr(t, p)) for p in params])
        else:
            # a non-capturing lambda is one object per call site in the JVM: written once per stream
            key = (kind, name, signature)
            inner = self._method_refs.get(key) or self._method_refs.setdefault(
                key, self.lambda_(kind, name, signature, []))
        return self.lambda_(_INVOKE_STATIC, _WRAPPER[0], _WRAPPER[1], [inner])

    def serializer(self, t: LogicalType, t_node: JObject) -> JObject:
        """The serializer object for ``t``, whose type object in this stream is ``t_node``."""
        root = t.type_root
        single = _SINGLETONS.get(root)
        if single is not None:  # ``INSTANCE`` fields: one object, written once per stream
            return self._singletons.get(single) or self._singletons.setdefault(single, JObject(desc(single)))
        v = t_node.values
        if root == "DECIMAL":
            return JObject(desc(RUNTIME + "DecimalDataSerializer"), {"precision": v["precision"], "scale": v["scale"]})
        if root in ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"):
            return JObject(desc(RUNTIME + "TimestampDataSerializer"), {"precision": v["precision"]})
        if root == "ARRAY":
            element, element_node = t.children()[0], v["elementType"]
            return JObject(desc(RUNTIME + "ArrayDataSerializer"), {
                "eleSer": self.serializer(element, element_node),
                "eleType": element_node,
                "elementGetter": self.element_getter(element),
            })
        if root in ("MAP", "MULTISET"):
            if root == "MAP":
                (key, value), key_node, value_node = t.children(), v["keyType"], v["valueType"]
            else:
                key, key_node = t.children()[0], v["elementType"]
                value = IntType(nullable=False)
                value_node = self.build(value)
            return self.map_serializer(key, key_node, value, value_node)
        if root in ("ROW", "STRUCTURED_TYPE"):
            return self.row_serializer(t, t_node)
        raise JavaSerializationError(f"statemorph cannot write Flink's serializer object for {t}")

    def row_serializer(self, t: LogicalType, t_node: JObject) -> JObject:
        """``new RowDataSerializer(rowType)``: its types are the row's own field type objects (a
        STRUCTURED type's: ``InternalSerializers`` gives it a RowDataSerializer of its attributes'
        type objects, ``type.getChildren()``)."""
        assert isinstance(t, RowType)
        structured = isinstance(t, StructuredType)
        fields = t_node.values["attributes" if structured else "fields"]
        backing = fields.values["list"] if fields.desc.name == UNMODIFIABLE_LIST else fields  # else 2.x's List.of
        type_nodes = [f.values["type"] for f in backing.annotations[backing.desc.name][1:]]
        arity = t.arity
        null_bits = ((arity + 63 + 8) // 64) * 8
        binary = JObject(desc(RUNTIME + "BinaryRowDataSerializer"),
                         {"fixedLengthPartSize": null_bits + 8 * arity, "numFields": arity})
        getters = [self.field_getter(ft, i) for i, ft in enumerate(t.field_types)]
        serializers = [self.serializer(ft, node) for ft, node in zip(t.field_types, type_nodes, strict=True)]
        return JObject(desc(RUNTIME + "RowDataSerializer"), {
            "binarySerializer": binary,
            "fieldGetters": JArray(desc("[L" + ROW_DATA + "$FieldGetter;"), getters),
            "fieldSerializers": JArray(desc("[Lorg.apache.flink.api.common.typeutils.TypeSerializer;"), serializers),
            "types": JArray(desc("[Lorg.apache.flink.table.types.logical.LogicalType;"), type_nodes),
        })

    def map_serializer(self, key: LogicalType, key_node: JObject, value: LogicalType, value_node: JObject) -> JObject:
        # field order is Java's (sorted by name): keyGetter, keySerializer, keyType, valueGetter ...;
        # the objects are created in constructor order: key type, value type, serializers, getters
        key_ser = self.serializer(key, key_node)
        value_ser = self.serializer(value, value_node)
        return JObject(desc(RUNTIME + "MapDataSerializer"), {
            "keyGetter": self.element_getter(key),
            "keySerializer": key_ser,
            "keyType": key_node,
            "valueGetter": self.element_getter(value),
            "valueSerializer": value_ser,
            "valueType": value_node,
        })


def serializer_tree(t: LogicalType) -> JObject:
    """The tree of ``InternalSerializers.create(t)`` as one fresh stream serializes it."""
    builder = SerializerTreeBuilder()
    return builder.serializer(t, builder.build(t))


__all__ = ["SerializerTreeBuilder", "serializer_tree"]
