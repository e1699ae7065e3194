# cython: language_level=3
"""Header-only byte helpers shared by every kernel.

Why a .pxd: the kernels are separate extension modules (one per .pyx) and these helpers must be
inlined into each inner loop; a .pxd of ``cdef inline`` functions costs no call and no linkage.

- endian load/store: Flink's DataStream formats are big-endian, BinaryRowData is little-endian
  (native order on every platform Flink supports); we load through memcpy so unaligned access is
  defined behaviour, and byte-swap with the compiler builtins.
- ``Cursor``: a bounds-checked read window. Every read in a kernel goes through ``cur_need``
  first; nothing reads past ``end``.
- ``BinView``: one Arrow binary / large_binary column (offsets + data + validity buffers plus the
  array's slice offset), read without copying. Offsets from foreign producers are validated before
  use (monotone, inside the data buffer).
"""

from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                          uint64_t)
from libc.string cimport memcpy, memset

cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
    #error "statemorph kernels assume a little-endian host (as Arrow and Flink's MemorySegment do)"
    #endif
    static inline uint16_t sm_bswap16(uint16_t v) { return __builtin_bswap16(v); }
    static inline uint32_t sm_bswap32(uint32_t v) { return __builtin_bswap32(v); }
    static inline uint64_t sm_bswap64(uint64_t v) { return __builtin_bswap64(v); }
    """
    uint16_t sm_bswap16(uint16_t v) nogil
    uint32_t sm_bswap32(uint32_t v) nogil
    uint64_t sm_bswap64(uint64_t v) nogil

# Status codes (ERR_*, HAND_BACK) and DataStream leaf kinds (LEAF_*): generated from
# statemorph.kernels.abi by setup.py.
include "abi_common.pxi"

cdef inline int kind_width(int kind) noexcept nogil:
    if kind == LEAF_BOOL or kind == LEAF_I8:
        return 1
    if kind == LEAF_I16 or kind == LEAF_CHAR:
        return 2
    if kind == LEAF_I32 or kind == LEAF_F32:
        return 4
    return 8

cdef inline uint32_t java_f32_bits(uint32_t u) noexcept nogil:
    """Java's ``floatToIntBits``: every NaN becomes the canonical ``7FC00000``."""
    if (u & 0x7F800000u) == 0x7F800000u and (u & 0x007FFFFFu) != 0:
        return 0x7FC00000u
    return u

cdef inline uint64_t java_f64_bits(uint64_t u) noexcept nogil:
    """Java's ``doubleToLongBits``: every NaN becomes the canonical ``7FF8000000000000``."""
    if (u & 0x7FF0000000000000ull) == 0x7FF0000000000000ull and (u & 0x000FFFFFFFFFFFFFull) != 0:
        return 0x7FF8000000000000ull
    return u


