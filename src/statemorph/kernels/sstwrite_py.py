"""Python twins of the RocksDB table (SST) *writing* kernels (``kernels/_native/sstwrite.pyx``):
the same names, arguments, status codes and bytes, as plain Python. The compiled tier must equal
these byte for byte (tests/kernels/test_sst_writer.py); ``STATEMORPH_NATIVE=0`` runs them.

They write what RocksDB's ``BlockBasedTableBuilder`` writes for a sorted run of user keys, each
stored as one Put at sequence number 0 (the entries of an ``SstFileWriter`` file), in the layout
the reading kernels (:mod:`.sst_py`, whose docstring describes it) take:

- ``snappy_compress``: raw Snappy (the format RocksDB's ``kSnappyCompression`` blocks hold), by
  Snappy's own greedy algorithm (4-byte hash of each position, 64 KiB fragments, literals and
  1- / 2-byte-offset copies, the skip heuristic over incompressible bytes);
- ``sst_data``: data blocks from flat key / value buffers (``off[i]`` to ``off[i + 1]``): each
  internal key (user key ‖ 8-byte trailer) prefix-compressed against the previous one, a restart
  every ``restart_interval`` entries, the block closed by RocksDB's ``FlushBlockBySizePolicy``
  (at ``block_size``, or earlier when the next entry would pass it and the block is within
  ``deviation`` percent of it), compressed when that saves enough (``per_kb``: the most
  compressed bytes a KiB may keep, RocksDB's ``max_compressed_bytes_per_kb``), and followed by
  its trailer; each block's index entry (the shortest separator between its last user key and
  the next block's first, as RocksDB's ``kShortenSeparators`` index shortening makes it, and the
  block's handle) is appended to an index buffer, every entry a restart (``index_block_restart_interval=1``,
  values delta-encoded: no value length);
- ``sst_seal``: a block's entries closed with their restart array, compressed or not, and its
  trailer (the index, properties and meta index blocks);
- ``sst_reframe``: blocks of a file read (checked, decompressed) and written again (compressed,
  new trailer): the floor any rewrite of a table pays, which the benchmarks measure.

Counters and positions carried from call to call live in ``state`` (``STATE_*``). ``sst_data``
leaves an unfinished last block to the next call unless ``final`` (so a block's separator always
sees the next block's first key); it stops with ``SST_CAPACITY`` when an output buffer cannot take
the next block, after the blocks that did fit.
"""

from __future__ import annotations

from typing import Any

from . import abi
from .abi import (
    STATE_BLOCKS,
    STATE_ENTRIES,
    STATE_FILE_POS,
    STATE_INDEX,
    STATE_OUT,
    STATE_RAW_KEYS,
    STATE_RAW_VALUES,
)
from .sst_py import TRAILER, _read_block, block_checksum

MAX_FRAGMENT = 1 << 16
"""Snappy compresses in independent fragments of 64 KiB."""
_HASH_MUL = 0x1E35A7BD
_M32 = (1 << 32) - 1


def snappy_bound(n: int) -> int:
    """The most bytes Snappy's output for ``n`` input bytes takes."""
    return 32 + n + n // 6


def _put_varint(out: Any, o: int, v: int) -> int:
    while v >= 0x80:
        out[o] = (v & 0x7F) | 0x80
        v >>= 7
        o += 1
    out[o] = v
    return o + 1


def _varint_len(v: int) -> int:
    n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


def _emit_literal(src: Any, p: int, n: int, out: Any, o: int) -> int:
    m = n - 1
    if m < 60:
        out[o] = m << 2
        o += 1
    else:
        count = (m.bit_length() + 7) // 8
        out[o] = (59 + count) << 2
        o += 1
        for _ in range(count):
            out[o] = m & 0xFF
            m >>= 8
            o += 1
    out[o:o + n] = src[p:p + n]
    return o + n


def _emit_copy_upto64(out: Any, o: int, offset: int, n: int) -> int:
    if n < 12 and offset < 2048:
        out[o] = 1 | ((n - 4) << 2) | ((offset >> 8) << 5)
        out[o + 1] = offset & 0xFF
        return o + 2
    out[o] = 2 | ((n - 1) << 2)
    out[o + 1] = offset & 0xFF
    out[o + 2] = offset >> 8
    return o + 3


