"""RowData encode / decode kernels (``encode_run`` / ``decode_run``): compiled tier == Python tier ==
per-value reference serializer, beyond what ``test_native_equivalence`` covers.

The compiled kernels walk BLK (256) rows at a time, column by column, and hand a block with a bad
entry or a full buffer to the row-at-a-time walk. So these tests use arrays longer than one block,
slices that start mid-block, bad rows in the middle of a block, threads, and hostile entries that
make the string buffers grow: every path must give the same bytes, arrays, error rows and field
paths on both tiers. ARRAY, MAP and MULTISET fields go through the kernels too (of anything the
kernels handle, rows, arrays and maps included, at any depth; a map whose keys may repeat goes to
the reference per entry: duplicate keys collapse on encode and fail on decode), and so do
DECIMAL(p > 18) and TIMESTAMP(p > 3).
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from bulk.rows import ARROW_LEAVES
from bulk.rows import all_tiers as _all_tiers  # names the tests use (hypothesis seeds from their source)
from bulk.rows import arrow_rows as _arrow_rows
from bulk.rows import ref_bytes as _ref_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import row_types_over as row_types
from strategies import values_for
from tiers import TIERS

from statemorph import arrow, bulk, kernels, serializers
from statemorph.errors import MalformedDataError, SerializationError, TruncatedDataError
from statemorph.kernels import abi, plans
from statemorph.types import (
    ArrayType,
    BigIntType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])


@st.composite
def many_rows(draw: Any) -> tuple[RowType, list[Any]]:
    """A random row type and 300..700 rows (more than two kernel blocks), a few of them null."""
    t = draw(row_types(ARROW_LEAVES))
    pool = draw(st.lists(st.tuples(*[values_for(f.type) for f in t.fields]), min_size=1, max_size=8))
    n = draw(st.integers(300, 700))
    picks = np.random.default_rng(draw(st.integers(0, 2**32))).integers(0, len(pool) + 1, n)
    return t, [None if p == len(pool) else pool[p] for p in picks]


@SETTINGS
@given(many_rows(), st.integers(0, 300), st.sampled_from([1, 2]))
def test_encode_decode_many_rows_all_paths_agree(case: tuple[RowType, list[Any]], cut: int, threads: int) -> None:
    t, rows = case
    s = serializers.RowDataSerializer(t)
    expected = _ref_bytes(s, rows)
    arr = _arrow_rows(t, rows).slice(cut)
    want = expected[cut:]
    for name, r in _all_tiers(lambda: arrow.encode(arr, s, threads=threads).to_pylist()).items():
        assert r == ("ok", want), name
    blobs = pa.array(expected, type=pa.binary()).slice(cut)
    decoded = _arrow_rows(t, [None if b is None else s.from_bytes(b) for b in want])
    for name, r in _all_tiers(lambda: arrow.decode(blobs, s, threads=threads)).items():
        assert r[0] == "ok", (name, r)
        assert r[1].equals(decoded), name
        assert r[1].null_count == decoded.null_count, name


def test_threads_split_large_arrays_identically() -> None:
    """n >= 1024 splits into ranges: joined output equals the one-range output, both tiers."""
    t = RowType.of(("a", BigIntType()), ("m", RowType.of(("s", VarCharType(2147483647)), ("i", IntType()))))
    s = serializers.RowDataSerializer(t)
    rows = [None if i % 97 == 0 else (i, None if i % 13 == 0 else ("x" * (i % 23), i)) for i in range(5000)]
    arr = _arrow_rows(t, rows)
    expected = _ref_bytes(s, rows)
    blobs = pa.array(expected, type=pa.large_binary())
    for threads in (1, 2, 3):
        encoded = _all_tiers(lambda th=threads: arrow.encode(arr, s, threads=th).to_pylist())
        for name, r in encoded.items():
            assert r == ("ok", expected), (name, threads)
        for name, r in _all_tiers(lambda th=threads: arrow.decode(blobs, s, threads=th)).items():
            assert r[0] == "ok" and r[1].equals(arr), (name, threads)


@SETTINGS
@given(st.integers(0, 599), st.integers(0, 599), st.sampled_from(["raise", "null", "skip"]))
def test_encode_not_null_violation_mid_block(bad1: int, bad2: int, on_error: str) -> None:
    """A NULL in a NOT NULL nested field: same error (row, field path) on both tiers, in every
    on_error mode; the other rows encode as the reference does."""
    t = RowType.of(("id", BigIntType()), ("m", RowType.of(("s", VarCharType(2147483647)),
                                                          ("n", IntType(nullable=False)))))
    s = serializers.RowDataSerializer(t)
    rows: list[Any] = [(i, (f"v{i}" * (i % 5), i)) for i in range(600)]
    arr = pa.array([{"id": i, "m": {"s": v[0], "n": None if i in (bad1, bad2) else v[1]}}
                    for i, v in rows], type=arrow.arrow_type(t))

    def run() -> Any:
        out = bulk.encode(arr, s, on_error=on_error)
        return out.values.to_pylist(), [(e.row, e.field_path, type(e).__name__) for e in out.errors]

    results = _all_tiers(run)
    assert len({repr(r) for r in results.values()}) == 1, results
    r = results["python"]
    if on_error == "raise":
        assert r == ("error", "SerializationError", min(bad1, bad2), "m.n")
        return
    out = r[1][0]
    want = [None if i in (bad1, bad2) else s.to_bytes(rows[i]) for i in range(len(rows))]
    if on_error == "skip":
        want = [w for i, w in enumerate(want) if i not in (bad1, bad2)]
    assert out == want
    assert r[1][1] == [(b, "m.n", "SerializationError") for b in sorted({bad1, bad2})]


def same_values(a: pa.Array, b: pa.Array, nan_bits: bool) -> bool:
    """``a.equals(b)``, except that a NaN equals a NaN (Arrow's ``equals`` never holds for arrays
    with a NaN, so a flipped exponent bit in a FLOAT field made equal outputs look different).
    With ``nan_bits`` the NaNs must have the same bits (the kernel tiers copy them); without, any
    NaN equals any NaN (the reference quiets a signalling NaN: float32 → Python float)."""
    if a.type != b.type or len(a) != len(b) or a.null_count != b.null_count:
        return False
    if not a.is_valid().equals(b.is_valid()):
        return False
    if pa.types.is_struct(a.type):
        return all(same_values(x, y, nan_bits) for x, y in zip(a.flatten(), b.flatten(), strict=True))
    if pa.types.is_floating(a.type):
        keep = a.is_valid()
        x, y = a.filter(keep).to_numpy(zero_copy_only=False), b.filter(keep).to_numpy(zero_copy_only=False)
        if nan_bits:
            return bool(np.array_equal(x.view(f"u{x.itemsize}"), y.view(f"u{y.itemsize}")))
        return bool(np.array_equal(x, y, equal_nan=True))
    return a.equals(b)


@SETTINGS
@given(st.data())
def test_decode_corruption_in_long_arrays_same_verdict(data: st.DataObject) -> None:
    """Cut / flipped bytes in a few entries of a long array: both tiers flag the same rows with the
    same field paths and decode every other entry as the reference does."""
    t, rows = data.draw(many_rows())
    s = serializers.RowDataSerializer(t)
    blobs = _ref_bytes(s, rows)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(blobs) - 1))
        if not blobs[i]:  # a null entry, or one an earlier draw cut to nothing
            continue
        ba = bytearray(blobs[i])
        if data.draw(st.booleans()):
            j = data.draw(st.integers(0, len(ba) - 1))
            ba[j] = data.draw(st.integers(0, 255))
        else:
            ba = ba[:data.draw(st.integers(0, len(ba) - 1))]
        blobs[i] = bytes(ba)
    arr = pa.array(blobs, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.decode(arr, s, on_error="null")
        return out, [(e.row, e.field_path, type(e).__name__) for e in errs]

    verdicts = _all_tiers(run)
    assert all(v[0] == "ok" for v in verdicts.values()), verdicts
    outs = [v[1] for v in verdicts.values()]
    assert all(o[1] == outs[0][1] for o in outs), verdicts
    assert all(same_values(o[0], outs[0][0], nan_bits=True) for o in outs)
    bad = {row for row, _, _ in outs[0][1]}
    got = outs[0][0]
    for i, b in enumerate(blobs):
        if b is None or i in bad:
            assert not got[i].is_valid, i
            continue
        assert same_values(got.slice(i, 1), _arrow_rows(t, [s.from_bytes(b)]), nan_bits=False), i


@pytest.mark.parametrize("tier", TIERS)
def test_compact_decimal_past_its_precision_is_a_bad_row(tier: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corrupted compact DECIMAL(p, s) can hold more than p digits (Flink reads the unscaled long
    as it is); Arrow's decimal128(p, s) cannot, so decode makes it a bad row naming the field, as
    the per-value path does, on both tiers."""
    monkeypatch.setattr(kernels, "KERNELS", kernels.tier(tier))
    s = serializers.RowDataSerializer("ROW<a INT, r ROW<d DECIMAL(10, 2)>>")
    good = s.to_bytes((1, (decimal.Decimal("12345678.91"),)))
    raw = bytearray(good)
    slot = 4 + 24 + 8  # entry length, outer fixed part, nested null bits: the DECIMAL's slot
    raw[slot:slot + 8] = (10 ** 10).to_bytes(8, "little", signed=True)
    arr = pa.array([good, bytes(raw), good], pa.binary())
    out, errs = bulk.decode(arr, s, on_error="null")
    assert [(e.row, e.field_path) for e in errs] == [(1, "r.d")]
    assert out.is_valid().to_pylist() == [True, False, True]
    assert out.to_pylist()[0] == {"a": 1, "r": {"d": decimal.Decimal("12345678.91")}}
    with pytest.raises(MalformedDataError, match="row 1, field r.d"):
        arrow.decode(arr, s)


