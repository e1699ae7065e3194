"""Python twins of the RocksDB table (SST) kernels (``kernels/_native/sst.pyx``): the same names,
arguments, status codes (``abi.SST_*``) and results, as plain Python. The compiled tier must equal
these (tests/kernels/test_sst_kernels.py); ``STATEMORPH_NATIVE=0`` runs them.

A block-based table (RocksDB's SST file) is a sequence of blocks, each followed by a 5-byte
trailer: the compression type (0 none, 1 Snappy) and a little-endian ``u32`` checksum of the
block's bytes and that type byte (CRC32c, masked, or XXH3's low 32 bits mixed with the type byte).
A data block holds entries ``varint32 shared ‖ varint32 non_shared ‖ varint32 value length ‖ key
delta ‖ value`` (a key is the previous key's first ``shared`` bytes and the delta), then the
restart array (``u32`` offsets) and its ``u32`` count. Keys are *internal keys*: the user key and
an 8-byte little-endian trailer ``sequence << 8 | value type``.

- ``sst_block`` checks one block's trailer and copies or decompresses it (the footer, meta index,
  properties and index blocks, which :mod:`statemorph.savepoint.flink.sst` then parses);
- ``sst_decode`` decodes a range of data blocks of one file into flat buffers: internal keys and
  values, each as offsets (``off[i]`` to ``off[i + 1]``) into one byte buffer, appended after the
  ``n0`` entries already there; a block that does not fit is left whole for the next call;
- ``sst_merge`` merges the decoded entries of the files of one column family (each sorted by
  internal key; files may overlap) into user keys and values as RocksDB's iterator shows them:
  the newest version of each key decides (a Put its value, a Delete or SingleDelete no entry),
  Merge operands are joined oldest first by the ``StringAppendTESTOperator`` rule (the base value,
  if a Put is under them, then each operand, a delimiter between two); it writes one run (one key
  group, at most about ``slice_bytes``) per call and says why it stopped;
- ``sst_index`` decodes an index block: each data block's position and size (full handles, or
  with format version 4 and later sizes delta-encoded after the first of each restart) and its
  separator key;
- ``sst_lists`` turns a run's flat buffers into the ``bytes`` lists of a :class:`StateRun`.

Every position is checked against its buffer; a damaged input gives a status, never a read
outside it.
"""

from __future__ import annotations

from typing import Any

from . import abi

COMPRESSION_NONE = 0
COMPRESSION_SNAPPY = 1
CHECKSUM_NONE = 0
CHECKSUM_CRC32C = 1
CHECKSUM_XXH3 = 4
TRAILER = 5
MAX_EXPANSION = 32
"""The most a Snappy block may expand (its longest copy element writes 64 bytes from 3): a block
stating a larger uncompressed length is damaged, so a hostile length allocates nothing large."""

TYPE_DELETION = 0x0
TYPE_VALUE = 0x1
TYPE_MERGE = 0x2
TYPE_SINGLE_DELETION = 0x7
_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1


# ---- checksums --------------------------------------------------------------------------------

def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: Any, crc: int = 0) -> int:
    """CRC32c (Castagnoli) of ``data``, continuing ``crc``."""
    c = crc ^ _M32
    for b in bytes(data):
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ _M32


def _mask(crc: int) -> int:
    """RocksDB's (LevelDB's) masked CRC: rotated right by 15 and offset."""
    return ((((crc >> 15) | (crc << 17)) & _M32) + 0xA282EAD8) & _M32


_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221"
    "b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb"
    "170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
_P32_1, _P32_2, _P32_3 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
_MX1, _MX2 = 0x165667919E3779F9, 0x9FB21C651E98DF25


def _r64(b: bytes, p: int) -> int:
    return int.from_bytes(b[p:p + 8], "little")


def _r32(b: bytes, p: int) -> int:
    return int.from_bytes(b[p:p + 4], "little")


def _fold(a: int, b: int) -> int:
    m = a * b
    return (m & _M64) ^ (m >> 64)


def _avalanche(h: int) -> int:
    h ^= h >> 37
    h = h * _MX1 & _M64
    return h ^ (h >> 32)


