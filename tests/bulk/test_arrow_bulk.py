"""Bulk API behaviour on both tiers: Flink's own bytes, input shapes (slices, chunks, large_binary,
read-only buffers, the Arrow C data interface), nulls, error modes and threads."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statemorph import arrow, bulk, serializers
from statemorph.errors import (
    IncompatibleSchemaError,
    MalformedDataError,
    SerializationError,
    StateFormatError,
    TruncatedDataError,
)

OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
       "appVersion STRING, sessionId BIGINT>>")


@pytest.fixture
def impl(tier: str) -> str:
    """The shared ``tier`` fixture (tests/conftest.py) under this file's name for it."""
    return tier


def events(n: int) -> list[tuple[int, tuple[int, int, str] | None] | None]:
    out: list[tuple[int, tuple[int, int, str] | None] | None] = []
    for i in range(n):
        if i % 17 == 5:
            out.append(None)
        elif i % 13 == 3:
            out.append((i, None))
        else:
            out.append((i, (i % 1000, 1_700_000_000_000 + i, ["phone", "tablet", "smart-television-set"][i % 3])))
    return out


def as_struct(rows: list) -> pa.Array:
    s = serializers.RowDataSerializer(OLD)
    return pa.array([None if r is None else bulk.types.logical_to_arrow(r, s.row_type) for r in rows],
                    type=arrow.arrow_type(s.row_type))


# ------------------------------------------------------------------------------ Flink's bytes
def test_rowdata_flink_vector_bigint_string(impl: str) -> None:
    s = serializers.RowDataSerializer("ROW<a BIGINT, b STRING>")
    arr = pa.array([{"a": 7, "b": "abc"}, {"a": 7, "b": "hello world!"}, None],
                   type=pa.struct([("a", pa.int64()), ("b", pa.string())]))
    out = arrow.encode(arr, s).to_pylist()
    assert out[0] == bytes.fromhex("00000018" "0000000000000000" "0700000000000000" "6162630000000083")
    assert out[1] == bytes.fromhex("00000028" "0000000000000000" "0700000000000000" "0C00000018000000"
                                   "68656C6C6F20776F726C642100000000")
    assert out[2] is None
    back = arrow.decode(pa.array(out, pa.binary()), s)
    assert back.to_pylist() == arr.to_pylist()


def test_datastream_flink_vectors(impl: str) -> None:
    assert arrow.encode(pa.array([42], pa.int32()), serializers.IntSerializer()).to_pylist() == [
        bytes.fromhex("0000002A")]
    assert arrow.encode(pa.array([-1], pa.int64()), serializers.LongSerializer()).to_pylist() == [b"\xff" * 8]
    assert arrow.encode(pa.array([-2], pa.int16()), serializers.ShortSerializer()).to_pylist() == [b"\xff\xfe"]
    assert arrow.encode(pa.array([True, False]), serializers.BooleanSerializer()).to_pylist() == [b"\x01", b"\x00"]
    assert arrow.encode(pa.array([1.5], pa.float32()), serializers.FloatSerializer()).to_pylist() == [
        bytes.fromhex("3FC00000")]
    assert arrow.encode(pa.array([float("nan")], pa.float64()), serializers.DoubleSerializer()).to_pylist() == [
        bytes.fromhex("7FF8000000000000")]
    strings = arrow.encode(pa.array(["héllo", "", "€😀", None]), serializers.StringSerializer()).to_pylist()
    assert strings == [bytes.fromhex("0668E9016C6C6F"), b"\x01", bytes.fromhex("04AC41BDB003 80BC03".replace(" ", "")),
                       None]
    assert arrow.encode(pa.array([b"\x01\x02"]), serializers.BytePrimitiveArraySerializer()).to_pylist() == [
        bytes.fromhex("000000020102")]


def test_flink_null_string_decodes_to_null(impl: str) -> None:
    out = arrow.decode(pa.array([b"\x00", b"\x01", b"\x02a"]), serializers.StringSerializer())
    assert out.to_pylist() == [None, "", "a"]


# ------------------------------------------------------------------------------ input shapes
def test_migrate_events_matches_reference_and_input_shapes(impl: str) -> None:
    so, sn = serializers.RowDataSerializer(OLD), serializers.RowDataSerializer(NEW)
    snap = so.snapshot_configuration()
    rows = events(300)
    blobs = [None if r is None else so.to_bytes(r) for r in rows]
    expected = [None if r is None else sn.to_bytes(snap.migrate_value(so.from_bytes(so.to_bytes(r)), sn))
                for r in rows]
    arr = pa.array(blobs, pa.binary())
    assert arrow.migrate(arr, snap, sn).to_pylist() == expected
    assert arrow.migrate(arr.slice(7, 100), snap, sn).to_pylist() == expected[7:107]
    large = arrow.migrate(arr.cast(pa.large_binary()), snap, sn)
    assert large.type == pa.large_binary()
    assert large.to_pylist() == expected
    chunked = pa.chunked_array([arr.slice(0, 50), arr.slice(50)])
    out = arrow.migrate(chunked, snap, sn)
    assert isinstance(out, pa.ChunkedArray)
    assert out.to_pylist() == expected
    assert arrow.migrate(arr, snap, sn, threads=2).to_pylist() == expected


