"""Flink SQL Top-N, regular join and interval join state through statemorph and back into real
Flink 2.3 (ci/flink SqlJoinJobs; hashmap and RocksDB, parallelism 2), in one JVM:

- the savepoint as Flink took it, its convert round trip (Flink → Parquet form → Flink) and its
  plain rewrite (``statemorph migrate`` with a schema file naming no state) restore, and the job
  emits the same output from each, the output the restored state implies (Top-N evicts a restored
  row, the join retracts the restored pairings, the interval join pairs the probe with buffered rows,
  the outer join retracts and re-emits each restored left row with its restored match);
- migrated to version 2 (every kept row gains the nullable ``note``), the evolved job restores it
  and emits the same changes with ``note`` null where a row was restored; the unmigrated savepoint
  is refused by the evolved job (StateMigrationException).

The same for the job's savepoint Flink 1.20 took (``flink120-sql-joins-*``), restored in Flink
1.20 (``ci/flink/setup.sh --with-1.20``; skipped where it is not built): its ``_metadata``
(version 4) keeps no uids, and the schema files name them all the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import sql_join_cases
from savepoint.flink.flink_sql_cases import flink_120_or_skip
from savepoint.flink.flink_sql_join_cases import EVOLVE_SCHEMA, QUERIES, expected_net, net, spec

from statemorph.engine import convert_savepoint

pytestmark = pytest.mark.java

CASES = sql_join_cases()
CASES_120 = sql_join_cases(flink="1.20.3")
FORMS = ("original", "converted", "rewritten", "migrated", "unmigrated")


def _statemorph(*args: str) -> None:
    run = subprocess.run([sys.executable, "-m", "statemorph", *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (args, run.stdout, run.stderr)


@pytest.fixture(scope="module")
def restored(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """(case, form) → what real Flink did restoring that form of the case (one JVM for all)."""
    items, keys = _forms(CASES, tmp_path_factory.mktemp("sql-joins"))
    return dict(zip(keys, real_flink.sql_join_restore(items), strict=True))


@pytest.fixture(scope="module")
def restored_120(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """The same for the Flink 1.20 cases, restored in Flink 1.20."""
    version = flink_120_or_skip(real_flink)
    items, keys = _forms(CASES_120, tmp_path_factory.mktemp("sql-joins-120"))
    return dict(zip(keys, real_flink.sql_join_restore(items, flink_version=version), strict=True))


def _forms(cases: list[Path], tmp: Path) -> tuple[list[tuple[Path, Path]], list[tuple[str, str]]]:
    """Every form (FORMS) of every case, as (savepoint, spec) items, and their (case, form) keys."""
    empty, evolve = tmp / "plain.toml", tmp / "evolve.toml"
    empty.write_text("# names no state: a plain rewrite\nformat = 1\n", encoding="utf-8")
    evolve.write_text(EVOLVE_SCHEMA, encoding="utf-8")
    items, keys = [], []
    for case in cases:
        sp, v1 = case / "savepoint", case / "spec.json"
        v2 = tmp / f"{case.name}-v2.json"
        v2.write_text(json.dumps({**spec(case), "sql_join_version": 2}), encoding="utf-8")
        convert_savepoint(sp, tmp / f"{case.name}-pq")
        convert_savepoint(tmp / f"{case.name}-pq", tmp / f"{case.name}-back")
        _statemorph("migrate", str(sp), "--schema", str(empty), "--out", str(tmp / f"{case.name}-plain"))
        _statemorph("migrate", str(sp), "--schema", str(evolve), "--out", str(tmp / f"{case.name}-v2"))
        forms = [(sp, v1), (tmp / f"{case.name}-back", v1), (tmp / f"{case.name}-plain", v1),
                 (tmp / f"{case.name}-v2", v2), (sp, v2)]
        items += forms
        keys += [(case.name, form) for form in FORMS]
    return items, keys


def _net(restored: dict[tuple[str, str], Any], case: Path, form: str) -> Any:
    result = restored[(case.name, form)]
    assert result.ok, f"Flink refused the {form} {case.name}: {result.exception}: {result.message}"
    return net(result.entries)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_savepoint_restores_with_the_output_its_state_implies(restored: dict[tuple[str, str], Any],
                                                                  case: Path) -> None:
    got = _net(restored, case, "original")
    assert got == expected_net(case)
    assert all(got[q] for q in QUERIES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("form", ["converted", "rewritten"])
def test_a_convert_round_trip_and_a_plain_rewrite_restore_with_the_same_output(
        restored: dict[tuple[str, str], Any], case: Path, form: str) -> None:
    assert _net(restored, case, form) == _net(restored, case, "original")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_evolved_job_restores_the_migrated_savepoint_and_refuses_the_old_one(
        restored: dict[tuple[str, str], Any], case: Path) -> None:
    assert _net(restored, case, "migrated") == expected_net(case, version=2)
    old = restored[(case.name, "unmigrated")]
    assert not old.ok and old.exception.endswith("StateMigrationException"), (old.exception, old.message)


@pytest.mark.parametrize("case", CASES_120, ids=lambda c: c.name)
def test_flink_120_restores_every_form_of_its_own_savepoint_with_the_same_output(
        restored_120: dict[tuple[str, str], Any], case: Path) -> None:
    """Flink 1.20's savepoint of the job: as taken, converted and rewritten it restores with the
    output its state implies; migrated (the schema file naming the uids Flink 1.20 did not record)
    the evolved job restores it; unmigrated it refuses it."""
    got = _net(restored_120, case, "original")
    assert got == expected_net(case) and all(got[q] for q in QUERIES)
    for form in ("converted", "rewritten"):
        assert _net(restored_120, case, form) == got, form
    assert _net(restored_120, case, "migrated") == expected_net(case, version=2)
    old = restored_120[(case.name, "unmigrated")]
    assert not old.ok and old.exception.endswith("StateMigrationException"), (old.exception, old.message)


def _snapshots(path: Path) -> dict[tuple[str, str, str], bytes]:
    from statemorph.savepoint.flink import FlinkSavepoint
    from statemorph.savepoint.flink.description import describe_operators

    return {(op.ident, name, role): st.snapshot_bytes(role)
            for op in describe_operators(FlinkSavepoint(path)) for name, st in op.states.items()
            for role in ("key_serializer", "value_serializer")}


def test_the_generator_takes_the_committed_savepoints_again(real_flink: ModuleType, tmp_path: Path) -> None:
    """The committed cases are what the job in ci/flink takes today: the same uids and serializer
    snapshots (of the old and the evolved queries)."""
    cases = [CASES[0], *sql_join_cases(version=2)]
    real_flink.sql_join_generate([(c / "spec.json", tmp_path / c.name) for c in cases])
    for case in cases:
        again = tmp_path / case.name
        assert json.loads((again / "expected.json").read_text()) == json.loads((case / "expected.json").read_text())
        assert _snapshots(again / "savepoint") == _snapshots(case / "savepoint"), case.name
