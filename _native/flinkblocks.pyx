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
  entries' values, in one pass, every position checked.
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
    cdef int status = KG_OK
    res[0] = 0
    res[1] = 0
    res[2] = pos
    if n - pos < 2:
        return KG_SHORT
    sid = load_u16_be(p + pos)
    pos += 2
    while sid != 0xFFFF:
        if sid >= n_states:
            pos -= 2
            status = KG_STATE_ID
            break
        if nr >= rcap:
            status = KG_CAPACITY
            break
        run_state[nr] = sid
        run_first[nr] = ne
        nr += 1
        while True:
            if pos + 4 > n:
                status = KG_TRUNCATED
                break
            kl = int32_read(p, pos)
            pos += 4
            if kl <= 0 or pos + kl + 4 > n:
                pos -= 4
                status = KG_KEY_LENGTH
                break
            if ne >= cap:
                status = KG_CAPACITY
                break
            key_pos[ne] = pos
            key_len[ne] = kl
            pos += kl
            vl = int32_read(p, pos)
            pos += 4
            if vl < 0 or pos + vl > n:
                pos -= 4
                status = KG_VALUE_LENGTH
                break
            val_pos[ne] = pos
            val_len[ne] = vl
            pos += vl
            ne += 1
            if p[key_pos[ne - 1]] & 0x80:
                break
        if status != KG_OK:
            break
        if pos + 2 > n:
            status = KG_NO_MARK
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
        return (KG_TRUNCATED, 0, 0, start)
    if val_pos.shape[0] < cap or key_len.shape[0] < cap or val_len.shape[0] < cap or run_first.shape[0] < rcap:
        return (KG_CAPACITY, 0, 0, start)
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
               const int64_t[::1] slot, const int64_t[::1] prefix, const int64_t[::1] new_off,
               const uint8_t[::1] new_data, uint8_t[::1] out):
    """A scanned key group with new values put in: per entry the source bytes since the previous
    value (state id, key length, key), then either the source's value length and value
    (``slot[i] < 0``) or the new length, the first ``prefix[i]`` source value bytes (the TTL
    timestamp) and new value ``slot[i]`` (``new_data[new_off[j]:new_off[j + 1]]``); then the
    source's tail (the end mark). Returns the bytes written, or -1 - i when entry i does not fit
    (a position outside a buffer, a length that does not add up, a value over 2 GiB)."""
    cdef int64_t n = val_pos.shape[0], ns = src.shape[0], no = out.shape[0], nn = new_data.shape[0]
    cdef int64_t nslots = new_off.shape[0] - 1
    cdef int64_t i, j, o = 0, prev = 0, vp, vl, gap, pre, a, m
    cdef int64_t bad = 0
    if val_len.shape[0] < n or slot.shape[0] < n or prefix.shape[0] < n:
        return -1
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
            j = slot[i]
            if j < 0:
                if o + 4 + vl > no:
                    bad = -1 - i
                    break
                memcpy(q + o, s + vp - 4, 4 + vl)
                o += 4 + vl
            else:
                pre = prefix[i]
                if j >= nslots or pre < 0 or pre > vl:
                    bad = -1 - i
                    break
                a = new_off[j]
                m = new_off[j + 1] - a
                if a < 0 or m < 0 or a + m > nn or pre + m > 0x7FFFFFFF or o + 4 + pre + m > no:
                    bad = -1 - i
                    break
                store_u32_be(q + o, <uint32_t>(pre + m))
                memcpy(q + o + 4, s + vp, pre)
                memcpy(q + o + 4 + pre, d + a, m)
                o += 4 + pre + m
            prev = vp + vl
        if bad == 0:
            if o + (ns - prev) > no:
                bad = -1 - n
            else:
                memcpy(q + o, s + prev, ns - prev)
                o += ns - prev
    return bad if bad != 0 else o
