"""Flink SQL's ``ExternalSerializer`` and the standalone ``StringDataSerializer`` it wraps: the
serializers of the state-backed data views of SQL aggregations.

Why they exist: a SQL aggregation keeps each ``MapView`` / ``ListView`` of its accumulators, and
each distinct aggregate's map of seen values (``distinctAcc_N``), in a map or list state of its own
(``agg0$valueToOrderMap``, ``agg2$list``, ``distinctAcc_0``, with a value state ``..._null_state``
for a null map key). Their serializers are ``ExternalSerializer.of(dataType)``: Flink's
``DataStructureConverter`` around ``InternalSerializers.create(logicalType)``. The bytes are the
internal serializer's, so statemorph reads them with the internal serializer: ``LongSerializer``
for ``BIGINT`` (conversion class ``java.lang.Long``), ``StringDataSerializer`` for ``STRING``
(conversion class ``StringData``), and so on. Without this snapshot Flink's map-state metadata
cannot even be delimited (it has no lengths), so every such state was opaque.

Layouts (flink-table-runtime ``org.apache.flink.table.runtime.typeutils``):

- ``ExternalSerializerSnapshot``: a composite snapshot, outer version 1, outer content
  ``JAVASER(DataType) ‖ bool isInternalInput``, one nested snapshot (the internal serializer's).
  The Java-serialized ``DataType`` is read through the whitelist (``AtomicDataType``: a logical
  type and a conversion class literal) and written back byte for byte.
- ``StringDataSerializer`` (standalone, as here; inside a row the field is in the row's binary
  layout instead): ``i32 byte length ‖ UTF-8 bytes``; it cannot write null.
- ``ArrayDataSerializer`` (standalone; the retracting FIRST_VALUE / LAST_VALUE maps keep
  ``List<Long>`` / ``List<T>`` values, an ``ARRAY`` data type with ``java.util.List`` conversion):
  ``i32 byte length ‖ BinaryArrayData``, the array layout of formats.md (the one a row's ARRAY field
  points to).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..binary_layout import ArrayCodec, _Ctx
from ..errors import MalformedDataError, SerializationError, SnapshotError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..javaser import read_stream
from ..javaser.classes import flink_policy
from ..javaser.logical import logical_type_from_tree
from ..javaser.nodes import JClass, JObject
from ..types import STRING, ArrayType, LogicalType
from ..typeutils import (
    CompositeTypeSerializerSnapshot,
    SchemaCompatibility,
    TypeSerializer,
    TypeSerializerSnapshot,
    register_snapshot,
)
from .table_snapshots import RUNTIME, ArrayDataSerializerSnapshot, StringDataSerializerSnapshot

#: Bounds a corrupt length before any allocation (Flink's strings are far below this).
_MAX_STRING_BYTES = 1 << 30
ATOMIC_DATA_TYPE = "org.apache.flink.table.types.AtomicDataType"
COLLECTION_DATA_TYPE = "org.apache.flink.table.types.CollectionDataType"
_DATA_TYPES = (ATOMIC_DATA_TYPE, COLLECTION_DATA_TYPE)


class StringDataSerializer(TypeSerializer[str]):
    """Flink SQL's ``StringDataSerializer`` on its own: ``i32 length ‖ UTF-8``; values are ``str``."""

    SQL_TYPE = "STRING"
    VALUE_TYPE = STRING()
    # no KEY_HASH: BinaryStringData hashes its bytes (Murmur), not as java.lang.String; no BULK: the
    # string kernels read Flink's StringValue, not this i32-length UTF-8
    IMMUTABLE_VALUES = True

    def serialize(self, value: str, out: DataOutputSerializer) -> None:
        if not isinstance(value, str):
            raise SerializationError(f"StringDataSerializer writes a str, not {type(value).__name__} "
                                     f"(it cannot write null)")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SerializationError(f"StringDataSerializer: string is not valid Unicode ({e.reason})") from None
        out.write_int(len(data))
        out.write(data)

    def deserialize(self, src: DataInputDeserializer) -> str:
        at = src.position
        n = src.read_int()
        if not 0 <= n <= _MAX_STRING_BYTES:
            raise MalformedDataError(f"StringData at offset {at}: length {n} outside 0..{_MAX_STRING_BYTES}")
        data = src.read_fully(n, "StringData")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedDataError(f"StringData at offset {at}: invalid UTF-8 ({e.reason})") from None

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return StringDataSerializerSnapshot()


class ArrayDataSerializer(TypeSerializer[list[Any]]):
    """Flink SQL's ``ArrayDataSerializer`` on its own: ``i32 length ‖ BinaryArrayData``; values are
    lists (of what a RowData field of the element type reads as)."""

    def __init__(self, element_type: LogicalType) -> None:
        self.element_type = element_type
        self.array_type = ArrayType(element_type)
        self._codec = ArrayCodec(self.array_type, element_type)

    def describe_type(self) -> str:
        return str(self.array_type)

    def serialize(self, value: list[Any], out: DataOutputSerializer) -> None:
        if value is None:
            raise SerializationError("ArrayDataSerializer cannot write null")
        body = self._codec.encode(value, "[]")
        out.write_int(len(body))
        out.write(body)

    def deserialize(self, src: DataInputDeserializer) -> list[Any]:
        start = src.position
        n = src.check_length(src.read_int(), "ArrayData bytes")
        data = src.read_fully(n, "ArrayData bytes")
        return self._codec.decode(_Ctx(data, start + 4), 0, n, "[]")

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ArrayDataSerializerSnapshot(self.element_type)

    def _config(self) -> tuple[Any, ...]:
        return (self.element_type,)


