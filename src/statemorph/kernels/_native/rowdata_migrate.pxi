# Included by rowdata.pyx (one extension module: the walks call each other and inline).
# Migrate walks: old-schema RowData to new-schema RowData byte to byte, the general walk and the
# lowered-ops walk (``run_ops``).

cdef int64_t migrate_array(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o,
                           int64_t op) noexcept nogil:
    """Write the migrated copy of a validated array whose elements are rows / arrays / maps."""
    cdef const uint8_t* d = x.d
    cdef int64_t e = node + 1
    cdef int64_t k = P(x, e, COL_KIND)
    cdef int64_t n, header, cur, i, off, ln, r, pad
    cdef uint64_t raw
    if P(x, node, COL_FLAGS) & FLAG_VERBATIM:
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
        if k == SLOT_ROW:
            r = migrate_row(x, e, base + off, ln, o, op + cur)
        elif k == SLOT_ARRAY:
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
    cdef int64_t vn = P(x, kn, COL_END)
    cdef int64_t kb = <int32_t>load_u32_le(d + base)
    cdef int64_t rk, rv
    if P(x, node, COL_FLAGS) & FLAG_VERBATIM:
        memcpy(o + op, d + base, size)
        return size
    rk = migrate_array(x, kn, base + 4, kb, o, op + 4)
    rv = migrate_array(x, vn, base + 4 + kb, size - 4 - kb, o, op + 4 + rk)
    store_u32_le(o + op, <uint32_t>rk)
    return 4 + rk + rv


cdef int64_t migrate_row(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o, int64_t obase) noexcept nogil:
    """Write the new row for a validated old row; returns its size."""
    cdef const uint8_t* d = x.d
    cdef int64_t arity = P(x, node, COL_ARITY)
    cdef int64_t ow = null_bits_size(P(x, node, COL_OLD_ARITY))
    cdef int64_t nw = null_bits_size(arity)
    cdef int64_t cur = nw + 8 * arity
    cdef int64_t c, end, src, slot, nslot, k, n, r, j, bit, off, flags
    cdef uint64_t raw
    memset(o + obase, 0, cur)
    o[obase] = d[base]
    end = P(x, node, COL_END)
    c = node + 1
    while c < end:
        src = P(x, c, COL_SRC)
        j = P(x, c, COL_POS)
        k = P(x, c, COL_KIND)
        flags = P(x, c, COL_FLAGS)
        if src < 0 or null_bit(d, base, src):
            bit = j + 8
            o[obase + (bit >> 3)] |= <uint8_t>(1 << (bit & 7))
            c = P(x, c, COL_END)
            continue
        slot = base + ow + 8 * src
        nslot = obase + nw + 8 * j
        raw = load_u64_le(d + slot)
        if k < SLOT_STR or k == SLOT_DEC_COMPACT or ((k == SLOT_STR or k == SLOT_BIN) and (raw >> 63)):
            memcpy(o + nslot, d + slot, 8)
        else:
            off = <int64_t>(raw >> 32)
            n = <int64_t>(raw & 0xFFFFFFFFu)
            if (k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP) and not (flags & FLAG_VERBATIM):
                if k == SLOT_ROW:
                    r = migrate_row(x, c, base + off, n, o, obase + cur)
                elif k == SLOT_ARRAY:
                    r = migrate_array(x, c, base + off, n, o, obase + cur)
                else:
                    r = migrate_map(x, c, base + off, n, o, obase + cur)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>r)
                memset(o + obase + cur + r, 0, round_up8(r) - r)
                cur += round_up8(r)
            elif k == SLOT_DEC_BIG:
                memset(o + obase + cur, 0, 16)
                memcpy(o + obase + cur, d + base + off, n)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += 16
            elif k == SLOT_TS_BIG:
                memcpy(o + obase + cur, d + base + off, 8)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += 8
            else:
                memcpy(o + obase + cur, d + base + off, n)
                r = round_up8(n)
                memset(o + obase + cur + n, 0, r - n)
                store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
                cur += r
        c = P(x, c, COL_END)
    return cur


# internal status of the one-walk migrate: the output buffer is too small for this entry (not a
# data error; the caller grows the buffer and retries the entry)
cdef enum:
    ERR_FULL = 1000


