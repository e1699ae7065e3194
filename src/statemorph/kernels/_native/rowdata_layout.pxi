# Included by rowdata.pyx (one extension module: the walks call each other and inline).
# BinaryRowData layout shared by every RowData walk: the execution context, slot and null-bit
# helpers, UTF-8 checks, the lowered encode / decode node and the map-key checks.

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
    if kind == SLOT_I8:
        return 1
    if kind == SLOT_I16:
        return 2
    if kind == SLOT_I32 or kind == SLOT_F32:
        return 4
    if kind == SLOT_DEC_COMPACT or kind == SLOT_DEC_BIG:
        return 16
    return 8


ctypedef struct Ctx:
    const int64_t* prog
    int64_t err_node
    int64_t row
    const uint8_t* d
    int64_t d_len           # bytes of ``d``, 0 if unknown (lets hashing read whole words near the end)
    bint metered            # decode with arrays: the row / array checks spend ``budget`` (see spend)
    int64_t budget

cdef inline int64_t P(const Ctx* x, int64_t node, int col) noexcept nogil:
    return x.prog[node * PROGRAM_COLUMNS + col]


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
        elif utf8_next(s, &p, n, &cp) != ERR_OK:
            return False
    return True


cdef inline bint null_bit(const uint8_t* d, int64_t base, int64_t i) noexcept nogil:
    cdef int64_t b = i + 8
    return (d[base + (b >> 3)] >> (b & 7)) & 1


cdef inline int64_t elem_size(int64_t kind) noexcept nogil:
    """BinaryArrayData element slot width (``calculateFixLengthPartSize``)."""
    if kind == SLOT_BOOL or kind == SLOT_I8:
        return 1
    if kind == SLOT_I16:
        return 2
    if kind == SLOT_I32 or kind == SLOT_F32:
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
    if k == SLOT_TS_BIG:
        if n > 999999:
            x.err_node = c
            return -ERR_BAD_NANOS
        n = 8
    elif k == SLOT_DEC_BIG and (n < 1 or n > 16):
        x.err_node = c
        return -ERR_BAD_LENGTH
    if off < lo or off + n > size:
        x.err_node = c
        return -ERR_BAD_OFFSET
    if k == SLOT_STR and not utf8_valid(x.d + base + off, n):
        x.err_node = c
        return -ERR_BAD_UTF8
    return n


cdef inline int inline_check(const uint8_t* d, int64_t slot, uint64_t raw, int64_t k) noexcept nogil:
    """The checks of a slot marked inline (top bit of its last byte): only strings and binaries
    may be inline, at most 7 bytes, strings valid UTF-8. Returns ERR_OK or the code."""
    cdef int64_t n = (raw >> 56) & 0x7F
    if (k != SLOT_STR and k != SLOT_BIN) or n > 7:
        return ERR_BAD_INLINE
    # inline ASCII (the common short string) needs no scan: one masked word test
    if k == SLOT_STR and n and (raw & ((<uint64_t>1 << (8 * n)) - 1) & 0x8080808080808080ull) \
            and not utf8_valid(d + slot, n):
        return ERR_BAD_UTF8
    return ERR_OK


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


cdef inline int64_t elem_bytes(const uint8_t* d, int64_t base, int64_t slot, int64_t* src) noexcept nogil:
    """Length of the validated string / binary element in the slot at ``d[slot]`` of the array at
    ``d[base:]``, its bytes at ``src``: inline in the slot, or in the array's var part."""
    cdef uint64_t raw = load_u64_le(d + slot)
    if raw >> 63:
        src[0] = slot
        return (raw >> 56) & 0x7F
    src[0] = base + <int64_t>(raw >> 32)
    return <int64_t>(raw & 0xFFFFFFFFu)


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


cdef inline uint64_t mix(uint64_t h, uint64_t w) noexcept nogil:
    """One round of ``key_hash``."""
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull
    return h ^ (h >> 31)


cdef inline void key_canon(const uint8_t* d, int64_t base, int64_t slot, int64_t k, int64_t es,
                           uint64_t* a, uint64_t* b, bint* odd) noexcept nogil:
    """The canonical form of the (valid, non-null) key in ``slot`` of the array at ``d[base:]``,
    equal for equal keys: STRING / BINARY: ``a`` = where its bytes start, ``b`` = their length
    (inline or not); a big DECIMAL: its unscaled value sign-extended to 16 bytes, a big TIMESTAMP:
    millis then nanos (``a``, ``b``: the two little-endian words); other kinds one word ``a``
    (``b`` = 0): BOOLEAN as 0 / 1, -0.0 as 0.0, else the slot's bytes. ``odd`` is set for a big
    DECIMAL longer than 16 bytes (no canonical form: the caller calls the map suspect)."""
    cdef int64_t ln, src = 0
    cdef uint64_t raw, w
    cdef uint8_t canon[16]
    b[0] = 0
    if k == SLOT_STR or k == SLOT_BIN:
        b[0] = <uint64_t>elem_bytes(d, base, slot, &src)
        a[0] = <uint64_t>src
        return
    if k == SLOT_DEC_BIG or k == SLOT_TS_BIG:  # the slot holds an offset: the value
        raw = load_u64_le(d + slot)
        src = base + <int64_t>(raw >> 32)
        ln = <int64_t>(raw & 0xFFFFFFFFu)
        if k == SLOT_DEC_BIG:
            if ln > 16:
                odd[0] = True
                a[0] = 0
                return
            memset(canon, 0xFF if ln > 0 and (d[src] & 0x80) else 0, 16 - ln)
            memcpy(canon + 16 - ln, d + src, ln)
            a[0] = load_u64_le(canon)
            b[0] = load_u64_le(canon + 8)
        else:
            a[0] = load_u64_le(d + src)
            b[0] = raw & 0xFFFFFFFFu
        return
    if es == 8:
        w = load_u64_le(d + slot)
    elif es == 4:
        w = load_u32_le(d + slot)
    elif es == 2:
        w = <uint64_t>d[slot] | (<uint64_t>d[slot + 1] << 8)
    else:
        w = d[slot]
    if k == SLOT_BOOL:
        w = w != 0
    elif (k == SLOT_F32 or k == SLOT_F64) and w == ((<uint64_t>1) << (8 * es - 1)):
        w = 0  # -0.0 == 0.0
    a[0] = w


