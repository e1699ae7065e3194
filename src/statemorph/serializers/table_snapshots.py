"""Flink's snapshots of the table-runtime field serializers nested in a
``RowDataSerializerSnapshot`` (``org.apache.flink.table.runtime.typeutils``).

Why they exist: Flink's ``RowDataSerializerSnapshot`` ends with a ``NestedSerializersSnapshotDelegate``
holding one snapshot per field, ``InternalSerializers.create(fieldType).snapshotConfiguration()``.
To read such a snapshot every nested class must be readable (there are no lengths), and to write
Flink's bytes for a new row type every one must be writable. The one mapping from a field type
to its snapshot (Flink's ``InternalSerializers``) is :func:`.rowdata.field_serializer_snapshot`,
beside the row snapshot that nests them (a ROW field's snapshot is a row snapshot again).

Inside a row statemorph has no standalone serializers for these table formats: a field's values
are always read and written through the enclosing row (``RowDataSerializer``), and the row's
compatibility is decided from the row types. (The state-backed data views of SQL aggregations
nest a StringData or ArrayData snapshot in an ``ExternalSerializerSnapshot``; their standalone
serializers live with it, in :mod:`.external`.) So these snapshots answer :meth:`describes` (does the snapshot
fit this field type? used to validate what was read) and refuse ``restore_serializer`` with a
message saying so.

Contents (after ``UTF(class) ‖ i32 version``; Flink reads every version the same way):

- ``StringDataSerializerSnapshot``: Simple, v3, empty;
- ``DecimalSerializerSnapshot``: v3, ``i32 precision ‖ i32 scale``;
- ``TimestampDataSerializerSnapshot``: v1, ``i32 precision``;
- ``BinaryRowDataSerializerSnapshot``: v3, ``i32 numFields``;
- ``ArrayDataSerializerSnapshot``: v3, ``JAVASER(elementType) ‖ JAVASER(elementSerializer)``;
- ``MapDataSerializerSnapshot``: v3, ``JAVASER(keyType) ‖ JAVASER(valueType) ‖ JAVASER(keySer) ‖
  JAVASER(valueSer)``;
- ``RawValueDataSerializerSnapshot`` of a data-view placeholder (``RAW(MapView / ListView)``): a
  composite snapshot, outer version 0, no outer content, one nested ``NullSerializerSnapshot``
  (v3, empty).

The serializer streams of ArrayData / MapData snapshots that were read are kept as bytes and
written back unchanged; for a new type they are built by :mod:`statemorph.javaser.tableser`.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..errors import SnapshotError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..javaser import read_stream, write_logical_type_to, write_stream
from ..javaser.classes import flink_policy
from ..javaser.logical import read_logical_type
from ..javaser.tableser import serializer_tree
from ..types import (
    ArrayType,
    CharType,
    DecimalType,
    LocalZonedTimestampType,
    LogicalType,
    MapType,
    MultisetType,
    RawType,
    RowType,
    TimestampType,
    VarCharType,
)
from ..typeutils import (
    CompositeTypeSerializerSnapshot,
    SchemaCompatibility,
    SimpleTypeSerializerSnapshot,
    TypeSerializer,
    TypeSerializerSnapshot,
    read_nested_snapshots,
    register_snapshot,
    write_nested_snapshots,
)

RUNTIME = "org.apache.flink.table.runtime.typeutils."


class FieldSnapshot(TypeSerializerSnapshot):
    """A table field serializer's snapshot: meaningful only inside its row snapshot."""

    @abstractmethod
    def describes(self, t: LogicalType) -> bool:
        """Whether this is the snapshot Flink nests for a field of type ``t``."""

    def restore_serializer(self) -> TypeSerializer[Any]:
        raise SnapshotError(
            f"{type(self).__name__} describes one field of a Flink RowData snapshot; statemorph restores "
            f"such fields through the enclosing RowDataSerializerSnapshot, not on their own"
        )

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        return SchemaCompatibility.incompatible(
            f"{type(self).__name__} is resolved through its RowDataSerializerSnapshot, not against "
            f"{type(new_serializer).__name__}"
        )


@register_snapshot()
class StringDataSerializerSnapshot(SimpleTypeSerializerSnapshot, FieldSnapshot):
    IDENTIFIER = RUNTIME + "StringDataSerializer$StringDataSerializerSnapshot"

    def describes(self, t: LogicalType) -> bool:
        return isinstance(t, (CharType, VarCharType))

    restore_serializer = FieldSnapshot.restore_serializer
    resolve_schema_compatibility = FieldSnapshot.resolve_schema_compatibility


@dataclass(eq=False, repr=False)
class IntConfiguredSnapshot(FieldSnapshot):
    """A field snapshot whose whole configuration is a few ints (a precision and a scale, an
    arity): its dataclass fields, each written with ``writeInt`` in field order. It describes a
    logical type of a class in ``DESCRIBES`` whose attributes of the same names hold the same ints."""

    DESCRIBES: ClassVar[tuple[type[LogicalType], ...]]

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        for f in fields(self):
            out.write_int(getattr(self, f.name))

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot:
        return cls(*(src.read_int() for _ in fields(cls)))

    def describes(self, t: LogicalType) -> bool:
        return isinstance(t, self.DESCRIBES) and all(getattr(t, f.name) == getattr(self, f.name) for f in fields(self))


@register_snapshot()
@dataclass(eq=False, repr=False)
class DecimalDataSerializerSnapshot(IntConfiguredSnapshot):
    IDENTIFIER, VERSION, DESCRIBES = RUNTIME + "DecimalDataSerializer$DecimalSerializerSnapshot", 3, (DecimalType,)
    precision: int
    scale: int


