# Included by rowdata.pyx (one extension module: the walks call each other and inline).
# Encode walks: Arrow columns to RowData entries, row at a time and blocked.

cdef inline int64_t encode_str(const Node* nd, int64_t i, uint8_t* o, int64_t ob, int64_t slot, int64_t cur,
                              int64_t cap) noexcept nogil:
    """Write string / binary i of column ``nd`` into the slot at ``o[slot]``: inline up to 7
    bytes, else padded at ``o[ob + cur]`` (the var part of the row or array based at ``ob``).
    Returns the new ``cur``, -ERR_BAD_ARROW, -ERR_TOO_LARGE or -ERR_FULL."""
    cdef int64_t s = 0, n = arrow_str(nd, i, &s)
    if n < 0:
        return -ERR_BAD_ARROW
    if n > 0x7FFFFFFF:
        return -ERR_TOO_LARGE
    if n <= 7:
        store_u64_le(o + slot, load_short(nd.vals_in + s, n, nd.vals_len - s) | ((<uint64_t>(0x80 | n)) << 56))
        return cur
    if round_up8(n) > cap - ob - cur:
        return -ERR_FULL
    copy_padded(o + ob + cur, nd.vals_in + s, n, nd.vals_len - s)
    store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>n)
    return cur + round_up8(n)


