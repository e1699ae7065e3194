"""Flink's Table/SQL binary layouts (BinaryRowData, BinaryArrayData, BinaryMapData) as Python.

Why a codec tree: the layout of RowData bytes follows only from the logical type, so a type is
compiled once into a tree of small codec objects (one per type node) that know their slot
width, how to write a value into a slot (plus the variable-length part) and how to read and
validate it back. ``RowDataSerializer`` and the migration code both use this tree.

Layout facts (docs/formats.md §3; all integers little-endian, offsets relative to the start of
the enclosing row or array):

- row: ``[header byte = RowKind][null bits, bit i+8 for field i][8-byte slots][var part]``;
- strings / binaries of ≤ 7 bytes are inline in the slot (byte 7 = 0x80 | len), longer ones
  and every nested structure sit in the var part (8-byte aligned, zero padded) with slot
  ``offset << 32 | length``;
- DECIMAL(p > 18): 16 reserved bytes, slot length = the unscaled BigInteger's byte count;
- TIMESTAMP(p > 3): 8 bytes of millis in the var part, slot length = nano of millisecond;
- array: ``i32 n ‖ null bits (4-byte words) ‖ n slots of the element width ‖ pad ‖ var part``;
  FLOAT/DOUBLE NaN canonicalised inside arrays only;
- map: ``i32 keyArrayBytes ‖ key array ‖ value array``; a MULTISET is a map element → INT.

Nulls are written the way ``RowDataSerializer.toBinaryRow`` writes them: null bit, zero slot,
no var-part reservation. Readers ignore the slot of a null field, so the planner's other form
(a reservation) reads fine.

Values: see :mod:`statemorph.serializers.rowdata`.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import math
import operator
import struct
from collections.abc import Mapping
from typing import Any, ClassVar

from . import types
from .errors import MalformedDataError, SerializationError
from .row import Row, RowKind, row_kind_of
from .types import Timestamp

_I8 = struct.Struct("<b")
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_F32_BE = struct.Struct(">f")
_U32_BE = struct.Struct(">I")

_EPOCH_ORDINAL = _dt.date(1970, 1, 1).toordinal()
_MS_PER_DAY = 86_400_000
_UTC = _dt.timezone.utc
_ZERO8 = bytes(8)


def round8(n: int) -> int:
    return (n + 7) & ~7


def row_null_bits_size(arity: int) -> int:
    """Bytes of header + null bits of a BinaryRowData (whole 8-byte words)."""
    return ((arity + 63 + 8) // 64) * 8


def row_fixed_size(arity: int) -> int:
    return row_null_bits_size(arity) + 8 * arity


def array_header_size(n: int) -> int:
    return 4 + ((n + 31) // 32) * 4


class _Ctx:
    """Where a read is: the whole buffer, the absolute offset of its first byte in the caller's
    stream (for messages), so errors say what, where (field path) and at which byte."""

    __slots__ = ("data", "origin", "budget")

    def __init__(self, data: bytes, origin: int) -> None:
        self.data = data
        self.origin = origin
        # Flink never shares var-part data between slots, so every row field, array element and
        # structure read occupies at least one byte of its own: more reads than bytes means
        # references overlap, which a hostile value could use to make decoding exponential.
        self.budget = len(data)

    def spend(self, units: int, path: str, offset: int) -> None:
        self.budget -= units
        if self.budget < 0:
            raise self.fail(path, "references overlap: the value decodes to more items than it has bytes",
                            offset)

    def fail(self, path: str, message: str, offset: int) -> MalformedDataError:
        where = f"{path}: " if path else ""
        return MalformedDataError(f"{where}{message} (at byte offset {self.origin + offset})")


def _bad_value(path: str, t: types.LogicalType, value: Any, why: str = "") -> SerializationError:
    where = path or "value"
    extra = f": {why}" if why else ""
    return SerializationError(f"{where}: cannot write {type(value).__name__} {value!r:.80} as {t}{extra}")


# --------------------------------------------------------------------------------------------
# codecs
# --------------------------------------------------------------------------------------------


class Codec:
    """One logical type: ``width`` is the element width inside arrays (1, 2, 4 or 8; row slots
    are always 8). ``write`` stores a non-null value at ``slot`` of ``buf`` (the enclosing row or
    array, whose var part grows at the end of ``buf``); ``read`` reads a non-null value back.
    ``lo``..``hi`` is the absolute byte range a var-part reference may point into, ``base``
    the absolute start of the enclosing structure (offsets are relative to it)."""

    width = 8
    type: types.LogicalType

    def __init__(self, t: types.LogicalType) -> None:
        self.type = t

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        raise NotImplementedError

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        raise NotImplementedError


class _IntCodec(Codec):
    def __init__(self, t: types.LogicalType, fmt: struct.Struct, bits: int) -> None:
        super().__init__(t)
        self.fmt = fmt
        self.width = fmt.size
        self.lo = -(1 << (bits - 1))
        self.hi = (1 << (bits - 1)) - 1

    def to_int(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or isinstance(value, float):
            raise _bad_value(path, self.type, value)
        try:
            v = operator.index(value)
        except TypeError:
            raise _bad_value(path, self.type, value) from None
        if not self.lo <= v <= self.hi:
            raise _bad_value(path, self.type, value, f"out of range {self.lo}..{self.hi}")
        return v

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        self.fmt.pack_into(buf, slot, self.to_int(value, path))

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        return self.fmt.unpack_from(ctx.data, slot)[0]


class _BooleanCodec(Codec):
    width = 1

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        if not isinstance(value, bool) and not (type(value).__name__ == "bool_" and hasattr(value, "item")):
            raise _bad_value(path, self.type, value)
        buf[slot] = 1 if value else 0

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        return ctx.data[slot] != 0


def _to_float(codec: Codec, value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise _bad_value(path, codec.type, value)
    if isinstance(value, (str, bytes)):
        raise _bad_value(path, codec.type, value)
    return float(value)


class _FloatingCodec(Codec):
    """FLOAT and DOUBLE: the little-endian IEEE value (``VALUE``); inside an array a NaN is written as
    Java's canonical NaN bits (``CANONICAL_NAN``, as ``BinaryArrayWriter`` does), in a row slot as
    the value's own bits. A finite value beyond the type's range is refused, not made infinite."""

    VALUE: ClassVar[struct.Struct]
    BITS: ClassVar[struct.Struct]
    CANONICAL_NAN: ClassVar[int]

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        v = _to_float(self, value, path)
        if in_array and math.isnan(v):
            self.BITS.pack_into(buf, slot, self.CANONICAL_NAN)
            return
        try:
            self.VALUE.pack_into(buf, slot, v)
        except OverflowError:
            raise _bad_value(path, self.type, value, "out of FLOAT range") from None

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        return self.VALUE.unpack_from(ctx.data, slot)[0]


class _FloatCodec(_FloatingCodec):
    width, VALUE, BITS, CANONICAL_NAN = 4, _F32, _U32, 0x7FC00000


class _DoubleCodec(_FloatingCodec):  # a Python float always fits
    width, VALUE, BITS, CANONICAL_NAN = 8, _F64, _U64, 0x7FF8000000000000


class _Int32TemporalCodec(Codec):
    """DATE and TIME: an int32 (days since the epoch, milliseconds of the day), written from a
    Python ``date`` / ``time`` or from that int itself, read back as the Python value."""

    width = 4

    def to_int(self, value: Any, path: str) -> int | None:
        """The int32 of a Python temporal value, None when ``value`` is not one."""
        raise NotImplementedError

    def from_int(self, ctx: _Ctx, v: int, path: str, slot: int) -> Any:
        raise NotImplementedError

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        v = self.to_int(value, path)
        if v is None:
            raise _bad_value(path, self.type, value, self.EXPECTED)
        _I32.pack_into(buf, slot, v)

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        return self.from_int(ctx, _I32.unpack_from(ctx.data, slot)[0], path, slot)

    EXPECTED: ClassVar[str]


class _DateCodec(_Int32TemporalCodec):
    EXPECTED = "expected datetime.date or days since epoch"

    def to_int(self, value: Any, path: str) -> int | None:
        if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
            return value.toordinal() - _EPOCH_ORDINAL
        if isinstance(value, int) and not isinstance(value, bool) and -(1 << 31) <= value < (1 << 31):
            return value
        return None

    def from_int(self, ctx: _Ctx, v: int, path: str, slot: int) -> Any:
        try:
            return _dt.date.fromordinal(v + _EPOCH_ORDINAL)
        except (ValueError, OverflowError):
            raise ctx.fail(path, f"DATE {v} days since epoch is outside years 1..9999", slot) from None


class _TimeCodec(_Int32TemporalCodec):
    EXPECTED = "expected datetime.time or milliseconds of the day"

    def to_int(self, value: Any, path: str) -> int | None:
        if isinstance(value, _dt.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MS_PER_DAY:
            return value
        return None

    def from_int(self, ctx: _Ctx, v: int, path: str, slot: int) -> Any:
        if not 0 <= v < _MS_PER_DAY:
            raise ctx.fail(path, f"TIME value {v} ms is outside 0..86399999", slot)
        sec, milli = divmod(v, 1000)
        return _dt.time(sec // 3600, sec // 60 % 60, sec % 60, milli * 1000)


def _check_ref(ctx: _Ctx, path: str, slot: int, base: int, lo: int, hi: int, offset: int, length: int,
               what: str) -> int:
    """Validate a var-part reference and return its absolute start."""
    start = base + offset
    if start < lo or start + length > hi:
        raise ctx.fail(
            path,
            f"{what} at relative offset {offset} with length {length} lies outside the "
            f"variable-length part [{lo - base}, {hi - base})",
            slot,
        )
    return start


def _ref(ctx: _Ctx, slot: int) -> tuple[int, int]:
    v = _U64.unpack_from(ctx.data, slot)[0]
    return v >> 32, v & 0xFFFFFFFF


def _append_var(buf: bytearray, slot: int, data: bytes | bytearray, reserve: int = 0) -> None:
    """Append ``data`` to the var part (zero padded to 8, or to ``reserve`` bytes) and point
    ``slot`` at it."""
    cursor = len(buf)
    _U64.pack_into(buf, slot, (cursor << 32) | len(data))
    buf += data
    buf += bytes(round8(max(len(data), reserve)) - len(data))


class _BytesLikeCodec(Codec):
    """CHAR/VARCHAR (UTF-8) and BINARY/VARBINARY: inline when ≤ 7 bytes."""

    def __init__(self, t: types.LogicalType, is_string: bool) -> None:
        super().__init__(t)
        self.is_string = is_string

    def encode(self, value: Any, path: str) -> bytes:
        if self.is_string:
            if not isinstance(value, str):
                raise _bad_value(path, self.type, value)
            # lone surrogates become '?', as Java's String.getBytes(UTF_8) does
            return value.encode("utf-8", "replace")
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise _bad_value(path, self.type, value)

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        data = self.encode(value, path)
        n = len(data)
        if n <= 7:
            buf[slot:slot + n] = data
            buf[slot + 7] = 0x80 | n
        else:
            if n > 0x7FFFFFFF:
                raise _bad_value(path, self.type, value, "longer than 2^31-1 bytes")
            _append_var(buf, slot, data)

    def read_raw(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str) -> bytes:
        data = ctx.data
        mark = data[slot + 7]
        if mark & 0x80:
            n = mark & 0x7F
            if n > 7:
                raise ctx.fail(path, f"inline data length {n} > 7 in slot marker 0x{mark:02X}", slot)
            return data[slot:slot + n]
        offset, n = _ref(ctx, slot)
        start = _check_ref(ctx, path, slot, base, lo, hi, offset, n, "string/binary data")
        return data[start:start + n]

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        raw = self.read_raw(ctx, slot, base, lo, hi, path)
        if not self.is_string:
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ctx.fail(path, f"invalid UTF-8 in string ({e.reason} at string byte {e.start})", slot) from None


class _DataViewPlaceholderCodec(Codec):
    """``RAW(MapView / ListView, NullSerializer)``: a SQL accumulator's placeholder for a data view
    kept in state of its own. Flink writes RAW values to the var part whatever their length
    (``BinaryWriter.writeRawValue``: never inline); the bytes are NullSerializer's, read and written
    back as they are (``bytes``)."""

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise _bad_value(path, self.type, value, "a data-view placeholder holds its bytes")
        _append_var(buf, slot, bytes(value))

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        _no_inline(ctx, path, slot, "RAW")
        offset, n = _ref(ctx, slot)
        start = _check_ref(ctx, path, slot, base, lo, hi, offset, n, "RAW value")
        return ctx.data[start:start + n]


def _no_inline(ctx: _Ctx, path: str, slot: int, what: str) -> None:
    if ctx.data[slot + 7] & 0x80:
        raise ctx.fail(path, f"{what} slot has the inline marker bit set", slot)


class _DecimalCodec(Codec):
    def __init__(self, t: types.DecimalType) -> None:
        super().__init__(t)
        self.precision = t.precision
        self.scale = t.scale
        self.compact = t.is_compact
        self.quantum = decimal.Decimal(1).scaleb(-t.scale)
        self.context = decimal.Context(prec=t.precision + 2, rounding=decimal.ROUND_HALF_UP,
                                       traps=[decimal.InvalidOperation, decimal.Overflow])

    def unscaled(self, value: Any, path: str) -> int:
        """Round HALF_UP to the type's scale, as Flink's ``DecimalData.fromBigDecimal`` does; too
        many digits for the precision is an error (Flink would return null)."""
        if isinstance(value, bool) or not isinstance(value, (decimal.Decimal, int)):
            raise _bad_value(path, self.type, value, "expected decimal.Decimal or int")
        d = decimal.Decimal(value)
        if not d.is_finite():
            raise _bad_value(path, self.type, value, "not a finite number")
        try:
            q = d.quantize(self.quantum, context=self.context)
        except decimal.DecimalException:
            raise _bad_value(path, self.type, value, f"more than {self.precision} digits") from None
        sign, digits, _ = q.as_tuple()
        unscaled = int("".join(map(str, digits))) if digits else 0
        if len(str(unscaled)) > self.precision:
            raise _bad_value(path, self.type, value, f"more than {self.precision} digits")
        return -unscaled if sign else unscaled

    def make(self, unscaled: int) -> decimal.Decimal:
        return decimal.Decimal((1 if unscaled < 0 else 0, tuple(int(c) for c in str(abs(unscaled))), -self.scale))

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        u = self.unscaled(value, path)
        if self.compact:
            _I64.pack_into(buf, slot, u)
            return
        n = ((u if u >= 0 else ~u).bit_length() + 8) // 8
        _append_var(buf, slot, u.to_bytes(n, "big", signed=True), reserve=16)

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        if self.compact:
            return self.make(_I64.unpack_from(ctx.data, slot)[0])
        _no_inline(ctx, path, slot, "DECIMAL")
        offset, n = _ref(ctx, slot)
        if not 1 <= n <= 16:
            raise ctx.fail(path, f"DECIMAL({self.precision}, {self.scale}) byte length {n} is not 1..16", slot)
        start = _check_ref(ctx, path, slot, base, lo, hi, offset, n, "decimal bytes")
        return self.make(int.from_bytes(ctx.data[start:start + n], "big", signed=True))


class _TimestampCodec(Codec):
    def __init__(self, t: types.TimestampType | types.LocalZonedTimestampType) -> None:
        super().__init__(t)
        self.precision = t.precision
        self.compact = t.is_compact
        self.ltz = isinstance(t, types.LocalZonedTimestampType)

    def to_ts(self, value: Any, path: str) -> Timestamp:
        if isinstance(value, Timestamp):
            return value
        if isinstance(value, _dt.datetime):
            if self.ltz and value.tzinfo is None:
                raise _bad_value(path, self.type, value, "TIMESTAMP_LTZ needs an aware datetime (an instant)")
            if not self.ltz and value.tzinfo is not None:
                raise _bad_value(path, self.type, value, "TIMESTAMP is a local date-time; pass a naive datetime")
            return Timestamp.from_datetime(value)
        raise _bad_value(path, self.type, value, "expected datetime.datetime or statemorph.types.Timestamp")

    def make(self, millis: int, nanos: int) -> Any:
        """datetime when it holds the value exactly, else a :class:`Timestamp`."""
        if self.precision > 6 or nanos % 1000:
            return Timestamp(millis, nanos)
        try:
            return Timestamp(millis, nanos).to_datetime(_UTC if self.ltz else None)
        except OverflowError:
            return Timestamp(millis, nanos)

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        ts = self.to_ts(value, path)
        if self.compact:
            _I64.pack_into(buf, slot, ts.millis)
            return
        cursor = len(buf)
        _U64.pack_into(buf, slot, (cursor << 32) | ts.nano_of_millisecond)
        buf += _I64.pack(ts.millis)

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        if self.compact:
            return self.make(_I64.unpack_from(ctx.data, slot)[0], 0)
        _no_inline(ctx, path, slot, "TIMESTAMP")
        offset, nanos = _ref(ctx, slot)
        if nanos > 999_999:
            raise ctx.fail(path, f"TIMESTAMP nano-of-millisecond {nanos} > 999999", slot)
        start = _check_ref(ctx, path, slot, base, lo, hi, offset, 8, "timestamp millis")
        return self.make(_I64.unpack_from(ctx.data, start)[0], nanos)


class _VarPartCodec(Codec):
    """ROW, ARRAY and MAP: a value in the var part, its slot a reference (offset and length) that
    must point inside the enclosing structure (never inline); :meth:`decode` reads what it points to."""

    ROOT: ClassVar[str]
    """The type's name in the message about an inline value."""
    REFERS_TO: ClassVar[str]
    """What the reference points to, in the message about a bad one."""

    def decode(self, ctx: _Ctx, start: int, size: int, path: str) -> Any:
        raise NotImplementedError

    def read(self, ctx: _Ctx, slot: int, base: int, lo: int, hi: int, path: str, in_array: bool) -> Any:
        _no_inline(ctx, path, slot, self.ROOT)
        offset, n = _ref(ctx, slot)
        start = _check_ref(ctx, path, slot, base, lo, hi, offset, n, self.REFERS_TO)
        return self.decode(ctx, start, n, path)


