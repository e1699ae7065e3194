"""The savepoint directory format: writer, reader, checksums, atomicity, streaming part files."""

import json
import os

import pyarrow as pa
import pytest

from statemorph.errors import SavepointError
from statemorph.savepoint import (
    METADATA_FILE,
    SavepointWriter,
    iter_state_batches,
    read_metadata,
    read_state_table,
    remove_stale_temp_dirs,
    state_files,
    state_schema,
    verify_savepoint,
)
from statemorph.serializers import IntSerializer, LongSerializer, StringSerializer
from statemorph.state import StateKind, VoidNamespaceSerializer
from statemorph.typeutils import read_versioned_snapshot

S, I, L = StringSerializer(), IntSerializer(), LongSerializer()


def value_rows(n, start=0):
    return pa.table({
        "key_group": pa.array([i % 128 for i in range(start, start + n)], pa.int32()),
        "key": [I.to_bytes(i) for i in range(start, start + n)],
        "namespace": [b"\x00"] * n,
        "value": [L.to_bytes(i * 10) for i in range(start, start + n)],
    })


def test_roundtrip_metadata_and_rows(tmp_path):
    sp = tmp_path / "sp"
    with SavepointWriter(sp, max_parallelism=128, key_serializer=I, rows_per_file=4) as w:
        s = w.add_state("counts", "value", value_serializer=L)
        s.write(value_rows(6))
        s.write(value_rows(3, start=6).to_batches()[0])
        m = w.add_state("m", StateKind.MAP, value_serializer=S, user_key_serializer=I)
        m.write_rows([(1, I.to_bytes(1), b"\x00", I.to_bytes(5), None), (2, I.to_bytes(2), b"\x00", b"", b"x")])
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
    meta = read_metadata(sp)
    assert meta.max_parallelism == 128
    assert list(meta.states) == ["counts", "m"]
    counts = meta.state("counts")
    assert counts.kind is StateKind.VALUE and counts.rows == 9
    assert [f.rows for f in counts.files] == [4, 4, 1]  # rotated every 4 rows
    assert read_versioned_snapshot(counts.value_serializer) == L.snapshot_configuration()
    assert counts.snapshot("namespace_serializer") == VoidNamespaceSerializer().snapshot_configuration()
    assert meta.key_snapshot().restore_serializer() == I
    table = read_state_table(sp, "counts")
    assert table.schema == state_schema("value")
    assert table.equals(pa.concat_tables([value_rows(6), value_rows(3, 6)]).cast(state_schema("value")))
    mt = read_state_table(sp, "m")
    assert mt.column("value").to_pylist() == [None, b"x"]
    files = state_files(sp, "counts")
    assert [f.name for f in files] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert all(f.is_file() for f in files)
    assert verify_savepoint(sp).states.keys() == meta.states.keys()


def test_key_group_range_filter(tmp_path):
    sp = tmp_path / "sp"
    with SavepointWriter(sp, max_parallelism=128, key_serializer=I) as w:
        w.write_state("v", "value", value_rows(300), value_serializer=L)
    got = read_state_table(sp, "v", key_group_range=(10, 19))
    assert set(got.column("key_group").to_pylist()) == set(range(10, 20))
    assert got.num_rows == sum(1 for i in range(300) if 10 <= i % 128 <= 19)
    assert sum(b.num_rows for b in iter_state_batches(sp, "v", batch_size=7)) == 300


def test_exception_inside_writer_leaves_nothing(tmp_path):
    sp = tmp_path / "sp"
    with pytest.raises(RuntimeError):
        with SavepointWriter(sp, max_parallelism=128, key_serializer=I) as w:
            w.add_state("v", "value", value_serializer=L).write(value_rows(5))
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_existing_path_is_never_overwritten(tmp_path):
    sp = tmp_path / "sp"
    sp.mkdir()
    with pytest.raises(SavepointError, match="already exists"):
        SavepointWriter(sp, max_parallelism=128, key_serializer=I)
    assert list(sp.iterdir()) == []


