"""Reading and migrating a native RocksDB savepoint real Flink took, beside the canonical
savepoint of the same state and beside the floor, in one run (issue 21, item 5).

- **read native / read canonical**: every entry of the ``events`` state read as record batches
  (``read_flink_state``, 2 threads), decoded to typed columns and not (the binary columns: the
  reader alone), from the native savepoint (its RocksDB instances, ``reader=NATIVE.reader``) and
  from the canonical savepoint converted from it. The native read takes each column family from
  its SST files (``savepoint/flink/sst.py``); **read native through RocksDB** is the same read
  through RocksDB's iterator (``RocksInstance.rocks_state_runs``, rocksdict: four Python calls an
  entry), the path before the SST reader and the one a column family it does not read takes.
- **migrate native**: ``statemorph migrate`` of the native savepoint to the evolved Events type
  (plan on the native savepoint, staged canonical conversion, canonical migration, written and
  fsynced).
- **floor**: every RocksDB file (SST) the native savepoint's subtasks name read and written to a
  fresh file of the same bytes, fsynced: what any rewrite of the same data must at least do.
- **migrate to native beside its floors** (:func:`test_migrate_to_native_beside_the_floors`):
  ``statemorph migrate --to native`` (the migrated column family's SSTs written by the SST
  writer, ``savepoint/flink/sst_writer.py``) beside (a) the plain copy above and (b) the floor
  any SST rewrite pays: every data block of every SST file read, checked against its trailer,
  decompressed, compressed again and written with a new trailer (the ``sst_reframe`` kernel, one
  thread, as the migrate writes its SSTs), the files fsynced; taken in turn, round after round.

The pair (``STATEMORPH_NATIVE_BENCH_N`` keys, default 1,000,000) is taken once into
``benchmarks/.cache/native`` (git-ignored) by ``native_savepoint.build``. Needs Java and the built
ci/flink generator; skipped otherwise. Rounds: ``STATEMORPH_NATIVE_BENCH_ROUNDS`` (default 3).

Run: ``.venv/bin/python -m pytest benchmarks/test_native_read.py --benchmark-only``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from statemorph.cli.main import main
from statemorph.engine.flink_ranges import read_flink_state
from statemorph.engine.formats import NATIVE
from statemorph.kernels import KERNELS, abi
from statemorph.kernels.sstwrite_py import snappy_bound
from statemorph.savepoint.flink.handles import ByteStreamHandle
from statemorph.savepoint.flink.native import NativeSavepoint, RocksInstance
from statemorph.savepoint.flink.sst import open_table, table_tail

from . import native_savepoint as NS
from .conftest import record, record_external

N = int(os.environ.get("STATEMORPH_NATIVE_BENCH_N", "1000000"))
ROUNDS = int(os.environ.get("STATEMORPH_NATIVE_BENCH_ROUNDS", "3"))
CACHE = Path(__file__).resolve().parent / ".cache" / "native"
EVOLVED = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
           "appVersion STRING, sessionId BIGINT>>")


@pytest.fixture(scope="session")
def pair() -> NS.NativePair:
    driver = NS._driver()
    try:
        driver.classpath()
    except driver.FlinkUnavailable as e:
        pytest.skip(f"real Flink unavailable: {e}")
    return NS.build(CACHE, N)


def _count(path: Path, decode: bool, native: bool) -> int:
    kw: dict[str, Any] = {"reader": NATIVE.reader} if native else {}
    return sum(b.num_rows for b in read_flink_state(path, NS.UID, NS.STATE, decode=decode, threads=2, **kw))


def _record(name: str, benchmark: Any, n: int) -> None:
    stats = benchmark.stats.stats if hasattr(benchmark.stats, "stats") else benchmark.stats
    record(name, benchmark, n, best_s=round(float(stats.min), 3))


@pytest.mark.parametrize("decode", [True, False], ids=["decoded", "binary"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "canonical"])
def test_read_every_entry(benchmark: Any, pair: NS.NativePair, native: bool, decode: bool) -> None:
    path = pair.native if native else pair.canonical
    counts: list[int] = []
    benchmark.pedantic(lambda: counts.append(_count(path, decode, native)), rounds=ROUNDS, iterations=1,
                       warmup_rounds=1)
    assert set(counts) == {pair.n}, counts
    if native:
        read_from_sst_files(path)
    _record(f"native bench: read {'native' if native else 'canonical'} ({'decoded' if decode else 'binary'})",
            benchmark, pair.n)


@pytest.mark.parametrize("decode", [True, False], ids=["decoded", "binary"])
def test_read_every_entry_through_rocksdb(benchmark: Any, pair: NS.NativePair, decode: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RocksInstance, "state_runs", RocksInstance.rocks_state_runs)
    counts: list[int] = []
    benchmark.pedantic(lambda: counts.append(_count(pair.native, decode, True)), rounds=ROUNDS, iterations=1,
                       warmup_rounds=1)
    assert set(counts) == {pair.n}, counts
    _record(f"native bench: read native through RocksDB ({'decoded' if decode else 'binary'})", benchmark, pair.n)


ALTERNATING = [(True, False), (False, False), (True, True), (False, True)]
"""(native, decode) of the reads :func:`test_read_alternating` takes in turn."""


def test_read_alternating(benchmark: Any, pair: NS.NativePair) -> None:
    """The four reads of :func:`test_read_every_entry` one after another, round after round
    (3 x ROUNDS rounds after a warm-up): on a shared, loaded machine the load drifts over the
    minutes a block of rounds takes, so reads taken seconds apart compare more fairly. Records
    each read's best and median round and the median over rounds of native ÷ canonical."""
    times: dict[tuple[bool, bool], list[float]] = {v: [] for v in ALTERNATING}

    def one_round() -> None:
        for native, decode in ALTERNATING:
            t = time.perf_counter()
            assert _count(pair.native if native else pair.canonical, decode, native) == pair.n
            times[(native, decode)].append(time.perf_counter() - t)

    benchmark.pedantic(one_round, rounds=3 * ROUNDS, iterations=1, warmup_rounds=1)
    for (native, decode), ts in times.items():
        ts[:] = ts[1:]  # the warm-up round
        label = f"{'native' if native else 'canonical'} ({'decoded' if decode else 'binary'})"
        record_external(f"native bench: alternating read {label}", pair.n / min(ts), pair.n,
                        best_s=round(min(ts), 3), median_s=round(statistics.median(ts), 3))
    for decode in (False, True):
        ratios = [a / b for a, b in zip(times[(True, decode)], times[(False, decode)], strict=True)]
        record_external(f"native bench: alternating native ÷ canonical ({'decoded' if decode else 'binary'})",
                        float("nan"), pair.n, median_ratio=round(statistics.median(ratios), 3),
                        best_ratio=round(min(times[(True, decode)]) / min(times[(False, decode)]), 3))


