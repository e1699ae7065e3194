"""The RocksDB backend: state as Flink's bytes in an embedded RocksDB (``rocksdict``).

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

import pyarrow as pa

try:
    import rocksdict
except ImportError as _e:  # pragma: no cover - exercised only without the optional dependency
    raise ImportError("RocksDBStateBackend needs the optional dependency rocksdict: "
                      "pip install 'statemorph[rocksdb]'") from _e

from ..errors import MalformedDataError, SavepointError
from ..io import DataInputDeserializer, DataOutputSerializer
from ..snapshot import TypeSerializerSnapshot
from .backend import KeyedStateBackend
from .descriptors import StateKind
from .keygroups import KeyGroupRange, KeyHasher
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

    def __init__(self, backend: RocksDBStateBackend, handle: StateHandle, cf_name: str) -> None:
        self.backend = backend
        self.handle = handle
        self.cf_name = cf_name
        self.cf: Any = backend._db.create_column_family(cf_name, _raw_options())
        self._loaded_rows = 0
        self._staging: Any = None

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
        n = ser.get_length()
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
        return rows_to_batches(self.handle.kind, self._export_rows(), batch_rows)

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
            except Exception as e:
                raise MalformedDataError(f"state {self.handle.name!r}: stored entry 0x{k.hex()} cannot be "
                                         f"exported: {e}") from e
            yield from rows

    def _batch(self, cf_name: str | None = None) -> rocksdict.WriteBatch:
        wb = rocksdict.WriteBatch(raw_mode=True)
        wb.set_default_column_family(self.backend._db.get_column_family_handle(cf_name or self.cf_name))
        return wb

    def load_batch(self, batch: pa.RecordBatch, row_offset: int) -> None:
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
        self._loaded_rows += batch.num_rows

    def finish_load(self) -> None:
        if self._staging is not None:
            self._assemble_lists()
            return
        stored = sum(1 for _ in self.cf.keys())
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

    def drop(self) -> None:
        if self.backend._db_open:
            self._drop_staging()
            self.backend._db.drop_column_family(self.cf_name)


class RocksDBStateBackend(KeyedStateBackend):
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
        migration_batch_rows: int = 10000,
    ) -> None:
        super().__init__(key_serializer, max_parallelism, key_group_range=key_group_range, key_hasher=key_hasher)
        if db_path is None:
            self.db_path = Path(tempfile.mkdtemp(prefix="statemorph-rocksdb-"))
            self._owns_dir = True
        else:
            self.db_path = Path(db_path)
            if self.db_path.exists() and (not self.db_path.is_dir() or any(self.db_path.iterdir())):
                raise ValueError(f"db_path {self.db_path} exists and is not an empty directory")
            self._owns_dir = False
        self._created_dir = not self.db_path.exists() or self._owns_dir
        self._db: Any = rocksdict.Rdict(str(self.db_path), _raw_options())
        self._db_open = True
        self._cf_seq = 0
        self._migration_batch_rows = migration_batch_rows

    def _next_cf_name(self) -> str:
        self._cf_seq += 1
        return f"state-{self._cf_seq}"

    def _create_table(self, handle: StateHandle) -> StateTable:
        return RocksDBStateTable(self, handle, self._next_cf_name())

    def _migrate_table(self, handle: StateHandle, old_value_snapshot: TypeSerializerSnapshot,
                       resolution: StateResolution) -> StateTable:
        old = handle.table
        assert isinstance(old, RocksDBStateTable)
        new_ser = resolution.value_serializer
        assert new_ser is not None
        prior = old_value_snapshot.restore_serializer()
        new = RocksDBStateTable(self, handle, self._next_cf_name())
        kind = handle.kind
        wb = new._batch()
        pending = 0
        k = b""
        try:
            for k, v in old.cf.items():
                src = DataInputDeserializer(v)
                out = DataOutputSerializer()
                if kind is StateKind.VALUE:
                    old_value_snapshot.migrate_state(prior, new_ser, src, out)
                elif kind is StateKind.LIST:
                    while src.available():
                        old_value_snapshot.migrate_element(prior, new_ser, prior.deserialize(src), out)
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
                        old_value_snapshot.migrate_state(prior, new_ser, src, out)
                src.expect_end("the value")
                wb.put(k, out.get_copy_of_buffer())
                pending += 1
                if pending >= self._migration_batch_rows:
                    self._db.write(wb)
                    wb = new._batch()
                    pending = 0
            self._db.write(wb)
        except Exception as e:
            new.drop()
            raise self.migration_error(handle, self._describe_entry(old, k), e) from e
        return new

    def _describe_entry(self, table: RocksDBStateTable, ck: bytes) -> str:
        try:
            (kg, kb, _), rest = table.split(ck)
        except Exception:  # noqa: BLE001 - only for a message
            return f"stored key 0x{ck.hex()}"
        where = f"key {self.describe_key(kb)} (key group {kg})"
        if rest and table.handle.user_key_serializer is not None:
            try:
                where += f", map key {table.handle.user_key_serializer.from_bytes(rest)!r}"
            except Exception:  # noqa: BLE001
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
            self._db.close()
        if self._owns_dir:
            shutil.rmtree(self.db_path, ignore_errors=True)


__all__ = ["RocksDBStateBackend", "RocksDBStateTable", "write_variable_int_bytes"]
