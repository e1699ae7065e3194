"""The Spark engine on Flink savepoints: one Spark task per subtask stream rewrites its stream
from the savepoint's files into the staging directory; the driver only assembles handles. The
result is the local engine's, byte for byte, and real Flink restores it with the evolved type."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import (
    EVOLVED_EVENTS,
    EVOLVED_EVENTS_FIELDS,
    SAVEPOINTS,
    case_spec,
    committed_cases,
    reshape,
)
from savepoint.flink.format_helpers import expected, hashable, small_chunks, state_operator

from statemorph import engine, serializers
from statemorph.engine.rescale import rescale_flink_savepoint
from statemorph.savepoint.flink import FlinkSavepoint, key_group_scan, keyed_blocks
from statemorph.state import ValueStateDescriptor

CASES = [c for c in committed_cases() if case_spec(c)["parallelism"] == 2 and "events" in case_spec(c)["states"]]


def _digests(root: Path) -> list[str]:
    """The state files' digests (new inline streams get fresh random names, so names differ)."""
    return sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()
                  if p.is_file() and p.name != "_metadata")


def _descriptors(case: Path) -> dict[str, list[Any]]:
    op = state_operator(FlinkSavepoint(case / "savepoint"))
    new = serializers.RowDataSerializer(EVOLVED_EVENTS)
    states = [s for s in ("events", "ttl_events") if s in case_spec(case)["states"]]
    return {op: [ValueStateDescriptor(s, new, ttl=s.startswith("ttl_")) for s in states]}


@pytest.mark.spark
@pytest.mark.java
def test_spark_engine_equals_local_and_flink_restores_it(spark: Any, real_flink: ModuleType, tmp_path: Path) -> None:
    assert CASES
    items = []
    for case in CASES:
        local, distributed = tmp_path / f"{case.name}-local", tmp_path / f"{case.name}-spark"
        a = engine.migrate_flink_savepoint(case / "savepoint", local, _descriptors(case))
        b = engine.migrate_flink_savepoint(case / "savepoint", distributed, _descriptors(case), spark=spark)
        assert b.engine == "spark" and b.migrated == a.migrated and b.rewritten_streams == a.rewritten_streams == 2
        if not case_spec(case)["compression"]:
            assert _digests(distributed) == _digests(local)
        items.append((distributed, case / "spec.json"))
    for case, result in zip(CASES, real_flink.restore(items, events_type=EVOLVED_EVENTS), strict=True):
        assert result.ok, f"{case.name}: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        want = {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in ("events", "ttl_events") else v
                for (k, s), v in expected(case).items()}
        assert got == want, case.name


SMALL_MAX_PARALLELISM = 8
SPLIT_CASES = ["kinds-hashmap-p2-files-snappy", "kinds-rocksdb-p2-rowkey", "events-rocksdb-p2-files-snappy"]
"""Snappy and uncompressed streams, heap and RocksDB layouts, string, int and row keys."""


def _phase_tasks(spark: Any, phase: str, before: set[int]) -> int:
    """The tasks Spark ran for the statemorph phase's jobs since ``before`` (its job ids then)."""
    tracker = spark.sparkContext.statusTracker()
    jobs = set(tracker.getJobIdsForGroup(f"statemorph-{phase}")) - before
    return sum(tracker.getStageInfo(s).numTasks for j in jobs for s in list(tracker.getJobInfo(j).stageIds))


def _job_ids(spark: Any) -> dict[str, set[int]]:
    tracker = spark.sparkContext.statusTracker()
    return {p: set(tracker.getJobIdsForGroup(f"statemorph-{p}")) for p in ("cut", "migrate", "assemble")}


@pytest.mark.spark
@pytest.mark.java
def test_spark_cuts_key_groups_past_max_parallelism_and_flink_restores_it(spark: Any, real_flink: ModuleType,
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Savepoints at max parallelism 8 (committed cases re-partitioned by statemorph) migrated
    on Spark with tasks of 1 KiB: each key group stored in more is scanned by a cut task and
    migrated as several pieces, so there are more migrate tasks than key groups, and every part is
    copied into its state file by its own task, more assembly tasks than state files (counted
    from Spark's status tracker). The slice size is the one rule both engines cut by (small here,
    so that key groups of a few KiB have several slices). The state files are the local engine's,
    byte for byte, compressed ones included (framed in chunks of 64 bytes,
    ``small_chunks``: a compressed key group is cut between chunks),
    and real Flink restores them with the new type."""
    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 128)
    new = serializers.RowDataSerializer(EVOLVED_EVENTS)
    items = []
    for name in SPLIT_CASES:
        case = SAVEPOINTS / name
        spec = case_spec(case)
        small = tmp_path / f"{name}-mp8"
        with monkeypatch.context() as m:
            m.setattr(keyed_blocks, "compress_key_group", small_chunks)
            rescale_flink_savepoint(case / "savepoint", small, spec["uid"], max_parallelism=SMALL_MAX_PARALLELISM)
        states = [s for s in ("events", "ttl_events") if s in spec["states"]]
        descs = {spec["uid"]: [ValueStateDescriptor(s, new, ttl=s.startswith("ttl_")) for s in states]}
        local, distributed = tmp_path / f"{name}-local", tmp_path / f"{name}-spark"
        a = engine.migrate_flink_savepoint(small, local, descs)
        before = _job_ids(spark)
        b = engine.migrate_flink_savepoint(small, distributed, descs, spark=spark, task_bytes=1024)
        assert b.engine == "spark" and b.migrated == a.migrated and b.rewritten_streams == a.rewritten_streams == 2
        assert _digests(distributed) == _digests(local), name
        assert not (distributed / ".parts").exists()
        sp = FlinkSavepoint(small)
        sizes = [e.end - e.offset for _, stream in sp.keyed_streams(sp.operator(spec["uid"])) for e in stream.extents]
        assert 0 < len(sizes) <= SMALL_MAX_PARALLELISM
        large = sum(n > 1024 for n in sizes)  # stored in more than a task's share: cut into pieces
        assert large and _phase_tasks(spark, "cut", before["cut"]) == large, name
        assert _phase_tasks(spark, "migrate", before["migrate"]) >= len(sizes) + large, name
        assert _phase_tasks(spark, "assemble", before["assemble"]) > b.rewritten_streams, name
        items.append((distributed, case / "spec.json"))
    results = real_flink.restore(items, events_type=EVOLVED_EVENTS,
                                 overrides={"max_parallelism": SMALL_MAX_PARALLELISM})
    for name, result in zip(SPLIT_CASES, results, strict=True):
        assert result.ok, f"{name}: {result.exception}: {result.message}"
        got = {(hashable(e["key"]), e["state"]): e["value"] for e in result.entries}
        want = {(k, s): reshape(v, EVOLVED_EVENTS_FIELDS) if s in ("events", "ttl_events") else v
                for (k, s), v in expected(SAVEPOINTS / name).items()}
        assert got == want, name
