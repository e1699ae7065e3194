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

import functools
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
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


@dataclass(frozen=True)
class SliceStart:
    """Where a slice of a key group starts, so that :func:`scan_slices` can begin there: ``at``,
    its offset in the key group's uncompressed bytes; ``run``, the state whose run it continues
    (-1: it starts with a state id); ``stored``, the stream offset of the stored piece holding
    ``at`` (a Snappy chunk boundary when compressed); ``skip``, that piece's uncompressed bytes
    before ``at``. Plain numbers: one Spark task finds them, others begin there."""

    at: int
    run: int
    stored: int
    skip: int


@dataclass(frozen=True)
class KeyGroupPiece:
    """Consecutive slices of one key group, one task's share of it: from ``start`` (``None``:
    where the key group starts) up to the slice that starts at uncompressed byte ``stop`` (-1:
    to the key group's end). Its slices are the ones a scan of the whole key group makes."""

    key_group: int
    start: SliceStart | None
    stop: int


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
                slice_bytes: int = SLICE_BYTES, scratch: ScanArrays | None = None,
                pool: Executor | None = None, ahead: int = 0, *, piece: KeyGroupPiece | None = None,
                starts: list[SliceStart] | None = None) -> Iterator[ScannedGroup]:
    """One key group as slices of about ``slice_bytes`` uncompressed bytes (more only when a
    single entry is larger), each ending after a whole entry, the last one after the end mark.
    Memory holds one slice and one read piece, whatever the key group's size; ``scratch`` keeps
    the scan's arrays from one key group to the next.

    With ``pool`` a compressed key group's pieces are decompressed on its threads, up to
    ``ahead`` pieces ahead of the scan (:func:`_decompressed_ahead`): the cut (which needs the
    previous slice's end) then only copies and scans, and the Snappy decoding, most of a slice's
    cost before its migration, runs in parallel. The slices are the same either way.

    A cut depends only on the bytes from where its slice starts, so the scan can begin at any
    slice (``piece``: from its start up to its stop) and makes there the slices a scan of the
    whole key group makes; ``starts`` receives where each slice after the first starts
    (:func:`piece_starts` cuts a key group into pieces for separate tasks from them)."""
    where = f"{where} key group {ext.key_group}"
    # a compressed piece decompresses to a few times its size: read less of it at a time
    read = max(slice_bytes // 4, _MAX_CHUNK) if compressed else slice_bytes
    start = piece.start if piece is not None else None
    stored_at: deque[int] = deque()  # the stream offset of each stored piece read and not yet taken
    pieces = _stored_pieces(source, ext, compressed, where, read, ext.offset if start is None else start.stored,
                            stored_at)
    if pool is not None and compressed and ahead > 0:
        pieces = _decompressed_ahead(pieces, pool, ahead)
    scratch = scratch or ScanArrays()
    carry: Any = b""  # the bytes after the previous slice's last whole entry
    run = -1  # the state whose run the carry continues (-1: the carry starts with a state id)
    at = 0  # where the carry starts in the key group
    held: deque[tuple[int, int]] = deque()  # (uncompressed offset, stream offset) of the pieces the carry may be in
    raw = 0  # the uncompressed offset where the next stored piece starts
    want = slice_bytes
    more = True
    first = True
    total = -1  # the key group's uncompressed size, found when an entry outgrows a slice
    if start is not None:  # begin inside the key group: its first stored piece, less the bytes before ``at``
        head = next(pieces, None)
        if head is None or not 0 <= start.skip <= head[1]:
            raise FlinkSavepointError(f"{where}: no slice of the key group starts at byte {start.at}")
        buf = pooled(head[1])
        head[0](buf)
        carry = buf[start.skip:]
        held.append((start.at - start.skip, stored_at.popleft()))
        raw, run, at, first = start.at - start.skip + head[1], start.run, start.at, False
    until = piece.stop if piece is not None else -1  # where the piece's last slice ends
    while True:
        parts, size = [], len(carry)
        while more and size < want:
            got = next(pieces, None)
            if got is None:
                more = False
            else:
                parts.append(got)
                held.append((raw, stored_at.popleft()))
                raw += got[1]
                size += got[1]
        # the window is allocated once at its size, from Arrow's pool (fresh pages would fault in
        # every slice), and each piece is decompressed straight into its place; a window grown for
        # one large entry is a mapping of its own, unmapped when its slice is done (the pool keeps
        # freed pages resident for the next slice: hundreds of MB of them after a large entry)
        skip = 2 if run >= 0 else 0
        window = pooled(skip + size) if want <= slice_bytes else np.empty(skip + size, np.uint8)
        if skip:
            window[:2] = (run >> 8, run & 0xFF)
        pos = skip + len(carry)
        window[skip:pos] = np.frombuffer(carry, np.uint8)
        for fill, n in parts:
            fill(window[pos:pos + n])
            pos += n
        carry, parts = b"", []  # copied: a grown window's predecessor is not held while its slice is out
        stop = min(len(window), skip + want)  # a slice scans about ``want`` bytes of a larger window
        # the scan's six arrays take 48 bytes an entry: room for a slice's worth, never a grown window's
        status, ne, nr, end, arrays = _scan(window, n_states, scratch, stop, slice_bytes // MIN_ENTRY_BYTES + 1)
        full = status == BLOCK_CAPACITY  # the arrays are full: the slice ends after the entries found
        label = f"{where} (slice from byte {at})"
        if more and status == BLOCK_OK and end == len(window) and next(pieces, None) is None:
            more = False  # the end mark ends the stored bytes too
        if not more and stop == len(window) and not full:  # the last slice: it must end exactly with the end mark
            if status != BLOCK_OK or end != len(window):
                _refuse(window, status, end, n_states, label)
            yield _scanned(ext.key_group, window.data, ne, nr, end, arrays, skip, first)
            return
        if status == BLOCK_OK:  # the end mark, but the key group goes on
            raise FlinkSavepointError(f"{label}: bytes after the end of the key group at offset {end - skip}")
        if ne == 0:  # not one whole entry yet: a broken one, or one larger than the slice
            needs = _claimed(window, stop, status, end)
            if needs < 0:
                _refuse(window, status, end, n_states, label)
            if needs - skip > MAX_ENTRY_BYTES:
                raise FlinkSavepointError(f"{label}: the entry at offset {end - skip} declares more than "
                                          f"{MAX_ENTRY_BYTES:,} bytes, the most statemorph holds for one entry")
            if total < 0:  # what the key group holds, once: an entry is never grown past it
                total = _raw_size(source, ext, compressed, where, read)
            if at + needs - skip > total:
                raise FlinkSavepointError(f"{label}: the entry at offset {end - skip} runs past the end of the key "
                                          f"group (it needs {at + needs - skip} of its {total} bytes)")
            want = _grown(want, needs - skip, status, slice_bytes)
            carry = window.data[skip:]
            continue
        key_pos, _, val_pos, val_len, run_state, _ = arrays
        cut = int(val_pos[ne - 1] + val_len[ne - 1])
        yield _scanned(ext.key_group, window.data[:cut], ne, nr, cut, arrays, skip, first)
        first = False
        run = -1 if window[key_pos[ne - 1]] & FLAG else int(run_state[nr - 1])
        carry = window.data[cut:]
        at += cut - skip
        want = slice_bytes
        while len(held) > 1 and held[1][0] <= at:
            held.popleft()
        if starts is not None:
            starts.append(SliceStart(at, run, held[0][1], at - held[0][0]))
        if 0 <= until <= at:
            if at != until:
                raise FlinkSavepointError(f"{where}: a slice ends at byte {at}, not at byte {until} where the "
                                          f"key group was cut into pieces")
            return


def piece_starts(source: StreamSource, ext: KeyGroupExtent, compressed: bool, n_states: int, where: str,
                 slice_bytes: int, piece_bytes: int, pool: Executor | None = None,
                 ahead: int = 0) -> list[KeyGroupPiece]:
    """One large key group cut into pieces of about ``piece_bytes`` stored bytes for separate
    tasks, each a run of the slices :func:`scan_slices` makes of the whole group (so cut after
    whole entries, where the local engine's slices start: every piece migrates to the bytes the
    local engine writes there). One pass that reads, decompresses and scans, nothing migrated;
    memory holds one slice. A compressed group's pieces are sized by the compression ratio of
    the stored bytes read so far (1 within its first stored piece)."""
    starts: list[SliceStart] = []
    cuts: list[SliceStart] = []
    mark = 0
    for _ in scan_slices(source, ext, compressed, n_states, where, slice_bytes, None, pool, ahead, starts=starts):
        for s in starts:  # taken as they come: memory holds the pieces' starts, not every slice's
            read = s.at - s.skip  # uncompressed bytes before the stored piece holding ``s``
            ratio = (s.stored - ext.offset) / read if read else 1.0  # stored bytes per byte, so far
            if (s.at - mark) * ratio >= piece_bytes:
                cuts.append(s)
                mark = s.at
        starts.clear()
    begins: list[SliceStart | None] = [None, *cuts]
    stops = [s.at for s in cuts] + [-1]
    return [KeyGroupPiece(ext.key_group, b, e) for b, e in zip(begins, stops, strict=True)]


def _grown(want: int, needs: int, status: int, slice_bytes: int) -> int:
    """The bytes the next window scans when an entry did not fit in ``want``: those its declared
    lengths need and a slice more (the entries behind it), not twice ``want``, which grew a
    window to twice a large entry; doubling only when the bytes ran out before a length field
    (``needs`` is then one byte more than the window)."""
    if status in (BLOCK_KEY_LENGTH, BLOCK_VALUE_LENGTH):
        return needs + slice_bytes
    return max(want * 2, needs)


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
    :func:`~.snappy.framed_raw_size`), read a piece at a time and nothing decompressed."""
    if not compressed:
        return ext.end - ext.offset
    return sum(n for _, n in _stored_pieces(source, ext, compressed, where, piece_bytes))


def _stored_pieces(source: StreamSource, ext: KeyGroupExtent, compressed: bool, where: str,
                   piece_bytes: int, begin: int | None = None,
                   stored_at: deque[int] | None = None) -> Iterator[tuple[Callable[[np.ndarray], None], int]]:
    """The key group's bytes in pieces of at most ``piece_bytes`` stored bytes, each as a function
    that writes its uncompressed bytes into its place in a slice, and their number: an
    uncompressed piece is read straight into it, a compressed group is read here a whole number
    of Snappy chunks at a time, decompressed into it (each chunk checked by the codec, CRC
    included, by :func:`~.snappy.unframe_into`).

    ``begin`` (a Snappy chunk boundary when compressed) starts the pieces inside the key group;
    ``stored_at`` receives each piece's stream offset."""
    what = f"key group {ext.key_group}"
    pos, carry = ext.offset if begin is None else begin, b""
    while pos < ext.end:
        n = min(piece_bytes, ext.end - pos)
        if len(carry) >= 4:  # a chunk the last piece cut (at most 16 MiB, its 3-byte length says): the
            # rest of it at once; piece by piece, its carry was copied once a piece (quadratic)
            n = min(max(n, 4 + int.from_bytes(carry[1:4], "little") - len(carry)), ext.end - pos)
        if not compressed:
            if stored_at is not None:
                stored_at.append(pos)
            yield functools.partial(_read_into, source, pos, what), n
            pos += n
            continue
        raw = memoryview(source.read_at(pos, n, what))
        head = pos  # where ``raw`` starts in the stream
        pos += n
        if head == ext.offset:  # the stream identifier opens the group; every piece gets it back
            check_stream_identifier(raw, where)
            raw = raw[len(STREAM_IDENTIFIER):]
            head += len(STREAM_IDENTIFIER)
        framed = bytearray(STREAM_IDENTIFIER)  # the piece as a framed stream, its bytes copied once
        framed += carry
        framed += raw
        k = whole_chunks(framed, len(STREAM_IDENTIFIER))
        if k > len(STREAM_IDENTIFIER) and stored_at is not None:
            stored_at.append(head - len(carry))
        carry = bytes(memoryview(framed)[k:])
        del framed[k:]
        if k > len(STREAM_IDENTIFIER):
            yield functools.partial(_unframe_into, framed, where), framed_raw_size(framed, where)
    if carry:
        raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: a chunk of "
                                  f"{len(carry)} bytes runs past the key group's end")


