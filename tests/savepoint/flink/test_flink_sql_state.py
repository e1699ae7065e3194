"""Flink SQL state in real savepoints (tests/data/flink_sql, taken by ci/flink's SQL job): statemorph
inspects it (operators, state names, RowData key and value types), reads it as Arrow tables with
the values the queries emitted, re-writes every serializer snapshot byte for byte, and migrates it
with ``statemorph migrate`` to the evolved query's row types, whose snapshots are then the very
bytes Flink writes for the evolved job. (Real Flink restoring the result:
test_flink_sql_restore_real_flink.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from savepoint.flink.flink_sql_cases import (
    AGG_UID,
    FIRST_UID,
    LAST_UID,
    evolve_schema,
    expected,
    old_cases,
    operator_ids,
    spec,
    sql_case,
)

from statemorph.cli import main
from statemorph.engine import read_flink_state_table
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

OLD_TYPES = {
    "agg": ("accState", "ROW<`f0` BIGINT, `f1` BIGINT>"),
    "first": ("deduplicate-state", "BOOLEAN"),
    "last": ("deduplicate-state", "ROW<`f0` INT, `f1` BIGINT, `f2` STRING, `f3` TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*>"),
}
NEW_TYPES = {
    "agg": ("accState", "ROW<`f0` BIGINT, `f1` BIGINT, `f2` STRING>"),
    "first": ("deduplicate-state", "BOOLEAN"),
    "last": ("deduplicate-state",
             "ROW<`f0` INT, `f1` BIGINT, `f2` STRING, `f3` STRING, `f4` TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*>"),
}
NAMES = {"agg": "GroupAggregate[4]", "first": "Deduplicate[9]", "last": "Deduplicate[15]"}
CASES = [*old_cases(), sql_case("sql-v2-hashmap-p1")]
IDS = [c.name for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inspect_names_the_sql_operators_states_and_row_types(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(case / "savepoint"), "--json"]) == 0
    ops = {o["uid"] or o["uid_hash"]: o for o in json.loads(capsys.readouterr().out)["operators"]}
    ids = operator_ids(case / "savepoint")
    stateful = sorted(ident for ident, o in ops.items() if any(not s["name"].startswith("_timer_state/")
                                                               for s in o["states"]))
    assert stateful == sorted(ids.values())
    if spec(case).get("sql_uids", "always") == "always":
        assert ids == {"agg": AGG_UID, "first": FIRST_UID, "last": LAST_UID}
        assert sorted(expected(case)["uids"]) == sorted(ids.values())
    else:  # PLAN_ONLY: no uids, the operators go by the hashes Flink derives from the topology
        assert expected(case)["uids"] == [] and all(ops[i]["uid"] is None and len(i) == 32 for i in ids.values())
    types = OLD_TYPES if spec(case)["sql_version"] == 1 else NEW_TYPES
    for query, (state, value_type) in types.items():
        op = ops[ids[query]]
        assert op["name"] == NAMES[query]
        assert op["parallelism"] == spec(case)["parallelism"] and op["max_parallelism"] == 128
        st = next(s for s in op["states"] if s["name"] == state)
        assert st["kind"] == "value" and not st["ttl"]
        assert st["key_type"] == "ROW<`f0` INT>"  # the grouping / partition key k as a BinaryRowData
        assert st["value_type"] == value_type
        assert st["entries"] == spec(case)["keys"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sql_state_reads_as_arrow_tables_with_what_the_queries_emitted(case: Path) -> None:
    out, keys = expected(case)["outputs"], spec(case)["keys"]
    sp = case / "savepoint"
    ids = operator_ids(sp)
    acc = read_flink_state_table(sp, ids["agg"], "accState")
    assert acc.schema.field("key").type.num_fields == 1
    assert all(0 <= g < 128 for g in acc.column("key_group").to_pylist())
    # the accumulators of COUNT(*) and SUM(x) [and MAX(note)] are the aggregation's output values
    got = sorted((r["key"]["f0"], *r["value"].values()) for r in acc.to_pylist())
    assert got == sorted(tuple(row) for row in out["agg"])
    first = read_flink_state_table(sp, ids["first"], "deduplicate-state").to_pylist()
    assert sorted(r["key"]["f0"] for r in first) == list(range(keys)) and all(r["value"] is True for r in first)
    # keep-last keeps the input row; Flink stores the proctime attribute as null
    last = read_flink_state_table(sp, ids["last"], "deduplicate-state").to_pylist()
    assert sorted([*r["value"].values()] for r in last) == sorted([*row, None] for row in out["last"])
    assert all(r["key"]["f0"] == r["value"]["f0"] for r in last)
    frame = acc.to_pandas()  # a DataFrame: one row per key, key and value as struct columns
    assert len(frame) == keys and list(frame.columns) == ["key_group", "key", "namespace", "value"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_sql_snapshot_is_rewritten_byte_for_byte(case: Path) -> None:
    """Golden vectors from real Flink: the key and value serializer snapshots of SQL state
    (RowDataSerializer with Java-serialized LogicalTypes, the *PROCTIME* column included)."""
    seen = set()
    for op in describe_operators(FlinkSavepoint(case / "savepoint")):
        for name, st in op.states.items():
            for role in ("key_serializer", "value_serializer"):
                raw = st.snapshot_bytes(role)
                assert write_versioned_snapshot(read_versioned_snapshot(raw)) == raw, (op.label, name, role)
                seen.add(st.snapshot_class(role).rsplit(".", 1)[-1])
    assert seen == {"RowDataSerializer$RowDataSerializerSnapshot", "BooleanSerializer$BooleanSerializerSnapshot"}


def _value_snapshots(path: Path) -> dict[tuple[str, str], bytes]:
    """(query, state) → the value serializer snapshot's bytes."""
    query = {ident: q for q, ident in operator_ids(path).items()}
    return {(query[op.operator.uid or op.operator.uid_hash], name): st.snapshot_bytes("value_serializer")
            for op in describe_operators(FlinkSavepoint(path)) for name, st in op.states.items()
            if (op.operator.uid or op.operator.uid_hash) in query}


