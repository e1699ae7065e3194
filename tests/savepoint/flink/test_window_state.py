"""Window state of a real Flink job (ci/flink WindowJobs, committed under
tests/data/flink_savepoints/windows-*): inspected with its namespace types, read as tables with the
window decoded, and converted to the Parquet form and back byte for byte, without Flink.

The job (parallelism 2, hashmap and RocksDB) has three window operators over records ``j`` (key
index ``j % keys``, event time ``T0 + j``) and took its savepoint with every window open:

- ``tumble``: a one-minute tumbling window with an aggregate whose accumulator is a POJO
  (``window-contents``, aggregating state in the TimeWindow namespace, one event-time timer per window);
- ``session``: session windows reduced to a sum (``window-contents``, reducing, in the namespace of
  the session's state window, and ``merging-window-set``, a list of (window, state window) pairs);
- ``count``: a global window with a count trigger (``window-contents``, list, and the trigger's
  ``count``, reducing, both in the GlobalWindow namespace).

What the tables must hold is computed here from the spec, not read from the savepoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from savepoint.flink.flink_cases import case_spec, sql_window_cases, window_cases
from savepoint.flink.format_helpers import tree_bytes

from statemorph.engine import convert_savepoint
from statemorph.engine.bootstrap import StateData, write_flink_savepoint
from statemorph.engine.flink import inspect_flink_savepoint, read_flink_state_schema, read_flink_state_table
from statemorph.engine.local import read_state, read_state_table
from statemorph.errors import UsageError
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators
from statemorph.serializers import (
    GlobalWindowSerializer,
    IntSerializer,
    LongSerializer,
    StringSerializer,
    TimeWindowSerializer,
)
from statemorph.typeutils import write_versioned_snapshot

CASES = window_cases()
IDS = [c.name for c in CASES]
T0 = 1_700_000_040_000
MINUTE = 60_000
GAP = 600_000
TIME_WINDOW = "TIME WINDOW (start BIGINT, end BIGINT)"
TIMERS = "_timer_state/event_window-timers"


def _records(case: Path) -> dict[int, list[int]]:
    """Key → the record numbers the job sent it before the savepoint, in order."""
    s = case_spec(case)
    keys, total = s["keys"], s["keys"] * s["records_per_key"]
    return {i * 7919 - 40000: list(range(i, total, keys)) for i in range(keys)}


def _name(j: int) -> str:
    return ("wé-" if j % 2 == 1 else "w-") + str(j)


def _rows(case: Path, operator: str, state: str) -> list[dict[str, Any]]:
    table = read_flink_state_table(case / "savepoint", operator, state)
    return sorted(table.to_pylist(), key=lambda r: (r["key"], r.get("index", 0)))


def test_the_committed_cases_are_the_window_job() -> None:
    assert {(case_spec(c)["backend"], case_spec(c)["parallelism"]) for c in CASES} == {("hashmap", 2), ("rocksdb", 2)}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inspect_names_every_window_state_and_its_namespace(case: Path) -> None:
    info = inspect_flink_savepoint(case / "savepoint")
    got = {(op["uid"], st["name"]): (st["kind"], st["namespace_type"], st["value_type"], st["entries"])
           for op in info["operators"] if op["uid"] in ("tumble", "session", "count") for st in op["states"]}
    keys = case_spec(case)["keys"]
    assert got == {
        ("tumble", "window-contents"): (
            "aggregating", TIME_WINDOW, "POJO savepoints.pojo.WindowTotals ROW<`count` BIGINT, `last` STRING, "
                                        "`sum` BIGINT>", keys),
        ("tumble", TIMERS): ("timers", TIME_WINDOW, "TimerSerializerSnapshot", keys),
        ("tumble", "_timer_state/processing_window-timers"): ("timers", TIME_WINDOW, "TimerSerializerSnapshot", 0),
        ("session", "window-contents"): ("reducing", TIME_WINDOW, "BIGINT", keys),
        ("session", "merging-window-set"): ("list", "VOID (not windowed)",
                                            f"ROW<`f0` {TIME_WINDOW}, `f1` {TIME_WINDOW}>", keys),
        ("session", TIMERS): ("timers", TIME_WINDOW, "TimerSerializerSnapshot", keys),
        ("session", "_timer_state/processing_window-timers"): ("timers", TIME_WINDOW, "TimerSerializerSnapshot", 0),
        ("count", "window-contents"): ("list", "GLOBAL WINDOW", "BIGINT", keys),  # a list is one entry
        ("count", "count"): ("reducing", "GLOBAL WINDOW", "BIGINT", keys),
        ("count", TIMERS): ("timers", "GLOBAL WINDOW", "TimerSerializerSnapshot", 0),
        ("count", "_timer_state/processing_window-timers"): ("timers", "GLOBAL WINDOW", "TimerSerializerSnapshot", 0),
    }


def test_cli_inspect_verbose_shows_the_namespace_type() -> None:
    run = subprocess.run([sys.executable, "-m", "statemorph", "inspect", "-v", str(CASES[0] / "savepoint")],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"namespace       {TIME_WINDOW}" in run.stdout and "namespace       GLOBAL WINDOW" in run.stdout


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_flink_writes_the_window_snapshots_statemorph_writes(case: Path) -> None:
    """The namespace snapshots in Flink's header are byte for byte the ones statemorph writes."""
    ops = {o.ident: o for o in describe_operators(FlinkSavepoint(case / "savepoint"))}
    assert ops["tumble"].states["window-contents"].snapshot_bytes("namespace_serializer") == \
        write_versioned_snapshot(TimeWindowSerializer().snapshot_configuration())
    assert ops["count"].states["count"].snapshot_bytes("namespace_serializer") == \
        write_versioned_snapshot(GlobalWindowSerializer().snapshot_configuration())


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_tumbling_window_contents_read_as_a_table_with_the_window(case: Path) -> None:
    rows = _rows(case, "tumble", "window-contents")
    want = []
    for key, js in sorted(_records(case).items()):
        want.append({"key": key, "window_start": T0, "window_end": T0 + MINUTE,
                     "namespace": TimeWindowSerializer().to_bytes((T0, T0 + MINUTE)),
                     "value": {"count": len(js), "sum": sum(js), "last": _name(js[-1])}})
    assert [{k: r[k] for k in ("key", "window_start", "window_end", "namespace", "value")} for r in rows] == want
    schema = read_flink_state_schema(case / "savepoint", "tumble", "window-contents")
    assert schema.names == ["key_group", "key", "namespace", "window_start", "window_end", "value"]
    assert schema.field("window_start").type == pa.int64()


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_window_timers_read_as_a_table_with_the_window(case: Path) -> None:
    tumble = _rows(case, "tumble", TIMERS)
    assert [(r["key"], r["timestamp"], r["window_start"], r["window_end"]) for r in tumble] == \
        [(k, T0 + MINUTE - 1, T0, T0 + MINUTE) for k in sorted(_records(case))]
    session = _rows(case, "session", TIMERS)
    assert [(r["key"], r["timestamp"], r["window_start"], r["window_end"]) for r in session] == \
        [(k, T0 + js[-1] + GAP - 1, T0 + js[0], T0 + js[-1] + GAP) for k, js in sorted(_records(case).items())]
    assert read_flink_state_table(case / "savepoint", "count", TIMERS).num_rows == 0


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_session_windows_and_their_merging_window_set(case: Path) -> None:
    """The merged session [first, last + gap) maps to its state window, the first record's window,
    which is the namespace the session's sum is kept in."""
    records = sorted(_records(case).items())
    contents = _rows(case, "session", "window-contents")
    assert [(r["key"], r["window_start"], r["window_end"], r["value"]) for r in contents] == \
        [(k, T0 + js[0], T0 + js[0] + GAP, sum(js)) for k, js in records]
    merging = _rows(case, "session", "merging-window-set")
    assert [(r["key"], r["index"], r["namespace"], r["value"]) for r in merging] == [
        (k, 0, b"\x00", {"f0": {"start": T0 + js[0], "end": T0 + js[-1] + GAP},
                         "f1": {"start": T0 + js[0], "end": T0 + js[0] + GAP}}) for k, js in records]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_count_trigger_state_and_list_contents_in_the_global_window(case: Path) -> None:
    records = sorted(_records(case).items())
    count = _rows(case, "count", "count")
    assert [(r["key"], r["namespace"], r["value"]) for r in count] == [(k, b"\x00", len(js)) for k, js in records]
    assert "window_start" not in read_flink_state_schema(case / "savepoint", "count", "count").names
    contents = _rows(case, "count", "window-contents")
    assert [(r["key"], r["index"], r["value"]) for r in contents] == \
        [(k, i, j) for k, js in records for i, j in enumerate(js)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_convert_round_trip_is_byte_exact_and_the_parquet_form_has_the_windows(case: Path, tmp_path: Path) -> None:
    pq_dir, back = tmp_path / "parquet", tmp_path / "flink"
    convert_savepoint(case / "savepoint", pq_dir)
    convert_savepoint(pq_dir, back)
    if case_spec(case)["backend"] == "rocksdb":
        assert tree_bytes(back) == tree_bytes(case / "savepoint")
    for op, state in (("tumble", "window-contents"), ("session", "window-contents"), ("count", "count")):
        before, after = (read_flink_state_table(p, op, state, decode=False) for p in (case / "savepoint", back))
        assert sorted(map(_hashable, before.to_pylist())) == sorted(map(_hashable, after.to_pylist()))
    typed = pa.Table.from_batches(list(read_state(pq_dir, "tumble/window-contents")))
    assert typed.schema.names == ["key", "namespace", "window_start", "window_end", "count", "last", "sum"]
    assert set(typed.column("window_start").to_pylist()) == {T0}
    meta = json.loads((pq_dir / "_metadata.json").read_text(encoding="utf-8"))
    timers = next(s for s in meta["states"] if s["name"] == f"tumble/{TIMERS}")
    assert timers["namespace_serializer"], "the Parquet form records the timers' namespace serializer"
    typed_timers = read_state_table(pq_dir, f"tumble/{TIMERS}")
    assert typed_timers.schema.names == ["key", "namespace", "window_start", "window_end", "timestamp"]
    flink_timers = read_flink_state_table(case / "savepoint", "tumble", TIMERS).drop_columns(["key_group"])
    assert sorted(map(_hashable, typed_timers.to_pylist())) == sorted(map(_hashable, flink_timers.to_pylist()))


def _hashable(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted(row.items()))


def _canon(rows: list[dict[str, Any]]) -> list[str]:
    """Rows (nested rows too) in a canonical, sortable form."""
    return sorted(json.dumps(r, sort_keys=True, default=repr) for r in rows)


def test_window_state_read_as_tables_bootstraps_back_to_the_same_entries(tmp_path: Path) -> None:
    """The tables read from the savepoint (raw namespace beside the window columns) written back
    by the bootstrap hold the same entries, the window timers too (a timer queue: ``kind="timers"``,
    its header Flink's own bytes); the windows come from window_start / window_end, the
    global window's namespace from the raw column."""
    case = CASES[0]
    src = case / "savepoint"
    ops = {o.ident: o for o in describe_operators(FlinkSavepoint(src))}
    value = ops["tumble"].states["window-contents"].snapshot("value_serializer").restore_serializer()
    dst = tmp_path / "tumble"
    write_flink_savepoint(dst, operator="tumble", key_serializer=IntSerializer(), parallelism=2, states={
        "window-contents": StateData(read_flink_state_table(src, "tumble", "window-contents"), value,
                                     kind="aggregating", namespace_serializer=TimeWindowSerializer()),
        TIMERS: StateData(read_flink_state_table(src, "tumble", TIMERS), None, kind="timers",
                          namespace_serializer=TimeWindowSerializer())})
    headers = [{m.name: m.serializer("VALUE_SERIALIZER").raw for m in o.header.states}
               for p in (src, dst) for o in describe_operators(FlinkSavepoint(p)) if o.ident == "tumble"]
    assert headers[0][TIMERS] == headers[1][TIMERS]
    count = tmp_path / "count"
    write_flink_savepoint(count, operator="count", key_serializer=IntSerializer(), parallelism=2, states={
        "count": StateData(read_flink_state_table(src, "count", "count"), LongSerializer(), kind="reducing",
                           namespace_serializer=GlobalWindowSerializer())})
    for path, op, state in ((dst, "tumble", "window-contents"), (dst, "tumble", TIMERS), (count, "count", "count")):
        before, after = (read_flink_state_table(p, op, state).to_pylist() for p in (src, path))
        assert sorted(map(_hashable, before)) == sorted(map(_hashable, after)), (op, state)
    assert inspect_flink_savepoint(dst)["operators"][0]["states"][0]["namespace_type"] == TIME_WINDOW


@pytest.mark.parametrize(("data", "namespace", "message"), [
    ({"key": [1], "value": [2]}, TimeWindowSerializer(), "'window_start', 'window_end', which the data lacks"),
    ({"key": [1], "value": [2], "window_start": [0], "window_end": [None]}, TimeWindowSerializer(),
     "'window_end' has nulls"),
    ({"key": [1], "value": [2], "namespace": [b"\x00\x01"]}, GlobalWindowSerializer(), "of 1 bytes"),
    ({"key": [1], "value": [2], "namespace": ["a"]}, StringSerializer(), "fixed length"),
])
def test_bootstrapping_window_state_refuses_what_has_no_window(tmp_path: Path, data: dict[str, Any],
                                                                namespace: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        write_flink_savepoint(tmp_path / "out", operator="op", key_serializer=IntSerializer(), states={
            "s": StateData(pa.table(data), LongSerializer(), kind="reducing", namespace_serializer=namespace)})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("name", "data", "value", "message"), [
    ("window-timers", {"key": [1], "timestamp": [5]}, None, "Flink names timer queues"),
    (TIMERS, {"key": [1], "timestamp": [5]}, LongSerializer(), "has no value"),
    (TIMERS, {"key": [1]}, None, "need their time, the column 'timestamp'"),
    (TIMERS, {"key": [1], "timestamp": [None]}, None, "'timestamp' has nulls"),
    ("s", {"key": [1], "value": [2]}, None, "needs its value serializer"),
])
def test_bootstrapping_timers_refuses_what_is_no_timer_queue(tmp_path: Path, name: str, data: dict[str, Any],
                                                               value: Any, message: str) -> None:
    data = {**data, "window_start": [0], "window_end": [10]}
    kind = "reducing" if name == "s" else "timers"
    with pytest.raises(UsageError, match=message):
        write_flink_savepoint(tmp_path / "out", operator="op", key_serializer=IntSerializer(), states={
            name: StateData(pa.table(data), value, kind=kind, namespace_serializer=TimeWindowSerializer())})
    assert not (tmp_path / "out").exists()


SQL_CASES = sql_window_cases()
GROUP, TVF = "4_group-window-aggregate", "11_global-window-aggregate"


@pytest.mark.parametrize("case", SQL_CASES, ids=[c.name for c in SQL_CASES])
def test_flink_sql_window_aggregates_read_as_tables(case: Path) -> None:
    """Flink SQL (ci/flink SqlWindowJobs, a one-minute TUMBLE counting and summing each key's
    records): the group-window operator keeps its accumulators and timers in Flink SQL's TimeWindow
    namespace (window columns); the window-TVF operator under the window's end, a BIGINT namespace."""
    info = inspect_flink_savepoint(case / "savepoint")
    types = {(op["uid"], st["name"]): st["namespace_type"] for op in info["operators"] for st in op["states"]}
    assert types[(GROUP, "window-aggs")] == types[(GROUP, TIMERS)] == "SQL TIME WINDOW (start BIGINT, end BIGINT)"
    assert types[(TVF, "window-aggs")] == types[(TVF, TIMERS)] == "BIGINT"
    s = case_spec(case)
    keys, total = s["keys"], s["keys"] * s["records_per_key"]
    want = sorted((k, sum(range(k, total, keys))) for k in range(keys))
    group = read_flink_state_table(case / "savepoint", GROUP, "window-aggs").to_pylist()
    assert sorted((r["key"]["f0"], r["value"]["f1"]) for r in group) == want
    assert {(r["window_start"], r["window_end"], r["value"]["f0"]) for r in group} == \
        {(T0, T0 + MINUTE, s["records_per_key"])}
    timers = read_flink_state_table(case / "savepoint", GROUP, TIMERS).to_pylist()
    assert {(r["timestamp"], r["window_start"], r["window_end"]) for r in timers} == \
        {(T0 + MINUTE - 1, T0, T0 + MINUTE)}
    tvf = read_flink_state_table(case / "savepoint", TVF, "window-aggs")
    assert tvf.schema.names == ["key_group", "key", "namespace", "window_end", "value"]
    assert sorted((r["key"]["f0"], r["value"]["f1"]) for r in tvf.to_pylist()) == want
    assert set(tvf.column("namespace").to_pylist()) == {LongSerializer().to_bytes(T0 + MINUTE)}
    assert set(tvf.column("window_end").to_pylist()) == {T0 + MINUTE}
    tvf_timers = read_flink_state_table(case / "savepoint", TVF, TIMERS).to_pylist()
    assert {(r["timestamp"], r["window_end"]) for r in tvf_timers} == {(T0 + MINUTE - 1, T0 + MINUTE)}


@pytest.mark.parametrize("case", SQL_CASES, ids=[c.name for c in SQL_CASES])
def test_flink_sql_window_tvf_state_converts_and_bootstraps_by_its_window_end(case: Path, tmp_path: Path) -> None:
    """The window-TVF operator's BIGINT namespace is ``window_end`` in the Parquet form's tables
    too (raw namespace beside it), and a bootstrap writes it back from ``window_end`` alone: the
    same entries, namespace bytes included, as Flink wrote."""
    src = case / "savepoint"
    pq_dir = tmp_path / "pq"
    convert_savepoint(src, pq_dir)
    flink = read_flink_state_table(src, TVF, "window-aggs")
    local = read_state_table(pq_dir, f"{TVF}/window-aggs", flatten=False)
    assert local.schema.names == ["key", "namespace", "window_end", "value"]
    assert _canon(local.to_pylist()) == _canon(flink.drop_columns(["key_group"]).to_pylist())
    op = next(o for o in describe_operators(FlinkSavepoint(src)) if o.ident == TVF)
    value = op.states["window-aggs"].snapshot("value_serializer").restore_serializer()
    dst = tmp_path / "tvf"
    write_flink_savepoint(dst, operator=TVF, key_serializer=op.key_snapshot().restore_serializer(), parallelism=2,
                          states={"window-aggs": StateData(local.drop_columns(["namespace"]), value,
                                                           namespace_serializer=LongSerializer())})
    again = read_flink_state_table(dst, TVF, "window-aggs")
    assert _canon(again.to_pylist()) == _canon(flink.to_pylist())
