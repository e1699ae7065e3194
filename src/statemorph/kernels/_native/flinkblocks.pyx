# cython: language_level=3
"""Key-group blocks of Flink's canonical keyed-state files, in bulk (the Python twin, same names
and contract: ``statemorph.kernels.flinkblocks_py``).

- ``kg_scan`` finds every entry of one (uncompressed) key group without creating a Python object
  per entry: ``i16 state id``, then ``i32 key length ‖ key ‖ i32 value length ‖ value`` entries,
  the last of a state's run flagged by bit 0x80 of its first key byte and followed by the next
  ``i16 state id`` or by ``0xFFFF``. It writes each entry's key and value position and length and
  each run's state id and first entry, and stops at the first problem with a status code (the
  caller then lets the per-entry reader, ``keyed_blocks.parse_key_group``, raise its exact error).
- ``copy_slices`` copies n byte ranges from one buffer to positions in another (gathering the
  values for a migration), every range checked against both buffers.
- ``kg_rebuild`` puts a scanned key group back together with new values in place of chosen
  entries' values (a value, a map value behind its null flag, a list's elements joined by
  commas; TTL timestamps kept), in one pass, every position checked.
- ``list_split`` finds the elements of list values whose elements end without decoding them
  (fixed length or ``i32`` length prefix), as positions.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint16_t
from libc.string cimport memcpy

from cursor cimport *

include "abi_flinkblocks.pxi"

__statemorph_native__ = True


cdef inline int int32_read(const uint8_t* p, int64_t pos) noexcept nogil:
    return <int>load_u32_be(p + pos)


cdef int _scan(const uint8_t* p, int64_t start, int64_t n, int64_t n_states, int64_t cap, int64_t rcap,
               int64_t* key_pos, int64_t* key_len, int64_t* val_pos, int64_t* val_len,
               int64_t* run_state, int64_t* run_first, int64_t* res) noexcept nogil:
    """The walk; ``res`` receives (entries, runs, position); returns the status."""
    cdef int64_t pos = start, ne = 0, nr = 0, sid, kl, vl
    cdef int status = BLOCK_OK
    res[0] = 0
    res[1] = 0
    res[2] = pos
    if n - pos < 2:
        return BLOCK_SHORT
    sid = load_u16_be(p + pos)
    pos += 2
    while sid != 0xFFFF:
        if sid >= n_states:
            pos -= 2
            status = BLOCK_STATE_ID
            break
        if nr >= rcap:
            status = BLOCK_CAPACITY
            break
        run_state[nr] = sid
        run_first[nr] = ne
        nr += 1
        while True:
            if pos + 4 > n:
                status = BLOCK_TRUNCATED
                break
            kl = int32_read(p, pos)
            pos += 4
            if kl <= 0 or pos + kl + 4 > n:
                pos -= 4
                status = BLOCK_KEY_LENGTH
                break
            if ne >= cap:
                status = BLOCK_CAPACITY
                break
            key_pos[ne] = pos
            key_len[ne] = kl
            pos += kl
            vl = int32_read(p, pos)
            pos += 4
            if vl < 0 or pos + vl > n:
                pos -= 4
                status = BLOCK_VALUE_LENGTH
                break
            val_pos[ne] = pos
            val_len[ne] = vl
            pos += vl
            ne += 1
            if p[key_pos[ne - 1]] & 0x80:
                break
        if status != BLOCK_OK:
            break
        if pos + 2 > n:
            status = BLOCK_NO_MARK
            break
        sid = load_u16_be(p + pos)
        pos += 2
    res[0] = ne
    res[1] = nr
    res[2] = pos
    return status


def kg_scan(const uint8_t[::1] buf, int64_t start, int64_t stop, int64_t n_states,
            int64_t[::1] key_pos, int64_t[::1] key_len, int64_t[::1] val_pos, int64_t[::1] val_len,
            int64_t[::1] run_state, int64_t[::1] run_first):
    """``(status, entries, runs, end)``: ``end`` is the position after the ``0xFFFF`` mark (or
    where the problem is)."""
    cdef int64_t cap = key_pos.shape[0], rcap = run_state.shape[0]
    cdef int64_t res[3]
    cdef int status
    cdef const uint8_t* p = &buf[0] if buf.shape[0] else NULL
    cdef int64_t dummy = 0
    if stop > buf.shape[0] or start < 0 or start > stop:
        return (BLOCK_TRUNCATED, 0, 0, start)
    if val_pos.shape[0] < cap or key_len.shape[0] < cap or val_len.shape[0] < cap or run_first.shape[0] < rcap:
        return (BLOCK_CAPACITY, 0, 0, start)
    with nogil:
        status = _scan(p, start, stop, n_states, cap, rcap,
                       &key_pos[0] if cap else &dummy, &key_len[0] if cap else &dummy,
                       &val_pos[0] if cap else &dummy, &val_len[0] if cap else &dummy,
                       &run_state[0] if rcap else &dummy, &run_first[0] if rcap else &dummy, res)
    return (status, res[0], res[1], res[2])


def copy_slices(const uint8_t[::1] src, const int64_t[::1] src_pos, const int64_t[::1] lengths,
                uint8_t[::1] dst, const int64_t[::1] dst_pos, int64_t start, int64_t stop):
    """Copy ``src[src_pos[i] : src_pos[i] + lengths[i]]`` to ``dst[dst_pos[i] :]`` for i in
    ``start..stop``; -1 when done, else the first i whose range is outside either buffer (nothing
    from it on is copied)."""
    cdef int64_t i, a, b, m, ns = src.shape[0], nd = dst.shape[0]
    if start < 0 or stop > src_pos.shape[0] or stop > lengths.shape[0] or stop > dst_pos.shape[0]:
        return start
    cdef const uint8_t* s = &src[0] if ns else NULL
    cdef uint8_t* d = &dst[0] if nd else NULL
    cdef int64_t bad = -1
    with nogil:
        for i in range(start, stop):
            a = src_pos[i]
            b = dst_pos[i]
            m = lengths[i]
            if m < 0 or a < 0 or b < 0 or a > ns - m or b > nd - m:
                bad = i
                break
            if m:
                memcpy(d + b, s + a, m)
    return bad


def kg_rebuild(const uint8_t[::1] src, const int64_t[::1] val_pos, const int64_t[::1] val_len,
               const int64_t[::1] first, const int64_t[::1] count, const int64_t[::1] piece_pos,
               const int64_t[::1] piece_pre, const int64_t[::1] new_off, const uint8_t[::1] new_data,
               uint8_t[::1] out):
    """A scanned key group with new values put in, in one pass: per entry the source bytes since
    the previous value (state id, key length, key), then either the source's value length and
    value (``first[i] < 0``) or a new value made of pieces ``first[i] .. first[i] + count[i] - 1``
    joined by the list delimiter ``,``: piece j is the ``piece_pre[j]`` source bytes at
    ``piece_pos[j]`` (kept: a TTL timestamp, a map's null flag; inside the entry's value) and then
    new value j (``new_data[new_off[j]:new_off[j + 1]]``), preceded by its new length; then the
    source's tail (the end mark). A value state's entry is one piece, a map entry one piece whose
    kept bytes start with the null flag, a list entry one piece per element. Returns the bytes
    written, or -1 - i when entry i does not fit (a position outside a buffer or outside the
    entry's value, a length that does not add up, a value over 2 GiB)."""
    cdef int64_t n = val_pos.shape[0], ns = src.shape[0], no = out.shape[0], nn = new_data.shape[0]
    cdef int64_t npieces = new_off.shape[0] - 1
    cdef int64_t i, j, f, c, o = 0, prev = 0, vp, vl, gap, pre, pp, a, m, total
    cdef int64_t bad = 0
    if val_len.shape[0] < n or first.shape[0] < n or count.shape[0] < n:
        return -1
    if piece_pos.shape[0] < npieces:
        npieces = piece_pos.shape[0]
    if piece_pre.shape[0] < npieces:
        npieces = piece_pre.shape[0]
    cdef const uint8_t* s = &src[0] if ns else NULL
    cdef const uint8_t* d = &new_data[0] if nn else NULL
    cdef uint8_t* q = &out[0] if no else NULL
    with nogil:
        for i in range(n):
            vp = val_pos[i]
            vl = val_len[i]
            gap = vp - 4 - prev
            if gap < 0 or vl < 0 or vp + vl > ns or o + gap > no:
                bad = -1 - i
                break
            memcpy(q + o, s + prev, gap)
            o += gap
            f = first[i]
            if f < 0:
                if o + 4 + vl > no:
                    bad = -1 - i
                    break
                memcpy(q + o, s + vp - 4, 4 + vl)
                o += 4 + vl
            else:
                c = count[i]
                if c < 0 or f > npieces - c:
                    bad = -1 - i
                    break
                total = c - 1 if c > 0 else 0
                for j in range(f, f + c):
                    pp = piece_pos[j]
                    pre = piece_pre[j]
                    a = new_off[j]
                    m = new_off[j + 1] - a
                    if pre < 0 or pp < vp or pp > vp + vl - pre or a < 0 or m < 0 or a > nn - m:
                        bad = -1 - i
                        break
                    total += pre + m
                if bad != 0:
                    break
                if total > 0x7FFFFFFF or o + 4 + total > no:
                    bad = -1 - i
                    break
                store_u32_be(q + o, <uint32_t>total)
                o += 4
                for j in range(f, f + c):
                    if j > f:
                        q[o] = 0x2C
                        o += 1
                    pre = piece_pre[j]
                    memcpy(q + o, s + piece_pos[j], pre)
                    o += pre
                    a = new_off[j]
                    m = new_off[j + 1] - a
                    memcpy(q + o, d + a, m)
                    o += m
            prev = vp + vl
        if bad == 0:
            if o + (ns - prev) > no:
                bad = -1 - n
            else:
                memcpy(q + o, s + prev, ns - prev)
                o += ns - prev
    return bad if bad != 0 else o


def list_split(const uint8_t[::1] buf, const int64_t[::1] val_pos, const int64_t[::1] val_len,
               const int64_t[::1] rows, int64_t ttl, int64_t fixed, int64_t[::1] elem_pos,
               int64_t[::1] elem_end, int64_t[::1] elem_count):
    """The elements of list values (``ListDelimitedSerializer``: elements back to back, one ``,``
    between two, none after the last), for elements whose end is known without decoding them: a
    fixed length (``fixed >= 0``) or an ``i32`` length prefix (``fixed == -1``), each behind a
    ``ttl``-byte timestamp. For entry ``rows[r]``'s value it writes each element's start (where its
    timestamp begins) and end to ``elem_pos`` / ``elem_end`` and their number to
    ``elem_count[r]``. Returns ``(status, elements, r)``: ``BLOCK_OK``, or at the first row that
    does not split (``BLOCK_LIST``; the caller lets the per-entry splitter raise its exact error) or
    does not fit the output arrays (``BLOCK_CAPACITY``)."""
    cdef int64_t nr = rows.shape[0], nb = buf.shape[0], ne = val_pos.shape[0]
    cdef int64_t cap = elem_pos.shape[0], r, row, pos, end, body, e, k = 0, cnt, ln
    cdef int status = BLOCK_OK
    if elem_end.shape[0] < cap:
        cap = elem_end.shape[0]
    if val_len.shape[0] < ne:
        ne = val_len.shape[0]
    if elem_count.shape[0] < nr or ttl < 0 or fixed < -1:
        return (BLOCK_CAPACITY, 0, 0)
    cdef const uint8_t* p = &buf[0] if nb else NULL
    with nogil:
        for r in range(nr):
            row = rows[r]
            if row < 0 or row >= ne or val_pos[row] < 0 or val_len[row] < 0 or val_pos[row] > nb - val_len[row]:
                status = BLOCK_LIST
                break
            pos = val_pos[row]
            end = pos + val_len[row]
            cnt = 0
            while pos < end:
                body = pos + ttl
                if body > end:
                    status = BLOCK_LIST
                    break
                if fixed >= 0:
                    e = body + fixed
                else:
                    if body + 4 > end:
                        status = BLOCK_LIST
                        break
                    ln = <int>load_u32_be(p + body)
                    if ln < 0:
                        status = BLOCK_LIST
                        break
                    e = body + 4 + ln
                if e > end:
                    status = BLOCK_LIST
                    break
                if k >= cap:
                    status = BLOCK_CAPACITY
                    break
                elem_pos[k] = pos
                elem_end[k] = e
                k += 1
                cnt += 1
                pos = e
                if pos < end:
                    if p[pos] != 0x2C or pos + 1 == end:
                        status = BLOCK_LIST
                        break
                    pos += 1
            if status != BLOCK_OK:
                break
            elem_count[r] = cnt
    return (status, k, r if status != BLOCK_OK else nr)
