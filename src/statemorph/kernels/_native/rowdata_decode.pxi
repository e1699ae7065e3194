# Included by rowdata.pyx (one extension module: the walks call each other and inline).
# Decode walks: RowData entries to Arrow columns, row at a time and blocked.

cdef int64_t decode_row(Ctx* x, Node* nodes, int64_t node, int64_t base, int64_t size, int64_t i) noexcept nogil:
    """Validate the row at d[base:base+size] (the checks of ``check_row``, in its order) and
    scatter it into row i of the Arrow outputs in the same walk. Returns 0, -code (``x.err_node``
    set) or -ERR_FULL; a failed entry leaves partial outputs that the caller rolls back."""
    cdef const uint8_t* d = x.d
    cdef const Node* r = &nodes[node]
    cdef Node* nd
    cdef int64_t c, j, slot, k, n, off, src, rc
    cdef uint64_t raw, nb0
    cdef uint8_t mark
    rc = check_row_header(x, node, base, size, r.arity)
    if rc < 0:
        return rc
    if node != 0 and d[base] != 0:
        # a nested row whose RowKind is not INSERT: an Arrow struct has no row kind, so the
        # reference reads the entry and the Arrow conversion refuses it, naming the path
        x.err_node = node
        return -HAND_BACK
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
        if k == SLOT_I64 or k == SLOT_F64:
            memcpy(nd.vals + 8 * i, d + slot, 8)
        elif k == SLOT_I32 or k == SLOT_F32:
            memcpy(nd.vals + 4 * i, d + slot, 4)
        elif k == SLOT_STR or k == SLOT_BIN or k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
            raw = load_u64_le(d + slot)
            mark = <uint8_t>(raw >> 56)
            if mark & 0x80:
                rc = inline_check(d, slot, raw, k)
                if rc != ERR_OK:
                    x.err_node = c
                    return -rc
                n = mark & 0x7F
                src = slot
            else:
                off = <int64_t>(raw >> 32)
                n = <int64_t>(raw & 0xFFFFFFFFu)
                if off < r.fixed or off + n > size:
                    x.err_node = c
                    return -ERR_BAD_OFFSET
                if k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
                    if k == SLOT_ROW:
                        rc = decode_row(x, nodes, c, base + off, n, i)
                    elif k == SLOT_ARRAY:
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
                if k == SLOT_STR and not utf8_valid(d + base + off, n):
                    x.err_node = c
                    return -ERR_BAD_UTF8
                src = base + off
            if not put_bytes(nd, d + src, n):
                return -ERR_FULL
        elif k == SLOT_DEC_BIG or k == SLOT_TS_BIG:
            rc = decode_big(d, nd, i, slot, base, r.fixed, size)
            if rc != ERR_OK:
                x.err_node = c
                return -rc
        else:
            put_value(nd, i, d + slot)
        c = nd.end
    return 0


