"""The compiled kernels' contract, as plain Python loops: the reference tier for bulk operations.

Why this module exists: every function in ``_native/*.pyx`` has a twin here with the same name,
the same arguments and the same effect on the output buffers. ``statemorph._native`` hands out
either set (``STATEMORPH_NATIVE=0`` or a missing build selects these), and the equivalence tests
run every bulk operation on both and compare bytes and error rows. Also here, because both tiers
need them: the *program compilers* that turn a row type or a migration plan into the flat int64
op matrix the kernels execute, and the error-code table.

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
from typing import Any

import numpy as np

from ..types import (
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    LogicalType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)
from .strings import varlen

# ---------------------------------------------------------------------------------- error codes
E_OK, E_TRUNCATED, E_TRAILING, E_BAD_LENGTH, E_BAD_OFFSET, E_BAD_HEADER, E_BAD_UTF8 = range(7)
E_LONE_SURROGATE, E_BAD_CHAR, E_BAD_SIZE, E_NULL_NOT_ALLOWED, E_BAD_INLINE, E_BAD_NANOS = range(7, 13)
E_TOO_LARGE, E_BAD_ARROW, E_BAD_JCHAR, E_BAD_FLAG, E_REROUTE = 13, 14, 15, 16, 17
"""E_REROUTE is not an error: the kernels hand an entry they cannot vouch for back to
:mod:`statemorph.arrow`, which re-runs it through the reference serializer: a map whose keys may
repeat (two keys with one hash, a null key, or ROW / ARRAY / MAP keys, whose value equality is not
byte equality), or, on decode with arrays, a value whose references may overlap (see ``spend``);
in an Avro migration, a kept map with a duplicate key or bytes read as a string that are not UTF-8.
Why: duplicate keys are the reference's business (encode builds a dict, so later values replace
earlier ones; decode rejects them), and so is its overlap rule; re-running the rare suspect entry
keeps every such rule in one place."""
E_AVRO_INDEX, E_AVRO_RANGE = 40, 41  # the Avro migrate kernel's own (_native/avro.pyx)

ERROR_MESSAGES = {
    E_TRUNCATED: "truncated: the entry is shorter than its format needs",
    E_TRAILING: "trailing bytes after the value",
    E_BAD_LENGTH: "invalid length field",
    E_BAD_OFFSET: "variable-length reference outside the row's variable part",
    E_BAD_HEADER: "invalid row header (RowKind byte > 3 or null bits beyond the arity)",
    E_BAD_UTF8: "invalid UTF-8",
    E_LONE_SURROGATE: "string holds a lone UTF-16 surrogate, which an Arrow string cannot represent",
    E_BAD_CHAR: "string character varint beyond one UTF-16 unit",
    E_BAD_SIZE: "entry has the wrong size for a fixed-width value",
    E_NULL_NOT_ALLOWED: "null in a NOT NULL field",
    E_BAD_INLINE: "invalid inline-data marker in a slot",
    E_BAD_NANOS: "nano-of-millisecond above 999999",
    E_TOO_LARGE: "value exceeds the format's limit",
    E_BAD_ARROW: "Arrow offsets buffer is inconsistent",
    E_BAD_JCHAR: "a Java char is one character below U+10000 (one UTF-16 code unit)",
    E_REROUTE: "the entry needs the reference serializer (map keys that may repeat, or overlapping references)",
    E_BAD_FLAG: "invalid POJO flags byte (01 null, 02 a value; subclass values 04 / 08 are not supported) "
                "or field null flag (00 / 01)",
    E_AVRO_INDEX: "Avro enum symbol or union branch index out of range",
    E_AVRO_RANGE: "Avro date / time / timestamp value outside the range the reference's values hold",
}


def encode_err(code: int, field: int) -> int:
    """A bad row's status: negative, carrying the error code and the program node (field)."""
    return -((code << 32) | (field + 1))


def decode_err(status: int) -> tuple[int, int]:
    """Inverse of :func:`encode_err`: (code, node or -1)."""
    v = -status
    return v >> 32, (v & 0xFFFFFFFF) - 1


# ---------------------------------------------------------------------------------- primitives
K_BOOL, K_I8, K_I16, K_I32, K_I64, K_F32, K_F64, K_CHAR = range(1, 9)
_WIDTH = {K_BOOL: 1, K_I8: 1, K_I16: 2, K_CHAR: 2, K_I32: 4, K_F32: 4, K_I64: 8, K_F64: 8}


def kind_width(kind: int) -> int:
    return _WIDTH[kind]


def _bit(buf: Any, i: int) -> bool:
    return bool(buf[i >> 3] >> (i & 7) & 1)


def _set_bit(buf: Any, i: int) -> None:
    buf[i >> 3] |= 1 << (i & 7)


def fixed_encode(kind: int, values: Any, validity: Any, offset: int, start: int, stop: int,
                 out_off: Any, out_data: Any) -> None:
    vals = memoryview(values).cast("B")
    bits = memoryview(validity).cast("B") if validity is not None else None
    w = _WIDTH[kind]
    need = (offset + stop + 7) // 8 if kind == K_BOOL else (offset + stop) * w
    if need > len(vals):
        raise ValueError("values buffer shorter than the array")
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        j = offset + i
        if bits is not None and not _bit(bits, j):
            continue
        p = int(out_off[i])
        if p + w > len(out):
            break
        if kind == K_BOOL:
            out[p] = 1 if _bit(vals, j) else 0
        elif kind == K_I8:
            out[p] = vals[j]
        else:
            out[p:p + w] = java_be(kind, bytes(vals[w * j:w * j + w]))


def java_be(kind: int, raw: bytes) -> bytes:
    """A little-endian Arrow value as Java writes it: big-endian, NaNs canonical (``floatToIntBits``)."""
    if kind == K_F32:
        u = struct.unpack("<I", raw)[0]
        if (u & 0x7F800000) == 0x7F800000 and u & 0x007FFFFF:
            raw = struct.pack("<I", 0x7FC00000)
    elif kind == K_F64:
        u = struct.unpack("<Q", raw)[0]
        if (u & 0x7FF0000000000000) == 0x7FF0000000000000 and u & 0x000FFFFFFFFFFFFF:
            raw = struct.pack("<Q", 0x7FF8000000000000)
    return raw[::-1]


class _Bin:
    """An Arrow binary column, read entry by entry with the kernels' validation."""

    def __init__(self, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, stop: int) -> None:
        om = memoryview(offsets).cast("B")
        if (offset + stop + 1) * (8 if wide else 4) > len(om):
            raise ValueError("offsets buffer shorter than the array")
        self.offs = np.frombuffer(om, dtype=np.int64 if wide else np.int32)
        self.data = bytes(memoryview(data).cast("B")) if data is not None else b""
        self.bits = memoryview(validity).cast("B") if validity is not None else None
        self.offset = offset

    def valid(self, i: int) -> bool:
        return self.bits is None or _bit(self.bits, self.offset + i)

    def entry(self, i: int) -> tuple[int, int, int]:
        """(code, start, end) of entry i."""
        s = int(self.offs[self.offset + i])
        e = int(self.offs[self.offset + i + 1])
        if s < 0 or e < s or e > len(self.data):
            return E_BAD_ARROW, 0, 0
        return E_OK, s, e


def fixed_decode(kind: int, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                 stop: int, out_values: Any, status: Any, stop_at_error: bool) -> int:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    w = _WIDTH[kind]
    out = memoryview(out_values).cast("B")
    if (kind == K_BOOL and stop > len(out)) or (kind != K_BOOL and stop * w > len(out)):
        raise ValueError("output buffer too small")
    first = -1
    for i in range(start, stop):
        status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        if code == E_OK and e - s != w:
            code = E_TRUNCATED if e - s < w else E_TRAILING
        if code != E_OK:
            status[i] = encode_err(code, -1)
            if first < 0:
                first = i
            if stop_at_error:
                break
            continue
        if kind == K_BOOL:
            out[i] = 1 if v.data[s] else 0
        elif kind == K_I8:
            out[i] = v.data[s]
        else:
            out[w * i:w * i + w] = v.data[s:e][::-1]
    return first