def test_read_only_buffers_and_c_data_interface(impl: str) -> None:
    so, sn = serializers.RowDataSerializer(OLD), serializers.RowDataSerializer(NEW)
    snap = so.snapshot_configuration()
    rows = events(40)
    blobs = [None if r is None else so.to_bytes(r) for r in rows]
    arr = pa.array(blobs, pa.binary())
    # rebuild on immutable bytes (what Spark / IPC hands over)
    v, o, d = arr.buffers()
    ro = pa.Array.from_buffers(pa.binary(), len(arr), [pa.py_buffer(bytes(v)), pa.py_buffer(bytes(o)),
                                                         pa.py_buffer(bytes(d))], null_count=arr.null_count)
    assert memoryview(ro.buffers()[2]).readonly
    expected = arrow.migrate(arr, snap, sn).to_pylist()
    assert arrow.migrate(ro, snap, sn).to_pylist() == expected

    class Foreign:
        def __init__(self, a: pa.Array) -> None:
            self.a = a

        def __arrow_c_array__(self, requested_schema=None):  # noqa: ANN001, ANN204
            return self.a.__arrow_c_array__(requested_schema)

    assert arrow.migrate(Foreign(arr), snap, sn).to_pylist() == expected
    assert arrow.decode(Foreign(arr), so).to_pylist() == arrow.decode(arr, so).to_pylist()


def test_encode_decode_roundtrip_threads(impl: str) -> None:
    so = serializers.RowDataSerializer(OLD)
    struct = as_struct(events(3000))
    one = arrow.encode(struct, so)
    two = arrow.encode(struct, so, threads=2)
    assert one.equals(two)
    assert arrow.decode(one, so, threads=2).equals(arrow.decode(one, so))
    assert arrow.decode(one, so).to_pylist() == struct.to_pylist()


def test_encode_casts_compatible_arrow_types(impl: str) -> None:
    out = arrow.encode(pa.array([1, 2], pa.int64()), serializers.IntSerializer())
    assert out.to_pylist() == [b"\x00\x00\x00\x01", b"\x00\x00\x00\x02"]
    with pytest.raises(SerializationError):
        arrow.encode(pa.array([1 << 40], pa.int64()), serializers.IntSerializer())


# ------------------------------------------------------------------------------ errors
def test_bad_rows_name_row_and_field(impl: str) -> None:
    so, sn = serializers.RowDataSerializer(OLD), serializers.RowDataSerializer(NEW)
    snap = so.snapshot_configuration()
    good = so.to_bytes((1, (2, 3, "a long device type value")))
    bad = bytearray(good)
    # metadata's nested row: corrupt the deviceType slot's length so it runs past the row
    nested_off = int.from_bytes(good[4 + 16 + 4:4 + 16 + 8], "little")
    slot = 4 + nested_off + 8 + 16 + 4 - 4
    bad[slot:slot + 4] = (1000).to_bytes(4, "little")
    arr = pa.array([good, bytes(bad), good[:10], None])
    with pytest.raises(MalformedDataError) as info:
        arrow.migrate(arr, snap, sn)
    assert info.value.row == 1
    assert info.value.field_path == "metadata.deviceType"
    assert "row 1" in str(info.value) and "metadata.deviceType" in str(info.value)

    out = arrow.migrate(arr, snap, sn, on_error="null")
    assert out.to_pylist()[1:] == [None, None, None]
    assert out.to_pylist()[0] is not None

    out, errors = bulk.migrate(arr, snap, sn, on_error="null")
    assert [e.row for e in errors] == [1, 2]
    assert isinstance(errors[1], TruncatedDataError)
    assert all(isinstance(e, StateFormatError) for e in errors)


def test_chunked_errors_use_global_rows(impl: str) -> None:
    s = serializers.IntSerializer()
    arr = pa.chunked_array([pa.array([b"\x00\x00\x00\x01"]), pa.array([b"\x00\x00\x00\x02", b"\x00\x01"])])
    with pytest.raises(TruncatedDataError) as info:
        arrow.decode(arr, s)
    assert info.value.row == 2
    out, errors = bulk.decode(arr, s, on_error="null")
    assert out.to_pylist() == [1, 2, None]
    assert [e.row for e in errors] == [2]


@pytest.mark.parametrize("blob", [b"", b"\x00\x00", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xf0" + b"\x00" * 16,
                                  b"\x00\x00\x00\x08" + b"\x09" + b"\x00" * 7])
