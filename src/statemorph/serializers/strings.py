"""Flink's ``StringValue`` string encoding and the ``StringSerializer`` built on it.

Layout (flink-formats.md §2.2): ``VARLEN(units + 1)`` then one 7-bit little-endian varint per
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
from typing import Any

from ..errors import MalformedDataError, SerializationError, TruncatedDataError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..snapshot import SimpleTypeSerializerSnapshot, TypeSerializerSnapshot, register_snapshot
from .base import TypeSerializer

_MAX_LEN = 0x7FFFFFFF
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_NON_ASCII = re.compile(r"([^\x00-\x7f]+)")
_ASCII_RUN = re.compile(rb"[\x00-\x7f]+")
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
    if s.isascii():
        return varlen(len(s) + 1) + s.encode("ascii")
    body = bytearray()
    units = 0
    for i, part in enumerate(_NON_ASCII.split(s)):
        if not i & 1:
            body += part.encode("ascii")
            units += len(part)
            continue
        raw = part.encode("utf-16-be", "surrogatepass")
        for j in range(0, len(raw), 2):
            c = (raw[j] << 8) | raw[j + 1]
            if c < 0x80:
                body.append(c)
            elif c < 0x4000:
                body += bytes(((c & 0x7F) | 0x80, c >> 7))
            else:
                body += bytes(((c & 0x7F) | 0x80, ((c >> 7) & 0x7F) | 0x80, c >> 14))
        units += len(raw) // 2
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
    surrogates = False
    while remaining:
        m = _ASCII_RUN.match(data, pos, min(end, pos + remaining))
        if m is not None:
            stop = m.end()
            pieces.append(data[pos:stop].decode("ascii"))
            remaining -= stop - pos
            pos = stop
            continue
        unit_at = pos
        c, pos = _read_varint(data, pos, end, "string character")
        if c > 0xFFFF:
            raise MalformedDataError(
                f"malformed string at offset {start}: character at offset {unit_at} encodes 0x{c:X}, "
                f"beyond one UTF-16 unit"
            )
        if 0xD800 <= c < 0xE000:
            surrogates = True
        pieces.append(chr(c))
        remaining -= 1
    text = "".join(pieces)
    if surrogates:
        # combine valid high/low pairs into one code point, keep lone surrogates (as Java does)
        text = text.encode("utf-16-be", "surrogatepass").decode("utf-16-be", "surrogatepass")
    return text, pos


def read_string(src: DataInputDeserializer) -> str | None:
    """``StringValue.readString(in)``: the inverse of :func:`write_string`.

    Reads the deserializer's buffer in place (its private window) instead of byte by byte: this
    function is the string hot path, and the view exposes no public slicing API."""
    text, pos = read_string_at(src._data, src._pos, src._end)
    src._pos = pos
    return text


def skip_string(src: DataInputDeserializer) -> None:
    """Advance past one string without building it (Flink's ``copyString`` skips the same way)."""
    read_string(src)


class StringSerializer(TypeSerializer[Any]):
    """``java.lang.String`` state: ``str`` or None (StringSerializer accepts null in Flink)."""

    def serialize(self, value: str | None, out: DataOutputSerializer) -> None:
        out.write(encode_string(value))

    def deserialize(self, src: DataInputDeserializer) -> str | None:
        return read_string(src)

    def to_bytes(self, value: str | None) -> bytes:
        return encode_string(value)

    def is_immutable_type(self) -> bool:
        return True

    def copy(self, value: str | None) -> str | None:
        return value

    def snapshot_configuration(self) -> TypeSerializerSnapshot:
        return StringSerializerSnapshot()


@register_snapshot()
class StringSerializerSnapshot(SimpleTypeSerializerSnapshot):
    IDENTIFIER = "org.apache.flink.api.common.typeutils.base.StringSerializer$StringSerializerSnapshot"
    SERIALIZER = StringSerializer


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
