"""Window state through statemorph and back into real Flink, which must fire every window with
the right contents.

The committed cases (tests/data/flink_savepoints/windows-*, ci/flink WindowJobs) hold open windows:
a tumbling window with a POJO accumulator, session windows with their merging-window sets and a
global window with a count trigger, hashmap and RocksDB, parallelism 2. The restore checker sends
one more record per key and ends its input, so every window fires once with what was restored plus
that record; expected.json lists those firings, computed by the job from its records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from savepoint.flink.flink_cases import case_spec, sql_window_cases, window_cases

from statemorph.engine import convert_savepoint
from statemorph.engine.bootstrap import StateData, write_flink_savepoint
from statemorph.engine.flink import plan_flink_savepoint, read_flink_state_table
from statemorph.engine.rescale import rescale_flink_savepoint
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators
from statemorph.schema_file import descriptors_for_operators, load_schema
from statemorph.serializers import (
    CountWindowSerializer,
    GlobalWindow,
    GlobalWindowSerializer,
    IntSerializer,
    LongSerializer,
    TableTimeWindowSerializer,
    TimeWindowSerializer,
    TupleSerializer,
)
from statemorph.typeutils import write_versioned_snapshot

pytestmark = pytest.mark.java

CASES = window_cases()
OPERATORS = ("tumble", "session", "count")
TIMERS = "_timer_state/event_window-timers"
T0, MINUTE, GAP = 1_700_000_040_000, 60_000, 600_000
#: The accumulator gaining a field: what version 2 of WindowTotals is, as a schema file says it.
SCHEMA_V2 = """\
[operators.tumble.states.window-contents]
serializer = "pojo"
type = "ROW<`count` BIGINT NOT NULL, last STRING, `sum` BIGINT NOT NULL, `max` BIGINT NOT NULL>"
"""


def _expected(case: Path, real_flink: ModuleType, *, max_field: bool = False) -> list[dict[str, Any]]:
    entries = real_flink.expected_entries(case)
    if max_field:  # version 2's added primitive long, left at 0 by the migration
        for e in entries:
            if e["state"] == "tumble":
                e["value"]["acc"] = dict(sorted({**e["value"]["acc"], "max": 0}.items()))
    return entries


def _restore(real_flink: ModuleType, items: list[tuple[Path, Path]], pojo: int = 1) -> list[list[dict[str, Any]]]:
    out = []
    for (savepoint, _), result in zip(items, real_flink.window_restore(items, pojo=pojo), strict=True):
        assert result.ok, f"Flink refused {savepoint}: {result.exception}: {result.message}"
        out.append(result.entries)
    return out


def test_flink_writes_the_window_bytes_statemorph_writes(real_flink: ModuleType) -> None:
    """Every window serializer against Flink's own: getLength(), snapshot bytes, window bytes
    (including Flink SQL's TimeWindow and CountWindow, which no committed savepoint holds)."""
    vectors = real_flink.window_vectors()
    sers = {"TimeWindow": TimeWindowSerializer(), "GlobalWindow": GlobalWindowSerializer(),
            "TableTimeWindow": TableTimeWindowSerializer(), "CountWindow": CountWindowSerializer()}
    for name, ser in sers.items():
        v = vectors[name]
        assert ser.get_length() == v["length"], name
        assert write_versioned_snapshot(ser.snapshot_configuration()).hex() == v["snapshot"], name
        for value in v["values"]:
            if name == "GlobalWindow":
                assert ser.to_bytes(GlobalWindow).hex() == value
                continue
            *window, data = value
            assert ser.to_bytes(window if len(window) == 2 else window[0]).hex() == data, (name, window)
            assert ser.from_bytes(bytes.fromhex(data)) == tuple(window), (name, window)


def test_the_committed_savepoints_fire_their_windows(real_flink: ModuleType) -> None:
    got = _restore(real_flink, [(c / "savepoint", c / "spec.json") for c in CASES])
    for case, entries in zip(CASES, got, strict=True):
        assert entries == _expected(case, real_flink), case.name
        assert {e["state"] for e in entries} == set(OPERATORS)


def test_converted_and_rescaled_savepoints_fire_the_same_windows(real_flink: ModuleType, tmp_path: Path) -> None:
    """Flink → Parquet form → Flink, and every window operator rewritten to 256 key groups: real
    Flink restores both and fires every window with the same contents."""
    items, wants = [], []
    for case in CASES:
        pq_dir, back = tmp_path / f"{case.name}-parquet", tmp_path / f"{case.name}-back"
        convert_savepoint(case / "savepoint", pq_dir)
        convert_savepoint(pq_dir, back)
        items.append((back, case / "spec.json"))
        wants.append(_expected(case, real_flink))
        src = case / "savepoint"
        for k, op in enumerate(OPERATORS):
            dst = tmp_path / f"{case.name}-mp256-{k}"
            rescale_flink_savepoint(src, dst, op, max_parallelism=256)
            src = dst
        spec = tmp_path / f"{case.name}-mp256.json"
        spec.write_text(json.dumps({**case_spec(case), "max_parallelism": 256}), encoding="utf-8")
        assert {o.max_parallelism for o in FlinkSavepoint(src).operators if o.uid in OPERATORS} == {256}
        items.append((src, spec))
        wants.append(_expected(case, real_flink))
    for (savepoint, _), entries, want in zip(items, _restore(real_flink, items), wants, strict=True):
        assert entries == want, savepoint.name


def test_migrated_accumulator_fires_with_the_new_class(real_flink: ModuleType, tmp_path: Path) -> None:
    """The POJO accumulator gains a field: ``statemorph check`` says migrate, ``statemorph migrate``
    rewrites the tumbling windows' contents, and real Flink restores the result with version 2 of
    the class as it is (nothing left to migrate) and fires every window with the old contents,
    the probe record and the new field at 0."""
    schema = tmp_path / "totals-v2.toml"
    schema.write_text(SCHEMA_V2, encoding="utf-8")
    items = []
    for case in CASES:
        cmd = [sys.executable, "-m", "statemorph"]
        check = subprocess.run([*cmd, "check", str(case / "savepoint"), "--schema", str(schema)],
                               capture_output=True, text=True, timeout=300)
        assert check.returncode == 1 and "fields added: max" in check.stdout, (check.stdout, check.stderr)
        out = tmp_path / f"{case.name}-v2"
        run = subprocess.run([*cmd, "migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(out)],
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, (run.stdout, run.stderr)
        assert f"{case_spec(case)['keys']} values migrated" in run.stdout
        again = plan_flink_savepoint(out, descriptors_for_operators(load_schema(schema),
                                                                   describe_operators(FlinkSavepoint(out))))
        assert [s.action for s in again.states] == ["copy"], again.summary
        items.append((out, case / "spec.json"))
    for case, entries in zip(CASES, _restore(real_flink, items, pojo=2), strict=True):
        assert entries == _expected(case, real_flink, max_field=True), case.name


def _records(case: Path) -> dict[int, list[int]]:
    """The window job's records per key (record j: key index j % keys), in key-index order."""
    s = case_spec(case)
    keys, total = s["keys"], s["keys"] * s["records_per_key"]
    return {i * 7919 - 40000: list(range(i, total, keys)) for i in range(keys)}


def _window_tables(case: Path, timers: bool = False) -> dict[str, dict[str, StateData]]:
    """The window job's state at its savepoint, built here from its records (not read from a
    savepoint): per operator, the states to bootstrap, with ``timers`` also the time windows'
    end-of-window timers (a session's in its merged window). The POJO serializer is the job's own
    (from the committed savepoint's snapshot), everything else is statemorph's."""
    records = _records(case)
    tw, gw, long_ = TimeWindowSerializer(), GlobalWindowSerializer(), LongSerializer()
    op = next(o for o in describe_operators(FlinkSavepoint(case / "savepoint")) if o.ident == "tumble")
    totals = op.states["window-contents"].snapshot("value_serializer").restore_serializer()

    def table(rows: list[dict[str, Any]]) -> pa.Table:
        return pa.Table.from_pylist(rows)

    tables = {
        "tumble": {"window-contents": StateData(table([
            {"key": k, "window_start": T0, "window_end": T0 + MINUTE,
             "value": {"count": len(js), "last": ("wé-" if js[-1] % 2 else "w-") + str(js[-1]), "sum": sum(js)}}
            for k, js in records.items()]), totals, kind="aggregating", namespace_serializer=tw)},
        "session": {
            "window-contents": StateData(table([
                {"key": k, "window_start": T0 + js[0], "window_end": T0 + js[0] + GAP, "value": sum(js)}
                for k, js in records.items()]), long_, kind="reducing", namespace_serializer=tw),
            "merging-window-set": StateData(table([
                {"key": k, "index": 0, "value": {"f0": {"start": T0 + js[0], "end": T0 + js[-1] + GAP},
                                                 "f1": {"start": T0 + js[0], "end": T0 + js[0] + GAP}}}
                for k, js in records.items()]), TupleSerializer([tw, tw]), kind="list")},
        "count": {
            "window-contents": StateData(table([{"key": k, "index": i, "value": j} for k, js in records.items()
                                                for i, j in enumerate(js)]), long_, kind="list",
                                         namespace_serializer=gw),
            "count": StateData(table([{"key": k, "value": len(js)} for k, js in records.items()]), long_,
                               kind="reducing", namespace_serializer=gw)},
    }
    if timers:
        spans = {"tumble": lambda js: (T0, T0 + MINUTE), "session": lambda js: (T0 + js[0], T0 + js[-1] + GAP)}
        for op, span in spans.items():
            tables[op][TIMERS] = StateData(table([
                {"key": k, "window_start": span(js)[0], "window_end": span(js)[1], "timestamp": span(js)[1] - 1}
                for k, js in records.items()]), None, kind="timers", namespace_serializer=tw)
    return tables


def _bootstrap(case: Path, dst: Path, timers: bool = False) -> Path:
    """Every window operator of :func:`_window_tables` bootstrapped, one operator after another,
    each added to the previous savepoint; the last savepoint."""
    base = None
    for k, (op, states) in enumerate(_window_tables(case, timers).items()):
        out = dst.with_name(f"{dst.name}-{k}")
        write_flink_savepoint(out, operator=op, key_serializer=IntSerializer(), states=states, parallelism=2,
                              base=base)
        base = out
    assert base is not None
    return base


def test_bootstrapped_windows_fire_in_real_flink(real_flink: ModuleType, tmp_path: Path) -> None:
    """Window contents, trigger state and merging-window sets written by the bootstrap from plain
    tables: real Flink restores them into both backends and fires every window as the job itself
    would have (the probe's record per key registers each window's timer again)."""
    base = _bootstrap(CASES[0], tmp_path / "bootstrap")
    got = _restore(real_flink, [(base, c / "spec.json") for c in CASES])
    for c, entries in zip(CASES, got, strict=True):
        assert entries == _expected(c, real_flink), c.name


def _fired_without_probe(real_flink: ModuleType, case: Path, probed: int) -> list[dict[str, Any]]:
    """What a restore whose probe reaches only the first ``probed`` keys fires: those keys'
    windows as expected.json has them; the other keys' time windows with their restored records
    alone (their timers fire them), and no count window (it has no timer: null)."""
    records = list(_records(case).items())
    probed_keys = {k for k, _ in records[:probed]}
    out = [e for e in _expected(case, real_flink) if e["key"] in probed_keys]
    for k, js in records[probed:]:
        last = js[-1]
        acc = {"count": len(js), "last": ("wé-" if last % 2 else "w-") + str(last), "sum": sum(js)}
        out.append({"key": k, "state": "tumble", "value": {"window": [T0, T0 + MINUTE], "acc": acc}})
        out.append({"key": k, "state": "session",
                    "value": {"window": [T0 + js[0], T0 + js[-1] + GAP], "sum": sum(js)}})
        out.append({"key": k, "state": "count", "value": None})  # a key's lines list every operator
    return out


def _by_key(entries: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(e, sort_keys=True) for e in entries)


def test_bootstrapped_window_timers_fire_without_new_records(real_flink: ModuleType, tmp_path: Path) -> None:
    """The time windows' end-of-window timers written by the bootstrap (``kind="timers"``, in the
    windows' namespace): the restore's probe reaches only half the keys, and real Flink fires the
    other keys' tumbling and session windows from the restored timers alone, as it does for the
    savepoint Flink took; bootstrapped without the timers, those windows never fire."""
    case = CASES[0]
    probed = case_spec(case)["keys"] // 2
    with_timers = _bootstrap(case, tmp_path / "timers", timers=True)
    without = _bootstrap(case, tmp_path / "plain")
    items = []
    for c in CASES:
        spec = tmp_path / f"{c.name}-half.json"
        spec.write_text(json.dumps({**case_spec(c), "window_probe_keys": probed}), encoding="utf-8")
        items += [(c / "savepoint", spec), (with_timers, spec), (without, spec)]
    timers = read_flink_state_table(with_timers, "session", TIMERS).to_pylist()
    assert sorted((r["key"], r["timestamp"], r["window_end"]) for r in timers) == \
        sorted((k, T0 + js[-1] + GAP - 1, T0 + js[-1] + GAP) for k, js in _records(case).items())
    got = _restore(real_flink, items)
    for k, entries in enumerate(got):
        want = _fired_without_probe(real_flink, CASES[k // 3], probed)
        if k % 3 == 2:
            probed_keys = {key for key, _ in list(_records(case).items())[:probed]}
            want = [e for e in want if e["key"] in probed_keys]
        assert _by_key(entries) == _by_key(want), items[k]


def test_flink_sql_windows_fire_after_a_convert_round_trip(real_flink: ModuleType, tmp_path: Path) -> None:
    """Flink SQL window aggregates (group window: SQL TimeWindow namespace; window TVF: BIGINT
    window-end namespace), as Flink took them and through the Parquet form and back: the restored
    job fires every window with the old records and the probe's."""
    items, wants = [], []
    for case in sql_window_cases():
        pq_dir, back = tmp_path / f"{case.name}-parquet", tmp_path / f"{case.name}-back"
        convert_savepoint(case / "savepoint", pq_dir)
        convert_savepoint(pq_dir, back)
        for sp in (case / "savepoint", back):
            items.append((sp, case / "spec.json"))
            wants.append(real_flink.expected_entries(case))
    results = real_flink.sql_window_restore(items)
    for (savepoint, _), result, want in zip(items, results, wants, strict=True):
        assert result.ok, f"Flink refused {savepoint}: {result.exception}: {result.message}"
        assert result.entries == want, savepoint
        assert {e["state"] for e in result.entries} == {"group", "tvf"}


def test_bootstrapped_flink_sql_windows_fire_in_real_flink(real_flink: ModuleType, tmp_path: Path) -> None:
    """Both SQL window operators bootstrapped from the tables read from Flink's savepoint, their
    windows taken from the window columns alone (the raw namespace dropped): the group window's
    ``window_start`` / ``window_end``, the window TVF's ``window_end`` (its ``BIGINT`` namespace).
    Real Flink restores them in place of Flink's own and fires every window with the old count and
    sum plus the probe's record, as from the savepoint Flink took."""
    from statemorph.engine.modify import modify_flink_savepoint

    namespaces = {"4_group-window-aggregate": TableTimeWindowSerializer(),
                  "11_global-window-aggregate": LongSerializer()}
    items, wants = [], []
    for case in sql_window_cases():
        src = case / "savepoint"
        ops = {o.ident: o for o in describe_operators(FlinkSavepoint(src))}
        base = tmp_path / f"{case.name}-base"
        modify_flink_savepoint(src, base, remove=list(namespaces))
        for uid, ns in namespaces.items():
            def table(state: str) -> pa.Table:
                t = read_flink_state_table(src, uid, state)  # noqa: B023
                assert "window_end" in t.schema.names
                return t.drop_columns(["key_group", "namespace"])

            value = ops[uid].states["window-aggs"].snapshot("value_serializer").restore_serializer()
            dst = tmp_path / f"{case.name}-{uid}"
            write_flink_savepoint(dst, operator=uid, key_serializer=ops[uid].key_snapshot().restore_serializer(),
                                  parallelism=2, base=base, states={
                                      "window-aggs": StateData(table("window-aggs"), value, namespace_serializer=ns),
                                      TIMERS: StateData(table(TIMERS), None, kind="timers", namespace_serializer=ns)})
            base = dst
        items.append((base, case / "spec.json"))
        wants.append(real_flink.expected_entries(case))
    for (savepoint, _), result, want in zip(items, real_flink.sql_window_restore(items), wants, strict=True):
        assert result.ok, f"Flink refused {savepoint}: {result.exception}: {result.message}"
        assert result.entries == want, savepoint


#: Flink SQL's window accumulators after the queries also select MAX(x) (spec sql_window_version 2):
#: MAX's accumulator joins the end of the row. RowData snapshots record no field names (f0, f1 ...).
SQL_EVOLVED = "ROW<f0 BIGINT, f1 BIGINT, top BIGINT>"
SQL_SCHEMA = "".join(f'[operators."{uid}".states.window-aggs]\ntype = "{SQL_EVOLVED}"\n'
                     for uid in ("4_group-window-aggregate", "11_global-window-aggregate"))


def test_flink_sql_window_accumulators_migrated_fire_in_the_evolved_job(real_flink: ModuleType,
                                                                        tmp_path: Path) -> None:
    """The SQL window job evolves (both aggregations also select ``MAX(x)``): real Flink refuses
    the old savepoint (the accumulator row changed), and restores the one ``statemorph migrate``
    writes; every window fires with the old count and sum plus the probe, and MAX over what came
    after the restore (the migrated accumulators hold a null MAX: no value yet)."""
    schema = tmp_path / "sql-windows-v2.toml"
    schema.write_text(SQL_SCHEMA, encoding="utf-8")
    items, wants = [], []
    for case in sql_window_cases():
        out = tmp_path / f"{case.name}-v2"
        run = subprocess.run([sys.executable, "-m", "statemorph", "migrate", str(case / "savepoint"), "--schema",
                              str(schema), "--out", str(out)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, (run.stdout, run.stderr)
        assert "16 values migrated" in run.stdout
        spec = tmp_path / f"{case.name}-v2.json"
        spec.write_text(json.dumps({**case_spec(case), "sql_window_version": 2}), encoding="utf-8")
        total = case_spec(case)["keys"] * case_spec(case)["records_per_key"]
        want = real_flink.expected_entries(case)
        for e in want:
            e["value"]["top"] = total + e["key"]  # the probe record, the only one MAX has seen
        items += [(out, spec), (case / "savepoint", spec)]
        wants += [want, None]
    results = real_flink.sql_window_restore(items)
    for (savepoint, _), result, want in zip(items, results, wants, strict=True):
        if want is None:
            assert not result.ok and result.exception.endswith("StateMigrationException"), savepoint
            continue
        assert result.ok, f"Flink refused {savepoint}: {result.exception}: {result.message}"
        assert result.entries == want, savepoint
