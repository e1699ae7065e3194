"""Python twin of ``kernels/_native/strings.pyx``: Flink ``StringValue`` strings and ``byte[]`` values
between Arrow string / binary columns and binary columns of serialized values.

Same names, arguments and effect on the output buffers as the compiled kernels; the equivalence
tests run both.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)
from .views import BinView, mark_bad


def utf8_to_flink(raw: bytes) -> tuple[int, bytes | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ERR_BAD_UTF8, None
    units = len(text.encode("utf-16-le")) // 2
    if units + 1 > 0x7FFFFFFF:
        return ERR_TOO_LARGE, None
    from ..serializers.strings import encode_string

    return ERR_OK, encode_string(text)


def _utf8_entry(data: bytes, s: int, e: int) -> tuple[int, bytes | None, bool]:
    """(code, StringValue bytes, False) for the UTF-8 text at data[s:e]."""
    code, enc = utf8_to_flink(data[s:e])
    return code, enc, False


def _byte_array_entry(data: bytes, s: int, e: int) -> tuple[int, bytes | None, bool]:
    """(code, the bytes, False) for the ``byte[]`` value (i32 BE length, bytes) filling data[s:e]."""
    if e - s < 4:
        return ERR_TRUNCATED, None, False
    n = struct.unpack_from(">i", data, s)[0]
    if n < 0:
        return ERR_BAD_LENGTH, None, False
    if n != e - s - 4:
        return (ERR_TRUNCATED if n > e - s - 4 else ERR_TRAILING), None, False
    return ERR_OK, data[s + 4:e], False


#: one entry read for the two-pass kernels: (code, the bytes it becomes, is the value null)
_Entry = Callable[[bytes, int, int], tuple[int, "bytes | None", bool]]


def _sizes(v: BinView, start: int, stop: int, out_off: Any, status: Any, stop_at_error: bool, read: _Entry) -> int:
    """The ``*_sizes`` half of every codec: each row's output size in ``out_off[i + 1]``, a bad
    row's ``encode_err`` in ``status[i]`` (in ``out_off[i + 1]`` where there is no ``status``:
    the encode kernels), 1 in ``status[i]`` for a value null in the source format; the first bad
    row, or -1."""
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        if status is not None:
            status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        payload, is_null = None, False
        if code == ERR_OK:
            code, payload, is_null = read(v.data, s, e)
        if code != ERR_OK:
            slots, slot = (out_off, i + 1) if status is None else (status, i)
            first = mark_bad(slots, slot, encode_err(code, -1), i, first)
            if stop_at_error:
                break
            continue
        if is_null:
            status[i] = 1
        out_off[i + 1] = len(payload or b"")
    return first


def _decode_fill(v: BinView, start: int, stop: int, out_off: Any, status: Any, out_data: Any,
                 payload: Callable[[bytes, int, int, int], bytes | None]) -> None:
    """The ``*_decode_fill`` half: rows the sizes pass accepted, at the caller's offsets;
    ``payload(data, s, e, size)`` is what row ``data[s:e]`` writes (None: nothing)."""
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if status[i] != 0 or a == b or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != ERR_OK:
            continue
        value = payload(v.data, s, e, b - a)
        if value is not None:
            out[a:b] = value


def string_encode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                        out_off: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    return _sizes(v, start, stop, out_off, None, stop_at_error, _utf8_entry)


def string_encode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                       out_off: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if a == b or not v.valid(i) or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != ERR_OK:
            continue
        _, enc = utf8_to_flink(v.data[s:e])
        if enc is not None:
            out[a:b] = enc


def read_varint(d: bytes, pos: int, end: int, limit: int) -> tuple[int, int, int]:
    """(code, value, next pos): Flink's 7-bit varint, at most 5 groups and at most ``limit``."""
    bad = ERR_BAD_CHAR if limit == 0xFFFF else ERR_BAD_LENGTH
    v = shift = k = 0
    while True:
        if pos >= end:
            return ERR_TRUNCATED, 0, pos
        b = d[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        k += 1
        if b < 0x80:
            break
        shift += 7
        if k >= 5:
            return bad, 0, pos
    if v > limit:
        return bad, 0, pos
    return ERR_OK, v, pos


def _flink_to_utf8(data: bytes, s: int, e: int) -> tuple[int, bytes | None, bool]:
    """(code, utf-8 bytes, is_null) for the StringValue filling exactly data[s:e]."""
    code, text, is_null, pos = read_flink_utf8(data, s, e)
    if code == ERR_OK and pos != e:
        return ERR_TRAILING, None, False
    return code, text, is_null


def read_flink_utf8(data: bytes, pos: int, e: int) -> tuple[int, bytes | None, bool, int]:
    """(code, utf-8 bytes, is_null, next position) for the StringValue at data[pos:], within e."""
    code, n, pos = read_varint(data, pos, e, 0x7FFFFFFF)
    if code != ERR_OK:
        return code, None, False, pos
    if n == 0:
        return ERR_OK, b"", True, pos
    count = n - 1
    if count > e - pos:
        return ERR_TRUNCATED, None, False, pos
    out = bytearray()
    k = 0
    while k < count:
        code, u, pos = read_varint(data, pos, e, 0xFFFF)
        if code != ERR_OK:
            return code, None, False, pos
        k += 1
        if 0xD800 <= u < 0xDC00:
            if k < count:
                code, u2, pos = read_varint(data, pos, e, 0xFFFF)
                if code != ERR_OK:
                    return code, None, False, pos
                if 0xDC00 <= u2 < 0xE000:
                    k += 1
                    out += chr(0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00)).encode("utf-8")
                    continue
            return ERR_LONE_SURROGATE, None, False, pos
        if 0xDC00 <= u < 0xE000:
            return ERR_LONE_SURROGATE, None, False, pos
        out += chr(u).encode("utf-8")
    return ERR_OK, bytes(out), False, pos


def string_decode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                        out_off: Any, status: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    return _sizes(v, start, stop, out_off, status, stop_at_error, _flink_to_utf8)


def string_decode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                       out_off: Any, status: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    _decode_fill(v, start, stop, out_off, status, out_data, lambda d, s, e, size: _flink_to_utf8(d, s, e)[1])


def bytes_encode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                      out_off: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        p = int(out_off[i])
        if code != ERR_OK or p + 4 + (e - s) > len(out):
            continue
        out[p:p + 4] = struct.pack(">I", e - s)
        out[p + 4:p + 4 + e - s] = v.data[s:e]


def bytes_decode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                      out_off: Any, status: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    _decode_fill(v, start, stop, out_off, status, out_data,
                 lambda d, s, e, size: d[s + 4:e] if e - s == size + 4 else None)


def bytes_decode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                       out_off: Any, status: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    return _sizes(v, start, stop, out_off, status, stop_at_error, _byte_array_entry)


# the kernel functions, which the compiled module exports too (statemorph.kernels.tiers reads this)
__all__ = [
    "bytes_decode_fill",
    "bytes_decode_sizes",
    "bytes_encode_fill",
    "string_decode_fill",
    "string_decode_sizes",
    "string_encode_fill",
    "string_encode_sizes",
]
