"""Bulk encode / decode of flink-core ``Row`` (``RowSerializer``) through the one-pass kernels, on
both tiers: Flink's bytes, input shapes (slices, chunks, large types, int widths), nulls, the
RowKind, error modes, buffer growth, threads and the per-value fallback."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from tiers import TIERS

from statemorph import arrow, bulk, kernels, serializers
from statemorph.bulk.types import arrow_type_for
from statemorph.errors import MalformedDataError, SerializationError, TruncatedDataError
from statemorph.kernels import abi, plans
from statemorph.row import Row, RowKind
from statemorph.serializers.tuples import RowSerializer

META = RowSerializer([serializers.IntSerializer(), serializers.LongSerializer(), serializers.StringSerializer()],
                     field_names=["userId", "timestamp", "deviceType"])
EVENTS = RowSerializer([serializers.LongSerializer(), META], field_names=["eventId", "metadata"])
EVENTS_TYPE = pa.struct([("eventId", pa.int64()),
                         ("metadata", pa.struct([("userId", pa.int32()), ("timestamp", pa.int64()),
                                                 ("deviceType", pa.string())]))])


@pytest.fixture
def impl(tier: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared ``tier`` fixture (tests/conftest.py), with the per-value fallback forbidden."""
    # the kernel path must be the one taken: the per-value fallback fails the test
    monkeypatch.setattr(bulk.encoder, "encode_per_value", _no_fallback)
    monkeypatch.setattr(bulk.decoder, "decode_per_value", _no_fallback)
    return tier


def _no_fallback(*args: Any) -> Any:
    raise AssertionError("took the per-value path")


def events(n: int) -> list[dict[str, Any] | None]:
    out: list[dict[str, Any] | None] = []
    for i in range(n):
        if i % 17 == 5:
            out.append(None)
        elif i % 13 == 3:
            out.append({"eventId": i, "metadata": None})
        else:
            out.append({"eventId": i, "metadata": {"userId": i % 1000, "timestamp": 1_700_000_000_000 + i,
                                                   "deviceType": ["phone", "tablet", "télé 📺", None][i % 4]}})
    return out


def reference(ser: RowSerializer, rows: list[Any]) -> list[bytes | None]:
    return [None if r is None else ser.to_bytes(tuple(_tuple(v) for v in r.values())) for r in rows]


def _tuple(v: Any) -> Any:
    return tuple(_tuple(x) for x in v.values()) if isinstance(v, dict) else v


# ------------------------------------------------------------------------------ bytes
def test_events_bytes_are_flink_format(impl: str) -> None:
    arr = pa.array([{"eventId": 7, "metadata": {"userId": 3, "timestamp": 1700000000000, "deviceType": "phone"}}],
                   type=EVENTS_TYPE)
    out = arrow.encode(arr, EVENTS)
    # mask 00 (INSERT, no nulls) ‖ long 7 ‖ mask 00 ‖ int 3 ‖ long ‖ StringValue "phone"
    assert out[0].as_py().hex() == ("00" "0000000000000007" "00" "00000003" "0000018bcfe56800" "06" "70686f6e65")
    assert arrow.decode(out, EVENTS).to_pylist() == arr.to_pylist()


@pytest.mark.parametrize("row_kind", [True, False])
def test_round_trip_with_nulls_both_mask_layouts(impl: str, row_kind: bool) -> None:
    meta = RowSerializer(META.field_serializers, supports_row_kind=row_kind, field_names=META.field_names)
    ser = RowSerializer([serializers.LongSerializer(), meta], supports_row_kind=row_kind,
                        field_names=["eventId", "metadata"])
    rows = events(100)
    arr = pa.array(rows, type=EVENTS_TYPE)
    out = arrow.encode(arr, ser)
    assert out.to_pylist() == reference(ser, rows)
    back = arrow.decode(out, ser)
    assert back.to_pylist() == rows
    assert back.null_count == arr.null_count
    assert back.field(1).null_count == sum(1 for r in rows if r is None or r["metadata"] is None)


