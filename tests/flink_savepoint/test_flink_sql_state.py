"""Flink SQL state in real savepoints (tests/data/flink_sql, taken by ci/flink's SQL job): statemorph
inspects it (operators, state names, RowData key and value types), reads it as Arrow tables with
the values the queries emitted, re-writes every serializer snapshot byte for byte, and migrates it
with ``statemorph migrate`` to the evolved query's row types, whose snapshots are then the very
bytes Flink writes for the evolved job. (Real Flink restoring the result:
test_flink_sql_restore_real_flink.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flink_sql_cases import (
    AGG_UID,
    EVOLVE_SCHEMA,
    FIRST_UID,
    LAST_UID,
    expected,
    old_cases,
    spec,
    sql_case,
)

from statemorph.cli import main
from statemorph.engine import read_flink_state_table
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators
from statemorph.snapshot import read_versioned_snapshot, write_versioned_snapshot

OLD_TYPES = {
    AGG_UID: ("accState", "ROW<`f0` BIGINT, `f1` BIGINT>"),
    FIRST_UID: ("deduplicate-state", "BOOLEAN"),
    LAST_UID: ("deduplicate-state",
               "ROW<`f0` INT, `f1` BIGINT, `f2` STRING, `f3` TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*>"),
}
NEW_TYPES = {
    AGG_UID: ("accState", "ROW<`f0` BIGINT, `f1` BIGINT, `f2` STRING>"),
    FIRST_UID: ("deduplicate-state", "BOOLEAN"),
    LAST_UID: ("deduplicate-state",
               "ROW<`f0` INT, `f1` BIGINT, `f2` STRING, `f3` STRING, `f4` TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*>"),
}
CASES = [sql_case("sql-hashmap-p1"), sql_case("sql-rocksdb-p2"), sql_case("sql-v2-hashmap-p1")]
IDS = [c.name for c in CASES]


def _inspect(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {o["uid"]: o for o in doc["operators"] if o["uid"]}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inspect_names_the_sql_operators_states_and_row_types(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ops = _inspect(case / "savepoint", capsys)
    stateful = sorted(uid for uid, o in ops.items() if any(not s["name"].startswith("_timer_state/")
                                                           for s in o["states"]))  # type: ignore[attr-defined]
    assert stateful == sorted(expected(case)["uids"]) == sorted(OLD_TYPES)
    types = OLD_TYPES if spec(case)["sql_version"] == 1 else NEW_TYPES
    for uid, (state, value_type) in types.items():
        op = ops[uid]
        assert op["parallelism"] == spec(case)["parallelism"] and op["max_parallelism"] == 128
        st = next(s for s in op["states"] if s["name"] == state)  # type: ignore[attr-defined]
        assert st["kind"] == "value" and not st["ttl"]
        assert st["key_type"] == "ROW<`f0` INT>"  # the grouping / partition key k as a BinaryRowData
        assert st["value_type"] == value_type
        assert st["entries"] == spec(case)["keys"]
    assert ops[AGG_UID]["name"] == "GroupAggregate[4]"
    assert ops[FIRST_UID]["name"] == "Deduplicate[9]" and ops[LAST_UID]["name"] == "Deduplicate[15]"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sql_state_reads_as_arrow_tables_with_what_the_queries_emitted(case: Path) -> None:
    out, keys = expected(case)["outputs"], spec(case)["keys"]
    sp = case / "savepoint"
    acc = read_flink_state_table(sp, AGG_UID, "accState")
    assert acc.schema.field("key").type.num_fields == 1
    assert all(0 <= g < 128 for g in acc.column("key_group").to_pylist())
    # the accumulators of COUNT(*) and SUM(x) [and MAX(note)] are the aggregation's output values
    got = sorted((r["key"]["f0"], *r["value"].values()) for r in acc.to_pylist())
    assert got == sorted(tuple(row) for row in out["agg"])
    first = read_flink_state_table(sp, FIRST_UID, "deduplicate-state").to_pylist()
    assert sorted(r["key"]["f0"] for r in first) == list(range(keys)) and all(r["value"] is True for r in first)
    # keep-last keeps the input row; Flink stores the proctime attribute as null
    last = read_flink_state_table(sp, LAST_UID, "deduplicate-state").to_pylist()
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
    return {(op.operator.uid, name): st.snapshot_bytes("value_serializer")
            for op in describe_operators(FlinkSavepoint(path)) for name, st in op.states.items()}


@pytest.mark.parametrize("case", old_cases(), ids=lambda c: c.name)
def test_migrate_writes_the_evolved_jobs_own_snapshots(case: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "evolved.toml"
    schema.write_text(EVOLVE_SCHEMA, encoding="utf-8")
    assert main(["check", str(case / "savepoint"), "--schema", str(schema), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    actions = {(o["uid"], s["name"]): s["action"] for o in doc["operators"] for s in o["states"]}
    assert actions[(AGG_UID, "accState")] == actions[(LAST_UID, "deduplicate-state")] == "migrate"
    dst = tmp_path / "evolved"
    assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst), "-q"]) == 0
    capsys.readouterr()
    # the migrated snapshots are the bytes Flink 2.3 itself writes for the evolved job
    flink_v2 = _value_snapshots(sql_case("sql-v2-hashmap-p1") / "savepoint")
    assert _value_snapshots(dst) == flink_v2
    # unchanged states and operators are carried over; migrated rows gain nulls
    out = expected(case)["outputs"]
    acc = read_flink_state_table(dst, AGG_UID, "accState").to_pylist()
    assert sorted((r["key"]["f0"], r["value"]["f0"], r["value"]["f1"], r["value"]["f2"]) for r in acc) == \
        sorted((*row, None) for row in out["agg"])
    last = read_flink_state_table(dst, LAST_UID, "deduplicate-state").to_pylist()
    assert sorted([*r["value"].values()] for r in last) == sorted([*row, None, None] for row in out["last"])
    before = read_flink_state_table(case / "savepoint", FIRST_UID, "deduplicate-state")
    assert read_flink_state_table(dst, FIRST_UID, "deduplicate-state").equals(before)
    # the result needs nothing more for the evolved job. (Its snapshots record no field names
    # either, so its fields are f0, f1... again: a schema file for it names them so.)
    as_is = tmp_path / "as-is.toml"
    as_is.write_text("".join(f'[operators.{uid}.states.{state}]\ntype = "{value_type}"\n'
                             for uid, (state, value_type) in NEW_TYPES.items() if uid != FIRST_UID), encoding="utf-8")
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