class RowCodec(_VarPartCodec):
    """A (nested) BinaryRowData."""

    ROOT, REFERS_TO = "ROW", "nested row"

    def __init__(self, t: types.RowType) -> None:
        super().__init__(t)
        self.names = t.field_names
        self.fields = [codec_for(f.type) for f in t.fields]
        self.nullable = [f.type.stores_null for f in t.fields]
        self.arity = len(self.fields)
        self.null_bits = row_null_bits_size(self.arity)
        self.fixed = self.null_bits + 8 * self.arity

    def child(self, path: str, i: int) -> str:
        return f"{path}.{self.names[i]}" if path else self.names[i]

    # -- writing ----------------------------------------------------------------------------
    def encode(self, value: Any, path: str = "") -> bytearray:
        """The BinaryRowData bytes of ``value`` (a tuple / Row, arity = the type's)."""
        if not isinstance(value, (tuple, list)):
            raise _bad_value(path, self.type, value, "a row must be a tuple or statemorph.row.Row")
        if len(value) != self.arity:
            raise _bad_value(path, self.type, value, f"has {len(value)} fields, the row type has {self.arity}")
        buf = bytearray(self.fixed)
        buf[0] = row_kind_of(value).value
        nb = self.null_bits
        for i, v in enumerate(value):
            if v is None:
                if not self.nullable[i]:
                    raise SerializationError(f"{self.child(path, i)}: null in a NOT NULL field")
                bit = i + 8
                buf[bit >> 3] |= 1 << (bit & 7)
            else:
                self.fields[i].write(buf, nb + 8 * i, v, self.child(path, i), False)
        return buf

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        _append_var(buf, slot, self.encode(value, path))

    # -- reading ----------------------------------------------------------------------------
    def decode(self, ctx: _Ctx, start: int, size: int, path: str = "") -> Row:
        data = ctx.data
        if size < self.fixed:
            raise ctx.fail(path, f"row of {size} bytes is shorter than its fixed part ({self.fixed} bytes "
                                 f"for {self.arity} fields)", start)
        ctx.spend(self.arity + 1, path, start)
        kind = data[start]
        if kind > 3:
            raise ctx.fail(path, f"invalid RowKind byte {kind}", start)
        nb = self.null_bits
        bits = int.from_bytes(data[start:start + nb], "little") >> 8
        if bits >> self.arity:
            raise ctx.fail(path, "null bits set beyond the row's arity", start + 1)
        lo, hi = start + self.fixed, start + size
        out: list[Any] = []
        for i, codec in enumerate(self.fields):
            if bits >> i & 1:
                out.append(None)
            else:
                out.append(codec.read(ctx, start + nb + 8 * i, start, lo, hi, self.child(path, i), False))
        return Row(out, RowKind(kind))



