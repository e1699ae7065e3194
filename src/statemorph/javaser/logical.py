"""Flink ``LogicalType`` objects in Java serialization ⇄ statemorph :mod:`statemorph.types`.

Why: Flink's ``RowDataSerializerSnapshot`` (and the ArrayData / MapData snapshots) store their
types as ``InstantiationUtil.serializeObject(logicalType)``. Reading builds statemorph types
from the parsed stream (nothing Java is instantiated); writing builds the tree Flink's
``ObjectOutputStream`` would write, so the bytes equal Flink's (golden vectors prove it).

Shapes (every class has serialVersionUID 1; fields as in :mod:`.classes`):

- ``LogicalType``: ``isNullable:Z``, ``typeRoot:LogicalTypeRoot`` (an enum constant);
- length types ``length:I``; DECIMAL ``precision:I, scale:I``; TIME ``precision:I``;
  TIMESTAMP / TIMESTAMP_LTZ ``precision:I, kind:TimestampKind`` (REGULAR, or a query's time
  attribute ROWTIME / PROCTIME, kept as the types' ``kind``);
- ARRAY / MULTISET ``elementType``; MAP ``keyType, valueType``;
- ROW ``fields``: ``Collections$UnmodifiableList`` whose ``c`` and ``list`` are one
  ``ArrayList`` (``size:I``, then ``writeObject`` data: ``i32 size`` and the elements), each a
  ``RowType$RowField`` (``description, name, type``);
- RAW ``clazz:Class, serializer:TypeSerializer``: read and written only as a SQL accumulator's
  data-view placeholder (``MapView`` / ``ListView`` with the ``NullSerializer`` singleton).
"""

from __future__ import annotations

import struct
from typing import Any

from .. import types
from ..errors import JavaSerializationError
from ..io import DataInputDeserializer, DataOutputSerializer
from .classes import (
    CLASSES,
    DATAVIEW_API,
    LOGICAL,
    STRUCTURED,
    STRUCTURED_1X,
    class_literal_desc,
    desc,
    flink_policy,
)
from .nodes import BlockData, JClass, JEnum, JInterned, JObject, JString
from .reader import ClassPolicy, read_stream
from .writer import write_stream_to

#: the LogicalTypes Flink can serialize here; each Python class has its Flink class's simple name
_CLASS_OF: dict[type[types.LogicalType], str] = {cls: cls.__name__ for cls in (
    types.BooleanType, types.TinyIntType, types.SmallIntType, types.IntType, types.BigIntType, types.FloatType,
    types.DoubleType, types.DateType, types.CharType, types.VarCharType, types.BinaryType, types.VarBinaryType,
    types.DecimalType, types.TimeType, types.TimestampType, types.LocalZonedTimestampType, types.ArrayType,
    types.MultisetType, types.MapType, types.RowType, types.RawType, types.StructuredType)}
_TYPE_OF: dict[str, type[types.LogicalType]] = {LOGICAL + v: k for k, v in _CLASS_OF.items()}

ROOT_ENUM = LOGICAL + "LogicalTypeRoot"
KIND_ENUM = LOGICAL + "TimestampKind"
ROW_FIELD = LOGICAL + "RowType$RowField"
UNMODIFIABLE_LIST = "java.util.Collections$UnmodifiableList"
ARRAY_LIST = "java.util.ArrayList"
ATTRIBUTE = STRUCTURED + "$StructuredAttribute"
COMPARISON_ENUM = STRUCTURED + "$StructuredComparison"
COLL_SER = "java.util.CollSer"
_IMM_LIST = 1  # CollSer's tag of an immutable List.of(...)
_MAX_ROW_FIELDS = 1 << 16
#: The RAW types statemorph reads and writes: a SQL accumulator's placeholder for a data view kept in
#: state of its own, ``RAW(MapView / ListView, NullSerializer)``; any other RAW type is a user's.
DATA_VIEW_CLASSES = (DATAVIEW_API + "MapView", DATAVIEW_API + "ListView")
NULL_SERIALIZER = "org.apache.flink.table.dataview.NullSerializer"


