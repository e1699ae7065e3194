"""RocksDB's SST files read without RocksDB: the bulk read of a native savepoint's column
families (issue 21, item 5).

Iterating a column family through ``rocksdict`` costs four Python calls per entry; this module
reads the block-based table files themselves and hands whole runs to the table reader. The file
layout (RocksDB's ``table/block_based``, format versions 2 to 5 as Flink's frocksdb writes them):
a 53-byte footer (checksum type, the meta index and index block handles, format version, magic),
the meta index block naming the properties block (column family, comparator, compression, index
layout), a binary-search index block of data block handles (delta-encoded when the properties
say so), and the data blocks. The byte-level work (checksums, Snappy, entries, the merge of a
column family's files by sequence number) is the ``sst_*`` kernels' (:mod:`statemorph.kernels.sst_py`);
this module finds the blocks and drives the kernels with bounded buffers, one chunk of blocks
per file at a time, so memory stays flat whatever a file's size.

What is not read here raises :class:`SstUnsupported` with the reason, and the caller reads that
column family through RocksDB (``rocksdict``) instead: other table formats or format versions,
checksum types other than none / CRC32c / XXH3, compressions other than Snappy, dictionaries,
range deletions, partitioned or hash indexes, data-block hash indexes, user-defined timestamps,
value types other than Put / Delete / SingleDelete / Merge (BlobDB, wide columns), merge operands
under another merge operator, an instance whose write-ahead log holds records. A damaged file is a
:class:`~statemorph.errors.FlinkSavepointError`.
"""

from __future__ import annotations

import bisect
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ...errors import FlinkSavepointError
from ...kernels import KERNELS, abi
from ...kernels.tiers import KernelTier
from .keyed_blocks import StateRun

FOOTER = 53
"""The footer of format versions 1 to 5: checksum type, two block handles padded to 40 bytes,
``u32`` format version, ``u64`` magic."""
MAGIC = 0x88E241B785F4CFF7
"""Block-based table magic number (little-endian at the file's end)."""
FORMAT_VERSIONS = range(2, 6)
BYTEWISE = b"leveldb.BytewiseComparator"
CHUNK_BLOCKS = 64
"""Data blocks decoded per file and refill: a few hundred KiB of entries per open file."""
MAX_BLOCK = 256 << 20
"""The largest uncompressed block read (a single entry that large is refused as damaged)."""
MAX_DECODED = 256 << 20
"""The most bytes one buffer of decoded keys or values grows to: a block whose shared-prefix keys
expand past it (a few bytes an entry can repeat a long key) or a run that does not fit is left
to RocksDB, so a hostile block allocates nothing large here."""
RUN_ENTRIES = 8192
RUN_BYTES = 1 << 20
BATCH_ENTRIES = 1 << 16
BATCH_BYTES = 16 << 20
"""The size of one :meth:`FamilyReader.batches` batch (entries; key and value bytes)."""
"""The output buffers of one merge call (entries; key bytes and value bytes each): a run that
does not fit is continued by the next call."""
_NAMES = {abi.SST_TRUNCATED: "a block or entry runs past its end", abi.SST_CHECKSUM: "a block checksum mismatch",
          abi.SST_SNAPPY: "a Snappy block that does not decompress", abi.SST_ENTRY: "a damaged block entry",
          abi.SST_ORDER: "internal keys out of order", abi.SST_KEY: "an internal key shorter than 8 bytes",
          abi.SST_COMPRESSION: "a block compression other than Snappy",
          abi.SST_CHECKSUM_TYPE: "a checksum type other than CRC32c or XXH3",
          abi.SST_HASH_INDEX: "a data block hash index",
          abi.SST_ENTRY_TYPE: "a value type other than Put, Delete, SingleDelete or Merge (BlobDB, wide columns)",
          abi.SST_NO_MERGE: "merge operands without the StringAppendTESTOperator merge operator",
          abi.SST_CAPACITY: f"a block larger than {MAX_BLOCK >> 20} MiB uncompressed"}


class SstUnsupported(Exception):
    """A table feature this reader does not read; the message says which. Not an error: the
    caller reads the column family through RocksDB."""


