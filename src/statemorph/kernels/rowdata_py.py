"""Python twin of ``kernels/_native/rowdata.pyx``: the BinaryRowData encode / decode / migrate kernels as plain loops.

Why this module exists: it has the same names, arguments and effect on the output buffers as the
compiled kernels (``STATEMORPH_NATIVE=0`` or a missing build selects it, see
:mod:`statemorph.kernels.tiers`), and the equivalence tests run every bulk operation on both tiers
and compare bytes and error rows. Its programs come from :mod:`statemorph.kernels.plans`.

Conventions shared with the kernels:

- a binary column is passed as (offsets, data, validity, element offset, wide) buffers;
- ``*_sizes`` writes each row's output size to ``out_off[i + 1]`` (0 for null rows) or, for a bad
  row, :func:`encode_err` (negative); decode kernels write ``status[i]`` instead (0 ok, 1 null
  value, negative error); both return the first bad row or -1, stopping there when
  ``stop_at_error``;
- ``*_fill`` writes rows at ``out_off[i]`` (the caller's exclusive prefix sums) and skips rows
  whose size is 0 / status is non-zero;
- the one-pass ``encode_run`` / ``decode_run`` validate and write each entry in one walk and stop
  at the first bad entry (its encoded error returned; it is null in every output) or at a full
  output buffer, so the caller records the error or grows the buffer and resumes. The compiled
  kernels walk 256 rows at a time column by column and hand a block with a bad entry or a full
  buffer to their row-at-a-time walk, which these twins mirror: the results are the same.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .abi import *  # the ABI constants as bare names, as the Cython twin includes them (a global is one lookup)
from .plans import ARROW_KINDS, ARROW_WIDTH
from .primitives_py import JAVA_NAN_F32, JAVA_NAN_F64
from .views import MAX32, BinView, bit_get, bit_set, check_outputs

# ---------------------------------------------------------------------------------- row kernels
_U64 = struct.Struct("<Q")




def _null_bits_size(arity: int) -> int:
    return ((arity + 63 + 8) // 64) * 8




def _round8(n: int) -> int:
    return (n + 7) & ~7




def _utf8_ok(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False




class _RowCtx:
    def __init__(self, prog: np.ndarray, data: bytes) -> None:
        self.p: list[list[int]] = prog.tolist()
        self.d = data
        self.err_node = -1
        self.row = 0
        self.ends: list[list[int]] = []  # decode: per ARRAY node, the offset columns of its elements
        self.metered = False  # decode with arrays: the row / array checks spend ``budget``
        self.budget = 0

    def spend(self, node: int, units: int) -> None:
        """Twin of the kernels' ``spend``: raises RowError(HAND_BACK) past the budget."""
        if self.metered:
            self.budget -= units
            if self.budget < 0:
                self.err_node = node
                raise RowError(HAND_BACK)




class RowError(Exception):
    def __init__(self, code: int) -> None:
        self.code = code




def _is_null(d: bytes, base: int, i: int) -> bool:
    b = i + 8
    return bool(d[base + (b >> 3)] >> (b & 7) & 1)




def _inline_check(d: bytes, slot: int, raw: int, k: int) -> int:
    """Twin of the kernel's ``inline_check``: ERR_OK or the code of a slot marked inline."""
    n = raw >> 56 & 0x7F
    if k not in (SLOT_STR, SLOT_BIN) or n > 7:
        return ERR_BAD_INLINE
    if k == SLOT_STR and not _utf8_ok(d[slot:slot + n]):
        return ERR_BAD_UTF8
    return ERR_OK




def _var_span(x: _RowCtx, c: int, k: int, raw: int, base: int, size: int, lo: int) -> int:
    """Twin of the kernel's ``var_span``: the bytes a non-inline value takes in the row (8 for a
    TIMESTAMP(p > 3)); raises ``RowError`` with ``x.err_node`` set."""
    off, n = raw >> 32, raw & 0xFFFFFFFF
    code = ERR_OK
    if k == SLOT_TS_BIG:
        code = ERR_BAD_NANOS if n > 999999 else ERR_OK
        n = 8
    elif k == SLOT_DEC_BIG and not 1 <= n <= 16:
        code = ERR_BAD_LENGTH
    if code == ERR_OK and (off < lo or off + n > size):
        code = ERR_BAD_OFFSET
    if code == ERR_OK and k == SLOT_STR and not _utf8_ok(x.d[base + off:base + off + n]):
        code = ERR_BAD_UTF8
    if code != ERR_OK:
        x.err_node = c
        raise RowError(code)
    return n




def _check_row(x: _RowCtx, node: int, base: int, size: int) -> int:
    """Mirror of ``check_row``: validate, return the migrated size."""
    p, d = x.p, x.d
    arity, old_arity = p[node][COL_ARITY], p[node][COL_OLD_ARITY]
    ow = _null_bits_size(old_arity)
    ofixed = ow + 8 * old_arity
    new_size = _null_bits_size(arity) + 8 * arity

    def fail(code: int, at: int) -> RowError:
        x.err_node = at
        return RowError(code)

    if size < ofixed:
        raise fail(ERR_TRUNCATED, node)
    if d[base] > 3:
        raise fail(ERR_BAD_HEADER, node)
    bits = int.from_bytes(d[base:base + ow], "little") >> 8
    if bits >> old_arity:
        raise fail(ERR_BAD_HEADER, node)
    x.spend(node, old_arity + 1)
    c = node + 1
    while c < p[node][COL_END]:
        src, k, flags = p[c][COL_SRC], p[c][COL_KIND], p[c][COL_FLAGS]
        if src < 0 or bits >> src & 1:
            c = p[c][COL_END]
            continue
        slot = base + ow + 8 * src
        if k >= SLOT_STR and k != SLOT_DEC_COMPACT:
            mark = d[slot + 7]
            raw = _U64.unpack_from(d, slot)[0]
            if mark & 0x80:
                code = _inline_check(d, slot, raw, k)
                if code != ERR_OK:
                    raise fail(code, c)
                c = p[c][COL_END]
                continue
            n = _var_span(x, c, k, raw, base, size, ofixed)
            off = raw >> 32
            if k in (SLOT_STR, SLOT_BIN):
                new_size += _round8(n)
            elif k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
                r = _CHECK[k](x, c, base + off, n)
                new_size += _round8(n) if flags & FLAG_VERBATIM else _round8(r)
            elif k == SLOT_DEC_BIG:
                new_size += 16
            else:
                new_size += _round8(n)
        c = p[c][COL_END]
    return new_size