# -- statemorph type -> tree -------------------------------------------------------------------

def _holds_user_structured(t: types.LogicalType) -> bool:
    """Whether ``t`` is or holds a STRUCTURED type of a class that is not Flink's own (extracted
    from a user's class by reflection)."""
    if isinstance(t, types.StructuredType) and t.class_name not in CLASSES:
        return True
    return any(_holds_user_structured(c) for c in t.children())


class TypeTreeBuilder:
    """Builds the object tree of LogicalTypes for ONE stream: enum constants are singletons in
    the JVM, so each constant is one node (written once, then referenced)."""

    def __init__(self) -> None:
        self._enums: dict[tuple[str, str], JEnum] = {}
        self._classes: dict[str, JClass] = {}  # class literals and the NullSerializer singleton: one
        self._null_serializer: JObject | None = None  # object per JVM, so one node per stream
        # inside a user's structured type: its leaf types by their text (see build)
        self._extracted: dict[tuple[type, str], JObject] | None = None

    def enum(self, cls: str, constant: str) -> JEnum:
        key = (cls, constant)
        node = self._enums.get(key)
        if node is None:
            node = self._enums[key] = JEnum(desc(cls), constant)
        return node

    def build(self, t: types.LogicalType) -> JObject:
        """The tree of ``t``. A user's structured type (a class not among Flink's accumulators) was
        extracted from the class by reflection, where each Java class's default type is one static
        instance (Flink's ``ClassDataTypeConverter``: every ``String`` field the same
        ``VarCharType``): in a type holding one (the MAP or ARRAY around it too), equal leaf types
        are one node, as the JVM writes them."""
        if self._extracted is None and _holds_user_structured(t):
            self._extracted = {}
            try:
                return self._build(t)
            finally:
                self._extracted = None
        if self._extracted is not None and not t.children():
            key = (type(t), t.as_summary_string())
            node = self._extracted.get(key)
            if node is None:
                node = self._extracted[key] = self._build(t)
            return node
        return self._build(t)

    def _build(self, t: types.LogicalType) -> JObject:
        name = _CLASS_OF.get(type(t))
        if name is None:
            raise JavaSerializationError(f"statemorph cannot write the Flink LogicalType of {t} ({type(t).__name__})")
        values: dict[str, Any] = {"isNullable": t.nullable, "typeRoot": self.enum(ROOT_ENUM, t.type_root)}
        if isinstance(t, (types.CharType, types.VarCharType, types.BinaryType, types.VarBinaryType)):
            values["length"] = t.length
        elif isinstance(t, types.DecimalType):
            values["precision"] = t.precision
            values["scale"] = t.scale
        elif isinstance(t, types.TimeType):
            values["precision"] = t.precision
        elif isinstance(t, (types.TimestampType, types.LocalZonedTimestampType)):
            values["precision"] = t.precision
            values["kind"] = self.enum(KIND_ENUM, t.kind)
        elif isinstance(t, (types.ArrayType, types.MultisetType)):
            values["elementType"] = self.build(t.element_type)
        elif isinstance(t, types.MapType):
            values["keyType"] = self.build(t.key_type)
            values["valueType"] = self.build(t.value_type)
        elif isinstance(t, types.StructuredType):
            values.update(self.structured(t))
        elif isinstance(t, types.RowType):
            values["fields"] = self.row_fields(t)
        elif isinstance(t, types.RawType):
            if t.class_name not in DATA_VIEW_CLASSES:
                raise JavaSerializationError(f"statemorph cannot write the Flink LogicalType of {t}: only the "
                                             f"data-view placeholders (MapView / ListView) are written")
            values["clazz"] = self._classes.setdefault(t.class_name, JClass(desc(t.class_name)))
            if self._null_serializer is None:
                self._null_serializer = JObject(desc(NULL_SERIALIZER), {})
            values["serializer"] = self._null_serializer
        shape = STRUCTURED_1X if isinstance(t, types.StructuredType) and t.flink1_shape else desc(LOGICAL + name)
        return JObject(shape, values)

    def structured(self, t: types.StructuredType) -> dict[str, Any]:
        """An inline structured type's own values (no catalog identifier, super type or description)."""
        literal = CLASSES.get(t.class_name) or class_literal_desc(t.class_name)
        if t.has_implementation_class and literal is None:
            raise JavaSerializationError(f"statemorph cannot write the Flink LogicalType of {t}: "
                                         f"{t.class_name!r} is not a Java class name")
        # extracted by reflection: the names are the JVM's (Field.getName, Class.getName), one
        # object per value
        text: Any = JInterned if self._extracted is not None else str
        attributes = [JObject(desc(ATTRIBUTE), {"description": f.description, "name": text(f.name),
                                                "type": self.build(f.type)}) for f in t.fields]
        size = BlockData(struct.pack(">i", t.arity))
        return {
            "isFinal": t.final, "description": None, "objectIdentifier": None,
            "isInstantiable": t.instantiable,
            # Flink 2.x: List.of(...); 1.x: Collections.unmodifiableList(new ArrayList<>(...))
            "attributes": _unmodifiable_list(attributes) if t.flink1_shape
            else JObject(desc(COLL_SER), {"tag": _IMM_LIST}, {COLL_SER: [size, *attributes]}),
            **({} if t.flink1_shape else {"className": text(t.class_name)}),
            "comparison": self.enum(COMPARISON_ENUM, t.comparison),
            "implementationClass": self._classes.setdefault(t.class_name, JClass(literal))
            if t.has_implementation_class and literal is not None else None,
            "superType": None,
        }

    def row_fields(self, t: types.RowType) -> JObject:
        return _unmodifiable_list([JObject(desc(ROW_FIELD), {
            "description": f.description,
            "name": f.name,
            "type": self.build(f.type),
        }) for f in t.fields])


