"""Properties of RowDataSerializer and RowData migration over random row types and values."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import atomic_types
from strategies import extend_types as _extend
from strategies import rows_of as _rows
from strategies import with_nullability as _with_nullability

from statemorph.migration import migrate_bytes, migrate_row_value, plan_row_migration
from statemorph.row import Row
from statemorph.serializers import RowDataSerializer
from statemorph.types import (
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    LogicalType,
    MapType,
    MultisetType,
    RowField,
    RowType,
    SmallIntType,
    Timestamp,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

UTC = dt.timezone.utc
# smaller than the parser's type strategy: values of deep types get big and slow
small_types: st.SearchStrategy[LogicalType] = st.recursive(_with_nullability(atomic_types), _extend, max_leaves=4)
row_types: st.SearchStrategy[RowType] = _rows(small_types, max_fields=4)
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def _decimal(p: int, s: int) -> st.SearchStrategy[Decimal]:
    def make(u: int) -> Decimal:
        return Decimal((1 if u < 0 else 0, tuple(int(c) for c in str(abs(u))), -s))
    return st.integers(-(10**p) + 1, 10**p - 1).map(make)


def _timestamp(precision: int, ltz: bool) -> st.SearchStrategy[Any]:
    tz = UTC if ltz else None
    if precision > 6:
        return st.builds(Timestamp, st.integers(-(2**40), 2**40), st.integers(0, 999_999))
    base = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30))
    if precision <= 3:
        base = base.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000))
    return base.map(lambda d: d.replace(tzinfo=tz))


@functools.cache
def values_for(t: LogicalType, hashable: bool = False) -> st.SearchStrategy[Any]:
    """Values a RowDataSerializer reads back equal (hashable=True: usable as dict keys)."""
    inner = _non_null_values(t, hashable)
    return st.none() | inner if t.nullable else inner


def _non_null_values(t: LogicalType, hashable: bool) -> st.SearchStrategy[Any]:
    ints = {TinyIntType: 8, SmallIntType: 16, IntType: 32, BigIntType: 64}
    if type(t) in ints:
        bits = ints[type(t)]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if isinstance(t, BooleanType):
        return st.booleans()
    if isinstance(t, FloatType):
        return st.floats(width=32, allow_nan=False)
    if isinstance(t, DoubleType):
        return st.floats(allow_nan=False)
    if isinstance(t, DecimalType):
        return _decimal(t.precision, t.scale)
    if isinstance(t, (CharType, VarCharType)):
        return text
    if isinstance(t, (BinaryType, VarBinaryType)):
        return st.binary(max_size=12)
    if isinstance(t, DateType):
        return st.dates()
    if isinstance(t, TimeType):
        return st.times().map(lambda x: x.replace(microsecond=x.microsecond // 1000 * 1000))
    if isinstance(t, (TimestampType, LocalZonedTimestampType)):
        return _timestamp(t.precision, isinstance(t, LocalZonedTimestampType))
    if isinstance(t, ArrayType):
        items = st.lists(values_for(t.element_type, hashable), max_size=2)
        return items.map(tuple) if hashable else items
    if isinstance(t, MultisetType):
        d = st.dictionaries(values_for(t.element_type, True), st.integers(0, 2**31 - 1), max_size=2)
        return d.map(lambda m: tuple(m.items())) if hashable else d
    if isinstance(t, MapType):
        d = st.dictionaries(values_for(t.key_type, True), values_for(t.value_type, hashable), max_size=2)
        return d.map(lambda m: tuple(m.items())) if hashable else d
    assert isinstance(t, RowType)
    return st.tuples(*(values_for(f.type, hashable) for f in t.fields))


# -- evolution ----------------------------------------------------------------------------------

Transform = Callable[[Any], Any]


def _identity(v: Any) -> Any:
    return v


@st.composite
def evolved(draw: st.DrawFn, t: LogicalType) -> tuple[LogicalType, Transform]:
    """A compatible evolution of ``t`` and the function that maps an old value to the new one."""
    if isinstance(t, RowType):
        parts = [draw(evolved(f.type)) for f in t.fields]
        taken = set(t.field_names)
        n_new = draw(st.integers(0, 2))
        new_fields: list[tuple[RowField, int]] = [
            (RowField(f.name, parts[i][0], f.description), i) for i, f in enumerate(t.fields)]
        for k in range(n_new):
            name = f"added_{k}"
            while name in taken:
                name += "_"
            taken.add(name)
            ftype = draw(st.sampled_from([IntType(), VarCharType(2147483647), DecimalType(20, 2),
                                          TimestampType(9), RowType((RowField("x", IntType()),))]))
            new_fields.append((RowField(name, ftype), -1))
        order = draw(st.permutations(range(len(new_fields))))
        chosen = [new_fields[j] for j in order]
        new_type = RowType(tuple(f for f, _ in chosen), nullable=t.nullable)
        fns = [parts[src][1] if src >= 0 else None for _, src in chosen]
        sources = [src for _, src in chosen]

        def row_fn(v: Any) -> Any:
            if v is None:
                return None
            return tuple(None if s < 0 else (None if v[s] is None else fns[j](v[s]))  # type: ignore[misc]
                         for j, s in enumerate(sources))
        return new_type, row_fn
    if isinstance(t, ArrayType):
        et, ef = draw(evolved(t.element_type))
        return ArrayType(et, nullable=t.nullable), lambda v: None if v is None else [
            None if x is None else ef(x) for x in v]
    if isinstance(t, MultisetType):
        et, ef = draw(evolved(t.element_type))
        return MultisetType(et, nullable=t.nullable), lambda v: None if v is None else {
            _hashable(ef(k)) if k is not None else None: c for k, c in _items(v)}
    if isinstance(t, MapType):
        kt, kf = draw(evolved(t.key_type))
        vt, vf = draw(evolved(t.value_type))
        return MapType(kt, vt, nullable=t.nullable), lambda v: None if v is None else {
            (_hashable(kf(k)) if k is not None else None): (None if x is None else vf(x)) for k, x in _items(v)}
    return t, _identity


def _items(v: Any) -> Any:
    return v.items() if isinstance(v, dict) else v


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple((_hashable(k), _hashable(x)) for k, x in v.items())
    if isinstance(v, tuple):
        return tuple(_hashable(x) for x in v)
    return v


@st.composite
def typed_rows(draw: st.DrawFn) -> tuple[RowType, Any]:
    t = draw(row_types)
    return t, draw(values_for(t.copy(nullable=False)))


@settings(max_examples=60)
@given(typed_rows())
def test_round_trip_is_lossless_and_byte_stable(tv: tuple[RowType, Any]) -> None:
    t, value = tv
    s = RowDataSerializer(t)
    data = s.to_bytes(value)
    assert (len(data) - 4) % 8 == 0
    back = s.from_bytes(data)
    assert isinstance(back, Row)
    assert back == value
    assert s.to_bytes(back) == data


@settings(max_examples=60)
@given(st.data())
def test_random_compatible_evolution_migrates_like_building_the_new_row(data: st.DataObject) -> None:
    old_type, value = data.draw(typed_rows())
    new_type, transform = data.draw(evolved(old_type))
    assert isinstance(new_type, RowType)
    old_s, new_s = RowDataSerializer(old_type), RowDataSerializer(new_type)
    snap = read_versioned_snapshot(write_versioned_snapshot(old_s.snapshot_configuration()))
    compat = snap.resolve_schema_compatibility(new_s)
    assert not compat.is_incompatible(), compat.reason
    expected = transform(value)
    migrated = migrate_bytes(snap, new_s, old_s.to_bytes(value))
    assert migrated == new_s.to_bytes(expected)
    assert new_s.from_bytes(migrated) == expected
    plan = plan_row_migration(old_type, new_type)
    assert migrate_row_value(plan, old_s.from_bytes(old_s.to_bytes(value))) == expected
    if compat.is_compatible_as_is():
        assert plan.is_identity and migrated == old_s.to_bytes(value)


@settings(max_examples=40)
@given(row_types)
def test_snapshot_round_trip_keeps_the_row_type(t: RowType) -> None:
    snap = RowDataSerializer(t).snapshot_configuration()
    back = read_versioned_snapshot(write_versioned_snapshot(snap))
    assert back.restore_serializer() == RowDataSerializer(t)
    assert back.resolve_schema_compatibility(RowDataSerializer(t)).is_compatible_as_is()
