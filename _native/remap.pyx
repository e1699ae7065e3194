# cython: language_level=3
"""flink-core ``Row`` (``RowSerializer``) migration, byte to byte.

A flink-core row is ``MASK ‖ non-null fields in DataStream formats``; the mask is MSB-first with
two RowKind bits first when ``supportsRowKind``. The only byte-level change between compatible
schemas is that flag (legacy pre-1.11 rows ↔ rows with kinds), at any nesting depth: the mask is
rewritten and every field's bytes are copied after being validated in place. Fields whose values
change shape (POJO, Avro inside a row) are not programs: they take the per-value path.

``pojo_migrate_run`` (at the end) does the same for ``PojoSerializer`` values.

Program (int64 matrix, pre-order, 8 columns): KIND, POS, END, ARITY, -, OLD_KIND_FLAG,
NEW_KIND_FLAG, WIDTH. Kinds: 1 fixed-width (WIDTH bytes), 2 StringValue string, 3 byte[] (i32 BE
length), 4 nested row. Same two-pass contract as the other kernels; the Python twin is in
``statemorph.serializers._batch``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from smbytes cimport *

import numpy as np

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


# ------------------------------------------------------------------------------------------ POJO
# PojoSerializer migration (program and format: statemorph.serializers._batch_pojo, which holds
# the Python twin). A check walk validates one entry and records, per old field node, where its
# bytes start and whether it reads as null; an emit walk then writes the fields in the new order,
# canonically (as the per-value reference re-serializes them).

cdef enum:
    NUL = 1
    REWRITE = 2
    P_FIXED = 1
    P_STR = 2
    P_BYTES = 3
    P_POJO = 4
    P_BOOL = 5
    P_F32 = 6
    P_F64 = 7
    C_N_OLD = 3
    C_EMIT = 4
    C_N_NEW = 5
    C_SRC = 4
    C_CONST = 5
    C_CONST_LEN = 6

ctypedef struct PWalk:
    const int64_t* p
    const uint8_t* d
    int64_t end         # the entry's end: the emit walk re-reads checked strings inside it
    int64_t* start      # per node: first byte of the field's value
    int64_t* stop       # per leaf node: the byte after it
    uint8_t* null       # per node: NUL the field (or the POJO) reads as null, REWRITE a string whose
                        # varints are not minimal (re-encoded; every other value is one memcpy)
    int64_t err
    uint8_t* o          # output window and its capacity; ``full`` once a write did not fit
    int64_t op
    int64_t cap
    bint full


cdef int pojo_check(PWalk* w, int64_t node, Cursor* c) noexcept nogil:
    """Validate the POJO value at the cursor (advancing it); E_OK or a code with ``w.err`` set."""
    cdef uint8_t flags, flag
    cdef int64_t child = node + 1, k
    cdef int code
    if c.pos >= c.end:
        w.err = node
        return E_TRUNCATED
    flags = c.base[c.pos]
    c.pos += 1
    w.null[node] = flags == 1
    if flags == 1:
        return E_OK
    if flags != 2:
        w.err = node
        return E_BAD_FLAG
    for k in range(PP(w.p, node, C_N_OLD)):
        if c.pos >= c.end:
            w.err = child
            return E_TRUNCATED
        flag = c.base[c.pos]
        c.pos += 1
        if flag > 1:
            w.err = child
            return E_BAD_FLAG
        w.null[child] = flag
        w.start[child] = c.pos
        if flag == 0:
            code = pojo_check_field(w, child, c)
            if code != E_OK:
                return code
        child = PP(w.p, child, C_END)
    return E_OK


cdef int pojo_check_field(PWalk* w, int64_t node, Cursor* c) noexcept nogil:
    cdef int64_t kind = PP(w.p, node, C_KIND), width, k
    cdef uint32_t n, u
    cdef int32_t blen
    cdef int code
    if kind == P_POJO:
        return pojo_check(w, node, c)
    if kind == P_STR:
        code = read_varint(c, &n, 0x7FFFFFFF)
        if code == E_OK and n == 0:
            w.null[node] = NUL
        elif code == E_OK:
            # a varint is minimal when it is one byte or its last group is not zero
            if c.base[c.pos - 1] == 0 and c.pos - w.start[node] > 1:
                w.null[node] = REWRITE
            if <int64_t>(n - 1) > c.end - c.pos:
                code = E_TRUNCATED
            else:
                for k in range(n - 1):
                    if c.pos < c.end and c.base[c.pos] < 0x80:  # ASCII: one minimal byte
                        c.pos += 1
                        continue
                    code = read_varint(c, &u, 0xFFFF)
                    if code != E_OK:
                        break
                    if c.base[c.pos - 1] == 0:
                        w.null[node] = REWRITE
        if code != E_OK:
            w.err = node
        w.stop[node] = c.pos
        return code
    if kind == P_BYTES:
        if c.end - c.pos < 4:
            w.err = node
            return E_TRUNCATED
        blen = <int32_t>load_u32_be(c.base + c.pos)
        if blen < 0:
            w.err = node
            return E_BAD_LENGTH
        if blen > c.end - c.pos - 4:
            w.err = node
            return E_TRUNCATED
        c.pos += 4 + blen
        w.stop[node] = c.pos
        return E_OK
    width = PP(w.p, node, C_WIDTH)
    if c.end - c.pos < width:
        w.err = node
        return E_TRUNCATED
    c.pos += width
    w.stop[node] = c.pos
    return E_OK


cdef inline void put(PWalk* w, const uint8_t* src, int64_t n) noexcept nogil:
    if w.op + n > w.cap:
        w.full = True
        return
    memcpy(w.o + w.op, src, n)
    w.op += n


cdef inline void put_byte(PWalk* w, uint8_t b) noexcept nogil:
    put(w, &b, 1)


cdef inline void put_varint(PWalk* w, uint32_t n) noexcept nogil:
    cdef uint8_t buf[5]
    cdef int k = 0
    while n >= 0x80:
        buf[k] = (n & 0x7F) | 0x80
        n >>= 7
        k += 1
    buf[k] = <uint8_t>n
    put(w, buf, k + 1)


cdef void pojo_emit(PWalk* w, int64_t node) noexcept nogil:
    """Write the checked POJO ``node`` in the new layout (``w.full`` when the window is short)."""
    cdef int64_t row = PP(w.p, node, C_EMIT), k, src, cst, n, j
    cdef uint8_t b
    if w.null[node] == NUL:
        put_byte(w, 1)
        return
    put_byte(w, 2)
    for k in range(PP(w.p, node, C_N_NEW)):
        src = PP(w.p, row, C_SRC)
        if src < 0:
            cst = PP(w.p, row, C_CONST)
            n = PP(w.p, row, C_CONST_LEN)
            for j in range(n):
                b = <uint8_t>w.p[(cst + j // (NCOL - 1)) * NCOL + 1 + j % (NCOL - 1)]
                put_byte(w, b)
        elif w.null[src] == NUL:
            put_byte(w, 1)
        else:
            put_byte(w, 0)
            pojo_emit_field(w, src)
        row += 1


cdef void pojo_emit_field(PWalk* w, int64_t node) noexcept nogil:
    cdef int64_t kind = PP(w.p, node, C_KIND), k
    cdef Cursor c
    cdef uint32_t n = 0, u = 0, bits
    cdef uint64_t bits64
    cdef const uint8_t* at = w.d + w.start[node]
    cdef uint8_t one = 1, zero = 0
    cdef uint8_t nan32[4]
    cdef uint8_t nan64[8]
    if kind == P_POJO:
        pojo_emit(w, node)
    elif kind == P_STR and w.null[node] != REWRITE:
        put(w, at, w.stop[node] - w.start[node])
    elif kind == P_STR:
        c.base = w.d
        c.pos = w.start[node]
        c.end = w.end
        read_varint(&c, &n, 0x7FFFFFFF)
        put_varint(w, n)
        for k in range(n - 1):
            read_varint(&c, &u, 0xFFFF)
            put_varint(w, u)
    elif kind == P_BOOL:
        put(w, &one if at[0] else &zero, 1)
    elif kind == P_F32:
        bits = load_u32_be(at)
        if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF):
            nan32[0] = 0x7F; nan32[1] = 0xC0; nan32[2] = 0; nan32[3] = 0
            put(w, nan32, 4)
        else:
            put(w, at, 4)
    elif kind == P_F64:
        bits64 = load_u64_be(at)
        if ((bits64 >> 52) & 0x7FF) == 0x7FF and (bits64 & ((<uint64_t>1 << 52) - 1)):
            memset(nan64, 0, 8)
            nan64[0] = 0x7F
            nan64[1] = 0xF8
            put(w, nan64, 8)
        else:
            put(w, at, 8)
    else:
        put(w, at, w.stop[node] - w.start[node])


def pojo_migrate_run(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                     out_off, uint8_t[::1] out_data, int64_t pos):
    """One-pass POJO migrate with the contract of ``rowdata.migrate_run``: validate and write each
    entry packed from ``out_data[pos]``, its end into ``out_off[i + 1]`` (int32 or int64 Arrow
    offsets). Returns ``(next_row, pos, status)``: ``status < 0``: entry ``next_row`` is bad (it takes
    no bytes; resume at ``next_row + 1``); else ``next_row < stop``: it did not fit (grow, call again)."""
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef const int64_t[:, ::1] pm = prog
    cdef int32_t[::1] off32
    cdef int64_t[::1] off64
    cdef int32_t* o32 = NULL
    cdef int64_t* o64 = NULL
    cdef int64_t i = start, status = 0, n_off, nnodes = pm.shape[0]
    cdef int64_t cap = out_data.shape[0]
    cdef int64_t[::1] starts = np.zeros(max(nnodes, 1), dtype=np.int64)
    cdef int64_t[::1] stops = np.zeros(max(nnodes, 1), dtype=np.int64)
    cdef uint8_t[::1] nulls = np.zeros(max(nnodes, 1), dtype=np.uint8)
    cdef PWalk w
    cdef Cursor c
    cdef int code
    if pm.shape[1] != NCOL or nnodes == 0 or pm[0, C_KIND] != P_POJO:
        raise ValueError("bad POJO program")
    if out_off.itemsize == 4:
        off32 = out_off
        o32 = &off32[0]
        n_off = off32.shape[0]
        if cap > 0x7FFFFFFF:
            raise ValueError("pojo_migrate_run: int32 offsets cannot address more than 2 GiB of output")
    else:
        off64 = out_off
        o64 = &off64[0]
        n_off = off64.shape[0]
    if stop > n_off - 1 or start < 0 or pos < 0 or pos > cap:
        raise ValueError("pojo_migrate_run: output arrays shorter than the rows")
    w.p = &pm[0, 0]
    w.d = v.data
    w.start = &starts[0]
    w.stop = &stops[0]
    w.null = &nulls[0]
    w.o = &out_data[0] if cap else NULL
    w.cap = cap
    with nogil:
        while i < stop:
            if bv_valid(&v, i):
                w.err = -1
                code = bv_entry(&v, i, &c)
                if code == E_OK:
                    code = pojo_check(&w, 0, &c)
                    if code == E_OK and c.pos != c.end:
                        w.err = -1
                        code = E_TRAILING
                if code == E_OK:
                    w.op = pos
                    w.end = c.end
                    w.full = False
                    pojo_emit(&w, 0)
                    if w.full:
                        break
                    pos = w.op
                else:
                    status = encode_err(code, w.err)
            if o32 != NULL:
                o32[i + 1] = <int32_t>pos
            else:
                o64[i + 1] = pos
            if status:
                break
            i += 1
    return i, pos, status
