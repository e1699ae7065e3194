"""Byte views with ``java.io.DataOutput`` semantics, the way Flink writes state.

Every multi-byte value is big-endian. Reads go through one bounds check (`_take`), so a
truncated or hostile buffer raises :class:`TruncatedDataError` naming the offset instead of
reading garbage, and lengths are validated against the remaining bytes *before* anything is
allocated.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Callable
from typing import cast

from .errors import MalformedDataError, SerializationError, TruncatedDataError

_BOOL = struct.Struct(">?")
_I8 = struct.Struct(">b")
_U8 = struct.Struct(">B")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

# the unpackers with the one type each returns (typeshed declares any struct's result as
# ``tuple[Any, ...]``); the same bound methods, so reads cost what they cost before
_IntAt = Callable[[bytes, int], tuple[int]]
_FloatAt = Callable[[bytes, int], tuple[float]]
_i8_at = cast(_IntAt, _I8.unpack_from)
_i16_at = cast(_IntAt, _I16.unpack_from)
_u16_at = cast(_IntAt, _U16.unpack_from)
_i32_at = cast(_IntAt, _I32.unpack_from)
_i64_at = cast(_IntAt, _I64.unpack_from)
_f32_at = cast(_FloatAt, _F32.unpack_from)
_f64_at = cast(_FloatAt, _F64.unpack_from)
_u32_of = cast(Callable[[bytes], tuple[int]], _U32.unpack)
_u64_of = cast(Callable[[bytes], tuple[int]], _U64.unpack)

CANONICAL_NAN_F32 = 0x7FC00000
CANONICAL_NAN_F64 = 0x7FF8000000000000


def float_to_int_bits(value: float) -> int:
    """Java ``Float.floatToIntBits``: the IEEE bits with every NaN canonicalised."""
    if value != value:
        return CANONICAL_NAN_F32
    return _u32_of(_F32.pack(value))[0]


def double_to_long_bits(value: float) -> int:
    """Java ``Double.doubleToLongBits``: the IEEE bits with every NaN canonicalised."""
    if value != value:
        return CANONICAL_NAN_F64
    return _u64_of(_F64.pack(value))[0]


def utf16_units(text: str) -> list[int]:
    """The UTF-16 code units Java would hold for ``text`` (lone surrogates pass through)."""
    if text.isascii():
        return list(text.encode("ascii"))
    raw = text.encode("utf-16-be", "surrogatepass")
    return [(raw[i] << 8) | raw[i + 1] for i in range(0, len(raw), 2)]


def units_to_str(units: list[int]) -> str:
    """Inverse of :func:`utf16_units`; valid surrogate pairs combine, lone ones are kept."""
    raw = bytearray(2 * len(units))
    for i, u in enumerate(units):
        raw[2 * i] = u >> 8
        raw[2 * i + 1] = u & 0xFF
    return raw.decode("utf-16-be", "surrogatepass")


def encode_modified_utf8(text: str) -> bytes:
    """Java's modified UTF-8 (``writeUTF`` body): NUL as C0 80, supplementary chars as two
    3-byte surrogate encodings."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    out = bytearray()
    for c in utf16_units(text):
        if 0 < c < 0x80:
            out.append(c)
        elif c < 0x800:
            out += bytes((0xC0 | (c >> 6), 0x80 | (c & 0x3F)))
        else:
            out += bytes((0xE0 | (c >> 12), 0x80 | ((c >> 6) & 0x3F), 0x80 | (c & 0x3F)))
    return bytes(out)