def _status(status: int, where: str) -> Exception:
    what = _NAMES.get(status, f"status {status}")
    if status >= abi.SST_UNSUPPORTED:
        return SstUnsupported(f"{where}: {what}")
    return FlinkSavepointError(f"{where}: damaged SST file: {what}")


class _Cursor:
    """Bounds-checked reads of one uncompressed block."""

    def __init__(self, data: Any, where: str, end: int | None = None, pos: int = 0) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end
        self.where = where

    def varint(self, most: int = 10) -> int:
        v = shift = 0
        for _ in range(most):
            if self.pos >= self.end:
                break
            c = int(self.data[self.pos])
            self.pos += 1
            v |= (c & 0x7F) << shift
            if not c & 0x80:
                return v
            shift += 7
        raise FlinkSavepointError(f"{self.where}: damaged SST file: a varint runs past its block")

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise FlinkSavepointError(f"{self.where}: damaged SST file: {n} bytes past the end of a block")
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b


def _block_entries(blk: Any, where: str) -> Iterator[tuple[bytes, _Cursor]]:
    """``(key, cursor over the value)`` of each entry of a meta block (meta index, properties)."""
    n = len(blk)
    if n < 4:
        raise FlinkSavepointError(f"{where}: damaged SST file: a block of {n} bytes")
    restarts = int.from_bytes(blk[n - 4:], "little")
    if restarts >> 31:
        raise SstUnsupported(f"{where}: a meta block with a hash index")
    limit = n - 4 - 4 * restarts
    if restarts < 1 or limit < 0:
        raise FlinkSavepointError(f"{where}: damaged SST file: a block's restart array is larger than the block")
    cur = _Cursor(blk, where, limit)
    key = b""
    while cur.pos < limit:
        shared, non_shared, vlen = cur.varint(5), cur.varint(5), cur.varint(5)
        if shared > len(key):
            raise FlinkSavepointError(f"{where}: damaged SST file: a key sharing more than the previous key")
        key = key[:shared] + cur.take(non_shared)
        value = _Cursor(blk, where, cur.pos + vlen, cur.pos)
        cur.take(vlen)
        yield key, value


@dataclass
class SstTable:
    """One SST file: its column family, checksum type and data blocks (positions, sizes, and
    the user key each block's keys are at most)."""

    path: Path
    name: str
    family: str
    checksum: int
    data: Any
    block_pos: np.ndarray
    block_len: np.ndarray
    last_keys: list[bytes] = field(default_factory=list)
    _map: mmap.mmap | None = None

    def close(self) -> None:
        """Unmap the file; a view still held elsewhere leaves the mapping to the collector (the
        instance's own cleanup must go on)."""
        try:
            if self.data is not None:
                self.data.release()
            if self._map is not None:
                self._map.close()
        except BufferError:
            pass
        self.data = None
        self._map = None

    def blocks(self, start_key: bytes, stop_key: bytes) -> range:
        """The data blocks that may hold user keys in ``[start_key, stop_key)`` (``stop_key``
        empty: no end): block ``i``'s keys lie in ``[last_keys[i-1], last_keys[i]]``."""
        first = bisect.bisect_left(self.last_keys, start_key)
        stop = len(self.last_keys) if not stop_key else min(len(self.last_keys),
                                                            bisect.bisect_left(self.last_keys, stop_key) + 1)
        return range(first, max(first, stop))


def _read_block(kernels: KernelTier, data: Any, pos: int, size: int, checksum: int, where: str) -> bytearray:
    out = bytearray(min(max(size, 64), MAX_BLOCK))
    status, n = kernels.sst_block(data, pos, size, checksum, out)
    if status == abi.SST_CAPACITY and n <= MAX_BLOCK:
        out = bytearray(n)
        status, n = kernels.sst_block(data, pos, size, checksum, out)
    if status != abi.SST_OK:
        raise _status(status, where)
    del out[n:]
    return out


def _handle(cur: _Cursor) -> tuple[int, int]:
    return cur.varint(), cur.varint()