@pytest.mark.parametrize("case", old_cases(), ids=lambda c: c.name)
def test_migrate_writes_the_evolved_jobs_own_snapshots(case: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    ids = operator_ids(case / "savepoint")
    schema = tmp_path / "evolved.toml"
    schema.write_text(evolve_schema(case), encoding="utf-8")
    assert main(["check", str(case / "savepoint"), "--schema", str(schema), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    actions = {(o["uid"] or o["uid_hash"], s["name"]): s["action"] for o in doc["operators"] for s in o["states"]}
    assert actions == {(ids["agg"], "accState"): "migrate", (ids["last"], "deduplicate-state"): "migrate"}
    dst = tmp_path / "evolved"
    assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst), "-q"]) == 0
    capsys.readouterr()
    # the migrated snapshots are the bytes Flink 2.3 itself writes for the evolved job
    flink_v2 = _value_snapshots(sql_case("sql-v2-hashmap-p1") / "savepoint")
    assert _value_snapshots(dst) == flink_v2
    # unchanged states and operators are carried over; migrated rows gain nulls
    out = expected(case)["outputs"]
    acc = read_flink_state_table(dst, ids["agg"], "accState").to_pylist()
    assert sorted((r["key"]["f0"], r["value"]["f0"], r["value"]["f1"], r["value"]["f2"]) for r in acc) == \
        sorted((*row, None) for row in out["agg"])
    last = read_flink_state_table(dst, ids["last"], "deduplicate-state").to_pylist()
    assert sorted([*r["value"].values()] for r in last) == sorted([*row, None, None] for row in out["last"])
    before = read_flink_state_table(case / "savepoint", ids["first"], "deduplicate-state")
    assert read_flink_state_table(dst, ids["first"], "deduplicate-state").equals(before)
    # the result needs nothing more for the evolved job. (Its snapshots record no field names
    # either, so its fields are f0, f1... again: a schema file for it names them so.)
    as_is = tmp_path / "as-is.toml"
    as_is.write_text("".join(f'[operators."{ids[query]}".states.{state}]\ntype = "{value_type}"\n'
                             for query, (state, value_type) in NEW_TYPES.items() if query != "first"),
                     encoding="utf-8")
    assert main(["check", str(dst), "--schema", str(as_is), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["action"] for o in doc["operators"] for s in o["states"]} == {"copy"}


def test_an_incompatible_sql_change_names_the_field_and_writes_nothing(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Turning the COUNT accumulator into a STRING is no nullable column: refused, by field."""
    schema = tmp_path / "bad.toml"
    schema.write_text(f'[operators.{AGG_UID}.states.accState]\ntype = "ROW<f0 STRING, f1 BIGINT>"\n',
                      encoding="utf-8")
    dst = tmp_path / "out"
    assert main(["migrate", str(sql_case("sql-hashmap-p1") / "savepoint"), "--schema", str(schema),
                 "--out", str(dst)]) != 0
    assert "f0" in capsys.readouterr().err and not dst.exists()


@pytest.mark.spark
def test_sql_state_reads_as_spark_dataframes(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The Spark route: the savepoint converted to statemorph's Parquet form (lossless), each SQL
    state a typed DataFrame, key and row fields as columns (the proctime column as a timestamp)."""
    from statemorph.engine.spark import read_state

    case = sql_case("sql-rocksdb-p2")
    out, ids = expected(case)["outputs"], operator_ids(case / "savepoint")
    assert main(["convert", str(case / "savepoint"), "--out", str(tmp_path / "pq"), "-q"]) == 0
    capsys.readouterr()
    acc = read_state(spark, tmp_path / "pq", f"{ids['agg']}/accState")
    assert acc.columns == ["key", "f0", "f1"]
    assert sorted((r["key"]["f0"], r["f0"], r["f1"]) for r in acc.collect()) == sorted(tuple(x) for x in out["agg"])
    last = read_state(spark, tmp_path / "pq", f"{ids['last']}/deduplicate-state")
    assert dict(last.dtypes)["f3"] == "timestamp"
    assert sorted([r["f0"], r["f1"], r["f2"], r["f3"]] for r in last.collect()) == \
        sorted([*row, None] for row in out["last"])
    first = read_state(spark, tmp_path / "pq", f"{ids['first']}/deduplicate-state")
    assert first.filter("value").count() == spec(case)["keys"]
