"""Which thread does what in the Flink rewrite (issue 22): the caller of ``migrated_blocks`` (the
thread that writes the stream) only receives finished bytes; every per-key-group step (read,
decompress, scan, cut, gather + migrate, rebuild, compress) runs on the workers, no other thread
cuts for them, the pieces of one large key group are cut by different workers, and the bytes
written do not depend on the number of workers."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from savepoint.flink.flink_cases import EVOLVED_EVENTS, ROOT
from savepoint.flink.format_helpers import cases, state_operator

from statemorph.engine import migrate_flink_savepoint
from statemorph.errors import OutputError
from statemorph.savepoint import storage
from statemorph.savepoint.flink import FlinkSavepoint, bulk_blocks, key_group_scan
from statemorph.savepoint.flink.bulk_blocks import BULK_KINDS, migrated_blocks
from statemorph.savepoint.flink.keyed_writer import KeyedStreamWriter
from statemorph.savepoint.flink.layout import StateLayout
from statemorph.serializers import RowDataSerializer
from statemorph.state import ValueStateDescriptor


def _grow(values: pa.Array) -> pa.Array:
    return pa.array([v[::-1] + b"!" for v in values.to_pylist()], pa.binary())


def _compressed_case() -> Path:
    for case in cases():
        sp = FlinkSavepoint(case / "savepoint")
        if any(s.header.compressed for _, s in sp.keyed_streams(sp.operator(state_operator(sp)))):
            return case
    pytest.skip("no compressed case")


@pytest.mark.parametrize("slice_bytes", [1 << 30, 100], ids=["whole", "sliced"])
def test_the_writing_thread_only_receives_finished_bytes(monkeypatch: pytest.MonkeyPatch, slice_bytes: int) -> None:
    ran: dict[str, set[int]] = defaultdict(set)
    names: dict[str, set[str]] = defaultdict(set)

    def traced(step: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            ran[step].add(threading.get_ident())
            names[step].add(threading.current_thread().name)
            return fn(*args, **kwargs)
        return wrapper

    for step, owner, name in [("read", bulk_blocks, "read_key_group_view"), ("scan", bulk_blocks, "scan_key_group"),
                              ("slice", key_group_scan.KeyGroupCut, "slices_of"), ("rebuild", bulk_blocks, "_rebuild"),
                              ("compress", bulk_blocks, "frame_key_group"),
                              ("decompress", key_group_scan, "unframe_into")]:
        monkeypatch.setattr(owner, name, traced(step, getattr(owner, name)))
    migrate = traced("migrate", _grow)
    case = _compressed_case()
    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    writer = threading.get_ident()
    blocks = 0
    for _, stream in sp.keyed_streams(op):
        states = {i: (StateLayout(m, stream.header.key_serializer, op.max_parallelism, "test"), migrate)
                  for i, m in enumerate(stream.header.states) if m.kind in BULK_KINDS}
        for _ in migrated_blocks(stream, states, batch_values=50, workers=2, slice_bytes=slice_bytes):
            blocks += 1
    assert blocks
    steps = {"migrate", "rebuild", "compress"} | ({"read", "scan"} if slice_bytes > 1 << 20 else {"slice"})
    assert steps <= ran.keys(), ran.keys()
    assert all(writer not in threads for threads in ran.values()), {s: writer in t for s, t in ran.items()}
    # the workers do it all: no thread of its own reads, decodes or cuts ahead of them
    assert {n for step in ran for n in names[step]} <= names["migrate"], names


def _rewrite(stream: Any, states: dict[int, tuple[StateLayout, Any]], workers: int, slice_bytes: int) -> bytes:
    return b"".join(bytes(data) for _, data in migrated_blocks(stream, states, batch_values=50, workers=workers,
                                                               slice_bytes=slice_bytes))


def _case(compressed: bool) -> Path:
    for case in cases():
        sp = FlinkSavepoint(case / "savepoint")
        if any(s.header.compressed == compressed for _, s in sp.keyed_streams(sp.operator(state_operator(sp)))):
            return case
    pytest.skip(f"no case with compressed={compressed}")


@pytest.mark.parametrize("compressed", [True, False], ids=["snappy", "raw"])
def test_the_pieces_of_one_key_group_are_cut_by_different_workers(monkeypatch: pytest.MonkeyPatch,
                                                                  compressed: bool) -> None:
    """The largest key group of each stream in about eight pieces (a compressed piece is one
    Snappy chunk at least: these key groups are one piece, and tests/savepoint/flink/
    test_key_group_slices.py cuts a compressed one of many pieces on several workers), two
    workers: both cut pieces of it, and what they write is what one worker writes, byte for byte
    (and what four write)."""
    case = _case(compressed)
    slices_of = key_group_scan.KeyGroupCut.slices_of
    cutters: dict[int, set[int]] = defaultdict(set)

    def traced(self: key_group_scan.KeyGroupCut, i: int, scratch: Any) -> Any:
        cutters[self.ext.key_group].add(threading.get_ident())
        time.sleep(0.002)  # the other worker takes the next piece meanwhile
        return slices_of(self, i, scratch)

    monkeypatch.setattr(key_group_scan.KeyGroupCut, "slices_of", traced)
    sp = FlinkSavepoint(case / "savepoint")
    op = sp.operator(state_operator(sp))
    for _, stream in sp.keyed_streams(op):  # a stream's file is open while its turn lasts
        states = {i: (StateLayout(m, stream.header.key_serializer, op.max_parallelism, "test"), _grow)
                  for i, m in enumerate(stream.header.states) if m.kind in BULK_KINDS}
        largest = max(stream.extents, key=lambda e: e.end - e.offset)
        slice_bytes = max(16, (largest.end - largest.offset) // 8)
        one = _rewrite(stream, states, 1, slice_bytes)
        cutters.clear()
        assert _rewrite(stream, states, 2, slice_bytes) == one
        assert len(cutters[largest.key_group]) >= (1 if compressed else 2), cutters
        assert _rewrite(stream, states, 4, slice_bytes) == one


def _bench_builder() -> Any:
    """benchmarks/flink_savepoint.py, loaded by path (benchmarks is not an installed package)."""
    name = "statemorph_bench_flink_savepoint"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "flink_savepoint.py")
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


@pytest.mark.parametrize("compressed", [True, False], ids=["snappy", "raw"])
def test_a_migrated_savepoint_is_the_same_bytes_at_1_2_and_4_threads(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path, compressed: bool) -> None:
    """The benchmark's Events savepoint (30,000 keys, two subtask files), its key groups cut into
    pieces of 4 KiB: every file written is the same at 1, 2 and 4 worker threads."""
    builder = _bench_builder()
    built = builder.build(tmp_path / "cache", 30_000, compressed)
    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 4096)
    descriptors = {builder.UID: [ValueStateDescriptor(builder.STATE, RowDataSerializer(EVOLVED_EVENTS))]}
    outputs = []
    for threads in (1, 2, 4):
        dst = tmp_path / f"out-{threads}"
        assert migrate_flink_savepoint(built.path, dst, descriptors, threads=threads).rows == 30_000
        outputs.append({p.name: p.read_bytes() for p in dst.iterdir()})
    assert outputs[0] == outputs[1] == outputs[2]


def test_the_workers_write_the_key_groups_at_their_places(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The thread that keeps a stream's order writes only the stream's header: every key group
    is written (``pwrite``) by a worker, at its place, and the file is what the writer thread
    alone writes to an object store (front to back, ``add_encoded_key_group``). The two streams
    are rewritten at once, each by a thread of its own, on one set of workers."""
    builder = _bench_builder()
    built = builder.build(tmp_path / "cache", 20_000, True)
    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 4096)
    descriptors = {builder.UID: [ValueStateDescriptor(builder.STATE, RowDataSerializer(EVOLVED_EVENTS))]}
    placed = migrate_flink_savepoint(built.path, tmp_path / "placed", descriptors, threads=2)
    monkeypatch.setattr(KeyedStreamWriter, "placed", lambda self: None)  # as for an object store
    in_order = migrate_flink_savepoint(built.path, tmp_path / "in-order", descriptors, threads=2)
    assert placed.rows == in_order.rows == 20_000
    monkeypatch.undo()
    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 4096)
    writes: list[tuple[str, str, int]] = []
    pwrite, write = os.pwrite, storage.NewFile.write

    def traced_pwrite(fd: int, data: Any, offset: int) -> int:
        writes.append(("pwrite", threading.current_thread().name, memoryview(data).nbytes))
        return pwrite(fd, data, offset)

    def traced_write(self: storage.NewFile, data: Any) -> None:
        writes.append(("write", threading.current_thread().name, memoryview(data).nbytes))
        write(self, data)

    monkeypatch.setattr(os, "pwrite", traced_pwrite)
    monkeypatch.setattr(storage.NewFile, "write", traced_write)
    migrate_flink_savepoint(built.path, tmp_path / "traced", descriptors, threads=2)
    me = threading.current_thread().name
    assert sum(n for how, t, n in writes if how == "pwrite" and t.startswith("statemorph-worker")) > 100_000
    headers = [t for how, t, _ in writes if how == "write" and t.startswith("statemorph-stream")]
    assert len(headers) == 2  # the two streams' headers, nothing else, by the threads keeping their order
    assert not [n for how, t, n in writes if how == "pwrite" and t.startswith("statemorph-stream")]
    assert sum(n for _, t, n in writes if t == me) < 1024  # the staging directory's claim note
    for name in (p.name for p in (tmp_path / "in-order").iterdir()):
        assert (tmp_path / "placed" / name).read_bytes() == (tmp_path / "in-order" / name).read_bytes()
        assert (tmp_path / "traced" / name).read_bytes() == (tmp_path / "in-order" / name).read_bytes()