def open_table(path: Path, kernels: KernelTier = KERNELS) -> SstTable:
    """Parse the footer, properties and index of the SST file ``path`` (memory-mapped)."""
    where = f"SST file {path.name}"
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < FOOTER:
            raise FlinkSavepointError(f"{where}: damaged SST file: {size} bytes, shorter than its footer")
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _parse_table(path, where, mapped, size, kernels)
    except BaseException:
        mapped.close()
        raise


def _parse_table(path: Path, where: str, mapped: mmap.mmap, size: int, kernels: KernelTier) -> SstTable:
    data = memoryview(mapped)
    try:
        magic = int.from_bytes(data[size - 8:], "little")
        if magic != MAGIC:
            raise SstUnsupported(f"{where}: not a block-based table of format version 1 or later (magic {magic:#x})")
        version = int.from_bytes(data[size - 12:size - 8], "little")
        if version not in FORMAT_VERSIONS:
            raise SstUnsupported(f"{where}: table format_version {version} (read: 2 to 5)")
        checksum, index_handle, meta, props = table_tail(data, size, where, kernels)
        family = _check_properties(meta, props, where)
        delta = _int_prop(props, b"rocksdb.index.value.is.delta.encoded") == 1
        user_keys = _int_prop(props, b"rocksdb.index.key.is.user.key") == 1
        index = _read_block(kernels, data, *index_handle, checksum, where)
        positions, sizes, last_keys = _index_entries(kernels, index, delta, where)
        if not user_keys:
            if any(len(k) < 8 for k in last_keys):
                raise FlinkSavepointError(f"{where}: damaged SST file: an index key shorter than 8 bytes")
            last_keys = [k[:-8] for k in last_keys]
        if len(positions) and (positions.min() < 0 or (positions + sizes + 5).max() > size):
            raise FlinkSavepointError(f"{where}: damaged SST file: a data block past the end of the file")
        return SstTable(path, path.name, family.decode("utf-8", "replace"), checksum, data, positions, sizes,
                        last_keys, mapped)
    except BaseException:
        data.release()
        raise


def table_tail(data: Any, size: int, where: str,
               kernels: KernelTier = KERNELS) -> tuple[int, tuple[int, int], dict[bytes, tuple[int, int]],
                                                       dict[bytes, bytes]]:
    """``(checksum type, index block handle, meta index, properties)`` of the table ``data`` of
    ``size`` bytes (its magic and format version already checked): what the footer, the meta
    index block and the properties block say."""
    foot = _Cursor(data, where, size - 12, size - FOOTER)
    checksum = foot.take(1)[0]
    meta_handle, index_handle = _handle(foot), _handle(foot)
    meta = {k: _handle(v) for k, v in _block_entries(
        _read_block(kernels, data, *meta_handle, checksum, where), where)}
    if b"rocksdb.properties" not in meta:
        raise FlinkSavepointError(f"{where}: damaged SST file: no properties block")
    props = {k: v.take(v.end - v.pos) for k, v in _block_entries(
        _read_block(kernels, data, *meta[b"rocksdb.properties"], checksum, where), where)}
    return checksum, index_handle, meta, props


def _index_entries(kernels: KernelTier, index: bytearray, delta: bool,
                   where: str) -> tuple[np.ndarray, np.ndarray, list[bytes]]:
    """The data block handles and separator keys of an index block (``sst_index``)."""
    most = len(index) // 3 + 1  # an entry takes at least 3 bytes
    pos, sizes = np.zeros(most, np.int64), np.zeros(most, np.int64)
    koff, kdata = np.zeros(most + 1, np.int64), np.empty(max(64, 2 * len(index)), np.uint8)
    while True:
        status, n = kernels.sst_index(index, len(index), delta, pos, sizes, koff, kdata)
        if status != abi.SST_CAPACITY:
            break
        kdata = _grown((kdata,), f"{where} index")[0]
    if status != abi.SST_OK:
        raise _status(status, f"{where} index block")
    keys, _ = kernels.sst_lists(koff, kdata, koff, kdata, n)
    return pos[:n].copy(), sizes[:n].copy(), keys


def _int_prop(props: dict[bytes, bytes], name: bytes) -> int:
    raw = props.get(name)
    if raw is None:
        return 0
    return _Cursor(raw, "property").varint()


