"""The state of Flink SQL distinct aggregates, FIRST_VALUE / LAST_VALUE / LISTAGG and over
aggregations, on savepoints real Flink 2.3 took (tests/data/flink_savepoints/sql-aggs-*, ci/flink
SqlAggJobs: hashmap and RocksDB, parallelism 2), read without Flink.

Record ``j`` (``0 <= j < keys * records_per_key``) has key ``k = j % keys``, ``x = j``, ``name(j)``
and event time ``T0 + j``. What each operator keeps:

- ``4_group-aggregate`` (``COUNT(DISTINCT name), SUM(DISTINCT x % 3)`` per key): a map state per
  distinct argument, ``distinctAcc_0`` (STRING → BIGINT NOT NULL) and ``distinctAcc_1`` (INT →
  ...), whose serializers are Flink SQL's ``ExternalSerializer``;
- ``9_group-aggregate`` (FIRST_VALUE, LAST_VALUE, LISTAGG on an insert-only input): one
  accumulator row with nested rows;
- ``14_group-aggregate`` / ``17_group-aggregate``: each key's ``MAX(name)``, and over that updating
  input, grouped by ``k % 3``, the retracting FIRST_VALUE / LAST_VALUE / LISTAGG and a distinct
  count, whose ``MapView`` / ``ListView`` fields live in state of their own (``agg2$list``,
  ``distinctAcc_0``...);
- ``22`` / ``28`` / ``34_over-aggregate`` (event-time ROWS / RANGE / unbounded over windows, no
  watermark yet): every row buffered in ``inputState`` under its timestamp; ``40_over-aggregate``
  (processing-time RANGE): the rows under their processing time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from savepoint.flink.flink_cases import case_spec, sql_agg_cases

from statemorph.cli import main
from statemorph.engine import convert_savepoint, inspect_flink_savepoint, read_flink_state_table
from statemorph.errors import MalformedDataError, SerializationError, SnapshotError, StatemorphError
from statemorph.io import DataInputDeserializer, DataOutputSerializer
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.description import describe_operators
from statemorph.serializers import (
    ArrayDataSerializer,
    ExternalSerializer,
    ExternalSerializerSnapshot,
    StringDataSerializer,
)
from statemorph.serializers.rowdata import FlinkRowDataSerializerSnapshot
from statemorph.types import BigIntType
from statemorph.typeutils import read_versioned_snapshot, write_versioned_snapshot

CASES = sql_agg_cases()
IDS = [c.name for c in CASES]
T0 = 1_700_000_040_000
DISTINCT, VALUES, INNER, RETRACT = "4_group-aggregate", "9_group-aggregate", "14_group-aggregate", "17_group-aggregate"
OVER_ROWS, OVER_RANGE, OVER_UNBOUNDED, OVER_PROC = (f"{n}_over-aggregate" for n in (22, 28, 34, 40))
#: the user's aggregate function (ci/flink ItemsAgg): user structured types inside an ARRAY and a MAP
ITEMS = "46_group-aggregate"
ITEM = "STRUCTURED<'savepoints.ItemsAgg$Item', `name` STRING, `x` BIGINT NOT NULL>"
ITEMS_ACC = f"ROW<`f0` STRUCTURED<'savepoints.ItemsAgg$Acc', `byPrefix` MAP<STRING, {ITEM}>, `items` ARRAY<{ITEM}>>>"
MAP_VIEW = "RAW('org.apache.flink.table.api.dataview.MapView')"
BUFFERED = "ARRAY<ROW<`f0` INT, `f1` BIGINT, `f2` STRING, `f3` TIMESTAMP_LTZ(3) *ROWTIME*>>"


def name(j: int) -> str:
    """The ``name`` of record ``j`` (SqlJobs.name)."""
    return ("nö-" if j % 4 == 1 else "n-") + str(j)


def records(case: Path) -> list[tuple[int, int, str]]:
    s = case_spec(case)
    return [(j % s["keys"], j, name(j)) for j in range(s["keys"] * s["records_per_key"])]


def rows(case: Path, operator: str, state: str) -> list[dict[str, Any]]:
    return read_flink_state_table(case / "savepoint", operator, state).to_pylist()


def test_every_committed_sql_aggregate_case_is_here() -> None:
    assert {(case_spec(c)["backend"], case_spec(c)["parallelism"]) for c in CASES} == {("hashmap", 2),
                                                                                      ("rocksdb", 2)}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_inspect_prints_the_data_views_and_buffers_with_flink_types(case: Path) -> None:
    """Before: ``distinctAcc_0`` printed as ``value type StringData`` (its ExternalSerializer
    snapshot was not delimited, so the map's key and value snapshots were misread)."""
    info = inspect_flink_savepoint(case / "savepoint")
    states = {(op["uid"], st["name"]): st for op in info["operators"] for st in op["states"]}
    distinct = states[(DISTINCT, "distinctAcc_0")]
    assert (distinct["user_key_type"], distinct["value_type"]) == ("STRING", "BIGINT NOT NULL")
    assert states[(DISTINCT, "distinctAcc_1")]["user_key_type"] == "INT"  # MOD(BIGINT, INT) is INT
    assert states[(DISTINCT, "distinctAcc_0_null_state")]["value_type"] == "BIGINT NOT NULL"
    assert states[(RETRACT, "agg2$list")]["value_type"] == "STRING NOT NULL"
    assert states[(RETRACT, "agg2$retractList")]["value_type"] == "STRING NOT NULL"
    to_order, to_value = states[(RETRACT, "agg0$valueToOrderMap")], states[(RETRACT, "agg0$orderToValueMap")]
    assert (to_order["user_key_type"], to_order["value_type"]) == ("STRING NOT NULL", "ARRAY<BIGINT>")
    assert (to_value["user_key_type"], to_value["value_type"]) == ("BIGINT", "ARRAY<STRING NOT NULL>")
    for op in (OVER_ROWS, OVER_RANGE, OVER_UNBOUNDED):
        buffer = states[(op, "inputState")]
        assert (buffer["kind"], buffer["user_key_type"], buffer["value_type"]) == ("map", "BIGINT", BUFFERED)
    assert states[(OVER_PROC, "inputState")]["value_type"] == BUFFERED.replace("*ROWTIME*", "NOT NULL *PROCTIME*")
    assert states[(OVER_RANGE, "cleanupTsState")]["value_type"] == "BIGINT"
    # before: refused as "a Kryo / generic type"; the data views' placeholders are RAW fields
    assert states[(DISTINCT, "accState")]["value_type"] == \
        f"ROW<`f0` BIGINT, `f1` INT, `f2` {MAP_VIEW}, `f3` {MAP_VIEW}>"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_distinct_aggregates_read_as_tables(case: Path) -> None:
    """Every distinct value a key has seen, once, with Flink's flag word (1: the one distinct
    aggregate over that argument)."""
    seen = {(k, n) for k, _, n in records(case)}
    assert sorted((r["key"]["f0"], r["user_key"], r["value"]) for r in rows(case, DISTINCT, "distinctAcc_0")) == \
        sorted((k, n, 1) for k, n in seen)
    assert sorted((r["key"]["f0"], r["user_key"]) for r in rows(case, DISTINCT, "distinctAcc_1")) == \
        sorted({(k, x % 3) for k, x, _ in records(case)})
    assert rows(case, DISTINCT, "distinctAcc_0_null_state") == []
    names = {k: len({n for kk, n in seen if kk == k}) for k, _ in seen}
    acc = {r["key"]["f0"]: r["value"] for r in rows(case, DISTINCT, "accState")}
    assert acc == {k: {"f0": n, "f1": k % 3, "f2": b"\x00", "f3": b"\x00"} for k, n in names.items()}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_value_aggregates_and_their_retracting_views_read_as_tables(case: Path) -> None:
    """FIRST_VALUE / LAST_VALUE / LISTAGG on the insert-only input keep one row; over the updating
    input (each key's MAX(name), grouped by k % 3) LISTAGG keeps the live values in its ListView
    state and the distinct count the live values in its map, the retracted ones gone."""
    by_key: dict[int, list[str]] = {}
    for k, _, n in records(case):
        by_key.setdefault(k, []).append(n)
    acc = {r["key"]["f0"]: r["value"] for r in rows(case, VALUES, "accState")}
    assert {k: (v["f0"]["firstValue"], v["f1"]["lastValue"], v["f3"]) for k, v in acc.items()} == \
        {k: (ns[0], ns[-1], ",".join(ns)) for k, ns in by_key.items()}
    assert {r["key"]["f0"]: r["value"]["f0"] for r in rows(case, INNER, "accState")} == \
        {k: max(ns) for k, ns in by_key.items()}
    live = sorted((k % 3, max(ns)) for k, ns in by_key.items())
    assert sorted((r["key"]["f0"], r["value"]) for r in rows(case, RETRACT, "agg2$list")) == live
    assert sorted((r["key"]["f0"], r["user_key"]) for r in rows(case, RETRACT, "distinctAcc_0")) == live
    assert rows(case, RETRACT, "agg2$retractList") == []
    for agg in ("agg0", "agg1"):  # FIRST_VALUE / LAST_VALUE with retraction: value → orders and back
        to_order = {(r["key"]["f0"], r["user_key"], o) for r in rows(case, RETRACT, f"{agg}$valueToOrderMap")
                    for o in r["value"]}
        to_value = {(r["key"]["f0"], v, r["user_key"]) for r in rows(case, RETRACT, f"{agg}$orderToValueMap")
                    for v in r["value"]}
        assert to_order == to_value and sorted((g, n) for g, n, _ in to_order) == live


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_over_aggregation_buffers_read_as_tables(case: Path) -> None:
    """No watermark has passed: each event-time over window holds every row under its timestamp
    (the cleanup timestamps beside); the processing-time one holds them under their arrival."""
    want = sorted((k, T0 + j, j, n) for k, j, n in records(case))
    for op in (OVER_ROWS, OVER_RANGE, OVER_UNBOUNDED):
        got = [(r["key"]["f0"], r["user_key"], e["f1"], e["f2"]) for r in rows(case, op, "inputState")
               for e in r["value"]]
        assert sorted(got) == want, op
        buffered = rows(case, op, "inputState")
        assert all(e["f3"].timestamp() * 1000 == r["user_key"] for r in buffered for e in r["value"])
    proc = [(e["f0"], e["f1"], e["f2"]) for r in rows(case, OVER_PROC, "inputState") for e in r["value"]]
    assert sorted(proc) == sorted(records(case))
    assert len(rows(case, OVER_RANGE, "cleanupTsState")) == case_spec(case)["keys"]


@pytest.mark.spark
def test_sql_aggregate_state_reads_as_spark_dataframes(spark: Any, tmp_path: Path) -> None:
    """The Spark route (the Parquet form, converted losslessly): the data views and the over
    buffer as typed DataFrames."""
    from statemorph.engine.spark import read_state

    case = CASES[-1]
    convert_savepoint(case / "savepoint", tmp_path / "pq")
    distinct = read_state(spark, tmp_path / "pq", f"{DISTINCT}/distinctAcc_0")
    assert sorted((r["key"]["f0"], r["user_key"]) for r in distinct.collect()) == \
        sorted({(k, n) for k, _, n in records(case)})
    listagg = read_state(spark, tmp_path / "pq", f"{RETRACT}/agg2$list")
    assert dict(listagg.dtypes)["value"] == "string" and listagg.count() == case_spec(case)["keys"]
    buffer = read_state(spark, tmp_path / "pq", f"{OVER_ROWS}/inputState")
    assert sorted(e["f1"] for r in buffer.collect() for e in r["value"]) == [j for _, j, _ in records(case)]
    # the user's accumulator: structs in an array and a map
    items = read_state(spark, tmp_path / "pq", f"{ITEMS}/accState").collect()
    assert sorted(i["x"] for r in items for i in r["f0"]["items"]) == [j for _, j, _ in records(case)]
    assert sum(len(r["f0"]["byPrefix"]) for r in items) == len({(k, n[:n.index("-")]) for k, _, n in records(case)})


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_parquet_form_reads_back_the_same_tables(case: Path, tmp_path: Path) -> None:
    """Convert to the Parquet form and back: every state reads the same, and the structured
    accumulators (read as the nested rows of their attributes) keep their bytes."""
    pq, back = tmp_path / "pq", tmp_path / "back"
    convert_savepoint(case / "savepoint", pq)
    convert_savepoint(pq, back)
    for op, state in [(DISTINCT, "distinctAcc_0"), (RETRACT, "agg2$list"), (OVER_RANGE, "inputState"),
                      (VALUES, "accState"), (DISTINCT, "accState"), (RETRACT, "accState"), (ITEMS, "accState")]:
        assert read_flink_state_table(back, op, state).to_pylist() == rows(case, op, state), (op, state)
    assert read_flink_state_table(back, RETRACT, "accState", decode=False).to_pylist() == \
        read_flink_state_table(case / "savepoint", RETRACT, "accState", decode=False).to_pylist()


ACC = "org.apache.flink.table.runtime.functions.aggregate."
VIEW = "RAW('org.apache.flink.table.api.dataview.{}')"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_structured_accumulators_print_flinks_type_and_read_as_tables(case: Path) -> None:
    """The retracting FIRST_VALUE / LAST_VALUE / LISTAGG accumulators are Flink SQL STRUCTURED types
    (inline: the accumulator class and its attributes), stored as nested rows. Before: "unsupported
    state" (the StructuredType was not whitelisted). Each group's first / last value is the value its
    order → value map holds at the least / greatest order; the distinct count is the live values'."""
    info = inspect_flink_savepoint(case / "savepoint")
    acc_type = next(st["value_type"] for op in info["operators"] if op["uid"] == RETRACT
                    for st in op["states"] if st["name"] == "accState")
    first = (f"STRUCTURED<'{ACC}FirstValueWithRetractAggFunction$FirstValueWithRetractAccumulator', "
             f"`firstValue` STRING, `firstOrder` BIGINT, `valueToOrderMap` {VIEW.format('MapView')}, "
             f"`orderToValueMap` {VIEW.format('MapView')}>")
    listagg = (f"STRUCTURED<'{ACC}ListAggWsWithRetractAggFunction$ListAggWsWithRetractAccumulator', "
               f"`list` {VIEW.format('ListView')}, `retractList` {VIEW.format('ListView')}, `delimiter` STRING>")
    assert acc_type.startswith(f"ROW<`f0` {first}, `f1` STRUCTURED<'{ACC}LastValueWithRetract")
    assert f"`f2` {listagg}, `f3` BIGINT, `f4` BIGINT, `f5` {VIEW.format('MapView')}>" in acc_type
    by_key: dict[int, list[str]] = {}
    for k, _, n in records(case):
        by_key.setdefault(k, []).append(n)
    live: dict[int, set[str]] = {}
    for k, ns in by_key.items():
        live.setdefault(k % 3, set()).add(max(ns))
    acc = {r["key"]["f0"]: r["value"] for r in rows(case, RETRACT, "accState")}
    assert set(acc) == set(live)
    # (orders are processing times: two values may share one; FIRST_VALUE keeps the earlier of
    # them, the first in the order's list, LAST_VALUE the later)
    for agg, field, pick, at in (("agg0", "f0", min, 0), ("agg1", "f1", max, -1)):
        orders: dict[int, dict[int, list[str]]] = {}
        for r in rows(case, RETRACT, f"{agg}$orderToValueMap"):
            orders.setdefault(r["key"]["f0"], {})[r["user_key"]] = r["value"]
        for g, v in acc.items():
            value, order = list(v[field].values())[:2]
            assert order == pick(orders[g]) and orders[g][order][at] == value in live[g], (agg, g)
            assert (v[field]["valueToOrderMap"], v[field]["orderToValueMap"]) == (b"\x00", b"\x00")
    assert {g: (v["f2"]["delimiter"], v["f2"]["list"], v["f3"], v["f4"]) for g, v in acc.items()} == \
        {g: (";", b"\x00", len(ns), len(ns)) for g, ns in live.items()}


def _external_snapshots(case: Path) -> list[ExternalSerializerSnapshot]:
    snaps = []
    for op in describe_operators(FlinkSavepoint(case / "savepoint")):
        for st in op.states.values():
            for role in ("value_serializer", "user_key_serializer"):
                try:
                    snap = st.snapshot(role)
                except Exception:  # noqa: BLE001 - roles a state lacks, states statemorph carries unread
                    continue
                if isinstance(snap, ExternalSerializerSnapshot):
                    snaps.append(snap)
    return snaps


def test_external_serializer_snapshots_write_back_flinks_bytes() -> None:
    """Each ExternalSerializerSnapshot Flink wrote (the DataType stream kept exactly), read and
    written again byte for byte; its serializer writes the internal serializer's bytes."""
    snaps = _external_snapshots(CASES[0])
    assert {str(s.logical_type) for s in snaps} >= {"STRING", "STRING NOT NULL", "BIGINT NOT NULL", "BIGINT",
                                                   "ARRAY<BIGINT>", "ARRAY<STRING NOT NULL>"}
    for snap in snaps:
        data = write_versioned_snapshot(snap)
        again = read_versioned_snapshot(data)
        assert write_versioned_snapshot(again) == data
        ser = again.restore_serializer()
        assert isinstance(ser, ExternalSerializer)
        assert snap.resolve_schema_compatibility(ser).is_compatible_as_is()
    string = next(s for s in snaps if str(s.logical_type) == "STRING").restore_serializer()
    assert string.to_bytes("nö") == b"\x00\x00\x00\x03n\xc3\xb6"


def test_an_external_serializer_snapshot_of_another_data_type_is_refused_by_name() -> None:
    """Only atomic and collection data types are read (what Flink's data views of atomic values and
    lists record): the DataType stream's class is checked against the whitelist before anything
    else is read."""
    snap = _external_snapshots(CASES[0])[0]
    data = bytearray(write_versioned_snapshot(snap))
    at = data.index(b"org.apache.flink.table.types.AtomicDataType")
    data[at:at + 44] = b"org.apache.flink.table.types.FieldsDataTypX"
    with pytest.raises(SnapshotError, match="FieldsDataTypX|not whitelisted|refused|unknown"):
        read_versioned_snapshot(bytes(data))


def test_array_data_serializer_is_length_and_binary_array() -> None:
    """``List<Long>`` as Flink SQL stores it on its own: ``i32 length ‖ BinaryArrayData`` (4-byte
    size, null bits rounded to 4 bytes, 8-byte elements)."""
    ser = ArrayDataSerializer(BigIntType())
    data = ser.to_bytes([7, None])
    assert data == bytes.fromhex("00000018" "02000000" "02000000" "0700000000000000" "0000000000000000")
    assert ser.from_bytes(data) == [7, None]
    with pytest.raises(StatemorphError):
        ser.from_bytes(bytes.fromhex("00000018" "05000000"))


def test_string_data_serializer_is_length_and_utf8_and_refuses_bad_bytes() -> None:
    ser = StringDataSerializer()
    out = DataOutputSerializer()
    ser.serialize("a€", out)
    assert out.get_copy_of_buffer() == b"\x00\x00\x00\x04a\xe2\x82\xac"
    assert ser.deserialize(DataInputDeserializer(out.get_copy_of_buffer())) == "a€"
    with pytest.raises(MalformedDataError, match="invalid UTF-8"):
        ser.deserialize(DataInputDeserializer(b"\x00\x00\x00\x01\xff"))
    with pytest.raises(MalformedDataError, match="length -1"):
        ser.deserialize(DataInputDeserializer(b"\xff\xff\xff\xff"))
    with pytest.raises(SerializationError, match="cannot write null"):
        ser.serialize(None, out)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_buffered_rows_gaining_a_column_plan_as_a_migration_and_a_map_key_row_is_refused(
        case: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The over window's input row gains a nullable column (inside the buffer's list elements):
    a migration. The key of a data view keeps its type (the planner derives it): a change is
    refused naming the state."""
    schema = tmp_path / "v2.toml"
    schema.write_text(f'[operators."{OVER_ROWS}".states.inputState]\n'
                      'type = "ARRAY<ROW<f0 INT, f1 BIGINT, f2 STRING, note STRING, f3 TIMESTAMP_LTZ(3) *ROWTIME*>>"\n',
                      encoding="utf-8")
    assert main(["check", str(case / "savepoint"), "--schema", str(schema)]) == 1  # restorable after migration
    assert "added note" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[operators."{DISTINCT}".states.distinctAcc_0]\ntype = "BIGINT"\n', encoding="utf-8")
    assert main(["check", str(case / "savepoint"), "--schema", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "state 'distinctAcc_0': the state of a SQL data view keeps its type BIGINT NOT NULL" in err
    bad.write_text(f'[operators."{DISTINCT}".states.distinctAcc_0]\ntype = "BIGINT NOT NULL"\nuser_key_type = "INT"\n',
                   encoding="utf-8")
    # the recorded map key serializer decides its successor too (a data view's ExternalSerializer)
    assert main(["check", str(case / "savepoint"), "--schema", str(bad)]) == 2
    assert "state 'distinctAcc_0' user key: the state of a SQL data view keeps its type STRING" in \
        capsys.readouterr().err


def _distinct_acc(case: Path) -> Any:
    op = next(o for o in describe_operators(FlinkSavepoint(case / "savepoint")) if o.operator.uid == DISTINCT)
    return op.states["accState"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_data_view_placeholders_are_written_as_flink_writes_them(case: Path) -> None:
    """The accumulator row's RAW(MapView, NullSerializer) fields: the snapshot statemorph builds from
    the type (the RAW LogicalType with its class literal and NullSerializer shared, the nested
    RawValueDataSerializer snapshot) is Flink's, byte for byte, and so is every value re-encoded
    (a RAW value lives in the variable-length part even when it is one byte)."""
    st = _distinct_acc(case)
    snap = st.snapshot("value_serializer")
    built = write_versioned_snapshot(FlinkRowDataSerializerSnapshot(snap.row_type))
    assert built == st.snapshot_bytes("value_serializer")
    ser = snap.restore_serializer()
    raw = read_flink_state_table(case / "savepoint", DISTINCT, "accState", decode=False).column("value").to_pylist()
    assert raw and all(ser.to_bytes(ser.from_bytes(b)) == b for b in raw)


def test_a_raw_field_other_than_a_data_view_placeholder_is_refused_by_name() -> None:
    """A RAW type whose class is no MapView / ListView is a user's (its bytes are its own
    serializer's): the row snapshot is not read, with the reason."""
    data = _distinct_acc(CASES[0]).snapshot_bytes("value_serializer")
    view = b"org.apache.flink.table.api.dataview.MapView"
    assert view in data
    other = data.replace(len(view).to_bytes(2, "big") + view, b"\x00\x26org.apache.flink.table.data.StringData", 1)
    with pytest.raises(StatemorphError, match="not a SQL data-view placeholder"):
        read_versioned_snapshot(other)


def test_an_accumulator_with_data_view_placeholders_gains_a_column(tmp_path: Path) -> None:
    """A nullable field added after the placeholders: migrated per value (no kernel handles RAW
    slots), the placeholders moved with their bytes, the new field null."""
    case = CASES[-1]
    schema = tmp_path / "acc.toml"
    schema.write_text(f'[operators."{DISTINCT}".states.accState]\n'
                      f'type = "ROW<f0 BIGINT, f1 INT, f2 {MAP_VIEW}, f3 {MAP_VIEW}, extra STRING>"\n',
                      encoding="utf-8")
    out = tmp_path / "out"
    assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(out), "-q"]) == 0
    got = read_flink_state_table(out, DISTINCT, "accState").to_pylist()
    assert [{**r["value"], "f4": None} for r in rows(case, DISTINCT, "accState")] == [r["value"] for r in got]