cdef inline uint16_t load_u16_be(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return sm_bswap16(v)

cdef inline uint32_t load_u32_be(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return sm_bswap32(v)

cdef inline uint64_t load_u64_be(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return sm_bswap64(v)

cdef inline void store_u16_be(uint8_t* p, uint16_t v) noexcept nogil:
    v = sm_bswap16(v)
    memcpy(p, &v, 2)

cdef inline void store_u32_be(uint8_t* p, uint32_t v) noexcept nogil:
    v = sm_bswap32(v)
    memcpy(p, &v, 4)

cdef inline void store_u64_be(uint8_t* p, uint64_t v) noexcept nogil:
    v = sm_bswap64(v)
    memcpy(p, &v, 8)

cdef inline uint32_t load_u32_le(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v

cdef inline uint64_t load_u64_le(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v

cdef inline void store_u32_le(uint8_t* p, uint32_t v) noexcept nogil:
    memcpy(p, &v, 4)

cdef inline void store_u64_le(uint8_t* p, uint64_t v) noexcept nogil:
    memcpy(p, &v, 8)

cdef inline int64_t round_up8(int64_t n) noexcept nogil:
    return (n + 7) & ~(<int64_t>7)

# ---------------------------------------------------------------- validity bitmaps (Arrow, LSB-first)
cdef inline bint bit_get(const uint8_t* bits, int64_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1

cdef inline void bit_set(uint8_t* bits, int64_t i) noexcept nogil:
    bits[i >> 3] |= <uint8_t>(1 << (i & 7))

cdef inline void bit_clear(uint8_t* bits, int64_t i) noexcept nogil:
    bits[i >> 3] &= <uint8_t>~(1 << (i & 7))

# ---------------------------------------------------------------- bounds-checked read cursor
ctypedef struct Cursor:
    const uint8_t* base
    int64_t pos
    int64_t end

cdef inline bint cur_has(Cursor* c, int64_t n) noexcept nogil:
    return n >= 0 and c.end - c.pos >= n


cdef inline int read_varint(Cursor* c, uint32_t* value, uint32_t limit) noexcept nogil:
    """Flink's 7-bit little-endian varint, at most 5 groups and at most ``limit``."""
    cdef uint64_t v = 0
    cdef int shift = 0, k = 0
    cdef uint8_t b
    while True:
        if c.pos >= c.end:
            return ERR_TRUNCATED
        b = c.base[c.pos]
        c.pos += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        k += 1
        if b < 0x80:
            break
        shift += 7
        if k >= 5:
            return ERR_BAD_CHAR if limit == 0xFFFF else ERR_BAD_LENGTH
    if v > limit:
        return ERR_BAD_CHAR if limit == 0xFFFF else ERR_BAD_LENGTH
    value[0] = <uint32_t>v
    return ERR_OK


# ---------------------------------------------------------------- exact-size writer
ctypedef struct Writer:
    uint8_t* base
    int64_t pos
    int64_t cap

cdef inline void w_bytes(Writer* w, const uint8_t* src, int64_t n) noexcept nogil:
    # the size pass computed cap exactly; a mismatch is a kernel bug, so guard rather than overrun
    if w.pos + n <= w.cap:
        memcpy(w.base + w.pos, src, n)
    w.pos += n

cdef inline void w_byte(Writer* w, uint8_t b) noexcept nogil:
    if w.pos < w.cap:
        w.base[w.pos] = b
    w.pos += 1

# ---------------------------------------------------------------- Arrow offsets (int32, or int64 if wide)
cdef inline void put_off(uint8_t* offs, bint wide, int64_t j, int64_t v) noexcept nogil:
    cdef int32_t v32 = <int32_t>v
    if wide:
        memcpy(offs + 8 * j, &v, 8)
    else:
        memcpy(offs + 4 * j, &v32, 4)

cdef inline int64_t get_off(const uint8_t* offs, bint wide, int64_t j) noexcept nogil:
    cdef int32_t v32
    cdef int64_t v
    if wide:
        memcpy(&v, offs + 8 * j, 8)
        return v
    memcpy(&v32, offs + 4 * j, 4)
    return v32

# ---------------------------------------------------------------- Arrow binary column view
ctypedef struct BinView:
    const uint8_t* offsets   # int32 or int64 little-endian offsets buffer
    const uint8_t* data
    const uint8_t* validity  # NULL when the column has no nulls
    int64_t offset           # the array's slice offset (in elements)
    int64_t data_len         # bytes in the data buffer
    bint wide                # large_binary (int64 offsets)

cdef inline int64_t bv_raw(const BinView* v, int64_t i) noexcept nogil:
    cdef int32_t o32
    cdef int64_t o64
    if v.wide:
        memcpy(&o64, v.offsets + 8 * (v.offset + i), 8)
        return o64
    memcpy(&o32, v.offsets + 4 * (v.offset + i), 4)
    return o32

cdef inline bint bv_valid(const BinView* v, int64_t i) noexcept nogil:
    return v.validity == NULL or bit_get(v.validity, v.offset + i)

cdef inline int bv_entry(const BinView* v, int64_t i, Cursor* c) noexcept nogil:
    """Point ``c`` at entry ``i``; ERR_BAD_ARROW when the offsets are not a valid window."""
    cdef int64_t s = bv_raw(v, i)
    cdef int64_t e = bv_raw(v, i + 1)
    if s < 0 or e < s or e > v.data_len:
        return ERR_BAD_ARROW
    c.base = v.data
    c.pos = s
    c.end = e
    return ERR_OK

cdef inline object u8(object obj):
    """A flat unsigned-byte view of any buffer (pyarrow buffers export signed 'b' bytes)."""
    cdef object mv = memoryview(obj)
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    return mv


cdef inline BinView bin_view(list keep, offsets, data, validity, int64_t offset, bint wide,
                             int64_t stop) except *:
    """The view of an Arrow binary column's buffers for rows ``0..stop``, after checking that the
    offsets and validity buffers cover them; ``keep`` holds the memoryviews for the call."""
    cdef const uint8_t[::1] omv = u8(offsets)
    cdef const uint8_t[::1] dmv = u8(data)
    cdef const uint8_t[::1] bmv
    cdef BinView v
    if (offset + stop + 1) * (8 if wide else 4) > omv.shape[0]:
        raise ValueError("offsets buffer shorter than the array")
    keep.append(omv)
    keep.append(dmv)
    v.offsets = &omv[0]
    v.data = &dmv[0] if dmv.shape[0] else NULL
    v.data_len = dmv.shape[0]
    v.offset = offset
    v.wide = wide
    v.validity = NULL
    if validity is not None:
        bmv = u8(validity)
        if (offset + stop + 7) // 8 > bmv.shape[0]:
            raise ValueError("validity buffer shorter than the array")
        keep.append(bmv)
        v.validity = &bmv[0]
    return v

cdef inline uint8_t* out_offsets(list keep, out_off, int64_t cap, int64_t start, int64_t stop, int64_t pos,
                                 str who, bint* wide) except NULL:
    """A one-pass kernel's output Arrow offsets (int32, or int64 when ``wide`` is set), written
    through ``put_off``; checked against the rows ``start..stop`` and the byte buffer's ``cap``."""
    cdef uint8_t[::1] mv = u8(out_off)
    cdef int64_t n_off = mv.shape[0] // out_off.itemsize
    wide[0] = out_off.itemsize == 8
    if not wide[0] and cap > 0x7FFFFFFF:
        raise ValueError(f"{who}: int32 offsets cannot address more than 2 GiB of output")
    if stop > n_off - 1 or start < 0 or pos < 0 or pos > cap:
        raise ValueError(f"{who}: output arrays shorter than the rows")
    keep.append(mv)
    return &mv[0]

cdef inline int64_t encode_err(int code, int64_t field) noexcept nogil:
    """A bad row's status: negative, carrying the error code and the op (field) index."""
    return -(((<int64_t>code) << 32) | (field + 1))

cdef inline bint row_failed(int64_t* slot, int64_t status, int64_t row, int64_t* first,
                            bint stop_at_error) noexcept nogil:
    """A two-pass kernel's bad row: its status (an ``encode_err``) into ``slot`` (the row's status,
    or its size where the kernel has no status), ``first`` the first bad row; true when the kernel
    stops at it (the Python twins' ``views.mark_bad``)."""
    slot[0] = status
    if first[0] < 0:
        first[0] = row
    return stop_at_error
