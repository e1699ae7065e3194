"""Python twin of ``avro_migrate_run`` in ``kernels/_native/avro.pyx``: the Avro byte program (see
:mod:`statemorph.kernels.plans.avro`) run over a binary column, with the same arguments and the
same effect on the output buffers."""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ..serializers.strings import varlen
from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)
from .views import BinView, check_outputs, one_pass_run

# EMIT: what an op writes. EMIT_VALUE: the writer's bytes as they are (checked); EMIT_I32 .. EMIT_F64: a number in
# that type; EMIT_BOOL: 00 / 01; EMIT_UTF8: bytes read as a string (checked then); EMIT_TREE: a union, record,
# array or map (its items say); EMIT_SKIP: nothing


_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")


# ---------------------------------------------------------------------------------- the twin
class _Fail(Exception):
    def __init__(self, code: int, node: int) -> None:
        self.code = code
        self.node = node


class _Walk:
    """One entry's walk over the program (mirror of ``av_value`` in ``kernels/_native/avro.pyx``)."""

    def __init__(self, p: list[list[int]], tail: list[int], consts: bytes, d: bytes, end: int) -> None:
        self.p = p
        self.tail = tail
        self.consts = consts
        self.d = d
        self.end = end
        self.budget = p[0][COL_EMIT]
        self.scratch = [0] * max(p[0][COL_C], 1)

    def take(self, pos: int, n: int, node: int) -> int:
        if n < 0 or self.end - pos < n:
            raise _Fail(ERR_TRUNCATED, node)
        return pos + n

    def i32(self, pos: int, node: int) -> int:
        self.take(pos, 4, node)
        return int.from_bytes(self.d[pos:pos + 4], "big", signed=True)

    def blob(self, pos: int, node: int) -> int:
        """A string / bytes / map key at ``pos``: i32 BE length (not negative), then that many
        bytes; returns the position after them."""
        n = self.i32(pos, node)
        if n < 0:
            raise _Fail(ERR_BAD_LENGTH, node)
        return self.take(pos + 4, n, node)

    def count(self, pos: int, node: int) -> tuple[int, int]:
        value = shift = 0
        for _ in range(10):
            self.take(pos, 1, node)
            b = self.d[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return min(value, 1 << 62), pos
            shift += 7
        raise _Fail(ERR_BAD_LENGTH, node)

    def value(self, node: int, pos: int, out: bytearray | None) -> int:  # noqa: C901 - one branch per op
        """Read the writer value of ``node`` at ``pos`` (writing the reader value to ``out`` unless
        None); returns the position after it."""
        row = self.p[node]
        op = row[COL_OP]
        d = self.d
        if out is not None and row[COL_EMIT] == EMIT_SKIP:
            out = None
        if out is not None and row[COL_UNION] >= 0:
            out += row[COL_UNION].to_bytes(4, "big")
        if op == AVRO_OP_NULL:
            return pos
        if op == AVRO_OP_BOOL:
            self.take(pos, 1, node)
            if out is not None:
                out.append(1 if d[pos] else 0)
            return pos + 1
        if op in (AVRO_OP_INT, AVRO_OP_LONG, AVRO_OP_FLOAT, AVRO_OP_DOUBLE):
            width = 4 if op in (AVRO_OP_INT, AVRO_OP_FLOAT) else 8
            self.take(pos, width, node)
            raw = d[pos:pos + width]
            if op in (AVRO_OP_INT, AVRO_OP_LONG):
                v: Any = int.from_bytes(raw, "big", signed=True)
                if not row[COL_A] <= v <= row[COL_B]:
                    raise _Fail(ERR_AVRO_RANGE, node)
            else:
                v = (_F32 if op == AVRO_OP_FLOAT else _F64).unpack(raw)[0]
            if out is not None:
                out += raw if row[COL_EMIT] == EMIT_VALUE else _put_number(row[COL_EMIT], v)
            return pos + width
        if op == AVRO_OP_BLOB:
            stop = self.blob(pos, node)
            if row[COL_A] or (out is not None and row[COL_EMIT] == EMIT_UTF8):
                try:
                    d[pos + 4:stop].decode("utf-8")
                except UnicodeDecodeError:
                    raise _Fail(ERR_BAD_UTF8 if row[COL_A] else HAND_BACK, node) from None
            if out is not None:
                out += d[pos:stop]
            return stop
        if op == AVRO_OP_FIXED:
            stop = self.take(pos, row[COL_A], node)
            if out is not None:
                out += d[pos:stop]
            return stop
        if op in (AVRO_OP_ENUM, AVRO_OP_UNION):
            i = self.i32(pos, node)
            if not 0 <= i < row[COL_A]:
                raise _Fail(ERR_AVRO_INDEX, node)
            if op == AVRO_OP_UNION:
                return self.value(self.tail[row[COL_B] + i], pos + 4, out)
            if out is not None:
                out += d[pos:pos + 4] if row[COL_EMIT] == EMIT_VALUE \
                    else self.tail[row[COL_B] + i].to_bytes(4, "big")
            return pos + 4
        if op in (AVRO_OP_ARRAY, AVRO_OP_MAP):
            return self.sequence(node, row, pos, out)
        return self.record(node, row, pos, out)

    def sequence(self, node: int, row: list[int], pos: int, out: bytearray | None) -> int:
        is_map = row[COL_OP] == AVRO_OP_MAP
        unit = row[COL_B]
        items = bytearray() if out is not None else None
        keys: set[bytes] = set()
        total = 0
        while True:
            count, pos = self.count(pos, node)
            if not count:
                break
            if unit:
                if count > (self.end - pos) // unit:
                    raise _Fail(ERR_TRUNCATED, node)
            elif count > self.budget:
                raise _Fail(ERR_TOO_LARGE, node)
            else:
                self.budget -= count
            for _ in range(count):
                if is_map:
                    stop = self.blob(pos, node)
                    key = self.d[pos + 4:stop]
                    try:
                        key.decode("utf-8")
                    except UnicodeDecodeError:
                        raise _Fail(ERR_BAD_UTF8, node) from None
                    if items is not None:
                        keys.add(key)
                        items += self.d[pos:stop]
                    pos = stop
                pos = self.value(row[COL_A], pos, items)
            total += count
        if out is not None and items is not None:
            if is_map and len(keys) != total:
                raise _Fail(HAND_BACK, node)
            if total > 0xFFFFFFFF:  # only an entry of more than 4 GiB holds that many items
                raise _Fail(ERR_TOO_LARGE, node)
            if total:
                out += varlen(total)
                out += items
            out.append(0)
        return pos

    def record(self, node: int, row: list[int], pos: int, out: bytearray | None) -> int:
        fields = self.tail[row[COL_B]:row[COL_B] + row[COL_A]]
        entries = self.tail[row[COL_D]:row[COL_D] + 4 * row[COL_C]]
        if row[COL_E] < 0:
            done = 0
            for k in range(0, len(entries), 4):
                j, op, at, n = entries[k:k + 4]
                if j < 0:
                    if out is not None:
                        out += self.consts[at:at + n]
                    continue
                for skipped in fields[done:j]:
                    pos = self.value(skipped, pos, None)
                pos = self.value(op, pos, out)
                done = j + 1
            for skipped in fields[done:]:
                pos = self.value(skipped, pos, None)
            return pos
        starts = self.scratch
        base = row[COL_E]
        for j, op in enumerate(fields):
            starts[base + j] = pos
            pos = self.value(op, pos, None)
        starts[base + len(fields)] = pos
        if out is not None:
            budget, self.budget = self.budget, 1 << 62  # the values were checked (and counted) above
            for k in range(0, len(entries), 4):
                j, op, at, n = entries[k:k + 4]
                if j < 0:
                    out += self.consts[at:at + n]
                elif self.p[op][COL_EMIT] == EMIT_VALUE and self.p[op][COL_UNION] < 0:
                    out += self.d[starts[base + j]:starts[base + j + 1]]
                else:
                    self.value(op, starts[base + j], out)
            self.budget = budget
        return pos


def _put_number(emit: int, v: Any) -> bytes:
    if emit == EMIT_I64:
        return int(v).to_bytes(8, "big", signed=True)
    x = float(v)  # an int or long becomes the nearest double first, then (EMIT_F32) Java's (float) cast
    if x != x:
        return b"\x7f\xc0\x00\x00" if emit == EMIT_F32 else b"\x7f\xf8\x00\x00\x00\x00\x00\x00"
    return _F32.pack(x) if emit == EMIT_F32 else _F64.pack(x)


def avro_migrate_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                     stop: int, out_off: Any, out_data: Any, pos: int) -> tuple[int, int, int]:
    """One-pass Avro migrate, the contract of ``rowdata_py.migrate_run``: validate and write each entry
    packed from ``out_data[pos]``, its end in ``out_off[i + 1]``; returns ``(next_row, pos, status)``
    (``status < 0``: entry ``next_row`` is bad, or needs the per-value path (``HAND_BACK``);
    else ``next_row < stop``: it did not fit)."""
    check_outputs("avro_migrate_run", out_off, out_data, start, stop, pos)
    p = np.asarray(prog, dtype=np.int64).tolist()
    if (not p or len(p[0]) != PROGRAM_COLUMNS or p[0][COL_OP] != AVRO_OP_HEAD
            or not 1 < p[0][COL_A] <= len(p)):
        raise ValueError("bad Avro program")
    tail = [x for row in p[p[0][COL_A]:] for x in row]
    consts = np.array(tail[p[0][COL_E]:], dtype=np.int64).tobytes()
    v = BinView(offsets, data, validity, offset, wide, stop)

    def migrated(code: int, s: int, e: int) -> tuple[int, bytearray]:
        node = -1
        buf = bytearray()
        if code == ERR_OK:
            w = _Walk(p, tail, consts, v.data, e)
            try:
                if w.value(p[0][COL_B], s, buf) != e:
                    code = ERR_TRAILING
            except _Fail as x:
                code, node = x.code, x.node
        return (0 if code == ERR_OK else encode_err(code, node)), buf

    return one_pass_run(v, start, stop, out_off, out_data, pos, migrated)


__all__ = ["avro_migrate_run"]