def _check_properties(meta: dict[bytes, tuple[int, int]], props: dict[bytes, bytes], where: str) -> bytes:
    """The column family name, once every property this reader depends on is one it reads."""
    if b"rocksdb.range_del" in meta or _int_prop(props, b"rocksdb.num.range-deletions"):
        raise SstUnsupported(f"{where}: range deletions")
    if b"rocksdb.compression_dict" in meta:
        raise SstUnsupported(f"{where}: a compression dictionary")
    if props.get(b"rocksdb.comparator", BYTEWISE) != BYTEWISE:
        raise SstUnsupported(f"{where}: comparator {props[b'rocksdb.comparator'].decode(errors='replace')}")
    index_type = props.get(b"rocksdb.block.based.table.index.type")
    if index_type is not None and int.from_bytes(index_type[:4], "little") != 0:
        raise SstUnsupported(f"{where}: index type {int.from_bytes(index_type[:4], 'little')} (read: binary search)")
    if props.get(b"rocksdb.timestamp_size", b"") not in (b"", b"\x00") or \
            _int_prop(props, b"rocksdb.user.defined.timestamps.persisted") > 1:
        raise SstUnsupported(f"{where}: user-defined timestamps")
    compression = props.get(b"rocksdb.compression", b"NoCompression")
    if compression not in (b"Snappy", b"NoCompression"):
        raise SstUnsupported(f"{where}: compression {compression.decode(errors='replace')}")
    if b"rocksdb.column.family.name" not in props:
        raise SstUnsupported(f"{where}: no column family name in its properties")
    return props[b"rocksdb.column.family.name"]


_CF_SECTION = re.compile(r'^\[CFOptions "(.*)"\]\s*$')


def merge_delimiters(options: str) -> dict[str, int]:
    """Per column family of a RocksDB ``OPTIONS`` file, the delimiter byte of its merge operator
    when that is ``StringAppendTESTOperator`` (Flink's, ``,``) with a one-byte delimiter; -1 for
    any other (merge operands then make the kernels hand the family to RocksDB)."""
    out: dict[str, int] = {}
    family = None
    for line in options.splitlines():
        m = _CF_SECTION.match(line.strip())
        if m:
            family = m.group(1)
            out[family] = -1
        elif line.strip().startswith("[") and family is not None:
            family = None
        elif family is not None and line.strip().startswith("merge_operator="):
            value = line.strip()[len("merge_operator="):]
            if "StringAppendTESTOperator" in value:
                d = re.search(r"delimiter=(.*?);", value)
                delim = d.group(1) if d else ","
                out[family] = ord(delim) if len(delim) == 1 and ord(delim) < 256 else -1
    return out


def latest_options(directory: Path) -> str:
    """The text of the instance's newest ``OPTIONS-N`` file (the one RocksDB loads)."""
    found = [(int(p.name[8:]), p) for p in directory.glob("OPTIONS-*") if p.name[8:].isdigit()]
    return max(found)[1].read_text(errors="replace") if found else ""


