"""RocksDB SST files written without RocksDB: the migrated column families of a native savepoint
(issue 21, item 5), the writing twin of :mod:`.sst`.

RocksDB's ``SstFileWriter`` takes one Python call per entry through ``rocksdict``; this module
writes the same block-based table from flat key / value buffers, the byte-level work (entries,
prefix compression, restarts, Snappy, checksums, index entries) in the ``sstwrite`` kernels
(:mod:`statemorph.kernels.sstwrite_py`) without the GIL. The table's format is the column
family's: its ``OPTIONS`` (block size, restart intervals, size deviation, index compression,
``max_compressed_bytes_per_kb``) and a one-entry file ``SstFileWriter`` writes with the same
options (:func:`sst_format`), which gives the footer (checksum type, format version) and every
property ``SstFileWriter`` writes that does not depend on the entries (compression and its
options, comparator, merge operator, column family id, filter and prefix settings): the new
files say what RocksDB's own would say, with fresh session identities and the entries' counts
and sizes. Every file is one ``SstFileWriter`` file: Puts at sequence number 0,
``rocksdb.external_sst_file.version`` 2, ingested by ``IngestExternalFile``.

What this writer does not write (other table formats or format versions, index types, a filter
policy, compressions other than Snappy, partitioned indexes, block alignment, a property it does
not know) raises :class:`SstWriteUnsupported` with the reason before anything is written; the
caller then writes that column family with RocksDB's ``SstFileWriter`` and says so.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import OutputError
from ...kernels import KERNELS, abi
from ...kernels.sstwrite_py import snappy_bound
from ...kernels.tiers import KernelTier
from ...serializers.strings import varlen as _varint
from .sst import BYTEWISE, FOOTER, MAGIC, _int_prop, table_tail

PUT_SEQ0 = 1
"""The internal-key trailer of every entry: sequence number 0, value type Put (``0 << 8 | 1``)."""
COMPUTED = (b"rocksdb.data.size", b"rocksdb.index.size", b"rocksdb.num.data.blocks", b"rocksdb.num.entries",
            b"rocksdb.raw.key.size", b"rocksdb.raw.value.size", b"rocksdb.tail.start.offset",
            b"rocksdb.creating.session.identity")
"""The properties each file's entries (or the file itself) decide."""
STATIC = frozenset({
    b"rocksdb.block.based.table.index.type", b"rocksdb.block.based.table.prefix.filtering",
    b"rocksdb.block.based.table.whole.key.filtering", b"rocksdb.column.family.id", b"rocksdb.column.family.name",
    b"rocksdb.comparator", b"rocksdb.compression", b"rocksdb.compression_options", b"rocksdb.creating.db.identity",
    b"rocksdb.creating.host.identity", b"rocksdb.creation.time", b"rocksdb.file.creation.time",
    b"rocksdb.external_sst_file.global_seqno", b"rocksdb.external_sst_file.version", b"rocksdb.filter.policy",
    b"rocksdb.format.version", b"rocksdb.index.key.is.user.key", b"rocksdb.index.value.is.delta.encoded",
    b"rocksdb.merge.operator", b"rocksdb.oldest.key.time", b"rocksdb.original.file.number",
    b"rocksdb.prefix.extractor.name", b"rocksdb.property.collectors", b"rocksdb.fixed.key.length",
    b"rocksdb.db.id", b"rocksdb.db.session.id", b"rocksdb.db.host.id"})
"""Properties copied from the column family's one-entry ``SstFileWriter`` file as they are."""
ZERO = frozenset({b"rocksdb.deleted.keys", b"rocksdb.merge.operands", b"rocksdb.filter.size",
                  b"rocksdb.num.filter_entries", b"rocksdb.num.range-deletions", b"rocksdb.key.largest.seqno",
                  b"rocksdb.key.smallest.seqno", b"rocksdb.index.partitions", b"rocksdb.top-level.index.size"})
