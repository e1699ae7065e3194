# cython: language_level=3
"""Strings and byte arrays in Flink's DataStream formats, between Arrow columns and binary columns.

- Flink ``StringValue`` (``StringSerializer``): varint(units + 1) then one 7-bit varint per UTF-16
  code unit. Arrow strings are UTF-8, so encoding transcodes UTF-8 → UTF-16 units → varints and
  decoding goes back; a lone surrogate (legal in Java, not in UTF-8) is reported, not replaced.
- ``BytePrimitiveArraySerializer``: i32 BE length then the bytes.

Every function is a two-pass half: ``*_sizes`` validates and writes each row's output size to
``out_off[i + 1]`` (status for bad rows: ``encode_err``; 0-size for nulls), ``*_fill`` writes
rows at the exclusive prefix sums the caller computed. ``status[i] = 1`` marks a row whose value
is null in the source format (Flink's null string ``00``): the caller makes it an Arrow null.
The same contract, as plain Python, is ``statemorph.serializers._batch``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from smbytes cimport *

__statemorph_native__ = True


cdef inline int unit_size(uint32_t u) noexcept nogil:
    if u < 0x80:
        return 1
    if u < 0x4000:
        return 2
    return 3

cdef inline int64_t put_unit(uint8_t* out, int64_t p, uint32_t u) noexcept nogil:
    if u < 0x80:
        out[p] = <uint8_t>u
        return p + 1
    if u < 0x4000:
        out[p] = <uint8_t>((u & 0x7F) | 0x80)
        out[p + 1] = <uint8_t>(u >> 7)
        return p + 2
    out[p] = <uint8_t>((u & 0x7F) | 0x80)
    out[p + 1] = <uint8_t>(((u >> 7) & 0x7F) | 0x80)
    out[p + 2] = <uint8_t>(u >> 14)
    return p + 3

cdef inline int64_t varlen_size(uint32_t n) noexcept nogil:
    cdef int64_t k = 1
    while n >= 0x80:
        n >>= 7
        k += 1
    return k

cdef inline int64_t put_varlen(uint8_t* out, int64_t p, uint32_t n) noexcept nogil:
    while n >= 0x80:
        out[p] = <uint8_t>((n & 0x7F) | 0x80)
        n >>= 7
        p += 1
    out[p] = <uint8_t>n
    return p + 1


cdef int utf8_next(const uint8_t* s, int64_t* pos, int64_t end, uint32_t* cp) noexcept nogil:
    """Decode one strict UTF-8 code point (no overlongs, no surrogates, <= U+10FFFF)."""
    cdef int64_t p = pos[0]
    cdef uint32_t b0 = s[p], c
    cdef int n, k
    if b0 < 0x80:
        cp[0] = b0
        pos[0] = p + 1
        return E_OK
    if b0 >= 0xC2 and b0 <= 0xDF:
        n = 1
        c = b0 & 0x1F
    elif b0 >= 0xE0 and b0 <= 0xEF:
        n = 2
        c = b0 & 0x0F
    elif b0 >= 0xF0 and b0 <= 0xF4:
        n = 3
        c = b0 & 0x07
    else:
        return E_BAD_UTF8
    if end - p - 1 < n:
        return E_BAD_UTF8
    for k in range(1, n + 1):
        if (s[p + k] & 0xC0) != 0x80:
            return E_BAD_UTF8
        c = (c << 6) | (s[p + k] & 0x3F)
    if (n == 2 and (c < 0x800 or (c >= 0xD800 and c < 0xE000))) or (n == 3 and (c < 0x10000 or c > 0x10FFFF)):
        return E_BAD_UTF8
    cp[0] = c
    pos[0] = p + n + 1
    return E_OK


cdef int64_t utf8_to_flink(const uint8_t* s, int64_t a, int64_t b, uint8_t* out, int64_t p,
                           int* code) noexcept nogil:
    """Write (out != NULL) or size (out == NULL) the StringValue form of UTF-8 bytes s[a:b]."""
    cdef int64_t units = 0, body = 0, q = a
    cdef uint32_t cp, v
    while q < b:
        if s[q] < 0x80:
            units += 1
            body += 1
            q += 1
            continue
        code[0] = utf8_next(s, &q, b, &cp)
        if code[0] != E_OK:
            return -1
        if cp >= 0x10000:
            units += 2
            body += 6
        else:
            units += 1
            body += unit_size(cp)
    if units + 1 > 0x7FFFFFFF:
        code[0] = E_TOO_LARGE
        return -1
    if out == NULL:
        return varlen_size(<uint32_t>(units + 1)) + body
    p = put_varlen(out, p, <uint32_t>(units + 1))
    q = a
    while q < b:
        if s[q] < 0x80:
            out[p] = s[q]
            p += 1
            q += 1
            continue
        utf8_next(s, &q, b, &cp)
        if cp >= 0x10000:
            v = cp - 0x10000
            p = put_unit(out, p, 0xD800 + (v >> 10))
            p = put_unit(out, p, 0xDC00 + (v & 0x3FF))
        else:
            p = put_unit(out, p, cp)
    return p


cdef int64_t flink_to_utf8(Cursor* c, uint8_t* out, int64_t p, int* code, bint* is_null) noexcept nogil:
    """Decode one StringValue at the cursor into UTF-8 (size only when out == NULL)."""
    cdef uint32_t n, u, u2
    cdef int64_t count, k, size = 0
    cdef int64_t save
    is_null[0] = False
    code[0] = read_varint(c, &n, 0x7FFFFFFF)
    if code[0] != E_OK:
        return -1
    if n == 0:
        is_null[0] = True
        return 0
    count = n - 1
    if count > c.end - c.pos:
        code[0] = E_TRUNCATED
        return -1
    k = 0
    while k < count:
        code[0] = read_varint(c, &u, 0xFFFF)
        if code[0] != E_OK:
            return -1
        k += 1
        if u >= 0xD800 and u < 0xDC00:
            save = c.pos
            if k < count:
                code[0] = read_varint(c, &u2, 0xFFFF)
                if code[0] != E_OK:
                    return -1
                if u2 >= 0xDC00 and u2 < 0xE000:
                    k += 1
                    u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00)
                    if out != NULL:
                        out[p] = <uint8_t>(0xF0 | (u >> 18))
                        out[p + 1] = <uint8_t>(0x80 | ((u >> 12) & 0x3F))
                        out[p + 2] = <uint8_t>(0x80 | ((u >> 6) & 0x3F))
                        out[p + 3] = <uint8_t>(0x80 | (u & 0x3F))
                    p += 4
                    continue
            code[0] = E_LONE_SURROGATE
            return -1
        if u >= 0xDC00 and u < 0xE000:
            code[0] = E_LONE_SURROGATE
            return -1
        if u < 0x80:
            if out != NULL:
                out[p] = <uint8_t>u
            p += 1
        elif u < 0x800:
            if out != NULL:
                out[p] = <uint8_t>(0xC0 | (u >> 6))
                out[p + 1] = <uint8_t>(0x80 | (u & 0x3F))
            p += 2
        else:
            if out != NULL:
                out[p] = <uint8_t>(0xE0 | (u >> 12))
                out[p + 1] = <uint8_t>(0x80 | ((u >> 6) & 0x3F))
                out[p + 2] = <uint8_t>(0x80 | (u & 0x3F))
            p += 3
    return p


cdef BinView make_view(offsets, data, validity, int64_t offset, bint wide, int64_t stop,
                       list keep) except *:
    cdef const uint8_t[::1] omv = u8(offsets)
    cdef const uint8_t[::1] dmv = u8(data)
    cdef const uint8_t[::1] bmv
    cdef BinView v
    keep.append(omv)
    keep.append(dmv)
    if (offset + stop + 1) * (8 if wide else 4) > omv.shape[0]:
        raise ValueError("offsets buffer shorter than the array")
    v.offsets = &omv[0]
    v.data = &dmv[0] if dmv.shape[0] else NULL
    v.data_len = dmv.shape[0]
    v.offset = offset
    v.wide = wide
    v.validity = NULL
    if validity is not None:
        bmv = u8(validity)
        keep.append(bmv)
        if (offset + stop + 7) // 8 > bmv.shape[0]:
            raise ValueError("validity buffer shorter than the array")
        v.validity = &bmv[0]
    return v


def string_encode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                        int64_t[::1] out_off, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int code = 0
    cdef int64_t i, size, first = -1
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            if not bv_valid(&v, i):
                continue
            code = bv_entry(&v, i, &c)
            size = -1
            if code == E_OK:
                size = utf8_to_flink(c.base, c.pos, c.end, NULL, 0, &code)
            if size < 0:
                out_off[i + 1] = encode_err(code, -1)
                if first < 0:
                    first = i
                if stop_at_error:
                    break
                continue
            out_off[i + 1] = size
    return first


def string_encode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       const int64_t[::1] out_off, uint8_t[::1] out_data):
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int code = 0
    cdef int64_t i
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if out_off[i + 1] == out_off[i] or not bv_valid(&v, i):
                continue
            if bv_entry(&v, i, &c) != E_OK or out_off[i + 1] > out_data.shape[0]:
                continue
            utf8_to_flink(c.base, c.pos, c.end, op, out_off[i], &code)


def string_decode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                        int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int code = 0
    cdef bint is_null
    cdef int64_t i, size, first = -1
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            status[i] = 0
            if not bv_valid(&v, i):
                continue
            code = bv_entry(&v, i, &c)
            size = -1
            if code == E_OK:
                size = flink_to_utf8(&c, NULL, 0, &code, &is_null)
                if size >= 0 and c.pos != c.end:
                    size = -1
                    code = E_TRAILING
            if size < 0:
                status[i] = encode_err(code, -1)
                if first < 0:
                    first = i
                if stop_at_error:
                    break
                continue
            if is_null:
                status[i] = 1
            out_off[i + 1] = size
    return first


def string_decode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       const int64_t[::1] out_off, const int64_t[::1] status, uint8_t[::1] out_data):
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int code = 0
    cdef bint is_null
    cdef int64_t i
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if status[i] != 0 or out_off[i + 1] == out_off[i] or out_off[i + 1] > out_data.shape[0]:
                continue
            if bv_entry(&v, i, &c) != E_OK:
                continue
            flink_to_utf8(&c, op, out_off[i], &code, &is_null)


def bytes_encode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                      const int64_t[::1] out_off, uint8_t[::1] out_data):
    """``BytePrimitiveArraySerializer``: i32 BE length ‖ bytes (sizes are len + 4, done by the caller)."""
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int64_t i, n
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if not bv_valid(&v, i) or bv_entry(&v, i, &c) != E_OK:
                continue
            n = c.end - c.pos
            if out_off[i] + 4 + n > out_data.shape[0]:
                continue
            store_u32_be(op + out_off[i], <uint32_t>n)
            if n:
                memcpy(op + out_off[i] + 4, c.base + c.pos, n)


def bytes_decode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int code
    cdef int64_t i, n, first = -1
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            status[i] = 0
            if not bv_valid(&v, i):
                continue
            code = bv_entry(&v, i, &c)
            if code == E_OK:
                if c.end - c.pos < 4:
                    code = E_TRUNCATED
                else:
                    n = <int32_t>load_u32_be(c.base + c.pos)
                    if n < 0:
                        code = E_BAD_LENGTH
                    elif n > c.end - c.pos - 4:
                        code = E_TRUNCATED
                    elif n < c.end - c.pos - 4:
                        code = E_TRAILING
            if code != E_OK:
                status[i] = encode_err(code, -1)
                if first < 0:
                    first = i
                if stop_at_error:
                    break
                continue
            out_off[i + 1] = n
    return first


def bytes_decode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                      const int64_t[::1] out_off, const int64_t[::1] status, uint8_t[::1] out_data):
    cdef list keep = []
    cdef BinView v = make_view(offsets, data, validity, offset, wide, stop, keep)
    cdef Cursor c
    cdef int64_t i, n
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            n = out_off[i + 1] - out_off[i]
            if status[i] != 0 or n == 0 or out_off[i + 1] > out_data.shape[0]:
                continue
            if bv_entry(&v, i, &c) != E_OK or c.end - c.pos != n + 4:
                continue
            memcpy(op + out_off[i], c.base + c.pos + 4, n)