class _FileInput:
    """One input of the merge: the data blocks of one file, or of files whose key ranges follow
    one another (a level's files: :func:`_chained`), read in turn; a chunk of decoded data
    blocks, refilled as the merge consumes it (the entries it has not consumed move to the
    front)."""

    def __init__(self, parts: list[tuple[SstTable, range]], kernels: KernelTier) -> None:
        self.parts = parts
        self.part = 0
        self.table = parts[0][0]
        self.next = parts[0][1].start
        self.stop = parts[0][1].stop
        self.kernels = kernels
        self.koff = np.zeros(4097, np.int64)
        self.voff = np.zeros(4097, np.int64)
        self.kdata = np.empty(1 << 17, np.uint8)
        self.vdata = np.empty(1 << 19, np.uint8)
        self.scratch = np.empty(1 << 16, np.uint8)
        self.n = 0
        self._next_part()

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.koff, self.kdata, self.voff, self.vdata

    @property
    def eof(self) -> bool:
        return self.next >= self.stop

    def _next_part(self) -> None:
        """Past the blocks of the current file, the next file's (when there is one with blocks)."""
        while self.next >= self.stop and self.part + 1 < len(self.parts):
            self.part += 1
            self.table, blocks = self.parts[self.part]
            self.next, self.stop = blocks.start, blocks.stop

    def refill(self, pos: int) -> None:
        """Keep the entries from ``pos`` on, then decode up to :data:`CHUNK_BLOCKS` more blocks."""
        k0, v0 = int(self.koff[pos]), int(self.voff[pos])
        kept = self.n - pos
        self.kdata[:self.koff[self.n] - k0] = self.kdata[k0:self.koff[self.n]]
        self.vdata[:self.voff[self.n] - v0] = self.vdata[v0:self.voff[self.n]]
        self.koff[:kept + 1] = self.koff[pos:self.n + 1] - k0
        self.voff[:kept + 1] = self.voff[pos:self.n + 1] - v0
        self.n = kept
        stop = min(self.stop, self.next + CHUNK_BLOCKS)
        t = self.table
        where = f"SST file {t.name}"
        while self.next < stop:
            status, block, n = self.kernels.sst_decode(t.data, t.block_pos, t.block_len, self.next, stop, t.checksum,
                                                       self.scratch, self.koff, self.kdata, self.voff, self.vdata,
                                                       self.n)
            if status == abi.SST_CAPACITY and n < 0:
                if -n > MAX_BLOCK:
                    raise FlinkSavepointError(f"{where}: damaged SST file: a block of {-n} bytes uncompressed")
                self.scratch = np.empty(-n, np.uint8)
            elif status == abi.SST_CAPACITY:
                progressed = block > self.next
                self.next, self.n = block, n
                if progressed:
                    break
                self._grow()
            elif status != abi.SST_OK:
                raise _status(status, f"{where} data block {block}")
            else:
                self.next, self.n = block, n
        self._next_part()

    def _grow(self) -> None:
        self.koff, self.kdata, self.voff, self.vdata = _grown(
            (self.koff, self.kdata, self.voff, self.vdata), f"SST file {self.table.name} data block {self.next}")


def _grown(arrays: tuple[np.ndarray, ...], where: str) -> tuple[np.ndarray, ...]:
    """Each buffer twice its size; :class:`SstUnsupported` past :data:`MAX_DECODED`."""
    if max(a.nbytes for a in arrays) * 2 > MAX_DECODED:
        raise SstUnsupported(f"{where}: entries that decode to more than {MAX_DECODED >> 20} MiB at once")
    return tuple(np.resize(a, 2 * len(a)) for a in arrays)


def _first_key(table: SstTable, kernels: KernelTier) -> bytes:
    """The user key of the first entry of ``table`` (its first data block's first entry, which
    shares no prefix)."""
    where = f"SST file {table.name} data block 0"
    blk = _read_block(kernels, table.data, int(table.block_pos[0]), int(table.block_len[0]), table.checksum, where)
    cur = _Cursor(blk, where, len(blk))
    _shared, non_shared, _value_len = cur.varint(5), cur.varint(5), cur.varint(5)
    key = cur.take(non_shared)
    if len(key) < 8:
        raise FlinkSavepointError(f"{where}: damaged SST file: a key shorter than 8 bytes")
    return key[:-8]


def _chained(tables: list[SstTable], start_key: bytes, stop_key: bytes,
             kernels: KernelTier) -> list[list[tuple[SstTable, range]]]:
    """The merge's inputs: the blocks of each file that may hold keys in ``[start_key,
    stop_key)``, files whose key ranges do not overlap read one after the other as one input
    (a level's files, in key order: each entry is then compared with fewer inputs' heads).
    A file joins the first chain whose last file's greatest key (its index's last key, an upper
    bound) is below its first key; a user key in two files keeps them in different inputs, so
    the merge still orders its versions by sequence number."""
    parts = [(t, t.blocks(start_key, stop_key)) for t in tables]
    parts = [(t, r) for t, r in parts if len(r)]
    if len(parts) < 2:
        return [[p] for p in parts]
    firsts = [_first_key(t, kernels) for t, _ in parts]
    chains: list[list[tuple[SstTable, range]]] = []
    for i in sorted(range(len(parts)), key=lambda i: firsts[i]):
        for chain in chains:
            if chain[-1][0].last_keys[-1] < firsts[i]:
                chain.append(parts[i])
                break
        else:
            chains.append([parts[i]])
    return chains


