"""The dry run: per-state outcomes and exit status from metadata alone."""

import base64
import json
import shutil

import pytest

from statemorph.engine import check_savepoint
from statemorph.errors import ExitCode, SavepointError
from statemorph.io import DataOutputSerializer
from statemorph.savepoint import METADATA_FILE
from statemorph.serializers import IntSerializer, LongSerializer, RowDataSerializer, StringSerializer
from statemorph.state import (
    HashMapStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Outcome,
    ValueStateDescriptor,
)
from statemorph.types import parse_type

OLD = RowDataSerializer(parse_type("ROW<id BIGINT, name STRING>"))
ADDED = RowDataSerializer(parse_type("ROW<id BIGINT, name STRING, age INT>"))
CHANGED = RowDataSerializer(parse_type("ROW<id STRING, name STRING>"))


@pytest.fixture
def sp(tmp_path):
    b = HashMapStateBackend(StringSerializer(), 256)
    v = b.get_state(ValueStateDescriptor("rows", OLD))
    lst = b.get_state(ListStateDescriptor("ints", IntSerializer()))
    m = b.get_state(MapStateDescriptor("m", StringSerializer(), OLD))
    b.set_current_key("k")
    v.update((1, "a"))
    lst.add(1)
    m.put("x", (2, "b"))
    path = tmp_path / "sp"
    b.savepoint(path)
    b.close()
    # the dry run must not need any state data: remove every data file
    for d in path.iterdir():
        if d.is_dir():
            shutil.rmtree(d)
    return path


def test_all_as_is(sp):
    r = check_savepoint(sp, [ValueStateDescriptor("rows", OLD), ListStateDescriptor("ints", IntSerializer()),
                             MapStateDescriptor("m", StringSerializer(), OLD)], key_serializer=StringSerializer())
    assert r.exit_status == 0 and r.is_compatible and not r.needs_migration
    assert [s.outcome for s in r.states] == [Outcome.AS_IS] * 3
    assert r.key is not None and r.key.outcome is Outcome.AS_IS
    assert "compatible as is (exit status 0)" in r.summary and "max_parallelism 256" in r.summary


def test_migration_with_plan(sp):
    r = check_savepoint(sp, [ValueStateDescriptor("rows", ADDED), MapStateDescriptor("m", StringSerializer(), ADDED)])
    assert r.exit_status == 1 and r.needs_migration
    rows = r.state("rows")
    assert rows.outcome is Outcome.MIGRATION and rows.rows == 1
    assert "added age" in rows.plan
    assert r.state("m").plan.startswith("map value:")
    ints = r.state("ints")
    assert ints.outcome is Outcome.AS_IS and not ints.registered
    assert "not registered by the new program" in r.summary
    assert "ints (list, 1 rows)" in r.summary


def test_incompatible_reasons(sp):
    r = check_savepoint(sp, [
        ValueStateDescriptor("rows", CHANGED),
        ListStateDescriptor("ints", LongSerializer()),
        MapStateDescriptor("m", IntSerializer(), OLD),
    ])
    assert r.exit_status == ExitCode.INCOMPATIBLE and not r.is_compatible
    assert "id: BIGINT -> STRING" in r.state("rows").reasons[0]
    assert "list element" in r.state("ints").reasons[0]
    assert "map key" in r.state("m").reasons[0] and "only value schema evolution" in r.state("m").reasons[0]
    d = r.to_dict()
    assert d["exit_status"] == ExitCode.INCOMPATIBLE and d["states"][0]["outcome"] == "incompatible"
    json.dumps(d)  # serialisable for the CLI


def test_kind_change_and_new_state(sp):
    r = check_savepoint(sp, [ListStateDescriptor("rows", OLD), ValueStateDescriptor("fresh", IntSerializer())])
    assert r.state("rows").outcome is Outcome.INCOMPATIBLE
    assert "holds value state but it is registered as list state" in r.state("rows").reasons[0]
    assert r.state("fresh").outcome is Outcome.NEW_STATE
    assert r.exit_status == ExitCode.INCOMPATIBLE


def test_key_serializer_change_is_incompatible(sp):
    r = check_savepoint(sp, [], key_serializer=IntSerializer())
    assert r.exit_status == ExitCode.INCOMPATIBLE and r.key.outcome is Outcome.INCOMPATIBLE
    assert "key serializer" in r.key.reasons[0]


