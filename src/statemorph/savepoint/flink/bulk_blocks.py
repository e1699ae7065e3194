"""Migrating the values of key groups in bulk: no Python object per entry.

The per-entry path (``keyed_blocks.parse_key_group`` → ``StateRun`` lists → ``write_key_group``)
makes two ``bytes`` objects per entry and costs ~20 µs per entry, 20-30x a plain
Snappy-decode-copy-encode of the same files. Here a key group is scanned into position arrays by
the ``kg_scan`` kernel; each changed state's entries become *pieces* (a value state's or a map's
entry one piece, a list one piece per element, split by ``list_split``), each piece the bytes
kept in front of the user value (a TTL timestamp, a map's null flag) and the user value; the
user values of a batch are gathered into one Arrow binary array (``copy_slices``), migrated by
the bulk kernels, and the key group is put back together from the unchanged bytes between
values, the new value lengths, the kept bytes and the new values, list elements joined by commas
again (``kg_rebuild``). Keys, state ids, run order, the end-of-run flags, null map values and the
end mark are the source's bytes, so the result is byte-identical to the per-entry path.

Key groups are independent, so consecutive ones are handed to worker threads in units
(:func:`migrated_blocks`), each unit read, decompressed, scanned, migrated, rebuilt and
compressed by one thread (the codec, the kernels and file reads release the GIL), while the
caller writes the finished units in order (and does nothing else). A key group too large to hold
whole is cut into slices at entry boundaries (:class:`.key_group_scan.KeyGroupCut`): its stored
bytes are pieces of fixed size, each a unit of its own, so memory does not grow with the key
groups (and so with the entry count), and the pieces of one key group are read, decompressed,
scanned and cut by different workers at once; a piece waits only for the previous one to hand on
the bytes after its last whole Snappy chunk and after its last whole entry.

A key group or a list value the kernels refuse is handed to the per-entry reader
(``parse_key_group``, ``StateLayout.split_list``), which raises the precise error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ... import kernels
from ...bulk.chunks import PlacedInOrder, ordered_map, pooled
from ...errors import FlinkSavepointError
from ...kernels.abi import BLOCK_OK
from . import key_group_scan
from .key_group_scan import KeyGroupCut, KeyGroupPiece, ScanArrays, ScannedGroup, scan_key_group, sliced
from .keyed_blocks import KeyGroupExtent, read_key_group_view
from .layout import TTL_BYTES, StateLayout
from .snappy import STREAM_IDENTIFIER, frame_key_group

if TYPE_CHECKING:
    from .reader import KeyedStream

BULK_KINDS = frozenset({"value", "reducing", "aggregating", "list", "map"})
UNIT_BYTES = 1 << 20
"""Stored bytes of consecutive key groups one worker takes at a time (a key group is never split)."""
Migration = Callable[[pa.Array], pa.Array]
"""A changed state's value migration: a binary array of user values → one of new values."""
Piece = tuple[KeyGroupCut, int]
"""Piece ``i`` of a large key group's cut: one unit of work."""