def _migrate_row(x: _RowCtx, node: int, base: int, size: int) -> bytearray:
    p, d = x.p, x.d
    arity = p[node][COL_ARITY]
    ow = _null_bits_size(p[node][COL_OLD_ARITY])
    nw = _null_bits_size(arity)
    buf = bytearray(nw + 8 * arity)
    buf[0] = d[base]
    c = node + 1
    while c < p[node][COL_END]:
        src, j, k, flags = p[c][COL_SRC], p[c][COL_POS], p[c][COL_KIND], p[c][COL_FLAGS]
        if src < 0 or _is_null(d, base, src):
            bit_set(buf, j + 8)
            c = p[c][COL_END]
            continue
        slot, nslot = base + ow + 8 * src, nw + 8 * j
        raw = _U64.unpack_from(d, slot)[0]
        if k < SLOT_STR or k == SLOT_DEC_COMPACT or (k in (SLOT_STR, SLOT_BIN) and raw >> 63):
            buf[nslot:nslot + 8] = d[slot:slot + 8]
        else:
            off, n = raw >> 32, raw & 0xFFFFFFFF
            cur = len(buf)
            if k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP) and not flags & FLAG_VERBATIM:
                sub = _MIGRATE[k](x, c, base + off, n)
                _U64.pack_into(buf, nslot, (cur << 32) | len(sub))
                buf += sub + bytes(_round8(len(sub)) - len(sub))
            elif k == SLOT_DEC_BIG:
                _U64.pack_into(buf, nslot, (cur << 32) | n)
                buf += d[base + off:base + off + n] + bytes(16 - n)
            elif k == SLOT_TS_BIG:
                _U64.pack_into(buf, nslot, (cur << 32) | n)
                buf += d[base + off:base + off + 8]
            else:
                _U64.pack_into(buf, nslot, (cur << 32) | n)
                buf += d[base + off:base + off + n] + bytes(_round8(n) - n)
        c = p[c][COL_END]
    return buf




_ELEM_SIZE = {SLOT_BOOL: 1, SLOT_I8: 1, SLOT_I16: 2, SLOT_I32: 4, SLOT_F32: 4}