cdef inline int decode_big(const uint8_t* d, Node* nd, int64_t i, int64_t slot, int64_t base, int64_t ofixed,
                           int64_t size) noexcept nogil:
    """Value i of a DECIMAL(p > 18) / TIMESTAMP(p > 3) field from its slot and var part, with
    ``check_row``'s checks in its order, then the Arrow range: ERR_OK or the code."""
    cdef uint64_t raw = load_u64_le(d + slot)
    cdef int64_t off = <int64_t>(raw >> 32), n = <int64_t>(raw & 0xFFFFFFFFu), b, v
    cdef sm_i128 u
    if raw >> 63:
        return ERR_BAD_INLINE
    if nd.kind == SLOT_TS_BIG:
        if n > 999999:
            return ERR_BAD_NANOS
        if off < ofixed or off + 8 > size:
            return ERR_BAD_OFFSET
        memcpy(&v, d + base + off, 8)
        if sm_mul_add(v, nd.limit, n // (1000000 // nd.limit), &v):
            return ERR_TOO_LARGE  # beyond the Arrow type's int64 range
        memcpy(nd.vals + 8 * i, &v, 8)
        return ERR_OK
    if n < 1 or n > 16:
        return ERR_BAD_LENGTH
    if off < ofixed or off + n > size:
        return ERR_BAD_OFFSET
    u = -1 if d[base + off] & 0x80 else 0
    for b in range(n):
        u = (u << 8) | d[base + off + b]
    if u <= -nd.big_limit or u >= nd.big_limit:
        return ERR_TOO_LARGE  # more digits than the Arrow decimal's precision
    for b in range(16):
        nd.vals[16 * i + b] = <uint8_t>(u >> (8 * b))
    return ERR_OK


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
    if k == SLOT_BOOL:
        if src[0] != 0:
            bit_set(nd.vals, i)
    elif k == SLOT_I8:
        nd.vals[i] = src[0]
    elif k == SLOT_I16:
        memcpy(nd.vals + 2 * i, src, 2)
    elif k == SLOT_I32 or k == SLOT_F32:
        memcpy(nd.vals + 4 * i, src, 4)
    elif k == SLOT_DEC_COMPACT:
        memcpy(nd.vals + 16 * i, src, 8)
        memset(nd.vals + 16 * i + 8, 0xFF if src[7] & 0x80 else 0, 8)
    else:
        memcpy(nd.vals + 8 * i, src, 8)


cdef int64_t decode_array(Ctx* x, Node* nodes, int64_t a, int64_t base) noexcept nogil:
    """Append the elements of the array at ``d[base:]`` (validated by ``check_array``) to the
    element column of ARRAY node ``a`` (its ``spos`` counts elements). Returns 0, -ERR_FULL or
    -HAND_BACK (from a map below)."""
    cdef const uint8_t* d = x.d
    cdef Node* A = &nodes[a]
    cdef Node* el = &nodes[a + 1]
    cdef int64_t n = <int32_t>load_u32_le(d + base), k = el.kind, es = elem_size(el.kind)
    cdef int64_t header = array_header(n), j, ei, slot, ln, src, first = A.spos
    cdef uint64_t raw
    cdef bint is_str = k == SLOT_STR or k == SLOT_BIN
    cdef int64_t c, rc
    if n > A.scap - A.spos:
        return -ERR_FULL
    A.spos += n  # first: a failure below rolls back the elements already written
    for j in range(n):
        ei = first + j
        if not (d[base + 4 + (j >> 3)] >> (j & 7)) & 1:
            bit_set(el.valid, ei)
            el.count += 1
            slot = base + header + j * es
            if k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
                raw = load_u64_le(d + slot)
                if k == SLOT_ROW:
                    rc = decode_row(x, nodes, a + 1, base + <int64_t>(raw >> 32), <int64_t>(raw & 0xFFFFFFFFu), ei)
                elif k == SLOT_ARRAY:
                    rc = decode_array(x, nodes, a + 1, base + <int64_t>(raw >> 32))
                else:
                    rc = decode_map(x, nodes, a + 1, base + <int64_t>(raw >> 32))
                if rc < 0:
                    return rc
            elif is_str:
                ln = elem_bytes(d, base, slot, &src)
                if not put_bytes(el, d + src, ln):
                    return -ERR_FULL
            else:
                put_value(el, ei, d + slot)
        if is_str:
            put_off(el.offs, el.wide, ei + 1, el.spos)
        elif k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
            # the string / list columns of this element column end at element ei too
            for c in range(a + 1, el.end):
                if nodes[c].arr == a and (nodes[c].kind == SLOT_STR or nodes[c].kind == SLOT_BIN
                                          or nodes[c].kind == SLOT_ARRAY):
                    put_off(nodes[c].offs, nodes[c].wide, ei + 1, nodes[c].spos)
    return 0


cdef int64_t decode_map(Ctx* x, Node* nodes, int64_t m, int64_t base) noexcept nogil:
    """Append the keys and values of the map at ``d[base:]`` (validated by ``check_map``, which
    also judged its keys) to the element columns of MAP node m's key and value arrays. Returns 0,
    -ERR_FULL, or -HAND_BACK from a nested row below."""
    cdef int64_t kn = m + 1, kb = <int32_t>load_u32_le(x.d + base), rc
    rc = decode_array(x, nodes, kn, base + 4)
    if rc < 0:
        return rc
    return decode_array(x, nodes, nodes[kn].end, base + 4 + kb)


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
                if entry_row(v, b0 + r, &base, &size) != ERR_OK or not row_header_ok(x, nd, base, size):
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
        if k == SLOT_ROW:
            t.nonull[c] = nd.nw == 8
        elif k != SLOT_STR and k != SLOT_BIN:
            continue
        need = 0
        for r in range(nb):
            if not P[r]:
                continue
            slot = AR[r] + nw + 8 * j
            raw = load_u64_le(d + slot)
            mark = <uint8_t>(raw >> 56)
            if mark & 0x80:
                if inline_check(d, slot, raw, k) != ERR_OK:
                    return False
                n = mark & 0x7F
                A[r] = slot
            else:
                off = <int64_t>(raw >> 32)
                n = <int64_t>(raw & 0xFFFFFFFFu)
                if off < rfixed or off + n > BR[r]:
                    return False
                if k == SLOT_ROW:
                    if not row_header_ok(x, nd, AR[r] + off, n) or d[AR[r] + off] != 0:
                        return False  # (a nested RowKind other than INSERT: the row walk hands it back)
                    if load_u64_le(d + AR[r] + off) >> 8:
                        t.nonull[c] = False
                elif k == SLOT_STR and not utf8_valid(d + AR[r] + off, n):
                    return False
                A[r] = AR[r] + off
            Bc[r] = n
            need += n
        if k != SLOT_ROW and need > nd.scap - nd.spos:
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
        if valid == NULL and (k == SLOT_STR or k == SLOT_BIN) and scap - spos >= need_of(Bc, nb) + 8:
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
                elif k == SLOT_STR or k == SLOT_BIN:
                    n = Bc[r]
                    if n <= 8 and scap - spos >= 8 and dlen - A[r] >= 8:
                        store_u64_le(sdata + spos, load_u64_le(d + A[r]))
                    else:
                        memcpy(sdata + spos, d + A[r], n)
                    spos += n
                elif k == SLOT_BOOL:
                    if src[0] != 0:
                        bit_set(vals, i)
                elif k == SLOT_DEC_COMPACT:
                    memcpy(vals + 16 * i, src, 8)
                    memset(vals + 16 * i + 8, 0xFF if src[7] & 0x80 else 0, 8)
            if k == SLOT_STR or k == SLOT_BIN:
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
            if nd.kind == SLOT_BOOL:
                bit_clear(nd.vals, j)
    for c in range(1, nnodes):
        nodes[c].spos = nodes[c].sstart
