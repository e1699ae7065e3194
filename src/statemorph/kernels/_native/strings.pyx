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
The same contract, as plain Python, is ``statemorph.kernels.strings_py``.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

from cursor cimport *
from stringvalue cimport *

__statemorph_native__ = True


def string_encode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                        int64_t[::1] out_off, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
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
            if code == ERR_OK:
                size = utf8_to_flink(c.base, c.pos, c.end, NULL, 0, &code)
            if size < 0:
                if row_failed(&out_off[i + 1], encode_err(code, -1), i, &first, stop_at_error):
                    break
                continue
            out_off[i + 1] = size
    return first


def string_encode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       const int64_t[::1] out_off, uint8_t[::1] out_data):
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef Cursor c
    cdef int code = 0
    cdef int64_t i
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if out_off[i + 1] == out_off[i] or not bv_valid(&v, i):
                continue
            if bv_entry(&v, i, &c) != ERR_OK or out_off[i + 1] > out_data.shape[0]:
                continue
            utf8_to_flink(c.base, c.pos, c.end, op, out_off[i], &code)


cdef enum Codec:
    STRING_VALUE  # Flink StringValue <-> Arrow UTF-8
    BYTE_ARRAY    # BytePrimitiveArraySerializer (i32 BE length, bytes) <-> Arrow binary


cdef inline int64_t decoded_size(Codec codec, Cursor* c, int* code, bint* is_null) noexcept nogil:
    """The Arrow size of the value filling the cursor's window, or -1 (``code`` says why)."""
    cdef int64_t size, n
    if codec == STRING_VALUE:
        size = flink_to_utf8(c, NULL, 0, code, is_null)
        if size >= 0 and c.pos != c.end:
            code[0] = ERR_TRAILING
            return -1
        return size
    is_null[0] = False
    code[0] = ERR_OK
    if c.end - c.pos < 4:
        code[0] = ERR_TRUNCATED
        return -1
    n = <int32_t>load_u32_be(c.base + c.pos)
    if n < 0:
        code[0] = ERR_BAD_LENGTH
    elif n > c.end - c.pos - 4:
        code[0] = ERR_TRUNCATED
    elif n < c.end - c.pos - 4:
        code[0] = ERR_TRAILING
    return n if code[0] == ERR_OK else -1


cdef inline void decode_into(Codec codec, Cursor* c, uint8_t* op, int64_t at, int64_t n) noexcept nogil:
    """Write the value at the cursor as its ``n`` Arrow bytes at ``op + at`` (nothing for a byte
    array whose window does not hold exactly ``n`` bytes)."""
    cdef int code = 0
    cdef bint is_null
    if codec == STRING_VALUE:
        flink_to_utf8(c, op, at, &code, &is_null)
    elif c.end - c.pos == n + 4:
        memcpy(op + at, c.base + c.pos + 4, n)


cdef int64_t decode_sizes(Codec codec, offsets, data, validity, int64_t offset, bint wide, int64_t start,
                          int64_t stop, int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error) except? -2:
    """The sizes half of every decode: each row's Arrow size in ``out_off[i + 1]``, a bad row's
    status in ``status[i]`` (1 for a value null in the source format); the first bad row, or -1."""
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef Cursor c
    cdef int code = 0
    cdef bint is_null = False
    cdef int64_t i, size, first = -1
    with nogil:
        for i in range(start, stop):
            out_off[i + 1] = 0
            status[i] = 0
            if not bv_valid(&v, i):
                continue
            code = bv_entry(&v, i, &c)
            size = decoded_size(codec, &c, &code, &is_null) if code == ERR_OK else -1
            if size < 0:
                if row_failed(&status[i], encode_err(code, -1), i, &first, stop_at_error):
                    break
                continue
            if is_null:
                status[i] = 1
            out_off[i + 1] = size
    return first


cdef int decode_fill(Codec codec, offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                     const int64_t[::1] out_off, const int64_t[::1] status, uint8_t[::1] out_data) except -1:
    """The fill half of every decode: the rows the sizes half accepted, at the caller's offsets."""
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef Cursor c
    cdef int64_t i
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if status[i] != 0 or out_off[i + 1] == out_off[i] or out_off[i + 1] > out_data.shape[0]:
                continue
            if bv_entry(&v, i, &c) == ERR_OK:
                decode_into(codec, &c, op, out_off[i], out_off[i + 1] - out_off[i])
    return 0


def string_decode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                        int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error):
    return decode_sizes(STRING_VALUE, offsets, data, validity, offset, wide, start, stop, out_off, status,
                        stop_at_error)


def string_decode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       const int64_t[::1] out_off, const int64_t[::1] status, uint8_t[::1] out_data):
    decode_fill(STRING_VALUE, offsets, data, validity, offset, wide, start, stop, out_off, status, out_data)


def bytes_encode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                      const int64_t[::1] out_off, uint8_t[::1] out_data):
    """``BytePrimitiveArraySerializer``: i32 BE length ‖ bytes (sizes are len + 4, done by the caller)."""
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef Cursor c
    cdef int64_t i, n
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if not bv_valid(&v, i) or bv_entry(&v, i, &c) != ERR_OK:
                continue
            n = c.end - c.pos
            if out_off[i] + 4 + n > out_data.shape[0]:
                continue
            store_u32_be(op + out_off[i], <uint32_t>n)
            if n:
                memcpy(op + out_off[i] + 4, c.base + c.pos, n)


def bytes_decode_fill(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                      const int64_t[::1] out_off, const int64_t[::1] status, uint8_t[::1] out_data):
    decode_fill(BYTE_ARRAY, offsets, data, validity, offset, wide, start, stop, out_off, status, out_data)


def bytes_decode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error):
    return decode_sizes(BYTE_ARRAY, offsets, data, validity, offset, wide, start, stop, out_off, status,
                        stop_at_error)
