"""Flink's ``RowDataSerializer``: Table/SQL rows in BinaryRowData layout, and its snapshot.

Bytes: ``i32 BE sizeInBytes ‖ BinaryRowData`` exactly as Flink 2.3 writes a ``GenericRowData``
through ``RowDataSerializer.toBinaryRow`` (layout in :mod:`statemorph.binary_layout`).

Values (Python side):

- a row is a :class:`statemorph.row.Row` on read (a tuple carrying ``kind``); plain tuples and
  lists are accepted on write (INSERT rows). Nested rows likewise.
- BOOLEAN → bool; TINYINT..BIGINT → int; FLOAT/DOUBLE → float; CHAR/VARCHAR → str;
  BINARY/VARBINARY → bytes; DATE → datetime.date (an int of days is accepted);
  TIME → datetime.time (int millis of day accepted; Flink keeps millis only);
- DECIMAL(p, s) → decimal.Decimal with exactly ``s`` fraction digits. Writing rounds HALF_UP to
  ``s`` (Flink's ``DecimalData.fromBigDecimal``); a value with more than ``p`` digits after
  rounding raises :class:`SerializationError`. Flink would silently store null there in some
  paths; we refuse because silent data loss in state is worse than a loud error.
- TIMESTAMP(p) → naive datetime; TIMESTAMP_LTZ(p) → aware UTC datetime. When a datetime cannot
  hold the stored value exactly (precision 7..9, or stored nanoseconds that are not whole
  microseconds, or outside years 1..9999) the value is a :class:`statemorph.types.Timestamp`
  instead, so reading and writing back never loses bytes. ``Timestamp`` is accepted everywhere.
- ARRAY → list (tuples accepted); MAP → dict in byte order (a list of pairs is accepted);
  MULTISET → dict element → count. Keys that would be unhashable are frozen (list → tuple).
- None → null. None in a NOT NULL field is refused on write (Flink would write it anyway).

Two snapshots, one set of evolution rules (:class:`_RowTypeSnapshot`):

- ``snapshot_configuration()`` gives statemorph's own ``statemorph.RowDataSerializerSnapshot``
  (v1), which keeps every field name: statemorph's evolution matches fields by name, and Flink's
  snapshot does not store the top-level names, so a snapshot statemorph writes for its own
  savepoints keeps them;
- :class:`FlinkRowDataSerializerSnapshot` is Flink's ``RowDataSerializer$RowDataSerializerSnapshot``
  byte for byte (``FlinkRowDataSerializerSnapshot.of(serializer)`` or
  ``serializer.flink_snapshot_configuration()``), for Flink's own savepoints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .. import types
from ..binary_layout import RowCodec, _Ctx
from ..errors import (
    IncompatibleSchemaError,
    MalformedDataError,
    SnapshotError,
    TypeParseError,
)
from ..io import DataInputDeserializer, DataOutputSerializer
from ..javaser import write_logical_type_to
from ..javaser.logical import read_logical_type
from ..migration import migrate_row_value, plan_row_migration, remap_binary_row
from ..row import Row
from ..typeutils import (
    BulkKernel,
    SchemaCompatibility,
    SimpleTypeSerializerSnapshot,
    TypeSerializer,
    TypeSerializerSnapshot,
    read_nested_snapshots,
    register_snapshot,
    write_nested_snapshots,
)
from .arrays import BytePrimitiveArraySerializerSnapshot
from .primitives import (
    BooleanSerializerSnapshot,
    ByteSerializerSnapshot,
    DoubleSerializerSnapshot,
    FloatSerializerSnapshot,
    IntSerializerSnapshot,
    LongSerializerSnapshot,
    ShortSerializerSnapshot,
)
from .table_snapshots import (
    ArrayDataSerializerSnapshot,
    DecimalDataSerializerSnapshot,
    FieldSnapshot,
    MapDataSerializerSnapshot,
    RawValueDataSerializerSnapshot,
    StringDataSerializerSnapshot,
    TimestampDataSerializerSnapshot,
)


def _as_row_type(row_type: types.LogicalType | str) -> types.RowType:
    t = types.parse_type(row_type) if isinstance(row_type, str) else row_type
    if not isinstance(t, types.RowType):
        raise TypeError(f"RowDataSerializer needs a ROW type, got {t!r}")
    return t


class RowDataSerializer(TypeSerializer[tuple[Any, ...]]):
    """Flink 2.3's ``RowDataSerializer`` for one row type (a RowType or a Flink SQL type string)."""

    def __init__(self, row_type: types.LogicalType | str) -> None:
        self.row_type = _as_row_type(row_type)
        self._codec = RowCodec(self.row_type)

    @property
    def arity(self) -> int:
        return self._codec.arity

    SCHEMA_FAMILY = "rowdata"
    KEY_HASH = "binary_row"  # BinaryRowData.hashCode: its bytes
    SCHEMA_TYPE_ROOT = "ROW"
    SCHEMA_IN_COLLECTIONS = True  # a SQL operator's rows in a list or map (Top-N's ARRAY<ROW>)
    BULK = BulkKernel("rowdata")

    @classmethod
    def for_sql_type(cls, t: types.LogicalType, nested: Callable[[types.LogicalType, str, Any], TypeSerializer[Any]],
                     like: TypeSerializer[Any] | None, where: str) -> TypeSerializer[Any]:
        """The RowData of the ROW ``t`` as it is: its fields are SQL types, no nested serializers."""
        return cls(t)

    def describe_type(self) -> str:
        return str(self.row_type)

    def _config(self) -> tuple[Any, ...]:
        # the row's own nullability does not reach the bytes (a top-level row is never null)
        return (self.row_type.copy(nullable=True),)

    def __repr__(self) -> str:
        return f"RowDataSerializer({str(self.row_type)!r})"

    # -- BinaryRowData without the length prefix (used by kernels and migration) ---------------
    def to_binary_row(self, value: Any) -> bytes:
        """The BinaryRowData bytes of ``value`` (no length prefix)."""
        return bytes(self._codec.encode(value))

    # -- TypeSerializer -------------------------------------------------------------------------
    def serialize(self, value: Row | tuple[Any, ...], out: DataOutputSerializer) -> None:
        body = self._codec.encode(value)
        out.write_int(len(body))
        out.write(body)

    def deserialize(self, src: DataInputDeserializer) -> Row:
        start = src.position
        n = src.read_int()
        if n < self._codec.fixed:
            raise MalformedDataError(
                f"RowData length {n} at offset {start} is smaller than the fixed part of the row "
                f"({self._codec.fixed} bytes for {self.arity} fields)"
            )
        src.check_length(n, "RowData bytes")
        data = src.read_fully(n, "RowData bytes")
        return self._codec.decode(_Ctx(data, start + 4), 0, n)

    def snapshot_configuration(self) -> RowDataSerializerSnapshot:
        """statemorph's own snapshot, which keeps the field names (see the module docstring)."""
        return RowDataSerializerSnapshot(self.row_type)

    def flink_snapshot_configuration(self) -> FlinkRowDataSerializerSnapshot:
        """What Flink's ``RowDataSerializer.snapshotConfiguration()`` writes for this row type."""
        return FlinkRowDataSerializerSnapshot(self.row_type)