def _emit_copy(out: Any, o: int, offset: int, n: int) -> int:
    while n >= 68:
        o = _emit_copy_upto64(out, o, offset, 64)
        n -= 64
    if n > 64:
        o = _emit_copy_upto64(out, o, offset, 60)
        n -= 60
    return _emit_copy_upto64(out, o, offset, n)


def _load32(b: Any, p: int) -> int:
    return int(b[p] | b[p + 1] << 8 | b[p + 2] << 16 | b[p + 3] << 24)


def _compress_fragment(src: Any, start: int, n: int, out: Any, o: int) -> int:
    size = 256
    while size < 16384 and size < n:
        size <<= 1
    shift = 32 - (size.bit_length() - 1)
    table = [0] * size
    end = start + n
    next_emit = start
    if n >= 15:
        limit = end - 15
        ip = start + 1
        next_hash = (_load32(src, ip) * _HASH_MUL & _M32) >> shift
        while True:
            skip = 32
            next_ip = ip
            while True:
                ip = next_ip
                h = next_hash
                step = skip >> 5
                skip += 1
                next_ip = ip + step
                if next_ip > limit:
                    return _emit_literal(src, next_emit, end - next_emit, out, o) if next_emit < end else o
                next_hash = (_load32(src, next_ip) * _HASH_MUL & _M32) >> shift
                candidate = start + table[h]
                table[h] = ip - start
                if _load32(src, ip) == _load32(src, candidate):
                    break
            o = _emit_literal(src, next_emit, ip - next_emit, out, o)
            while True:
                base = ip
                matched = 4
                while ip + matched < end and src[candidate + matched] == src[ip + matched]:
                    matched += 1
                o = _emit_copy(out, o, base - candidate, matched)
                ip += matched
                next_emit = ip
                if ip >= limit:
                    return _emit_literal(src, next_emit, end - next_emit, out, o) if next_emit < end else o
                table[(_load32(src, ip - 1) * _HASH_MUL & _M32) >> shift] = ip - 1 - start
                h = (_load32(src, ip) * _HASH_MUL & _M32) >> shift
                candidate = start + table[h]
                table[h] = ip - start
                if _load32(src, ip) != _load32(src, candidate):
                    break
            ip += 1
            next_hash = (_load32(src, ip) * _HASH_MUL & _M32) >> shift
    return _emit_literal(src, next_emit, end - next_emit, out, o) if next_emit < end else o


def snappy_compress(src: Any, n: int, out: Any) -> int:
    """Compress ``src[:n]`` into ``out`` as raw Snappy; the length written, or -1 when ``out``
    holds fewer than :func:`snappy_bound` bytes."""
    b = memoryview(src).cast("B")
    o_mv = memoryview(out).cast("B")
    if n < 0 or n > len(b) or len(o_mv) < snappy_bound(n):
        return -1
    o = _put_varint(o_mv, 0, n)
    p = 0
    while p < n:
        size = min(n - p, MAX_FRAGMENT)
        o = _compress_fragment(b, p, size, o_mv, o)
        p += size
    return o


def _seal(raw: Any, n: int, compress: int, per_kb: int, checksum: int, out: Any, o: int) -> int:
    """Write the finished block ``raw[:n]`` at ``out[o:]``, Snappy-compressed when ``compress``
    and the result keeps at most ``per_kb`` bytes a KiB, and its trailer; the new end."""
    kind = 0
    if compress:
        c = snappy_compress(raw, n, out[o:])
        if c >= 0 and c <= (per_kb * n) >> 10:
            kind = 1
            body_end = o + c
    if not kind:
        out[o:o + n] = raw[:n]
        body_end = o + n
    out[body_end] = kind
    out[body_end + 1:body_end + TRAILER] = block_checksum(checksum, out[o:body_end], kind).to_bytes(4, "little")
    return body_end + TRAILER


def sst_seal(raw: Any, n: int, restarts: Any, nrestarts: int, compress: int, per_kb: int, checksum: int,
             out: Any) -> tuple[int, int]:
    """``(status, length)``: the block of entries ``raw[:n]`` and restart offsets
    ``restarts[:nrestarts]`` (at least one), with its restart array and count, compressed as
    ``compress`` / ``per_kb`` say and with its trailer (``checksum`` type), into ``out``
    (``SST_CAPACITY`` and the size it needs when ``out`` is too small)."""
    size = n + 4 * nrestarts + 4
    need = snappy_bound(size) + TRAILER
    o_mv = memoryview(out).cast("B")
    if len(o_mv) < need:
        return abi.SST_CAPACITY, need
    if n < 0 or n > len(memoryview(raw).cast("B")) or nrestarts < 0 or nrestarts > len(restarts):
        return abi.SST_TRUNCATED, 0
    block = bytearray(memoryview(raw).cast("B")[:n])
    for i in range(nrestarts):
        block += int(restarts[i]).to_bytes(4, "little")
    block += nrestarts.to_bytes(4, "little")
    return abi.SST_OK, _seal(block, size, compress, per_kb, checksum, o_mv, 0)


