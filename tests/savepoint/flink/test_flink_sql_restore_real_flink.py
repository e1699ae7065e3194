"""The Flink SQL story end to end: the savepoints of the old SQL job (tests/data/flink_sql) are
migrated by ``statemorph migrate`` to the evolved query's row types (``src`` gained a nullable
``note``), and real Flink 2.3 restores the evolved SQL job from them, in one JVM:

- the planner gives the evolved job's stateful operators the savepoint's uids (or, with Flink's
  default PLAN_ONLY uid generation, the same topology hashes: sql-planonly-hashmap-p1);
- the aggregation retracts the restored COUNT(*) and SUM(x) (its new MAX(note) accumulator null) and
  continues counting from them;
- keep-first deduplication emits no already-seen key again, only the new one;
- keep-last deduplication retracts the restored row (its new ``note`` null) before the new one.

The negative control: the unmigrated savepoint is refused by the evolved job with Flink's
StateMigrationException (the RowData state serializer is incompatible). And the generator still
takes the committed savepoints: a fresh one of the same spec holds the same uids, outputs and
serializer snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_sql_cases import evolve_schema, evolved_changelog, expected, old_cases, sql_case

from statemorph.cli import main
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators


def _evolved_spec(case: Path, tmp: Path) -> Path:
    spec = json.loads((case / "spec.json").read_text(encoding="utf-8"))
    path = tmp / f"{case.name}-v2.json"
    path.write_text(json.dumps({**spec, "sql_version": 2}), encoding="utf-8")
    return path


def _by_query(entries: list[dict[str, Any]]) -> dict[str, list[tuple[str, list[Any]]]]:
    out: dict[str, list[tuple[str, list[Any]]]] = {"agg": [], "first": [], "last": []}
    for e in entries:
        out[e["query"]].append((e["kind"], e["row"]))
    return out


def _per_key_order(changes: list[tuple[str, list[Any]]]) -> dict[Any, list[str]]:
    order: dict[Any, list[str]] = {}
    for kind, row in changes:
        order.setdefault(row[0], []).append(kind)
    return order


@pytest.mark.java
def test_migrated_sql_savepoints_restore_in_real_flink(real_flink: ModuleType, tmp_path: Path) -> None:
    cases = old_cases()
    assert [c.name for c in cases] == ["sql-hashmap-p1", "sql-planonly-hashmap-p1", "sql-rocksdb-p2"]
    items = []
    for case in cases:
        schema = tmp_path / f"{case.name}.toml"
        schema.write_text(evolve_schema(case), encoding="utf-8")
        dst = tmp_path / f"{case.name}-migrated"
        assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst), "-q"]) == 0
        items.append((dst, _evolved_spec(case, tmp_path)))
    control = sql_case("sql-hashmap-p1")
    items.append((control / "savepoint", _evolved_spec(control, tmp_path)))

    *restored, refused = real_flink.sql_restore(items)

    for case, res in zip(cases, restored, strict=True):
        assert res.ok, f"{case.name}: Flink refused the migrated savepoint: {res.exception}: {res.message}"
        head, *changes = res.entries
        assert head == {"uids": expected(case)["uids"]}
        got, want = _by_query(changes), evolved_changelog(case)
        for query in want:
            assert sorted(got[query], key=json.dumps) == sorted(want[query], key=json.dumps), (case.name, query)
            # a key's retraction comes before its update
            assert all(kinds in (["-U", "+U"], ["+I"]) for kinds in _per_key_order(got[query]).values())
    assert not refused.ok, "Flink restored the unmigrated savepoint into the evolved SQL job"
    assert refused.exception == "org.apache.flink.util.StateMigrationException"
    assert "RowDataSerializer" in refused.message and "must not be incompatible" in refused.message


def _snapshots(path: Path) -> dict[tuple[str, str, str], bytes]:
    return {(op.operator.uid, name, role): st.snapshot_bytes(role)
            for op in describe_operators(FlinkSavepoint(path)) for name, st in op.states.items()
            for role in ("key_serializer", "value_serializer")}


@pytest.mark.java
def test_the_generator_takes_the_committed_sql_savepoint_again(real_flink: ModuleType, tmp_path: Path) -> None:
    case = sql_case("sql-hashmap-p1")
    real_flink.sql_generate([(case / "spec.json", tmp_path / "again")])
    assert expected(tmp_path / "again") == expected(case)
    assert _snapshots(tmp_path / "again" / "savepoint") == _snapshots(case / "savepoint")
