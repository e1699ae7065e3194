# cython: language_level=3
"""flink-core ``Row`` (``RowSerializer``) between Arrow struct columns and Row bytes, in one pass.

A flink-core row is ``MASK ‖ non-null fields in DataStream formats``; the mask is MSB-first, with
two RowKind bits first when the serializer ``supportsRowKind``. Arrow has no RowKind column (as on
the per-value path): encode writes INSERT, decode drops the kind.

Why one pass, resumable: each row is sized then written (encode), or validated while it is
scattered into the per-field Arrow buffers (decode), while it is in cache; offsets are written in
the Arrow width the caller chose (int32 unless the data passes 2 GiB). A call stops at the first
bad row or at the first row that does not fit its buffer and says which; the caller records the
error or grows the buffer and calls again from there, so clean input needs no status array.

The program (int64 matrix, pre-order, 8 columns: KIND, POS, END, ARITY, -, -, FLAGS, WIDTH), the
contract of both functions and their Python twins are in ``statemorph.kernels.corerow_py``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from cursor cimport *
from stringvalue cimport *

__statemorph_native__ = True

# program columns, kinds and flags: generated from statemorph.kernels.abi
include "abi_corerow.pxi"

cdef enum:
    ERR_FULL = 1000            # internal: the row does not fit the output buffer

cdef int64_t MAX32 = 2147483647


ctypedef struct OutCol:
    uint8_t* valid   # Arrow validity bitmap of the node's column
    uint8_t* vals    # fixed-width values (a bitmap for BOOL)
    uint8_t* offs    # STR / CHAR / BYTES: Arrow offsets, int32 or int64 (wide)
    uint8_t* sdata   # STR / CHAR / BYTES: Arrow data
    int64_t cap      # bytes in sdata
    bint wide


cdef inline int64_t PP(const int64_t* p, int64_t node, int col) noexcept nogil:
    return p[node * PROGRAM_COLUMNS + col]

cdef inline bint is_var(int64_t kind) noexcept nogil:
    return kind == LEAF_STR or kind == LEAF_CHAR or kind == LEAF_BYTES

cdef inline int64_t mask_len(const int64_t* p, int64_t node, int64_t* kb) noexcept nogil:
    kb[0] = 2 if PP(p, node, COL_FLAGS) & FLAG_ROW_KIND else 0
    return (PP(p, node, COL_ARITY) + kb[0] + 7) >> 3

cdef inline bint mask_bit(const uint8_t* m, int64_t k) noexcept nogil:
    return (m[k >> 3] >> (7 - (k & 7))) & 1

# ------------------------------------------------------------------------------------------------
# encode
# ------------------------------------------------------------------------------------------------

cdef inline int jchar(const Cursor* s, uint32_t* unit) noexcept nogil:
    """An Arrow string holding one Java char: its UTF-16 unit, or ERR_BAD_UTF8 / ERR_BAD_JCHAR."""
    cdef int64_t q = s.pos, count = 0
    cdef uint32_t cp
    while q < s.end:
        if utf8_next(s.base, &q, s.end, &cp) != ERR_OK:
            return ERR_BAD_UTF8
        if count == 0:
            unit[0] = cp
        count += 1
    if count != 1 or unit[0] >= 0x10000:
        return ERR_BAD_JCHAR
    return ERR_OK


cdef inline int64_t var_size(int64_t k, const BinView* col, int64_t i, Cursor* s, uint32_t* u,
                             int* code) noexcept nogil:
    """Validate a STR / CHAR / BYTES value (cursor on its Arrow bytes); its encoded size."""
    code[0] = bv_entry(col, i, s)
    if code[0] != ERR_OK:
        return 0
    if k == LEAF_STR:
        return utf8_to_flink(s.base, s.pos, s.end, NULL, 0, code)
    if k == LEAF_CHAR:
        code[0] = jchar(s, u)
        return 2
    if s.end - s.pos > 0x7FFFFFFF:
        code[0] = ERR_TOO_LARGE
    return 4 + s.end - s.pos


cdef int64_t enc_size(const int64_t* p, const BinView* cols, int64_t node, int64_t i, int64_t* err) noexcept nogil:
    """Bytes of row ``i`` of row node ``node``, validating its values; -code with ``err`` set.
    Only for a row ``enc_row`` found too big for the buffer: the caller grows it to this."""
    cdef int64_t kb, r, k, c = node + 1, end = PP(p, node, COL_END)
    cdef int64_t size = mask_len(p, node, &kb)
    cdef Cursor s
    cdef uint32_t u
    cdef int code
    while c < end:
        k = PP(p, c, COL_KIND)
        if not bv_valid(&cols[c], i):
            c = PP(p, c, COL_END)
            continue
        if k == LEAF_ROW:
            r = enc_size(p, cols, c, i, err)
            if r < 0:
                return r
            size += r
        elif is_var(k):
            r = var_size(k, &cols[c], i, &s, &u, &code)
            if code != ERR_OK:
                err[0] = c
                return -code
            size += r
        else:
            size += PP(p, c, COL_WIDTH)
        c = PP(p, c, COL_END)
    return size


cdef int64_t enc_row(const int64_t* p, const BinView* cols, int64_t node, int64_t i, uint8_t* o, int64_t op,
                     int64_t cap, int64_t* err) noexcept nogil:
    """Validate and write row ``i`` at ``o + op`` in one walk. Returns the next position; -code
    with ``err`` set; or -ERR_FULL when the row does not fit below ``cap`` (what it wrote is void)."""
    cdef int64_t kb, k, n, w, bit, e, c = node + 1, end = PP(p, node, COL_END)
    cdef int64_t mlen = mask_len(p, node, &kb)
    cdef int64_t mask = op
    cdef const uint8_t* vals
    cdef Cursor s
    cdef uint32_t u = 0
    cdef uint16_t u16
    cdef int code
    if cap - op < mlen:
        return -ERR_FULL
    memset(o + op, 0, mlen)  # kind bits stay 0: Arrow rows are INSERT, as on the per-value path
    op += mlen
    while c < end:
        k = PP(p, c, COL_KIND)
        if not bv_valid(&cols[c], i):
            bit = kb + PP(p, c, COL_POS)
            o[mask + (bit >> 3)] |= <uint8_t>(0x80 >> (bit & 7))
            c = PP(p, c, COL_END)
            continue
        if k == LEAF_ROW:
            op = enc_row(p, cols, c, i, o, op, cap, err)
            if op < 0:
                return op
            c = PP(p, c, COL_END)
            continue
        if is_var(k):
            n = var_size(k, &cols[c], i, &s, &u, &code)
            if code != ERR_OK:
                err[0] = c
                return -code
            if cap - op < n:
                return -ERR_FULL
            if k == LEAF_STR:
                utf8_to_flink(s.base, s.pos, s.end, o, op, &code)
            elif k == LEAF_CHAR:
                store_u16_be(o + op, <uint16_t>u)
            else:
                store_u32_be(o + op, <uint32_t>(n - 4))
                if n > 4:
                    memcpy(o + op + 4, s.base + s.pos, n - 4)
            op += n
            c = PP(p, c, COL_END)
            continue
        w = PP(p, c, COL_WIDTH)
        if cap - op < w:
            return -ERR_FULL
        vals = cols[c].data
        e = cols[c].offset + i
        if k == LEAF_BOOL:
            o[op] = bit_get(vals, e)
        elif k == LEAF_I8:
            o[op] = vals[e]
        elif k == LEAF_I16:
            memcpy(&u16, vals + 2 * e, 2)
            store_u16_be(o + op, u16)
        elif k == LEAF_I32:
            store_u32_be(o + op, load_u32_le(vals + 4 * e))
        elif k == LEAF_F32:
            store_u32_be(o + op, java_f32_bits(load_u32_le(vals + 4 * e)))
        elif k == LEAF_I64:
            store_u64_be(o + op, load_u64_le(vals + 8 * e))
        else:
            store_u64_be(o + op, java_f64_bits(load_u64_le(vals + 8 * e)))
        op += w
        c = PP(p, c, COL_END)
    return op


cdef const int64_t* _prog(list keep, prog) except NULL:
    cdef const int64_t[:, ::1] pm = prog
    if pm.shape[1] != PROGRAM_COLUMNS or pm.shape[0] < 1 or pm[0, COL_END] != pm.shape[0] or pm[0, COL_KIND] != LEAF_ROW:
        raise ValueError("bad flink-core Row program")
    keep.append(pm)
    return &pm[0, 0]


cdef void _in_cols(list keep, const int64_t* p, list cols, int64_t stop, BinView* cv) except *:
    """The Arrow input column of every node as a BinView (values in ``data``), after checking
    that each buffer covers rows ``0..stop``."""
    cdef int64_t node, kind, n = p[COL_END], need
    cdef const uint8_t[::1] mv
    if len(cols) != n:
        raise ValueError("one Arrow column per program node is required")
    for node in range(n):
        validity, values, offs, off, wide, _ = cols[node]
        kind = PP(p, node, COL_KIND)
        if is_var(kind):
            cv[node] = bin_view(keep, offs, values, validity, off, wide, stop)
            continue
        memset(&cv[node], 0, sizeof(BinView))
        cv[node].offset = off
        if validity is not None:
            mv = u8(validity)
            if (off + stop + 7) // 8 > mv.shape[0]:
                raise ValueError(f"column {node}: validity buffer shorter than the array")
            keep.append(mv)
            cv[node].validity = &mv[0]
        if kind == LEAF_ROW:
            continue
        mv = u8(values)
        need = (off + stop + 7) // 8 if kind == LEAF_BOOL else (off + stop) * PP(p, node, COL_WIDTH)
        if need > mv.shape[0]:
            raise ValueError(f"column {node}: values buffer shorter than the array")
        keep.append(mv)
        cv[node].data = &mv[0] if mv.shape[0] else NULL
        cv[node].data_len = mv.shape[0]


def corerow_encode(prog, list cols, int64_t start, int64_t stop, out_off, uint8_t[::1] out_data, int64_t pos):
    """Encode rows ``start..stop`` into ``out_data`` from ``pos``; returns ``(row, pos, status)``
    (0 done, negative: row ``row`` is bad, positive: capacity row ``row`` needs)."""
    cdef list keep = []
    cdef const int64_t* p = _prog(keep, prog)
    cdef uint8_t[::1] om = u8(out_off)
    cdef bint wide_out = memoryview(out_off).itemsize == 8
    cdef uint8_t* o = &out_data[0] if out_data.shape[0] else NULL
    cdef int64_t cap = out_data.shape[0], i = start, r, err, status = 0
    cdef int64_t lim = cap if wide_out else min(cap, MAX32)  # int32 offsets end at 2 GiB
    cdef BinView* cv
    if om.shape[0] < (stop + 1) * (8 if wide_out else 4) or start < 0 or pos < 0 or pos > cap:
        raise ValueError("corerow_encode: output arrays shorter than the rows")
    cv = <BinView*>malloc(p[COL_END] * sizeof(BinView))
    if cv == NULL:
        raise MemoryError()
    try:
        _in_cols(keep, p, cols, stop, cv)
        with nogil:
            while i < stop:
                if bv_valid(&cv[0], i):
                    err = -1
                    r = enc_row(p, cv, 0, i, o, pos, lim, &err)
                    if r == -ERR_FULL:
                        r = enc_size(p, cv, 0, i, &err)
                        if r >= 0:
                            status = pos + r
                            break
                    if r < 0:
                        put_off(&om[0], wide_out, i + 1, pos)
                        status = encode_err(<int>(-r), err)
                        break
                    pos = r
                put_off(&om[0], wide_out, i + 1, pos)
                i += 1
    finally:
        free(cv)
    return i, pos, status


# ------------------------------------------------------------------------------------------------
# decode
# ------------------------------------------------------------------------------------------------

cdef inline int64_t room(const OutCol* oc, int64_t at, int64_t n) noexcept nogil:
    """0 when ``n`` more bytes fit the node's data at ``at``, else the capacity needed."""
    if n > oc.cap - at or (not oc.wide and at + n > MAX32):
        return at + n
    return 0