def migrated_blocks(stream: KeyedStream, states: dict[int, tuple[StateLayout, Migration]], *, batch_values: int,
                    key_groups: range | None = None, migrated: dict[int, int] | None = None,
                    workers: int = 1, slice_bytes: int | None = None,
                    placed: PlacedInOrder | None = None,
                    piece: KeyGroupPiece | None = None, pool: Executor | None = None) -> Iterator[tuple[int, Any]]:
    """Every non-empty key group of ``stream`` (of ``key_groups`` when given) with the values of
    the states in ``states`` (state id → (layout, migration)) migrated, encoded as the stream
    stores it (Snappy-framed when compressed), in order: what
    ``KeyedStreamWriter.add_encoded_key_group`` takes (a bytes-like buffer).

    A key group stored in more than ``slice_bytes`` (default
    :data:`.key_group_scan.SLICE_BYTES`) comes as several consecutive pieces (its slices,
    :func:`~.key_group_scan.scan_slices`; a compressed group's pieces make one Snappy stream
    together). Units of consecutive key groups, and the pieces of a large one, run on ``2 ×
    workers`` threads (one thread when ``workers`` is 1); values are migrated in batches of about
    ``batch_values`` within a unit;
    ``migrated`` receives the number of values per state id. ``piece``: only that run of one
    large key group's pieces (:func:`~.key_group_scan.key_group_pieces`, a Spark task's share of
    it), cut by the same :class:`~.key_group_scan.KeyGroupCut`.

    With ``placed`` the worker that finishes a unit writes its bytes at their place in the file
    itself (:class:`~statemorph.bulk.chunks.PlacedInOrder`), and what comes here is each key
    group (or piece) with its number of bytes, already in the file: the caller only counts.

    ``pool``: worker threads shared with the other streams of the same rewrite (several files at
    once, :func:`~statemorph.bulk.chunks.ordered_map`), instead of ``2 × workers`` of its own."""
    compressed = stream.header.compressed
    n_states = len(stream.header.states)
    if piece is not None:
        key_groups = range(piece.key_group, piece.key_group + 1)
    extents = [e for e in stream.extents if key_groups is None or e.key_group in key_groups]
    slice_bytes = key_group_scan.SLICE_BYTES if slice_bytes is None else slice_bytes
    if piece is not None and not all(sliced(e, slice_bytes) for e in extents):
        raise FlinkSavepointError(f"{stream.where} key group {piece.key_group}: a piece of a key group that is "
                                  f"not cut into slices of {slice_bytes} bytes")
    local = threading.local()
    rewriters: list[BulkValueRewriter] = []
    lock = threading.Lock()

    def rewriter() -> BulkValueRewriter:
        rw: BulkValueRewriter | None = getattr(local, "rewriter", None)
        if rw is None:  # one per thread: its gather buffer is reused from unit to unit
            rw = local.rewriter = BulkValueRewriter(states, stream.where)
            with lock:
                rewriters.append(rw)
        return rw

    def encoded(rw: BulkValueRewriter) -> list[tuple[int, Any]]:
        out = []
        for g, data in rw.flush():
            framed: Any = data
            if compressed:  # a later slice continues its key group's Snappy stream
                framed = frame_key_group(data)
                framed = framed if g.first else memoryview(framed)[len(STREAM_IDENTIFIER):]
            out.append((g.key_group, framed))
        return out

    def unit(group: list[KeyGroupExtent | Piece]) -> list[tuple[int, Any]]:
        rw = rewriter()
        out = []
        for item in group:
            if isinstance(item, KeyGroupExtent):
                buf = read_key_group_view(stream.source, item, compressed, stream.where)
                rw.add(scan_key_group(item.key_group, buf, n_states, stream.where, rw.scan_arrays))
            else:
                cut, i = item
                for piece in cut.slices_of(i, rw.scan_arrays):
                    rw.add(piece)
                    if rw.count >= batch_values:
                        out += encoded(rw)
                continue
            if rw.count >= batch_values:
                out += encoded(rw)
        out += encoded(rw)
        return out

    def units() -> Iterator[list[KeyGroupExtent | Piece]]:
        """Small key groups together up to ``UNIT_BYTES`` stored; a large one as its pieces
        (:class:`~.key_group_scan.KeyGroupCut`), one per unit, handed out in order: the worker
        that takes a piece reads, decompresses, scans and cuts it, so nothing here touches the
        bytes."""
        unit: list[KeyGroupExtent | Piece] = []
        size = 0
        for ext in extents:
            if sliced(ext, slice_bytes):
                if unit:
                    yield unit
                    unit, size = [], 0
                cut = KeyGroupCut(stream.source, ext, compressed, n_states, stream.where, slice_bytes,
                                  None if piece is None else piece.start)
                for i in range(cut.pieces) if piece is None else piece.pieces:
                    yield [(cut, i)]
                continue
            unit.append(ext)
            size += ext.end - ext.offset
            if size >= UNIT_BYTES:
                yield unit
                unit, size = [], 0
        if unit:
            yield unit

    def placed_unit(numbered: tuple[int, list[KeyGroupExtent | Piece]]) -> list[tuple[int, Any]]:
        seq, group = numbered
        blocks = unit(group)
        assert placed is not None
        placed.put(seq, [data for _, data in blocks])
        return [(kg, memoryview(data).nbytes) for kg, data in blocks]

    # twice as many threads as the cores asked for: a thread that waits (for the piece before
    # its own, a read, the GIL for the glue between kernels) leaves its core to another; with
    # exactly one thread a core, a 10 M-entry rewrite on 2 threads kept 1.0 core busy, not 1.6
    threads = 2 * workers if workers > 1 else 1
    if placed is None:
        for blocks in ordered_map(unit, units(), threads, pool=pool):
            yield from blocks
    else:
        for blocks in ordered_map(placed_unit, enumerate(units()), threads, pool=pool):
            yield from blocks
    if migrated is not None:
        for rw in rewriters:
            for sid, n in rw.migrated.items():
                migrated[sid] = migrated.get(sid, 0) + n


@dataclass
class _Pieces:
    """One changed state's entries in one key group, as pieces: entry ``rows[i]``'s new value is
    ``count[i]`` consecutive pieces (joined by commas); piece j keeps ``pre[j]`` source bytes at
    ``pos[j]`` and replaces the ``user_len[j]`` bytes after them by its migrated user value."""

    sid: int
    rows: np.ndarray
    count: np.ndarray
    pos: np.ndarray
    pre: np.ndarray
    user_len: np.ndarray


