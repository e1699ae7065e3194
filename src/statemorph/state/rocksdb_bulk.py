"""Bulk paths of the RocksDB backend: whole Arrow columns in, whole Arrow columns out.

Why: restoring, migrating and savepointing billions of entries one Python object at a time spends
nearly all its time in the interpreter. Here the per-entry work (building Flink's composite keys,
the map null flag, splitting stored keys back into key / namespace / user key) is done on whole
columns with pyarrow compute and numpy, so the only per-entry Python left is handing bytes to
RocksDB (``rocksdict`` has no bulk put) and reading them back out of its iterator.

Writes go through :class:`SstLoader`: each chunk is sorted (vectorised) and written to an SST file
that RocksDB ingests whole, which skips the memtable, the WAL and flush compaction; measured
faster than ``WriteBatch`` at every size we tried (see ``benchmarks/test_state_backend_bulk.py``).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import operator
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import rocksdict

NULL_FLAG = b"\x01"
NOT_NULL_FLAG = b"\x00"
DEFAULT_CHUNK_ROWS = 65536
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)


def binary(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous ``binary`` array (chunked / large_binary inputs normalised)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    return arr if arr.type == pa.binary() else arr.cast(pa.binary())


def _from_parts(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    """A binary array from per-row lengths and the concatenated bytes."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(lengths),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])


def big_endian_fixed(values: np.ndarray, width: int) -> pa.Array:
    """Each non-negative int as ``width`` big-endian bytes (the key group prefix, list staging keys)."""
    v = np.asarray(values, dtype=np.int64)
    if len(v) and (v.min() < 0 or v.max() >= 1 << (8 * width)):
        raise ValueError(f"values outside 0..{(1 << (8 * width)) - 1} cannot be written in {width} bytes")
    dt = {1: ">u1", 2: ">u2", 4: ">u4"}[width]
    data = v.astype(dt).view(np.uint8)
    return _from_parts(np.full(len(v), width, dtype=np.int32), data)


def variable_int_bytes(lengths: np.ndarray) -> pa.Array:
    """Flink's ``writeVariableIntBytes`` for every length: little-endian, fewest bytes, at least one."""
    v = np.asarray(lengths, dtype=np.uint32)
    width = 1 + (v >= 1 << 8).astype(np.int32) + (v >= 1 << 16) + (v >= 1 << 24)
    le = v.astype("<u4").view(np.uint8).reshape(-1, 4)
    data = le[np.arange(4)[None, :] < width[:, None]]  # row-major: each row's bytes stay in order
    return _from_parts(width.astype(np.int32), data)


def concat(*arrays: pa.Array) -> pa.Array:
    """Row-wise concatenation of binary arrays (a null anywhere gives null)."""
    return binary(pc.binary_join_element_wise(*arrays, b""))


def big_endian_ints(fixed: pa.Array, width: int) -> np.ndarray:
    """The ints written as ``width`` big-endian bytes in each entry of a binary array whose entries
    are all exactly ``width`` bytes long."""
    f = binary(fixed).cast(pa.binary(width))
    data = f.buffers()[1]
    dt = {1: ">u1", 2: ">u2", 4: ">u4"}[width]
    return np.frombuffer(data, dtype=dt, count=len(f), offset=f.offset * width).astype(np.int64)


def slice_binary(arr: pa.Array, start: int, stop: int | None = None) -> pa.Array:
    """``value[start:stop]`` of every entry (Python slice semantics), nulls kept. Done with numpy
    because ``pc.binary_slice`` fails ("Negative buffer resize") on some inputs whose slices are
    empty (pyarrow 26)."""
    a = binary(arr)
    n = len(a)
    bufs = a.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=a.offset * 4).astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lens = off[1:] - off[:-1]
    lo = np.clip(lens + start, 0, lens) if start < 0 else np.minimum(start, lens)
    hi = lens if stop is None else np.clip(lens + stop if stop < 0 else np.full(n, stop), 0, lens)
    out_lens = np.maximum(hi - lo, 0)
    src = off[:-1] + lo
    out_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(out_lens, out=out_off[1:])
    idx = np.repeat(src - out_off[:-1], out_lens) + np.arange(int(out_off[-1]), dtype=np.int64)
    validity = None
    if a.null_count:
        validity = pa.py_buffer(np.packbits(a.is_valid().to_numpy(zero_copy_only=False), bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(out_off.astype(np.int32)),
                                                  pa.py_buffer(data[idx])], null_count=a.null_count)


