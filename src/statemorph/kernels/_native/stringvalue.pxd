# cython: language_level=3
"""Header-only transcoding between Arrow UTF-8 and Flink's ``StringValue`` (UTF-16 code units as
7-bit varints), shared by the string kernels and the flink-core Row kernels.

Why a .pxd: both kernel modules run these in their inner loops; ``cdef inline`` here costs no call
and keeps one definition of the format. Writers take ``out == NULL`` to size only, so a caller can
size and write with the same code.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t

from cursor cimport *


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


cdef inline int utf8_next(const uint8_t* s, int64_t* pos, int64_t end, uint32_t* cp) noexcept nogil:
    """Decode one strict UTF-8 code point (no overlongs, no surrogates, <= U+10FFFF)."""
    cdef int64_t p = pos[0]
    cdef uint32_t b0 = s[p], c
    cdef int n, k
    if b0 < 0x80:
        cp[0] = b0
        pos[0] = p + 1
        return ERR_OK
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
        return ERR_BAD_UTF8
    if end - p - 1 < n:
        return ERR_BAD_UTF8
    for k in range(1, n + 1):
        if (s[p + k] & 0xC0) != 0x80:
            return ERR_BAD_UTF8
        c = (c << 6) | (s[p + k] & 0x3F)
    if (n == 2 and (c < 0x800 or (c >= 0xD800 and c < 0xE000))) or (n == 3 and (c < 0x10000 or c > 0x10FFFF)):
        return ERR_BAD_UTF8
    cp[0] = c
    pos[0] = p + n + 1
    return ERR_OK


cdef inline int64_t utf8_to_flink(const uint8_t* s, int64_t a, int64_t b, uint8_t* out, int64_t p,
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
        if code[0] != ERR_OK:
            return -1
        if cp >= 0x10000:
            units += 2
            body += 6
        else:
            units += 1
            body += unit_size(cp)
    if units + 1 > 0x7FFFFFFF:
        code[0] = ERR_TOO_LARGE
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


cdef inline int64_t flink_to_utf8(Cursor* c, uint8_t* out, int64_t p, int* code, bint* is_null) noexcept nogil:
    """Decode one StringValue at the cursor into UTF-8 (size only when out == NULL)."""
    cdef uint32_t n, u, u2
    cdef int64_t count, k, size = 0
    cdef int64_t save
    is_null[0] = False
    code[0] = read_varint(c, &n, 0x7FFFFFFF)
    if code[0] != ERR_OK:
        return -1
    if n == 0:
        is_null[0] = True
        return 0
    count = n - 1
    if count > c.end - c.pos:
        code[0] = ERR_TRUNCATED
        return -1
    k = 0
    while k < count:
        code[0] = read_varint(c, &u, 0xFFFF)
        if code[0] != ERR_OK:
            return -1
        k += 1
        if u >= 0xD800 and u < 0xDC00:
            save = c.pos
            if k < count:
                code[0] = read_varint(c, &u2, 0xFFFF)
                if code[0] != ERR_OK:
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
            code[0] = ERR_LONE_SURROGATE
            return -1
        if u >= 0xDC00 and u < 0xE000:
            code[0] = ERR_LONE_SURROGATE
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
