"""Migrating the values of key groups in bulk: no Python object per entry.

The per-entry path (``keyed_blocks.parse_key_group`` → ``StateRun`` lists → ``write_key_group``)
makes two ``bytes`` objects per entry and costs ~20 µs per entry, 20-30x a plain
Snappy-decode-copy-encode of the same files. Here a key group is scanned into position arrays by
the ``kg_scan`` kernel, the values of the changed states are gathered into one Arrow binary array
(``copy_slices``), migrated by the bulk kernels, and the key group is put back together from the
unchanged bytes between values, the new value lengths and the new values. Keys, state ids, run
order, the end-of-run flags and the end mark are the source's bytes, so the result is
byte-identical to the per-entry path.

Covers the states whose stored value is the user value, optionally behind a TTL timestamp (value,
reducing and aggregating state); lists and maps keep the per-entry path (their values must be
split by decoding). A key group the scan refuses is handed to ``parse_key_group``, which raises
the precise error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ... import kernels
from ...errors import FlinkSavepointError
from .keyed_blocks import parse_key_group, read_key_group_bytes
from .layout import TTL_BYTES
from .snappy import compress_key_group

if TYPE_CHECKING:
    from .reader import KeyedStream

BULK_KINDS = frozenset({"value", "reducing", "aggregating"})
_MIN_ENTRY_BYTES = 9
"""``i32 key length ‖ ≥ 1 key byte ‖ i32 value length``: bounds the entries a key group can hold."""


def migrated_blocks(stream: KeyedStream, states: dict[int, tuple[bool, Callable[[pa.Array], pa.Array]]], *,
                    batch_values: int, key_groups: range | None = None,
                    migrated: dict[int, int] | None = None) -> Iterator[tuple[int, bytes]]:
    """Every non-empty key group of ``stream`` (of ``key_groups`` when given) with the values of
    the states in ``states`` (state id → (TTL, migration)) migrated, encoded as the stream stores
    it (Snappy-framed when compressed), in order: what ``KeyedStreamWriter.add_encoded_key_group``
    takes. Values are migrated in batches of about ``batch_values`` across key groups;
    ``migrated`` receives the number of values per state id."""
    rewriter = BulkValueRewriter(states, stream.where)
    compressed = stream.header.compressed
    n_states = len(stream.header.states)

    def flush() -> Iterator[tuple[int, bytes]]:
        for kg, data in rewriter.flush():
            yield kg, compress_key_group(data) if compressed else data.tobytes()

    for ext in stream.extents:
        if key_groups is not None and ext.key_group not in key_groups:
            continue
        buf = read_key_group_bytes(stream.source, ext, compressed, stream.where)
        rewriter.add(scan_key_group(ext.key_group, buf, n_states, stream.where))
        if rewriter.count >= batch_values:
            yield from flush()
    yield from flush()
    if migrated is not None:
        for sid, n in rewriter.migrated.items():
            migrated[sid] = migrated.get(sid, 0) + n


@dataclass
class ScannedGroup:
    """One key group's bytes and where its entries are (``kg_scan``'s output, trimmed)."""

    key_group: int
    buf: bytes
    key_pos: np.ndarray
    val_pos: np.ndarray
    val_len: np.ndarray
    run_state: np.ndarray
    run_first: np.ndarray
    end: int

    def entry_states(self) -> np.ndarray:
        """The state id of every entry."""
        counts = np.diff(np.append(self.run_first, len(self.val_pos)))
        return np.repeat(self.run_state, counts)


def scan_key_group(key_group: int, buf: bytes, n_states: int, where: str) -> ScannedGroup:
    """The entries of one uncompressed key group; a malformed group raises the per-entry
    reader's error (``parse_key_group``)."""
    cap = len(buf) // _MIN_ENTRY_BYTES + 1
    key_pos, key_len, val_pos, val_len = (np.empty(cap, np.int64) for _ in range(4))
    run_state, run_first = np.empty(cap, np.int64), np.empty(cap, np.int64)
    status, ne, nr, end = kernels.KERNELS.kg_scan(buf, 0, len(buf), n_states, key_pos, key_len, val_pos, val_len,
                                                  run_state, run_first)
    if status != 0 or end != len(buf):
        parse_key_group(buf, n_states, f"{where} key group {key_group}", exact_end=True)
        raise FlinkSavepointError(f"{where} key group {key_group}: the block scan stopped at offset {end} "
                                  f"(status {status}) where the entry reader did not")
    return ScannedGroup(key_group, buf, key_pos[:ne], val_pos[:ne], val_len[:ne], run_state[:nr], run_first[:nr],
                        end)


@dataclass
class _Selected:
    group: ScannedGroup
    rows: np.ndarray  # entry indices whose values migrate
    prefix: np.ndarray  # bytes kept before each migrated user value (the TTL timestamp, or none)


