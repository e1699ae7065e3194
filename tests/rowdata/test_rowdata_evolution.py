"""RowData schema evolution: compatibility answers, plans, and migrated bytes."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from statemorph.errors import IncompatibleSchemaError, JavaSerializationError, SnapshotError
from statemorph.io import DataOutputSerializer
from statemorph.migration import migrate_bytes, migrate_row_value, plan_row_migration, remap_binary_row
from statemorph.row import Row, RowKind
from statemorph.serializers import RowDataSerializer
from statemorph.serializers.rowdata import RowDataSerializerSnapshot
from statemorph.types import Timestamp, parse_type
from statemorph.typeutils import (
    read_serializer_snapshot,
    read_versioned_snapshot,
    write_serializer_snapshot,
    write_versioned_snapshot,
)

OLD_EVENTS = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW_EVENTS = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
              "appVersion STRING, sessionId BIGINT>>")


def restored_snapshot(type_text: str) -> RowDataSerializerSnapshot:
    snap = read_versioned_snapshot(write_versioned_snapshot(RowDataSerializer(type_text).snapshot_configuration()))
    assert isinstance(snap, RowDataSerializerSnapshot)
    return snap


def check_migration(old: str, new: str, value: tuple[object, ...], expected: tuple[object, ...]) -> bytes:
    """Migrate through the snapshot and compare with serializing the expected row directly."""
    old_s, new_s = RowDataSerializer(old), RowDataSerializer(new)
    snap = restored_snapshot(old)
    compat = snap.resolve_schema_compatibility(new_s)
    assert compat.is_compatible_after_migration(), compat
    migrated = migrate_bytes(snap, new_s, old_s.to_bytes(value))
    assert migrated == new_s.to_bytes(expected)
    assert new_s.from_bytes(migrated) == expected
    # the value path agrees with the byte path
    assert migrate_row_value(plan_row_migration(old, new), old_s.from_bytes(old_s.to_bytes(value))) == expected
    return migrated


def test_events_example_end_to_end() -> None:
    snap = restored_snapshot(OLD_EVENTS)
    compat = snap.resolve_schema_compatibility(RowDataSerializer(NEW_EVENTS))
    assert compat.is_compatible_after_migration()
    assert compat.reason == "metadata: added location, appVersion, sessionId; reordered"
    assert compat.plan is plan_row_migration(OLD_EVENTS, NEW_EVENTS)
    migrated = check_migration(OLD_EVENTS, NEW_EVENTS, (7, (3, 1700000000000, "phone")),
                               (7, ("phone", None, 3, 1700000000000, None, None)))
    # fixed layout of the migrated row: outer 8+16, nested 8+48, all inline
    assert len(migrated) == 4 + 24 + 56
    assert migrated[4 + 24 + 1] == 0b110010  # location, appVersion, sessionId null


@pytest.mark.parametrize(
    "new, expected",
    [
        ("ROW<x STRING, a INT, b STRING, c BIGINT>", (None, 1, "a long string value", 3)),
        ("ROW<a INT, x STRING, b STRING, c BIGINT>", (1, None, "a long string value", 3)),
        ("ROW<a INT, b STRING, c BIGINT, x DECIMAL(20, 2)>", (1, "a long string value", 3, None)),
        ("ROW<c BIGINT, b STRING, a INT>", (3, "a long string value", 1)),
        ("ROW<y ARRAY<INT>, c BIGINT, x ROW<z INT>, a INT, b STRING>", (None, 3, None, 1, "a long string value")),
    ],
)
def test_added_fields_at_each_position_and_reordering(new: str, expected: tuple[object, ...]) -> None:
    check_migration("ROW<a INT, b STRING, c BIGINT>", new, (1, "a long string value", 3), expected)


def test_nested_and_collection_rows_evolve() -> None:
    old = ("ROW<id INT, items ARRAY<ROW<sku STRING, qty INT>>, byKey MAP<STRING, ROW<v DOUBLE>>, "
           "keyed MAP<ROW<k INT>, STRING>, bag MULTISET<ROW<t STRING>>, deep ARRAY<ARRAY<ROW<q INT>>>>")
    new = ("ROW<id INT, items ARRAY<ROW<qty INT, note STRING, sku STRING>>, byKey MAP<STRING, ROW<w INT, v DOUBLE>>, "
           "keyed MAP<ROW<k INT, k2 INT>, STRING>, bag MULTISET<ROW<t STRING, u INT>>, "
           "deep ARRAY<ARRAY<ROW<p STRING, q INT>>>>")
    value = (1, [("sku-00000001", 2), None, (None, 5)], {"k": (1.5,), "n": None}, {(1,): "one"},
             {("token-long-enough",): 2}, [[(1,), None], None, []])
    expected = (1, [(2, None, "sku-00000001"), None, (5, None, None)], {"k": (None, 1.5), "n": None},
                {(1, None): "one"}, {("token-long-enough", None): 2}, [[(None, 1), None], None, []])
    check_migration(old, new, value, expected)
    plan = plan_row_migration(old, new)
    items = plan.fields[1]
    assert items.source == 1 and items.nested is not None
    assert [f.source for f in items.nested.fields] == [1, -1, 0]
    assert plan.fields[0].nested is None and plan.fields[0].migration is not None
    assert plan.fields[0].migration.is_copy
    assert "items[]: added note; reordered" in plan.describe()
    assert plan.describe().endswith("deep[][]: added p")


def test_row_kind_and_float_payload_survive_byte_migration() -> None:
    old, new = "ROW<f FLOAT, g STRING>", "ROW<g STRING, f FLOAT>"
    payload = struct.unpack(">f", bytes.fromhex("7FC00001"))[0]
    data = RowDataSerializer(old).to_bytes(Row((payload, "x"), RowKind.DELETE))
    migrated = migrate_bytes(restored_snapshot(old), RowDataSerializer(new), data)
    assert migrated[4] == 3  # DELETE
    assert migrated[4 + 16:4 + 24] == bytes.fromhex("0100C07F00000000")


def test_nanosecond_timestamps_and_big_decimals_move_with_their_var_data() -> None:
    old = "ROW<t TIMESTAMP(9), d DECIMAL(30, 3), s STRING>"
    new = "ROW<s STRING, n INT, d DECIMAL(30, 3), t TIMESTAMP(9)>"
    check_migration(old, new, (Timestamp(-5, 7), Decimal("-12345678901234567890.123"), "sixteen bytes!!!"),
                    ("sixteen bytes!!!", None, Decimal("-12345678901234567890.123"), Timestamp(-5, 7)))


def test_planner_null_reservation_is_canonicalised() -> None:
    # the planner's form of a null DECIMAL(20,2): null bit + 16 reserved bytes, slot offset<<32
    body = bytearray(8 + 16 + 16)
    body[1] = 0x01
    struct.pack_into("<Q", body, 8, 24 << 32)
    struct.pack_into("<i", body, 16, 9)
    data = struct.pack(">i", len(body)) + bytes(body)
    old, new = "ROW<d DECIMAL(20, 2), i INT>", "ROW<i INT, d DECIMAL(20, 2)>"
    assert RowDataSerializer(old).from_bytes(data) == (None, 9)
    migrated = migrate_bytes(restored_snapshot(old), RowDataSerializer(new), data)
    assert migrated == RowDataSerializer(new).to_bytes((9, None))


@pytest.mark.parametrize(
    "new",
    [
        "ROW<a INT 'now with a comment', b STRING>",
        "ROW<a INT, b VARCHAR(5)>",
        "ROW<a INT, b STRING> NOT NULL",
    ],
)
def test_byte_identical_changes_are_as_is(new: str) -> None:
    old = "ROW<a INT NOT NULL, b STRING>"
    snap = restored_snapshot(old)
    assert snap.resolve_schema_compatibility(RowDataSerializer(new)).is_compatible_as_is()
    data = RowDataSerializer(old).to_bytes((1, "b"))
    assert migrate_bytes(snap, RowDataSerializer(new), data) == data


@pytest.mark.parametrize(
    "old, new",
    [
        ("ROW<t TIME(0)>", "ROW<t TIME(3)>"),
        ("ROW<t TIMESTAMP(4)>", "ROW<t TIMESTAMP(9)>"),
        ("ROW<t TIMESTAMP(1)>", "ROW<t TIMESTAMP(3)>"),
        ("ROW<a ARRAY<INT NOT NULL>>", "ROW<a ARRAY<INT>>"),
        ("ROW<m MAP<STRING, ROW<x INT 'c'>>>", "ROW<m MAP<STRING, ROW<x INT>>>"),
    ],
)
def test_more_as_is_cases(old: str, new: str) -> None:
    assert restored_snapshot(old).resolve_schema_compatibility(RowDataSerializer(new)).is_compatible_as_is()
    assert plan_row_migration(old, new).is_identity


@pytest.mark.parametrize(
    "new, reasons",
    [
        ("ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>",
         ["metadata.userId: INT -> STRING"]),
        ("ROW<eventId BIGINT, metadata ROW<userId INT, deviceType STRING>>",
         ["metadata.timestamp: removed (BIGINT)"]),
        ("ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING, v INT NOT NULL>>",
         ["metadata.v: added NOT NULL field"]),
        ("ROW<eventId BIGINT NOT NULL, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>",
         ["eventId: nullable -> NOT NULL"]),
        ("ROW<id BIGINT, metadata ROW<userId BIGINT, `timestamp` INT, deviceType STRING NOT NULL>>",
         ["eventId: removed (BIGINT)", "metadata.userId: INT -> BIGINT", "metadata.timestamp: BIGINT -> INT",
          "metadata.deviceType: nullable -> NOT NULL"]),
        ("ROW<eventId BIGINT, metadata ARRAY<INT>>", ["metadata: ROW<"]),
    ],
)
def test_incompatible_changes_name_every_field(new: str, reasons: list[str]) -> None:
    compat = restored_snapshot(OLD_EVENTS).resolve_schema_compatibility(RowDataSerializer(new))
    assert compat.is_incompatible()
    for r in reasons:
        assert r in compat.reason
    with pytest.raises(IncompatibleSchemaError) as err:
        plan_row_migration(OLD_EVENTS, new)
    assert err.value.reason == compat.reason
    with pytest.raises(IncompatibleSchemaError):
        migrate_bytes(restored_snapshot(OLD_EVENTS), RowDataSerializer(new),
                      RowDataSerializer(OLD_EVENTS).to_bytes((1, (2, 3, "x"))))


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        ("ROW<d DECIMAL(10, 2)>", "ROW<d DECIMAL(12, 2)>", "d: DECIMAL(10, 2) -> DECIMAL(12, 2)"),
        ("ROW<t TIMESTAMP(6)>", "ROW<t TIMESTAMP(3)>", "t: TIMESTAMP(6) -> TIMESTAMP(3)"),
        ("ROW<t TIMESTAMP(3)>", "ROW<t TIMESTAMP(6)>", "t: TIMESTAMP(3) -> TIMESTAMP(6)"),
        ("ROW<a ARRAY<ROW<x INT>>>", "ROW<a ARRAY<ROW<x STRING>>>", "a[].x: INT -> STRING"),
        ("ROW<m MAP<STRING, INT>>", "ROW<m MAP<STRING, INT NOT NULL>>", "m.value: nullable -> NOT NULL"),
        ("ROW<s MULTISET<ROW<a INT>>>", "ROW<s MULTISET<ROW<b INT>>>", "s[].a: removed"),
        ("ROW<c CHAR(3)>", "ROW<c VARCHAR(3)>", "c: CHAR(3) -> VARCHAR(3)"),
    ],
)
def test_incompatible_type_changes(old: str, new: str, fragment: str) -> None:
    compat = restored_snapshot(old).resolve_schema_compatibility(RowDataSerializer(new))
    assert compat.is_incompatible() and fragment in compat.reason


def test_new_serializer_of_another_kind_is_incompatible() -> None:
    from statemorph.typeutils import TypeSerializer

    class Other(TypeSerializer[int]):
        def serialize(self, value: int, out: DataOutputSerializer) -> None: ...
        def deserialize(self, src):  # type: ignore[no-untyped-def]
            return 0
        def snapshot_configuration(self):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    compat = restored_snapshot("ROW<a INT>").resolve_schema_compatibility(Other())
    assert compat.is_incompatible() and "Other" in compat.reason


def test_positional_mapping_fallback() -> None:
    plan = plan_row_migration("ROW<f0 INT, f1 STRING>", "ROW<a INT, b STRING, c INT>", by_name=False)
    assert [f.source for f in plan.fields] == [0, 1, -1]
    assert not plan.is_identity
    with pytest.raises(IncompatibleSchemaError, match="f1: removed"):
        plan_row_migration("ROW<f0 INT, f1 STRING>", "ROW<a INT>", by_name=False)


def test_plans_are_cached_and_identity_remap_is_a_copy() -> None:
    p1 = plan_row_migration(OLD_EVENTS, NEW_EVENTS)
    assert plan_row_migration(parse_type(OLD_EVENTS), NEW_EVENTS) is p1  # type: ignore[arg-type]
    ident = plan_row_migration(OLD_EVENTS, OLD_EVENTS)
    assert ident.is_identity and ident.describe() == "no changes"
    body = RowDataSerializer(OLD_EVENTS).to_binary_row((1, (2, 3, "x")))
    assert remap_binary_row(ident, body) == body


def test_snapshot_bytes_and_round_trip() -> None:
    s = RowDataSerializer("ROW<a INT NOT NULL 'the ''a''', b ROW<c STRING>>")
    blob = write_versioned_snapshot(s.snapshot_configuration())
    out = DataOutputSerializer()
    out.write_utf("statemorph.RowDataSerializerSnapshot")
    out.write_int(1)
    out.write_int(2)
    for name, text, desc in (("a", "INT NOT NULL", "the 'a'"), ("b", "ROW<`c` VARCHAR(2147483647)>", None)):
        out.write_long_utf(name)
        out.write_long_utf(text)
        out.write_boolean(desc is not None)
        if desc is not None:
            out.write_long_utf(desc)
    assert blob == out.get_copy_of_buffer()
    snap = read_serializer_snapshot(write_serializer_snapshot(s.snapshot_configuration()))
    assert isinstance(snap, RowDataSerializerSnapshot)
    assert snap.row_type == s.row_type
    assert snap.restore_serializer() == s


def test_flink_rowdata_snapshot_with_a_cut_type_stream_gives_a_clear_error() -> None:
    """Flink's snapshot is read now (tests/rowdata/test_golden_flink_rowdata.py); a stream cut
    right after its header is a typed SnapshotError naming the field and the offset."""
    out = DataOutputSerializer()
    out.write_int(2)
    out.write_utf("org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot")
    out.write_int(3)
    out.write_int(1)
    out.write(bytes.fromhex("ACED0005"))
    with pytest.raises(JavaSerializationError, match=r"field #0 type.*truncated") as e:
        read_serializer_snapshot(out.get_copy_of_buffer())
    assert isinstance(e.value, SnapshotError)
    assert e.value.offset == out.position


def test_generated_names_fall_back_to_positions_automatically() -> None:
    old, new = "ROW<f0 INT, f1 STRING>", "ROW<id INT, name STRING, extra BIGINT>"
    plan = plan_row_migration(old, new)
    assert [f.source for f in plan.fields] == [0, 1, -1]
    assert plan.describe() == "row: matched by position; added extra"
    check_migration(old, new, (1, "a long enough name"), (1, "a long enough name", None))
    # a renamed-only row with generated names keeps its bytes
    assert plan_row_migration(old, "ROW<id INT, name STRING>").is_identity
    # names that are not the generated defaults are never matched by position
    with pytest.raises(IncompatibleSchemaError, match="a: removed"):
        plan_row_migration("ROW<a INT>", "ROW<b INT>")
    # forcing names turns the generated-name case into removals
    with pytest.raises(IncompatibleSchemaError, match="f0: removed"):
        plan_row_migration(old, new, by_name=True)