class _Merge:
    """The state of one ``sst_merge`` over several inputs, shared by the calls that continue it:
    each input's arrays, its position, its entry count and whether its files are done."""

    def __init__(self, inputs: list[_FileInput], family: str) -> None:
        for x in inputs:
            x.refill(0)
        self.inputs, self.family = inputs, family
        self.pos = np.zeros(len(inputs), np.int64)
        self.end = np.array([x.n for x in inputs], np.int64)
        self.eof = np.array([x.eof for x in inputs], np.uint8)

    @property
    def arrays(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        return [x.arrays for x in self.inputs]

    def refill(self, i: int) -> None:
        """Input ``i`` ran out of decoded entries (``SST_REFILL``): decode its next blocks."""
        x = self.inputs[i]
        x.refill(int(self.pos[i]))
        self.pos[i], self.end[i], self.eof[i] = 0, x.n, x.eof

    def failed(self, status: int) -> Exception:
        names = ", ".join(x.table.name for x in self.inputs)
        return _status(status, f"SST files {names} (column family {self.family!r})")


class FamilyReader:
    """The SST files of one column family, read as RocksDB's iterator would show them."""

    def __init__(self, tables: list[SstTable], delimiter: int, kernels: KernelTier = KERNELS) -> None:
        self.tables = tables
        self.delimiter = delimiter
        self.kernels = kernels

    def _merge(self, start_key: bytes, stop_key: bytes) -> _Merge | None:
        """The merge of this column family's files over ``[start_key, stop_key)``, its inputs
        filled; None when no file holds a key there."""
        inputs = [_FileInput(parts, self.kernels) for parts in _chained(self.tables, start_key, stop_key, self.kernels)]
        return _Merge(inputs, self.tables[0].family) if inputs else None

    def runs(self, sid: int, start_key: bytes, stop_key: bytes, group_len: int,
             slice_bytes: int) -> Iterator[StateRun]:
        """The entries with user keys in ``[start_key, stop_key)`` as runs of one key group (the
        first ``group_len`` bytes) each, a large group as consecutive runs cut after the entry
        that brings a run to ``slice_bytes`` (key + value + 8 bytes an entry), as
        :meth:`.native.RocksInstance.rocks_state_runs` cuts them: a run the output buffers cut
        short is continued by the next call (``group``, the budget left)."""
        m = self._merge(start_key, stop_key)
        if m is None:
            return
        koff, voff = np.zeros(RUN_ENTRIES + 1, np.int64), np.zeros(RUN_ENTRIES + 1, np.int64)
        kdata, vdata = np.empty(RUN_BYTES, np.uint8), np.empty(RUN_BYTES, np.uint8)
        k = self.kernels
        keys: list[bytes] = []
        values: list[bytes] = []
        size = 0  # of the run being built, as the kernel counts it (key + value + 8 an entry)
        while True:
            group = keys[-1][:group_len] if keys else b""
            status, n, refill = k.sst_merge(m.arrays, m.pos, m.end, m.eof, self.delimiter, group_len,
                                            group, start_key, stop_key, slice_bytes - size, koff, kdata, voff, vdata)
            if n:
                more_keys, more_values = k.sst_lists(koff, kdata, voff, vdata, n)
                keys += more_keys
                values += more_values
                size += int(koff[n]) + int(voff[n]) + 8 * n
            if status == abi.SST_REFILL:
                m.refill(refill)
            elif status == abi.SST_CAPACITY:  # not one entry fit
                koff, kdata, voff, vdata = _grown((koff, kdata, voff, vdata),
                                                  f"column family {self.tables[0].family!r}")
            elif status == abi.SST_SLICE and size < slice_bytes:
                continue  # the output buffers were full: the next call continues the run
            elif status in (abi.SST_SLICE, abi.SST_GROUP, abi.SST_END):
                if keys:
                    yield StateRun(sid, keys, values)
                    keys, values, size = [], [], 0
                if status == abi.SST_END:
                    return
            else:
                raise m.failed(status)


    def batches(self, start_key: bytes, stop_key: bytes, entries: int = BATCH_ENTRIES,
                batch_bytes: int = BATCH_BYTES) -> Iterator[FlatBatch]:
        """The entries with user keys in ``[start_key, stop_key)`` as flat buffers of up to
        ``entries`` entries and ``batch_bytes`` key bytes and value bytes each, whatever their key
        groups: what a writer of the same column family takes, without a Python object per entry.
        The merge writes straight into the batch's buffers, which the next batch reuses: a batch
        is valid until the next one is asked for (copy what must outlive it)."""
        m = self._merge(start_key, stop_key)
        if m is None:
            return
        k = self.kernels
        cap_k = cap_v = batch_bytes
        koff, voff = np.zeros(entries + 1, np.int64), np.zeros(entries + 1, np.int64)
        kdata, vdata = np.empty(cap_k, np.uint8), np.empty(cap_v, np.uint8)
        while True:
            count = kpos = vpos = 0
            while True:
                status, n, refill = k.sst_merge(m.arrays, m.pos, m.end, m.eof, self.delimiter, 0, b"",
                                                start_key, stop_key, 1 << 62, koff[count:], kdata[kpos:],
                                                voff[count:], vdata[vpos:])
                if n:
                    koff[count:count + n + 1] += kpos
                    voff[count:count + n + 1] += vpos
                    count += n
                    kpos, vpos = int(koff[count]), int(voff[count])
                if status == abi.SST_REFILL:
                    m.refill(refill)
                elif status in (abi.SST_SLICE, abi.SST_CAPACITY) and count:
                    break  # this batch is full
                elif status == abi.SST_CAPACITY:  # not one entry fits a batch
                    if max(cap_k, cap_v) * 2 > MAX_DECODED:
                        raise SstUnsupported(f"column family {self.tables[0].family!r}: an entry of more than "
                                             f"{MAX_DECODED >> 20} MiB")
                    cap_k, cap_v = 2 * cap_k, 2 * cap_v
                    kdata, vdata = np.empty(cap_k, np.uint8), np.empty(cap_v, np.uint8)
                elif status == abi.SST_END:
                    break
                elif status != abi.SST_SLICE:
                    raise m.failed(status)
            if count:
                yield FlatBatch(koff[:count + 1], kdata[:kpos], voff[:count + 1], vdata[:vpos], count)
            if status == abi.SST_END:
                return


class FlatBatch(NamedTuple):
    """Entries as flat buffers: user key ``i`` is ``kdata[koff[i]:koff[i + 1]]``, its value
    ``vdata[voff[i]:voff[i + 1]]`` (int64 offsets from 0)."""

    koff: np.ndarray
    kdata: np.ndarray
    voff: np.ndarray
    vdata: np.ndarray
    n: int


def flat_batch(keys: list[bytes], values: list[bytes]) -> FlatBatch:
    """``keys`` and ``values`` as a :class:`FlatBatch`."""
    return FlatBatch(*_flat(keys), *_flat(values), len(keys))


def _flat(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(items) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, items), np.int64, len(items)), out=off[1:])
    return off, np.frombuffer(b"".join(items), np.uint8)


def family_tables(directory: Path, names: list[str], kernels: KernelTier = KERNELS) -> dict[str, list[SstTable]]:
    """The live SST files ``names`` of an instance's ``directory``, by column family (from each
    file's properties). :class:`SstUnsupported` when one of them is not read here, or when the
    instance holds entries outside its SST files: a write-ahead log with records (RocksDB replays
    it into memory on opening; Flink, which writes without one, never leaves one) or blob files."""
    for f in directory.iterdir():
        if f.suffix == ".log" and f.stat().st_size > 0:
            raise SstUnsupported(f"a write-ahead log with records ({f.name})")
        if f.suffix == ".blob":
            raise SstUnsupported(f"blob files ({f.name})")
    out: dict[str, list[SstTable]] = {}
    try:
        for name in names:
            t = open_table(directory / name, kernels)
            out.setdefault(t.family, []).append(t)
    except BaseException:
        for ts in out.values():
            for t in ts:
                t.close()
        raise
    return out


__all__ = ["FamilyReader", "FlatBatch", "SstTable", "SstUnsupported", "family_tables", "flat_batch", "latest_options",
           "merge_delimiters", "open_table", "table_tail"]
