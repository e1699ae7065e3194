"""Flink SQL Top-N, regular join and interval join state in real savepoints (ci/flink SqlJoinJobs,
tests/data/flink_savepoints/sql-joins-*): ``inspect`` prints Flink's type of every state, and each
printed type pasted into a schema file is a no-op (``check`` exit 0); every state reads as a table
locally and on Spark with what the job's records put there; ``statemorph migrate`` takes the rows
to the evolved queries' (a nullable column) and writes the very serializer snapshots Flink writes
for the evolved job, and a row used as a map key (the join's left rows, Top-N's sort key) cannot
gain one: refused by field. (Real Flink restoring all of it: test_sql_join_restore_real_flink.py.)"""

from __future__ import annotations

import contextlib
import datetime
import io
import json
from pathlib import Path
from typing import Any

import pytest
from savepoint.flink.flink_cases import sql_join_cases
from savepoint.flink.flink_sql_join_cases import (
    AGG,
    EVOLVE_SCHEMA,
    FAST,
    FAST_AGG,
    INTERVAL,
    JOIN,
    OPERATORS,
    OUTER,
    OUTER_AGG,
    PROC_INTERVAL,
    RANK,
    RANKED,
    RANKED_AGG,
    SORTED_MAP,
    TYPES,
    max_name,
    name,
    records,
)

from statemorph.bulk import encode
from statemorph.cli.main import main
from statemorph.engine import read_flink_state_table
from statemorph.errors import ExitCode
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators

CASES = sql_join_cases()
IDS = [c.name for c in CASES]
[V2] = sql_join_cases(version=2)
T0 = 1_700_000_040_000
TEN_MINUTES = 600_000
#: the processing-time interval join's bounds: 99 days * 37 (DAY intervals take two digits)
PROC_BOUND = 99 * 37 * 86_400_000


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def _inspected(case: Path) -> dict[tuple[str, str], dict[str, Any]]:
    status, out, _ = _cli("inspect", "--json", str(case / "savepoint"))
    assert status == 0
    return {(op["uid"], s["name"]): s for op in json.loads(out)["operators"] for s in op.get("states", [])
            if not s["name"].startswith("_timer_state")}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inspect_prints_flinks_type_of_every_state(case: Path) -> None:
    got = {k: (s["kind"], s["value_type"], s.get("user_key_type")) for k, s in _inspected(case).items()
           if k[0] in OPERATORS}
    assert got == TYPES


def test_flink_120_records_every_state_with_the_same_types_under_the_derived_ids() -> None:
    """Flink 1.20's savepoint of the job (``_metadata`` version 4: no uids): each operator, found
    by the ID Flink derives from its uid, holds every state with Flink 2.3's types; every state
    reads as a table."""
    from statemorph.savepoint.flink.operator_ids import operator_id

    [case] = sql_join_cases(flink="1.20.3")
    status, out, _ = _cli("inspect", "--json", str(case / "savepoint"))
    assert status == 0
    by_hash = {(op["uid_hash"], s["name"]): s for op in json.loads(out)["operators"] for s in op.get("states", [])}
    assert {k: (s["kind"], s["value_type"], s.get("user_key_type"))
            for k in TYPES for s in [by_hash[(operator_id(k[0]).hex(), k[1])]]} == TYPES
    for uid, state in TYPES:
        assert _read(case, uid, state), (uid, state)


def _paste(states: dict[tuple[str, str], dict[str, Any]], extra: dict[str, str] | None = None) -> str:
    """A schema file stating every state's printed types (value type; map key type as user_key_type)."""
    text = ""
    for (uid, state), s in states.items():
        text += f'[operators."{uid}".states."{state}"]\ntype = {json.dumps(s["value_type"])}\n'
        if s.get("user_key_type"):
            text += f'user_key_type = {json.dumps(s["user_key_type"])}\n'
        text += (extra or {}).get(state, "")
    return text