def _separator(start: bytes, limit: bytes) -> bytes:
    """RocksDB's bytewise ``FindShortestSeparator(start, limit)`` as the internal-key comparator
    applies it: a shorter user key in ``[start, limit)`` when there is one, else ``start``."""
    m = min(len(start), len(limit))
    d = 0
    while d < m and start[d] == limit[d]:
        d += 1
    if d >= m:
        return start
    s, lim = start[d], limit[d]
    if s >= lim or d == len(start) - 1:
        return start
    if d < len(limit) - 1 or s + 1 < lim:
        return start[:d] + bytes((s + 1,))
    d += 1
    while d < len(start):
        if start[d] < 0xFF:
            return start[:d] + bytes((start[d] + 1,)) if d + 1 < len(start) else start
        d += 1
    return start


def sst_data(koff: Any, kdata: Any, voff: Any, vdata: Any, start: int, stop: int, final: bool, trailer: int,
             block_size: int, restart_interval: int, deviation: int, compress: int, per_kb: int, checksum: int,
             state: Any, scratch: Any, out: Any, index: Any, index_restarts: Any) -> tuple[int, int, int]:
    """``(status, next entry, need)``: write the data blocks of entries ``[start, stop)`` (see the
    module docstring) after the ``state[STATE_OUT]`` bytes already in ``out``, their index
    entries after ``state[STATE_INDEX]`` bytes of ``index``. ``SST_OK``: every entry is written,
    or (not ``final``) all but those of an unfinished block, which begins at ``next entry``.
    ``SST_CAPACITY``: the block beginning at ``next entry`` did not fit; ``need`` is the size
    ``scratch`` must have for it (``out`` at least :func:`snappy_bound` of it plus 5; ``index``
    its last key plus 30 bytes; one more slot in ``index_restarts``)."""
    ko, kd, vo, vd = koff, memoryview(kdata).cast("B"), voff, memoryview(vdata).cast("B")
    sc, o_mv, ix = memoryview(scratch).cast("B"), memoryview(out).cast("B"), memoryview(index).cast("B")
    if len(state) < 7 or len(sc) < 16 or len(o_mv) < 1 or len(ix) < 1 or not 0 <= state[0] <= len(o_mv) \
            or not 0 <= state[2] <= len(ix) or not 0 <= state[3] <= len(index_restarts) or restart_interval < 1 \
            or block_size < 1 or not 0 <= deviation <= 100:
        return abi.SST_TRUNCATED, start, 0
    if start < 0 or stop < start or stop >= len(ko) or stop >= len(vo) or int(ko[stop]) > len(kd) \
            or int(vo[stop]) > len(vd) or int(ko[start]) < 0 or int(vo[start]) < 0:
        return abi.SST_TRUNCATED, start, 0
    for j in range(start, stop):
        if ko[j + 1] < ko[j] or vo[j + 1] < vo[j]:
            return abi.SST_TRUNCATED, start, 0
    tail = int(trailer).to_bytes(8, "little")
    limit_dev = (block_size * (100 - deviation) + 99) // 100 if deviation else 0
    i = start
    while i < stop:
        b0 = i
        raw = 0
        restarts = [0]
        counter = 0
        last = b""
        closed = False
        while i < stop:
            k0, k1, v0, v1 = int(ko[i]), int(ko[i + 1]), int(vo[i]), int(vo[i + 1])
            ikey = bytes(kd[k0:k1]) + tail
            vlen = v1 - v0
            if i > b0:
                curr = raw + 4 * len(restarts) + 4
                if curr >= block_size:
                    closed = True
                    break
                if limit_dev:
                    after = curr + len(ikey) + vlen + (4 if counter >= restart_interval else 0) + 4 \
                        + _varint_len(len(ikey)) + _varint_len(vlen)
                    if after > block_size and curr > limit_dev:
                        closed = True
                        break
            if counter >= restart_interval:
                restarts.append(raw)
                counter = 0
                shared = 0
            else:
                shared = 0
                m = min(len(last), len(ikey))
                while shared < m and last[shared] == ikey[shared]:
                    shared += 1
            need = raw + 15 + len(ikey) - shared + vlen
            if need + 4 * len(restarts) + 4 > len(sc):
                return abi.SST_CAPACITY, b0, need + 4 * (len(restarts) + 1) + 4
            raw = _put_varint(sc, raw, shared)
            raw = _put_varint(sc, raw, len(ikey) - shared)
            raw = _put_varint(sc, raw, vlen)
            sc[raw:raw + len(ikey) - shared] = ikey[shared:]
            raw += len(ikey) - shared
            sc[raw:raw + vlen] = vd[v0:v1]
            raw += vlen
            counter += 1
            last = ikey
            i += 1
        if not closed and not final:
            return abi.SST_OK, b0, 0
        last_user = last[:-8]
        sep = _separator(last_user, bytes(kd[int(ko[i]):int(ko[i + 1])])) if closed else last_user
        size = raw + 4 * len(restarts) + 4
        o = int(state[STATE_OUT])
        ixo = int(state[STATE_INDEX])
        nb = int(state[STATE_BLOCKS])
        if o + snappy_bound(size) + TRAILER > len(o_mv) or ixo + len(sep) + 30 > len(ix) \
                or nb >= len(index_restarts):
            return abi.SST_CAPACITY, b0, size
        for r in restarts:
            sc[raw:raw + 4] = r.to_bytes(4, "little")
            raw += 4
        sc[raw:raw + 4] = len(restarts).to_bytes(4, "little")
        pos = int(state[STATE_FILE_POS])
        end = _seal(sc, size, compress, per_kb, checksum, o_mv, o)
        index_restarts[nb] = ixo
        ixo = _put_varint(ix, ixo, 0)
        ixo = _put_varint(ix, ixo, len(sep))
        ix[ixo:ixo + len(sep)] = sep
        ixo += len(sep)
        ixo = _put_varint(ix, ixo, pos)
        ixo = _put_varint(ix, ixo, end - o - TRAILER)
        state[STATE_OUT] = end
        state[STATE_FILE_POS] = pos + end - o
        state[STATE_INDEX] = ixo
        state[STATE_BLOCKS] = nb + 1
        state[STATE_ENTRIES] += i - b0
        state[STATE_RAW_KEYS] += int(ko[i]) - int(ko[b0]) + 8 * (i - b0)
        state[STATE_RAW_VALUES] += int(vo[i]) - int(vo[b0])
    return abi.SST_OK, i, 0


