"""EnumSerializer: index bytes (docs/formats.md §2.6), restored (class-less) serializers, and the
compatibility rules of §5: same class and constants AS_IS, appended constants RECONFIGURED with
old indices kept, removed/renamed constants INCOMPATIBLE with the names in the reason."""

from __future__ import annotations

import enum

import pytest

from statemorph.errors import MalformedDataError, SerializationError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.serializers import EnumSerializer, IntSerializer
from statemorph.typeutils import read_serializer_snapshot, write_serializer_snapshot


class Color(enum.Enum):
    RED = "r"
    GREEN = "g"
    BLUE = "b"


class ColorAppended(enum.Enum):
    RED = "r"
    GREEN = "g"
    BLUE = "b"
    PINK = "p"


class ColorReordered(enum.Enum):
    PINK = "p"
    BLUE = "b"
    RED = "r"
    GREEN = "g"


class ColorRenamed(enum.Enum):
    RED = "r"
    LIME = "g"
    BLUE = "b"


def restored(ser: EnumSerializer):
    return read_serializer_snapshot(write_serializer_snapshot(ser.snapshot_configuration()))


def test_index_bytes_and_values():
    s = EnumSerializer(Color, "p.Color")
    assert s.to_bytes(Color.BLUE) == bytes.fromhex("00 00 00 02")
    assert s.to_bytes("GREEN") == bytes.fromhex("00 00 00 01")
    assert s.from_bytes(bytes.fromhex("00 00 00 02")) is Color.BLUE
    assert s.get_length() == 4


def test_default_java_name_is_python_qualified_name():
    assert EnumSerializer(Color).java_class_name == f"{__name__}.Color"


def test_constant_names_need_a_java_class_name():
    with pytest.raises(ValueError, match="java_class_name"):
        EnumSerializer(["A", "B"])
    with pytest.raises(ValueError, match="duplicate"):
        EnumSerializer(["A", "A"], "p.E")
    with pytest.raises(TypeError):
        EnumSerializer("AB", "p.E")


def test_restored_serializer_reads_names_and_equals_original():
    s = EnumSerializer(Color, "p.Color")
    r = restored(s).restore_serializer()
    assert r == s
    assert r.from_bytes(bytes.fromhex("00 00 00 00")) == "RED"
    assert r.to_bytes(Color.GREEN) == r.to_bytes("GREEN") == bytes.fromhex("00 00 00 01")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [(None, "None"), ("PURPLE", "no constant 'PURPLE'"), (ColorAppended.PINK, "not a member"), (3, "expected")],
)
def test_bad_values(value, fragment):
    with pytest.raises(SerializationError, match=fragment):
        EnumSerializer(Color, "p.Color").to_bytes(value)


def test_index_out_of_range_names_index_and_offset():
    s = EnumSerializer(Color, "p.Color")
    src = DataInputDeserializer(bytes.fromhex("00 00 00 01 00 00 00 03"))
    assert s.deserialize(src) is Color.GREEN
    with pytest.raises(MalformedDataError, match="index 3 at offset 4"):
        s.deserialize(src)
    with pytest.raises(MalformedDataError, match="index -1 at offset 0"):
        s.from_bytes(bytes.fromhex("FF FF FF FF"))


def test_same_constants_as_is():
    r = restored(EnumSerializer(Color, "p.Color")).resolve_schema_compatibility(EnumSerializer(Color, "p.Color"))
    assert r.is_compatible_as_is()


@pytest.mark.parametrize("new_class", [ColorAppended, ColorReordered])
def test_appended_or_reordered_constants_reconfigure_keeping_old_indices(new_class):
    old = EnumSerializer(Color, "p.Color")
    snap = restored(old)
    r = snap.resolve_schema_compatibility(EnumSerializer(new_class, "p.Color"))
    assert r.is_compatible_with_reconfigured_serializer()
    reconf = r.get_reconfigured_serializer()
    assert reconf.constant_names == ("RED", "GREEN", "BLUE", "PINK")
    assert reconf.enum_class is new_class
    for member in Color:
        old_bytes = old.to_bytes(member)
        assert reconf.from_bytes(old_bytes) is new_class[member.name]
        # migrate_state through the reconfigured serializer rewrites nothing
        out = DataOutputSerializer()
        snap.migrate_state(snap.restore_serializer(), reconf, DataInputDeserializer(old_bytes), out)
        assert out.get_copy_of_buffer() == old_bytes == reconf.to_bytes(new_class[member.name])
    assert reconf.to_bytes(new_class.PINK) == bytes.fromhex("00 00 00 03")


def test_migrate_value_turns_names_into_members():
    snap = restored(EnumSerializer(Color, "p.Color"))
    new = EnumSerializer(ColorAppended, "p.Color")
    assert snap.migrate_value("BLUE", new) is ColorAppended.BLUE


def test_renamed_constant_is_incompatible_naming_it():
    r = restored(EnumSerializer(Color, "p.Color")).resolve_schema_compatibility(
        EnumSerializer(ColorRenamed, "p.Color")
    )
    assert r.is_incompatible()
    assert "['GREEN']" in r.reason and "removed or renamed" in r.reason


def test_different_class_or_serializer_is_incompatible():
    snap = restored(EnumSerializer(Color, "p.Color"))
    r = snap.resolve_schema_compatibility(EnumSerializer(Color, "q.Color"))
    assert r.is_incompatible() and "p.Color" in r.reason and "q.Color" in r.reason
    assert snap.resolve_schema_compatibility(IntSerializer()).is_incompatible()


def test_snapshot_roundtrip_and_repr():
    s = EnumSerializer(["A", "B"], "p.E")
    snap = restored(s)
    assert snap == s.snapshot_configuration()
    assert "p.E" in repr(snap)
    assert repr(s) == "EnumSerializer('p.E', ('A', 'B'))"