# ---------------------------------------------------------------------------------- strings
def _utf8_to_flink(raw: bytes) -> tuple[int, bytes | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return E_BAD_UTF8, None
    units = len(text.encode("utf-16-le")) // 2
    if units + 1 > 0x7FFFFFFF:
        return E_TOO_LARGE, None
    from .strings import encode_string

    return E_OK, encode_string(text)


def string_encode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                        out_off: Any, stop_at_error: bool) -> int:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        enc = None
        if code == E_OK:
            code, enc = _utf8_to_flink(v.data[s:e])
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
    v = _Bin(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if a == b or not v.valid(i) or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != E_OK:
            continue
        _, enc = _utf8_to_flink(v.data[s:e])
        if enc is not None:
            out[a:b] = enc


def _read_varint(d: bytes, pos: int, end: int, limit: int) -> tuple[int, int, int]:
    """(code, value, next pos): Flink's 7-bit varint, at most 5 groups and at most ``limit``."""
    bad = E_BAD_CHAR if limit == 0xFFFF else E_BAD_LENGTH
    v = shift = k = 0
    while True:
        if pos >= end:
            return E_TRUNCATED, 0, pos
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
    return E_OK, v, pos


def _flink_to_utf8(data: bytes, s: int, e: int) -> tuple[int, bytes | None, bool]:
    """(code, utf-8 bytes, is_null) for the StringValue filling exactly data[s:e]."""
    code, text, is_null, pos = read_flink_utf8(data, s, e)
    if code == E_OK and pos != e:
        return E_TRAILING, None, False
    return code, text, is_null


def read_flink_utf8(data: bytes, pos: int, e: int) -> tuple[int, bytes | None, bool, int]:
    """(code, utf-8 bytes, is_null, next position) for the StringValue at data[pos:], within e."""
    code, n, pos = _read_varint(data, pos, e, 0x7FFFFFFF)
    if code != E_OK:
        return code, None, False, pos
    if n == 0:
        return E_OK, b"", True, pos
    count = n - 1
    if count > e - pos:
        return E_TRUNCATED, None, False, pos
    out = bytearray()
    k = 0
    while k < count:
        code, u, pos = _read_varint(data, pos, e, 0xFFFF)
        if code != E_OK:
            return code, None, False, pos
        k += 1
        if 0xD800 <= u < 0xDC00:
            if k < count:
                code, u2, pos = _read_varint(data, pos, e, 0xFFFF)
                if code != E_OK:
                    return code, None, False, pos
                if 0xDC00 <= u2 < 0xE000:
                    k += 1
                    out += chr(0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00)).encode("utf-8")
                    continue
            return E_LONE_SURROGATE, None, False, pos
        if 0xDC00 <= u < 0xE000:
            return E_LONE_SURROGATE, None, False, pos
        out += chr(u).encode("utf-8")
    return E_OK, bytes(out), False, pos


def string_decode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                        out_off: Any, status: Any, stop_at_error: bool) -> int:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        text = None
        is_null = False
        if code == E_OK:
            code, text, is_null = _flink_to_utf8(v.data, s, e)
        if code != E_OK:
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
    v = _Bin(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if status[i] != 0 or a == b or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != E_OK:
            continue
        _, text, _ = _flink_to_utf8(v.data, s, e)
        if text is not None:
            out[a:b] = text


def bytes_encode_fill(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                      out_off: Any, out_data: Any) -> None:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        p = int(out_off[i])
        if code != E_OK or p + 4 + (e - s) > len(out):
            continue
        out[p:p + 4] = struct.pack(">I", e - s)
        out[p + 4:p + 4 + e - s] = v.data[s:e]


def bytes_decode_sizes(offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
                       out_off: Any, status: Any, stop_at_error: bool) -> int:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        status[i] = 0
        if not v.valid(i):
            continue
        code, s, e = v.entry(i)
        n = 0
        if code == E_OK:
            if e - s < 4:
                code = E_TRUNCATED
            else:
                n = struct.unpack_from(">i", v.data, s)[0]
                if n < 0:
                    code = E_BAD_LENGTH
                elif n > e - s - 4:
                    code = E_TRUNCATED
                elif n < e - s - 4:
                    code = E_TRAILING
        if code != E_OK:
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
    v = _Bin(offsets, data, validity, offset, wide, stop)
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if status[i] != 0 or a == b or b > len(out):
            continue
        code, s, e = v.entry(i)
        if code != E_OK or e - s != b - a + 4:
            continue
        out[a:b] = v.data[s + 4:e]


# ---------------------------------------------------------------------------------- row programs
C_KIND, C_POS, C_END, C_ARITY, C_SRC, C_OLD_ARITY, C_FLAGS, C_LIMIT = range(8)
"""C_LIMIT: compact DECIMAL(p, s): 10**p (an unscaled value must stay below it); DECIMAL(p > 18):
p; TIMESTAMP(p > 3): units of its Arrow type per millisecond (1000 for us, 10**6 for ns)."""
NCOL = 8
(R_BOOL, R_I8, R_I16, R_I32, R_I64, R_F32, R_F64, R_STR, R_BIN, R_ROW, R_BLOB, R_DEC_BIG, R_TS_BIG,
 R_DEC_COMPACT, R_ARRAY, R_MAP) = range(1, 17)
F_NOT_NULL, F_VERBATIM = 1, 2
#: kinds the encode / decode kernels handle (Arrow ↔ slot); other types take the per-value path
ARROW_KINDS = frozenset({R_BOOL, R_I8, R_I16, R_I32, R_I64, R_F32, R_F64, R_STR, R_BIN, R_ROW, R_DEC_COMPACT,
                         R_DEC_BIG, R_TS_BIG})
#: array elements (and map keys / values) the kernels handle, besides rows, arrays and maps
_SCALAR_ELEMENTS = frozenset({R_BOOL, R_I8, R_I16, R_I32, R_I64, R_F32, R_F64, R_STR, R_BIN, R_DEC_COMPACT})
_ARROW_WIDTH = {R_I8: 1, R_I16: 2, R_I32: 4, R_F32: 4, R_I64: 8, R_F64: 8, R_DEC_COMPACT: 16, R_DEC_BIG: 16,
                R_TS_BIG: 8}


def slot_kind(t: LogicalType) -> int:
    """How a field of type ``t`` lives in a BinaryRowData slot."""
    if isinstance(t, BooleanType):
        return R_BOOL
    if isinstance(t, TinyIntType):
        return R_I8
    if isinstance(t, SmallIntType):
        return R_I16
    if isinstance(t, (IntType, DateType, TimeType)):
        return R_I32
    if isinstance(t, BigIntType):
        return R_I64
    if isinstance(t, FloatType):
        return R_F32
    if isinstance(t, DoubleType):
        return R_F64
    if isinstance(t, (CharType, VarCharType)):
        return R_STR
    if isinstance(t, (BinaryType, VarBinaryType)):
        return R_BIN
    if isinstance(t, RowType):
        return R_ROW
    if isinstance(t, DecimalType):
        return R_DEC_COMPACT if t.is_compact else R_DEC_BIG
    if isinstance(t, (TimestampType, LocalZonedTimestampType)):
        return R_I64 if t.is_compact else R_TS_BIG
    if isinstance(t, ArrayType):
        return R_ARRAY
    if isinstance(t, (MapType, MultisetType)):
        return R_MAP
    raise NotImplementedError(f"no BinaryRowData slot layout for {t}")


class RowProgram:
    """A compiled program plus the field path of every node (for error messages)."""

    def __init__(self, matrix: np.ndarray, paths: list[str], types: list[LogicalType]) -> None:
        self.matrix = matrix
        self.paths = paths
        self.types = types

    @property
    def kinds(self) -> list[int]:
        return [int(k) for k in self.matrix[:, C_KIND]]

    def decode_supported(self) -> bool:
        """The decode kernels handle the ARROW_KINDS, and ARRAYs / MAPs of those (but DECIMAL(p > 18)
        and TIMESTAMP(p > 3)), of rows, arrays and maps, at any depth."""
        return self._supported()

    def encode_supported(self) -> bool:
        """As decode, but for MAPs whose key type holds an ARRAY or a MAP: the reference reads such a
        key as a list or dict, which cannot be a dict key, and fails; the kernels would not."""
        kinds = self.kinds
        maps = [c for c, k in enumerate(kinds) if k == R_MAP]
        keys = [(c + 2, int(self.matrix[c + 1, C_END])) for c in maps]  # the key element's subtree
        return self._supported() and not any(R_ARRAY in kinds[a:b] or R_MAP in kinds[a:b] for a, b in keys)

    def _supported(self) -> bool:
        kinds = self.kinds
        elements = _SCALAR_ELEMENTS | {R_ROW, R_ARRAY, R_MAP}
        return all(k in ARROW_KINDS or k == R_MAP or (k == R_ARRAY and kinds[c + 1] in elements)
                   for c, k in enumerate(kinds) if c)

    def path(self, node: int) -> str:
        return self.paths[node] if 0 <= node < len(self.paths) else ""


def _type_nodes(t: LogicalType, pos: int, src: int, path: str, rows: list[list[int]], paths: list[str],
                types: list[LogicalType], verbatim: bool) -> None:
    """Append the identity (old = new) program of a field of type ``t``: nested rows, and arrays /
    maps with their element programs (what the kernels need to validate them)."""
    me = len(rows)
    k = slot_kind(t)
    flags = (0 if t.nullable else F_NOT_NULL) | (F_VERBATIM if verbatim and k in (R_ROW, R_ARRAY, R_MAP) else 0)
    arity = t.arity if isinstance(t, RowType) else 0
    limit = 0
    if isinstance(t, DecimalType):
        limit = 10 ** t.precision if k == R_DEC_COMPACT else t.precision
    elif k == R_TS_BIG and isinstance(t, (TimestampType, LocalZonedTimestampType)):
        limit = 1000 if t.precision <= 6 else 1_000_000
    rows.append([k, pos, 0, arity, src, arity, flags, limit])
    paths.append(path)
    types.append(t)
    if isinstance(t, RowType):
        for j, f in enumerate(t.fields):
            _type_nodes(f.type, j, j, f"{path}.{f.name}" if path else f.name, rows, paths, types, verbatim)
    elif isinstance(t, ArrayType):
        _type_nodes(t.element_type, 0, 0, f"{path}[]", rows, paths, types, verbatim)
    elif isinstance(t, (MapType, MultisetType)):
        key = t.key_type if isinstance(t, MapType) else t.element_type
        value = t.value_type if isinstance(t, MapType) else IntType(nullable=False)
        for part, et in (("key", key), ("value", value)):
            _type_nodes(ArrayType(et), 0, 0, f"{path}.{part}", rows, paths, types, verbatim)
    rows[me][C_END] = len(rows)


def compile_row_program(row_type: RowType) -> RowProgram:
    """The program for encoding / decoding ``row_type`` (old = new; SRC = POS)."""
    rows: list[list[int]] = []
    paths: list[str] = []
    types: list[LogicalType] = []
    _type_nodes(row_type, -1, -1, "", rows, paths, types, False)
    rows[0][C_FLAGS] &= ~F_NOT_NULL
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, NCOL), paths, types)


