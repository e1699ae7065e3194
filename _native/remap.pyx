# cython: language_level=3
"""flink-core ``Row`` (``RowSerializer``) migration, byte to byte.

A flink-core row is ``MASK ‖ non-null fields in DataStream formats``; the mask is MSB-first with
two RowKind bits first when ``supportsRowKind``. The only byte-level change between compatible
schemas is that flag (legacy pre-1.11 rows ↔ rows with kinds), at any nesting depth: the mask is
rewritten and every field's bytes are copied after being validated in place. Fields whose values
change shape (POJO, Avro inside a row) are not programs: they take the per-value path.

Program (int64 matrix, pre-order, 8 columns): KIND, POS, END, ARITY, -, OLD_KIND_FLAG,
NEW_KIND_FLAG, WIDTH. Kinds: 1 fixed-width (WIDTH bytes), 2 StringValue string, 3 byte[] (i32 BE
length), 4 nested row. Same two-pass contract as the other kernels; the Python twin is in
``statemorph.serializers._batch``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from smbytes cimport *

__statemorph_native__ = True

cdef enum:
    C_KIND = 0
    C_POS = 1
    C_END = 2
    C_ARITY = 3
    C_OLD_FLAG = 5
    C_NEW_FLAG = 6
    C_WIDTH = 7
    NCOL = 8

cdef enum:
    S_FIXED = 1
    S_STR = 2
    S_BYTES = 3
    S_ROW = 4


cdef inline int64_t PP(const int64_t* prog, int64_t node, int col) noexcept nogil:
    return prog[node * NCOL + col]


cdef inline bint mask_bit(const uint8_t* m, int64_t k) noexcept nogil:
    return (m[k >> 3] >> (7 - (k & 7))) & 1


cdef int64_t row_walk(const int64_t* prog, int64_t node, Cursor* c, uint8_t* o, int64_t op,
                      int64_t* err_node) noexcept nogil:
    """Validate one row at the cursor (advancing it) and return the size of the rewritten row;
    with ``o`` != NULL also write it at ``o + op``. Negative: -code with ``err_node`` set."""
    cdef int64_t arity = PP(prog, node, C_ARITY)
    cdef int64_t oldk = 2 if PP(prog, node, C_OLD_FLAG) else 0
    cdef int64_t newk = 2 if PP(prog, node, C_NEW_FLAG) else 0
    cdef int64_t oldlen = (arity + oldk + 7) >> 3
    cdef int64_t newlen = (arity + newk + 7) >> 3
    cdef const uint8_t* m
    cdef int64_t k, i, child, end, size, start, r, w
    cdef int kind_bits = 0, code
    cdef int64_t kind
    cdef uint32_t n, u
    cdef int32_t blen
    if c.end - c.pos < oldlen:
        err_node[0] = node
        return -E_TRUNCATED
    m = c.base + c.pos
    for k in range(arity + oldk, oldlen * 8):
        if mask_bit(m, k):
            err_node[0] = node
            return -E_BAD_HEADER
    if oldk:
        kind_bits = mask_bit(m, 0) | (mask_bit(m, 1) << 1)
    c.pos += oldlen
    size = newlen
    if o != NULL:
        memset(o + op, 0, newlen)
        if newk:
            if kind_bits & 1:
                o[op] |= 0x80
            if kind_bits & 2:
                o[op] |= 0x40
        for i in range(arity):
            if mask_bit(m, oldk + i):
                k = newk + i
                o[op + (k >> 3)] |= <uint8_t>(0x80 >> (k & 7))
    end = PP(prog, node, C_END)
    child = node + 1
    i = 0
    while child < end:
        if mask_bit(m, oldk + PP(prog, child, C_POS)):
            child = PP(prog, child, C_END)
            continue
        start = c.pos
        kind = PP(prog, child, C_KIND)
        if kind == S_ROW:
            r = row_walk(prog, child, c, o, op + size, err_node)
            if r < 0:
                return r
            size += r
            child = PP(prog, child, C_END)
            continue
        if kind == S_FIXED:
            w = PP(prog, child, C_WIDTH)
            if c.end - c.pos < w:
                err_node[0] = child
                return -E_TRUNCATED
            c.pos += w
        elif kind == S_STR:
            code = read_varint(c, &n, 0x7FFFFFFF)
            if code == E_OK and n > 0:
                if <int64_t>(n - 1) > c.end - c.pos:
                    code = E_TRUNCATED
                else:
                    for k in range(n - 1):
                        code = read_varint(c, &u, 0xFFFF)
                        if code != E_OK:
                            break
            if code != E_OK:
                err_node[0] = child
                return -code
        else:
            if c.end - c.pos < 4:
                err_node[0] = child
                return -E_TRUNCATED
            blen = <int32_t>load_u32_be(c.base + c.pos)
            if blen < 0:
                err_node[0] = child
                return -E_BAD_LENGTH
            if blen > c.end - c.pos - 4:
                err_node[0] = child
                return -E_TRUNCATED
            c.pos += 4 + blen
        if o != NULL:
            memcpy(o + op + size, c.base + start, c.pos - start)
        size += c.pos - start
        child = PP(prog, child, C_END)
    return size


def core_row_sizes(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                   int64_t[::1] out_off, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef const int64_t[:, ::1] pm = prog
    cdef const int64_t* p = &pm[0, 0]
    cdef Cursor c
    cdef int64_t i, r, err_node, first = -1
    cdef int code
    if pm.shape[1] != NCOL:
        raise ValueError("bad row program")
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            if not bv_valid(&v, i):
                continue
            err_node = -1
            code = bv_entry(&v, i, &c)
            if code == E_OK:
                r = row_walk(p, 0, &c, NULL, 0, &err_node)
                if r < 0:
                    code = <int>(-r)
                elif c.pos != c.end:
                    code = E_TRAILING
                else:
                    out_off[i + 1] = r
            if code != E_OK:
                out_off[i + 1] = encode_err(code, err_node)
                if first < 0:
                    first = i
                if stop_at_error:
                    break
    return first


def core_row_fill(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                  const int64_t[::1] out_off, uint8_t[::1] out_data):
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef const int64_t[:, ::1] pm = prog
    cdef const int64_t* p = &pm[0, 0]
    cdef uint8_t* o = &out_data[0] if out_data.shape[0] else NULL
    cdef int64_t cap = out_data.shape[0]
    cdef Cursor c
    cdef int64_t i, err_node
    with nogil:
        for i in range(start, stop):
            if out_off[i + 1] == out_off[i] or out_off[i + 1] > cap or not bv_valid(&v, i):
                continue
            if bv_entry(&v, i, &c) != E_OK:
                continue
            row_walk(p, 0, &c, o, out_off[i], &err_node)
