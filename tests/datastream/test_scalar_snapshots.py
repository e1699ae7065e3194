"""Snapshot bytes of the basic DataStream serializers against Flink 2.3 (docs/formats.md §4.3,
§4.4, §2.6, §7.9). The expected bytes are spelled out by hand here, not produced by our writer."""

from __future__ import annotations

import enum
import struct

import pytest

from statemorph.errors import UnsupportedVersionError
from statemorph.serializers import (
    BooleanPrimitiveArraySerializer,
    BooleanSerializer,
    BytePrimitiveArraySerializer,
    ByteSerializer,
    CharPrimitiveArraySerializer,
    CharSerializer,
    DoublePrimitiveArraySerializer,
    DoubleSerializer,
    EnumSerializer,
    FloatPrimitiveArraySerializer,
    FloatSerializer,
    IntPrimitiveArraySerializer,
    IntSerializer,
    ListSerializer,
    LongPrimitiveArraySerializer,
    LongSerializer,
    MapSerializer,
    NullableSerializer,
    ShortPrimitiveArraySerializer,
    ShortSerializer,
    StringArraySerializer,
    StringSerializer,
)
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

BASE = "org.apache.flink.api.common.typeutils.base."


def utf(s: str) -> bytes:
    body = s.encode("utf-8")
    return struct.pack(">H", len(body)) + body


def i32(*values: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in values)


def versioned_simple(name: str) -> bytes:
    return utf(name) + i32(3)


INT = versioned_simple(BASE + "IntSerializer$IntSerializerSnapshot")
LONG = versioned_simple(BASE + "LongSerializer$LongSerializerSnapshot")
STRING = versioned_simple(BASE + "StringSerializer$StringSerializerSnapshot")
DELEGATE = i32(1333245, 1)


def test_int_snapshot_is_88_bytes_of_flink():
    data = write_serializer_snapshot(IntSerializer().snapshot_configuration())
    assert data == i32(2) + INT
    assert len(data) == 88
    assert data[4:6] == bytes.fromhex("00 4E")


def test_list_of_int_snapshot():
    expected = i32(2) + utf(BASE + "ListSerializerSnapshot") + i32(3, 911108, 1) + DELEGATE + i32(1) + INT
    data = write_serializer_snapshot(ListSerializer(IntSerializer()).snapshot_configuration())
    assert data == expected
    assert len(data) == 179


def test_map_string_long_snapshot():
    expected = (i32(2) + utf(BASE + "MapSerializerSnapshot") + i32(3, 911108, 1) + DELEGATE + i32(2)
                + STRING + LONG)
    data = write_serializer_snapshot(MapSerializer(StringSerializer(), LongSerializer()).snapshot_configuration())
    assert data == expected
    assert len(data) == 270


def test_nullable_padded_int_snapshot():
    name = "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot"
    expected = i32(2) + utf(name) + i32(3, 911108, 2, 4) + DELEGATE + i32(1) + INT
    data = write_serializer_snapshot(NullableSerializer(IntSerializer(), True).snapshot_configuration())
    assert data == expected
    assert len(data) == 207


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"
    BLUE = "b"


def test_enum_snapshot():
    expected = (i32(2) + utf(BASE + "EnumSerializer$EnumSerializerSnapshot") + i32(3) + utf("p.Color") + i32(3)
                + utf("RED") + utf("GREEN") + utf("BLUE"))
    data = write_serializer_snapshot(EnumSerializer(Color, "p.Color").snapshot_configuration())
    assert data == expected
    assert len(data) == 121


SIMPLE = [
    (BooleanSerializer(), "BooleanSerializer$BooleanSerializerSnapshot"),
    (ByteSerializer(), "ByteSerializer$ByteSerializerSnapshot"),
    (ShortSerializer(), "ShortSerializer$ShortSerializerSnapshot"),
    (IntSerializer(), "IntSerializer$IntSerializerSnapshot"),
    (LongSerializer(), "LongSerializer$LongSerializerSnapshot"),
    (FloatSerializer(), "FloatSerializer$FloatSerializerSnapshot"),
    (DoubleSerializer(), "DoubleSerializer$DoubleSerializerSnapshot"),
    (CharSerializer(), "CharSerializer$CharSerializerSnapshot"),
    (StringSerializer(), "StringSerializer$StringSerializerSnapshot"),
    (BooleanPrimitiveArraySerializer(),
     "array.BooleanPrimitiveArraySerializer$BooleanPrimitiveArraySerializerSnapshot"),
    (BytePrimitiveArraySerializer(), "array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot"),
    (ShortPrimitiveArraySerializer(), "array.ShortPrimitiveArraySerializer$ShortPrimitiveArraySerializerSnapshot"),
    (CharPrimitiveArraySerializer(), "array.CharPrimitiveArraySerializer$CharPrimitiveArraySerializerSnapshot"),
    (IntPrimitiveArraySerializer(), "array.IntPrimitiveArraySerializer$IntPrimitiveArraySerializerSnapshot"),
    (LongPrimitiveArraySerializer(), "array.LongPrimitiveArraySerializer$LongPrimitiveArraySerializerSnapshot"),
    (FloatPrimitiveArraySerializer(), "array.FloatPrimitiveArraySerializer$FloatPrimitiveArraySerializerSnapshot"),
    (DoublePrimitiveArraySerializer(), "array.DoublePrimitiveArraySerializer$DoublePrimitiveArraySerializerSnapshot"),
    (StringArraySerializer(), "array.StringArraySerializer$StringArraySerializerSnapshot"),
]


@pytest.mark.parametrize(("serializer", "name"), SIMPLE)
def test_simple_snapshots_use_flink_class_names(serializer, name):
    data = write_versioned_snapshot(serializer.snapshot_configuration())
    assert data == versioned_simple(BASE + name)
    restored = read_versioned_snapshot(data).restore_serializer()
    assert restored == serializer
    assert read_versioned_snapshot(data).resolve_schema_compatibility(serializer).is_compatible_as_is()


@pytest.mark.parametrize(("serializer", "name"), SIMPLE[:3])
def test_simple_snapshot_v2_with_class_name_is_read(serializer, name):
    # 1.7-era content held the serializer class name; it is read and dropped
    data = utf(BASE + name) + i32(2) + utf(BASE + name.split("$")[0])
    assert read_versioned_snapshot(data).restore_serializer() == serializer


def test_simple_snapshot_future_version_is_refused():
    data = utf(BASE + "IntSerializer$IntSerializerSnapshot") + i32(4)
    with pytest.raises(UnsupportedVersionError, match="version 4"):
        read_versioned_snapshot(data)


def test_composite_snapshots_restore_equal_serializers():
    for ser in (
        ListSerializer(StringSerializer()),
        MapSerializer(IntSerializer(), ListSerializer(LongSerializer())),
        NullableSerializer(LongSerializer(), True),
        NullableSerializer(StringSerializer()),
        ListSerializer(EnumSerializer(["A", "B"], "p.E")),
    ):
        snap = read_serializer_snapshot(write_serializer_snapshot(ser.snapshot_configuration()))
        assert snap.restore_serializer() == ser
        assert snap == ser.snapshot_configuration()
