"""Flink SQL distinct, FIRST_VALUE / LAST_VALUE / LISTAGG and over aggregations through statemorph
and back into real Flink 2.3 (ci/flink SqlAggJobs; tests/data/flink_savepoints/sql-aggs-*, hashmap
and RocksDB, parallelism 2), all restores in one JVM:

- the savepoint as Flink took it, its convert round trip (Flink → Parquet form → Flink) and its
  plain rewrite (``migrate`` with a schema file naming no state) restore, and the job emits the
  same changelog from each: the aggregations retract and update from the restored distinct maps,
  data views and accumulators, the over windows emit every buffered row once the input ends;
- the evolved job (``src`` gained a nullable ``note``, selected by the event-time over windows, whose
  buffered input rows gain it) restores the savepoint ``statemorph migrate`` wrote and emits the
  old job's changelog with ``note`` null for the restored rows and set for the probe's; the
  unmigrated savepoint is refused by Flink (StateMigrationException).

The processing-time over window's rows are left out of the comparison: whether it emits the
probe's row before the input ends depends on the wall clock, not on the state.

The same for the job's savepoint Flink 1.20 took (``flink120-sql-aggs-*``), restored in Flink 1.20
(``ci/flink/setup.sh --with-1.20``; skipped where it is not built): its structured accumulators
are Flink 1.20's StructuredType (no class-name field), its ``_metadata`` keeps no uids.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from savepoint.flink.flink_cases import case_spec, sql_agg_cases
from savepoint.flink.flink_sql_cases import flink_120_or_skip
from savepoint.flink.flink_sql_join_cases import name

from statemorph.cli import main

pytestmark = pytest.mark.java

CASES = sql_agg_cases()
CASES_120 = sql_agg_cases(flink="1.20.3")
#: The event-time over windows' buffered input rows after ``note`` joined src: RowData snapshots
#: record no field names (f0 ...), the new field is named and placed where the planner puts it.
BUFFER_V2 = "ARRAY<ROW<f0 INT, f1 BIGINT, f2 STRING, note STRING, f3 TIMESTAMP_LTZ(3) *ROWTIME*>>"
SCHEMA_V2 = "".join(f'[operators."{n}_over-aggregate".states.inputState]\ntype = "{BUFFER_V2}"\n' for n in (22, 28, 34))
FORMS = ("original", "convert", "rewrite", "migrated-v2", "original-v2")


def _run(*args: str) -> None:
    assert main([*args, "-q"]) == 0, args


@pytest.fixture(scope="module")
def restored(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """(case, form) → the restore result of every form of every case, one JVM."""
    items, keys = _forms(CASES, tmp_path_factory.mktemp("sql-aggs"))
    return dict(zip(keys, real_flink.sql_agg_restore(items), strict=True))


@pytest.fixture(scope="module")
def restored_120(real_flink: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    """The same for the Flink 1.20 cases, restored in Flink 1.20."""
    version = flink_120_or_skip(real_flink)
    items, keys = _forms(CASES_120, tmp_path_factory.mktemp("sql-aggs-120"))
    return dict(zip(keys, real_flink.sql_agg_restore(items, flink_version=version), strict=True))


def _forms(cases: list[Path], tmp: Path) -> tuple[list[tuple[Path, Path]], list[tuple[str, str]]]:
    """Every form (FORMS) of every case, as (savepoint, spec) items, and their (case, form) keys."""
    (tmp / "v2.toml").write_text(SCHEMA_V2, encoding="utf-8")
    (tmp / "none.toml").write_text("format = 1\n", encoding="utf-8")
    items, keys = [], []
    for case in cases:
        sp, spec = case / "savepoint", case / "spec.json"
        v2 = tmp / f"{case.name}-v2.json"
        v2.write_text(json.dumps({**case_spec(case), "sql_agg_version": 2}), encoding="utf-8")
        _run("convert", str(sp), "--out", str(tmp / f"{case.name}-pq"))
        _run("convert", str(tmp / f"{case.name}-pq"), "--out", str(tmp / f"{case.name}-back"))
        _run("migrate", str(sp), "--schema", str(tmp / "none.toml"), "--out", str(tmp / f"{case.name}-rewrite"))
        _run("migrate", str(sp), "--schema", str(tmp / "v2.toml"), "--out", str(tmp / f"{case.name}-migrated"))
        for form, savepoint, s in zip(FORMS, (sp, tmp / f"{case.name}-back", tmp / f"{case.name}-rewrite",
                                              tmp / f"{case.name}-migrated", sp), (spec, spec, spec, v2, v2),
                                      strict=True):
            items.append((savepoint, s))
            keys.append((case.name, form))
    return items, keys


def _changelog(result: Any) -> dict[tuple[str, Any], list[tuple[str, list[Any]]]]:
    """(query, first column) → the rows emitted, as a sorted list (parallel subtasks interleave)."""
    assert result.ok, f"Flink refused the savepoint: {result.exception}: {result.message}"
    out: dict[tuple[str, Any], list[tuple[str, list[Any]]]] = defaultdict(list)
    for e in result.entries:
        if e["query"] != "over_proc":
            out[(e["query"], e["row"][0])].append((e["kind"], e["row"]))
    return {k: sorted(v, key=json.dumps) for k, v in out.items()}


def _with_note(changelog: dict[tuple[str, Any], list[tuple[str, list[Any]]]], case: Path) -> dict[
        tuple[str, Any], list[tuple[str, list[Any]]]]:
    """The old job's changelog as the evolved job must emit it: the event-time over windows' rows
    gain ``note`` after ``name``, null for restored records, ``note-k`` for the probe's record of
    an even key ``k``."""
    total = case_spec(case)["keys"] * case_spec(case)["records_per_key"]
    out = {}
    for (query, key), rows in changelog.items():
        if query.startswith("over_"):
            rows = [(kind, [*r[:3], f"note-{r[0]}" if r[1] >= total and r[0] % 2 == 0 else None, *r[3:]])
                    for kind, r in rows]
        out[(query, key)] = sorted(rows, key=json.dumps)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_original_continues_every_aggregation(restored: dict[tuple[str, str], Any], case: Path) -> None:
    """The reference run, checked on its own: every key's aggregations update once (-U/+U) with the
    probe, the new key inserts, and each event-time over window emits every restored row and the
    probe's (keys * (records_per_key + 1) rows)."""
    _continues(_changelog(restored[(case.name, "original")]), case)


