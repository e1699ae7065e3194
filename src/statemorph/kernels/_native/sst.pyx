# cython: language_level=3
"""RocksDB block-based table (SST) files in bulk (the Python twin, same names and contract:
``statemorph.kernels.sst_py``, whose docstring describes the layout).

- ``sst_block`` checks one block's trailer (CRC32c or XXH3) and copies or Snappy-decompresses it;
- ``sst_decode`` decodes a range of one file's data blocks (shared-prefix keys, restart arrays)
  into flat internal-key and value buffers, a block that does not fit left whole;
- ``sst_merge`` merges the decoded entries of a column family's files by internal key (newest
  sequence number first), resolving Put / Delete / SingleDelete / Merge (``StringAppendTESTOperator``
  joining), and writes one run of user keys and values, stopping at a key-group change, a byte
  budget, the output's capacity, the range's end, or an input that needs refilling;
- ``sst_lists`` builds the run's ``bytes`` lists.

The loops run without the GIL; every read is checked against its buffer first.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy

include "abi_sst.pxi"

__statemorph_native__ = True

DEF TRAILER = 5
DEF MAX_EXPANSION = 32
DEF T_DEL = 0
DEF T_PUT = 1
DEF T_MERGE = 2
DEF T_SDEL = 7

include "sst_blocks.pxi"


def sst_block(const uint8_t[::1] buf, int64_t pos, int64_t size, int checksum, uint8_t[::1] out):
    cdef const uint8_t* blk = NULL
    cdef int64_t length = 0, nb = buf.shape[0], cap = out.shape[0]
    cdef const uint8_t* f = &buf[0] if nb else NULL
    cdef uint8_t* o = &out[0] if cap else NULL
    cdef int status
    with nogil:
        status = read_block(f, nb, pos, size, checksum, o, cap, &blk, &length)
        if status == SST_OK and blk != o:
            if length > cap:
                status = SST_CAPACITY
            else:
                memcpy(o, blk, length)
    if status == SST_CAPACITY:
        return status, length
    return status, length if status == SST_OK else 0


def sst_index(const uint8_t[::1] blk, int64_t n, bint delta, int64_t[::1] out_pos, int64_t[::1] out_len,
              int64_t[::1] key_off, uint8_t[::1] key_data):
    cdef int64_t nb = blk.shape[0], kcap = key_data.shape[0], limit, p = 0, e = 0, vend, pos, size, v, prevlen = 0, kp
    cdef int64_t cap = min(out_pos.shape[0], out_len.shape[0], key_off.shape[0] - 1)
    cdef const uint8_t* b = &blk[0] if nb else NULL
    cdef uint8_t* kd = &key_data[0] if kcap else NULL
    cdef uint32_t packed
    cdef uint64_t shared, non_shared, vlen
    cdef int status = SST_OK
    if n < 4 or n > nb:
        return SST_TRUNCATED, 0
    packed = sm_le32(b + n - 4)
    if packed >> 31:
        return SST_HASH_INDEX, 0
    if packed < 1 or 4 + 4 * <int64_t>packed > n:
        return SST_ENTRY, 0
    if cap < 0:
        return SST_CAPACITY, 0
    limit = n - 4 - 4 * <int64_t>packed
    key_off[0] = 0
    with nogil:
        while p < limit:
            p = varint(b, p, limit, 5, &shared)
            if p < 0:
                status = SST_ENTRY
                break
            p = varint(b, p, limit, 5, &non_shared)
            if p < 0:
                status = SST_ENTRY
                break
            vend = limit
            if not delta:
                p = varint(b, p, limit, 5, &vlen)
                if p < 0 or non_shared > limit - p or vlen > limit - p - non_shared:
                    status = SST_ENTRY
                    break
                vend = p + non_shared + vlen
            if shared > prevlen or non_shared > vend - p:
                status = SST_ENTRY
                break
            kp = p
            p += non_shared
            if delta and shared and e:
                p = varint(b, p, vend, 9, <uint64_t*>&v)
                if p < 0:
                    status = SST_ENTRY
                    break
                pos = out_pos[e - 1] + out_len[e - 1] + TRAILER
                size = out_len[e - 1] + ((v >> 1) ^ -(v & 1))
            else:
                p = varint(b, p, vend, 9, <uint64_t*>&pos)
                if p < 0:
                    status = SST_ENTRY
                    break
                p = varint(b, p, vend, 9, <uint64_t*>&size)
                if p < 0:
                    status = SST_ENTRY
                    break
            if not delta:
                p = vend
            if size < 0 or pos < 0 or size > (<int64_t>1 << 62) or pos > (<int64_t>1 << 62):
                status = SST_ENTRY
                break
            if e >= cap or shared + non_shared > kcap - key_off[e]:
                status = SST_CAPACITY
                break
            if shared:
                memcpy(kd + key_off[e], kd + key_off[e - 1], shared)
            memcpy(kd + key_off[e] + shared, b + kp, non_shared)
            out_pos[e] = pos
            out_len[e] = size
            key_off[e + 1] = key_off[e] + shared + non_shared
            prevlen = shared + non_shared
            e += 1
    return status, e


cdef int decode_block(const uint8_t* blk, int64_t n, int64_t* koff, uint8_t* kd, int64_t kcap, int64_t* voff,
                      uint8_t* vd, int64_t vcap, int64_t cap, int64_t* count) noexcept nogil:
    """Append the entries of one uncompressed data block after ``count[0]`` entries; on any
    status but SST_OK nothing is counted."""
    cdef uint32_t packed
    cdef uint64_t shared, non_shared, vlen
    cdef int64_t limit, p = 0, e = count[0], kb, vb, prev, prevlen = 0
    cdef bint full = False
    if n < 4:
        return SST_TRUNCATED
    packed = sm_le32(blk + n - 4)
    if packed >> 31:
        return SST_HASH_INDEX
    if packed < 1 or 4 + 4 * <int64_t>packed > n:
        return SST_ENTRY
    limit = n - 4 - 4 * <int64_t>packed
    kb = koff[e]
    vb = voff[e]
    prev = -1
    while p < limit:
        p = varint(blk, p, limit, 5, &shared)
        if p < 0:
            return SST_ENTRY
        p = varint(blk, p, limit, 5, &non_shared)
        if p < 0:
            return SST_ENTRY
        p = varint(blk, p, limit, 5, &vlen)
        if p < 0 or non_shared > limit - p or vlen > limit - p - non_shared:
            return SST_ENTRY
        if shared > prevlen:
            return SST_ENTRY
        if shared + non_shared < 8:
            return SST_KEY
        prevlen = shared + non_shared
        if full or e >= cap or shared + non_shared > kcap - kb or vlen > vcap - vb:
            full = True  # keep checking the block: a damaged entry further on is the answer
            p += non_shared + vlen
            continue
        if shared:
            memcpy(kd + kb, kd + prev, shared)
        memcpy(kd + kb + shared, blk + p, non_shared)
        p += non_shared
        memcpy(vd + vb, blk + p, vlen)
        p += vlen
        prev = kb
        kb += shared + non_shared
        vb += vlen
        e += 1
        koff[e] = kb
        voff[e] = vb
    if full:
        return SST_CAPACITY
    count[0] = e
    return SST_OK


def sst_decode(const uint8_t[::1] buf, const int64_t[::1] block_pos, const int64_t[::1] block_len, int64_t start,
               int64_t stop, int checksum, uint8_t[::1] scratch, int64_t[::1] key_off, uint8_t[::1] key_data,
               int64_t[::1] val_off, uint8_t[::1] val_data, int64_t n0):
    cdef int64_t nb = buf.shape[0], cap = key_off.shape[0] - 1, scap = scratch.shape[0]
    cdef int64_t kcap = key_data.shape[0], vcap = val_data.shape[0], b, n = n0, length = 0, e
    cdef const uint8_t* f = &buf[0] if nb else NULL
    cdef uint8_t* sc = &scratch[0] if scap else NULL
    cdef uint8_t* kd = &key_data[0] if kcap else NULL
    cdef uint8_t* vd = &val_data[0] if vcap else NULL
    cdef const uint8_t* blk = NULL
    cdef int status = SST_OK
    if n0 < 0 or n0 > cap or val_off.shape[0] < key_off.shape[0]:
        return SST_CAPACITY, start, n0
    if start < 0 or stop > block_pos.shape[0] or stop > block_len.shape[0]:
        return SST_TRUNCATED, start, n0
    if key_off[n0] < 0 or key_off[n0] > kcap or val_off[n0] < 0 or val_off[n0] > vcap:
        return SST_CAPACITY, start, n0
    b = start
    with nogil:
        while b < stop:
            status = read_block(f, nb, block_pos[b], block_len[b], checksum, sc, scap, &blk, &length)
            if status == SST_CAPACITY:
                n = -length
                break
            if status != SST_OK:
                break
            e = n
            status = decode_block(blk, length, &key_off[0], kd, kcap, &val_off[0], vd, vcap, cap, &e)
            if status != SST_OK:
                break
            n = e
            b += 1
    return status, b, n

# ---- merging ---------------------------------------------------------------------------------

cdef struct Input:
    const int64_t* koff
    const uint8_t* kd
    const int64_t* voff
    const uint8_t* vd
    int64_t nk      # entries the offsets can describe
    int64_t kcap
    int64_t vcap
    int64_t pos
    int64_t end
    int eof


cdef struct Version:
    int64_t input
    int64_t pos
    int kind


cdef inline int check_entry(Input* x) noexcept nogil:
    cdef int64_t p = x.pos
    if p < 0 or p + 1 > x.nk:
        return SST_TRUNCATED
    if not (0 <= x.koff[p] <= x.koff[p + 1] <= x.kcap) or not (0 <= x.voff[p] <= x.voff[p + 1] <= x.vcap):
        return SST_TRUNCATED
    if x.koff[p + 1] - x.koff[p] < 8:
        return SST_KEY
    return SST_OK


cdef inline int cmp_bytes(const uint8_t* a, int64_t na, const uint8_t* b, int64_t nb) noexcept nogil:
    cdef int c = memcmp(a, b, na if na < nb else nb) if (na and nb) else 0
    if c:
        return c
    return (na > nb) - (na < nb)


cdef inline uint64_t key8(const uint8_t* p, int64_t n) noexcept nogil:
    """The key's first 8 bytes as a big-endian number, zero-padded: two keys whose numbers
    differ compare as their numbers do (equal numbers say nothing: compare the keys)."""
    cdef uint64_t v = 0
    cdef int64_t i
    if n >= 8:
        return sm_swap64(sm_le64(p))
    for i in range(n):
        v |= <uint64_t>p[i] << (56 - 8 * i)
    return v


cdef inline uint64_t trailer_at(Input* x, int64_t p) noexcept nogil:
    return sm_le64(x.kd + x.koff[p + 1] - 8)


cdef int advance(Input* x) noexcept nogil:
    cdef const uint8_t* key = x.kd + x.koff[x.pos]
    cdef int64_t klen = x.koff[x.pos + 1] - x.koff[x.pos] - 8
    cdef uint64_t t = trailer_at(x, x.pos)
    cdef int status, c
    x.pos += 1
    if x.pos >= x.end:
        return SST_OK
    status = check_entry(x)
    if status != SST_OK:
        return status
    c = cmp_bytes(x.kd + x.koff[x.pos], x.koff[x.pos + 1] - x.koff[x.pos] - 8, key, klen)
    if c < 0 or (c == 0 and trailer_at(x, x.pos) >= t):
        return SST_ORDER
    return SST_OK


cdef int merge_loop(Input* xs, int64_t m, int64_t* saved, Version** vers, int64_t* vcap_, int delimiter,
                    int64_t group_len, const uint8_t* group, int64_t glen, const uint8_t* start_key, int64_t start_len, const uint8_t* stop_key,
                    int64_t stop_len, int64_t slice_bytes, int64_t* okoff, uint8_t* okd, int64_t okcap,
                    int64_t* ovoff, uint8_t* ovd, int64_t ovcap, int64_t cap, int64_t* n_out,
                    int64_t* refill) noexcept nogil:
    cdef int64_t i, j, best, n = 0, size = 0, nv, klen, blen, vlen, need, o
    cdef const uint8_t* key
    cdef const uint8_t* bk
    cdef uint64_t bt, t, kp = 0, bp
    cdef int status, c, kind, decided, only
    cdef Input* x
    cdef Version* v
    okoff[0] = 0
    ovoff[0] = 0
    refill[0] = -1
    # an input runs out only where it advances, which is checked there: once a call is enough
    for i in range(m):
        if xs[i].pos >= xs[i].end and not xs[i].eof:
            refill[0] = i
            n_out[0] = n
            return SST_REFILL
    while True:
        best = -1
        key = NULL
        klen = 0
        only = 1  # no other input's next key equals the smallest
        for i in range(m):
            x = &xs[i]
            if x.pos >= x.end:
                continue
            bk = x.kd + x.koff[x.pos]
            blen = x.koff[x.pos + 1] - x.koff[x.pos] - 8
            bp = key8(bk, blen)
            if best < 0:
                c = -1
            elif bp != kp:
                c = -1 if bp < kp else 1
            else:
                c = cmp_bytes(bk, blen, key, klen)
            if c < 0:
                best = i
                key = bk
                klen = blen
                kp = bp
                only = 1
            elif c == 0:
                only = 0
        if best < 0:
            n_out[0] = n
            return SST_END
        if stop_len and cmp_bytes(key, klen, stop_key, stop_len) >= 0:
            n_out[0] = n
            return SST_END
        if n and cmp_bytes(key, klen if klen < group_len else group_len, okd + okoff[n - 1],
                           (okoff[n] - okoff[n - 1]) if (okoff[n] - okoff[n - 1]) < group_len else group_len) != 0:
            n_out[0] = n
            return SST_GROUP
        if not n and glen and cmp_bytes(key, klen if klen < group_len else group_len, group, glen) != 0:
            n_out[0] = n
            return SST_GROUP
        for i in range(m):
            saved[i] = xs[i].pos
        nv = 0
        decided = 0
        j = best  # the input holding the key, when it is the only one
        while True:
            if only:  # its versions, newest first, are its next entries: no other input to look at
                x = &xs[j]
                if x.pos >= x.end or x.koff[x.pos + 1] - x.koff[x.pos] - 8 != klen \
                        or memcmp(x.kd + x.koff[x.pos], key, klen) != 0:
                    break
                best = j
                bt = trailer_at(x, x.pos)
            else:
                best = -1
                bt = 0
                for i in range(m):
                    x = &xs[i]
                    if x.pos >= x.end or x.koff[x.pos + 1] - x.koff[x.pos] - 8 != klen:
                        continue
                    if memcmp(x.kd + x.koff[x.pos], key, klen) != 0:
                        continue
                    t = trailer_at(x, x.pos)
                    if best < 0 or (t >> 8) > (bt >> 8):
                        best = i
                        bt = t
                if best < 0:
                    break
            kind = bt & 0xFF
            if kind != T_PUT and kind != T_DEL and kind != T_SDEL and kind != T_MERGE:
                for i in range(m):
                    xs[i].pos = saved[i]
                n_out[0] = n
                return SST_ENTRY_TYPE
            if not decided:
                if nv >= vcap_[0]:
                    v = <Version*>realloc(vers[0], 2 * vcap_[0] * sizeof(Version))
                    if v == NULL:
                        n_out[0] = n
                        return SST_CAPACITY
                    vers[0] = v
                    vcap_[0] *= 2
                vers[0][nv].input = best
                vers[0][nv].pos = xs[best].pos
                vers[0][nv].kind = kind
                nv += 1
                decided = kind != T_MERGE
            # the key bytes stay where they are: an input's buffers do not change during a call
            status = advance(&xs[best])
            if status != SST_OK:
                n_out[0] = n
                return status
            if xs[best].pos >= xs[best].end and not xs[best].eof:
                for i in range(m):
                    xs[i].pos = saved[i]
                refill[0] = best
                n_out[0] = n
                return SST_REFILL
        v = vers[0]
        if cmp_bytes(key, klen, start_key, start_len) < 0 or v[0].kind == T_DEL or v[0].kind == T_SDEL:
            continue
        if v[0].kind == T_PUT:
            vlen = xs[v[0].input].voff[v[0].pos + 1] - xs[v[0].input].voff[v[0].pos]
            need = vlen
        else:
            if delimiter < 0:
                for i in range(m):
                    xs[i].pos = saved[i]
                n_out[0] = n
                return SST_NO_MERGE
            if v[nv - 1].kind == T_DEL or v[nv - 1].kind == T_SDEL:
                nv -= 1
            need = nv - 1
            for j in range(nv):
                x = &xs[v[j].input]
                need += x.voff[v[j].pos + 1] - x.voff[v[j].pos]
        if n >= cap or klen > okcap - okoff[n] or need > ovcap - ovoff[n]:
            for i in range(m):
                xs[i].pos = saved[i]
            n_out[0] = n
            return SST_SLICE if n else SST_CAPACITY
        memcpy(okd + okoff[n], key, klen)
        o = ovoff[n]
        if v[0].kind == T_PUT:
            x = &xs[v[0].input]
            memcpy(ovd + o, x.vd + x.voff[v[0].pos], vlen)
        else:
            j = nv - 1
            while j >= 0:
                x = &xs[v[j].input]
                vlen = x.voff[v[j].pos + 1] - x.voff[v[j].pos]
                memcpy(ovd + o, x.vd + x.voff[v[j].pos], vlen)
                o += vlen
                if j:
                    ovd[o] = <uint8_t>delimiter
                    o += 1
                j -= 1
        okoff[n + 1] = okoff[n] + klen
        ovoff[n + 1] = ovoff[n] + need
        n += 1
        size += klen + need + 8
        if size >= slice_bytes:
            n_out[0] = n
            return SST_SLICE


def sst_merge(list inputs, int64_t[::1] pos, const int64_t[::1] end, const uint8_t[::1] eof, int delimiter,
              int64_t group_len, bytes group, bytes start_key, bytes stop_key, int64_t slice_bytes, int64_t[::1] out_koff,
              uint8_t[::1] out_kdata, int64_t[::1] out_voff, uint8_t[::1] out_vdata):
    cdef int64_t m = len(inputs), i, n = 0, refill = -1, cap = out_koff.shape[0] - 1, vcap = 64
    cdef int64_t okcap = out_kdata.shape[0], ovcap = out_vdata.shape[0]
    cdef const int64_t[::1] koff
    cdef const uint8_t[::1] kd
    cdef const int64_t[::1] voff
    cdef const uint8_t[::1] vd
    cdef Input* xs
    cdef int64_t* saved
    cdef Version* vers
    cdef int status = SST_OK
    cdef const uint8_t* sk = <const uint8_t*><const char*>start_key
    cdef const uint8_t* ek = <const uint8_t*><const char*>stop_key
    cdef const uint8_t* gk = <const uint8_t*><const char*>group
    cdef int64_t sl = len(start_key), el = len(stop_key), gl = len(group)
    if pos.shape[0] < m or end.shape[0] < m or eof.shape[0] < m:
        return SST_TRUNCATED, 0, -1
    if cap < 0 or out_voff.shape[0] < out_koff.shape[0]:
        return SST_CAPACITY, 0, -1
    xs = <Input*>malloc((m if m else 1) * sizeof(Input))
    saved = <int64_t*>malloc((m if m else 1) * sizeof(int64_t))
    vers = <Version*>malloc(vcap * sizeof(Version))
    keep = []
    try:
        if xs == NULL or saved == NULL or vers == NULL:
            raise MemoryError()
        for i in range(m):
            koff, kd, voff, vd = inputs[i]
            keep.append((koff, kd, voff, vd))
            xs[i].koff = &koff[0]
            xs[i].voff = &voff[0]
            xs[i].kd = &kd[0] if kd.shape[0] else NULL
            xs[i].vd = &vd[0] if vd.shape[0] else NULL
            xs[i].nk = min(koff.shape[0], voff.shape[0]) - 1
            xs[i].kcap = kd.shape[0]
            xs[i].vcap = vd.shape[0]
            xs[i].pos = pos[i]
            xs[i].end = end[i]
            xs[i].eof = eof[i]
            if xs[i].end > xs[i].nk:
                return SST_TRUNCATED, 0, -1
            if xs[i].pos < xs[i].end:
                status = check_entry(&xs[i])
                if status != SST_OK:
                    return status, 0, -1
        with nogil:
            status = merge_loop(xs, m, saved, &vers, &vcap, delimiter, group_len, gk, gl, sk, sl, ek, el, slice_bytes,
                                &out_koff[0], &out_kdata[0] if okcap else NULL, okcap, &out_voff[0],
                                &out_vdata[0] if ovcap else NULL, ovcap, cap, &n, &refill)
        if status >= SST_END:
            for i in range(m):
                pos[i] = xs[i].pos
        return status, n, refill if status == SST_REFILL else -1
    finally:
        free(xs)
        free(saved)
        free(vers)


def sst_lists(const int64_t[::1] koff, const uint8_t[::1] kdata, const int64_t[::1] voff, const uint8_t[::1] vdata,
              int64_t n):
    cdef int64_t i, a, b, c, d, nk = kdata.shape[0], nv = vdata.shape[0]
    cdef const uint8_t* k = &kdata[0] if nk else NULL
    cdef const uint8_t* v = &vdata[0] if nv else NULL
    if n < 0 or n + 1 > koff.shape[0] or n + 1 > voff.shape[0]:
        raise ValueError("sst_lists: n exceeds the offsets")
    keys = [None] * n
    values = [None] * n
    for i in range(n):
        a, b, c, d = koff[i], koff[i + 1], voff[i], voff[i + 1]
        if not (0 <= a <= b <= nk and 0 <= c <= d <= nv):
            raise ValueError(f"sst_lists: entry {i} lies outside its buffers")
        keys[i] = PyBytes_FromStringAndSize(<const char*>k + a, b - a)
        values[i] = PyBytes_FromStringAndSize(<const char*>v + c, d - c)
    return keys, values
