"""The public API contract of the design document, as executable tests.

Every line of the "Public API contract" code block (docs/api.md) runs here as written
(relative savepoint and database paths resolve inside ``tmp_path``), with the values the contract
promises asserted. If one of these fails, user code written against the documented API breaks.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

ROW = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
ROW_ADDED = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING, os STRING>>"
ROW_BAD = "ROW<eventId STRING, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
EVENT = (7, (3, 1700000000000, "phone"))


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The contract uses relative paths ("sp-1", "db"): run them inside a fresh directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_imports_and_rowdata_round_trip() -> None:
    from statemorph import serializers, types, typeutils  # noqa: F401
    from statemorph.types import parse_type

    t = parse_type("ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>")
    s = serializers.RowDataSerializer(t)
    b = s.to_bytes((7, (3, 1700000000000, "phone")))
    assert isinstance(b, bytes)
    value = s.from_bytes(b)
    assert value == (7, (3, 1700000000000, "phone"))
    assert isinstance(value, tuple) and isinstance(value[1], tuple)
    assert repr(tuple(value)) == "(7, (3, 1700000000000, 'phone'))"
    # a type string works as well as a parsed LogicalType
    assert serializers.RowDataSerializer(ROW).to_bytes(EVENT) == b


def test_string_serializer_bytes() -> None:
    from statemorph import serializers

    # Flink StringValue: length+1 as a varint, then each UTF-16 unit as a 7-bit varint (é = e9 01)
    assert serializers.StringSerializer().to_bytes("héllo") == bytes.fromhex("0668e9016c6c6f")
    assert serializers.StringSerializer().from_bytes(serializers.StringSerializer().to_bytes("héllo")) == "héllo"


class Color(enum.Enum):
    RED = 0
    GREEN = 1


def _every_family() -> list[tuple[Any, Any]]:
    """One serializer per family the contract comment lists, with a value."""
    import dataclasses

    from statemorph import serializers as S

    @dataclasses.dataclass
    class P:
        a: int | None = None

    return [
        (S.IntSerializer(), 1), (S.LongSerializer(), 2), (S.ShortSerializer(), 3), (S.ByteSerializer(), 4),
        (S.BooleanSerializer(), True), (S.FloatSerializer(), 1.5), (S.DoubleSerializer(), 2.5),
        (S.CharSerializer(), "x"), (S.BytesSerializer(), b"ab"), (S.ListSerializer(S.IntSerializer()), [1, 2]),
        (S.MapSerializer(S.StringSerializer(), S.IntSerializer()), {"a": 1}),
        (S.NullableSerializer(S.IntSerializer()), None), (S.EnumSerializer(Color), Color.GREEN),
        (S.TupleSerializer([S.IntSerializer(), S.StringSerializer()]), (1, "a")),
        (S.RowSerializer([S.IntSerializer(), S.StringSerializer()]), (1, "a")),
        (S.PojoSerializer(P, {"a": S.IntSerializer()}), P(5)),
        (S.AvroSerializer({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}), {"a": 1}),
    ]


@pytest.mark.parametrize("ser,value", _every_family(), ids=lambda x: type(x).__name__)
def test_every_listed_family_round_trips_and_snapshots(ser: Any, value: Any) -> None:
    from statemorph import typeutils

    assert ser.from_bytes(ser.to_bytes(value)) == value
    snap2 = typeutils.read_versioned_snapshot(typeutils.write_versioned_snapshot(ser.snapshot_configuration()))
    assert snap2.resolve_schema_compatibility(ser).is_compatible_as_is()


def test_snapshot_write_read_and_resolve() -> None:
    from statemorph import serializers, typeutils
    from statemorph.io import DataInputDeserializer

    s = serializers.RowDataSerializer(ROW)
    snap = s.snapshot_configuration()
    blob = typeutils.write_versioned_snapshot(snap)
    assert isinstance(blob, bytes)
    # "identifier, version, content": Java modified-UTF identifier, then an i32 version
    src = DataInputDeserializer(blob)
    identifier = src.read_utf()
    assert identifier == type(snap).IDENTIFIER
    assert src.read_int() == snap.get_current_version()
    snap2 = typeutils.read_versioned_snapshot(blob)
    assert type(snap2) is type(snap)

    c = snap2.resolve_schema_compatibility(s)
    assert c.is_compatible_as_is()
    assert not c.is_compatible_after_migration()
    assert not c.is_compatible_with_reconfigured_serializer()
    assert not c.is_incompatible()

    new_serializer = serializers.RowDataSerializer(ROW_ADDED)
    c = snap2.resolve_schema_compatibility(new_serializer)
    assert c.is_compatible_after_migration()
    assert not c.is_compatible_as_is() and not c.is_incompatible()
    # the Flink 2.x direction of the contract: the new serializer's snapshot judges the old snapshot
    c2 = new_serializer.snapshot_configuration().resolve_schema_compatibility(snap2)
    assert c2.is_compatible_after_migration() and c2.reason == c.reason

    c = snap2.resolve_schema_compatibility(serializers.RowDataSerializer(ROW_BAD))
    assert c.is_incompatible()
    assert "eventId" in c.reason
    c2 = serializers.RowDataSerializer(ROW_BAD).snapshot_configuration().resolve_schema_compatibility(snap2)
    assert c2.is_incompatible() and c2.reason == c.reason


def test_reconfigured_serializer_answer() -> None:
    from statemorph import serializers, typeutils

    old = serializers.EnumSerializer(["RED", "GREEN"], "p.Color")
    new = serializers.EnumSerializer(["RED", "GREEN", "BLUE"], "p.Color")
    snap2 = typeutils.read_versioned_snapshot(typeutils.write_versioned_snapshot(old.snapshot_configuration()))
    c = snap2.resolve_schema_compatibility(new)
    assert c.is_compatible_with_reconfigured_serializer()
    assert not c.is_compatible_as_is() and not c.is_incompatible() and not c.is_compatible_after_migration()


def test_migrate_bytes_one_value() -> None:
    from statemorph import serializers
    from statemorph.errors import IncompatibleSchemaError
    from statemorph.migration import migrate_bytes

    s = serializers.RowDataSerializer(ROW)
    new_serializer = serializers.RowDataSerializer(ROW_ADDED)
    old_bytes = s.to_bytes(EVENT)
    new_bytes = migrate_bytes(s.snapshot_configuration(), new_serializer, old_bytes)
    assert new_bytes == new_serializer.to_bytes((7, (3, 1700000000000, "phone", None)))
    assert new_serializer.from_bytes(new_bytes) == (7, (3, 1700000000000, "phone", None))
    assert migrate_bytes(s.snapshot_configuration(), s, old_bytes) == old_bytes
    with pytest.raises(IncompatibleSchemaError):
        migrate_bytes(s.snapshot_configuration(), serializers.RowDataSerializer(ROW_BAD), old_bytes)


def test_arrow_encode_decode_migrate() -> None:
    from statemorph import arrow, serializers

    s = serializers.RowDataSerializer(ROW)
    new_serializer = serializers.RowDataSerializer(ROW_ADDED)
    rows = [EVENT, None, (8, (4, 1700000000001, None))]
    values = pa.array([{"eventId": r[0], "metadata": {"userId": r[1][0], "timestamp": r[1][1], "deviceType": r[1][2]}}
                       if r is not None else None for r in rows], type=arrow.arrow_type(s.row_type))
    encoded = arrow.encode(values, s)
    assert encoded.to_pylist() == [s.to_bytes(EVENT), None, s.to_bytes(rows[2])]

    decoded = arrow.decode(encoded, s)
    assert decoded.to_pylist() == values.to_pylist()

    migrated = arrow.migrate(encoded, s.snapshot_configuration(), new_serializer)
    assert migrated.to_pylist() == [
        new_serializer.to_bytes((7, (3, 1700000000000, "phone", None))), None,
        new_serializer.to_bytes((8, (4, 1700000000001, None, None))),
    ]


def _write_events_savepoint() -> Any:
    """The contract's heap-backend lines, as written."""
    from statemorph import serializers
    from statemorph.state import HashMapStateBackend, ValueStateDescriptor

    s = serializers.RowDataSerializer(ROW)
    b = HashMapStateBackend(key_serializer=serializers.StringSerializer(), max_parallelism=128)
    events = b.get_state(ValueStateDescriptor("events", s))
    b.set_current_key("user-1"); events.update((7, (3, 1700000000000, "phone")))  # noqa: E702
    assert events.value() == (7, (3, 1700000000000, "phone"))
    b.savepoint("sp-1")
    return b