def _entry(row: bytes) -> bytes:
    return struct.pack(">i", len(row)) + row


def test_decode_overlapping_string_refs_grow_the_buffers() -> None:
    """Hostile but valid: many string fields pointing at the same var-part bytes decode to more
    string bytes than the input holds; both tiers grow their buffers and agree."""
    arity = 12
    t = RowType.of(*[(f"s{j}", VarCharType(2147483647)) for j in range(arity)])
    s = serializers.RowDataSerializer(t)
    fixed = 8 + 8 * arity
    text = "é" * 100
    raw = text.encode()
    slot = struct.pack("<Q", (fixed << 32) | len(raw))
    row = bytes(8) + slot * arity + raw + bytes(-len(raw) % 8)
    blobs = pa.array([_entry(row)] * 3, type=pa.binary())
    expected = _arrow_rows(t, [tuple([text] * arity)] * 3)
    for name, r in _all_tiers(lambda: arrow.decode(blobs, s)).items():
        assert r[0] == "ok", (name, r)
        assert r[1].equals(expected), name


@pytest.mark.parametrize("tier", ["python", "native"])
def test_kernels_resume_after_a_bad_entry(tier: str) -> None:
    """The kernel contract: a bad entry stops the run with its encoded error and is null in every
    output; resuming at the next row continues where it left off."""
    if tier == "native" and not kernels.native_available():
        pytest.skip("native tier not built")
    k = kernels.tier(tier)
    t = RowType.of(("a", IntType()), ("s", VarCharType(2147483647)))
    s = serializers.RowDataSerializer(t)
    prog = plans.compile_row_program(t)
    blobs = [s.to_bytes((i, "abcdefghij"[: i % 11])) for i in range(600)]
    blobs[300] = blobs[300][:-3]
    arr = pa.array(blobs, type=pa.binary())
    offsets, data, validity, offset, wide = bulk.inputs.binary_input(arr)
    nn = len(prog.matrix)
    bits = [np.zeros(75, dtype=np.uint8) for _ in range(nn)]
    soffs = np.zeros(601, dtype=np.int32)
    outs = [(bits[0], None, None, None), (bits[1], np.zeros(2400, dtype=np.uint8), None, None),
            (bits[2], None, soffs, np.empty(4000, dtype=np.uint8))]
    counts = np.zeros(nn, dtype=np.int64)
    spos = np.zeros(nn, dtype=np.int64)
    i, status = k.decode_run(prog.matrix, offsets, data, validity, offset, wide, 0, 600, outs, counts, spos)
    assert i == 300 and abi.decode_err(status) == (abi.ERR_TRUNCATED, -1)
    assert not bits[0][300 >> 3] >> (300 & 7) & 1
    i, status = k.decode_run(prog.matrix, offsets, data, validity, offset, wide, 301, 600, outs, counts, spos)
    assert (i, status) == (600, 0)
    assert list(counts) == [599, 599, 599]
    assert soffs[301] == soffs[300] == sum(j % 11 for j in range(300))
    assert int(spos[2]) == soffs[600] == sum(j % 11 for j in range(600) if j != 300)