def test_decode_drops_the_row_kind_and_encode_writes_insert(impl: str) -> None:
    """The top-level row's kind is left out (Arrow has no RowKind column; docs/bulk.md), as on
    the per-value path; encode writes INSERT."""
    raw = EVENTS.to_bytes(Row([1, Row([2, 3, "x"])], RowKind.UPDATE_AFTER))
    back = arrow.decode(pa.array([raw]), EVENTS)
    assert back.to_pylist() == [{"eventId": 1, "metadata": {"userId": 2, "timestamp": 3, "deviceType": "x"}}]
    again = arrow.encode(back, EVENTS)[0].as_py()
    assert again[0] == 0 and again != raw
    assert EVENTS.from_bytes(again).kind == RowKind.INSERT


def test_every_field_kind(impl: str) -> None:
    ser = RowSerializer([serializers.BooleanSerializer(), serializers.ByteSerializer(), serializers.ShortSerializer(),
                         serializers.IntSerializer(), serializers.LongSerializer(), serializers.FloatSerializer(),
                         serializers.DoubleSerializer(), serializers.CharSerializer(), serializers.StringSerializer(),
                         serializers.BytePrimitiveArraySerializer()])
    rows = [(True, -1, -300, 1 << 30, -(1 << 62), 1.5, float("nan"), "é", "a😀b", b"\x00\xff"),
            (False, None, 7, None, 0, float("-inf"), -0.0, "\uffff", "", b""),
            (None,) * 10]
    arr = pa.array([dict(zip([f"f{i}" for i in range(10)], r, strict=True)) for r in rows],
                   type=arrow_type_for(ser))
    out = arrow.encode(arr, ser)
    assert out.to_pylist() == [ser.to_bytes(r) for r in rows]
    back = arrow.decode(out, ser).to_pylist()
    assert back[1] == dict(zip([f"f{i}" for i in range(10)], rows[1], strict=True))
    assert back[0]["f6"] != back[0]["f6"]  # NaN survives


# ------------------------------------------------------------------------------ input shapes
def test_slices_and_chunks_keep_row_numbers(impl: str) -> None:
    rows = events(60)
    arr = pa.array(rows, type=EVENTS_TYPE)
    part = arr.slice(7, 30)
    assert arrow.encode(part, EVENTS).to_pylist() == reference(EVENTS, rows[7:37])
    enc = arrow.encode(arr, EVENTS)
    assert arrow.decode(enc.slice(7, 30), EVENTS).to_pylist() == rows[7:37]
    bad = enc.to_pylist()
    bad[44] = bad[44][:-2]
    chunked = pa.chunked_array([pa.array(bad[:40], type=pa.binary()), pa.array(bad[40:], type=pa.binary())])
    with pytest.raises(TruncatedDataError) as e:
        arrow.decode(chunked, EVENTS)
    assert e.value.row == 44  # type: ignore[attr-defined]
    assert e.value.field_path == "metadata.deviceType"  # type: ignore[attr-defined]
    out, errs = bulk.decode(chunked, EVENTS, on_error="null")
    assert [x.row for x in errs] == [44]
    assert out.to_pylist()[:44] == rows[:44] and out.to_pylist()[44] is None


def test_large_and_narrower_int_inputs(impl: str) -> None:
    rows = events(20)
    arr = pa.array(rows, type=EVENTS_TYPE)
    renamed = [None if r is None else {"a": r["eventId"], "b": None if r["metadata"] is None else
                                       dict(zip("utd", r["metadata"].values(), strict=True))} for r in rows]
    wide = pa.array(renamed, type=pa.struct([("a", pa.int32()),  # fields match by position, as per value
                                             ("b", pa.struct([("u", pa.int64()), ("t", pa.int64()),
                                                              ("d", pa.large_string())]))]))
    assert arrow.encode(wide, EVENTS).equals(arrow.encode(arr, EVENTS))
    assert arrow.decode(arrow.encode(arr, EVENTS).cast(pa.large_binary()), EVENTS).to_pylist() == rows


def test_dictionary_and_view_columns(impl: str) -> None:
    rows = events(30)
    arr = pa.array(rows, type=EVENTS_TYPE)
    meta = arr.field(1)
    for device in (meta.field(2).dictionary_encode(), meta.field(2).cast(pa.string_view())):
        other = pa.StructArray.from_arrays(
            [arr.field(0), pa.StructArray.from_arrays([meta.field(0), meta.field(1), device],
                                                      names=["userId", "timestamp", "deviceType"],
                                                      mask=pa.array([r is None or r["metadata"] is None
                                                                     for r in rows]))],
            names=["eventId", "metadata"], mask=pa.array([r is None for r in rows]))
        assert arrow.encode(other, EVENTS).equals(arrow.encode(arr, EVENTS))