@register_snapshot()
@dataclass(eq=False, repr=False)
class TimestampDataSerializerSnapshot(IntConfiguredSnapshot):
    IDENTIFIER = RUNTIME + "TimestampDataSerializer$TimestampDataSerializerSnapshot"
    VERSION, DESCRIBES = 1, (TimestampType, LocalZonedTimestampType)
    precision: int


@register_snapshot()
@dataclass(eq=False, repr=False)
class BinaryRowDataSerializerSnapshot(IntConfiguredSnapshot):
    IDENTIFIER = RUNTIME + "BinaryRowDataSerializer$BinaryRowDataSerializerSnapshot"
    VERSION, DESCRIBES = 3, (RowType,)
    arity: int  # the row's field count (Flink's numFields)


def _serializer_stream(src: DataInputDeserializer, what: str) -> bytes:
    """One Java-serialized serializer object, validated against the whitelist, as its bytes."""
    start = src.position
    read_stream(src, flink_policy, what)
    data, _, _ = src.window()
    return data[start:src.position]


@register_snapshot()
class ArrayDataSerializerSnapshot(FieldSnapshot):
    IDENTIFIER = RUNTIME + "ArrayDataSerializer$ArrayDataSerializerSnapshot"
    VERSION: ClassVar[int] = 3

    def __init__(self, element_type: LogicalType, serializer_stream: bytes | None = None) -> None:
        self.element_type = element_type
        # the Java-serialized element serializer as read (written back unchanged), else built
        self.serializer_stream = serializer_stream

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        write_logical_type_to(out, self.element_type)
        out.write(self.serializer_stream or write_stream(serializer_tree(self.element_type)))

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> ArrayDataSerializerSnapshot:
        element = read_logical_type(src, "ArrayData snapshot element type")
        return cls(element, _serializer_stream(src, "ArrayData snapshot element serializer"))

    def describes(self, t: LogicalType) -> bool:
        return isinstance(t, ArrayType) and t.element_type == self.element_type


@register_snapshot()
class MapDataSerializerSnapshot(FieldSnapshot):
    IDENTIFIER = RUNTIME + "MapDataSerializer$MapDataSerializerSnapshot"
    VERSION: ClassVar[int] = 3

    def __init__(self, key_type: LogicalType, value_type: LogicalType,
                 serializer_streams: tuple[bytes, bytes] | None = None) -> None:
        self.key_type = key_type
        self.value_type = value_type
        self.serializer_streams = serializer_streams

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        write_logical_type_to(out, self.key_type)
        write_logical_type_to(out, self.value_type)
        streams = self.serializer_streams or (write_stream(serializer_tree(self.key_type)),
                                              write_stream(serializer_tree(self.value_type)))
        out.write(streams[0])
        out.write(streams[1])

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> MapDataSerializerSnapshot:
        key = read_logical_type(src, "MapData snapshot key type")
        value = read_logical_type(src, "MapData snapshot value type")
        streams = (_serializer_stream(src, "MapData snapshot key serializer"),
                   _serializer_stream(src, "MapData snapshot value serializer"))
        return cls(key, value, streams)

    def describes(self, t: LogicalType) -> bool:
        return isinstance(t, (MapType, MultisetType)) and t.map_parts() == (self.key_type, self.value_type)


@register_snapshot()
class NullSerializerSnapshot(FieldSnapshot):
    """Flink SQL's ``NullSerializer`` (flink-table-runtime ``org.apache.flink.table.dataview``): the
    serializer of an accumulator's data-view placeholder, nested in its RawValueData snapshot."""

    IDENTIFIER = "org.apache.flink.table.dataview.NullSerializer$NullSerializerSnapshot"
    VERSION: ClassVar[int] = 3

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        """Empty."""

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> NullSerializerSnapshot:
        return cls()

    def describes(self, t: LogicalType) -> bool:
        return False  # never a field's own snapshot: only nested in RawValueDataSerializerSnapshot


@register_snapshot()
class RawValueDataSerializerSnapshot(FieldSnapshot):
    """The field snapshot of a data-view placeholder ``RAW(MapView / ListView, NullSerializer)``."""

    IDENTIFIER = RUNTIME + "RawValueDataSerializer$RawValueDataSerializerSnapshot"
    VERSION: ClassVar[int] = 3

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_int(CompositeTypeSerializerSnapshot.MAGIC)
        out.write_int(0)  # outer version, no outer content
        write_nested_snapshots(out, [NullSerializerSnapshot()])

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> RawValueDataSerializerSnapshot:
        at = src.position
        magic, outer = src.read_int(), src.read_int()
        if (magic, outer) != (CompositeTypeSerializerSnapshot.MAGIC, 0):
            raise SnapshotError(f"RawValueDataSerializerSnapshot at offset {at}: magic {magic} / outer version "
                                f"{outer}, expected {CompositeTypeSerializerSnapshot.MAGIC} / 0")
        nested = read_nested_snapshots(src, cls.__name__)
        if len(nested) != 1 or not isinstance(nested[0], NullSerializerSnapshot):
            raise SnapshotError(f"RawValueDataSerializerSnapshot at offset {at}: statemorph reads RAW fields only "
                                f"as data-view placeholders (one NullSerializer), found "
                                f"{', '.join(type(n).__name__ for n in nested) or 'no serializer'}")
        return cls()

    def describes(self, t: LogicalType) -> bool:
        return isinstance(t, RawType)


__all__ = [
    "ArrayDataSerializerSnapshot",
    "BinaryRowDataSerializerSnapshot",
    "DecimalDataSerializerSnapshot",
    "MapDataSerializerSnapshot",
    "NullSerializerSnapshot",
    "RawValueDataSerializerSnapshot",
    "StringDataSerializerSnapshot",
    "TimestampDataSerializerSnapshot",
]
