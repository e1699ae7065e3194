"""Where the entries of a key group are, found by the ``kg_scan`` kernel: whole, or in slices.

A key group holds entries ÷ max parallelism entries, so its size grows with the savepoint (128 key
groups of a 50 M-entry state are ~32 MB each). Holding one whole, several times over (read,
decompressed, scanned, migrated, rebuilt, compressed) on every worker thread made the rewriter's
memory follow the entry count. A key group stored larger than ``slice_bytes`` is therefore cut
into *slices*: its bytes are read and decompressed a bounded piece at a time (Snappy frames are
independent), scanned, and cut after the last whole entry; what follows is carried into the next
slice. A slice that starts inside a state's run is prefixed with that state's id (two bytes the
scan needs and the rebuild drops again, ``ScannedGroup.skip``), so the same kernels scan and
rebuild a slice as they do a whole key group, and each slice is an independent piece of work.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ... import kernels
from ...bulk.chunks import pooled
from ...errors import FlinkSavepointError
from ...kernels.abi import (
    BLOCK_CAPACITY,
    BLOCK_KEY_LENGTH,
    BLOCK_NO_MARK,
    BLOCK_OK,
    BLOCK_SHORT,
    BLOCK_TRUNCATED,
    BLOCK_VALUE_LENGTH,
)
from .files import StreamSource
from .keyed_blocks import FLAG, KeyGroupExtent, StateRun, parse_key_group, read_key_group_view
from .snappy import (
    MAX_CHUNK_DATA,
    STREAM_IDENTIFIER,
    check_stream_identifier,
    framed_raw_size,
    unframe_into,
    whole_chunks,
)

MIN_ENTRY_BYTES = 9
"""``i32 key length ‖ ≥ 1 key byte ‖ i32 value length``: bounds the entries a key group can hold."""
SLICE_BYTES = 1 << 20
"""A key group stored in more bytes than this is scanned (and migrated) in slices of about this
many uncompressed bytes; smaller ones are taken whole."""
MAX_ENTRY_BYTES = 1 << 28
"""The largest entry (key and value, 256 MiB) a slice grows to hold: an entry is held whole, so
without a bound a key group that claims gigabytes (a sparse file, Snappy chunks of zeros) could
make one entry of them. Real entries are far smaller (RocksDB's own guidance keeps values to
megabytes; a list state's value holds all of a key's elements, and one of 256 MiB is millions of
them); a larger one is refused with a FlinkSavepointError naming this limit."""
_MAX_CHUNK = MAX_CHUNK_DATA + 8
"""A Snappy chunk as xerial and Flink write it: 64 KiB of input, 4 header and 4 CRC bytes."""
_RAN_OUT = (BLOCK_SHORT, BLOCK_TRUNCATED, BLOCK_NO_MARK)
"""Scan results that only mean the bytes ended: in a slice, the next entry continues in the next."""


@dataclass
class ScannedGroup:
    """One key group's bytes (or a slice of them) and where its entries' values and state runs
    are (``kg_scan``'s output, trimmed).

    A slice (:func:`scan_slices`) ends after its last whole entry; ``skip`` is the number of bytes
    put in front that are not the key group's (the state id of the run it continues), ``first``
    whether it is where the key group starts (a compressed group's output opens its Snappy stream
    there)."""

    key_group: int
    buf: Any  # the uncompressed bytes (any read-only byte buffer)
    key_pos: np.ndarray
    val_pos: np.ndarray
    val_len: np.ndarray
    run_state: np.ndarray
    run_first: np.ndarray
    end: int
    skip: int = 0
    first: bool = True

    def entry_states(self) -> np.ndarray:
        """The state id of every entry."""
        counts = np.diff(np.append(self.run_first, len(self.val_pos)))
        return np.repeat(self.run_state, counts)

    def rows_of(self, sid: int) -> np.ndarray:
        """The entries of state ``sid``, in order."""
        if len(self.run_state) == 1:  # one state in the group: no per-entry state column needed
            return np.arange(len(self.val_pos)) if self.run_state[0] == sid else np.empty(0, np.int64)
        return np.flatnonzero(self.entry_states() == sid)

    def _run_bounds(self) -> list[int]:
        return [*self.run_first.tolist(), len(self.val_pos)]

    def run_totals(self) -> Iterator[tuple[int, int, int]]:
        """``(state id, entries, key + value bytes)`` of every state run, from the positions
        alone (what ``inspect`` counts: no entry becomes an object)."""
        sizes = np.zeros(len(self.val_pos) + 1, np.int64)
        np.cumsum(self.val_pos - 4 - self.key_pos + self.val_len, out=sizes[1:])
        bounds = self._run_bounds()
        for r, sid in enumerate(self.run_state.tolist()):
            a, b = bounds[r], bounds[r + 1]
            yield sid, b - a, int(sizes[b] - sizes[a])

    def runs(self, state: int | None = None) -> list[StateRun]:
        """The entries (of state id ``state`` only, when given) as per-state runs of ``bytes``
        keys (the end-of-run flag cleared) and values: the per-entry view the table reader builds
        its columns from, one slice at a time."""
        view = memoryview(self.buf).cast("B")
        kp, vp, vl = self.key_pos.tolist(), self.val_pos.tolist(), self.val_len.tolist()
        bounds = self._run_bounds()
        out = []
        for r, sid in enumerate(self.run_state.tolist()):
            if state is not None and sid != state:
                continue
            keys, values = [], []
            for i in range(bounds[r], bounds[r + 1]):
                # one copy of each key and value: a flagged key is its first byte, cleared, joined to a
                # view of the rest (a large entry held three times over took a worker to 1.4 GB)
                first = view[kp[i]]
                if first & FLAG:
                    keys.append(bytes((first & 0x7F,)) + view[kp[i] + 1:vp[i] - 4])
                else:
                    keys.append(view[kp[i]:vp[i] - 4].tobytes())
                values.append(view[vp[i]:vp[i] + vl[i]].tobytes())
            out.append(StateRun(sid, keys, values))
        return out


class ScanArrays:
    """``kg_scan``'s output arrays, kept from one key group to the next (one set per thread):
    sized for the most entries a group of its bytes could hold, they would otherwise be fresh
    pages for every group."""

    def __init__(self) -> None:
        self.arrays = [np.empty(0, np.int64) for _ in range(6)]

    def get(self, cap: int) -> list[np.ndarray]:
        if len(self.arrays[0]) < cap:
            self.arrays = [np.empty(cap, np.int64) for _ in range(6)]
        return self.arrays


def _scan(buf: Any, n_states: int, scratch: ScanArrays, stop: int = -1,
          most: int | None = None) -> tuple[int, int, int, int, list[np.ndarray]]:
    """``kg_scan`` over ``buf[:stop]`` (all of it by default), with room for the most entries
    those bytes can hold, or for ``most`` (then the scan may stop with ``BLOCK_CAPACITY``)."""
    stop = memoryview(buf).nbytes if stop < 0 else stop
    cap = stop // MIN_ENTRY_BYTES + 1
    arrays = scratch.get(cap if most is None else min(cap, most))
    status, ne, nr, end = kernels.KERNELS.kg_scan(buf, 0, stop, n_states, *arrays)
    return status, ne, nr, end, arrays


def _scanned(key_group: int, buf: Any, ne: int, nr: int, end: int, arrays: list[np.ndarray], skip: int = 0,
             first: bool = True) -> ScannedGroup:
    key_pos, _, val_pos, val_len, run_state, run_first = arrays
    return ScannedGroup(key_group, buf, key_pos[:ne].copy(), val_pos[:ne].copy(), val_len[:ne].copy(),
                        run_state[:nr].copy(), run_first[:nr].copy(), end, skip, first)


def scan_key_group(key_group: int, buf: Any, n_states: int, where: str,
                   scratch: ScanArrays | None = None) -> ScannedGroup:
    """The entries of one uncompressed key group; a malformed group raises the per-entry
    reader's error (``parse_key_group``)."""
    status, ne, nr, end, arrays = _scan(buf, n_states, scratch or ScanArrays())
    if status != BLOCK_OK or end != memoryview(buf).nbytes:
        _refuse(buf, status, end, n_states, f"{where} key group {key_group}")
    return _scanned(key_group, buf, ne, nr, end, arrays)


def _refuse(buf: Any, status: int, end: int, n_states: int, where: str) -> None:
    # read for its error only: a byte view (no copy of a grown window) serves as bytes there
    parse_key_group(cast(bytes, memoryview(buf).cast("B")), n_states, where, exact_end=True)
    raise FlinkSavepointError(f"{where}: the block scan stopped at offset {end} (status {status}) where the entry "
                              f"reader did not")


def sliced(ext: KeyGroupExtent, slice_bytes: int = SLICE_BYTES) -> bool:
    """Whether a key group is scanned in slices (:func:`scan_slices`) rather than whole."""
    return ext.end - ext.offset > slice_bytes


def scanned_groups(source: StreamSource, extents: Iterable[KeyGroupExtent], compressed: bool, n_states: int,
                   where: str, slice_bytes: int = SLICE_BYTES) -> Iterator[ScannedGroup]:
    """Every key group of ``extents``, scanned: whole when it is stored in at most
    ``slice_bytes``, else as its slices, one after the other (consecutive items then share a key
    group). The readers' one way through a keyed-state stream (``inspect``'s counts, the state
    tables of ``convert`` and the Spark reader), cut exactly as the migration cuts it: memory
    holds one slice (or one small group), whatever a key group's size or claimed size."""
    scratch = ScanArrays()
    for ext in extents:
        if sliced(ext, slice_bytes):
            yield from scan_slices(source, ext, compressed, n_states, where, slice_bytes, scratch)
        else:
            buf = read_key_group_view(source, ext, compressed, where)
            yield scan_key_group(ext.key_group, buf, n_states, where, scratch)


def scan_slices(source: StreamSource, ext: KeyGroupExtent, compressed: bool, n_states: int, where: str,
                slice_bytes: int = SLICE_BYTES, scratch: ScanArrays | None = None) -> Iterator[ScannedGroup]:
    """One key group as slices of about ``slice_bytes`` uncompressed bytes (more only when a
    single entry is larger), each ending after a whole entry, the last one after the end mark:
    the pieces of :class:`KeyGroupCut`, one after the other on this thread (a parallel runner
    hands them to workers instead; the slices are the same). Memory holds one slice and one read
    piece, whatever the key group's size; ``scratch`` keeps the scan's arrays from one key group
    to the next."""
    cut = KeyGroupCut(source, ext, compressed, n_states, where, slice_bytes)
    scratch = scratch or ScanArrays()
    for i in range(cut.pieces):
        yield from cut.slices_of(i, scratch)


HANDOVER_BYTES = 1 << 20
"""The most bytes (Snappy chunk tail and entry carry) a :class:`Handover` that begins a Spark
task's run of pieces holds: it ships from the cut task through the driver to the task."""


@dataclass(frozen=True)
class Handover:
    """What the pieces before piece ``piece`` of a :class:`KeyGroupCut` hand it (a
    :class:`_Handoff` as plain bytes and numbers, so one Spark task records it and another begins
    there): the stored bytes after the last whole Snappy chunk (``tail``), the stream offset its
    own chunks start at (``to``: past a chunk an earlier piece read whole), the bytes after the
    last whole entry (``carry``), the state whose run they continue (``run``), their offset in the
    key group (``at``), the bytes the entry they begin needs (``needs``) and whether a slice has
    been cut yet (``first``)."""

    piece: int
    tail: bytes
    to: int
    carry: bytes
    run: int
    at: int
    needs: int
    first: bool


@dataclass(frozen=True)
class KeyGroupPiece:
    """One Spark task's share of a large key group: the pieces ``start.piece`` (0 without a
    ``start``) up to ``stop`` of its :class:`KeyGroupCut`, begun from ``start``'s hand-over. Its
    slices are those the local engine's cut of the whole key group makes there: the same cut."""

    key_group: int
    start: Handover | None
    stop: int

    @property
    def pieces(self) -> range:
        return range(0 if self.start is None else self.start.piece, self.stop)


def key_group_pieces(source: StreamSource, ext: KeyGroupExtent, compressed: bool, n_states: int, where: str,
                     slice_bytes: int, piece_bytes: int) -> list[KeyGroupPiece]:
    """One large key group cut into runs of :class:`KeyGroupCut`'s pieces of about
    ``piece_bytes`` stored bytes for separate tasks: its cut, run here piece after piece (memory:
    one piece), records the hand-over into a piece where a run begins. Only a hand-over with no
    entry waiting for more pieces and at most :data:`HANDOVER_BYTES` of chunk tail and carry
    begins a run, so each run ships cheaply and ends after its last piece's last whole entry,
    where the next one begins."""
    cut = KeyGroupCut(source, ext, compressed, n_states, where, slice_bytes)
    scratch = ScanArrays()
    out: list[KeyGroupPiece] = []
    start: Handover | None = None
    mark = 0
    for i in range(cut.pieces):
        if i and (i - mark) * cut.read >= piece_bytes:
            h = cut.handover(i)
            if h is not None:
                out.append(KeyGroupPiece(ext.key_group, start, i))
                start, mark = h, i
        cut.slices_of(i, scratch)
    out.append(KeyGroupPiece(ext.key_group, start, cut.pieces))
    return out


HEADROOM = 4096
"""Bytes kept free in front of a piece's buffer: the state id and the carry (the part of an entry
that began in the previous piece) are put there, so a piece is scanned in place; a longer carry
costs one copy of the piece."""


class _Handoff:
    """What piece ``i`` of a key group hands piece ``i + 1``: first the stored bytes after its
    last whole Snappy chunk (``tail``), then (``ready``) the bytes after its last whole entry
    (``carry``, a list of buffers joined only when the entry is complete), the state whose run
    they continue (``run``, -1 when they start with a state id), their offset in the key group
    (``at``), how many bytes the entry they begin needs at least (``needs``), and whether a slice
    has been cut yet (``first``); ``to``: the stream offset the next piece's chunks start at
    (past the end of a chunk this piece read whole); ``done``: the key group's last slice has
    been cut (by a piece that read its last chunk to the end). ``failed``: an earlier piece
    raised, nothing follows."""

    def __init__(self) -> None:
        self.chunks = threading.Event()
        self.ready = threading.Event()
        self.tail = b""
        self.to = 0
        self.done = False
        self.carry: list[Any] = []
        self.run = -1
        self.at = 0
        self.needs = 0
        self.first = True
        self.failed = False

    def fail(self) -> None:
        self.failed = True
        self.chunks.set()
        self.ready.set()


class KeyGroupCut:
    """A key group stored in more than ``slice_bytes`` bytes, cut into slices by pieces that
    different workers take at once.

    Its stored bytes are read in fixed pieces (``slice_bytes``, or half of it when compressed: a
    piece decompresses to a few times its size, and a piece is a slice: fewer, larger ones cost
    less per entry; a chunk that a piece cuts and that reaches past the next piece is read to its
    end by that piece, the pieces it covers read nothing). A worker takes piece ``i``
    (:meth:`slices_of`) and reads it; waits until piece ``i - 1`` has found its last whole Snappy
    chunk, takes the bytes after it and hands on its own (a short walk over chunk headers);
    decompresses its whole chunks; waits for the bytes after piece ``i - 1``'s last whole entry,
    puts them in front of its own (with the state id of the run they continue), scans, and hands
    on what follows its own last whole entry. Only the two hand-overs are in order, each a few
    microseconds; reading, decompressing and scanning run on every worker at once, and no
    thread cuts for the others. Workers must take the pieces in order (a FIFO pool fed in
    order, or one thread): a piece waits only for an earlier one. A piece that raises marks the
    pieces after it failed, so none waits forever.

    ``start`` begins the cut at its piece with a recorded hand-over (:func:`key_group_pieces`:
    a Spark task's run of pieces); the pieces from there cut as they do in a cut of the whole
    key group."""

    def __init__(self, source: StreamSource, ext: KeyGroupExtent, compressed: bool, n_states: int, where: str,
                 slice_bytes: int = SLICE_BYTES, start: Handover | None = None) -> None:
        self.source = source
        self.ext = ext
        self.compressed = compressed
        self.n_states = n_states
        self.where = f"{where} key group {ext.key_group}"
        self.slice_bytes = slice_bytes
        # a piece smaller than a Snappy chunk is fine: the piece that cuts a chunk reads it to its end
        self.read = max(slice_bytes // 2, 2 * len(STREAM_IDENTIFIER)) if compressed else slice_bytes
        self.pieces = max(1, -(-(ext.end - ext.offset) // self.read))
        # hand-overs are made as the pieces reach them and dropped once taken: a key group that
        # claims a terabyte (a sparse file) has a million pieces, and one object each, made up
        # front, took 3 GB and 20 s before its first byte was read
        self._handoffs: dict[int, _Handoff] = {}
        self._lock = threading.Lock()
        first = self._handoff(0 if start is None else start.piece)
        first.to = ext.offset
        if start is not None:
            if not 0 < start.piece < self.pieces:
                raise FlinkSavepointError(f"{self.where}: no piece {start.piece} to begin at")
            first.tail, first.to, first.carry = start.tail, start.to, [start.carry] if start.carry else []
            first.run, first.at, first.needs, first.first = start.run, start.at, start.needs, start.first
        first.chunks.set()
        first.ready.set()
        self._total = -1

    def _handoff(self, i: int) -> _Handoff:
        """What piece ``i - 1`` hands piece ``i``: made by whichever of the two asks first."""
        with self._lock:
            h = self._handoffs.get(i)
            if h is None:
                h = self._handoffs[i] = _Handoff()
            return h

    def handover(self, i: int) -> Handover | None:
        """What the pieces before ``i`` (all cut) hand piece ``i``, to begin there elsewhere;
        ``None`` while an entry waits for more pieces or it holds more than
        :data:`HANDOVER_BYTES`."""
        h = self._handoff(i)
        held = len(h.tail) + sum(memoryview(c).nbytes for c in h.carry)
        if not h.ready.is_set() or h.failed or h.done or h.needs or held > HANDOVER_BYTES:
            return None
        carry = b"".join(bytes(memoryview(c).cast("B")) for c in h.carry)
        return Handover(i, bytes(h.tail), h.to, carry, h.run, h.at, h.needs, h.first)

    def slices_of(self, i: int, scratch: ScanArrays) -> list[ScannedGroup]:
        """The slices that end in piece ``i`` (none when an entry spans the whole piece), cut
        after whole entries; the last piece's end with the end mark."""
        into, out = self._handoff(i), self._handoff(i + 1)
        try:
            own, n = self._own_bytes(i, into, out)
            if into.failed:
                raise FlinkSavepointError(f"{self.where}: an earlier piece of the key group was refused")
            if into.done:  # an earlier piece read the key group to its end (a chunk it cut): nothing here
                out.to, out.done = into.to, True
                out.ready.set()
                return []
            return self._cut(i, own, n, into, out, scratch)
        except BaseException:
            out.fail()
            raise
        finally:  # only this piece reads what the previous one handed on: it goes now
            into.carry, into.tail = [], b""
            with self._lock:
                self._handoffs.pop(i, None)

    def _own_bytes(self, i: int, into: _Handoff, out: _Handoff) -> tuple[np.ndarray, int]:
        """Piece ``i`` read (and decompressed) into a buffer behind :data:`HEADROOM` free bytes,
        and its number of bytes."""
        pos = self.ext.offset + i * self.read
        n = min(self.read, self.ext.end - pos)
        what = f"key group {self.ext.key_group}"
        if not self.compressed:
            own = pooled(HEADROOM + n)
            self.source.read_into(pos, own[HEADROOM:].data, what)
            out.chunks.set()
            into.ready.wait()
            return own, n
        # read behind room for the stream identifier and the previous piece's partial chunk, so
        # the whole chunks are decoded where they were read; bytes an earlier piece already read
        # (the rest of a chunk it read whole) are not read again
        ident = len(STREAM_IDENTIFIER)
        room = ident + _MAX_CHUNK
        begin = max(pos, into.to) if into.chunks.is_set() else pos
        stored = pooled(room + max(0, pos + n - begin))
        if begin < pos + n:
            self.source.read_into(begin, stored[room:].data, what)
        if i == 0:  # the stream identifier opens the group
            check_stream_identifier(stored[room:room + ident], self.where)
        into.chunks.wait()
        if into.failed:
            raise FlinkSavepointError(f"{self.where}: an earlier piece of the key group was refused")
        tail = into.tail
        room = min(room + max(0, into.to - begin), len(stored))  # the own bytes start past ``into.to``
        if i == 0:
            start = room
        else:  # a partial chunk that ends in this piece: longer ones were read at once
            start = room - len(tail) - ident
            stored[start:start + ident] = np.frombuffer(STREAM_IDENTIFIER, np.uint8)
            stored[start + ident:room] = np.frombuffer(tail, np.uint8)
        end = whole_chunks(stored, start + ident)
        out.to = max(pos + n, into.to)
        rest = len(stored) - end
        chunk = 4 + int.from_bytes(stored[end + 1:end + 4].tobytes(), "little") if rest >= 4 else 0
        if chunk > rest and (chunk > _MAX_CHUNK or chunk - rest > self.read):
            # a chunk this piece cuts that reaches past the next piece (up to 16 MiB, its 3-byte
            # length says; longer than the format's, or pieces smaller than a chunk): its rest is
            # read now, at once; handed on piece by piece it was copied once a piece (quadratic)
            out.to = pos + n + chunk - rest
            if out.to > self.ext.end:
                raise FlinkSavepointError(f"{self.where}: corrupt Snappy-framed key group: a chunk of "
                                          f"{out.to - (pos + n) + rest} bytes runs past the key group's end")
            more = np.empty(out.to - (pos + n), np.uint8)
            self.source.read_into(pos + n, more.data, what)
            stored = np.concatenate([stored, more])
            end = len(stored)
        out.tail = stored[end:].tobytes()
        out.chunks.set()
        if i == self.pieces - 1 and out.tail:
            raise FlinkSavepointError(f"{self.where}: corrupt Snappy-framed key group: a chunk of "
                                      f"{len(out.tail)} bytes runs past the key group's end")
        framed = stored[start:end]
        chunks = end > start + ident
        size = framed_raw_size(framed, self.where) if chunks else 0
        own = pooled(HEADROOM + size)
        if chunks:
            unframe_into(framed, own[HEADROOM:], self.where)
        into.ready.wait()
        return own, size

    def _cut(self, i: int, own: np.ndarray, n: int, into: _Handoff, out: _Handoff,
             scratch: ScanArrays) -> list[ScannedGroup]:
        # the last piece, or the one that read the key group's last chunk to its end
        last = i == self.pieces - 1 or (self.compressed and out.to >= self.ext.end)
        carry, run, at, needs, first = into.carry, into.run, into.at, into.needs, into.first
        held = sum(memoryview(c).nbytes for c in carry)
        if not last and held + n < needs:  # the entry the carry begins goes on past this piece
            # the pieces of a large entry are held out of Arrow's pool, which keeps freed pages
            # resident: copied into the entry's window they are freed for good (so the entry is
            # held twice at most, then once); a piece with no whole chunk adds nothing
            held_on = [*carry, own[HEADROOM:HEADROOM + n].copy().data] if n else carry
            out.carry, out.run, out.at, out.needs, out.first = held_on, run, at, needs, first
            out.ready.set()
            return []
        window = self._window(own, n, carry, held, run)
        carry = into.carry = []  # copied: a grown window's pieces are not held while its slices are out
        del own
        slices: list[ScannedGroup] = []
        most = self.slice_bytes // MIN_ENTRY_BYTES + 1  # 48 bytes an entry: room for a slice's worth
        while True:
            skip = 2 if run >= 0 else 0
            status, ne, nr, end, arrays = _scan(window, self.n_states, scratch, most=most)
            full = status == BLOCK_CAPACITY  # the arrays are full: the slice ends after the entries found
            label = f"{self.where} (slice from byte {at})"
            if last and not full:  # it must end exactly with the end mark
                if status != BLOCK_OK or end != len(window):
                    _refuse(window, status, end, self.n_states, label)
                slices.append(_scanned(self.ext.key_group, window.data, ne, nr, end, arrays, skip, first))
                out.done = True
                out.ready.set()
                return slices
            if status == BLOCK_OK:  # the end mark, but the key group goes on
                raise FlinkSavepointError(f"{label}: bytes after the end of the key group at offset {end - skip}")
            if ne == 0:  # not one whole entry yet: a broken one, or one larger than the piece
                needs = self._needs(window, status, end, skip, at, label)
                part = window[skip:] if window.base is None else window[skip:].copy()  # out of the pool (below)
                out.carry, out.run, out.at, out.needs, out.first = [part.data], run, at, needs, first
                out.ready.set()
                return slices
            key_pos, _, val_pos, val_len, run_state, _ = arrays
            cut = int(val_pos[ne - 1] + val_len[ne - 1])
            slices.append(_scanned(self.ext.key_group, window.data[:cut], ne, nr, cut, arrays, skip, first))
            first = False
            run = -1 if window[key_pos[ne - 1]] & FLAG else int(run_state[nr - 1])
            at += cut - skip
            rest = window.data[cut:]
            if not full and not last:
                out.carry, out.run, out.at, out.needs, out.first = [rest], run, at, 0, first
                out.ready.set()
                return slices
            window = self._window(None, 0, [rest], len(rest), run)  # the rest of a full scan, cut again here

    def _window(self, own: np.ndarray | None, n: int, carry: list[Any], held: int, run: int) -> np.ndarray:
        """The state id of the run the carry continues, the carry, then the piece's own bytes:
        in place in the piece's buffer when they fit in its headroom, else in a new one."""
        skip = 2 if run >= 0 else 0
        if own is not None and skip + held <= HEADROOM:
            window = own[HEADROOM - held - skip:HEADROOM + n]
        elif held <= self.slice_bytes:
            window = pooled(skip + held + n)
        else:  # grown for a large entry: a mapping of its own, unmapped when its slices are done (the
            # pool keeps freed pages resident for the next slice: hundreds of MB after a large entry)
            window = np.empty(skip + held + n, np.uint8)
            if own is not None:
                window[skip + held:] = own[HEADROOM:HEADROOM + n]
        if skip:
            window[:2] = (run >> 8, run & 0xFF)
        at = skip
        for c in carry:
            m = memoryview(c).nbytes
            window[at:at + m] = np.frombuffer(c, np.uint8)
            at += m
        return window

    def _needs(self, window: np.ndarray, status: int, end: int, skip: int, at: int, label: str) -> int:
        """How many bytes the entry that starts the window needs at least (its declared lengths),
        refused when they are broken, larger than :data:`MAX_ENTRY_BYTES`, or run past the key
        group."""
        needs = _claimed(window, len(window), status, end)
        if needs < 0:
            _refuse(window, status, end, self.n_states, label)
        if needs - skip > MAX_ENTRY_BYTES:
            raise FlinkSavepointError(f"{label}: the entry at offset {end - skip} declares more than "
                                      f"{MAX_ENTRY_BYTES:,} bytes, the most statemorph holds for one entry")
        with self._lock:
            if self._total < 0:  # what the key group holds, once: an entry is never grown past it
                self._total = _raw_size(self.source, self.ext, self.compressed, self.where, self.read)
        if at + needs - skip > self._total:
            raise FlinkSavepointError(f"{label}: the entry at offset {end - skip} runs past the end of the key "
                                      f"group (it needs {at + needs - skip} of its {self._total} bytes)")
        return needs - skip


def _claimed(window: np.ndarray, stop: int, status: int, end: int) -> int:
    """When the scan of ``window[:stop]`` stopped only because the bytes ended (a length that
    reaches past them): how many bytes of the window the entry needs at least, by its declared
    lengths; -1 when it stopped at a length no key group can hold."""
    if status in _RAN_OUT:
        return stop + 1
    if status in (BLOCK_KEY_LENGTH, BLOCK_VALUE_LENGTH) and end + 4 <= stop:
        n = int.from_bytes(window[end:end + 4].tobytes(), "big", signed=True)
        if status == BLOCK_KEY_LENGTH:
            return end + 8 + n if n > 0 else -1  # the key, then the value's length
        return end + 4 + n if n >= 0 else -1
    return -1


def _raw_size(source: StreamSource, ext: KeyGroupExtent, compressed: bool, where: str, piece_bytes: int) -> int:
    """The uncompressed bytes of a key group, from its chunks' declared sizes (each bounded by
    :func:`~.snappy.framed_raw_size`), read ``piece_bytes`` stored bytes at a time (a whole number
    of Snappy chunks each), nothing decompressed."""
    if not compressed:
        return ext.end - ext.offset
    what = f"key group {ext.key_group}"
    pos, carry, total = ext.offset, b"", 0
    while pos < ext.end:
        n = min(piece_bytes, ext.end - pos)
        if len(carry) >= 4:  # a chunk the last piece cut (at most 16 MiB, its 3-byte length says): the
            # rest of it at once; piece by piece, its carry was copied once a piece (quadratic)
            n = min(max(n, 4 + int.from_bytes(carry[1:4], "little") - len(carry)), ext.end - pos)
        raw = source.read_at(pos, n, what)
        pos += n
        if pos - n == ext.offset:  # the stream identifier opens the group; every piece gets it back
            check_stream_identifier(raw, where)
            raw = raw[len(STREAM_IDENTIFIER):]
        data = carry + raw if carry else raw
        k = whole_chunks(data)
        carry = data[k:]
        if k:
            total += framed_raw_size(STREAM_IDENTIFIER + data[:k], where)
    if carry:
        raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: a chunk of "
                                  f"{len(carry)} bytes runs past the key group's end")
    return total
