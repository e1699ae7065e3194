# cython: language_level=3
"""RocksDB block-based table (SST) files written in bulk (the Python twin, same names, contract and
bytes: ``statemorph.kernels.sstwrite_py``, whose docstring describes what is written).

- ``snappy_compress``: raw Snappy by Snappy's greedy algorithm;
- ``sst_data``: data blocks of Put entries at sequence number 0 from flat key / value buffers,
  closed by RocksDB's size policy, compressed, with their trailers and index entries;
- ``sst_seal``: a block's entries closed with their restart array, compressed or not, and trailer;
- ``sst_reframe``: blocks of a file read (checked, decompressed) and written again (compressed,
  new trailer): the floor any rewrite of a table pays, measured by the benchmarks.

The loops run without the GIL; every write is checked against its buffer first.
"""

from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

include "abi_sst.pxi"
include "abi_sstwrite.pxi"

__statemorph_native__ = True

DEF TRAILER = 5
DEF MAX_EXPANSION = 32

include "sst_blocks.pxi"

DEF MAX_FRAGMENT = 65536
DEF MAX_TABLE = 16384
DEF HASH_MUL = 0x1E35A7BD



cdef inline int64_t bound(int64_t n) noexcept nogil:
    return 32 + n + n // 6


cdef inline int64_t put_varint(uint8_t* out, int64_t o, uint64_t v) noexcept nogil:
    while v >= 0x80:
        out[o] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        o += 1
    out[o] = <uint8_t>v
    return o + 1


cdef inline int64_t varint_len(uint64_t v) noexcept nogil:
    cdef int64_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n

# ---- Snappy ----------------------------------------------------------------------------------

cdef inline int64_t emit_literal(const uint8_t* src, int64_t p, int64_t n, uint8_t* out, int64_t o) noexcept nogil:
    cdef uint64_t m = n - 1
    cdef int count = 0
    cdef uint64_t t
    if m < 60:
        out[o] = <uint8_t>(m << 2)
        o += 1
    else:
        t = m
        while t:
            count += 1
            t >>= 8
        out[o] = <uint8_t>((59 + count) << 2)
        o += 1
        while count:
            out[o] = <uint8_t>(m & 0xFF)
            m >>= 8
            o += 1
            count -= 1
    memcpy(out + o, src + p, n)
    return o + n


cdef inline int64_t emit_copy_upto64(uint8_t* out, int64_t o, int64_t offset, int64_t n) noexcept nogil:
    if n < 12 and offset < 2048:
        out[o] = <uint8_t>(1 | ((n - 4) << 2) | ((offset >> 8) << 5))
        out[o + 1] = <uint8_t>(offset & 0xFF)
        return o + 2
    out[o] = <uint8_t>(2 | ((n - 1) << 2))
    out[o + 1] = <uint8_t>(offset & 0xFF)
    out[o + 2] = <uint8_t>(offset >> 8)
    return o + 3


cdef inline int64_t emit_copy(uint8_t* out, int64_t o, int64_t offset, int64_t n) noexcept nogil:
    while n >= 68:
        o = emit_copy_upto64(out, o, offset, 64)
        n -= 64
    if n > 64:
        o = emit_copy_upto64(out, o, offset, 60)
        n -= 60
    return emit_copy_upto64(out, o, offset, n)


cdef inline uint32_t hash32(const uint8_t* p, int shift) noexcept nogil:
    return <uint32_t>(sm_le32(p) * <uint32_t>HASH_MUL) >> shift


cdef int64_t compress_fragment(const uint8_t* src, int64_t start, int64_t n, uint8_t* out, int64_t o,
                               uint16_t* table) noexcept nogil:
    cdef int64_t size = 256, end = start + n, next_emit = start, limit, ip, next_ip, candidate, base, matched
    cdef int shift = 32 - 8
    cdef uint32_t h, next_hash
    cdef int64_t skip, step
    while size < MAX_TABLE and size < n:
        size <<= 1
        shift -= 1
    memset(table, 0, size * sizeof(uint16_t))
    if n >= 15:
        limit = end - 15
        ip = start + 1
        next_hash = hash32(src + ip, shift)
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
                    return emit_literal(src, next_emit, end - next_emit, out, o) if next_emit < end else o
                next_hash = hash32(src + next_ip, shift)
                candidate = start + table[h]
                table[h] = <uint16_t>(ip - start)
                if sm_le32(src + ip) == sm_le32(src + candidate):
                    break
            o = emit_literal(src, next_emit, ip - next_emit, out, o)
            while True:
                base = ip
                matched = 4
                while ip + matched < end and src[candidate + matched] == src[ip + matched]:
                    matched += 1
                o = emit_copy(out, o, base - candidate, matched)
                ip += matched
                next_emit = ip
                if ip >= limit:
                    return emit_literal(src, next_emit, end - next_emit, out, o) if next_emit < end else o
                table[hash32(src + ip - 1, shift)] = <uint16_t>(ip - 1 - start)
                h = hash32(src + ip, shift)
                candidate = start + table[h]
                table[h] = <uint16_t>(ip - start)
                if sm_le32(src + ip) != sm_le32(src + candidate):
                    break
            ip += 1
            next_hash = hash32(src + ip, shift)
    return emit_literal(src, next_emit, end - next_emit, out, o) if next_emit < end else o


