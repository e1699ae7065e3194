"""PojoSerializer over dataclasses and PojoSerializerSnapshot: Flink 2.3 bytes (docs/formats.md
§2.10, §4.5, §7.3, §7.9), field order, the §5 POJO compatibility rule and migration."""

from __future__ import annotations

import dataclasses
import enum

import pytest

from statemorph.errors import MalformedDataError, SerializationError, SnapshotError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.row import Row
from statemorph.serializers import (
    EnumSerializer,
    IntSerializer,
    ListSerializer,
    LongSerializer,
    PojoSerializer,
    RowSerializer,
    StringSerializer,
)
from statemorph.serializers.pojo import OPTIONAL_MAP_HEADER, PojoSerializerSnapshot, java_string_order
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

POJO_SNAP = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
BASE = "org.apache.flink.api.common.typeutils.base."


def utf(s: str) -> bytes:
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


OPTMAP = OPTIONAL_MAP_HEADER.to_bytes(8, "big")


@dataclasses.dataclass
class MyPojo:
    b: int | None
    a: str | None
    c: int | None = None


def my_pojo_serializer() -> PojoSerializer:
    return PojoSerializer(
        MyPojo, {"b": IntSerializer(), "a": StringSerializer(), "c": LongSerializer()}, "p.MyPojo"
    )


def snapshot_of(ser) -> PojoSerializerSnapshot:
    snap = read_versioned_snapshot(write_versioned_snapshot(ser.snapshot_configuration()))
    assert isinstance(snap, PojoSerializerSnapshot)
    return snap


# -- data -------------------------------------------------------------------------------------

def test_pojo_bytes_match_flink():
    p = my_pojo_serializer()
    data = p.to_bytes(MyPojo(b=9, a="hi"))
    assert data == bytes.fromhex("02 00 03 68 69 00 00 00 00 09 01")
    assert p.from_bytes(data) == MyPojo(b=9, a="hi", c=None)
    assert p.to_bytes(None) == b"\x01"
    assert p.from_bytes(b"\x01") is None


def test_pojo_accepts_dicts_and_rejects_unknown_fields():
    p = my_pojo_serializer()
    assert p.to_bytes({"a": "hi", "b": 9}) == bytes.fromhex("02 00 03 68 69 00 00 00 00 09 01")
    with pytest.raises(SerializationError, match=r"unknown field\(s\) \['z'\]"):
        p.to_bytes({"a": "hi", "z": 1})
    with pytest.raises(SerializationError, match="expected MyPojo"):
        p.to_bytes((1, 2, 3))


def test_pojo_subclass_instance_is_rejected():
    @dataclasses.dataclass
    class Sub(MyPojo):
        pass

    with pytest.raises(SerializationError, match="subclass"):
        my_pojo_serializer().to_bytes(Sub(1, "x"))


def test_pojo_field_error_names_field():
    with pytest.raises(SerializationError, match=r"field path: b"):
        my_pojo_serializer().to_bytes(MyPojo(b="nine", a="x"))


def test_pojo_fields_sorted_in_java_utf16_order():
    # U+1D400 is a surrogate pair (D835 DC00) in UTF-16: Java sorts it before U+FF71,
    # Python's code-point order would put it after.
    names = ["\uff71", "\U0001d400", "b", "B", "a"]
    assert sorted(names, key=java_string_order) == ["B", "a", "b", "\U0001d400", "\uff71"]
    p = PojoSerializer(None, {n: IntSerializer() for n in names}, "p.X")
    assert p.field_names == ["B", "a", "b", "\U0001d400", "\uff71"]
    value = {n: i for i, n in enumerate(names)}
    data = p.to_bytes(value)
    assert data == b"\x02" + b"".join(b"\x00" + i32(value[n]) for n in p.field_names)
    assert p.from_bytes(data) == value


def test_pojo_constructor_validates_fields():
    with pytest.raises(ValueError, match=r"missing \['c'\]"):
        PojoSerializer(MyPojo, {"a": StringSerializer(), "b": IntSerializer()})
    with pytest.raises(TypeError):
        PojoSerializer(dict, {"a": StringSerializer()})
    with pytest.raises(ValueError, match="java_class_name"):
        PojoSerializer(None, {"a": StringSerializer()})
    assert PojoSerializer(MyPojo, my_pojo_serializer().field_serializers).java_class_name.endswith(".MyPojo")


def test_pojo_with_init_false_and_frozen_fields():
    @dataclasses.dataclass(frozen=True)
    class Frozen:
        x: int
        y: int = dataclasses.field(init=False, default=0)

    p = PojoSerializer(Frozen, {"x": IntSerializer(), "y": IntSerializer()}, "p.Frozen")
    v = Frozen(3)
    object.__setattr__(v, "y", 5)
    back = p.from_bytes(p.to_bytes(v))
    assert (back.x, back.y) == (3, 5)


