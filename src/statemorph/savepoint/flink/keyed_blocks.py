"""Key-group blocks of a canonical keyed-state stream (``FullSnapshotAsyncWriter`` /
``FullSnapshotRestoreOperation``): where they are, what is inside, and how to write one.

A non-empty key group starts at the offset ``_metadata`` records for it (0 = empty, never
written). Inside (after Snappy decompression when the header says so): ``i16 state id``, then
entries ``i32 len ‖ key ‖ i32 len ‖ value``; the last entry of a state's run has the top bit of
its first key byte set and is followed by the next ``i16 state id`` or by ``0xFFFF``, the end of
the key group. Keys always start with the key-group prefix (below 2^15), so the flag bit is free.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...bulk.chunks import pooled
from ...errors import FlinkSavepointError
from .files import StreamSource
from .handles import KeyGroupsHandle
from .snappy import compress_key_group, framed_raw_size, unframe_into

END_OF_KEY_GROUP = 0xFFFF
FLAG = 0x80
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")


@dataclass
class StateRun:
    """The entries of one state inside one key group; keys without the end-of-run flag."""

    state_id: int
    keys: list[bytes]
    values: list[bytes]


@dataclass(frozen=True)
class KeyGroupExtent:
    key_group: int
    offset: int
    end: int


def key_group_extents(handle: KeyGroupsHandle, stream_size: int, where: str) -> tuple[int, list[KeyGroupExtent]]:
    """The header's end and the byte range of every non-empty key group, checked: offsets must
    increase with the key group and lie inside the stream."""
    present = [(handle.start_key_group + i, o) for i, o in enumerate(handle.offsets) if o != 0]
    header_end = present[0][1] if present else stream_size
    extents = []
    for i, (kg, off) in enumerate(present):
        end = present[i + 1][1] if i + 1 < len(present) else stream_size
        if off < 0 or off >= stream_size or end <= off:
            raise FlinkSavepointError(
                f"{where}: key group {kg} offset {off} is outside the stream ({stream_size} bytes) or not after "
                f"the previous key group's"
            )
        extents.append(KeyGroupExtent(kg, off, end))
    return header_end, extents


def read_key_group_bytes(src: StreamSource, ext: KeyGroupExtent, compressed: bool, where: str) -> bytes:
    return bytes(read_key_group_view(src, ext, compressed, where))


def read_key_group_view(src: StreamSource, ext: KeyGroupExtent, compressed: bool, where: str) -> Any:
    """One key group's uncompressed bytes as a buffer (to read only). A compressed group is
    decompressed straight into memory of Arrow's pool, sized from its chunks: a buffer of the
    codec's own would be fresh pages (a page fault each) for every key group."""
    raw = src.read_at(ext.offset, ext.end - ext.offset, f"key group {ext.key_group}")
    if compressed:
        label = f"{where} key group {ext.key_group}"
        out = pooled(framed_raw_size(raw, label))
        unframe_into(raw, out, label)
        return out.data
    return raw


def parse_key_group(buf: bytes, n_states: int, where: str, exact_end: bool) -> tuple[list[StateRun], int]:
    """The state runs of one key group's (uncompressed) bytes, and where the 0xFFFF mark ends.
    With ``exact_end`` nothing may follow the mark (an uncompressed group ends where the next
    starts; a decompressed one is exactly one group)."""
    n = len(buf)
    runs: list[StateRun] = []
    pos = 0
    if n < 2:
        raise FlinkSavepointError(f"{where}: a key group needs at least 2 bytes, found {n}")
    state_id = _U16.unpack_from(buf, 0)[0]
    pos = 2
    unpack = _I32.unpack_from
    while True:
        if state_id == END_OF_KEY_GROUP:
            break
        if state_id >= n_states:
            raise FlinkSavepointError(
                f"{where}: state id {state_id} at offset {pos - 2} but the header lists {n_states} states"
            )
        keys: list[bytes] = []
        values: list[bytes] = []
        while True:
            if pos + 4 > n:
                raise FlinkSavepointError(f"{where}: truncated entry at offset {pos}")
            kl = unpack(buf, pos)[0]
            pos += 4
            if kl <= 0 or pos + kl + 4 > n:
                raise FlinkSavepointError(f"{where}: key length {kl} at offset {pos - 4} does not fit the key group")
            key = buf[pos : pos + kl]
            pos += kl
            vl = unpack(buf, pos)[0]
            pos += 4
            if vl < 0 or pos + vl > n:
                raise FlinkSavepointError(f"{where}: value length {vl} at offset {pos - 4} does not fit the key group")
            values.append(buf[pos : pos + vl])
            pos += vl
            if key[0] & FLAG:
                keys.append(bytes((key[0] & 0x7F,)) + key[1:])
                break
            keys.append(key)
        runs.append(StateRun(state_id, keys, values))
        if pos + 2 > n:
            raise FlinkSavepointError(f"{where}: missing state id or end mark at offset {pos}")
        state_id = _U16.unpack_from(buf, pos)[0]
        pos += 2
    if exact_end and pos != n:
        raise FlinkSavepointError(f"{where}: {n - pos} bytes after the end of the key group at offset {pos}")
    return runs, pos


def write_key_group(runs: list[StateRun]) -> bytes:
    """The uncompressed bytes of one key group (the exact inverse of :func:`parse_key_group`)."""
    out = bytearray()
    pack_i, pack_h = _I32.pack, _U16.pack
    for run in runs:
        if not run.keys:
            continue
        out += pack_h(run.state_id)
        last = len(run.keys) - 1
        for i, (k, v) in enumerate(zip(run.keys, run.values, strict=True)):
            if not k or k[0] & FLAG:
                raise FlinkSavepointError(
                    f"state id {run.state_id}: a key must start with a key-group prefix below 2^15"
                )
            out += pack_i(len(k))
            if i == last:
                out.append(k[0] | FLAG)
                out += k[1:]
            else:
                out += k
            out += pack_i(len(v))
            out += v
    out += pack_h(END_OF_KEY_GROUP)
    return bytes(out)


def encode_key_group(runs: list[StateRun], compressed: bool) -> bytes:
    data = write_key_group(runs)
    return compress_key_group(data) if compressed else data


def iter_key_groups(
    src: StreamSource, handle: KeyGroupsHandle, compressed: bool, n_states: int, where: str,
    key_groups: range | None = None,
) -> Iterator[tuple[int, list[StateRun]]]:
    """``(key group, runs)`` for every non-empty key group (of ``key_groups`` when given: the
    others are not even read), one group in memory at a time."""
    _, extents = key_group_extents(handle, src.size, where)
    for ext in extents:
        if key_groups is not None and ext.key_group not in key_groups:
            continue
        buf = read_key_group_bytes(src, ext, compressed, where)
        runs, _ = parse_key_group(buf, n_states, f"{where} key group {ext.key_group}", exact_end=True)
        yield ext.key_group, runs
