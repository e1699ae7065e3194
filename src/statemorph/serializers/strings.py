"""Flink's ``StringValue`` string encoding and the ``StringSerializer`` built on it.

Layout (docs/formats.md §2.2): ``VARLEN(units + 1)`` then one 7-bit little-endian varint per
UTF-16 code unit; a length of 0 means null. It is *not* UTF-8: Flink counts and writes UTF-16 code
units, so supplementary characters are two 3-byte groups and lone surrogates pass through.

This codec is on every hot path of the reference tier (String fields, String[] elements, the Avro
snapshot), so both directions take an ASCII fast path and otherwise work run by run: ASCII runs
are copied with one slice, only non-ASCII units go through the varint loop. The decoder checks
the declared length against the remaining bytes *before* decoding (each unit takes at least one
byte), so a hostile length fails at once without allocating.
"""

from __future__ import annotations

import re
import struct
from typing import Any

from ..errors import MalformedDataError, SerializationError, TruncatedDataError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..types import STRING
from ..typeutils import BulkKernel, TypeSerializer, TypeSerializerSnapshot, nested_simple_snapshot

_MAX_LEN = 0x7FFFFFFF
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
# Latin, Greek, Cyrillic, Hebrew, Arabic...: the common non-ASCII units, precomputed (100 KB)
_TWO_BYTES = [bytes(((c & 0x7F) | 0x80, c >> 7)) for c in range(0x800)]
_NON_ASCII = re.compile(r"([^\x00-\x7f]+)")
_NON_ASCII_BYTE = re.compile(rb"[\x80-\xff]")
# a varint Flink writes for an int never has more than 5 groups; more is corrupt data, and the
# cap keeps a run of continuation bytes from building huge intermediate ints
_MAX_VARINT_BYTES = 5


def varlen(n: int) -> bytes:
    """The 7-bit little-endian varint Flink uses for string lengths and code units."""
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_string(s: str | None) -> bytes:
    """``StringValue.writeString`` as bytes (``00`` for None)."""
    if s is None:
        return b"\x00"
    if not isinstance(s, str):
        raise SerializationError(f"StringSerializer cannot write {s!r}: expected str or None, got {type(s).__name__}")
    if s.isascii() and len(s) < _MAX_LEN:
        return varlen(len(s) + 1) + s.encode("ascii")
    body = bytearray()
    units = 0
    for i, part in enumerate(_NON_ASCII.split(s)):
        if not i & 1:
            body += part.encode("ascii")
            units += len(part)
            continue
        raw = part.encode("utf-16-be", "surrogatepass")
        n = len(raw) // 2
        for c in struct.unpack(f">{n}H", raw):  # non-ASCII runs hold no unit below 0x80
            if c < 0x4000:
                body += _TWO_BYTES[c] if c < 0x800 else bytes(((c & 0x7F) | 0x80, c >> 7))
            else:
                body += bytes(((c & 0x7F) | 0x80, ((c >> 7) & 0x7F) | 0x80, c >> 14))
        units += n
    if units + 1 > _MAX_LEN:
        raise SerializationError(f"string of {units} UTF-16 units is too long for Flink's StringValue encoding")
    return varlen(units + 1) + bytes(body)


def write_string(out: DataOutputSerializer, s: str | None) -> None:
    """``StringValue.writeString(s, out)``; None is written as ``00``."""
    out.write(encode_string(s))


def _truncated(what: str, offset: int, needed: int, end: int) -> TruncatedDataError:
    return TruncatedDataError(
        f"truncated data: reading {what} needs {needed} bytes at offset {offset}, only {end - offset} available",
        offset=offset,
        needed=needed,
        available=end - offset,
    )


