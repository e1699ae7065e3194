"""Python twins of the key-group block kernels (``kernels/_native/flinkblocks.pyx``): the same names,
arguments, status codes (``BLOCK_*``) and results, as plain Python. The compiled tier must equal
these (tests/kernels/test_flink_block_kernels.py); ``STATEMORPH_NATIVE=0`` runs them.

``kg_scan`` walks one uncompressed key group of a canonical keyed-state file (``i16 state id``,
``i32 key length ‖ key ‖ i32 value length ‖ value`` entries, the run's last key flagged by bit
0x80, the next state id or ``0xFFFF``) and records positions instead of creating bytes per entry;
``copy_slices`` moves byte ranges between buffers; ``kg_rebuild`` writes the key group again with
new values in place of chosen entries' values (value, map and list layouts, TTL timestamps kept);
``list_split`` finds the elements of list values whose elements end without being decoded.
Layout: docs/flink-savepoints.md §A.6.
"""

from __future__ import annotations

from typing import Any

from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)

LIST_DELIMITER = 0x2C


def _i32(buf: Any, pos: int) -> int:
    return int.from_bytes(bytes(buf[pos:pos + 4]), "big", signed=True)


def kg_scan(buf: Any, start: int, stop: int, n_states: int, key_pos: Any, key_len: Any, val_pos: Any,
            val_len: Any, run_state: Any, run_first: Any) -> tuple[int, int, int, int]:
    """``(status, entries, runs, end)``; see the module docstring."""
    mv = memoryview(buf).cast("B")
    cap, rcap = len(key_pos), len(run_state)
    if stop > len(mv) or start < 0 or start > stop:
        return BLOCK_TRUNCATED, 0, 0, start
    if len(val_pos) < cap or len(key_len) < cap or len(val_len) < cap or len(run_first) < rcap:
        return BLOCK_CAPACITY, 0, 0, start
    pos, n, ne, nr = start, stop, 0, 0
    if n - pos < 2:
        return BLOCK_SHORT, 0, 0, pos
    sid = int.from_bytes(mv[pos:pos + 2], "big")
    pos += 2
    while sid != 0xFFFF:
        if sid >= n_states:
            return BLOCK_STATE_ID, ne, nr, pos - 2
        if nr >= rcap:
            return BLOCK_CAPACITY, ne, nr, pos
        run_state[nr] = sid
        run_first[nr] = ne
        nr += 1
        while True:
            if pos + 4 > n:
                return BLOCK_TRUNCATED, ne, nr, pos
            kl = _i32(mv, pos)
            pos += 4
            if kl <= 0 or pos + kl + 4 > n:
                return BLOCK_KEY_LENGTH, ne, nr, pos - 4
            if ne >= cap:
                return BLOCK_CAPACITY, ne, nr, pos
            key_pos[ne] = pos
            key_len[ne] = kl
            pos += kl
            vl = _i32(mv, pos)
            pos += 4
            if vl < 0 or pos + vl > n:
                return BLOCK_VALUE_LENGTH, ne, nr, pos - 4
            val_pos[ne] = pos
            val_len[ne] = vl
            pos += vl
            ne += 1
            if mv[key_pos[ne - 1]] & 0x80:
                break
        if pos + 2 > n:
            return BLOCK_NO_MARK, ne, nr, pos
        sid = int.from_bytes(mv[pos:pos + 2], "big")
        pos += 2
    return BLOCK_OK, ne, nr, pos


def copy_slices(src: Any, src_pos: Any, lengths: Any, dst: Any, dst_pos: Any, start: int, stop: int) -> int:
    """Copy ``src[src_pos[i]:][:lengths[i]]`` to ``dst[dst_pos[i]:]`` for i in ``start..stop``; -1
    when done, else the first i whose range is outside either buffer."""
    s, d = memoryview(src).cast("B"), memoryview(dst).cast("B")
    ns, nd = len(s), len(d)
    if start < 0 or stop > len(src_pos) or stop > len(lengths) or stop > len(dst_pos):
        return start
    for i in range(start, stop):
        a, b, m = int(src_pos[i]), int(dst_pos[i]), int(lengths[i])
        if m < 0 or a < 0 or b < 0 or a > ns - m or b > nd - m:
            return i
        d[b:b + m] = s[a:a + m]
    return -1