cdef int64_t compress(const uint8_t* src, int64_t n, uint8_t* out, uint16_t* table) noexcept nogil:
    cdef int64_t o = put_varint(out, 0, <uint64_t>n), p = 0, size
    while p < n:
        size = n - p if n - p < MAX_FRAGMENT else MAX_FRAGMENT
        o = compress_fragment(src, p, size, out, o, table)
        p += size
    return o


def snappy_compress(const uint8_t[::1] src, int64_t n, uint8_t[::1] out):
    cdef uint16_t table[MAX_TABLE]
    cdef int64_t r
    if n < 0 or n > src.shape[0] or out.shape[0] < bound(n):
        return -1
    if n == 0:
        out[0] = 0
        return 1
    with nogil:
        r = compress(&src[0], n, &out[0], table)
    return r

# ---- blocks ----------------------------------------------------------------------------------

cdef int64_t seal(const uint8_t* raw, int64_t n, int comp, int64_t per_kb, int checksum, uint8_t* out,
                  int64_t o, uint16_t* table) noexcept nogil:
    cdef uint8_t kind = 0
    cdef int64_t c, body_end = o + n
    cdef uint32_t ck
    if comp:
        c = compress(raw, n, out + o, table)
        if c <= (per_kb * n) >> 10:
            kind = 1
            body_end = o + c
    if not kind:
        memcpy(out + o, raw, n)
    out[body_end] = kind
    ck = block_checksum(checksum, out + o, body_end - o, kind)
    memcpy(out + body_end + 1, &ck, 4)
    return body_end + TRAILER


def sst_seal(const uint8_t[::1] raw, int64_t n, const int64_t[::1] restarts, int64_t nrestarts, int compress,
             int64_t per_kb, int checksum, uint8_t[::1] out):
    cdef int64_t size = n + 4 * nrestarts + 4, need, i, r
    cdef uint8_t* block
    cdef uint32_t v
    cdef uint16_t table[MAX_TABLE]
    need = bound(size) + TRAILER
    if out.shape[0] < need:
        return SST_CAPACITY, need
    if n < 0 or n > raw.shape[0] or nrestarts < 0 or nrestarts > restarts.shape[0]:
        return SST_TRUNCATED, 0
    block = <uint8_t*>malloc(size if size > 0 else 1)
    if block == NULL:
        raise MemoryError()
    try:
        with nogil:
            if n:
                memcpy(block, &raw[0], n)
            for i in range(nrestarts):
                v = <uint32_t>restarts[i]
                memcpy(block + n + 4 * i, &v, 4)
            v = <uint32_t>nrestarts
            memcpy(block + n + 4 * nrestarts, &v, 4)
            r = seal(block, size, compress, per_kb, checksum, &out[0], 0, table)
    finally:
        free(block)
    return SST_OK, r


cdef inline int64_t separator(const uint8_t* s, int64_t ns, const uint8_t* lim, int64_t nl, uint8_t* out) noexcept nogil:
    """Write RocksDB's shortened separator of ``s`` and ``lim`` (see the twin's ``_separator``)
    to ``out``; its length."""
    cdef int64_t m = ns if ns < nl else nl, d = 0
    memcpy(out, s, ns)
    while d < m and s[d] == lim[d]:
        d += 1
    if d >= m:
        return ns
    if s[d] >= lim[d] or d == ns - 1:
        return ns
    if d < nl - 1 or s[d] + 1 < lim[d]:
        out[d] = s[d] + 1
        return d + 1
    d += 1
    while d < ns:
        if s[d] < 0xFF:
            if d + 1 < ns:
                out[d] = s[d] + 1
                return d + 1
            return ns
        d += 1
    return ns