@pytest.mark.parametrize("case", CASES_120, ids=[c.name for c in CASES_120])
def test_flink_120_restores_every_form_of_its_own_savepoint_with_the_same_output(
        restored_120: dict[tuple[str, str], Any], case: Path) -> None:
    """Flink 1.20's savepoint of the job: as taken it continues every aggregation; converted and
    rewritten it restores with the same output; migrated (the schema file naming uids Flink 1.20
    did not record) the evolved job restores it; unmigrated it refuses it."""
    got = _changelog(restored_120[(case.name, "original")])
    _continues(got, case)
    for form in ("convert", "rewrite"):
        assert _changelog(restored_120[(case.name, form)]) == got, form
    refused = restored_120[(case.name, "original-v2")]
    assert not refused.ok and refused.exception.endswith("StateMigrationException")
    assert _changelog(restored_120[(case.name, "migrated-v2")]) == _with_note(got, case)


def _continues(got: dict[tuple[str, Any], list[tuple[str, list[Any]]]], case: Path) -> None:
    s = case_spec(case)
    keys, per_key = s["keys"], s["records_per_key"]
    assert [kind for kind, _ in got[("distinct", 0)]] == ["+U", "-U"]
    for query in ("over_rows", "over_range", "over_unbounded"):
        assert sum(len(v) for (q, _), v in got.items() if q == query) == keys * (per_key + 1)
    assert max(r[4] for _, r in got[("over_unbounded", 0)]) == per_key + 1  # COUNT over all the key's rows
    # the user's aggregate function (structured types in its accumulator's ARRAY and MAP) goes on
    # from every restored item: the savepoint's value retracted, the value with the probe's item
    total = keys * per_key
    for k in range(keys):
        old = [(j, name(j)) for j in range(k, total, keys)]
        new = [*old, (total + k, name(total + k))]
        assert got[("items", k)] == sorted([("-U", [k, _items(old)]), ("+U", [k, _items(new)])], key=json.dumps)


def _items(items: list[tuple[int, str]]) -> str:
    """ci/flink ItemsAgg's value: count | sum of x | per name prefix (Java's String order) the
    last item's ``x:name``."""
    last = {n[:n.index("-") + 1]: (x, n) for x, n in items}
    return "|".join([str(len(items)), str(sum(x for x, _ in items)),
                     *(f"{p}{x}:{n}" for p, (x, n) in sorted(last.items(), key=lambda e: e[0].encode("utf-16-be")))])


@pytest.mark.parametrize("form", ["convert", "rewrite"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_converted_and_rewritten_savepoints_restore_with_identical_output(restored: dict[tuple[str, str], Any],
                                                                          case: Path, form: str) -> None:
    assert _changelog(restored[(case.name, form)]) == _changelog(restored[(case.name, "original")])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_over_buffers_gaining_a_column_restore_in_the_evolved_job(restored: dict[tuple[str, str], Any],
                                                                  case: Path) -> None:
    refused = restored[(case.name, "original-v2")]
    assert not refused.ok and refused.exception.endswith("StateMigrationException")
    want = _with_note(_changelog(restored[(case.name, "original")]), case)
    assert _changelog(restored[(case.name, "migrated-v2")]) == want