def test_encode_error_message_names_row_and_field() -> None:
    t = RowType.of(("m", RowType.of(("n", IntType(nullable=False)),)),)
    s = serializers.RowDataSerializer(t)
    arr = pa.array([{"m": {"n": 1}}] * 400 + [{"m": {"n": None}}], type=arrow.arrow_type(t))
    for name, r in _all_tiers(lambda: arrow.encode(arr, s)).items():
        assert r == ("error", "SerializationError", 400, "m.n"), name
    with pytest.raises(SerializationError, match="row 400, field m.n"):
        arrow.encode(arr, s)


_SMALL_ROW = RowType.of(("a", IntType()), ("s", VarCharType(2147483647)))
ARRAY_LEAVES = ARROW_LEAVES + [
    ArrayType(IntType()), ArrayType(VarCharType(2147483647)), ArrayType(_SMALL_ROW), ArrayType(ArrayType(BigIntType())),
    ArrayType(BooleanType()), ArrayType(DecimalType(10, 2)), ArrayType(IntType(nullable=False)),
    ArrayType(VarBinaryType(2147483647)), ArrayType(TinyIntType()), ArrayType(SmallIntType()), ArrayType(DoubleType()),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_encode_arrays_equal_reference(data: st.DataObject) -> None:
    """ARRAY fields (of primitives, strings, rows, arrays) encode in the kernels, byte for byte as
    the reference serializer, on both tiers, whole and sliced; decoding gives the values back."""
    _round_trip_on_all_tiers(data, ARRAY_LEAVES)


def _round_trip_on_all_tiers(data: st.DataObject, leaves: list[Any]) -> None:
    """A random row type of ``leaves`` and rows: every tier encodes them as the reference serializer
    and decodes those bytes to what the per-value path gives (valid Arrow), whole and sliced."""
    t = data.draw(row_types(leaves))
    rows = data.draw(st.lists(st.one_of(st.none(), st.tuples(*[values_for(f.type) for f in t.fields])), max_size=10))
    s = serializers.RowDataSerializer(t)
    assert bulk.capabilities.row_program(s) is not None and bulk.capabilities.row_program(s, encode=True) is not None
    expected = _ref_bytes(s, rows)
    arr = _arrow_rows(t, rows)
    cut = data.draw(st.integers(0, len(rows)))
    for name, r in _all_tiers(lambda: arrow.encode(arr, s).to_pylist()).items():
        assert r == ("ok", expected), name
    for name, r in _all_tiers(lambda: arrow.encode(arr.slice(cut), s).to_pylist()).items():
        assert r == ("ok", expected[cut:]), name
    blobs = pa.array(expected, type=pa.binary())
    want = _arrow_rows(t, [None if b is None else s.from_bytes(b) for b in expected])
    for name, r in _all_tiers(lambda: arrow.decode(blobs, s)).items():
        assert r[0] == "ok", (name, r)
        r[1].validate(full=True)
        assert r[1].equals(want), name
    for name, r in _all_tiers(lambda: arrow.decode(blobs.slice(cut), s)).items():
        assert r[0] == "ok" and r[1].equals(want.slice(cut)), name


def test_encode_array_null_in_not_null_element() -> None:
    t = RowType.of(("id", IntType()), ("xs", ArrayType(IntType(nullable=False))))
    s = serializers.RowDataSerializer(t)
    arr = pa.array([{"id": 1, "xs": [1, 2]}] * 5 + [{"id": 2, "xs": [3, None]}], type=arrow.arrow_type(t))
    for name, r in _all_tiers(lambda: arrow.encode(arr, s)).items():
        assert r == ("error", "SerializationError", 5, "xs[]"), name
    out, errs = bulk.encode(arr, s, on_error="null")
    assert out.to_pylist() == [s.to_bytes((1, [1, 2]))] * 5 + [None]
    assert [(e.row, e.field_path) for e in errs] == [(5, "xs[]")]


def test_encode_arrays_grow_the_buffer() -> None:
    """Long arrays outgrow the size guess: the buffer grows (one thread and several)."""
    t = RowType.of(("xs", ArrayType(VarCharType(2147483647))),)
    s = serializers.RowDataSerializer(t)
    rows = [([f"element-{j}" * (j % 3) for j in range(i % 50)],) for i in range(3000)]
    arr = _arrow_rows(t, rows)
    expected = _ref_bytes(s, rows)
    for threads in (1, 2):
        for name, r in _all_tiers(lambda th=threads: arrow.encode(arr, s, threads=th).to_pylist()).items():
            assert r == ("ok", expected), (name, threads)


DECODE_ARRAY_LEAVES = ARROW_LEAVES + [
    ArrayType(IntType()), ArrayType(VarCharType(2147483647)), ArrayType(BooleanType()), ArrayType(DecimalType(10, 2)),
    ArrayType(IntType(nullable=False)), ArrayType(VarBinaryType(2147483647)), ArrayType(BigIntType()),
    ArrayType(TinyIntType()), ArrayType(SmallIntType()), ArrayType(DoubleType()), ArrayType(_SMALL_ROW),
    ArrayType(RowType.of(("r", _SMALL_ROW), ("d", DecimalType(20, 2)), ("t", TimestampType(6)))),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_decode_arrays_equal_reference(data: st.DataObject) -> None:
    """ARRAY fields of primitives / strings / rows decode in the kernels into Arrow lists equal to
    the reference values, on both tiers, whole and sliced, and the arrays pass Arrow's full validation."""
    _round_trip_on_all_tiers(data, DECODE_ARRAY_LEAVES)


def test_decode_arrays_grow_the_element_columns() -> None:
    """Many elements per entry outgrow the first guess of the element columns: they grow."""
    t = RowType.of(("xs", ArrayType(VarCharType(2147483647))), ("ys", ArrayType(IntType())))
    s = serializers.RowDataSerializer(t)
    rows = [([f"e{j}" * (j % 4) if j % 7 else None for j in range(i % 40)], list(range(i % 30))) for i in range(700)]
    blobs = pa.array(_ref_bytes(s, rows), type=pa.binary())
    want = _arrow_rows(t, rows)
    for threads in (1, 2):
        for name, r in _all_tiers(lambda th=threads: arrow.decode(blobs, s, threads=th)).items():
            assert r[0] == "ok" and r[1].equals(want), (name, threads)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_decode_arrays_corruption_same_verdict(data: st.DataObject) -> None:
    """Corrupt entries with arrays: both tiers flag the same rows and field paths, roll back the
    elements a bad entry had appended, and decode every other entry as the reference does."""
    t = RowType.of(("xs", ArrayType(VarCharType(2147483647))), ("n", IntType()),
                   ("ys", ArrayType(SmallIntType())), ("rs", ArrayType(_SMALL_ROW)), ("s", VarCharType(2147483647)))
    s = serializers.RowDataSerializer(t)
    rows = data.draw(st.lists(st.tuples(*[values_for(f.type) for f in t.fields]), min_size=1, max_size=12))
    blobs = _ref_bytes(s, rows)
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(blobs) - 1))
        ba = bytearray(blobs[i])
        j = data.draw(st.integers(0, len(ba) - 1))
        ba[j] = data.draw(st.integers(0, 255))
        blobs[i] = bytes(ba)
    arr = pa.array(blobs, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.decode(arr, s, on_error="null")
        out.validate(full=True)
        return out, [(e.row, e.field_path, type(e).__name__) for e in errs]

    verdicts = _all_tiers(run)
    assert all(v[0] == "ok" for v in verdicts.values()), verdicts
    outs = [v[1] for v in verdicts.values()]
    assert all(o[1] == outs[0][1] and o[0].equals(outs[0][0]) for o in outs), verdicts
    bad = {row for row, _, _ in outs[0][1]}
    for i, b in enumerate(blobs):
        if i not in bad:
            assert outs[0][0].slice(i, 1).equals(_arrow_rows(t, [s.from_bytes(b)])), i


BIG_LEAVES = ARROW_LEAVES + [DecimalType(20, 2), DecimalType(38, 10), DecimalType(19, 0), TimestampType(4),
                             TimestampType(6), TimestampType(9)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_big_decimal_and_timestamp_equal_reference(data: st.DataObject) -> None:
    """DECIMAL(p > 18) (Arrow decimal128) and TIMESTAMP(p > 3) (Arrow timestamp us / ns) encode
    and decode in the kernels, byte for byte / value for value as the reference, both tiers."""
    t = data.draw(row_types(BIG_LEAVES))
    rows = data.draw(st.lists(st.one_of(st.none(), st.tuples(*[values_for(f.type) for f in t.fields])), max_size=10))
    s = serializers.RowDataSerializer(t)
    try:
        expected = _ref_bytes(s, rows)
    except SerializationError:
        return  # the reference refuses some 38-digit draws (its own rounding context)
    arr = _arrow_rows(t, rows)
    for name, r in _all_tiers(lambda: arrow.encode(arr, s).to_pylist()).items():
        assert r == ("ok", expected), name
    blobs = pa.array(expected, type=pa.binary())
    want = _arrow_rows(t, [None if b is None else s.from_bytes(b) for b in expected])
    for name, r in _all_tiers(lambda: arrow.decode(blobs, s)).items():
        assert r[0] == "ok" and r[1].equals(want), (name, r)


def test_big_values_out_of_arrow_range_are_bad_rows() -> None:
    """A TIMESTAMP(9) whose nanoseconds overflow int64 and a DECIMAL(20, 0) stored with more digits
    than 20 are bad entries (ERR_TOO_LARGE, named field) on both tiers, not garbage."""
    t = RowType.of(("ts", TimestampType(9)), ("d", DecimalType(20, 0)))
    s = serializers.RowDataSerializer(t)
    good = s.to_bytes((None, decimal.Decimal(12345)))
    fixed = 8 + 16
    far = bytearray(s.to_bytes((dt.datetime(2000, 1, 1), None)))
    struct.pack_into("<q", far, 4 + fixed, 10 ** 15)  # epoch millis: beyond int64 nanoseconds
    wide = bytearray(good)
    wide[4 + fixed:4 + fixed + 9] = (10 ** 20).to_bytes(9, "big", signed=True)
    struct.pack_into("<Q", wide, 4 + 16, (fixed << 32) | 9)
    arr = pa.array([good, bytes(far), bytes(wide)], type=pa.binary())

    def run() -> Any:
        out, errs = bulk.decode(arr, s, on_error="null")
        return out.to_pylist(), [(e.row, e.field_path, e.code) for e in errs]

    verdicts = _all_tiers(run)
    assert len({repr(v) for v in verdicts.values()}) == 1, verdicts
    out, errs = verdicts["python"][1]
    assert errs == [(1, "ts", abi.ERR_TOO_LARGE), (2, "d", abi.ERR_TOO_LARGE)]
    assert out[0] == {"ts": None, "d": decimal.Decimal(12345)} and out[1] is None and out[2] is None


# ------------------------------------------------------------------- MAP / MULTISET, arrays in arrays
_STR = VarCharType(2147483647)
MAP_LEAVES = ARROW_LEAVES + [
    MapType(_STR, BigIntType()), MultisetType(_STR), MapType(IntType(), ArrayType(_STR)),
    ArrayType(ArrayType(IntType())), ArrayType(ArrayType(_STR)), ArrayType(ArrayType(ArrayType(BooleanType()))),
    ArrayType(MapType(SmallIntType(), _SMALL_ROW)), MapType(DoubleType(), DecimalType(10, 2)),
    MapType(BooleanType(), ArrayType(ArrayType(VarBinaryType(2147483647)))), MapType(_SMALL_ROW, IntType()),
    MapType(DateType(), RowType.of(("m", MapType(_STR, IntType())), ("xs", ArrayType(ArrayType(TinyIntType()))))),
    MapType(_STR, BigIntType(), nullable=False), MultisetType(IntType(nullable=False)),
    MapType(FloatType(), MultisetType(BigIntType())), ArrayType(MultisetType(_STR)),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_maps_and_nested_arrays_equal_reference(data: st.DataObject) -> None:
    """Rows with MAP / MULTISET fields and arrays of arrays (null, empty, null values, at any
    depth) encode in the kernels byte for byte as the reference serializer and decode to what the
    per-value path gives, on both tiers, whole and sliced, passing Arrow's full validation."""
    _round_trip_on_all_tiers(data, MAP_LEAVES)


_KEY_TYPES = [(_STR, st.sampled_from(["a", "b", "a-long-key-in-the-var-part", ""])),
              (DoubleType(), st.sampled_from([0.0, -0.0, 1.5, float("nan")])),
              (BooleanType(), st.booleans()), (IntType(), st.integers(0, 3)),
              (DecimalType(10, 2), st.sampled_from([decimal.Decimal("1.00"), decimal.Decimal("-2.50")])),
              (_SMALL_ROW, st.tuples(st.integers(0, 1), st.sampled_from(["x", None])))]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_encode_duplicate_keys_as_the_reference(data: st.DataObject) -> None:
    """An Arrow map may repeat a key (or hold -0.0 and 0.0, or NaNs): the reference collapses them
    (a dict: the first key's place, the last value); the kernels hand such entries back to it, so
    every tier gives the per-value path's bytes, in every on_error mode."""
    kt, keys = data.draw(st.sampled_from(_KEY_TYPES))
    t = RowType.of(("id", IntType()), ("m", MapType(kt, BigIntType(nullable=False))), ("s", _STR))
    s = serializers.RowDataSerializer(t)
    pairs = st.lists(st.tuples(keys, st.one_of(st.none(), st.integers(-5, 5))), max_size=6)
    rows = data.draw(st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 9), st.one_of(st.none(), pairs),
                                                              st.text(max_size=9))), min_size=1, max_size=12))
    arr = pa.array([None if r is None else {"id": r[0], "m": None if r[1] is None else
                                            [(bulk.types.logical_to_arrow(k, kt), v) for k, v in r[1]], "s": r[2]}
                    for r in rows], type=arrow.arrow_type(t))
    on_error = data.draw(st.sampled_from(["raise", "null"]))

    def per_value() -> Any:
        out, errs = bulk.encoder.encode_per_value(arr, s, bulk.row_errors.RowErrors(on_error, "encode", None), 0)
        return out.to_pylist(), [e.row for e in errs]

    def kernels() -> Any:
        out = bulk.encode(arr, s, on_error=on_error)
        return out.values.to_pylist(), [e.row for e in out.errors]

    want = _all_tiers(per_value)["python"]
    for name, r in _all_tiers(kernels).items():
        if want[0] == "error":  # a null value of a key kept last: the same row fails
            assert r[:3] == want[:3], name
        else:
            assert r == want, name


