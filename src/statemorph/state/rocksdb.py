"""The RocksDB backend, :class:`EmbeddedRocksDBStateBackend` (Flink 2.x's name; the
``RocksDBStateBackend`` Flink removed in 2.0 is a deprecated alias in :mod:`statemorph.state`):
state as Flink's bytes in an embedded RocksDB (``rocksdict``).

Each state has its own column family. Keys and values use Flink's RocksDB layout:

* key: key-group prefix (1 byte, or 2 when ``max_parallelism > 128``, big-endian) ‖ serialized key
  ‖ serialized namespace (‖ serialized map user key). When both the key and the namespace
  serializer are variable-length, each is followed by its length in Flink's little-endian
  variable-byte form (``CompositeKeySerializationUtils.writeVariableIntBytes``), as Flink does to
  keep composite keys unambiguous.
* value: value state → the value; list state → elements joined by a ``,`` byte (Flink's
  ``ListDelimitedSerializer``); map state → ``isNull`` boolean ‖ value (if not null).

Restore loads bytes without deserializing anything. When a state is first registered with a
serializer that needs migration, every entry is rewritten into a *new* column family in write
batches; only when all entries migrated is the new family swapped in and the old one dropped, so a
failure part way leaves the state exactly as it was.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from ..extras import require

try:  # before anything below imports it: without the [rocksdb] extra, one line says what to install
    import rocksdict
except ImportError:
    require("rocksdict", "the RocksDB state backend")

from ..bulk import migrate
from ..bulk.capabilities import migrates_with_kernel as bulk_migration_supported
from ..errors import MalformedDataError, SavepointError, StatemorphError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..keyed.entries import state_schema
from ..keyed.keygroups import KeyGroupRange, KeyHasher
from ..keyed.kinds import StateKind
from ..typeutils import TypeSerializerSnapshot
from . import rocksdb_bulk as bulk
from .backend import KeyedStateBackend
from .resolve import StateResolution
from .states import EntryKey, StateHandle, StateTable, rows_to_batches

LIST_DELIMITER = 0x2C  # ','
_NULL = b"\x01"
_NOT_NULL = b"\x00"
_U32 = struct.Struct(">I")


def write_variable_int_bytes(value: int) -> bytes:
    """Flink's ``writeVariableIntBytes``: little-endian bytes, at least one."""
    out = bytearray()
    while True:
        out.append(value & 0xFF)
        value >>= 8
        if value == 0:
            return bytes(out)


def _prefix_successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    b = bytearray(prefix)
    while b:
        if b[-1] != 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return None


def _raw_options() -> rocksdict.Options:
    o = rocksdict.Options(raw_mode=True)
    o.create_if_missing(True)
    return o


