"""Hostile bytes for AvroSerializer: typed errors naming offset and field path, never a crash,
a hang or an allocation sized by the data."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph.errors import (
    MalformedDataError,
    SerializationError,
    SnapshotError,
    StateFormatError,
    TruncatedDataError,
)
from statemorph.serializers import AvroSerializer
from statemorph.serializers._avro_codec import ZERO_WIDTH_ITEM_BUDGET
from statemorph.serializers.strings import encode_string
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

EVENT = AvroSerializer({"type": "record", "name": "Event", "fields": [
    {"name": "id", "type": "int"},
    {"name": "name", "type": "string"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
    {"name": "maybe", "type": ["null", "double"]},
    {"name": "raw", "type": "bytes"},
    {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 2}},
]})
VALUE = {"id": 1, "name": "héllo", "tags": ["a", "bc"], "attrs": {"k": 5}, "kind": "B", "maybe": 2.5,
         "raw": b"\x00\x01", "fx": b"zz"}
GOOD = EVENT.to_bytes(VALUE)
I32 = struct.Struct(">i")


def test_every_truncation_is_a_typed_error():
    assert EVENT.from_bytes(GOOD) == VALUE
    for n in range(len(GOOD)):
        with pytest.raises(StateFormatError) as info:
            EVENT.from_bytes(GOOD[:n])
        assert "avro field Event." in str(info.value)


def test_truncated_string_names_offset_and_field():
    with pytest.raises(TruncatedDataError, match=r"offset 8.*\[avro field Event\.name\]"):
        EVENT.from_bytes(GOOD[:10])


def test_negative_string_length():
    data = I32.pack(1) + I32.pack(-5)
    with pytest.raises(MalformedDataError, match=r"negative string length -5 at offset 4 \[avro field Event\.name\]"):
        EVENT.from_bytes(data)


def test_huge_string_length_fails_before_allocating():
    data = I32.pack(1) + I32.pack(0x7FFFFFFF) + b"abc"
    with pytest.raises(TruncatedDataError, match=r"Event\.name"):
        EVENT.from_bytes(data)


def test_huge_array_count_fails_before_allocating():
    s = AvroSerializer({"type": "array", "items": "long"})
    data = bytes.fromhex("ffffffffffffffff7f")  # 2^63-1 items of 8 bytes
    with pytest.raises(TruncatedDataError, match="block of"):
        s.from_bytes(data)


def test_zero_width_items_are_capped():
    s = AvroSerializer({"type": "array", "items": "null"})
    assert s.from_bytes(bytes.fromhex("0a00")) == [None] * 10
    count = ZERO_WIDTH_ITEM_BUDGET + 1
    varint = bytearray()
    while count >= 0x80:
        varint.append((count & 0x7F) | 0x80)
        count >>= 7
    varint.append(count)
    with pytest.raises(MalformedDataError, match="zero-width"):
        s.from_bytes(bytes(varint) + b"\x00")
    nested = AvroSerializer({"type": "array", "items": {"type": "array", "items": "null"}})
    # many small blocks of nulls share one budget per value
    inner = bytes.fromhex("ff7f") + b"\x00"  # 16383 nulls
    outer = bytes.fromhex("8001") + inner * 128 + b"\x00"
    with pytest.raises(MalformedDataError, match="zero-width"):
        nested.from_bytes(outer)


def test_overlong_count_varint():
    s = AvroSerializer({"type": "array", "items": "int"})
    with pytest.raises(MalformedDataError, match="runs over 10 bytes"):
        s.from_bytes(b"\x80" * 11)


def test_bad_union_index():
    offset = GOOD.index(I32.pack(1) + struct.pack(">d", 2.5))
    data = bytearray(GOOD)
    data[offset:offset + 4] = I32.pack(2)
    with pytest.raises(MalformedDataError,
                       match=rf"union branch index 2 at offset {offset} .*\[avro field Event\.maybe\]"):
        EVENT.from_bytes(bytes(data))
    data[offset:offset + 4] = I32.pack(-1)
    with pytest.raises(MalformedDataError, match="union branch index -1"):
        EVENT.from_bytes(bytes(data))


def test_bad_enum_index():
    offset = GOOD.index(I32.pack(1) + I32.pack(1) + struct.pack(">d", 2.5)) - 0
    data = bytearray(GOOD)
    data[offset:offset + 4] = I32.pack(9)
    with pytest.raises(MalformedDataError, match=rf"enum index 9 at offset {offset}.*Event\.kind"):
        EVENT.from_bytes(bytes(data))


def test_invalid_utf8_in_string_and_map_key():
    data = I32.pack(1) + I32.pack(2) + b"\xc3\x28"
    with pytest.raises(MalformedDataError, match=r"invalid UTF-8 in string at offset 8.*Event\.name"):
        EVENT.from_bytes(data)
    m = AvroSerializer({"type": "map", "values": "int"})
    with pytest.raises(MalformedDataError, match="invalid UTF-8 in map key at offset 5"):
        m.from_bytes(b"\x01" + I32.pack(1) + b"\xff" + I32.pack(0) + b"\x00")


def test_logical_value_out_of_python_range():
    s = AvroSerializer({"type": "record", "name": "T", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]})
    with pytest.raises(MalformedDataError, match=r"timestamp-millis.*T\.at"):
        s.from_bytes(struct.pack(">q", 2**62))


def test_trailing_bytes():
    with pytest.raises(MalformedDataError, match="trailing"):
        EVENT.from_bytes(GOOD + b"\x00")


def test_recursive_schema_with_hostile_depth_is_bounded_by_input():
    s = AvroSerializer({"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]})
    # each level costs 4 bytes, so depth is bounded by the input size; truncated chains fail cleanly
    with pytest.raises(TruncatedDataError):
        s.from_bytes(I32.pack(1) * 50)
    # a chain deeper than Python's recursion limit is a typed error, not a RecursionError
    with pytest.raises(MalformedDataError, match="nested too deeply"):
        s.from_bytes(I32.pack(1) * 100_000 + I32.pack(0))
    deep = None
    for _ in range(100_000):
        deep = {"next": deep}
    with pytest.raises(SerializationError, match="nested too deeply"):
        s.to_bytes(deep)


@settings(max_examples=150)
@given(st.binary(max_size=120))
def test_random_bytes_only_raise_typed_errors(data):
    try:
        value = EVENT.from_bytes(data)
    except StateFormatError:
        return
    assert EVENT.from_bytes(EVENT.to_bytes(value)) == value


@settings(max_examples=80)
@given(st.integers(min_value=0, max_value=len(GOOD) - 1), st.integers(min_value=0, max_value=255))
def test_single_byte_corruption_only_raises_typed_errors(pos, byte):
    data = bytearray(GOOD)
    data[pos] = byte
    try:
        EVENT.from_bytes(bytes(data))
    except StateFormatError:
        pass


def test_hostile_snapshots():
    blob = write_versioned_snapshot(EVENT.snapshot_configuration())
    for n in range(0, len(blob), 7):
        with pytest.raises(StateFormatError):
            read_versioned_snapshot(blob[:n])
    ident = b"org.apache.flink.formats.avro.typeutils.AvroSerializerSnapshot"
    head = len(ident).to_bytes(2, "big") + ident + (3).to_bytes(4, "big")
    with pytest.raises(StateFormatError):
        read_versioned_snapshot(head + encode_string("x") + b"\xff\xff\xff\xff\x0f")
    with pytest.raises(SnapshotError, match="invalid schema"):
        read_versioned_snapshot(head + encode_string("x") + encode_string("[" * 5))
    # schemas nested beyond Python's recursion limit are parse errors, not RecursionErrors
    for deep in ("[" * 100_000, '{"type":"array","items":' * 3000 + '"int"' + "}" * 3000):
        with pytest.raises(SnapshotError, match="nested too deeply"):
            read_versioned_snapshot(head + encode_string("x") + encode_string(deep))


def test_migrating_corrupt_old_bytes_is_a_typed_error_and_writes_nothing():
    from statemorph.io import DataInputDeserializer, DataOutputSerializer

    new_schema = {"type": "record", "name": "Event", "fields": [
        {"name": "id", "type": "long"}, {"name": "extra", "type": "string", "default": ""}]}
    new = AvroSerializer(new_schema)
    snap = EVENT.snapshot_configuration()
    assert snap.resolve_schema_compatibility(new).is_compatible_after_migration()
    for cut in (3, 9, len(GOOD) - 1):
        out = DataOutputSerializer()
        with pytest.raises(StateFormatError, match=r"avro field Event\."):
            snap.migrate_state(EVENT, new, DataInputDeserializer(GOOD[:cut]), out)
        assert len(out) == 0