class BulkValueRewriter:
    """Collects scanned key groups, migrates their changed values in batches, and yields each
    key group's new uncompressed bytes in order.

    ``states`` maps a state id to ``(layout, migrate)``: the state's layout (kind, TTL, how list
    elements end) and the migration of a binary array of user values."""

    def __init__(self, states: dict[int, tuple[StateLayout, Migration]], where: str) -> None:
        self.states = states
        self.where = where
        self.pending: list[tuple[ScannedGroup, list[_Pieces]]] = []
        self.count = 0
        self.migrated: dict[int, int] = dict.fromkeys(states, 0)
        # the gathered values per state, reused: fresh pages cost more than the copy; one per state,
        # as a migration may hand back its input (or views of it) and every state's new values are
        # read when the groups are rebuilt
        self._scratch = {sid: np.empty(0, np.uint8) for sid in states}
        self.scan_arrays = ScanArrays()

    def add(self, group: ScannedGroup) -> None:
        parts = []
        for sid, (layout, _) in self.states.items():
            rows = group.rows_of(sid)
            if len(rows):
                part = _pieces(group, sid, layout, rows, f"{self.where} key group {group.key_group}")
                parts.append(part)
                self.count += len(part.pos)
        self.pending.append((group, parts))

    def flush(self) -> list[tuple[ScannedGroup, memoryview]]:
        """Every pending key group (or slice) and its new uncompressed bytes, in order added."""
        new: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}  # (group, part) → (offsets, data)
        for sid, (_, migrate) in self.states.items():
            mine = [(k, j, part) for k, (_, parts) in enumerate(self.pending) for j, part in enumerate(parts)
                    if part.sid == sid]
            values = self._gather(sid, [(self.pending[k][0], part) for k, _, part in mine])
            offsets, data = np.zeros(1, np.int64), np.empty(0, np.uint8)
            if values is not None:
                out = migrate(values)
                if isinstance(out, pa.ChunkedArray):
                    out = out.combine_chunks()
                if len(out) != len(values) or out.null_count:
                    raise FlinkSavepointError(f"{self.where}: the value migration returned {len(out)} values "
                                              f"({out.null_count} null) for {len(values)}")
                self.migrated[sid] += len(values)
                offsets, data = _binary_buffers(out)
            at = 0
            for k, j, part in mine:
                m = len(part.pos)
                new[(k, j)] = (offsets[at:at + m + 1], data)
                at += m
        result = [(g, _rebuild(g, parts, [new[(k, j)] for j in range(len(parts))]))
                  for k, (g, parts) in enumerate(self.pending)]
        self.pending.clear()
        self.count = 0
        return result

    def _gather(self, sid: int, parts: list[tuple[ScannedGroup, _Pieces]]) -> pa.Array | None:
        """One binary array of the user values of the pieces of ``parts``."""
        n = sum(len(p.pos) for _, p in parts)
        if n == 0:
            return None
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.concatenate([p.user_len for _, p in parts]), out=offsets[1:])
        if len(self._scratch[sid]) < offsets[-1]:
            self._scratch[sid] = np.empty(int(offsets[-1] * 1.25), np.uint8)
        data = self._scratch[sid][:int(offsets[-1])]
        at = 0
        for g, p in parts:
            m = len(p.pos)
            if kernels.KERNELS.copy_slices(g.buf, p.pos + p.pre, p.user_len, data, offsets[at:at + m], 0, m) != -1:
                raise FlinkSavepointError(f"{self.where}: a value lies outside its key group")
            at += m
        large = offsets[-1] > np.iinfo(np.int32).max
        t, off = (pa.large_binary(), offsets) if large else (pa.binary(), offsets.astype(np.int32))
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(off), pa.py_buffer(data)])


def _pieces(g: ScannedGroup, sid: int, layout: StateLayout, rows: np.ndarray, where: str) -> _Pieces:
    """The pieces of state ``sid``'s entries ``rows`` of ``g`` (checked as the per-entry path
    checks them: a TTL timestamp and a map's null flag must be there)."""
    t = TTL_BYTES if layout.ttl else 0
    vp, vl = g.val_pos[rows], g.val_len[rows]
    if layout.kind == "map":
        if len(vl) and vl.min() < 1:
            raise FlinkSavepointError(f"{where}: a map value is shorter than its null flag and TTL timestamp")
        present = np.frombuffer(g.buf, np.uint8)[vp] == 0  # a set null flag: the entry is kept as it is
        rows, vp, vl = rows[present], vp[present], vl[present]
        t += 1
        if len(vl) and vl.min() < t:
            raise FlinkSavepointError(f"{where}: a map value is shorter than its null flag and TTL timestamp")
    elif layout.kind == "list":
        pos, end, count = _list_elements(g, rows, layout, t, where)
        return _Pieces(sid, rows, count, pos, np.full(len(pos), t, np.int64), end - pos - t)
    elif t and len(vl) and vl.min() < t:
        raise FlinkSavepointError(f"{where}: TTL value of {int(vl[vl < t][0])} bytes has no 8-byte timestamp")
    return _Pieces(sid, rows, np.ones(len(rows), np.int64), vp, np.full(len(rows), t, np.int64), vl - t)