def _array_header(n: int) -> int:
    return 4 + ((n + 31) // 32) * 4




def _check_array(x: _RowCtx, node: int, base: int, size: int) -> int:
    """Mirror of ``check_array``."""
    p, d = x.p, x.d
    e = node + 1
    k = p[e][COL_KIND]
    es = _ELEM_SIZE.get(k, 8)
    verbatim = p[node][COL_FLAGS] & FLAG_VERBATIM

    def fail(code: int, at: int) -> RowError:
        x.err_node = at
        return RowError(code)

    if size < 4:
        raise fail(ERR_TRUNCATED, node)
    n = struct.unpack_from("<i", d, base)[0]
    if n < 0:
        raise fail(ERR_BAD_LENGTH, node)
    header = _array_header(n)
    if header + n * es > size:
        raise fail(ERR_TRUNCATED, node)
    x.spend(node, n + 1)
    lo = min(_round8(header + n * es), size)
    new_size = _round8(header + 8 * n)
    if k < SLOT_STR or k == SLOT_DEC_COMPACT:
        return size
    for i in range(n):
        if d[base + 4 + (i >> 3)] >> (i & 7) & 1:
            continue
        slot = base + header + i * es
        raw = _U64.unpack_from(d, slot)[0]
        mark = d[slot + 7]
        if mark & 0x80:
            code = _inline_check(d, slot, raw, k)
            if code != ERR_OK:
                raise fail(code, e)
            continue
        ln = _var_span(x, e, k, raw, base, size, lo)
        off = raw >> 32
        r = _CHECK[k](x, e, base + off, ln) if k in _CHECK else 0
        new_size += _round8(r)
    return size if verbatim else new_size




def _check_map(x: _RowCtx, node: int, base: int, size: int) -> int:
    """Mirror of ``check_map``: validate a BinaryMapData, then hand it to the reference (HAND_BACK)
    if its keys may repeat or one is null (:func:`keys_suspect`): decode, migrate and the check of
    a verbatim copy all judge map keys here, the reference deciding (one definition of a duplicate
    key: statemorph.binary_layout.MapCodec)."""
    p, d = x.p, x.d
    kn = node + 1
    vn = p[kn][COL_END]
    if size < 4:
        x.err_node = node
        raise RowError(ERR_TRUNCATED)
    kb = struct.unpack_from("<i", d, base)[0]
    if kb < 0 or kb > size - 4:
        x.err_node = node
        raise RowError(ERR_BAD_LENGTH)
    rk = _check_array(x, kn, base + 4, kb)
    rv = _check_array(x, vn, base + 4 + kb, size - 4 - kb)
    if struct.unpack_from("<i", d, base + 4)[0] != struct.unpack_from("<i", d, base + 4 + kb)[0]:
        x.err_node = node
        raise RowError(ERR_BAD_LENGTH)
    if keys_suspect(d, base + 4, p[kn + 1][COL_KIND]):
        x.err_node = node
        raise RowError(HAND_BACK)
    if p[node][COL_FLAGS] & FLAG_VERBATIM:
        return size
    return 4 + rk + rv




def _migrate_array(x: _RowCtx, node: int, base: int, size: int) -> bytes | bytearray:
    p, d = x.p, x.d
    if p[node][COL_FLAGS] & FLAG_VERBATIM:
        return d[base:base + size]
    e = node + 1
    k = p[e][COL_KIND]
    n = struct.unpack_from("<i", d, base)[0]
    header = _array_header(n)
    buf = bytearray(_round8(header + 8 * n))
    buf[0:header] = d[base:base + header]
    for i in range(n):
        if d[base + 4 + (i >> 3)] >> (i & 7) & 1:
            continue
        raw = _U64.unpack_from(d, base + header + 8 * i)[0]
        sub = _MIGRATE[k](x, e, base + (raw >> 32), raw & 0xFFFFFFFF)
        _U64.pack_into(buf, header + 8 * i, (len(buf) << 32) | len(sub))
        buf += sub + bytes(_round8(len(sub)) - len(sub))
    return buf




def _migrate_map(x: _RowCtx, node: int, base: int, size: int) -> bytes | bytearray:
    d = x.d
    if x.p[node][COL_FLAGS] & FLAG_VERBATIM:
        return d[base:base + size]
    kb = struct.unpack_from("<i", d, base)[0]
    keys = _migrate_array(x, node + 1, base + 4, kb)  # the keys' node, then the values' after its subtree
    values = _migrate_array(x, x.p[node + 1][COL_END], base + 4 + kb, size - 4 - kb)
    return struct.pack("<i", len(keys)) + bytes(keys) + bytes(values)




_CHECK: dict[int, Callable[[_RowCtx, int, int, int], int]] = {
    SLOT_ROW: _check_row, SLOT_ARRAY: _check_array, SLOT_MAP: _check_map}


_MIGRATE = {SLOT_ROW: _migrate_row, SLOT_ARRAY: _migrate_array, SLOT_MAP: _migrate_map}




def _entry_row(v: BinView, i: int) -> tuple[int, int, int]:
    code, s, e = v.entry(i)
    if code != ERR_OK:
        return code, 0, 0
    if e - s < 4:
        return ERR_TRUNCATED, 0, 0
    n = struct.unpack_from(">i", v.data, s)[0]
    if n < 0:
        return ERR_BAD_LENGTH, 0, 0
    if n > e - s - 4:
        return ERR_TRUNCATED, 0, 0
    if n < e - s - 4:
        return ERR_TRAILING, 0, 0
    return ERR_OK, s + 4, n




def prog_matrix(prog: Any) -> np.ndarray:
    m = np.asarray(prog, dtype=np.int64)
    if m.ndim != 2 or m.shape[1] != PROGRAM_COLUMNS or m.shape[0] < 1:
        raise ValueError("bad row program")
    return m




def migrate_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                stop: int, out_off: Any, out_data: Any, pos: int, machine_code: int = 0) -> tuple[int, int, int]:
    """Fused one-pass migrate (twin of the compiled kernel): validate and write each entry, packed
    from ``out_data[pos]``, its end in ``out_off[i + 1]``; returns ``(next_row, pos, status)``
    (``status < 0``: entry ``next_row`` is bad; else ``next_row < stop``: it did not fit).
    ``machine_code`` is accepted for the shared signature and unused: plan machine code
    (``statemorph.kernels.jit``) is called by the compiled kernel only."""
    check_outputs("migrate_run", out_off, out_data, start, stop, pos)
    v = BinView(offsets, data, validity, offset, wide, stop)
    x = _RowCtx(prog_matrix(prog), v.data)
    out = memoryview(out_data).cast("B")
    verbatim = x.p[0][COL_FLAGS] & FLAG_VERBATIM
    status = 0
    i = start
    while i < stop:
        if v.valid(i):
            x.err_node, x.row = -1, i
            code, base, size = _entry_row(v, i)
            if code == ERR_OK:
                try:
                    r = _check_row(x, 0, base, size)
                except RowError as e:
                    code = e.code
                else:
                    need = (size if verbatim else r) + 4
                    if need > len(out) - pos:
                        break
                    if verbatim:
                        out[pos:pos + need] = v.data[base - 4:base + size]
                    else:
                        row = _migrate_row(x, 0, base, size)
                        out[pos:pos + 4] = struct.pack(">I", len(row))
                        out[pos + 4:pos + 4 + len(row)] = row
                    pos += need
            if code != ERR_OK:
                status = encode_err(code, x.err_node)
        out_off[i + 1] = pos
        if status:
            break
        i += 1
    return i, pos, status








class _Full(Exception):
    """An output buffer is too small for the current entry (the caller grows it and resumes)."""




def _row_header(x: _RowCtx, node: int, base: int, size: int, arity: int) -> int:
    """Twin of ``check_row_header``: the row's null bits (above the RowKind byte) after the checks
    every row gets before its fields."""
    ow = _null_bits_size(arity)
    if size < ow + 8 * arity:
        x.err_node = node
        raise RowError(ERR_TRUNCATED)
    if x.d[base] > 3:
        x.err_node = node
        raise RowError(ERR_BAD_HEADER)
    bits = int.from_bytes(x.d[base:base + ow], "little") >> 8
    if bits >> arity:
        x.err_node = node
        raise RowError(ERR_BAD_HEADER)
    x.spend(node, arity + 1)
    return bits




def _offsets_out(obj: Any, stop: int) -> tuple[np.ndarray, bool]:
    """Twin of the kernels' offsets-output check: an int32 / int64 array of >= stop + 1 entries."""
    arr = np.asarray(obj)
    if arr.dtype not in (np.int32, np.int64) or len(arr) < stop + 1:
        raise ValueError("offsets output must be an int32 / int64 array of at least stop + 1 entries")
    return arr, arr.dtype == np.int64