@pytest.mark.parametrize("case", [*CASES, V2], ids=[*IDS, V2.name])
def test_every_printed_type_pasted_into_a_schema_file_is_a_no_op(case: Path, tmp_path: Path) -> None:
    """Before: Top-N's ``ARRAY<ROW<...>>`` pasted exited 3 ("serializer changed from
    RowDataSerializer to RowSerializer": ``auto`` built a DataStream Row inside the ARRAY), the
    interval join's buffers could not be built (TIMESTAMP_LTZ has no DataStream serializer), and a
    map key type ``ROW<...>`` became a RowSerializer too."""
    states = {k: s for k, s in _inspected(case).items() if k[0] in OPERATORS}
    for extra in (None, {"data-state-with-append": 'serializer = "rowdata"\n'}):
        schema = tmp_path / "pasted.toml"
        schema.write_text(_paste(states, extra), encoding="utf-8")
        status, out, err = _cli("check", "--json", str(case / "savepoint"), "--schema", str(schema))
        assert status == 0, (out, err)
        actions = {(o["uid"], s["name"]): s["action"] for o in json.loads(out)["operators"] for s in o["states"]
                   if not s["name"].startswith("_timer_state")}
        # every state as it is (the retractable Top-N's sorted map too: its comparator unchanged)
        assert actions == dict.fromkeys(TYPES, "copy")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_statemorph_schema_writes_every_sql_state_and_round_trips(case: Path, tmp_path: Path) -> None:
    status, text, _ = _cli("schema", str(case / "savepoint"))
    assert status == 0 and "not written" not in text
    for (uid, state), (kind, value_type, _) in TYPES.items():
        assert f'[operators.{uid}.states.{state}]\nkind = "{kind}"' in text
        assert f"type = {json.dumps(value_type)}" in text
    schema = tmp_path / "current.toml"
    schema.write_text(text, encoding="utf-8")
    assert _cli("check", str(case / "savepoint"), "--schema", str(schema))[0] == 0


def _read(case: Path, uid: str, state: str) -> list[dict[str, Any]]:
    return read_flink_state_table(case / "savepoint", uid, state).to_pylist()


