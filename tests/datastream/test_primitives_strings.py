"""Primitive and String serializers against the real Flink 2.3 bytes of docs/formats.md §7.1,
plus the value checks (range, type, None) that Java gets from its type system."""

from __future__ import annotations

import math

import pytest

from statemorph.errors import SerializationError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.serializers import (
    BooleanSerializer,
    ByteSerializer,
    CharSerializer,
    DoubleSerializer,
    FloatSerializer,
    IntSerializer,
    LongSerializer,
    ShortSerializer,
    StringSerializer,
)
from statemorph.serializers.strings import encode_string, read_string, read_string_at, varlen, write_string

FLINK_EXAMPLES = [
    (IntSerializer(), 42, "00 00 00 2A"),
    (LongSerializer(), -1, "FF FF FF FF FF FF FF FF"),
    (StringSerializer(), "héllo", "06 68 E9 01 6C 6C 6F"),
    (StringSerializer(), None, "00"),
    (StringSerializer(), "", "01"),
    (StringSerializer(), "€😀", "04 AC 41 BD B0 03 80 BC 03"),
    (BooleanSerializer(), True, "01"),
    (BooleanSerializer(), False, "00"),
    (CharSerializer(), "é", "00 E9"),
    (FloatSerializer(), 1.5, "3F C0 00 00"),
    (DoubleSerializer(), 1.5, "3F F8 00 00 00 00 00 00"),
    (ShortSerializer(), -2, "FF FE"),
    (ByteSerializer(), -1, "FF"),
]


@pytest.mark.parametrize(("serializer", "value", "hexbytes"), FLINK_EXAMPLES)
def test_flink_examples(serializer, value, hexbytes):
    expected = bytes.fromhex(hexbytes)
    assert serializer.to_bytes(value) == expected
    assert serializer.from_bytes(expected) == value


@pytest.mark.parametrize(
    ("serializer", "length"),
    [(BooleanSerializer(), 1), (ByteSerializer(), 1), (ShortSerializer(), 2), (IntSerializer(), 4),
     (LongSerializer(), 8), (FloatSerializer(), 4), (DoubleSerializer(), 8), (CharSerializer(), 2),
     (StringSerializer(), -1)],
)
def test_lengths(serializer, length):
    assert serializer.get_length() == length


def test_string_length_200_uses_two_byte_varint():
    data = StringSerializer().to_bytes("x" * 200)
    assert data[:2] == bytes.fromhex("C9 01")
    assert len(data) == 202


def test_string_three_byte_units_and_lone_surrogates():
    s = StringSerializer()
    # U+4000 is the first unit that needs three bytes
    assert s.to_bytes("\u4000") == bytes.fromhex("02 80 80 01")
    assert s.to_bytes("\u3fff") == bytes.fromhex("02 FF 7F")
    lone = "a\ud800b\udc00"
    data = s.to_bytes(lone)
    assert data == bytes.fromhex("05 61 80 B0 03 62 80 B8 03")
    assert s.from_bytes(data) == lone


def test_string_nul_is_a_single_zero_byte_unit():
    assert StringSerializer().to_bytes("a\x00b") == bytes.fromhex("04 61 00 62")
    assert StringSerializer().from_bytes(bytes.fromhex("04 61 00 62")) == "a\x00b"


def test_string_surrogate_pair_combines_on_read():
    data = bytes.fromhex("03 BD B0 03 80 BC 03")
    assert StringSerializer().from_bytes(data) == "😀"


def test_string_mixed_runs_and_following_data_untouched():
    out = DataOutputSerializer()
    write_string(out, "ab€cd")
    out.write(b"xyz")  # ASCII right after: the decoder must stop after 5 units
    src = DataInputDeserializer(out.get_copy_of_buffer())
    assert read_string(src) == "ab€cd"
    assert src.read_fully(3) == b"xyz"


def test_string_reader_accepts_overlong_varints():
    # Java's reader takes any continuation groups; a length written as two bytes still works
    assert StringSerializer().from_bytes(bytes.fromhex("82 00 61")) == "a"
    assert StringSerializer().from_bytes(bytes.fromhex("02 E1 00")) == "a"