_MAX_FIELDS = 1 << 16


class _RowTypeSnapshot(TypeSerializerSnapshot):
    """What every RowData snapshot does once it knows the old row type: restore, resolve and
    migrate with statemorph's RowData evolution rules (:func:`statemorph.migration.plan_row_migration`).
    The two persisted forms (statemorph's, Flink's) differ only in how they store the type."""

    row_type: types.RowType

    def restore_serializer(self) -> RowDataSerializer:
        return RowDataSerializer(self.row_type)

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        if not isinstance(new_serializer, RowDataSerializer):
            return SchemaCompatibility.incompatible(
                f"serializer changed from RowDataSerializer to {type(new_serializer).__name__}"
            )
        try:
            plan = plan_row_migration(self.row_type, new_serializer.row_type)
        except IncompatibleSchemaError as e:
            return SchemaCompatibility.incompatible(e.reason)
        if plan.is_identity:
            return SchemaCompatibility.compatible_as_is()
        return SchemaCompatibility.compatible_after_migration(plan.describe(), plan=plan)

    def migrate_value(self, value: Any, new_serializer: TypeSerializer[Any]) -> Any:
        assert isinstance(new_serializer, RowDataSerializer)
        return migrate_row_value(plan_row_migration(self.row_type, new_serializer.row_type), value)

    def migrate_state(
        self,
        prior: TypeSerializer[Any],
        new: TypeSerializer[Any],
        src: DataInputDeserializer,
        out: DataOutputSerializer,
    ) -> None:
        """Bytes to bytes: the old BinaryRowData is validated (one full read, for typed errors
        with field paths), then remapped slot by slot with the plan, so the output is built from
        the old bytes themselves: float NaN payloads, nanoseconds and nested structures survive
        untouched, and new fields are null."""
        if not isinstance(new, RowDataSerializer):
            super().migrate_state(prior, new, src, out)
            return
        plan = plan_row_migration(self.row_type, new.row_type)
        start = src.position
        n = src.read_int()
        src.check_length(n, "RowData bytes")
        data = src.read_fully(n, "RowData bytes")
        body = remap_binary_row(plan, data, origin=start + 4)
        out.write_int(len(body))
        out.write(body)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.row_type)!r})"


