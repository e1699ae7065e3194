"""Changing the max parallelism of keyed state: real Flink refuses to restore a savepoint under
another max parallelism, and restores statemorph's re-partitioned savepoint to exactly what the
job wrote (every state kind, TTL and timers), locally and on Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flink_cases import SAVEPOINTS, case_spec

from statemorph.engine import read_flink_state_table
from statemorph.engine.rescale import rescale_flink_savepoint
from statemorph.errors import FlinkSavepointError, UsageError
from statemorph.savepoint.flink import FlinkSavepoint

STRING_CASE = SAVEPOINTS / "kinds-hashmap-p2-files-snappy"  # heap, string keys, mp 128, p 2, files, Snappy
INT_CASE = SAVEPOINTS / "kinds-rocksdb-p1-files-mp256"  # RocksDB, int keys, mp 256, p 1, files
ROW_CASE = SAVEPOINTS / "kinds-rocksdb-p2-rowkey"  # RocksDB, BinaryRowData keys (as Flink SQL), mp 128, p 2


def _spec(case: Path, out: Path, **changes: Any) -> Path:
    spec = {**case_spec(case), **changes}
    out.write_text(json.dumps(spec), encoding="utf-8")
    return out


@pytest.mark.spark
@pytest.mark.java
def test_real_flink_restores_a_changed_max_parallelism(real_flink, spark, tmp_path):
    s = case_spec(STRING_CASE)
    i = case_spec(INT_CASE)
    a = rescale_flink_savepoint(STRING_CASE / "savepoint", tmp_path / "a", s["uid"], max_parallelism=256,
                                parallelism=3)
    b = rescale_flink_savepoint(INT_CASE / "savepoint", tmp_path / "b", i["uid"], max_parallelism=96,
                                parallelism=2, spark=spark, tasks=3)
    r = case_spec(ROW_CASE)
    c = rescale_flink_savepoint(ROW_CASE / "savepoint", tmp_path / "c", r["uid"], max_parallelism=1000)
    assert (a.engine, b.engine) == ("local", "spark")
    assert FlinkSavepoint(tmp_path / "a").operator(s["uid"]).max_parallelism == 256
    items = [
        # the original under the new max parallelism: Flink refuses (the negative control)
        (STRING_CASE / "savepoint", _spec(STRING_CASE, tmp_path / "refused.json", max_parallelism=256)),
        (tmp_path / "a", _spec(STRING_CASE, tmp_path / "a.json", max_parallelism=256, parallelism=3)),
        (tmp_path / "b", _spec(INT_CASE, tmp_path / "b.json", max_parallelism=96, parallelism=2,
                               backend="hashmap")),
        (tmp_path / "c", _spec(ROW_CASE, tmp_path / "c.json", max_parallelism=1000)),
    ]
    refused, got_a, got_b, got_c = real_flink.restore(items)
    assert not refused.ok and "max" in (refused.message or "").lower()
    assert got_a.ok, f"{got_a.exception}: {got_a.message}"
    assert got_a.entries == real_flink.expected_entries(STRING_CASE)
    assert got_b.ok, f"{got_b.exception}: {got_b.message}"
    assert got_b.entries == real_flink.expected_entries(INT_CASE)
    assert got_c.ok, f"{got_c.exception}: {got_c.message}"
    assert got_c.entries == real_flink.expected_entries(ROW_CASE)
    assert c.entries > 0


def _rows(path: Path, op: str, state: str) -> list[str]:
    t = read_flink_state_table(path, op, state).drop_columns(["key_group"])
    return sorted(json.dumps(r, sort_keys=True, default=repr) for r in t.to_pylist())


@pytest.mark.parametrize("max_parallelism,parallelism", [(128, 1), (4096, 5), (2, 2)])
def test_rescaled_savepoint_holds_the_same_rows_in_the_new_key_groups(tmp_path, max_parallelism, parallelism):
    uid = case_spec(STRING_CASE)["uid"]
    report = rescale_flink_savepoint(STRING_CASE / "savepoint", tmp_path / "sp", uid,
                                     max_parallelism=max_parallelism, parallelism=parallelism)
    sp = FlinkSavepoint(tmp_path / "sp")
    op = sp.operator(uid)
    assert (op.max_parallelism, op.parallelism, len(op.subtasks)) == (max_parallelism, parallelism, parallelism)
    old = FlinkSavepoint(STRING_CASE / "savepoint")
    other = [o for o in old.operators if o.uid != uid]
    assert [o.operator_id for o in sp.operators if o.uid != uid] == [o.operator_id for o in other]
    for state in ("events", "count", "recent", "totals", "ttl_totals", "ttl_recent"):
        assert _rows(tmp_path / "sp", uid, state) == _rows(STRING_CASE / "savepoint", uid, state)
    from statemorph.engine.keys import key_groups
    from statemorph.serializers import StringSerializer

    t = read_flink_state_table(tmp_path / "sp", uid, "count")
    assert t.column("key_group").to_pylist() == key_groups(t.column("key"), StringSerializer(),
                                                           max_parallelism).to_pylist()
    assert report.entries > 0


def test_keys_without_a_reproducible_hash_are_refused(tmp_path, monkeypatch):
    from statemorph.engine import rescale as rescale_module
    from statemorph.keyed.keygroups import has_java_hash
    from statemorph.serializers import IntSerializer, LongSerializer, RowDataSerializer, TupleSerializer

    assert not has_java_hash(TupleSerializer([IntSerializer(), LongSerializer()]))
    assert has_java_hash(RowDataSerializer("ROW<id INT>")) and has_java_hash(IntSerializer())
    monkeypatch.setattr(rescale_module, "has_java_hash", lambda ser: False)  # as for a POJO or Tuple key
    with pytest.raises(FlinkSavepointError, match="no Java hashCode"):
        rescale_flink_savepoint(STRING_CASE / "savepoint", tmp_path / "x", "kinds", max_parallelism=256)
    assert not (tmp_path / "x").exists()
    with pytest.raises(UsageError, match="parallelism must be"):
        rescale_flink_savepoint(STRING_CASE / "savepoint", tmp_path / "y", "kinds", max_parallelism=4, parallelism=5)


def test_row_keys_take_flinks_key_groups(tmp_path):
    """BinaryRowData keys hash as Flink hashes them: every key group Flink recorded is recomputed."""
    from statemorph.engine.keys import key_groups
    from statemorph.serializers import RowDataSerializer
    from statemorph.types import parse_type

    ser = RowDataSerializer(parse_type("ROW<id INT, name STRING>"))
    for state in ("count", "totals", "_timer_state/event_user-timers"):
        raw = FlinkSavepoint(ROW_CASE / "savepoint").iter_state_batches("kinds", state)
        for b in raw:
            assert key_groups(b.column("key"), ser, 128).to_pylist() == b.column("key_group").to_pylist()
    # typed keys (structs, fields f0 f1 as Flink's snapshot has no names) hash through their bytes
    from statemorph.savepoint.flink.description import describe_operators

    recorded = describe_operators(FlinkSavepoint(ROW_CASE / "savepoint"))[0].key_snapshot().restore_serializer()
    typed = read_flink_state_table(ROW_CASE / "savepoint", "kinds", "count")
    assert key_groups(typed.column("key"), recorded, 128).to_pylist() == typed.column("key_group").to_pylist()