def _map_blobs(data: st.DataObject, s: Any, t: RowType) -> list[bytes]:
    """Entries written by the reference from lists of pairs: duplicate and null keys included."""
    pairs = st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["k", "kk", "a-long-key-in-the-var-part"])),
                               st.one_of(st.none(), st.integers(-9, 9))), max_size=5)
    rows = data.draw(st.lists(st.tuples(st.integers(0, 9), st.one_of(st.none(), pairs),
                                        st.lists(st.one_of(st.none(), pairs), max_size=3)), min_size=1, max_size=12))
    return [s.to_bytes(r) for r in rows]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_decode_duplicate_null_keys_and_corruption_same_verdict(data: st.DataObject) -> None:
    """Entries with duplicate or null map keys, at the top and inside an array, some corrupted:
    every tier flags the same rows with the same field paths and error types, the rows the
    per-value path flags among them (with its very errors for the rerouted maps), and decodes
    every other entry as the reference does."""
    t = RowType.of(("n", IntType()), ("m", MapType(_STR, IntType())), ("ms", ArrayType(MapType(_STR, IntType()))))
    s = serializers.RowDataSerializer(t)
    blobs = _map_blobs(data, s, t)
    for _ in range(data.draw(st.integers(0, 2))):
        i = data.draw(st.integers(0, len(blobs) - 1))
        ba = bytearray(blobs[i])
        ba[data.draw(st.integers(0, len(ba) - 1))] = data.draw(st.integers(0, 255))
        blobs[i] = bytes(ba)
    arr = pa.array(blobs, type=pa.binary())

    def run() -> Any:
        out, errs = bulk.decode(arr, s, on_error="null")
        out.validate(full=True)
        return out, [(e.row, e.field_path, type(e).__name__) for e in errs], {e.row: str(e) for e in errs}

    verdicts = _all_tiers(run)
    assert all(v[0] == "ok" for v in verdicts.values()), verdicts
    outs = [v[1] for v in verdicts.values()]
    assert all(o[1] == outs[0][1] and o[0].equals(outs[0][0]) for o in outs), verdicts
    ref, ref_errs = bulk.decoder.decode_per_value(arr, s, bulk.row_errors.RowErrors("null", "decode", None), 0)
    assert {e.row for e in ref_errs} == {row for row, _, _ in outs[0][1]}
    assert outs[0][0].equals(ref)
    for e in ref_errs:  # a rerouted map's error is the per-value path's own
        if "duplicate map key" in str(e) or "key field cannot contain null" in str(e):
            assert outs[0][2][e.row] == str(e)