def kg_rebuild(src: Any, val_pos: Any, val_len: Any, first: Any, count: Any, piece_pos: Any, piece_pre: Any,
               new_off: Any, new_data: Any, out: Any) -> int:
    """A scanned key group with new values put in, each made of pieces joined by ``,`` (see the
    compiled kernel's docstring): the bytes written, or -1 - i when entry i does not fit."""
    s, d, q = memoryview(src).cast("B"), memoryview(new_data).cast("B"), memoryview(out).cast("B")
    n, ns, no, nn = len(val_pos), len(s), len(q), len(d)
    npieces = min(len(new_off) - 1, len(piece_pos), len(piece_pre))
    if len(val_len) < n or len(first) < n or len(count) < n:
        return -1
    o = prev = 0
    for i in range(n):
        vp, vl = int(val_pos[i]), int(val_len[i])
        gap = vp - 4 - prev
        if gap < 0 or vl < 0 or vp + vl > ns or o + gap > no:
            return -1 - i
        q[o:o + gap] = s[prev:prev + gap]
        o += gap
        f = int(first[i])
        if f < 0:
            if o + 4 + vl > no:
                return -1 - i
            q[o:o + 4 + vl] = s[vp - 4:vp + vl]
            o += 4 + vl
        else:
            c = int(count[i])
            if c < 0 or f > npieces - c:
                return -1 - i
            total = max(c - 1, 0)
            for j in range(f, f + c):
                pp, pre = int(piece_pos[j]), int(piece_pre[j])
                a = int(new_off[j])
                m = int(new_off[j + 1]) - a
                if pre < 0 or pp < vp or pp > vp + vl - pre or a < 0 or m < 0 or a > nn - m:
                    return -1 - i
                total += pre + m
            if total > 0x7FFFFFFF or o + 4 + total > no:
                return -1 - i
            q[o:o + 4] = total.to_bytes(4, "big")
            o += 4
            for j in range(f, f + c):
                if j > f:
                    q[o] = LIST_DELIMITER
                    o += 1
                pp, pre = int(piece_pos[j]), int(piece_pre[j])
                q[o:o + pre] = s[pp:pp + pre]
                o += pre
                a = int(new_off[j])
                m = int(new_off[j + 1]) - a
                q[o:o + m] = d[a:a + m]
                o += m
        prev = vp + vl
    if o + (ns - prev) > no:
        return -1 - n
    q[o:o + ns - prev] = s[prev:ns]
    return o + ns - prev


def list_split(buf: Any, val_pos: Any, val_len: Any, rows: Any, ttl: int, fixed: int, elem_pos: Any,
               elem_end: Any, elem_count: Any) -> tuple[int, int, int]:
    """The elements of list values as positions (see the compiled kernel's docstring):
    ``(status, elements, first row that failed or len(rows))``."""
    p = memoryview(buf).cast("B")
    nr, nb, ne = len(rows), len(p), min(len(val_pos), len(val_len))
    cap = min(len(elem_pos), len(elem_end))
    if len(elem_count) < nr or ttl < 0 or fixed < -1:
        return BLOCK_CAPACITY, 0, 0
    k = 0
    for r in range(nr):
        row = int(rows[r])
        if row < 0 or row >= ne or val_pos[row] < 0 or val_len[row] < 0 or val_pos[row] > nb - val_len[row]:
            return BLOCK_LIST, k, r
        pos = int(val_pos[row])
        end = pos + int(val_len[row])
        cnt = 0
        while pos < end:
            body = pos + ttl
            if body > end:
                return BLOCK_LIST, k, r
            if fixed >= 0:
                e = body + fixed
            else:
                if body + 4 > end:
                    return BLOCK_LIST, k, r
                ln = _i32(p, body)
                if ln < 0:
                    return BLOCK_LIST, k, r
                e = body + 4 + ln
            if e > end:
                return BLOCK_LIST, k, r
            if k >= cap:
                return BLOCK_CAPACITY, k, r
            elem_pos[k] = pos
            elem_end[k] = e
            k += 1
            cnt += 1
            pos = e
            if pos < end:
                if p[pos] != LIST_DELIMITER or pos + 1 == end:
                    return BLOCK_LIST, k, r
                pos += 1
        elem_count[r] = cnt
    return BLOCK_OK, k, nr

# the kernel functions, which the compiled module exports too (statemorph.kernels.tiers reads this)
__all__ = ["copy_slices", "kg_rebuild", "kg_scan", "list_split"]