class _Out:
    """One node's decode outputs and its running state (twin of the kernel's ``Node``). ``cap``:
    the values the outputs hold (rows; elements in an element column)."""

    def __init__(self, t: Any, kind: int, stop: int, count: int, spos: int, elem: bool) -> None:
        bits, vals, offs, sdata = t
        self.valid = memoryview(bits).cast("B")
        self.vals: Any = memoryview(vals).cast("B") if vals is not None else None
        self.count = count
        self.spos = self.sstart = spos
        self.offs: Any = None
        self.wide = False
        self.scap = 0
        self.cap = len(self.valid) * 8
        if kind == SLOT_ARRAY:  # list offsets: per row, or per element of the enclosing array
            self.offs, self.wide = _offsets_out(offs, 0 if elem else stop)
            self.cap = min(self.cap, len(self.offs) - 1)
        elif kind in (SLOT_STR, SLOT_BIN):
            self.offs, self.wide = _offsets_out(offs, 0)
            self.cap = min(self.cap, len(self.offs) - 1)
            self.sdata = memoryview(sdata).cast("B")
            self.scap = len(self.sdata) if self.wide else min(len(self.sdata), MAX32)
            if not 0 <= spos <= self.scap:
                raise ValueError("decode_run: string position outside its buffer")
        elif kind in ARROW_KINDS and kind != SLOT_ROW:
            nbytes = len(memoryview(vals).cast("B"))
            self.cap = min(self.cap, nbytes * 8 if kind == SLOT_BOOL else nbytes // ARROW_WIDTH[kind])
        elif kind not in (SLOT_ROW, SLOT_MAP):
            raise ValueError(f"decode_run: kind {kind} is not decodable")




def _put_value(o: _Out, k: int, i: int, d: bytes, slot: int) -> None:
    """Twin of ``put_value``: value i of a fixed-width column from its slot."""
    if k == SLOT_BOOL:
        if d[slot]:
            bit_set(o.vals, i)
    elif k == SLOT_DEC_COMPACT:
        v64 = struct.unpack_from("<q", d, slot)[0]
        o.vals[16 * i:16 * i + 16] = v64.to_bytes(16, "little", signed=True)
    else:
        w = ARROW_WIDTH[k]
        o.vals[w * i:w * i + w] = d[slot:slot + w]




_M64 = (1 << 64) - 1




def _key_hash(data: bytes) -> int:
    """Twin of the kernels' ``key_hash``."""
    h = 0x9E3779B97F4A7C15 ^ len(data)
    for j in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[j:j + 8], "little")) * 0xBF58476D1CE4E5B9) & _M64
        h ^= h >> 31
    return h




def _elem_bytes(d: Any, base: int, slot: int) -> tuple[int, int]:
    """Twin of ``elem_bytes``: (length, start) of a validated string / binary array element."""
    raw = _U64.unpack_from(d, slot)[0]
    return ((raw >> 56) & 0x7F, slot) if raw >> 63 else (raw & 0xFFFFFFFF, base + (raw >> 32))




def keys_suspect(d: Any, base: int, k: int) -> bool:
    """Twin of the kernels' ``keys_suspect``: whether the (valid) key array at ``d[base:]``, of
    element kind ``k``, may hold two equal keys or a null one (then the entry is HAND_BACK). A
    key's hash is ``_key_hash`` of its canonical bytes: its value (string / binary bytes, BOOLEAN as 0 /
    1, -0.0 as 0.0, a big DECIMAL as its unscaled value sign-extended to 16 bytes, a big TIMESTAMP
    as millis and nanos), wherever it is stored, so equal keys always hash alike. Up to 8 keys
    compare those canonical bytes exactly, more keys their hashes: equal ones only *may* be equal
    keys, the reference decides. ROW / ARRAY / MAP keys have no canonical bytes (equal values may
    differ in bytes): two or more are suspect."""
    n = struct.unpack_from("<i", d, base)[0]
    es = _ELEM_SIZE.get(k, 8)
    header = _array_header(n)
    seen: set[int | bytes] = set()
    for j in range(n):
        if d[base + 4 + (j >> 3)] >> (j & 7) & 1:
            return True
        if k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
            if j:
                return True
            continue
        slot = base + header + j * es
        if k in (SLOT_STR, SLOT_BIN):
            ln, at = _elem_bytes(d, base, slot)
            key = bytes(d[at:at + ln])
        elif k == SLOT_BOOL:
            key = b"\x01" if d[slot] else b"\x00"
        elif k in (SLOT_F32, SLOT_F64) and not any(d[slot:slot + es - 1]) and d[slot + es - 1] == 0x80:
            key = bytes(es)  # -0.0 == 0.0
        elif k == SLOT_DEC_BIG:  # the unscaled value, sign-extended to 16 bytes (not the slot's offset)
            raw = _U64.unpack_from(d, slot)[0]
            at, ln = base + (raw >> 32), raw & 0xFFFFFFFF
            if ln > 16:
                return True
            v = bytes(d[at:at + ln])
            key = (b"\xff" if ln and v[0] & 0x80 else b"\x00") * (16 - ln) + v
        elif k == SLOT_TS_BIG:  # millis, then nano-of-millisecond (the slot holds an offset)
            raw = _U64.unpack_from(d, slot)[0]
            at = base + (raw >> 32)
            key = bytes(d[at:at + 8]) + (raw & 0xFFFFFFFF).to_bytes(8, "little")
        else:
            key = bytes(d[slot:slot + es])
        h = key if n <= 8 else _key_hash(key)  # few keys: their canonical bytes compared exactly
        if h in seen:
            return True
        seen.add(h)
    return False