def _xxh64_avalanche(h: int) -> int:
    h ^= h >> 33
    h = h * _P64_2 & _M64
    h ^= h >> 29
    h = h * _P64_3 & _M64
    return h ^ (h >> 32)


def _mix16(b: bytes, p: int, s: int) -> int:
    return _fold(_r64(b, p) ^ _r64(_SECRET, s), _r64(b, p + 8) ^ _r64(_SECRET, s + 8))


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def xxh3_64(data: Any) -> int:
    """XXH3's 64-bit hash of ``data`` with seed 0 and the default secret (what RocksDB's XXH3
    block checksum takes the low 32 bits of)."""
    b = bytes(data)
    n = len(b)
    if n == 0:
        return _xxh64_avalanche(_r64(_SECRET, 56) ^ _r64(_SECRET, 64))
    if n <= 3:
        combined = (b[0] << 16) | (b[n >> 1] << 24) | b[n - 1] | (n << 8)
        return _xxh64_avalanche(combined ^ (_r32(_SECRET, 0) ^ _r32(_SECRET, 4)))
    if n <= 8:
        keyed = (_r32(b, n - 4) + (_r32(b, 0) << 32)) ^ (_r64(_SECRET, 8) ^ _r64(_SECRET, 16))
        h = keyed ^ _rotl(keyed, 49) ^ _rotl(keyed, 24)
        h = h * _MX2 & _M64
        h ^= (h >> 35) + n
        h = h * _MX2 & _M64
        return h ^ (h >> 28)
    if n <= 16:
        lo = _r64(b, 0) ^ (_r64(_SECRET, 24) ^ _r64(_SECRET, 32))
        hi = _r64(b, n - 8) ^ (_r64(_SECRET, 40) ^ _r64(_SECRET, 48))
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _avalanche((n + swapped + hi + _fold(lo, hi)) & _M64)
    if n <= 128:
        acc = n * _P64_1 & _M64
        for i in range((n - 1) // 32, -1, -1):
            acc += _mix16(b, 16 * i, 32 * i) + _mix16(b, n - 16 * (i + 1), 32 * i + 16)
        return _avalanche(acc & _M64)
    if n <= 240:
        acc = n * _P64_1 & _M64
        for i in range(8):
            acc += _mix16(b, 16 * i, 16 * i)
        acc = _avalanche(acc & _M64)
        acc_end = _mix16(b, n - 16, 136 - 17)
        for i in range(8, n // 16):
            acc_end += _mix16(b, 16 * i, 16 * (i - 8) + 3)
        return _avalanche((acc + acc_end) & _M64)
    return _xxh3_long(b)


def _accumulate(acc: list[int], b: bytes, p: int, s: int) -> None:
    for lane in range(8):
        v = _r64(b, p + 8 * lane)
        k = v ^ _r64(_SECRET, s + 8 * lane)
        acc[lane ^ 1] = (acc[lane ^ 1] + v) & _M64
        acc[lane] = (acc[lane] + (k & _M32) * (k >> 32)) & _M64


def _xxh3_long(b: bytes) -> int:
    n = len(b)
    acc = [_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1]
    stripes = (len(_SECRET) - 64) // 8
    block = 64 * stripes
    blocks = (n - 1) // block
    for k in range(blocks):
        for s in range(stripes):
            _accumulate(acc, b, k * block + 64 * s, 8 * s)
        for lane in range(8):
            a = acc[lane]
            a ^= a >> 47
            a ^= _r64(_SECRET, len(_SECRET) - 64 + 8 * lane)
            acc[lane] = a * _P32_1 & _M64
    for s in range(((n - 1) - block * blocks) // 64):
        _accumulate(acc, b, blocks * block + 64 * s, 8 * s)
    _accumulate(acc, b, n - 64, len(_SECRET) - 64 - 7)
    result = n * _P64_1 & _M64
    for i in range(4):
        result += _fold(acc[2 * i] ^ _r64(_SECRET, 11 + 16 * i), acc[2 * i + 1] ^ _r64(_SECRET, 11 + 16 * i + 8))
    return _avalanche(result & _M64)


def block_checksum(kind: int, data: Any, type_byte: int) -> int:
    """The checksum RocksDB stores after a block (format versions 2 to 5): over the block and its
    compression type byte."""
    if kind == CHECKSUM_CRC32C:
        return _mask(crc32c(bytes((type_byte,)), crc32c(data)))
    v = xxh3_64(data) & _M32
    return v ^ (type_byte * 0x6B9083D9 & _M32)


# ---- Snappy -----------------------------------------------------------------------------------

def _varint(b: Any, pos: int, end: int, most: int = 5) -> tuple[int, int]:
    """``(value, next position)``; next position -1 when the varint runs past ``end`` or takes
    more than ``most`` bytes."""
    v = shift = 0
    for i in range(most):
        if pos + i >= end:
            return 0, -1
        c = b[pos + i]
        if i == most - 1 and c > (0x0F if most == 5 else 0x7F):
            return 0, -1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, pos + i + 1
        shift += 7
    return 0, -1


def snappy_length(b: Any, pos: int, end: int) -> int:
    """The uncompressed length a raw Snappy block states; -1 when unreadable or larger than
    :data:`MAX_EXPANSION` times its compressed size (a damaged or hostile block)."""
    n, p = _varint(b, pos, end)
    if p < 0 or n > MAX_EXPANSION * (end - pos) + 64:
        return -1
    return n


def snappy_decompress(b: Any, pos: int, end: int, out: Any) -> int:
    """Decompress the raw Snappy block ``b[pos:end]`` into ``out``; the length written, or -1
    when the block is damaged (an element past either end, a copy before the start, a length
    other than the one stated). ``out`` must hold :func:`snappy_length` bytes."""
    n, p = _varint(b, pos, end)
    if p < 0 or n > len(out):
        return -1
    o = 0
    while p < end:
        tag = b[p]
        p += 1
        kind = tag & 3
        if kind == 0:
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                if p + extra > end:
                    return -1
                length = int.from_bytes(bytes(b[p:p + extra]), "little")
                p += extra
            length += 1
            if p + length > end or o + length > n:
                return -1
            out[o:o + length] = b[p:p + length]
            p += length
            o += length
            continue
        if kind == 1:
            if p + 1 > end:
                return -1
            length = 4 + ((tag >> 2) & 7)
            offset = ((tag >> 5) << 8) | b[p]
            p += 1
        elif kind == 2:
            if p + 2 > end:
                return -1
            length = 1 + (tag >> 2)
            offset = b[p] | b[p + 1] << 8
            p += 2
        else:
            if p + 4 > end:
                return -1
            length = 1 + (tag >> 2)
            offset = int.from_bytes(bytes(b[p:p + 4]), "little")
            p += 4
        if offset == 0 or offset > o or o + length > n:
            return -1
        for i in range(length):  # byte by byte: a copy may overlap what it writes
            out[o + i] = out[o - offset + i]
        o += length
    return o if o == n else -1


# ---- blocks -----------------------------------------------------------------------------------

def _read_block(mv: memoryview, pos: int, size: int, checksum: int, out: memoryview) -> tuple[int, Any, int]:
    """``(status, uncompressed bytes, length)``: a stored block is its bytes in the file itself, a
    Snappy one is decompressed into ``out`` (``SST_CAPACITY`` with the length it needs)."""
    if pos < 0 or size < 0 or pos + size + TRAILER > len(mv):
        return abi.SST_TRUNCATED, None, 0
    if checksum not in (CHECKSUM_NONE, CHECKSUM_CRC32C, CHECKSUM_XXH3):
        return abi.SST_CHECKSUM_TYPE, None, 0
    kind = mv[pos + size]
    if kind not in (COMPRESSION_NONE, COMPRESSION_SNAPPY):
        return abi.SST_COMPRESSION, None, 0
    data = mv[pos:pos + size]
    if checksum != CHECKSUM_NONE:
        stored = int.from_bytes(mv[pos + size + 1:pos + size + TRAILER], "little")
        if block_checksum(checksum, data, kind) != stored:
            return abi.SST_CHECKSUM, None, 0
    if kind == COMPRESSION_NONE:
        return abi.SST_OK, data, size
    n = snappy_length(mv, pos, pos + size)
    if n < 0:
        return abi.SST_SNAPPY, None, 0
    if n > len(out):
        return abi.SST_CAPACITY, None, n
    if snappy_decompress(mv, pos, pos + size, out) != n:
        return abi.SST_SNAPPY, None, 0
    return abi.SST_OK, out[:n], n


def sst_block(buf: Any, pos: int, size: int, checksum: int, out: Any) -> tuple[int, int]:
    """``(status, length)``: check the block ``buf[pos:pos+size]`` against its trailer
    (``checksum``: the footer's checksum type) and copy or decompress it into ``out``. On
    ``SST_CAPACITY`` ``length`` is the size ``out`` needs."""
    out = memoryview(out).cast("B")
    status, data, n = _read_block(memoryview(buf).cast("B"), pos, size, checksum, out)
    if status == abi.SST_OK and n > len(out):
        return abi.SST_CAPACITY, n
    if status == abi.SST_OK:
        out[:n] = data
    return status, n if status in (abi.SST_OK, abi.SST_CAPACITY) else 0


def _block_entries(blk: Any, n: int) -> tuple[int, list[tuple[bytes, bytes]]]:
    """The ``(internal key, value)`` entries of an uncompressed data block of ``n`` bytes."""
    if n < 4:
        return abi.SST_TRUNCATED, []
    packed = int.from_bytes(blk[n - 4:n], "little")
    if packed >> 31:
        return abi.SST_HASH_INDEX, []
    restarts = packed
    if restarts < 1 or 4 + 4 * restarts > n:
        return abi.SST_ENTRY, []
    limit = n - 4 - 4 * restarts
    p = 0
    key = b""
    out = []
    while p < limit:  # every entry is checked, even past what the output can hold
        shared, p = _varint(blk, p, limit)
        if p < 0:
            return abi.SST_ENTRY, []
        non_shared, p = _varint(blk, p, limit)
        if p < 0:
            return abi.SST_ENTRY, []
        vlen, p = _varint(blk, p, limit)
        if p < 0 or shared > len(key) or non_shared > limit - p or vlen > limit - p - non_shared:
            return abi.SST_ENTRY, []
        key = key[:shared] + bytes(blk[p:p + non_shared])
        p += non_shared
        if len(key) < 8:
            return abi.SST_KEY, []
        out.append((key, bytes(blk[p:p + vlen])))
        p += vlen
    return abi.SST_OK, out


def sst_index(blk: Any, n: int, delta: bool, out_pos: Any, out_len: Any, key_off: Any,
              key_data: Any) -> tuple[int, int]:
    """``(status, entries)``: the block handles and keys of the uncompressed index block
    ``blk[:n]`` (``delta``: values delta-encoded, without value lengths). Entry ``i``: the data
    block at ``out_pos[i]`` of ``out_len[i]`` bytes, whose keys are at most ``key_data[key_off[i]:
    key_off[i + 1]]`` (``key_off[0] = 0``). ``SST_CAPACITY`` when an output is too small."""
    b = memoryview(blk).cast("B")
    key_data = memoryview(key_data).cast("B")
    if n < 4 or n > len(b):
        return abi.SST_TRUNCATED, 0
    packed = int.from_bytes(b[n - 4:n], "little")
    if packed >> 31:
        return abi.SST_HASH_INDEX, 0
    if packed < 1 or 4 + 4 * packed > n:
        return abi.SST_ENTRY, 0
    limit = n - 4 - 4 * packed
    cap = min(len(out_pos), len(out_len), len(key_off) - 1)
    if cap < 0:
        return abi.SST_CAPACITY, 0
    key_off[0] = 0
    p = e = 0
    key = b""
    while p < limit:
        shared, p = _varint(b, p, limit)
        if p < 0:
            return abi.SST_ENTRY, e
        non_shared, p = _varint(b, p, limit)
        if p < 0:
            return abi.SST_ENTRY, e
        vend = limit
        if not delta:
            vlen, p = _varint(b, p, limit)
            if p < 0 or non_shared > limit - p or vlen > limit - p - non_shared:
                return abi.SST_ENTRY, e
            vend = p + non_shared + vlen
        if shared > len(key) or non_shared > vend - p:
            return abi.SST_ENTRY, e
        key = key[:shared] + bytes(b[p:p + non_shared])
        p += non_shared
        if delta and shared and e:
            v, p = _varint(b, p, vend, 9)
            if p < 0:
                return abi.SST_ENTRY, e
            pos = int(out_pos[e - 1]) + int(out_len[e - 1]) + TRAILER
            size = int(out_len[e - 1]) + ((v >> 1) ^ -(v & 1))
        else:
            pos, p = _varint(b, p, vend, 9)
            if p < 0:
                return abi.SST_ENTRY, e
            size, p = _varint(b, p, vend, 9)
            if p < 0:
                return abi.SST_ENTRY, e
        if not delta:
            p = vend
        if size < 0 or pos < 0 or size > (1 << 62) or pos > (1 << 62):
            return abi.SST_ENTRY, e
        if e >= cap or key_off[e] + len(key) > len(key_data):
            return abi.SST_CAPACITY, e
        out_pos[e], out_len[e] = pos, size
        key_data[key_off[e]:key_off[e] + len(key)] = key
        key_off[e + 1] = key_off[e] + len(key)
        e += 1
    return abi.SST_OK, e


def sst_decode(buf: Any, block_pos: Any, block_len: Any, start: int, stop: int, checksum: int, scratch: Any,
               key_off: Any, key_data: Any, val_off: Any, val_data: Any, n0: int) -> tuple[int, int, int]:
    """``(status, block, n)``: decode the data blocks ``start..stop`` (their positions and sizes
    in ``block_pos``/``block_len``) of the file ``buf``, appending each entry's internal key and
    value after the ``n0`` entries already in the output (entry ``i``: ``key_data[key_off[i]:
    key_off[i + 1]]``, ``key_off[n0]`` set by the caller; the same for values). ``n`` counts the
    entries then held, ``block`` is the first block not decoded. A block whose entries do not fit
    is left whole (``SST_CAPACITY``); ``scratch`` holds one uncompressed block (``SST_CAPACITY``
    with ``n`` = -(the size it needs) when it does not)."""
    mv = memoryview(buf).cast("B")
    key_data, val_data = memoryview(key_data).cast("B"), memoryview(val_data).cast("B")
    cap = len(key_off) - 1
    if n0 < 0 or n0 > cap or len(val_off) < len(key_off):
        return abi.SST_CAPACITY, start, n0
    if start < 0 or stop > len(block_pos) or stop > len(block_len):
        return abi.SST_TRUNCATED, start, n0
    if not (0 <= key_off[n0] <= len(key_data) and 0 <= val_off[n0] <= len(val_data)):
        return abi.SST_CAPACITY, start, n0
    n = n0
    scratch = memoryview(scratch).cast("B")
    for b in range(start, stop):
        status, blk, size = _read_block(mv, int(block_pos[b]), int(block_len[b]), checksum, scratch)
        if status == abi.SST_CAPACITY:
            return status, b, -size
        if status != abi.SST_OK:
            return status, b, n
        status, entries = _block_entries(blk, size)
        if status != abi.SST_OK:
            return status, b, n
        kb, vb = key_off[n], val_off[n]
        need_k = sum(len(k) for k, _ in entries)
        need_v = sum(len(v) for _, v in entries)
        if n + len(entries) > cap or kb + need_k > len(key_data) or vb + need_v > len(val_data):
            return abi.SST_CAPACITY, b, n
        for k, v in entries:
            key_data[kb:kb + len(k)] = k
            val_data[vb:vb + len(v)] = v
            kb += len(k)
            vb += len(v)
            n += 1
            key_off[n] = kb
            val_off[n] = vb
    return abi.SST_OK, stop, n


# ---- merging ----------------------------------------------------------------------------------

class _Input:
    """One file's decoded entries in :func:`sst_merge`."""

    def __init__(self, arrays: Any, pos: int, end: int, eof: int) -> None:
        self.koff, kdata, self.voff, vdata = arrays
        self.kdata, self.vdata = memoryview(kdata).cast("B"), memoryview(vdata).cast("B")
        self.pos, self.end, self.eof = pos, end, eof

    def user_key(self) -> bytes:
        return bytes(self.kdata[self.koff[self.pos]:self.koff[self.pos + 1] - 8])

    def trailer(self) -> int:
        return int.from_bytes(bytes(self.kdata[self.koff[self.pos + 1] - 8:self.koff[self.pos + 1]]), "little")

    def value(self) -> bytes:
        return bytes(self.vdata[self.voff[self.pos]:self.voff[self.pos + 1]])

    def check(self) -> int:
        """SST_OK, or why the current entry cannot be read."""
        if self.pos < 0 or self.pos + 1 >= len(self.koff) or self.pos + 1 >= len(self.voff):
            return abi.SST_TRUNCATED
        a, b = self.koff[self.pos], self.koff[self.pos + 1]
        c, d = self.voff[self.pos], self.voff[self.pos + 1]
        if not 0 <= a <= b <= len(self.kdata) or not 0 <= c <= d <= len(self.vdata):
            return abi.SST_TRUNCATED
        if b - a < 8:
            return abi.SST_KEY
        return abi.SST_OK


def _advance(x: _Input) -> int:
    """Step ``x`` to its next entry, which must follow the one left (internal key order)."""
    key, trailer = x.user_key(), x.trailer()
    x.pos += 1
    if x.pos >= x.end:
        return abi.SST_OK
    status = x.check()
    if status != abi.SST_OK:
        return status
    nk = x.user_key()
    if nk < key or (nk == key and x.trailer() >= trailer):
        return abi.SST_ORDER
    return abi.SST_OK


def _restore(xs: list[_Input], saved: list[int]) -> None:
    """Put every input back at the key being resolved (it is left for the next call)."""
    for x, p in zip(xs, saved, strict=True):
        x.pos = p


def sst_merge(inputs: list[Any], pos: Any, end: Any, eof: Any, delimiter: int, group_len: int, group: bytes,
              start_key: bytes, stop_key: bytes, slice_bytes: int, out_koff: Any, out_kdata: Any, out_voff: Any,
              out_vdata: Any) -> tuple[int, int, int]:
    """``(status, n, input)``: merge the files' decoded entries (``inputs[i]``: ``(key_off,
    key_data, val_off, val_data)`` as :func:`sst_decode` wrote them; the next entry ``pos[i]``
    (updated), ``end[i]`` entries, ``eof[i]`` when no block is left to decode) into one run of
    ``n`` user keys and values (``out_koff[0] = 0``; entry ``i`` from ``out_koff[i]`` to
    ``out_koff[i + 1]``). User keys below ``start_key`` are skipped; one at or after a non-empty
    ``stop_key`` ends the read. ``delimiter``: the merge operator's (-1: none, and merge operands
    are ``SST_NO_MERGE``). The run stops (status) at the end (``SST_END``), before a key of another
    key group (its first ``group_len`` bytes, ``SST_GROUP``; ``group``, when not empty, is the key
    group of the run this call continues: its first key must be in it too), at ``slice_bytes`` or the output's
    capacity (``SST_SLICE``; ``SST_CAPACITY`` when not one entry fit), or when input ``input``
    must be refilled first (``SST_REFILL``: ``pos`` is left at the key being resolved)."""
    if len(pos) < len(inputs) or len(end) < len(inputs) or len(eof) < len(inputs):
        return abi.SST_TRUNCATED, 0, -1
    xs = [_Input(a, int(pos[i]), int(end[i]), int(eof[i])) for i, a in enumerate(inputs)]
    for x in xs:
        if x.end > min(len(x.koff), len(x.voff)) - 1:
            return abi.SST_TRUNCATED, 0, -1
        if x.pos < x.end and (status := x.check()) != abi.SST_OK:
            return status, 0, -1
    out_kdata, out_vdata = memoryview(out_kdata).cast("B"), memoryview(out_vdata).cast("B")
    cap = len(out_koff) - 1
    if cap < 0 or len(out_voff) < len(out_koff):
        return abi.SST_CAPACITY, 0, -1
    out_koff[0] = out_voff[0] = 0
    n = size = 0
    continuing = bool(group)
    status = abi.SST_OK
    while True:
        for i, x in enumerate(xs):
            if x.pos >= x.end and not x.eof:
                status, refill = abi.SST_REFILL, i
                break
        else:
            refill = -1
        if refill >= 0:
            break
        live = [x for x in xs if x.pos < x.end]
        if not live:
            status = abi.SST_END
            break
        key = min(x.user_key() for x in live)
        if stop_key and key >= stop_key:
            status = abi.SST_END
            break
        if (n or continuing) and key[:group_len] != group:
            status = abi.SST_GROUP
            break
        saved = [x.pos for x in xs]
        # the versions of ``key``, newest first, until one that decides
        versions: list[tuple[int, bytes]] = []
        decided = False
        while True:
            best = None
            for x in xs:
                if x.pos < x.end and x.user_key() == key and (best is None or x.trailer() >> 8 > best.trailer() >> 8):
                    best = x
            if best is None:
                break
            t = best.trailer() & 0xFF
            if t not in (TYPE_VALUE, TYPE_DELETION, TYPE_SINGLE_DELETION, TYPE_MERGE):
                _restore(xs, saved)
                return abi.SST_ENTRY_TYPE, n, -1
            if not decided:
                versions.append((t, best.value()))
                decided = t != TYPE_MERGE
            status = _advance(best)
            if status != abi.SST_OK:
                return status, n, -1
            if best.pos >= best.end and not best.eof:
                refill = xs.index(best)
                break
        if refill >= 0:
            _restore(xs, saved)
            status = abi.SST_REFILL
            break
        if key < start_key or versions[0][0] in (TYPE_DELETION, TYPE_SINGLE_DELETION):
            continue
        if versions[0][0] == TYPE_VALUE:
            value = versions[0][1]
        else:
            if delimiter < 0:
                _restore(xs, saved)
                return abi.SST_NO_MERGE, n, -1
            parts = [v for t, v in reversed(versions) if t in (TYPE_VALUE, TYPE_MERGE)]
            value = bytes((delimiter,)).join(parts)
        kb, vb = out_koff[n], out_voff[n]
        if n >= cap or kb + len(key) > len(out_kdata) or vb + len(value) > len(out_vdata):
            _restore(xs, saved)
            status = abi.SST_SLICE if n else abi.SST_CAPACITY
            break
        out_kdata[kb:kb + len(key)] = key
        out_vdata[vb:vb + len(value)] = value
        n += 1
        out_koff[n] = kb + len(key)
        out_voff[n] = vb + len(value)
        group = key[:group_len]
        size += len(key) + len(value) + 8
        if size >= slice_bytes:
            status = abi.SST_SLICE
            break
    for i, x in enumerate(xs):
        pos[i] = x.pos
    return status, n, refill if status == abi.SST_REFILL else -1


def sst_lists(koff: Any, kdata: Any, voff: Any, vdata: Any, n: int) -> tuple[list[bytes], list[bytes]]:
    """The first ``n`` keys and values of a run as ``bytes`` lists (offsets checked)."""
    k, v = memoryview(kdata).cast("B"), memoryview(vdata).cast("B")
    if n < 0 or n + 1 > len(koff) or n + 1 > len(voff):
        raise ValueError("sst_lists: n exceeds the offsets")
    keys, values = [], []
    for i in range(n):
        a, b, c, d = koff[i], koff[i + 1], voff[i], voff[i + 1]
        if not (0 <= a <= b <= len(k) and 0 <= c <= d <= len(v)):
            raise ValueError(f"sst_lists: entry {i} lies outside its buffers")
        keys.append(k[a:b].tobytes())
        values.append(v[c:d].tobytes())
    return keys, values


__all__ = ["sst_block", "sst_decode", "sst_index", "sst_lists", "sst_merge"]
