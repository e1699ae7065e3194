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
lambdas: ``java.lang.invoke.SerializedLambda`` records, read as data, never resolved), the
``DataType`` an ``ExternalSerializerSnapshot`` Java-serializes (a SQL data view's type, with its
conversion class as a class literal) and the ``RAW(MapView / ListView, NullSerializer)`` placeholder
of a SQL accumulator row.

A second, separate whitelist (:func:`comparator_policy`) reads the comparator a
``SortedMapSerializerSnapshot`` Java-serializes (RetractableTopNFunction's sorted map): Flink's
``ComparableRecordComparator`` (sort key positions, types, orders and null orders as primitive
arrays and LogicalTypes) with its ``GeneratedRecordComparator`` (generated class name, Java code,
references). Only that stream accepts these classes; its code is kept as bytes, never compiled.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

from .nodes import SC_ENUM, SC_SERIALIZABLE, SC_WRITE_METHOD, ClassDesc, FieldDesc

LOGICAL = "org.apache.flink.table.types.logical."
RUNTIME = "org.apache.flink.table.runtime.typeutils."
BASE = "org.apache.flink.api.common.typeutils.base."
TYPEUTILS = "org.apache.flink.api.common.typeutils."
TABLE_DATA = "org.apache.flink.table.data."
TYPES = "org.apache.flink.table.types."
DATAVIEW_API = "org.apache.flink.table.api.dataview."

_ENUM_FLAGS = SC_ENUM | SC_SERIALIZABLE
STRUCTURED = LOGICAL + "StructuredType"
_AGGREGATE = "org.apache.flink.table.runtime.functions.aggregate."
#: Flink's accumulator classes a STRUCTURED type may name (observed in Flink 2.3 savepoints of the
#: retracting FIRST_VALUE / LAST_VALUE / LISTAGG); a user's accumulator class is not whitelisted
ACCUMULATOR_CLASSES = tuple(_AGGREGATE + name for name in (
    "FirstValueWithRetractAggFunction$FirstValueWithRetractAccumulator",
    "LastValueWithRetractAggFunction$LastValueWithRetractAccumulator",
    "ListAggWsWithRetractAggFunction$ListAggWsWithRetractAccumulator",
))
_TYPE_SERIALIZER = TYPEUTILS + "TypeSerializer"
_SINGLETON = BASE + "TypeSerializerSingleton"
_LOGICAL_TYPE = LOGICAL + "LogicalType"
_ROW_DATA_SERIALIZER = RUNTIME + "AbstractRowDataSerializer"


class ClassRow(NamedTuple):
    """One whitelisted class as Flink 2.3 describes it: its descriptor but for the superclass,
    which is named here and resolved to its own row."""

    name: str
    suid: int
    flags: int
    fields: tuple[FieldDesc, ...] = ()
    super_name: str | None = None


def _signature(java_class: str) -> str:
    """The JVM type signature of a class name: ``Ljava/lang/String;``."""
    return "L" + java_class.replace(".", "/") + ";"


def _int_field(name: str) -> FieldDesc:
    return FieldDesc("I", name)


def _object_field(name: str, java_class: str) -> FieldDesc:
    return FieldDesc("L", name, _signature(java_class))


def _array_field(name: str, element_class: str) -> FieldDesc:
    return FieldDesc("[", name, "[" + _signature(element_class))


def _logical_type(simple_name: str, *fields: FieldDesc) -> ClassRow:
    """A ``LogicalType`` subclass: serialVersionUID 1, its own fields, ``LogicalType`` above."""
    return ClassRow(LOGICAL + simple_name, 1, SC_SERIALIZABLE, fields, _LOGICAL_TYPE)


def _serializer(name: str, *fields: FieldDesc, super_name: str = _TYPE_SERIALIZER, suid: int = 1) -> ClassRow:
    """A ``TypeSerializer`` (by default straight below ``TypeSerializer``, serialVersionUID 1)."""
    return ClassRow(name, suid, SC_SERIALIZABLE, fields, super_name)


def _singleton(name: str) -> ClassRow:
    """A stateless serializer below ``TypeSerializerSingleton``, which has no fields of its own."""
    return _serializer(name, super_name=_SINGLETON)


def _logical_field(name: str) -> FieldDesc:
    return _object_field(name, _LOGICAL_TYPE)


def _serializer_field(name: str) -> FieldDesc:
    return _object_field(name, _TYPE_SERIALIZER)


def _getter_field(name: str) -> FieldDesc:
    return _object_field(name, TABLE_DATA + "ArrayData$ElementGetter")


def _string_field(name: str) -> FieldDesc:
    return _object_field(name, "java.lang.String")


_ROWS: tuple[ClassRow, ...] = (
    ClassRow("[Ljava.lang.Object;", -8012369246846506644, SC_SERIALIZABLE),
    ClassRow("[L" + _TYPE_SERIALIZER + ";", 4143624638847974296, SC_SERIALIZABLE),
    ClassRow("[L" + TABLE_DATA + "RowData$FieldGetter;", -7646304539732967285, SC_SERIALIZABLE),
    ClassRow("[L" + _LOGICAL_TYPE + ";", 1744097763440828726, SC_SERIALIZABLE),
    ClassRow("java.lang.Enum", 0, _ENUM_FLAGS),
    ClassRow("java.lang.Integer", 1360826667806852920, SC_SERIALIZABLE, (_int_field("value"),), "java.lang.Number"),
    ClassRow("java.lang.Number", -8742448824652078965, SC_SERIALIZABLE),
    ClassRow("java.lang.invoke.SerializedLambda", 8025925345765570181, SC_SERIALIZABLE, (
        _int_field("implMethodKind"),
        _array_field("capturedArgs", "java.lang.Object"),
        _object_field("capturingClass", "java.lang.Class"),
        *(_string_field(name) for name in (
            "functionalInterfaceClass", "functionalInterfaceMethodName", "functionalInterfaceMethodSignature",
            "implClass", "implMethodName", "implMethodSignature", "instantiatedMethodType")),
    )),
    ClassRow("java.util.ArrayList", 8683452581122892189, SC_WRITE_METHOD | SC_SERIALIZABLE, (_int_field("size"),)),
    ClassRow("java.util.Collections$UnmodifiableCollection", 1820017752578914078, SC_SERIALIZABLE,
             (_object_field("c", "java.util.Collection"),)),
    ClassRow("java.util.Collections$UnmodifiableList", -283967356065247728, SC_SERIALIZABLE,
             (_object_field("list", "java.util.List"),), "java.util.Collections$UnmodifiableCollection"),
    ClassRow(_TYPE_SERIALIZER, 1, SC_SERIALIZABLE),
    *(_singleton(BASE + name) for name in (
        "BooleanSerializer", "ByteSerializer", "DoubleSerializer", "FloatSerializer", "IntSerializer",
        "LongSerializer", "ShortSerializer")),
    _serializer(_SINGLETON, suid=8766687317209282373),
    _singleton(BASE + "array.BytePrimitiveArraySerializer"),
    ClassRow(TABLE_DATA + "ArrayData", 0, 0),
    ClassRow(TABLE_DATA + "RowData", 0, 0),
    _serializer(_ROW_DATA_SERIALIZER, super_name=RUNTIME + "PagedTypeSerializer"),
    _serializer(RUNTIME + "ArrayDataSerializer",
                _serializer_field("eleSer"), _logical_field("eleType"), _getter_field("elementGetter")),
    _serializer(RUNTIME + "BinaryRowDataSerializer", _int_field("fixedLengthPartSize"), _int_field("numFields"),
                super_name=_ROW_DATA_SERIALIZER),
    _serializer(RUNTIME + "DecimalDataSerializer", _int_field("precision"), _int_field("scale")),
    _serializer(RUNTIME + "MapDataSerializer",
                _getter_field("keyGetter"), _serializer_field("keySerializer"), _logical_field("keyType"),
                _getter_field("valueGetter"), _serializer_field("valueSerializer"), _logical_field("valueType"),
                suid=4073842523628732956),
    _serializer(RUNTIME + "PagedTypeSerializer"),
    _serializer(RUNTIME + "RowDataSerializer",
                _object_field("binarySerializer", RUNTIME + "BinaryRowDataSerializer"),
                _array_field("fieldGetters", TABLE_DATA + "RowData$FieldGetter"),
                _array_field("fieldSerializers", _TYPE_SERIALIZER),
                _array_field("types", _LOGICAL_TYPE),
                super_name=_ROW_DATA_SERIALIZER),
    _singleton(RUNTIME + "StringDataSerializer"),
    _serializer(RUNTIME + "TimestampDataSerializer", _int_field("precision")),
    *(_logical_type(name) for name in (
        "BigIntType", "BooleanType", "DateType", "DoubleType", "FloatType", "IntType", "SmallIntType",
        "TinyIntType")),
    *(_logical_type(name, _logical_field("elementType")) for name in ("ArrayType", "MultisetType")),
    *(_logical_type(name, _int_field("length")) for name in ("BinaryType", "CharType", "VarBinaryType", "VarCharType")),
    *(_logical_type(name, _int_field("precision")) for name in ("TimeType",)),
    _logical_type("DecimalType", _int_field("precision"), _int_field("scale")),
    *(_logical_type(name, _int_field("precision"), _object_field("kind", LOGICAL + "TimestampKind"))
      for name in ("LocalZonedTimestampType", "TimestampType")),
    ClassRow(_LOGICAL_TYPE, 1, SC_SERIALIZABLE,
             (FieldDesc("Z", "isNullable"), _object_field("typeRoot", LOGICAL + "LogicalTypeRoot"))),
    ClassRow(LOGICAL + "LogicalTypeRoot", 0, _ENUM_FLAGS, (), "java.lang.Enum"),
    ClassRow(LOGICAL + "TimestampKind", 0, _ENUM_FLAGS, (), "java.lang.Enum"),
    _logical_type("MapType", _logical_field("keyType"), _logical_field("valueType")),
    _logical_type("RowType", _object_field("fields", "java.util.List")),
    ClassRow(LOGICAL + "RowType$RowField", 1, SC_SERIALIZABLE,
             (_string_field("description"), _string_field("name"), _logical_field("type"))),
    ClassRow("java.lang.Long", 4290774380558885855, SC_SERIALIZABLE, (FieldDesc("J", "value"),), "java.lang.Number"),
    # ExternalSerializerSnapshot's DataType (the state-backed data views of SQL aggregations): an
    # AtomicDataType or a CollectionDataType (an ARRAY as java.util.List) with its conversion class as a
    # class literal (StringData, List: interfaces).
    ClassRow(TYPES + "DataType", -4138822262654336147, SC_SERIALIZABLE,
             (_object_field("conversionClass", "java.lang.Class"), _logical_field("logicalType"))),
    ClassRow(TYPES + "AtomicDataType", 1911869481579848498, SC_SERIALIZABLE, (), TYPES + "DataType"),
    ClassRow(TYPES + "CollectionDataType", 2464825922057708215, SC_SERIALIZABLE,
             (_object_field("elementDataType", TYPES + "DataType"),), TYPES + "DataType"),
    ClassRow("java.util.List", 0, 0),
    ClassRow(TABLE_DATA + "StringData", 0, 0),
    # RAW(MapView / ListView, NullSerializer): the placeholder field a SQL accumulator row keeps where
    # its data view lives in state of its own (DataViewUtils.adjustDataViews).
    ClassRow(DATAVIEW_API + "ListView", 0, 0),
    ClassRow(DATAVIEW_API + "MapView", 0, 0),
    _serializer("org.apache.flink.table.dataview.NullSerializer", super_name=_SINGLETON, suid=-5381596724707742625),
    _logical_type("RawType", _object_field("clazz", "java.lang.Class"), _serializer_field("serializer")),
    # STRUCTURED_TYPE: an inline structured type (a built-in aggregate function's accumulator), its
    # attributes an immutable List.of(...) (java.util.CollSer), its implementation class a class literal
    ClassRow(LOGICAL + "UserDefinedType", 1, SC_SERIALIZABLE, (
        FieldDesc("Z", "isFinal"), _string_field("description"),
        _object_field("objectIdentifier", "org.apache.flink.table.catalog.ObjectIdentifier")), _LOGICAL_TYPE),
    ClassRow(STRUCTURED, 1, SC_SERIALIZABLE, (
        FieldDesc("Z", "isInstantiable"), _object_field("attributes", "java.util.List"), _string_field("className"),
        _object_field("comparison", STRUCTURED + "$StructuredComparison"),
        _object_field("implementationClass", "java.lang.Class"), _object_field("superType", STRUCTURED)),
        LOGICAL + "UserDefinedType"),
    ClassRow(STRUCTURED + "$StructuredAttribute", 1, SC_SERIALIZABLE,
             (_string_field("description"), _string_field("name"), _logical_field("type"))),
    ClassRow(STRUCTURED + "$StructuredComparison", 0, _ENUM_FLAGS, (), "java.lang.Enum"),
    ClassRow("java.util.CollSer", 6309168927139932177, SC_WRITE_METHOD | SC_SERIALIZABLE, (_int_field("tag"),)),
    # the accumulator classes seen as implementation classes (class literals of classes that are not
    # Serializable: no serialVersionUID, no fields)
    *(ClassRow(name, 0, 0) for name in ACCUMULATOR_CLASSES),
)


_GENERATED = "org.apache.flink.table.runtime.generated."

#: The classes of the comparator in a SortedMapSerializerSnapshot, beside the LogicalTypes above.
_COMPARATOR_ROWS: tuple[ClassRow, ...] = (
    ClassRow("org.apache.flink.table.runtime.operators.rank.ComparableRecordComparator",
             4386377835781068140, SC_SERIALIZABLE, (
                 FieldDesc("[", "compareKeyPositions", "[I"),
                 _array_field("compareKeyTypes", _LOGICAL_TYPE),
                 FieldDesc("[", "compareOrders", "[Z"),
                 _object_field("generatedRecordComparator", _GENERATED + "GeneratedRecordComparator"),
                 FieldDesc("[", "nullsIsLast", "[Z"))),
    ClassRow(_GENERATED + "GeneratedRecordComparator", 2, SC_SERIALIZABLE, (), _GENERATED + "GeneratedClass"),
    ClassRow(_GENERATED + "GeneratedClass", 7897406074992879593, SC_SERIALIZABLE, (
        _string_field("className"), _string_field("code"), _array_field("references", "java.lang.Object"),
        _string_field("splitCode"))),
    ClassRow("[I", 5600894804908749477, SC_SERIALIZABLE),
    ClassRow("[Z", 6309297032502205922, SC_SERIALIZABLE),
)


def _build(all_rows: tuple[ClassRow, ...]) -> dict[str, ClassDesc]:
    rows = {r.name: r for r in all_rows}
    built: dict[str, ClassDesc] = {}

    def get(name: str) -> ClassDesc:
        if name not in built:
            row = rows[name]
            built[name] = ClassDesc(name, row.suid, row.flags, row.fields,
                                    get(row.super_name) if row.super_name else None)
        return built[name]

    for name in rows:
        get(name)
    return built


CLASSES: MappingProxyType[str, ClassDesc] = MappingProxyType(_build(_ROWS))
#: The comparator stream's whitelist: the comparator classes and the LogicalTypes of sort keys.
#: Flink 1.x's StructuredType (1.20: no ``className`` field; the class is its implementation
#: class literal's): the one whitelisted class with a second shape, read and written as it came.
STRUCTURED_1X = ClassDesc(STRUCTURED, 1, SC_SERIALIZABLE, tuple(
    f for f in CLASSES[STRUCTURED].fields if f.name != "className"), CLASSES[STRUCTURED].super_desc)
#: Whitelisted classes' other shapes, by class name.
OTHER_SHAPES: MappingProxyType[str, tuple[ClassDesc, ...]] = MappingProxyType({STRUCTURED: (STRUCTURED_1X,)})
COMPARATOR_CLASSES: MappingProxyType[str, ClassDesc] = MappingProxyType(_build((
    *(r for r in _ROWS if r.name.startswith(LOGICAL) or r.name in (
        "java.lang.Enum", "[L" + _LOGICAL_TYPE + ";", "[Ljava.lang.Object;", "java.util.List",
        "java.util.ArrayList", "java.util.Collections$UnmodifiableCollection",
        "java.util.Collections$UnmodifiableList")),
    *_COMPARATOR_ROWS)))


def desc(name: str) -> ClassDesc:
    """The descriptor of a whitelisted class (a KeyError for anything else is a programming error)."""
    return CLASSES[name]


def class_literal_desc(name: str) -> ClassDesc | None:
    """The descriptor of a class literal (``Foo.class`` in a stream) of a class off the whitelist:
    the shape ``ObjectStreamClass`` gives a class that is not Serializable (serialVersionUID 0, no
    flags, no fields), the only one a literal of an unknown class may have; None for a name that is
    not a Java binary class name. A literal names a class and carries no data, so nothing is read
    into it (a STRUCTURED type's implementation class: a user's aggregate accumulator or its parts)."""
    return ClassDesc(name, 0, 0) if _is_binary_name(name) else None


def _is_binary_name(name: str) -> bool:
    return bool(name) and len(name) <= 1024 and all(
        part.replace("$", "_").isidentifier() for part in name.split("."))


def flink_policy(name: str) -> ClassDesc | None:
    """The reader's class policy: the whitelisted descriptor, or None (refused)."""
    return CLASSES.get(name)


def comparator_policy(name: str) -> ClassDesc | None:
    """The class policy of a SortedMapSerializerSnapshot's comparator stream."""
    return COMPARATOR_CLASSES.get(name)


__all__ = ["ACCUMULATOR_CLASSES", "BASE", "CLASSES", "COMPARATOR_CLASSES", "LOGICAL", "OTHER_SHAPES", "RUNTIME",
           "STRUCTURED", "STRUCTURED_1X",
           "class_literal_desc", "comparator_policy", "desc", "flink_policy"]