def _decode_map(x: _RowCtx, outs: list[_Out], m: int, base: int) -> None:
    """Twin of the kernel's ``decode_map``: append the keys and values of a map ``_check_map``
    passed (its keys judged there) to the element columns of its key and value arrays; raises
    _Full (or RowError from a row below)."""
    p, d = x.p, x.d
    kn = m + 1
    kb = struct.unpack_from("<i", d, base)[0]
    _decode_array(x, outs, kn, base + 4)
    _decode_array(x, outs, p[kn][COL_END], base + 4 + kb)




def _decode_row(x: _RowCtx, outs: list[_Out], node: int, base: int, size: int, i: int) -> None:
    """Twin of the kernel's ``decode_row``: validate (``check_row``'s checks, in its order) and
    scatter into row i; raises RowError / _Full, leaving partial outputs for the rollback."""
    p, d = x.p, x.d
    arity = p[node][COL_ARITY]
    ow = _null_bits_size(arity)
    ofixed = ow + 8 * arity
    bits = _row_header(x, node, base, size, arity)
    if node and d[base]:
        # a nested row whose RowKind is not INSERT: an Arrow struct has no row kind, so the
        # reference reads the entry and the Arrow conversion refuses it, naming the path
        x.err_node = node
        raise RowError(HAND_BACK)
    c = node + 1
    while c < p[node][COL_END]:
        j, k = p[c][COL_POS], p[c][COL_KIND]
        if bits >> j & 1:
            c = p[c][COL_END]
            continue
        o = outs[c]
        bit_set(o.valid, i)
        o.count += 1
        slot = base + ow + 8 * j
        if k in (SLOT_DEC_BIG, SLOT_TS_BIG):
            code = _decode_big(x, o, k, p[c][COL_LIMIT], i, slot, base, ofixed, size)
            if code != ERR_OK:
                x.err_node = c
                raise RowError(code)
            c = p[c][COL_END]
            continue
        if k not in (SLOT_STR, SLOT_BIN, SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
            _put_value(o, k, i, d, slot)
            c = p[c][COL_END]
            continue
        raw = _U64.unpack_from(d, slot)[0]
        mark = raw >> 56
        if mark & 0x80:
            code = _inline_check(d, slot, raw, k)
            if code != ERR_OK:
                x.err_node = c
                raise RowError(code)
            n = mark & 0x7F
            at = slot
        else:
            off, n = raw >> 32, raw & 0xFFFFFFFF
            if off < ofixed or off + n > size:
                x.err_node = c
                raise RowError(ERR_BAD_OFFSET)
            if k == SLOT_ROW:
                _decode_row(x, outs, c, base + off, n, i)
                c = p[c][COL_END]
                continue
            if k == SLOT_ARRAY:
                _check_array(x, c, base + off, n)
                _decode_array(x, outs, c, base + off)
                c = p[c][COL_END]
                continue
            if k == SLOT_MAP:
                _check_map(x, c, base + off, n)
                _decode_map(x, outs, c, base + off)
                c = p[c][COL_END]
                continue
            if k == SLOT_STR and not _utf8_ok(d[base + off:base + off + n]):
                x.err_node = c
                raise RowError(ERR_BAD_UTF8)
            at = base + off
        if n > o.scap - o.spos:
            raise _Full
        o.sdata[o.spos:o.spos + n] = d[at:at + n]
        o.spos += n
        c = p[c][COL_END]




def _decode_array(x: _RowCtx, outs: list[_Out], a: int, base: int) -> None:
    """Twin of the kernel's ``decode_array``: append a validated array's elements to the element
    column of ARRAY node ``a``; raises _Full (or RowError from a map below)."""
    p, d = x.p, x.d
    arr, el = outs[a], outs[a + 1]
    k = p[a + 1][COL_KIND]
    n = struct.unpack_from("<i", d, base)[0]
    es = _ELEM_SIZE.get(k, 8)
    header = _array_header(n)
    if n > arr.scap - arr.spos:
        raise _Full
    first = arr.spos
    arr.spos += n  # first: a failure below rolls back the elements already written
    for j in range(n):
        ei = first + j
        if not d[base + 4 + (j >> 3)] >> (j & 7) & 1:
            bit_set(el.valid, ei)
            el.count += 1
            slot = base + header + j * es
            if k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
                raw = _U64.unpack_from(d, slot)[0]
                if k == SLOT_ROW:
                    _decode_row(x, outs, a + 1, base + (raw >> 32), raw & 0xFFFFFFFF, ei)
                elif k == SLOT_ARRAY:
                    _decode_array(x, outs, a + 1, base + (raw >> 32))
                else:
                    _decode_map(x, outs, a + 1, base + (raw >> 32))
            elif k in (SLOT_STR, SLOT_BIN):
                ln, at = _elem_bytes(d, base, slot)
                if ln > el.scap - el.spos:
                    raise _Full
                el.sdata[el.spos:el.spos + ln] = d[at:at + ln]
                el.spos += ln
            else:
                _put_value(el, k, ei, d, slot)
        if k in (SLOT_STR, SLOT_BIN):
            el.offs[ei + 1] = el.spos
        elif k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
            # the string / list columns of this element column end at ei too
            for c in x.ends[a]:
                outs[c].offs[ei + 1] = outs[c].spos




def _arrays(p: list[list[int]]) -> list[int]:
    """Twin of the kernel's ``Node.arr``: per node, the ARRAY whose element column it is part of
    (the element, a field of an element row, or the key / value array of an element map, at any
    depth below that array but not inside a deeper array), or -1."""
    parent = [-1] * len(p)
    for c, row in enumerate(p):
        if row[COL_KIND] == SLOT_ARRAY:
            parent[c + 1] = c
        elif row[COL_KIND] == SLOT_MAP:
            parent[c + 1] = parent[p[c + 1][COL_END]] = c
        elif row[COL_KIND] == SLOT_ROW:
            child = c + 1
            while child < row[COL_END]:
                parent[child] = c
                child = p[child][COL_END]
    arr = [-1] * len(p)
    for c in range(1, len(p)):
        arr[c] = parent[c] if p[parent[c]][COL_KIND] == SLOT_ARRAY else arr[parent[c]]
    return arr




def decode_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
               outs: list[Any], counts: Any, spos: Any, machine_code: int = 0) -> tuple[int, int]:
    """One-pass decode (twin of the compiled kernel): validate and scatter each entry; returns
    ``(next_row, status)`` (``next_row < stop``: bad entry with ``status`` < 0, or full buffer).
    ``machine_code``: as for ``migrate_run``, accepted and unused."""
    v = BinView(offsets, data, validity, offset, wide, stop)
    x = _RowCtx(prog_matrix(prog), v.data)
    p = x.p
    nnodes = p[0][COL_END]
    if len(outs) != nnodes or len(counts) < nnodes or len(spos) < nnodes or start < 0:
        raise ValueError("decode_run: one output and one counter per program node is required")
    arr = _arrays(p)
    elem = [arr[c] >= 0 for c in range(nnodes)]
    os_ = [_Out(outs[c], p[c][COL_KIND] if c else SLOT_ROW, stop, int(counts[c]), int(spos[c]), elem[c])
           for c in range(nnodes)]
    listed = (SLOT_STR, SLOT_BIN, SLOT_ARRAY)
    x.ends = [[c for c in range(nnodes) if arr[c] == a and p[c][COL_KIND] in listed] for a in range(nnodes)]
    x.metered = any(row[COL_KIND] == SLOT_ARRAY for row in p)
    for c in range(1, nnodes):
        if p[c][COL_KIND] == SLOT_ARRAY:
            os_[c].scap = (1 << 63) - 1 if os_[c].wide else MAX32  # lowered to its columns' room below
        if elem[c]:
            os_[arr[c]].scap = min(os_[arr[c]].scap, os_[c].cap)
            if not 0 <= os_[arr[c]].spos <= os_[c].cap:
                raise ValueError("decode_run: element position outside its outputs")
        elif os_[c].cap < stop:
            raise ValueError("decode_run: outputs shorter than the rows")
    if os_[0].cap < stop:
        raise ValueError("decode_run: outputs shorter than the rows")
    rowpos = [os_[c] for c in range(1, nnodes) if not elem[c] and p[c][COL_KIND] in listed]
    i, status = start, 0
    while i < stop:
        if v.valid(i):
            x.err_node = -1
            code, base, size = _entry_row(v, i)
            if code == ERR_OK:
                x.budget = size
                try:
                    _decode_row(x, os_, 0, base, size, i)
                except (RowError, _Full) as e:
                    for c in range(1, nnodes):
                        o = os_[c]
                        lo, hi = (os_[arr[c]].sstart, os_[arr[c]].spos) if elem[c] else (i, i + 1)
                        for j in range(lo, hi):
                            if bit_get(o.valid, j):
                                o.valid[j >> 3] &= ~(1 << (j & 7)) & 0xFF
                                o.count -= 1
                            if p[c][COL_KIND] == SLOT_BOOL:
                                o.vals[j >> 3] &= ~(1 << (j & 7)) & 0xFF
                    for o in os_[1:]:
                        o.spos = o.sstart
                    if isinstance(e, _Full):
                        break
                    code = e.code
            if code != ERR_OK:
                status = encode_err(code, x.err_node)
            else:
                bit_set(os_[0].valid, i)
                os_[0].count += 1
        for o in rowpos:
            o.offs[i + 1] = o.spos
        for o in os_[1:]:
            o.sstart = o.spos
        if status:
            break
        i += 1
    for c in range(nnodes):
        counts[c] = os_[c].count
        spos[c] = os_[c].spos
    return i, status