def lengths_of(arr: pa.Array) -> np.ndarray:
    lengths: np.ndarray = pc.binary_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    return lengths


def composite_keys(key_groups: pa.Array, keys: pa.Array, namespaces: pa.Array, *, prefix_bytes: int,
                   ambiguous: bool, user_keys: pa.Array | None = None) -> pa.Array:
    """Flink's RocksDB keys for whole columns: key group prefix ‖ key ‖ namespace [‖ user key];
    with ``ambiguous`` (key and namespace both variable-length) the key and the namespace are each
    followed by their length in Flink's variable-int form."""
    kg = np.asarray(key_groups.to_numpy(zero_copy_only=False))
    parts = [big_endian_fixed(kg, prefix_bytes), binary(keys)]
    if ambiguous:
        parts.append(variable_int_bytes(lengths_of(parts[1])))
    parts.append(binary(namespaces))
    if ambiguous:
        parts.append(variable_int_bytes(lengths_of(parts[-1])))
    if user_keys is not None:
        parts.append(binary(user_keys))
    return concat(*parts)


def encode_map_values(values: pa.Array) -> pa.Array:
    """Map state values as stored: ``0x01`` for a null value, else ``0x00`` ‖ value."""
    v = binary(values)
    flagged = concat(big_endian_fixed(np.zeros(len(v), dtype=np.int64), 1), v)  # 0x00 = NOT_NULL_FLAG
    return binary(pc.fill_null(flagged, pa.scalar(NULL_FLAG, pa.binary())))


def decode_map_values(values: pa.Array) -> tuple[pa.Array, int]:
    """(the values with the null flag removed, null for a null map value; index of the first value
    that is empty or has a flag other than 0 / 1, or -1)."""
    v = binary(values)
    flag = slice_binary(v, 0, 1)
    is_null = pc.equal(flag, pa.scalar(NULL_FLAG, pa.binary()))
    ok = pc.or_(is_null, pc.equal(flag, pa.scalar(NOT_NULL_FLAG, pa.binary())))
    bad = np.flatnonzero(~ok.to_numpy(zero_copy_only=False))
    stripped = slice_binary(v, 1)  # offset 0, no nulls: v has none
    nulls = is_null.to_numpy(zero_copy_only=False)
    if nulls.any():  # (pc.if_else trips over all-empty binary columns; set the validity bitmap directly)
        bitmap = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
        stripped = pa.Array.from_buffers(pa.binary(), len(v), [bitmap, *stripped.buffers()[1:]],
                                         null_count=int(nulls.sum()))
    return stripped, int(bad[0]) if len(bad) else -1


