# cython: language_level=3
"""flink-core ``Row`` (``RowSerializer``) migration, byte to byte.

A flink-core row is ``MASK ‖ non-null fields in DataStream formats``; the mask is MSB-first with
two RowKind bits first when ``supportsRowKind``. The only byte-level change between compatible
schemas is that flag (legacy pre-1.11 rows ↔ rows with kinds), at any nesting depth: the mask is
rewritten and every field is validated in place and copied canonically (see ``put_canonical``).
Fields whose values change shape (POJO, Avro inside a row) are not programs: they take the
per-value path. ``pojo_migrate_run`` (at the end) remaps ``PojoSerializer`` values the same way.

Program (int64 matrix, pre-order, 8 columns): KIND, POS, END, ARITY, -, OLD_KIND_FLAG,
NEW_KIND_FLAG, WIDTH. Kinds: 1 fixed-width (WIDTH bytes), 2 StringValue string, 3 byte[] (i32 BE
length), 4 nested row, 5 boolean, 6 float, 7 double. Same two-pass contract as the other kernels;
the Python twin is ``statemorph.kernels.composite_py``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from cursor cimport *

import numpy as np

__statemorph_native__ = True

# program columns and kinds (COL_*, COMPOSITE_*): generated from statemorph.kernels.abi
include "abi_composite.pxi"

cdef enum:
    NUL = 1             # check_string states: the StringValue is null,
    REWRITE = 2         # or its varints are not minimal


cdef inline int64_t PP(const int64_t* prog, int64_t node, int col) noexcept nogil:
    return prog[node * PROGRAM_COLUMNS + col]


cdef inline bint mask_bit(const uint8_t* m, int64_t k) noexcept nogil:
    return (m[k >> 3] >> (7 - (k & 7))) & 1


# Values are copied canonically, as the per-value reference (and Flink, which migrates through Java
# objects) re-serializes them: a boolean byte other than 0 becomes 01, every NaN the canonical NaN,
# string varints their minimal form, and a null StringValue a null field.

cdef int check_string(Cursor* c, uint8_t* state) noexcept nogil:
    """Validate the StringValue at the cursor (advancing it); ``state`` 0, NUL or REWRITE."""
    cdef int64_t at = c.pos, k
    cdef uint32_t n = 0, u = 0
    cdef int code = read_varint(c, &n, 0x7FFFFFFF)
    state[0] = 0
    if code != ERR_OK:
        return code
    if n == 0:
        state[0] = NUL
        return ERR_OK
    # a varint is minimal when it is one byte or its last group is not zero
    if c.base[c.pos - 1] == 0 and c.pos - at > 1:
        state[0] = REWRITE
    if <int64_t>(n - 1) > c.end - c.pos:
        return ERR_TRUNCATED
    for k in range(n - 1):
        if c.pos < c.end and c.base[c.pos] < 0x80:  # ASCII: one minimal byte
            c.pos += 1
            continue
        code = read_varint(c, &u, 0xFFFF)
        if code != ERR_OK:
            return code
        if c.base[c.pos - 1] == 0:
            state[0] = REWRITE
    return ERR_OK


cdef int check_leaf(Cursor* c, int64_t kind, int64_t width, uint8_t* state) noexcept nogil:
    """Validate the leaf value of ``kind`` at the cursor (advancing it); ``state`` as check_string."""
    cdef int32_t blen
    state[0] = 0
    if kind == COMPOSITE_STR:
        return check_string(c, state)
    if kind == COMPOSITE_BYTES:
        if c.end - c.pos < 4:
            return ERR_TRUNCATED
        blen = <int32_t>load_u32_be(c.base + c.pos)
        if blen < 0:
            return ERR_BAD_LENGTH
        if blen > c.end - c.pos - 4:
            return ERR_TRUNCATED
        c.pos += 4 + blen
        return ERR_OK
    if c.end - c.pos < width:
        return ERR_TRUNCATED
    c.pos += width
    return ERR_OK


cdef inline int64_t varint_at(uint8_t* o, uint32_t n) noexcept nogil:
    cdef int64_t k = 0
    while n >= 0x80:
        if o != NULL:
            o[k] = (n & 0x7F) | 0x80
        n >>= 7
        k += 1
    if o != NULL:
        o[k] = <uint8_t>n
    return k + 1


cdef int64_t put_canonical(int64_t kind, const uint8_t* d, int64_t start, int64_t stop, bint rewrite,
                           uint8_t* o) noexcept nogil:
    """The canonical form of the checked leaf value ``d[start:stop]``: its size, written at ``o``
    unless NULL."""
    cdef Cursor c
    cdef uint32_t n = 0, u = 0, bits
    cdef uint64_t bits64
    cdef int64_t size, k
    if kind == COMPOSITE_BOOL:
        if o != NULL:
            o[0] = d[start] != 0
        return 1
    if kind == COMPOSITE_F32:
        bits = load_u32_be(d + start)
        if (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF):
            if o != NULL:
                store_u32_be(o, 0x7FC00000)
            return 4
    elif kind == COMPOSITE_F64:
        bits64 = load_u64_be(d + start)
        if ((bits64 >> 52) & 0x7FF) == 0x7FF and (bits64 & ((<uint64_t>1 << 52) - 1)):
            if o != NULL:
                store_u64_be(o, (<uint64_t>0x7FF8) << 48)
            return 8
    elif kind == COMPOSITE_STR and rewrite:
        c.base = d
        c.pos = start
        c.end = stop
        read_varint(&c, &n, 0x7FFFFFFF)
        size = varint_at(o, n)
        for k in range(n - 1):
            read_varint(&c, &u, 0xFFFF)
            size += varint_at(o + size if o != NULL else NULL, u)
        return size
    if o != NULL:
        memcpy(o, d + start, stop - start)
    return stop - start


cdef int64_t row_walk(const int64_t* prog, int64_t node, Cursor* c, uint8_t* o, int64_t op,
                      int64_t* err_node) noexcept nogil:
    """Validate one row at the cursor (advancing it) and return the size of the rewritten row;
    with ``o`` != NULL also write it at ``o + op``. Negative: -code with ``err_node`` set."""
    cdef int64_t arity = PP(prog, node, COL_ARITY)
    cdef int64_t oldk = 2 if PP(prog, node, COL_OLD_FLAG) else 0
    cdef int64_t newk = 2 if PP(prog, node, COL_NEW_FLAG) else 0
    cdef int64_t oldlen = (arity + oldk + 7) >> 3
    cdef int64_t newlen = (arity + newk + 7) >> 3
    cdef const uint8_t* m
    cdef int64_t k, i, child, end, size, start, r
    cdef int kind_bits = 0, code
    cdef int64_t kind
    cdef uint8_t state
    if c.end - c.pos < oldlen:
        err_node[0] = node
        return -ERR_TRUNCATED
    m = c.base + c.pos
    for k in range(arity + oldk, oldlen * 8):
        if mask_bit(m, k):
            err_node[0] = node
            return -ERR_BAD_HEADER
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
    end = PP(prog, node, COL_END)
    child = node + 1
    i = 0
    while child < end:
        if mask_bit(m, oldk + PP(prog, child, COL_POS)):
            child = PP(prog, child, COL_END)
            continue
        start = c.pos
        kind = PP(prog, child, COL_KIND)
        if kind == COMPOSITE_ROW:
            r = row_walk(prog, child, c, o, op + size, err_node)
            if r < 0:
                return r
            size += r
            child = PP(prog, child, COL_END)
            continue
        code = check_leaf(c, kind, PP(prog, child, COL_WIDTH), &state)
        if code != ERR_OK:
            err_node[0] = child
            return -code
        if state == NUL:  # a null string read from a field the mask calls present: null, as the reference writes it
            if o != NULL:
                k = newk + PP(prog, child, COL_POS)
                o[op + (k >> 3)] |= <uint8_t>(0x80 >> (k & 7))
        else:
            size += put_canonical(kind, c.base, start, c.pos, state == REWRITE, o + op + size if o != NULL else NULL)
        child = PP(prog, child, COL_END)
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
    if pm.shape[1] != PROGRAM_COLUMNS:
        raise ValueError("bad row program")
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            if not bv_valid(&v, i):
                continue
            err_node = -1
            code = bv_entry(&v, i, &c)
            if code == ERR_OK:
                r = row_walk(p, 0, &c, NULL, 0, &err_node)
                if r < 0:
                    code = <int>(-r)
                elif c.pos != c.end:
                    code = ERR_TRAILING
                else:
                    out_off[i + 1] = r
            if code != ERR_OK and row_failed(&out_off[i + 1], encode_err(code, err_node), i, &first, stop_at_error):
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
            if bv_entry(&v, i, &c) != ERR_OK:
                continue
            row_walk(p, 0, &c, o, out_off[i], &err_node)


# ------------------------------------------------------------------------------------------ POJO
# PojoSerializer migration (program and format: statemorph.kernels.composite_py, which holds
# the Python twin). A check walk validates one entry and records, per old field node, where its
# bytes start and end and its state; an emit walk then writes the fields in the new order,
# canonically. Leaf kinds are the COMPOSITE_* kinds above.

ctypedef struct PWalk:
    const int64_t* p
    const uint8_t* d
    int64_t* start      # per node: first byte of the field's value
    int64_t* stop       # per leaf node: the byte after it
    uint8_t* state      # per node: NUL the field (or the POJO) reads as null, REWRITE a string to
                        # re-encode (every other value is copied canonically by put_canonical)
    int64_t err
    uint8_t* o          # the output window and its capacity
    int64_t cap


cdef int pojo_check(PWalk* w, int64_t node, Cursor* c) noexcept nogil:
    """Validate the POJO value at the cursor (advancing it); ERR_OK or a code with ``w.err`` set.
    Locals for the tables of ``w``, as in ``pojo_emit``: stores to ``state`` (bytes) alias anything."""
    cdef const int64_t* p = w.p
    cdef uint8_t* state = w.state
    cdef int64_t* start = w.start
    cdef int64_t* stop = w.stop
    cdef const uint8_t* base = c.base
    cdef int64_t pos = c.pos, end = c.end
    cdef uint8_t flags, flag
    cdef int64_t child = node + 1, k, r, kind
    cdef int code = ERR_OK
    if pos >= end:
        w.err = node
        return ERR_TRUNCATED
    flags = base[pos]
    c.pos = pos + 1
    state[node] = NUL if flags == 1 else 0
    if flags == 1:
        return ERR_OK
    if flags != 2:
        w.err = node
        return ERR_BAD_FLAG
    for k in range(PP(p, node, COL_N_OLD)):
        pos = c.pos
        if pos >= end:
            w.err = child
            return ERR_TRUNCATED
        flag = base[pos]
        c.pos = pos + 1
        if flag > 1:
            w.err = child
            return ERR_BAD_FLAG
        state[child] = NUL if flag else 0
        start[child] = pos + 1
        if flag == 0:
            kind = PP(p, child, COL_KIND)
            if kind == COMPOSITE_POJO:
                code = pojo_check(w, child, c)
            elif kind == COMPOSITE_ROW:
                r = row_walk(p, child, c, NULL, 0, &w.err)
                code = ERR_OK if r >= 0 else <int>(-r)
                stop[child] = c.pos
            else:
                code = check_leaf(c, kind, PP(p, child, COL_WIDTH), &state[child])
                if code != ERR_OK:
                    w.err = child
                stop[child] = c.pos
            if code != ERR_OK:
                return code
        child = PP(p, child, COL_END)
    return ERR_OK


cdef int64_t pojo_emit(const PWalk* w, int64_t node, int64_t op) noexcept nogil:
    """Write the checked POJO ``node`` in the new layout at ``w.o + op``; returns the new ``op``, or
    -1 when the window is short. Why the local copies: every store through the output (a byte
    pointer, which may alias anything) would make the compiler reload them from ``w``."""
    cdef const int64_t* p = w.p
    cdef const uint8_t* d = w.d
    cdef const uint8_t* state = w.state
    cdef const int64_t* start = w.start
    cdef const int64_t* stop = w.stop
    cdef uint8_t* o = w.o
    cdef int64_t cap = w.cap
    cdef int64_t row = PP(p, node, COL_EMIT_AT), k, src, cst, j, size, kind, err
    cdef Cursor c
    if op >= cap:
        return -1
    if state[node] == NUL:
        o[op] = 1
        return op + 1
    o[op] = 2
    op += 1
    for k in range(PP(p, node, COL_N_NEW)):
        src = PP(p, row, COL_SRC)
        row += 1
        if src < 0:
            cst = PP(p, row - 1, COL_CONST)
            size = PP(p, row - 1, COL_CONST_LEN)
            if op + size > cap:
                return -1
            for j in range(size):
                o[op + j] = <uint8_t>p[(cst + j // (PROGRAM_COLUMNS - 1)) * PROGRAM_COLUMNS + 1 + j % (PROGRAM_COLUMNS - 1)]
            op += size
            continue
        if op >= cap:
            return -1
        if state[src] == NUL:
            o[op] = 1
            op += 1
            continue
        o[op] = 0
        op += 1
        kind = PP(p, src, COL_KIND)
        if kind == COMPOSITE_POJO:
            op = pojo_emit(w, src, op)
            if op < 0:
                return -1
            continue
        if kind == COMPOSITE_ROW:
            c.base = d
            c.pos = start[src]
            c.end = stop[src]
            size = row_walk(p, src, &c, NULL, 0, &err)
        elif state[src] == REWRITE:  # a string with overlong varints; any other canonical value is as long
            size = put_canonical(kind, d, start[src], stop[src], True, NULL)
        else:
            size = stop[src] - start[src]
        if op + size > cap:
            return -1
        if kind == COMPOSITE_ROW:
            c.pos = start[src]
            row_walk(p, src, &c, o, op, &err)
        else:
            put_canonical(kind, d, start[src], stop[src], state[src] == REWRITE, o + op)
        op += size
    return op


def pojo_migrate_run(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                     out_off, uint8_t[::1] out_data, int64_t pos):
    """One-pass POJO migrate with the contract of ``rowdata.migrate_run``: validate and write each
    entry packed from ``out_data[pos]``, its end into ``out_off[i + 1]`` (int32 or int64 Arrow
    offsets). Returns ``(next_row, pos, status)``: ``status < 0``: entry ``next_row`` is bad (it takes
    no bytes; resume at ``next_row + 1``); else ``next_row < stop``: it did not fit (grow, call again)."""
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef const int64_t[:, ::1] pm = prog
    cdef uint8_t* offs
    cdef bint wide_out
    cdef int64_t i = start, status = 0, nnodes = pm.shape[0], r
    cdef int64_t cap = out_data.shape[0]
    cdef int64_t[::1] starts = np.zeros(max(nnodes, 1), dtype=np.int64)
    cdef int64_t[::1] stops = np.zeros(max(nnodes, 1), dtype=np.int64)
    cdef uint8_t[::1] states = np.zeros(max(nnodes, 1), dtype=np.uint8)
    cdef PWalk w
    cdef Cursor c
    cdef int code
    if pm.shape[1] != PROGRAM_COLUMNS or nnodes == 0 or pm[0, COL_KIND] != COMPOSITE_POJO:
        raise ValueError("bad POJO program")
    offs = out_offsets(keep, out_off, cap, start, stop, pos, "pojo_migrate_run", &wide_out)
    w.p = &pm[0, 0]
    w.d = v.data
    w.start = &starts[0]
    w.stop = &stops[0]
    w.state = &states[0]
    w.o = &out_data[0] if cap else NULL
    w.cap = cap
    with nogil:
        while i < stop:
            if bv_valid(&v, i):
                w.err = -1
                code = bv_entry(&v, i, &c)
                if code == ERR_OK:
                    code = pojo_check(&w, 0, &c)
                    if code == ERR_OK and c.pos != c.end:
                        w.err = -1
                        code = ERR_TRAILING
                if code == ERR_OK:
                    r = pojo_emit(&w, 0, pos)
                    if r < 0:
                        break
                    pos = r
                else:
                    status = encode_err(code, w.err)
            put_off(offs, wide_out, i + 1, pos)
            if status:
                break
            i += 1
    return i, pos, status
