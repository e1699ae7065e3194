"""Snappy framing of compressed key groups, as Flink's ``SnappyStreamCompressionDecorator``
writes it (xerial ``SnappyFramedOutputStream``).

Each key group of a compressed keyed-state file is one independent framed stream: the stream
identifier chunk ``ff 06 00 00 sNaPpY``, then chunks of at most 64 KiB of input, each a type
byte (0x00 compressed, 0x01 stored), a 3-byte little-endian length (payload + 4), the masked
CRC32C of the uncompressed bytes (little-endian), and the payload. xerial stores a block raw
when compression does not reach a ratio of 0.85. Flink reads these streams without checking the
CRCs; other readers do, so the writer always emits correct ones.

The codec itself is ``cramjam`` (the Rust ``snap`` crate): its framed encoder already writes the
stream identifier, 64 KiB blocks and correct masked CRC32Cs; :func:`compress_key_group` only
applies xerial's 0.85 rule on top (the Rust encoder keeps blocks compressed up to 0.875), so the
chunk types match what Flink itself would choose for the same compressed sizes.
"""

from __future__ import annotations

from typing import Any

import cramjam

from ...errors import FlinkSavepointError

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
MIN_COMPRESSION_RATIO = 0.85
COMPRESSED_CHUNK = 0x00
UNCOMPRESSED_CHUNK = 0x01
MAX_CHUNK_DATA = 1 << 16
"""The framing format's limit on the uncompressed bytes of one chunk."""
MAX_EXPANSION = (64, 3)
"""Snappy's largest expansion, as a fraction: a 3-byte copy element writes at most 64 bytes (a
literal writes no more than it takes, a 2-byte copy at most 11, a 5-byte one at most 64)."""


def compress_key_group(data: bytes | bytearray | memoryview) -> bytes:
    """One framed Snappy stream for one key group's bytes (xerial's chunk rules)."""
    return bytes(frame_key_group(data))


def frame_key_group(data: Any) -> memoryview | bytearray:
    """:func:`compress_key_group` without copies when no chunk must be stored raw (the common
    case): the codec's own framed buffer, as a view. ``data`` is any contiguous byte buffer."""
    framed = cramjam.snappy.compress(data)
    view = memoryview(framed)
    if bytes(view[: len(STREAM_IDENTIFIER)]) != STREAM_IDENTIFIER:
        raise FlinkSavepointError("the Snappy codec did not write a framed stream identifier")
    raw = memoryview(data).cast("B")
    stored = []  # (chunk position, chunk length, source position, source length) of chunks kept raw
    pos, src_pos, n = len(STREAM_IDENTIFIER), 0, len(view)
    while pos < n:
        kind = view[pos]
        length = int.from_bytes(view[pos + 1 : pos + 4], "little")
        if kind == COMPRESSED_CHUNK:
            body = view[pos + 8 : pos + 4 + length]
            raw_len = cramjam.snappy.decompress_raw_len(body)
            if len(body) / raw_len > MIN_COMPRESSION_RATIO:
                stored.append((pos, length, src_pos, raw_len))
            src_pos += raw_len
        elif kind == UNCOMPRESSED_CHUNK:
            src_pos += length - 4
        pos += 4 + length
    if src_pos != len(raw):
        raise FlinkSavepointError(f"Snappy framing covered {src_pos} of {len(raw)} bytes")
    if not stored:
        return view
    out = bytearray()
    at = 0
    for pos, length, src_pos, raw_len in stored:
        out += view[at:pos]
        out.append(UNCOMPRESSED_CHUNK)
        out += (raw_len + 4).to_bytes(3, "little")
        out += view[pos + 4 : pos + 8]  # the masked CRC32C of the uncompressed bytes
        out += raw[src_pos : src_pos + raw_len]
        at = pos + 4 + length
    out += view[at:]
    return out


