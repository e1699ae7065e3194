"""The committed real-Flink savepoint cases and the ci/flink driver, for the tests in this directory.

A case is a directory under tests/data/flink_savepoints holding ``savepoint/`` (what Flink wrote),
``spec.json`` (the job it was taken from, see ci/flink/README.md) and ``expected.json`` (every state
of every key as the job wrote it).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
SAVEPOINTS = ROOT / "tests" / "data" / "flink_savepoints"
DRIVER = ROOT / "ci" / "flink" / "flink.py"
#: The Events row type after the schema change (fields added, nested fields reordered).
EVOLVED_EVENTS = (
    "ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT,"
    " appVersion STRING, sessionId BIGINT>>"
)
#: EVOLVED_EVENTS' field names, nested rows as (name, fields) pairs, for :func:`reshape`.
EVOLVED_EVENTS_FIELDS: tuple[Any, ...] = (
    "eventId",
    ("metadata", ("deviceType", "location", "userId", "timestamp", "appVersion", "sessionId")),
)


def window_cases() -> list[Path]:
    """The window job's cases (ci/flink WindowJobs: open windows at the savepoint)."""
    return [c for c in every_committed_case() if case_spec(c).get("window_job")]


def sql_window_cases() -> list[Path]:
    """The Flink SQL window job's cases (ci/flink SqlWindowJobs: open windows at the savepoint)."""
    return [c for c in every_committed_case() if case_spec(c).get("sql_window_job")]


def sql_join_cases(version: int = 1, flink: str = "2.3.0") -> list[Path]:
    """The Flink SQL Top-N / join job's cases (ci/flink SqlJoinJobs) of query version ``version``
    taken by Flink ``flink``."""
    return [c for c in every_committed_case()
            if case_spec(c).get("sql_join_job") and case_spec(c).get("sql_join_version", 1) == version
            and case_spec(c).get("flink", "2.3.0") == flink]


def sql_agg_cases(flink: str = "2.3.0") -> list[Path]:
    """The Flink SQL aggregation job's cases (ci/flink SqlAggJobs: distinct, FIRST/LAST_VALUE,
    LISTAGG and over aggregations) taken by Flink ``flink``."""
    return [c for c in every_committed_case()
            if case_spec(c).get("sql_agg_job") and case_spec(c).get("flink", "2.3.0") == flink]


#: The spec fields of the jobs whose states are not the DataStream matrix's.
OTHER_JOBS = {"program", "window_job", "sql_window_job", "sql_join_job", "sql_agg_job"}


def every_committed_case() -> list[Path]:
    """Every case under tests/data/flink_savepoints, whichever job took it."""
    return sorted(p.parent for p in SAVEPOINTS.glob("*/spec.json"))


def state_listing_cases() -> list[Path]:
    """The cases whose restore reads every state back (``restore``: the matrix and opaque jobs);
    the window jobs' restores fire windows instead (test_window_restore_real_flink.py), the SQL
    aggregation job's emit changelogs (test_sql_aggregate_restore_real_flink.py)."""
    return [c for c in every_committed_case() if not (OTHER_JOBS - {"program"}) & set(case_spec(c))]


#: The states the opaque-state job (ci/flink OpaqueJobs.java) keeps after the spec's own.
OPAQUE_STATES = ("session", "visits", "pair", "lists")


def case_states(case: Path) -> list[str]:
    """Every state a case's expected.json lists, in its order: the spec's, then the states its
    program always keeps (the opaque job under a Kryo key: ``labels`` too, OpaqueJobs.namespaced)."""
    spec = case_spec(case)
    if spec.get("program") != "opaque":
        return list(spec["states"])
    return [*spec["states"], *OPAQUE_STATES, *(["labels"] if spec.get("key_type") == "kryo" else [])]


def committed_cases() -> list[Path]:
    """The cases of the DataStream matrix job (every state kind in the void namespace; ci/flink
    Main). The ``opaque-*`` cases (their spec's ``program``) and the window jobs' cases are other
    jobs': their states are not the matrix's."""
    return [c for c in every_committed_case()
            if not OTHER_JOBS & set(case_spec(c))]


def case_spec(case: Path) -> dict[str, Any]:
    spec: dict[str, Any] = json.loads((case / "spec.json").read_text(encoding="utf-8"))
    return spec


def load_driver() -> ModuleType:
    """ci/flink/flink.py as a module (standard library only, so it loads without Flink)."""
    if "statemorph_ci_flink" in sys.modules:
        return sys.modules["statemorph_ci_flink"]
    spec = importlib.util.spec_from_file_location("statemorph_ci_flink", DRIVER)
    assert spec is not None and spec.loader is not None, f"cannot load {DRIVER}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def reshape(row: dict[str, Any] | None, fields: tuple[Any, ...]) -> dict[str, Any] | None:
    """A row as the restore checker renders it (an object by field name) after evolving to ``fields``.

    Fields are matched by name, fields the old row lacks are null, nested rows recurse: what real
    Flink must read back from a correctly migrated savepoint, given the expected.json value.
    """
    if row is None:
        return None
    out: dict[str, Any] = {}
    for f in fields:
        if isinstance(f, tuple):
            name, nested = f
            out[name] = reshape(row.get(name), nested)
        else:
            out[f] = row.get(f)
    return out