class NotByteRemappable(Exception):
    """The plan needs more than slot remapping (rows inside arrays / maps): use the per-value path."""


def compile_migration_program(plan: Any) -> RowProgram:
    """Compile a :class:`statemorph.migration.RowMigrationPlan` into a migrate program.

    ``"copy"`` fields keep their old layout (nested rows, arrays and maps marked verbatim: copied
    after validation); ``"row"`` / ``"array"`` / ``"map"`` migrations recurse (array and map
    elements are remapped one by one)."""
    rows: list[list[int]] = []
    paths: list[str] = []
    types: list[LogicalType] = []

    def visit_row(p: Any, pos: int, src: int, path: str, flags: int, t: LogicalType) -> None:
        me = len(rows)
        rows.append([R_ROW, pos, 0, len(p.fields), src, p.old_type.arity, flags, 0])
        paths.append(path)
        types.append(t)
        for j, f in enumerate(p.fields):
            child = f"{path}.{f.name}" if path else f.name
            nflags = 0 if f.type.nullable else F_NOT_NULL
            if f.source < 0:
                rows.append([slot_kind(f.type), j, len(rows) + 1, 0, -1, 0, nflags, 0])
                paths.append(child)
                types.append(f.type)
                continue
            visit_mig(f.migration, j, f.source, child, nflags)
        rows[me][C_END] = len(rows)

    def visit_array(m: Any, path: str) -> None:
        """An array node (element migration ``m``) as it appears inside a map."""
        if m.is_copy:
            _type_nodes(ArrayType(m.old_type), 0, 0, path, rows, paths, types, True)
            return
        me = len(rows)
        rows.append([R_ARRAY, 0, 0, 0, 0, 0, 0, 0])
        paths.append(path)
        types.append(ArrayType(m.new_type))
        visit_mig(m, 0, 0, f"{path}[]", 0)
        rows[me][C_END] = len(rows)

    def visit_mig(m: Any, pos: int, src: int, path: str, nflags: int) -> None:
        if m.kind == "copy":
            root = len(rows)
            _type_nodes(m.old_type, pos, src, path, rows, paths, types, True)
            rows[root][C_FLAGS] = (rows[root][C_FLAGS] & ~F_NOT_NULL) | nflags
        elif m.kind == "row":
            visit_row(m.row, pos, src, path, nflags, m.new_type)
        elif m.kind == "array":
            me = len(rows)
            rows.append([R_ARRAY, pos, 0, 0, src, 0, nflags, 0])
            paths.append(path)
            types.append(m.new_type)
            visit_mig(m.element, 0, 0, f"{path}[]", 0)
            rows[me][C_END] = len(rows)
        else:
            me = len(rows)
            rows.append([R_MAP, pos, 0, 0, src, 0, nflags, 0])
            paths.append(path)
            types.append(m.new_type)
            visit_array(m.key, f"{path}.key")
            visit_array(m.value, f"{path}.value")
            rows[me][C_END] = len(rows)

    visit_row(plan, -1, -1, "", F_VERBATIM if plan.is_identity else 0, plan.new_type)
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, NCOL), paths, types)


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
        self.p = prog.tolist()
        self.d = data
        self.err_node = -1
        self.row = 0
        self.ends: list[list[int]] = []  # decode: per ARRAY node, the offset columns of its elements
        self.metered = False  # decode with arrays: the row / array checks spend ``budget``
        self.budget = 0

    def spend(self, node: int, units: int) -> None:
        """Twin of the kernels' ``spend``: raises _RowError(E_REROUTE) past the budget."""
        if self.metered:
            self.budget -= units
            if self.budget < 0:
                self.err_node = node
                raise _RowError(E_REROUTE)


