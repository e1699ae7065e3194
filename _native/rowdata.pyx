# cython: language_level=3
"""BinaryRowData kernels: Arrow struct columns → RowData entries (encode), RowData entries →
Arrow columns (decode), and old-schema RowData → new-schema RowData byte to byte (migrate).

Every kernel executes a *program* compiled once in Python (``statemorph.serializers._batch``,
``compile_row_program`` / ``compile_migration_program``): an int64 matrix, one row per node of the
row type in pre-order, columns below. Node 0 is the top-level row. Children of a ROW node are
``node + 1`` then ``END`` of each child in turn. ``SRC`` is the field index in the *old* row (the
same as ``POS`` for encode / decode; -1 for a field added by a migration).

Entries are ``i32 BE sizeInBytes ‖ BinaryRowData`` (what ``RowDataSerializer`` writes). Every
kernel is two passes over rows ``start..stop``: ``*_sizes`` validates and writes the output size
(or an encoded error) to ``out_off[i + 1]`` / ``status[i]``; ``*_fill`` writes at the prefix sums.
Loops run without the GIL; errors leave as (code, row, node) numbers.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from smbytes cimport *

__statemorph_native__ = True

# program columns
cdef enum:
    C_KIND = 0
    C_POS = 1
    C_END = 2
    C_ARITY = 3
    C_SRC = 4
    C_OLD_ARITY = 5
    C_FLAGS = 6
    C_LIMIT = 7   # compact DECIMAL(p, s): 10**p
    NCOL = 8

# node kinds (same numbers in _batch.py)
cdef enum:
    R_BOOL = 1
    R_I8 = 2
    R_I16 = 3
    R_I32 = 4
    R_I64 = 5
    R_F32 = 6
    R_F64 = 7
    R_STR = 8
    R_BIN = 9
    R_ROW = 10
    R_BLOB = 11
    R_DEC_BIG = 12
    R_TS_BIG = 13
    R_DEC_COMPACT = 14
    R_ARRAY = 15
    R_MAP = 16

cdef enum:
    F_NOT_NULL = 1
    F_VERBATIM = 2

cdef inline int64_t null_bits_size(int64_t arity) noexcept nogil:
    return ((arity + 63 + 8) // 64) * 8

cdef inline int64_t arrow_width(int64_t kind) noexcept nogil:
    if kind == R_I8:
        return 1
    if kind == R_I16:
        return 2
    if kind == R_I32 or kind == R_F32:
        return 4
    if kind == R_DEC_COMPACT:
        return 16
    return 8


ctypedef struct Ctx:
    const int64_t* prog
    int64_t err_node
    int64_t row
    const uint8_t* d
    # decode outputs, per node (NULL where unused)
    int64_t** str_off
    uint8_t** valid
    uint8_t** vals
    uint8_t** sdata
    # encode inputs, per node
    const uint8_t** in_valid
    const uint8_t** in_vals
    const uint8_t** in_offs
    int64_t* in_off
    int64_t* in_vals_len
    bint* in_wide

cdef inline int64_t P(const Ctx* x, int64_t node, int col) noexcept nogil:
    return x.prog[node * NCOL + col]


cdef bint utf8_valid(const uint8_t* s, int64_t n) noexcept nogil:
    """Strict UTF-8 (what Python's ``bytes.decode('utf-8')`` accepts)."""
    cdef int64_t p = 0
    cdef uint32_t b0, c
    cdef uint64_t w
    cdef int k, m
    # ASCII fast path, a word at a time (most state strings are ASCII)
    while p + 8 <= n:
        w = load_u64_le(s + p)
        if w & 0x8080808080808080ull:
            break
        p += 8
    while p < n:
        b0 = s[p]
        if b0 < 0x80:
            p += 1
            continue
        if 0xC2 <= b0 <= 0xDF:
            m = 1
            c = b0 & 0x1F
        elif 0xE0 <= b0 <= 0xEF:
            m = 2
            c = b0 & 0x0F
        elif 0xF0 <= b0 <= 0xF4:
            m = 3
            c = b0 & 0x07
        else:
            return False
        if n - p - 1 < m:
            return False
        for k in range(1, m + 1):
            if (s[p + k] & 0xC0) != 0x80:
                return False
            c = (c << 6) | (s[p + k] & 0x3F)
        if (m == 2 and (c < 0x800 or (0xD800 <= c < 0xE000))) or (m == 3 and (c < 0x10000 or c > 0x10FFFF)):
            return False
        p += m + 1
    return True


cdef inline bint null_bit(const uint8_t* d, int64_t base, int64_t i) noexcept nogil:
    cdef int64_t b = i + 8
    return (d[base + (b >> 3)] >> (b & 7)) & 1


cdef inline int64_t elem_size(int64_t kind) noexcept nogil:
    """BinaryArrayData element slot width (``calculateFixLengthPartSize``)."""
    if kind == R_BOOL or kind == R_I8:
        return 1
    if kind == R_I16:
        return 2
    if kind == R_I32 or kind == R_F32:
        return 4
    return 8

cdef inline int64_t array_header(int64_t n) noexcept nogil:
    return 4 + ((n + 31) // 32) * 4


cdef int64_t check_array(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate the BinaryArrayData at d[base:base+size] (element program: ``node + 1``); return
    its migrated size (``size`` itself when the node is verbatim) or -code."""
    cdef const uint8_t* d = x.d
    cdef int64_t e = node + 1
    cdef int64_t k = P(x, e, C_KIND)
    cdef int64_t es = elem_size(k)
    cdef int64_t n, header, lo, i, slot, off, ln, r, new_size
    cdef uint64_t raw
    cdef uint8_t mark
    cdef bint verbatim = P(x, node, C_FLAGS) & F_VERBATIM
    if size < 4:
        x.err_node = node
        return -E_TRUNCATED
    n = <int32_t>load_u32_le(d + base)
    if n < 0:
        x.err_node = node
        return -E_BAD_LENGTH
    header = array_header(n)
    if header + n * es > size:
        x.err_node = node
        return -E_TRUNCATED
    lo = round_up8(header + n * es)
    if lo > size:
        lo = size
    new_size = round_up8(header + 8 * n)
    if k < R_STR or k == R_DEC_COMPACT:
        return size
    for i in range(n):
        if (d[base + 4 + (i >> 3)] >> (i & 7)) & 1:
            continue
        slot = base + header + i * es
        raw = load_u64_le(d + slot)
        mark = d[slot + 7]
        if mark & 0x80:
            if k != R_STR and k != R_BIN:
                x.err_node = e
                return -E_BAD_INLINE
            ln = mark & 0x7F
            if ln > 7:
                x.err_node = e
                return -E_BAD_INLINE
            if k == R_STR and not utf8_valid(d + slot, ln):
                x.err_node = e
                return -E_BAD_UTF8
            continue
        off = <int64_t>(raw >> 32)
        ln = <int64_t>(raw & 0xFFFFFFFFu)
        if k == R_TS_BIG:
            if ln > 999999:
                x.err_node = e
                return -E_BAD_NANOS
            ln = 8
        elif k == R_DEC_BIG and (ln < 1 or ln > 16):
            x.err_node = e
            return -E_BAD_LENGTH
        if off < lo or off + ln > size:
            x.err_node = e
            return -E_BAD_OFFSET
        if k == R_STR and not utf8_valid(d + base + off, ln):
            x.err_node = e
            return -E_BAD_UTF8
        r = 0
        if k == R_ROW:
            r = check_row(x, e, base + off, ln)
        elif k == R_ARRAY:
            r = check_array(x, e, base + off, ln)
        elif k == R_MAP:
            r = check_map(x, e, base + off, ln)
        if r < 0:
            return r
        new_size += round_up8(r)
    return size if verbatim else new_size


cdef int64_t check_map(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate a BinaryMapData: i32 LE key-array bytes ‖ key array ‖ value array."""
    cdef const uint8_t* d = x.d
    cdef int64_t kn = node + 1
    cdef int64_t vn = P(x, kn, C_END)
    cdef int64_t kb, rk, rv
    if size < 4:
        x.err_node = node
        return -E_TRUNCATED
    kb = <int32_t>load_u32_le(d + base)
    if kb < 0 or kb > size - 4:
        x.err_node = node
        return -E_BAD_LENGTH
    rk = check_array(x, kn, base + 4, kb)
    if rk < 0:
        return rk
    rv = check_array(x, vn, base + 4 + kb, size - 4 - kb)
    if rv < 0:
        return rv
    if <int32_t>load_u32_le(d + base + 4) != <int32_t>load_u32_le(d + base + 4 + kb):
        x.err_node = node
        return -E_BAD_LENGTH
    if P(x, node, C_FLAGS) & F_VERBATIM:
        return size
    return 4 + rk + rv


cdef int64_t migrate_array(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o,
                           int64_t op) noexcept nogil:
    """Write the migrated copy of a validated array whose elements are rows / arrays / maps."""
    cdef const uint8_t* d = x.d
    cdef int64_t e = node + 1
    cdef int64_t k = P(x, e, C_KIND)
    cdef int64_t n, header, cur, i, off, ln, r, pad
    cdef uint64_t raw
    if P(x, node, C_FLAGS) & F_VERBATIM:
        memcpy(o + op, d + base, size)
        return size
    n = <int32_t>load_u32_le(d + base)
    header = array_header(n)
    cur = round_up8(header + 8 * n)
    memset(o + op, 0, cur)
    memcpy(o + op, d + base, header)
    for i in range(n):
        if (d[base + 4 + (i >> 3)] >> (i & 7)) & 1:
            continue
        raw = load_u64_le(d + base + header + 8 * i)
        off = <int64_t>(raw >> 32)
        ln = <int64_t>(raw & 0xFFFFFFFFu)
        if k == R_ROW:
            r = migrate_row(x, e, base + off, ln, o, op + cur)
        elif k == R_ARRAY:
            r = migrate_array(x, e, base + off, ln, o, op + cur)
        else:
            r = migrate_map(x, e, base + off, ln, o, op + cur)
        store_u64_le(o + op + header + 8 * i, ((<uint64_t>cur) << 32) | <uint64_t>r)
        pad = round_up8(r) - r
        memset(o + op + cur + r, 0, pad)
        cur += r + pad
    return cur


cdef int64_t migrate_map(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o,
                         int64_t op) noexcept nogil:
    cdef const uint8_t* d = x.d
    cdef int64_t kn = node + 1
    cdef int64_t vn = P(x, kn, C_END)
    cdef int64_t kb = <int32_t>load_u32_le(d + base)
    cdef int64_t rk, rv
    if P(x, node, C_FLAGS) & F_VERBATIM:
        memcpy(o + op, d + base, size)
        return size
    rk = migrate_array(x, kn, base + 4, kb, o, op + 4)
    rv = migrate_array(x, vn, base + 4 + kb, size - 4 - kb, o, op + 4 + rk)
    store_u32_le(o + op, <uint32_t>rk)
    return 4 + rk + rv


cdef inline int64_t check_row_header(Ctx* x, int64_t node, int64_t base, int64_t size,
                                     int64_t old_arity) noexcept nogil:
    """The checks every old row gets before its fields: room for the fixed part, a RowKind header
    byte, and null bits beyond the arity (inside the bitset words) all zero, a word at a time.
    Returns 0, or -code with ``x.err_node`` set."""
    cdef const uint8_t* d = x.d
    cdef int64_t ow = null_bits_size(old_arity)
    cdef int64_t b, off
    cdef uint64_t raw
    if size < ow + 8 * old_arity:
        x.err_node = node
        return -E_TRUNCATED
    if d[base] > 3:
        x.err_node = node
        return -E_BAD_HEADER
    for b in range(ow // 8):
        raw = load_u64_le(d + base + 8 * b)
        off = old_arity + 8 - 64 * b
        if off <= 0:
            if raw != 0:
                x.err_node = node
                return -E_BAD_HEADER
        elif off < 64 and (raw >> off) != 0:
            x.err_node = node
            return -E_BAD_HEADER
    return 0


cdef int64_t check_row(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate the old row at d[base:base+size] for this node's (sub)program and return the size of
    the new row a migration writes (decode ignores it); a negative value is -code, with
    ``x.err_node`` set. In decode mode, string/binary lengths go to ``x.str_off``."""
    cdef const uint8_t* d = x.d
    cdef int64_t arity = P(x, node, C_ARITY)
    cdef int64_t old_arity = P(x, node, C_OLD_ARITY)
    cdef int64_t ow = null_bits_size(old_arity)
    cdef int64_t ofixed = ow + 8 * old_arity
    cdef int64_t new_size = null_bits_size(arity) + 8 * arity
    cdef int64_t c, end, src, slot, k, n, r, flags
    cdef uint64_t raw
    cdef int64_t off, b
    cdef uint8_t mark
    r = check_row_header(x, node, base, size, old_arity)
    if r < 0:
        return r
    end = P(x, node, C_END)
    c = node + 1
    while c < end:
        src = P(x, c, C_SRC)
        k = P(x, c, C_KIND)
        flags = P(x, c, C_FLAGS)
        if src < 0 or null_bit(d, base, src):
            c = P(x, c, C_END)
            continue
        slot = base + ow + 8 * src
        if k >= R_STR and k != R_DEC_COMPACT:
            mark = d[slot + 7]
            raw = load_u64_le(d + slot)
            if mark & 0x80:
                if k != R_STR and k != R_BIN:
                    x.err_node = c
                    return -E_BAD_INLINE
                n = mark & 0x7F
                if n > 7:
                    x.err_node = c
                    return -E_BAD_INLINE
                # inline ASCII (the common short string) needs no scan: one masked word test
                if k == R_STR and n and (raw & ((<uint64_t>1 << (8 * n)) - 1) & 0x8080808080808080ull) \
                        and not utf8_valid(d + slot, n):
                    x.err_node = c
                    return -E_BAD_UTF8
                if x.str_off != NULL and x.str_off[c] != NULL:
                    x.str_off[c][x.row + 1] = n
                c = P(x, c, C_END)
                continue
            off = <int64_t>(raw >> 32)
            n = <int64_t>(raw & 0xFFFFFFFFu)
            if k == R_TS_BIG:
                if n > 999999:
                    x.err_node = c
                    return -E_BAD_NANOS
                n = 8
            elif k == R_DEC_BIG and (n < 1 or n > 16):
                x.err_node = c
                return -E_BAD_LENGTH
            if off < ofixed or off + n > size:
                x.err_node = c
                return -E_BAD_OFFSET
            if k == R_STR:
                if not utf8_valid(d + base + off, n):
                    x.err_node = c
                    return -E_BAD_UTF8
            if k == R_STR or k == R_BIN:
                if x.str_off != NULL and x.str_off[c] != NULL:
                    x.str_off[c][x.row + 1] = n
                new_size += round_up8(n)
            elif k == R_ROW or k == R_ARRAY or k == R_MAP:
                if k == R_ROW:
                    r = check_row(x, c, base + off, n)
                elif k == R_ARRAY:
                    r = check_array(x, c, base + off, n)
                else:
                    r = check_map(x, c, base + off, n)
                if r < 0:
                    return r
                new_size += round_up8(n) if (flags & F_VERBATIM) else round_up8(r)
            elif k == R_DEC_BIG:
                new_size += 16
            else:
                new_size += round_up8(n)
        c = P(x, c, C_END)
    return new_size


cdef int64_t migrate_row(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o, int64_t obase) noexcept nogil:
    """Write the new row for a validated old row; returns its size."""
    cdef const uint8_t* d = x.d
    cdef int64_t arity = P(x, node, C_ARITY)
    cdef int64_t ow = null_bits_size(P(x, node, C_OLD_ARITY))
    cdef int64_t nw = null_bits_size(arity)
    cdef int64_t cur = nw + 8 * arity
    cdef int64_t c, end, src, slot, nslot, k, n, r, j, bit, off, flags
    cdef uint64_t raw
    memset(o + obase, 0, cur)
    o[obase] = d[base]
    end = P(x, node, C_END)
    c = node + 1
    while c < end:
        src = P(x, c, C_SRC)
        j = P(x, c, C_POS)
        k = P(x, c, C_KIND)
        flags = P(x, c, C_FLAGS)
        if src < 0 or null_bit(d, base, src):
            bit = j + 8
            o[obase + (bit >> 3)] |= <uint8_t>(1 << (bit & 7))
            c = P(x, c, C_END)
            continue
        slot = base + ow + 8 * src
        nslot = obase + nw + 8 * j
        raw = load_u64_le(d + slot)
        if k < R_STR or k == R_DEC_COMPACT or ((k == R_STR or k == R_BIN) and (raw >> 63)):
            memcpy(o + nslot, d + slot, 8)
        else:
            off = <int64_t>(raw >> 32)
            n = <int64_t>(raw & 0xFFFFFFFFu)
            if (k == R_ROW or k == R_ARRAY or k == R_MAP) and not (flags & F_VERBATIM):
                if k == R_ROW:
                    r = migrate_row(x, c, base + off, n, o, obase + cur)
                elif k == R_ARRAY:
                    r = migrate_array(x, c, base + off, n, o, obase + cur)
                else:
                    r = migrate_map(x, c, base + off, n, o, obase + cur)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>r)
                memset(o + obase + cur + r, 0, round_up8(r) - r)
                cur += round_up8(r)
            elif k == R_DEC_BIG:
                memset(o + obase + cur, 0, 16)
                memcpy(o + obase + cur, d + base + off, n)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += 16
            elif k == R_TS_BIG:
                memcpy(o + obase + cur, d + base + off, 8)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += 8
            else:
                memcpy(o + obase + cur, d + base + off, n)
                r = round_up8(n)
                memset(o + obase + cur + n, 0, r - n)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += r
        c = P(x, c, C_END)
    return cur


# internal status of the one-walk migrate: the output buffer is too small for this entry (not a
# data error; the caller grows the buffer and retries the entry)
cdef enum:
    E_FULL = 1000


cdef inline int64_t var_field(Ctx* x, int64_t c, int64_t k, int64_t flags, uint64_t raw, int64_t base,
                              int64_t size, int64_t ofixed, int64_t slot, uint8_t* o, int64_t obase,
                              int64_t nslot, int64_t cur, int64_t cap) noexcept nogil:
    """Validate and write one non-null variable-length field (slot word ``raw`` of the old row at
    ``base``; new slot at ``o[nslot]``, new var part from ``o[obase + cur]``). Returns the new
    ``cur``, -code (``x.err_node`` set) or -E_FULL. One function for the generic and the fast walk,
    so both check in the same order and report the same first error."""
    cdef const uint8_t* d = x.d
    cdef uint8_t mark = <uint8_t>(raw >> 56)
    cdef int64_t off, n, r, pad
    if mark & 0x80:
        if k != R_STR and k != R_BIN:
            x.err_node = c
            return -E_BAD_INLINE
        n = mark & 0x7F
        if n > 7:
            x.err_node = c
            return -E_BAD_INLINE
        # inline ASCII (the common short string) needs no scan: one masked word test
        if k == R_STR and n and (raw & ((<uint64_t>1 << (8 * n)) - 1) & 0x8080808080808080ull) \
                and not utf8_valid(d + slot, n):
            x.err_node = c
            return -E_BAD_UTF8
        store_u64_le(o + nslot, raw)
        return cur
    off = <int64_t>(raw >> 32)
    n = <int64_t>(raw & 0xFFFFFFFFu)
    if k == R_TS_BIG:
        if n > 999999:
            x.err_node = c
            return -E_BAD_NANOS
        if off < ofixed or off + 8 > size:
            x.err_node = c
            return -E_BAD_OFFSET
        if 8 > cap - obase - cur:
            return -E_FULL
        memcpy(o + obase + cur, d + base + off, 8)
        store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
        return cur + 8
    if k == R_DEC_BIG:
        if n < 1 or n > 16:
            x.err_node = c
            return -E_BAD_LENGTH
        if off < ofixed or off + n > size:
            x.err_node = c
            return -E_BAD_OFFSET
        if 16 > cap - obase - cur:
            return -E_FULL
        memset(o + obase + cur, 0, 16)
        memcpy(o + obase + cur, d + base + off, n)
        store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
        return cur + 16
    if off < ofixed or off + n > size:
        x.err_node = c
        return -E_BAD_OFFSET
    if k == R_STR and not utf8_valid(d + base + off, n):
        x.err_node = c
        return -E_BAD_UTF8
    if k == R_ROW and not (flags & F_VERBATIM):
        r = check_migrate_row(x, c, base + off, n, o, obase + cur, cap)
        if r < 0:
            return r
        n = r
    else:
        if k == R_ROW:
            r = check_row(x, c, base + off, n)
        elif k == R_ARRAY:
            r = check_array(x, c, base + off, n)
        elif k == R_MAP:
            r = check_map(x, c, base + off, n)
        else:
            r = 0
        if r < 0:
            return r
        if (k == R_ARRAY or k == R_MAP) and not (flags & F_VERBATIM):
            if round_up8(r) > cap - obase - cur:
                return -E_FULL
            if k == R_ARRAY:
                n = migrate_array(x, c, base + off, n, o, obase + cur)
            else:
                n = migrate_map(x, c, base + off, n, o, obase + cur)
        else:
            if round_up8(n) > cap - obase - cur:
                return -E_FULL
            memcpy(o + obase + cur, d + base + off, n)
    pad = round_up8(n) - n
    if pad > cap - obase - cur - n:
        return -E_FULL
    memset(o + obase + cur + n, 0, pad)
    store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
    return cur + n + pad


cdef int64_t check_migrate_row(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o, int64_t obase,
                               int64_t cap) noexcept nogil:
    """``check_row`` and ``migrate_row`` in one walk: validate the old row at d[base:base+size] and
    write its new row at ``o[obase:]`` (never past ``cap``). Returns the new size, -code (with
    ``x.err_node``, the same first error ``check_row`` reports: checks run in the same order) or
    -E_FULL. Bytes written for a row that then fails are garbage the caller discards. The general
    walk: rows wider than 56 fields, or reached through migrated arrays / maps (``run_ops`` runs
    everything else)."""
    cdef const uint8_t* d = x.d
    cdef const int64_t* pn = x.prog + node * NCOL
    cdef const int64_t* pc
    cdef int64_t arity = pn[C_ARITY]
    cdef int64_t old_arity = pn[C_OLD_ARITY]
    cdef int64_t ow = null_bits_size(old_arity)
    cdef int64_t ofixed = ow + 8 * old_arity
    cdef int64_t nw = null_bits_size(arity)
    cdef int64_t cur = nw + 8 * arity
    cdef int64_t c, end, src, slot, nslot, k, r, j, bit
    cdef uint64_t raw
    # the first null-bit word (header byte + bits of fields 0..55) of the old and the new row live
    # in registers: setting new null bits in memory one byte RMW at a time right after the memset
    # serialised on store forwarding
    cdef uint64_t old_nb0, new_nb0
    r = check_row_header(x, node, base, size, old_arity)
    if r < 0:
        return r
    if cur > cap - obase:
        return -E_FULL
    memset(o + obase, 0, cur)
    old_nb0 = load_u64_le(d + base)
    new_nb0 = d[base]
    end = pn[C_END]
    c = node + 1
    while c < end:
        pc = x.prog + c * NCOL
        src = pc[C_SRC]
        j = pc[C_POS]
        if src < 0 or (src < 56 and (old_nb0 >> (src + 8)) & 1) or (src >= 56 and null_bit(d, base, src)):
            bit = j + 8
            if bit < 64:
                new_nb0 |= (<uint64_t>1) << bit
            else:
                o[obase + (bit >> 3)] |= <uint8_t>(1 << (bit & 7))
            c = pc[C_END]
            continue
        k = pc[C_KIND]
        slot = base + ow + 8 * src
        nslot = obase + nw + 8 * j
        raw = load_u64_le(d + slot)
        if k < R_STR or k == R_DEC_COMPACT:
            store_u64_le(o + nslot, raw)
        else:
            cur = var_field(x, c, k, pc[C_FLAGS], raw, base, size, ofixed, slot, o, obase, nslot, cur, cap)
            if cur < 0:
                return cur
        c = pc[C_END]
    store_u64_le(o + obase, new_nb0)
    return cur


# ------------------------------------------------------------------------------------------------
# The fast migrate walk: the program lowered once per call into a flat list of ops
# ------------------------------------------------------------------------------------------------
# Why ops: the general walk re-derives every field's layout from the program on every entry and
# recurses per nested row (on the Events workload: 1.5x the instructions of this walk). Lowered ops carry
# precomputed slot offsets and null-bit positions, nested rows become ENTER/EXIT ops over a small
# explicit stack (no call per row), fixed-width fields with consecutive positions copy as one run
# (the null bits mask the slots; a row's first run executes with its ENTER), and every new slot is
# written exactly once (added fields' slots zeroed from a word mask on entry, null ones in place).

cdef enum:
    OP_FIXED = 1   # n fixed-width slots: old soff.. → new doff.., null bits sbit.. → dbit..
    OP_STR = 2     # one STRING / BINARY field (kind in ``kind``)
    OP_ENTER = 3   # a migrated nested row: descend (``n`` = index of its EXIT, for a null row)
    OP_EXIT = 4    # back to the parent row
    OP_VAR = 5     # one other variable-length field: the general ``var_field``
    OP_END = 6

cdef enum:
    MAX_DEPTH = 16   # nested rows deeper than this take the general walk

ctypedef struct Op:
    int32_t code
    int32_t node      # program node (error paths)
    int32_t soff      # old slot offset from the old row's start
    int32_t doff      # new slot offset from the new row's start
    int32_t sbit      # old null bit (in the first word)
    int32_t dbit      # new null bit
    int32_t n         # run length (FIXED); index of the matching EXIT (ENTER)
    int32_t kind      # program kind (STR / VAR)
    int32_t flags
    int32_t rn        # ENTER: the row's first fixed run (FIXED fields), 0 if none
    int32_t rsoff
    int32_t rdoff
    int32_t rsbit
    int32_t rdbit
    int64_t ofixed    # ENTER: the nested row's old fixed part (8 + 8 * old arity)
    int64_t nfixed    # ENTER: its new fixed part
    uint64_t forbid   # ENTER: first-word bits that must be zero (RowKind > 3, null bits past the arity)
    uint64_t added    # ENTER: first-word null bits of the fields the migration adds
    uint64_t zero     # ENTER: words of the new fixed part zeroed on entry (added fields): bit w = word w


cdef inline int64_t copy_string(Ctx* x, const Op* op, int64_t kind, uint64_t raw, const uint8_t* d,
                                int64_t base, int64_t size, int64_t ofixed, int64_t d_len, uint8_t* o,
                                int64_t obase, int64_t cur, int64_t cap) noexcept nogil:
    """A non-null STRING / BINARY field (same checks, order and bytes as ``var_field``); strings
    move a word at a time, the last word masked to the string's end (which zeroes the pad), with the
    ASCII test folded into the copy. Returns the new ``cur`` or a negative status."""
    cdef int64_t off, n, r8, w
    cdef uint64_t v, acc
    cdef const uint8_t* src
    cdef uint8_t* dst
    if raw >> 63:
        n = (raw >> 56) & 0x7F
        if n > 7:
            x.err_node = op.node
            return -E_BAD_INLINE
        if kind == R_STR and n and (raw & ((<uint64_t>1 << (8 * n)) - 1) & 0x8080808080808080ull) \
                and not utf8_valid(d + base + op.soff, n):
            x.err_node = op.node
            return -E_BAD_UTF8
        store_u64_le(o + obase + op.doff, raw)
        return cur
    off = <int64_t>(raw >> 32)
    n = <int64_t>(raw & 0xFFFFFFFFu)
    if off < ofixed or off + n > size:
        x.err_node = op.node
        return -E_BAD_OFFSET
    r8 = round_up8(n)
    src = d + base + off
    dst = o + obase + cur
    if base + off + r8 <= d_len and r8 <= cap - obase - cur:
        acc = 0
        w = 0
        while w + 8 < r8:
            v = load_u64_le(src + w)
            acc |= v
            store_u64_le(dst + w, v)
            w += 8
        if r8:
            v = load_u64_le(src + w) & (0xFFFFFFFFFFFFFFFFull >> (8 * (r8 - n)))
            acc |= v
            store_u64_le(dst + w, v)
        if kind == R_STR and (acc & 0x8080808080808080ull) and not utf8_valid(src, n):
            x.err_node = op.node
            return -E_BAD_UTF8
    else:
        if kind == R_STR and not utf8_valid(src, n):
            x.err_node = op.node
            return -E_BAD_UTF8
        if r8 > cap - obase - cur:
            return -E_FULL
        memcpy(dst, src, n)
        memset(dst + n, 0, r8 - n)
    store_u64_le(o + obase + op.doff, ((<uint64_t>cur) << 32) | <uint64_t>n)
    return cur + r8


cdef extern from *:
    """
    static inline int sm_ctz64(uint64_t v) { return __builtin_ctzll(v); }
    """
    int sm_ctz64(uint64_t v) noexcept nogil


cdef inline uint64_t copy_run(const uint8_t* src, uint8_t* dst, uint64_t nb0, int64_t sbit, int64_t dbit,
                              int64_t n) noexcept nogil:
    """Copy ``n`` consecutive fixed-width slots, zeroing null ones; returns their new null bits.
    Runs of one and two fields (most of them) are unrolled."""
    cdef uint64_t nulls = (nb0 >> sbit) & (((<uint64_t>1) << n) - 1)
    cdef int64_t k
    if n == 1:
        store_u64_le(dst, load_u64_le(src) & (nulls - 1))
    elif n == 2:
        store_u64_le(dst, load_u64_le(src) & ((nulls & 1) - 1))
        store_u64_le(dst + 8, load_u64_le(src + 8) & ((nulls >> 1) - 1))
    elif nulls == 0:
        for k in range(n):
            store_u64_le(dst + 8 * k, load_u64_le(src + 8 * k))
    else:
        for k in range(n):
            store_u64_le(dst + 8 * k, load_u64_le(src + 8 * k) & (((nulls >> k) & 1) - 1))
    return nulls << dbit


cdef inline int64_t enter_row(Ctx* x, const Op* op, const uint8_t* d, int64_t base, int64_t size, uint8_t* o,
                              int64_t obase, int64_t cap, uint64_t* nb0, uint64_t* new0) noexcept nogil:
    """Start a row (top or nested): the header checks of ``check_row_header``, the added fields'
    slots zeroed, the first fixed run copied. Returns 0 or a negative status."""
    cdef uint64_t z = op.zero
    if size < op.ofixed:
        x.err_node = op.node
        return -E_TRUNCATED
    nb0[0] = load_u64_le(d + base)
    if nb0[0] & op.forbid:
        x.err_node = op.node
        return -E_BAD_HEADER
    if op.nfixed > cap - obase:
        return -E_FULL
    while z:
        store_u64_le(o + obase + 8 * sm_ctz64(z), 0)
        z &= z - 1
    new0[0] = (nb0[0] & 0xFF) | op.added
    if op.rn:
        new0[0] |= copy_run(d + base + op.rsoff, o + obase + op.rdoff, nb0[0], op.rsbit, op.rdbit, op.rn)
    return 0


cdef int64_t run_ops(Ctx* x, const Op* ops, int64_t d_len, int64_t base, int64_t size, uint8_t* o,
                     int64_t obase, int64_t cap) noexcept nogil:
    """``check_migrate_row`` of the top row, executing the lowered ops (``ops[0]`` is the top
    row's ENTER). Same checks in the same order, same bytes, same results as the general walk."""
    cdef const uint8_t* d = x.d
    cdef const Op* op = ops
    cdef uint64_t nb0, new0, raw, b
    cdef int64_t cur, ofixed, off, n, r, depth = 0
    cdef int32_t code
    cdef int64_t s_base[MAX_DEPTH]
    cdef int64_t s_size[MAX_DEPTH]
    cdef int64_t s_obase[MAX_DEPTH]
    cdef int64_t s_cur[MAX_DEPTH]
    cdef int64_t s_ofixed[MAX_DEPTH]
    cdef uint64_t s_nb0[MAX_DEPTH]
    cdef uint64_t s_new0[MAX_DEPTH]
    cdef const Op* s_op[MAX_DEPTH]
    # the top row: ops[0] is its ENTER (no parent slot)
    ofixed = op.ofixed
    cur = op.nfixed
    r = enter_row(x, op, d, base, size, o, obase, cap, &nb0, &new0)
    if r < 0:
        return r
    op += 1
    while True:
        code = op.code
        if code == OP_FIXED:
            new0 |= copy_run(d + base + op.soff, o + obase + op.doff, nb0, op.sbit, op.dbit, op.n)
        elif code == OP_EXIT:
            store_u64_le(o + obase, new0)
            r = cur  # a multiple of 8: fixed part and every var part are whole words
            depth -= 1
            base = s_base[depth]
            size = s_size[depth]
            obase = s_obase[depth]
            cur = s_cur[depth]
            ofixed = s_ofixed[depth]
            nb0 = s_nb0[depth]
            new0 = s_new0[depth]
            store_u64_le(o + obase + s_op[depth].doff, ((<uint64_t>cur) << 32) | <uint64_t>r)
            cur += r
        elif code == OP_END:
            store_u64_le(o + obase, new0)
            return cur
        elif code == OP_STR:
            if (nb0 >> op.sbit) & 1:
                new0 |= (<uint64_t>1) << op.dbit
                store_u64_le(o + obase + op.doff, 0)
            else:
                cur = copy_string(x, op, op.kind, load_u64_le(d + base + op.soff), d, base, size, ofixed, d_len,
                                  o, obase, cur, cap)
                if cur < 0:
                    return cur
        elif code == OP_ENTER:
            if (nb0 >> op.sbit) & 1:  # a null nested row: skip to its EXIT
                new0 |= (<uint64_t>1) << op.dbit
                store_u64_le(o + obase + op.doff, 0)
                op = ops + op.n
            else:
                raw = load_u64_le(d + base + op.soff)
                if raw >> 63:
                    x.err_node = op.node
                    return -E_BAD_INLINE
                off = <int64_t>(raw >> 32)
                n = <int64_t>(raw & 0xFFFFFFFFu)
                if off < ofixed or off + n > size:
                    x.err_node = op.node
                    return -E_BAD_OFFSET
                s_base[depth] = base
                s_size[depth] = size
                s_obase[depth] = obase
                s_cur[depth] = cur
                s_ofixed[depth] = ofixed
                s_nb0[depth] = nb0
                s_new0[depth] = new0
                s_op[depth] = op
                depth += 1
                base += off
                size = n
                obase += cur
                cur = op.nfixed
                ofixed = op.ofixed
                r = enter_row(x, op, d, base, size, o, obase, cap, &nb0, &new0)
                if r < 0:
                    return r
        else:
            if (nb0 >> op.sbit) & 1:
                new0 |= (<uint64_t>1) << op.dbit
                store_u64_le(o + obase + op.doff, 0)
            else:
                cur = var_field(x, op.node, op.kind, op.flags, load_u64_le(d + base + op.soff), base, size, ofixed,
                                base + op.soff, o, obase, obase + op.doff, cur, cap)
                if cur < 0:
                    return cur
        op += 1


cdef inline bint fast_eligible(const int64_t* prog, int64_t node) noexcept:
    cdef const int64_t* pn = prog + node * NCOL
    return pn[C_KIND] == R_ROW and not (pn[C_FLAGS] & F_VERBATIM) and pn[C_ARITY] <= 56 \
        and pn[C_OLD_ARITY] <= 56


cdef void decode_row(Ctx* x, int64_t node, int64_t base) noexcept nogil:
    """Scatter a validated row into the per-node Arrow output buffers at row ``x.row``."""
    cdef const uint8_t* d = x.d
    cdef int64_t ow = null_bits_size(P(x, node, C_OLD_ARITY))
    cdef int64_t c, end, src, slot, k, n, off, i = x.row
    cdef uint64_t raw
    cdef int64_t v64
    end = P(x, node, C_END)
    c = node + 1
    while c < end:
        src = P(x, c, C_SRC)
        k = P(x, c, C_KIND)
        if src < 0 or null_bit(d, base, src):
            c = P(x, c, C_END)
            continue
        bit_set(x.valid[c], i)
        slot = base + ow + 8 * src
        if k == R_BOOL:
            if d[slot] != 0:
                bit_set(x.vals[c], i)
        elif k == R_I8:
            x.vals[c][i] = d[slot]
        elif k == R_I16:
            memcpy(x.vals[c] + 2 * i, d + slot, 2)
        elif k == R_I32 or k == R_F32:
            memcpy(x.vals[c] + 4 * i, d + slot, 4)
        elif k == R_I64 or k == R_F64:
            memcpy(x.vals[c] + 8 * i, d + slot, 8)
        elif k == R_DEC_COMPACT:
            memcpy(&v64, d + slot, 8)
            memcpy(x.vals[c] + 16 * i, &v64, 8)
            memset(x.vals[c] + 16 * i + 8, 0xFF if v64 < 0 else 0, 8)
        elif k == R_STR or k == R_BIN:
            raw = load_u64_le(d + slot)
            n = x.str_off[c][i + 1] - x.str_off[c][i]
            if raw >> 63:
                memcpy(x.sdata[c] + x.str_off[c][i], d + slot, n)
            else:
                memcpy(x.sdata[c] + x.str_off[c][i], d + base + <int64_t>(raw >> 32), n)
        elif k == R_ROW:
            raw = load_u64_le(d + slot)
            decode_row(x, c, base + <int64_t>(raw >> 32))
        c = P(x, c, C_END)


cdef inline bint in_valid(const Ctx* x, int64_t c, int64_t i) noexcept nogil:
    return x.in_valid[c] == NULL or bit_get(x.in_valid[c], x.in_off[c] + i)

cdef inline int64_t in_str(const Ctx* x, int64_t c, int64_t i, int64_t* start) noexcept nogil:
    """Byte length of string/binary element i of node c (its start in ``start``); -1 if the Arrow
    offsets are inconsistent."""
    cdef int64_t s, e, j = x.in_off[c] + i
    cdef int32_t s32, e32
    if x.in_wide[c]:
        memcpy(&s, x.in_offs[c] + 8 * j, 8)
        memcpy(&e, x.in_offs[c] + 8 * j + 8, 8)
    else:
        memcpy(&s32, x.in_offs[c] + 4 * j, 4)
        memcpy(&e32, x.in_offs[c] + 4 * j + 4, 4)
        s = s32
        e = e32
    if s < 0 or e < s or e > x.in_vals_len[c]:
        return -1
    start[0] = s
    return e - s


cdef int64_t encode_size(Ctx* x, int64_t node) noexcept nogil:
    cdef int64_t arity = P(x, node, C_ARITY)
    cdef int64_t size = null_bits_size(arity) + 8 * arity
    cdef int64_t c, end, k, n, r, s, i = x.row
    cdef int64_t hi, lo
    end = P(x, node, C_END)
    c = node + 1
    while c < end:
        k = P(x, c, C_KIND)
        if not in_valid(x, c, i):
            if P(x, c, C_FLAGS) & F_NOT_NULL:
                x.err_node = c
                return -E_NULL_NOT_ALLOWED
            c = P(x, c, C_END)
            continue
        if k == R_STR or k == R_BIN:
            n = in_str(x, c, i, &s)
            if n < 0:
                x.err_node = c
                return -E_BAD_ARROW
            if n > 0x7FFFFFFF:
                x.err_node = c
                return -E_TOO_LARGE
            if n > 7:
                size += round_up8(n)
        elif k == R_ROW:
            r = encode_size(x, c)
            if r < 0:
                return r
            size += r
        elif k == R_DEC_COMPACT:
            memcpy(&lo, x.in_vals[c] + 16 * (x.in_off[c] + i), 8)
            memcpy(&hi, x.in_vals[c] + 16 * (x.in_off[c] + i) + 8, 8)
            if hi != (-1 if lo < 0 else 0) or lo <= -P(x, c, C_LIMIT) or lo >= P(x, c, C_LIMIT):
                x.err_node = c  # more digits than DECIMAL(p, s) holds
                return -E_TOO_LARGE
        c = P(x, c, C_END)
    return size


cdef int64_t encode_row(Ctx* x, int64_t node, uint8_t* o, int64_t obase) noexcept nogil:
    cdef int64_t arity = P(x, node, C_ARITY)
    cdef int64_t nw = null_bits_size(arity)
    cdef int64_t cur = nw + 8 * arity
    cdef int64_t c, end, k, n, r, j, bit, slot, e, i = x.row
    cdef int64_t s = 0
    end = P(x, node, C_END)
    memset(o + obase, 0, cur)
    c = node + 1
    while c < end:
        k = P(x, c, C_KIND)
        j = P(x, c, C_POS)
        slot = obase + nw + 8 * j
        if not in_valid(x, c, i):
            bit = j + 8
            o[obase + (bit >> 3)] |= <uint8_t>(1 << (bit & 7))
            c = P(x, c, C_END)
            continue
        e = x.in_off[c] + i
        if k == R_BOOL:
            o[slot] = bit_get(x.in_vals[c], e)
        elif k == R_I8:
            o[slot] = x.in_vals[c][e]
        elif k == R_I16:
            memcpy(o + slot, x.in_vals[c] + 2 * e, 2)
        elif k == R_I32 or k == R_F32:
            memcpy(o + slot, x.in_vals[c] + 4 * e, 4)
        elif k == R_I64 or k == R_F64 or k == R_DEC_COMPACT:
            memcpy(o + slot, x.in_vals[c] + arrow_width(k) * e, 8)
        elif k == R_STR or k == R_BIN:
            n = in_str(x, c, i, &s)
            if n <= 7:
                if n:
                    memcpy(o + slot, x.in_vals[c] + s, n)
                o[slot + 7] = <uint8_t>(0x80 | n)
            else:
                memcpy(o + obase + cur, x.in_vals[c] + s, n)
                r = round_up8(n)
                memset(o + obase + cur + n, 0, r - n)
                store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += r
        elif k == R_ROW:
            r = encode_row(x, c, o, obase + cur)
            store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>r)
            cur += r
        c = P(x, c, C_END)
    return cur


# ------------------------------------------------------------------------------------------------
# Python-facing entry points
# ------------------------------------------------------------------------------------------------

cdef class _Keep:
    """Owns the memoryviews and pointer tables of one kernel call (they outlive the nogil loop)."""
    cdef list views
    cdef void** tables[12]
    cdef int ntables

    def __cinit__(self):
        self.views = []
        self.ntables = 0

    def __dealloc__(self):
        cdef int t
        for t in range(self.ntables):
            free(self.tables[t])

    cdef void* buffer(self, size_t nbytes) except NULL:
        """Zeroed scratch memory freed with the call."""
        return <void*>self.table(<int64_t>((nbytes + sizeof(void*) - 1) // sizeof(void*)))

    cdef void** table(self, int64_t n) except NULL:
        cdef void** p
        if self.ntables == 12:
            raise MemoryError("kernel scratch table limit")
        p = <void**>malloc(max(n, 1) * sizeof(void*))
        if p == NULL:
            raise MemoryError()
        memset(p, 0, max(n, 1) * sizeof(void*))
        self.tables[self.ntables] = p
        self.ntables += 1
        return p

    cdef const uint8_t* ro(self, obj) except? NULL:
        cdef const uint8_t[::1] mv
        if obj is None:
            return NULL
        mv = u8(obj)
        self.views.append(mv)
        return &mv[0] if mv.shape[0] else <const uint8_t*>""

    cdef uint8_t* rw(self, obj) except? NULL:
        cdef uint8_t[::1] mv
        if obj is None:
            return NULL
        mv = obj
        self.views.append(mv)
        return &mv[0] if mv.shape[0] else NULL

    cdef int64_t* rw64(self, obj) except? NULL:
        cdef int64_t[::1] mv
        if obj is None:
            return NULL
        mv = obj
        self.views.append(mv)
        return &mv[0]


cdef BinView _view(_Keep keep, offsets, data, validity, int64_t offset, bint wide, int64_t stop) except *:
    cdef const uint8_t[::1] omv = u8(offsets)
    cdef const uint8_t[::1] dmv = u8(data)
    cdef BinView v
    if (offset + stop + 1) * (8 if wide else 4) > omv.shape[0]:
        raise ValueError("offsets buffer shorter than the array")
    keep.views.append(omv)
    keep.views.append(dmv)
    v.offsets = &omv[0]
    v.data = &dmv[0] if dmv.shape[0] else NULL
    v.data_len = dmv.shape[0]
    v.offset = offset
    v.wide = wide
    v.validity = keep.ro(validity)
    if validity is not None and (offset + stop + 7) // 8 > len(u8(validity)):
        raise ValueError("validity buffer shorter than the array")
    return v


cdef const int64_t* _prog(_Keep keep, prog) except NULL:
    cdef const int64_t[:, ::1] pm = prog
    if pm.shape[1] != NCOL or pm.shape[0] < 1:
        raise ValueError("bad row program")
    keep.views.append(pm)
    return &pm[0, 0]


cdef bint _emit_row(list out, const int64_t* prog, int64_t node, int64_t depth):
    """Append the ops of row ``node``'s body (its ENTER is already in ``out``); False when a row
    below needs the general walk (too wide or too deep), which then runs the whole entry."""
    cdef int64_t c, end = prog[node * NCOL + C_END], k, src, pos, enter
    cdef list fixed = [], var = []
    c = node + 1
    while c < end:
        k = prog[c * NCOL + C_KIND]
        src = prog[c * NCOL + C_SRC]
        if src < 0:
            pass  # added: null, in the entering op's ``added`` bits; its slot is zeroed on entry
        elif k < R_STR or k == R_DEC_COMPACT:
            fixed.append(c)
        else:
            var.append(c)
        c = prog[c * NCOL + C_END]
    cdef dict enter_op = out[len(out) - 1]
    cdef list runs = []
    for c in fixed:
        src = prog[c * NCOL + C_SRC]
        pos = prog[c * NCOL + C_POS]
        if runs and runs[len(runs) - 1]["doff"] + 8 * runs[len(runs) - 1]["n"] == 8 + 8 * pos \
                and runs[len(runs) - 1]["soff"] + 8 * runs[len(runs) - 1]["n"] == 8 + 8 * src:
            runs[len(runs) - 1]["n"] += 1
        else:
            runs.append(dict(code=OP_FIXED, node=c, soff=8 + 8 * src, doff=8 + 8 * pos, sbit=src + 8,
                             dbit=pos + 8, n=1))
    if runs:  # the first run rides on the row's ENTER
        first = runs.pop(0)
        enter_op.update(rn=first["n"], rsoff=first["soff"], rdoff=first["doff"], rsbit=first["sbit"],
                        rdbit=first["dbit"])
    out.extend(runs)
    for c in var:
        k = prog[c * NCOL + C_KIND]
        src = prog[c * NCOL + C_SRC]
        pos = prog[c * NCOL + C_POS]
        op = dict(code=OP_VAR, node=c, soff=8 + 8 * src, doff=8 + 8 * pos, sbit=src + 8, dbit=pos + 8, n=0,
                  kind=k, flags=prog[c * NCOL + C_FLAGS])
        if k == R_STR or k == R_BIN:
            op["code"] = OP_STR
        elif k == R_ROW and not (prog[c * NCOL + C_FLAGS] & F_VERBATIM):
            if not fast_eligible(prog, c) or depth + 1 >= MAX_DEPTH:
                return False
            op["code"] = OP_ENTER
            op.update(_row_header(prog, c))
            out.append(op)
            enter = len(out) - 1
            if not _emit_row(out, prog, c, depth + 1):
                return False
            out[enter]["n"] = len(out)
            out.append(dict(code=OP_EXIT, node=c))
            continue
        out.append(op)
    return True


cdef dict _row_header(const int64_t* prog, int64_t node):
    cdef int64_t old_arity = prog[node * NCOL + C_OLD_ARITY]
    cdef uint64_t added = 0, zero = 0
    cdef int64_t c = node + 1, end = prog[node * NCOL + C_END]
    while c < end:
        if prog[c * NCOL + C_SRC] < 0:
            added |= (<uint64_t>1) << (prog[c * NCOL + C_POS] + 8)
            zero |= (<uint64_t>1) << (prog[c * NCOL + C_POS] + 1)
        c = prog[c * NCOL + C_END]
    return dict(ofixed=8 + 8 * old_arity, nfixed=8 + 8 * prog[node * NCOL + C_ARITY],
                forbid=0xFC | ((~((<uint64_t>1 << (old_arity + 8)) - 1)) if old_arity < 56 else 0), added=added,
                zero=zero)


cdef const Op* lower_plan(_Keep keep, const int64_t* prog) except? NULL:
    """Lower a migrate program into ops (see ``run_ops``), or NULL when the entry needs the general
    walk: a row wider than 56 fields or nested deeper than MAX_DEPTH, or an identity plan."""
    cdef list out
    cdef Op* ops
    cdef int64_t i
    if not fast_eligible(prog, 0):
        return NULL
    out = [dict(code=OP_ENTER, node=0, **_row_header(prog, 0))]
    if not _emit_row(out, prog, 0, 0):
        return NULL
    out.append(dict(code=OP_END, node=0))
    ops = <Op*>keep.buffer(len(out) * sizeof(Op))
    for i, d in enumerate(out):
        ops[i].code = d["code"]
        ops[i].node = d["node"]
        ops[i].soff = d.get("soff", 0)
        ops[i].doff = d.get("doff", 0)
        ops[i].sbit = d.get("sbit", 0)
        ops[i].dbit = d.get("dbit", 0)
        ops[i].n = d.get("n", 0)
        ops[i].kind = d.get("kind", 0)
        ops[i].flags = d.get("flags", 0)
        ops[i].ofixed = d.get("ofixed", 0)
        ops[i].nfixed = d.get("nfixed", 0)
        ops[i].forbid = d.get("forbid", 0)
        ops[i].added = d.get("added", 0)
        ops[i].zero = d.get("zero", 0)
        ops[i].rn = d.get("rn", 0)
        ops[i].rsoff = d.get("rsoff", 0)
        ops[i].rdoff = d.get("rdoff", 0)
        ops[i].rsbit = d.get("rsbit", 0)
        ops[i].rdbit = d.get("rdbit", 0)
    return ops


cdef inline int entry_span(const uint8_t* d, int64_t data_len, int64_t s, int64_t e, int64_t* base,
                           int64_t* size) noexcept nogil:
    """Check the entry at d[s:e] (offsets from Arrow, not trusted) is ``i32 BE sizeInBytes ‖ row``
    and locate its BinaryRowData."""
    cdef int64_t n
    if s < 0 or e < s or e > data_len:
        return E_BAD_ARROW
    if e - s < 4:
        return E_TRUNCATED
    n = <int32_t>load_u32_be(d + s)
    if n < 0:
        return E_BAD_LENGTH
    if n > e - s - 4:
        return E_TRUNCATED
    if n < e - s - 4:
        return E_TRAILING
    base[0] = s + 4
    size[0] = n
    return E_OK


cdef inline int entry_row(const BinView* v, int64_t i, int64_t* base, int64_t* size) noexcept nogil:
    """Locate the BinaryRowData of entry i (after its i32 BE length)."""
    return entry_span(v.data, v.data_len, bv_raw(v, i), bv_raw(v, i + 1), base, size)


cdef int64_t migrate_entries(Ctx* x, const Op* ops, const BinView* v, bint verbatim, int64_t i, int64_t stop,
                             uint8_t* o, int64_t cap, int64_t* pos_io, int32_t* o32, int64_t* o64,
                             int64_t* status) noexcept nogil:
    """The loop of ``migrate_run`` (its own function, so the hot walk keeps its registers)."""
    cdef int64_t base = 0, size = 0, r = 0, pos = pos_io[0]
    cdef int64_t e, s = 0
    cdef int code
    # the common input (int32 offsets, no nulls) reads one offset per entry: its end is the next start
    cdef bint plain = not v.wide and v.validity == NULL
    cdef const uint8_t* offs32 = v.offsets + 4 * v.offset
    if plain:
        s = <int32_t>load_u32_le(offs32 + 4 * i)
    while i < stop:
        if plain:
            e = <int32_t>load_u32_le(offs32 + 4 * (i + 1))
            code = entry_span(v.data, v.data_len, s, e, &base, &size)
            s = e
        elif bv_valid(v, i):
            code = entry_row(v, i, &base, &size)
        else:
            code = -1  # null entry: no bytes
        if code >= 0:
            x.err_node = -1
            x.row = i
            if code == E_OK and verbatim:
                r = check_row(x, 0, base, size)
                if r >= 0:
                    if size + 4 > cap - pos:
                        break
                    memcpy(o + pos, x.d + base - 4, size + 4)
                    pos += size + 4
            elif code == E_OK:
                if cap - pos < 4:
                    break
                if ops != NULL:
                    r = run_ops(x, ops, v.data_len, base, size, o, pos + 4, cap)
                else:
                    r = check_migrate_row(x, 0, base, size, o, pos + 4, cap)
                if r == -E_FULL:
                    break
                if r >= 0:
                    store_u32_be(o + pos, <uint32_t>r)
                    pos += r + 4
            if code == E_OK and r < 0:
                code = <int>(-r)
            if code != E_OK:
                status[0] = encode_err(code, x.err_node)
        if o32 != NULL:
            o32[i + 1] = <int32_t>pos
        else:
            o64[i + 1] = pos
        if status[0]:
            break
        i += 1
    pos_io[0] = pos
    return i


def migrate_run(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                out_off, uint8_t[::1] out_data, int64_t pos):
    """Fused migrate (one pass): validate each entry and write its new bytes at once, packed from
    ``out_data[pos]``, and its end into ``out_off[i + 1]`` (the output's own Arrow offsets, int32 or
    int64; ``out_off[start]`` is the caller's). Null entries take no bytes. Returns
    ``(next_row, pos, status)``: ``next_row == stop`` when done; ``status < 0``: entry ``next_row`` is
    bad (``status`` = encoded error; it takes no bytes; resume at ``next_row + 1``); else entry
    ``next_row`` did not fit (grow ``out_data``, keep ``out_data[:pos]``, call again from there).

    Why fused: a two-pass scheme walks every row twice and re-reads the input from memory; here the
    validation and the write run in one walk on a row that is already in cache. Why stop at a bad
    entry: bad entries are rare, and reporting them one call at a time needs no per-entry status
    array (memory: input + output + a constant)."""
    cdef _Keep keep = _Keep()
    cdef BinView v = _view(keep, offsets, data, validity, offset, wide, stop)
    cdef Ctx x
    cdef const Op* ops
    cdef int32_t[::1] off32
    cdef int64_t[::1] off64
    cdef int32_t* o32 = NULL
    cdef int64_t* o64 = NULL
    cdef int64_t i = start, status = 0, n_off
    cdef uint8_t* o = &out_data[0] if out_data.shape[0] else NULL
    cdef int64_t cap = out_data.shape[0]
    cdef int code
    cdef bint verbatim
    if out_off.itemsize == 4:
        off32 = out_off
        o32 = &off32[0]
        n_off = off32.shape[0]
        if cap > 0x7FFFFFFF:
            raise ValueError("migrate_run: int32 offsets cannot address more than 2 GiB of output")
    else:
        off64 = out_off
        o64 = &off64[0]
        n_off = off64.shape[0]
    if stop > n_off - 1 or start < 0 or pos < 0 or pos > cap:
        raise ValueError("migrate_run: output arrays shorter than the rows")
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    x.d = v.data
    verbatim = P(&x, 0, C_FLAGS) & F_VERBATIM
    ops = lower_plan(keep, x.prog)
    with nogil:
        i = migrate_entries(&x, ops, &v, verbatim, start, stop, o, cap, &pos, o32, o64, &status)
    return i, pos, status


def decode_sizes(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                 list str_offs, int64_t[::1] status, bint stop_at_error):
    """Pass 1 of decode: validate every row; string/binary lengths go to ``str_offs[node][i + 1]``
    (int64 arrays, zero-initialised by the caller)."""
    cdef _Keep keep = _Keep()
    cdef BinView v = _view(keep, offsets, data, validity, offset, wide, stop)
    cdef Ctx x
    cdef int64_t i, base = 0, size = 0, r, first = -1, node, nnodes
    cdef int code
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    x.d = v.data
    nnodes = len(str_offs)
    x.str_off = <int64_t**>keep.table(nnodes)
    for node in range(nnodes):
        x.str_off[node] = keep.rw64(str_offs[node])
    with nogil:
        for i in range(start, stop):
            status[i] = 0
            if not bv_valid(&v, i):
                status[i] = 1
                continue
            x.err_node = -1
            x.row = i
            code = entry_row(&v, i, &base, &size)
            if code == E_OK:
                r = check_row(&x, 0, base, size)
                if r < 0:
                    code = <int>(-r)
            if code != E_OK:
                status[i] = encode_err(code, x.err_node)
                if first < 0:
                    first = i
                if stop_at_error:
                    break
    return first


def decode_fill(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                list outs, const int64_t[::1] status):
    """Pass 2 of decode. ``outs[node]`` = (validity bitmap, values, int64 offsets, string data)."""
    cdef _Keep keep = _Keep()
    cdef BinView v = _view(keep, offsets, data, validity, offset, wide, stop)
    cdef Ctx x
    cdef int64_t i, base = 0, size = 0, node, nnodes
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    x.d = v.data
    nnodes = len(outs)
    x.valid = <uint8_t**>keep.table(nnodes)
    x.vals = <uint8_t**>keep.table(nnodes)
    x.str_off = <int64_t**>keep.table(nnodes)
    x.sdata = <uint8_t**>keep.table(nnodes)
    for node in range(1, nnodes):
        t = outs[node]
        x.valid[node] = keep.rw(t[0])
        x.vals[node] = keep.rw(t[1])
        x.str_off[node] = keep.rw64(t[2])
        x.sdata[node] = keep.rw(t[3])
    with nogil:
        for i in range(start, stop):
            if status[i] != 0:
                continue
            if entry_row(&v, i, &base, &size) != E_OK:
                continue
            x.row = i
            decode_row(&x, 0, base)


cdef void _encode_inputs(_Keep keep, Ctx* x, list cols, int64_t stop) except *:
    """Pointer tables for the Arrow input columns, after checking every buffer covers the rows."""
    cdef int64_t node, n = len(cols), kind, need
    if n != x.prog[C_END]:
        raise ValueError("one Arrow column per program node is required")
    x.in_valid = <const uint8_t**>keep.table(n)
    x.in_vals = <const uint8_t**>keep.table(n)
    x.in_offs = <const uint8_t**>keep.table(n)
    x.in_off = <int64_t*>keep.table(n)
    x.in_vals_len = <int64_t*>keep.table(n)
    x.in_wide = <bint*>keep.table(n)
    for node in range(n):
        validity, values, offs, off, wide = cols[node]
        x.in_valid[node] = keep.ro(validity)
        x.in_vals[node] = keep.ro(values)
        x.in_offs[node] = keep.ro(offs)
        x.in_off[node] = off
        x.in_vals_len[node] = len(u8(values)) if values is not None else 0
        x.in_wide[node] = wide
        if validity is not None and (off + stop + 7) // 8 > len(u8(validity)):
            raise ValueError(f"column {node}: validity buffer shorter than the array")
        kind = x.prog[node * NCOL + C_KIND]
        if kind == R_STR or kind == R_BIN:
            if offs is None or (off + stop + 1) * (8 if wide else 4) > len(u8(offs)):
                raise ValueError(f"column {node}: offsets buffer shorter than the array")
        elif kind == R_BOOL:
            if values is None or (off + stop + 7) // 8 > x.in_vals_len[node]:
                raise ValueError(f"column {node}: values buffer shorter than the array")
        elif kind != R_ROW:
            need = (off + stop) * arrow_width(kind)
            if values is None or need > x.in_vals_len[node]:
                raise ValueError(f"column {node}: values buffer shorter than the array")


def encode_sizes(prog, list cols, int64_t start, int64_t stop, int64_t[::1] out_off, bint stop_at_error):
    """Pass 1 of encode. ``cols[node]`` = (validity, values, offsets, element offset, wide); the
    caller has checked buffer lengths against the array length."""
    cdef _Keep keep = _Keep()
    cdef Ctx x
    cdef int64_t i, r, first = -1
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    _encode_inputs(keep, &x, cols, stop)
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            if not in_valid(&x, 0, i):
                continue
            x.row = i
            x.err_node = -1
            r = encode_size(&x, 0)
            if r < 0:
                out_off[i + 1] = encode_err(<int>(-r), x.err_node)
                if first < 0:
                    first = i
                if stop_at_error:
                    break
            else:
                out_off[i + 1] = r + 4
    return first


def encode_fill(prog, list cols, int64_t start, int64_t stop, const int64_t[::1] out_off, uint8_t[::1] out_data):
    cdef _Keep keep = _Keep()
    cdef Ctx x
    cdef int64_t i, r
    cdef uint8_t* o = &out_data[0] if out_data.shape[0] else NULL
    cdef int64_t cap = out_data.shape[0]
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    _encode_inputs(keep, &x, cols, stop)
    with nogil:
        for i in range(start, stop):
            if out_off[i + 1] - out_off[i] < 4 or out_off[i + 1] > cap or not in_valid(&x, 0, i):
                continue
            x.row = i
            r = encode_row(&x, 0, o, out_off[i] + 4)
            store_u32_be(o + out_off[i], <uint32_t>r)
