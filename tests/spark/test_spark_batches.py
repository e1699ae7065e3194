"""What Spark hands the UDFs: large_binary, read-only IPC buffers, slices, empty and odd-sized
batches; and what it ships to executors: pickles of snapshot bytes only. No Spark session needed."""

from __future__ import annotations

import os
import pickle
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemorph import serializers as S
from statemorph.cli.demo import NEW_TYPE, OLD_TYPE
from statemorph.engine.batches import ColumnDecoder, ColumnMigrator
from statemorph.engine.spark import ensure_python_env
from statemorph.migration import migrate_bytes

OLD, NEW = S.RowDataSerializer(OLD_TYPE), S.RowDataSerializer(NEW_TYPE)
SNAP = OLD.snapshot_configuration()


def _values(n):
    return [OLD.to_bytes((i, (i % 9, 1_700_000_000_000 + i, "x" * (i % 13)))) for i in range(n)]


def _via_ipc(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Round-trip through Arrow IPC as Spark does: buffers become read-only views of one blob."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return next(iter(pa.ipc.open_stream(pa.BufferReader(sink.getvalue()))))


@settings(max_examples=25)
@given(n=st.integers(0, 300), start=st.integers(0, 50), large=st.booleans(), with_nulls=st.booleans())
def test_migrator_accepts_what_spark_hands_over(n, start, large, with_nulls):
    vals = _values(n + start)
    if with_nulls and vals:
        vals[len(vals) // 2] = None
    typ = pa.large_binary() if large else pa.binary()
    batch = pa.RecordBatch.from_arrays([pa.array(range(len(vals)), pa.int64()), pa.array(vals, typ)],
                                       names=["key", "value"]).slice(start)
    batch = _via_ipc(batch)
    out = ColumnMigrator(SNAP, NEW)(batch)
    assert out.schema.field("value").type == typ  # the declared output type is kept
    assert out.column("key").equals(batch.column("key"))
    expected = [None if v is None else migrate_bytes(SNAP, NEW, v) for v in vals[start:]]
    assert out.column("value").to_pylist() == expected


def test_map_batches_streams_every_batch():
    batches = [pa.RecordBatch.from_arrays([pa.array(_values(k), pa.binary())], names=["value"]) for k in (0, 1, 7)]
    outs = list(ColumnMigrator(SNAP, NEW).map_batches(iter(batches)))
    assert [b.num_rows for b in outs] == [0, 1, 7]


def test_missing_column_is_a_clear_error():
    from statemorph.errors import StatemorphError

    batch = pa.RecordBatch.from_arrays([pa.array([1])], names=["v"])
    with pytest.raises(StatemorphError, match="no column 'value'"):
        ColumnMigrator(SNAP, NEW)(batch)
    with pytest.raises(StatemorphError, match="must be binary"):
        ColumnMigrator(SNAP, NEW, "v")(batch)


def test_pickles_carry_snapshot_bytes_not_objects():
    m = ColumnMigrator(SNAP, NEW)
    d = ColumnDecoder(NEW)
    for obj in (m, d):
        state = obj.__getstate__()
        assert all(isinstance(v, (bytes, str, int, type(None))) for v in state.values())
    m2 = pickle.loads(pickle.dumps(m))
    batch = pa.RecordBatch.from_arrays([pa.array(_values(3), pa.binary())], names=["value"])
    assert m2(batch).equals(m(batch))
    d2 = pickle.loads(pickle.dumps(d))
    assert d2(m2(batch)).column("value").to_pylist() == d(m(batch)).column("value").to_pylist()


def test_python_env_in_local_mode(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    ensure_python_env("yarn")
    assert "PYSPARK_PYTHON" not in os.environ
    ensure_python_env("local[2]")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/py")
    ensure_python_env("local[2]")
    assert os.environ["PYSPARK_PYTHON"] == "/opt/py"
