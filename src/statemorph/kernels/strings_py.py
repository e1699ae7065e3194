"""Python twin of ``_native/strings.pyx``: Flink ``StringValue`` strings and ``byte[]`` values
between Arrow string / binary columns and binary columns of serialized values.

Same names, arguments and effect on the output buffers as the compiled kernels; the equivalence
tests run both.
"""

from __future__ import annotations

import struct
from typing import Any

from .abi import (
    ERR_BAD_CHAR,
    ERR_BAD_LENGTH,
    ERR_BAD_UTF8,
    ERR_LONE_SURROGATE,
    ERR_OK,
    ERR_TOO_LARGE,
    ERR_TRAILING,
    ERR_TRUNCATED,
    encode_err,
)
from .views import BinView


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


def string_encode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                        out_off: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        enc = None
        if code == ERR_OK:
            code, enc = utf8_to_flink(v.data[s:e])
        if enc is None:
            out_off[i + 1] = encode_err(code, -1)
            if first < 0:
                first = i
            if stop_at_error:
                break
            continue
        out_off[i + 1] = len(enc)
    return first


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
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        text = None
        is_null = False
        if code == ERR_OK:
            code, text, is_null = _flink_to_utf8(v.data, s, e)
        if code != ERR_OK:
            status[i] = encode_err(code, -1)
            if first < 0:
                first = i
            if stop_at_error:
                break
            continue
        if is_null:
            status[i] = 1
        out_off[i + 1] = len(text or b"")
    return first


def string_decode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                       out_off: Any, status: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if status[i] != 0 or a == b or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != ERR_OK:
            continue
        _, text, _ = _flink_to_utf8(v.data, s, e)
        if text is not None:
            out[a:b] = text


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


def bytes_decode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                       out_off: Any, status: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        n = 0
        if code == ERR_OK:
            if e - s < 4:
                code = ERR_TRUNCATED
            else:
                n = struct.unpack_from(">i", v.data, s)[0]
                if n < 0:
                    code = ERR_BAD_LENGTH
                elif n > e - s - 4:
                    code = ERR_TRUNCATED
                elif n < e - s - 4:
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


def bytes_decode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                      out_off: Any, status: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if status[i] != 0 or a == b or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != ERR_OK or e - s != b - a + 4:
            continue
        out[a:b] = v.data[s + 4:e]

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