class ArrowColumns:
    """The Arrow input columns, one per program node: (validity, values, offsets, element offset,
    wide, length). An ARRAY's offsets are its list offsets, bounded by its element column's length."""

    def __init__(self, cols: list[Any]) -> None:
        self.cols: list[Any] = []
        for c, (validity, values, offs, off, wide, _) in enumerate(cols):
            self.cols.append((
                memoryview(validity).cast("B") if validity is not None else None,
                bytes(memoryview(values).cast("B")) if values is not None else b"",
                np.frombuffer(memoryview(offs).cast("B"), dtype=np.int64 if wide else np.int32)
                if offs is not None else None,
                off,
                cols[c + 1][5] if values is None and offs is not None else None,
            ))

    def valid(self, c: int, i: int) -> bool:
        bits = self.cols[c][0]
        return bits is None or bit_get(bits, self.cols[c][3] + i)

    def string(self, c: int, i: int) -> tuple[int, int]:
        """(start, length) of string / binary / list i of column c; (-1, 0) if the offsets are bad."""
        _, vals, offs, off, bound = self.cols[c]
        assert offs is not None
        s, e = int(offs[off + i]), int(offs[off + i + 1])
        if s < 0 or e < s or e > (len(vals) if bound is None else bound):
            return -1, 0
        return s, e - s




def _encode_str(cols: ArrowColumns, c: int, i: int, buf: bytearray, slot: int, room: int, err: list[int]) -> None:
    """Twin of the kernel's ``encode_str``: string / binary i of column c into ``buf[slot]``,
    inline up to 7 bytes, else appended (padded) to ``buf``, the var part."""
    vals = cols.cols[c][1]
    s, n = cols.string(c, i)
    if s < 0 or n > 0x7FFFFFFF:
        err[0] = c
        raise RowError(ERR_BAD_ARROW if s < 0 else ERR_TOO_LARGE)
    if n <= 7:
        buf[slot:slot + n] = vals[s:s + n]
        buf[slot + 7] = 0x80 | n
        return
    if _round8(n) > room - len(buf):
        raise _Full
    _U64.pack_into(buf, slot, (len(buf) << 32) | n)
    buf += vals[s:s + n] + bytes(_round8(n) - n)




