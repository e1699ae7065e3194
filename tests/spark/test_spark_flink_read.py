"""Spark reads keyed state of real Flink savepoints as DataFrames, by key-group ranges, with the
same rows as the local reader (engine.read_flink_state_table)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statemorph.engine import read_flink_state_table
from statemorph.engine.spark import read_state
from statemorph.errors import UsageError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.splits import key_group_splits

pytestmark = pytest.mark.spark
SAVEPOINTS = Path(__file__).resolve().parents[1] / "data" / "flink_savepoints"
CASES = {
    "kinds-hashmap-p2-files-snappy": ["events", "count", "last", "recent", "totals", "ttl_events", "ttl_recent"],
    "kinds-rocksdb-p2-rowkey": ["events", "recent", "totals", "ttl_totals"],
    "kinds-rocksdb-p1-files-mp256": ["count", "recent", "totals"],
}


def _uid(case: str) -> str:
    return json.loads((SAVEPOINTS / case / "spec.json").read_text())["uid"]


def _canon(rows: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=repr) for r in rows)


@pytest.mark.parametrize("case", sorted(CASES))
def test_dataframe_equals_local_table(spark, case):
    path = SAVEPOINTS / case / "savepoint"
    for state in CASES[case]:
        local = read_flink_state_table(path, _uid(case), state)
        df = read_state(spark, path, state, operator=_uid(case), flatten=False, tasks=5)
        assert df.columns == local.schema.names
        got = df.toArrow()
        assert got.num_rows == local.num_rows > 0
        assert _canon(got.to_pylist()) == _canon(local.to_pylist()), (case, state)


def test_flatten_puts_row_fields_in_columns(spark):
    path = SAVEPOINTS / "kinds-rocksdb-p2-rowkey" / "savepoint"
    df = read_state(spark, path, "events", operator="kinds")
    assert df.columns == ["key_group", "key", "namespace", "f0", "f1"]
    local = {json.dumps(r["key"], sort_keys=True): r["value"] for r in
             read_flink_state_table(path, "kinds", "events").to_pylist()}
    for r in df.collect():
        d = r.asDict(recursive=True)
        assert local[json.dumps(d["key"], sort_keys=True)] == {"f0": d["f0"], "f1": d["f1"]}


def test_a_flink_savepoint_needs_the_operator(spark):
    with pytest.raises(UsageError, match="name the operator"):
        read_state(spark, SAVEPOINTS / "kinds-hashmap-p1" / "savepoint", "count")


@pytest.mark.parametrize("case", ["kinds-hashmap-p2-files-snappy", "kinds-rocksdb-p1-files-mp256", "events-hashmap-p1"])
@pytest.mark.parametrize("tasks", [1, 3, 7, 1000])
def test_splits_cover_every_key_group_once(case, tasks):
    sp = FlinkSavepoint(SAVEPOINTS / case / "savepoint")
    op = sp.operator(_uid(case))
    splits = key_group_splits(op, tasks)
    groups = [g for s in splits for g in s.key_groups]
    assert len(groups) == len(set(groups))
    present = set()
    for st in op.subtasks:
        h = st.managed_keyed
        present |= {h.start_key_group + i for i, o in enumerate(h.offsets) if o}
        inside = [s for s in splits if s.subtask == st.index]
        assert all(s.key_groups.start >= h.key_groups.start and s.key_groups.stop <= h.key_groups.stop
                   for s in inside)
    assert present <= set(groups)
    assert len(splits) <= tasks + len(op.subtasks)
    assert sum(s.bytes for s in splits) > 0


def test_savepoint_metadata_lists_every_state(spark):
    from statemorph.engine import flink_savepoint_metadata
    from statemorph.engine.spark import savepoint_metadata

    path = SAVEPOINTS / "kinds-rocksdb-p2-rowkey" / "savepoint"
    local = flink_savepoint_metadata(path)
    rows = {r["state"]: r for r in local.to_pylist()}
    assert set(rows) == {"events", "count", "last", "recent", "totals", "ttl_count", "ttl_events", "ttl_recent",
                         "ttl_totals", "_timer_state/processing_user-timers", "_timer_state/event_user-timers"}
    assert rows["totals"]["kind"] == "map" and rows["totals"]["user_key_type"] == "STRING"
    assert rows["events"]["entries"] == read_flink_state_table(path, "kinds", "events").num_rows
    assert {(r["operator_uid"], r["max_parallelism"], r["parallelism"]) for r in rows.values()} == {("kinds", 128, 2)}
    df = savepoint_metadata(spark, path)
    assert sorted(json.dumps(r.asDict(), sort_keys=True) for r in df.collect()) == \
        sorted(json.dumps(r, sort_keys=True) for r in local.to_pylist())


@pytest.mark.parametrize("case", ["windows-hashmap-p2", "windows-rocksdb-p2"])
def test_window_state_and_window_timers_with_the_window_columns(spark, case):
    """Window contents, trigger state, the merging-window set and the window timers of a real
    Flink window job (ci/flink WindowJobs): the local reader's rows, ``window_start`` /
    ``window_end`` beside the raw namespace for time windows."""
    path = SAVEPOINTS / case / "savepoint"
    for op, state in [("tumble", "window-contents"), ("tumble", "_timer_state/event_window-timers"),
                      ("session", "window-contents"), ("session", "merging-window-set"), ("count", "count")]:
        local = read_flink_state_table(path, op, state)
        df = read_state(spark, path, state, operator=op, flatten=False, tasks=3)
        assert df.columns == local.schema.names, (op, state)
        assert ("window_start" in df.columns) == (op != "count" and state != "merging-window-set")
        got = df.toArrow()
        assert got.num_rows == local.num_rows > 0
        assert _canon(got.to_pylist()) == _canon(local.to_pylist()), (case, op, state)


@pytest.mark.parametrize("case", ["sql-windows-hashmap-p2", "sql-windows-rocksdb-p2"])
def test_flink_sql_window_tvf_state_has_its_window_end(spark, case):
    """A Flink SQL window-TVF aggregate (ci/flink SqlWindowJobs) keeps its accumulators and timers
    under the window's end, a BIGINT namespace: on Spark as locally, ``window_end`` beside it."""
    path = SAVEPOINTS / case / "savepoint"
    for state in ("window-aggs", "_timer_state/event_window-timers"):
        local = read_flink_state_table(path, "11_global-window-aggregate", state)
        df = read_state(spark, path, state, operator="11_global-window-aggregate", flatten=False, tasks=3)
        assert df.columns == local.schema.names and "window_end" in df.columns, state
        assert {r["window_end"] for r in df.select("window_end").collect()} == {1_700_000_100_000}
        assert _canon(df.toArrow().to_pylist()) == _canon(local.to_pylist()), state