def read_from_sst_files(path: Path) -> None:
    """Every state of the native savepoint is read from its SST files, none through RocksDB (so
    the native figures are the SST reader's), and gives exactly the runs of RocksDB's iterator
    (real Flink's files: ``events`` holds three overlapping SST files an instance at 1 M keys)."""
    sp = NativeSavepoint(path)
    for op, st, handle in sp.instances():
        with sp.open_instance(op, st, handle) as instance:
            for sid in instance.families:
                got = [(r.keys, r.values) for r in instance.state_runs(sid)]
                assert got == [(r.keys, r.values) for r in instance.rocks_state_runs(sid)]
            assert set(instance.readers.values()) == {"sst"}, instance.readers


def sst_files(path: Path) -> list[tuple[Path, str]]:
    """Every RocksDB file in a file of its own that the native savepoint's subtasks name: the
    file in the savepoint's directory and the name RocksDB gives it."""
    sp = NativeSavepoint(path)
    out = []
    for _, _, handle in sp.instances():
        for f in handle.files():
            h = f.handle
            if h is not None and not isinstance(h, ByteStreamHandle):
                out.append((Path(sp.files.resolve(sp.namer(h, str(path)))), f.local_name))
    return out


def copy_floor(files: list[tuple[Path, str]], dst: Path) -> int:
    """Read every file and write its bytes to a fresh file in ``dst``, fsynced; the bytes copied."""
    dst.mkdir()
    total = 0
    for i, (f, name) in enumerate(files):
        data = f.read_bytes()
        with open(dst / f"{i}-{name}", "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        total += len(data)
    return total


def _rounds(benchmark: Any, fn: Any, dst: Path) -> None:
    def setup() -> None:
        shutil.rmtree(dst, ignore_errors=True)

    benchmark.pedantic(fn, setup=setup, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    shutil.rmtree(dst, ignore_errors=True)


def test_floor_read_and_write_the_ssts(benchmark: Any, pair: NS.NativePair, tmp_path: Path) -> None:
    files = sst_files(pair.native)
    assert any(name.endswith(".sst") for _, name in files), files
    sizes: list[int] = []
    _rounds(benchmark, lambda: sizes.append(copy_floor(files, tmp_path / "floor")), tmp_path / "floor")
    record("native bench: floor (read + write the SSTs)", benchmark, pair.n, file_bytes=sizes[0],
           best_s=round(float(benchmark.stats.stats.min), 3))


def test_migrate_native(benchmark: Any, pair: NS.NativePair, tmp_path: Path) -> None:
    schema = tmp_path / "v2.toml"
    schema.write_text(f'[operators."{NS.UID}".states.{NS.STATE}]\ntype = "{EVOLVED.replace(chr(34), "")}"\n',
                      encoding="utf-8")
    dst = tmp_path / "migrated"
    codes: list[int] = []
    _rounds(benchmark, lambda: codes.append(main(["migrate", str(pair.native), "--schema", str(schema),
                                                   "--out", str(dst), "-q"])), dst)
    assert set(codes) == {0}, codes
    _record("native bench: migrate native (statemorph migrate)", benchmark, pair.n)


def rewrite_floor(files: list[tuple[Path, str]], dst: Path) -> int:
    """Floor (b): every SST file's data blocks read, checked, decompressed, compressed again and
    written with new trailers (``sst_reframe``), its index, properties and footer copied, the
    file fsynced; other RocksDB files copied. The bytes written."""
    dst.mkdir()
    total = 0
    scratch = np.empty(1 << 16, np.uint8)
    out = np.empty(1 << 20, np.uint8)
    for i, (f, name) in enumerate(files):
        with open(dst / f"{i}-{name}", "xb") as w:
            if not name.endswith(".sst"):
                data = f.read_bytes()
                w.write(data)
                total += len(data)
            else:
                t = open_table(f)
                try:
                    size = len(t.data)
                    compress = 1 if b"Snappy" == table_tail(t.data, size, name)[3].get(b"rocksdb.compression") else 0
                    nb, at = len(t.block_pos), 0
                    while at < nb:
                        status, at2, n, need = KERNELS.sst_reframe(t.data, t.block_pos, t.block_len, at, nb, t.checksum,
                                                                   compress, 896, scratch, out)
                        w.write(memoryview(out)[:n])
                        total += n
                        if status == abi.SST_CAPACITY:
                            scratch = np.empty(max(need, len(scratch)), np.uint8)
                            out = np.empty(max(len(out), snappy_bound(len(scratch)) + 64), np.uint8)
                        else:
                            assert status == abi.SST_OK, status
                        at = at2
                    tail = int(t.block_pos[-1] + t.block_len[-1] + 5) if nb else 0
                    w.write(t.data[tail:])
                    total += size - tail
                finally:
                    t.close()
            w.flush()
            os.fsync(w.fileno())
    return total


def test_migrate_to_native_beside_the_floors(benchmark: Any, pair: NS.NativePair, tmp_path: Path) -> None:
    """``migrate --to native`` and the two floors, one after another, round after round (2 x
    ROUNDS rounds after a warm-up): records each one's best and median round and the medians
    over rounds of migrate ÷ floor (a) and ÷ floor (b)."""
    files = sst_files(pair.native)
    schema = tmp_path / "v2.toml"
    schema.write_text(f'[operators."{NS.UID}".states.{NS.STATE}]\ntype = "{EVOLVED.replace(chr(34), "")}"\n',
                      encoding="utf-8")
    names = ("floor (a): copy the SST bytes", "floor (b): rewrite every SST block", "migrate --to native")
    times: dict[str, list[float]] = {n: [] for n in names}
    codes: list[int] = []

    def one_round() -> None:
        for name, fn in zip(names, (
                lambda d: copy_floor(files, d), lambda d: rewrite_floor(files, d),
                lambda d: codes.append(main(["migrate", str(pair.native), "--schema", str(schema), "--out", str(d),
                                             "--to", "native", "-q"]))), strict=True):
            dst = tmp_path / "out"
            shutil.rmtree(dst, ignore_errors=True)
            t = time.perf_counter()
            fn(dst)
            times[name].append(time.perf_counter() - t)
            shutil.rmtree(dst, ignore_errors=True)

    benchmark.pedantic(one_round, rounds=2 * ROUNDS, iterations=1, warmup_rounds=1)
    assert set(codes) == {0}, codes
    for name, ts in times.items():
        ts[:] = ts[1:]  # the warm-up round
        record_external(f"native bench: {name}", pair.n / min(ts), pair.n, best_s=round(min(ts), 3),
                        median_s=round(statistics.median(ts), 3))
    m = times["migrate --to native"]
    for floor in names[:2]:
        ratios = [a / b for a, b in zip(m, times[floor], strict=True)]
        record_external(f"native bench: migrate --to native ÷ {floor[:9]}", float("nan"), pair.n,
                        median_ratio=round(statistics.median(ratios), 2),
                        best_ratio=round(min(m) / min(times[floor]), 2))