class ExternalSerializer(TypeSerializer[Any]):
    """``ExternalSerializer``: the bytes of ``inner`` (the internal serializer); ``data_type`` is the
    exact Java-serialized ``DataType`` stream of the snapshot (kept, never rebuilt) and
    ``logical_type`` what it says."""

    def __init__(self, inner: TypeSerializer[Any], logical_type: LogicalType, data_type: bytes,
                 is_internal_input: bool) -> None:
        self.inner = inner
        self.logical_type = logical_type
        self.data_type = data_type
        self.is_internal_input = is_internal_input

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        if value is None:  # Flink: "Serializing null in the top-level is not supported"
            raise SerializationError("ExternalSerializer cannot write null")
        self.inner.serialize(value, out)

    def deserialize(self, src: DataInputDeserializer) -> Any:
        return self.inner.deserialize(src)

    def get_length(self) -> int:
        return self.inner.get_length()

    def is_immutable_type(self) -> bool:
        return self.inner.is_immutable_type()

    def copy(self, value: Any) -> Any:
        return self.inner.copy(value)

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ExternalSerializerSnapshot(self)

    def _config(self) -> tuple[Any, ...]:
        return (self.inner, self.data_type, self.is_internal_input)

    def describe_type(self) -> str:
        return str(self.logical_type)

    def successor_for(self, t: LogicalType) -> TypeSerializer[Any]:
        """Itself, for its own type only: the planner derives a data view's type from the query."""
        if t != self.logical_type:
            raise ValueError(f"the state of a SQL data view keeps its type {self.logical_type} "
                             f"(Flink's planner derives it from the query), got {t}")
        return self

    def __repr__(self) -> str:
        return f"ExternalSerializer({self.logical_type}, {self.inner!r})"


def _internal_serializer(snap: TypeSerializerSnapshot) -> TypeSerializer[Any]:
    """The serializer of an internal-serializer snapshot nested in an ExternalSerializerSnapshot
    (a table field snapshot has no standalone serializer elsewhere)."""
    if isinstance(snap, StringDataSerializerSnapshot):
        return StringDataSerializer()
    if isinstance(snap, ArrayDataSerializerSnapshot):
        return ArrayDataSerializer(snap.element_type)
    return snap.restore_serializer()


@register_snapshot()
class ExternalSerializerSnapshot(CompositeTypeSerializerSnapshot):
    IDENTIFIER = RUNTIME + "ExternalSerializer$ExternalSerializerSnapshot"
    SERIALIZER_CLASS = ExternalSerializer
    NESTED = {"internal": "inner"}
    data_type: bytes = b""
    logical_type: LogicalType | None = None
    is_internal_input: bool = False

    def set_outer_from_serializer(self, serializer: TypeSerializer[Any]) -> None:
        assert isinstance(serializer, ExternalSerializer)
        self.data_type = serializer.data_type
        self.logical_type = serializer.logical_type
        self.is_internal_input = serializer.is_internal_input

    def create_outer_serializer_with_nested_serializers(
        self, nested: Sequence[TypeSerializer[Any]]
    ) -> TypeSerializer[Any]:
        assert self.logical_type is not None
        return ExternalSerializer(nested[0], self.logical_type, self.data_type, self.is_internal_input)

    def restore_serializer(self) -> TypeSerializer[Any]:
        return self.create_outer_serializer_with_nested_serializers(
            [_internal_serializer(s) for s in self.nested_snapshots])

    def write_outer_snapshot(self, out: DataOutputSerializer) -> None:
        out.write(self.data_type)
        out.write_boolean(self.is_internal_input)

    def read_outer_snapshot(self, outer_version: int, src: DataInputDeserializer) -> None:
        start = src.position
        what = f"ExternalSerializerSnapshot data type at offset {start}"
        node = read_stream(src, flink_policy, what)
        if not isinstance(node, JObject) or node.desc.name not in _DATA_TYPES:
            found = getattr(getattr(node, "desc", None), "name", type(node).__name__)
            raise SnapshotError(f"{what}: expected an AtomicDataType or a CollectionDataType, found {found} "
                                f"(statemorph reads the data views of atomic types and of arrays of them)")
        if not isinstance(node.values.get("conversionClass"), JClass):
            raise SnapshotError(f"{what}: the conversion class is not a class literal")
        self.logical_type = logical_type_from_tree(node.values.get("logicalType"), what)
        data, _, _ = src.window()
        self.data_type = data[start:src.position]
        self.is_internal_input = src.read_boolean()

    def resolve_outer_schema_compatibility(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        assert isinstance(new_serializer, ExternalSerializer)
        if (new_serializer.data_type, new_serializer.is_internal_input) != (self.data_type, self.is_internal_input):
            return SchemaCompatibility.incompatible(
                f"the data type of a SQL data view changed from {self.logical_type} to {new_serializer.logical_type}")
        return SchemaCompatibility.compatible_as_is()

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        """The same data type and internal serializer, or incompatible: the planner derives a data
        view's type from the query, and Flink compares these snapshots as composites (the nested
        internal snapshot of a table field type resolves only inside a row, so it is compared here)."""
        if not isinstance(new_serializer, ExternalSerializer):
            return SchemaCompatibility.incompatible(
                f"serializer changed from ExternalSerializer to {type(new_serializer).__name__}")
        outer = self.resolve_outer_schema_compatibility(new_serializer)
        if outer.is_incompatible():
            return outer
        if new_serializer.inner != _internal_serializer(self.nested_snapshots[0]):
            return SchemaCompatibility.incompatible(
                f"the internal serializer of a SQL data view of {self.logical_type} changed to "
                f"{type(new_serializer.inner).__name__}")
        return SchemaCompatibility.compatible_as_is()


__all__ = ["ArrayDataSerializer", "ExternalSerializer", "ExternalSerializerSnapshot", "StringDataSerializer"]
