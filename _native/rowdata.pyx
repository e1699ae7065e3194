# cython: language_level=3
"""BinaryRowData kernels: Arrow struct columns → RowData entries (encode), RowData entries →
Arrow columns (decode), and old-schema RowData → new-schema RowData byte to byte (migrate).

Every kernel executes a *program* compiled once in Python (``statemorph.kernels.plans``,
``compile_row_program`` / ``compile_migration_program``): an int64 matrix, one row per node of the
row type in pre-order, columns below. Node 0 is the top-level row. Children of a ROW node are
``node + 1`` then ``END`` of each child in turn. ``SRC`` is the field index in the *old* row (the
same as ``POS`` for encode / decode; -1 for a field added by a migration).

Entries are ``i32 BE sizeInBytes ‖ BinaryRowData`` (what ``RowDataSerializer`` writes). Migrate
has two passes over rows ``start..stop`` (``migrate_sizes`` validates and writes the output size or
an encoded error to ``out_off[i + 1]``; ``migrate_fill`` writes at the prefix sums) and a fused
one (``migrate_run``); encode / decode are one pass (``encode_run`` / ``decode_run``: validate and
write each entry in one walk, stopping at a bad entry or a full buffer so the caller can resume).
Loops run without the GIL; errors leave as (code, row, node) numbers.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, qsort
from libc.string cimport memcpy, memset

from cursor cimport *
from stringvalue cimport utf8_next

__statemorph_native__ = True

# program columns (C_*), slot kinds (R_*) and flags (F_*): generated from statemorph.kernels.abi
include "abi_rowdata.pxi"

cdef extern from *:
    """
    typedef __int128 sm_i128;
    static inline sm_i128 sm_i128_of(uint64_t lo, int64_t hi) { return (sm_i128)(((unsigned __int128)(uint64_t)hi << 64) | lo); }
    static inline sm_i128 sm_pow10(int64_t p) { sm_i128 v = 1; while (p-- > 0) v *= 10; return v; }
    static inline int sm_bytes_of(sm_i128 u) {
        /* BigInteger.toByteArray() length: the minimal big-endian two's complement */
        unsigned __int128 x = (unsigned __int128)(u < 0 ? ~u : u);
        int bits = 0;
        while (x) { bits++; x >>= 1; }
        return (bits + 8) / 8;
    }
    static inline int sm_mul_add(int64_t a, int64_t b, int64_t c, int64_t* r) {
        int64_t t;
        return __builtin_mul_overflow(a, b, &t) || __builtin_add_overflow(t, c, r);
    }
    """
    ctypedef long long sm_i128  # really __int128 (the C typedef above)
    sm_i128 sm_i128_of(uint64_t lo, int64_t hi) nogil
    sm_i128 sm_pow10(int64_t p) nogil
    int sm_bytes_of(sm_i128 u) nogil
    int sm_mul_add(int64_t a, int64_t b, int64_t c, int64_t* r) nogil


cdef inline int64_t null_bits_size(int64_t arity) noexcept nogil:
    return ((arity + 63 + 8) // 64) * 8

cdef inline int64_t arrow_width(int64_t kind) noexcept nogil:
    if kind == R_I8:
        return 1
    if kind == R_I16:
        return 2
    if kind == R_I32 or kind == R_F32:
        return 4
    if kind == R_DEC_COMPACT or kind == R_DEC_BIG:
        return 16
    return 8


ctypedef struct Ctx:
    const int64_t* prog
    int64_t err_node
    int64_t row
    const uint8_t* d
    int64_t d_len           # decode: bytes of ``d`` (lets hashing read whole words near the end)
    bint metered            # decode with arrays: the row / array checks spend ``budget`` (see spend)
    int64_t budget

cdef inline int64_t P(const Ctx* x, int64_t node, int col) noexcept nogil:
    return x.prog[node * NCOL + col]


cdef bint utf8_valid(const uint8_t* s, int64_t n) noexcept nogil:
    """Strict UTF-8 (what Python's ``bytes.decode('utf-8')`` accepts): ASCII a word at a time (most
    state strings are ASCII), the rest through the shared decoder of ``stringvalue.pxd``."""
    cdef int64_t p = 0
    cdef uint32_t cp
    while p + 8 <= n:
        if load_u64_le(s + p) & 0x8080808080808080ull:
            break
        p += 8
    while p < n:
        if s[p] < 0x80:
            p += 1
        elif utf8_next(s, &p, n, &cp) != E_OK:
            return False
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


cdef inline int64_t var_span(Ctx* x, int64_t c, int64_t k, uint64_t raw, int64_t base, int64_t size,
                             int64_t lo) noexcept nogil:
    """The checks of a non-inline variable-length slot (``raw``) of node ``c`` whose row starts at
    ``base``: nanos / length in range, the bytes inside ``[lo, size)``, strings valid UTF-8.
    Returns the bytes the value takes in the row (8 for a TIMESTAMP(p > 3)) or -code with
    ``x.err_node`` set; one function for every walk, so they check in the same order."""
    cdef int64_t off = <int64_t>(raw >> 32)
    cdef int64_t n = <int64_t>(raw & 0xFFFFFFFFu)
    if k == R_TS_BIG:
        if n > 999999:
            x.err_node = c
            return -E_BAD_NANOS
        n = 8
    elif k == R_DEC_BIG and (n < 1 or n > 16):
        x.err_node = c
        return -E_BAD_LENGTH
    if off < lo or off + n > size:
        x.err_node = c
        return -E_BAD_OFFSET
    if k == R_STR and not utf8_valid(x.d + base + off, n):
        x.err_node = c
        return -E_BAD_UTF8
    return n


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
    r = spend(x, node, n + 1)
    if r < 0:
        return r
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
            ln = inline_check(d, slot, raw, k)
            if ln != E_OK:
                x.err_node = e
                return -ln
            continue
        ln = var_span(x, e, k, raw, base, size, lo)
        if ln < 0:
            return ln
        off = <int64_t>(raw >> 32)
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


cdef inline int64_t spend(Ctx* x, int64_t node, int64_t units) noexcept nogil:
    """Metered decode: one unit per row field and array element (+1 a structure) checked. The
    reference stops reading a value that holds more of them than bytes (references overlap, which
    could make nested arrays exponential); a metered kernel spends at least as much as the
    reference for the same value, so past that it stops and hands the entry to the reference
    (HAND_BACK), which gives its verdict. Returns 0 or -HAND_BACK (``x.err_node`` set)."""
    if x.metered:
        x.budget -= units
        if x.budget < 0:
            x.err_node = node
            return -HAND_BACK
    return 0


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
    return spend(x, node, old_arity + 1)


cdef int64_t check_row(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate the old row at d[base:base+size] for this node's (sub)program and return the size of
    the new row a migration writes (decode ignores it); a negative value is -code, with
    ``x.err_node`` set."""
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
                r = inline_check(d, slot, raw, k)
                if r != E_OK:
                    x.err_node = c
                    return -r
                c = P(x, c, C_END)
                continue
            n = var_span(x, c, k, raw, base, size, ofixed)
            if n < 0:
                return n
            off = <int64_t>(raw >> 32)
            if k == R_STR or k == R_BIN:
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
        r = inline_check(d, slot, raw, k)
        if r != E_OK:
            x.err_node = c
            return -r
        store_u64_le(o + nslot, raw)
        return cur
    n = var_span(x, c, k, raw, base, size, ofixed)
    if n < 0:
        return n
    off = <int64_t>(raw >> 32)
    if k == R_TS_BIG:
        if 8 > cap - obase - cur:
            return -E_FULL
        memcpy(o + obase + cur, d + base + off, 8)
        store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | (raw & 0xFFFFFFFFu))  # keeps the nanos
        return cur + 8
    if k == R_DEC_BIG:
        if 16 > cap - obase - cur:
            return -E_FULL
        memset(o + obase + cur, 0, 16)
        memcpy(o + obase + cur, d + base + off, n)
        store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
        return cur + 16
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
# recurses per nested row (on the Events workload: 1.7x the instructions of this walk). Lowered ops carry
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
        n = inline_check(d, base + op.soff, raw, kind)
        if n != E_OK:
            x.err_node = op.node
            return -n
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


# ------------------------------------------------------------------------------------------------
# encode / decode: one walk per entry over a lowered program
# ------------------------------------------------------------------------------------------------

# One program node lowered for encode / decode, with the buffers of its Arrow column: the hot
# walks read one small struct per field instead of strided program cells plus parallel pointer
# tables. Encode reads the ``*_in`` fields, decode writes the others.
ctypedef struct Node:
    int64_t kind
    int64_t pos
    int64_t end
    int64_t arity
    int64_t flags
    int64_t limit
    sm_i128 big_limit       # DECIMAL(p > 18): 10**p
    int64_t parent          # the ROW node this one is a field of, the ARRAY of an element, the MAP of a key /
                            # value array (-1: node 0)
    int64_t arr             # decode: the ARRAY whose element column this node is part of, or -1
    int64_t nw              # ROW: bytes of the null-bit words
    int64_t width           # TINYINT .. DOUBLE: bytes per Arrow value (0 for other kinds)
    uint64_t mask           # ... and the mask of those bytes in a word
    int64_t fixed           # ROW: null-bit words + slots
    const uint8_t* valid_in
    const uint8_t* vals_in
    const uint8_t* offs_in  # string / binary: value offsets; ARRAY: list offsets (int32, or int64 if wide)
    int64_t off_in
    int64_t nrows           # encode: length of the Arrow column (rows; elements under an ARRAY)
    int64_t vals_len
    bint wide_in
    uint8_t* valid
    uint8_t* vals
    uint8_t* offs           # string / binary offsets, int32 or int64 (``wide``)
    bint wide
    uint8_t* sdata
    int64_t scap
    int64_t spos            # next free byte of ``sdata``
    int64_t sstart          # ``spos`` when the current entry started (rollback point)
    int64_t count           # valid values written


