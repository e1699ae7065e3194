"""flink-core Row (``RowSerializer``) encode / decode kernels equal the reference, byte for byte.

Three oracles in one process: the per-value reference serializer (``RowSerializer.to_bytes`` /
``from_bytes`` with the Arrow mapping of ``statemorph.bulk.types``, i.e. today's per-value path), the
Python twins (``kernels.corerow_py``) and the compiled kernels (``kernels/_native/corerow.pyx``).
Random Row types (primitives, Char, String, byte[], nested rows, both mask layouts), values with
nulls and astral characters, and hostile entries come from hypothesis.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import on_tiers

from statemorph import arrow, bulk, serializers
from statemorph.bulk.types import arrow_type_for, to_arrow_value
from statemorph.kernels import abi, plans
from statemorph.row import Row, RowKind
from statemorph.serializers.tuples import RowSerializer

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_LEAVES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (serializers.BooleanSerializer(), st.booleans()),
    (serializers.ByteSerializer(), st.integers(-128, 127)),
    (serializers.ShortSerializer(), st.integers(-(1 << 15), (1 << 15) - 1)),
    (serializers.IntSerializer(), st.integers(-(1 << 31), (1 << 31) - 1)),
    (serializers.LongSerializer(), st.integers(-(1 << 63), (1 << 63) - 1)),
    (serializers.FloatSerializer(), st.floats(width=32)),
    (serializers.DoubleSerializer(), st.floats()),
    (serializers.CharSerializer(), st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])),
    (serializers.StringSerializer(), st.one_of(st.text(max_size=12), st.text(min_size=100, max_size=200),
                                               st.just("😀𝄞 astral"))),
    (serializers.BytePrimitiveArraySerializer(), st.binary(max_size=40)),
]


@st.composite
def row_serializers(draw: st.DrawFn, depth: int = 0) -> tuple[RowSerializer, st.SearchStrategy[Any]]:
    """A RowSerializer and a strategy for its values (tuples with None anywhere)."""
    n = draw(st.integers(1, 5))
    fields, values = [], []
    for _ in range(n):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            ser, vals = draw(row_serializers(depth + 1))
        else:
            ser, vals = draw(st.sampled_from(_LEAVES))
        fields.append(ser)
        values.append(st.one_of(st.none(), vals))
    names = draw(st.one_of(st.none(), st.just([f"c{i}" for i in range(n)])))
    row = RowSerializer(fields, supports_row_kind=draw(st.booleans()), field_names=names)
    return row, st.tuples(*values)


@st.composite
def cases(draw: st.DrawFn) -> tuple[RowSerializer, list[Any]]:
    ser, values = draw(row_serializers())
    rows = draw(st.lists(st.one_of(st.none(), values), max_size=12))
    return ser, rows


def _norm(v: Any) -> Any:
    """Values comparable with ==: every NaN alike (Java canonicalises them, Arrow compares them unequal)."""
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    return v


def _struct(ser: RowSerializer, rows: list[Any]) -> pa.Array:
    conv = to_arrow_value(ser)
    return pa.array([conv(r) for r in rows], type=arrow_type_for(ser))


def _errors(errs: list[Any]) -> list[tuple[Any, ...]]:
    return [(type(e).__name__, e.row, e.field_path, e.code) for e in errs]


def _uses_kernel(ser: RowSerializer) -> None:
    assert plans.compile_core_row_codec(ser) is not None


@SETTINGS
@given(cases())
def test_encode_equals_reference(case: tuple[RowSerializer, list[Any]]) -> None:
    ser, rows = case
    _uses_kernel(ser)
    expected = [None if r is None else ser.to_bytes(r) for r in rows]
    arr = _struct(ser, rows)
    for tier, out in on_tiers(lambda: arrow.encode(arr, ser)).items():
        assert out.type == pa.binary(), tier
        assert out.to_pylist() == expected, tier


@SETTINGS
@given(cases(), st.lists(st.sampled_from(list(RowKind)), min_size=12, max_size=12))
def test_decode_equals_reference(case: tuple[RowSerializer, list[Any]], kinds: list[RowKind]) -> None:
    ser, rows = case
    raw = [None if r is None else ser.to_bytes(Row(r, kinds[i])) for i, r in enumerate(rows)]
    conv = to_arrow_value(ser)
    # the per-value path: from_bytes, then the Arrow mapping (it drops the RowKind)
    expected = pa.array([None if b is None else conv(ser.from_bytes(b)) for b in raw], type=arrow_type_for(ser))
    binary = pa.array(raw, type=pa.binary())
    for tier, out in on_tiers(lambda: arrow.decode(binary, ser)).items():
        assert out.type == expected.type, tier
        assert _norm(out.to_pylist()) == _norm(expected.to_pylist()), tier
        out.validate(full=True)


@SETTINGS
@given(cases())
def test_round_trip_large_inputs_and_slices(case: tuple[RowSerializer, list[Any]]) -> None:
    ser, rows = case
    arr = _struct(ser, rows + rows)
    part = arr.slice(len(rows) // 2, len(rows))
    expected = [None if r is None else ser.to_bytes(r) for r in _rows(ser, part)]
    for tier, (enc, back) in on_tiers(lambda: _round_trip(part, ser)).items():
        assert enc.to_pylist() == expected, tier
        assert _norm(back.to_pylist()) == _norm(part.to_pylist()), tier


def _rows(ser: RowSerializer, arr: pa.Array) -> list[Any]:
    """The reference serializer's values for an Arrow struct (positional, as the per-value path)."""
    from statemorph.bulk.types import from_arrow_value

    conv = from_arrow_value(ser)
    return [conv(v) for v in arr.to_pylist()]