class _RowError(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


def _is_null(d: bytes, base: int, i: int) -> bool:
    b = i + 8
    return bool(d[base + (b >> 3)] >> (b & 7) & 1)


def _inline_check(d: bytes, slot: int, raw: int, k: int) -> int:
    """Twin of the kernel's ``inline_check``: E_OK or the code of a slot marked inline."""
    n = raw >> 56 & 0x7F
    if k not in (R_STR, R_BIN) or n > 7:
        return E_BAD_INLINE
    if k == R_STR and not _utf8_ok(d[slot:slot + n]):
        return E_BAD_UTF8
    return E_OK


def _var_span(x: _RowCtx, c: int, k: int, raw: int, base: int, size: int, lo: int) -> int:
    """Twin of the kernel's ``var_span``: the bytes a non-inline value takes in the row (8 for a
    TIMESTAMP(p > 3)); raises ``_RowError`` with ``x.err_node`` set."""
    off, n = raw >> 32, raw & 0xFFFFFFFF
    code = E_OK
    if k == R_TS_BIG:
        code = E_BAD_NANOS if n > 999999 else E_OK
        n = 8
    elif k == R_DEC_BIG and not 1 <= n <= 16:
        code = E_BAD_LENGTH
    if code == E_OK and (off < lo or off + n > size):
        code = E_BAD_OFFSET
    if code == E_OK and k == R_STR and not _utf8_ok(x.d[base + off:base + off + n]):
        code = E_BAD_UTF8
    if code != E_OK:
        x.err_node = c
        raise _RowError(code)
    return n


def _check_row(x: _RowCtx, node: int, base: int, size: int) -> int:
    """Mirror of ``check_row``: validate, return the migrated size."""
    p, d = x.p, x.d
    arity, old_arity = p[node][C_ARITY], p[node][C_OLD_ARITY]
    ow = _null_bits_size(old_arity)
    ofixed = ow + 8 * old_arity
    new_size = _null_bits_size(arity) + 8 * arity

    def fail(code: int, at: int) -> _RowError:
        x.err_node = at
        return _RowError(code)

    if size < ofixed:
        raise fail(E_TRUNCATED, node)
    if d[base] > 3:
        raise fail(E_BAD_HEADER, node)
    bits = int.from_bytes(d[base:base + ow], "little") >> 8
    if bits >> old_arity:
        raise fail(E_BAD_HEADER, node)
    x.spend(node, old_arity + 1)
    c = node + 1
    while c < p[node][C_END]:
        src, k, flags = p[c][C_SRC], p[c][C_KIND], p[c][C_FLAGS]
        if src < 0 or bits >> src & 1:
            c = p[c][C_END]
            continue
        slot = base + ow + 8 * src
        if k >= R_STR and k != R_DEC_COMPACT:
            mark = d[slot + 7]
            raw = _U64.unpack_from(d, slot)[0]
            if mark & 0x80:
                code = _inline_check(d, slot, raw, k)
                if code != E_OK:
                    raise fail(code, c)
                c = p[c][C_END]
                continue
            n = _var_span(x, c, k, raw, base, size, ofixed)
            off = raw >> 32
            if k in (R_STR, R_BIN):
                new_size += _round8(n)
            elif k in (R_ROW, R_ARRAY, R_MAP):
                r = _CHECK[k](x, c, base + off, n)
                new_size += _round8(n) if flags & F_VERBATIM else _round8(r)
            elif k == R_DEC_BIG:
                new_size += 16
            else:
                new_size += _round8(n)
        c = p[c][C_END]
    return new_size


def _migrate_row(x: _RowCtx, node: int, base: int, size: int) -> bytearray:
    p, d = x.p, x.d
    arity = p[node][C_ARITY]
    ow = _null_bits_size(p[node][C_OLD_ARITY])
    nw = _null_bits_size(arity)
    buf = bytearray(nw + 8 * arity)
    buf[0] = d[base]
    c = node + 1
    while c < p[node][C_END]:
        src, j, k, flags = p[c][C_SRC], p[c][C_POS], p[c][C_KIND], p[c][C_FLAGS]
        if src < 0 or _is_null(d, base, src):
            _set_bit(buf, j + 8)
            c = p[c][C_END]
            continue
        slot, nslot = base + ow + 8 * src, nw + 8 * j
        raw = _U64.unpack_from(d, slot)[0]
        if k < R_STR or k == R_DEC_COMPACT or (k in (R_STR, R_BIN) and raw >> 63):
            buf[nslot:nslot + 8] = d[slot:slot + 8]
        else:
            off, n = raw >> 32, raw & 0xFFFFFFFF
            cur = len(buf)
            if k in (R_ROW, R_ARRAY, R_MAP) and not flags & F_VERBATIM:
                sub = _MIGRATE[k](x, c, base + off, n)
                _U64.pack_into(buf, nslot, (cur << 32) | len(sub))
                buf += sub + bytes(_round8(len(sub)) - len(sub))
            elif k == R_DEC_BIG:
                _U64.pack_into(buf, nslot, (cur << 32) | n)
                buf += d[base + off:base + off + n] + bytes(16 - n)
            elif k == R_TS_BIG:
                _U64.pack_into(buf, nslot, (cur << 32) | n)
                buf += d[base + off:base + off + 8]
            else:
                _U64.pack_into(buf, nslot, (cur << 32) | n)
                buf += d[base + off:base + off + n] + bytes(_round8(n) - n)
        c = p[c][C_END]
    return buf


_ELEM_SIZE = {R_BOOL: 1, R_I8: 1, R_I16: 2, R_I32: 4, R_F32: 4}


def _array_header(n: int) -> int:
    return 4 + ((n + 31) // 32) * 4


def _check_array(x: _RowCtx, node: int, base: int, size: int) -> int:
    """Mirror of ``check_array``."""
    p, d = x.p, x.d
    e = node + 1
    k = p[e][C_KIND]
    es = _ELEM_SIZE.get(k, 8)
    verbatim = p[node][C_FLAGS] & F_VERBATIM

    def fail(code: int, at: int) -> _RowError:
        x.err_node = at
        return _RowError(code)

    if size < 4:
        raise fail(E_TRUNCATED, node)
    n = struct.unpack_from("<i", d, base)[0]
    if n < 0:
        raise fail(E_BAD_LENGTH, node)
    header = _array_header(n)
    if header + n * es > size:
        raise fail(E_TRUNCATED, node)
    x.spend(node, n + 1)
    lo = min(_round8(header + n * es), size)
    new_size = _round8(header + 8 * n)
    if k < R_STR or k == R_DEC_COMPACT:
        return size
    for i in range(n):
        if d[base + 4 + (i >> 3)] >> (i & 7) & 1:
            continue
        slot = base + header + i * es
        raw = _U64.unpack_from(d, slot)[0]
        mark = d[slot + 7]
        if mark & 0x80:
            code = _inline_check(d, slot, raw, k)
            if code != E_OK:
                raise fail(code, e)
            continue
        ln = _var_span(x, e, k, raw, base, size, lo)
        off = raw >> 32
        r = _CHECK[k](x, e, base + off, ln) if k in _CHECK else 0
        new_size += _round8(r)
    return size if verbatim else new_size


def _check_map(x: _RowCtx, node: int, base: int, size: int) -> int:
    p, d = x.p, x.d
    kn = node + 1
    vn = p[kn][C_END]
    if size < 4:
        x.err_node = node
        raise _RowError(E_TRUNCATED)
    kb = struct.unpack_from("<i", d, base)[0]
    if kb < 0 or kb > size - 4:
        x.err_node = node
        raise _RowError(E_BAD_LENGTH)
    rk = _check_array(x, kn, base + 4, kb)
    rv = _check_array(x, vn, base + 4 + kb, size - 4 - kb)
    if struct.unpack_from("<i", d, base + 4)[0] != struct.unpack_from("<i", d, base + 4 + kb)[0]:
        x.err_node = node
        raise _RowError(E_BAD_LENGTH)
    if p[node][C_FLAGS] & F_VERBATIM:
        return size
    return 4 + rk + rv


def _migrate_array(x: _RowCtx, node: int, base: int, size: int) -> bytes | bytearray:
    p, d = x.p, x.d
    if p[node][C_FLAGS] & F_VERBATIM:
        return d[base:base + size]
    e = node + 1
    k = p[e][C_KIND]
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
    p, d = x.p, x.d
    if p[node][C_FLAGS] & F_VERBATIM:
        return d[base:base + size]
    kn = node + 1
    vn = p[kn][C_END]
    kb = struct.unpack_from("<i", d, base)[0]
    keys = _migrate_array(x, kn, base + 4, kb)
    values = _migrate_array(x, vn, base + 4 + kb, size - 4 - kb)
    return struct.pack("<i", len(keys)) + bytes(keys) + bytes(values)


_CHECK = {R_ROW: _check_row, R_ARRAY: _check_array, R_MAP: _check_map}
_MIGRATE = {R_ROW: _migrate_row, R_ARRAY: _migrate_array, R_MAP: _migrate_map}


def _entry_row(v: _Bin, i: int) -> tuple[int, int, int]:
    code, s, e = v.entry(i)
    if code != E_OK:
        return code, 0, 0
    if e - s < 4:
        return E_TRUNCATED, 0, 0
    n = struct.unpack_from(">i", v.data, s)[0]
    if n < 0:
        return E_BAD_LENGTH, 0, 0
    if n > e - s - 4:
        return E_TRUNCATED, 0, 0
    if n < e - s - 4:
        return E_TRAILING, 0, 0
    return E_OK, s + 4, n


def _prog_matrix(prog: Any) -> np.ndarray:
    m = np.asarray(prog, dtype=np.int64)
    if m.ndim != 2 or m.shape[1] != NCOL or m.shape[0] < 1:
        raise ValueError("bad row program")
    return m


def check_outputs(who: str, out_off: Any, out_data: Any, start: int, stop: int, pos: int) -> None:
    """A one-pass kernel's outputs (Arrow offsets, int32 or int64, and the byte buffer) hold the
    rows ``start..stop`` from ``pos`` (twin of ``smbytes.out_offsets``)."""
    if out_off.itemsize == 4 and len(out_data) > 0x7FFFFFFF:
        raise ValueError(f"{who}: int32 offsets cannot address more than 2 GiB of output")
    if stop > len(out_off) - 1 or start < 0 or pos < 0 or pos > len(out_data):
        raise ValueError(f"{who}: output arrays shorter than the rows")


def migrate_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                stop: int, out_off: Any, out_data: Any, pos: int, machine_code: int = 0) -> tuple[int, int, int]:
    """Fused one-pass migrate (twin of the compiled kernel): validate and write each entry, packed
    from ``out_data[pos]``, its end in ``out_off[i + 1]``; returns ``(next_row, pos, status)``
    (``status < 0``: entry ``next_row`` is bad; else ``next_row < stop``: it did not fit).
    ``machine_code`` is accepted for the shared signature and unused: plan machine code
    (``statemorph._native.jit``) is called by the compiled kernel only."""
    check_outputs("migrate_run", out_off, out_data, start, stop, pos)
    v = _Bin(offsets, data, validity, offset, wide, stop)
    x = _RowCtx(_prog_matrix(prog), v.data)
    out = memoryview(out_data).cast("B")
    verbatim = x.p[0][C_FLAGS] & F_VERBATIM
    status = 0
    i = start
    while i < stop:
        if v.valid(i):
            x.err_node, x.row = -1, i
            code, base, size = _entry_row(v, i)
            if code == E_OK:
                try:
                    r = _check_row(x, 0, base, size)
                except _RowError as e:
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
            if code != E_OK:
                status = encode_err(code, x.err_node)
        out_off[i + 1] = pos
        if status:
            break
        i += 1
    return i, pos, status


_MAX32 = (1 << 31) - 1


class _Full(Exception):
    """An output buffer is too small for the current entry (the caller grows it and resumes)."""


def _row_header(x: _RowCtx, node: int, base: int, size: int, arity: int) -> int:
    """Twin of ``check_row_header``: the row's null bits (above the RowKind byte) after the checks
    every row gets before its fields."""
    ow = _null_bits_size(arity)
    if size < ow + 8 * arity:
        x.err_node = node
        raise _RowError(E_TRUNCATED)
    if x.d[base] > 3:
        x.err_node = node
        raise _RowError(E_BAD_HEADER)
    bits = int.from_bytes(x.d[base:base + ow], "little") >> 8
    if bits >> arity:
        x.err_node = node
        raise _RowError(E_BAD_HEADER)
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
        if kind == R_ARRAY:  # list offsets: per row, or per element of the enclosing array
            self.offs, self.wide = _offsets_out(offs, 0 if elem else stop)
            self.cap = min(self.cap, len(self.offs) - 1)
        elif kind in (R_STR, R_BIN):
            self.offs, self.wide = _offsets_out(offs, 0)
            self.cap = min(self.cap, len(self.offs) - 1)
            self.sdata = memoryview(sdata).cast("B")
            self.scap = len(self.sdata) if self.wide else min(len(self.sdata), _MAX32)
            if not 0 <= spos <= self.scap:
                raise ValueError("decode_run: string position outside its buffer")
        elif kind in ARROW_KINDS and kind != R_ROW:
            nbytes = len(memoryview(vals).cast("B"))
            self.cap = min(self.cap, nbytes * 8 if kind == R_BOOL else nbytes // _ARROW_WIDTH[kind])
        elif kind not in (R_ROW, R_MAP):
            raise ValueError(f"decode_run: kind {kind} is not decodable")


def _put_value(o: _Out, k: int, i: int, d: bytes, slot: int) -> None:
    """Twin of ``put_value``: value i of a fixed-width column from its slot."""
    if k == R_BOOL:
        if d[slot]:
            _set_bit(o.vals, i)
    elif k == R_DEC_COMPACT:
        v64 = struct.unpack_from("<q", d, slot)[0]
        o.vals[16 * i:16 * i + 16] = v64.to_bytes(16, "little", signed=True)
    else:
        w = _ARROW_WIDTH[k]
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
    element kind ``k``, may hold two equal keys or a null one (then the entry is E_REROUTE). A
    key's hash is ``_key_hash`` of its canonical bytes: its value (string / binary bytes, BOOLEAN as 0 /
    1, -0.0 as 0.0), wherever it is stored. Equal hashes only *may* be equal keys: the reference
    decides. ROW / ARRAY / MAP keys are not hashed (equal values may differ in bytes)."""
    n = struct.unpack_from("<i", d, base)[0]
    es = _ELEM_SIZE.get(k, 8)
    header = _array_header(n)
    seen: set[int] = set()
    for j in range(n):
        if d[base + 4 + (j >> 3)] >> (j & 7) & 1:
            return True
        if k in (R_ROW, R_ARRAY, R_MAP):
            if j:
                return True
            continue
        slot = base + header + j * es
        if k in (R_STR, R_BIN):
            ln, at = _elem_bytes(d, base, slot)
            key = bytes(d[at:at + ln])
        elif k == R_BOOL:
            key = b"\x01" if d[slot] else b"\x00"
        elif k in (R_F32, R_F64) and not any(d[slot:slot + es - 1]) and d[slot + es - 1] == 0x80:
            key = bytes(es)  # -0.0 == 0.0
        else:
            key = bytes(d[slot:slot + es])
        h = _key_hash(key)
        if h in seen:
            return True
        seen.add(h)
    return False


def _decode_map(x: _RowCtx, outs: list[_Out], m: int, base: int) -> None:
    """Twin of the kernel's ``decode_map``: append a validated map's keys and values to the element
    columns of its key and value arrays; raises _RowError(E_REROUTE) / _Full."""
    p, d = x.p, x.d
    kn = m + 1
    kb = struct.unpack_from("<i", d, base)[0]
    if keys_suspect(d, base + 4, p[kn + 1][C_KIND]):
        x.err_node = m
        raise _RowError(E_REROUTE)
    _decode_array(x, outs, kn, base + 4)
    _decode_array(x, outs, p[kn][C_END], base + 4 + kb)


def _decode_row(x: _RowCtx, outs: list[_Out], node: int, base: int, size: int, i: int) -> None:
    """Twin of the kernel's ``decode_row``: validate (``check_row``'s checks, in its order) and
    scatter into row i; raises _RowError / _Full, leaving partial outputs for the rollback."""
    p, d = x.p, x.d
    arity = p[node][C_ARITY]
    ow = _null_bits_size(arity)
    ofixed = ow + 8 * arity
    bits = _row_header(x, node, base, size, arity)
    c = node + 1
    while c < p[node][C_END]:
        j, k = p[c][C_POS], p[c][C_KIND]
        if bits >> j & 1:
            c = p[c][C_END]
            continue
        o = outs[c]
        _set_bit(o.valid, i)
        o.count += 1
        slot = base + ow + 8 * j
        if k in (R_DEC_BIG, R_TS_BIG):
            code = _decode_big(x, o, k, p[c][C_LIMIT], i, slot, base, ofixed, size)
            if code != E_OK:
                x.err_node = c
                raise _RowError(code)
            c = p[c][C_END]
            continue
        if k not in (R_STR, R_BIN, R_ROW, R_ARRAY, R_MAP):
            _put_value(o, k, i, d, slot)
            c = p[c][C_END]
            continue
        raw = _U64.unpack_from(d, slot)[0]
        mark = raw >> 56
        if mark & 0x80:
            code = _inline_check(d, slot, raw, k)
            if code != E_OK:
                x.err_node = c
                raise _RowError(code)
            n = mark & 0x7F
            at = slot
        else:
            off, n = raw >> 32, raw & 0xFFFFFFFF
            if off < ofixed or off + n > size:
                x.err_node = c
                raise _RowError(E_BAD_OFFSET)
            if k == R_ROW:
                _decode_row(x, outs, c, base + off, n, i)
                c = p[c][C_END]
                continue
            if k == R_ARRAY:
                _check_array(x, c, base + off, n)
                _decode_array(x, outs, c, base + off)
                c = p[c][C_END]
                continue
            if k == R_MAP:
                _check_map(x, c, base + off, n)
                _decode_map(x, outs, c, base + off)
                c = p[c][C_END]
                continue
            if k == R_STR and not _utf8_ok(d[base + off:base + off + n]):
                x.err_node = c
                raise _RowError(E_BAD_UTF8)
            at = base + off
        if n > o.scap - o.spos:
            raise _Full
        o.sdata[o.spos:o.spos + n] = d[at:at + n]
        o.spos += n
        c = p[c][C_END]


def _decode_array(x: _RowCtx, outs: list[_Out], a: int, base: int) -> None:
    """Twin of the kernel's ``decode_array``: append a validated array's elements to the element
    column of ARRAY node ``a``; raises _Full (or _RowError from a map below)."""
    p, d = x.p, x.d
    arr, el = outs[a], outs[a + 1]
    k = p[a + 1][C_KIND]
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
            _set_bit(el.valid, ei)
            el.count += 1
            slot = base + header + j * es
            if k in (R_ROW, R_ARRAY, R_MAP):
                raw = _U64.unpack_from(d, slot)[0]
                if k == R_ROW:
                    _decode_row(x, outs, a + 1, base + (raw >> 32), raw & 0xFFFFFFFF, ei)
                elif k == R_ARRAY:
                    _decode_array(x, outs, a + 1, base + (raw >> 32))
                else:
                    _decode_map(x, outs, a + 1, base + (raw >> 32))
            elif k in (R_STR, R_BIN):
                ln, at = _elem_bytes(d, base, slot)
                if ln > el.scap - el.spos:
                    raise _Full
                el.sdata[el.spos:el.spos + ln] = d[at:at + ln]
                el.spos += ln
            else:
                _put_value(el, k, ei, d, slot)
        if k in (R_STR, R_BIN):
            el.offs[ei + 1] = el.spos
        elif k in (R_ROW, R_ARRAY, R_MAP):  # the string / list columns of this element column end at ei too
            for c in x.ends[a]:
                outs[c].offs[ei + 1] = outs[c].spos


def _arrays(p: list[list[int]]) -> list[int]:
    """Twin of the kernel's ``Node.arr``: per node, the ARRAY whose element column it is part of
    (the element, a field of an element row, or the key / value array of an element map, at any
    depth below that array but not inside a deeper array), or -1."""
    parent = [-1] * len(p)
    for c, row in enumerate(p):
        if row[C_KIND] == R_ARRAY:
            parent[c + 1] = c
        elif row[C_KIND] == R_MAP:
            parent[c + 1] = parent[p[c + 1][C_END]] = c
        elif row[C_KIND] == R_ROW:
            child = c + 1
            while child < row[C_END]:
                parent[child] = c
                child = p[child][C_END]
    arr = [-1] * len(p)
    for c in range(1, len(p)):
        arr[c] = parent[c] if p[parent[c]][C_KIND] == R_ARRAY else arr[parent[c]]
    return arr


def decode_run(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int, stop: int,
               outs: list[Any], counts: Any, spos: Any, machine_code: int = 0) -> tuple[int, int]:
    """One-pass decode (twin of the compiled kernel): validate and scatter each entry; returns
    ``(next_row, status)`` (``next_row < stop``: bad entry with ``status`` < 0, or full buffer).
    ``machine_code``: as for ``migrate_run``, accepted and unused."""
    v = _Bin(offsets, data, validity, offset, wide, stop)
    x = _RowCtx(_prog_matrix(prog), v.data)
    p = x.p
    nnodes = p[0][C_END]
    if len(outs) != nnodes or len(counts) < nnodes or len(spos) < nnodes or start < 0:
        raise ValueError("decode_run: one output and one counter per program node is required")
    arr = _arrays(p)
    elem = [arr[c] >= 0 for c in range(nnodes)]
    os_ = [_Out(outs[c], p[c][C_KIND] if c else R_ROW, stop, int(counts[c]), int(spos[c]), elem[c])
           for c in range(nnodes)]
    x.ends = [[c for c in range(nnodes) if arr[c] == a and p[c][C_KIND] in (R_STR, R_BIN, R_ARRAY)]
              for a in range(nnodes)]
    x.metered = any(row[C_KIND] == R_ARRAY for row in p)
    for c in range(1, nnodes):
        if p[c][C_KIND] == R_ARRAY:
            os_[c].scap = (1 << 63) - 1 if os_[c].wide else _MAX32  # lowered to its columns' room below
        if elem[c]:
            os_[arr[c]].scap = min(os_[arr[c]].scap, os_[c].cap)
            if not 0 <= os_[arr[c]].spos <= os_[c].cap:
                raise ValueError("decode_run: element position outside its outputs")
        elif os_[c].cap < stop:
            raise ValueError("decode_run: outputs shorter than the rows")
    if os_[0].cap < stop:
        raise ValueError("decode_run: outputs shorter than the rows")
    rowpos = [os_[c] for c in range(1, nnodes) if not elem[c] and p[c][C_KIND] in (R_STR, R_BIN, R_ARRAY)]
    i, status = start, 0
    while i < stop:
        if v.valid(i):
            x.err_node = -1
            code, base, size = _entry_row(v, i)
            if code == E_OK:
                x.budget = size
                try:
                    _decode_row(x, os_, 0, base, size, i)
                except (_RowError, _Full) as e:
                    for c in range(1, nnodes):
                        o = os_[c]
                        lo, hi = (os_[arr[c]].sstart, os_[arr[c]].spos) if elem[c] else (i, i + 1)
                        for j in range(lo, hi):
                            if _bit(o.valid, j):
                                o.valid[j >> 3] &= ~(1 << (j & 7)) & 0xFF
                                o.count -= 1
                            if p[c][C_KIND] == R_BOOL:
                                o.vals[j >> 3] &= ~(1 << (j & 7)) & 0xFF
                    for o in os_[1:]:
                        o.spos = o.sstart
                    if isinstance(e, _Full):
                        break
                    code = e.code
            if code != E_OK:
                status = encode_err(code, x.err_node)
            else:
                _set_bit(os_[0].valid, i)
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


class _Cols:
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
        return bits is None or _bit(bits, self.cols[c][3] + i)

    def string(self, c: int, i: int) -> tuple[int, int]:
        """(start, length) of string / binary / list i of column c; (-1, 0) if the offsets are bad."""
        _, vals, offs, off, bound = self.cols[c]
        assert offs is not None
        s, e = int(offs[off + i]), int(offs[off + i + 1])
        if s < 0 or e < s or e > (len(vals) if bound is None else bound):
            return -1, 0
        return s, e - s


def _encode_str(cols: _Cols, c: int, i: int, buf: bytearray, slot: int, room: int, err: list[int]) -> None:
    """Twin of the kernel's ``encode_str``: string / binary i of column c into ``buf[slot]``,
    inline up to 7 bytes, else appended (padded) to ``buf``, the var part."""
    vals = cols.cols[c][1]
    s, n = cols.string(c, i)
    if s < 0 or n > 0x7FFFFFFF:
        err[0] = c
        raise _RowError(E_BAD_ARROW if s < 0 else E_TOO_LARGE)
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
    if k == R_TS_BIG:
        millis, rest = divmod(struct.unpack_from("<q", vals, 8 * e)[0], limit)
        if 8 > room - len(buf):
            raise _Full
        _U64.pack_into(buf, slot, (len(buf) << 32) | rest * (1_000_000 // limit))
        buf += struct.pack("<q", millis)
        return
    u = int.from_bytes(vals[16 * e:16 * e + 16], "little", signed=True)
    if not -10 ** limit < u < 10 ** limit:
        err[0] = c
        raise _RowError(E_TOO_LARGE)
    if 16 > room - len(buf):
        raise _Full
    n = ((u if u >= 0 else ~u).bit_length() + 8) // 8
    _U64.pack_into(buf, slot, (len(buf) << 32) | n)
    buf += u.to_bytes(n, "big", signed=True) + bytes(16 - n)


def _decode_big(x: _RowCtx, o: _Out, k: int, limit: int, i: int, slot: int, base: int, ofixed: int,
                size: int) -> int:
    """Twin of the kernel's ``decode_big``: E_OK or the code."""
    d = x.d
    raw = _U64.unpack_from(d, slot)[0]
    off, n = raw >> 32, raw & 0xFFFFFFFF
    if raw >> 63:
        return E_BAD_INLINE
    if k == R_TS_BIG:
        if n > 999_999:
            return E_BAD_NANOS
        if off < ofixed or off + 8 > size:
            return E_BAD_OFFSET
        v = struct.unpack_from("<q", d, base + off)[0] * limit + n // (1_000_000 // limit)
        if not -(1 << 63) <= v < 1 << 63:
            return E_TOO_LARGE
        o.vals[8 * i:8 * i + 8] = struct.pack("<q", v)
        return E_OK
    if not 1 <= n <= 16:
        return E_BAD_LENGTH
    if off < ofixed or off + n > size:
        return E_BAD_OFFSET
    u = int.from_bytes(d[base + off:base + off + n], "big", signed=True)
    if not -10 ** limit < u < 10 ** limit:
        return E_TOO_LARGE
    o.vals[16 * i:16 * i + 16] = u.to_bytes(16, "little", signed=True)
    return E_OK