@register_snapshot()
class RowDataSerializerSnapshot(_RowTypeSnapshot):
    """statemorph's snapshot of a :class:`RowDataSerializer` (used by the Parquet savepoint form).

    Content (version 1, big-endian ``DataOutput`` primitives)::

        i32 n
        n × ( LONGUTF(name) ‖ LONGUTF(type) ‖ bool hasDescription ‖ [LONGUTF(description)] )

    where ``type`` is the field's Flink SQL type string (``as_serializable_string``, which carries
    nullability and the nested rows' names and comments) and ``LONGUTF`` is ``i32 byteLength ‖
    modified UTF-8`` (``writeUTF`` would cap big nested types at 64 KiB). Field names, order,
    types, nullability and comments are all kept, which is what name-based evolution needs
    (Flink's own snapshot, :class:`FlinkRowDataSerializerSnapshot`, drops the top-level names).

    Compatibility (``resolve_schema_compatibility(new)``) is decided by
    :func:`statemorph.migration.plan_row_migration`; see that module for the rules.
    """

    BYTE_REMAP: ClassVar[tuple[str, type] | None] = ("rowdata", RowDataSerializer)
    """The byte-remap kernel that migrates its values, and to which serializer class."""

    IDENTIFIER: ClassVar[str] = "statemorph.RowDataSerializerSnapshot"
    VERSION: ClassVar[int] = 1
    MIN_READ_VERSION: ClassVar[int] = 1

    def __init__(self, row_type: types.RowType) -> None:
        self.row_type = row_type

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_int(self.row_type.arity)
        for f in self.row_type.fields:
            out.write_long_utf(f.name)
            out.write_long_utf(f.type.as_serializable_string())
            out.write_boolean(f.description is not None)
            if f.description is not None:
                out.write_long_utf(f.description)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> RowDataSerializerSnapshot:
        start = src.position
        # each field takes at least 9 bytes (two empty long UTFs and a boolean)
        n = src.check_length(src.read_int(), "RowData snapshot fields", unit=9)
        if n > _MAX_FIELDS:
            raise SnapshotError(f"RowData snapshot at offset {start} declares {n} fields (limit {_MAX_FIELDS})")
        fields = []
        names: set[str] = set()
        for i in range(n):
            fpos = src.position
            name = src.read_long_utf()
            tpos = src.position
            text = src.read_long_utf()
            try:
                ftype = types.parse_type(text)
            except TypeParseError as e:
                raise SnapshotError(f"RowData snapshot field #{i} ({name!r}) at offset {tpos}: "
                                    f"unreadable type: {e}") from None
            description = src.read_long_utf() if src.read_boolean() else None
            if not name or name in names:
                raise SnapshotError(f"RowData snapshot field #{i} at offset {fpos}: "
                                    f"{'empty' if not name else 'duplicate'} field name {name!r}")
            names.add(name)
            fields.append(types.RowField(name, ftype, description))
        return cls(types.RowType(tuple(fields)))