def test_schema_and_key_group_validation(tmp_path):
    with SavepointWriter(tmp_path / "sp", max_parallelism=8, key_serializer=I) as w:
        s = w.add_state("v", "value", value_serializer=L)
        with pytest.raises(SavepointError, match="columns"):
            s.write(pa.table({"key": [b"x"]}))
        with pytest.raises(SavepointError, match="key groups"):
            s.write(value_rows(20))  # key groups up to 19 >= 8
        bad = value_rows(1).set_column(3, "value", pa.array([None], pa.binary()))
        with pytest.raises(SavepointError, match="nulls"):
            s.write(bad)
        large = value_rows(2).cast(pa.schema([("key_group", pa.int64()), ("key", pa.large_binary()),
                                              ("namespace", pa.binary()), ("value", pa.large_binary())]))
        s.write(large)  # cast to the savepoint schema
        with pytest.raises(SavepointError, match="already"):
            w.add_state("v", "value", value_serializer=L)
        with pytest.raises(ValueError, match="user key"):
            w.add_state("mm", "map", value_serializer=L)
    assert read_metadata(tmp_path / "sp").state("v").rows == 2


def test_list_state_schema_has_index():
    assert state_schema("list").names == ["key_group", "key", "namespace", "index", "value"]
    assert state_schema("map").names == ["key_group", "key", "namespace", "user_key", "value"]
    assert state_schema("map").field("value").nullable


def test_metadata_is_plain_json_with_checksums(tmp_path):
    sp = tmp_path / "sp"
    with SavepointWriter(sp, max_parallelism=4, key_serializer=I, properties={"job": "x"}) as w:
        w.write_state("v", "value", value_rows(3).set_column(0, "key_group", pa.array([0, 1, 2], pa.int32())),
                      value_serializer=L)
    doc = json.loads((sp / METADATA_FILE).read_text())
    assert doc["format"] == "statemorph-savepoint" and doc["format_version"] == 1
    assert doc["properties"] == {"job": "x"}
    entry = doc["states"][0]["files"][0]
    assert len(entry["sha256"]) == 64 and entry["rows"] == 3
    assert entry["size"] == os.path.getsize(sp / entry["path"])


def test_remove_stale_temp_dirs(tmp_path):
    (tmp_path / ".sp.tmp-abc").mkdir()
    (tmp_path / "keep").mkdir()
    removed = remove_stale_temp_dirs(tmp_path, "sp")
    assert [p.name for p in removed] == [".sp.tmp-abc"]
    assert [p.name for p in tmp_path.iterdir()] == ["keep"]


def test_add_file_adopts_finished_parquet_files(tmp_path):
    src = tmp_path / "src"
    with SavepointWriter(src, max_parallelism=128, key_serializer=I, rows_per_file=5) as w:
        w.write_state("v", "value", value_rows(12), value_serializer=L)
    files = state_files(src, "v")
    dst = tmp_path / "dst"
    with SavepointWriter(dst, max_parallelism=128, key_serializer=I) as w:
        s = w.add_state("v", "value", value_serializer=L)
        s.write(value_rows(2, start=100))  # an open part is closed before the adopted file
        for f in files:
            s.add_file(f)
        with pytest.raises(SavepointError, match="rows"):
            s.add_file(files[0], rows=99)
        bad = tmp_path / "bad.parquet"
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"x": [1]}), bad)
        with pytest.raises(SavepointError, match="do not match"):
            s.add_file(bad)
    meta = verify_savepoint(dst)
    assert [f.rows for f in meta.state("v").files] == [2, 5, 5, 2]
    assert read_state_table(dst, "v").num_rows == 14
    assert [f.read_bytes() for f in files] == [p.read_bytes() for p in state_files(dst, "v")[1:]]
