"""The pieces a savepoint made from scratch needs, checked against what real Flink wrote: the
OperatorID of a uid, the CheckpointProperties trailer, and the keyed-state header of new states;
and the stream assembler's refusals (unsorted rows, bad arguments)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from flink_cases import SAVEPOINTS, case_spec, committed_cases

from statemorph import serializers as S
from statemorph.engine.bootstrap import RowTagger, StateData, write_flink_savepoint
from statemorph.errors import FlinkSavepointError, SavepointError, UsageError
from statemorph.keyed.namespace import VoidNamespaceSerializer
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.assemble import ROWS_SCHEMA, SubtaskStreams, new_keyed_header, new_state_meta
from statemorph.savepoint.flink.identity import SUSPEND, checkpoint_properties
from statemorph.savepoint.flink.keyed_header import write_keyed_header
from statemorph.savepoint.flink.operator_ids import murmur3_128, operator_id
from statemorph.types import parse_type
from statemorph.typeutils import flink_snapshot, write_versioned_snapshot

V6_CASES = [c for c in committed_cases() if case_spec(c).get("flink", "2.3.0") == "2.3.0"]


@pytest.mark.parametrize("case", V6_CASES, ids=[c.name for c in V6_CASES])
def test_operator_ids_and_trailer_are_flinks(case):
    """Every uid in a savepoint Flink 2.3 wrote hashes to its OperatorID; stop-with-savepoint's
    CheckpointProperties are written byte for byte from class descriptors."""
    sp = FlinkSavepoint(case / "savepoint")
    uids = [op for op in sp.operators if op.uid]
    assert {op.uid for op in uids} == {"records", case_spec(case)["uid"]}
    for op in uids:
        assert operator_id(op.uid) == op.operator_id
    assert checkpoint_properties(SUSPEND) == sp.metadata.trailer


def test_murmur3_128_public_vectors():
    assert murmur3_128(b"").hex() == "00" * 16
    assert murmur3_128(b"The quick brown fox jumps over the lazy dog").hex() == "6c1b07bc7bbc4be347939ac4a93c437a"


def test_savepoint_properties_differ_only_in_name_and_action():
    plain, suspend = checkpoint_properties(), checkpoint_properties(SUSPEND)
    assert b"Suspend Savepoint" in suspend and b"SUSPEND" in suspend
    assert b"tSavepoint" not in suspend and b"\x00\tSavepoint" in plain and b"NONE" in plain


def test_new_header_is_byte_identical_to_flinks():
    """A header built for every state of kinds-rocksdb-p2-rowkey (RocksDB registers them in
    order: value, list, map, and their TTL forms) equals the one Flink wrote, up to the timer
    queues Flink adds."""
    from statemorph.savepoint.flink.assemble import state_value_snapshot

    case = SAVEPOINTS / "kinds-rocksdb-p2-rowkey"
    sp = FlinkSavepoint(case / "savepoint")
    _, stream = next(sp.keyed_streams(sp.operator("kinds")))
    events = S.RowDataSerializer(parse_type("ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, "
                                            "deviceType STRING>>"))
    string, long_ = S.StringSerializer(), S.LongSerializer()
    kinds = {"events": ("value", events), "count": ("value", long_), "last": ("value", string),
             "recent": ("list", long_), "totals": ("map", long_)}
    kinds.update({f"ttl_{n}": kinds[n] for n in ("count", "events", "recent", "totals")})

    def snap(ser):
        return write_versioned_snapshot(flink_snapshot(ser))

    ns = snap(VoidNamespaceSerializer())
    metas = [new_state_meta(n, k, state_value_snapshot(k, snap(v), snap(string) if k == "map" else None,
                                                      snap(long_) if n.startswith("ttl_") else None), ns)
             for n, (k, v) in kinds.items()]
    ours = new_keyed_header(snap(S.RowDataSerializer(parse_type("ROW<id INT, name STRING>"))), metas)
    theirs = stream.header
    theirs.states = [m for m in theirs.states if not m.is_timers]
    assert [m.name for m in theirs.states] == list(kinds)
    assert write_keyed_header(ours) == write_keyed_header(theirs)


def _streams(tmp_path, **kw):
    ns = write_versioned_snapshot(VoidNamespaceSerializer().snapshot_configuration())
    meta = new_state_meta("count", "value", write_versioned_snapshot(S.LongSerializer().snapshot_configuration()), ns)
    header = write_keyed_header(new_keyed_header(write_versioned_snapshot(S.IntSerializer().snapshot_configuration()),
                                                 [meta]))
    return SubtaskStreams(str(tmp_path), header, 16, 2, **kw)


def _rows(key_groups, subtasks):
    n = len(key_groups)
    return pa.RecordBatch.from_pydict({
        "subtask": pa.array(subtasks, pa.int32()), "key_group": pa.array(key_groups, pa.int32()),
        "state": pa.array([0] * n, pa.int32()), "key": [b"\x00\x00\x00\x01"] * n, "namespace": [b"\x00"] * n,
        "user_key": pa.nulls(n, pa.binary()), "index": pa.nulls(n, pa.int32()),
        "value": [b"\x00" * 8] * n, "ttl_timestamp": pa.nulls(n, pa.int64()), "timestamp": pa.nulls(n, pa.int64()),
        "value_bytes": pa.nulls(n, pa.binary()),
    }, schema=ROWS_SCHEMA)


def test_unsorted_rows_are_refused(tmp_path):
    with pytest.raises(FlinkSavepointError, match="not sorted"):
        list(_streams(tmp_path).write([_rows([3, 1], [0, 0])]))
    with pytest.raises(FlinkSavepointError, match="not sorted"):
        list(_streams(tmp_path).write([_rows([9], [1]), _rows([2], [0])]))
    with pytest.raises(FlinkSavepointError, match="outside"):
        list(_streams(tmp_path).write([_rows([2], [5])]))
    assert not [p for p in tmp_path.iterdir() if p.stat().st_size], "aborted streams leave no files"


def test_rows_split_across_batches_make_one_key_group(tmp_path):
    parts = list(_streams(tmp_path).write([_rows([1, 2], [0, 0]), _rows([2, 2, 9], [0, 0, 1])]))
    assert [(p.subtask, p.entries) for p in parts] == [(0, 4), (1, 1)]


def test_row_tagger_puts_rows_in_flinks_subtasks():
    batch = pa.RecordBatch.from_pydict({"key_group": pa.array([0, 42, 85, 86, 127], pa.int32()),
                                        "key": [b"k"] * 5, "namespace": [b"\x00"] * 5, "value": [b"v"] * 5})
    out = RowTagger(3, 128, 3)(batch)
    assert out.schema == ROWS_SCHEMA
    # computeKeyGroupRangeForOperatorIndex(128, 3, i): 0..42, 43..85, 86..127
    assert out.column("subtask").to_pylist() == [0, 0, 1, 2, 2]
    assert out.column("state").to_pylist() == [3] * 5


def test_bootstrap_refuses_bad_arguments(tmp_path):
    t = pa.table({"key": pa.array([1], pa.int32()), "value": pa.array([1], pa.int64())})
    st = {"count": StateData(t, S.LongSerializer())}
    with pytest.raises(UsageError, match="parallelism"):
        write_flink_savepoint(tmp_path / "a", operator="op", key_serializer=S.IntSerializer(), states=st,
                              max_parallelism=4, parallelism=8)
    with pytest.raises(UsageError, match="at least one state"):
        write_flink_savepoint(tmp_path / "b", operator="op", key_serializer=S.IntSerializer(), states={})
    with pytest.raises(UsageError, match="uid"):
        write_flink_savepoint(tmp_path / "c", operator="", key_serializer=S.IntSerializer(), states=st)
    write_flink_savepoint(tmp_path / "d", operator="op", key_serializer=S.IntSerializer(), states=st)
    with pytest.raises(SavepointError, match="already exists"):
        write_flink_savepoint(tmp_path / "d", operator="op", key_serializer=S.IntSerializer(), states=st)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    assert json.dumps(FlinkSavepoint(tmp_path / "d").inspect().to_json())  # reads back


def test_struct_fields_must_name_the_row_fields(tmp_path):
    """A misspelt struct field is refused instead of being written as null."""
    row = S.RowDataSerializer(parse_type("ROW<id INT, meta ROW<a BIGINT, b STRING>>"))
    ok = pa.table({"key": pa.array([1], pa.int32()), "value": [{"id": 1, "meta": {"a": 2, "b": "x"}}]})
    bad = pa.table({"key": pa.array([1], pa.int32()), "value": [{"id": 1, "meta": {"a": 2, "c": "x"}}]})
    write_flink_savepoint(tmp_path / "ok", operator="op", key_serializer=S.IntSerializer(),
                          states={"v": StateData(ok, row)})
    with pytest.raises(UsageError, match=r"value column 'value'\.meta"):
        write_flink_savepoint(tmp_path / "bad", operator="op", key_serializer=S.IntSerializer(),
                              states={"v": StateData(bad, row)})
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("kind,max_parallelism", [("value", 128), ("value", 4096), ("map", 128), ("map", 300)])
def test_columnar_entries_equal_the_per_row_path(kind, max_parallelism):
    """The column-wise composite keys and values are entries_from_batch's bytes (null map values too)."""
    from statemorph.savepoint.flink.assemble import columnar_entries
    from statemorph.savepoint.flink.keyed_writer import entries_from_batch
    from statemorph.savepoint.flink.layout import StateLayout

    ns = write_versioned_snapshot(VoidNamespaceSerializer().snapshot_configuration())
    top = S.MapSerializer(S.StringSerializer(), S.LongSerializer()) if kind == "map" else S.LongSerializer()
    meta = new_state_meta("s", kind, write_versioned_snapshot(flink_snapshot(top)), ns)
    header = new_keyed_header(write_versioned_snapshot(S.StringSerializer().snapshot_configuration()), [meta])
    layout = StateLayout(meta, header.key_serializer, max_parallelism, "t")
    kg = max_parallelism - 1
    n = 50
    cols = {"key_group": pa.array([kg] * n, pa.int32()),
            "key": [S.StringSerializer().to_bytes(f"k{i}") for i in range(n)], "namespace": [b"\x00"] * n,
            "value": [None if kind == "map" and i % 3 == 0 else S.LongSerializer().to_bytes(i) for i in range(n)]}
    if kind == "map":
        cols["user_key"] = [S.StringSerializer().to_bytes(f"u{i}") for i in range(n)]
    rows = pa.RecordBatch.from_pydict(cols)
    fast = columnar_entries(layout, kg, rows)
    slow = [(k, v) for _, k, v in entries_from_batch(layout, rows)]
    assert fast is not None and list(zip(*fast, strict=True)) == slow
    with pytest.raises(FlinkSavepointError, match="another key group"):
        columnar_entries(layout, kg - 1, rows)
