# cython: language_level=3
"""BinaryRowData kernels: Arrow struct columns → RowData entries (encode), RowData entries →
Arrow columns (decode), and old-schema RowData → new-schema RowData byte to byte (migrate).

Every kernel executes a *program* compiled once in Python (``statemorph.kernels.plans``,
``compile_row_program`` / ``compile_migration_program``): an int64 matrix, one row per node of the
row type in pre-order, columns ``COL_*`` of ``statemorph.kernels.abi``. Node 0 is the top-level row.
Children of a ROW node are ``node + 1`` then ``END`` of each child in turn. ``SRC`` is the field
index in the *old* row (the same as ``POS`` for encode / decode; -1 for a field added by a
migration). The Python twin is ``statemorph.kernels.rowdata_py``.

Entries are ``i32 BE sizeInBytes ‖ BinaryRowData`` (what ``RowDataSerializer`` writes). All three
kernels are one pass (``migrate_run`` / ``encode_run`` / ``decode_run``): validate and write each
entry in one walk, stopping at a bad entry or a full buffer so the caller can resume. Loops run
without the GIL; errors leave as (code, row, node) numbers.

The walks live in ``rowdata_<job>.pxi`` by job (layout, check, migrate, encode, decode, and the
exports for the LLVM backend), included here: they stay one extension module because they call
each other and must inline across jobs; this file holds the Python-facing entry points.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset

from cursor cimport *
from stringvalue cimport utf8_next

__statemorph_native__ = True

# program columns (COL_*), slot kinds (SLOT_*) and flags (FLAG_*): generated from statemorph.kernels.abi
include "abi_rowdata.pxi"

# the walks, by job (one module: they call each other and inline)
include "rowdata_layout.pxi"
include "rowdata_check.pxi"
include "rowdata_migrate.pxi"
include "rowdata_encode.pxi"
include "rowdata_decode.pxi"


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
    if pm.shape[1] != PROGRAM_COLUMNS or pm.shape[0] < 1:
        raise ValueError("bad row program")
    keep.views.append(pm)
    return &pm[0, 0]




include "rowdata_jit.pxi"


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
        return ERR_BAD_ARROW
    if e - s < 4:
        return ERR_TRUNCATED
    n = <int32_t>load_u32_be(d + s)
    if n < 0:
        return ERR_BAD_LENGTH
    if n > e - s - 4:
        return ERR_TRUNCATED
    if n < e - s - 4:
        return ERR_TRAILING
    base[0] = s + 4
    size[0] = n
    return ERR_OK


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
            if code == ERR_OK and verbatim:
                r = check_row(x, 0, base, size)
                if r >= 0:
                    if size + 4 > cap - pos:
                        break
                    memcpy(o + pos, x.d + base - 4, size + 4)
                    pos += size + 4
            elif code == ERR_OK:
                if cap - pos < 4:
                    break
                if ops != NULL:
                    r = run_ops(x, ops, v.data_len, base, size, o, pos + 4, cap)
                else:
                    r = check_migrate_row(x, 0, base, size, o, pos + 4, cap)
                if r == -ERR_FULL:
                    break
                if r >= 0:
                    store_u32_be(o + pos, <uint32_t>r)
                    pos += r + 4
            if code == ERR_OK and r < 0:
                code = <int>(-r)
            if code != ERR_OK:
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
    x.d_len = v.data_len
    verbatim = P(&x, 0, COL_FLAGS) & FLAG_VERBATIM
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
        arity = p[c * PROGRAM_COLUMNS + COL_ARITY]
        nodes[c].kind = p[c * PROGRAM_COLUMNS + COL_KIND]
        nodes[c].pos = p[c * PROGRAM_COLUMNS + COL_POS]
        nodes[c].end = p[c * PROGRAM_COLUMNS + COL_END]
        nodes[c].arity = arity
        nodes[c].flags = p[c * PROGRAM_COLUMNS + COL_FLAGS]
        nodes[c].limit = p[c * PROGRAM_COLUMNS + COL_LIMIT]
        if nodes[c].kind == SLOT_DEC_BIG:
            if not 0 < nodes[c].limit <= 38:
                raise ValueError("bad row program")
            nodes[c].big_limit = sm_pow10(nodes[c].limit)
        elif nodes[c].kind == SLOT_TS_BIG and nodes[c].limit not in (1000, 1000000):
            raise ValueError("bad row program")
        if SLOT_I8 <= nodes[c].kind <= SLOT_F64:
            nodes[c].width = arrow_width(nodes[c].kind)
            nodes[c].mask = word_mask(nodes[c].width)
        nodes[c].nw = null_bits_size(arity)
        nodes[c].fixed = null_bits_size(arity) + 8 * arity
        if nodes[c].end <= c or nodes[c].end > n or (c == 0 and nodes[c].end != n):
            raise ValueError("bad row program")
    for c in range(n):  # a MAP is followed by its key and value ARRAYs
        if nodes[c].kind == SLOT_MAP and not (c + 1 < n and nodes[c + 1].kind == SLOT_ARRAY and nodes[c + 1].end < n
                                           and nodes[nodes[c + 1].end].kind == SLOT_ARRAY):
            raise ValueError("bad row program")
    nodes[0].parent = -1
    for c in range(n):
        if nodes[c].kind == SLOT_ARRAY:
            nodes[c + 1].parent = c
        if nodes[c].kind == SLOT_MAP:
            nodes[c + 1].parent = c
            nodes[nodes[c + 1].end].parent = c
        if nodes[c].kind == SLOT_ROW:
            child = c + 1
            while child < nodes[c].end:
                nodes[child].parent = c
                child = nodes[child].end
    nodes[0].arr = -1
    for c in range(1, n):  # pre-order: a parent's ``arr`` is known before its children's
        nodes[c].arr = nodes[c].parent if nodes[nodes[c].parent].kind == SLOT_ARRAY else nodes[nodes[c].parent].arr
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
        nd.vals_len = cols[node + 1][5] if nd.kind == SLOT_ARRAY else len(u8(values)) if values is not None else 0
        nd.wide_in = wide
        if off < 0 or nrows < 0 or (node == 0 and nrows < stop):
            raise ValueError(f"column {node}: negative offset or shorter than the rows")
        if validity is not None and (off + nrows + 7) // 8 > len(u8(validity)):
            raise ValueError(f"column {node}: validity buffer shorter than the array")
        kind = nd.kind
        stop = nrows
        if kind == SLOT_STR or kind == SLOT_BIN or kind == SLOT_ARRAY:
            if offs is None or (off + stop + 1) * (8 if wide else 4) > len(u8(offs)):
                raise ValueError(f"column {node}: offsets buffer shorter than the array")
        elif kind == SLOT_BOOL:
            if values is None or (off + stop + 7) // 8 > nd.vals_len:
                raise ValueError(f"column {node}: values buffer shorter than the array")
        elif kind != SLOT_ROW and kind != SLOT_ARRAY and kind != SLOT_MAP:
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
                    if r == -ERR_FULL:
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
        if c == 0 or k == SLOT_ROW or k == SLOT_MAP:
            pass
        elif k == SLOT_ARRAY or k == SLOT_STR or k == SLOT_BIN:  # offsets per row, or per element of the array above
            nd.offs = _offsets_out(keep, offs, stop if k == SLOT_ARRAY and not elem else 0, &nd.wide)
            cap = min(cap, len(u8(offs)) // (8 if nd.wide else 4) - 1)
            if k == SLOT_ARRAY:
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
        elif k == SLOT_BOOL or nd.width or k == SLOT_DEC_COMPACT or k == SLOT_DEC_BIG or k == SLOT_TS_BIG:
            nd.vals = keep.rw(vals)
            cap = min(cap, len(u8(vals)) * 8 if k == SLOT_BOOL else len(u8(vals)) // arrow_width(k))
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
        x.metered = x.metered or nodes[c].kind == SLOT_ARRAY
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
                if code == ERR_OK:
                    x.budget = size  # the reference's: a unit per byte of the row
                    r = decode_row(&x, nodes, 0, base, size, i)
                    if r < 0:
                        decode_rollback(nodes, nnodes, i)
                        if r == -ERR_FULL:
                            break
                        code = <int>(-r)
                if code != ERR_OK:
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