def test_out_of_range_int_column_takes_per_value_path(monkeypatch: pytest.MonkeyPatch) -> None:
    arr = pa.array([{"a": 1, "b": None}, {"a": 1 << 40, "b": None}],
                   type=pa.struct([("a", pa.int64()), ("b", pa.struct([("u", pa.int64()), ("t", pa.int64()),
                                                                        ("d", pa.string())]))]))
    ser = RowSerializer([serializers.IntSerializer(), META])
    out, errs = bulk.encode(arr, ser, on_error="null")
    assert out.to_pylist()[0] == ser.to_bytes((1, None)) and out[1].as_py() is None
    assert [x.row for x in errs] == [1]


def test_other_field_serializers_keep_the_per_value_path() -> None:
    ser = RowSerializer([serializers.ListSerializer(serializers.IntSerializer())])
    assert plans.compile_core_row_codec(ser) is None
    arr = pa.array([{"f0": [1, 2]}, None])
    assert arrow.encode(arr, ser).to_pylist() == [ser.to_bytes(([1, 2],)), None]


# ------------------------------------------------------------------------------ errors
def test_encode_char_errors_name_row_and_field(impl: str) -> None:
    ser = RowSerializer([serializers.CharSerializer()], field_names=["c"])
    arr = pa.array([{"c": "a"}, {"c": "ab"}, {"c": "😀"}, {"c": ""}, {"c": None}])
    with pytest.raises(SerializationError) as e:
        arrow.encode(arr, ser)
    assert (e.value.row, e.value.field_path, e.value.code) == (1, "c", abi.ERR_BAD_JCHAR)  # type: ignore[attr-defined]
    out, errs = bulk.encode(arr, ser, on_error="null")
    assert [x.row for x in errs] == [1, 2, 3]
    assert out.to_pylist() == [ser.to_bytes(("a",)), None, None, None, ser.to_bytes((None,))]
    assert arrow.encode(arr, ser, on_error="null").null_count == 3


def test_decode_error_modes(impl: str) -> None:
    raw = [EVENTS.to_bytes((i, (i, i, "ok"))) for i in range(6)]
    raw[1] = raw[1] + b"\x00"                      # trailing byte
    raw[3] = bytes([raw[3][0] | 0x01]) + raw[3][1:]  # a padding bit of the mask
    raw[4] = raw[4][:5]                            # truncated inside eventId
    arr = pa.array(raw)
    with pytest.raises(MalformedDataError) as e:
        arrow.decode(arr, EVENTS)
    assert (e.value.row, e.value.field_path) == (1, "")  # type: ignore[attr-defined]
    out, errs = bulk.decode(arr, EVENTS, on_error="null")
    assert [(x.row, x.field_path, type(x)) for x in errs] == [
        (1, "", MalformedDataError), (3, "", MalformedDataError), (4, "eventId", TruncatedDataError)]
    nulled = arrow.decode(arr, EVENTS, on_error="null")
    assert nulled.to_pylist() == out.to_pylist()
    assert [v is None for v in out.to_pylist()] == [False, True, False, True, True, False]


def test_hostile_lengths_never_allocate(impl: str) -> None:
    ser = RowSerializer([serializers.BytePrimitiveArraySerializer(), serializers.StringSerializer()])
    arr = pa.array([b"\x00\x7f\xff\xff\xff", b"\x00\xff\xff\xff\xfe", b"\x20\xff\xff\xff\xff\x07"])
    out, errs = bulk.decode(arr, ser, on_error="null")
    assert [(x.row, x.field_path, x.code) for x in errs] == [
        (0, "f0", abi.ERR_TRUNCATED), (1, "f0", abi.ERR_BAD_LENGTH), (2, "f1", abi.ERR_TRUNCATED)]
    assert out.null_count == 3


def test_lone_surrogate_is_a_typed_error(impl: str) -> None:
    ser = RowSerializer([serializers.CharSerializer(), serializers.StringSerializer()])
    raw = [ser.to_bytes(("\ud800", "x")), ser.to_bytes(("a", "x\udc00"))]
    out, errs = bulk.decode(pa.array(raw), ser, on_error="null")
    assert [(x.row, x.field_path, x.code) for x in errs] == [(0, "f0", abi.ERR_LONE_SURROGATE),
                                                              (1, "f1", abi.ERR_LONE_SURROGATE)]