class BulkValueRewriter:
    """Collects scanned key groups, migrates their changed values in batches, and yields each
    key group's new uncompressed bytes in order.

    ``states`` maps a state id to ``(ttl, migrate)``: whether its values carry the 8-byte TTL
    timestamp, and the migration of a binary array of user values."""

    def __init__(self, states: dict[int, tuple[bool, Callable[[pa.Array], pa.Array]]], where: str) -> None:
        self.states = states
        self.where = where
        self.pending: list[_Selected] = []
        self.count = 0
        self.migrated: dict[int, int] = dict.fromkeys(states, 0)
        self._scratch = np.empty(0, np.uint8)  # the gathered values, reused: fresh pages cost more than the copy

    def add(self, group: ScannedGroup) -> None:
        per_entry = group.entry_states()
        rows = np.flatnonzero(np.isin(per_entry, list(self.states)))
        prefix = np.zeros(len(rows), np.int64)
        for sid, (ttl, _) in self.states.items():
            if ttl:
                prefix[per_entry[rows] == sid] = TTL_BYTES
        short = group.val_len[rows] < prefix
        if short.any():
            raise FlinkSavepointError(
                f"{self.where} key group {group.key_group}: TTL value of {int(group.val_len[rows][short][0])} bytes "
                f"has no 8-byte timestamp"
            )
        self.pending.append(_Selected(group, rows, prefix))
        self.count += len(rows)

    def flush(self) -> list[tuple[int, memoryview]]:
        """Every pending key group as ``(key group, new uncompressed bytes)``, in order added."""
        by_state: dict[int, list[tuple[int, np.ndarray]]] = {sid: [] for sid in self.states}
        for k, sel in enumerate(self.pending):
            per_entry = sel.group.entry_states()[sel.rows]
            for sid in self.states:
                by_state[sid].append((k, np.flatnonzero(per_entry == sid)))
        # per pending group and changed state: (row indices into the group's ``rows``, the
        # migrated array's offsets and data, the index of the group's first value in it)
        new_parts: list[list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]] = [[] for _ in self.pending]
        for sid, parts in by_state.items():
            values = self._gather(sid, parts)
            if values is None:
                continue
            _, migrate = self.states[sid]
            out = migrate(values)
            if isinstance(out, pa.ChunkedArray):
                out = out.combine_chunks()
            if len(out) != len(values) or out.null_count:
                raise FlinkSavepointError(f"{self.where}: the value migration returned {len(out)} values "
                                          f"({out.null_count} null) for {len(values)}")
            self.migrated[sid] += len(values)
            offsets, data = _binary_buffers(out)
            at = 0
            for k, idx in parts:
                new_parts[k].append((idx, offsets, data, at))
                at += len(idx)
        result = [(sel.group.key_group, _rebuild(sel, new_parts[k])) for k, sel in enumerate(self.pending)]
        self.pending.clear()
        self.count = 0
        return result

    def _gather(self, sid: int, parts: list[tuple[int, np.ndarray]]) -> pa.Array | None:
        """One binary array of the user values of state ``sid`` across the pending groups."""
        lens, srcs = [], []
        for k, idx in parts:
            sel = self.pending[k]
            rows = sel.rows[idx]
            pre = sel.prefix[idx]
            srcs.append((sel.group.buf, sel.group.val_pos[rows] + pre))
            lens.append(sel.group.val_len[rows] - pre)
        n = sum(len(x) for x in lens)
        if n == 0:
            return None
        all_lens = np.concatenate(lens)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(all_lens, out=offsets[1:])
        if len(self._scratch) < offsets[-1]:
            self._scratch = np.empty(int(offsets[-1] * 1.25), np.uint8)
        data = self._scratch[:int(offsets[-1])]
        at = 0
        for (buf, pos), ln in zip(srcs, lens, strict=True):
            m = len(ln)
            if kernels.KERNELS.copy_slices(buf, pos, ln, data, offsets[at:at + m], 0, m) != -1:
                raise FlinkSavepointError(f"{self.where}: a value lies outside its key group")
            at += m
        large = offsets[-1] > np.iinfo(np.int32).max
        t, off = (pa.large_binary(), offsets) if large else (pa.binary(), offsets.astype(np.int32))
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(off), pa.py_buffer(data)])


def _binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The int64 offsets (``len + 1``, absolute into data) and the data of a binary array."""
    bufs = arr.buffers()
    dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return offsets, data


def _rebuild(sel: _Selected, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> memoryview:
    """The key group with the migrated values in place (the ``kg_rebuild`` kernel): per entry
    the source bytes since the previous value (state id, key length, key), the new value length,
    the kept prefix and the new value; then the source's tail (the end mark)."""
    g = sel.group
    n = len(g.val_pos)
    slot = np.full(n, -1, np.int64)
    prefix = np.zeros(n, np.int64)
    if len(parts) == 1:
        idx, offsets, data, at = parts[0]
        slot[sel.rows[idx]] = np.arange(at, at + len(idx), dtype=np.int64)
    elif parts:  # several states change in this group: their new values side by side
        pieces = [(offsets[at:at + len(idx) + 1], data) for idx, offsets, data, at in parts]
        offsets = np.zeros(sum(len(idx) for idx, *_ in parts) + 1, np.int64)
        data = np.concatenate([d[int(o[0]):int(o[-1])] for o, d in pieces])
        base = pos = 0
        for (idx, *_), (o, _) in zip(parts, pieces, strict=True):
            m = len(idx)
            offsets[pos + 1:pos + m + 1] = o[1:] - o[0] + base
            slot[sel.rows[idx]] = np.arange(pos, pos + m, dtype=np.int64)
            base += int(o[-1] - o[0])
            pos += m
    else:
        offsets, data = np.zeros(1, np.int64), np.empty(0, np.uint8)
    prefix[sel.rows] = sel.prefix
    moved = slot >= 0
    new_total = int((offsets[slot[moved] + 1] - offsets[slot[moved]]).sum() + prefix[moved].sum())
    total = len(g.buf) + new_total - int(g.val_len[moved].sum())
    out = np.empty(total, np.uint8)
    written = kernels.KERNELS.kg_rebuild(g.buf, g.val_pos, g.val_len, slot, prefix, offsets, data, out)
    if written != total:
        raise FlinkSavepointError(f"key group {g.key_group}: rebuilding entry {-1 - written} failed "
                                  f"(wrote {written} of {total} bytes)")
    return memoryview(out.data)
