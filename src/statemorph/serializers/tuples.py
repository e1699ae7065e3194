"""Positional structs of the DataStream API: Flink's ``TupleSerializer`` (Tuple1..Tuple25) and the
flink-core ``RowSerializer`` (``org.apache.flink.types.Row``).

Both are composites: their snapshots are Flink's ``CompositeTypeSerializerSnapshot`` format with the
field serializers as nested snapshots, so the bytes equal Flink's. Fields are matched by position
only (Flink stores no field names in either snapshot), which is why an arity change is
incompatible rather than a migration.

Formats (docs/formats.md §2.8, §2.9):

* Tuple: the fields back to back, no header, no null mask. A null field is handed to its
  serializer (String and Nullable write it); one that cannot write null makes Flink throw a
  ``NullFieldException``, here a :class:`SerializationError` naming the field.
* Row: a null mask packed MSB-first (``ceil(L/8)`` bytes), then the non-null fields. With
  ``supports_row_kind`` (the default since Flink 1.11) the mask starts with the two bits of the
  ``RowKind`` byte, so ``L = 2 + arity``; legacy serializers (restored from pre-1.11 snapshots)
  have ``L = arity`` and read every row as INSERT.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, cast

from ..errors import MalformedDataError, SerializationError, StatemorphError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..row import Row, RowKind, row_kind_of
from ..types import LogicalType, RowType
from ..typeutils import (
    BulkKernel,
    CompositeTypeSerializerSnapshot,
    SchemaCompatibility,
    TypeSerializer,
    register_snapshot,
)

MAX_TUPLE_ARITY = 25
"""Flink ships ``Tuple1`` .. ``Tuple25``; a longer tuple has no default Java class."""


# -- field paths in error messages ------------------------------------------------------------

def add_field_context(err: StatemorphError, label: str) -> StatemorphError:
    """Prefix the field path of an error raised while reading or writing a nested field.

    Nested structs call this on the way out, so the final message ends with the full path from
    the outermost struct (``[field path: f1.address.zip]``) while keeping the error's class and
    attributes (offsets of a :class:`TruncatedDataError` stay intact).
    """
    path = getattr(err, "field_path", None)
    base = getattr(err, "base_message", None)
    if base is None:
        base = str(err.args[0]) if err.args else type(err).__name__
    new_path = label if path is None else f"{label}.{path}"
    err.field_path = new_path  # type: ignore[attr-defined]
    err.base_message = base  # type: ignore[attr-defined]
    err.args = (f"{base} [field path: {new_path}]",)
    return err


# -- Tuple -----------------------------------------------------------------------------------

class TupleSerializer(TypeSerializer[tuple]):  # type: ignore[type-arg]
    """Flink's ``TupleSerializer``: a fixed number of fields, written back to back.

    ``tuple_class_name`` is the Java class recorded in the snapshot (``Tuple<n>`` by default).
    Values are Python tuples (lists are accepted on write).
    """

    def __init__(self, field_serializers: Sequence[TypeSerializer[Any]], tuple_class_name: str | None = None) -> None:
        fields = tuple(field_serializers)
        if not fields:
            raise ValueError("a TupleSerializer needs at least one field (Flink's Tuple0 has its own serializer)")
        for i, s in enumerate(fields):
            if not isinstance(s, TypeSerializer):
                raise TypeError(f"field serializer f{i} is not a TypeSerializer: {s!r}")
        if tuple_class_name is None:
            if len(fields) > MAX_TUPLE_ARITY:
                raise ValueError(
                    f"Flink tuples have at most {MAX_TUPLE_ARITY} fields, got {len(fields)}; "
                    f"pass tuple_class_name for a custom Tuple subclass"
                )
            tuple_class_name = f"org.apache.flink.api.java.tuple.Tuple{len(fields)}"
        self.field_serializers: tuple[TypeSerializer[Any], ...] = fields
        self.tuple_class_name: str = tuple_class_name
        lengths = [s.get_length() for s in fields]
        self._length = sum(lengths) if all(n > 0 for n in lengths) else -1

    @property
    def arity(self) -> int:
        return len(self.field_serializers)

    def get_length(self) -> int:
        """Fixed when every field is fixed-length (Flink's ``TupleSerializerBase``)."""
        return self._length

    def serialize(self, value: tuple, out: DataOutputSerializer) -> None:  # type: ignore[type-arg]
        if value is None:
            raise SerializationError(f"{self.tuple_class_name}: a tuple value cannot be null")
        if not isinstance(value, (tuple, list)):
            raise SerializationError(
                f"{self.tuple_class_name}: expected a tuple of {self.arity} fields, got {type(value).__name__}"
            )
        if len(value) != self.arity:
            raise SerializationError(
                f"{self.tuple_class_name}: tuple arity {len(value)} does not match the serializer's {self.arity}"
            )
        for i, (ser, v) in enumerate(zip(self.field_serializers, value, strict=True)):
            # Like Flink, a null goes to the field serializer: String and Nullable write it, the
            # others refuse, which Flink reports as a NullFieldException naming the field.
            try:
                ser.serialize(v, out)
            except StatemorphError as e:
                if v is None:
                    raise SerializationError(
                        f"{self.tuple_class_name}: field f{i} is null and {type(ser).__name__} cannot write null "
                        f"(wrap the field serializer in NullableSerializer)"
                    ) from e
                raise add_field_context(e, f"f{i}") from None

    def deserialize(self, src: DataInputDeserializer) -> tuple:  # type: ignore[type-arg]
        values = []
        for i, ser in enumerate(self.field_serializers):
            try:
                values.append(ser.deserialize(src))
            except StatemorphError as e:
                raise add_field_context(e, f"f{i}") from None
        return tuple(values)

    def copy_bytes(self, src: DataInputDeserializer, out: DataOutputSerializer) -> None:
        for i, ser in enumerate(self.field_serializers):
            try:
                ser.copy_bytes(src, out)
            except StatemorphError as e:
                raise add_field_context(e, f"f{i}") from None

    def duplicate(self) -> TupleSerializer:
        dup = tuple(s.duplicate() for s in self.field_serializers)
        if all(a is b for a, b in zip(dup, self.field_serializers, strict=True)):
            return self
        return TupleSerializer(dup, self.tuple_class_name)

    SCHEMA_FAMILY = "tuple"
    SCHEMA_TYPE_ROOT = "ROW"

    @classmethod
    def for_sql_type(cls, t: LogicalType, nested: Callable[[LogicalType, str, Any], TypeSerializer[Any]],
                     like: TypeSerializer[Any] | None, where: str) -> TypeSerializer[Any]:
        """The tuple of the ROW ``t``'s fields ``f0, f1, ...``: each follows what ``like`` (the
        recorded tuple, if any) has in its place, and the tuple keeps ``like``'s class while the
        arity stays."""
        row = cast(RowType, t)
        prior = like.field_serializers if isinstance(like, TupleSerializer) else ()
        fields = [nested(f.type, f"{where}.{f.name}", prior[i] if i < len(prior) else None)
                  for i, f in enumerate(row.fields)]
        kept = like.tuple_class_name if isinstance(like, TupleSerializer) and len(prior) == len(fields) else None
        return cls(fields, kept)

    def describe_type(self) -> str:
        """Fields by position: ``f0``, ``f1``, ..."""
        return "ROW<" + ", ".join(f"`f{i}` {s.describe_type()}" for i, s in enumerate(self.field_serializers)) + ">"

    def snapshot_configuration(self) -> TupleSerializerSnapshot:
        return TupleSerializerSnapshot(self)

    def _config(self) -> tuple[Any, ...]:
        return (self.field_serializers, self.tuple_class_name)


class FieldSerializersSnapshot(CompositeTypeSerializerSnapshot):
    """A composite whose nested serializers are the outer serializer's ``field_serializers``,
    matched by position (Flink's Tuple and flink-core Row snapshots): ``f0``, ``f1``, ... in
    messages."""

    def get_nested_serializers(self, outer: TypeSerializer[Any]) -> Sequence[TypeSerializer[Any]]:
        assert isinstance(outer, (TupleSerializer, RowSerializer))
        return outer.field_serializers

    def nested_names(self) -> list[str]:
        return [f"f{i}" for i in range(len(self.nested_snapshots))]


@register_snapshot()
class TupleSerializerSnapshot(FieldSerializersSnapshot):
    """Composite snapshot, outer version 2 holding ``UTF(tuple class)``. Flink never compares the
    tuple class on restore (the default outer check), so neither do we: only the arity and the
    field results count."""

    IDENTIFIER = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"
    OUTER_VERSION = 2
    MIN_OUTER_VERSION = 1
    SERIALIZER_CLASS = TupleSerializer
    NESTED_ARITY = (1, MAX_TUPLE_ARITY)

    tuple_class_name: str = ""

    def create_outer_serializer_with_nested_serializers(
        self, nested: Sequence[TypeSerializer[Any]]
    ) -> TypeSerializer[Any]:
        return TupleSerializer(nested, self.tuple_class_name)

    def set_outer_from_serializer(self, serializer: TypeSerializer[Any]) -> None:
        assert isinstance(serializer, TupleSerializer)
        self.tuple_class_name = serializer.tuple_class_name

    def write_outer_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_utf(self.tuple_class_name)

    def read_outer_snapshot(self, outer_version: int, src: DataInputDeserializer) -> None:
        self.tuple_class_name = src.read_utf()

    def migrate_nested_values(
        self, value: Any, new_serializer: TypeSerializer[Any], migrate: Callable[[int, Any], Any]
    ) -> Any:
        return tuple(migrate(i, v) for i, v in enumerate(value))


# -- Row -------------------------------------------------------------------------------------

def _write_mask(out: DataOutputSerializer, bits: Sequence[bool]) -> None:
    """Flink's ``MaskUtils.writeMask``: booleans packed MSB-first, last byte zero-padded."""
    n = len(bits)
    acc = 0
    for b in bits:
        acc = (acc << 1) | (1 if b else 0)
    nbytes = (n + 7) >> 3
    acc <<= nbytes * 8 - n
    out.write(acc.to_bytes(nbytes, "big"))


class RowSerializer(TypeSerializer[tuple[Any, ...]]):
    """Flink's flink-core ``RowSerializer`` (``RowTypeInfo.createSerializer``).

    Every field is nullable. Values are :class:`~statemorph.row.Row` on read; on write a ``Row``,
    a plain tuple or list (INSERT) is accepted, and a dict keyed by field name when
    ``field_names`` are known (Flink's name-based rows; missing names are null, unknown names are
    an error). ``field_names`` never reach the bytes or the snapshot: Flink stores no names, they
    only label messages and map dicts to positions.
    """

    def __init__(
        self,
        field_serializers: Sequence[TypeSerializer[Any]],
        supports_row_kind: bool = True,
        field_names: Sequence[str] | None = None,
    ) -> None:
        fields = tuple(field_serializers)
        for i, s in enumerate(fields):
            if not isinstance(s, TypeSerializer):
                raise TypeError(f"field serializer {i} is not a TypeSerializer: {s!r}")
        names: tuple[str, ...] | None = None
        if field_names is not None:
            names = tuple(field_names)
            if len(names) != len(fields):
                raise ValueError(f"{len(names)} field names for {len(fields)} field serializers")
            if len(set(names)) != len(names):
                raise ValueError(f"duplicate field names in {names!r}")
        self.field_serializers: tuple[TypeSerializer[Any], ...] = fields
        self.supports_row_kind: bool = bool(supports_row_kind)
        self.field_names: tuple[str, ...] | None = names
        self._position_by_name = {n: i for i, n in enumerate(names)} if names is not None else None
        self._offset = 2 if self.supports_row_kind else 0
        self._mask_len = (len(fields) + self._offset + 7) >> 3

    @property
    def arity(self) -> int:
        return len(self.field_serializers)

    def label(self, i: int) -> str:
        """How field ``i`` is named in messages: its name when known, else ``f<i>``."""
        return self.field_names[i] if self.field_names is not None else f"f{i}"

    def _fields_of(self, value: Any) -> tuple[Sequence[Any], RowKind]:
        if isinstance(value, Row):
            return value, value.kind
        if isinstance(value, (tuple, list)):
            return value, RowKind.INSERT
        if isinstance(value, Mapping):
            if self._position_by_name is None:
                raise SerializationError(
                    "RowSerializer: a name-based row (dict) needs a serializer with field_names"
                )
            fields: list[Any] = [None] * self.arity
            for name, v in value.items():
                pos = self._position_by_name.get(name)
                if pos is None:
                    raise SerializationError(
                        f"RowSerializer: unknown field name {name!r}; the row has {list(self.field_names or ())}"
                    )
                fields[pos] = v
            return fields, RowKind.INSERT
        raise SerializationError(f"RowSerializer: expected a Row, tuple or dict, got {type(value).__name__}")

    def serialize(self, value: tuple[Any, ...] | dict[str, Any], out: DataOutputSerializer) -> None:
        if value is None:
            raise SerializationError("RowSerializer: a row value cannot be null (only its fields can)")
        fields, kind = self._fields_of(value)
        if len(fields) != self.arity:
            raise SerializationError(
                f"RowSerializer: row arity {len(fields)} does not match the serializer's {self.arity}"
            )
        bits = [v is None for v in fields]
        if self.supports_row_kind:
            k = int(kind)
            bits = [bool(k & 1), bool(k & 2), *bits]
        _write_mask(out, bits)
        for i, (ser, v) in enumerate(zip(self.field_serializers, fields, strict=True)):
            if v is not None:
                try:
                    ser.serialize(v, out)
                except StatemorphError as e:
                    raise add_field_context(e, self.label(i)) from None

    def _read_mask(self, src: DataInputDeserializer) -> tuple[bytes, int, int]:
        """Read the mask; returns (its bytes, the mask as an int MSB-first over L bits, kind)."""
        start = src.position
        raw = src.read_fully(self._mask_len, "row null mask")
        n = self.arity + self._offset
        acc = int.from_bytes(raw, "big")
        pad = self._mask_len * 8 - n
        if acc & ((1 << pad) - 1):
            raise MalformedDataError(
                f"RowSerializer: corrupt row null mask at offset {start}: padding bits are set "
                f"(mask {raw.hex()} for {self.arity} fields)"
            )
        acc >>= pad
        kind = 0
        if self.supports_row_kind:
            kind = ((acc >> (n - 1)) & 1) | (((acc >> (n - 2)) & 1) << 1)
        return raw, acc, kind

    def deserialize(self, src: DataInputDeserializer) -> Row:
        _, acc, kind = self._read_mask(src)
        values: list[Any] = []
        top = self.arity - 1
        for i, ser in enumerate(self.field_serializers):
            if (acc >> (top - i)) & 1:
                values.append(None)
                continue
            try:
                values.append(ser.deserialize(src))
            except StatemorphError as e:
                raise add_field_context(e, self.label(i)) from None
        return Row(values, RowKind(kind))

    def copy_bytes(self, src: DataInputDeserializer, out: DataOutputSerializer) -> None:
        raw, acc, _ = self._read_mask(src)
        out.write(raw)
        top = self.arity - 1
        for i, ser in enumerate(self.field_serializers):
            if not (acc >> (top - i)) & 1:
                try:
                    ser.copy_bytes(src, out)
                except StatemorphError as e:
                    raise add_field_context(e, self.label(i)) from None

    def duplicate(self) -> RowSerializer:
        dup = tuple(s.duplicate() for s in self.field_serializers)
        if all(a is b for a, b in zip(dup, self.field_serializers, strict=True)):
            return self
        return RowSerializer(dup, self.supports_row_kind, self.field_names)

    SCHEMA_FAMILY = "row"
    SCHEMA_TYPE_ROOT = "ROW"
    DATASTREAM_OF = ("ROW",)
    BULK = BulkKernel("corerow")

    @classmethod
    def for_sql_type(cls, t: LogicalType, nested: Callable[[LogicalType, str, Any], TypeSerializer[Any]],
                     like: TypeSerializer[Any] | None, where: str) -> TypeSerializer[Any]:
        row = cast(RowType, t)
        prior = list(like.field_serializers) if isinstance(like, RowSerializer) else []
        fields = [nested(f.type, f"{where}.{f.name}", prior[i] if i < len(prior) else None)
                  for i, f in enumerate(row.fields)]
        return cls(fields, field_names=row.field_names)

    def describe_type(self) -> str:
        names = self.field_names or [f"f{i}" for i in range(len(self.field_serializers))]
        return "ROW<" + ", ".join(f"`{n}` {s.describe_type()}"
                                  for n, s in zip(names, self.field_serializers, strict=False)) + ">"

    def snapshot_configuration(self) -> RowSerializerSnapshot:
        return RowSerializerSnapshot(self)

    def _config(self) -> tuple[Any, ...]:
        # Flink's equals ignores field names: they never reach bytes or snapshots.
        return (self.field_serializers, self.supports_row_kind)

    def __repr__(self) -> str:
        names = f", field_names={list(self.field_names)!r}" if self.field_names is not None else ""
        return (
            f"RowSerializer({list(self.field_serializers)!r}, supports_row_kind={self.supports_row_kind}{names})"
        )


@register_snapshot()
class RowSerializerSnapshot(FieldSerializersSnapshot):
    """Composite snapshot, outer version 4 holding ``bool supportsRowKind``.

    Older outer versions carry no flag: v1/v2 (Flink <= 1.10) had no kind bits in the mask, v3
    always had them. A changed flag needs a rewrite of every row (the mask length changes), so it
    is AFTER_MIGRATION; an arity change is INCOMPATIBLE because fields match by position only.
    """

    BYTE_REMAP: ClassVar[tuple[str, type] | None] = ("core", RowSerializer)

    IDENTIFIER = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
    OUTER_VERSION = 4
    MIN_OUTER_VERSION = 1
    SERIALIZER_CLASS = RowSerializer

    supports_row_kind: bool = True
    field_names: tuple[str, ...] | None = None

    def create_outer_serializer_with_nested_serializers(
        self, nested: Sequence[TypeSerializer[Any]]
    ) -> TypeSerializer[Any]:
        names = self.field_names if self.field_names is not None and len(self.field_names) == len(nested) else None
        return RowSerializer(nested, self.supports_row_kind, names)

    def set_outer_from_serializer(self, serializer: TypeSerializer[Any]) -> None:
        assert isinstance(serializer, RowSerializer)
        self.supports_row_kind = serializer.supports_row_kind
        self.field_names = serializer.field_names

    def write_outer_snapshot(self, out: DataOutputSerializer) -> None:
        out.write_boolean(self.supports_row_kind)

    def read_outer_snapshot(self, outer_version: int, src: DataInputDeserializer) -> None:
        self.field_names = None
        if outer_version < 3:
            self.supports_row_kind = False
        elif outer_version == 3:
            self.supports_row_kind = True
        else:
            self.supports_row_kind = src.read_boolean()

    def resolve_outer_schema_compatibility(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        assert isinstance(new_serializer, RowSerializer)
        if new_serializer.supports_row_kind != self.supports_row_kind:
            return SchemaCompatibility.compatible_after_migration(
                f"row kind support changed from {str(self.supports_row_kind).lower()} to "
                f"{str(new_serializer.supports_row_kind).lower()}"
            )
        return SchemaCompatibility.compatible_as_is()

    def nested_names(self) -> list[str]:
        if self.field_names is not None and len(self.field_names) == len(self.nested_snapshots):
            return list(self.field_names)
        return super().nested_names()

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        # Names are not stored; when the snapshot came from bytes, label fields with the new
        # serializer's names (fields match by position, so position i has the new name i).
        if (
            self.field_names is None
            and isinstance(new_serializer, RowSerializer)
            and new_serializer.field_names is not None
            and new_serializer.arity == len(self.nested_snapshots)
        ):
            labelled = self._copy()
            labelled.field_names = new_serializer.field_names
            return CompositeTypeSerializerSnapshot.resolve_new_serializer(labelled, new_serializer)
        return super().resolve_new_serializer(new_serializer)

    def _copy(self) -> RowSerializerSnapshot:
        dup = RowSerializerSnapshot.__new__(RowSerializerSnapshot)
        dup.nested_snapshots = list(self.nested_snapshots)
        dup.supports_row_kind = self.supports_row_kind
        dup.field_names = self.field_names
        return dup

    def migrate_nested_values(
        self, value: Any, new_serializer: TypeSerializer[Any], migrate: Callable[[int, Any], Any]
    ) -> Any:
        return Row((None if v is None else migrate(i, v) for i, v in enumerate(value)), row_kind_of(value))


__all__ = [
    "RowSerializer",
    "RowSerializerSnapshot",
    "TupleSerializer",
    "TupleSerializerSnapshot",
]