def test_heap_backend_savepoint_is_a_directory(in_tmp: Path) -> None:
    from statemorph.savepoint import METADATA_FILE

    _write_events_savepoint()
    assert (in_tmp / "sp-1").is_dir()
    assert (in_tmp / "sp-1" / METADATA_FILE).is_file()
    assert not [p for p in in_tmp.iterdir() if p.name != "sp-1"], "a temporary directory was left behind"


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_restore_and_get_state_with_new_serializer(in_tmp: Path, backend: str) -> None:
    from statemorph import serializers
    from statemorph.state import EmbeddedRocksDBStateBackend, HashMapStateBackend, ValueStateDescriptor

    _write_events_savepoint()
    new_serializer = serializers.RowDataSerializer(ROW_ADDED)
    if backend == "rocksdb":
        r = EmbeddedRocksDBStateBackend.restore("sp-1", db_path="db")
        assert (in_tmp / "db").exists()
    else:
        r = HashMapStateBackend.restore("sp-1")
    with r:
        events = r.get_state(ValueStateDescriptor("events", new_serializer))
        r.set_current_key("user-1")
        assert events.value() == (7, (3, 1700000000000, "phone", None))
        r.set_current_key("user-2")
        assert events.value() is None


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_restore_with_incompatible_serializer_raises(in_tmp: Path, backend: str) -> None:
    from statemorph import serializers
    from statemorph.errors import StateMigrationError
    from statemorph.state import EmbeddedRocksDBStateBackend, HashMapStateBackend, ValueStateDescriptor

    _write_events_savepoint()
    r = (EmbeddedRocksDBStateBackend.restore("sp-1", db_path="db") if backend == "rocksdb"
         else HashMapStateBackend.restore("sp-1"))
    with r:
        with pytest.raises(StateMigrationError, match="events"):
            r.get_state(ValueStateDescriptor("events", serializers.RowDataSerializer(ROW_BAD)))
        # nothing lost: the old schema still reads the state
        events = r.get_state(ValueStateDescriptor("events", serializers.RowDataSerializer(ROW)))
        r.set_current_key("user-1")
        assert events.value() == EVENT


