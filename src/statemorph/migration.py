"""RowData schema evolution: decide once how an old row type maps onto a new one, then apply
that plan to values or straight to BinaryRowData bytes.

Why a separate plan object: compatibility checking and migration need the same field mapping,
and bulk migration runs it billions of times. :func:`plan_row_migration` computes it once per
(old, new) pair (cached) as a plain, immutable data structure that the native kernels compile
into flat op arrays. :func:`remap_binary_row` is the reference implementation of the plan (one
BinaryRowData, bytes to bytes) the kernels are tested against; :func:`migrate_row_value` runs the
same remap on a value's bytes, so values and bytes migrate by one piece of code.

Rules (old schema → new schema; fields are matched **by name**, case-sensitive):

========================================================  =========================================
change                                                    result
========================================================  =========================================
nothing, or only field comments                           AS_IS (identical bytes)
VARCHAR/CHAR/BINARY/VARBINARY length change               AS_IS (identical bytes, Flink keeps no
                                                          length in the data)
TIME(p) precision change                                  AS_IS (TIME is always stored as millis)
TIMESTAMP(p) widened within the same storage class        AS_IS (p ≤ 3 compact; 4..9 millis+nanos)
NOT NULL → nullable                                       AS_IS (identical bytes)
added nullable field (any position, any depth)            AFTER_MIGRATION (new field is null)
fields reordered                                          AFTER_MIGRATION
nested rows, and rows inside ARRAY / MULTISET / MAP       same rules, recursively
removed field                                             INCOMPATIBLE
type changed (INT → BIGINT, DECIMAL(10,2) → (12,2) ...)   INCOMPATIBLE
added NOT NULL field                                      INCOMPATIBLE (no value to give it)
nullable → NOT NULL                                       INCOMPATIBLE (old nulls would break it)
========================================================  =========================================

The AS_IS entries are deliberate improvements over Flink ≤ 2.3, which rejects *any* change to a
RowData type (its snapshot compares ``LogicalType[]`` with ``equals``); each of them leaves every
byte of the state unchanged, so treating them as compatible is safe. An incompatible result names
**every** offending field by path (``metadata.userId: INT -> STRING``).

Positional fallback: a row whose old field names are exactly Flink's generated defaults
``f0, f1, ...`` and share no name with the new row carries no usable names, so its fields are
matched by position (``by_name=None``, the default, decides this per row, nested rows included).
``by_name=False`` forces positional matching everywhere, ``by_name=True`` forces names. When
matching by position, extra new fields must be nullable and fewer fields is a removal.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Any, cast

from . import types
from .binary_layout import RowCodec, _Ctx, array_header_size, round8, row_null_bits_size
from .errors import IncompatibleSchemaError, MalformedDataError
from .io import DataInputDeserializer, DataOutputSerializer
from .row import Row

COPY = "copy"
ROW = "row"
ARRAY = "array"
MAP = "map"


@dataclass(frozen=True)
class TypeMigration:
    """How one **non-null** value of ``old_type`` becomes a value of ``new_type``.

    ``kind``:

    - ``"copy"``: the bytes are unchanged (leaf types, and containers with nothing to migrate);
    - ``"row"``: a nested row, remapped with ``row`` (a :class:`RowMigrationPlan`);
    - ``"array"``: an ARRAY whose elements are migrated with ``element``;
    - ``"map"``: a MAP (or MULTISET: a map element → INT count) whose keys and values are migrated
      with ``key`` and ``value`` (either may be a ``"copy"`` migration).

    Only ROW, ARRAY, MAP and MULTISET types ever have a kind other than ``"copy"``.
    """

    kind: str
    old_type: types.LogicalType
    new_type: types.LogicalType
    row: RowMigrationPlan | None = None
    element: TypeMigration | None = None
    key: TypeMigration | None = None
    value: TypeMigration | None = None

    @property
    def is_copy(self) -> bool:
        return self.kind == COPY

    def innermost_row(self) -> RowMigrationPlan | None:
        """The row plan this migration leads to (through arrays and map values / keys)."""
        if self.kind == ROW:
            return self.row
        for m in (self.element, self.value, self.key):
            if m is not None and not m.is_copy:
                return m.innermost_row()
        return None


@dataclass(frozen=True)
class FieldMigration:
    """One field of the **new** row.

    - ``name``: the new field's name; ``type``: its new type.
    - ``source``: index of the old field it is read from, or ``-1`` for a field that did not
      exist (always written as null).
    - ``old_type``: the old field's type (None when ``source == -1``).
    - ``migration``: how a non-null old value becomes the new one (None when ``source == -1``);
      ``migration.kind == "copy"`` means the slot and any var-part data are copied unchanged.
    """

    name: str
    source: int
    type: types.LogicalType
    old_type: types.LogicalType | None = None
    migration: TypeMigration | None = None

    @property
    def nested(self) -> RowMigrationPlan | None:
        """The row plan for a ROW field, or for the element row of an ARRAY<ROW> / MULTISET<ROW> /
        MAP<_, ROW> field (None when nothing in the field needs migration)."""
        if self.migration is None or self.migration.is_copy:
            return None
        return self.migration.innermost_row()


@dataclass(frozen=True)
class RowMigrationPlan:
    """How a BinaryRowData of ``old_type`` becomes one of ``new_type``.

    ``fields`` has one :class:`FieldMigration` per **new** field, in new order. A kernel executes
    it as: new header byte = old header byte (the RowKind); for each new field ``j``:

    - ``source == -1`` or the old null bit of ``source`` set → set null bit ``j``, zero slot ``j``
      (no var-part reservation, exactly like Flink's ``RowDataSerializer.toBinaryRow``);
    - ``migration.kind == "copy"``: fixed-width types copy the 8-byte slot; inline strings /
      binaries copy the slot; var-part data (long strings, binaries, DECIMAL(p>18) = 16 bytes with
      the unscaled bytes first, TIMESTAMP(p>3) = 8 bytes of millis, nested rows / arrays / maps)
      is appended to the new var part (8-byte aligned, zero padded) and the slot rewritten to
      ``newOffset << 32 | lowWord`` (offsets are relative to the row start, so nested structures
      are copied verbatim);
    - ``"row"`` / ``"array"`` / ``"map"``: the nested structure is remapped recursively and the
      result appended like var-part data.

    ``is_identity`` is true when the new bytes always equal the old bytes (no migration needed).
    ``changes`` lists human-readable descriptions, one per row path that changed.
    """

    old_type: types.RowType
    new_type: types.RowType
    fields: tuple[FieldMigration, ...]
    is_identity: bool
    changes: tuple[str, ...] = ()

    def describe(self) -> str:
        return "; ".join(self.changes) if self.changes else "no changes"


# --------------------------------------------------------------------------------------------
# planning
# --------------------------------------------------------------------------------------------


def _label(path: str) -> str:
    return path or "row"


def _same_storage(old: types.LogicalType, new: types.LogicalType) -> bool:
    """True when a non-container value of ``old`` has exactly the bytes a value of ``new`` would
    have (nullability and comments aside)."""
    return type(old) is type(new) and old.accept(_SameStorage(new))


class _SameStorage(types.LogicalTypeVisitor[bool]):
    """Whether a value of the visited type has the bytes of a value of ``new`` (of its class)."""

    def __init__(self, new: types.LogicalType) -> None:
        self.new = new

    def visit_other(self, t: types.LogicalType) -> bool:
        return t.copy(nullable=True) == self.new.copy(nullable=True)

    def visit_character_string(self, t: types.CharType | types.VarCharType) -> bool:
        return True  # the length is not in the bytes

    def visit_binary_string(self, t: types.BinaryType | types.VarBinaryType) -> bool:
        return True

    def visit_time(self, t: types.TimeType) -> bool:
        return True  # milliseconds whatever the precision

    def visit_any_timestamp(self, t: types.TimestampType | types.LocalZonedTimestampType) -> bool:
        new = cast("types.TimestampType | types.LocalZonedTimestampType", self.new)
        return t.is_compact == new.is_compact and new.precision >= t.precision

    def visit_decimal(self, t: types.DecimalType) -> bool:
        new = cast(types.DecimalType, self.new)
        return (t.precision, t.scale) == (new.precision, new.scale)


def _show(t: types.LogicalType) -> str:
    return str(t)


class _Nested(types.LogicalTypeVisitor["TypeMigration | None"]):
    """The migration of a row, array, multiset or map to one of its own class (``new``), its parts
    compared by ``planner``; None for the other types."""

    def __init__(self, planner: _Planner, new: types.LogicalType, path: str) -> None:
        self.planner, self.new, self.path = planner, new, path

    def visit_other(self, t: types.LogicalType) -> TypeMigration | None:
        return None

    def visit_row(self, t: types.RowType) -> TypeMigration | None:
        plan = self.planner.plan_rows(t, cast(types.RowType, self.new), self.path)
        return TypeMigration(COPY if plan.is_identity else ROW, t, self.new, row=plan)

    def visit_structured(self, t: types.StructuredType) -> TypeMigration | None:
        """An aggregate function's accumulator (a STRUCTURED type) keeps its type: Flink's planner
        derives it from the function, and what a changed one means is the function's business. The
        refusal names the innermost structured type that changed (an accumulator's parts inside an
        ARRAY or a MAP are structured types of their own: ``f0.items[]``)."""
        if t != self.new:
            reasons = self.planner.inner_accumulators(t, self.new, self.path) or [
                f"{_label(self.path)}: the accumulator type {_show(t)} keeps its type, got {_show(self.new)}"]
            self.planner.reasons.extend(reasons)
            self.planner.accumulators.extend(reasons)
        return TypeMigration(COPY, t, self.new)

    def visit_array(self, t: types.ArrayType) -> TypeMigration | None:
        element = self.planner.compare(t.element_type, cast(types.ArrayType, self.new).element_type, f"{self.path}[]")
        return TypeMigration(COPY if element.is_copy else ARRAY, t, self.new, element=element)

    def visit_multiset(self, t: types.MultisetType) -> TypeMigration | None:
        key = self.planner.compare(t.element_type, cast(types.MultisetType, self.new).element_type, f"{self.path}[]")
        count = types.IntType(nullable=False)
        value = TypeMigration(COPY, count, count)
        return TypeMigration(COPY if key.is_copy else MAP, t, self.new, key=key, value=value)

    def visit_map(self, t: types.MapType) -> TypeMigration | None:
        new = cast(types.MapType, self.new)
        key = self.planner.compare(t.key_type, new.key_type, f"{self.path}.key")
        value = self.planner.compare(t.value_type, new.value_type, f"{self.path}.value")
        kind = COPY if key.is_copy and value.is_copy else MAP
        return TypeMigration(kind, t, self.new, key=key, value=value)


class _Planner:
    def __init__(self, by_name: bool | None) -> None:
        self.by_name = by_name
        self.reasons: list[str] = []
        self.accumulators: list[str] = []  # the reasons naming a changed accumulator type

    def inner_accumulators(self, old: types.StructuredType, new: types.LogicalType, path: str) -> list[str]:
        """The changed structured types inside ``old`` (of the same class as ``new``), innermost
        first-found: what :meth:`_Nested.visit_structured` names instead of the whole accumulator."""
        if not isinstance(new, types.StructuredType) or new.class_name != old.class_name:
            return []
        inner = _Planner(self.by_name)
        inner.plan_rows(old, new, path)
        return inner.accumulators

    def compare(self, old: types.LogicalType, new: types.LogicalType, path: str) -> TypeMigration:
        if old.nullable and not new.nullable:
            self.reasons.append(f"{_label(path)}: nullable -> NOT NULL")
        if type(old) is type(new):
            nested = old.accept(_Nested(self, new, path))
            if nested is not None:
                return nested
        if not _same_storage(old, new):
            self.reasons.append(f"{_label(path)}: {_show(old)} -> {_show(new)}")
        return TypeMigration(COPY, old, new)

    def plan_rows(self, old: types.RowType, new: types.RowType, path: str) -> RowMigrationPlan:
        prefix = f"{path}." if path else ""
        by_name = self.by_name if self.by_name is not None else not _generated_names_only(old, new)
        fields: list[FieldMigration] = []
        added: list[str] = []
        used: set[int] = set()
        for j, nf in enumerate(new.fields):
            i = old.field_index(nf.name) if by_name else (j if j < old.arity else -1)
            if i < 0:
                if not nf.type.nullable:
                    self.reasons.append(f"{prefix}{nf.name}: added NOT NULL field ({_show(nf.type)}) "
                                        f"has no value for existing state")
                added.append(nf.name)
                fields.append(FieldMigration(nf.name, -1, nf.type))
                continue
            used.add(i)
            of = old.fields[i]
            mig = self.compare(of.type, nf.type, f"{prefix}{nf.name}")
            fields.append(FieldMigration(nf.name, i, nf.type, of.type, mig))
        for i, of in enumerate(old.fields):
            if i not in used:
                self.reasons.append(f"{prefix}{of.name}: removed ({_show(of.type)})")
        sources = [f.source for f in fields if f.source >= 0]
        reordered = sources != sorted(sources)
        is_identity = (
            len(fields) == old.arity
            and all(f.source == j and f.migration is not None and f.migration.is_copy
                    for j, f in enumerate(fields))
        )
        parts = [] if by_name or is_identity else ["matched by position"]
        if added:
            parts.append("added " + ", ".join(added))
        if reordered:
            parts.append("reordered")
        changes: list[str] = [f"{_label(path)}: " + "; ".join(parts)] if parts else []
        for f in fields:
            if f.migration is not None and not f.migration.is_copy:
                changes.extend(_nested_changes(f.migration))
        return RowMigrationPlan(old, new, tuple(fields), is_identity, tuple(changes))


def _generated_names_only(old: types.RowType, new: types.RowType) -> bool:
    """Old names are Flink's defaults f0..fn-1 and none of them survives in the new row."""
    names = old.field_names
    return bool(names) and names == [f"f{i}" for i in range(len(names))] \
        and not set(names) & set(new.field_names)


def _nested_changes(m: TypeMigration) -> list[str]:
    if m.kind == ROW:
        assert m.row is not None
        return list(m.row.changes)
    out: list[str] = []
    for child in (m.element, m.key, m.value):
        if child is not None and not child.is_copy:
            out.extend(_nested_changes(child))
    return out


@functools.lru_cache(maxsize=256)
def _plan_cached(old: types.RowType, new: types.RowType, by_name: bool | None) -> RowMigrationPlan:
    planner = _Planner(by_name)
    plan = planner.plan_rows(old, new, "")
    if planner.reasons:
        reason = "; ".join(planner.reasons)
        raise IncompatibleSchemaError(f"row type {old} cannot be migrated to {new}: {reason}", reason)
    return plan


def plan_row_migration(old_row_type: types.RowType | str, new_row_type: types.RowType | str,
                       by_name: bool | None = None) -> RowMigrationPlan:
    """The migration plan from ``old_row_type`` to ``new_row_type`` (cached per pair).

    Raises :class:`IncompatibleSchemaError` whose ``reason`` lists every offending field path.
    """
    return _plan_cached(types.parse_row_type(old_row_type), types.parse_row_type(new_row_type), by_name)


# --------------------------------------------------------------------------------------------
# bytes
# --------------------------------------------------------------------------------------------

_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")


def _fail(path: str, message: str, offset: int) -> MalformedDataError:
    return MalformedDataError(f"{_label(path)}: {message} (at byte offset {offset})")


def _var_kind(t: types.LogicalType) -> str:
    """How a slot of type ``t`` refers to data: ``fixed``, ``inline`` (≤7 bytes or a reference),
    ``decimal`` (16 reserved), ``timestamp`` (8 bytes, nanos in the slot) or ``ref``."""
    return _VAR_KIND.get(t.row_slot(), "fixed")


_VAR_KIND = {"STR": "inline", "BIN": "inline", "DEC_BIG": "decimal", "TS_BIG": "timestamp", "ROW": "ref",
             "ARRAY": "ref", "MAP": "ref", "BLOB": "ref"}
"""How each BinaryRowData slot layout (``LogicalType.row_slot``) refers to data; others are fixed."""


class _Remapper:
    """Byte-level executor of a plan over already-validated old bytes."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def ref(self, slot: int, base: int, end: int, length: int, path: str) -> int:
        v: int = _U64.unpack_from(self.data, slot)[0]
        start: int = base + (v >> 32)
        if v >> 63 or start < base or start + length > end:
            raise _fail(path, "reference outside its structure", slot)
        return start

    def copy_slot(self, t: types.LogicalType, slot: int, base: int, end: int, buf: bytearray, new_slot: int,
                  path: str) -> None:
        data = self.data
        kind = _var_kind(t)
        raw = _U64.unpack_from(data, slot)[0]
        if kind == "fixed" or (kind == "inline" and raw >> 63):
            buf[new_slot:new_slot + 8] = data[slot:slot + 8]
            return
        low = raw & 0xFFFFFFFF
        if kind == "decimal":
            start = self.ref(slot, base, end, low, path)
            payload = data[start:start + low] + bytes(16 - low)
        elif kind == "timestamp":
            start = self.ref(slot, base, end, 8, path)
            payload = data[start:start + 8]
        else:
            start = self.ref(slot, base, end, low, path)
            payload = data[start:start + low]
        cursor = len(buf)
        _U64.pack_into(buf, new_slot, (cursor << 32) | low)
        buf += payload
        buf += bytes(round8(len(payload)) - len(payload))

    def append_ref(self, buf: bytearray, new_slot: int, payload: bytes | bytearray) -> None:
        cursor = len(buf)
        _U64.pack_into(buf, new_slot, (cursor << 32) | len(payload))
        buf += payload
        buf += bytes(round8(len(payload)) - len(payload))

    def structure(self, m: TypeMigration, slot: int, base: int, end: int, path: str) -> bytes | bytearray:
        """Remap the row / array / map referenced by ``slot``."""
        raw = _U64.unpack_from(self.data, slot)[0]
        length = raw & 0xFFFFFFFF
        start = self.ref(slot, base, end, length, path)
        if m.kind == ROW:
            assert m.row is not None
            return self.row(m.row, start, length, path)
        if m.kind == ARRAY:
            assert m.element is not None
            return self.array(m.element, start, length, path)
        return self.map(m, start, length, path)

    def row(self, plan: RowMigrationPlan, start: int, size: int, path: str) -> bytearray:
        data = self.data
        old_arity = plan.old_type.arity
        old_nb = row_null_bits_size(old_arity)
        new_arity = len(plan.fields)
        new_nb = row_null_bits_size(new_arity)
        buf = bytearray(new_nb + 8 * new_arity)
        buf[0] = data[start]
        old_bits = int.from_bytes(data[start:start + old_nb], "little") >> 8
        end = start + size
        prefix = f"{path}." if path else ""
        for j, f in enumerate(plan.fields):
            i = f.source
            if i < 0 or old_bits >> i & 1:
                bit = j + 8
                buf[bit >> 3] |= 1 << (bit & 7)
                continue
            m = f.migration
            assert m is not None and f.old_type is not None
            slot = start + old_nb + 8 * i
            new_slot = new_nb + 8 * j
            if m.is_copy:
                self.copy_slot(f.old_type, slot, start, end, buf, new_slot, prefix + f.name)
            else:
                self.append_ref(buf, new_slot, self.structure(m, slot, start, end, prefix + f.name))
        return buf

    def array(self, element: TypeMigration, start: int, size: int, path: str) -> bytearray:
        """Arrays whose elements are rows / arrays / maps to migrate (8-byte reference slots)."""
        data = self.data
        n = _I32.unpack_from(data, start)[0]
        header = array_header_size(n)
        buf = bytearray(round8(header + 8 * n))
        buf[0:header] = data[start:start + header]
        end = start + size
        for i in range(n):
            if data[start + 4 + (i >> 3)] >> (i & 7) & 1:
                continue
            slot = start + header + 8 * i
            self.append_ref(buf, header + 8 * i, self.structure(element, slot, start, end, f"{path}[]"))
        return buf

    def map(self, m: TypeMigration, start: int, size: int, path: str) -> bytearray:
        assert m.key is not None and m.value is not None
        nk = _I32.unpack_from(self.data, start)[0]
        ks, vs = start + 4, start + 4 + nk
        keys = self.data[ks:ks + nk] if m.key.is_copy else self.array(m.key, ks, nk, f"{path}.key")
        vlen = size - 4 - nk
        values = self.data[vs:vs + vlen] if m.value.is_copy else self.array(m.value, vs, vlen, f"{path}.value")
        return bytearray(_I32.pack(len(keys))) + keys + values


def remap_binary_row(plan: RowMigrationPlan, data: bytes, origin: int = 0, validate: bool = True) -> bytes:
    """Migrate one BinaryRowData (no length prefix) from ``plan.old_type`` to ``plan.new_type``
    without building Python values. The old bytes are fully validated first (``validate``; off only
    for bytes the reference codec has just written), so corrupt input raises
    :class:`MalformedDataError` naming the field path and offset."""
    if validate:
        _codec(plan.old_type).decode(_Ctx(bytes(data), origin), 0, len(data))
    if plan.is_identity:
        return bytes(data)
    return bytes(_Remapper(data).row(plan, 0, len(data), ""))


@functools.lru_cache(maxsize=256)
def _codec(t: types.RowType) -> RowCodec:
    return RowCodec(t)


def migrate_row_value(plan: RowMigrationPlan, value: Any) -> Row:
    """Turn a row of the old schema into the same row in the new schema (new fields null, RowKind
    kept). The rules are executed once, on bytes: the row is written in the old schema, remapped
    with :func:`remap_binary_row` (no second validation: the codec just wrote it) and read back,
    so a value migrates exactly as its bytes do (a FLOAT field holds the value the old schema
    stores, not the Python float it was handed)."""
    data = remap_binary_row(plan, bytes(_codec(plan.old_type).encode(value)), validate=False)
    return _codec(plan.new_type).decode(_Ctx(data, 0), 0, len(data))


# --------------------------------------------------------------------------------------------
# one value, any snapshot
# --------------------------------------------------------------------------------------------


def migrate_bytes(prior_snapshot: Any, new_serializer: Any, data: bytes | bytearray | memoryview) -> bytes:
    """Migrate one serialized value written under ``prior_snapshot`` to ``new_serializer``.

    Generic over every snapshot: resolves compatibility first (incompatible →
    :class:`IncompatibleSchemaError`), returns the bytes unchanged (after reading them once to
    validate) when compatible as is, and otherwise runs the snapshot's ``migrate_state``.
    Trailing bytes after the value are an error.
    """
    compat = prior_snapshot.resolve_schema_compatibility(new_serializer)
    if compat.is_incompatible():
        raise IncompatibleSchemaError(f"cannot migrate: {compat.reason}", compat.reason)
    target, as_is = resolved_target(compat, new_serializer)
    return migrate_resolved(prior_snapshot, prior_snapshot.restore_serializer(), target, data, as_is)


def resolved_target(compat: Any, new_serializer: Any) -> tuple[Any, bool]:
    """What a resolved compatibility means for a migration: the serializer to write with (the
    reconfigured one when the result says so, else the new one) and whether values copy as is."""
    target = compat.get_reconfigured_serializer() if compat.is_compatible_with_reconfigured_serializer() \
        else new_serializer
    return target, compat.is_compatible_as_is()


def migrate_resolved(prior_snapshot: Any, prior: Any, target: Any, data: bytes | bytearray | memoryview,
                     as_is: bool) -> bytes:
    """:func:`migrate_bytes` once compatibility is resolved (``prior``: the restored serializer,
    ``target``: the new or reconfigured one), for callers that migrate many values of one pair."""
    src = DataInputDeserializer(data)
    if as_is:
        prior.deserialize(src)
        src.expect_end("the value")
        return bytes(data)
    out = DataOutputSerializer()
    prior_snapshot.migrate_state(prior, target, src, out)
    src.expect_end("the value")
    return out.get_copy_of_buffer()


__all__ = [
    "FieldMigration",
    "RowMigrationPlan",
    "TypeMigration",
    "migrate_bytes",
    "migrate_resolved",
    "resolved_target",
    "migrate_row_value",
    "plan_row_migration",
    "remap_binary_row",
]
