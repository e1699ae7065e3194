"""Which thread does what in the Flink rewrite (issue 22): the caller of ``migrated_blocks`` (the
thread that writes the stream) only receives finished bytes; every per-key-group step (read,
decompress, scan, gather + migrate, rebuild, compress) runs elsewhere, and the Snappy decoding of a
sliced key group's pieces is not left to the one thread that cuts the slices."""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from savepoint.flink.format_helpers import cases, state_operator

from statemorph.savepoint.flink import FlinkSavepoint, bulk_blocks, key_group_scan
from statemorph.savepoint.flink.bulk_blocks import BULK_KINDS, migrated_blocks
from statemorph.savepoint.flink.layout import StateLayout


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
                              ("slice", bulk_blocks, "scan_slices"), ("rebuild", bulk_blocks, "_rebuild"),
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
    # a sliced key group is cut on the prefetch thread, but its pieces are decoded by a pool ahead of it
    assert not any(n.startswith("statemorph-prefetch") for n in names["decompress"]), names["decompress"]