def generated_row_type(field_types: list[types.LogicalType] | tuple[types.LogicalType, ...]) -> types.RowType:
    """``RowType.of(types)``: the row Flink restores from its snapshot, fields ``f0, f1, ...``."""
    return types.RowType(tuple(types.RowField(f"f{i}", t) for i, t in enumerate(field_types)))


@register_snapshot()
class FlinkRowDataSerializerSnapshot(_RowTypeSnapshot):
    """Flink's own ``RowDataSerializer$RowDataSerializerSnapshot`` (version 3), byte for byte.

    Content::

        i32 n
        n × JAVASER(LogicalType of field i)          one complete Java serialization stream each
        i32 1333245 ‖ i32 1 ‖ i32 n ‖ VERSIONED(field serializer snapshot i)*

    The types are read by the whitelisting reader of :mod:`statemorph.javaser` and written by
    its writer (golden vectors from Flink 2.3 prove the bytes). The nested snapshots are
    ``InternalSerializers.create(type)``'s (:func:`field_serializer_snapshot`);
    read ones are checked against the types and written back as they were.

    Flink stores the field *types* only: the top-level field names are not in the bytes, so a
    snapshot that was read has Flink's generated names ``f0, f1, ...`` (nested rows keep their
    names, they are inside the types). Compatibility then uses statemorph's rules with the
    positional fallback of :mod:`statemorph.migration` at the top level (fields matched by
    position, extra new fields nullable) and names in nested rows. A snapshot built from a
    serializer (``FlinkRowDataSerializerSnapshot(row_type)``) keeps the real names.
    """

    BYTE_REMAP: ClassVar[tuple[str, type] | None] = ("rowdata", RowDataSerializer)  # the same row bytes

    IDENTIFIER: ClassVar[str] = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
    VERSION: ClassVar[int] = 3
    MIN_READ_VERSION: ClassVar[int] = 3

    def __init__(self, row_type: types.RowType, nested: list[TypeSerializerSnapshot] | None = None) -> None:
        self.row_type = row_type
        self.nested_snapshots = nested if nested is not None else [
            field_serializer_snapshot(t) for t in row_type.field_types
        ]

    @classmethod
    def of(cls, serializer: RowDataSerializer) -> FlinkRowDataSerializerSnapshot:
        """The snapshot Flink's ``RowDataSerializer.snapshotConfiguration()`` writes for the same type."""
        return cls(serializer.row_type)

    @property
    def field_types(self) -> list[types.LogicalType]:
        return self.row_type.field_types

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_int(self.row_type.arity)
        for t in self.row_type.field_types:
            write_logical_type_to(out, t)
        write_nested_snapshots(out, self.nested_snapshots)

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> FlinkRowDataSerializerSnapshot:
        start = src.position
        # each type is a Java serialization stream of well over 100 bytes; 4 is a safe floor
        n = src.check_length(src.read_int(), "Flink RowData snapshot field types", unit=4)
        if n > _MAX_FIELDS:
            raise SnapshotError(f"Flink RowData snapshot at offset {start} declares {n} fields (limit {_MAX_FIELDS})")
        field_types = [read_logical_type(src, f"Flink RowData snapshot field #{i} type") for i in range(n)]
        nested_at = src.position
        nested = read_nested_snapshots(src, "Flink RowDataSerializerSnapshot")
        if len(nested) != n:
            raise SnapshotError(f"Flink RowData snapshot at offset {nested_at} has {len(nested)} field serializer "
                                f"snapshots for {n} field types")
        for i, (t, snap) in enumerate(zip(field_types, nested, strict=True)):
            if not snapshot_describes(snap, t):
                raise SnapshotError(f"Flink RowData snapshot at offset {nested_at}: field #{i} of type {t} has a "
                                    f"{type(snap).__name__} ({snap.IDENTIFIER}) that does not describe it")
        return cls(generated_row_type(field_types), nested)