cdef inline int64_t arrow_str(const Node* nd, int64_t i, int64_t* start) noexcept nogil:
    """Byte length of string/binary element i of an input column (its start in ``start``); -1 if
    the Arrow offsets are inconsistent."""
    cdef int64_t s, e, j = nd.off_in + i
    cdef int32_t s32, e32
    if nd.wide_in:
        memcpy(&s, nd.offs_in + 8 * j, 8)
        memcpy(&e, nd.offs_in + 8 * j + 8, 8)
    else:
        memcpy(&s32, nd.offs_in + 4 * j, 4)
        memcpy(&e32, nd.offs_in + 4 * j + 4, 4)
        s = s32
        e = e32
    if s < 0 or e < s or e > nd.vals_len:
        return -1
    start[0] = s
    return e - s


cdef inline uint64_t word_mask(int64_t n) noexcept nogil:
    """Mask of the low ``n`` bytes of a word (all for n >= 8, none for n <= 0), without a branch."""
    cdef int64_t m = 0 if n < 0 else (8 if n > 8 else n)
    return (((<uint64_t>1) << (8 * m - 1)) << 1) - 1 if m else 0


cdef inline uint64_t load_short(const uint8_t* p, int64_t n, int64_t avail) noexcept nogil:
    """The n < 8 bytes at p as a little-endian word (upper bytes zero). One masked 8-byte load when
    8 bytes are readable (a byte-wise copy into a stack word stalls on store forwarding)."""
    cdef uint64_t w = 0
    cdef int64_t b
    if avail >= 8:
        return load_u64_le(p) & word_mask(n)
    for b in range(n):
        w |= (<uint64_t>p[b]) << (8 * b)
    return w


cdef inline void copy_padded(uint8_t* dst, const uint8_t* src, int64_t n, int64_t avail) noexcept nogil:
    """Copy n bytes and zero the pad up to the next multiple of 8. Short strings (the common case)
    go a word at a time when the source has the bytes to over-read, without a libc call."""
    cdef int64_t b, full = n & ~(<int64_t>7)
    if n > 32 or avail < full + 8:
        memcpy(dst, src, n)
        memset(dst + n, 0, round_up8(n) - n)
        return
    for b in range(0, full, 8):
        store_u64_le(dst + b, load_u64_le(src + b))
    if n > full:
        store_u64_le(dst + full, load_short(src + full, n - full, avail - full))


cdef inline int64_t encode_str(const Node* nd, int64_t i, uint8_t* o, int64_t ob, int64_t slot, int64_t cur,
                              int64_t cap) noexcept nogil:
    """Write string / binary i of column ``nd`` into the slot at ``o[slot]``: inline up to 7
    bytes, else padded at ``o[ob + cur]`` (the var part of the row or array based at ``ob``).
    Returns the new ``cur``, -E_BAD_ARROW, -E_TOO_LARGE or -E_FULL."""
    cdef int64_t s = 0, n = arrow_str(nd, i, &s)
    if n < 0:
        return -E_BAD_ARROW
    if n > 0x7FFFFFFF:
        return -E_TOO_LARGE
    if n <= 7:
        store_u64_le(o + slot, load_short(nd.vals_in + s, n, nd.vals_len - s) | ((<uint64_t>(0x80 | n)) << 56))
        return cur
    if round_up8(n) > cap - ob - cur:
        return -E_FULL
    copy_padded(o + ob + cur, nd.vals_in + s, n, nd.vals_len - s)
    store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>n)
    return cur + round_up8(n)


