"""TupleSerializer and the flink-core RowSerializer: Flink 2.3 bytes (docs/formats.md §2.8, §2.9,
§7.2, §7.3, §7.9), snapshot persistence, the §5 compatibility rules and migration."""

from __future__ import annotations

import enum

import pytest

from statemorph.errors import SerializationError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.row import Row, RowKind
from statemorph.serializers import (
    EnumSerializer,
    IntSerializer,
    LongSerializer,
    NullableSerializer,
    RowSerializer,
    StringSerializer,
    TupleSerializer,
)
from statemorph.serializers.tuples import RowSerializerSnapshot, TupleSerializerSnapshot
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

INT_SNAP = "org.apache.flink.api.common.typeutils.base.IntSerializer$IntSerializerSnapshot"
STRING_SNAP = "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"
ROW_SNAP = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
TUPLE_SNAP = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"


def utf(s: str) -> bytes:
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def i32(v: int) -> bytes:
    return v.to_bytes(4, "big", signed=True)


def versioned_simple(identifier: str) -> bytes:
    return utf(identifier) + i32(3)


def row_int_string(**kw) -> RowSerializer:
    return RowSerializer([IntSerializer(), StringSerializer()], **kw)


# -- Tuple ------------------------------------------------------------------------------------

def test_tuple2_bytes_match_flink():
    t = TupleSerializer([IntSerializer(), StringSerializer()])
    assert t.to_bytes((7, "ab")) == bytes.fromhex("00 00 00 07 03 61 62")
    assert t.from_bytes(bytes.fromhex("00 00 00 07 03 61 62")) == (7, "ab")
    assert t.tuple_class_name == "org.apache.flink.api.java.tuple.Tuple2"


def test_tuple_null_goes_to_field_serializers_that_can_write_it():
    """Flink golden: Tuple2<Integer,String>(-1, null) is ``ff ff ff ff 00``."""
    t = TupleSerializer([IntSerializer(), StringSerializer()])
    assert t.to_bytes((-1, None)) == bytes.fromhex("ff ff ff ff 00")
    assert t.from_bytes(bytes.fromhex("ff ff ff ff 00")) == (-1, None)
    n = TupleSerializer([NullableSerializer(IntSerializer()), StringSerializer()])
    assert n.to_bytes((None, "x")) == bytes.fromhex("01 02 78")


def test_tuple_accepts_list_and_returns_tuple():
    t = TupleSerializer([IntSerializer(), IntSerializer()])
    v = t.from_bytes(t.to_bytes([1, 2]))
    assert v == (1, 2) and type(v) is tuple


def test_tuple_null_field_names_the_field():
    t = TupleSerializer([IntSerializer(), StringSerializer(), IntSerializer()])
    with pytest.raises(SerializationError, match="field f2 is null and IntSerializer cannot write null"):
        t.to_bytes((1, "a", None))
    with pytest.raises(SerializationError, match="cannot be null"):
        t.to_bytes(None)


def test_tuple_arity_and_type_errors():
    t = TupleSerializer([IntSerializer(), IntSerializer()])
    with pytest.raises(SerializationError, match="arity 3"):
        t.to_bytes((1, 2, 3))
    with pytest.raises(SerializationError, match="expected a tuple"):
        t.to_bytes({"a": 1})


def test_tuple_nested_error_carries_field_path():
    inner = TupleSerializer([IntSerializer(), IntSerializer()])
    outer = TupleSerializer([StringSerializer(), inner])
    with pytest.raises(SerializationError, match=r"field path: f1"):
        outer.to_bytes(("x", (1, None)))
    with pytest.raises(SerializationError) as ei:
        outer.to_bytes(("x", (1, "not an int")))
    assert "f1.f1" in str(ei.value)


def test_tuple_length_is_fixed_only_for_fixed_fields():
    assert TupleSerializer([IntSerializer(), LongSerializer()]).get_length() == 12
    assert TupleSerializer([IntSerializer(), StringSerializer()]).get_length() == -1


