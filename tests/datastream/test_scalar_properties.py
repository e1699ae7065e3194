"""Property tests for the basic DataStream serializers: every value round-trips, every snapshot
round-trips to an equal serializer, the string codec equals a slow per-unit reference, and
random bytes only ever raise typed format errors."""

from __future__ import annotations

import math
import struct

from hypothesis import given
from hypothesis import strategies as st

from statemorph.errors import StateFormatError
from statemorph.io import DataInputDeserializer, DataOutputSerializer, utf16_units
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
from statemorph.serializers.strings import encode_string
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

# any str Python can hold, lone surrogates included (Java strings may hold them too)
texts = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=()), max_size=40)
f32s = st.floats(width=32, allow_nan=False)
chars = st.characters(min_codepoint=0, max_codepoint=0xFFFF, blacklist_categories=())


def ints(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


ENUM = EnumSerializer(["RED", "GREEN", "BLUE"], "p.Color")

LEAVES = [
    (BooleanSerializer(), st.booleans()),
    (ByteSerializer(), ints(8)),
    (ShortSerializer(), ints(16)),
    (IntSerializer(), ints(32)),
    (LongSerializer(), ints(64)),
    (FloatSerializer(), f32s),
    (DoubleSerializer(), st.floats(allow_nan=False)),
    (CharSerializer(), chars),
    (StringSerializer(), st.none() | texts),
    (BytePrimitiveArraySerializer(), st.binary(max_size=20)),
    (BooleanPrimitiveArraySerializer(), st.lists(st.booleans(), max_size=10)),
    (ShortPrimitiveArraySerializer(), st.lists(ints(16), max_size=10)),
    (CharPrimitiveArraySerializer(), st.lists(chars, max_size=10)),
    (IntPrimitiveArraySerializer(), st.lists(ints(32), max_size=10)),
    (LongPrimitiveArraySerializer(), st.lists(ints(64), max_size=10)),
    (FloatPrimitiveArraySerializer(), st.lists(f32s, max_size=10)),
    (DoublePrimitiveArraySerializer(), st.lists(st.floats(allow_nan=False), max_size=10)),
    (StringArraySerializer(), st.lists(st.none() | texts, max_size=6)),
    (ENUM, st.sampled_from(["RED", "GREEN", "BLUE"])),
]

# scalar leaves for map keys (list-valued keys come back as tuples)
KEY_LEAVES = LEAVES[:9] + [LEAVES[-1]]


@st.composite
def serializers(draw, depth: int = 2):
    """A serializer tree of leaves, List, Map and Nullable."""
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(LEAVES))[0]
    kind = draw(st.sampled_from(["list", "map", "nullable"]))
    if kind == "list":
        return ListSerializer(draw(serializers(depth - 1)))
    if kind == "nullable":
        return NullableSerializer(draw(serializers(depth - 1)), draw(st.booleans()))
    return MapSerializer(draw(st.sampled_from(KEY_LEAVES))[0], draw(serializers(depth - 1)))


@st.composite
def serializer_and_value(draw):
    ser = draw(serializers())
    return ser, draw(values_for(ser))


def values_for(ser) -> st.SearchStrategy:
    for leaf, values in LEAVES:
        if leaf == ser:
            return values
    if isinstance(ser, ListSerializer):
        return st.lists(values_for(ser.element_serializer), max_size=3)
    if isinstance(ser, NullableSerializer):
        return st.none() | values_for(ser.inner)
    assert isinstance(ser, MapSerializer)
    return st.dictionaries(values_for(ser.key_serializer), st.none() | values_for(ser.value_serializer), max_size=3)