def _encode_row(p: list[list[int]], cols: _Cols, node: int, i: int, room: int, err: list[int]) -> bytearray:
    """Twin of the kernel's ``encode_row``: validate row i and build its bytes in one walk, in
    program order; raises _RowError (``err[0]`` = node) or _Full when it outgrows ``room``, at the
    same points as the kernel."""
    arity = p[node][C_ARITY]
    nw = _null_bits_size(arity)
    if nw + 8 * arity > room:
        raise _Full
    buf = bytearray(nw + 8 * arity)
    c = node + 1
    while c < p[node][C_END]:
        k, j = p[c][C_KIND], p[c][C_POS]
        slot = nw + 8 * j
        if not cols.valid(c, i):
            if p[c][C_FLAGS] & F_NOT_NULL:
                err[0] = c
                raise _RowError(E_NULL_NOT_ALLOWED)
            _set_bit(buf, j + 8)
            c = p[c][C_END]
            continue
        _, vals, _, off, _ = cols.cols[c]
        e = off + i
        if k == R_BOOL:
            buf[slot] = 1 if _bit(vals, e) else 0
        elif k in (R_STR, R_BIN):
            _encode_str(cols, c, i, buf, slot, room, err)
        elif k in (R_ROW, R_ARRAY, R_MAP):
            _encode_nested(p, cols, c, i, buf, slot, room, err)
        elif k == R_DEC_COMPACT:
            v = int.from_bytes(vals[16 * e:16 * e + 16], "little", signed=True)
            if not -p[c][C_LIMIT] < v < p[c][C_LIMIT]:  # more digits than DECIMAL(p, s) holds
                err[0] = c
                raise _RowError(E_TOO_LARGE)
            buf[slot:slot + 8] = vals[16 * e:16 * e + 8]
        elif k in (R_DEC_BIG, R_TS_BIG):
            _encode_big(k, p[c][C_LIMIT], vals, e, buf, slot, room, c, err)
        else:
            w = _ARROW_WIDTH[k]
            buf[slot:slot + w] = vals[w * e:w * e + w]
        c = p[c][C_END]
    return buf


