# Included by rowdata.pyx (one extension module: the walks call each other and inline).
# Exports for the LLVM backend (``statemorph.kernels.jit``): the lowered migrate ops, the
# addresses of the helpers machine code calls, and the layout of ``Node``.

cdef bint _emit_row(list out, const int64_t* prog, int64_t node, int64_t depth):
    """Append the ops of row ``node``'s body (its ENTER is already in ``out``); False when a row
    below needs the general walk (too wide or too deep), which then runs the whole entry."""
    cdef int64_t c, end = prog[node * PROGRAM_COLUMNS + COL_END], k, src, pos, enter
    cdef list fixed = [], var = []
    c = node + 1
    while c < end:
        k = prog[c * PROGRAM_COLUMNS + COL_KIND]
        src = prog[c * PROGRAM_COLUMNS + COL_SRC]
        if src < 0:
            pass  # added: null, in the entering op's ``added`` bits; its slot is zeroed on entry
        elif k < SLOT_STR or k == SLOT_DEC_COMPACT:
            fixed.append(c)
        else:
            var.append(c)
        c = prog[c * PROGRAM_COLUMNS + COL_END]
    cdef dict enter_op = out[len(out) - 1]
    cdef list runs = []
    for c in fixed:
        src = prog[c * PROGRAM_COLUMNS + COL_SRC]
        pos = prog[c * PROGRAM_COLUMNS + COL_POS]
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
        k = prog[c * PROGRAM_COLUMNS + COL_KIND]
        src = prog[c * PROGRAM_COLUMNS + COL_SRC]
        pos = prog[c * PROGRAM_COLUMNS + COL_POS]
        op = dict(code=OP_VAR, node=c, soff=8 + 8 * src, doff=8 + 8 * pos, sbit=src + 8, dbit=pos + 8, n=0,
                  kind=k, flags=prog[c * PROGRAM_COLUMNS + COL_FLAGS])
        if k == SLOT_STR or k == SLOT_BIN:
            op["code"] = OP_STR
        elif k == SLOT_ROW and not (prog[c * PROGRAM_COLUMNS + COL_FLAGS] & FLAG_VERBATIM):
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
    cdef int64_t old_arity = prog[node * PROGRAM_COLUMNS + COL_OLD_ARITY]
    cdef uint64_t added = 0, zero = 0
    cdef int64_t c = node + 1, end = prog[node * PROGRAM_COLUMNS + COL_END]
    while c < end:
        if prog[c * PROGRAM_COLUMNS + COL_SRC] < 0:
            added |= (<uint64_t>1) << (prog[c * PROGRAM_COLUMNS + COL_POS] + 8)
            zero |= (<uint64_t>1) << (prog[c * PROGRAM_COLUMNS + COL_POS] + 1)
        c = prog[c * PROGRAM_COLUMNS + COL_END]
    return dict(ofixed=8 + 8 * old_arity, nfixed=8 + 8 * prog[node * PROGRAM_COLUMNS + COL_ARITY],
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


OP_CODES = dict(FIXED=OP_FIXED, STR=OP_STR, ENTER=OP_ENTER, EXIT=OP_EXIT, VAR=OP_VAR, END=OP_END, SLOT_STR=SLOT_STR,
                SLOT_BIN=SLOT_BIN)


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
