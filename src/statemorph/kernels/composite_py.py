"""Python twin of ``kernels/_native/composite.pyx``: flink-core ``Row`` (``core_row_sizes`` /
``core_row_fill``) and POJO (``pojo_migrate_run``) migration, byte to byte, with the same arguments
and the same effect on the output buffers. Programs: :mod:`statemorph.kernels.plans.composite`.

A POJO value is ``flags ‖ for each field in byte order: null flag ‖ [field bytes]``
(as ``serializers/pojo.py`` writes it). Migrating it between compatible schemas (fields added, removed,
reordered by name, nested POJOs evolving the same way) moves whole fields: kept fields are copied
in the new order, removed ones are validated and skipped, added ones get the bytes the per-value
reference writes for them (null flag ``01``, or ``00`` and the dataclass default). Fields are
copied *canonically*, because the reference (and Flink, which migrates through Java objects)
re-serializes values: a boolean byte other than 0 becomes ``01``, every float / double NaN becomes
the canonical NaN, string varints are rewritten minimally, and a non-null field whose value reads as
null (a null ``StringValue``, a nested POJO with flags ``01``) is written with null flag ``01``.

Program (int64 matrix, ``PROGRAM_COLUMNS`` columns). A POJO node ``[COMPOSITE_POJO, -, END, N_OLD, EMIT,
N_NEW, -, -]`` is followed by its old fields in old byte order (each a leaf ``[kind, -, END, -, -,
-, -, WIDTH]`` of the flink-core Row remap's leaf kinds ``COMPOSITE_*`` (below), or a nested POJO subtree),
then its ``N_NEW`` emit rows ``[COMPOSITE_EMIT, -, END, -, SRC, CONST, CONST_LEN, -]`` in new byte order
(``SRC`` the old field's node, or -1 for the constant bytes at ``CONST``), then the constants,
seven bytes per ``[COMPOSITE_CONST, b0, .., b6]`` row. The leaf checks and canonical copies are shared with
the Row remap (``check_leaf`` / ``put_canonical`` above and their compiled twins).
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from ..serializers.strings import varlen
from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)
from .primitives_py import JAVA_NAN_F32, JAVA_NAN_F64
from .rowdata_py import RowError, prog_matrix
from .strings_py import read_varint
from .views import BinView, check_outputs, mark_bad, one_pass_run

# ---------------------------------------------------------------------------------- flink-core Row
NUL, REWRITE = 1, 2


def check_leaf(d: bytes, pos: int, end: int, kind: int, width: int) -> tuple[int, int, int]:
    """Mirror of ``composite.check_leaf``: (code, state 0 / NUL / REWRITE, next pos)."""
    if kind == COMPOSITE_STR:
        code, n, at = read_varint(d, pos, end, 0x7FFFFFFF)
        if code != ERR_OK:
            return code, 0, at
        if n == 0:
            return ERR_OK, NUL, at
        state = REWRITE if d[at - 1] == 0 and at - pos > 1 else 0
        if n - 1 > end - at:
            return ERR_TRUNCATED, 0, at
        for _ in range(n - 1):
            start = at
            code, _u, at = read_varint(d, at, end, 0xFFFF)
            if code != ERR_OK:
                return code, 0, at
            if at - start > 1 and d[at - 1] == 0:
                state = REWRITE
        return ERR_OK, state, at
    if kind == COMPOSITE_BYTES:
        if end - pos < 4:
            return ERR_TRUNCATED, 0, pos
        n = struct.unpack_from(">i", d, pos)[0]
        if n < 0:
            return ERR_BAD_LENGTH, 0, pos
        if n > end - pos - 4:
            return ERR_TRUNCATED, 0, pos
        return ERR_OK, 0, pos + 4 + n
    if end - pos < width:
        return ERR_TRUNCATED, 0, pos
    return ERR_OK, 0, pos + width


def put_canonical(kind: int, d: bytes, start: int, stop: int, rewrite: bool) -> bytes:
    """Mirror of ``remap.put_canonical``: the checked leaf value ``d[start:stop]`` as the per-value
    reference re-serializes it (boolean 01, canonical NaN, minimal string varints)."""
    raw = d[start:stop]
    if kind == COMPOSITE_BOOL:
        return b"\x01" if raw[0] else b"\x00"
    if kind == COMPOSITE_F32 and math.isnan(struct.unpack(">f", raw)[0]):
        return JAVA_NAN_F32
    if kind == COMPOSITE_F64 and math.isnan(struct.unpack(">d", raw)[0]):
        return JAVA_NAN_F64
    if kind == COMPOSITE_STR and rewrite:
        _code, n, pos = read_varint(d, start, stop, 0x7FFFFFFF)
        out = bytearray(varlen(n))
        for _ in range(n - 1):
            _code, u, pos = read_varint(d, pos, stop, 0xFFFF)
            out += varlen(u)
        return bytes(out)
    return raw


def _mask_bit(m: bytes, k: int) -> bool:
    return bool(m[k >> 3] >> (7 - (k & 7)) & 1)


def _core_row_walk(p: list[list[int]], node: int, d: bytes, pos: int, end: int, out: bytearray | None,
                   err: list[int]) -> tuple[int, int]:
    """Mirror of ``row_walk``: (new size, next pos); raises RowError."""
    arity = p[node][COL_ARITY]
    oldk = 2 if p[node][COL_OLD_FLAG] else 0
    newk = 2 if p[node][COL_NEW_FLAG] else 0
    oldlen, newlen = (arity + oldk + 7) >> 3, (arity + newk + 7) >> 3
    if end - pos < oldlen:
        err[0] = node
        raise RowError(ERR_TRUNCATED)
    m = d[pos:pos + oldlen]
    if any(_mask_bit(m, k) for k in range(arity + oldk, oldlen * 8)):
        err[0] = node
        raise RowError(ERR_BAD_HEADER)
    kind_bits = (int(_mask_bit(m, 0)) | int(_mask_bit(m, 1)) << 1) if oldk else 0
    pos += oldlen
    size = newlen
    at = len(out) if out is not None else 0
    if out is not None:
        head = bytearray(newlen)
        if newk:
            head[0] |= (0x80 if kind_bits & 1 else 0) | (0x40 if kind_bits & 2 else 0)
        for i in range(arity):
            if _mask_bit(m, oldk + i):
                k = newk + i
                head[k >> 3] |= 0x80 >> (k & 7)
        out += head
    child = node + 1
    while child < p[node][COL_END]:
        if _mask_bit(m, oldk + p[child][COL_POS]):
            child = p[child][COL_END]
            continue
        start = pos
        kind = p[child][COL_KIND]
        if kind == COMPOSITE_ROW:
            r, pos = _core_row_walk(p, child, d, pos, end, out, err)
            size += r
            child = p[child][COL_END]
            continue
        code, state, pos = check_leaf(d, pos, end, kind, p[child][COL_WIDTH])
        if code != ERR_OK:
            err[0] = child
            raise RowError(code)
        if state == NUL:  # a null string under a 'present' mask bit: null, as the reference writes it
            if out is not None:
                k = newk + p[child][COL_POS]
                out[at + (k >> 3)] |= 0x80 >> (k & 7)
        else:
            value = put_canonical(kind, d, start, pos, state == REWRITE)
            if out is not None:
                out += value
            size += len(value)
        child = p[child][COL_END]
    return size, pos


def core_row_sizes(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                   stop: int, out_off: Any, stop_at_error: bool) -> int:
    v = BinView(offsets, data, validity, offset, wide, stop)
    p = prog_matrix(prog).tolist()
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        if not v.valid(i):
            continue
        err = [-1]
        code, s, e = v.entry(i)
        if code == ERR_OK:
            try:
                r, pos = _core_row_walk(p, 0, v.data, s, e, None, err)
                if pos != e:
                    code = ERR_TRAILING
                else:
                    out_off[i + 1] = r
            except RowError as x:
                code = x.code
        if code != ERR_OK:
            first = mark_bad(out_off, i + 1, encode_err(code, err[0]), i, first)
            if stop_at_error:
                break
    return first


def core_row_fill(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                  stop: int, out_off: Any, out_data: Any) -> None:
    v = BinView(offsets, data, validity, offset, wide, stop)
    p = prog_matrix(prog).tolist()
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if a == b or b > len(out) or not v.valid(i):
            continue
        code, s, e = v.entry(i)
        if code != ERR_OK:
            continue
        buf = bytearray()
        _core_row_walk(p, 0, v.data, s, e, buf, [-1])
        out[a:b] = buf


# ---------------------------------------------------------------------------------- POJO


# ---------------------------------------------------------------------------------- the twin
class _Walk:
    """One entry's walk state: per old node, where its bytes start and end and its state (NUL: reads
    as null, REWRITE: a string to re-encode)."""

    def __init__(self, p: list[list[int]], d: bytes) -> None:
        self.p = p
        self.d = d
        self.start = [0] * len(p)
        self.stop = [0] * len(p)
        self.state = [0] * len(p)
        self.err = -1

    def fail(self, code: int, node: int) -> RowError:
        self.err = node
        return RowError(code)

    def check(self, node: int, pos: int, end: int) -> int:
        """Validate the POJO at ``pos`` (mirror of ``pojo_check``); returns the next position."""
        p, d = self.p, self.d
        if pos >= end:
            raise self.fail(ERR_TRUNCATED, node)
        flags = d[pos]
        pos += 1
        self.state[node] = NUL if flags == 1 else 0
        if flags == 1:
            return pos
        if flags != 2:
            raise self.fail(ERR_BAD_FLAG, node)
        child = node + 1
        for _ in range(p[node][COL_N_OLD]):
            if pos >= end:
                raise self.fail(ERR_TRUNCATED, child)
            flag = d[pos]
            pos += 1
            if flag > 1:
                raise self.fail(ERR_BAD_FLAG, child)
            self.state[child] = NUL if flag else 0
            self.start[child] = pos
            if flag == 0 and p[child][COL_KIND] == COMPOSITE_POJO:
                pos = self.check(child, pos, end)
            elif flag == 0 and p[child][COL_KIND] == COMPOSITE_ROW:
                err = [-1]
                try:
                    _size, pos = _core_row_walk(p, child, d, pos, end, None, err)
                except RowError as x:
                    raise self.fail(x.code, err[0]) from None
                self.stop[child] = pos
            elif flag == 0:
                code, self.state[child], pos = check_leaf(d, pos, end, p[child][COL_KIND], p[child][COL_WIDTH])
                if code != ERR_OK:
                    raise self.fail(code, child)
                self.stop[child] = pos
            child = p[child][COL_END]
        return pos

    def emit(self, node: int, out: bytearray) -> None:
        """Write the checked POJO ``node`` in the new layout (mirror of ``pojo_emit``)."""
        p = self.p
        if self.state[node] == NUL:
            out.append(1)
            return
        out.append(2)
        row = p[node][COL_EMIT_AT]
        for _ in range(p[node][COL_N_NEW]):
            src = p[row][COL_SRC]
            if src < 0:
                c, n = p[row][COL_CONST], p[row][COL_CONST_LEN]
                rows = p[c:c + (n + PROGRAM_COLUMNS - 2) // (PROGRAM_COLUMNS - 1)]
                out += bytes(v for r in rows for v in r[1:])[:n]
            elif self.state[src] == NUL:
                out.append(1)
            else:
                out.append(0)
                if p[src][COL_KIND] == COMPOSITE_POJO:
                    self.emit(src, out)
                elif p[src][COL_KIND] == COMPOSITE_ROW:
                    _core_row_walk(p, src, self.d, self.start[src], self.stop[src], out, [-1])
                else:
                    out += put_canonical(p[src][COL_KIND], self.d, self.start[src], self.stop[src],
                                         self.state[src] == REWRITE)
            row += 1


def pojo_migrate_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                     stop: int, out_off: Any, out_data: Any, pos: int) -> tuple[int, int, int]:
    """One-pass POJO migrate, the contract of ``rowdata_py.migrate_run``: validate and write each entry
    packed from ``out_data[pos]``, its end in ``out_off[i + 1]``; returns ``(next_row, pos, status)``
    (``status < 0``: entry ``next_row`` is bad; else ``next_row < stop``: it did not fit)."""
    check_outputs("pojo_migrate_run", out_off, out_data, start, stop, pos)
    v = BinView(offsets, data, validity, offset, wide, stop)
    p = np.asarray(prog, dtype=np.int64).tolist()
    if not p or len(p[0]) != PROGRAM_COLUMNS or p[0][COL_KIND] != COMPOSITE_POJO:
        raise ValueError("bad POJO program")

    def migrated(code: int, s: int, e: int) -> tuple[int, bytearray]:
        w = _Walk(p, v.data)
        buf = bytearray()
        if code == ERR_OK:
            try:
                if w.check(0, s, e) != e:
                    w.err, code = -1, ERR_TRAILING
            except RowError as x:
                code = x.code
        if code != ERR_OK:
            return encode_err(code, w.err), buf
        w.emit(0, buf)
        return 0, buf

    return one_pass_run(v, start, stop, out_off, out_data, pos, migrated)

# the kernel functions, which the compiled module exports too (statemorph.kernels.tiers reads this)
__all__ = ["core_row_fill", "core_row_sizes", "pojo_migrate_run"]