def test_pojo_flags_for_subclasses_are_explained():
    p = my_pojo_serializer()
    with pytest.raises(MalformedDataError, match="subclass POJOs are not supported"):
        p.from_bytes(b"\x04" + utf("p.SubPojo") + bytes.fromhex("02 01 01 01 01"))
    with pytest.raises(MalformedDataError, match="registered"):
        p.from_bytes(bytes.fromhex("08 00 02 01 01 01"))


def test_pojo_copy_bytes_is_exact():
    p = my_pojo_serializer()
    data = p.to_bytes(MyPojo(b=None, a="x", c=5))
    out = DataOutputSerializer()
    p.copy_bytes(DataInputDeserializer(data), out)
    assert out.get_copy_of_buffer() == data


def test_pojo_nested_in_row_and_list():
    r = RowSerializer([my_pojo_serializer(), ListSerializer(my_pojo_serializer())])
    value = (MyPojo(1, "a", 2), [MyPojo(3, None), None])
    assert r.from_bytes(r.to_bytes(value)) == value


# -- snapshot -----------------------------------------------------------------------------------

def field_entry(cls: str, name: str, identifier: str) -> bytes:
    key = utf(cls) + utf(name)
    value = utf(identifier) + i32(3)
    return utf(name) + b"\x01" + i32(len(key)) + key + b"\x01" + i32(len(value)) + value


def test_pojo_snapshot_bytes_match_flink():
    env = write_serializer_snapshot(my_pojo_serializer().snapshot_configuration())
    expected = (
        i32(2) + utf(POJO_SNAP) + i32(2) + utf("p.MyPojo")
        + OPTMAP + i32(3)
        + field_entry("p.MyPojo", "a", BASE + "StringSerializer$StringSerializerSnapshot")
        + field_entry("p.MyPojo", "b", BASE + "IntSerializer$IntSerializerSnapshot")
        + field_entry("p.MyPojo", "c", BASE + "LongSerializer$LongSerializerSnapshot")
        + OPTMAP + i32(0) + OPTMAP + i32(0)
    )
    assert env == expected
    assert len(env) == 460
    # the frame lengths of §7.9
    assert expected.count(bytes.fromhex("01 00 00 00 0D")) == 3
    assert bytes.fromhex("01 00 00 00 5A") in expected and bytes.fromhex("01 00 00 00 54") in expected


def test_restored_serializer_reads_dicts_and_rewrites_same_snapshot():
    p = my_pojo_serializer()
    env = write_serializer_snapshot(p.snapshot_configuration())
    snap = read_serializer_snapshot(env)
    restored = snap.restore_serializer()
    assert restored.pojo_class is None
    assert restored.from_bytes(p.to_bytes(MyPojo(9, "hi"))) == {"a": "hi", "b": 9, "c": None}
    assert restored.to_bytes({"a": "hi", "b": 9}) == p.to_bytes(MyPojo(9, "hi"))
    assert write_serializer_snapshot(restored.snapshot_configuration()) == env
    assert snap.resolve_schema_compatibility(p).is_compatible_as_is()


def test_snapshot_with_absent_key_drops_field_and_writes_missing_name():
    """A field whose key is absent (class field gone) is read and dropped, as in Flink."""
    body = (
        utf("p.MyPojo") + OPTMAP + i32(2)
        + field_entry("p.MyPojo", "a", BASE + "StringSerializer$StringSerializerSnapshot")
        + utf("gone") + b"\x00" + b"\x01" + i32(len(utf(BASE + "IntSerializer$IntSerializerSnapshot")) + 4)
        + utf(BASE + "IntSerializer$IntSerializerSnapshot") + i32(3)
        + OPTMAP + i32(0) + OPTMAP + i32(0)
    )
    snap = read_versioned_snapshot(utf(POJO_SNAP) + i32(2) + body)
    restored = snap.restore_serializer()
    assert restored.field_names == ["a"]
    assert restored.from_bytes(bytes.fromhex("02 00 02 78 00 00 00 00 07")) == {"a": "x"}
    assert restored.to_bytes({"a": "x"}) == bytes.fromhex("02 00 02 78 01")
    rewritten = restored.snapshot_configuration()
    assert [e.key_name for e in rewritten.fields] == ["a", "missing-field-at-1"]
    new = PojoSerializer(None, {"a": StringSerializer()}, "p.MyPojo")
    r = snap.resolve_schema_compatibility(new)
    assert r.is_compatible_after_migration() and "gone" in r.reason