class ArrayCodec(_VarPartCodec):
    """A BinaryArrayData of one element type."""

    ROOT, REFERS_TO = "ARRAY", "array"

    def __init__(self, t: types.LogicalType, element: types.LogicalType) -> None:
        super().__init__(t)
        self.element = codec_for(element)
        self.element_nullable = element.stores_null
        self.es = self.element.width

    def encode(self, values: Any, path: str) -> bytearray:
        if isinstance(values, (str, bytes, bytearray, Mapping)) or not hasattr(values, "__len__"):
            raise _bad_value(path, self.type, values, "expected a list")
        n = len(values)
        header = array_header_size(n)
        es = self.es
        buf = bytearray(round8(header + n * es))
        _I32.pack_into(buf, 0, n)
        element = self.element
        for i, v in enumerate(values):
            if v is None:
                if not self.element_nullable:
                    raise SerializationError(f"{path}[{i}]: null in a NOT NULL array element")
                buf[4 + (i >> 3)] |= 1 << (i & 7)
            else:
                element.write(buf, header + i * es, v, f"{path}[{i}]", True)
        return buf

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        _append_var(buf, slot, self.encode(value, path))

    def decode(self, ctx: _Ctx, start: int, size: int, path: str) -> list[Any]:
        data = ctx.data
        if size < 4:
            raise ctx.fail(path, f"array of {size} bytes has no room for its element count", start)
        n = _I32.unpack_from(data, start)[0]
        if n < 0:
            raise ctx.fail(path, f"negative array element count {n}", start)
        header = array_header_size(n)
        es = self.es
        if header + n * es > size:
            raise ctx.fail(path, f"array declares {n} elements ({header + n * es} bytes of header and slots) "
                                 f"but has only {size} bytes", start)
        ctx.spend(n + 1, path, start)
        lo, hi = start + min(round8(header + n * es), size), start + size
        element = self.element
        out: list[Any] = []
        for i in range(n):
            if data[start + 4 + (i >> 3)] >> (i & 7) & 1:
                out.append(None)
            else:
                out.append(element.read(ctx, start + header + i * es, start, lo, hi, f"{path}[{i}]", True))
        return out