def sst_reframe(buf: Any, block_pos: Any, block_len: Any, start: int, stop: int, checksum: int, compress: int,
                per_kb: int, scratch: Any, out: Any) -> tuple[int, int, int, int]:
    """``(status, next block, out length, need)``: read blocks ``[start, stop)`` of the file
    ``buf`` (checked against their trailers, decompressed into ``scratch``) and write each again
    into ``out``, compressed as ``compress`` / ``per_kb`` say, with a new trailer; stops early,
    ``SST_OK``, when ``out`` cannot take the next block. ``SST_CAPACITY`` when ``scratch`` (or,
    with nothing written, ``out``) is too small for block ``next``: ``need`` is the size; a
    damaged block's status otherwise."""
    mv, sc, o_mv = memoryview(buf).cast("B"), memoryview(scratch).cast("B"), memoryview(out).cast("B")
    if len(sc) < 1 or len(o_mv) < 1 or start < 0 or stop < start or stop > len(block_pos) or stop > len(block_len):
        return abi.SST_TRUNCATED, start, 0, 0
    o = 0
    i = start
    while i < stop:
        status, data, length = _read_block(mv, int(block_pos[i]), int(block_len[i]), checksum, sc)
        if status == abi.SST_CAPACITY:
            return status, i, o, length
        if status != abi.SST_OK:
            return status, i, o, 0
        if o + snappy_bound(length) + TRAILER > len(o_mv):
            if o == 0:
                return abi.SST_CAPACITY, i, 0, snappy_bound(length) + TRAILER
            break
        o = _seal(bytes(data), length, compress, per_kb, checksum, o_mv, o)
        i += 1
    return abi.SST_OK, i, o, 0


__all__ = ["snappy_compress", "sst_data", "sst_reframe", "sst_seal"]