class RocksDBStateTable(StateTable):
    """One state in one column family."""

    def __init__(self, backend: EmbeddedRocksDBStateBackend, handle: StateHandle, cf_name: str) -> None:
        self.backend = backend
        self.handle = handle
        self.cf_name = cf_name
        self.cf: Any = backend._db.create_column_family(cf_name, _raw_options())
        self._loaded_rows = 0
        self._staging: Any = None
        self._loader: bulk.SstLoader | None = None

    # -- composite keys ------------------------------------------------------------------------
    def _ambiguous(self) -> bool:
        return self.backend.key_serializer.get_length() < 0 and self.handle.namespace_serializer.get_length() < 0

    def composite(self, ek: EntryKey) -> bytes:
        kg, kb, nb = ek
        prefix = kg.to_bytes(self.backend.key_group_prefix_bytes, "big")
        if self._ambiguous():
            return b"".join((prefix, kb, write_variable_int_bytes(len(kb)), nb, write_variable_int_bytes(len(nb))))
        return b"".join((prefix, kb, nb))

    def split(self, ck: bytes) -> tuple[EntryKey, bytes]:
        """(entry key, rest) of a stored key; ``rest`` is the map user key (empty otherwise)."""
        p = self.backend.key_group_prefix_bytes
        if len(ck) < p:
            raise MalformedDataError(f"state {self.handle.name!r}: stored key 0x{ck.hex()} is shorter than the "
                                     f"key group prefix")
        kg = int.from_bytes(ck[:p], "big")
        amb = self._ambiguous()
        key_end = self._skip(self.backend.key_serializer, ck, p)
        pos = key_end + (len(write_variable_int_bytes(key_end - p)) if amb else 0)
        ns_end = self._skip(self.handle.namespace_serializer, ck, pos)
        rest = ns_end + (len(write_variable_int_bytes(ns_end - pos)) if amb else 0)
        if rest > len(ck):
            raise MalformedDataError(f"state {self.handle.name!r}: stored key 0x{ck.hex()} is truncated")
        return (kg, ck[p:key_end], ck[pos:ns_end]), ck[rest:]

    @staticmethod
    def _skip(ser: Any, data: bytes, pos: int) -> int:
        n: int = ser.get_length()
        if n >= 0:
            if pos + n > len(data):
                raise MalformedDataError(f"stored key 0x{data.hex()} is truncated at offset {pos}")
            return pos + n
        src = DataInputDeserializer(data, pos)
        ser.deserialize(src)
        return src.position

    # -- value codecs --------------------------------------------------------------------------
    def _list_slices(self, raw: bytes) -> list[bytes]:
        """Split Flink's delimited list encoding into element byte strings (parsing each element)."""
        ser = self.handle.value_serializer
        src = DataInputDeserializer(raw)
        out = []
        while src.available():
            start = src.position
            ser.deserialize(src)
            out.append(raw[start:src.position])
            if src.available():
                pos = src.position
                if src.read_unsigned_byte() != LIST_DELIMITER:
                    raise MalformedDataError(f"state {self.handle.name!r}: list delimiter expected at offset {pos}")
        return out

    def _decode_list(self, raw: bytes) -> list[Any]:
        ser = self.handle.value_serializer
        src = DataInputDeserializer(raw)
        out = []
        while src.available():
            out.append(ser.deserialize(src))
            if src.available():
                pos = src.position
                if src.read_unsigned_byte() != LIST_DELIMITER:
                    raise MalformedDataError(f"state {self.handle.name!r}: list delimiter expected at offset {pos}")
        return out

    def _encode_map_value(self, value: Any) -> bytes:
        return _NULL if value is None else _NOT_NULL + self.handle.value_serializer.to_bytes(value)

    def _decode_map_value(self, raw: bytes) -> Any:
        if not raw:
            raise MalformedDataError(f"state {self.handle.name!r}: empty map value (missing null flag)")
        return None if raw[0] else self.handle.value_serializer.from_bytes(raw[1:])

    # -- value state ----------------------------------------------------------------------------
    def get_value(self, ek: EntryKey) -> Any:
        raw = self.cf.get(self.composite(ek))
        return None if raw is None else self.handle.value_serializer.from_bytes(raw)

    def put_value(self, ek: EntryKey, value: Any) -> None:
        self.cf[self.composite(ek)] = self.handle.value_serializer.to_bytes(value)

    # -- list state -----------------------------------------------------------------------------
    def get_list(self, ek: EntryKey) -> list[Any]:
        raw = self.cf.get(self.composite(ek))
        return [] if raw is None else self._decode_list(raw)

    def _join(self, elements: list[Any]) -> bytes:
        ser = self.handle.value_serializer
        return bytes([LIST_DELIMITER]).join(ser.to_bytes(e) for e in elements)

    def add_elements(self, ek: EntryKey, elements: list[Any]) -> None:
        ck = self.composite(ek)
        new = self._join(elements)
        old = self.cf.get(ck)
        self.cf[ck] = new if not old else old + bytes([LIST_DELIMITER]) + new

    def put_list(self, ek: EntryKey, elements: list[Any]) -> None:
        self.cf[self.composite(ek)] = self._join(elements)

    # -- map state ------------------------------------------------------------------------------
    def map_get(self, ek: EntryKey, user_key: Any, uk_bytes: bytes) -> tuple[bool, Any]:
        raw = self.cf.get(self.composite(ek) + uk_bytes)
        return (False, None) if raw is None else (True, self._decode_map_value(raw))

    def map_put(self, ek: EntryKey, user_key: Any, uk_bytes: bytes, value: Any) -> None:
        self.cf[self.composite(ek) + uk_bytes] = self._encode_map_value(value)

    def map_remove(self, ek: EntryKey, uk_bytes: bytes) -> None:
        self.cf.delete(self.composite(ek) + uk_bytes)

    def _prefix_items(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for k, v in self.cf.items(from_key=prefix):
            if not k.startswith(prefix):
                return
            yield k, v

    def map_items(self, ek: EntryKey) -> Iterator[tuple[Any, Any]]:
        prefix = self.composite(ek)
        uks = self.handle.user_key_serializer
        assert uks is not None
        for k, v in self._prefix_items(prefix):
            yield uks.from_bytes(k[len(prefix):]), self._decode_map_value(v)

    def clear(self, ek: EntryKey) -> None:
        ck = self.composite(ek)
        if self.handle.kind is not StateKind.MAP:
            self.cf.delete(ck)
            return
        end = _prefix_successor(ck)
        if end is not None:
            self.cf.delete_range(ck, end)
        else:
            for k, _ in list(self._prefix_items(ck)):
                self.cf.delete(k)

    # -- savepoint rows ---------------------------------------------------------------------------
    def export_batches(self, batch_rows: int) -> Iterator[pa.RecordBatch]:
        if not self.backend.bulk:
            return rows_to_batches(self.handle.kind, self._export_rows(), batch_rows)
        return self._export_bulk(batch_rows)

    def _export_bulk(self, batch_rows: int) -> Iterator[pa.RecordBatch]:
        """Savepoint batches a chunk of stored entries at a time: keys split column-wise when the
        key and namespace lengths allow it (both fixed; or, for value and list state, a fixed
        namespace after a variable key, which is then everything in between), else entry by entry;
        map null flags stripped column-wise; list values are still split element by element (each
        element must be parsed to find its end)."""
        schema = state_schema(self.handle.kind)
        kind = self.handle.kind
        for ks, vs in bulk.iter_chunks(self.cf, batch_rows):
            kg, kb, nb, rest = self._split_column(ks)
            if kind is StateKind.MAP:
                values, bad = bulk.decode_map_values(vs)
                if bad >= 0:
                    raise self._export_error(ks[bad].as_py(), MalformedDataError(
                        "empty map value (missing null flag)" if not vs[bad].as_py()
                        else f"map value null flag 0x{vs[bad].as_py()[0]:02X} is not 0 or 1"))
                cols = [kg, kb, nb, rest, values]
            elif kind is StateKind.VALUE:
                cols = [kg, kb, nb, vs]
            else:
                counts, elements = [], []
                for k, v in zip(ks.to_pylist(), vs.to_pylist(), strict=True):
                    try:
                        parts = self._list_slices(v)
                    except StatemorphError as e:
                        raise self._export_error(k, e) from e
                    counts.append(len(parts))
                    elements.extend(parts)
                c = np.asarray(counts, dtype=np.int64)
                owner = pa.array(np.repeat(np.arange(len(c)), c))
                starts = np.repeat(np.cumsum(c) - c, c)
                index = pa.array((np.arange(int(c.sum())) - starts).astype(np.int32))
                cols = [kg.take(owner), kb.take(owner), nb.take(owner), index, pa.array(elements, pa.binary())]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)

    def _export_error(self, ck: bytes, e: BaseException) -> MalformedDataError:
        return MalformedDataError(f"state {self.handle.name!r}: stored entry 0x{ck.hex()} cannot be exported: {e}")

    def _split_column(self, ks: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array | None]:
        """(key group, key, namespace, rest) columns of stored keys; ``rest`` (the map user key)
        is None for value and list state, which must have nothing after the namespace."""
        p = self.backend.key_group_prefix_bytes
        lk = self.backend.key_serializer.get_length()
        ln = self.handle.namespace_serializer.get_length()
        is_map = self.handle.kind is StateKind.MAP
        lengths = bulk.lengths_of(ks)
        fixed = lk >= 0 and ln >= 0
        if fixed or (not is_map and ln >= 0):
            head = p + max(lk, 0) + ln
            bad = np.flatnonzero(lengths < head if (is_map or not fixed) else lengths != head)
            if len(bad):
                ck = ks[int(bad[0])].as_py()
                what = "is truncated" if len(ck) < head else \
                    f"has {len(ck) - head} unexpected bytes after the namespace"
                raise self._export_error(ck, MalformedDataError(f"stored key {what}"))
            kg = pa.array(bulk.big_endian_ints(bulk.slice_binary(ks, 0, p), p), pa.int32())
            if fixed:
                kb = bulk.slice_binary(ks, p, p + lk)
                nb = bulk.slice_binary(ks, p + lk, p + lk + ln)
                rest = bulk.slice_binary(ks, p + lk + ln) if is_map else None
            else:  # variable-length key, fixed namespace at the end
                kb = bulk.slice_binary(ks, p, -ln) if ln else bulk.slice_binary(ks, p)
                nb = bulk.slice_binary(ks, -ln) if ln else bulk.slice_binary(ks, 0, 0)
                rest = None
            return kg, bulk.binary(kb), bulk.binary(nb), None if rest is None else bulk.binary(rest)
        rows = []
        for ck in ks.to_pylist():
            try:
                (g, k, n), r = self.split(ck)
                if r and not is_map:
                    raise MalformedDataError(f"{len(r)} unexpected bytes after the namespace")
            except StatemorphError as e:
                raise self._export_error(ck, e) from e
            rows.append((g, k, n, r))
        g_col, k_col, n_col, r_col = ([row[i] for row in rows] for i in range(4))
        return (pa.array(g_col, pa.int32()), pa.array(k_col, pa.binary()), pa.array(n_col, pa.binary()),
                pa.array(r_col, pa.binary()) if is_map else None)

    def _export_rows(self) -> Iterator[tuple[Any, ...]]:
        """Savepoint rows straight from the stored bytes: keys split, list values split into
        elements, the map null flag turned into a null value; nothing is deserialized but what
        is needed to find boundaries."""
        kind = self.handle.kind
        for k, v in self.cf.items():
            try:
                (kg, kb, nb), rest = self.split(k)
                if kind is StateKind.MAP:
                    if not v:
                        raise MalformedDataError("empty map value (missing null flag)")
                    rows: list[tuple[Any, ...]] = [(kg, kb, nb, rest, None if v[:1] == _NULL else v[1:])]
                elif rest:
                    raise MalformedDataError(f"{len(rest)} unexpected bytes after the namespace")
                elif kind is StateKind.VALUE:
                    rows = [(kg, kb, nb, v)]
                else:
                    rows = [(kg, kb, nb, i, e) for i, e in enumerate(self._list_slices(v))]
            except StatemorphError as e:
                raise MalformedDataError(f"state {self.handle.name!r}: stored entry 0x{k.hex()} cannot be "
                                         f"exported: {e}") from e
            yield from rows

    def _batch(self, cf_name: str | None = None) -> rocksdict.WriteBatch:
        wb = rocksdict.WriteBatch(raw_mode=True)
        wb.set_default_column_family(self.backend._db.get_column_family_handle(cf_name or self.cf_name))
        return wb

    def load_batch(self, batch: pa.RecordBatch, row_offset: int) -> None:
        if self.backend.bulk:
            self._load_batch_bulk(batch, row_offset)
        else:
            self._load_batch_per_entry(batch, row_offset)
        self._loaded_rows += batch.num_rows

    def _load_batch_bulk(self, batch: pa.RecordBatch, row_offset: int) -> None:
        """Composite keys and stored values built column-wise, written through SST files."""
        kind = self.handle.kind
        ck = bulk.composite_keys(batch.column("key_group"), batch.column("key"), batch.column("namespace"),
                                 prefix_bytes=self.backend.key_group_prefix_bytes, ambiguous=self._ambiguous(),
                                 user_keys=batch.column("user_key") if kind is StateKind.MAP else None)
        if kind is StateKind.LIST:
            idx = batch.column("index").to_numpy(zero_copy_only=False)
            neg = np.flatnonzero(idx < 0)
            if len(neg):
                raise SavepointError(f"state {self.handle.name!r}, row {row_offset + int(neg[0])}: "
                                     f"negative list index")
            if self._staging is None:
                self._staging_name = self.cf_name + ".load"
                self._staging = self.backend._db.create_column_family(self._staging_name, _raw_options())
            if self._loader is None:
                self._loader = bulk.SstLoader(self._staging, self.backend.db_path)
            keys = bulk.concat(bulk.big_endian_fixed(bulk.lengths_of(ck), 4), ck, bulk.big_endian_fixed(idx, 4))
            dup = self._loader.add(keys, bulk.binary(batch.column("value")))
            if dup >= 0:
                raise SavepointError(f"state {self.handle.name!r}, row {row_offset + dup}: list element index "
                                     f"{idx[dup]} repeats an index of the same key and namespace")
            return
        if self._loader is None:
            self._loader = bulk.SstLoader(self.cf, self.backend.db_path)
        values = bulk.encode_map_values(batch.column("value")) if kind is StateKind.MAP \
            else bulk.binary(batch.column("value"))
        dup = self._loader.add(ck, values)
        if dup >= 0:
            raise SavepointError(f"state {self.handle.name!r}, row {row_offset + dup}: duplicate entry (same key, "
                                 f"namespace{' and map key' if kind is StateKind.MAP else ''} as an earlier row)")

    def _load_batch_per_entry(self, batch: pa.RecordBatch, row_offset: int) -> None:
        cols = batch.to_pydict()
        kind = self.handle.kind
        if kind is StateKind.LIST:
            if self._staging is None:
                self._staging_name = self.cf_name + ".load"
                self._staging = self.backend._db.create_column_family(self._staging_name, _raw_options())
            wb = self._batch(self._staging_name)
            for i in range(batch.num_rows):
                idx = cols["index"][i]
                if idx < 0:
                    raise SavepointError(f"state {self.handle.name!r}, row {row_offset + i}: negative list index")
                ck = self.composite((cols["key_group"][i], cols["key"][i], cols["namespace"][i]))
                wb.put(_U32.pack(len(ck)) + ck + _U32.pack(idx), cols["value"][i])
            self.backend._db.write(wb)
        else:
            wb = self._batch()
            for i in range(batch.num_rows):
                ck = self.composite((cols["key_group"][i], cols["key"][i], cols["namespace"][i]))
                if kind is StateKind.MAP:
                    raw = cols["value"][i]
                    wb.put(ck + cols["user_key"][i], _NULL if raw is None else _NOT_NULL + raw)
                else:
                    wb.put(ck, cols["value"][i])
            self.backend._db.write(wb)

    def finish_load(self) -> None:
        loader, self._loader = self._loader, None
        if loader is not None:
            loader.ingest()
        if self._staging is not None:
            self._assemble_lists()
            return
        if loader is not None and loader.disjoint:
            return  # every key was checked against its chunk, and chunks never overlap
        stored = bulk.count_keys(self.cf)
        if stored != self._loaded_rows:
            raise SavepointError(f"state {self.handle.name!r}: {self._loaded_rows - stored} duplicate entries "
                                 f"(same key, namespace{' and map key' if self.handle.kind is StateKind.MAP else ''})")

    def _assemble_lists(self) -> None:
        """Staged rows are ordered by (composite key, index): join each run into Flink's list value."""
        wb = self._batch()
        current: bytes | None = None
        parts: list[bytes] = []
        pending = total = 0

        def flush_list() -> None:
            if current is not None:
                wb.put(current, bytes([LIST_DELIMITER]).join(parts))

        for k, v in self._staging.items():
            n = _U32.unpack_from(k)[0]
            ck, idx = k[4:4 + n], _U32.unpack_from(k, 4 + n)[0]
            if ck != current:
                flush_list()
                current, parts = ck, []
            if idx != len(parts):
                what = "repeated" if idx < len(parts) else f"missing index {len(parts)}"
                raise SavepointError(f"state {self.handle.name!r}, key 0x{ck.hex()}: list indices are not "
                                     f"0..n-1 ({what})")
            parts.append(v)
            pending += 1
            if pending >= 10000:
                # write what we have; if the run continues, the longer value overwrites this one
                flush_list()
                self.backend._db.write(wb)
                wb = self._batch()
                pending = 0
            total += 1
        flush_list()
        if total != self._loaded_rows:
            raise SavepointError(f"state {self.handle.name!r}: {self._loaded_rows - total} list elements repeat "
                                 f"an index of the same key and namespace")
        self.backend._db.write(wb)
        self._drop_staging()

    def _drop_staging(self) -> None:
        if self._staging is not None:
            self._staging = None
            self.backend._db.drop_column_family(self._staging_name)

    def release(self) -> None:
        """Let go of the column-family handles so that closing the database releases its lock."""
        self.cf = None
        self._staging = None

    def drop(self) -> None:
        if self._loader is not None:
            self._loader.discard()
            self._loader = None
        if self.backend._db_open:
            self._drop_staging()
            self.backend._db.drop_column_family(self.cf_name)