def test_tuple_constructor_rules():
    with pytest.raises(ValueError):
        TupleSerializer([])
    with pytest.raises(ValueError, match="at most 25"):
        TupleSerializer([IntSerializer()] * 26)
    assert TupleSerializer([IntSerializer()] * 26, "p.BigTuple").arity == 26


def test_tuple_snapshot_bytes_match_flink():
    t = TupleSerializer([IntSerializer(), StringSerializer()])
    env = write_serializer_snapshot(t.snapshot_configuration())
    expected = (
        i32(2) + utf(TUPLE_SNAP) + i32(3)
        + i32(911108) + i32(2) + utf("org.apache.flink.api.java.tuple.Tuple2")
        + i32(1333245) + i32(1) + i32(2)
        + versioned_simple(INT_SNAP) + versioned_simple(STRING_SNAP)
    )
    assert env == expected
    assert len(env) == 311
    snap = read_serializer_snapshot(env)
    assert isinstance(snap, TupleSerializerSnapshot)
    assert snap.restore_serializer() == t


def test_tuple_class_is_not_compared():
    old = TupleSerializer([IntSerializer(), StringSerializer()], "p.MyTuple")
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    r = snap.resolve_schema_compatibility(TupleSerializer([IntSerializer(), StringSerializer()]))
    assert r.is_compatible_as_is()


def test_tuple_arity_change_is_incompatible_and_field_change_names_field():
    snap = TupleSerializer([IntSerializer(), StringSerializer()]).snapshot_configuration()
    assert snap.resolve_schema_compatibility(TupleSerializer([IntSerializer()])).is_incompatible()
    r = snap.resolve_schema_compatibility(TupleSerializer([LongSerializer(), StringSerializer()]))
    assert r.is_incompatible() and r.reason.startswith("f0:")
    assert snap.resolve_schema_compatibility(RowSerializer([IntSerializer(), StringSerializer()])).is_incompatible()


# -- Row: data ----------------------------------------------------------------------------------

def test_row_examples_match_flink():
    r = row_int_string()
    assert r.to_bytes((1, None)) == bytes.fromhex("10 00 00 00 01")
    assert r.to_bytes(Row((1, "x"), RowKind.UPDATE_AFTER)) == bytes.fromhex("40 00 00 00 01 02 78")
    assert r.to_bytes(Row((None, None), RowKind.DELETE)) == bytes.fromhex("F0")
    assert row_int_string(supports_row_kind=False).to_bytes((1, None)) == bytes.fromhex("40 00 00 00 01")


def test_row_nine_fields_mask_spills_into_second_byte():
    r = RowSerializer([IntSerializer()] * 9)
    value = Row((0, None, 2, 3, 4, 5, 6, 7, None), RowKind.UPDATE_BEFORE)
    data = r.to_bytes(value)
    assert data[:2] == bytes.fromhex("90 20")
    back = r.from_bytes(data)
    assert back == value and back.kind is RowKind.UPDATE_BEFORE


@pytest.mark.parametrize("kind", list(RowKind))
def test_row_kind_round_trips(kind):
    r = row_int_string()
    back = r.from_bytes(r.to_bytes(Row((5, "k"), kind)))
    assert isinstance(back, Row) and back.kind is kind and back == (5, "k")


def test_legacy_row_drops_kind_and_reads_insert():
    r = row_int_string(supports_row_kind=False)
    back = r.from_bytes(r.to_bytes(Row((5, "k"), RowKind.DELETE)))
    assert back.kind is RowKind.INSERT and back == (5, "k")


def test_nested_row_round_trip():
    inner = RowSerializer(
        [IntSerializer(), LongSerializer(), StringSerializer()], field_names=["userId", "ts", "device"]
    )
    outer = RowSerializer([LongSerializer(), inner], field_names=["eventId", "metadata"])
    value = Row((7, Row((3, 1700000000000, "phone"), RowKind.UPDATE_AFTER)))
    back = outer.from_bytes(outer.to_bytes(value))
    assert back == (7, (3, 1700000000000, "phone"))
    assert back[1].kind is RowKind.UPDATE_AFTER
    assert outer.from_bytes(outer.to_bytes((7, None))) == (7, None)