@pytest.mark.parametrize("tier", TIERS)
def test_compact_decimal_past_its_precision_in_arrays_and_maps(tier: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corrupted compact DECIMAL(p, s) inside an array of arrays or a map value is a bad row
    naming its field, as at the top level, on both tiers."""
    monkeypatch.setattr(kernels, "KERNELS", kernels.tier(tier))
    t = RowType.of(("xs", ArrayType(ArrayType(DecimalType(10, 2)))), ("m", MapType(IntType(), DecimalType(10, 2))))
    s = serializers.RowDataSerializer(t)
    one = decimal.Decimal("12345678.91")
    good = s.to_bytes(([[one], [None, one]], {7: one}))
    big = (10 ** 10).to_bytes(8, "little", signed=True)
    at = [j for j in range(len(good)) if good[j:j + 8] == (1234567891).to_bytes(8, "little", signed=True)]
    assert len(at) == 3
    in_array, in_map = bytearray(good), bytearray(good)
    in_array[at[1]:at[1] + 8] = big
    in_map[at[2]:at[2] + 8] = big
    arr = pa.array([good, bytes(in_array), good, bytes(in_map), good], pa.binary())
    out, errs = bulk.decode(arr, s, on_error="null")
    assert [(e.row, e.field_path) for e in errs] == [(1, "xs[][]"), (3, "m.value[]")]
    assert out.is_valid().to_pylist() == [True, False, True, False, True]
    assert out.to_pylist()[4] == {"xs": [[one], [None, one]], "m": [(7, one)]}
    ref, ref_errs = bulk.decoder.decode_per_value(arr, s, bulk.row_errors.RowErrors("null", "decode", None), 0)
    assert [e.row for e in ref_errs] == [1, 3] and ref.equals(out)
    with pytest.raises(MalformedDataError, match=r"row 1, field xs\[\]\[\]"):
        arrow.decode(arr, s)
    with pytest.raises(TruncatedDataError, match="row 2: truncated"):  # the kernels stop there
        arrow.decode(pa.array([good, good, good[:20], bytes(in_map), bytes(in_array)], pa.binary()), s)


def test_map_keys_holding_arrays_encode_per_value() -> None:
    """MAP keys holding an ARRAY: the reference cannot make them dict keys, so encode keeps the
    per-value path (and its error); decode runs the kernels (every such map is rerouted)."""
    t = RowType.of(("m", MapType(ArrayType(IntType()), IntType())),)
    s = serializers.RowDataSerializer(t)
    assert bulk.capabilities.row_program(s, encode=True) is None and bulk.capabilities.row_program(s) is not None
    blobs = pa.array([s.to_bytes(({},)), s.to_bytes(({(1, 2): 3},)), s.to_bytes(({(1,): 3, (2,): 4},))], pa.binary())
    want, _ = bulk.decoder.decode_per_value(blobs, s, bulk.row_errors.RowErrors("raise", "decode", None), 0)
    for name, r in _all_tiers(lambda: arrow.decode(blobs, s)).items():
        assert r[0] == "ok" and r[1].equals(want), name


def test_encode_nan_elements_are_canonical() -> None:
    """A NaN FLOAT / DOUBLE array element (or map key / value) of any payload is written as Java's
    canonical NaN, as ``BinaryArrayWriter`` does; row fields keep their bits."""
    t = RowType.of(("xs", ArrayType(DoubleType())), ("fs", ArrayType(FloatType())),
                   ("m", MapType(IntType(), DoubleType())))
    s = serializers.RowDataSerializer(t)
    neg64 = np.frombuffer(struct.pack("<Q", 0xFFF8000000000001), dtype=np.float64)
    neg32 = np.frombuffer(struct.pack("<I", 0xFFC00001), dtype=np.float32)
    one = pa.array([0, 1], pa.int32())
    arr = pa.StructArray.from_arrays(
        [pa.ListArray.from_arrays(one, pa.array(neg64)), pa.ListArray.from_arrays(one, pa.array(neg32)),
         pa.MapArray.from_arrays(one, pa.array([3], pa.int32()), pa.array(neg64))], names=["xs", "fs", "m"])
    want = [s.to_bytes(([float("nan")], [float("nan")], {3: float("nan")}))]
    for name, r in _all_tiers(lambda: arrow.encode(arr, s).to_pylist()).items():
        assert r == ("ok", want), name


def test_decode_overlapping_nested_arrays_go_to_the_reference() -> None:
    """Every slot of an outer array pointing at one inner array of strings all pointing at one
    string: the reference rejects values holding more items than bytes (references overlap);
    the kernels meter the same way, stop early (no quadratic walk) and hand the entry to the
    reference, so every tier gives its verdict; a plain entry next to it decodes."""
    t = RowType.of(("xs", ArrayType(ArrayType(_STR))),)
    s = serializers.RowDataSerializer(t)
    n, word = 3000, b"overlapping string"
    header = 4 + 4 * ((n + 31) // 32)  # either array: count, null bits; then the slots
    fixed = (header + 8 * n + 7) & ~7
    inner = bytearray(fixed) + word + bytes((-len(word)) % 8)
    outer = bytearray(fixed)
    struct.pack_into("<i", inner, 0, n)
    struct.pack_into("<i", outer, 0, n)
    for j in range(n):
        struct.pack_into("<Q", inner, header + 8 * j, fixed << 32 | len(word))
        struct.pack_into("<Q", outer, header + 8 * j, fixed << 32 | len(inner))
    outer += inner
    row = bytes(8) + struct.pack("<Q", 16 << 32 | len(outer)) + bytes(outer)
    good = s.to_bytes(([["a", "bbbbbbbbbbbbbbbbbb"]],))
    arr = pa.array([good, _entry(row), good], pa.binary())
    ref, ref_errs = bulk.decoder.decode_per_value(arr, s, bulk.row_errors.RowErrors("null", "decode", None), 0)
    assert [e.row for e in ref_errs] == [1] and "references overlap" in str(ref_errs[0])
    for name, r in _all_tiers(lambda: bulk.decode(arr, s, on_error="null")).items():
        assert r[0] == "ok" and r[1][0].equals(ref), name
        assert [(e.row, str(e)) for e in r[1][1]] == [(1, str(ref_errs[0]))], name
