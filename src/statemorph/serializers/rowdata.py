"""Flink's ``RowDataSerializer``: Table/SQL rows in BinaryRowData layout, and its snapshot.

Bytes: ``i32 BE sizeInBytes ‖ BinaryRowData`` exactly as Flink 2.3 writes a ``GenericRowData``
through ``RowDataSerializer.toBinaryRow`` (layout in :mod:`._binary_codec`).

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

The snapshot is statemorph's own (``statemorph.RowDataSerializerSnapshot`` v1): Flink's
``RowDataSerializerSnapshot`` stores its LogicalTypes with Java object serialization, which we
do not read; its identifier is registered to a class that says so clearly.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..compat import SchemaCompatibility
from ..errors import (
    IncompatibleSchemaError,
    MalformedDataError,
    SnapshotError,
    TypeParseError,
    UnsupportedVersionError,
)
from ..io import DataInputDeserializer, DataOutputSerializer
from ..row import Row
from ..snapshot import TypeSerializerSnapshot, register_snapshot
from ..types import RowField, RowType, parse_type
from ._binary_codec import RowCodec, _Ctx
from .base import TypeSerializer


def _as_row_type(row_type: RowType | str) -> RowType:
    t = parse_type(row_type) if isinstance(row_type, str) else row_type
    if not isinstance(t, RowType):
        raise TypeError(f"RowDataSerializer needs a ROW type, got {t!r}")
    return t


class RowDataSerializer(TypeSerializer[Row]):
    """Flink 2.3's ``RowDataSerializer`` for one row type (a RowType or a Flink SQL type string)."""

    def __init__(self, row_type: RowType | str) -> None:
        self.row_type = _as_row_type(row_type)
        self._codec = RowCodec(self.row_type)

    @property
    def arity(self) -> int:
        return self._codec.arity

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
        return RowDataSerializerSnapshot(self.row_type)


_MAX_FIELDS = 1 << 16


@register_snapshot()
class RowDataSerializerSnapshot(TypeSerializerSnapshot):
    """statemorph's snapshot of a :class:`RowDataSerializer`.

    Content (version 1, big-endian ``DataOutput`` primitives)::

        i32 n
        n × ( LONGUTF(name) ‖ LONGUTF(type) ‖ bool hasDescription ‖ [LONGUTF(description)] )

    where ``type`` is the field's Flink SQL type string (``as_serializable_string``, which carries
    nullability and the nested rows' names and comments) and ``LONGUTF`` is ``i32 byteLength ‖
    modified UTF-8`` (``writeUTF`` would cap big nested types at 64 KiB). Field names, order,
    types, nullability and comments are all kept, which is what name-based evolution needs.

    Compatibility (``resolve_schema_compatibility(new)``) is decided by
    :func:`statemorph.migration.plan_row_migration`; see that module for the rules.
    """

    IDENTIFIER: ClassVar[str] = "statemorph.RowDataSerializerSnapshot"
    VERSION: ClassVar[int] = 1
    MIN_READ_VERSION: ClassVar[int] = 1

    def __init__(self, row_type: RowType) -> None:
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
                ftype = parse_type(text)
            except TypeParseError as e:
                raise SnapshotError(f"RowData snapshot field #{i} ({name!r}) at offset {tpos}: "
                                    f"unreadable type: {e}") from None
            description = src.read_long_utf() if src.read_boolean() else None
            if not name or name in names:
                raise SnapshotError(f"RowData snapshot field #{i} at offset {fpos}: "
                                    f"{'empty' if not name else 'duplicate'} field name {name!r}")
            names.add(name)
            fields.append(RowField(name, ftype, description))
        return cls(RowType(tuple(fields)))

    def restore_serializer(self) -> RowDataSerializer:
        return RowDataSerializer(self.row_type)

    def resolve_schema_compatibility(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        from ..migration import plan_row_migration

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
        from ..migration import migrate_row_value, plan_row_migration

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
        from ..migration import plan_row_migration, remap_binary_row

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
        return f"RowDataSerializerSnapshot({str(self.row_type)!r})"


@register_snapshot("org.apache.flink.table.runtime.typeutils.BaseRowSerializer$BaseRowSerializerSnapshot")
class FlinkRowDataSerializerSnapshot(TypeSerializerSnapshot):
    """Flink's own ``RowDataSerializer$RowDataSerializerSnapshot`` identifier.

    Registered so that a Flink-written snapshot gives a clear error instead of "unknown
    identifier": its content is Java object serialization of the LogicalTypes (and, for arrays
    and maps, of serializer objects), which statemorph does not read. Reading it always raises
    :class:`UnsupportedVersionError`.
    """

    IDENTIFIER: ClassVar[str] = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
    VERSION: ClassVar[int] = 1 << 30
    MIN_READ_VERSION: ClassVar[int] = -(1 << 31)

    MESSAGE: ClassVar[str] = (
        "Flink's RowDataSerializerSnapshot (version {version}) stores its row type with Java object "
        "serialization, which statemorph cannot read; re-create the state with statemorph's "
        "RowDataSerializer (snapshot 'statemorph.RowDataSerializerSnapshot') or supply the row type"
    )

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        raise SnapshotError("statemorph does not write Flink's Java-serialized RowDataSerializerSnapshot")

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot:
        raise UnsupportedVersionError(cls.MESSAGE.format(version=read_version))

    def restore_serializer(self) -> TypeSerializer[Any]:
        raise SnapshotError(self.MESSAGE.format(version="?"))

    def resolve_schema_compatibility(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        return SchemaCompatibility.incompatible(self.MESSAGE.format(version="?"))


__all__ = ["FlinkRowDataSerializerSnapshot", "RowDataSerializer", "RowDataSerializerSnapshot"]
