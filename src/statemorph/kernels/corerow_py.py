"""flink-core ``Row`` (``RowSerializer``) ↔ Arrow struct columns: the Python twins of
``kernels/_native/corerow.pyx`` (same names, arguments and effect on the output buffers); their program
comes from :mod:`statemorph.kernels.plans.corerow`.

Format (as ``RowSerializer`` in ``serializers/tuples.py`` writes it): ``MASK ‖ non-null fields``.
The mask is MSB-first over ``[kind bit 0, kind bit 1,] field 0 .. field n-1`` (the two RowKind
bits only when the serializer ``supports_row_kind``), zero-padded to whole bytes; fields are in their DataStream formats
(big-endian primitives, ``StringValue`` strings, i32-length ``byte[]``, nested rows the same way).

Arrow side: the struct :func:`statemorph.bulk.types.arrow_type_for` gives, as the per-value path
does: the RowKind is not a column, so decode drops it and encode writes INSERT (both as
``to_arrow_value`` / ``from_arrow_value`` do); a Char is a one-character string.

Why one pass with resumable calls: each row is sized and written (encode) or validated and
scattered (decode) while it is in cache, straight into exact-type Arrow buffers (int32 offsets
unless they would overflow). A kernel call stops at the first bad row or at the first row whose
bytes do not fit, and reports it; the caller records the error or grows the buffer and calls again
from there. Clean input therefore needs no status array and one walk per row.

Program (int64 matrix, pre-order, ``PROGRAM_COLUMNS`` columns): KIND, POS (field index in the parent),
END (first node after the subtree), ARITY (rows), -, -, FLAGS (rows: 1 = RowKind bits in the
mask), WIDTH (fixed-width kinds). Kinds: ``LEAF_BOOL`` .. ``LEAF_CHAR`` and the three below.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)
from .plans.corerow import STRING_KINDS
from .primitives_py import java_be
from .rowdata_py import ArrowColumns, RowError
from .strings_py import read_flink_utf8, utf8_to_flink
from .views import MAX32, BinView, bit_get, bit_set


def _mask_len(p: list[list[int]], node: int) -> tuple[int, int]:
    """(mask bytes, index of field 0's bit) of row node ``node``."""
    kb = 2 if p[node][COL_FLAGS] & FLAG_ROW_KIND else 0
    return (p[node][COL_ARITY] + kb + 7) >> 3, kb


def _mask_bit(m: bytes, k: int) -> bool:
    return bool(m[k >> 3] >> (7 - (k & 7)) & 1)


# ------------------------------------------------------------------------------------------------
# encode: Arrow struct columns → Row bytes
# ------------------------------------------------------------------------------------------------


def _jchar(raw: bytes) -> tuple[int, int]:
    """(code, UTF-16 unit) of an Arrow string holding one Java char."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ERR_BAD_UTF8, 0
    if len(text) != 1 or ord(text) >= 0x10000:
        return ERR_BAD_JCHAR, 0
    return ERR_OK, ord(text)


def _encode_row(p: list[list[int]], cols: ArrowColumns, node: int, i: int, out: bytearray, err: list[int]) -> None:
    """Append row ``i`` of row node ``node`` to ``out`` (mirror of ``encode_row``); raises RowError."""
    mlen, kb = _mask_len(p, node)
    mask = len(out)
    out += bytes(mlen)  # kind bits stay 0: Arrow rows are INSERT, as on the per-value path
    c = node + 1
    while c < p[node][COL_END]:
        k = p[c][COL_KIND]
        if not cols.valid(c, i):
            bit = kb + p[c][COL_POS]
            out[mask + (bit >> 3)] |= 0x80 >> (bit & 7)
            c = p[c][COL_END]
            continue
        _, vals, _, off, _ = cols.cols[c]
        if k == LEAF_ROW:
            _encode_row(p, cols, c, i, out, err)
        elif k in STRING_KINDS:
            s, n = cols.string(c, i)
            code = ERR_BAD_ARROW if s < 0 else ERR_OK
            if code == ERR_OK and k == LEAF_STR:
                code, enc = utf8_to_flink(vals[s:s + n])
                if enc is not None:
                    out += enc
            elif code == ERR_OK and k == LEAF_CHAR:
                code, unit = _jchar(vals[s:s + n])
                out += unit.to_bytes(2, "big")
            elif code == ERR_OK:
                code = ERR_TOO_LARGE if n > 0x7FFFFFFF else ERR_OK
                out += n.to_bytes(4, "big") + vals[s:s + n]
            if code != ERR_OK:
                err[0] = c
                raise RowError(code)
        elif k == LEAF_BOOL:
            out.append(1 if bit_get(vals, off + i) else 0)
        else:
            w = p[c][COL_WIDTH]
            out += java_be(k, vals[w * (off + i):w * (off + i) + w])
        c = p[c][COL_END]


def corerow_encode(prog: Any, cols: list[Any], start: int, stop: int, out_off: Any, out_data: Any,
                   pos: int) -> tuple[int, int, int]:
    """Encode rows ``start..stop`` packed into ``out_data`` from ``pos`` on; ``out_off[i + 1]`` =
    end of row ``i`` (int32 or int64 array; null and bad rows take no bytes).

    ``cols[node]`` = (validity, values, offsets, element offset, wide, length) of each program node's Arrow
    column. Returns ``(row, pos, status)``: status 0 = all rows done (row = stop); negative = row
    ``row`` is bad (:func:`encode_err`; its end is written, resume at ``row + 1``); positive =
    row ``row`` needs ``out_data`` of at least ``status`` bytes (or, past :data:`MAX32` with int32
    offsets, int64 offsets): nothing of it is written, resume at ``row``."""
    p = np.asarray(prog).tolist()
    cc = ArrowColumns(cols)
    out = memoryview(out_data).cast("B")
    narrow = np.asarray(out_off).itemsize == 4
    for i in range(start, stop):
        if cc.valid(0, i):
            row = bytearray()
            err = [-1]
            try:
                _encode_row(p, cc, 0, i, row, err)
            except RowError as e:
                out_off[i + 1] = pos
                return i, pos, encode_err(e.code, err[0])
            need = pos + len(row)
            if need > len(out) or (narrow and need > MAX32):
                return i, pos, need
            out[pos:need] = row
            pos = need
        out_off[i + 1] = pos
    return stop, pos, 0


# ------------------------------------------------------------------------------------------------
# decode: Row bytes → Arrow struct columns
# ------------------------------------------------------------------------------------------------


class _Out:
    """The per-node Arrow output buffers of one decode call, as views."""

    def __init__(self, outs: list[Any]) -> None:
        self.valid: list[Any] = [None]
        self.vals: list[Any] = [None]
        self.offs: list[Any] = [None]
        self.sdata: list[Any] = [None]
        for vbits, vals, offs, sdata in outs[1:]:
            self.valid.append(memoryview(vbits).cast("B"))
            self.vals.append(memoryview(vals).cast("B") if vals is not None else None)
            self.offs.append(offs)
            self.sdata.append(memoryview(sdata).cast("B") if sdata is not None else None)


def _decode_row(p: list[list[int]], d: bytes, pos: int, end: int, o: _Out, spos: Any, node: int, i: int,
                err: list[int]) -> int:
    """Scatter the row at ``d[pos:]`` into row ``i`` of the outputs (mirror of ``decode_row``);
    returns the next position. Raises RowError for bad bytes, _Full when a string column's
    buffer is short (``err`` = [node, bytes needed])."""
    mlen, kb = _mask_len(p, node)
    if end - pos < mlen:
        err[0] = node
        raise RowError(ERR_TRUNCATED)
    m = d[pos:pos + mlen]
    if mlen and m[-1] & ((1 << (mlen * 8 - p[node][COL_ARITY] - kb)) - 1):
        err[0] = node  # padding bits after the last field are set
        raise RowError(ERR_BAD_HEADER)
    if node and kb and m[0] & 0xC0:
        # a nested row whose RowKind is not INSERT: an Arrow struct has no row kind, so the
        # reference reads the entry and the Arrow conversion refuses it, naming the path
        err[0] = node
        raise RowError(HAND_BACK)
    pos += mlen
    c = node + 1
    while c < p[node][COL_END]:
        k = p[c][COL_KIND]
        if _mask_bit(m, kb + p[c][COL_POS]):
            c = p[c][COL_END]
            continue
        if k == LEAF_ROW:
            bit_set(o.valid[c], i)
            pos = _decode_row(p, d, pos, end, o, spos, c, i, err)
            c = p[c][COL_END]
            continue
        if k in STRING_KINDS:
            code, raw, is_null, pos = _read_string_kind(k, d, pos, end)
            if code != ERR_OK:
                err[0] = c
                raise RowError(code)
            assert raw is not None
            need = int(spos[c]) + len(raw)
            if need > len(o.sdata[c]) or (o.offs[c].itemsize == 4 and need > MAX32):
                err[0], err[1] = c, need
                raise _Full()
            o.sdata[c][int(spos[c]):need] = raw
            spos[c] = need
            if not is_null:
                bit_set(o.valid[c], i)
        else:
            w = p[c][COL_WIDTH]
            if end - pos < w:
                err[0] = c
                raise RowError(ERR_TRUNCATED)
            bit_set(o.valid[c], i)
            if k == LEAF_BOOL:
                if d[pos]:
                    bit_set(o.vals[c], i)
            else:
                o.vals[c][w * i:w * i + w] = d[pos:pos + w][::-1]
            pos += w
        c = p[c][COL_END]
    return pos


def _read_string_kind(k: int, d: bytes, pos: int, end: int) -> tuple[int, bytes | None, bool, int]:
    """(code, Arrow bytes, is_null, next position) of a STR / CHAR / BYTES field value."""
    if k == LEAF_STR:
        return read_flink_utf8(d, pos, end)
    if k == LEAF_CHAR:
        if end - pos < 2:
            return ERR_TRUNCATED, None, False, pos
        u = int.from_bytes(d[pos:pos + 2], "big")
        if 0xD800 <= u < 0xE000:
            return ERR_LONE_SURROGATE, None, False, pos
        return ERR_OK, chr(u).encode("utf-8"), False, pos + 2
    if end - pos < 4:
        return ERR_TRUNCATED, None, False, pos
    n = int.from_bytes(d[pos:pos + 4], "big", signed=True)
    if n < 0:
        return ERR_BAD_LENGTH, None, False, pos
    if n > end - pos - 4:
        return ERR_TRUNCATED, None, False, pos
    return ERR_OK, d[pos + 4:pos + 4 + n], False, pos + 4 + n


class _Full(Exception):
    """A string column's data buffer cannot take the row (internal to the decode twin)."""


def _rewind(p: list[list[int]], o: _Out, spos: Any, i: int) -> None:
    """Undo the partial scatter of row ``i``: its bits cleared, string positions back."""
    for c in range(1, len(p)):
        o.valid[c][i >> 3] &= ~(1 << (i & 7)) & 0xFF
        if p[c][COL_KIND] in STRING_KINDS:
            spos[c] = o.offs[c][i]


def corerow_decode(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                   stop: int, outs: list[Any], spos: Any) -> tuple[int, int, int]:
    """Decode entries ``start..stop`` of a binary column into per-node Arrow buffers.

    ``outs[node]`` (node >= 1) = (validity bitmap, values, offsets, data): values for fixed kinds
    (a bitmap for BOOL), offsets (int32 or int64, ``offsets[start]`` set by the caller) and data for
    STR / CHAR / BYTES, only the bitmap for rows; ``spos[node]`` = next write position in that
    node's data. Returns ``(row, status, node)``: status 0 = all done; negative = entry ``row`` is
    bad (:func:`encode_err`; it is left empty, resume at ``row + 1``); positive = node ``node``'s
    data must hold ``status`` bytes (int64 offsets past :data:`MAX32`), resume at ``row``."""
    v = BinView(offsets, data, validity, offset, wide, stop)
    p = np.asarray(prog).tolist()
    o = _Out(outs)
    strs = [c for c in range(1, len(p)) if p[c][COL_KIND] in STRING_KINDS]
    for i in range(start, stop):
        if v.valid(i):
            err = [-1, 0]
            code, s, e = v.entry(i)
            try:
                if code != ERR_OK:
                    raise RowError(code)
                if _decode_row(p, v.data, s, e, o, spos, 0, i, err) != e:
                    err[0] = -1
                    raise RowError(ERR_TRAILING)
            except RowError as x:
                _rewind(p, o, spos, i)
                for c in strs:
                    o.offs[c][i + 1] = spos[c]
                return i, encode_err(x.code, err[0]), -1
            except _Full:
                _rewind(p, o, spos, i)
                return i, err[1], err[0]
        for c in strs:
            o.offs[c][i + 1] = spos[c]
    return stop, 0, -1


__all__ = ["corerow_decode", "corerow_encode"]