def _encode_nested(p: list[list[int]], cols: _Cols, c: int, i: int, buf: bytearray, slot: int, room: int,
                   err: list[int]) -> None:
    """A ROW / ARRAY / MAP value (row or element i of node c) appended to ``buf``'s var part, padded
    to 8 (only a map's size is not a multiple of 8), its slot pointing at it."""
    k = p[c][C_KIND]
    sub = (_encode_row if k == R_ROW else _encode_array if k == R_ARRAY else _encode_map)(
        p, cols, c, i, room - len(buf), err)
    if _round8(len(sub)) > room - len(buf):
        raise _Full
    _U64.pack_into(buf, slot, (len(buf) << 32) | len(sub))
    buf += sub + bytes(_round8(len(sub)) - len(sub))


def _encode_map(p: list[list[int]], cols: _Cols, m: int, i: int, room: int, err: list[int]) -> bytearray:
    """Twin of the kernel's ``encode_map``: the BinaryMapData of map i of a MAP column (its key and
    value arrays read the map's list offsets); E_REROUTE right after the keys, before any value is
    checked, since the reference drops the values of duplicate keys but the last."""
    kn = m + 1
    if 4 > room:
        raise _Full
    keys = _encode_array(p, cols, kn, i, room - 4, err)
    if keys_suspect(keys, 0, p[kn + 1][C_KIND]):
        err[0] = m
        raise _RowError(E_REROUTE)
    values = _encode_array(p, cols, p[kn][C_END], i, room - 4 - len(keys), err)
    return bytearray(struct.pack("<i", len(keys))) + keys + values