def sst_data(const int64_t[::1] koff, const uint8_t[::1] kdata, const int64_t[::1] voff, const uint8_t[::1] vdata,
             int64_t start, int64_t stop, bint final, uint64_t trailer, int64_t block_size, int64_t restart_interval,
             int64_t deviation, int compress, int64_t per_kb, int checksum, int64_t[::1] state, uint8_t[::1] scratch,
             uint8_t[::1] out, uint8_t[::1] index, int64_t[::1] index_restarts):
    if state.shape[0] < 7 or scratch.shape[0] < 16 or out.shape[0] < 1 or index.shape[0] < 1 \
            or not 0 <= state[0] <= out.shape[0] or not 0 <= state[2] <= index.shape[0] \
            or not 0 <= state[3] <= index_restarts.shape[0] or restart_interval < 1 or block_size < 1 \
            or not 0 <= deviation <= 100:
        return SST_TRUNCATED, start, 0
    cdef const uint8_t* kd = &kdata[0] if kdata.shape[0] else NULL
    cdef const uint8_t* vd = &vdata[0] if vdata.shape[0] else NULL
    cdef uint8_t* sc = &scratch[0]
    cdef uint8_t* o_p = &out[0]
    cdef uint8_t* ix = &index[0]
    cdef int64_t nsc = scratch.shape[0], nout = out.shape[0], nix = index.shape[0], nrs = index_restarts.shape[0]
    cdef int64_t i = start, b0, raw, counter, nlast, k0, k1, v0, v1, klen, vlen, curr, after, shared, m, need
    cdef int64_t limit_dev = (block_size * (100 - deviation) + 99) // 100 if deviation else 0
    cdef int64_t size, o, ixo, nb, pos, end, nsep, r, j, nrestarts, cap_r = 64
    cdef uint8_t tail[8]
    cdef uint8_t* last = NULL
    cdef uint8_t* sep = NULL
    cdef int64_t* restarts = NULL
    cdef int64_t* tmp
    cdef uint16_t table[MAX_TABLE]
    cdef uint32_t v32
    cdef bint closed
    cdef int status = SST_OK
    cdef int64_t result_next = stop, result_need = 0
    if start < 0 or stop < start or stop >= koff.shape[0] or stop >= voff.shape[0]:
        return SST_TRUNCATED, start, 0
    if koff[stop] > kdata.shape[0] or voff[stop] > vdata.shape[0] or koff[start] < 0 or voff[start] < 0:
        return SST_TRUNCATED, start, 0
    for i in range(start, stop):
        if koff[i + 1] < koff[i] or voff[i + 1] < voff[i]:
            return SST_TRUNCATED, start, 0
    i = start
    memcpy(tail, &trailer, 8)
    last = <uint8_t*>malloc(nsc + 8)
    sep = <uint8_t*>malloc(nsc + 8)
    restarts = <int64_t*>malloc(cap_r * sizeof(int64_t))
    if last == NULL or sep == NULL or restarts == NULL:
        free(last)
        free(sep)
        free(restarts)
        raise MemoryError()
    with nogil:
        while i < stop:
            b0 = i
            raw = 0
            restarts[0] = 0
            nrestarts = 1
            counter = 0
            nlast = 0
            closed = False
            while i < stop:
                k0 = koff[i]
                k1 = koff[i + 1]
                v0 = voff[i]
                v1 = voff[i + 1]
                klen = k1 - k0 + 8
                vlen = v1 - v0
                if i > b0:
                    curr = raw + 4 * nrestarts + 4
                    if curr >= block_size:
                        closed = True
                        break
                    if limit_dev:
                        after = curr + klen + vlen + (4 if counter >= restart_interval else 0) + 4 \
                            + varint_len(klen) + varint_len(vlen)
                        if after > block_size and curr > limit_dev:
                            closed = True
                            break
                shared = 0
                if counter >= restart_interval:
                    if nrestarts == cap_r:
                        tmp = <int64_t*>realloc(restarts, 2 * cap_r * sizeof(int64_t))
                        if tmp == NULL:
                            status = -1
                            break
                        restarts = tmp
                        cap_r *= 2
                    restarts[nrestarts] = raw
                    nrestarts += 1
                    counter = 0
                else:
                    m = nlast if nlast < klen else klen
                    while shared < m and last[shared] == (kd[k0 + shared] if shared < klen - 8 else tail[shared - (klen - 8)]):
                        shared += 1
                need = raw + 15 + klen - shared + vlen
                if need + 4 * nrestarts + 4 > nsc:
                    status = SST_CAPACITY
                    result_next = b0
                    result_need = need + 4 * (nrestarts + 1) + 4
                    break
                raw = put_varint(sc, raw, <uint64_t>shared)
                raw = put_varint(sc, raw, <uint64_t>(klen - shared))
                raw = put_varint(sc, raw, <uint64_t>vlen)
                if shared < klen - 8:
                    memcpy(sc + raw, kd + k0 + shared, klen - 8 - shared)
                    raw += klen - 8 - shared
                    memcpy(sc + raw, tail, 8)
                    raw += 8
                else:
                    memcpy(sc + raw, tail + (shared - (klen - 8)), klen - shared)
                    raw += klen - shared
                if vlen:
                    memcpy(sc + raw, vd + v0, vlen)
                raw += vlen
                counter += 1
                if k1 > k0:
                    memcpy(last, kd + k0, k1 - k0)
                memcpy(last + k1 - k0, tail, 8)
                nlast = klen
                i += 1
            if status != SST_OK:
                break
            if not closed and not final:
                result_next = b0
                break
            if closed:
                nsep = separator(last, nlast - 8, kd + koff[i], koff[i + 1] - koff[i], sep)
            else:
                nsep = nlast - 8
                memcpy(sep, last, nsep)
            size = raw + 4 * nrestarts + 4
            o = state[0]
            ixo = state[2]
            nb = state[3]
            if o + bound(size) + TRAILER > nout or ixo + nsep + 30 > nix or nb >= nrs:
                status = SST_CAPACITY
                result_next = b0
                result_need = size
                break
            for j in range(nrestarts):
                v32 = <uint32_t>restarts[j]
                memcpy(sc + raw, &v32, 4)
                raw += 4
            v32 = <uint32_t>nrestarts
            memcpy(sc + raw, &v32, 4)
            pos = state[1]
            end = seal(sc, size, compress, per_kb, checksum, o_p, o, table)
            index_restarts[nb] = ixo
            ixo = put_varint(ix, ixo, 0)
            ixo = put_varint(ix, ixo, <uint64_t>nsep)
            memcpy(ix + ixo, sep, nsep)
            ixo += nsep
            ixo = put_varint(ix, ixo, <uint64_t>pos)
            ixo = put_varint(ix, ixo, <uint64_t>(end - o - TRAILER))
            state[0] = end
            state[1] = pos + end - o
            state[2] = ixo
            state[3] = nb + 1
            state[4] += i - b0
            state[5] += koff[i] - koff[b0] + 8 * (i - b0)
            state[6] += voff[i] - voff[b0]
    free(last)
    free(sep)
    free(restarts)
    if status == -1:
        raise MemoryError()
    return status, result_next, result_need



