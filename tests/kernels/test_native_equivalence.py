"""The compiled kernels equal the Python reference, byte for byte.

Three oracles, all in one process:

- the per-value reference serializers (``RowDataSerializer.to_bytes`` / ``from_bytes`` and
  ``migration.migrate_bytes``), which are themselves tested against bytes from real Flink;
- the Python reference tier of the kernels (``statemorph.kernels.<name>_py``);
- the compiled tier (``kernels/_native/*.pyx``).

The ``tier`` fixture (tests/conftest.py) and ``on_tiers`` run bulk tests on both tiers; random row types, values (nulls,
unicode, long strings, nested rows, arrays, maps) and random compatible evolutions come from
hypothesis.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from bulk.rows import ARROW_LEAVES, REMAP_ONLY_LEAVES
from bulk.rows import all_tiers as _all_tiers  # names the tests use (hypothesis seeds from their source)
from bulk.rows import arrow_rows as _arrow_rows
from bulk.rows import ref_bytes as _ref_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import evolve, typed_rows

from statemorph import arrow, bulk, serializers
from statemorph.errors import StateFormatError
from statemorph.migration import migrate_bytes
from statemorph.types import RowType

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------ RowData
@SETTINGS
@given(typed_rows(ARROW_LEAVES), st.integers(0, 3))
def test_rowdata_encode_equals_reference(case: tuple[RowType, list[Any]], cut: int) -> None:
    t, rows = case
    s = serializers.RowDataSerializer(t)
    expected = _ref_bytes(s, rows)
    arr = _arrow_rows(t, rows)
    results = _all_tiers(lambda: arrow.encode(arr, s).to_pylist())
    for name, r in results.items():
        assert r == ("ok", expected), name
    # a slice honours the offset
    sliced = _all_tiers(lambda: arrow.encode(arr.slice(min(cut, len(arr))), s).to_pylist())
    for name, r in sliced.items():
        assert r == ("ok", expected[min(cut, len(arr)):]), name


@SETTINGS
@given(typed_rows(ARROW_LEAVES))
def test_rowdata_decode_equals_reference(case: tuple[RowType, list[Any]]) -> None:
    t, rows = case
    s = serializers.RowDataSerializer(t)
    blobs = pa.array(_ref_bytes(s, rows), type=pa.binary())
    expected = _arrow_rows(t, [None if r is None else s.from_bytes(s.to_bytes(r)) for r in rows])
    results = _all_tiers(lambda: arrow.decode(blobs, s))
    for name, r in results.items():
        assert r[0] == "ok", (name, r)
        assert r[1].equals(expected), name


@SETTINGS
@given(st.data())
def test_rowdata_migrate_equals_reference(data: st.DataObject) -> None:
    leaves = ARROW_LEAVES + REMAP_ONLY_LEAVES
    old_t, rows = data.draw(typed_rows(leaves))
    new_t = data.draw(evolve(old_t, leaves))
    so, sn = serializers.RowDataSerializer(old_t), serializers.RowDataSerializer(new_t)
    snap = so.snapshot_configuration()
    blobs = _ref_bytes(so, rows)
    expected = [None if b is None else migrate_bytes(snap, sn, b) for b in blobs]
    arr = pa.array(blobs, type=data.draw(st.sampled_from([pa.binary(), pa.large_binary()])))
    results = _all_tiers(lambda: arrow.migrate(arr, snap, sn).to_pylist())
    for name, r in results.items():
        assert r == ("ok", expected), name


@SETTINGS
@given(st.data())
def test_rowdata_corruption_same_verdict_on_both_tiers(data: st.DataObject) -> None:
    """Flipped / cut bytes: both tiers flag the same rows (and never crash); every row they accept
    migrates to what the reference produces for the same bytes."""
    leaves = ARROW_LEAVES + REMAP_ONLY_LEAVES
    old_t, rows = data.draw(typed_rows(leaves))
    new_t = data.draw(evolve(old_t, leaves))
    so, sn = serializers.RowDataSerializer(old_t), serializers.RowDataSerializer(new_t)
    snap = so.snapshot_configuration()
    blobs = []
    for b in _ref_bytes(so, rows):
        if b is not None and data.draw(st.booleans()):
            ba = bytearray(b)
            if data.draw(st.booleans()):
                i = data.draw(st.integers(0, len(ba) - 1))
                ba[i] = data.draw(st.integers(0, 255))
            else:
                ba = ba[:data.draw(st.integers(0, len(ba)))]
            b = bytes(ba)
        blobs.append(b)
    arr = pa.array(blobs, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.migrate(arr, snap, sn, on_error="null")
        return out.to_pylist(), sorted(e.row for e in errs)

    verdicts = _all_tiers(run)
    assert all(v[0] == "ok" for v in verdicts.values()), verdicts
    assert len({repr(v) for v in verdicts.values()}) == 1, verdicts
    out, bad = next(iter(verdicts.values()))[1]
    for i, b in enumerate(blobs):
        if b is None or i in bad:
            continue
        assert out[i] == migrate_bytes(snap, sn, b)


# ------------------------------------------------------------------------------------------ primitives
PRIMS = [
    (serializers.BooleanSerializer(), pa.bool_(), st.booleans()),
    (serializers.ByteSerializer(), pa.int8(), st.integers(-128, 127)),
    (serializers.ShortSerializer(), pa.int16(), st.integers(-(1 << 15), (1 << 15) - 1)),
    (serializers.IntSerializer(), pa.int32(), st.integers(-(1 << 31), (1 << 31) - 1)),
    (serializers.LongSerializer(), pa.int64(), st.integers(-(1 << 63), (1 << 63) - 1)),
    (serializers.FloatSerializer(), pa.float32(), st.floats(width=32)),
    (serializers.DoubleSerializer(), pa.float64(), st.floats()),
    (serializers.StringSerializer(), pa.string(), st.text(max_size=40)),
    (serializers.BytePrimitiveArraySerializer(), pa.binary(), st.binary(max_size=40)),
]


@SETTINGS
@given(st.data())
def test_datastream_encode_decode_equal_reference(data: st.DataObject) -> None:
    s, at, values = data.draw(st.sampled_from(PRIMS))
    vals = data.draw(st.lists(st.one_of(st.none(), values), max_size=30))
    arr = pa.array(vals, type=at)
    expected = [None if v is None else s.to_bytes(v) for v in vals]
    for name, r in _all_tiers(lambda: arrow.encode(arr, s).to_pylist()).items():
        assert r == ("ok", expected), name
    blobs = pa.array(expected, type=pa.binary())
    for name, r in _all_tiers(lambda: arrow.decode(blobs, s)).items():
        assert r[0] == "ok", (name, r)
        # NaN != NaN: compare the re-encoded bytes
        assert [None if v is None else s.to_bytes(v) for v in r[1].to_pylist()] == expected, name


@SETTINGS
@given(st.lists(st.one_of(st.none(), st.binary(max_size=12)), max_size=30))
def test_string_decode_of_arbitrary_bytes_agrees(blobs: list[bytes | None]) -> None:
    """Random bytes through the StringValue decoder: same strings, same bad rows, on both tiers."""
    arr = pa.array(blobs, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.decode(arr, serializers.StringSerializer(), on_error="null")
        return out.to_pylist(), [(e.row, type(e).__name__) for e in errs]

    results = _all_tiers(run)
    assert all(v[0] == "ok" for v in results.values()), results
    assert len({repr(v) for v in results.values()}) == 1, results
    out, errs = next(iter(results.values()))[1]
    bad = {r for r, _ in errs}
    ref = serializers.StringSerializer()
    for i, b in enumerate(blobs):
        if b is None or i in bad:
            continue
        assert out[i] == ref.from_bytes(b)


# ------------------------------------------------------------------------------------------ flink-core Row
CORE_LEAVES = [
    (serializers.IntSerializer, st.integers(-(1 << 31), (1 << 31) - 1)),
    (serializers.LongSerializer, st.integers(-(1 << 63), (1 << 63) - 1)),
    (serializers.BooleanSerializer, st.booleans()),
    (serializers.DoubleSerializer, st.floats(allow_nan=False)),
    (serializers.CharSerializer, st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",))),
    (serializers.StringSerializer, st.text(max_size=30)),
    (serializers.BytePrimitiveArraySerializer, st.binary(max_size=20)),
]


@st.composite
def core_rows(draw: Any, depth: int = 0) -> tuple[Any, Any, st.SearchStrategy[Any]]:
    """(old RowSerializer, new RowSerializer, value strategy): same fields, RowKind flags may differ."""
    olds, news, strategies = [], [], []
    for _ in range(draw(st.integers(1, 5))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            o, n, s = draw(core_rows(depth + 1))
        else:
            cls, s = draw(st.sampled_from(CORE_LEAVES))
            o, n = cls(), cls()
        olds.append(o)
        news.append(n)
        strategies.append(st.one_of(st.none(), s))
    old_flag, new_flag = draw(st.booleans()), draw(st.booleans())
    return (serializers.RowSerializer(olds, supports_row_kind=old_flag),
            serializers.RowSerializer(news, supports_row_kind=new_flag), st.tuples(*strategies))


@SETTINGS
@given(st.data())
def test_core_row_migrate_equals_reference(data: st.DataObject) -> None:
    from statemorph.row import Row, RowKind

    old, new, values = data.draw(core_rows())
    snap = old.snapshot_configuration()
    kinds = st.sampled_from(list(RowKind)) if old.supports_row_kind else st.just(RowKind.INSERT)
    rows = data.draw(st.lists(st.one_of(st.none(), st.builds(Row, values, kinds)), max_size=10))
    blobs = [None if r is None else old.to_bytes(r) for r in rows]
    expected = [None if b is None else migrate_bytes(snap, new, b) for b in blobs]
    arr = pa.array(blobs, type=pa.binary())
    for name, r in _all_tiers(lambda: arrow.migrate(arr, snap, new).to_pylist()).items():
        assert r == ("ok", expected), name
    # corrupt copies (cut, or a byte replaced: booleans other than 01, overlong varints, null
    # strings under a 'present' mask bit): the reference's verdict and bytes, on both tiers
    cut = [None if b is None else b[:max(0, len(b) - data.draw(st.integers(0, 3)))] for b in blobs]
    for j, b in enumerate(cut):
        if b and data.draw(st.booleans()):
            at = data.draw(st.integers(0, len(b) - 1))
            cut[j] = b[:at] + bytes([data.draw(st.sampled_from([0, 2, 7, 0x80, 0xFF]))]) + b[at + 1:]
    carr = pa.array(cut, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.migrate(carr, snap, new, on_error="null")
        return out.to_pylist(), [(e.row, e.field_path) for e in errs]

    def reference(b: bytes | None) -> bytes | None:
        try:
            return None if b is None else migrate_bytes(snap, new, b)
        except StateFormatError:
            return None

    verdicts = _all_tiers(run)
    assert all(v[0] == "ok" for v in verdicts.values()), verdicts
    assert len({repr(v) for v in verdicts.values()}) == 1, verdicts
    assert verdicts["python"][1][0] == [reference(b) for b in cut]
