"""Hostile input for the basic DataStream serializers and their snapshots: truncation at every
offset, huge and negative lengths, invalid encodings, unknown identifiers and future versions.
Each case asserts the typed error class and that the message says where (the offset)."""

from __future__ import annotations

import re
import struct
import tracemalloc

import pytest

from statemorph.errors import (
    MalformedDataError,
    StateFormatError,
    TruncatedDataError,
    UnknownSnapshotError,
    UnsupportedVersionError,
)
from statemorph.serializers import (
    BooleanPrimitiveArraySerializer,
    BytePrimitiveArraySerializer,
    CharPrimitiveArraySerializer,
    DoublePrimitiveArraySerializer,
    EnumSerializer,
    IntPrimitiveArraySerializer,
    IntSerializer,
    ListSerializer,
    LongSerializer,
    MapSerializer,
    NullableSerializer,
    StringArraySerializer,
    StringSerializer,
)
from statemorph.typeutils import read_serializer_snapshot, read_versioned_snapshot, write_versioned_snapshot

BASE = "org.apache.flink.api.common.typeutils.base."
MAX = 0x7FFFFFFF


def i32(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


def utf(s: str) -> bytes:
    return struct.pack(">H", len(s.encode())) + s.encode()


def assert_names_offset(err: BaseException) -> None:
    assert re.search(r"offset \d+", str(err)), str(err)


VALID = [
    (StringSerializer(), "héllo€😀" + "x" * 130),
    (LongSerializer(), 7),
    (BytePrimitiveArraySerializer(), b"abc"),
    (BooleanPrimitiveArraySerializer(), [True, False]),
    (CharPrimitiveArraySerializer(), ["a", "é"]),
    (IntPrimitiveArraySerializer(), [1, 2]),
    (DoublePrimitiveArraySerializer(), [1.5]),
    (StringArraySerializer(), ["a", None, "é"]),
    (ListSerializer(StringSerializer()), ["ab", "€"]),
    (MapSerializer(StringSerializer(), LongSerializer()), {"k": 5, "n": None}),
    (NullableSerializer(IntSerializer(), True), None),
    (NullableSerializer(ListSerializer(IntSerializer())), [1]),
    (EnumSerializer(["A", "B"], "p.E"), "B"),
]


@pytest.mark.parametrize(("serializer", "value"), VALID)
def test_truncation_at_every_offset(serializer, value):
    data = serializer.to_bytes(value)
    for cut in range(len(data)):
        with pytest.raises(TruncatedDataError) as info:
            serializer.from_bytes(data[:cut])
        assert f"offset {info.value.offset}" in str(info.value)
        assert 0 <= info.value.offset <= cut


@pytest.mark.parametrize(("serializer", "value"), VALID)
def test_trailing_bytes_are_refused(serializer, value):
    with pytest.raises(MalformedDataError) as info:
        serializer.from_bytes(serializer.to_bytes(value) + b"\x00")
    assert_names_offset(info.value)


@pytest.mark.parametrize(
    "serializer",
    [
        BytePrimitiveArraySerializer(),
        BooleanPrimitiveArraySerializer(),
        CharPrimitiveArraySerializer(),
        IntPrimitiveArraySerializer(),
        DoublePrimitiveArraySerializer(),
        StringArraySerializer(),
        ListSerializer(StringSerializer()),
        ListSerializer(LongSerializer()),
        MapSerializer(StringSerializer(), LongSerializer()),
    ],
)
def test_huge_and_negative_counts(serializer):
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedDataError) as info:
            serializer.from_bytes(i32(MAX) + b"\x01\x02\x03\x04\x05\x06")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"a hostile count allocated {peak} bytes"
    assert "offset 4" in str(info.value)
    with pytest.raises(MalformedDataError, match="negative length -1 .* at offset 4"):
        serializer.from_bytes(i32(-1) + b"\x00" * 8)