cdef inline int64_t encode_big(const Node* nd, int64_t e, uint8_t* slot, uint8_t* var, int64_t cur,
                              int64_t room) noexcept nogil:
    """Arrow value e of a DECIMAL(p > 18) / TIMESTAMP(p > 3) column into its slot and var part:
    the unscaled value's minimal big-endian two's complement bytes in a 16-byte var part, or
    the epoch milliseconds (8 bytes) with the nano-of-millisecond in the slot. Returns the var
    bytes used, -ERR_TOO_LARGE (more digits than p) or -ERR_FULL."""
    cdef uint64_t lo
    cdef int64_t hi, v, millis, b, n
    cdef sm_i128 u
    if nd.kind == SLOT_TS_BIG:
        memcpy(&v, nd.vals_in + 8 * e, 8)
        millis = v // nd.limit  # C division truncates: floor for negative values
        if millis * nd.limit > v:
            millis -= 1
        if room < 8:
            return -ERR_FULL
        store_u64_le(var, <uint64_t>millis)
        store_u64_le(slot, ((<uint64_t>cur) << 32) | <uint64_t>((v - millis * nd.limit) * (1000000 // nd.limit)))
        return 8
    memcpy(&lo, nd.vals_in + 16 * e, 8)
    memcpy(&hi, nd.vals_in + 16 * e + 8, 8)
    u = sm_i128_of(lo, hi)
    if u <= -nd.big_limit or u >= nd.big_limit:
        return -ERR_TOO_LARGE
    if room < 16:
        return -ERR_FULL
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
    checked in program order, so the first error is the reference tier's) or -ERR_FULL."""
    cdef const Node* r = &nodes[node]
    cdef const Node* nd
    cdef int64_t cur = r.fixed
    cdef int64_t c = node + 1, slot, k, n, s = 0, sub, bit, e
    cdef int64_t lo, hi
    # the first null-bit word lives in a register (see check_migrate_row)
    cdef uint64_t nb0 = 0
    if cur > cap - ob:
        return -ERR_FULL
    for k in range(8, cur, 8):  # the first word is nb0, stored last
        store_u64_le(o + ob + k, 0)
    while c < r.end:
        nd = &nodes[c]
        e = nd.off_in + i
        if nd.valid_in != NULL and not bit_get(nd.valid_in, e):
            if nd.flags & FLAG_NOT_NULL:
                err_node[0] = c
                return -ERR_NULL_NOT_ALLOWED
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
        elif k == SLOT_STR or k == SLOT_BIN:
            cur = encode_str(nd, i, o, ob, slot, cur, cap)
            if cur < 0:
                if cur != -ERR_FULL:
                    err_node[0] = c
                return cur
        elif k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
            sub = encode_nested(nodes, c, i, o, ob + cur, cap, err_node)
            if sub < 0:
                return sub
            store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>sub)
            cur += round_up8(sub)
        elif k == SLOT_BOOL:
            o[slot] = bit_get(nd.vals_in, e)
        elif k == SLOT_DEC_COMPACT:
            memcpy(&lo, nd.vals_in + 16 * e, 8)
            memcpy(&hi, nd.vals_in + 16 * e + 8, 8)
            if hi != (-1 if lo < 0 else 0) or lo <= -nd.limit or lo >= nd.limit:
                err_node[0] = c  # more digits than DECIMAL(p, s) holds
                return -ERR_TOO_LARGE
            memcpy(o + slot, &lo, 8)
        elif k == SLOT_DEC_BIG or k == SLOT_TS_BIG:
            sub = encode_big(nd, e, o + slot, o + ob + cur, cur, cap - ob - cur)
            if sub < 0:
                if sub != -ERR_FULL:
                    err_node[0] = c
                return sub
            cur += sub
        c = nd.end
    store_u64_le(o + ob, nb0)
    return cur


cdef inline void canonical_nan(uint8_t* slot, int64_t k) noexcept nogil:
    """A NaN FLOAT / DOUBLE array element becomes Java's canonical NaN, as ``BinaryArrayWriter``
    writes it (row fields keep their bits)."""
    cdef uint64_t w
    if k == SLOT_F32:
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
    var parts, each padded to 8. Returns its size, -code (``err_node`` set) or -ERR_FULL."""
    cdef const Node* nd = &nodes[node]
    cdef const Node* el = &nodes[node + 1]
    cdef int64_t s = 0, n, j, ei, es, header, cur, slot, k, sub
    cdef int64_t lo, hi
    n = arrow_str(nd, i, &s)  # list offsets are read like string offsets (bound: the element count)
    if n < 0:
        err_node[0] = node
        return -ERR_BAD_ARROW
    if n > 0x7FFFFFFF:
        err_node[0] = node
        return -ERR_TOO_LARGE
    k = el.kind
    es = elem_size(k)
    header = array_header(n)
    cur = round_up8(header + n * es)
    if cur > cap - ob:
        return -ERR_FULL
    memset(o + ob, 0, cur)
    store_u32_le(o + ob, <uint32_t>n)
    for j in range(n):
        ei = s + j
        if el.valid_in != NULL and not bit_get(el.valid_in, el.off_in + ei):
            if el.flags & FLAG_NOT_NULL:
                err_node[0] = node + 1
                return -ERR_NULL_NOT_ALLOWED
            o[ob + 4 + (j >> 3)] |= <uint8_t>(1 << (j & 7))
            continue
        slot = ob + header + j * es
        if el.width:
            memcpy(o + slot, el.vals_in + el.width * (el.off_in + ei), el.width)
            if k == SLOT_F32 or k == SLOT_F64:
                canonical_nan(o + slot, k)
        elif k == SLOT_BOOL:
            o[slot] = bit_get(el.vals_in, el.off_in + ei)
        elif k == SLOT_DEC_COMPACT:
            memcpy(&lo, el.vals_in + 16 * (el.off_in + ei), 8)
            memcpy(&hi, el.vals_in + 16 * (el.off_in + ei) + 8, 8)
            if hi != (-1 if lo < 0 else 0) or lo <= -el.limit or lo >= el.limit:
                err_node[0] = node + 1
                return -ERR_TOO_LARGE
            memcpy(o + slot, &lo, 8)
        elif k == SLOT_STR or k == SLOT_BIN:
            cur = encode_str(el, ei, o, ob, slot, cur, cap)
            if cur < 0:
                if cur != -ERR_FULL:
                    err_node[0] = node + 1
                return cur
        else:  # SLOT_ROW / SLOT_ARRAY / SLOT_MAP elements
            sub = encode_nested(nodes, node + 1, ei, o, ob + cur, cap, err_node)
            if sub < 0:
                return sub
            store_u64_le(o + slot, ((<uint64_t>cur) << 32) | <uint64_t>sub)
            cur += round_up8(sub)
    return cur


cdef int64_t encode_nested(Node* nodes, int64_t c, int64_t i, uint8_t* o, int64_t ob, int64_t cap,
                           int64_t* err_node) noexcept nogil:
    """Row / element i of the ROW, ARRAY or MAP node c at ``o[ob:]``: its size (a map's is not a
    multiple of 8: its pad is zeroed, and the caller's var part skips it), -code or -ERR_FULL."""
    cdef int64_t k = nodes[c].kind
    if k == SLOT_ROW:
        return encode_row(nodes, c, i, o, ob, cap, err_node)
    if k == SLOT_ARRAY:
        return encode_array(nodes, c, i, o, ob, cap, err_node)
    return encode_map(nodes, c, i, o, ob, cap, err_node)


cdef int64_t encode_map(Node* nodes, int64_t m, int64_t i, uint8_t* o, int64_t ob, int64_t cap,
                        int64_t* err_node) noexcept nogil:
    """The BinaryMapData of map i of MAP node m (``i32 LE key-array bytes ‖ key array ‖ value
    array``; both arrays read the map's list offsets) at ``o[ob:]``, padded to 8 with zeros.
    Returns its unpadded size, -code, -ERR_FULL, or -HAND_BACK (``err_node`` = m) when the keys
    may repeat: checked right after the keys, before any value, since the reference keeps only
    the last value of equal keys (it builds a dict) and so never sees the others."""
    cdef int64_t kn = m + 1, kb, vb, size
    if 4 > cap - ob:
        return -ERR_FULL
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
        return -ERR_FULL
    store_u32_le(o + ob, <uint32_t>kb)
    memset(o + ob + size, 0, round_up8(size) - size)
    return size


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
            not_null = nd.flags & FLAG_NOT_NULL
            for r in range(nb):
                P[r] = PR[r] and bit_get(vbits, off + r)
                if not_null and PR[r] and not P[r]:
                    return False
        k = nd.kind
        if k == SLOT_STR or k == SLOT_BIN:
            for r in range(nb):
                if P[r]:
                    n = arrow_str(nd, b0 + r, &S[r])
                    if n < 0 or n > 0x7FFFFFFF:
                        return False
                    Bc[r] = n
                    if n > 7:
                        A[r] = BR[r]
                        BR[r] += round_up8(n)
        elif k == SLOT_ROW:
            fixed = nd.fixed
            for r in range(nb):
                if P[r]:
                    A[r] = AR[r] + BR[r]
                    Bc[r] = fixed
            t.stack[top] = c
            top += 1
        elif k == SLOT_DEC_COMPACT:
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
        if allp and k == SLOT_ROW:
            for r in range(nb):
                e = at[r] + 4 + A[r]
                zero_words(o + e, nw)
                store_u64_le(o + AR[r] + slot, ((<uint64_t>(e - AR[r])) << 32) | <uint64_t>Bc[r])
                A[r] = e
            continue
        if allp and (k == SLOT_STR or k == SLOT_BIN):
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
            elif k == SLOT_STR or k == SLOT_BIN:
                write_str(o + AR[r], slot, A[r], vin + S[r], Bc[r], vlen - S[r])
            elif k == SLOT_ROW:
                e = at[r] + 4 + A[r]
                zero_words(o + e, nw)
                store_u64_le(o + AR[r] + slot, ((<uint64_t>(e - AR[r])) << 32) | <uint64_t>Bc[r])
                A[r] = e
            elif k == SLOT_BOOL:
                store_u64_le(o + AR[r] + slot, bit_get(vin, e))
            else:  # SLOT_DEC_COMPACT
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


cdef inline void close_row(const Node* nodes, Scratch* t, int64_t c, int64_t nb) noexcept nogil:
    """A nested row's fields are all placed: its size joins its parent's used bytes."""
    cdef int64_t R = nodes[c].parent, r
    cdef const uint8_t* P = t.pres + c * BLK
    cdef const int64_t* Bc = t.b + c * BLK
    cdef int64_t* BR = t.b + R * BLK
    for r in range(nb):
        if P[r]:
            BR[r] += Bc[r]