def _encode_big(k: int, limit: int, vals: bytes, e: int, buf: bytearray, slot: int, room: int, c: int,
                err: list[int]) -> None:
    """Twin of the kernel's ``encode_big``: a DECIMAL(p > 18) / TIMESTAMP(p > 3) value's slot and
    var part (minimal big-endian two's complement bytes in 16, or epoch millis + nanos)."""
    if k == SLOT_TS_BIG:
        millis, rest = divmod(struct.unpack_from("<q", vals, 8 * e)[0], limit)
        if 8 > room - len(buf):
            raise _Full
        _U64.pack_into(buf, slot, (len(buf) << 32) | rest * (1_000_000 // limit))
        buf += struct.pack("<q", millis)
        return
    u = int.from_bytes(vals[16 * e:16 * e + 16], "little", signed=True)
    if not -10 ** limit < u < 10 ** limit:
        err[0] = c
        raise RowError(ERR_TOO_LARGE)
    if 16 > room - len(buf):
        raise _Full
    n = ((u if u >= 0 else ~u).bit_length() + 8) // 8
    _U64.pack_into(buf, slot, (len(buf) << 32) | n)
    buf += u.to_bytes(n, "big", signed=True) + bytes(16 - n)




def _decode_big(x: _RowCtx, o: _Out, k: int, limit: int, i: int, slot: int, base: int, ofixed: int,
                size: int) -> int:
    """Twin of the kernel's ``decode_big``: ERR_OK or the code."""
    d = x.d
    raw = _U64.unpack_from(d, slot)[0]
    off, n = raw >> 32, raw & 0xFFFFFFFF
    if raw >> 63:
        return ERR_BAD_INLINE
    if k == SLOT_TS_BIG:
        if n > 999_999:
            return ERR_BAD_NANOS
        if off < ofixed or off + 8 > size:
            return ERR_BAD_OFFSET
        v = struct.unpack_from("<q", d, base + off)[0] * limit + n // (1_000_000 // limit)
        if not -(1 << 63) <= v < 1 << 63:
            return ERR_TOO_LARGE
        o.vals[8 * i:8 * i + 8] = struct.pack("<q", v)
        return ERR_OK
    if not 1 <= n <= 16:
        return ERR_BAD_LENGTH
    if off < ofixed or off + n > size:
        return ERR_BAD_OFFSET
    u = int.from_bytes(d[base + off:base + off + n], "big", signed=True)
    if not -10 ** limit < u < 10 ** limit:
        return ERR_TOO_LARGE
    o.vals[16 * i:16 * i + 16] = u.to_bytes(16, "little", signed=True)
    return ERR_OK




def _encode_row(p: list[list[int]], cols: ArrowColumns, node: int, i: int, room: int, err: list[int]) -> bytearray:
    """Twin of the kernel's ``encode_row``: validate row i and build its bytes in one walk, in
    program order; raises RowError (``err[0]`` = node) or _Full when it outgrows ``room``, at the
    same points as the kernel."""
    arity = p[node][COL_ARITY]
    nw = _null_bits_size(arity)
    if nw + 8 * arity > room:
        raise _Full
    buf = bytearray(nw + 8 * arity)
    c = node + 1
    while c < p[node][COL_END]:
        k, j = p[c][COL_KIND], p[c][COL_POS]
        slot = nw + 8 * j
        if not cols.valid(c, i):
            if p[c][COL_FLAGS] & FLAG_NOT_NULL:
                err[0] = c
                raise RowError(ERR_NULL_NOT_ALLOWED)
            bit_set(buf, j + 8)
            c = p[c][COL_END]
            continue
        _, vals, _, off, _ = cols.cols[c]
        e = off + i
        if k == SLOT_BOOL:
            buf[slot] = 1 if bit_get(vals, e) else 0
        elif k in (SLOT_STR, SLOT_BIN):
            _encode_str(cols, c, i, buf, slot, room, err)
        elif k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
            _encode_nested(p, cols, c, i, buf, slot, room, err)
        elif k == SLOT_DEC_COMPACT:
            v = int.from_bytes(vals[16 * e:16 * e + 16], "little", signed=True)
            if not -p[c][COL_LIMIT] < v < p[c][COL_LIMIT]:  # more digits than DECIMAL(p, s) holds
                err[0] = c
                raise RowError(ERR_TOO_LARGE)
            buf[slot:slot + 8] = vals[16 * e:16 * e + 8]
        elif k in (SLOT_DEC_BIG, SLOT_TS_BIG):
            _encode_big(k, p[c][COL_LIMIT], vals, e, buf, slot, room, c, err)
        else:
            w = ARROW_WIDTH[k]
            buf[slot:slot + w] = vals[w * e:w * e + w]
        c = p[c][COL_END]
    return buf




def _encode_nested(p: list[list[int]], cols: ArrowColumns, c: int, i: int, buf: bytearray, slot: int, room: int,
                   err: list[int]) -> None:
    """A ROW / ARRAY / MAP value (row or element i of node c) appended to ``buf``'s var part, padded
    to 8 (only a map's size is not a multiple of 8), its slot pointing at it."""
    k = p[c][COL_KIND]
    sub = (_encode_row if k == SLOT_ROW else _encode_array if k == SLOT_ARRAY else _encode_map)(
        p, cols, c, i, room - len(buf), err)
    if _round8(len(sub)) > room - len(buf):
        raise _Full
    _U64.pack_into(buf, slot, (len(buf) << 32) | len(sub))
    buf += sub + bytes(_round8(len(sub)) - len(sub))




def _encode_map(p: list[list[int]], cols: ArrowColumns, m: int, i: int, room: int, err: list[int]) -> bytearray:
    """Twin of the kernel's ``encode_map``: the BinaryMapData of map i of a MAP column (its key and
    value arrays read the map's list offsets); HAND_BACK right after the keys, before any value is
    checked, since the reference drops the values of duplicate keys but the last."""
    kn = m + 1
    if 4 > room:
        raise _Full
    keys = _encode_array(p, cols, kn, i, room - 4, err)
    if keys_suspect(keys, 0, p[kn + 1][COL_KIND]):
        err[0] = m
        raise RowError(HAND_BACK)
    values = _encode_array(p, cols, p[kn][COL_END], i, room - 4 - len(keys), err)
    return bytearray(struct.pack("<i", len(keys))) + keys + values




def _encode_array(p: list[list[int]], cols: ArrowColumns, node: int, i: int, room: int, err: list[int]) -> bytearray:
    """Twin of the kernel's ``encode_array``: the BinaryArrayData of list i of an ARRAY column."""
    s, n = cols.string(node, i)
    if s < 0:
        err[0] = node
        raise RowError(ERR_BAD_ARROW)
    if n > 0x7FFFFFFF:
        err[0] = node
        raise RowError(ERR_TOO_LARGE)
    el = node + 1
    k = p[el][COL_KIND]
    es = _ELEM_SIZE.get(k, 8)
    header = _array_header(n)
    if _round8(header + n * es) > room:
        raise _Full
    buf = bytearray(_round8(header + n * es))
    struct.pack_into("<i", buf, 0, n)
    _, vals, _, off, _ = cols.cols[el]
    for j in range(n):
        ei = s + j
        if not cols.valid(el, ei):
            if p[el][COL_FLAGS] & FLAG_NOT_NULL:
                err[0] = el
                raise RowError(ERR_NULL_NOT_ALLOWED)
            bit_set(buf, 32 + j)
            continue
        slot = header + j * es
        e = off + ei
        if k == SLOT_BOOL:
            buf[slot] = 1 if bit_get(vals, e) else 0
        elif k == SLOT_DEC_COMPACT:
            v = int.from_bytes(vals[16 * e:16 * e + 16], "little", signed=True)
            if not -p[el][COL_LIMIT] < v < p[el][COL_LIMIT]:
                err[0] = el
                raise RowError(ERR_TOO_LARGE)
            buf[slot:slot + 8] = vals[16 * e:16 * e + 8]
        elif k in (SLOT_STR, SLOT_BIN):
            _encode_str(cols, el, ei, buf, slot, room, err)
        elif k in (SLOT_ROW, SLOT_ARRAY, SLOT_MAP):
            _encode_nested(p, cols, el, ei, buf, slot, room, err)
        else:
            buf[slot:slot + es] = vals[es * e:es * e + es]
            f32 = k == SLOT_F32
            if (f32 or k == SLOT_F64) and math.isnan(struct.unpack_from("<f" if f32 else "<d", buf, slot)[0]):
                buf[slot:slot + es] = JAVA_NAN_F32[::-1] if f32 else JAVA_NAN_F64[::-1]  # Java's canonical NaN
    return buf




def encode_run(prog: Any, cols: list[Any], start: int, stop: int, out_off: Any, out_data: Any, pos: int,
               out_valid: Any, machine_code: int = 0) -> tuple[int, int, int, int]:
    """One-pass encode (twin of the compiled kernel): validate and write each entry packed from
    ``out_data[pos]``; returns ``(next_row, pos, status, written)`` (``next_row < stop``: bad entry
    with ``status`` < 0, or full buffer). ``machine_code``: as for ``migrate_run``, accepted and
    unused."""
    p = prog_matrix(prog).tolist()
    if len(cols) != p[0][COL_END]:
        raise ValueError("one Arrow column per program node is required")
    cc = ArrowColumns(cols)
    offs, owide = _offsets_out(out_off, stop)
    out = memoryview(out_data).cast("B")
    valid = memoryview(out_valid).cast("B")
    cap = len(out) if owide else min(len(out), MAX32)
    if start < 0 or pos < 0 or pos > len(out) or len(valid) < (stop + 7) // 8:
        raise ValueError("encode_run: output arrays shorter than the rows")
    i, status, written = start, 0, 0
    while i < stop:
        if cc.valid(0, i):
            if cap - pos < 4:
                break
            err = [-1]
            try:
                row = _encode_row(p, cc, 0, i, cap - pos - 4, err)
            except _Full:
                break
            except RowError as e:
                status = encode_err(e.code, err[0])
                offs[i + 1] = pos
                break
            out[pos:pos + 4] = struct.pack(">I", len(row))
            out[pos + 4:pos + 4 + len(row)] = row
            pos += 4 + len(row)
            bit_set(valid, i)
            written += 1
        offs[i + 1] = pos
        i += 1
    return i, pos, status, written

COMPILED_ONLY_STUB = """\
from typing import Any

# compiled only: the hooks statemorph.kernels.jit compiles plan machine code against
OP_CODES: dict[str, int]
def lowered_ops(prog: Any) -> list[dict[str, Any]] | None: ...
def var_field_address() -> int: ...
def utf8_valid_address() -> int: ...
def node_layout() -> dict[str, int]: ...
"""
"""Type declarations of what only the compiled module has (setup.py adds them to its ``.pyi``)."""

# the kernel functions, which the compiled module exports too (statemorph.kernels.tiers reads this)
__all__ = ["decode_run", "encode_run", "migrate_run"]