def _round_trip(arr: pa.Array, ser: RowSerializer) -> tuple[pa.Array, pa.Array]:
    large = arr.cast(_large(arr.type))  # large_string / large_binary inputs
    enc = arrow.encode(large, ser)
    assert enc.equals(arrow.encode(arr, ser))
    return enc, arrow.decode(enc.cast(pa.large_binary()), ser)


def _large(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _large(f.type)) for f in t])
    if pa.types.is_string(t):
        return pa.large_string()
    return pa.large_binary() if pa.types.is_binary(t) else t


# ---------------------------------------------------------------------------------- hostile entries

def _corrupt(raw: bytes, how: str, at: int) -> bytes:
    if how == "truncate":
        return raw[:at % len(raw)]
    if how == "trailing":
        return raw + b"\x00"
    if how == "flip":
        i = at % len(raw)
        return raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1:]
    # a huge / negative length where a 4-byte length could be: every offset is tried by hypothesis
    i = at % len(raw)
    return raw[:i] + struct.pack(">i", -5 if how == "negative" else 0x7FFFFFF0) + raw[i + 4:]


@SETTINGS
@given(cases(), st.lists(st.tuples(st.sampled_from(["truncate", "trailing", "flip", "negative", "huge"]),
                                   st.integers(0, 1 << 16)), min_size=1, max_size=12))
def test_hostile_entries_same_errors_on_both_tiers(case: tuple[RowSerializer, list[Any]],
                                                   damage: list[tuple[str, int]]) -> None:
    ser, rows = case
    raw = [None if r is None else ser.to_bytes(r) for r in rows]
    for j, (how, at) in enumerate(damage):
        if j < len(raw) and raw[j]:
            raw[j] = _corrupt(raw[j], how, at)
    binary = pa.array(raw, type=pa.binary())
    results = on_tiers(lambda: bulk.decode(binary, ser, on_error="null"))
    (out0, errs0) = results["python"]
    for tier, (out, errs) in results.items():
        assert _errors(errs) == _errors(errs0), tier
        assert _norm(out.to_pylist()) == _norm(out0.to_pylist()), tier
        out.validate(full=True)
    # the bad rows are the ones the reference refuses, with the same error class, for damage the
    # reference reports cleanly (it does not turn lone surrogates into typed errors)
    for i, b in enumerate(raw):
        if b is None:
            continue
        try:
            ref = ser.from_bytes(b)
            ref_err = None
        except Exception as e:  # noqa: BLE001 - compared below
            ref, ref_err = None, type(e).__name__
        bad = [e for e in errs0 if e.row == i]
        if bad and bad[0].code == abi.ERR_LONE_SURROGATE:
            continue  # the reference reads on (Java strings may hold one) and may fail later or not
        if ref_err is not None:
            assert bad and type(bad[0]).__name__ == ref_err, (i, ref_err, bad)
        else:
            assert not bad and _norm(out0[i].as_py()) == _norm(to_arrow_value(ser)(ref)), (i, bad)


@SETTINGS
@given(cases(), st.integers(0, 11))
def test_raise_mode_names_first_bad_row_and_field(case: tuple[RowSerializer, list[Any]], which: int) -> None:
    ser, rows = case
    raw = [None if r is None else ser.to_bytes(r) for r in rows]
    targets = [i for i, b in enumerate(raw) if b]
    if not targets:
        return
    bad = targets[which % len(targets)]
    raw[bad] = raw[bad][:-1]
    binary = pa.array(raw, type=pa.binary())

    def run() -> tuple[str, int, str, int]:
        try:
            arrow.decode(binary, ser)
        except Exception as e:  # noqa: BLE001 - compared across tiers
            return type(e).__name__, e.row, e.field_path, e.code  # type: ignore[attr-defined]
        raise AssertionError("a truncated entry decoded")

    got = on_tiers(run)
    assert len(set(got.values())) == 1, got
    assert got["python"][0] == "TruncatedDataError"
    assert got["python"][1] == bad
