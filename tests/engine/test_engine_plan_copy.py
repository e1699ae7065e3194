"""The local engine without migration: planning, byte-exact copies, atomicity, key groups."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph import serializers as S
from statemorph.engine import IdentityTransform, migrate_savepoint, plan_rewrite
from statemorph.engine.keys import key_groups
from statemorph.errors import IncompatibleSchemaError, SavepointError
from statemorph.keyed.keygroups import assign_to_key_group, java_int_hash, java_long_hash, java_string_hash
from statemorph.savepoint import SavepointWriter, read_metadata, read_state_table, verify_savepoint
from statemorph.state import Outcome
from statemorph.state.descriptors import MapStateDescriptor, ValueStateDescriptor


class Color:  # enum values by constant name
    pass


def _build(path, rows=300, rows_per_file=100):
    ks = S.LongSerializer()
    keys = list(range(rows))
    common = {
        "key_group": key_groups(pa.array(keys, pa.int64()), ks, 128),
        "key": pa.array([ks.to_bytes(k) for k in keys], pa.binary()),
        "namespace": pa.array([b"\x00"] * rows, pa.binary()),
    }
    enum = S.EnumSerializer(["RED", "GREEN"], java_class_name="p.Color")
    with SavepointWriter(path, max_parallelism=128, key_serializer=ks, rows_per_file=rows_per_file) as w:
        w.write_state("ints", "value", pa.table({**common, "value": [S.IntSerializer().to_bytes(k) for k in keys]}),
                      value_serializer=S.IntSerializer())
        w.write_state("colors", "map", pa.table({**common, "user_key": [S.StringSerializer().to_bytes("c")] * rows,
                                                 "value": [enum.to_bytes("GREEN" if k % 2 else "RED") for k in keys]}),
                      value_serializer=enum, user_key_serializer=S.StringSerializer())
    return str(path)


def test_plan_outcomes(tmp_path):
    src = _build(tmp_path / "sp")
    md = read_metadata(src)
    grown = S.EnumSerializer(["RED", "GREEN", "BLUE"], java_class_name="p.Color")
    plan = plan_rewrite(src, md, [MapStateDescriptor("colors", S.StringSerializer(), grown)])
    by = {s.name: s for s in plan.states}
    assert by["ints"].action == "keep" and by["ints"].value_snapshot == md.states["ints"].value_serializer
    assert by["colors"].action == "copy"
    assert by["colors"].outcome is Outcome.RECONFIGURED
    assert by["colors"].reason == "map value: constants ['BLUE'] appended after the old ones"
    assert plan.exit_status == 0 and plan.total_rows == 600 and plan.rows_to_migrate == 0


def test_plan_unknown_state(tmp_path):
    src = _build(tmp_path / "sp")
    with pytest.raises(SavepointError, match="no state named 'nope'"):
        plan_rewrite(src, read_metadata(src), [ValueStateDescriptor("nope", S.IntSerializer())])


def test_copy_keeps_file_bytes_and_records_new_snapshots(tmp_path):
    src = _build(tmp_path / "sp")
    dst = str(tmp_path / "out")
    grown = S.EnumSerializer(["RED", "GREEN", "BLUE"], java_class_name="p.Color")
    report = migrate_savepoint(src, dst, [MapStateDescriptor("colors", S.StringSerializer(), grown)])
    assert report.rows == {"ints": 300, "colors": 300}
    old, new = read_metadata(src), verify_savepoint(dst)
    for name in ("ints", "colors"):
        assert [f.sha256 for f in new.states[name].files] == [f.sha256 for f in old.states[name].files]
        assert len(new.states[name].files) == 3
    assert new.states["ints"].value_serializer == old.states["ints"].value_serializer
    snap = new.states["colors"].snapshot("value_serializer")
    assert snap.restore_serializer() == grown
    assert new.max_parallelism == 128 and new.key_serializer == old.key_serializer
    assert new.properties["statemorph.rewritten_from"] == "sp"


def test_incompatible_writes_nothing(tmp_path):
    src = _build(tmp_path / "sp")
    dst = tmp_path / "out"
    with pytest.raises(IncompatibleSchemaError, match="state 'ints': value: type changed from IntSerializer"):
        migrate_savepoint(src, dst, [ValueStateDescriptor("ints", S.LongSerializer())])
    assert sorted(os.listdir(tmp_path)) == ["sp"]


def test_failure_part_way_leaves_no_destination(tmp_path):
    src = _build(tmp_path / "sp")
    dst = tmp_path / "out"
    seen = []

    class Boom(IdentityTransform):
        def __call__(self, batch):
            seen.append(batch.num_rows)
            if len(seen) == 2:
                raise RuntimeError("disk on fire")
            return super().__call__(batch)

    with pytest.raises(RuntimeError, match="disk on fire"):
        migrate_savepoint(src, dst, [], transform=lambda plan: Boom(), batch_size=50)
    assert sorted(os.listdir(tmp_path)) == ["sp"]  # no final path, no temporary directory left
    assert len(seen) == 2


def test_identity_transform_rewrites_same_rows(tmp_path):
    src = _build(tmp_path / "sp")
    dst = str(tmp_path / "out")
    # an empty descriptor list keeps every state; with a transform they all go through the data pass
    report = migrate_savepoint(src, dst, [], transform=lambda plan: IdentityTransform(), batch_size=64)
    assert report.rows == {"ints": 300, "colors": 300}
    for name in ("ints", "colors"):
        assert read_state_table(dst, name).equals(read_state_table(src, name))


def test_existing_destination_is_refused(tmp_path):
    src = _build(tmp_path / "sp")
    with pytest.raises(SavepointError, match="already exists"):
        migrate_savepoint(src, src, [])


@settings(max_examples=40)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50), st.sampled_from([1, 7, 128, 129, 32768]))
def test_vectorised_long_key_groups_equal_flink(keys, max_par):
    got = key_groups(pa.array(keys, pa.int64()), S.LongSerializer(), max_par).to_pylist()
    assert got == [assign_to_key_group(java_long_hash(k), max_par) for k in keys]


@settings(max_examples=40)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=50))
def test_vectorised_int_key_groups_equal_flink(keys):
    got = key_groups(pa.array(keys, pa.int32()), S.IntSerializer(), 128).to_pylist()
    assert got == [assign_to_key_group(java_int_hash(k), 128) for k in keys]


@settings(max_examples=40)
@given(st.lists(st.text(max_size=12), max_size=40))
def test_vectorised_string_key_groups_equal_flink(keys):
    got = key_groups(pa.array(keys, pa.string()), S.StringSerializer(), 4096).to_pylist()
    assert got == [assign_to_key_group(java_string_hash(k), 4096) for k in keys]


def test_key_groups_reject_null_keys():
    with pytest.raises(ValueError, match="null keys"):
        key_groups(pa.array([1, None], pa.int64()), S.LongSerializer(), 128)


def test_murmur_edge_values():
    from statemorph.engine.keys import murmur_hash
    from statemorph.keyed.keygroups import murmur_hash as ref

    codes = np.array([0, 1, -1, 2**31 - 1, -(2**31), 12345], dtype=np.int64)
    assert murmur_hash(codes).tolist() == [ref(int(c)) for c in codes]