class EmbeddedRocksDBStateBackend(KeyedStateBackend):
    """Keyed state in an embedded RocksDB. ``db_path`` must not exist or be empty; without it a
    temporary directory is used and removed on :meth:`close`. See :class:`KeyedStateBackend`."""

    def __init__(
        self,
        key_serializer: Any,
        max_parallelism: int = 128,
        *,
        db_path: str | os.PathLike[str] | None = None,
        key_group_range: KeyGroupRange | tuple[int, int] | None = None,
        key_hasher: KeyHasher | None = None,
        migration_batch_rows: int = bulk.DEFAULT_CHUNK_ROWS,
        bulk: bool = True,
        threads: int = 1,
    ) -> None:
        super().__init__(key_serializer, max_parallelism, key_group_range=key_group_range, key_hasher=key_hasher)
        if db_path is None:
            self.db_path = Path(tempfile.mkdtemp(prefix="statemorph-rocksdb-"))
            self._owns_dir = True
        else:
            # RocksDB locks by path text: an absolute path keeps two relative "db" dirs apart
            self.db_path = Path(db_path).absolute()
            if self.db_path.exists() and (not self.db_path.is_dir() or any(self.db_path.iterdir())):
                raise ValueError(f"db_path {self.db_path} exists and is not an empty directory")
            self._owns_dir = False
        self._created_dir = not self.db_path.exists() or self._owns_dir
        self._db: Any = rocksdict.Rdict(str(self.db_path), _raw_options())
        self._db_open = True
        self._cf_seq = 0
        if migration_batch_rows < 1 or threads < 1:
            raise ValueError("migration_batch_rows and threads must be positive")
        self._migration_batch_rows = migration_batch_rows
        self.bulk = bulk
        """Restore, migrate and savepoint a chunk of entries at a time with Arrow columns (the
        default); False selects the one-entry-at-a-time reference path (same bytes, slower)."""
        self.threads = threads
        """Threads for the bulk migration kernels (they release the GIL)."""

    def _next_cf_name(self) -> str:
        self._cf_seq += 1
        return f"state-{self._cf_seq}"

    def _create_table(self, handle: StateHandle) -> StateTable:
        return RocksDBStateTable(self, handle, self._next_cf_name())

    def _migrate_table(self, handle: StateHandle, old_value_snapshot: TypeSerializerSnapshot,
                       resolution: StateResolution) -> StateTable:
        """Every entry into a new column family (swapped in by the caller only on success).

        Value and map state whose serializers the bulk kernels migrate go a chunk at a time
        through :func:`statemorph.bulk.migrate` into SST files; everything else (and any chunk
        the kernels reject, to name the first bad entry exactly) goes entry by entry."""
        old = handle.table
        assert isinstance(old, RocksDBStateTable)
        new_ser = resolution.value_serializer
        assert new_ser is not None
        new = RocksDBStateTable(self, handle, self._next_cf_name())
        try:
            if self.bulk and handle.kind is not StateKind.LIST and \
                    bulk_migration_supported(old_value_snapshot, new_ser):
                self._migrate_bulk(old, new, old_value_snapshot, new_ser)
            else:
                self._migrate_per_entry(old, new, old_value_snapshot, new_ser)
        except BaseException:
            new.drop()
            raise
        return new

    def _migrate_bulk(self, old: RocksDBStateTable, new: RocksDBStateTable, snapshot: TypeSerializerSnapshot,
                      new_ser: Any) -> None:
        loader = bulk.SstLoader(new.cf, self.db_path)
        new._loader = loader  # discarded with the table if anything fails
        is_map = old.handle.kind is StateKind.MAP
        for ks, vs in bulk.iter_chunks(old.cf, self._migration_batch_rows):
            try:
                values = vs
                if is_map:
                    values, bad = bulk.decode_map_values(vs)
                    if bad >= 0:
                        raise MalformedDataError(f"entry {bad} of the chunk has no valid null flag")
                migrated = bulk.binary(migrate(values, snapshot, new_ser, threads=self.threads).values)
                if is_map:
                    migrated = bulk.encode_map_values(migrated)
            except StatemorphError as e:
                # the per-entry path finds and names the first bad entry of this chunk
                self._migrate_per_entry_chunk(old, snapshot, new_ser, ks, vs)
                row = getattr(e, "row", None)
                where = self._describe_entry(old, ks[row].as_py()) if isinstance(row, int) and 0 <= row < len(ks) \
                    else f"the chunk starting at {self._describe_entry(old, ks[0].as_py())}"
                raise self.migration_error(old.handle, where, e) from e
            loader.add(ks, migrated)
        new._loader = None
        loader.ingest()

    def _migrate_per_entry_chunk(self, old: RocksDBStateTable, snapshot: TypeSerializerSnapshot, new_ser: Any,
                                 ks: pa.Array, vs: pa.Array) -> None:
        prior = snapshot.restore_serializer()
        for k, v in zip(ks.to_pylist(), vs.to_pylist(), strict=True):
            try:
                self._migrate_entry(old.handle.kind, snapshot, prior, new_ser, v)
            except (StatemorphError, ValueError) as e:  # a value that cannot be converted
                raise self.migration_error(old.handle, self._describe_entry(old, k), e) from e

    @staticmethod
    def _migrate_entry(kind: StateKind, snapshot: TypeSerializerSnapshot, prior: Any, new_ser: Any,
                       v: bytes) -> bytes:
        src = DataInputDeserializer(v)
        out = DataOutputSerializer()
        if kind is StateKind.VALUE:
            snapshot.migrate_state(prior, new_ser, src, out)
        elif kind is StateKind.LIST:
            while src.available():
                snapshot.migrate_element(prior, new_ser, prior.deserialize(src), out)
                if src.available():
                    pos = src.position
                    if src.read_unsigned_byte() != LIST_DELIMITER:
                        raise MalformedDataError(f"list delimiter expected at offset {pos}")
                    out.write_byte(LIST_DELIMITER)
        else:
            if src.read_boolean():
                out.write_boolean(True)
            else:
                out.write_boolean(False)
                snapshot.migrate_state(prior, new_ser, src, out)
        src.expect_end("the value")
        return out.get_copy_of_buffer()

    def _migrate_per_entry(self, old: RocksDBStateTable, new: RocksDBStateTable, snapshot: TypeSerializerSnapshot,
                           new_ser: Any) -> None:
        prior = snapshot.restore_serializer()
        kind = old.handle.kind
        wb = new._batch()
        pending = 0
        for k, v in old.cf.items():
            try:
                wb.put(k, self._migrate_entry(kind, snapshot, prior, new_ser, v))
            except (StatemorphError, ValueError) as e:  # a value that cannot be converted
                raise self.migration_error(old.handle, self._describe_entry(old, k), e) from e
            pending += 1
            if pending >= self._migration_batch_rows:
                self._db.write(wb)
                wb = new._batch()
                pending = 0
        self._db.write(wb)

    def _describe_entry(self, table: RocksDBStateTable, ck: bytes) -> str:
        try:
            (kg, kb, _), rest = table.split(ck)
        except StatemorphError:  # only for a message
            return f"stored key 0x{ck.hex()}"
        where = f"key {self.describe_key(kb)} (key group {kg})"
        if rest and table.handle.user_key_serializer is not None:
            try:
                where += f", map key {table.handle.user_key_serializer.from_bytes(rest)!r}"
            except StatemorphError:
                where += f", map key 0x{rest.hex()}"
        return where

    def _discard(self) -> None:
        """A failed restore leaves no half-loaded database behind (a given, pre-existing empty
        directory is emptied, one this backend created is removed)."""
        self.close()
        if self.db_path.exists():
            if self._created_dir:
                shutil.rmtree(self.db_path, ignore_errors=True)
            else:
                for p in self.db_path.iterdir():
                    if p.is_dir():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        p.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the database. A temporary ``db_path`` is removed; a given one keeps its files."""
        if self._closed:
            return
        self._closed = True
        if self._db_open:
            self._db_open = False
            # rocksdict keeps the database (and its LOCK) alive while any column-family handle lives
            for handle in self._handles.values():
                table = handle.table
                if isinstance(table, RocksDBStateTable):
                    table.release()
            self._db.close()
        if self._owns_dir:
            shutil.rmtree(self.db_path, ignore_errors=True)


__all__ = ["EmbeddedRocksDBStateBackend", "RocksDBStateTable", "bulk_migration_supported",
           "write_variable_int_bytes"]