def _encode_array(p: list[list[int]], cols: _Cols, node: int, i: int, room: int, err: list[int]) -> bytearray:
    """Twin of the kernel's ``encode_array``: the BinaryArrayData of list i of an ARRAY column."""
    s, n = cols.string(node, i)
    if s < 0:
        err[0] = node
        raise _RowError(E_BAD_ARROW)
    if n > 0x7FFFFFFF:
        err[0] = node
        raise _RowError(E_TOO_LARGE)
    el = node + 1
    k = p[el][C_KIND]
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
            if p[el][C_FLAGS] & F_NOT_NULL:
                err[0] = el
                raise _RowError(E_NULL_NOT_ALLOWED)
            _set_bit(buf, 32 + j)
            continue
        slot = header + j * es
        e = off + ei
        if k == R_BOOL:
            buf[slot] = 1 if _bit(vals, e) else 0
        elif k == R_DEC_COMPACT:
            v = int.from_bytes(vals[16 * e:16 * e + 16], "little", signed=True)
            if not -p[el][C_LIMIT] < v < p[el][C_LIMIT]:
                err[0] = el
                raise _RowError(E_TOO_LARGE)
            buf[slot:slot + 8] = vals[16 * e:16 * e + 8]
        elif k in (R_STR, R_BIN):
            _encode_str(cols, el, ei, buf, slot, room, err)
        elif k in (R_ROW, R_ARRAY, R_MAP):
            _encode_nested(p, cols, el, ei, buf, slot, room, err)
        else:
            buf[slot:slot + es] = vals[es * e:es * e + es]
            if k in (R_F32, R_F64) and math.isnan(struct.unpack_from("<f" if k == R_F32 else "<d", buf, slot)[0]):
                buf[slot:slot + es] = _NAN_F32[::-1] if k == R_F32 else _NAN_F64[::-1]  # Java's canonical NaN
    return buf


def encode_run(prog: Any, cols: list[Any], start: int, stop: int, out_off: Any, out_data: Any, pos: int,
               out_valid: Any, machine_code: int = 0) -> tuple[int, int, int, int]:
    """One-pass encode (twin of the compiled kernel): validate and write each entry packed from
    ``out_data[pos]``; returns ``(next_row, pos, status, written)`` (``next_row < stop``: bad entry
    with ``status`` < 0, or full buffer). ``machine_code``: as for ``migrate_run``, accepted and
    unused."""
    p = _prog_matrix(prog).tolist()
    if len(cols) != p[0][C_END]:
        raise ValueError("one Arrow column per program node is required")
    cc = _Cols(cols)
    offs, owide = _offsets_out(out_off, stop)
    out = memoryview(out_data).cast("B")
    valid = memoryview(out_valid).cast("B")
    cap = len(out) if owide else min(len(out), _MAX32)
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
            except _RowError as e:
                status = encode_err(e.code, err[0])
                offs[i + 1] = pos
                break
            out[pos:pos + 4] = struct.pack(">I", len(row))
            out[pos + 4:pos + 4 + len(row)] = row
            pos += 4 + len(row)
            _set_bit(valid, i)
            written += 1
        offs[i + 1] = pos
        i += 1
    return i, pos, status, written


# ---------------------------------------------------------------------------------- flink-core Row
S_FIXED, S_STR, S_BYTES, S_ROW, S_BOOL, S_F32, S_F64 = 1, 2, 3, 4, 5, 6, 7
C_OLD_FLAG, C_NEW_FLAG, C_WIDTH = 5, 6, 7
NUL, REWRITE = 1, 2
_NAN_F32 = b"\x7f\xc0\x00\x00"
_NAN_F64 = b"\x7f\xf8\x00\x00\x00\x00\x00\x00"


def check_leaf(d: bytes, pos: int, end: int, kind: int, width: int) -> tuple[int, int, int]:
    """Mirror of ``remap.check_leaf``: (code, state 0 / NUL / REWRITE, next pos)."""
    if kind == S_STR:
        code, n, at = _read_varint(d, pos, end, 0x7FFFFFFF)
        if code != E_OK:
            return code, 0, at
        if n == 0:
            return E_OK, NUL, at
        state = REWRITE if d[at - 1] == 0 and at - pos > 1 else 0
        if n - 1 > end - at:
            return E_TRUNCATED, 0, at
        for _ in range(n - 1):
            start = at
            code, _u, at = _read_varint(d, at, end, 0xFFFF)
            if code != E_OK:
                return code, 0, at
            if at - start > 1 and d[at - 1] == 0:
                state = REWRITE
        return E_OK, state, at
    if kind == S_BYTES:
        if end - pos < 4:
            return E_TRUNCATED, 0, pos
        n = struct.unpack_from(">i", d, pos)[0]
        if n < 0:
            return E_BAD_LENGTH, 0, pos
        if n > end - pos - 4:
            return E_TRUNCATED, 0, pos
        return E_OK, 0, pos + 4 + n
    if end - pos < width:
        return E_TRUNCATED, 0, pos
    return E_OK, 0, pos + width


def put_canonical(kind: int, d: bytes, start: int, stop: int, rewrite: bool) -> bytes:
    """Mirror of ``remap.put_canonical``: the checked leaf value ``d[start:stop]`` as the per-value
    reference re-serializes it (boolean 01, canonical NaN, minimal string varints)."""
    raw = d[start:stop]
    if kind == S_BOOL:
        return b"\x01" if raw[0] else b"\x00"
    if kind == S_F32 and math.isnan(struct.unpack(">f", raw)[0]):
        return _NAN_F32
    if kind == S_F64 and math.isnan(struct.unpack(">d", raw)[0]):
        return _NAN_F64
    if kind == S_STR and rewrite:
        _code, n, pos = _read_varint(d, start, stop, 0x7FFFFFFF)
        out = bytearray(varlen(n))
        for _ in range(n - 1):
            _code, u, pos = _read_varint(d, pos, stop, 0xFFFF)
            out += varlen(u)
        return bytes(out)
    return raw


