"""Flink's RowDataSerializerSnapshot as statemorph uses it: what ``snapshot_configuration()`` and
``flink_snapshot_configuration()`` give, and the Events evolution decided on a snapshot real Flink
2.3 wrote (tests/data/golden/flink_rowdata.jsonl) with the same rules as statemorph's own snapshot."""

from __future__ import annotations

import json
from pathlib import Path

from statemorph.migration import migrate_bytes
from statemorph.serializers import (
    ArrayDataSerializerSnapshot,
    DecimalDataSerializerSnapshot,
    FlinkRowDataSerializerSnapshot,
    MapDataSerializerSnapshot,
    RowDataSerializer,
    RowDataSerializerSnapshot,
    StringDataSerializerSnapshot,
    TimestampDataSerializerSnapshot,
)
from statemorph.serializers.primitives import IntSerializerSnapshot, LongSerializerSnapshot
from statemorph.typeutils import read_serializer_snapshot, read_versioned_snapshot, write_versioned_snapshot

GOLDEN = {
    c["case"]: c
    for c in map(json.loads, (Path(__file__).parents[1] / "data/golden/flink_rowdata.jsonl").read_text().splitlines())
}
EVENTS_OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENTS_NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, "
              "`timestamp` BIGINT, appVersion STRING, sessionId BIGINT>>")


def flink_events_old() -> FlinkRowDataSerializerSnapshot:
    snap = read_serializer_snapshot(bytes.fromhex(GOLDEN["flink_rowdata/events_old"]["envelope_hex"]))
    assert isinstance(snap, FlinkRowDataSerializerSnapshot)
    return snap


def test_snapshot_configuration_keeps_names_and_flink_form_is_explicit() -> None:
    ser = RowDataSerializer(EVENTS_OLD)
    own = ser.snapshot_configuration()
    assert isinstance(own, RowDataSerializerSnapshot) and own.IDENTIFIER == "statemorph.RowDataSerializerSnapshot"
    assert read_versioned_snapshot(write_versioned_snapshot(own)).row_type == ser.row_type  # names kept
    flink = ser.flink_snapshot_configuration()
    assert flink.IDENTIFIER == "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
    assert write_versioned_snapshot(flink).hex() == GOLDEN["flink_rowdata/events_old"]["snapshot_hex"]


def test_nested_snapshots_are_internal_serializers() -> None:
    snap = RowDataSerializer(
        "ROW<a INT, b BIGINT, c STRING, d DECIMAL(10, 2), e TIMESTAMP(3), f ARRAY<INT>, g MAP<INT, STRING>, "
        "h MULTISET<STRING>, i ROW<x INT>>"
    ).flink_snapshot_configuration()
    kinds = [type(s) for s in snap.nested_snapshots]
    assert kinds == [IntSerializerSnapshot, LongSerializerSnapshot, StringDataSerializerSnapshot,
                     DecimalDataSerializerSnapshot, TimestampDataSerializerSnapshot, ArrayDataSerializerSnapshot,
                     MapDataSerializerSnapshot, MapDataSerializerSnapshot, FlinkRowDataSerializerSnapshot]


def test_events_evolution_on_a_flink_written_snapshot() -> None:
    old = flink_events_old()
    result = old.resolve_schema_compatibility(RowDataSerializer(EVENTS_NEW))
    assert result.is_compatible_after_migration()
    assert "metadata: added location, appVersion, sessionId" in result.reason
    # the same value migrates to the same bytes as through statemorph's own snapshot
    value = (7, (3, 1700000000000, "phone"))
    old_bytes = RowDataSerializer(EVENTS_OLD).to_bytes(value)
    new_ser = RowDataSerializer(EVENTS_NEW)
    via_flink = migrate_bytes(old, new_ser, old_bytes)
    via_own = migrate_bytes(RowDataSerializer(EVENTS_OLD).snapshot_configuration(), new_ser, old_bytes)
    assert via_flink == via_own
    assert new_ser.from_bytes(via_flink) == (7, ("phone", None, 3, 1700000000000, None, None))


def test_incompatible_changes_name_the_field_path() -> None:
    old = flink_events_old()
    changed = "ROW<eventId BIGINT, metadata ROW<userId STRING, `timestamp` BIGINT, deviceType STRING>>"
    result = old.resolve_schema_compatibility(RowDataSerializer(changed))
    assert result.is_incompatible() and "metadata.userId: INT -> STRING" in result.reason
    not_null = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>, x INT NOT NULL>"
    assert old.resolve_schema_compatibility(RowDataSerializer(not_null)).is_incompatible()
    assert old.resolve_schema_compatibility(RowDataSerializer(EVENTS_OLD)).is_compatible_as_is()


def test_top_level_fields_of_a_flink_snapshot_match_by_position() -> None:
    """Flink's bytes have no top-level names: an appended nullable field migrates, a new name at
    the same position is the same field."""
    old = flink_events_old()
    appended = EVENTS_OLD[:-1] + ", extra STRING>"
    assert old.resolve_schema_compatibility(RowDataSerializer(appended)).is_compatible_after_migration()
    renamed = EVENTS_OLD.replace("eventId", "id", 1)
    assert old.resolve_schema_compatibility(RowDataSerializer(renamed)).is_compatible_as_is()


def test_a_snapshot_inside_a_larger_stream_is_read_to_its_exact_end() -> None:
    """State meta data holds snapshots back to back with no lengths: reading one from a cursor
    must stop exactly at its last byte (the Java streams inside are parsed to their end)."""
    from statemorph.io import DataInputDeserializer
    from statemorph.typeutils import read_versioned_snapshot_from

    first = bytes.fromhex(GOLDEN["flink_rowdata/rows_in_collections"]["snapshot_hex"])
    second = bytes.fromhex(GOLDEN["flink_rowdata/events_new"]["snapshot_hex"])
    src = DataInputDeserializer(b"\x01\x02" + first + second + b"\xff", offset=2)
    a = read_versioned_snapshot_from(src)
    assert src.position == 2 + len(first)
    b = read_versioned_snapshot_from(src)
    assert src.available() == 1
    assert write_versioned_snapshot(a) == first and write_versioned_snapshot(b) == second