def test_snapshot_with_unreadable_field_serializer():
    bogus = utf("com.example.UnknownSnapshot") + i32(1)
    body = (
        utf("p.MyPojo") + OPTMAP + i32(1)
        + utf("a") + b"\x01" + i32(len(utf("p.MyPojo") + utf("a"))) + utf("p.MyPojo") + utf("a")
        + b"\x01" + i32(len(bogus)) + bogus
        + OPTMAP + i32(0) + OPTMAP + i32(0)
    )
    snap = read_versioned_snapshot(utf(POJO_SNAP) + i32(2) + body)
    with pytest.raises(SnapshotError, match="UnknownSnapshot"):
        snap.restore_serializer()
    r = snap.resolve_schema_compatibility(PojoSerializer(None, {"a": StringSerializer()}, "p.MyPojo"))
    assert r.is_incompatible() and "unreadable" in r.reason


def test_snapshot_with_subclass_entries_reads_and_is_incompatible():
    sub = PojoSerializer(None, {"z": IntSerializer()}, "p.SubPojo").snapshot_configuration()
    sub_bytes = write_versioned_snapshot(sub)
    body = (
        utf("p.MyPojo") + OPTMAP + i32(0)
        + OPTMAP + i32(1) + utf("p.SubPojo") + b"\x01" + i32(0) + b"\x01" + i32(len(sub_bytes)) + sub_bytes
        + OPTMAP + i32(0)
    )
    data = utf(POJO_SNAP) + i32(2) + body
    snap = read_versioned_snapshot(data)
    assert write_versioned_snapshot(snap) == data
    r = snap.resolve_schema_compatibility(PojoSerializer(None, {}, "p.MyPojo"))
    assert r.is_incompatible() and "p.SubPojo" in r.reason


# -- compatibility ------------------------------------------------------------------------------

def test_different_class_is_incompatible():
    snap = snapshot_of(my_pojo_serializer())
    other = PojoSerializer(MyPojo, my_pojo_serializer().field_serializers, "p.Other")
    r = snap.resolve_schema_compatibility(other)
    assert r.is_incompatible() and "p.Other" in r.reason
    assert snap.resolve_schema_compatibility(IntSerializer()).is_incompatible()


def test_field_type_change_is_incompatible_naming_field():
    snap = snapshot_of(my_pojo_serializer())
    new = PojoSerializer(MyPojo, {"a": StringSerializer(), "b": LongSerializer(), "c": LongSerializer()}, "p.MyPojo")
    r = snap.resolve_schema_compatibility(new)
    assert r.is_incompatible()
    assert r.reason == "b: IntSerializer -> LongSerializer"


@dataclasses.dataclass
class MyPojoV2:
    a: str | None
    c: int | None
    d: list | None = None
    e: int = 42


def v2_serializer() -> PojoSerializer:
    return PojoSerializer(
        MyPojoV2,
        {"a": StringSerializer(), "c": LongSerializer(), "d": ListSerializer(IntSerializer()), "e": IntSerializer()},
        "p.MyPojo",
    )


def test_fields_added_and_removed_need_migration():
    snap = snapshot_of(my_pojo_serializer())
    r = snap.resolve_schema_compatibility(v2_serializer())
    assert r.is_compatible_after_migration()
    assert "fields removed: b" in r.reason and "fields added: d, e" in r.reason


def test_migrate_state_equals_read_old_write_new():
    old = my_pojo_serializer()
    new = v2_serializer()
    snap = snapshot_of(old)
    prior = snap.restore_serializer()
    for value in (MyPojo(9, "hi", 5), MyPojo(None, None, None), None):
        old_bytes = old.to_bytes(value)
        out = DataOutputSerializer()
        snap.migrate_state(prior, new, DataInputDeserializer(old_bytes), out)
        if value is None:
            expected = new.to_bytes(None)
        else:
            expected = new.to_bytes(MyPojoV2(a=value.a, c=value.c))
        assert out.get_copy_of_buffer() == expected
    migrated = new.from_bytes(new.to_bytes(snap.migrate_value(prior.from_bytes(old.to_bytes(MyPojo(1, "x"))), new)))
    assert migrated == MyPojoV2(a="x", c=None, d=None, e=42)