def same_value(a, b) -> bool:
    """Equality that treats NaN as equal to itself (NaN never appears here, but be exact)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@given(serializer_and_value())
def test_value_roundtrip(pair):
    ser, value = pair
    data = ser.to_bytes(value)
    back = ser.from_bytes(data)
    assert same_value(back, value)
    assert ser.to_bytes(back) == data
    if ser.get_length() > 0:
        assert len(data) == ser.get_length()


@given(serializer_and_value())
def test_snapshot_roundtrip_restores_equal_serializer(pair):
    ser, value = pair
    snap = ser.snapshot_configuration()
    blob = write_versioned_snapshot(snap)
    back = read_versioned_snapshot(blob)
    assert write_versioned_snapshot(back) == blob
    restored = back.restore_serializer()
    assert restored == ser
    assert back.resolve_schema_compatibility(ser).is_compatible_as_is()
    assert restored.to_bytes(restored.from_bytes(ser.to_bytes(value))) == ser.to_bytes(value)
    assert read_serializer_snapshot(write_serializer_snapshot(snap)) == snap


def reference_encode(s: str | None) -> bytes:
    """StringValue.writeString, one unit at a time, straight from the spec."""
    if s is None:
        return b"\x00"

    def varint(n: int) -> bytes:
        out = bytearray()
        while n >= 0x80:
            out.append((n & 0x7F) | 0x80)
            n >>= 7
        out.append(n)
        return bytes(out)

    units = utf16_units(s)
    return varint(len(units) + 1) + b"".join(varint(u) for u in units)


@given(st.none() | texts)
def test_string_codec_equals_reference(s):
    assert encode_string(s) == reference_encode(s)
    assert StringSerializer().from_bytes(reference_encode(s)) == s


@given(st.lists(st.none() | texts, max_size=5))
def test_concatenated_strings_decode_in_sequence(values):
    ser = ListSerializer(StringSerializer())
    assert ser.from_bytes(ser.to_bytes(values)) == values


@given(f32s)
def test_float_bits_roundtrip(f):
    data = FloatSerializer().to_bytes(f)
    assert data == struct.pack(">f", f)
    assert FloatSerializer().from_bytes(data) == f


@given(st.binary(max_size=40), st.sampled_from([ser for ser, _ in LEAVES] + [
    ListSerializer(StringSerializer()),
    MapSerializer(StringSerializer(), NullableSerializer(LongSerializer(), True)),
    NullableSerializer(ListSerializer(IntSerializer())),
]))
def test_random_bytes_raise_only_typed_errors(data, ser):
    try:
        value = ser.from_bytes(data)
    except StateFormatError:
        return
    assert ser.to_bytes(value) is not None


def with_enum(ser, replacement):
    """The same serializer tree with every enum leaf replaced."""
    if isinstance(ser, EnumSerializer):
        return replacement
    if isinstance(ser, ListSerializer):
        return ListSerializer(with_enum(ser.element_serializer, replacement))
    if isinstance(ser, NullableSerializer):
        return NullableSerializer.with_padding(with_enum(ser.inner, replacement), ser.padding_length)
    if isinstance(ser, MapSerializer):
        return MapSerializer(with_enum(ser.key_serializer, replacement), with_enum(ser.value_serializer, replacement))
    return ser


APPENDED = EnumSerializer(["RED", "GREEN", "BLUE", "PINK"], "p.Color")


@given(serializer_and_value())
def test_enum_append_anywhere_reconfigures_and_migrates_without_rewriting(pair):
    old, value = pair
    new = with_enum(old, APPENDED)
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    result = snap.resolve_schema_compatibility(new)
    old_bytes = old.to_bytes(value)
    if new == old:
        assert result.is_compatible_as_is()
        return
    assert result.is_compatible_with_reconfigured_serializer()
    reconf = result.get_reconfigured_serializer()
    assert reconf.from_bytes(old_bytes) == value
    # migrate_state through the reconfigured serializer == read old, write new: the same bytes
    out = DataOutputSerializer()
    src = DataInputDeserializer(old_bytes)
    snap.migrate_state(snap.restore_serializer(), reconf, src, out)
    assert out.get_copy_of_buffer() == old_bytes == reconf.to_bytes(snap.restore_serializer().from_bytes(old_bytes))