def sst_reframe(const uint8_t[::1] buf, const int64_t[::1] block_pos, const int64_t[::1] block_len, int64_t start,
                int64_t stop, int checksum, int compress, int64_t per_kb, uint8_t[::1] scratch, uint8_t[::1] out):
    if scratch.shape[0] < 1 or out.shape[0] < 1:
        return SST_TRUNCATED, start, 0, 0
    cdef const uint8_t* f = &buf[0] if buf.shape[0] else NULL
    cdef int64_t nf = buf.shape[0], cap = scratch.shape[0], nout = out.shape[0], o = 0, i, length = 0
    cdef const uint8_t* blk = NULL
    cdef uint8_t* sc = &scratch[0]
    cdef uint8_t* op = &out[0]
    cdef uint16_t table[MAX_TABLE]
    cdef int status = SST_OK
    if start < 0 or stop < start or stop > block_pos.shape[0] or stop > block_len.shape[0]:
        return SST_TRUNCATED, start, 0, 0
    i = start
    with nogil:
        while i < stop:
            status = read_block(f, nf, block_pos[i], block_len[i], checksum, sc, cap, &blk, &length)
            if status != SST_OK:
                break
            if o + bound(length) + TRAILER > nout:
                if o == 0:
                    status = SST_CAPACITY
                    length = bound(length) + TRAILER
                break
            o = seal(blk, length, compress, per_kb, checksum, op, o, table)
            i += 1
    if status == SST_CAPACITY:
        return status, i, o, length
    if status != SST_OK:
        return status, i, o, 0
    return SST_OK, i, o, 0