def _freeze(value: Any) -> Any:
    """Map keys must be hashable: arrays read as keys become tuples, maps tuples of pairs, and
    rows holding either are rebuilt with frozen fields."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple((_freeze(k), _freeze(v)) for k, v in value.items())
    if isinstance(value, Row):
        return Row([_freeze(v) for v in value], value.kind)
    if isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    return value


class MapCodec(_VarPartCodec):
    """A BinaryMapData; a MULTISET is a map element → INT NOT NULL count.

    **Duplicate keys** (the one definition, shared by every path): two keys of one map are
    duplicates when their values are equal, as Python compares the values read: strings and
    bytes by content (stored inline or not), numbers by value (so ``0.0`` and ``-0.0`` are one
    key, and a NaN equals no key, itself included), DECIMAL / TIMESTAMP by value, ROW and ARRAY
    keys element by element (a row's kind does not count), MAP keys entry by entry in stored
    order; a null key is a value like any other (one per map). A map with duplicates is refused
    (``MalformedDataError``). Why value equality, not byte equality: a map reads into a ``dict``,
    which holds one entry per equal key, so a map with two equal keys cannot be read without
    losing one; Flink builds the maps it writes from Java ``Map``s, which hold no such pair. The bulk
    kernels do not implement a second rule: a map whose keys may repeat (equal hashes of their
    canonical bytes) or hold a null goes to this codec (``HAND_BACK``), for decode, migrate and
    verbatim copies alike (``kernels.rowdata_py.keys_suspect``)."""

    ROOT, REFERS_TO = "MAP", "map"

    def __init__(self, t: types.LogicalType, key: types.LogicalType, value: types.LogicalType) -> None:
        super().__init__(t)
        self.keys = ArrayCodec(types.ArrayType(key), key)
        self.values = ArrayCodec(types.ArrayType(value), value)

    def encode(self, value: Any, path: str) -> bytearray:
        if isinstance(value, Mapping):
            items = list(value.items())
        elif isinstance(value, (list, tuple)) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
            items = list(value)
        else:
            raise _bad_value(path, self.type, value, "expected a dict")
        k = self.keys.encode([p[0] for p in items], f"{path}.key")
        v = self.values.encode([p[1] for p in items], f"{path}.value")
        return bytearray(_I32.pack(len(k))) + k + v

    def write(self, buf: bytearray, slot: int, value: Any, path: str, in_array: bool) -> None:
        _append_var(buf, slot, self.encode(value, path))

    def decode(self, ctx: _Ctx, start: int, size: int, path: str) -> dict[Any, Any]:
        if size < 4:
            raise ctx.fail(path, f"map of {size} bytes has no room for its key array size", start)
        nk = _I32.unpack_from(ctx.data, start)[0]
        if not 0 <= nk <= size - 4:
            raise ctx.fail(path, f"map key array size {nk} outside 0..{size - 4}", start)
        keys = self.keys.decode(ctx, start + 4, nk, f"{path}.key")
        values = self.values.decode(ctx, start + 4 + nk, size - 4 - nk, f"{path}.value")
        if len(keys) != len(values):
            raise ctx.fail(path, f"map has {len(keys)} keys but {len(values)} values", start)
        out: dict[Any, Any] = {}
        for k, v in zip(keys, values, strict=True):
            k = _freeze(k)
            if k in out:
                raise ctx.fail(path, f"duplicate map key {k!r:.60}", start)
            out[k] = v
        return out



class _CodecOf(types.LogicalTypeVisitor[Codec]):
    """The codec tree of a logical type."""

    def visit_other(self, t: types.LogicalType) -> Codec:
        raise SerializationError(f"logical type {t} is not supported in RowData")

    def visit_tinyint(self, t: types.TinyIntType) -> Codec:
        return _IntCodec(t, _I8, 8)

    def visit_smallint(self, t: types.SmallIntType) -> Codec:
        return _IntCodec(t, _I16, 16)

    def visit_int(self, t: types.IntType) -> Codec:
        return _IntCodec(t, _I32, 32)

    def visit_bigint(self, t: types.BigIntType) -> Codec:
        return _IntCodec(t, _I64, 64)

    def visit_boolean(self, t: types.BooleanType) -> Codec:
        return _BooleanCodec(t)

    def visit_float(self, t: types.FloatType) -> Codec:
        return _FloatCodec(t)

    def visit_double(self, t: types.DoubleType) -> Codec:
        return _DoubleCodec(t)

    def visit_date(self, t: types.DateType) -> Codec:
        return _DateCodec(t)

    def visit_time(self, t: types.TimeType) -> Codec:
        return _TimeCodec(t)

    def visit_character_string(self, t: types.CharType | types.VarCharType) -> Codec:
        return _BytesLikeCodec(t, True)

    def visit_binary_string(self, t: types.BinaryType | types.VarBinaryType) -> Codec:
        return _BytesLikeCodec(t, False)

    def visit_decimal(self, t: types.DecimalType) -> Codec:
        return _DecimalCodec(t)

    def visit_any_timestamp(self, t: types.TimestampType | types.LocalZonedTimestampType) -> Codec:
        return _TimestampCodec(t)

    def visit_row(self, t: types.RowType) -> Codec:
        return RowCodec(t)

    def visit_array(self, t: types.ArrayType) -> Codec:
        return ArrayCodec(t, t.element_type)

    def visit_map(self, t: types.MapType | types.MultisetType) -> Codec:
        return MapCodec(t, *t.map_parts())

    visit_multiset = visit_map

    def visit_raw(self, t: types.RawType) -> Codec:
        return _DataViewPlaceholderCodec(t)


_CODEC_OF = _CodecOf()


def codec_for(t: types.LogicalType) -> Codec:
    """Compile a logical type into its codec tree."""
    return t.accept(_CODEC_OF)


def encode_row(codec: RowCodec, value: Any) -> bytes:
    return bytes(codec.encode(value))


def decode_row(codec: RowCodec, data: bytes, origin: int = 0) -> Row:
    """Read a whole BinaryRowData (``data`` is exactly its bytes; ``origin`` its stream offset)."""
    return codec.decode(_Ctx(data, origin), 0, len(data))


__all__ = ["ArrayCodec", "Codec", "MapCodec", "RowCodec", "codec_for", "decode_row", "encode_row",
           "row_fixed_size", "row_null_bits_size", "round8", "array_header_size"]