# ------------------------------------------------------------------------------ buffers and threads
def test_buffers_grow_past_their_estimates(impl: str) -> None:
    ser = RowSerializer([serializers.StringSerializer(), serializers.StringSerializer(),
                         serializers.BytePrimitiveArraySerializer()])
    rows = [{"f0": "😀" * (200 + i), "f1": "", "f2": b"x" * i} for i in range(50)]  # 1.5 bytes out per byte in
    arr = pa.array(rows)
    out = arrow.encode(arr, ser)
    assert out.to_pylist() == reference(ser, rows)
    assert arrow.decode(out, ser).to_pylist() == rows  # one string column holds all the text


def test_threads_join_ranges(impl: str) -> None:
    rows = events(5000)
    arr = pa.array(rows, type=EVENTS_TYPE)
    one = arrow.encode(arr, EVENTS)
    four = arrow.encode(arr, EVENTS, threads=4)
    assert four.equals(one)
    bad = one.to_pylist()
    bad[3001] = bad[3001][:-1]
    out, errs = bulk.decode(pa.array(bad, type=pa.binary()), EVENTS, threads=4, on_error="null")
    assert [x.row for x in errs] == [3001]
    expected = list(rows)
    expected[3001] = None
    assert out.to_pylist() == expected
    out.validate(full=True)


def test_kernel_protocol_same_on_both_tiers() -> None:
    """Short buffers: both tiers stop at the same row and ask for the same capacity."""
    rows = events(40)
    arr = pa.array(rows, type=EVENTS_TYPE)
    prog = plans.compile_core_row_codec(EVENTS)
    assert prog is not None
    cols = bulk.inputs.core_row_columns(arr, prog)
    enc = arrow.encode(arr, EVENTS)
    offsets, data, validity, offset, wide = bulk.inputs.binary_input(enc)
    got = {}
    for tier in TIERS:
        k = kernels.tier(tier)
        out_off = np.zeros(41, dtype=np.int32)
        first = k.corerow_encode(prog.matrix, cols, 0, 40, out_off, np.zeros(100, dtype=np.uint8), 0)
        outs: list[Any] = [None]
        for kd in prog.kinds[1:]:
            vbits = np.zeros(5, dtype=np.uint8)
            if kd in plans.STRING_KINDS:
                outs.append([vbits, None, np.zeros(41, dtype=np.int32), np.zeros(7, dtype=np.uint8)])
            else:
                outs.append([vbits, None if kd == abi.LEAF_ROW else np.zeros(320, dtype=np.uint8), None, None])
        spos = np.zeros(len(prog.kinds), dtype=np.int64)
        stop = k.corerow_decode(prog.matrix, offsets, data, validity, offset, wide, 0, 40, outs, spos)
        got[tier] = (first, out_off.tolist(), stop, spos.tolist(), outs[5][2].tolist(), outs[5][3].tolist())
    assert got["python"][0][2] > 100 and got["python"][2][1] > 7
    assert len(set(map(repr, got.values()))) == 1, got


def test_migrate_copies_are_canonical_like_the_reference(impl: str) -> None:
    """Bytes the reference reads but would not write (a boolean byte 07, a NaN with a payload, an
    overlong string varint, a null string under a 'present' mask bit) migrate to what it writes."""
    from statemorph.migration import migrate_bytes

    old = RowSerializer([serializers.BooleanSerializer(), serializers.StringSerializer(),
                         serializers.DoubleSerializer()], supports_row_kind=False)
    new = RowSerializer(list(old.field_serializers), supports_row_kind=True)
    snap = old.snapshot_configuration()
    nan = b"\xff\xf0\x00\x00\x00\x00\x00\x01"
    raw = [b"\x00\x07\x02a" + nan, b"\x00\x01\x00" + nan, b"\x00\x00\x83\x00ab" + b"\x00" * 8]
    want = [migrate_bytes(snap, new, b) for b in raw]
    assert arrow.migrate(pa.array(raw), snap, new).to_pylist() == want
    assert want[1] == b"\x10\x01\x7f\xf8" + b"\x00" * 6 and want[2][2] == 3
