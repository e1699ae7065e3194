"""Operator-level changes real Flink restores: a bootstrapped operator added to an existing
savepoint (the old operators' state carried over untouched), and an operator whose uid changed
(with another operator removed)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from bootstrap_cases import STATES, bootstrap_data, restored_values, states_of
from flink_cases import SAVEPOINTS, case_spec

from statemorph import serializers as S
from statemorph.engine import StateData, modify_flink_savepoint, write_flink_savepoint
from statemorph.errors import SavepointError, UsageError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.operator_ids import operator_id

BASE = SAVEPOINTS / "kinds-hashmap-p2-files-snappy"  # state files next to _metadata
RENAMED = SAVEPOINTS / "kinds-rocksdb-p1-files-mp256"
KEYS = [f"added-{i}" for i in range(30)]


def _spec(out: Path, spec: dict) -> Path:
    out.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return out


@pytest.mark.java
def test_real_flink_restores_added_and_renamed_operators(real_flink, tmp_path):
    tables, want = bootstrap_data(KEYS, pa.string())
    write_flink_savepoint(tmp_path / "added", operator="added-op", key_serializer=S.StringSerializer(),
                          states=states_of(tables), max_parallelism=128, parallelism=1, base=BASE / "savepoint")
    added = FlinkSavepoint(tmp_path / "added")
    assert [o.uid for o in added.operators] == [o.uid for o in FlinkSavepoint(BASE / "savepoint").operators] + [
        "added-op"]
    report = modify_flink_savepoint(RENAMED / "savepoint", tmp_path / "renamed", remove=["records"],
                                    rename={"kinds": "kinds-v2"})
    assert report.removed == ["records"] and report.operators == 1
    op = FlinkSavepoint(tmp_path / "renamed").operators[0]
    assert (op.uid, op.operator_id) == ("kinds-v2", operator_id("kinds-v2"))

    old_uid = case_spec(RENAMED)
    # "added" holds two keyed operators and the checker's job has one: each restore checks one of
    # them and lets the other (checked by the other restore) go unclaimed
    items = [
        (tmp_path / "added", _spec(tmp_path / "base.json", {**case_spec(BASE), "allow_unclaimed": True})),
        (tmp_path / "added", _spec(tmp_path / "added.json", {"name": "added", "uid": "added-op", "key_type": "string",
                                                             "key_values": KEYS, "states": STATES,
                                                             "allow_unclaimed": True})),
        (tmp_path / "renamed", _spec(tmp_path / "renamed.json", {**old_uid, "uid": "kinds-v2"})),
        (tmp_path / "renamed", RENAMED / "spec.json"),  # the old uid no longer finds the state
    ]
    carried, boot, renamed, old = real_flink.restore(items)
    assert carried.ok and carried.entries == real_flink.expected_entries(BASE)
    assert restored_values(boot) == want
    assert renamed.ok and renamed.entries == real_flink.expected_entries(RENAMED)
    # under the old uid the state is the savepoint's operator 'kinds-v2', which the job does not have
    assert not old.ok and "Cannot map checkpoint/savepoint state for operator" in old.message, old


def test_modify_refuses_what_it_cannot_do(tmp_path):
    sp = BASE / "savepoint"
    with pytest.raises(UsageError, match="same uid"):
        modify_flink_savepoint(sp, tmp_path / "a", rename={"kinds": "records"})
    with pytest.raises(UsageError, match="both removed and renamed"):
        modify_flink_savepoint(sp, tmp_path / "b", remove=["kinds"], rename={"kinds": "x"})
    with pytest.raises(UsageError, match="twice"):
        modify_flink_savepoint(sp, tmp_path / "c", remove=["kinds", "kinds"])
    with pytest.raises(SavepointError, match="no operator"):
        modify_flink_savepoint(sp, tmp_path / "d", remove=["nope"])
    t = pa.table({"key": ["a"], "value": pa.array([1], pa.int64())})
    with pytest.raises(UsageError, match="already has an operator"):
        write_flink_savepoint(tmp_path / "e", operator="kinds", key_serializer=S.StringSerializer(),
                              states={"count": StateData(t, S.LongSerializer())}, base=sp)
    assert list(tmp_path.iterdir()) == []


def test_removed_operators_files_are_not_carried(tmp_path):
    sp = FlinkSavepoint(BASE / "savepoint")
    keyed = [f for f in (BASE / "savepoint").iterdir() if f.name != "_metadata"]
    modify_flink_savepoint(BASE / "savepoint", tmp_path / "x", remove=["kinds"])
    left = FlinkSavepoint(tmp_path / "x")
    assert [o.uid for o in left.operators] == ["records"]
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["_metadata"]
    assert keyed and sp.operators[1].uid == "kinds"