def test_hostile_rowdata_entries(impl: str, blob: bytes) -> None:
    s = serializers.RowDataSerializer(OLD)
    with pytest.raises(StateFormatError) as info:
        arrow.decode(pa.array([blob]), s)
    assert info.value.row == 0
    with pytest.raises(StateFormatError):
        arrow.migrate(pa.array([blob]), s.snapshot_configuration(), serializers.RowDataSerializer(NEW))


@pytest.mark.parametrize("blob", [b"\xff\xff\xff\xff\xff\xff", b"\x05ab", b"\x02\xff\xff\xff\xff\x0f", b"\x02a!",
                                  b"\x02\x80\xb0\x03"])
def test_hostile_strings(impl: str, blob: bytes) -> None:
    with pytest.raises(StateFormatError) as info:
        arrow.decode(pa.array([b"\x01", blob]), serializers.StringSerializer())
    assert info.value.row == 1


def test_bad_utf8_in_arrow_string_is_reported(impl: str) -> None:
    bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(b"\x00\x00\x00\x00\x02\x00\x00\x00"),
                                                 pa.py_buffer(b"\xc3(")])
    with pytest.raises(SerializationError, match="UTF-8") as info:
        arrow.encode(bad, serializers.StringSerializer())
    assert info.value.row == 0


def test_not_null_field_refuses_null(impl: str) -> None:
    s = serializers.RowDataSerializer("ROW<a INT NOT NULL, b STRING>")
    arr = pa.array([{"a": None, "b": "x"}], type=pa.struct([("a", pa.int32()), ("b", pa.string())]))
    with pytest.raises(SerializationError, match="NOT NULL") as info:
        arrow.encode(arr, s)
    assert info.value.field_path == "a"
    out, errors = bulk.encode(arr, s, on_error="null")
    assert out.to_pylist() == [None] and [e.row for e in errors] == [0]


def test_incompatible_migration_raises_before_touching_data(impl: str) -> None:
    so = serializers.RowDataSerializer("ROW<a INT, b STRING>")
    with pytest.raises(IncompatibleSchemaError, match="b"):
        arrow.migrate(pa.array([b"junk"]), so.snapshot_configuration(), serializers.RowDataSerializer("ROW<a INT>"))


def test_on_error_validated(impl: str) -> None:
    with pytest.raises(ValueError, match="on_error"):
        arrow.decode(pa.array([b"\x00\x00\x00\x01"]), serializers.IntSerializer(), on_error="ignore")


# ------------------------------------------------------------------------------ per-value paths
def test_rowdata_with_arrays_and_maps_round_trips(impl: str) -> None:
    s = serializers.RowDataSerializer("ROW<a ARRAY<INT>, m MAP<STRING, BIGINT>, d DECIMAL(20, 2)>")
    import decimal

    rows = [([1, None, 3], {"k": 1}, decimal.Decimal("123.45")), None, ([], {}, None)]
    blobs = [None if r is None else s.to_bytes(r) for r in rows]
    arr = arrow.encode(pa.array([None if r is None else bulk.types.logical_to_arrow(r, s.row_type) for r in rows],
                                type=arrow.arrow_type(s.row_type)), s)
    assert arr.to_pylist() == blobs
    back = arrow.decode(arr, s).to_pylist()
    assert back[0] == {"a": [1, None, 3], "m": [("k", 1)], "d": decimal.Decimal("123.45")}
    assert back[1] is None


def test_array_and_map_of_rows_migration(impl: str) -> None:
    from statemorph.migration import migrate_bytes

    so = serializers.RowDataSerializer("ROW<xs ARRAY<ROW<a INT, b STRING>>, m MAP<STRING, ROW<a INT, b STRING>>>")
    sn = serializers.RowDataSerializer("ROW<m MAP<STRING, ROW<b STRING, a INT, z DOUBLE>>, "
                                       "xs ARRAY<ROW<b STRING, c INT, a INT>>>")
    snap = so.snapshot_configuration()
    blobs = [so.to_bytes(([(1, "x"), None, (2, "a long string value")], {"k": (3, "y"), "long key value": None})),
             None, so.to_bytes(([], {}))]
    out = arrow.migrate(pa.array(blobs), snap, sn)
    assert out.to_pylist() == [migrate_bytes(snap, sn, blobs[0]), None, migrate_bytes(snap, sn, blobs[2])]


def test_generic_serializer_path(impl: str) -> None:
    s = serializers.ListSerializer(serializers.IntSerializer())
    out = arrow.encode(pa.array([[1, 2], None]), s)
    assert out.to_pylist() == [bytes.fromhex("000000020000000100000002"), None]
    assert arrow.decode(out, s).to_pylist() == [[1, 2], None]