def leaf_kind(serializer: Any) -> tuple[int, int] | None:
    """(kind, width) of a DataStream serializer the remap kernels validate and copy in place, or
    None (the Row and POJO remaps share these leaves)."""
    from . import (
        BooleanSerializer,
        BytePrimitiveArraySerializer,
        ByteSerializer,
        CharSerializer,
        DoubleSerializer,
        FloatSerializer,
        IntSerializer,
        LongSerializer,
        ShortSerializer,
        StringSerializer,
    )

    leaves = {BooleanSerializer: (S_BOOL, 1), ByteSerializer: (S_FIXED, 1), ShortSerializer: (S_FIXED, 2),
              CharSerializer: (S_FIXED, 2), IntSerializer: (S_FIXED, 4), FloatSerializer: (S_F32, 4),
              LongSerializer: (S_FIXED, 8), DoubleSerializer: (S_F64, 8), StringSerializer: (S_STR, 0),
              BytePrimitiveArraySerializer: (S_BYTES, 0)}
    return leaves.get(type(serializer))


def compile_core_row_program(prior_snapshot: Any, new_serializer: Any) -> RowProgram:
    """Program for migrating flink-core ``Row`` bytes written under ``prior_snapshot`` (a
    ``RowSerializerSnapshot``) to ``new_serializer`` (a ``RowSerializer``).

    Raises :class:`NotByteRemappable` when a field's bytes are not copied unchanged (a nested
    value changes shape) or its type has no in-place validator here."""
    rows: list[list[int]] = []
    paths: list[str] = []
    core_row_nodes(prior_snapshot, new_serializer, -1, "", rows, paths)
    return RowProgram(np.array(rows, dtype=np.int64).reshape(-1, NCOL), paths, [])


def core_row_nodes(snap: Any, ser: Any, pos: int, path: str, rows: list[list[int]], paths: list[str]) -> None:
    """Append the nodes of a Row written under ``snap`` and rewritten for ``ser`` (field ``pos`` of
    its parent) to ``rows`` / ``paths``; also used for Row fields inside a POJO program."""
    from .tuples import RowSerializer, RowSerializerSnapshot

    if not isinstance(snap, RowSerializerSnapshot) or not isinstance(ser, RowSerializer):
        raise NotByteRemappable(f"{path or 'row'}: not a flink-core Row")
    if len(snap.nested_snapshots) != ser.arity:
        raise NotByteRemappable(f"{path or 'row'}: arity changed")
    me = len(rows)
    rows.append([S_ROW, pos, 0, ser.arity, 0, int(snap.supports_row_kind), int(ser.supports_row_kind), 0])
    paths.append(path)
    for i, (nsnap, nser) in enumerate(zip(snap.nested_snapshots, ser.field_serializers, strict=True)):
        child = f"{path}.{ser.label(i)}" if path else ser.label(i)
        if isinstance(nser, RowSerializer):
            core_row_nodes(nsnap, nser, i, child, rows, paths)
            continue
        compat = nsnap.resolve_schema_compatibility(nser)
        if not compat.is_compatible_as_is() or type(nsnap.restore_serializer()) is not type(nser):
            raise NotByteRemappable(f"{child}: value changes shape")
        leaf = leaf_kind(nser)
        if leaf is None:
            raise NotByteRemappable(f"{child}: {type(nser).__name__} has no in-place validator")
        rows.append([leaf[0], i, len(rows) + 1, 0, 0, 0, 0, leaf[1]])
        paths.append(child)
    rows[me][C_END] = len(rows)


def _mask_bit(m: bytes, k: int) -> bool:
    return bool(m[k >> 3] >> (7 - (k & 7)) & 1)


def _core_row_walk(p: list[list[int]], node: int, d: bytes, pos: int, end: int, out: bytearray | None,
                   err: list[int]) -> tuple[int, int]:
    """Mirror of ``row_walk``: (new size, next pos); raises _RowError."""
    arity = p[node][C_ARITY]
    oldk = 2 if p[node][C_OLD_FLAG] else 0
    newk = 2 if p[node][C_NEW_FLAG] else 0
    oldlen, newlen = (arity + oldk + 7) >> 3, (arity + newk + 7) >> 3
    if end - pos < oldlen:
        err[0] = node
        raise _RowError(E_TRUNCATED)
    m = d[pos:pos + oldlen]
    if any(_mask_bit(m, k) for k in range(arity + oldk, oldlen * 8)):
        err[0] = node
        raise _RowError(E_BAD_HEADER)
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
    while child < p[node][C_END]:
        if _mask_bit(m, oldk + p[child][C_POS]):
            child = p[child][C_END]
            continue
        start = pos
        kind = p[child][C_KIND]
        if kind == S_ROW:
            r, pos = _core_row_walk(p, child, d, pos, end, out, err)
            size += r
            child = p[child][C_END]
            continue
        code, state, pos = check_leaf(d, pos, end, kind, p[child][C_WIDTH])
        if code != E_OK:
            err[0] = child
            raise _RowError(code)
        if state == NUL:  # a null string under a 'present' mask bit: null, as the reference writes it
            if out is not None:
                k = newk + p[child][C_POS]
                out[at + (k >> 3)] |= 0x80 >> (k & 7)
        else:
            value = put_canonical(kind, d, start, pos, state == REWRITE)
            if out is not None:
                out += value
            size += len(value)
        child = p[child][C_END]
    return size, pos


def core_row_sizes(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                   stop: int, out_off: Any, stop_at_error: bool) -> int:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    p = _prog_matrix(prog).tolist()
    first = -1
    for i in range(start, stop):
        out_off[i + 1] = 0
        if not v.valid(i):
            continue
        err = [-1]
        code, s, e = v.entry(i)
        if code == E_OK:
            try:
                r, pos = _core_row_walk(p, 0, v.data, s, e, None, err)
                if pos != e:
                    code = E_TRAILING
                else:
                    out_off[i + 1] = r
            except _RowError as x:
                code = x.code
        if code != E_OK:
            out_off[i + 1] = encode_err(code, err[0])
            if first < 0:
                first = i
            if stop_at_error:
                break
    return first


def core_row_fill(prog: Any, offsets: Any, data: Any, validity: Any, offset: int, wide: bool, start: int,
                  stop: int, out_off: Any, out_data: Any) -> None:
    v = _Bin(offsets, data, validity, offset, wide, stop)
    p = _prog_matrix(prog).tolist()
    out = memoryview(out_data).cast("B")
    for i in range(start, stop):
        a, b = int(out_off[i]), int(out_off[i + 1])
        if a == b or b > len(out) or not v.valid(i):
            continue
        code, s, e = v.entry(i)
        if code != E_OK:
            continue
        buf = bytearray()
        _core_row_walk(p, 0, v.data, s, e, buf, [-1])
        out[a:b] = buf


KERNELS = (
    "fixed_encode", "fixed_decode",
    "string_encode_sizes", "string_encode_fill", "string_decode_sizes", "string_decode_fill",
    "bytes_encode_fill", "bytes_decode_sizes", "bytes_decode_fill",
    "encode_run", "decode_run",
    "migrate_run", "core_row_sizes", "core_row_fill", "corerow_encode", "corerow_decode", "pojo_migrate_run",
    "avro_migrate_run",
)

_CORE_ROW = frozenset({"compile_core_row_codec", "corerow_encode", "corerow_decode"})
_POJO = frozenset({"compile_pojo_program", "pojo_migrate_run"})
_AVRO = frozenset({"compile_avro_program", "avro_migrate_run"})


def __getattr__(name: str) -> Any:
    """The flink-core Row encode / decode twins live in ``_batch_corerow``, the POJO migrate twin in
    ``_batch_pojo`` and the Avro one in ``_batch_avro`` (they build on the helpers here, so those
    modules import this one; exposing them lazily avoids the cycle)."""
    if name in _CORE_ROW:
        from . import _batch_corerow

        return getattr(_batch_corerow, name)
    if name in _POJO:
        from . import _batch_pojo

        return getattr(_batch_pojo, name)
    if name in _AVRO:
        from . import _batch_avro

        return getattr(_batch_avro, name)
    raise AttributeError(name)


__all__: list[str] = []

