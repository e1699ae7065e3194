"""RocksDB backend: restore, migrate (Events old → new RowData schema) and savepoint, per-entry
reference path (``bulk=False``) against the bulk path, plus the two ways of writing into RocksDB
(``WriteBatch`` vs SST files + ingestion). Numbers are reported, never asserted.

Run: ``.venv/bin/python -m pytest benchmarks/test_state_backend_bulk.py --benchmark-only``.
``STATEMORPH_STATE_BENCH_N`` sets the entry count (default 200,000)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import rocksdict

from statemorph import serializers
from statemorph.engine.local import write_state
from statemorph.state import EmbeddedRocksDBStateBackend, ValueStateDescriptor
from statemorph.state import rocksdb_bulk as bulk
from statemorph.typeutils import write_versioned_snapshot

from .conftest import NEW, OLD, make_struct, record

N = int(os.environ.get("STATEMORPH_STATE_BENCH_N", "200000"))
MODES = {"per-entry": False, "bulk": True}
ROUNDS = {"per-entry": 1, "bulk": 3}


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="statemorph-state-bench-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def savepoint(workdir: Path) -> Path:
    struct = make_struct(N)
    table = pa.table({"key": struct.field("eventId"), "value": struct})
    sp = workdir / "events-v1"
    write_state(sp, table, name="events", key_serializer=serializers.LongSerializer(),
                value_serializer=serializers.RowDataSerializer(OLD), max_parallelism=128)
    return sp


class Dirs:
    """Fresh (not yet existing) database / savepoint paths for each round."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def next(self, what: str) -> Path:
        return Path(tempfile.mkdtemp(dir=self.root)) / what


@pytest.mark.parametrize("mode", MODES)
def test_restore(benchmark: Any, savepoint: Path, workdir: Path, mode: str) -> None:
    dirs = Dirs(workdir)

    def restore(db: Path) -> int:
        with EmbeddedRocksDBStateBackend.restore(savepoint, db_path=db, bulk=MODES[mode]) as b:
            return len(b.state_names())

    out = benchmark.pedantic(restore, setup=lambda: ((dirs.next("restore"),), {}), rounds=ROUNDS[mode],
                             iterations=1)
    assert out == 1
    record(f"rocksdb restore {mode}", benchmark, N)


@pytest.mark.parametrize("mode", MODES)
def test_migrate(benchmark: Any, savepoint: Path, workdir: Path, mode: str) -> None:
    dirs = Dirs(workdir)
    new = serializers.RowDataSerializer(NEW)

    def setup() -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (EmbeddedRocksDBStateBackend.restore(savepoint, db_path=dirs.next("migrate"), bulk=MODES[mode]),), {}

    def migrate(b: EmbeddedRocksDBStateBackend) -> bytes:
        with b:
            b.get_state(ValueStateDescriptor("events", new))
            return b._handles["events"].snapshot_bytes["value_serializer"]

    out = benchmark.pedantic(migrate, setup=setup, rounds=ROUNDS[mode], iterations=1)
    assert out == write_versioned_snapshot(new.snapshot_configuration())
    record(f"rocksdb migrate {mode}", benchmark, N)


@pytest.mark.parametrize("mode", MODES)
def test_savepoint(benchmark: Any, savepoint: Path, workdir: Path, mode: str) -> None:
    dirs = Dirs(workdir)
    backend = EmbeddedRocksDBStateBackend.restore(savepoint, db_path=dirs.next("sp-db"), bulk=MODES[mode])
    try:
        out = benchmark.pedantic(backend.savepoint, setup=lambda: ((dirs.next("sp"),), {}),
                                 rounds=ROUNDS[mode], iterations=1)
        assert out.is_dir()
    finally:
        backend.close()
    record(f"rocksdb savepoint {mode}", benchmark, N)


# ----------------------------------------------------------------- WriteBatch vs SST ingestion
@pytest.fixture(scope="module")
def sorted_pairs() -> tuple[pa.Array, pa.Array]:
    keys = bulk.concat(bulk.big_endian_fixed(np.zeros(N, dtype=np.int64), 1),
                       bulk.big_endian_fixed(np.arange(N, dtype=np.int64), 4))
    values = pa.array(np.full(N, b"v" * 60, dtype="S60"), pa.binary())
    return keys, values


def _db(path: Path) -> tuple[Any, Any]:
    db = rocksdict.Rdict(str(path), bulk.raw_options())
    return db, db.create_column_family("c", bulk.raw_options())


@pytest.mark.parametrize("how", ["write_batch", "sst_ingest"])
def test_rocksdb_write_path(benchmark: Any, sorted_pairs: tuple[pa.Array, pa.Array], workdir: Path,
                            how: str) -> None:
    dirs = Dirs(workdir)
    keys, values = sorted_pairs

    def write(path: Path) -> None:
        db, cf = _db(path)
        try:
            for s in range(0, N, bulk.DEFAULT_CHUNK_ROWS):
                k, v = keys.slice(s, bulk.DEFAULT_CHUNK_ROWS), values.slice(s, bulk.DEFAULT_CHUNK_ROWS)
                if how == "write_batch":
                    wb = rocksdict.WriteBatch(raw_mode=True)
                    wb.set_default_column_family(db.get_column_family_handle("c"))
                    for kk, vv in zip(k.to_pylist(), v.to_pylist(), strict=True):
                        wb.put(kk, vv)
                    db.write(wb)
                else:
                    if s == 0:
                        loader = bulk.SstLoader(cf, path)
                    loader.add(k, v)
            if how != "write_batch":
                loader.ingest()
            db.flush()
        finally:
            del cf
            db.close()

    benchmark.pedantic(write, setup=lambda: ((dirs.next(how),), {}), rounds=3, iterations=1)
    record(f"rocksdb write {how}", benchmark, N)