def test_named_rows_map_to_positions():
    r = row_int_string(field_names=["id", "name"])
    assert r.to_bytes({"name": "x", "id": 1}) == r.to_bytes((1, "x"))
    assert r.to_bytes({"id": 1}) == bytes.fromhex("10 00 00 00 01")
    with pytest.raises(SerializationError, match="unknown field name 'nope'"):
        r.to_bytes({"nope": 1})
    with pytest.raises(SerializationError, match="needs a serializer with field_names"):
        row_int_string().to_bytes({"id": 1})


def test_row_errors_name_the_field():
    r = row_int_string(field_names=["id", "name"])
    with pytest.raises(SerializationError, match=r"field path: name"):
        r.to_bytes((1, 5))
    with pytest.raises(SerializationError, match="arity 3"):
        r.to_bytes((1, "a", 2))
    with pytest.raises(SerializationError, match="cannot be null"):
        r.to_bytes(None)


def test_row_names_are_not_part_of_equality():
    assert row_int_string(field_names=["a", "b"]) == row_int_string()
    assert row_int_string(supports_row_kind=False) != row_int_string()
    with pytest.raises(ValueError):
        RowSerializer([IntSerializer()], field_names=["a", "b"])
    with pytest.raises(ValueError):
        RowSerializer([IntSerializer(), IntSerializer()], field_names=["a", "a"])


def test_row_copy_bytes_is_exact():
    r = RowSerializer([IntSerializer(), row_int_string(), StringSerializer()])
    data = r.to_bytes(Row((1, Row((None, "z"), RowKind.DELETE), None), RowKind.UPDATE_BEFORE))
    out = DataOutputSerializer()
    src = DataInputDeserializer(data)
    r.copy_bytes(src, out)
    assert out.get_copy_of_buffer() == data and src.available() == 0


# -- Row: snapshot -----------------------------------------------------------------------------

def row_snapshot_bytes(outer_version: int, outer: bytes) -> bytes:
    return (
        utf(ROW_SNAP) + i32(3) + i32(911108) + i32(outer_version) + outer
        + i32(1333245) + i32(1) + i32(2) + versioned_simple(INT_SNAP) + versioned_simple(STRING_SNAP)
    )


def test_row_snapshot_bytes_match_flink():
    env = write_serializer_snapshot(row_int_string().snapshot_configuration())
    assert env == i32(2) + row_snapshot_bytes(4, b"\x01")
    assert len(env) == 284
    legacy = write_versioned_snapshot(row_int_string(supports_row_kind=False).snapshot_configuration())
    assert legacy == row_snapshot_bytes(4, b"\x00")


@pytest.mark.parametrize(
    ("outer_version", "outer", "kind_flag"),
    [(1, b"", False), (2, b"", False), (3, b"", True), (4, b"\x01", True), (4, b"\x00", False)],
)
def test_row_snapshot_reads_old_outer_versions(outer_version, outer, kind_flag):
    snap = read_versioned_snapshot(row_snapshot_bytes(outer_version, outer))
    assert isinstance(snap, RowSerializerSnapshot)
    assert snap.supports_row_kind is kind_flag
    assert snap.restore_serializer() == row_int_string(supports_row_kind=kind_flag)
    r = snap.resolve_schema_compatibility(row_int_string())
    assert r.is_compatible_as_is() if kind_flag else r.is_compatible_after_migration()


def test_row_kind_flag_change_needs_migration_and_migrates():
    old = row_int_string(supports_row_kind=False)
    new = row_int_string()
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    r = snap.resolve_schema_compatibility(new)
    assert r.is_compatible_after_migration()
    assert "row kind" in r.reason
    old_bytes = old.to_bytes((3, "x"))
    out = DataOutputSerializer()
    snap.migrate_state(snap.restore_serializer(), new, DataInputDeserializer(old_bytes), out)
    assert out.get_copy_of_buffer() == new.to_bytes(old.from_bytes(old_bytes))
    assert out.get_copy_of_buffer() == bytes.fromhex("00 00 00 00 03 02 78")