def _unmodifiable_list(elements: list[Any]) -> JObject:
    """``Collections.unmodifiableList(new ArrayList<>(elements))`` (a RowType's fields)."""
    items: list[Any] = [BlockData(struct.pack(">i", len(elements))), *elements]
    backing = JObject(desc(ARRAY_LIST), {"size": len(elements)}, {ARRAY_LIST: items})
    return JObject(desc(UNMODIFIABLE_LIST), {"c": backing, "list": backing})


def logical_type_tree(t: types.LogicalType) -> JObject:
    """The object tree Flink serializes for ``t`` (one stream's worth)."""
    return TypeTreeBuilder().build(t)


def write_logical_type_to(out: DataOutputSerializer, t: types.LogicalType) -> None:
    """Append ``InstantiationUtil.serializeObject(t)`` as Flink 2.3 writes it."""
    write_stream_to(out, logical_type_tree(t))


def write_logical_type(t: types.LogicalType) -> bytes:
    out = DataOutputSerializer()
    write_logical_type_to(out, t)
    return out.get_copy_of_buffer()


# -- tree -> statemorph type -------------------------------------------------------------------

def _fail(what: str, message: str) -> JavaSerializationError:
    return JavaSerializationError(f"{what}: {message}")


def _string(node: Any, what: str, nullable: bool = False) -> str | None:
    if node is None and nullable:
        return None
    if not isinstance(node, JString):
        raise _fail(what, f"expected a string, found {type(node).__name__}")
    return node.value