class _InternalSerializers(types.LogicalTypeVisitor[TypeSerializerSnapshot]):
    """Flink's ``InternalSerializers.create(t).snapshotConfiguration()``, per type."""

    def visit_other(self, t: types.LogicalType) -> TypeSerializerSnapshot:
        raise SnapshotError(f"no Flink field serializer snapshot for {t}")

    def visit_character_string(self, t: types.CharType | types.VarCharType) -> TypeSerializerSnapshot:
        return StringDataSerializerSnapshot()

    def visit_boolean(self, t: types.BooleanType) -> TypeSerializerSnapshot:
        return BooleanSerializerSnapshot()

    def visit_tinyint(self, t: types.TinyIntType) -> TypeSerializerSnapshot:
        return ByteSerializerSnapshot()

    def visit_smallint(self, t: types.SmallIntType) -> TypeSerializerSnapshot:
        return ShortSerializerSnapshot()

    def visit_int(self, t: types.IntType | types.DateType | types.TimeType) -> TypeSerializerSnapshot:
        return IntSerializerSnapshot()

    visit_date = visit_time = visit_int

    def visit_bigint(self, t: types.BigIntType) -> TypeSerializerSnapshot:
        return LongSerializerSnapshot()

    def visit_float(self, t: types.FloatType) -> TypeSerializerSnapshot:
        return FloatSerializerSnapshot()

    def visit_double(self, t: types.DoubleType) -> TypeSerializerSnapshot:
        return DoubleSerializerSnapshot()

    def visit_binary_string(self, t: types.BinaryType | types.VarBinaryType) -> TypeSerializerSnapshot:
        return BytePrimitiveArraySerializerSnapshot()

    def visit_decimal(self, t: types.DecimalType) -> TypeSerializerSnapshot:
        return DecimalDataSerializerSnapshot(t.precision, t.scale)

    def visit_any_timestamp(self, t: types.TimestampType | types.LocalZonedTimestampType) -> TypeSerializerSnapshot:
        return TimestampDataSerializerSnapshot(t.precision)

    def visit_array(self, t: types.ArrayType) -> TypeSerializerSnapshot:
        return ArrayDataSerializerSnapshot(t.element_type)

    def visit_map(self, t: types.MapType | types.MultisetType) -> TypeSerializerSnapshot:
        return MapDataSerializerSnapshot(*t.map_parts())

    visit_multiset = visit_map

    def visit_row(self, t: types.RowType) -> TypeSerializerSnapshot:
        return FlinkRowDataSerializerSnapshot(t)

    def visit_raw(self, t: types.RawType) -> TypeSerializerSnapshot:  # a SQL data view's placeholder
        return RawValueDataSerializerSnapshot()


_INTERNAL_SERIALIZERS = _InternalSerializers()


def field_serializer_snapshot(t: types.LogicalType) -> TypeSerializerSnapshot:
    """``InternalSerializers.create(t).snapshotConfiguration()``: the snapshot Flink nests for a
    field of type ``t``."""
    return t.accept(_INTERNAL_SERIALIZERS)


def snapshot_describes(snap: TypeSerializerSnapshot, t: types.LogicalType) -> bool:
    """Whether ``snap`` is the snapshot Flink nests for a field of type ``t``."""
    if isinstance(snap, FieldSnapshot):
        return snap.describes(t)
    if isinstance(snap, FlinkRowDataSerializerSnapshot):
        # Flink's nested snapshot stores the field types only (no names of its own)
        return isinstance(t, types.RowType) and snap.row_type.field_types == t.field_types
    if not isinstance(snap, SimpleTypeSerializerSnapshot):  # the others describe themselves, above
        return False
    try:
        return type(snap) is type(field_serializer_snapshot(t))
    except SnapshotError:
        return False


__all__ = [
    "FlinkRowDataSerializerSnapshot",
    "RowDataSerializer",
    "RowDataSerializerSnapshot",
    "field_serializer_snapshot",
    "generated_row_type",
    "snapshot_describes",
]