def _read_varint(data: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """One 7-bit little-endian varint starting at ``pos``; returns (value, next position)."""
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _truncated(what, pos, 1, end)
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if pos - start >= _MAX_VARINT_BYTES:
            raise MalformedDataError(
                f"malformed {what} at offset {start}: varint longer than {_MAX_VARINT_BYTES} bytes"
            )


def read_string_at(data: bytes, pos: int, end: int) -> tuple[str | None, int]:
    """Decode one ``StringValue`` string from ``data[pos:end]``; returns (value, next position).

    Exposed for codecs that work on raw buffers; :func:`read_string` is the stream form."""
    start = pos
    n, pos = _read_varint(data, pos, end, "string length")
    if n == 0:
        return None, pos
    if n > _MAX_LEN:
        raise MalformedDataError(f"string length {n - 1} at offset {start} exceeds the Java maximum")
    count = n - 1
    if count > end - pos:  # every unit takes at least one byte
        raise TruncatedDataError(
            f"truncated data: string at offset {start} declares {count} UTF-16 units, "
            f"only {end - pos} bytes available",
            offset=start,
            needed=count,
            available=end - pos,
        )
    head = data[pos : pos + count]
    if head.isascii():
        return head.decode("ascii"), pos + count
    pieces: list[str] = []
    remaining = count
    while remaining:
        if pos >= end:
            raise _truncated("string character", pos, 1, end)
        if data[pos] < 0x80:  # an ASCII run: one unit per byte, copied with one slice
            stop = min(end, pos + remaining)
            m = _NON_ASCII_BYTE.search(data, pos, stop)
            if m is not None:
                stop = m.start()
            pieces.append(data[pos:stop].decode("ascii"))
            remaining -= stop - pos
            pos = stop
            continue
        pos, remaining = _decode_units(data, pos, end, remaining, start, pieces)
    return "".join(pieces), pos


def _decode_units(data: bytes, pos: int, end: int, remaining: int, start: int, pieces: list[str]) -> tuple[int, int]:
    """Decode a run of multi-byte units (each starts with a byte >= 0x80) into ``pieces``.

    Units are gathered as UTF-16 and decoded in one go, which also joins surrogate pairs (both
    halves are 3-byte units, so a pair never straddles two runs) and keeps lone surrogates, as
    Java does. Flink writes a unit as 2 or 3 bytes; anything else (overlong groups, a unit cut
    off by the end) goes through the general varint reader."""
    units = bytearray()
    while remaining and pos < end and data[pos] >= 0x80:
        unit_at = pos
        b0 = data[pos]
        if pos + 1 < end and data[pos + 1] < 0x80:
            c = (b0 & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        elif pos + 2 < end and data[pos + 2] < 0x80:
            c = (b0 & 0x7F) | ((data[pos + 1] & 0x7F) << 7) | (data[pos + 2] << 14)
            pos += 3
        else:
            c, pos = _read_varint(data, pos, end, "string character")
        if c > 0xFFFF:
            raise MalformedDataError(
                f"malformed string at offset {start}: character at offset {unit_at} encodes 0x{c:X}, "
                f"beyond one UTF-16 unit"
            )
        units.append(c >> 8)
        units.append(c & 0xFF)
        remaining -= 1
    pieces.append(units.decode("utf-16-be", "surrogatepass"))
    return pos, remaining


def read_string(src: DataInputDeserializer) -> str | None:
    """``StringValue.readString(in)``: the inverse of :func:`write_string`.

    Scans the deserializer's window in place instead of reading byte by byte: this function is
    the string hot path of the reference tier."""
    text, pos = read_string_at(*src.window())
    src.advance_to(pos)
    return text


def skip_string(src: DataInputDeserializer) -> None:
    """Advance past one string without building it (Flink's ``copyString`` skips the same way)."""
    read_string(src)


class StringSerializer(TypeSerializer[Any]):
    """``java.lang.String`` state: ``str`` or None (StringSerializer accepts null in Flink)."""

    SQL_TYPE = "STRING"
    KEY_HASH = "string"
    VALUE_TYPE = STRING()
    DATASTREAM_OF = ("VARCHAR", "CHAR")
    BULK = BulkKernel("varlen", "LEAF_STR", kernel="string")
    IMMUTABLE_VALUES = True

    def serialize(self, value: str | None, out: DataOutputSerializer) -> None:
        out.write(encode_string(value))

    def deserialize(self, src: DataInputDeserializer) -> str | None:
        return read_string(src)

    def to_bytes(self, value: str | None) -> bytes:
        return encode_string(value)

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return StringSerializerSnapshot()


StringSerializerSnapshot = nested_simple_snapshot(StringSerializer, "org.apache.flink.api.common.typeutils.base.")


__all__ = [
    "StringSerializer",
    "StringSerializerSnapshot",
    "encode_string",
    "read_string",
    "read_string_at",
    "skip_string",
    "varlen",
    "write_string",
]