def test_read_string_at_returns_next_position():
    data = b"\x00" + encode_string("hi") + encode_string(None)
    assert read_string_at(data, 1, len(data)) == ("hi", 4)
    assert read_string_at(data, 4, len(data)) == (None, 5)


def test_varlen_boundaries():
    assert varlen(127) == b"\x7f"
    assert varlen(128) == b"\x80\x01"
    assert varlen(2**31 - 1) == bytes.fromhex("FF FF FF FF 07")


def test_float_nan_canonicalised():
    payload_nan = __import__("struct").unpack(">d", bytes.fromhex("7FF8000000000001"))[0]
    assert FloatSerializer().to_bytes(payload_nan) == bytes.fromhex("7F C0 00 00")
    assert DoubleSerializer().to_bytes(payload_nan) == bytes.fromhex("7F F8 00 00 00 00 00 00")
    assert math.isnan(FloatSerializer().from_bytes(bytes.fromhex("7F C0 00 01")))


def test_float_extremes():
    f = FloatSerializer()
    assert f.to_bytes(float("inf")) == bytes.fromhex("7F 80 00 00")
    assert f.to_bytes(-0.0) == bytes.fromhex("80 00 00 00")
    assert f.to_bytes(3.4028234663852886e38) == bytes.fromhex("7F 7F FF FF")
    with pytest.raises(SerializationError, match="out of range for a Java float"):
        f.to_bytes(1e39)


def test_boolean_reader_treats_any_nonzero_as_true():
    assert BooleanSerializer().from_bytes(b"\x7f") is True


@pytest.mark.parametrize(
    ("serializer", "value", "fragment"),
    [
        (IntSerializer(), 2**31, "out of range for a Java int"),
        (IntSerializer(), -(2**31) - 1, "out of range for a Java int"),
        (ByteSerializer(), 128, "out of range for a Java byte"),
        (ShortSerializer(), 40000, "out of range for a Java short"),
        (LongSerializer(), 2**63, "out of range for a Java long"),
        (IntSerializer(), 1.5, "expected an int"),
        (IntSerializer(), "7", "expected an int"),
        (IntSerializer(), None, "cannot be null"),
        (LongSerializer(), None, "cannot be null"),
        (BooleanSerializer(), None, "cannot be null"),
        (BooleanSerializer(), "yes", "expected a bool"),
        (BooleanSerializer(), 2, "expected a bool"),
        (DoubleSerializer(), None, "cannot be null"),
        (DoubleSerializer(), "1.0", "expected a float"),
        (CharSerializer(), "ab", "expected one character"),
        (CharSerializer(), "😀", "supplementary"),
        (CharSerializer(), None, "cannot be null"),
        (StringSerializer(), 5, "expected str or None"),
    ],
)
def test_bad_values_raise_serialization_error_naming_value_and_serializer(serializer, value, fragment):
    with pytest.raises(SerializationError) as info:
        serializer.to_bytes(value)
    message = str(info.value)
    assert fragment in message
    assert type(serializer).__name__ in message


def test_range_edges_are_accepted():
    assert IntSerializer().to_bytes(2**31 - 1) == bytes.fromhex("7F FF FF FF")
    assert IntSerializer().to_bytes(-(2**31)) == bytes.fromhex("80 00 00 00")
    assert LongSerializer().to_bytes(-(2**63)) == bytes.fromhex("80 00 00 00 00 00 00 00")
    assert ByteSerializer().to_bytes(-128) == b"\x80"


def test_char_accepts_lone_surrogate_and_code_unit():
    assert CharSerializer().to_bytes("\ud83d") == bytes.fromhex("D8 3D")
    assert CharSerializer().to_bytes(0x41) == bytes.fromhex("00 41")
    assert CharSerializer().from_bytes(bytes.fromhex("D8 3D")) == "\ud83d"


def test_equality_and_repr():
    assert IntSerializer() == IntSerializer()
    assert IntSerializer() != LongSerializer()
    assert hash(StringSerializer()) == hash(StringSerializer())
    assert repr(IntSerializer()) == "IntSerializer()"