def test_migrate_value_from_dataclass_and_default_factory():
    @dataclasses.dataclass
    class V3:
        a: str | None
        tags: list = dataclasses.field(default_factory=lambda: [1])

    new = PojoSerializer(V3, {"a": StringSerializer(), "tags": ListSerializer(IntSerializer())}, "p.MyPojo")
    snap = snapshot_of(my_pojo_serializer())
    assert snap.migrate_value(MyPojo(1, "q"), new) == V3("q", [1])
    assert snap.migrate_value(None, new) is None
    dict_new = PojoSerializer(None, {"a": StringSerializer()}, "p.MyPojo")
    assert snap.migrate_value({"a": "q", "b": 1, "c": None}, dict_new) == {"a": "q"}


class OldColor(enum.Enum):
    RED = 0
    GREEN = 1


class Color(enum.Enum):
    RED = 0
    GREEN = 1
    BLUE = 2


@dataclasses.dataclass
class Paint:
    color: object
    liters: int | None


def test_nested_reconfiguration_gives_reconfigured_pojo():
    old = PojoSerializer(Paint, {"color": EnumSerializer(OldColor, "p.Color"), "liters": IntSerializer()}, "p.Paint")
    new = PojoSerializer(Paint, {"color": EnumSerializer(Color, "p.Color"), "liters": IntSerializer()}, "p.Paint")
    snap = snapshot_of(old)
    r = snap.resolve_schema_compatibility(new)
    assert r.is_compatible_with_reconfigured_serializer()
    rec = r.get_reconfigured_serializer()
    assert rec.pojo_class is Paint
    assert rec.from_bytes(old.to_bytes(Paint(OldColor.GREEN, 3))) == Paint(Color.GREEN, 3)


def test_nested_migration_of_a_row_field_inside_a_pojo():
    old_row = RowSerializer([IntSerializer()], supports_row_kind=False)
    old = PojoSerializer(None, {"r": old_row, "x": IntSerializer()}, "p.P")
    new = PojoSerializer(None, {"r": RowSerializer([IntSerializer()]), "x": IntSerializer()}, "p.P")
    snap = snapshot_of(old)
    r = snap.resolve_schema_compatibility(new)
    assert r.is_compatible_after_migration() and r.reason.startswith("r:")
    data = old.to_bytes({"r": (5,), "x": 1})
    out = DataOutputSerializer()
    snap.migrate_state(snap.restore_serializer(), new, DataInputDeserializer(data), out)
    assert out.get_copy_of_buffer() == new.to_bytes({"r": Row((5,)), "x": 1})


def test_nested_enum_names_migrate_to_members():
    old = PojoSerializer(Paint, {"color": EnumSerializer(OldColor, "p.Color"), "liters": IntSerializer()}, "p.Paint")
    new = PojoSerializer(Paint, {"color": EnumSerializer(Color, "p.Color"), "liters": IntSerializer()}, "p.Paint")
    snap = snapshot_of(old)
    value = snap.restore_serializer().from_bytes(old.to_bytes(Paint(OldColor.RED, 1)))
    assert value == {"color": "RED", "liters": 1}
    assert snap.migrate_value(value, new) == Paint(Color.RED, 1)


def test_live_snapshot_restores_dataclass_serializer():
    p = my_pojo_serializer()
    restored = p.snapshot_configuration().restore_serializer()
    assert restored == p
    assert restored.from_bytes(p.to_bytes(MyPojo(1, "a"))) == MyPojo(1, "a")
    assert snapshot_of(p).restore_serializer().pojo_class is None


def test_row_of_pojo_with_added_field_migrates():
    old = RowSerializer([IntSerializer(), my_pojo_serializer()])
    new = RowSerializer([IntSerializer(), v2_serializer()])
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    r = snap.resolve_schema_compatibility(new)
    assert r.is_compatible_after_migration() and r.reason.startswith("f1:")
    data = old.to_bytes((5, MyPojo(9, "hi", 3)))
    out = DataOutputSerializer()
    snap.migrate_state(snap.restore_serializer(), new, DataInputDeserializer(data), out)
    assert out.get_copy_of_buffer() == new.to_bytes((5, MyPojoV2(a="hi", c=3)))
    assert new.from_bytes(out.get_copy_of_buffer()) == (5, MyPojoV2("hi", 3, None, 42))


def test_migration_into_a_dataclass_that_refuses_the_values_is_typed():
    from statemorph.errors import StateMigrationError

    @dataclasses.dataclass
    class Strict:
        a: str

        def __post_init__(self):
            if self.a is None:
                raise ValueError("a is required")

    new = PojoSerializer(Strict, {"a": StringSerializer()}, "p.MyPojo")
    snap = snapshot_of(my_pojo_serializer())
    assert snap.migrate_value({"a": "ok", "b": 1, "c": None}, new) == Strict("ok")
    with pytest.raises(StateMigrationError, match="a is required"):
        snap.migrate_value({"a": None, "b": 1, "c": None}, new)
