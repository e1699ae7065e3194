"""Savepoints that claim hostile sizes, built from the committed real-Flink ones in milliseconds
(issue 24, item 4): a keyed-state file extended sparsely (no disk used) so that its last key group
claims gigabytes of zeros, a key group of Snappy chunks of zeros (a few stored MB that
decompress to hundreds), and a ``_metadata`` of many small handles. Shared by the memory tests
(``test_hostile_sizes.py``) and the ``sparse-and-bomb`` fuzz family."""

from __future__ import annotations

import os
import shutil
import struct
import sys
from array import array
from pathlib import Path

import cramjam
from savepoint.flink.flink_cases import SAVEPOINTS

from statemorph.savepoint.flink import CheckpointMetadata, RelativeFileHandle, parse_metadata, serialize_metadata
from statemorph.savepoint.flink.files import StreamSource
from statemorph.savepoint.flink.handles import KeyGroupsHandle
from statemorph.savepoint.flink.keyed_blocks import key_group_extents
from statemorph.savepoint.flink.metadata import MAGIC
from statemorph.savepoint.flink.snappy import STREAM_IDENTIFIER

UNCOMPRESSED = SAVEPOINTS / "kinds-rocksdb-p1-files-mp256" / "savepoint"
COMPRESSED = SAVEPOINTS / "kinds-hashmap-p2-files-snappy" / "savepoint"
ZERO_CHUNK = bytes(cramjam.snappy.compress(bytes(1 << 16)))[len(STREAM_IDENTIFIER):]
"""One Snappy frame chunk of 64 KiB of zeros (a few KiB stored: ~21x expansion)."""


def _first_keyed(meta: CheckpointMetadata) -> KeyGroupsHandle:
    for op in meta.operators:
        for st in op.subtasks or []:
            if st.managed_keyed is not None and isinstance(st.managed_keyed.delegate, RelativeFileHandle):
                return st.managed_keyed
    raise AssertionError("no keyed-state file in the savepoint")


def _rewritten(src: Path, dst: Path, stream: bytes | None, size: int | None = None) -> Path:
    """A copy of ``src`` whose first keyed-state file holds ``stream`` (or is extended to
    ``size`` bytes, sparsely), with the new size recorded in ``_metadata``."""
    shutil.copytree(src, dst)
    meta = parse_metadata((dst / "_metadata").read_bytes())
    handle = _first_keyed(meta)
    assert isinstance(handle.delegate, RelativeFileHandle)
    path = dst / handle.delegate.relative_path
    if stream is not None:
        path.write_bytes(stream)
    if size is not None:
        os.truncate(path, size)  # a hole: reads as zeros, takes no disk
    handle.delegate.size = path.stat().st_size
    (dst / "_metadata").write_bytes(serialize_metadata(meta))
    return dst


def sparse_key_group(dst: Path, size: int = 2 << 30, key_length: int | None = None) -> Path:
    """The uncompressed savepoint with its keyed-state file extended to ``size`` bytes: its last
    key group runs to the end of the file, a real key group followed by zeros; with
    ``key_length``, the last key group instead opens with state 0 and an entry whose key claims
    that many bytes (then zeros)."""
    if key_length is None:
        return _rewritten(UNCOMPRESSED, dst, None, size)
    head = _before_last_key_group(UNCOMPRESSED) + b"\x00\x00" + key_length.to_bytes(4, "big") + b"\x01"
    return _rewritten(UNCOMPRESSED, dst, head, size)


def sparse_entry(dst: Path, key_length: int, value_length: int, size: int) -> Path:
    """The uncompressed savepoint whose last key group opens with state 0 and one entry of a
    ``key_length``-byte key (the end-of-run flag set: the run's last entry) and a
    ``value_length``-byte value, zeros both, then zeros to ``size`` bytes (sparsely)."""
    head = _before_last_key_group(UNCOMPRESSED) + b"\x00\x00" + key_length.to_bytes(4, "big") + b"\x81"
    sp = _rewritten(UNCOMPRESSED, dst, head, size)
    handle = _first_keyed(parse_metadata((sp / "_metadata").read_bytes()))
    assert isinstance(handle.delegate, RelativeFileHandle)
    with open(sp / handle.delegate.relative_path, "r+b") as f:
        f.seek(len(head) - 1 + key_length)
        f.write(value_length.to_bytes(4, "big"))
    return sp


def _before_last_key_group(src: Path) -> bytes:
    """The first keyed-state file of ``src`` up to where its last key group starts."""
    handle = _first_keyed(parse_metadata((src / "_metadata").read_bytes()))
    assert isinstance(handle.delegate, RelativeFileHandle)
    data = (src / handle.delegate.relative_path).read_bytes()
    _, extents = key_group_extents(handle, len(data), str(src))
    return data[:extents[-1].offset]


