"""Arrays, List, Map, Nullable: bytes (docs/formats.md §2.4, §2.5, §2.7, §7.1), value checks,
compatibility results with readable reasons, and migration of nested values."""

from __future__ import annotations

import enum
import math

import pytest

from statemorph.errors import SerializationError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.serializers import (
    BooleanPrimitiveArraySerializer,
    BytePrimitiveArraySerializer,
    BytesSerializer,
    CharPrimitiveArraySerializer,
    DoubleArraySerializer,
    DoublePrimitiveArraySerializer,
    EnumSerializer,
    FloatPrimitiveArraySerializer,
    IntArraySerializer,
    IntPrimitiveArraySerializer,
    IntSerializer,
    ListSerializer,
    LongArraySerializer,
    LongPrimitiveArraySerializer,
    LongSerializer,
    MapSerializer,
    NullableSerializer,
    ShortPrimitiveArraySerializer,
    StringArraySerializer,
    StringSerializer,
)
from statemorph.typeutils import (
    DEFAULT_REGISTRY,
    SchemaCompatibility,
    SimpleTypeSerializerSnapshot,
    TypeSerializer,
    TypeSerializerSnapshot,
    read_serializer_snapshot,
    write_serializer_snapshot,
)


def test_aliases():
    assert BytesSerializer is BytePrimitiveArraySerializer
    assert IntArraySerializer is IntPrimitiveArraySerializer
    assert LongArraySerializer is LongPrimitiveArraySerializer
    assert DoubleArraySerializer is DoublePrimitiveArraySerializer


@pytest.mark.parametrize(
    ("serializer", "value", "hexbytes"),
    [
        (BytePrimitiveArraySerializer(), b"\x01\x02\x03", "00 00 00 03 01 02 03"),
        (BooleanPrimitiveArraySerializer(), [True, False], "00 00 00 02 01 00"),
        (ShortPrimitiveArraySerializer(), [-2, 1], "00 00 00 02 FF FE 00 01"),
        (CharPrimitiveArraySerializer(), ["a", "é"], "00 00 00 02 00 61 00 E9"),
        (IntPrimitiveArraySerializer(), [42], "00 00 00 01 00 00 00 2A"),
        (LongPrimitiveArraySerializer(), [-1], "00 00 00 01 FF FF FF FF FF FF FF FF"),
        (FloatPrimitiveArraySerializer(), [1.5], "00 00 00 01 3F C0 00 00"),
        (DoublePrimitiveArraySerializer(), [1.5], "00 00 00 01 3F F8 00 00 00 00 00 00"),
        (StringArraySerializer(), ["a", None, ""], "00 00 00 03 02 61 00 01"),
        (IntPrimitiveArraySerializer(), [], "00 00 00 00"),
        (ListSerializer(IntSerializer()), [1, 2], "00 00 00 02 00 00 00 01 00 00 00 02"),
        (MapSerializer(StringSerializer(), LongSerializer()), {"k": 5, "n": None},
         "00 00 00 02 02 6B 00 00 00 00 00 00 00 00 05 02 6E 01"),
        (NullableSerializer(IntSerializer(), True), None, "01 00 00 00 00"),
        (NullableSerializer(IntSerializer(), True), 5, "00 00 00 00 05"),
        (NullableSerializer(IntSerializer()), None, "01"),
        (NullableSerializer(IntSerializer()), 5, "00 00 00 00 05"),
        (ListSerializer(StringSerializer()), ["x", None], "00 00 00 02 02 78 00"),
    ],
)
def test_bytes(serializer, value, hexbytes):
    expected = bytes.fromhex(hexbytes)
    assert serializer.to_bytes(value) == expected
    assert serializer.from_bytes(expected) == value


def test_float_array_canonicalises_nan_and_bytes_accept_signed_ints():
    data = FloatPrimitiveArraySerializer().to_bytes([float("nan")])
    assert data == bytes.fromhex("00 00 00 01 7F C0 00 00")
    assert math.isnan(FloatPrimitiveArraySerializer().from_bytes(data)[0])
    assert BytesSerializer().to_bytes([-1, 255, 0]) == bytes.fromhex("00 00 00 03 FF FF 00")
    assert BytesSerializer().to_bytes(bytearray(b"ab")) == bytes.fromhex("00 00 00 02 61 62")


def test_map_keeps_byte_order_on_read_and_write():
    m = MapSerializer(IntSerializer(), IntSerializer())
    data = m.to_bytes({3: 1, 1: 2, 2: 3})
    value = m.from_bytes(data)
    assert list(value) == [3, 1, 2]
    assert m.to_bytes(value) == data