def is_strictly_increasing(keys: pa.Array) -> bool:
    """Byte-wise strictly increasing (so no key repeats)."""
    if len(keys) < 2:
        return True
    return bool(pc.all(pc.less(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py())


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def iter_chunks(cf: Any, chunk_rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[tuple[pa.Array, pa.Array]]:
    """(keys, values) binary arrays of a column family in key order, ``chunk_rows`` at a time."""
    items = iter(cf.items())
    while True:
        with _no_gc():  # a chunk is many short-lived tuples; the cycle collector would rescan them
            chunk = list(itertools.islice(items, chunk_rows))
        if not chunk:
            return
        # (itemgetter through map stays in C; zip(*chunk) with one argument per entry is far slower)
        yield pa.array(list(map(_FIRST, chunk)), pa.binary()), pa.array(list(map(_SECOND, chunk)), pa.binary())


def raw_options() -> rocksdict.Options:
    o = rocksdict.Options(raw_mode=True)
    o.create_if_missing(True)
    return o


class SstLoader:
    """Writes (key, value) chunks into one column family through SST files and ingests them.

    Each chunk is sorted on its own and becomes one SST file (RocksDB requires sorted, unique keys
    inside a file); a key repeated inside a chunk is reported by :meth:`add` (the caller decides
    whether that is an error). Files wait in a private temporary directory next to the database
    and are ingested by :meth:`ingest` (moved, not copied); :meth:`discard` removes them.
    """

    def __init__(self, cf: Any, db_path: Path, target_file_rows: int = 1 << 20) -> None:
        self.cf = cf
        self.dir = Path(tempfile.mkdtemp(prefix=".sst-", dir=db_path))
        self.files: list[str] = []
        self.target_file_rows = target_file_rows
        self._writer: Any = None
        self._rows_in_file = 0
        self._last: bytes | None = None
        self.disjoint = True
        """No key can be in two files (chunks arrived in increasing key order)."""

    def add(self, keys: pa.Array, values: pa.Array) -> int:
        """Append a chunk; returns the index (into the given chunk) of a key that repeats inside
        it, or -1. A chunk whose keys all follow the previous chunk's (e.g. a copy of a column
        family, or a savepoint written from RocksDB) continues the current file; otherwise it starts
        a new one and the files overlap (:attr:`disjoint` turns False)."""
        if len(keys) == 0:
            return -1
        if not is_strictly_increasing(keys):
            order = pc.sort_indices(keys)
            keys, values = keys.take(order), values.take(order)
            same = pc.equal(keys.slice(0, len(keys) - 1), keys.slice(1)).to_numpy(zero_copy_only=False)
            dup = np.flatnonzero(same)
            if len(dup):
                return int(order[int(dup[0]) + 1].as_py())
        first = keys[0].as_py()
        if self._last is not None and first <= self._last:
            self.disjoint = False
            self._close_file()
        elif self._rows_in_file >= self.target_file_rows:
            self._close_file()
        if self._writer is None:
            self._open_file()
        put = self._writer.__setitem__
        for k, v in zip(keys.to_pylist(), values.to_pylist(), strict=True):
            put(k, v)
        self._rows_in_file += len(keys)
        last = keys[len(keys) - 1].as_py()
        self._last = last if self._last is None or last > self._last else self._last
        return -1

    def _open_file(self) -> None:
        path = str(self.dir / f"{len(self.files):06d}.sst")
        self._writer = rocksdict.SstFileWriter(raw_options())
        self._writer.open(path)
        self.files.append(path)
        self._rows_in_file = 0

    def _close_file(self) -> None:
        if self._writer is not None:
            self._writer.finish()
            self._writer = None

    def ingest(self) -> None:
        """Ingest every file written (later files win for a key in several); then clean up."""
        self._close_file()
        try:
            if self.files:
                opts = rocksdict.IngestExternalFileOptions()
                opts.set_move_files(True)
                self.cf.ingest_external_file(self.files, opts)
        finally:
            self.discard()

    def discard(self) -> None:
        if self._writer is not None:
            try:
                self._writer.finish()
            except Exception:  # noqa: BLE001 - best effort while already failing
                pass
            self._writer = None
        self.files = []
        shutil.rmtree(self.dir, ignore_errors=True)


def count_keys(cf: Any) -> int:
    """The number of keys in a column family, exactly.

    Iterating every key from Python is slow (and slower still over overlapping SST files), so the
    column family is compacted into one sorted run first (which also drops any overwritten
    versions and makes later reads faster); then RocksDB's table properties hold the exact count
    of distinct keys. Falls back to iterating when the properties cannot be read or report deletions."""
    cf.compact_range(None, None)
    props = cf.property_value("rocksdb.aggregated-table-properties") or ""
    fields = dict(part.strip().split("=", 1) for part in props.split(";") if "=" in part)
    try:
        entries, deletions = int(fields["# entries"]), int(fields["# deletions"])
    except (KeyError, ValueError):
        entries, deletions = -1, -1
    if deletions == 0 and entries >= 0:
        return entries
    return sum(1 for _ in cf.keys())


__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "SstLoader",
    "big_endian_fixed",
    "big_endian_ints",
    "binary",
    "composite_keys",
    "concat",
    "count_keys",
    "decode_map_values",
    "encode_map_values",
    "is_strictly_increasing",
    "iter_chunks",
    "lengths_of",
    "slice_binary",
    "variable_int_bytes",
]