def test_the_next_stream_starts_before_the_one_before_it_ends(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two subtask files, two threads: the second file is opened (and its key groups handed to
    the workers) while the first is still being written, so no worker waits between files; the
    bytes are those of one stream at a time (one thread)."""
    builder = _bench_builder()
    built = builder.build(tmp_path / "cache", 20_000, True)
    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 4096)
    descriptors = {builder.UID: [ValueStateDescriptor(builder.STATE, RowDataSerializer(EVOLVED_EVENTS))]}
    events: list[tuple[str, str]] = []
    init, finish = KeyedStreamWriter.__init__, KeyedStreamWriter.finish

    def traced_init(self: KeyedStreamWriter, *args: Any, **kwargs: Any) -> None:
        events.append(("open", str(args[1])))
        init(self, *args, **kwargs)

    def traced_finish(self: KeyedStreamWriter, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.2)  # the first stream's end comes late: the other is under way by then
        events.append(("finish", self.name))
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(KeyedStreamWriter, "__init__", traced_init)
    monkeypatch.setattr(KeyedStreamWriter, "finish", traced_finish)
    assert migrate_flink_savepoint(built.path, tmp_path / "two", descriptors, threads=2).rows == 20_000
    assert [e for e, _ in events] == ["open", "open", "finish", "finish"], events
    monkeypatch.undo()
    migrate_flink_savepoint(built.path, tmp_path / "one", descriptors, threads=1)
    for p in (tmp_path / "one").iterdir():
        assert (tmp_path / "two" / p.name).read_bytes() == p.read_bytes()


def test_a_failing_stream_stops_the_one_beside_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The first stream fails while the second is under way: the run raises the first stream's
    error without waiting for the second to finish its file, and writes nothing."""
    builder = _bench_builder()
    built = builder.build(tmp_path / "cache", 20_000, True)
    monkeypatch.setattr(key_group_scan, "SLICE_BYTES", 4096)
    descriptors = {builder.UID: [ValueStateDescriptor(builder.STATE, RowDataSerializer(EVOLVED_EVENTS))]}
    first = sorted(FlinkSavepoint(built.path).directory.relative_name(s.handle.delegate)
                   for _, s in FlinkSavepoint(built.path).keyed_streams(FlinkSavepoint(built.path).operator(
                       builder.UID)))[0]
    init, frame = KeyedStreamWriter.__init__, bulk_blocks.frame_key_group

    def failing_init(self: KeyedStreamWriter, *args: Any, **kwargs: Any) -> None:
        if str(args[1]) == first:
            time.sleep(0.3)  # the other stream is under way
            raise OSError(28, "no space left (injected)")
        init(self, *args, **kwargs)

    def slow_frame(data: Any) -> Any:
        time.sleep(0.01)  # the other stream alone would take seconds
        return frame(data)

    monkeypatch.setattr(KeyedStreamWriter, "__init__", failing_init)
    monkeypatch.setattr(bulk_blocks, "frame_key_group", slow_frame)
    t0 = time.perf_counter()
    with pytest.raises(OutputError, match="no space left"):
        migrate_flink_savepoint(built.path, tmp_path / "out", descriptors, threads=2)
    assert time.perf_counter() - t0 < 2.0
    assert not (tmp_path / "out").exists()
