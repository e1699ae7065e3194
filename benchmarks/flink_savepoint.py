"""A large Flink canonical savepoint of Events RowData values, built with statemorph's own
keyed-state writer from a savepoint real Flink took, and the floor it is measured against.

Why not take it with real Flink: on this project's 2-core machine the ci/flink generator took
11.6 s for 200,000 keys and 3 min 40 s for 1,000,000 (then ran out of heap writing expected.json),
so 10,000,000 keys would take half an hour or more per variant. Instead the template
``tests/data/flink_savepoints/events-rocksdb-p2-files-snappy`` (RocksDB, parallelism 2, max
parallelism 128, int keys, ``ValueState<RowData>`` of the old Events type, uid ``events-state``)
gives everything but the entries: ``_metadata``, the operators, the keyed-state headers with
Flink's own serializer snapshots. Its keyed-state streams are replaced by streams written with
:class:`~statemorph.savepoint.flink.keyed_writer.KeyedStreamWriter` holding ``n`` keys: the
generator's keys (key index ``i`` → ``i*7919-40000`` as a Java int) in the key group Flink assigns
them (``murmurHash(hashCode) % 128``), each subtask holding its own key-group range, and values
encoded by :class:`~statemorph.serializers.RowDataSerializer` of the old type.
``tests/savepoint/flink/test_bench_savepoint_real_flink.py`` proves that real Flink restores a
savepoint built this way and reads back every value.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cramjam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from statemorph import arrow
from statemorph.bulk.chunks import ordered_map
from statemorph.savepoint.flink import FlinkSavepoint
from statemorph.savepoint.flink.keyed_blocks import StateRun, key_group_extents
from statemorph.savepoint.flink.keyed_writer import KeyedStreamWriter
from statemorph.savepoint.flink.metadata import METADATA_FILE_NAME, serialize_metadata
from statemorph.serializers import RowDataSerializer

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "tests" / "data" / "flink_savepoints" / "events-rocksdb-p2-files-snappy"
UID = "events-state"
STATE = "events"
OLD = "ROW<eventId BIGINT, metadata ROW<userId INT, `timestamp` BIGINT, deviceType STRING>>"
NEW = ("ROW<eventId BIGINT, metadata ROW<deviceType STRING, location STRING, userId INT, `timestamp` BIGINT, "
       "appVersion STRING, sessionId BIGINT>>")
DEVICES = ["phone", "tablet", "desktop", "smart-tv", "wearable-device", "car-infotainment-unit"]
BASE_TS = 1_700_000_000_000
FORMAT_VERSION = 1
"""Bumped when the built savepoint changes, so a stale cache is rebuilt."""


def int_keys(idx: np.ndarray) -> np.ndarray:
    """The ci/flink generator's int key of key index ``i``: ``i * 7919 - 40000`` in Java int
    arithmetic (wrapping; 7919 is odd, so keys stay distinct below 2^32 indices)."""
    return (idx.astype(np.int64) * 7919 - 40000).astype(np.uint32).view(np.int32)


def key_groups(keys: np.ndarray, max_parallelism: int) -> np.ndarray:
    """``KeyGroupRangeAssignment.assignToKeyGroup`` of Integer keys, vectorised:
    ``MathUtils.murmurHash(Integer.hashCode()) % maxParallelism`` (statemorph.keyed.murmur_hash)."""
    with np.errstate(over="ignore"):
        c = keys.view(np.uint32).astype(np.uint32) * np.uint32(0xCC9E2D51)
        c = (c << np.uint32(15)) | (c >> np.uint32(17))
        c = c * np.uint32(0x1B873593)
        c = (c << np.uint32(13)) | (c >> np.uint32(19))
        c = c * np.uint32(5) + np.uint32(0xE6546B64)
        c ^= np.uint32(4)
        c ^= c >> np.uint32(16)
        c = c * np.uint32(0x85EBCA6B)
        c ^= c >> np.uint32(13)
        c = c * np.uint32(0xC2B2AE35)
        c ^= c >> np.uint32(16)
    s = c.view(np.int32).astype(np.int64)
    s = np.where(s >= 0, s, np.where(s == -(1 << 31), 0, -s))
    return (s % max_parallelism).astype(np.int32)


def events_struct(idx: np.ndarray) -> pa.StructArray:
    """The Events row of key index ``i`` (deterministic; ``deviceType`` null for every 11th)."""
    i64 = idx.astype(np.int64)
    event_id = i64 * 7919 + 1_000_000_000_000
    user_id = ((i64 * 2654435761) % 50_000_000).astype(np.int32)
    ts = BASE_TS + i64 * 37
    dev = pa.array(np.array(DEVICES, dtype=object)[(i64 * 31) % len(DEVICES)], pa.string())
    dev = pc.if_else(pa.array(i64 % 11 == 10), pa.scalar(None, pa.string()), dev)
    meta = pa.StructArray.from_arrays([pa.array(user_id), pa.array(ts), dev], ["userId", "timestamp", "deviceType"])
    return pa.StructArray.from_arrays([pa.array(event_id), meta], ["eventId", "metadata"])


def expected_value(i: int) -> dict[str, Any]:
    """What the restore checker prints for key index ``i`` (rows as objects by field name)."""
    row = events_struct(np.array([i])).to_pylist()[0]
    return {"eventId": row["eventId"], "metadata": dict(row["metadata"])}


def _composite_keys(kg: int, keys: np.ndarray) -> list[bytes]:
    """``kg prefix (1 byte) ‖ int key (big-endian) ‖ 00`` (void namespace) per key."""
    m = len(keys)
    buf = np.zeros((m, 6), np.uint8)
    buf[:, 0] = kg
    buf[:, 1:5] = keys.astype(">i4").view(np.uint8).reshape(m, 4)
    offsets = np.arange(0, 6 * m + 1, 6, dtype=np.int32)
    arr = pa.Array.from_buffers(pa.binary(), m, [None, pa.py_buffer(offsets), pa.py_buffer(buf.tobytes())])
    return arr.to_pylist()


@dataclass
class BenchSavepoint:
    """A built savepoint and what the benchmark needs to know about it."""

    path: Path
    n: int
    compressed: bool
    files: list[str]  # the keyed-state files, relative to ``path``
    disk_bytes: int  # their size on disk
    state_bytes: int  # the uncompressed key-group bytes (keys, values, framing of entries)

    def extents(self) -> dict[str, tuple[int, list[tuple[int, int]]]]:
        """Per keyed-state file: the header's end and each key group's byte range."""
        sp = FlinkSavepoint(self.path)
        out = {}
        for _, stream in sp.keyed_streams(sp.operator(UID)):
            name = sp.directory.relative_name(stream.handle.delegate)
            header_end, ext = key_group_extents(stream.handle, stream.source.size, name)
            out[name] = (header_end, [(e.offset, e.end) for e in ext])
        return out


def build(cache: Path, n: int, compressed: bool) -> BenchSavepoint:
    """The savepoint of ``n`` Events entries in ``cache`` (built once: reused while its manifest
    matches), atomically (built in a temporary directory, renamed)."""
    name = f"events-{n}-{'snappy' if compressed else 'raw'}"
    target = cache / name
    manifest = target / "bench.json"
    if manifest.is_file():
        info = json.loads(manifest.read_text())
        if info.get("format") == FORMAT_VERSION:
            return BenchSavepoint(target / "savepoint", n, compressed, info["files"], info["disk_bytes"],
                                  info["state_bytes"])
        shutil.rmtree(target)
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{name}.tmp-{uuid.uuid4().hex[:8]}"
    (tmp / "savepoint").mkdir(parents=True)
    try:
        files, state_bytes = _write(tmp / "savepoint", n, compressed)
        disk = sum((tmp / "savepoint" / f).stat().st_size for f in files)
        spec = json.loads((TEMPLATE / "spec.json").read_text())
        spec.update(name=name, keys=n, records_per_key=1, states=[STATE], compression=compressed)
        (tmp / "spec.json").write_text(json.dumps(spec, indent=1))
        (tmp / "bench.json").write_text(json.dumps({"format": FORMAT_VERSION, "n": n, "files": files,
                                                    "disk_bytes": disk, "state_bytes": state_bytes}))
        os.rename(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BenchSavepoint(target / "savepoint", n, compressed, files, disk, state_bytes)


def _write(out: Path, n: int, compressed: bool) -> tuple[list[str], int]:
    sp = FlinkSavepoint(TEMPLATE / "savepoint")
    op = sp.operator(UID)
    meta = copy.deepcopy(sp.metadata)
    op_index = sp.operators.index(op)
    new_op = meta.operators[op_index]
    idx = np.arange(n, dtype=np.int64)
    keys = int_keys(idx)
    groups = key_groups(keys, op.max_parallelism)
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(op.max_parallelism + 1))
    serializer = RowDataSerializer(OLD)
    files, replaced, state_bytes = [], set(), 0
    for st, stream in sp.keyed_streams(op):
        header = copy.deepcopy(stream.header)
        header.compressed = compressed
        sid, _ = header.state(STATE)
        old = stream.handle
        name = sp.directory.relative_name(old.delegate)
        replaced.add(name)
        with KeyedStreamWriter(out, name, header, old.start_key_group, len(old.offsets)) as w:
            for kg in range(old.start_key_group, old.start_key_group + len(old.offsets)):
                members = order[bounds[kg]:bounds[kg + 1]]
                if not len(members):
                    continue
                values = arrow.encode(events_struct(members), serializer, threads=2).to_pylist()
                run = StateRun(sid, _composite_keys(kg, keys[members]), values)
                state_bytes += 4 + sum(4 + 6 + 4 + len(v) for v in values)
                w.add_key_group(kg, [run])
            handle = w.finish(inline=False, code=old.code, handle_id=old.handle_id)
        next(s for s in new_op.subtasks or [] if s.index == st.index).managed_keyed = handle
        files.append(name)
    for entry in os.scandir(TEMPLATE / "savepoint"):
        if entry.name != METADATA_FILE_NAME and entry.name not in replaced and entry.is_file():
            shutil.copyfile(entry.path, out / entry.name)
    (out / METADATA_FILE_NAME).write_bytes(serialize_metadata(meta))
    return sorted(files), state_bytes


def copy_floor(sp: BenchSavepoint, extents: dict[str, tuple[int, list[tuple[int, int]]]], dst: Path,
               threads: int = 1) -> None:
    """The floor of a rewrite: every keyed-state file read, each key group Snappy-decoded, copied,
    Snappy-encoded as its own framed stream (cramjam, the codec statemorph uses) and written, in
    the same layout (header, then the key groups in order), then fsynced; without compression the
    key groups are read, copied and written. Nothing is parsed or migrated. With ``threads`` > 1
    the key groups are decoded, copied and encoded on that many threads (cramjam releases the
    GIL) while this thread writes them in order: the parallel floor of a rewrite on ``threads``
    workers."""
    dst.mkdir()

    def copied(block: memoryview) -> bytes:
        if sp.compressed:
            return bytes(cramjam.snappy.compress(bytes(cramjam.snappy.decompress(block))))
        return bytes(block)

    for name in sp.files:
        header_end, ranges = extents[name]
        with open(sp.path / name, "rb") as f:
            data = f.read()
        with open(dst / name, "xb") as out:
            out.write(data[:header_end])
            for block in ordered_map(copied, (memoryview(data)[start:end] for start, end in ranges), threads):
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