def _ts(j: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp((T0 + j) / 1000, datetime.timezone.utc)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_sql_state_reads_as_a_table_with_what_the_records_put_there(case: Path) -> None:
    old = records(case)
    # Top-N: per key, sort key (x) -> the rows of that x; the two largest x are kept
    rank = {(r["key"]["f0"], r["user_key"]["f0"]): r["value"] for r in _read(case, RANK, "data-state-with-append")}
    assert rank == {(k, x): [{"f0": k, "f1": x, "f2": name(x)}] for k, xs in old.items() for x in sorted(xs)[-2:]}
    # join, left: every (k, x) row counted once; right: the key's MAX(x) and MAX(name) row
    left = {(r["key"]["f0"], r["user_key"]["f0"], r["user_key"]["f1"]): r["value"]
            for r in _read(case, JOIN, "left-records")}
    assert left == {(k, k, x): 1 for k, xs in old.items() for x in xs}
    right = {r["key"]["f0"]: r["value"] for r in _read(case, JOIN, "right-records")}
    assert right == {k: {"f0": k, "f1": max(xs), "f2": max_name([name(x) for x in xs])} for k, xs in old.items()}
    acc = {r["key"]["f0"]: r["value"] for r in _read(case, AGG, "accState")}
    assert acc == {k: {"f0": max(xs), "f1": max_name([name(x) for x in xs])} for k, xs in old.items()}
    # interval join: per side, rowtime -> [(row, emitted)], and each side's cleanup time per key
    for side, keep in (("Left", lambda x: x % 3 == 0), ("Right", lambda x: x % 3 != 0)):
        cache = {(r["key"]["f0"], r["user_key"]): r["value"] for r in _read(case, INTERVAL, f"IntervalJoin{side}Cache")}
        assert {k: [e["f0"] for e in v] for k, v in cache.items()} == {
            (k, T0 + x): [{"f0": k, "f1": x, "f2": _ts(x)}] for k, xs in old.items() for x in xs if keep(x)}
        timers = _read(case, INTERVAL, f"IntervalJoin{side}TimerState")
        assert {r["key"]["f0"] for r in timers} == {k for k, xs in old.items() if any(keep(x) for x in xs)}
    # outer join: per key, (k, MIN(x), COUNT(*)) and how many right rows match it (its own record)
    outer = {r["user_key"]["f0"]: r["value"] for r in _read(case, OUTER, "left-records")}
    assert outer == {k: {"f0": {"f0": k, "f1": min(xs), "f2": len(xs)}, "f1": 1} for k, xs in old.items()}
    right = _read(case, OUTER, "right-records")
    assert sorted((r["user_key"]["f0"], r["value"]) for r in right) == sorted((x, 1) for xs in old.values() for x in xs)
    # Top-N over the sums (retractable: it keeps every row of the partition, MOD(k, 2), under its
    # sum, to rank again when one retracts) and, in Flink's SortedMapSerializer, each partition's
    # sums -> how many rows have that sum, in the comparator's order (ORDER BY the sum DESC)
    ranked = {(r["key"]["f0"], r["user_key"]["f0"]): r["value"] for r in _read(case, RANKED, "data-state")}
    assert ranked == {(k % 2, sum(xs)): [{"f0": k, "f1": sum(xs), "f2": max_name([name(x) for x in xs]), "f3": k % 2}]
                      for k, xs in old.items()}
    sorted_map = {r["key"]["f0"]: r["value"] for r in _read(case, RANKED, "sorted-map")}
    assert sorted_map == {g: [({"f0": s}, 1) for s in sorted((sum(xs) for k, xs in old.items() if k % 2 == g),
                                                              reverse=True)] for g in (0, 1)}
    fired = _read(case, INTERVAL, "_timer_state/event_user-timers")
    assert fired and all(T0 + TEN_MINUTES <= r["timestamp"] <= T0 + TEN_MINUTES + 100 for r in fired)
    # Top-N over the keys' maxima (UpdatableTopNFunction: the input's unique key is (g, k)): per
    # partition g the rows of its two largest MAX(x) only, each under its unique key with its
    # place among the rows of its sort key (1: the only one)
    fast = {(r["key"]["f0"], r["user_key"]["f0"], r["user_key"]["f1"]): r["value"]
            for r in _read(case, FAST, "data-state-with-update")}
    top = {k for g in (0, 1) for k in sorted((k for k in old if k % 2 == g), key=lambda k: -max(old[k]))[:2]}
    assert fast == {(k % 2, k % 2, k): {"f0": {"f0": k % 2, "f1": k, "f2": max(xs),
                                               "f3": max_name([name(x) for x in xs])}, "f1": 1}
                    for k, xs in old.items() if k in top}
    fast_acc = {(r["key"]["f0"], r["key"]["f1"]): r["value"] for r in _read(case, FAST_AGG, "accState")}
    assert fast_acc == {(k % 2, k): {"f0": max(xs), "f1": max_name([name(x) for x in xs])} for k, xs in old.items()}
    # the processing-time interval join: each side's rows under the time they arrived (the PROCTIME
    # column is not materialised: null), cleanup timers PROC_BOUND after the rows' arrival
    arrived = []
    for side, keep in (("Left", lambda x: x % 3 == 0), ("Right", lambda x: x % 3 != 0)):
        cache = _read(case, PROC_INTERVAL, f"IntervalJoin{side}Cache")
        assert sorted((r["key"]["f0"], e["f0"]["f1"], e["f0"]["f2"]) for r in cache for e in r["value"]) == \
            sorted((k, x, None) for k, xs in old.items() for x in xs if keep(x))
        arrived += [r["user_key"] for r in cache]
    timers = [r["timestamp"] for r in _read(case, PROC_INTERVAL, "_timer_state/processing_user-timers")]
    assert timers and min(arrived) + PROC_BOUND <= min(timers) and max(timers) <= max(arrived) + PROC_BOUND + 1000


def _value_snapshots(path: Path) -> dict[tuple[str, str], bytes]:
    return {(op.ident, name): st.snapshot_bytes("value_serializer")
            for op in describe_operators(FlinkSavepoint(path)) for name, st in op.states.items()
            if op.ident in OPERATORS and not name.startswith("_timer_state")}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_migrate_gives_every_kept_row_the_nullable_column_as_flink_does(case: Path, tmp_path: Path) -> None:
    schema = tmp_path / "evolve.toml"
    schema.write_text(EVOLVE_SCHEMA, encoding="utf-8")
    status, out, err = _cli("check", "--json", str(case / "savepoint"), "--schema", str(schema))
    assert status == 1, err
    actions = {(o["uid"], s["name"]): s["action"] for o in json.loads(out)["operators"] for s in o["states"]}
    migrated = {k for k, a in actions.items() if a == "migrate"}
    assert migrated == {(RANK, "data-state-with-append"), (JOIN, "right-records"), (AGG, "accState"),
                        (INTERVAL, "IntervalJoinLeftCache"), (INTERVAL, "IntervalJoinRightCache"),
                        (OUTER, "left-records"), (OUTER_AGG, "accState"), (RANKED, "data-state"),
                        (RANKED_AGG, "accState"), (FAST, "data-state-with-update"), (FAST_AGG, "accState"),
                        (PROC_INTERVAL, "IntervalJoinLeftCache"), (PROC_INTERVAL, "IntervalJoinRightCache")}
    dst = tmp_path / "v2"
    assert _cli("migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst))[0] == 0
    # the snapshots are the bytes Flink 2.3 writes for the evolved job (its own savepoint, V2)
    assert _value_snapshots(dst) == _value_snapshots(V2 / "savepoint")
    # (which record no field names: the rows read back as f0, f1, ...; the new column null)
    old = records(case)
    rank = read_flink_state_table(dst, RANK, "data-state-with-append").to_pylist()
    assert sorted(tuple(row.items()) for r in rank for row in r["value"]) == sorted(
        (("f0", k), ("f1", x), ("f2", name(x)), ("f3", None)) for k, xs in old.items() for x in sorted(xs)[-2:])
    got = read_flink_state_table(dst, INTERVAL, "IntervalJoinRightCache").to_pylist()
    assert sorted((e["f0"]["f1"], e["f0"]["f2"], e["f0"]["f3"]) for r in got for e in r["value"]) == sorted(
        (x, None, _ts(x)) for xs in old.values() for x in xs if x % 3)
    fast = read_flink_state_table(dst, FAST, "data-state-with-update").to_pylist()
    assert sorted((r["user_key"]["f1"], r["value"]["f0"]["f4"], r["value"]["f1"]) for r in fast) == sorted(
        (k, None, 1) for g in (0, 1) for k in sorted((k for k in old if k % 2 == g), key=lambda k: -max(old[k]))[:2])
    outer = read_flink_state_table(dst, OUTER, "left-records").to_pylist()
    assert sorted((r["value"]["f0"]["f1"], r["value"]["f0"]["f3"], r["value"]["f1"]) for r in outer) == sorted(
        (min(xs), None, 1) for xs in old.values())
    before = read_flink_state_table(case / "savepoint", JOIN, "left-records")
    assert read_flink_state_table(dst, JOIN, "left-records").equals(before)


@pytest.mark.parametrize(("uid", "state", "table"), [
    (JOIN, "left-records", 'type = "INT"\nuser_key_type = "ROW<`f0` INT, `f1` BIGINT, note STRING>"'),
    (RANK, "data-state-with-append",
     'type = "ARRAY<ROW<`f0` INT, `f1` BIGINT, `f2` STRING>>"\nuser_key_type = "ROW<`f0` BIGINT, note STRING>"'),
    (FAST, "data-state-with-update",
     'type = "ROW<`f0` ROW<`f0` INT, `f1` INT, `f2` BIGINT, `f3` STRING>, `f1` INT>"\n'
     'user_key_type = "ROW<`f0` INT, `f1` INT, note STRING>"'),
])
def test_a_row_used_as_a_map_key_cannot_gain_a_column(uid: str, state: str, table: str, tmp_path: Path) -> None:
    """The regular join keeps a side without a unique key as a map of row → count, Top-N its rows
    under their sort key, the updatable Top-N under their unique key: a key's bytes place it, so
    Flink migrates no map key. Refused, naming
    the state and the added field; nothing written."""
    schema = tmp_path / "bad.toml"
    schema.write_text(f"[operators.{uid}.states.{state}]\n{table}\n", encoding="utf-8")
    dst = tmp_path / "out"
    status, out, err = _cli("migrate", str(CASES[0] / "savepoint"), "--schema", str(schema), "--out", str(dst))
    assert status == ExitCode.INCOMPATIBLE, (out, err)
    assert f"{state} (map): incompatible: map keys: compatible after migration: row: added note" in out + err
    assert not dst.exists()


def _sorted_map_snapshot(case: Path) -> bytes:
    return _value_snapshots(case / "savepoint")[(RANKED, "sorted-map")]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_sorted_map_snapshot_and_values_are_written_back_byte_for_byte(case: Path) -> None:
    """Flink's SortedMapSerializerSnapshot: its Java-serialized comparator (Flink's generated
    ``StreamExecSortComparator$0``) is delimited by its whitelist and kept verbatim, its key and
    value snapshots nested after it; the snapshot and every value written again are Flink's bytes."""
    from statemorph.io import DataInputDeserializer
    from statemorph.serializers import SortedMapSerializer, SortedMapSerializerSnapshot
    from statemorph.typeutils import read_versioned_snapshot_from, write_versioned_snapshot

    data = _sorted_map_snapshot(case)
    src = DataInputDeserializer(data)
    snap = read_versioned_snapshot_from(src)
    assert isinstance(snap, SortedMapSerializerSnapshot) and src.available() == 0
    assert snap.comparator_class == "StreamExecSortComparator$0"
    assert write_versioned_snapshot(snap) == data
    serializer = snap.restore_serializer()
    assert isinstance(serializer, SortedMapSerializer) and serializer.describe_type() == SORTED_MAP
    assert write_versioned_snapshot(serializer.snapshot_configuration()) == data
    raw = read_flink_state_table(case / "savepoint", RANKED, "sorted-map", decode=False).column("value").to_pylist()
    assert raw and all(serializer.to_bytes(serializer.from_bytes(v)) == v for v in raw)
    # the table's maps (sort key rows as structs) encode to the same bytes (before: unhashable dict)
    table = read_flink_state_table(case / "savepoint", RANKED, "sorted-map")
    assert encode(table.column("value").combine_chunks(), serializer).values.to_pylist() == raw


def test_a_comparator_stream_naming_another_class_is_refused() -> None:
    """The comparator is read by a whitelist of its own: a class the comparator does not hold (here
    the comparator's name changed by one letter) is refused naming it, before any of its data."""
    from statemorph.errors import JavaSerializationError, StateFormatError
    from statemorph.typeutils import read_versioned_snapshot

    data = _sorted_map_snapshot(CASES[0]).replace(b"ComparableRecordComparator", b"ComparableRecordComparatoX")
    with pytest.raises(JavaSerializationError, match=r"ComparableRecordComparatoX' is not on the whitelist"):
        read_versioned_snapshot(data)
    whole = _sorted_map_snapshot(CASES[0])
    for cut in (200, 1500, len(whole) - 10):  # inside the comparator's fields, its code, the nested snapshots
        with pytest.raises(StateFormatError, match=r"offset|truncated|bytes"):
            read_versioned_snapshot(whole[:cut])


def test_the_sort_keys_of_the_sorted_map_cannot_be_migrated(tmp_path: Path) -> None:
    """The sorted map's keys are sort keys, ordered by the comparator Flink generated for their type:
    a schema file giving them a column is refused (exit 2) naming the state and its type; nothing
    written. Restating the type is a no-op (test_every_printed_type_pasted_into_a_schema_file_is_a_no_op)."""
    schema = tmp_path / "bad.toml"
    schema.write_text(f'[operators.{RANKED}.states.sorted-map]\ntype = "MAP<ROW<`f0` BIGINT, note STRING>, BIGINT>"\n',
                      encoding="utf-8")
    dst = tmp_path / "out"
    status, out, err = _cli("migrate", str(CASES[0] / "savepoint"), "--schema", str(schema), "--out", str(dst))
    assert status == ExitCode.USAGE, (out, err)
    assert "state 'sorted-map': Flink's SortedMapSerializer" in err and "cannot be migrated" in err
    assert f"keeps its type {SORTED_MAP}" in err
    assert not dst.exists()


@pytest.mark.spark
def test_every_sql_state_reads_as_a_spark_dataframe(spark: Any, tmp_path: Path) -> None:
    """The Spark route: converted to the Parquet form, each state a typed DataFrame."""
    from statemorph.engine.spark import read_state

    case = CASES[-1]
    old = records(case)
    assert _cli("convert", str(case / "savepoint"), "--out", str(tmp_path / "pq"), "-q")[0] == 0
    rank = read_state(spark, tmp_path / "pq", f"{RANK}/data-state-with-append")
    assert sorted((r["key"]["f0"], r["user_key"]["f0"], [e["f2"] for e in r["value"]]) for r in rank.collect()) == \
        sorted((k, x, [name(x)]) for k, xs in old.items() for x in sorted(xs)[-2:])
    left = read_state(spark, tmp_path / "pq", f"{JOIN}/left-records")
    assert left.count() == sum(len(xs) for xs in old.values())
    right = read_state(spark, tmp_path / "pq", f"{JOIN}/right-records")
    assert sorted((r["key"]["f0"], r["f1"]) for r in right.collect()) == sorted((k, max(xs)) for k, xs in old.items())
    for side in ("Left", "Right"):
        cache = read_state(spark, tmp_path / "pq", f"{INTERVAL}/IntervalJoin{side}Cache").collect()
        assert sorted(r["user_key"] - T0 for r in cache) == sorted(
            e["f0"]["f1"] for r in cache for e in r["value"])
        timers = read_state(spark, tmp_path / "pq", f"{INTERVAL}/IntervalJoin{side}TimerState")
        assert timers.count() == len(old)
    ranked = read_state(spark, tmp_path / "pq", f"{RANKED}/data-state")
    assert sorted((r["key"]["f0"], r["user_key"]["f0"], r["value"][0]["f0"]) for r in ranked.collect()) == sorted(
        (k % 2, sum(xs), k) for k, xs in old.items())
    sorted_map = read_state(spark, tmp_path / "pq", f"{RANKED}/sorted-map")
    assert sorted((r["key"]["f0"], sorted(r["value"].values())) for r in sorted_map.collect()) == sorted(
        (g, [1] * sum(1 for k in old if k % 2 == g)) for g in (0, 1))
    fast = read_state(spark, tmp_path / "pq", f"{FAST}/data-state-with-update")
    assert fast.columns == ["key", "user_key", "f0", "f1"] and fast.count() == 4  # two keys per partition
    proc = read_state(spark, tmp_path / "pq", f"{PROC_INTERVAL}/IntervalJoinRightCache").collect()
    assert sorted(e["f0"]["f1"] for r in proc for e in r["value"]) == sorted(
        x for xs in old.values() for x in xs if x % 3)
    outer = read_state(spark, tmp_path / "pq", f"{OUTER}/left-records")
    assert outer.columns == ["key", "user_key", "f0", "f1"]  # the Tuple2's fields as columns, its row a struct
    assert sorted((r["user_key"]["f0"], r["f0"]["f1"], r["f1"]) for r in outer.collect()) == \
        sorted((k, min(xs), 1) for k, xs in old.items())


def test_rowdata_takes_arrays_and_maps_of_rows_and_nothing_without_a_row() -> None:
    """``serializer = "rowdata"`` without a savepoint to follow: every ROW RowData, the lists and
    maps around them DataStream's; a type with no ROW inside is still refused (exit 2)."""
    from statemorph import serializers as S
    from statemorph.schema_file import SchemaFileError, parse_schema, serializer_for

    schema = parse_schema('[states.a]\nserializer = "rowdata"\n'
                          'type = "MAP<STRING, ARRAY<ROW<x INT, t TIMESTAMP(3)>>>"\n')
    built = serializer_for(schema.states["a"])
    assert isinstance(built, S.MapSerializer) and isinstance(built.key_serializer, S.StringSerializer)
    assert isinstance(built.value_serializer, S.ListSerializer)
    assert built.value_serializer.element_serializer == S.RowDataSerializer("ROW<x INT, t TIMESTAMP(3)>")
    with pytest.raises(SchemaFileError, match=r"needs a ROW type \(or an ARRAY / MAP of ROWs\), got ARRAY<INT>"):
        parse_schema('[states.a]\nserializer = "rowdata"\ntype = "ARRAY<INT>"\n')


def test_the_sorted_map_reads_the_same_from_the_parquet_form(tmp_path: Path) -> None:
    """The retractable Top-N's sorted map, converted to the Parquet form, reads as from the Flink
    savepoint (before: an unsupported state, exit 7, its snapshot unknown); its neighbours too."""
    from statemorph.engine.local import read_state_table

    assert _cli("convert", str(CASES[0] / "savepoint"), "--out", str(tmp_path / "pq"), "-q")[0] == 0
    got = read_state_table(tmp_path / "pq", f"{RANKED}/sorted-map")
    want = read_flink_state_table(CASES[0] / "savepoint", RANKED, "sorted-map")
    assert sorted(got.select(["key", "value"]).to_pylist(), key=str) == \
        sorted(want.select(["key", "value"]).to_pylist(), key=str)
    assert read_state_table(tmp_path / "pq", f"{RANKED}/data-state").num_rows == len(records(CASES[0]))