def test_row_arity_change_is_incompatible():
    snap = row_int_string().snapshot_configuration()
    r = snap.resolve_schema_compatibility(RowSerializer([IntSerializer(), StringSerializer(), IntSerializer()]))
    assert r.is_incompatible() and "arity" in r.reason


def test_row_field_type_change_names_field_from_new_serializer():
    snap = read_versioned_snapshot(write_versioned_snapshot(row_int_string().snapshot_configuration()))
    r = snap.resolve_schema_compatibility(
        RowSerializer([LongSerializer(), StringSerializer()], field_names=["userId", "name"])
    )
    assert r.is_incompatible() and r.reason.startswith("userId:")
    r2 = snap.resolve_schema_compatibility(RowSerializer([LongSerializer(), StringSerializer()]))
    assert r2.reason.startswith("f0:")


def test_row_kind_flag_and_nested_migration_reasons_combine():
    old_inner = RowSerializer([IntSerializer()], supports_row_kind=False)
    old = RowSerializer([old_inner, StringSerializer()])
    new = RowSerializer([RowSerializer([IntSerializer()]), StringSerializer()], field_names=["inner", "s"])
    r = old.snapshot_configuration().resolve_schema_compatibility(new)
    assert r.is_compatible_after_migration() and "inner" in r.reason
    flat = RowSerializer([IntSerializer(), StringSerializer()])
    assert old.snapshot_configuration().resolve_schema_compatibility(flat).is_incompatible()


class Color(enum.Enum):
    RED = 0
    GREEN = 1
    BLUE = 2


class OldColor(enum.Enum):
    RED = 0
    GREEN = 1


def test_row_with_reconfigured_enum_field_is_reconfigured():
    old = RowSerializer([EnumSerializer(OldColor, "p.Color"), IntSerializer()])
    new = RowSerializer([EnumSerializer(Color, "p.Color"), IntSerializer()], field_names=["c", "n"])
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    r = snap.resolve_schema_compatibility(new)
    assert r.is_compatible_with_reconfigured_serializer()
    rec = r.get_reconfigured_serializer()
    assert isinstance(rec, RowSerializer)
    assert rec.from_bytes(old.to_bytes((OldColor.GREEN, 4))) == (Color.GREEN, 4)


def test_row_and_tuple_migrate_nested_values():
    """Values read by a class-less restored enum serializer are names; migration through a row
    and a tuple turns them into members of the new enum, keeping the row kind."""
    old = RowSerializer([EnumSerializer(OldColor, "p.Color"), TupleSerializer([EnumSerializer(OldColor, "p.Color")])])
    snap = read_versioned_snapshot(write_versioned_snapshot(old.snapshot_configuration()))
    restored = snap.restore_serializer()
    value = restored.from_bytes(old.to_bytes(Row((OldColor.RED, (OldColor.GREEN,)), RowKind.UPDATE_AFTER)))
    assert value == ("RED", ("GREEN",))
    new = RowSerializer([EnumSerializer(Color, "p.Color"), TupleSerializer([EnumSerializer(Color, "p.Color")])])
    migrated = snap.migrate_value(value, new)
    assert migrated == (Color.RED, (Color.GREEN,))
    assert migrated.kind is RowKind.UPDATE_AFTER
    assert snap.migrate_value(Row((None, None)), new) == (None, None)


def test_row_with_nullable_field_snapshot_round_trip():
    r = RowSerializer([NullableSerializer(IntSerializer(), True), StringSerializer()])
    snap = read_versioned_snapshot(write_versioned_snapshot(r.snapshot_configuration()))
    assert snap.restore_serializer() == r
    assert snap.resolve_schema_compatibility(r).is_compatible_as_is()