def logical_type_from_tree(node: Any, what: str = "LogicalType", depth: int = 0) -> types.LogicalType:
    """Interpret a parsed stream as a LogicalType (the classes were whitelisted by the reader;
    here the values are checked: roots match classes, parameters are in range)."""
    if depth > 64:
        raise _fail(what, "types nested more than 64 levels deep")
    if not isinstance(node, JObject) or node.desc.name not in _TYPE_OF:
        found = "null" if node is None else getattr(getattr(node, "desc", None), "name", type(node).__name__)
        raise _fail(what, f"expected a LogicalType object, found {found}")
    cls = _TYPE_OF[node.desc.name]
    v = node.values
    root = v.get("typeRoot")
    if not isinstance(root, JEnum) or root.desc.name != ROOT_ENUM or root.constant != cls.ROOT:
        found = root.constant if isinstance(root, JEnum) else type(root).__name__
        raise _fail(what, f"{node.desc.name} with type root {found}, expected {cls.ROOT}")
    nullable = bool(v["isNullable"])
    try:
        if cls in (types.CharType, types.VarCharType, types.BinaryType, types.VarBinaryType):
            return cls(v["length"], nullable=nullable)  # type: ignore[call-arg]
        if cls is types.DecimalType:
            return types.DecimalType(v["precision"], v["scale"], nullable=nullable)
        if cls is types.TimeType:
            return types.TimeType(v["precision"], nullable=nullable)
        if cls in (types.TimestampType, types.LocalZonedTimestampType):
            kind = v["kind"]
            if not isinstance(kind, JEnum) or kind.desc.name != KIND_ENUM:
                raise _fail(what, "timestamp kind is not a TimestampKind constant")
            known = types.TIMESTAMP_KINDS
            if kind.constant not in known:
                raise _fail(what, f"unknown timestamp kind {kind.constant!r} (known: {', '.join(known)})")
            return cls(v["precision"], nullable=nullable, kind=kind.constant)  # type: ignore[call-arg]
        if cls in (types.ArrayType, types.MultisetType):
            element = logical_type_from_tree(v["elementType"], f"{what} element", depth + 1)
            return cls(element, nullable=nullable)  # type: ignore[call-arg]
        if cls is types.MapType:
            return types.MapType(logical_type_from_tree(v["keyType"], f"{what} key", depth + 1),
                           logical_type_from_tree(v["valueType"], f"{what} value", depth + 1), nullable=nullable)
        if cls is types.RowType:
            return types.RowType(_row_fields(v["fields"], what, depth), nullable=nullable)
        if cls is types.StructuredType:
            return _structured(v, what, depth, nullable)
        if cls is types.RawType:
            return _data_view_placeholder(v, what, nullable)
        return cls(nullable=nullable)
    except ValueError as e:  # parameters out of range (statemorph.types validates them)
        raise _fail(what, str(e)) from None


def _data_view_placeholder(v: dict[str, Any], what: str, nullable: bool) -> types.RawType:
    """A RAW type read: only a data-view placeholder (its class MapView / ListView, its serializer
    Flink's NullSerializer); a user's RAW type is refused (its serializer is not statemorph's)."""
    clazz, ser = v.get("clazz"), v.get("serializer")
    name = clazz.desc.name if isinstance(clazz, JClass) else None
    if name not in DATA_VIEW_CLASSES or not isinstance(ser, JObject) or ser.desc.name != NULL_SERIALIZER:
        raise _fail(what, f"RAW type of {name or 'no class'} is not a SQL data-view placeholder "
                          f"(statemorph reads RAW only for MapView / ListView with NullSerializer)")
    return types.RawType(name, nullable=nullable)


def _structured(v: dict[str, Any], what: str, depth: int, nullable: bool) -> types.StructuredType:
    """An inline structured type read (what Flink's planner derives for a built-in accumulator): its
    class name, attributes and flags; a catalog type, a super type or another comparison is refused."""
    flink1 = "className" not in v  # Flink 1.x's StructuredType: the class is the literal's
    clazz = v.get("implementationClass")
    if flink1:
        name = clazz.desc.name if isinstance(clazz, JClass) else None
    else:
        name = _string(v.get("className"), f"{what} class name", nullable=True)
    for key in ("objectIdentifier", "superType", "description"):
        if v.get(key) is not None:
            raise _fail(what, f"STRUCTURED type {name} with a {key}: statemorph reads only inline structured "
                              f"types (a class name and attributes)")
    comparison = v.get("comparison")
    if not isinstance(comparison, JEnum) or comparison.desc.name != COMPARISON_ENUM or \
            comparison.constant not in ("EQUALS", "NONE"):
        found = comparison.constant if isinstance(comparison, JEnum) else type(comparison).__name__
        raise _fail(what, f"STRUCTURED type {name} with comparison {found} (statemorph reads EQUALS and NONE)")
    if name is None or (clazz is not None and (not isinstance(clazz, JClass) or clazz.desc.name != name)):
        found = clazz.desc.name if isinstance(clazz, JClass) else type(clazz).__name__
        raise _fail(what, f"STRUCTURED type named {name} has implementation class {found}")
    node = v.get("attributes")
    if flink1:
        elements = _unmodifiable_elements(node, f"{what} STRUCTURED type {name} attributes")
    else:
        if not isinstance(node, JObject) or node.desc.name != COLL_SER or node.values.get("tag") != _IMM_LIST:
            raise _fail(what, f"STRUCTURED type {name}: attributes are not an immutable java.util.List")
        elements = _list_elements(node.annotations.get(COLL_SER, []), f"{what} attributes")
    fields = _named_fields(elements, ATTRIBUTE, "StructuredType$StructuredAttribute", what, depth)
    try:
        return types.StructuredType(fields, class_name=name, final=bool(v["isFinal"]),
                                    instantiable=bool(v["isInstantiable"]),
                                    has_implementation_class=clazz is not None, nullable=nullable,
                                    flink1_shape=flink1, comparison=comparison.constant)
    except ValueError as e:
        raise _fail(what, str(e)) from None