cdef inline int64_t var_field(Ctx* x, int64_t c, int64_t k, int64_t flags, uint64_t raw, int64_t base,
                              int64_t size, int64_t ofixed, int64_t slot, uint8_t* o, int64_t obase,
                              int64_t nslot, int64_t cur, int64_t cap) noexcept nogil:
    """Validate and write one non-null variable-length field (slot word ``raw`` of the old row at
    ``base``; new slot at ``o[nslot]``, new var part from ``o[obase + cur]``). Returns the new
    ``cur``, -code (``x.err_node`` set) or -ERR_FULL. One function for the generic and the fast walk,
    so both check in the same order and report the same first error."""
    cdef const uint8_t* d = x.d
    cdef uint8_t mark = <uint8_t>(raw >> 56)
    cdef int64_t off, n, r, pad
    if mark & 0x80:
        r = inline_check(d, slot, raw, k)
        if r != ERR_OK:
            x.err_node = c
            return -r
        store_u64_le(o + nslot, raw)
        return cur
    n = var_span(x, c, k, raw, base, size, ofixed)
    if n < 0:
        return n
    off = <int64_t>(raw >> 32)
    if k == SLOT_TS_BIG:
        if 8 > cap - obase - cur:
            return -ERR_FULL
        memcpy(o + obase + cur, d + base + off, 8)
        store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | (raw & 0xFFFFFFFFu))  # keeps the nanos
        return cur + 8
    if k == SLOT_DEC_BIG:
        if 16 > cap - obase - cur:
            return -ERR_FULL
        memset(o + obase + cur, 0, 16)
        memcpy(o + obase + cur, d + base + off, n)
        store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
        return cur + 16
    if k == SLOT_ROW and not (flags & FLAG_VERBATIM):
        r = check_migrate_row(x, c, base + off, n, o, obase + cur, cap)
        if r < 0:
            return r
        n = r
    else:
        if k == SLOT_ROW:
            r = check_row(x, c, base + off, n)
        elif k == SLOT_ARRAY:
            r = check_array(x, c, base + off, n)
        elif k == SLOT_MAP:
            r = check_map(x, c, base + off, n)
        else:
            r = 0
        if r < 0:
            return r
        if (k == SLOT_ARRAY or k == SLOT_MAP) and not (flags & FLAG_VERBATIM):
            if round_up8(r) > cap - obase - cur:
                return -ERR_FULL
            if k == SLOT_ARRAY:
                n = migrate_array(x, c, base + off, n, o, obase + cur)
            else:
                n = migrate_map(x, c, base + off, n, o, obase + cur)
        else:
            if round_up8(n) > cap - obase - cur:
                return -ERR_FULL
            memcpy(o + obase + cur, d + base + off, n)
    pad = round_up8(n) - n
    if pad > cap - obase - cur - n:
        return -ERR_FULL
    memset(o + obase + cur + n, 0, pad)
    store_u64_le(o + nslot, ((<uint64_t>cur) << 32) | <uint64_t>n)
    return cur + n + pad


cdef int64_t check_migrate_row(Ctx* x, int64_t node, int64_t base, int64_t size, uint8_t* o, int64_t obase,
                               int64_t cap) noexcept nogil:
    """``check_row`` and ``migrate_row`` in one walk: validate the old row at d[base:base+size] and
    write its new row at ``o[obase:]`` (never past ``cap``). Returns the new size, -code (with
    ``x.err_node``, the same first error ``check_row`` reports: checks run in the same order) or
    -ERR_FULL. Bytes written for a row that then fails are garbage the caller discards. The general
    walk: rows wider than 56 fields, or reached through migrated arrays / maps (``run_ops`` runs
    everything else)."""
    cdef const uint8_t* d = x.d
    cdef const int64_t* pn = x.prog + node * PROGRAM_COLUMNS
    cdef const int64_t* pc
    cdef int64_t arity = pn[COL_ARITY]
    cdef int64_t old_arity = pn[COL_OLD_ARITY]
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
        return -ERR_FULL
    memset(o + obase, 0, cur)
    old_nb0 = load_u64_le(d + base)
    new_nb0 = d[base]
    end = pn[COL_END]
    c = node + 1
    while c < end:
        pc = x.prog + c * PROGRAM_COLUMNS
        src = pc[COL_SRC]
        j = pc[COL_POS]
        if src < 0 or (src < 56 and (old_nb0 >> (src + 8)) & 1) or (src >= 56 and null_bit(d, base, src)):
            bit = j + 8
            if bit < 64:
                new_nb0 |= (<uint64_t>1) << bit
            else:
                o[obase + (bit >> 3)] |= <uint8_t>(1 << (bit & 7))
            c = pc[COL_END]
            continue
        k = pc[COL_KIND]
        slot = base + ow + 8 * src
        nslot = obase + nw + 8 * j
        raw = load_u64_le(d + slot)
        if k < SLOT_STR or k == SLOT_DEC_COMPACT:
            store_u64_le(o + nslot, raw)
        else:
            cur = var_field(x, c, k, pc[COL_FLAGS], raw, base, size, ofixed, slot, o, obase, nslot, cur, cap)
            if cur < 0:
                return cur
        c = pc[COL_END]
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
        if n != ERR_OK:
            x.err_node = op.node
            return -n
        store_u64_le(o + obase + op.doff, raw)
        return cur
    off = <int64_t>(raw >> 32)
    n = <int64_t>(raw & 0xFFFFFFFFu)
    if off < ofixed or off + n > size:
        x.err_node = op.node
        return -ERR_BAD_OFFSET
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
        if kind == SLOT_STR and (acc & 0x8080808080808080ull) and not utf8_valid(src, n):
            x.err_node = op.node
            return -ERR_BAD_UTF8
    else:
        if kind == SLOT_STR and not utf8_valid(src, n):
            x.err_node = op.node
            return -ERR_BAD_UTF8
        if r8 > cap - obase - cur:
            return -ERR_FULL
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
        return -ERR_TRUNCATED
    nb0[0] = load_u64_le(d + base)
    if nb0[0] & op.forbid:
        x.err_node = op.node
        return -ERR_BAD_HEADER
    if op.nfixed > cap - obase:
        return -ERR_FULL
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
                    return -ERR_BAD_INLINE
                off = <int64_t>(raw >> 32)
                n = <int64_t>(raw & 0xFFFFFFFFu)
                if off < ofixed or off + n > size:
                    x.err_node = op.node
                    return -ERR_BAD_OFFSET
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
    cdef const int64_t* pn = prog + node * PROGRAM_COLUMNS
    return pn[COL_KIND] == SLOT_ROW and not (pn[COL_FLAGS] & FLAG_VERBATIM) and pn[COL_ARITY] <= 56 \
        and pn[COL_OLD_ARITY] <= 56