def snappy_bomb(dst: Path, chunks: int) -> Path:
    """The compressed savepoint whose last key group of its first keyed-state file is a Snappy
    stream of ``chunks`` chunks of 64 KiB of zeros (stored ~3 KiB each)."""
    return _rewritten(COMPRESSED, dst, _before_last_key_group(COMPRESSED) + STREAM_IDENTIFIER + ZERO_CHUNK * chunks)


def _metadata_of(operators: list[tuple[int, list[bytes]]]) -> bytes:
    """A version-5 ``_metadata``: no master state, one operator per ``(max parallelism, subtask
    records)`` (empty name and uid, operator ID its index, parallelism its subtask count, no
    coordinator state), no CheckpointProperties."""
    head = struct.pack(">iiqii", MAGIC, 5, 1, 0, len(operators))
    return head + b"".join(struct.pack(">HH", 0, 0) + i.to_bytes(16, "big") + struct.pack(">ii", len(subs), maxp)
                           + b"\x00" + struct.pack(">i", len(subs)) + b"".join(subs)
                           for i, (maxp, subs) in enumerate(operators))


def _one_operator_metadata(max_parallelism: int, subtasks: list[bytes]) -> bytes:
    return _metadata_of([(max_parallelism, subtasks)])


def metadata_of_offsets(operators: int) -> bytes:
    """``operators`` keyed operators at max parallelism 32,768, each with one subtask whose keyed
    handle has every key group's offset (each 4 KiB long) and no delegate: 256 KiB of offsets per
    operator, the most one keyed subtask has."""
    offsets = array("q", range(4096, 4096 * 32769, 4096))
    if sys.byteorder == "little":
        offsets.byteswap()
    keyed = b"\x07" + struct.pack(">ii", 0, 32768) + offsets.tobytes() + b"\x00"
    return _metadata_of([(32768, [struct.pack(">iii", 0, 0, 0) + keyed + b"\x00" + bytes(8)])] * operators)


def metadata_of_records(entries: int) -> bytes:
    """One subtask whose operator-state handle declares ``entries`` entries of 7 bytes (an empty
    name, mode 0, no offsets): the cheapest record a ``_metadata`` can hold."""
    handle = b"\x04" + struct.pack(">i", entries) + bytes(7 * entries) + b"\x00"
    return _one_operator_metadata(128, [struct.pack(">ii", 0, 1) + handle + struct.pack(">i", 0) + bytes(2 + 8)])


def with_metadata(dst: Path, data: bytes) -> Path:
    """A savepoint directory holding only this ``_metadata``."""
    dst.mkdir()
    (dst / "_metadata").write_bytes(data)
    return dst


class TiledStream(StreamSource):
    """A stream of ``size`` bytes made up as they are read: ``head``, then ``unit`` over and
    over (zeros when it is empty), then ``tail`` at the very end. A sparse file's or a Snappy
    bomb's bytes in a fuzz input of a few hundred bytes, without writing or holding them."""

    def __init__(self, head: bytes, unit: bytes, tail: bytes, size: int, name: str = "tiled") -> None:
        self.head, self.unit, self.tail = head, unit, tail
        self.size, self.name = max(size, len(head) + len(tail)), name

    def _read(self, offset: int, n: int) -> bytes:
        out = bytearray(n)
        self._read_into(offset, memoryview(out))
        return bytes(out)

    def _read_into(self, offset: int, out: memoryview) -> None:
        """The bytes at ``offset`` written straight into ``out``: the unit is written once and the
        filled part copied onto the rest, doubling (no repeated unit of the read's size)."""
        out = out.cast("B") if out.format != "B" else out
        a, b = offset, offset + out.nbytes
        body_end = self.size - len(self.tail)
        if a < len(self.head):
            out[:min(b, len(self.head)) - a] = self.head[a:b]
        lo, hi = max(a, len(self.head)), min(b, body_end)
        if lo < hi:
            unit = self.unit or bytes(1)
            skip = (lo - len(self.head)) % len(unit)
            start, total = lo - a, hi - lo
            filled = min(len(unit), total)
            out[start:start + filled] = (unit[skip:] + unit[:skip])[:filled]
            while filled < total:  # a whole number of units is filled: copying them keeps the phase
                k = min(filled, total - filled)
                out[start + filled:start + filled + k] = out[start:start + k]
                filled += k
        if b > body_end:
            t0 = max(a, body_end)
            out[t0 - a:] = self.tail[t0 - body_end:b - body_end]