def _list_elements(items: list[Any], what: str, declared: int | None = None) -> list[Any]:
    """The elements a list's ``writeObject`` data holds: ``i32 size`` in block data, then that many."""
    if not items or not isinstance(items[0], BlockData) or len(items[0].data) != 4:
        raise _fail(what, "list data does not start with its size")
    size = struct.unpack(">i", items[0].data)[0]
    elements = items[1:]
    if not 0 <= size <= _MAX_ROW_FIELDS or (declared is not None and declared != size) or len(elements) != size:
        raise _fail(what, f"list declares {size if declared is None else declared} elements but holds {len(elements)}")
    return elements


def _row_fields(node: Any, what: str, depth: int) -> tuple[types.RowField, ...]:
    elements = _unmodifiable_elements(node, f"{what} ROW fields")
    return _named_fields(elements, ROW_FIELD, "RowType$RowField", what, depth)


def _unmodifiable_elements(node: Any, what: str) -> list[Any]:
    """The elements of ``Collections.unmodifiableList(new ArrayList<>(...))``."""
    if not isinstance(node, JObject) or node.desc.name != UNMODIFIABLE_LIST:
        raise _fail(what, "not a Collections$UnmodifiableList")
    backing = node.values["list"]
    if backing is not node.values["c"] or not isinstance(backing, JObject) or backing.desc.name != ARRAY_LIST:
        raise _fail(what, "not wrapping one java.util.ArrayList")
    return _list_elements(backing.annotations.get(ARRAY_LIST, []), what, backing.values["size"])


def _named_fields(elements: list[Any], cls: str, simple: str, what: str, depth: int) -> tuple[types.RowField, ...]:
    """ROW fields or STRUCTURED attributes (both ``description, name, type``) as RowFields."""
    fields = []
    for i, f in enumerate(elements):
        if not isinstance(f, JObject) or f.desc.name != cls:
            raise _fail(what, f"field #{i} is not a {simple}")
        name = _string(f.values["name"], f"{what} field #{i} name")
        assert name is not None
        description = _string(f.values["description"], f"{what} field {name!r} description", nullable=True)
        ftype = logical_type_from_tree(f.values["type"], f"{what}.{name}", depth + 1)
        try:
            fields.append(types.RowField(name, ftype, description))
        except ValueError as e:
            raise _fail(what, str(e)) from None
    names = [f.name for f in fields]
    if len(set(names)) != len(names):
        raise _fail(what, f"duplicate field names in {names}")
    return tuple(fields)


def read_logical_type(
    src: DataInputDeserializer, what: str = "LogicalType", policy: ClassPolicy = flink_policy
) -> types.LogicalType:
    """Read one ``serializeObject(LogicalType)`` stream from ``src`` (left just after it)."""
    return logical_type_from_tree(read_stream(src, policy, what), what)


__all__ = [
    "TypeTreeBuilder",
    "logical_type_from_tree",
    "logical_type_tree",
    "read_logical_type",
    "write_logical_type",
    "write_logical_type_to",
]
