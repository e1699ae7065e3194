"""The committed savepoints of the real Flink SQL job (ci/flink/src/savepoints/SqlJobs.java) and what
the tests expect of them.

A case is a directory under tests/data/flink_sql holding ``savepoint/`` (what Flink 2.3 wrote),
``spec.json`` (``sql_version`` 1: the old job, 2: the evolved one) and ``expected.json`` (the
stateful SQL operators' uids and each query's last row per key, as the job emitted them).

The job runs three queries over ``src(k INT, x BIGINT, name STRING[, note STRING], pt AS PROCTIME())``:
``agg`` (``GROUP BY k``: COUNT(*), SUM(x)[, MAX(note)]), ``first`` and ``last`` (ROW_NUMBER()
deduplication on ``pt``, keeping the first / the last row). Record ``j`` belongs to key ``j % keys``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import ROOT

from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators
from statemorph.serializers import BooleanSerializer

SQL_SAVEPOINTS = ROOT / "tests" / "data" / "flink_sql"
#: The uids Flink's planner gives the stateful operators (table.exec.uid.generation=ALWAYS,
#: ``<node id>_<transformation>``); the evolved job has the same plan shape, so the same uids. With
#: PLAN_ONLY (spec ``sql_uids``, Flink's default) they have none and go by their uid hashes.
AGG_UID = "4_group-aggregate"
FIRST_UID = "9_deduplicate"
LAST_UID = "15_deduplicate"
#: The new types of the states that change: the aggregation's accumulator row gains MAX(note)'s
#: accumulator, the keep-last row gains ``note`` before the proctime column. Version-3 RowData
#: snapshots record no field names, so the savepoint's fields are ``f0``, ``f1``...; the new type
#: keeps those names for the fields that stay and names the new ones, which is how statemorph
#: maps old fields to new ones.
EVOLVED_TYPES = {
    "agg": ("accState", "ROW<f0 BIGINT, f1 BIGINT, top_note STRING>"),
    "last": ("deduplicate-state",
             "ROW<f0 INT, f1 BIGINT, f2 STRING, note STRING, f3 TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*>"),
}


FLINK_120 = "1.20.3"
"""The Flink 1.x release the ``flink120-*`` cases are taken and restored in."""


def flink_120_or_skip(real_flink: ModuleType) -> str:
    """The release the 1.20 cases restore in; the test skips where its jars are not built."""
    try:
        real_flink.classpath(FLINK_120)
    except real_flink.FlinkUnavailable as e:
        pytest.skip(f"real Flink {FLINK_120} unavailable (ci/flink/setup.sh --with-1.20): {e}")
    return FLINK_120


def operator_ids(savepoint: Path) -> dict[str, str]:
    """Query (agg, first, last) → how a schema file names its operator in ``savepoint``: the uid,
    or the uid hash of an operator without one. Found by state: ``accState`` is the aggregation's,
    a BOOLEAN ``deduplicate-state`` keep-first's, a row one keep-last's."""
    ids = {}
    for op in describe_operators(FlinkSavepoint(savepoint)):
        if "accState" in op.states:
            query = "agg"
        elif "deduplicate-state" in op.states:
            value = op.states["deduplicate-state"].snapshot("value_serializer").restore_serializer()
            query = "first" if isinstance(value, BooleanSerializer) else "last"
        else:
            continue
        ids[query] = op.operator.uid or op.operator.uid_hash
    return ids


def evolve_schema(case: Path) -> str:
    """The schema file that takes ``case``'s state to the evolved job's."""
    ids = operator_ids(case / "savepoint")
    return "# the SQL job after `note STRING` joined src (MAX(note) in the aggregation, note in the rows)\n" + "".join(
        f'[operators."{ids[query]}".states.{state}]\ntype = "{new_type}"\n' for query, (state, new_type) in
        EVOLVED_TYPES.items())


def sql_case(name: str) -> Path:
    return SQL_SAVEPOINTS / name


def old_cases() -> list[Path]:
    """The savepoints of the old job (``sql_version`` 1)."""
    return [c for c in sorted(p.parent for p in SQL_SAVEPOINTS.glob("*/spec.json")) if spec(c)["sql_version"] == 1]


def spec(case: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((case / "spec.json").read_text(encoding="utf-8"))
    return data


def expected(case: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((case / "expected.json").read_text(encoding="utf-8"))
    return data


def name(j: int) -> str:
    """The ``name`` column of record ``j`` (SqlJobs.name)."""
    return ("nö-" if j % 4 == 1 else "n-") + str(j)


def evolved_changelog(case: Path) -> dict[str, list[tuple[str, list[Any]]]]:
    """What the evolved job must emit per query when restored from ``case`` migrated, given the
    restore checker's probe (one record per old key, then one of a new key ``keys``; record ``p``
    is ``j = keys * records_per_key + p`` with ``note`` set for even ``p``): the aggregation
    retracts the restored count and sum (``top_note`` null) and continues from them, keep-first
    emits only the new key, keep-last retracts the restored row (``note`` null)."""
    sp, out = spec(case), expected(case)["outputs"]
    keys, total = sp["keys"], sp["keys"] * sp["records_per_key"]
    agg = {row[0]: row for row in out["agg"]}
    last = {row[0]: row for row in out["last"]}
    want: dict[str, list[tuple[str, list[Any]]]] = {"agg": [], "first": [], "last": []}
    for p in range(keys + 1):
        j = total + p
        note = f"note-{p}" if p % 2 == 0 else None
        new_row = [p, j, name(j), note]
        if p < keys:
            _, cnt, s = agg[p]
            want["agg"] += [("-U", [p, cnt, s, None]), ("+U", [p, cnt + 1, s + j, note])]
            want["last"] += [("-U", [*last[p], None]), ("+U", new_row)]
        else:
            want["agg"].append(("+I", [p, 1, j, note]))
            want["first"].append(("+I", new_row))
            want["last"].append(("+I", new_row))
    return want