"""Properties that are 0 for every file of Puts at sequence number 0 without a filter (checked)."""
_SESSION_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class SstWriteUnsupported(Exception):
    """A table format this writer does not write; the message says which. Not an error: the
    caller writes the column family with RocksDB's ``SstFileWriter`` instead, and says so."""


@dataclass(frozen=True)
class SstFormat:
    """How a column family's SST files are written: what its OPTIONS and ``SstFileWriter`` say."""

    checksum: int
    format_version: int
    compress: int
    index_compress: int
    per_kb: int
    block_size: int
    restart_interval: int
    deviation: int
    properties: dict[bytes, bytes]
    """The properties of :data:`STATIC` and :data:`ZERO` as ``SstFileWriter`` wrote them."""


def _section(text: str, header: str) -> dict[str, str]:
    out: dict[str, str] = {}
    inside = False
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("["):
            inside = s == header
        elif inside and "=" in s:
            k, v = s.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def _need(opts: dict[str, str], key: str, want: str, where: str) -> None:
    got = opts.get(key)
    if got != want:
        raise SstWriteUnsupported(f"{where}: table option {key}={got} (written: {want})")


def _int_option(opts: dict[str, str], key: str, where: str, default: int | None = None) -> int:
    raw = opts.get(key)
    if raw is None and default is not None:
        return default
    if raw is None or not re.fullmatch(r"-?\d+", raw):
        raise SstWriteUnsupported(f"{where}: table option {key}={raw}")
    return int(raw)


def sst_format(options_text: str, family: str, template: Path) -> SstFormat:
    """The format of column family ``family``'s new SST files: its sections of the instance's
    ``OPTIONS`` text, and ``template``, a file ``SstFileWriter`` wrote with the family's options
    (one entry). :class:`SstWriteUnsupported` when this writer does not write that format."""
    where = f"column family {family!r}"
    table = _section(options_text, f'[TableOptions/BlockBasedTable "{family}"]')
    cf = _section(options_text, f'[CFOptions "{family}"]')
    if not table or not cf:
        raise SstWriteUnsupported(f"{where}: no block-based table options in the instance's OPTIONS")
    for key, want in (("index_type", "kBinarySearch"), ("data_block_index_type", "kDataBlockBinarySearch"),
                      ("index_shortening", "kShortenSeparators"), ("block_align", "false"),
                      ("index_block_restart_interval", "1"), ("filter_policy", "nullptr"),
                      ("flush_block_policy_factory", "FlushBlockBySizePolicyFactory")):
        _need(table, key, want, where)
    m = re.search(r"max_compressed_bytes_per_kb=(\d+)", cf.get("compression_opts", ""))
    per_kb = int(m.group(1)) if m else 896
    data = template.read_bytes()
    size = len(data)
    if size < FOOTER or int.from_bytes(data[size - 8:], "little") != MAGIC:
        raise SstWriteUnsupported(f"{where}: SstFileWriter wrote no block-based table")
    version = int.from_bytes(data[size - 12:size - 8], "little")
    if version not in (4, 5):
        raise SstWriteUnsupported(f"{where}: table format_version {version} (written: 4 and 5)")
    checksum, _, meta, props = table_tail(memoryview(data), size, f"{where} SstFileWriter file")
    if checksum not in (0, 1, 4):
        raise SstWriteUnsupported(f"{where}: checksum type {checksum} (written: none, CRC32c, XXH3)")
    if set(meta) != {b"rocksdb.properties"}:
        raise SstWriteUnsupported(f"{where}: meta blocks {sorted(k.decode(errors='replace') for k in meta)}")
    unknown = set(props) - STATIC - ZERO - set(COMPUTED)
    if unknown:
        raise SstWriteUnsupported(f"{where}: table properties {sorted(k.decode(errors='replace') for k in unknown)}")
    for k in ZERO & set(props):
        if _int_prop(props, k):
            raise SstWriteUnsupported(f"{where}: table property {k.decode()} is not 0")
    compression = props.get(b"rocksdb.compression", b"")
    if compression not in (b"Snappy", b"NoCompression"):
        raise SstWriteUnsupported(f"{where}: compression {compression.decode(errors='replace')} (written: Snappy, "
                                  f"none)")
    if props.get(b"rocksdb.comparator") != BYTEWISE:
        raise SstWriteUnsupported(f"{where}: comparator {props.get(b'rocksdb.comparator')!r}")
    if _int_prop(props, b"rocksdb.index.key.is.user.key") != 1 or \
            _int_prop(props, b"rocksdb.index.value.is.delta.encoded") != 1:
        raise SstWriteUnsupported(f"{where}: an index of internal keys or full block handles")
    if _int_prop(props, b"rocksdb.external_sst_file.version") not in (0, 2) or \
            props.get(b"rocksdb.external_sst_file.version") != (2).to_bytes(4, "little"):
        raise SstWriteUnsupported(f"{where}: external SST file version other than 2")
    snappy = 1 if compression == b"Snappy" else 0
    return SstFormat(checksum, version, snappy, snappy if table.get("enable_index_compression") == "true" else 0,
                     per_kb, _int_option(table, "block_size", where), _int_option(table, "block_restart_interval",
                                                                                  where),
                     _int_option(table, "block_size_deviation", where),
                     {k: v for k, v in props.items() if k not in COMPUTED})


