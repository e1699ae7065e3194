"""The heap backend, :class:`HashMapStateBackend` (Flink 2.x's name for its heap backend; the
pre-2.0 name ``HeapStateBackend`` is a deprecated alias in :mod:`statemorph.state`): state as
Python objects in dictionaries.

Entries are addressed by the serialized key and namespace (not the key objects) so that keys
compare exactly as Flink compares them (``True`` and ``1`` are different keys of different types
in Java but equal in Python) and unhashable key values (lists, dicts) work. Restore deserializes
every entry eagerly with the serializers restored from the savepoint's snapshots; a migration
converts every value with the old snapshot's ``migrate_value`` into a new table and swaps it in only
when all of them converted and serialize with the new serializer.

Like Flink's heap backend, values are stored as given (not copied, not serialized) on write; a
value the serializer cannot write is reported by the next savepoint, naming the state and key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..errors import SavepointError, SerializationError, StateMigrationError, StatemorphError
from ..keyed.kinds import StateKind
from ..typeutils import TypeSerializerSnapshot
from .backend import KeyedStateBackend
from .resolve import StateResolution
from .states import EntryKey, StateHandle, StateTable, rows_to_batches


class HeapStateTable(StateTable):
    """value: ``{ek: value}``; list: ``{ek: [elements]}``; map: ``{ek: {uk_bytes: (user_key, value)}}``."""

    def __init__(self, backend: HashMapStateBackend, handle: StateHandle) -> None:
        self.backend = backend
        self.handle = handle
        self.data: dict[EntryKey, Any] = {}
        self._pending_lists: dict[EntryKey, dict[int, Any]] = {}

    # value
    def get_value(self, ek: EntryKey) -> Any:
        return self.data.get(ek)

    def put_value(self, ek: EntryKey, value: Any) -> None:
        self.data[ek] = value

    # list
    def get_list(self, ek: EntryKey) -> list[Any]:
        return list(self.data.get(ek, ()))

    def add_elements(self, ek: EntryKey, elements: list[Any]) -> None:
        self.data.setdefault(ek, []).extend(elements)

    def put_list(self, ek: EntryKey, elements: list[Any]) -> None:
        self.data[ek] = list(elements)

    # map
    def map_get(self, ek: EntryKey, user_key: Any, uk_bytes: bytes) -> tuple[bool, Any]:
        m = self.data.get(ek)
        if m is None or uk_bytes not in m:
            return False, None
        return True, m[uk_bytes][1]

    def map_put(self, ek: EntryKey, user_key: Any, uk_bytes: bytes, value: Any) -> None:
        self.data.setdefault(ek, {})[uk_bytes] = (user_key, value)

    def map_remove(self, ek: EntryKey, uk_bytes: bytes) -> None:
        m = self.data.get(ek)
        if m is not None:
            m.pop(uk_bytes, None)
            if not m:
                del self.data[ek]

    def map_items(self, ek: EntryKey) -> Iterator[tuple[Any, Any]]:
        m = self.data.get(ek)
        if m:
            yield from list(m.values())

    def clear(self, ek: EntryKey) -> None:
        self.data.pop(ek, None)

    def drop(self) -> None:
        self.data = {}

    # -- savepoint rows ------------------------------------------------------------------------
    def _where(self, ek: EntryKey) -> str:
        return f"state {self.handle.name!r}, key {self.backend.describe_key(ek[1])} (key group {ek[0]})"

    def _ser(self, ser: Any, value: Any, ek: EntryKey, what: str) -> bytes:
        try:
            return bytes(ser.to_bytes(value))
        except (StatemorphError, TypeError, ValueError, OverflowError) as e:  # a value the serializer refuses
            raise SerializationError(f"{self._where(ek)}: cannot write {what} {value!r} with "
                                     f"{type(ser).__name__}: {e}") from e

    def export_batches(self, batch_rows: int) -> Iterator[pa.RecordBatch]:
        return rows_to_batches(self.handle.kind, self._export_rows(), batch_rows)

    def _export_rows(self) -> Iterator[tuple[Any, ...]]:
        kind, vs = self.handle.kind, self.handle.value_serializer
        for ek in sorted(self.data):
            kg, kb, nb = ek
            stored = self.data[ek]
            if kind is StateKind.VALUE:
                yield (kg, kb, nb, self._ser(vs, stored, ek, "value"))
            elif kind is StateKind.LIST:
                for i, e in enumerate(stored):
                    yield (kg, kb, nb, i, self._ser(vs, e, ek, f"list element {i}"))
            else:
                for ub, (uk, v) in sorted(stored.items()):
                    yield (kg, kb, nb, ub, None if v is None else self._ser(vs, v, ek, f"map value of {uk!r}"))

    def load_batch(self, batch: pa.RecordBatch, row_offset: int) -> None:
        h = self.handle
        cols = batch.to_pydict()
        key_ser, vs, uks = self.backend.key_serializer, h.value_serializer, h.user_key_serializer
        for i in range(batch.num_rows):
            row = row_offset + i
            ek: EntryKey = (cols["key_group"][i], cols["key"][i], cols["namespace"][i])
            try:
                key_ser.from_bytes(ek[1])
                h.namespace_serializer.from_bytes(ek[2])
                raw = cols["value"][i]
                value = None if raw is None else vs.from_bytes(raw)
                if h.kind is StateKind.VALUE:
                    if ek in self.data:
                        raise SavepointError("duplicate entry for the same key and namespace")
                    self.data[ek] = value
                elif h.kind is StateKind.LIST:
                    idx = cols["index"][i]
                    pending = self._pending_lists.setdefault(ek, {})
                    if idx < 0 or idx in pending:
                        raise SavepointError(f"list index {idx} is negative or repeated")
                    pending[idx] = value
                else:
                    assert uks is not None
                    ub = cols["user_key"][i]
                    m = self.data.setdefault(ek, {})
                    if ub in m:
                        raise SavepointError("duplicate map key")
                    m[ub] = (uks.from_bytes(ub), value)
            except StatemorphError as e:
                raise SavepointError(f"state {h.name!r}, row {row} (key group {ek[0]}): cannot be restored: "
                                     f"{type(e).__name__}: {e}") from e

    def finish_load(self) -> None:
        for ek, pending in self._pending_lists.items():
            n = len(pending)
            if set(pending) != set(range(n)):
                missing = sorted(set(range(max(pending) + 1)) - set(pending))[:5]
                raise SavepointError(f"state {self.handle.name!r}, key {self.backend.describe_key(ek[1])}: list "
                                     f"indices are not 0..{n - 1} (missing e.g. {missing})")
            self.data[ek] = [pending[i] for i in range(n)]
        self._pending_lists = {}


class HashMapStateBackend(KeyedStateBackend):
    """Keyed state held as Python objects. See :class:`KeyedStateBackend` for the API."""

    def _create_table(self, handle: StateHandle) -> StateTable:
        return HeapStateTable(self, handle)

    def _migrate_table(self, handle: StateHandle, old_value_snapshot: TypeSerializerSnapshot,
                       resolution: StateResolution) -> StateTable:
        new_ser = resolution.value_serializer
        assert new_ser is not None

        def convert(value: Any, where: str) -> Any:
            try:
                out = old_value_snapshot.migrate_value(value, new_ser)
                new_ser.to_bytes(out)  # proves the new serializer can write it
                return out
            except (StatemorphError, ValueError) as e:  # a value that cannot be converted
                raise self.migration_error(handle, where, e) from e

        return self._convert_table(handle, convert, self._key_converter(handle, resolution))

    @staticmethod
    def _key_converter(handle: StateHandle, resolution: StateResolution) -> Any:
        old_uk, new_uk = handle.user_key_serializer, resolution.user_key_serializer

        def convert_key(uk: Any, ub: bytes) -> Any:
            return uk if new_uk is None or new_uk is old_uk else new_uk.from_bytes(ub)

        return convert_key

    def _rebind_table(self, handle: StateHandle, resolution: StateResolution) -> StateTable | None:
        """Same bytes, possibly new Python types: re-read every value (and map key) through its
        bytes with the new serializer, all or nothing."""
        old_vs, new_vs = handle.value_serializer, resolution.value_serializer
        old_uk, new_uk = handle.user_key_serializer, resolution.user_key_serializer
        assert new_vs is not None
        if old_vs is new_vs and old_uk is new_uk:
            # equal serializers are not enough: a serializer restored from a snapshot has no Python
            # class to build (enum names, POJO dicts) while an equal user serializer does
            return None

        def convert(value: Any, where: str) -> Any:
            try:
                return new_vs.from_bytes(old_vs.to_bytes(value))
            except (StatemorphError, ValueError) as e:  # a value that cannot be converted
                raise StateMigrationError(f"state {handle.name!r}: cannot re-read the value at {where} with the "
                                          f"new serializer: {type(e).__name__}: {e}") from e

        return self._convert_table(handle, convert, self._key_converter(handle, resolution))

    def _convert_table(self, handle: StateHandle, convert: Any, convert_key: Any) -> HeapStateTable:
        old = handle.table
        assert isinstance(old, HeapStateTable)
        new = HeapStateTable(self, handle)
        for ek in sorted(old.data):
            stored = old.data[ek]
            where = f"key {self.describe_key(ek[1])} (key group {ek[0]})"
            if handle.kind is StateKind.VALUE:
                new.data[ek] = convert(stored, where)
            elif handle.kind is StateKind.LIST:
                new.data[ek] = [convert(e, f"{where}, list element {i}") for i, e in enumerate(stored)]
            else:
                new.data[ek] = {ub: (convert_key(uk, ub), None if v is None else convert(v, f"{where}, map key {uk!r}"))
                                for ub, (uk, v) in stored.items()}
        return new


__all__ = ["HashMapStateBackend", "HeapStateTable"]
