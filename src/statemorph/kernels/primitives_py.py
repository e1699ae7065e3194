"""Python twin of ``kernels/_native/primitives.pyx``: fixed-width DataStream primitives (Flink's
big-endian ``IntSerializer``, ``LongSerializer`` ...) between Arrow columns and binary columns.

Same names, arguments and effect on the output buffers as the compiled kernels; the equivalence
tests run both.
"""

from __future__ import annotations

import struct
from typing import Any

from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)
from .views import BinView, bit_get, mark_bad

_WIDTH = {LEAF_BOOL: 1, LEAF_I8: 1, LEAF_I16: 2, LEAF_CHAR: 2, LEAF_I32: 4, LEAF_F32: 4,
          LEAF_I64: 8, LEAF_F64: 8}



#: Java's canonical NaNs (``floatToIntBits`` / ``doubleToLongBits``), big-endian
JAVA_NAN_F32 = b"\x7f\xc0\x00\x00"
JAVA_NAN_F64 = b"\x7f\xf8\x00\x00\x00\x00\x00\x00"


def kind_width(kind: int) -> int:
    return _WIDTH[kind]




def fixed_encode(kind: int, values: Any, validity: Any, offset: int, start: int, stop: int,
                 out_off: Any, out_data: Any) -> None:
    vals = memoryview(values).cast("B")
    bits = memoryview(validity).cast("B") if validity is not None else None
    w = _WIDTH[kind]
    need = (offset + stop + 7) // 8 if kind == LEAF_BOOL else (offset + stop) * w
    if need > len(vals):
        raise ValueError("values buffer shorter than the array")
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        j = offset + i
        if bits is not None and not bit_get(bits, j):
            continue
        p = int(out_off[i])
        if p + w > len(out):
            break
        if kind == LEAF_BOOL:
            out[p] = 1 if bit_get(vals, j) else 0
        elif kind == LEAF_I8:
            out[p] = vals[j]
        else:
            out[p:p + w] = java_be(kind, bytes(vals[w * j:w * j + w]))




def java_be(kind: int, raw: bytes) -> bytes:
    """A little-endian Arrow value as Java writes it: big-endian, NaNs canonical (``floatToIntBits``)."""
    if kind == LEAF_F32:
        u = struct.unpack("<I", raw)[0]
        if (u & 0x7F800000) == 0x7F800000 and u & 0x007FFFFF:
            raw = struct.pack("<I", 0x7FC00000)
    elif kind == LEAF_F64:
        u = struct.unpack("<Q", raw)[0]
        if (u & 0x7FF0000000000000) == 0x7FF0000000000000 and u & 0x000FFFFFFFFFFFFF:
            raw = struct.pack("<Q", 0x7FF8000000000000)
    return raw[::-1]




def fixed_decode(kind: int, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                 stop: int, out_values: Any, status: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    w = _WIDTH[kind]
    out = memoryview(out_values).cast("B")
    if (kind == LEAF_BOOL and stop > len(out)) or (kind != LEAF_BOOL and stop * w > len(out)):
        raise ValueError("output buffer too small")
    first = -1
    for i in range(start, stop):
        status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        if code == ERR_OK and e - s != w:
            code = ERR_TRUNCATED if e - s < w else ERR_TRAILING
        if code != ERR_OK:
            first = mark_bad(status, i, encode_err(code, -1), i, first)
            if stop_at_error:
                break
            continue
        if kind == LEAF_BOOL:
            out[i] = 1 if v.data[s] else 0
        elif kind == LEAF_I8:
            out[i] = v.data[s]
        else:
            out[w * i:w * i + w] = v.data[s:e][::-1]
    return first

# the kernel functions, which the compiled module exports too (statemorph.kernels.tiers reads this)
__all__ = ["fixed_decode", "fixed_encode"]