def test_unreadable_snapshot_is_reported_not_raised(sp):
    out = DataOutputSerializer()
    out.write_utf("com.example.Missing")
    out.write_int(1)
    doc = json.loads((sp / METADATA_FILE).read_text())
    doc["states"][0]["value_serializer"] = base64.b64encode(out.get_copy_of_buffer()).decode()
    (sp / METADATA_FILE).write_text(json.dumps(doc))
    r = check_savepoint(sp, [ValueStateDescriptor("rows", OLD)])
    assert r.state("rows").outcome is Outcome.INCOMPATIBLE
    assert "com.example.Missing" in r.state("rows").reasons[0]


def test_damaged_metadata_raises(sp):
    (sp / METADATA_FILE).write_text("{")
    with pytest.raises(SavepointError, match="not valid JSON"):
        check_savepoint(sp, [])


def test_duplicate_descriptors_rejected(sp):
    with pytest.raises(ValueError, match="two descriptors"):
        check_savepoint(sp, [ValueStateDescriptor("rows", OLD), ValueStateDescriptor("rows", OLD)])


def test_verify_key_groups(tmp_path):
    from statemorph.savepoint import SavepointWriter, verify_key_groups

    b = HashMapStateBackend(StringSerializer(), 128)
    v = b.get_state(ValueStateDescriptor("v", IntSerializer()))
    for i in range(50):
        b.set_current_key(f"user-{i}")
        v.update(i)
    b.savepoint(tmp_path / "ok")
    b.close()
    assert verify_key_groups(tmp_path / "ok") == 50
    S = StringSerializer()
    with SavepointWriter(tmp_path / "bad", max_parallelism=128, key_serializer=S) as w:
        w.add_state("v", "value", value_serializer=IntSerializer()).write_rows(
            [(121, S.to_bytes("user-1"), b"\x00", b"\x00\x00\x00\x01"),
             (7, S.to_bytes("user-1x"), b"\x00", b"\x00\x00\x00\x02")])
    with pytest.raises(SavepointError, match=r"state 'v', row 1: key 'user-1x' is stored under key group 7"):
        verify_key_groups(tmp_path / "bad")


def test_ttl_change_is_incompatible(sp):
    r = check_savepoint(sp, [ValueStateDescriptor("rows", OLD, ttl=True)])
    assert r.state("rows").outcome is Outcome.INCOMPATIBLE
    assert "time-to-live was enabled" in r.state("rows").reasons[0]


def test_planner_works_from_any_state_description():
    """A format other than the Parquet form plugs in by describing its states (no files needed)."""
    from dataclasses import dataclass, field

    from statemorph.engine.plan import MIGRATE, plan_rewrite
    from statemorph.savepoint import SNAPSHOT_ROLES
    from statemorph.state import StateKind, VoidNamespaceSerializer
    from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

    @dataclass
    class Described:
        name: str
        kind: StateKind
        rows: int
        ttl: bool
        snapshots: dict

        def snapshot_bytes(self, role):
            return self.snapshots[role]

        def snapshot(self, role, registry=None):
            return read_versioned_snapshot(self.snapshots[role], registry)

    @dataclass
    class Savepoint:
        max_parallelism: int
        states: dict = field(default_factory=dict)

        def key_snapshot(self, registry=None):
            return read_versioned_snapshot(write_versioned_snapshot(StringSerializer().snapshot_configuration()))

    sers = [StringSerializer(), VoidNamespaceSerializer(), OLD]
    snaps = {role: write_versioned_snapshot(s.snapshot_configuration())
             for role, s in zip(SNAPSHOT_ROLES[:3], sers, strict=True)}
    md = Savepoint(128, {"rows": Described("rows", StateKind.VALUE, 7, True, snaps)})
    plan = plan_rewrite("memory", md, [ValueStateDescriptor("rows", ADDED, ttl=True)])
    assert plan.state("rows").action == MIGRATE and plan.rows_to_migrate == 7
    assert plan.exit_status == ExitCode.MIGRATION_NEEDED
    assert plan_rewrite("memory", md, [ValueStateDescriptor("rows", ADDED)]).exit_status == ExitCode.INCOMPATIBLE