def decode_modified_utf8(data: bytes, base_offset: int = 0) -> str:
    """Decode Java modified UTF-8 exactly as ``DataInputStream.readUTF`` accepts it."""
    if data.isascii():
        return data.decode("ascii")
    units: list[int] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        top = c >> 4
        if top < 8:
            units.append(c)
            i += 1
        elif top in (12, 13):
            if i + 1 >= n:
                raise MalformedDataError(
                    f"malformed modified UTF-8: partial character at end, offset {base_offset + i}"
                )
            c2 = data[i + 1]
            if c2 & 0xC0 != 0x80:
                raise MalformedDataError(f"malformed modified UTF-8 around offset {base_offset + i + 1}")
            units.append(((c & 0x1F) << 6) | (c2 & 0x3F))
            i += 2
        elif top == 14:
            if i + 2 >= n:
                raise MalformedDataError(
                    f"malformed modified UTF-8: partial character at end, offset {base_offset + i}"
                )
            c2, c3 = data[i + 1], data[i + 2]
            if c2 & 0xC0 != 0x80 or c3 & 0xC0 != 0x80:
                raise MalformedDataError(f"malformed modified UTF-8 around offset {base_offset + i + 1}")
            units.append(((c & 0x0F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F))
            i += 3
        else:
            raise MalformedDataError(
                f"malformed modified UTF-8: invalid lead byte 0x{c:02X} at offset {base_offset + i}"
            )
    return units_to_str(units)


_MODIFIED_UTF8 = re.compile(rb"(?:[\x00-\x7f]|[\xc0-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2})*")


def is_modified_utf8(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Would :func:`decode_modified_utf8` accept ``data[start:end]``? The same check, in C: lets a
    parser test many candidate strings without decoding each one in Python."""
    return _MODIFIED_UTF8.fullmatch(data, start, len(data) if end is None else end) is not None


class DataOutputSerializer:
    """A growable big-endian output buffer (Flink's ``DataOutputSerializer``)."""

    __slots__ = ("_buf",)

    def __init__(self, initial: bytes | bytearray | None = None) -> None:
        self._buf = bytearray(initial or b"")

    def __len__(self) -> int:
        return len(self._buf)

    @property
    def position(self) -> int:
        return len(self._buf)

    def clear(self) -> None:
        self._buf.clear()

    def get_copy_of_buffer(self) -> bytes:
        return bytes(self._buf)

    def buffer(self) -> bytearray:
        """The live buffer (no copy); callers must not keep it across writes."""
        return self._buf

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def write_boolean(self, value: bool) -> None:
        self._buf.append(1 if value else 0)

    def write_byte(self, value: int) -> None:
        self._buf.append(value & 0xFF)

    def write_short(self, value: int) -> None:
        self._buf += _U16.pack(value & 0xFFFF)

    def write_char(self, value: int | str) -> None:
        if isinstance(value, str):
            units = utf16_units(value)
            if len(units) != 1:
                raise SerializationError(f"a char must be one UTF-16 code unit, got {value!r}")
            value = units[0]
        self._buf += _U16.pack(value & 0xFFFF)

    def write_int(self, value: int) -> None:
        self._buf += _U32.pack(value & 0xFFFFFFFF)

    def write_long(self, value: int) -> None:
        self._buf += _U64.pack(value & 0xFFFFFFFFFFFFFFFF)

    def write_float(self, value: float) -> None:
        self._buf += _U32.pack(float_to_int_bits(value))

    def write_double(self, value: float) -> None:
        self._buf += _U64.pack(double_to_long_bits(value))

    def write_utf(self, text: str) -> None:
        body = encode_modified_utf8(text)
        if len(body) > 0xFFFF:
            raise SerializationError(f"writeUTF string too long: {len(body)} encoded bytes > 65535")
        self._buf += _U16.pack(len(body))
        self._buf += body

    def write_long_utf(self, text: str) -> None:
        body = encode_modified_utf8(text)
        self._buf += _U32.pack(len(body))
        self._buf += body


class DataInputDeserializer:
    """A bounds-checked big-endian reader over a bytes-like object (Flink's
    ``DataInputDeserializer``). Every read checks the remaining length first."""

    __slots__ = ("_data", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0, length: int | None = None) -> None:
        view = data if isinstance(data, bytes) else bytes(data)
        end = len(view) if length is None else offset + length
        if offset < 0 or end > len(view) or end < offset:
            raise ValueError(f"invalid window offset={offset} length={length} over {len(view)} bytes")
        self._data = view
        self._pos = offset
        self._end = end

    @property
    def position(self) -> int:
        return self._pos

    def available(self) -> int:
        return self._end - self._pos

    def _take(self, n: int, what: str) -> int:
        pos = self._pos
        if n < 0 or pos + n > self._end:
            raise TruncatedDataError(
                f"truncated data: reading {what} needs {n} bytes at offset {pos}, "
                f"only {self._end - pos} available",
                offset=pos,
                needed=n,
                available=self._end - pos,
            )
        self._pos = pos + n
        return pos

    def check_length(self, length: int, what: str, unit: int = 1) -> int:
        """Validate a length read from the data before allocating anything for it."""
        if length < 0:
            raise MalformedDataError(f"negative length {length} for {what} at offset {self._pos}")
        if length * unit > self._end - self._pos:
            raise TruncatedDataError(
                f"truncated data: {what} declares {length} entries ({length * unit} bytes at least) "
                f"at offset {self._pos}, only {self._end - self._pos} bytes available",
                offset=self._pos,
                needed=length * unit,
                available=self._end - self._pos,
            )
        return length

    def window(self) -> tuple[bytes, int, int]:
        """``(data, position, end)`` for decoders that scan the bytes themselves (e.g. the
        StringValue varints); they must hand the new position back through :meth:`advance_to`."""
        return self._data, self._pos, self._end

    def advance_to(self, position: int) -> None:
        if not self._pos <= position <= self._end:
            raise ValueError(f"cannot move from offset {self._pos} to {position} (window ends at {self._end})")
        self._pos = position

    def read_fully(self, n: int, what: str = "bytes") -> bytes:
        p = self._take(n, what)
        return self._data[p : p + n]

    def skip_bytes(self, n: int) -> None:
        self._take(n, "skipped bytes")

    def read_boolean(self) -> bool:
        return self._data[self._take(1, "boolean")] != 0

    def read_byte(self) -> int:
        return _i8_at(self._data, self._take(1, "byte"))[0]

    def read_unsigned_byte(self) -> int:
        return self._data[self._take(1, "byte")]

    def read_short(self) -> int:
        return _i16_at(self._data, self._take(2, "short"))[0]

    def read_unsigned_short(self) -> int:
        return _u16_at(self._data, self._take(2, "unsigned short"))[0]

    def read_char(self) -> int:
        return _u16_at(self._data, self._take(2, "char"))[0]

    def read_int(self) -> int:
        return _i32_at(self._data, self._take(4, "int"))[0]

    def read_long(self) -> int:
        return _i64_at(self._data, self._take(8, "long"))[0]

    def read_longs(self, n: int, what: str = "longs") -> array[int]:
        """``n`` big-endian longs as one ``array('q')``: 8 bytes each in memory, as on disk (a
        list would hold a 32-byte int object and a pointer per long)."""
        p = self._take(8 * n, what)
        out = array("q", self._data[p : p + 8 * n])
        if sys.byteorder == "little":
            out.byteswap()
        return out

    def read_float(self) -> float:
        return _f32_at(self._data, self._take(4, "float"))[0]

    def read_double(self) -> float:
        return _f64_at(self._data, self._take(8, "double"))[0]

    def read_utf(self) -> str:
        n = self.read_unsigned_short()
        p = self._take(n, "modified UTF-8 string")
        return decode_modified_utf8(self._data[p : p + n], p)

    def read_long_utf(self) -> str:
        n = self.check_length(self.read_int(), "long UTF string")
        p = self._take(n, "modified UTF-8 string")
        return decode_modified_utf8(self._data[p : p + n], p)

    def expect_end(self, what: str) -> None:
        """Raise when bytes are left over: trailing garbage means the data is not what we think."""
        if self._pos != self._end:
            raise MalformedDataError(
                f"{self._end - self._pos} trailing bytes after {what} at offset {self._pos}"
            )


__all__ = [
    "DataInputDeserializer",
    "DataOutputSerializer",
    "decode_modified_utf8",
    "encode_modified_utf8",
    "float_to_int_bits",
    "double_to_long_bits",
    "utf16_units",
    "units_to_str",
]