def test_huge_string_length_fails_fast_without_allocating():
    data = bytes.fromhex("FF FF FF FF 07") + b"abcde"  # 2**31-1 → 2**31-2 units declared, 5 bytes left
    tracemalloc.start()
    try:
        with pytest.raises(TruncatedDataError, match="at offset 0 declares 2147483646 UTF-16 units") as info:
            StringSerializer().from_bytes(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 16
    assert info.value.offset == 0


@pytest.mark.parametrize(
    ("hexdata", "fragment"),
    [
        ("FF FF FF FF 0F", "exceeds the Java maximum"),  # 2**32-1: beyond int
        ("80 80 80 80 80 80 01", "varint longer than 5 bytes"),
        ("02 FF FF 07", "character at offset 1 encodes 0x1FFFF"),
        ("03 61 80 80 80 80 80 00", "varint longer than 5 bytes"),
    ],
)
def test_malformed_strings(hexdata, fragment):
    with pytest.raises(MalformedDataError, match=re.escape(fragment)) as info:
        StringSerializer().from_bytes(bytes.fromhex(hexdata))
    assert_names_offset(info.value)


def test_string_array_element_truncated_names_offset():
    data = i32(2) + b"\x02a" + b"\x05ab"
    with pytest.raises(TruncatedDataError) as info:
        StringArraySerializer().from_bytes(data)
    assert info.value.offset == 6


# -- snapshots -------------------------------------------------------------------------------------

SNAPSHOT_SERIALIZERS = [
    IntSerializer(),
    StringArraySerializer(),
    ListSerializer(IntSerializer()),
    MapSerializer(StringSerializer(), NullableSerializer(LongSerializer(), True)),
    EnumSerializer(["RED", "GREEN"], "p.Color"),
]


@pytest.mark.parametrize("serializer", SNAPSHOT_SERIALIZERS)
def test_snapshot_truncation_at_every_offset(serializer):
    blob = write_versioned_snapshot(serializer.snapshot_configuration())
    for cut in range(len(blob)):
        with pytest.raises(StateFormatError) as info:
            read_versioned_snapshot(blob[:cut])
        # a cut inside an identifier may leave a valid-looking prefix that is unknown instead
        assert isinstance(info.value, (TruncatedDataError, UnknownSnapshotError, MalformedDataError))
        if isinstance(info.value, TruncatedDataError):
            assert_names_offset(info.value)


def test_unknown_identifier():
    with pytest.raises(UnknownSnapshotError, match="com.evil.Payload"):
        read_versioned_snapshot(utf("com.evil.Payload") + i32(1))


@pytest.mark.parametrize(
    ("blob", "fragment"),
    [
        (utf(BASE + "EnumSerializer$EnumSerializerSnapshot") + i32(4) + utf("p.E") + i32(0), "version 4"),
        (utf(BASE + "ListSerializerSnapshot") + i32(4), "version 4"),
        (utf(BASE + "ListSerializerSnapshot") + i32(3, 911108, 2), "outer version 2"),
        (utf("org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot")
         + i32(3, 911108, 3, 0), "outer version 3"),
        (utf(BASE + "ListSerializerSnapshot") + i32(2), "version 2"),  # pre-1.8 legacy layout
    ],
)
def test_future_and_legacy_versions(blob, fragment):
    with pytest.raises(UnsupportedVersionError, match=fragment) as info:
        read_versioned_snapshot(blob)
    assert_names_offset(info.value)


def test_envelope_version_one_is_refused():
    with pytest.raises(UnsupportedVersionError, match="envelope version 1"):
        read_serializer_snapshot(i32(1) + utf(BASE + "IntSerializer$IntSerializerSnapshot") + i32(3))


ENUM_ID = utf(BASE + "EnumSerializer$EnumSerializerSnapshot") + i32(3)


@pytest.mark.parametrize(
    ("content", "error", "fragment"),
    [
        # C0 followed by a non-continuation byte: the offset is absolute, past the identifier
        (b"\x00\x03p\xc0E" + i32(0), MalformedDataError, f"around offset {len(ENUM_ID) + 4}"),
        (b"\x00\x02p\xff" + i32(0), MalformedDataError, "invalid lead byte 0xFF"),
        (b"\x00\x02p\xe0" + i32(0), MalformedDataError, "partial character"),
        (utf("p.E") + i32(1) + b"\x00\x01\x80", MalformedDataError, "invalid lead byte 0x80"),
        (utf("p.E") + i32(MAX) + utf("A"), TruncatedDataError, "declares 2147483647 entries"),
        (utf("p.E") + i32(-5), MalformedDataError, "negative length -5"),
        (utf("p.E") + i32(2) + utf("A") + utf("A"), MalformedDataError, "constant twice"),
    ],
)
def test_corrupt_enum_snapshots(content, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)) as info:
        read_versioned_snapshot(ENUM_ID + content)
    assert_names_offset(info.value)


NULLABLE_ID = utf("org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot")


@pytest.mark.parametrize("padding", [-1, MAX])
def test_hostile_null_padding(padding):
    blob = NULLABLE_ID + i32(3, 911108, 2, padding, 1333245, 1, 1) + utf(
        BASE + "IntSerializer$IntSerializerSnapshot"
    ) + i32(3)
    with pytest.raises(MalformedDataError, match=f"null padding length {padding} at offset") as info:
        read_versioned_snapshot(blob)
    assert_names_offset(info.value)


def test_composite_bad_magic_and_huge_nested_count():
    bad_magic = utf(BASE + "ListSerializerSnapshot") + i32(3, 12345, 1)
    with pytest.raises(MalformedDataError, match="magic") as info:
        read_versioned_snapshot(bad_magic)
    assert_names_offset(info.value)
    huge = utf(BASE + "MapSerializerSnapshot") + i32(3, 911108, 1, 1333245, 1, MAX)
    with pytest.raises(TruncatedDataError) as info2:
        read_versioned_snapshot(huge)
    assert_names_offset(info2.value)


def test_enum_index_out_of_range_in_list():
    ser = ListSerializer(EnumSerializer(["A", "B"], "p.E"))
    with pytest.raises(MalformedDataError, match="enum index 9 at offset 8"):
        ser.from_bytes(i32(2, 0, 9))
