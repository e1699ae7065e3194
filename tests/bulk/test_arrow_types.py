"""Flink logical type → Arrow type mapping of the bulk API, and values of the temporal / decimal
types through the kernels equal the reference serializer's values."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from statemorph import arrow, bulk, kernels, serializers
from statemorph.types import parse_type


@pytest.fixture
def impl(tier: str) -> str:
    """The shared ``tier`` fixture (tests/conftest.py) under this file's name for it."""
    return tier


@pytest.mark.parametrize("flink,expected", [
    ("BOOLEAN", pa.bool_()), ("TINYINT", pa.int8()), ("SMALLINT", pa.int16()), ("INT", pa.int32()),
    ("BIGINT", pa.int64()), ("FLOAT", pa.float32()), ("DOUBLE", pa.float64()), ("STRING", pa.string()),
    ("VARCHAR(10)", pa.string()), ("CHAR(3)", pa.string()), ("BYTES", pa.binary()), ("BINARY(4)", pa.binary()),
    ("DECIMAL(10, 2)", pa.decimal128(10, 2)), ("DATE", pa.date32()), ("TIME(3)", pa.time32("ms")),
    ("TIMESTAMP(3)", pa.timestamp("ms")), ("TIMESTAMP(6)", pa.timestamp("us")), ("TIMESTAMP(9)", pa.timestamp("ns")),
    ("TIMESTAMP_LTZ(3)", pa.timestamp("ms", tz="UTC")),
    ("ARRAY<INT>", pa.list_(pa.int32())), ("MAP<STRING, BIGINT>", pa.map_(pa.string(), pa.int64())),
    ("MULTISET<STRING>", pa.map_(pa.string(), pa.int32())),
    ("ROW<a INT NOT NULL, b ROW<c STRING>>", pa.struct([("a", pa.int32()), ("b", pa.struct([("c", pa.string())]))])),
])
def test_arrow_type_mapping(flink: str, expected: pa.DataType) -> None:
    assert arrow.arrow_type(parse_type(flink)) == expected


def test_temporal_and_decimal_values_match_reference(impl: str) -> None:
    t = "ROW<d DATE, t TIME(3), ts TIMESTAMP(3), dec DECIMAL(18, 4), f FLOAT, b BOOLEAN, ti TINYINT, s SMALLINT>"
    s = serializers.RowDataSerializer(t)
    rows = [
        (dt.date(2024, 2, 29), dt.time(23, 59, 59, 999000), dt.datetime(1969, 12, 31, 23, 59, 59, 1000),
         decimal.Decimal("-12345678901234.5678"), -1.5, True, -128, 32767),
        (None, None, None, None, None, None, None, None),
    ]
    blobs = [s.to_bytes(r) for r in rows]
    arr = pa.array([bulk.types.logical_to_arrow(r, s.row_type) for r in rows], type=arrow.arrow_type(s.row_type))
    assert arrow.encode(arr, s).to_pylist() == blobs
    decoded = arrow.decode(pa.array(blobs), s).to_pylist()
    assert decoded == arr.to_pylist()
    assert decoded[0]["dec"] == decimal.Decimal("-12345678901234.5678")


def test_decimal_beyond_64_bits_is_refused_for_compact_decimals(impl: str) -> None:
    s = serializers.RowDataSerializer("ROW<d DECIMAL(18, 0)>")
    arr = pa.array([{"d": decimal.Decimal(10**18 - 1)}], type=arrow.arrow_type(s.row_type))
    assert arrow.encode(arr, s).to_pylist() == [s.to_bytes((decimal.Decimal(10**18 - 1),))]


def test_kernels_reject_offsets_outside_the_data_buffer(impl: str) -> None:
    """pyarrow validates its own arrays, but buffers from other producers reach the kernels as they
    are: offsets pointing past the data buffer are a per-row error, never an out-of-bounds read."""
    import numpy as np

    from statemorph.kernels import abi

    k = kernels.tier(impl)
    offsets = np.array([0, 4, 1000], dtype=np.int32).tobytes()
    data = b"\x00\x00\x00\x01"
    out = np.zeros(8, dtype=np.uint8)
    status = np.zeros(2, dtype=np.int64)
    first = k.fixed_decode(abi.LEAF_I32, offsets, data, None, 0, False, 0, 2, out, status, False)
    assert first == 1
    assert status[0] == 0 and abi.decode_err(int(status[1]))[0] == abi.ERR_BAD_ARROW
    sizes = np.zeros(3, dtype=np.int64)
    str_offsets = np.array([0, 2, 1000], dtype=np.int32).tobytes()
    assert k.string_decode_sizes(str_offsets, b"\x02a", None, 0, False, 0, 2, sizes, status, False) == 1
    assert status[0] == 0 and sizes[1] == 1
    with pytest.raises(ValueError, match="offsets buffer shorter"):
        k.fixed_decode(abi.LEAF_I32, offsets, data, None, 5, False, 0, 2, out, status, False)
