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


def string_decode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                        int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
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
            if code == ERR_OK:
                size = flink_to_utf8(&c, NULL, 0, &code, &is_null)
                if size >= 0 and c.pos != c.end:
                    size = -1
                    code = ERR_TRAILING
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
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef Cursor c
    cdef int code = 0
    cdef bint is_null
    cdef int64_t i
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            if status[i] != 0 or out_off[i + 1] == out_off[i] or out_off[i + 1] > out_data.shape[0]:
                continue
            if bv_entry(&v, i, &c) != ERR_OK:
                continue
            flink_to_utf8(&c, op, out_off[i], &code, &is_null)


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


def bytes_decode_sizes(offsets, data, validity, int64_t offset, bint wide, int64_t start, int64_t stop,
                       int64_t[::1] out_off, int64_t[::1] status, bint stop_at_error):
    cdef list keep = []
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
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
            if code == ERR_OK:
                if c.end - c.pos < 4:
                    code = ERR_TRUNCATED
                else:
                    n = <int32_t>load_u32_be(c.base + c.pos)
                    if n < 0:
                        code = ERR_BAD_LENGTH
                    elif n > c.end - c.pos - 4:
                        code = ERR_TRUNCATED
                    elif n < c.end - c.pos - 4:
                        code = ERR_TRAILING
            if code != ERR_OK:
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
    cdef BinView v = bin_view(keep, offsets, data, validity, offset, wide, stop)
    cdef Cursor c
    cdef int64_t i, n
    cdef uint8_t* op = &out_data[0] if out_data.shape[0] else NULL
    with nogil:
        for i in range(start, stop):
            n = out_off[i + 1] - out_off[i]
            if status[i] != 0 or n == 0 or out_off[i + 1] > out_data.shape[0]:
                continue
            if bv_entry(&v, i, &c) != ERR_OK or c.end - c.pos != n + 4:
                continue
            memcpy(op + out_off[i], c.base + c.pos + 4, n)