def session_identity() -> str:
    """A fresh 20-character session identity of RocksDB's alphabet: with the file number it makes
    the file's unique id, which block caches key on, so no two new files may share it."""
    return "".join(secrets.choice(_SESSION_ALPHABET) for _ in range(20))


def _meta_block(entries: list[tuple[bytes, bytes]], shared_prefixes: bool) -> tuple[bytes, np.ndarray]:
    """The entries and restart offsets of a meta block, keys sorted: the properties block keys
    prefix-compressed with one restart (RocksDB's ``PropertyBlockBuilder``: restart interval
    ``kMaxInt32``), the meta index block with every entry a restart (``BlockBuilder(1)``)."""
    raw = bytearray()
    restarts = [0]
    last = b""
    for i, (k, v) in enumerate(sorted(entries)):
        shared = 0
        if shared_prefixes:
            while shared < min(len(k), len(last)) and k[shared] == last[shared]:
                shared += 1
        elif i:
            restarts.append(len(raw))
        raw += _varint(shared) + _varint(len(k) - shared) + _varint(len(v)) + k[shared:] + v
        last = k
    return bytes(raw), np.array(restarts, np.int64)


class SstFileBuilder:
    """Sorted entries in, SST files of about ``target`` bytes out (``directory/prefix-N.sst``).

    :meth:`add` takes a batch of entries as flat buffers (user keys ascending, after the previous
    batch's); a file is closed once it passes ``target`` at the end of a batch, and the next
    batch begins a new one; :meth:`finish` closes the last. The entries of a block not finished
    at the end of a batch are carried into the next (a block's index separator needs the next
    block's first key)."""

    def __init__(self, fmt: SstFormat, directory: Path, prefix: str, target: int,
                 kernels: KernelTier = KERNELS) -> None:
        self.fmt = fmt
        self.directory = directory
        self.prefix = prefix
        self.target = target
        self.kernels = kernels
        self.paths: list[Path] = []
        self.file: Any = None
        self.state = np.zeros(abi.STATE_SIZE, np.int64)
        self.scratch = np.empty(max(2 * fmt.block_size, 1 << 13), np.uint8)
        self.out = np.empty(1 << 20, np.uint8)
        self.index = np.empty(1 << 16, np.uint8)
        self.index_restarts = np.zeros(1 << 12, np.int64)
        self.carry: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, koff: np.ndarray, kdata: Any, voff: np.ndarray, vdata: Any, n: int) -> None:
        """Write entries ``[0, n)`` of the buffers (``off[i]`` to ``off[i + 1]``; int64 offsets)."""
        if n == 0:
            return
        if self.file is None:
            self._open()
        start = 0
        if self.carry is not None:  # the carried block, finished by the first entries of this batch
            m = min(n, self.fmt.block_size // 4 + 2)  # an entry takes at least 4 bytes of a block
            carried = len(self.carry[0]) - 1
            bridge = _joined(self.carry, (koff, kdata, voff, vdata, m))
            self.carry = None
            nxt = self._blocks(*bridge[:4], 0, bridge[4], False)
            if nxt < carried or m == n:  # every entry of the bridge is written or carried again
                if nxt < bridge[4]:
                    self.carry = _slice(*bridge[:4], nxt, bridge[4])
                if m < n:
                    return self.add(koff[m:], kdata, voff[m:], vdata, n - m)
                return self._closed_at_target()
            start = nxt - carried
        nxt = self._blocks(koff, kdata, voff, vdata, start, n, False)
        if nxt < n:
            self.carry = _slice(koff, kdata, voff, vdata, nxt, n)
        self._closed_at_target()

    def _closed_at_target(self) -> None:
        """Close the file once it has reached the target size."""
        if int(self.state[abi.STATE_FILE_POS]) >= self.target:
            self._close()

    def finish(self) -> list[Path]:
        """Close the last file; every file written."""
        if self.file is not None:
            self._close()
        return self.paths

    def abort(self) -> None:
        """Close an open file (its directory is the caller's to remove)."""
        if self.file is not None:
            self.file.close()
            self.file = None

    def _open(self) -> None:
        path = self.directory / f"{self.prefix}-{len(self.paths)}.sst"
        self.file = open(path, "xb")
        self.paths.append(path)
        self.state[:] = 0

    def _flush(self) -> None:
        o = int(self.state[abi.STATE_OUT])
        if o:
            self.file.write(self.out[:o])
            self.state[abi.STATE_OUT] = 0

    def _blocks(self, koff: np.ndarray, kdata: Any, voff: np.ndarray, vdata: Any, start: int, stop: int,
                final: bool) -> int:
        f = self.fmt
        i = start
        while True:
            status, nxt, need = self.kernels.sst_data(
                koff, kdata, voff, vdata, i, stop, final, PUT_SEQ0, f.block_size, f.restart_interval, f.deviation,
                f.compress, f.per_kb, f.checksum, self.state, self.scratch, self.out, self.index, self.index_restarts)
            self._flush()
            if status == abi.SST_OK:
                return int(nxt)
            if status != abi.SST_CAPACITY:
                raise OutputError(f"SST file {self.paths[-1].name}: the SST writer refused its entries "
                                  f"(status {status})")
            if need > len(self.scratch):
                self.scratch = np.empty(2 * int(need), np.uint8)
            if len(self.out) < snappy_bound(len(self.scratch)) + 64:
                self.out = np.empty(2 * (snappy_bound(len(self.scratch)) + 64), np.uint8)
            if len(self.index) - int(self.state[abi.STATE_INDEX]) < len(self.scratch) + 64:
                self.index = np.resize(self.index, 2 * len(self.index) + len(self.scratch) + 64)
            if int(self.state[abi.STATE_BLOCKS]) >= len(self.index_restarts):
                self.index_restarts = np.resize(self.index_restarts, 2 * len(self.index_restarts))
            i = int(nxt)

    def _close(self) -> None:
        """The last block, the index, properties and meta index blocks and the footer."""
        if self.carry is not None:
            koff, kdata, voff, vdata = self.carry
            self.carry = None
            self._blocks(koff, kdata, voff, vdata, 0, len(koff) - 1, True)
        f = self.fmt
        st = self.state
        data_size = int(st[abi.STATE_FILE_POS])
        nblocks = int(st[abi.STATE_BLOCKS])
        index_raw = int(st[abi.STATE_INDEX])
        index_handle = (data_size, self._seal(self.index, index_raw, self.index_restarts, nblocks, f.index_compress))
        index_size = index_raw + 4 * nblocks + 4 + 5
        props = dict(f.properties)
        props.update({
            b"rocksdb.data.size": _varint(data_size), b"rocksdb.tail.start.offset": _varint(data_size),
            b"rocksdb.index.size": _varint(index_size), b"rocksdb.num.data.blocks": _varint(nblocks),
            b"rocksdb.num.entries": _varint(int(st[abi.STATE_ENTRIES])),
            b"rocksdb.raw.key.size": _varint(int(st[abi.STATE_RAW_KEYS])),
            b"rocksdb.raw.value.size": _varint(int(st[abi.STATE_RAW_VALUES])),
            b"rocksdb.creating.session.identity": session_identity().encode()})
        pos = int(st[abi.STATE_FILE_POS])
        raw, restarts = _meta_block(list(props.items()), True)
        props_handle = (pos, self._seal(np.frombuffer(raw, np.uint8), len(raw), restarts, len(restarts), 0))
        pos = int(st[abi.STATE_FILE_POS])
        raw, restarts = _meta_block([(b"rocksdb.properties", _varint(props_handle[0]) + _varint(props_handle[1]))],
                                     False)
        meta_handle = (pos, self._seal(np.frombuffer(raw, np.uint8), len(raw), restarts, len(restarts), 0))
        handles = _varint(meta_handle[0]) + _varint(meta_handle[1]) + _varint(index_handle[0]) + \
            _varint(index_handle[1])
        footer = bytes((f.checksum,)) + handles.ljust(40, b"\0") + f.format_version.to_bytes(4, "little") + \
            MAGIC.to_bytes(8, "little")
        self.file.write(footer)
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        self.file = None

    def _seal(self, raw: Any, n: int, restarts: np.ndarray, nrestarts: int, compress: int) -> int:
        """Write a block (:func:`sst_seal`) at the file's end; its size without the trailer."""
        f = self.fmt
        out = np.empty(snappy_bound(n + 4 * nrestarts + 4) + 5, np.uint8)
        status, length = self.kernels.sst_seal(raw, n, restarts, nrestarts, compress, f.per_kb, f.checksum, out)
        if status != abi.SST_OK:
            raise OutputError(f"SST file {self.paths[-1].name}: the SST writer refused a block (status {status})")
        self.file.write(out[:length])
        self.state[abi.STATE_FILE_POS] += length
        return int(length) - 5


def _slice(koff: np.ndarray, kdata: Any, voff: np.ndarray, vdata: Any, start: int,
           stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Entries ``[start, stop)`` as buffers of their own (offsets from 0)."""
    k0, k1, v0, v1 = int(koff[start]), int(koff[stop]), int(voff[start]), int(voff[stop])
    return (koff[start:stop + 1] - k0, np.frombuffer(kdata, np.uint8)[k0:k1].copy(), voff[start:stop + 1] - v0,
            np.frombuffer(vdata, np.uint8)[v0:v1].copy())


def _joined(a: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
            b: tuple[np.ndarray, Any, np.ndarray, Any, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                      np.ndarray, int]:
    """The carried entries ``a`` followed by the first ``n`` entries of ``b``."""
    koff, kdata, voff, vdata = a
    bk, bkd, bv, bvd, n = b
    kb, vb = np.frombuffer(bkd, np.uint8)[int(bk[0]):int(bk[n])], np.frombuffer(bvd, np.uint8)[int(bv[0]):int(bv[n])]
    return (np.concatenate([koff[:-1], bk[:n + 1] - bk[0] + koff[-1]]), np.concatenate([kdata, kb]),
            np.concatenate([voff[:-1], bv[:n + 1] - bv[0] + voff[-1]]), np.concatenate([vdata, vb]),
            len(koff) - 1 + n)


__all__ = ["SstFileBuilder", "SstFormat", "SstWriteUnsupported", "session_identity", "sst_format"]
