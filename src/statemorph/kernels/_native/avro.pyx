# cython: language_level=3
"""Avro (``AvroSerializer``) migration, byte to byte: one pass over each entry that validates the
writer's value and writes the reader's, driven by a program compiled once per schema pair.

Program, ops and the reasons behind them: ``statemorph.kernels.avro_py`` (which also holds
the Python twin, ``avro_migrate_run`` with the same arguments and the same effect). The walk is
recursive over the program (its depth is the schema's, which is not recursive); every read goes
through the bounds-checked Cursor; block counts are checked against the bytes left (or, for
zero-width items, a per-entry budget) before any loop, so hostile counts neither allocate nor spin.
Output goes through ``Writer``: a value that does not fit only advances ``pos`` past ``cap``, and the
entry is retried by the caller with a bigger buffer. The GIL is released for the whole range.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, qsort, realloc
from libc.string cimport memcmp, memcpy, memmove

from cursor cimport *
from stringvalue cimport put_varlen, utf8_next, varlen_size

import numpy as np

__statemorph_native__ = True

# program columns (COL_*), ops (AVRO_OP_*), emit modes (EMIT_*): generated from statemorph.kernels.abi
include "abi_avro.pxi"

cdef int64_t SATURATED = (<int64_t>1) << 62


ctypedef struct KeySpan:
    const uint8_t* p
    int64_t n

ctypedef struct AvWalk:
    const int64_t* p       # the program, row-major
    const int64_t* tail    # its tables
    const uint8_t* consts  # its constant bytes
    int64_t* scratch       # writer field starts of reordered records
    Writer w
    int64_t budget         # zero-width items left for this entry
    int64_t err            # the node of the error
    KeySpan* keys          # the keys of the maps being written (a stack), for the duplicate check
    int64_t nkeys
    int64_t kcap


cdef inline int fail(AvWalk* s, int code, int64_t node) noexcept nogil:
    s.err = node
    return code


cdef inline void put_span(Writer* w, const uint8_t* src, int64_t n) noexcept nogil:
    """``w_bytes`` for the short spans an Avro value is made of (ints, longs, short strings): up to
    16 bytes as two overlapping loads and stores, no library call (measured: the calls were a fifth
    of the walk)."""
    cdef uint64_t a, b
    cdef uint32_t x, y
    cdef uint8_t* dst
    if n > 16 or w.pos + n > w.cap:
        w_bytes(w, src, n)
        return
    dst = w.base + w.pos
    if n >= 8:
        memcpy(&a, src, 8)
        memcpy(&b, src + n - 8, 8)
        memcpy(dst, &a, 8)
        memcpy(dst + n - 8, &b, 8)
    elif n >= 4:
        memcpy(&x, src, 4)
        memcpy(&y, src + n - 4, 4)
        memcpy(dst, &x, 4)
        memcpy(dst + n - 4, &y, 4)
    else:
        for k in range(n):
            dst[k] = src[k]
    w.pos += n


cdef inline void put_be32(Writer* w, uint32_t v) noexcept nogil:
    cdef uint8_t b[4]
    store_u32_be(b, v)
    put_span(w, b, 4)


cdef inline void put_be64(Writer* w, uint64_t v) noexcept nogil:
    cdef uint8_t b[8]
    store_u64_be(b, v)
    put_span(w, b, 8)


cdef inline void put_number(Writer* w, int64_t emit, bint is_int, int64_t iv, double dv) noexcept nogil:
    """A number as the reader type holds it: a long keeps its value, a float / double gets Java's (float)
    / (double) cast of it (an int or long goes through the nearest double first, as the reference
    does), NaNs canonical."""
    cdef float f
    cdef double d
    cdef uint32_t u32
    cdef uint64_t u64
    if emit == EMIT_I64:
        put_be64(w, <uint64_t>iv)
    elif emit == EMIT_F32:
        d = <double>iv if is_int else dv
        f = <float>d
        memcpy(&u32, &f, 4)
        put_be32(w, java_f32_bits(u32))
    else:
        d = <double>iv if is_int else dv
        memcpy(&u64, &d, 8)
        put_be64(w, java_f64_bits(u64))


cdef inline int read_i32(AvWalk* s, Cursor* c, int64_t node, int32_t* v) noexcept nogil:
    if not cur_has(c, 4):
        return fail(s, ERR_TRUNCATED, node)
    v[0] = <int32_t>load_u32_be(c.base + c.pos)
    c.pos += 4
    return ERR_OK


cdef inline int read_blob(AvWalk* s, Cursor* c, int64_t node, int32_t* n) noexcept nogil:
    """A string / bytes / map key: i32 BE length (not negative), then that many bytes, which the
    cursor is left in front of."""
    cdef int code = read_i32(s, c, node, n)
    if code != ERR_OK:
        return code
    if n[0] < 0:
        return fail(s, ERR_BAD_LENGTH, node)
    if not cur_has(c, n[0]):
        return fail(s, ERR_TRUNCATED, node)
    return ERR_OK


cdef inline int read_count(AvWalk* s, Cursor* c, int64_t node, int64_t* count) noexcept nogil:
    """``DataInputDecoder.readVarLongCount``: an unsigned 7-bit LE varint of at most 10 bytes,
    saturated (a count that large fails the size checks anyway)."""
    cdef uint64_t v = 0
    cdef int k
    cdef uint8_t b
    for k in range(10):
        if c.pos >= c.end:
            return fail(s, ERR_TRUNCATED, node)
        b = c.base[c.pos]
        c.pos += 1
        if k < 9:
            v |= (<uint64_t>(b & 0x7F)) << (7 * k)
        elif b & 0x7F:
            v = <uint64_t>SATURATED
        if not (b & 0x80):
            count[0] = <int64_t>v if v < <uint64_t>SATURATED else SATURATED
            return ERR_OK
    return fail(s, ERR_BAD_LENGTH, node)


cdef inline bint utf8_ok(const uint8_t* b, int64_t a, int64_t e) noexcept nogil:
    cdef uint32_t cp
    cdef uint64_t word
    while a + 8 <= e:  # ASCII, eight bytes at a time, then byte by byte
        memcpy(&word, b + a, 8)
        if word & 0x8080808080808080ull:
            break
        a += 8
    while a < e and b[a] < 0x80:
        a += 1
    while a < e:
        if utf8_next(b, &a, e, &cp) != ERR_OK:
            return False
    return True


cdef int span_cmp(const void* x, const void* y) noexcept nogil:
    cdef const KeySpan* a = <const KeySpan*>x
    cdef const KeySpan* b = <const KeySpan*>y
    if a.n != b.n:
        return -1 if a.n < b.n else 1
    return memcmp(a.p, b.p, a.n)


cdef int push_key(AvWalk* s, const uint8_t* p, int64_t n) noexcept nogil:
    cdef KeySpan* grown
    cdef int64_t cap
    if s.nkeys == s.kcap:
        cap = 2 * s.kcap + 64
        grown = <KeySpan*>realloc(s.keys, cap * sizeof(KeySpan))
        if grown == NULL:
            return HAND_BACK  # no memory for the check: the per-value path decides
        s.keys = grown
        s.kcap = cap
    s.keys[s.nkeys].p = p
    s.keys[s.nkeys].n = n
    s.nkeys += 1
    return ERR_OK


cdef int av_sequence(AvWalk* s, int64_t node, Cursor* c, bint emit) noexcept nogil:
    """An array or map: blocks in, one block out (the reference re-emits ``VARLEN(total)`` ‖
    items ‖ ``00``, or ``00``); kept map keys are checked for duplicates (the reference's dict
    would merge them: the per-value path writes that)."""
    cdef const int64_t* row = s.p + node * PROGRAM_COLUMNS
    cdef bint is_map = row[COL_OP] == AVRO_OP_MAP
    cdef int64_t unit = row[COL_B], child = row[COL_A]
    cdef int64_t count, k, total = 0, start = s.w.pos, key_base = s.nkeys, width
    cdef int32_t n
    cdef int code
    while True:
        code = read_count(s, c, node, &count)
        if code != ERR_OK:
            return code
        if count == 0:
            break
        if unit:
            if count > (c.end - c.pos) / unit:
                return fail(s, ERR_TRUNCATED, node)
        elif count > s.budget:
            return fail(s, ERR_TOO_LARGE, node)
        else:
            s.budget -= count
        for k in range(count):
            if is_map:
                code = read_blob(s, c, node, &n)
                if code != ERR_OK:
                    return code
                if not utf8_ok(c.base, c.pos, c.pos + n):
                    return fail(s, ERR_BAD_UTF8, node)
                if emit:
                    if push_key(s, c.base + c.pos, n) != ERR_OK:
                        return fail(s, HAND_BACK, node)
                    put_span(&s.w, c.base + c.pos - 4, 4 + n)
                c.pos += n
            code = av_value(s, child, c, emit)
            if code != ERR_OK:
                return code
        total += count
    if not emit:
        return ERR_OK
    if is_map:
        if total > 1:
            qsort(s.keys + key_base, total, sizeof(KeySpan), span_cmp)
            for k in range(key_base + 1, key_base + total):
                if span_cmp(&s.keys[k - 1], &s.keys[k]) == 0:
                    return fail(s, HAND_BACK, node)
        s.nkeys = key_base
    if total > <int64_t>0xFFFFFFFF:  # only an entry of more than 4 GiB holds that many items
        return fail(s, ERR_TOO_LARGE, node)
    if total:
        width = varlen_size(<uint32_t>total)
        if s.w.pos + width <= s.w.cap:  # the items move up to make room for their count
            memmove(s.w.base + start + width, s.w.base + start, s.w.pos - start)
            put_varlen(s.w.base, start, <uint32_t>total)
        s.w.pos += width
    w_byte(&s.w, 0)
    return ERR_OK


cdef int av_record(AvWalk* s, int64_t node, Cursor* c, bint emit) noexcept nogil:
    """A record: writer fields in writer order; reader fields (kept ones, defaults) in reader order,
    in one pass when they keep the writer's order, else after a first pass that records where each
    writer field starts."""
    cdef const int64_t* row = s.p + node * PROGRAM_COLUMNS
    cdef const int64_t* fields = s.tail + row[COL_B]
    cdef const int64_t* entries = s.tail + row[COL_D]
    cdef int64_t nw = row[COL_A], nr = row[COL_C], base = row[COL_E]
    cdef int64_t j, k, done = 0, end, budget
    cdef const int64_t* op
    cdef int code
    if base < 0:
        for k in range(nr):
            j = entries[4 * k]
            if j < 0:
                if emit:
                    put_span(&s.w, s.consts + entries[4 * k + 2], entries[4 * k + 3])
                continue
            while done < j:
                code = av_value(s, fields[done], c, False)
                if code != ERR_OK:
                    return code
                done += 1
            code = av_value(s, entries[4 * k + 1], c, emit)
            if code != ERR_OK:
                return code
            done = j + 1
        while done < nw:
            code = av_value(s, fields[done], c, False)
            if code != ERR_OK:
                return code
            done += 1
        return ERR_OK
    for j in range(nw):
        s.scratch[base + j] = c.pos
        code = av_value(s, fields[j], c, False)
        if code != ERR_OK:
            return code
    s.scratch[base + nw] = c.pos
    if not emit:
        return ERR_OK
    end = c.pos
    budget = s.budget
    s.budget = SATURATED  # the values were checked (and their zero-width items counted) above
    for k in range(nr):
        j = entries[4 * k]
        if j < 0:
            put_span(&s.w, s.consts + entries[4 * k + 2], entries[4 * k + 3])
            continue
        op = s.p + entries[4 * k + 1] * PROGRAM_COLUMNS
        if op[COL_EMIT] == EMIT_VALUE and op[COL_UNION] < 0:  # bytes that stay: copied as checked above
            put_span(&s.w, c.base + s.scratch[base + j], s.scratch[base + j + 1] - s.scratch[base + j])
            continue
        c.pos = s.scratch[base + j]
        code = av_value(s, entries[4 * k + 1], c, True)
        if code != ERR_OK:
            return code
    s.budget = budget
    c.pos = end
    return ERR_OK


cdef int av_value(AvWalk* s, int64_t node, Cursor* c, bint emit) noexcept nogil:
    """Read the writer value of ``node`` at the cursor (advancing it), writing the reader value
    when ``emit`` and the node emits; ERR_OK or an error code with ``s.err`` set."""
    cdef const int64_t* row = s.p + node * PROGRAM_COLUMNS
    cdef int64_t op = row[COL_OP], v64
    cdef int32_t v32
    cdef uint32_t u32
    cdef uint64_t u64
    cdef float f
    cdef double d
    cdef int code
    if row[COL_EMIT] == EMIT_SKIP:
        emit = False
    if emit and row[COL_UNION] >= 0:
        put_be32(&s.w, <uint32_t>row[COL_UNION])
    if op == AVRO_OP_NULL:
        return ERR_OK
    if op == AVRO_OP_BOOL:
        if not cur_has(c, 1):
            return fail(s, ERR_TRUNCATED, node)
        if emit:
            w_byte(&s.w, 1 if c.base[c.pos] else 0)
        c.pos += 1
        return ERR_OK
    if op == AVRO_OP_INT or op == AVRO_OP_LONG:
        if op == AVRO_OP_INT:
            code = read_i32(s, c, node, &v32)
            if code != ERR_OK:
                return code
            v64 = v32
        else:
            if not cur_has(c, 8):
                return fail(s, ERR_TRUNCATED, node)
            v64 = <int64_t>load_u64_be(c.base + c.pos)
            c.pos += 8
        if v64 < row[COL_A] or v64 > row[COL_B]:
            return fail(s, ERR_AVRO_RANGE, node)
        if emit:
            if row[COL_EMIT] == EMIT_VALUE:
                put_span(&s.w, c.base + c.pos - (4 if op == AVRO_OP_INT else 8), 4 if op == AVRO_OP_INT else 8)
            else:
                put_number(&s.w, row[COL_EMIT], True, v64, 0.0)
        return ERR_OK
    if op == AVRO_OP_FLOAT or op == AVRO_OP_DOUBLE:
        v64 = 4 if op == AVRO_OP_FLOAT else 8
        if not cur_has(c, v64):
            return fail(s, ERR_TRUNCATED, node)
        if emit:
            if op == AVRO_OP_FLOAT:
                u32 = load_u32_be(c.base + c.pos)
                memcpy(&f, &u32, 4)
                d = f
            else:
                u64 = load_u64_be(c.base + c.pos)
                memcpy(&d, &u64, 8)
            put_number(&s.w, row[COL_EMIT], False, 0, d)
        c.pos += v64
        return ERR_OK
    if op == AVRO_OP_BLOB:
        code = read_blob(s, c, node, &v32)
        if code != ERR_OK:
            return code
        if (row[COL_A] or (emit and row[COL_EMIT] == EMIT_UTF8)) and not utf8_ok(c.base, c.pos, c.pos + v32):
            return fail(s, ERR_BAD_UTF8 if row[COL_A] else HAND_BACK, node)
        if emit:
            put_span(&s.w, c.base + c.pos - 4, 4 + v32)
        c.pos += v32
        return ERR_OK
    if op == AVRO_OP_FIXED:
        if not cur_has(c, row[COL_A]):
            return fail(s, ERR_TRUNCATED, node)
        if emit:
            put_span(&s.w, c.base + c.pos, row[COL_A])
        c.pos += row[COL_A]
        return ERR_OK
    if op == AVRO_OP_ENUM or op == AVRO_OP_UNION:
        code = read_i32(s, c, node, &v32)
        if code != ERR_OK:
            return code
        if v32 < 0 or v32 >= row[COL_A]:
            return fail(s, ERR_AVRO_INDEX, node)
        if op == AVRO_OP_UNION:
            return av_value(s, s.tail[row[COL_B] + v32], c, emit)
        if emit:
            put_be32(&s.w, <uint32_t>(v32 if row[COL_EMIT] == EMIT_VALUE else s.tail[row[COL_B] + v32]))
        return ERR_OK
    if op == AVRO_OP_ARRAY or op == AVRO_OP_MAP:
        return av_sequence(s, node, c, emit)
    return av_record(s, node, c, emit)


def avro_migrate_run(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                     out_off, uint8_t[::1] out_data, int64_t pos):
    """One-pass Avro migrate with the contract of ``rowdata.migrate_run``: validate and write each
    entry packed from ``out_data[pos]``, its end into ``out_off[i + 1]`` (int32 or int64 Arrow
    offsets). Returns ``(next_row, pos, status)``: ``status < 0``: entry ``next_row`` is bad or needs
    the per-value path (it takes no bytes; resume at ``next_row + 1``); else ``next_row < stop``: it
    did not fit (grow, call again)."""
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef const int64_t[:, ::1] pm = prog
    cdef int64_t i = start, status = 0, cap = out_data.shape[0], root
    cdef uint8_t* offs
    cdef bint wide_out
    cdef int64_t[::1] scratch
    cdef AvWalk s
    cdef Cursor c
    cdef int code
    if pm.shape[1] != PROGRAM_COLUMNS or pm.shape[0] == 0 or pm[0, COL_OP] != AVRO_OP_HEAD or not 1 < pm[0, COL_A] <= pm.shape[0]:
        raise ValueError("bad Avro program")
    offs = out_offsets(keep, out_off, cap, start, stop, pos, "avro_migrate_run", &wide_out)
    scratch = np.zeros(max(pm[0, COL_C], 1), dtype=np.int64)
    root = pm[0, COL_B]
    s.p = &pm[0, 0]
    s.tail = s.p + pm[0, COL_A] * PROGRAM_COLUMNS
    s.consts = <const uint8_t*>(s.tail + pm[0, COL_E])
    s.scratch = &scratch[0]
    s.w.base = &out_data[0] if cap else NULL
    s.w.cap = cap
    s.keys = NULL
    s.nkeys = 0
    s.kcap = 0
    with nogil:
        while i < stop:
            if bv_valid(&v, i):
                s.err = -1
                s.budget = pm[0, COL_EMIT]
                s.nkeys = 0
                s.w.pos = pos
                code = bv_entry(&v, i, &c)
                if code == ERR_OK:
                    code = av_value(&s, root, &c, True)
                    if code == ERR_OK and c.pos != c.end:
                        s.err = -1
                        code = ERR_TRAILING
                if code == ERR_OK:
                    if s.w.pos > cap:
                        break
                    pos = s.w.pos
                else:
                    status = encode_err(code, s.err)
            put_off(offs, wide_out, i + 1, pos)
            if status:
                break
            i += 1
        free(s.keys)
    return i, pos, status