def test_map_with_list_keys_reads_tuples_that_write_back():
    m = MapSerializer(IntArraySerializer(), IntSerializer())
    data = m.to_bytes({(1, 2): 3})
    assert m.from_bytes(data) == {(1, 2): 3}
    assert m.to_bytes(m.from_bytes(data)) == data


def test_nullable_lengths_and_helpers():
    assert NullableSerializer(IntSerializer(), True).get_length() == 5
    assert NullableSerializer(IntSerializer()).get_length() == -1
    assert NullableSerializer(StringSerializer(), True).get_length() == -1
    assert NullableSerializer.wrap_if_null_is_not_supported(StringSerializer()) == StringSerializer()
    assert NullableSerializer.wrap_if_null_is_not_supported(IntSerializer(), True) == NullableSerializer(
        IntSerializer(), True
    )
    wrapped = NullableSerializer(IntSerializer())
    assert NullableSerializer.wrap(wrapped) is wrapped
    assert NullableSerializer(IntSerializer(), True) != NullableSerializer(IntSerializer(), False)
    assert "padding=4" in repr(NullableSerializer(IntSerializer(), True))


@pytest.mark.parametrize(
    ("serializer", "value", "fragment"),
    [
        (IntArraySerializer(), None, "never null"),
        (IntArraySerializer(), [1, 2**40], "element [1]"),
        (IntArraySerializer(), [1, None], "element [1]"),
        (IntArraySerializer(), "abc", "expected a sequence"),
        (DoubleArraySerializer(), [1.0, "x"], "element [1]"),
        (FloatPrimitiveArraySerializer(), [1e39], "element [0]"),
        (BooleanPrimitiveArraySerializer(), [True, "yes"], "element [1]"),
        (CharPrimitiveArraySerializer(), ["ab"], "element [0]"),
        (StringArraySerializer(), ["a", 3], "element [1]"),
        (BytesSerializer(), [300], "expected bytes"),
        (ListSerializer(IntSerializer()), [1, None], "element [1]"),
        (ListSerializer(IntSerializer()), None, "cannot write None"),
        (ListSerializer(IntSerializer()), "12", "expected a list"),
        (MapSerializer(IntSerializer(), IntSerializer()), [1], "expected a dict"),
        (MapSerializer(IntSerializer(), IntSerializer()), {None: 1}, "key"),
        (MapSerializer(IntSerializer(), IntSerializer()), {1: "x"}, "value"),
    ],
)
def test_bad_values(serializer, value, fragment):
    with pytest.raises(SerializationError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        serializer.to_bytes(value)


# -- compatibility ------------------------------------------------------------------------------


def resolve(old: TypeSerializer, new: TypeSerializer) -> SchemaCompatibility:
    snap = read_serializer_snapshot(write_serializer_snapshot(old.snapshot_configuration()))
    return snap.resolve_schema_compatibility(new)


def test_list_and_map_compatibility_is_the_nested_result():
    assert resolve(ListSerializer(IntSerializer()), ListSerializer(IntSerializer())).is_compatible_as_is()
    r = resolve(ListSerializer(IntSerializer()), ListSerializer(LongSerializer()))
    assert r.is_incompatible()
    assert r.reason.startswith("element: ")
    r = resolve(MapSerializer(StringSerializer(), IntSerializer()), MapSerializer(StringSerializer(), LongSerializer()))
    assert r.is_incompatible()
    assert r.reason.startswith("value: ")
    r = resolve(MapSerializer(StringSerializer(), IntSerializer()), MapSerializer(IntSerializer(), IntSerializer()))
    assert r.reason.startswith("key: ")
    assert resolve(ListSerializer(IntSerializer()), IntArraySerializer()).is_incompatible()


def test_nullable_padding_change_is_incompatible_with_reason():
    r = resolve(NullableSerializer(IntSerializer(), True), NullableSerializer(IntSerializer(), False))
    assert r.is_incompatible()
    assert "padding" in r.reason and "4" in r.reason
    padded = NullableSerializer(IntSerializer(), True)
    assert resolve(padded, NullableSerializer(IntSerializer(), True)).is_compatible_as_is()
    r = resolve(NullableSerializer(IntSerializer()), NullableSerializer(LongSerializer()))
    assert r.is_incompatible() and r.reason.startswith("value: ")


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Color2(enum.Enum):
    GREEN = 2
    BLUE = 3
    RED = 1


def test_nested_enum_reconfiguration_rebuilds_the_collection():
    old = MapSerializer(StringSerializer(), ListSerializer(EnumSerializer(Color, "p.Color")))
    new = MapSerializer(StringSerializer(), ListSerializer(EnumSerializer(Color2, "p.Color")))
    r = resolve(old, new)
    assert r.is_compatible_with_reconfigured_serializer()
    reconf = r.get_reconfigured_serializer()
    assert isinstance(reconf, MapSerializer)
    inner = reconf.value_serializer.element_serializer
    assert inner.constant_names == ("RED", "GREEN", "BLUE")
    old_bytes = old.to_bytes({"a": [Color.GREEN, Color.RED]})
    assert reconf.from_bytes(old_bytes) == {"a": [Color2.GREEN, Color2.RED]}


# -- migration of nested values ----------------------------------------------------------------


class OldIntSer(IntSerializer):
    """Test-only: old values are ints; the new shape (BoxedSer) is ("boxed", long)."""

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return ShapeSnapshot()


class BoxedSer(TypeSerializer):
    def serialize(self, value, out: DataOutputSerializer) -> None:
        tag, v = value
        assert tag == "boxed"
        out.write_long(v)

    def deserialize(self, src: DataInputDeserializer):
        return ("boxed", src.read_long())

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        raise NotImplementedError


class ShapeSnapshot(SimpleTypeSerializerSnapshot):
    IDENTIFIER = "test.ds_basic.ShapeSnapshot"
    SERIALIZER = OldIntSer

    def resolve_new_serializer(self, new_serializer):
        return SchemaCompatibility.compatible_after_migration("int becomes a boxed long")

    def migrate_value(self, value, new_serializer):
        return ("boxed", value)


REGISTRY = DEFAULT_REGISTRY.child()
REGISTRY.register(ShapeSnapshot)


@pytest.mark.parametrize(
    ("old", "new", "value", "expected"),
    [
        (ListSerializer(OldIntSer()), ListSerializer(BoxedSer()), [1, 2], [("boxed", 1), ("boxed", 2)]),
        (MapSerializer(StringSerializer(), OldIntSer()), MapSerializer(StringSerializer(), BoxedSer()),
         {"a": 1, "n": None}, {"a": ("boxed", 1), "n": None}),
        (NullableSerializer(OldIntSer()), NullableSerializer(BoxedSer()), 7, ("boxed", 7)),
        (NullableSerializer(OldIntSer()), NullableSerializer(BoxedSer()), None, None),
        (ListSerializer(NullableSerializer(OldIntSer())), ListSerializer(NullableSerializer(BoxedSer())),
         [None, 3], [None, ("boxed", 3)]),
    ],
)
def test_migrate_state_equals_read_old_then_write_new(old, new, value, expected):
    snap = read_serializer_snapshot(write_serializer_snapshot(old.snapshot_configuration()), REGISTRY)
    compat = snap.resolve_schema_compatibility(new)
    assert compat.is_compatible_after_migration()
    assert "int becomes a boxed long" in compat.reason
    old_bytes = old.to_bytes(value)
    prior = snap.restore_serializer()
    assert snap.migrate_value(prior.from_bytes(old_bytes), new) == expected
    out = DataOutputSerializer()
    src = DataInputDeserializer(old_bytes)
    snap.migrate_state(prior, new, src, out)
    assert src.available() == 0
    assert out.get_copy_of_buffer() == new.to_bytes(expected)


def test_numpy_inputs_are_accepted():
    np = pytest.importorskip("numpy")
    assert IntArraySerializer().to_bytes(np.arange(3, dtype=np.int32)) == IntArraySerializer().to_bytes([0, 1, 2])
    assert DoubleArraySerializer().to_bytes(np.array([1.5, np.nan])) == bytes.fromhex(
        "00 00 00 02 3F F8 00 00 00 00 00 00 7F F8 00 00 00 00 00 00"
    )
    assert BooleanPrimitiveArraySerializer().to_bytes(np.array([True, False])) == bytes.fromhex("00 00 00 02 01 00")
    assert ListSerializer(LongSerializer()).to_bytes([np.int64(7)]) == ListSerializer(LongSerializer()).to_bytes([7])


def test_generators_are_refused():
    with pytest.raises(SerializationError, match="expected a sequence"):
        IntArraySerializer().to_bytes(x for x in [1])
