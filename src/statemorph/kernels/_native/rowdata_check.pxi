# Included by rowdata.pyx (one extension module: the walks call each other and inline).
# Validation walks: a RowData value (rows, arrays, maps) checked against its program without
# writing anything (what a verbatim copy needs).

cdef int64_t check_array(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate the BinaryArrayData at d[base:base+size] (element program: ``node + 1``); return
    its migrated size (``size`` itself when the node is verbatim) or -code."""
    cdef const uint8_t* d = x.d
    cdef int64_t e = node + 1
    cdef int64_t k = P(x, e, COL_KIND)
    cdef int64_t es = elem_size(k)
    cdef int64_t n, header, lo, i, slot, off, ln, r, new_size
    cdef uint64_t raw
    cdef uint8_t mark
    cdef bint verbatim = P(x, node, COL_FLAGS) & FLAG_VERBATIM
    if size < 4:
        x.err_node = node
        return -ERR_TRUNCATED
    n = <int32_t>load_u32_le(d + base)
    if n < 0:
        x.err_node = node
        return -ERR_BAD_LENGTH
    header = array_header(n)
    if header + n * es > size:
        x.err_node = node
        return -ERR_TRUNCATED
    r = spend(x, node, n + 1)
    if r < 0:
        return r
    lo = round_up8(header + n * es)
    if lo > size:
        lo = size
    new_size = round_up8(header + 8 * n)
    if k < SLOT_STR or k == SLOT_DEC_COMPACT:
        return size
    for i in range(n):
        if (d[base + 4 + (i >> 3)] >> (i & 7)) & 1:
            continue
        slot = base + header + i * es
        raw = load_u64_le(d + slot)
        mark = d[slot + 7]
        if mark & 0x80:
            ln = inline_check(d, slot, raw, k)
            if ln != ERR_OK:
                x.err_node = e
                return -ln
            continue
        ln = var_span(x, e, k, raw, base, size, lo)
        if ln < 0:
            return ln
        off = <int64_t>(raw >> 32)
        r = 0
        if k == SLOT_ROW:
            r = check_row(x, e, base + off, ln)
        elif k == SLOT_ARRAY:
            r = check_array(x, e, base + off, ln)
        elif k == SLOT_MAP:
            r = check_map(x, e, base + off, ln)
        if r < 0:
            return r
        new_size += round_up8(r)
    return size if verbatim else new_size


cdef int64_t check_map(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate a BinaryMapData: i32 LE key-array bytes ‖ key array ‖ value array; a map whose
    keys may repeat or hold a null (``keys_suspect``) is -HAND_BACK, for the reference to judge.
    Decode, migrate and verbatim copies all pass here, so every path has one duplicate-key rule."""
    cdef const uint8_t* d = x.d
    cdef int64_t kn = node + 1
    cdef int64_t vn = P(x, kn, COL_END)
    cdef int64_t kb, rk, rv
    if size < 4:
        x.err_node = node
        return -ERR_TRUNCATED
    kb = <int32_t>load_u32_le(d + base)
    if kb < 0 or kb > size - 4:
        x.err_node = node
        return -ERR_BAD_LENGTH
    rk = check_array(x, kn, base + 4, kb)
    if rk < 0:
        return rk
    rv = check_array(x, vn, base + 4 + kb, size - 4 - kb)
    if rv < 0:
        return rv
    if <int32_t>load_u32_le(d + base + 4) != <int32_t>load_u32_le(d + base + 4 + kb):
        x.err_node = node
        return -ERR_BAD_LENGTH
    if keys_suspect(d, x.d_len, base + 4, P(x, kn + 1, COL_KIND)):
        x.err_node = node  # keys that may repeat, or a null one: the reference decides
        return -HAND_BACK
    if P(x, node, COL_FLAGS) & FLAG_VERBATIM:
        return size
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
        return -ERR_TRUNCATED
    if d[base] > 3:
        x.err_node = node
        return -ERR_BAD_HEADER
    for b in range(ow // 8):
        raw = load_u64_le(d + base + 8 * b)
        off = old_arity + 8 - 64 * b
        if off <= 0:
            if raw != 0:
                x.err_node = node
                return -ERR_BAD_HEADER
        elif off < 64 and (raw >> off) != 0:
            x.err_node = node
            return -ERR_BAD_HEADER
    return spend(x, node, old_arity + 1)


cdef int64_t check_row(Ctx* x, int64_t node, int64_t base, int64_t size) noexcept nogil:
    """Validate the old row at d[base:base+size] for this node's (sub)program and return the size of
    the new row a migration writes (decode ignores it); a negative value is -code, with
    ``x.err_node`` set."""
    cdef const uint8_t* d = x.d
    cdef int64_t arity = P(x, node, COL_ARITY)
    cdef int64_t old_arity = P(x, node, COL_OLD_ARITY)
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
    end = P(x, node, COL_END)
    c = node + 1
    while c < end:
        src = P(x, c, COL_SRC)
        k = P(x, c, COL_KIND)
        flags = P(x, c, COL_FLAGS)
        if src < 0 or null_bit(d, base, src):
            c = P(x, c, COL_END)
            continue
        slot = base + ow + 8 * src
        if k >= SLOT_STR and k != SLOT_DEC_COMPACT:
            mark = d[slot + 7]
            raw = load_u64_le(d + slot)
            if mark & 0x80:
                r = inline_check(d, slot, raw, k)
                if r != ERR_OK:
                    x.err_node = c
                    return -r
                c = P(x, c, COL_END)
                continue
            n = var_span(x, c, k, raw, base, size, ofixed)
            if n < 0:
                return n
            off = <int64_t>(raw >> 32)
            if k == SLOT_STR or k == SLOT_BIN:
                new_size += round_up8(n)
            elif k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
                if k == SLOT_ROW:
                    r = check_row(x, c, base + off, n)
                elif k == SLOT_ARRAY:
                    r = check_array(x, c, base + off, n)
                else:
                    r = check_map(x, c, base + off, n)
                if r < 0:
                    return r
                new_size += round_up8(n) if (flags & FLAG_VERBATIM) else round_up8(r)
            elif k == SLOT_DEC_BIG:
                new_size += 16
            else:
                new_size += round_up8(n)
        c = P(x, c, COL_END)
    return new_size