def check_stream_identifier(data: Any, where: str) -> None:
    """A compressed key group starts with the framing format's stream identifier."""
    if bytes(data[: len(STREAM_IDENTIFIER)]) != STREAM_IDENTIFIER:
        raise FlinkSavepointError(
            f"{where}: a compressed key group must start with the Snappy stream identifier "
            f"ff 06 00 00 73 4e 61 50 70 59, found {bytes(data[:10]).hex(' ')}"
        )


def whole_chunks(data: Any, start: int = 0) -> int:
    """Where the last chunk of ``data`` (from ``start``) that lies wholly inside it ends: chunks
    are independent, so a framed stream read in pieces decompresses up to there and keeps the
    rest for the next piece (a chunk is at most 16 MiB, its 3-byte length says so)."""
    view = memoryview(data).cast("B")
    pos, n = start, len(view)
    while pos + 4 <= n:
        end = pos + 4 + int.from_bytes(view[pos + 1 : pos + 4], "little")
        if end > n:
            break
        pos = end
    return pos


def framed_raw_size(data: Any, where: str) -> int:
    """The uncompressed bytes a framed stream's chunks declare: what :func:`unframe_into` needs,
    so the output can be allocated once, at its size. A declared size is trusted only as far as
    the format allows (at most 64 KiB per chunk, at most Snappy's largest expansion of the
    chunk's compressed bytes), so a corrupt length never sizes an allocation; the codec then
    checks every chunk (lengths and CRCs) as it decompresses."""
    check_stream_identifier(data, where)
    view = memoryview(data).cast("B")
    pos, n, total = len(STREAM_IDENTIFIER), len(view), 0
    while pos < n:
        if pos + 4 > n:
            raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: the chunk header at byte {pos} "
                                      f"is cut off")
        kind = view[pos]
        end = pos + 4 + int.from_bytes(view[pos + 1 : pos + 4], "little")
        if end > n:
            raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: the chunk at byte {pos} runs past "
                                      f"the end ({end} > {n} bytes)")
        if kind == COMPRESSED_CHUNK:
            body = view[pos + 8 : end]
            try:
                raw = cramjam.snappy.decompress_raw_len(body) if len(body) else -1
            except cramjam.DecompressionError as e:
                raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: chunk at byte {pos}: {e}") from e
            if not 0 <= raw <= MAX_CHUNK_DATA or raw * MAX_EXPANSION[1] > len(body) * MAX_EXPANSION[0]:
                raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: the chunk at byte {pos} declares "
                                          f"{raw} uncompressed bytes for {len(body)} compressed ones")
            total += raw
        elif kind == UNCOMPRESSED_CHUNK:
            raw = end - pos - 8
            if not 0 <= raw <= MAX_CHUNK_DATA:
                raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: the stored chunk at byte {pos} "
                                          f"holds {raw} bytes")
            total += raw
        pos = end  # the stream identifier and skippable chunks hold no data (the codec refuses reserved ones)
    return total


def unframe_into(data: Any, out: Any, where: str) -> None:
    """Decompress a framed stream (a key group, or a whole number of its chunks behind the stream
    identifier) into ``out``, a writable buffer of exactly :func:`framed_raw_size` bytes: no
    buffer of the codec's own, no copy, and the caller chooses where the bytes land (a pooled
    buffer, or the middle of a larger one)."""
    check_stream_identifier(data, where)
    try:
        written = cramjam.snappy.decompress_into(data, out)
    except cramjam.DecompressionError as e:
        raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: {e}") from e
    if written != memoryview(out).nbytes:
        raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: {written} bytes decompressed where "
                                  f"its chunks declare {memoryview(out).nbytes}")


def decompress_key_group(data: bytes | memoryview, where: str) -> bytes:
    """The bytes of one framed Snappy stream (a key group), checked by the codec (CRCs included):
    sized from its chunks' bounded declared sizes (:func:`framed_raw_size`) before anything is
    allocated, decompressed in place (:func:`unframe_into`)."""
    out = bytearray(framed_raw_size(data, where))
    unframe_into(data, out, where)
    return bytes(out)