def test_list_and_map_descriptors(in_tmp: Path) -> None:
    from statemorph import serializers
    from statemorph.state import (
        EmbeddedRocksDBStateBackend,
        HashMapStateBackend,
        ListStateDescriptor,
        MapStateDescriptor,
    )

    b = HashMapStateBackend(key_serializer=serializers.StringSerializer(), max_parallelism=128)
    clicks = b.get_state(ListStateDescriptor("clicks", serializers.LongSerializer()))
    seen = b.get_state(MapStateDescriptor("seen", serializers.StringSerializer(), serializers.IntSerializer()))
    b.set_current_key("user-1")
    clicks.add(1)
    clicks.add(2)
    seen.put("a", 1)
    b.savepoint("sp-2")
    for restore in (lambda: HashMapStateBackend.restore("sp-2"),
                    lambda: EmbeddedRocksDBStateBackend.restore("sp-2", db_path=in_tmp / "db2")):
        with restore() as r:
            clicks2 = r.get_state(ListStateDescriptor("clicks", serializers.LongSerializer()))
            seen2 = r.get_state(MapStateDescriptor("seen", serializers.StringSerializer(), serializers.IntSerializer()))
            r.set_current_key("user-1")
            assert list(clicks2.get()) == [1, 2]
            assert seen2.get("a") == 1


def test_check_savepoint_dry_run(in_tmp: Path) -> None:
    from statemorph import serializers
    from statemorph.engine import check_savepoint
    from statemorph.state import Outcome, ValueStateDescriptor

    _write_events_savepoint()
    before = sorted(p.name for p in (in_tmp / "sp-1").rglob("*"))

    report = check_savepoint("sp-1", [ValueStateDescriptor("events", serializers.RowDataSerializer(ROW_ADDED))])
    (events,) = [c for c in report.states if c.name == "events"]
    assert events.outcome is Outcome.MIGRATION
    assert report.needs_migration and report.is_compatible
    assert report.exit_status == 1

    report = check_savepoint("sp-1", [ValueStateDescriptor("events", serializers.RowDataSerializer(ROW))])
    assert report.exit_status == 0 and not report.needs_migration

    report = check_savepoint("sp-1", [ValueStateDescriptor("events", serializers.RowDataSerializer(ROW_BAD))])
    (events,) = [c for c in report.states if c.name == "events"]
    assert events.outcome is Outcome.INCOMPATIBLE and not report.is_compatible
    assert any("eventId" in r for r in events.reasons)
    assert report.exit_status == 3  # ExitCode.INCOMPATIBLE

    assert sorted(p.name for p in (in_tmp / "sp-1").rglob("*")) == before, "a dry run changed the savepoint"