def _list_elements(g: ScannedGroup, rows: np.ndarray, layout: StateLayout, t: int,
                   where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every element of the list values of ``rows``: (start, end, elements per row). Elements of
    a fixed length or behind an ``i32`` length go through ``list_split``; others are found by
    decoding each one (``StateLayout.split_list``, the reference)."""
    codec = layout.element_codec
    assert codec is not None
    if codec.fixed >= 0 or codec.prefixed:
        fixed = codec.fixed if codec.fixed >= 0 else -1
        smallest = t + (fixed if fixed >= 0 else 4) + 1  # one element and its comma
        cap = int((g.val_len[rows] // smallest).sum()) + len(rows)
        pos, end, count = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(len(rows), np.int64)
        status, k, r = kernels.KERNELS.list_split(g.buf, g.val_pos, g.val_len, rows, t, fixed, pos, end, count)
        if status == BLOCK_OK:
            return pos[:k], end[:k], count
        bad = int(rows[r])
        start = int(g.val_pos[bad])
        layout.split_list(bytes(memoryview(g.buf)[start:start + int(g.val_len[bad])]))  # raises the exact error
        raise FlinkSavepointError(f"{where}: the list value of entry {bad} does not split into elements "
                                  f"(status {status}) where the per-entry splitter did")
    starts, ends, counts = [], [], []
    view = memoryview(g.buf)
    for row in rows.tolist():
        at = int(g.val_pos[row])
        elements = layout.split_list(bytes(view[at:at + int(g.val_len[row])]))
        for e in elements:
            starts.append(at)
            ends.append(at + len(e))
            at += len(e) + 1
        counts.append(len(elements))
    return np.array(starts, np.int64), np.array(ends, np.int64), np.array(counts, np.int64)


def _binary_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The int64 offsets (``len + 1``, absolute into data) and the data of a binary array."""
    bufs = arr.buffers()
    dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    return offsets, data


def _rebuild(g: ScannedGroup, parts: list[_Pieces], news: list[tuple[np.ndarray, np.ndarray]]) -> memoryview:
    """The key group with the migrated values in place (the ``kg_rebuild`` kernel): per entry
    the source bytes since the previous value (state id, key length, key), then the source value
    or the new one (its length, then each piece's kept bytes and new value, commas between);
    then the source's tail (the end mark)."""
    n = len(g.val_pos)
    first = np.full(n, -1, np.int64)
    count = np.zeros(n, np.int64)
    if len(parts) == 1:
        part = parts[0]
        new_off, data = news[0]
        pos, pre = part.pos, part.pre
    elif parts:  # several states change in this group: their pieces and new values side by side
        pieces = [(o, d[int(o[0]):int(o[-1])]) for o, d in news]
        new_off = np.zeros(sum(len(p.pos) for p in parts) + 1, np.int64)
        data = np.concatenate([d for _, d in pieces])
        base = at = 0
        for p, (o, d) in zip(parts, pieces, strict=True):
            m = len(p.pos)
            new_off[at + 1:at + m + 1] = o[1:] - o[0] + base
            base += len(d)
            at += m
        pos = np.concatenate([p.pos for p in parts])
        pre = np.concatenate([p.pre for p in parts])
    else:
        new_off, data = np.zeros(1, np.int64), np.empty(0, np.uint8)
        pos = pre = np.empty(0, np.int64)
    at = 0
    changed = 0
    for p in parts:
        ends = np.cumsum(p.count)
        first[p.rows] = ends - p.count + at
        count[p.rows] = p.count
        at += int(ends[-1]) if len(ends) else 0
        changed += int(g.val_len[p.rows].sum()) - int(np.maximum(p.count - 1, 0).sum())
    total = memoryview(g.buf).nbytes - changed + int(pre.sum()) + int(new_off[-1] - new_off[0])
    out = pooled(total)
    written = kernels.KERNELS.kg_rebuild(g.buf, g.val_pos, g.val_len, first, count, pos, pre, new_off, data, out)
    if written != total:
        raise FlinkSavepointError(f"key group {g.key_group}: rebuilding entry {-1 - written} failed "
                                  f"(wrote {written} of {total} bytes)")
    return memoryview(out.data)[g.skip:]  # a slice's borrowed state id is not the key group's