cdef inline uint64_t canon_hash(const uint8_t* d, int64_t d_len, int64_t k, int64_t es, uint64_t a,
                                uint64_t b) noexcept nogil:
    """``key_hash`` of a key's canonical bytes (``key_canon``): equal keys hash alike."""
    if k == SLOT_STR or k == SLOT_BIN:
        return key_hash(d + a, <int64_t>b, d_len - <int64_t>a)
    if k == SLOT_DEC_BIG or k == SLOT_TS_BIG:
        return mix(mix(0x9E3779B97F4A7C15ull ^ 16, a), b)
    return mix(0x9E3779B97F4A7C15ull ^ <uint64_t>es, a)


cdef inline bint seen_before(uint64_t* table, uint64_t mask, uint64_t hv, bint* zero) noexcept nogil:
    """Add ``hv`` to the open-addressing set ``table`` (``mask + 1`` slots, 0 = empty; a zero hash
    is kept in ``zero``); whether it was there already."""
    cdef uint64_t i
    if hv == 0:
        if zero[0]:
            return True
        zero[0] = True
        return False
    i = (hv >> 16) & mask
    while table[i] != 0:
        if table[i] == hv:
            return True
        i = (i + 1) & mask
    table[i] = hv
    return False


cdef bint keys_suspect(const uint8_t* d, int64_t d_len, int64_t base, int64_t k) noexcept nogil:
    """Whether the valid key array at ``d[base:]`` (element kind k; ``d_len`` bytes in ``d``, 0 if
    unknown) may hold two equal keys or a null one: then its map goes to the reference serializer
    (HAND_BACK), which decides. Up to 8 keys (most maps) are suspect when two canonical forms
    (``key_canon``) are equal, compared pairwise; more keys when two hashes of them are (equal keys
    hash alike), found with an open-addressing set twice their count (on the stack up to 64
    keys), O(n); no memory for it means suspect. ``check_map`` asks it for every map (decode,
    migrate, verbatim copies). ROW / ARRAY / MAP keys have no canonical form (equal values may
    differ in bytes): two or more are suspect. A key
    takes at least 4 bytes of input (BOOLEAN / TINYINT / SMALLINT keys beyond their value count
    are suspect without hashing), so the set is at most 16 bytes per input byte of keys."""
    cdef int64_t n = <int32_t>load_u32_le(d + base), es = elem_size(k), header = array_header(n)
    cdef int64_t j, m, cap
    cdef uint64_t stack[128]
    cdef uint64_t ca[8]
    cdef uint64_t cb[8]
    cdef uint64_t* table = stack
    cdef uint64_t w, hv
    cdef bint odd = False, zero = False, suspect = False, is_bytes = k == SLOT_STR or k == SLOT_BIN
    for j in range(0, n, 32):  # null bits a word at a time (bits past n do not count)
        w = load_u32_le(d + base + 4 + (j >> 3))
        if n - j < 32:
            w &= ((<uint64_t>1) << (n - j)) - 1
        if w:
            return True
    if n < 2:
        return False
    if k == SLOT_ROW or k == SLOT_ARRAY or k == SLOT_MAP:
        return True
    if (k == SLOT_BOOL and n > 2) or ((k == SLOT_I8 or k == SLOT_I16) and n > (1 << (8 * es))):
        return True  # more keys than values: some repeat (the hashes would say so too), no table needed
    if n <= 8:  # few keys (most maps): compare their canonical forms pairwise, exactly
        for j in range(n):
            key_canon(d, base, base + header + j * es, k, es, &ca[j], &cb[j], &odd)
            if odd:
                return True
            for m in range(j):
                if cb[m] == cb[j] and (memcmp(d + ca[m], d + ca[j], cb[j]) == 0 if is_bytes else ca[m] == ca[j]):
                    return True
        return False
    cap = 16
    while cap < 2 * n:
        cap <<= 1
    if cap <= 128:
        memset(stack, 0, cap * sizeof(uint64_t))
    else:
        table = <uint64_t*>calloc(cap, sizeof(uint64_t))
        if table == NULL:
            return True
    for j in range(n):
        key_canon(d, base, base + header + j * es, k, es, &w, &hv, &odd)
        if odd or seen_before(table, cap - 1, canon_hash(d, d_len, k, es, w, hv), &zero):
            suspect = True
            break
    if table != stack:
        free(table)
    return suspect


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
        if not (nodes[c].width or k == SLOT_BOOL or k == SLOT_STR or k == SLOT_BIN or k == SLOT_ROW or k == SLOT_DEC_COMPACT):
            return False
    return True
