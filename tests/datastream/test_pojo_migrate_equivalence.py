"""POJO bulk migration: compiled kernel == Python twin == per-value reference, byte for byte.

Random POJO schemas (primitive, string, byte[], flink-core Row and nested POJO fields, non-ASCII
names) evolve at random: fields removed, added (null or a
dataclass default), kept in a new order, nested POJOs evolving the same way. Every entry, including
corrupted copies, must get the reference's verdict and the reference's bytes on both tiers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import corrupt as _corrupt
from tiers import on_tiers

from statemorph import arrow, bulk, serializers
from statemorph.errors import StateFormatError
from statemorph.kernels import plans
from statemorph.migration import migrate_bytes
from statemorph.serializers.pojo import PojoSerializer

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LEAVES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (serializers.IntSerializer, st.integers(-(1 << 31), (1 << 31) - 1)),
    (serializers.LongSerializer, st.integers(-(1 << 63), (1 << 63) - 1)),
    (serializers.ShortSerializer, st.integers(-(1 << 15), (1 << 15) - 1)),
    (serializers.ByteSerializer, st.integers(-128, 127)),
    (serializers.BooleanSerializer, st.booleans()),
    (serializers.FloatSerializer, st.floats(width=32)),
    (serializers.DoubleSerializer, st.floats()),
    (serializers.CharSerializer, st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))),
    (serializers.StringSerializer, st.text(max_size=20)),
    (serializers.BytePrimitiveArraySerializer, st.binary(max_size=12)),
]
# non-ASCII names, one beyond the BMP (dataclass fields, so NFKC-stable identifiers)
NAMES = ["a", "b", "c", "d", "e", "f", "z", "é", "\U00010400"]


@dataclasses.dataclass
class Schema:
    """One evolution step: old and new serializers and a strategy for old values."""

    old: PojoSerializer
    new: PojoSerializer
    values: st.SearchStrategy[Any]


def _value_of(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({n: st.one_of(st.none(), s) for n, s in fields.items()})


@st.composite
def evolutions(draw: Any, depth: int = 0, cls: str = "p.P") -> Schema:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True))
    old_sers: dict[str, Any] = {}
    new_sers: dict[str, Any] = {}
    strategies: dict[str, st.SearchStrategy[Any]] = {}
    defaults: dict[str, Any] = {}
    for j, name in enumerate(names):
        fate = draw(st.sampled_from(["keep", "keep", "remove", "add"]))
        pick = draw(st.integers(0, 5))
        if depth < 2 and pick == 0:
            sub = draw(evolutions(depth + 1, f"{cls}{j}"))
            old_s, new_s, strat = sub.old, sub.new, sub.values
        elif pick == 1:
            old_s, new_s, strat = draw(rows())
        else:
            leaf, strat = draw(st.sampled_from(LEAVES))
            old_s, new_s = leaf(), leaf()
            if fate == "add" and draw(st.booleans()):
                defaults[name] = draw(strat)
        if fate != "add":
            old_sers[name] = old_s
            strategies[name] = strat
        if fate != "remove":
            new_sers[name] = new_s
    new_cls = dataclasses.make_dataclass(
        f"New{depth}",
        [(n, Any, dataclasses.field(default=defaults[n])) if n in defaults else (n, Any) for n in new_sers],
        kw_only=True,
    )
    old = PojoSerializer(None, old_sers, java_class_name=cls)
    return Schema(old, PojoSerializer(new_cls, new_sers, java_class_name=cls), _value_of(strategies))


@st.composite
def rows(draw: Any) -> tuple[Any, Any, st.SearchStrategy[Any]]:
    """A flink-core Row field: old and new RowSerializer (the RowKind flag may change), values."""
    from statemorph.row import Row, RowKind

    picked = draw(st.lists(st.sampled_from(LEAVES), min_size=1, max_size=3))
    old_flag, new_flag = draw(st.booleans()), draw(st.booleans())
    old = serializers.RowSerializer([leaf() for leaf, _ in picked], supports_row_kind=old_flag)
    new = serializers.RowSerializer([leaf() for leaf, _ in picked], supports_row_kind=new_flag)
    kinds = st.sampled_from(list(RowKind)) if old_flag else st.just(RowKind.INSERT)
    return old, new, st.builds(Row, st.tuples(*(st.one_of(st.none(), s) for _, s in picked)), kinds)


def _reference(snap: Any, new: Any, blob: bytes | None) -> bytes | None:
    if blob is None:
        return None
    try:
        return migrate_bytes(snap, new, blob)
    except StateFormatError:
        return None




@SETTINGS
@given(st.data())
def test_pojo_migrate_equals_reference(data: st.DataObject) -> None:
    s = data.draw(evolutions())
    snap = s.old.snapshot_configuration()
    if not snap.resolve_schema_compatibility(s.new).is_compatible_after_migration():
        return
    values = data.draw(st.lists(st.one_of(st.none(), s.values), max_size=8))
    blobs: list[bytes | None] = [None if v is None else s.old.to_bytes(v) for v in values]
    blobs += [b"\x01"]  # a null POJO written as a value
    try:
        plans.compile_pojo_program(snap, s.new)
    except plans.NotByteRemappable as e:  # only a class that runs code of its own is refused here
        raise AssertionError(e) from e
    expected = [_reference(snap, s.new, b) for b in blobs]
    arr = pa.array(blobs, type=pa.binary())
    for tier, got in on_tiers(lambda: arrow.migrate(arr, snap, s.new).to_pylist()).items():
        assert got == expected, tier

    # corrupted entries: the reference's verdict (null when it fails) and bytes on both tiers
    bad = [None if b is None else _corrupt(data.draw, b) for b in blobs]
    expected = [_reference(snap, s.new, b) for b in bad]
    barr = pa.array(bad, type=pa.binary())

    def collect() -> Any:
        out, errs = bulk.migrate(barr, snap, s.new, on_error="null")
        return out.to_pylist(), [(e.row, e.field_path, e.code) for e in errs]

    verdicts = on_tiers(collect)
    for tier, (got, _errs) in verdicts.items():
        assert got == expected, tier
    assert len({repr(v) for v in verdicts.values()}) == 1, verdicts
