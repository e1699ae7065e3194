"""The whitelist: every class a Flink ``RowDataSerializerSnapshot`` stream may hold, with the
exact descriptor Flink 2.3 writes for it (serialVersionUID, flags, serialized fields in Java's
order, superclass).

Why one table serves both directions: the reader accepts a class only when its descriptor in
the stream equals the entry here (so a changed, unknown or gadget class is refused before any
of its data is read), and the writer writes these entries, so what statemorph writes has the
descriptors real Flink writes. The entries were taken from streams written by Flink 2.3.0 and
are checked by the golden vectors.

Beside the LogicalType family, the table holds the table-runtime serializer objects that the
ArrayData / MapData snapshots Java-serialize (with their element getters, which are serialized
lambdas: ``java.lang.invoke.SerializedLambda`` records, read as data, never resolved).
"""

from __future__ import annotations

from types import MappingProxyType

from .nodes import ClassDesc
from .nodes import FieldDesc as F

_ROWS: list[tuple[str, int, int, tuple[F, ...], str | None]] = []


def _c(name: str, suid: int, flags: int, fields: tuple[F, ...], super_name: str | None) -> None:
    _ROWS.append((name, suid, flags, fields, super_name))


_c("[Ljava.lang.Object;", -8012369246846506644, 0x02, (), None)
_c("[Lorg.apache.flink.api.common.typeutils.TypeSerializer;", 4143624638847974296, 0x02, (), None)
_c("[Lorg.apache.flink.table.data.RowData$FieldGetter;", -7646304539732967285, 0x02, (), None)
_c("[Lorg.apache.flink.table.types.logical.LogicalType;", 1744097763440828726, 0x02, (), None)
_c("java.lang.Enum", 0, 0x12, (), None)
_c("java.lang.Integer", 1360826667806852920, 0x02, (F("I", "value"),), "java.lang.Number")
_c("java.lang.Number", -8742448824652078965, 0x02, (), None)
_c(
    "java.lang.invoke.SerializedLambda",
    8025925345765570181,
    0x02,
    (
        F("I", "implMethodKind"),
        F("[", "capturedArgs", "[Ljava/lang/Object;"),
        F("L", "capturingClass", "Ljava/lang/Class;"),
        F("L", "functionalInterfaceClass", "Ljava/lang/String;"),
        F("L", "functionalInterfaceMethodName", "Ljava/lang/String;"),
        F("L", "functionalInterfaceMethodSignature", "Ljava/lang/String;"),
        F("L", "implClass", "Ljava/lang/String;"),
        F("L", "implMethodName", "Ljava/lang/String;"),
        F("L", "implMethodSignature", "Ljava/lang/String;"),
        F("L", "instantiatedMethodType", "Ljava/lang/String;"),
    ),
    None,
)
_c("java.lang.Long", 4290774380558885855, 0x02, (F("J", "value"),), "java.lang.Number")
_c("java.util.ArrayList", 8683452581122892189, 0x03, (F("I", "size"),), None)
_c(
    "java.util.Collections$UnmodifiableCollection",
    1820017752578914078,
    0x02,
    (F("L", "c", "Ljava/util/Collection;"),),
    None,
)
_c(
    "java.util.Collections$UnmodifiableList",
    -283967356065247728,
    0x02,
    (F("L", "list", "Ljava/util/List;"),),
    "java.util.Collections$UnmodifiableCollection",
)
_c("org.apache.flink.api.common.typeutils.TypeSerializer", 1, 0x02, (), None)
_c(
    "org.apache.flink.api.common.typeutils.base.BooleanSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.ByteSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.DoubleSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.FloatSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.IntSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.LongSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.ShortSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
    8766687317209282373,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.TypeSerializer",
)
_c(
    "org.apache.flink.api.common.typeutils.base.array.BytePrimitiveArraySerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c("org.apache.flink.table.data.ArrayData", 0, 0x00, (), None)
_c("org.apache.flink.table.data.RowData", 0, 0x00, (), None)
_c(
    "org.apache.flink.table.runtime.typeutils.AbstractRowDataSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.table.runtime.typeutils.PagedTypeSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.ArrayDataSerializer",
    1,
    0x02,
    (
        F("L", "eleSer", "Lorg/apache/flink/api/common/typeutils/TypeSerializer;"),
        F("L", "eleType", "Lorg/apache/flink/table/types/logical/LogicalType;"),
        F("L", "elementGetter", "Lorg/apache/flink/table/data/ArrayData$ElementGetter;"),
    ),
    "org.apache.flink.api.common.typeutils.TypeSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.BinaryRowDataSerializer",
    1,
    0x02,
    (F("I", "fixedLengthPartSize"), F("I", "numFields")),
    "org.apache.flink.table.runtime.typeutils.AbstractRowDataSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.DecimalDataSerializer",
    1,
    0x02,
    (F("I", "precision"), F("I", "scale")),
    "org.apache.flink.api.common.typeutils.TypeSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.MapDataSerializer",
    4073842523628732956,
    0x02,
    (
        F("L", "keyGetter", "Lorg/apache/flink/table/data/ArrayData$ElementGetter;"),
        F("L", "keySerializer", "Lorg/apache/flink/api/common/typeutils/TypeSerializer;"),
        F("L", "keyType", "Lorg/apache/flink/table/types/logical/LogicalType;"),
        F("L", "valueGetter", "Lorg/apache/flink/table/data/ArrayData$ElementGetter;"),
        F("L", "valueSerializer", "Lorg/apache/flink/api/common/typeutils/TypeSerializer;"),
        F("L", "valueType", "Lorg/apache/flink/table/types/logical/LogicalType;"),
    ),
    "org.apache.flink.api.common.typeutils.TypeSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.PagedTypeSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.TypeSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.RowDataSerializer",
    1,
    0x02,
    (
        F("L", "binarySerializer", "Lorg/apache/flink/table/runtime/typeutils/BinaryRowDataSerializer;"),
        F("[", "fieldGetters", "[Lorg/apache/flink/table/data/RowData$FieldGetter;"),
        F("[", "fieldSerializers", "[Lorg/apache/flink/api/common/typeutils/TypeSerializer;"),
        F("[", "types", "[Lorg/apache/flink/table/types/logical/LogicalType;"),
    ),
    "org.apache.flink.table.runtime.typeutils.AbstractRowDataSerializer",
)
_c(
    "org.apache.flink.table.runtime.typeutils.StringDataSerializer",
    1,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.table.runtime.typeutils.TimestampDataSerializer",
    1,
    0x02,
    (F("I", "precision"),),
    "org.apache.flink.api.common.typeutils.TypeSerializer",
)
_c(
    "org.apache.flink.table.types.logical.ArrayType",
    1,
    0x02,
    (F("L", "elementType", "Lorg/apache/flink/table/types/logical/LogicalType;"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c("org.apache.flink.table.types.logical.BigIntType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c(
    "org.apache.flink.table.types.logical.BinaryType",
    1,
    0x02,
    (F("I", "length"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c("org.apache.flink.table.types.logical.BooleanType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c(
    "org.apache.flink.table.types.logical.CharType",
    1,
    0x02,
    (F("I", "length"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c("org.apache.flink.table.types.logical.DateType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c(
    "org.apache.flink.table.types.logical.DecimalType",
    1,
    0x02,
    (F("I", "precision"), F("I", "scale")),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c("org.apache.flink.table.types.logical.DoubleType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c("org.apache.flink.table.types.logical.FloatType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c("org.apache.flink.table.types.logical.IntType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c(
    "org.apache.flink.table.types.logical.LocalZonedTimestampType",
    1,
    0x02,
    (F("I", "precision"), F("L", "kind", "Lorg/apache/flink/table/types/logical/TimestampKind;")),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c(
    "org.apache.flink.table.types.logical.LogicalType",
    1,
    0x02,
    (F("Z", "isNullable"), F("L", "typeRoot", "Lorg/apache/flink/table/types/logical/LogicalTypeRoot;")),
    None,
)
_c("org.apache.flink.table.types.logical.LogicalTypeRoot", 0, 0x12, (), "java.lang.Enum")
_c(
    "org.apache.flink.table.types.logical.MapType",
    1,
    0x02,
    (
        F("L", "keyType", "Lorg/apache/flink/table/types/logical/LogicalType;"),
        F("L", "valueType", "Lorg/apache/flink/table/types/logical/LogicalType;"),
    ),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c(
    "org.apache.flink.table.types.logical.MultisetType",
    1,
    0x02,
    (F("L", "elementType", "Lorg/apache/flink/table/types/logical/LogicalType;"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c(
    "org.apache.flink.table.types.logical.RowType",
    1,
    0x02,
    (F("L", "fields", "Ljava/util/List;"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c(
    "org.apache.flink.table.types.logical.RowType$RowField",
    1,
    0x02,
    (
        F("L", "description", "Ljava/lang/String;"),
        F("L", "name", "Ljava/lang/String;"),
        F("L", "type", "Lorg/apache/flink/table/types/logical/LogicalType;"),
    ),
    None,
)
_c("org.apache.flink.table.types.logical.SmallIntType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
# ExternalSerializerSnapshot's DataType (the state-backed data views of SQL aggregations): an
# AtomicDataType or a CollectionDataType (an ARRAY as java.util.List) with its conversion class as a
# class literal (StringData, List: interfaces).
_c(
    "org.apache.flink.table.types.DataType",
    -4138822262654336147,
    0x02,
    (F("L", "conversionClass", "Ljava/lang/Class;"),
     F("L", "logicalType", "Lorg/apache/flink/table/types/logical/LogicalType;")),
    None,
)
_c("org.apache.flink.table.types.AtomicDataType", 1911869481579848498, 0x02, (),
   "org.apache.flink.table.types.DataType")
_c("org.apache.flink.table.types.CollectionDataType", 2464825922057708215, 0x02,
   (F("L", "elementDataType", "Lorg/apache/flink/table/types/DataType;"),), "org.apache.flink.table.types.DataType")
_c("java.util.List", 0, 0x00, (), None)
_c("org.apache.flink.table.data.StringData", 0, 0x00, (), None)
# RAW(MapView / ListView, NullSerializer): the placeholder field a SQL accumulator row keeps where
# its data view lives in state of its own (DataViewUtils.adjustDataViews).
_c("org.apache.flink.table.api.dataview.ListView", 0, 0x00, (), None)
_c("org.apache.flink.table.api.dataview.MapView", 0, 0x00, (), None)
_c(
    "org.apache.flink.table.dataview.NullSerializer",
    -5381596724707742625,
    0x02,
    (),
    "org.apache.flink.api.common.typeutils.base.TypeSerializerSingleton",
)
_c(
    "org.apache.flink.table.types.logical.RawType",
    1,
    0x02,
    (F("L", "clazz", "Ljava/lang/Class;"),
     F("L", "serializer", "Lorg/apache/flink/api/common/typeutils/TypeSerializer;")),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c(
    "org.apache.flink.table.types.logical.TimeType",
    1,
    0x02,
    (F("I", "precision"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c("org.apache.flink.table.types.logical.TimestampKind", 0, 0x12, (), "java.lang.Enum")
_c(
    "org.apache.flink.table.types.logical.TimestampType",
    1,
    0x02,
    (F("I", "precision"), F("L", "kind", "Lorg/apache/flink/table/types/logical/TimestampKind;")),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c("org.apache.flink.table.types.logical.TinyIntType", 1, 0x02, (), "org.apache.flink.table.types.logical.LogicalType")
_c(
    "org.apache.flink.table.types.logical.VarBinaryType",
    1,
    0x02,
    (F("I", "length"),),
    "org.apache.flink.table.types.logical.LogicalType",
)
_c(
    "org.apache.flink.table.types.logical.VarCharType",
    1,
    0x02,
    (F("I", "length"),),
    "org.apache.flink.table.types.logical.LogicalType",
)


def _build() -> dict[str, ClassDesc]:
    rows = {r[0]: r for r in _ROWS}
    built: dict[str, ClassDesc] = {}

    def get(name: str) -> ClassDesc:
        if name not in built:
            _, suid, flags, fields, super_name = rows[name]
            built[name] = ClassDesc(name, suid, flags, fields, get(super_name) if super_name else None)
        return built[name]

    for name in rows:
        get(name)
    return built


CLASSES: MappingProxyType[str, ClassDesc] = MappingProxyType(_build())

LOGICAL = "org.apache.flink.table.types.logical."
RUNTIME = "org.apache.flink.table.runtime.typeutils."
BASE = "org.apache.flink.api.common.typeutils.base."


def desc(name: str) -> ClassDesc:
    """The descriptor of a whitelisted class (a KeyError for anything else is a programming error)."""
    return CLASSES[name]


def flink_policy(name: str) -> ClassDesc | None:
    """The reader's class policy: the whitelisted descriptor, or None (refused)."""
    return CLASSES.get(name)


__all__ = ["BASE", "CLASSES", "LOGICAL", "RUNTIME", "desc", "flink_policy"]