Piece = tuple[Callable[[np.ndarray], None], int]
"""A piece of a key group: the function that writes its uncompressed bytes into its place, and
their number."""


def _decompressed_ahead(pieces: Iterator[Piece], pool: Executor, ahead: int) -> Iterator[Piece]:
    """``pieces``, each decompressed on ``pool`` into a buffer of its own up to ``ahead`` pieces
    before it is asked for; asking copies the buffer into its place. Errors come where they did
    without the pool: a piece's decoding error when that piece is written, an error of the stored
    bytes (a chunk past the end) when the piece after the last good one is asked for."""
    pending: deque[tuple[Future[None], np.ndarray, int]] = deque()
    failed: BaseException | None = None

    def copy(done: Future[None], buf: np.ndarray, out: np.ndarray) -> None:
        done.result()
        out[:] = buf

    try:
        while True:
            while failed is None and len(pending) < ahead:
                try:
                    piece = next(pieces, None)
                except FlinkSavepointError as e:
                    failed = e
                    break
                if piece is None:
                    break
                fill, n = piece
                buf = pooled(n)
                pending.append((pool.submit(fill, buf), buf, n))
            if not pending:
                if failed is not None:
                    raise failed
                return
            done, buf, n = pending.popleft()
            yield functools.partial(copy, done, buf), n
    finally:
        for done, _, _ in pending:
            done.cancel()


def _read_into(source: StreamSource, offset: int, what: str, out: np.ndarray) -> None:
    source.read_into(offset, out.data, what)


def _unframe_into(framed: bytes | bytearray, where: str, out: np.ndarray) -> None:
    unframe_into(framed, out, where)