cdef inline int64_t encode_big(const Node* nd, int64_t e, uint8_t* slot, uint8_t* var, int64_t cur,
                              int64_t room) noexcept nogil:
    """Arrow value e of a DECIMAL(p > 18) / TIMESTAMP(p > 3) column into its slot and var part:
    the unscaled value's minimal big-endian two's complement bytes in a 16-byte var part, or
    the epoch milliseconds (8 bytes) with the nano-of-millisecond in the slot. Returns the var
    bytes used, -E_TOO_LARGE (more digits than p) or -E_FULL."""
    cdef uint64_t lo
    cdef int64_t hi, v, millis, b, n
    cdef sm_i128 u
    if nd.kind == R_TS_BIG:
        memcpy(&v, nd.vals_in + 8 * e, 8)
        millis = v // nd.limit  # C division truncates: floor for negative values
        if millis * nd.limit > v:
            millis -= 1
        if room < 8:
            return -E_FULL
        store_u64_le(var, <uint64_t>millis)
        store_u64_le(slot, ((<uint64_t>cur) << 32) | <uint64_t>((v - millis * nd.limit) * (1000000 // nd.limit)))
        return 8
    memcpy(&lo, nd.vals_in + 16 * e, 8)
    memcpy(&hi, nd.vals_in + 16 * e + 8, 8)
    u = sm_i128_of(lo, hi)
    if u <= -nd.big_limit or u >= nd.big_limit:
        return -E_TOO_LARGE
    if room < 16:
        return -E_FULL
    n = sm_bytes_of(u)
    memset(var, 0, 16)
    for b in range(n):
        var[b] = <uint8_t>(u >> (8 * (n - 1 - b)))
    store_u64_le(slot, ((<uint64_t>cur) << 32) | <uint64_t>n)
    return 16


cdef int64_t encode_row(Node* nodes, int64_t node, int64_t i, uint8_t* o, int64_t ob, int64_t cap,
                        int64_t* err_node) noexcept nogil:
    """Validate row i of the Arrow columns under ``node`` and write its BinaryRowData at ``o[ob:]``
    (never past ``cap``) in the same walk. Returns its size, -code (``err_node`` set; fields are
    checked in program order, so the first error is the reference tier's) or -E_FULL."""
    cdef const Node* r = &nodes[node]
    cdef const Node* nd
    cdef int64_t cur = r.fixed
    cdef int64_t c = node + 1, slot, k, n, s = 0, sub, bit, e
    cdef int64_t lo, hi
    # the first null-bit word lives in a register (see check_migrate_row)
    cdef uint64_t nb0 = 0
    if cur > cap - ob:
        return -E_FULL
    for k in range(8, cur, 8):  # the first word is nb0, stored last
        store_u64_le(o + ob + k, 0)
    while c < r.end:
        nd = &nodes[c]
        e = nd.off_in + i
        if nd.valid_in != NULL and not bit_get(nd.valid_in, e):
            if nd.flags & F_NOT_NULL:
                err_node[0] = c
                return -E_NULL_NOT_ALLOWED
            bit = nd.pos + 8
            if bit < 64:
                nb0 |= (<uint64_t>1) << bit
            else:
                o[ob + (bit >> 3)] |= <uint8_t>(1 << (bit & 7))
            c = nd.end
            continue
        slot = ob + r.nw + 8 * nd.pos
        k = nd.kind
        if nd.width:
            # TINYINT .. DOUBLE: one masked word load (tested before the kind, so the common
            # fields need no jump-table dispatch, whose indirect branch mispredicted)
            if nd.width * e + 8 <= nd.vals_len:
                store_u64_le(o + slot, load_u64_le(nd.vals_in + nd.width * e) & nd.mask)
            else:
                memcpy(o + slot, nd.vals_in + nd.width * e, nd.width)
        elif k == R_STR or k == R_BIN:
            cur = encode_str(nd, i, o, ob, slot, cur, cap)
            if cur < 0:
                if cur != -E_FULL:
                    err_node[0] = c
                return cur
        elif k == R_ROW or k == R_ARRAY or k == R_MAP:
            sub = encode_nested(nodes, c, i, o, ob + cur, cap, err_node)
            if sub < 0:
                return sub
            store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>sub)
            cur += round_up8(sub)
        elif k == R_BOOL:
            o[slot] = bit_get(nd.vals_in, e)
        elif k == R_DEC_COMPACT:
            memcpy(&lo, nd.vals_in + 16 * e, 8)
            memcpy(&hi, nd.vals_in + 16 * e + 8, 8)
            if hi != (-1 if lo < 0 else 0) or lo <= -nd.limit or lo >= nd.limit:
                err_node[0] = c  # more digits than DECIMAL(p, s) holds
                return -E_TOO_LARGE
            memcpy(o + slot, &lo, 8)
        elif k == R_DEC_BIG or k == R_TS_BIG:
            sub = encode_big(nd, e, o + slot, o + ob + cur, cur, cap - ob - cur)
            if sub < 0:
                if sub != -E_FULL:
                    err_node[0] = c
                return sub
            cur += sub
        c = nd.end
    store_u64_le(o + ob, nb0)
    return cur


cdef inline int inline_check(const uint8_t* d, int64_t slot, uint64_t raw, int64_t k) noexcept nogil:
    """The checks of a slot marked inline (top bit of its last byte): only strings and binaries
    may be inline, at most 7 bytes, strings valid UTF-8. Returns E_OK or the code."""
    cdef int64_t n = (raw >> 56) & 0x7F
    if (k != R_STR and k != R_BIN) or n > 7:
        return E_BAD_INLINE
    # inline ASCII (the common short string) needs no scan: one masked word test
    if k == R_STR and n and (raw & ((<uint64_t>1 << (8 * n)) - 1) & 0x8080808080808080ull) \
            and not utf8_valid(d + slot, n):
        return E_BAD_UTF8
    return E_OK


cdef inline void canonical_nan(uint8_t* slot, int64_t k) noexcept nogil:
    """A NaN FLOAT / DOUBLE array element becomes Java's canonical NaN, as ``BinaryArrayWriter``
    writes it (row fields keep their bits)."""
    cdef uint64_t w
    if k == R_F32:
        w = load_u32_le(slot)
        if (w & 0x7F800000u) == 0x7F800000u and (w & 0x7FFFFFu):
            store_u32_le(slot, 0x7FC00000u)
    else:
        w = load_u64_le(slot)
        if (w & 0x7FF0000000000000ull) == 0x7FF0000000000000ull and (w & 0xFFFFFFFFFFFFFull):
            store_u64_le(slot, 0x7FF8000000000000ull)


cdef int64_t encode_array(Node* nodes, int64_t node, int64_t i, uint8_t* o, int64_t ob, int64_t cap,
                          int64_t* err_node) noexcept nogil:
    """Write the BinaryArrayData of list i of an ARRAY column at ``o[ob:]`` (never past ``cap``):
    element count, null bits, slots of the element width (rounded up to 8), then the elements'
    var parts, each padded to 8. Returns its size, -code (``err_node`` set) or -E_FULL."""
    cdef const Node* nd = &nodes[node]
    cdef const Node* el = &nodes[node + 1]
    cdef int64_t s = 0, n, j, ei, es, header, cur, slot, k, sub
    cdef int64_t lo, hi
    n = arrow_str(nd, i, &s)  # list offsets are read like string offsets (bound: the element count)
    if n < 0:
        err_node[0] = node
        return -E_BAD_ARROW
    if n > 0x7FFFFFFF:
        err_node[0] = node
        return -E_TOO_LARGE
    k = el.kind
    es = elem_size(k)
    header = array_header(n)
    cur = round_up8(header + n * es)
    if cur > cap - ob:
        return -E_FULL
    memset(o + ob, 0, cur)
    store_u32_le(o + ob, <uint32_t>n)
    for j in range(n):
        ei = s + j
        if el.valid_in != NULL and not bit_get(el.valid_in, el.off_in + ei):
            if el.flags & F_NOT_NULL:
                err_node[0] = node + 1
                return -E_NULL_NOT_ALLOWED
            o[ob + 4 + (j >> 3)] |= <uint8_t>(1 << (j & 7))
            continue
        slot = ob + header + j * es
        if el.width:
            memcpy(o + slot, el.vals_in + el.width * (el.off_in + ei), el.width)
            if k == R_F32 or k == R_F64:
                canonical_nan(o + slot, k)
        elif k == R_BOOL:
            o[slot] = bit_get(el.vals_in, el.off_in + ei)
        elif k == R_DEC_COMPACT:
            memcpy(&lo, el.vals_in + 16 * (el.off_in + ei), 8)
            memcpy(&hi, el.vals_in + 16 * (el.off_in + ei) + 8, 8)
            if hi != (-1 if lo < 0 else 0) or lo <= -el.limit or lo >= el.limit:
                err_node[0] = node + 1
                return -E_TOO_LARGE
            memcpy(o + slot, &lo, 8)
        elif k == R_STR or k == R_BIN:
            cur = encode_str(el, ei, o, ob, slot, cur, cap)
            if cur < 0:
                if cur != -E_FULL:
                    err_node[0] = node + 1
                return cur
        else:  # R_ROW / R_ARRAY / R_MAP elements
            sub = encode_nested(nodes, node + 1, ei, o, ob + cur, cap, err_node)
            if sub < 0:
                return sub
            store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>sub)
            cur += round_up8(sub)
    return cur


cdef int64_t encode_nested(Node* nodes, int64_t c, int64_t i, uint8_t* o, int64_t ob, int64_t cap,
                           int64_t* err_node) noexcept nogil:
    """Row / element i of the ROW, ARRAY or MAP node c at ``o[ob:]``: its size (a map's is not a
    multiple of 8: its pad is zeroed, and the caller's var part skips it), -code or -E_FULL."""
    cdef int64_t k = nodes[c].kind
    if k == R_ROW:
        return encode_row(nodes, c, i, o, ob, cap, err_node)
    if k == R_ARRAY:
        return encode_array(nodes, c, i, o, ob, cap, err_node)
    return encode_map(nodes, c, i, o, ob, cap, err_node)


cdef int64_t encode_map(Node* nodes, int64_t m, int64_t i, uint8_t* o, int64_t ob, int64_t cap,
                        int64_t* err_node) noexcept nogil:
    """The BinaryMapData of map i of MAP node m (``i32 LE key-array bytes ‖ key array ‖ value
    array``; both arrays read the map's list offsets) at ``o[ob:]``, padded to 8 with zeros.
    Returns its unpadded size, -code, -E_FULL, or -HAND_BACK (``err_node`` = m) when the keys
    may repeat: checked right after the keys, before any value, since the reference keeps only
    the last value of equal keys (it builds a dict) and so never sees the others."""
    cdef int64_t kn = m + 1, kb, vb, size
    if 4 > cap - ob:
        return -E_FULL
    kb = encode_array(nodes, kn, i, o, ob + 4, cap, err_node)
    if kb < 0:
        return kb
    if keys_suspect(o, cap, ob + 4, nodes[kn + 1].kind):
        err_node[0] = m
        return -HAND_BACK
    vb = encode_array(nodes, nodes[kn].end, i, o, ob + 4 + kb, cap, err_node)
    if vb < 0:
        return vb
    size = 4 + kb + vb
    if round_up8(size) > cap - ob:
        return -E_FULL
    store_u32_le(o + ob, <uint32_t>kb)
    memset(o + ob + size, 0, round_up8(size) - size)
    return size


cdef inline int64_t elem_bytes(const uint8_t* d, int64_t base, int64_t slot, int64_t* src) noexcept nogil:
    """Length of the validated string / binary element in the slot at ``d[slot]`` of the array at
    ``d[base:]``, its bytes at ``src``: inline in the slot, or in the array's var part."""
    cdef uint64_t raw = load_u64_le(d + slot)
    if raw >> 63:
        src[0] = slot
        return (raw >> 56) & 0x7F
    src[0] = base + <int64_t>(raw >> 32)
    return <int64_t>(raw & 0xFFFFFFFFu)


cdef int cmp_u64(const void* a, const void* b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t*>a)[0], y = (<const uint64_t*>b)[0]
    return (x > y) - (x < y)


cdef inline void sort_u64(uint64_t* h, int64_t n) noexcept nogil:
    """Ascending, in place: insertion sort for a few (most maps are small), else ``qsort``."""
    cdef int64_t j, m
    cdef uint64_t v
    if n > 64:
        qsort(h, n, sizeof(uint64_t), cmp_u64)
        return
    for j in range(1, n):
        v = h[j]
        m = j
        while m > 0 and h[m - 1] > v:
            h[m] = h[m - 1]
            m -= 1
        h[m] = v


cdef inline uint64_t key_hash(const uint8_t* p, int64_t n, int64_t avail) noexcept nogil:
    """A 64-bit hash of the n bytes at p (``avail`` readable from p), a little-endian word at a
    time (the last one zero padded; the length is in the seed): multiply and xor-shift per word."""
    cdef uint64_t h = 0x9E3779B97F4A7C15ull ^ <uint64_t>n, w
    cdef int64_t j = 0
    while j < n:
        w = load_u64_le(p + j) if n - j >= 8 else load_short(p + j, n - j, avail - j)
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull
        h ^= h >> 31
        j += 8
    return h


cdef bint keys_suspect(const uint8_t* d, int64_t d_len, int64_t base, int64_t k) noexcept nogil:
    """Whether the valid key array at ``d[base:]`` (element kind k; ``d_len`` bytes in ``d``) may
    hold two equal keys or a null one: then its map goes to the reference serializer (HAND_BACK),
    which decides. A key's hash is ``key_hash`` of its canonical bytes (string / binary bytes
    wherever stored, BOOLEAN as 0 / 1, -0.0 as 0.0): equal keys hash alike, equal hashes only
    *may* be equal keys. ROW / ARRAY / MAP
    keys are not hashed (equal values may differ in bytes). The hashes are sorted, not put in a
    table: n log n, 8 bytes a key (on the stack up to 64 keys; a key takes at least 4 bytes of
    input, as BOOLEAN / TINYINT / SMALLINT keys beyond their value count are not hashed), and no
    memory means suspect."""
    cdef int64_t n = <int32_t>load_u32_le(d + base), es = elem_size(k), header = array_header(n)
    cdef int64_t j, slot, ln, src = 0
    cdef uint64_t stack[64]
    cdef uint64_t* h = stack
    cdef uint64_t w
    cdef uint8_t canon[8]
    cdef bint suspect = False
    for j in range(0, n, 32):  # null bits a word at a time (bits past n do not count)
        w = load_u32_le(d + base + 4 + (j >> 3))
        if n - j < 32:
            w &= ((<uint64_t>1) << (n - j)) - 1
        if w:
            return True
    if n < 2:
        return False
    if k == R_ROW or k == R_ARRAY or k == R_MAP:
        return True
    if (k == R_BOOL and n > 2) or ((k == R_I8 or k == R_I16) and n > (1 << (8 * es))):
        return True  # more keys than values: some repeat (the hashes would say so too), no table needed
    if n > 64:
        h = <uint64_t*>malloc(n * sizeof(uint64_t))
        if h == NULL:
            return True
    for j in range(n):
        slot = base + header + j * es
        if k == R_STR or k == R_BIN:
            ln = elem_bytes(d, base, slot, &src)
            h[j] = key_hash(d + src, ln, d_len - src)
            continue
        memcpy(canon, d + slot, es)
        if k == R_BOOL:
            canon[0] = canon[0] != 0
        elif k == R_F32 or k == R_F64:
            w = load_u32_le(canon) if k == R_F32 else load_u64_le(canon)
            if w == ((<uint64_t>1) << (8 * es - 1)):
                memset(canon, 0, es)  # -0.0 == 0.0
        h[j] = key_hash(canon, es, 8)
    sort_u64(h, n)
    for j in range(1, n):
        if h[j] == h[j - 1]:
            suspect = True
            break
    if h != stack:
        free(h)
    return suspect


cdef int64_t decode_row(Ctx* x, Node* nodes, int64_t node, int64_t base, int64_t size, int64_t i) noexcept nogil:
    """Validate the row at d[base:base+size] (the checks of ``check_row``, in its order) and
    scatter it into row i of the Arrow outputs in the same walk. Returns 0, -code (``x.err_node``
    set) or -E_FULL; a failed entry leaves partial outputs that the caller rolls back."""
    cdef const uint8_t* d = x.d
    cdef const Node* r = &nodes[node]
    cdef Node* nd
    cdef int64_t c, j, slot, k, n, off, src, rc
    cdef uint64_t raw, nb0
    cdef uint8_t mark
    rc = check_row_header(x, node, base, size, r.arity)
    if rc < 0:
        return rc
    nb0 = load_u64_le(d + base)
    c = node + 1
    while c < r.end:
        nd = &nodes[c]
        j = nd.pos
        if (j < 56 and (nb0 >> (j + 8)) & 1) or (j >= 56 and null_bit(d, base, j)):
            c = nd.end
            continue
        bit_set(nd.valid, i)
        nd.count += 1
        slot = base + r.nw + 8 * j
        k = nd.kind
        if k == R_I64 or k == R_F64:
            memcpy(nd.vals + 8 * i, d + slot, 8)
        elif k == R_I32 or k == R_F32:
            memcpy(nd.vals + 4 * i, d + slot, 4)
        elif k == R_STR or k == R_BIN or k == R_ROW or k == R_ARRAY or k == R_MAP:
            raw = load_u64_le(d + slot)
            mark = <uint8_t>(raw >> 56)
            if mark & 0x80:
                rc = inline_check(d, slot, raw, k)
                if rc != E_OK:
                    x.err_node = c
                    return -rc
                n = mark & 0x7F
                src = slot
            else:
                off = <int64_t>(raw >> 32)
                n = <int64_t>(raw & 0xFFFFFFFFu)
                if off < r.fixed or off + n > size:
                    x.err_node = c
                    return -E_BAD_OFFSET
                if k == R_ROW or k == R_ARRAY or k == R_MAP:
                    if k == R_ROW:
                        rc = decode_row(x, nodes, c, base + off, n, i)
                    elif k == R_ARRAY:
                        rc = check_array(x, c, base + off, n)
                        if rc >= 0:
                            rc = decode_array(x, nodes, c, base + off)
                    else:
                        rc = check_map(x, c, base + off, n)
                        if rc >= 0:
                            rc = decode_map(x, nodes, c, base + off)
                    if rc < 0:
                        return rc
                    c = nd.end
                    continue
                if k == R_STR and not utf8_valid(d + base + off, n):
                    x.err_node = c
                    return -E_BAD_UTF8
                src = base + off
            if not put_bytes(nd, d + src, n):
                return -E_FULL
        elif k == R_DEC_BIG or k == R_TS_BIG:
            rc = decode_big(d, nd, i, slot, base, r.fixed, size)
            if rc != E_OK:
                x.err_node = c
                return -rc
        else:
            put_value(nd, i, d + slot)
        c = nd.end
    return 0


cdef inline int decode_big(const uint8_t* d, Node* nd, int64_t i, int64_t slot, int64_t base, int64_t ofixed,
                           int64_t size) noexcept nogil:
    """Value i of a DECIMAL(p > 18) / TIMESTAMP(p > 3) field from its slot and var part, with
    ``check_row``'s checks in its order, then the Arrow range: E_OK or the code."""
    cdef uint64_t raw = load_u64_le(d + slot)
    cdef int64_t off = <int64_t>(raw >> 32), n = <int64_t>(raw & 0xFFFFFFFFu), b, v
    cdef sm_i128 u
    if raw >> 63:
        return E_BAD_INLINE
    if nd.kind == R_TS_BIG:
        if n > 999999:
            return E_BAD_NANOS
        if off < ofixed or off + 8 > size:
            return E_BAD_OFFSET
        memcpy(&v, d + base + off, 8)
        if sm_mul_add(v, nd.limit, n // (1000000 // nd.limit), &v):
            return E_TOO_LARGE  # beyond the Arrow type's int64 range
        memcpy(nd.vals + 8 * i, &v, 8)
        return E_OK
    if n < 1 or n > 16:
        return E_BAD_LENGTH
    if off < ofixed or off + n > size:
        return E_BAD_OFFSET
    u = -1 if d[base + off] & 0x80 else 0
    for b in range(n):
        u = (u << 8) | d[base + off + b]
    if u <= -nd.big_limit or u >= nd.big_limit:
        return E_TOO_LARGE  # more digits than the Arrow decimal's precision
    for b in range(16):
        nd.vals[16 * i + b] = <uint8_t>(u >> (8 * b))
    return E_OK


cdef inline bint put_bytes(Node* nd, const uint8_t* src, int64_t n) noexcept nogil:
    """Append n bytes to a string column's data; False if its buffer is full."""
    if n > nd.scap - nd.spos:
        return False
    memcpy(nd.sdata + nd.spos, src, n)
    nd.spos += n
    return True


cdef inline void put_value(Node* nd, int64_t i, const uint8_t* src) noexcept nogil:
    """Value i of a BOOLEAN / TINYINT / SMALLINT / compact DECIMAL column from its slot."""
    cdef int64_t k = nd.kind
    if k == R_BOOL:
        if src[0] != 0:
            bit_set(nd.vals, i)
    elif k == R_I8:
        nd.vals[i] = src[0]
    elif k == R_I16:
        memcpy(nd.vals + 2 * i, src, 2)
    elif k == R_I32 or k == R_F32:
        memcpy(nd.vals + 4 * i, src, 4)
    elif k == R_DEC_COMPACT:
        memcpy(nd.vals + 16 * i, src, 8)
        memset(nd.vals + 16 * i + 8, 0xFF if src[7] & 0x80 else 0, 8)
    else:
        memcpy(nd.vals + 8 * i, src, 8)


cdef int64_t decode_array(Ctx* x, Node* nodes, int64_t a, int64_t base) noexcept nogil:
    """Append the elements of the array at ``d[base:]`` (validated by ``check_array``) to the
    element column of ARRAY node ``a`` (its ``spos`` counts elements). Returns 0, -E_FULL or
    -HAND_BACK (from a map below)."""
    cdef const uint8_t* d = x.d
    cdef Node* A = &nodes[a]
    cdef Node* el = &nodes[a + 1]
    cdef int64_t n = <int32_t>load_u32_le(d + base), k = el.kind, es = elem_size(el.kind)
    cdef int64_t header = array_header(n), j, ei, slot, ln, src, first = A.spos
    cdef uint64_t raw
    cdef bint is_str = k == R_STR or k == R_BIN
    cdef int64_t c, rc
    if n > A.scap - A.spos:
        return -E_FULL
    A.spos += n  # first: a failure below rolls back the elements already written
    for j in range(n):
        ei = first + j
        if not (d[base + 4 + (j >> 3)] >> (j & 7)) & 1:
            bit_set(el.valid, ei)
            el.count += 1
            slot = base + header + j * es
            if k == R_ROW or k == R_ARRAY or k == R_MAP:
                raw = load_u64_le(d + slot)
                if k == R_ROW:
                    rc = decode_row(x, nodes, a + 1, base + <int64_t>(raw >> 32), <int64_t>(raw & 0xFFFFFFFFu), ei)
                elif k == R_ARRAY:
                    rc = decode_array(x, nodes, a + 1, base + <int64_t>(raw >> 32))
                else:
                    rc = decode_map(x, nodes, a + 1, base + <int64_t>(raw >> 32))
                if rc < 0:
                    return rc
            elif is_str:
                ln = elem_bytes(d, base, slot, &src)
                if not put_bytes(el, d + src, ln):
                    return -E_FULL
            else:
                put_value(el, ei, d + slot)
        if is_str:
            put_off(el.offs, el.wide, ei + 1, el.spos)
        elif k == R_ROW or k == R_ARRAY or k == R_MAP:
            # the string / list columns of this element column end at element ei too
            for c in range(a + 1, el.end):
                if nodes[c].arr == a and (nodes[c].kind == R_STR or nodes[c].kind == R_BIN
                                          or nodes[c].kind == R_ARRAY):
                    put_off(nodes[c].offs, nodes[c].wide, ei + 1, nodes[c].spos)
    return 0


cdef int64_t decode_map(Ctx* x, Node* nodes, int64_t m, int64_t base) noexcept nogil:
    """Append the keys and values of the map at ``d[base:]`` (validated by ``check_map``) to the
    element columns of MAP node m's key and value arrays. Returns 0, -E_FULL or -HAND_BACK
    (``x.err_node`` = m: the reference decides on keys that may repeat or are null)."""
    cdef int64_t kn = m + 1, kb = <int32_t>load_u32_le(x.d + base), rc
    if keys_suspect(x.d, x.d_len, base + 4, nodes[kn + 1].kind):
        x.err_node = m
        return -HAND_BACK
    rc = decode_array(x, nodes, kn, base + 4)
    if rc < 0:
        return rc
    return decode_array(x, nodes, nodes[kn].end, base + 4 + kb)


# Blocked walks. Rows are handled BLK at a time, one program node (column) after the other: each
# field's loop over the block is a tight loop with no per-field dispatch, which the row-at-a-time
# walk pays for every field of every row (it was ~2/3 of the encode time). A block first computes
# and checks (pass A), then writes (pass B); any error or a full buffer in a block hands that block
# to the row-at-a-time walk, which finds the same first error at the same row and field.
cdef enum:
    BLK = 256

ctypedef struct Scratch:
    uint8_t* pres           # [node][r]: the value is there (its row is present and it is not null)
    int64_t* a              # [node][r]: ROW: start (encode: in the entry; decode: in the data);
                            #            string: encode: var-part offset in its row; decode: start
    int64_t* b              # [node][r]: ROW: encode: bytes used / size; decode: size; string: length
    int64_t* s              # [node][r]: encode, string: where its bytes start in the Arrow data
    int64_t* pos            # [r]: encode: where the entry starts in the output
    uint8_t* allp           # [node]: every row of the block has the value (no null anywhere above)
    uint8_t* nonull         # [ROW node] decode: no row of the block has a null field (one word)
    int64_t* stack          # open ROW nodes (pass A of encode)


cdef inline bint block_ok(const Node* nodes, int64_t nnodes) noexcept nogil:
    """Whether the blocked walks handle every kind of the program."""
    cdef int64_t c, k
    for c in range(1, nnodes):
        k = nodes[c].kind
        if not (nodes[c].width or k == R_BOOL or k == R_STR or k == R_BIN or k == R_ROW or k == R_DEC_COMPACT):
            return False
    return True


cdef bint encode_block(Node* nodes, int64_t nnodes, Scratch* t, int64_t b0, int64_t b1, uint8_t* o,
                       int64_t* pos, int64_t cap) noexcept nogil:
    """Encode rows b0..b1 packed from ``o[pos]`` (entry r at ``t.pos[r]``, present if
    ``t.pres[r]``, of ``t.b[r]`` bytes after its length word); False (nothing kept) if a row is bad
    or the block does not fit, for the row-at-a-time walk to redo.

    Node fields are copied to locals before each loop: stores through ``uint8_t*`` may alias
    anything, so the compiler would reload them after every store."""
    cdef int64_t nb = b1 - b0, c, r, R, e, n, s = 0, top = 0, q, slot, k, w, off, vlen, fixed, nw
    cdef int64_t lo, hi, limit, bitb
    cdef uint64_t mask
    cdef uint8_t bitm
    cdef bint not_null, allp
    cdef const Node* nd
    cdef const uint8_t* vin
    cdef const uint8_t* vbits
    cdef uint8_t* P
    cdef const uint8_t* PR
    cdef int64_t* A
    cdef int64_t* Bc
    cdef int64_t* S
    cdef int64_t* AR
    cdef int64_t* BR
    cdef int64_t* at = t.pos
    # pass A: presence, var-part offsets and row sizes, every check
    for c in range(nnodes):
        nd = &nodes[c]
        P = t.pres + c * BLK
        A = t.a + c * BLK
        Bc = t.b + c * BLK
        S = t.s + c * BLK
        vbits = nd.valid_in
        off = nd.off_in + b0
        if c == 0:
            fixed = nd.fixed
            t.allp[0] = vbits == NULL
            for r in range(nb):
                P[r] = vbits == NULL or bit_get(vbits, off + r)
                A[r] = 0
                Bc[r] = fixed
            continue
        while top > 0 and nodes[t.stack[top - 1]].end <= c:
            top -= 1
            close_row(nodes, t, t.stack[top], nb)
        R = nd.parent
        PR = t.pres + R * BLK
        AR = t.a + R * BLK
        BR = t.b + R * BLK
        t.allp[c] = t.allp[R] and vbits == NULL
        if vbits == NULL:
            memcpy(P, PR, nb)
        else:
            not_null = nd.flags & F_NOT_NULL
            for r in range(nb):
                P[r] = PR[r] and bit_get(vbits, off + r)
                if not_null and PR[r] and not P[r]:
                    return False
        k = nd.kind
        if k == R_STR or k == R_BIN:
            for r in range(nb):
                if P[r]:
                    n = arrow_str(nd, b0 + r, &S[r])
                    if n < 0 or n > 0x7FFFFFFF:
                        return False
                    Bc[r] = n
                    if n > 7:
                        A[r] = BR[r]
                        BR[r] += round_up8(n)
        elif k == R_ROW:
            fixed = nd.fixed
            for r in range(nb):
                if P[r]:
                    A[r] = AR[r] + BR[r]
                    Bc[r] = fixed
            t.stack[top] = c
            top += 1
        elif k == R_DEC_COMPACT:
            vin = nd.vals_in
            limit = nd.limit
            for r in range(nb):
                if P[r]:
                    memcpy(&lo, vin + 16 * (off + r), 8)
                    memcpy(&hi, vin + 16 * (off + r) + 8, 8)
                    if hi != (-1 if lo < 0 else 0) or lo <= -limit or lo >= limit:
                        return False
    while top > 0:
        top -= 1
        close_row(nodes, t, t.stack[top], nb)
    P = t.pres
    Bc = t.b
    q = pos[0]
    for r in range(nb):
        at[r] = q
        if P[r]:
            q += 4 + Bc[r]
    if q > cap:
        return False
    # pass B: write; t.a of a ROW node becomes the absolute start of its row in ``o``
    for c in range(nnodes):
        nd = &nodes[c]
        P = t.pres + c * BLK
        A = t.a + c * BLK
        Bc = t.b + c * BLK
        S = t.s + c * BLK
        k = nd.kind
        nw = nd.nw
        allp = t.allp[c]
        if c == 0:
            # only the null-bit words need zeroing: every slot is written below (0 for a null)
            for r in range(nb):
                if P[r]:
                    store_u32_be(o + at[r], <uint32_t>Bc[r])
                    zero_words(o + at[r] + 4, nw)
                    A[r] = at[r] + 4
            continue
        R = nd.parent
        PR = t.pres + R * BLK
        AR = t.a + R * BLK
        slot = nodes[R].nw + 8 * nd.pos
        bitb = (nd.pos + 8) >> 3
        bitm = <uint8_t>(1 << ((nd.pos + 8) & 7))
        w = nd.width
        mask = nd.mask
        vin = nd.vals_in
        vlen = nd.vals_len
        off = nd.off_in + b0
        # the common columns, every row with a value: tight loops
        if allp and w and w * (off + nb) + 8 <= vlen:
            for r in range(nb):
                store_u64_le(o + AR[r] + slot, load_u64_le(vin + w * (off + r)) & mask)
            continue
        if allp and k == R_ROW:
            for r in range(nb):
                e = at[r] + 4 + A[r]
                zero_words(o + e, nw)
                store_u64_le(o + AR[r] + slot, ((<uint64_t>(e - AR[r])) << 32) | <uint64_t>Bc[r])
                A[r] = e
            continue
        if allp and (k == R_STR or k == R_BIN):
            for r in range(nb):
                write_str(o + AR[r], slot, A[r], vin + S[r], Bc[r], vlen - S[r])
            continue
        for r in range(nb):
            if not PR[r]:
                continue
            if not P[r]:
                o[AR[r] + bitb] |= bitm
                store_u64_le(o + AR[r] + slot, 0)
                continue
            e = off + r
            if w:
                if w * e + 8 <= vlen:
                    store_u64_le(o + AR[r] + slot, load_u64_le(vin + w * e) & mask)
                else:
                    store_u64_le(o + AR[r] + slot, load_short(vin + w * e, w, vlen - w * e))
            elif k == R_STR or k == R_BIN:
                write_str(o + AR[r], slot, A[r], vin + S[r], Bc[r], vlen - S[r])
            elif k == R_ROW:
                e = at[r] + 4 + A[r]
                zero_words(o + e, nw)
                store_u64_le(o + AR[r] + slot, ((<uint64_t>(e - AR[r])) << 32) | <uint64_t>Bc[r])
                A[r] = e
            elif k == R_BOOL:
                store_u64_le(o + AR[r] + slot, bit_get(vin, e))
            else:  # R_DEC_COMPACT
                memcpy(o + AR[r] + slot, vin + 16 * e, 8)
    pos[0] = q
    return True


cdef inline void zero_words(uint8_t* p, int64_t n) noexcept nogil:
    """Zero n bytes (a multiple of 8: null-bit words), one store for the usual single word."""
    cdef int64_t b
    store_u64_le(p, 0)
    for b in range(8, n, 8):
        store_u64_le(p + b, 0)


cdef inline void write_str(uint8_t* row, int64_t slot, int64_t var, const uint8_t* src, int64_t n,
                           int64_t avail) noexcept nogil:
    """A string field of a row: inline in its slot up to 7 bytes, else at ``row + var``, padded."""
    if n <= 7:
        store_u64_le(row + slot, load_short(src, n, avail) | ((<uint64_t>(0x80 | n)) << 56))
    else:
        copy_padded(row + var, src, n, avail)
        store_u64_le(row + slot, ((<uint64_t>var) << 32) | <uint64_t>n)


cdef bint decode_block(Ctx* x, BinView* v, Node* nodes, int64_t nnodes, Scratch* t, int64_t b0,
                       int64_t b1) noexcept nogil:
    """Decode entries b0..b1 into rows b0.. of the outputs; False (nothing written) if an entry is
    bad or a string buffer is short, for the row-at-a-time walk to redo. Node fields are copied to
    locals before each loop (see encode_block)."""
    cdef const uint8_t* d = x.d
    cdef int64_t nb = b1 - b0, c, r, R, j, k, n, off, slot, need, i, base = 0, size = 0, w, count
    cdef int64_t rfixed, nw, spos, scap, dlen = v.data_len
    cdef uint64_t raw
    cdef uint8_t mark
    cdef bint wide, allp
    cdef Node* nd
    cdef uint8_t* P
    cdef const uint8_t* PR
    cdef int64_t* A
    cdef int64_t* Bc
    cdef const int64_t* AR
    cdef const int64_t* BR
    cdef const uint8_t* src
    cdef uint8_t* valid
    cdef uint8_t* vals
    cdef uint8_t* sdata
    cdef uint8_t* offs
    # pass A: locate every value, every check
    for c in range(nnodes):
        nd = &nodes[c]
        P = t.pres + c * BLK
        A = t.a + c * BLK
        Bc = t.b + c * BLK
        if c == 0:
            allp = True
            t.nonull[0] = nd.nw == 8
            for r in range(nb):
                P[r] = 0
                if not bv_valid(v, b0 + r):
                    allp = False
                    continue
                if entry_row(v, b0 + r, &base, &size) != E_OK or not row_header_ok(x, nd, base, size):
                    return False
                P[r] = 1
                A[r] = base
                Bc[r] = size
                if load_u64_le(d + base) >> 8:
                    t.nonull[0] = False
            t.allp[0] = allp
            continue
        R = nd.parent
        rfixed = nodes[R].fixed
        nw = nodes[R].nw
        PR = t.pres + R * BLK
        AR = t.a + R * BLK
        BR = t.b + R * BLK
        j = nd.pos
        k = nd.kind
        if t.nonull[R]:
            memcpy(P, PR, nb)
            t.allp[c] = t.allp[R]
        else:
            allp = t.allp[R]
            for r in range(nb):
                P[r] = PR[r] and not null_bit(d, AR[r], j)
                allp = allp and P[r]
            t.allp[c] = allp
        if k == R_ROW:
            t.nonull[c] = nd.nw == 8
        elif k != R_STR and k != R_BIN:
            continue
        need = 0
        for r in range(nb):
            if not P[r]:
                continue
            slot = AR[r] + nw + 8 * j
            raw = load_u64_le(d + slot)
            mark = <uint8_t>(raw >> 56)
            if mark & 0x80:
                if inline_check(d, slot, raw, k) != E_OK:
                    return False
                n = mark & 0x7F
                A[r] = slot
            else:
                off = <int64_t>(raw >> 32)
                n = <int64_t>(raw & 0xFFFFFFFFu)
                if off < rfixed or off + n > BR[r]:
                    return False
                if k == R_ROW:
                    if not row_header_ok(x, nd, AR[r] + off, n):
                        return False
                    if load_u64_le(d + AR[r] + off) >> 8:
                        t.nonull[c] = False
                elif k == R_STR and not utf8_valid(d + AR[r] + off, n):
                    return False
                A[r] = AR[r] + off
            Bc[r] = n
            need += n
        if k != R_ROW and need > nd.scap - nd.spos:
            return False
    # pass B: scatter
    for c in range(nnodes):
        nd = &nodes[c]
        P = t.pres + c * BLK
        A = t.a + c * BLK
        Bc = t.b + c * BLK
        k = nd.kind
        w = nd.width
        valid = nd.valid
        vals = nd.vals
        count = nd.count
        if t.allp[c] and (b0 | nb) & 7 == 0:
            memset(valid + (b0 >> 3), 0xFF, nb >> 3)
            count += nb
            valid = NULL
        if c == 0:
            for r in range(nb):
                if P[r] and valid != NULL:
                    bit_set(valid, b0 + r)
                    count += 1
            nd.count = count
            continue
        AR = t.a + nd.parent * BLK
        slot = nodes[nd.parent].nw + 8 * nd.pos
        if valid == NULL and (w == 8 or w == 4):
            # the common column: every row has a value of one word or half
            if w == 8:
                for r in range(nb):
                    memcpy(vals + 8 * (b0 + r), d + AR[r] + slot, 8)
            else:
                for r in range(nb):
                    memcpy(vals + 4 * (b0 + r), d + AR[r] + slot, 4)
            nd.count = count
            continue
        sdata = nd.sdata
        spos = nd.spos
        scap = nd.scap
        offs = nd.offs
        wide = nd.wide
        if valid == NULL and (k == R_STR or k == R_BIN) and scap - spos >= need_of(Bc, nb) + 8:
            # every row has a string and the buffer has room to over-write a word
            for r in range(nb):
                n = Bc[r]
                if n <= 8 and dlen - A[r] >= 8:
                    store_u64_le(sdata + spos, load_u64_le(d + A[r]))
                else:
                    memcpy(sdata + spos, d + A[r], n)
                spos += n
                put_off(offs, wide, b0 + r + 1, spos)
            nd.count = count
            nd.spos = spos
            nd.sstart = spos
            continue
        for r in range(nb):
            i = b0 + r
            if P[r]:
                if valid != NULL:
                    bit_set(valid, i)
                    count += 1
                src = d + AR[r] + slot
                if w == 8:
                    memcpy(vals + 8 * i, src, 8)
                elif w == 4:
                    memcpy(vals + 4 * i, src, 4)
                elif w == 2:
                    memcpy(vals + 2 * i, src, 2)
                elif w == 1:
                    vals[i] = src[0]
                elif k == R_STR or k == R_BIN:
                    n = Bc[r]
                    if n <= 8 and scap - spos >= 8 and dlen - A[r] >= 8:
                        store_u64_le(sdata + spos, load_u64_le(d + A[r]))
                    else:
                        memcpy(sdata + spos, d + A[r], n)
                    spos += n
                elif k == R_BOOL:
                    if src[0] != 0:
                        bit_set(vals, i)
                elif k == R_DEC_COMPACT:
                    memcpy(vals + 16 * i, src, 8)
                    memset(vals + 16 * i + 8, 0xFF if src[7] & 0x80 else 0, 8)
            if k == R_STR or k == R_BIN:
                put_off(offs, wide, i + 1, spos)
        nd.count = count
        nd.spos = spos
        nd.sstart = spos
    return True


cdef inline int64_t need_of(const int64_t* lengths, int64_t nb) noexcept nogil:
    cdef int64_t r, total = 0
    for r in range(nb):
        total += lengths[r]
    return total


cdef inline bint row_header_ok(Ctx* x, const Node* nd, int64_t base, int64_t size) noexcept nogil:
    """``check_row_header`` passes (a yes / no for the blocked walk); one word test for rows of up
    to 56 fields, whose null bits fit the first word."""
    cdef uint64_t raw
    if nd.arity >= 56:
        return check_row_header(x, 0, base, size, nd.arity) == 0
    if size < nd.fixed:
        return False
    raw = load_u64_le(x.d + base)
    return (raw & 0xFF) <= 3 and (raw >> (nd.arity + 8)) == 0


cdef inline void close_row(const Node* nodes, Scratch* t, int64_t c, int64_t nb) noexcept nogil:
    """A nested row's fields are all placed: its size joins its parent's used bytes."""
    cdef int64_t R = nodes[c].parent, r
    cdef const uint8_t* P = t.pres + c * BLK
    cdef const int64_t* Bc = t.b + c * BLK
    cdef int64_t* BR = t.b + R * BLK
    for r in range(nb):
        if P[r]:
            BR[r] += Bc[r]


cdef void decode_rollback(Node* nodes, int64_t nnodes, int64_t i) noexcept nogil:
    """Undo what a failed ``decode_row`` wrote for row i: its validity bits (and counts), true
    BOOLEAN bits, and string bytes appended since the entry started."""
    cdef int64_t c, j, lo, hi
    cdef Node* nd
    for c in range(1, nnodes):
        nd = &nodes[c]
        lo, hi = i, i + 1
        if nd.arr >= 0:  # an element column: the elements appended since the entry began
            lo, hi = nodes[nd.arr].sstart, nodes[nd.arr].spos
        for j in range(lo, hi):
            if bit_get(nd.valid, j):
                bit_clear(nd.valid, j)
                nd.count -= 1
            if nd.kind == R_BOOL:
                bit_clear(nd.vals, j)
    for c in range(1, nnodes):
        nodes[c].spos = nodes[c].sstart


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


cdef list _lowered(const int64_t* prog):
    """The ops of a migrate program as dicts (``lower_plan`` packs them into ``Op``; the plan
    compiler ``statemorph.kernels.jit`` turns them into machine code), or None (general walk)."""
    cdef list out
    if not fast_eligible(prog, 0):
        return None
    out = [dict(code=OP_ENTER, node=0, **_row_header(prog, 0))]
    if not _emit_row(out, prog, 0, 0):
        return None
    out.append(dict(code=OP_END, node=0))
    return out


OP_CODES = dict(FIXED=OP_FIXED, STR=OP_STR, ENTER=OP_ENTER, EXIT=OP_EXIT, VAR=OP_VAR, END=OP_END, R_STR=R_STR,
                R_BIN=R_BIN)


def lowered_ops(prog):
    """The lowered ops of migrate program ``prog`` (list of dicts, codes in ``OP_CODES``), or None
    when it takes the general walk."""
    cdef _Keep keep = _Keep()
    return _lowered(_prog(keep, prog))


cdef int64_t var_field_call(const int64_t* prog, const uint8_t* d, int64_t c, int64_t k, int64_t flags, uint64_t raw,
                           int64_t base, int64_t size, int64_t ofixed, int64_t slot, uint8_t* o, int64_t obase,
                           int64_t nslot, int64_t cur, int64_t cap) noexcept nogil:
    """``var_field`` with a plain C signature, for plan machine code: every field kind it does not
    inline (arrays, maps, big DECIMAL / TIMESTAMP, unchanged nested rows) runs this same code."""
    cdef Ctx x
    memset(&x, 0, sizeof(Ctx))  # as migrate_run's: no metering
    x.prog = prog
    x.d = d
    x.err_node = -1
    return var_field(&x, c, k, flags, raw, base, size, ofixed, slot, o, obase, nslot, cur, cap)


def var_field_address():
    """Address of ``var_field_call`` (see there)."""
    return <size_t><void*>var_field_call


def utf8_valid_address():
    """Address of ``int utf8_valid(const uint8_t*, int64_t)`` (strict UTF-8), which machine code
    for a plan calls for non-ASCII strings: one validator for every tier of the compiled kernels."""
    return <size_t><void*>utf8_valid


cdef const Op* lower_plan(_Keep keep, const int64_t* prog) except? NULL:
    """Lower a migrate program into ops (see ``run_ops``), or NULL when the entry needs the general
    walk: a row wider than 56 fields or nested deeper than MAX_DEPTH, or an identity plan."""
    cdef list out = _lowered(prog)
    cdef Op* ops
    cdef int64_t i
    if out is None:
        return NULL
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


ctypedef int64_t (*PlanCode)(const uint8_t* offs, const uint8_t* d, int64_t d_len, int64_t i, int64_t stop,
                             uint8_t* o, int64_t cap, int64_t* pos_io, int32_t* o32) noexcept nogil


cdef int64_t migrate_coded(Ctx* x, PlanCode code, const Op* ops, const BinView* v, int64_t i, int64_t stop,
                           uint8_t* o, int64_t cap, int64_t* pos_io, int32_t* o32, int64_t* status) noexcept nogil:
    """Entries through the plan's machine code (``statemorph.kernels.jit``), which takes valid
    entries and returns at the first entry it does not take (a bad one, or one that does not fit,
    or one ending at the very end of the data buffer); that entry goes through ``migrate_entries``,
    which reports it exactly as without machine code, then the machine code resumes. Plain input
    only (int32 offsets, no nulls)."""
    cdef int64_t r
    while i < stop:
        i = code(v.offsets + 4 * v.offset, v.data, v.data_len, i, stop, o, cap, pos_io, o32)
        if i >= stop:
            break
        r = migrate_entries(x, ops, v, False, i, i + 1, o, cap, pos_io, o32, NULL, status)
        if r <= i:
            return r
        i = r
    return i


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
                out_off, uint8_t[::1] out_data, int64_t pos, size_t machine_code=0):
    """Fused migrate (one pass): validate each entry and write its new bytes at once, packed from
    ``out_data[pos]``, and its end into ``out_off[i + 1]`` (the output's own Arrow offsets, int32 or
    int64; ``out_off[start]`` is the caller's). Null entries take no bytes. Returns
    ``(next_row, pos, status)``: ``next_row == stop`` when done; ``status < 0``: entry ``next_row`` is
    bad (``status`` = encoded error; it takes no bytes; resume at ``next_row + 1``); else entry
    ``next_row`` did not fit (grow ``out_data``, keep ``out_data[:pos]``, call again from there).
    ``machine_code``: the address of the plan's machine code (``statemorph.kernels.jit``), 0: none.

    Why fused: a two-pass scheme walks every row twice and re-reads the input from memory; here the
    validation and the write run in one walk on a row that is already in cache. Why stop at a bad
    entry: bad entries are rare, and reporting them one call at a time needs no per-entry status
    array (memory: input + output + a constant)."""
    cdef _Keep keep = _Keep()
    cdef BinView v = _view(keep, offsets, data, validity, offset, wide, stop)
    cdef Ctx x
    cdef const Op* ops
    cdef int64_t i = start, status = 0
    cdef uint8_t* o = &out_data[0] if out_data.shape[0] else NULL
    cdef int64_t cap = out_data.shape[0]
    cdef bint verbatim, wide_out
    cdef uint8_t* offs = out_offsets(keep.views, out_off, cap, start, stop, pos, "migrate_run", &wide_out)
    cdef int32_t* o32 = NULL if wide_out else <int32_t*>offs
    cdef int64_t* o64 = <int64_t*>offs if wide_out else NULL
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    x.d = v.data
    verbatim = P(&x, 0, C_FLAGS) & F_VERBATIM
    ops = lower_plan(keep, x.prog)
    with nogil:
        if machine_code and ops != NULL and not verbatim and o32 != NULL and not v.wide and v.validity == NULL:
            i = migrate_coded(&x, <PlanCode>machine_code, ops, &v, start, stop, o, cap, &pos, o32, &status)
        else:
            i = migrate_entries(&x, ops, &v, verbatim, start, stop, o, cap, &pos, o32, o64, &status)
    return i, pos, status


cdef Node* _lower(_Keep keep, prog) except NULL:
    """The program as a malloc'd array of ``Node`` (owned by ``keep``), buffers still unset."""
    cdef const int64_t* p = _prog(keep, prog)
    cdef int64_t n = len(prog), c, arity, child
    cdef Node* nodes = <Node*>keep.table((n * sizeof(Node) + sizeof(void*) - 1) // sizeof(void*))
    for c in range(n):
        arity = p[c * NCOL + C_ARITY]
        nodes[c].kind = p[c * NCOL + C_KIND]
        nodes[c].pos = p[c * NCOL + C_POS]
        nodes[c].end = p[c * NCOL + C_END]
        nodes[c].arity = arity
        nodes[c].flags = p[c * NCOL + C_FLAGS]
        nodes[c].limit = p[c * NCOL + C_LIMIT]
        if nodes[c].kind == R_DEC_BIG:
            if not 0 < nodes[c].limit <= 38:
                raise ValueError("bad row program")
            nodes[c].big_limit = sm_pow10(nodes[c].limit)
        elif nodes[c].kind == R_TS_BIG and nodes[c].limit not in (1000, 1000000):
            raise ValueError("bad row program")
        if R_I8 <= nodes[c].kind <= R_F64:
            nodes[c].width = arrow_width(nodes[c].kind)
            nodes[c].mask = word_mask(nodes[c].width)
        nodes[c].nw = null_bits_size(arity)
        nodes[c].fixed = null_bits_size(arity) + 8 * arity
        if nodes[c].end <= c or nodes[c].end > n or (c == 0 and nodes[c].end != n):
            raise ValueError("bad row program")
    for c in range(n):  # a MAP is followed by its key and value ARRAYs
        if nodes[c].kind == R_MAP and not (c + 1 < n and nodes[c + 1].kind == R_ARRAY and nodes[c + 1].end < n
                                           and nodes[nodes[c + 1].end].kind == R_ARRAY):
            raise ValueError("bad row program")
    nodes[0].parent = -1
    for c in range(n):
        if nodes[c].kind == R_ARRAY:
            nodes[c + 1].parent = c
        if nodes[c].kind == R_MAP:
            nodes[c + 1].parent = c
            nodes[nodes[c + 1].end].parent = c
        if nodes[c].kind == R_ROW:
            child = c + 1
            while child < nodes[c].end:
                nodes[child].parent = c
                child = nodes[child].end
    nodes[0].arr = -1
    for c in range(1, n):  # pre-order: a parent's ``arr`` is known before its children's
        nodes[c].arr = nodes[c].parent if nodes[nodes[c].parent].kind == R_ARRAY else nodes[nodes[c].parent].arr
    return nodes


cdef void _encode_inputs(_Keep keep, Node* nodes, list cols, int64_t stop) except *:
    """Attach the Arrow input columns to the nodes, after checking every buffer covers its column
    (``stop`` rows for the row columns; list offsets are checked against the element column when
    read)."""
    cdef int64_t node, n = len(cols), kind, need
    cdef Node* nd
    if n != nodes[0].end:
        raise ValueError("one Arrow column per program node is required")
    for node in range(n):
        nd = &nodes[node]
        validity, values, offs, off, wide, nrows = cols[node]
        nd.valid_in = keep.ro(validity)
        nd.vals_in = keep.ro(values)
        nd.offs_in = keep.ro(offs)
        nd.off_in = off
        nd.nrows = nrows
        # an ARRAY's list offsets index its element column: bound them by its length
        nd.vals_len = cols[node + 1][5] if nd.kind == R_ARRAY else len(u8(values)) if values is not None else 0
        nd.wide_in = wide
        if off < 0 or nrows < 0 or (node == 0 and nrows < stop):
            raise ValueError(f"column {node}: negative offset or shorter than the rows")
        if validity is not None and (off + nrows + 7) // 8 > len(u8(validity)):
            raise ValueError(f"column {node}: validity buffer shorter than the array")
        kind = nd.kind
        stop = nrows
        if kind == R_STR or kind == R_BIN or kind == R_ARRAY:
            if offs is None or (off + stop + 1) * (8 if wide else 4) > len(u8(offs)):
                raise ValueError(f"column {node}: offsets buffer shorter than the array")
        elif kind == R_BOOL:
            if values is None or (off + stop + 7) // 8 > nd.vals_len:
                raise ValueError(f"column {node}: values buffer shorter than the array")
        elif kind != R_ROW and kind != R_ARRAY and kind != R_MAP:
            need = (off + stop) * arrow_width(kind)
            if values is None or need > nd.vals_len:
                raise ValueError(f"column {node}: values buffer shorter than the array")


cdef uint8_t* _offsets_out(_Keep keep, obj, int64_t stop, bint* wide) except NULL:
    """A writable int32 / int64 offsets array of at least ``stop + 1`` entries."""
    cdef uint8_t[::1] mv = u8(obj)
    wide[0] = memoryview(obj).itemsize == 8
    if memoryview(obj).itemsize not in (4, 8) or mv.shape[0] < (stop + 1) * (8 if wide[0] else 4):
        raise ValueError("offsets output must be an int32 / int64 array of at least stop + 1 entries")
    keep.views.append(mv)
    return &mv[0]


cdef void _scratch(_Keep keep, Scratch* t, int64_t nnodes) except *:
    t.pres = <uint8_t*>keep.table((nnodes * BLK + 7) // 8)
    t.a = <int64_t*>keep.table(nnodes * BLK)
    t.b = <int64_t*>keep.table(nnodes * BLK)
    t.pos = <int64_t*>keep.table(BLK)
    t.s = <int64_t*>keep.table(nnodes * BLK)
    t.stack = <int64_t*>keep.table(nnodes)
    t.allp = <uint8_t*>keep.table(nnodes)
    t.nonull = <uint8_t*>keep.table(nnodes)


ctypedef int64_t (*EncodeCode)(Node* nodes, int64_t i, int64_t stop, uint8_t* o, int64_t cap, int64_t* pos_io,
                               uint8_t* offs, uint8_t* out_valid, int64_t* written_io) noexcept nogil


def encode_run(prog, list cols, int64_t start, int64_t stop, out_off, uint8_t[::1] out_data, int64_t pos,
               uint8_t[::1] out_valid, size_t machine_code=0):
    """One-pass encode of rows ``start..stop``: validate each entry and write ``i32 BE size ‖
    BinaryRowData`` packed from ``out_data[pos]``. ``cols[node]`` = (validity, values, offsets,
    element offset, wide) of its Arrow column. ``out_off`` (int32 or int64) gets the end of entry
    ``i`` at ``i + 1`` (``out_off[start]`` is the caller's) and ``out_valid`` bit ``i`` is set for
    each entry written; null and bad entries take no bytes. int32 offsets never pass 2**31 - 1.

    Returns ``(next_row, pos, status, written)``: ``next_row < stop`` means entry ``next_row`` is bad
    (``status`` = its encoded error, offsets already written: resume at ``next_row + 1``) or did not
    fit (``status`` 0: grow ``out_data``, keep ``[:pos]``, resume at ``next_row``).

    Why one pass: sizing every entry and then writing it walked each row twice; here the output
    buffer is sized from an upper bound (exact for rows of primitives and strings) instead.
    ``machine_code``: the address of the row type's encode machine code
    (``statemorph.kernels.jit``; int32 offsets in and out), 0 for none: it takes entries until one
    it does not take, which the row walk below writes (or reports) before it resumes."""
    cdef _Keep keep = _Keep()
    cdef Node* nodes = _lower(keep, prog)
    cdef bint owide
    cdef uint8_t* offs = _offsets_out(keep, out_off, stop, &owide)
    cdef uint8_t* o = &out_data[0] if out_data.shape[0] else NULL
    cdef int64_t cap = out_data.shape[0]
    cdef int64_t i = start, r, status = 0, written = 0, err_node = -1, lim, nnodes
    cdef bint halt = False, blocked
    cdef Scratch t
    if start < 0 or pos < 0 or pos > cap or out_valid.shape[0] < (stop + 7) // 8:
        raise ValueError("encode_run: output arrays shorter than the rows")
    if not owide and cap > 0x7FFFFFFF:
        cap = 0x7FFFFFFF
    _encode_inputs(keep, nodes, cols, stop)
    nnodes = nodes[0].end
    blocked = block_ok(nodes, nnodes)
    _scratch(keep, &t, nnodes)
    if owide or out_valid.shape[0] == 0 or any(nodes[r].wide_in for r in range(nnodes)):
        machine_code = 0
    with nogil:
        while i < stop and not halt:
            lim = min(i + BLK, stop)
            if machine_code:
                i = (<EncodeCode>machine_code)(nodes, i, stop, o, cap, &pos, offs, &out_valid[0], &written)
                if i >= stop:
                    break
                lim = i + 1  # this entry takes the row walk, not a block
            elif blocked and encode_block(nodes, nnodes, &t, i, lim, o, &pos, cap):
                if t.allp[0] and (i | lim) & 7 == 0:
                    memset(&out_valid[i >> 3], 0xFF, (lim - i) >> 3)
                    written += lim - i
                    for r in range(lim - i):
                        put_off(offs, owide, i + r + 1, t.pos[r] + 4 + t.b[r])
                else:
                    for r in range(lim - i):
                        if t.pres[r]:
                            bit_set(&out_valid[0], i + r)
                            written += 1
                            put_off(offs, owide, i + r + 1, t.pos[r] + 4 + t.b[r])
                        else:
                            put_off(offs, owide, i + r + 1, t.pos[r])
                i = lim
                continue
            while i < lim:
                if nodes[0].valid_in == NULL or bit_get(nodes[0].valid_in, nodes[0].off_in + i):
                    if cap - pos < 4:
                        halt = True
                        break
                    r = encode_row(nodes, 0, i, o, pos + 4, cap, &err_node)
                    if r == -E_FULL:
                        halt = True
                        break
                    if r < 0:
                        status = encode_err(<int>(-r), err_node)
                        put_off(offs, owide, i + 1, pos)
                        halt = True
                        break
                    store_u32_be(o + pos, <uint32_t>r)
                    pos += r + 4
                    bit_set(&out_valid[0], i)
                    written += 1
                put_off(offs, owide, i + 1, pos)
                i += 1
    return i, pos, status, written


ctypedef int64_t (*DecodeCode)(const uint8_t* offs, const uint8_t* d, int64_t d_len, int64_t i, int64_t stop,
                               Node* nodes) noexcept nogil


def node_layout():
    """Size and field offsets of ``Node``, for encode / decode machine code
    (``statemorph.kernels.jit``), which reads a column's buffers and keeps its counters where
    ``encode_run`` / ``decode_run`` keep them."""
    cdef Node n
    cdef size_t b = <size_t>&n
    return dict(size=sizeof(Node), valid=<size_t>&n.valid - b, vals=<size_t>&n.vals - b, offs=<size_t>&n.offs - b,
                wide=<size_t>&n.wide - b, wide_size=sizeof(n.wide), sdata=<size_t>&n.sdata - b,
                scap=<size_t>&n.scap - b, spos=<size_t>&n.spos - b, sstart=<size_t>&n.sstart - b,
                count=<size_t>&n.count - b, valid_in=<size_t>&n.valid_in - b, vals_in=<size_t>&n.vals_in - b,
                offs_in=<size_t>&n.offs_in - b, off_in=<size_t>&n.off_in - b, vals_len=<size_t>&n.vals_len - b)


def decode_run(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop, list outs,
               int64_t[::1] counts, int64_t[::1] spos, size_t machine_code=0):
    """One-pass decode of entries ``start..stop``: validate each entry and scatter it into the
    Arrow outputs in the same walk. ``outs[node]`` = (validity bitmap, values, offsets, string
    data): node 0 has only its bitmap; string / binary nodes append their bytes to their string
    data from ``spos[node]`` on and write ``offsets[i + 1]`` (int32 or int64) for every entry;
    an ARRAY node writes its list offsets the same way, counting the elements it appends to its
    element column (whose outputs are indexed by element, ``spos`` the element count; a string or
    ARRAY node in an element column writes its offsets per element, an array in an array being
    an element column of its own); a MAP node has only its bitmap, its key and value ARRAY nodes
    (the next nodes) write alike offsets. ``counts[node]`` counts the valid values written.
    ``offsets[start]`` is the caller's; int32 offsets never pass 2**31 - 1.

    Returns ``(next_row, status)``: ``next_row < stop`` means entry ``next_row`` is bad (``status``
    = its encoded error, or HAND_BACK for a map the reference must judge; it is null everywhere:
    resume at ``next_row + 1``) or some string data
    buffer or element column is full (``status`` 0: grow them keeping their contents, resume at
    ``next_row``). ``machine_code``: the address of the row type's decode machine code
    (``statemorph.kernels.jit``; plain input only), 0 for none: it takes entries until one it does
    not take, which the walk below decodes (or reports) before the machine code resumes."""
    cdef _Keep keep = _Keep()
    cdef BinView v = _view(keep, offsets, data, validity, offset, wide, stop)
    cdef Node* nodes = _lower(keep, prog)
    cdef int64_t nnodes = nodes[0].end
    cdef int64_t* snodes = <int64_t*>keep.table(nnodes)  # per-row positions: strings, arrays
    cdef int64_t* enodes = <int64_t*>keep.table(nnodes)  # per-element positions: strings, arrays in arrays
    cdef int64_t nstr = 0, nelem = 0, c, i = start, base = 0, size = 0, r, status = 0, lim = start, cap, k
    cdef int code
    cdef bint blocked, elem
    cdef Scratch t
    cdef Ctx x
    cdef Node* nd
    if len(outs) != nnodes or counts.shape[0] < nnodes or spos.shape[0] < nnodes or start < 0:
        raise ValueError("decode_run: one output and one counter per program node is required")
    for c in range(nnodes):
        nd = &nodes[c]
        bits, vals, offs, sdata = outs[c]
        nd.valid = keep.rw(bits)
        nd.count = counts[c]
        nd.spos = nd.sstart = spos[c]
        elem = c > 0 and nd.arr >= 0
        cap = len(u8(bits)) * 8  # values the outputs hold: rows, or elements in an element column
        k = nd.kind
        if c == 0 or k == R_ROW or k == R_MAP:
            pass
        elif k == R_ARRAY or k == R_STR or k == R_BIN:  # offsets per row, or per element of the array above
            nd.offs = _offsets_out(keep, offs, stop if k == R_ARRAY and not elem else 0, &nd.wide)
            cap = min(cap, len(u8(offs)) // (8 if nd.wide else 4) - 1)
            if k == R_ARRAY:
                nd.scap = 0x7FFFFFFFFFFFFFFF if nd.wide else 0x7FFFFFFF  # lowered to its columns' room below
            else:
                nd.sdata = keep.rw(sdata)
                nd.scap = len(u8(sdata))
                if not nd.wide and nd.scap > 0x7FFFFFFF:
                    nd.scap = 0x7FFFFFFF
                if nd.spos < 0 or nd.spos > nd.scap:
                    raise ValueError(f"decode_run: node {c}: string position outside its buffer")
            if elem:
                enodes[nelem] = c
                nelem += 1
            else:
                snodes[nstr] = c
                nstr += 1
        elif k == R_BOOL or nd.width or k == R_DEC_COMPACT or k == R_DEC_BIG or k == R_TS_BIG:
            nd.vals = keep.rw(vals)
            cap = min(cap, len(u8(vals)) * 8 if k == R_BOOL else len(u8(vals)) // arrow_width(k))
        else:
            raise ValueError(f"decode_run: node {c}: kind {k} is not decodable")
        if elem:
            # elements the array may append: what every column of its elements holds
            nodes[nd.arr].scap = min(nodes[nd.arr].scap, cap)
            if not 0 <= nodes[nd.arr].spos <= cap:
                raise ValueError(f"decode_run: node {c}: element position outside its outputs")
        elif cap < stop:
            raise ValueError(f"decode_run: node {c}: outputs shorter than the rows")
    memset(&x, 0, sizeof(Ctx))
    x.prog = _prog(keep, prog)
    x.d = v.data
    x.d_len = v.data_len
    for c in range(nnodes):  # arrays repeat what the data says: meter (the blocked walk has none)
        x.metered = x.metered or nodes[c].kind == R_ARRAY
    blocked = block_ok(nodes, nnodes)
    _scratch(keep, &t, nnodes)
    if v.wide or v.validity != NULL:
        machine_code = 0
    with nogil:
        while i < stop:
            if machine_code:
                i = (<DecodeCode>machine_code)(v.offsets + 4 * v.offset, v.data, v.data_len, i, stop, nodes)
                if i >= stop:
                    break
                lim = i + 1  # this entry takes the row walk, not a block
            elif blocked and i == lim:
                lim = min(i + BLK, stop)
                if decode_block(&x, &v, nodes, nnodes, &t, i, lim):
                    i = lim
                    continue
            if bv_valid(&v, i):
                x.err_node = -1
                code = entry_row(&v, i, &base, &size)
                if code == E_OK:
                    x.budget = size  # the reference's: a unit per byte of the row
                    r = decode_row(&x, nodes, 0, base, size, i)
                    if r < 0:
                        decode_rollback(nodes, nnodes, i)
                        if r == -E_FULL:
                            break
                        code = <int>(-r)
                if code != E_OK:
                    status = encode_err(code, x.err_node)
                else:
                    bit_set(nodes[0].valid, i)
                    nodes[0].count += 1
            for c in range(nstr):
                nd = &nodes[snodes[c]]
                put_off(nd.offs, nd.wide, i + 1, nd.spos)
                nd.sstart = nd.spos
            for c in range(nelem):
                nodes[enodes[c]].sstart = nodes[enodes[c]].spos
            if status != 0:
                break
            i += 1
    for c in range(nnodes):
        counts[c] = nodes[c].count
        spos[c] = nodes[c].spos
    return i, status
