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

import cramjam

from ...errors import FlinkSavepointError

STREAM_IDENTIFIER = b"\xff\x06\x00\x00sNaPpY"
MIN_COMPRESSION_RATIO = 0.85
COMPRESSED_CHUNK = 0x00
UNCOMPRESSED_CHUNK = 0x01


def compress_key_group(data: bytes | bytearray | memoryview) -> bytes:
    """One framed Snappy stream for one key group's bytes (xerial's chunk rules)."""
    framed = bytes(cramjam.snappy.compress(bytes(data)))
    if not framed.startswith(STREAM_IDENTIFIER):
        raise FlinkSavepointError("the Snappy codec did not write a framed stream identifier")
    out = bytearray(STREAM_IDENTIFIER)
    pos, src_pos, n = len(STREAM_IDENTIFIER), 0, len(framed)
    raw = memoryview(bytes(data))
    while pos < n:
        kind = framed[pos]
        length = int.from_bytes(framed[pos + 1 : pos + 4], "little")
        payload = framed[pos + 4 : pos + 4 + length]
        if kind == COMPRESSED_CHUNK:
            body = payload[4:]
            raw_len = cramjam.snappy.decompress_raw_len(body)
            if len(body) / raw_len > MIN_COMPRESSION_RATIO:
                stored = raw[src_pos : src_pos + raw_len]
                out.append(UNCOMPRESSED_CHUNK)
                out += (len(stored) + 4).to_bytes(3, "little")
                out += payload[:4]
                out += stored
            else:
                out += framed[pos : pos + 4 + length]
            src_pos += raw_len
        elif kind == UNCOMPRESSED_CHUNK:
            out += framed[pos : pos + 4 + length]
            src_pos += length - 4
        else:
            out += framed[pos : pos + 4 + length]
        pos += 4 + length
    if src_pos != len(raw):
        raise FlinkSavepointError(f"Snappy framing covered {src_pos} of {len(raw)} bytes")
    return bytes(out)


def decompress_key_group(data: bytes | memoryview, where: str) -> bytes:
    """The bytes of one framed Snappy stream (a key group), checked by the codec (CRCs included)."""
    if not bytes(data[: len(STREAM_IDENTIFIER)]) == STREAM_IDENTIFIER:
        raise FlinkSavepointError(
            f"{where}: a compressed key group must start with the Snappy stream identifier "
            f"ff 06 00 00 73 4e 61 50 70 59, found {bytes(data[:10]).hex(' ')}"
        )
    try:
        return bytes(cramjam.snappy.decompress(bytes(data)))
    except cramjam.DecompressionError as e:
        raise FlinkSavepointError(f"{where}: corrupt Snappy-framed key group: {e}") from e