cdef int64_t dec_row(const int64_t* p, OutCol* oc, int64_t* spos, int64_t node, Cursor* c, int64_t i,
                     int64_t* err) noexcept nogil:
    """Scatter the row at the cursor into row ``i`` of the outputs, advancing the cursor. Returns
    0; -code (bad bytes); or the capacity a string column needs: ``err`` names the node."""
    cdef int64_t kb, k, n, w, r, save, ch = node + 1, end = PP(p, node, COL_END)
    cdef int64_t mlen = mask_len(p, node, &kb)
    cdef const uint8_t* m
    cdef OutCol* o
    cdef int32_t blen
    cdef uint32_t u
    cdef uint16_t u16
    cdef int code = ERR_OK
    cdef bint is_null
    if c.end - c.pos < mlen:
        err[0] = node
        return -ERR_TRUNCATED
    m = c.base + c.pos
    if mlen and m[mlen - 1] & ((1 << (mlen * 8 - PP(p, node, COL_ARITY) - kb)) - 1):
        err[0] = node  # padding bits after the last field are set
        return -ERR_BAD_HEADER
    if node != 0 and kb and (m[0] & 0xC0):
        # a nested row whose RowKind is not INSERT: an Arrow struct has no row kind, so the
        # reference reads the entry and the Arrow conversion refuses it, naming the path
        err[0] = node
        return -HAND_BACK
    c.pos += mlen
    while ch < end:
        k = PP(p, ch, COL_KIND)
        if mask_bit(m, kb + PP(p, ch, COL_POS)):
            ch = PP(p, ch, COL_END)
            continue
        o = &oc[ch]
        err[0] = ch
        if k == LEAF_ROW:
            bit_set(o.valid, i)
            r = dec_row(p, oc, spos, ch, c, i, err)
            if r != 0:
                return r
        elif k == LEAF_STR:
            save = c.pos
            # UTF-8 takes at most 1.5 bytes per StringValue byte: with that much room, one walk
            if room(o, spos[ch], (3 * (c.end - c.pos)) // 2 + 3):
                n = flink_to_utf8(c, NULL, 0, &code, &is_null)
                if n < 0:
                    return -code
                r = room(o, spos[ch], n)
                if r:
                    return r
                c.pos = save
            n = flink_to_utf8(c, o.sdata, spos[ch], &code, &is_null)
            if n < 0:
                return -code
            if not is_null:
                spos[ch] = n
                bit_set(o.valid, i)
        elif k == LEAF_CHAR:
            if c.end - c.pos < 2:
                return -ERR_TRUNCATED
            u = load_u16_be(c.base + c.pos)
            if u >= 0xD800 and u < 0xE000:
                return -ERR_LONE_SURROGATE
            n = 1 if u < 0x80 else (2 if u < 0x800 else 3)
            r = room(o, spos[ch], n)
            if r:
                return r
            if n == 1:
                o.sdata[spos[ch]] = <uint8_t>u
            elif n == 2:
                o.sdata[spos[ch]] = <uint8_t>(0xC0 | (u >> 6))
                o.sdata[spos[ch] + 1] = <uint8_t>(0x80 | (u & 0x3F))
            else:
                o.sdata[spos[ch]] = <uint8_t>(0xE0 | (u >> 12))
                o.sdata[spos[ch] + 1] = <uint8_t>(0x80 | ((u >> 6) & 0x3F))
                o.sdata[spos[ch] + 2] = <uint8_t>(0x80 | (u & 0x3F))
            spos[ch] += n
            c.pos += 2
            bit_set(o.valid, i)
        elif k == LEAF_BYTES:
            if c.end - c.pos < 4:
                return -ERR_TRUNCATED
            blen = <int32_t>load_u32_be(c.base + c.pos)
            if blen < 0:
                return -ERR_BAD_LENGTH
            if blen > c.end - c.pos - 4:
                return -ERR_TRUNCATED
            r = room(o, spos[ch], blen)
            if r:
                return r
            if blen:
                memcpy(o.sdata + spos[ch], c.base + c.pos + 4, blen)
            spos[ch] += blen
            c.pos += 4 + blen
            bit_set(o.valid, i)
        else:
            w = PP(p, ch, COL_WIDTH)
            if c.end - c.pos < w:
                return -ERR_TRUNCATED
            bit_set(o.valid, i)
            if k == LEAF_BOOL:
                if c.base[c.pos] != 0:
                    bit_set(o.vals, i)
            elif k == LEAF_I8:
                o.vals[i] = c.base[c.pos]
            elif w == 2:
                u16 = load_u16_be(c.base + c.pos)
                memcpy(o.vals + 2 * i, &u16, 2)
            elif w == 4:
                store_u32_le(o.vals + 4 * i, load_u32_be(c.base + c.pos))
            else:
                store_u64_le(o.vals + 8 * i, load_u64_be(c.base + c.pos))
            c.pos += w
        ch = PP(p, ch, COL_END)
    return 0


cdef void rewind(const int64_t* p, int64_t nn, OutCol* oc, int64_t* spos, int64_t i) noexcept nogil:
    """Undo the partial scatter of row ``i``: its bits cleared, string positions back."""
    cdef int64_t c
    for c in range(1, nn):
        bit_clear(oc[c].valid, i)
        if is_var(PP(p, c, COL_KIND)):
            spos[c] = get_off(oc[c].offs, oc[c].wide, i)


cdef void _out_cols(list keep, const int64_t* p, list outs, int64_t stop, int64_t[::1] spos, OutCol* oc) except *:
    """Pointers to the per-node output buffers, after checking each covers rows ``0..stop``."""
    cdef int64_t node, kind, n = p[COL_END], need
    cdef uint8_t[::1] mv
    if len(outs) != n or spos.shape[0] < n:
        raise ValueError("one output per program node is required")
    memset(oc, 0, n * sizeof(OutCol))
    for node in range(1, n):
        vbits, vals, offs, sdata = outs[node]
        kind = PP(p, node, COL_KIND)
        mv = u8(vbits)
        if mv.shape[0] < (stop + 7) // 8:
            raise ValueError(f"output {node}: validity buffer shorter than the rows")
        keep.append(mv)
        oc[node].valid = &mv[0] if mv.shape[0] else NULL
        if kind == LEAF_ROW:
            continue
        if is_var(kind):
            oc[node].wide = memoryview(offs).itemsize == 8
            mv = u8(offs)
            if mv.shape[0] < (stop + 1) * (8 if oc[node].wide else 4):
                raise ValueError(f"output {node}: offsets shorter than the rows")
            keep.append(mv)
            oc[node].offs = &mv[0]
            mv = u8(sdata)
            keep.append(mv)
            oc[node].sdata = &mv[0] if mv.shape[0] else NULL
            oc[node].cap = mv.shape[0]
            if spos[node] < 0 or spos[node] > oc[node].cap:
                raise ValueError(f"output {node}: write position outside the data buffer")
            continue
        mv = u8(vals)
        need = (stop + 7) // 8 if kind == LEAF_BOOL else stop * PP(p, node, COL_WIDTH)
        if mv.shape[0] < need:
            raise ValueError(f"output {node}: values buffer shorter than the rows")
        keep.append(mv)
        oc[node].vals = &mv[0] if mv.shape[0] else NULL


def corerow_decode(prog, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                   list outs, int64_t[::1] spos):
    """Decode entries ``start..stop`` into per-node Arrow buffers; returns ``(row, status, node)``
    (0 done; negative: entry ``row`` is bad; positive: node ``node``'s data needs that many bytes)."""
    cdef list keep = []
    cdef const int64_t* p = _prog(keep, prog)
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef int64_t nn = p[COL_END], i = start, r, c, err, status = 0, node = -1
    cdef int64_t* sp = &spos[0]
    cdef OutCol* oc
    cdef Cursor cur
    cdef int code
    if start < 0:
        raise ValueError("corerow_decode: negative start")
    oc = <OutCol*>malloc(nn * sizeof(OutCol))
    if oc == NULL:
        raise MemoryError()
    try:
        _out_cols(keep, p, outs, stop, spos, oc)
        with nogil:
            while i < stop:
                if bv_valid(&v, i):
                    err = -1
                    code = bv_entry(&v, i, &cur)
                    if code != ERR_OK:
                        r = -code
                    else:
                        r = dec_row(p, oc, sp, 0, &cur, i, &err)
                        if r == 0 and cur.pos != cur.end:
                            err = -1
                            r = -ERR_TRAILING
                    if r != 0:
                        rewind(p, nn, oc, sp, i)
                        if r > 0:
                            status = r
                            node = err
                            break
                        status = encode_err(<int>(-r), err)
                        for c in range(1, nn):
                            if is_var(PP(p, c, COL_KIND)):
                                put_off(oc[c].offs, oc[c].wide, i + 1, sp[c])
                        break
                for c in range(1, nn):
                    if is_var(PP(p, c, COL_KIND)):
                        put_off(oc[c].offs, oc[c].wide, i + 1, sp[c])
                i += 1
    finally:
        free(oc)
    return i, status, node
