"""The Spark engine on Flink savepoints: one Spark task per subtask stream rewrites its stream
from the savepoint's files into the staging directory; the driver only assembles handles. The
result is the local engine's, byte for byte, and real Flink restores it with the evolved type."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS, EVOLVED_EVENTS_FIELDS, case_spec, committed_cases, reshape
from savepoint.flink.format_helpers import expected, hashable, state_operator

from statemorph import engine, serializers
from statemorph.savepoint.flink import FlinkSavepoint
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