def _retract_acc(case: Path, uid: str = RETRACT) -> Any:
    op = next(o for o in describe_operators(FlinkSavepoint(case / "savepoint")) if o.operator.uid == uid)
    return op.states["accState"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("uid", [RETRACT, ITEMS])
def test_structured_accumulator_snapshots_and_values_are_written_as_flink_writes_them(case: Path, uid: str) -> None:
    """The snapshot statemorph builds from the type (each StructuredType with its attributes as an
    immutable List, its EQUALS comparison and its class literal, the nested RowDataSerializer
    snapshots of the attributes) is Flink's, byte for byte; so is every value re-encoded. For the
    user's accumulator (user structured types inside an ARRAY and a MAP) that takes the JVM's
    sharing of reflection-extracted types: every ``String`` attribute one ``VarCharType``, every
    attribute and class name one string (before: a longer stream; before that, not read at all)."""
    st = _retract_acc(case, uid)
    snap = st.snapshot("value_serializer")
    assert write_versioned_snapshot(FlinkRowDataSerializerSnapshot(snap.row_type)) == \
        st.snapshot_bytes("value_serializer")
    ser = snap.restore_serializer()
    raw = read_flink_state_table(case / "savepoint", uid, "accState", decode=False).column("value").to_pylist()
    assert raw and all(ser.to_bytes(ser.from_bytes(b)) == b for b in raw)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_users_accumulator_with_structured_types_in_an_array_and_a_map_reads_as_a_table(case: Path) -> None:
    """A user's aggregate function (ci/flink ItemsAgg) keeps ``List<Item>`` and ``Map<String,
    Item>`` in its accumulator: Flink SQL extracts user STRUCTURED types inside an ARRAY and a MAP,
    stored as nested rows. inspect prints them, and they read as structs in lists and maps (before:
    "unsupported state", the user's class literals were refused by the whitelist)."""
    info = inspect_flink_savepoint(case / "savepoint")
    assert next(st["value_type"] for op in info["operators"] if op["uid"] == ITEMS
                for st in op["states"] if st["name"] == "accState") == ITEMS_ACC
    by_key: dict[int, list[tuple[int, str]]] = {}
    for k, j, n in records(case):
        by_key.setdefault(k, []).append((j, n))
    got = {r["key"]["f0"]: r["value"]["f0"] for r in rows(case, ITEMS, "accState")}
    assert {k: v["items"] for k, v in got.items()} == {
        k: [{"name": n, "x": j} for j, n in items] for k, items in by_key.items()}
    last = {k: {n[:n.index("-") + 1]: {"name": n, "x": j} for j, n in items} for k, items in by_key.items()}
    assert {k: dict(v["byPrefix"]) for k, v in got.items()} == last


def test_flink_120_structured_accumulators_read_and_are_written_back_in_their_own_shape() -> None:
    """Flink 1.20 serializes a StructuredType without the class-name field 2.x added, its
    attributes as an unmodifiable ArrayList and its comparison NONE (2.3: EQUALS): both
    accumulators (Flink's retracting FIRST_VALUE and the user's with structured types in an ARRAY
    and a MAP) read with the types 2.3's have, and their snapshots are written back byte for byte
    (before: "unsupported state", the class's shape was 2.3's only)."""
    from statemorph.savepoint.flink.operator_ids import operator_id

    [case] = sql_agg_cases(flink="1.20.3")
    ops = {o.operator.uid_hash: o for o in describe_operators(FlinkSavepoint(case / "savepoint"))}
    for uid in (RETRACT, ITEMS):
        st = ops[operator_id(uid).hex()].states["accState"]
        data = st.snapshot_bytes("value_serializer")
        snap = read_versioned_snapshot(data)
        assert snap.row_type == _retract_acc(CASES[0], uid).snapshot("value_serializer").row_type
        assert write_versioned_snapshot(snap) == data
        assert read_flink_state_table(case / "savepoint", uid, "accState").num_rows > 0


def test_a_changed_structured_type_inside_an_array_or_a_map_is_refused_naming_its_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An accumulator keeps its type, down to the structured types inside its ARRAY and MAP: a
    schema file giving the user's ``Item`` an attribute is refused (exit 3) naming the innermost
    place, ``f0.byPrefix.value`` / ``f0.items[]``, not the whole accumulator; nothing written."""
    case = CASES[0]
    grown = ITEM.replace("NOT NULL>", "NOT NULL, `extra` STRING>")
    for old, new, path in (
            (f"MAP<STRING, {ITEM}>", f"MAP<STRING, {grown}>", "f0.byPrefix.value"),
            (f"ARRAY<{ITEM}>", f"ARRAY<{grown}>", "f0.items[]")):
        schema = tmp_path / "s.toml"
        schema.write_text(f'[operators.{ITEMS}.states.accState]\nserializer = "rowdata"\n'
                          f'type = "{ITEMS_ACC.replace(old, new)}"\n', encoding="utf-8")
        dst = tmp_path / "out"
        assert main(["migrate", str(case / "savepoint"), "--schema", str(schema), "--out", str(dst)]) == 3
        out = capsys.readouterr().out
        assert f"accState (value): incompatible: value: {path}: the accumulator type {ITEM} keeps its type, " \
               f"got {grown}" in out
        assert not dst.exists()


def test_a_class_literal_off_the_whitelist_is_read_only_as_a_name() -> None:
    """A STRUCTURED type's implementation class is a class literal: of any class (a user's) it is
    read in the one shape a class that is not Serializable has (serialVersionUID 0, no flags, no
    fields), as a name; a literal with another shape, or whose name is not a Java class name, is
    refused before anything after it is read."""
    data = _retract_acc(CASES[0]).snapshot_bytes("value_serializer")
    acc = b"FirstValueWithRetractAggFunction$FirstValueWithRetractAccumulator"
    assert acc in data
    other = read_versioned_snapshot(data.replace(acc, b"X" * len(acc)))
    assert "STRUCTURED<'org.apache.flink.table.runtime.functions.aggregate." + "X" * len(acc) in str(other.row_type)
    with pytest.raises(StatemorphError, match="not on the whitelist"):
        read_versioned_snapshot(data.replace(acc, b"-" * len(acc)))
    name = ACC.encode() + acc
    literal = b"\x76\x72" + len(name).to_bytes(2, "big") + name  # TC_CLASS, TC_CLASSDESC, the name
    at = data.index(literal) + len(literal)  # its serialVersionUID
    serializable = data[:at] + (1).to_bytes(8, "big") + data[at + 8:]  # serialVersionUID 1
    with pytest.raises(StatemorphError, match="has serialVersionUID 1, expected 0"):
        read_versioned_snapshot(serializable.replace(acc, b"X" * len(acc)))


def test_a_structured_accumulator_keeps_its_type_in_a_schema_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``schema`` prints the accumulator with its STRUCTURED types, which check reads back as the
    same type; an attribute added to an accumulator is refused, naming the place (Flink's planner
    derives the accumulator from the aggregate function)."""
    case = CASES[0]
    schema = tmp_path / "s.toml"
    assert main(["schema", str(case / "savepoint")]) == 0
    text = capsys.readouterr().out
    schema.write_text(text, encoding="utf-8")
    assert f'[operators.{RETRACT}.states.accState]\nkind = "value"\nserializer = "rowdata"\n' \
           f'type = "ROW<`f0` STRUCTURED<' in text
    assert main(["check", str(case / "savepoint"), "--schema", str(schema)]) == 0
    first = "FirstValueWithRetractAccumulator', `firstValue` STRING, `firstOrder` BIGINT,"
    assert text.count(first) == 1
    schema.write_text(text.replace(first, first + " `extra` STRING,"), encoding="utf-8")
    assert main(["check", str(case / "savepoint"), "--schema", str(schema)]) == 3
    out = capsys.readouterr().out
    assert "accState (value): incompatible: value: f0: the accumulator type STRUCTURED<" in out
