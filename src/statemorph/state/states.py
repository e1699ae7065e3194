"""The user-facing state objects (value, list, map) and the storage contract both backends meet.

State objects know nothing about storage: they turn the backend's current key and their own
current namespace into an :data:`EntryKey` and call a :class:`StateTable`. The heap table keeps
Python objects; the RocksDB table keeps Flink's bytes. Keeping the user API in one place means the
two backends cannot drift apart in behaviour.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from ..errors import SerializationError
from ..keyed.entries import state_schema
from ..keyed.kinds import StateKind
from ..keyed.namespace import VoidNamespace
from ..typeutils import TypeSerializer


class KeyContext(Protocol):
    """What a state object needs from its backend: the current entry's key group and key bytes
    (the backend implements it; states never import the backend)."""

    def current_entry(self, state_name: str) -> tuple[int, bytes]: ...

EntryKey = tuple[int, bytes, bytes]
"""(key group, serialized key, serialized namespace): one entry of value / list state, one map of map state."""


class StateTable(ABC):
    """Storage of one state in a backend. Absent entries read as None / [] / empty."""

    # -- value state
    @abstractmethod
    def get_value(self, ek: EntryKey) -> Any: ...

    @abstractmethod
    def put_value(self, ek: EntryKey, value: Any) -> None: ...

    # -- list state
    @abstractmethod
    def get_list(self, ek: EntryKey) -> list[Any]: ...

    @abstractmethod
    def add_elements(self, ek: EntryKey, elements: list[Any]) -> None: ...

    @abstractmethod
    def put_list(self, ek: EntryKey, elements: list[Any]) -> None: ...

    # -- map state
    @abstractmethod
    def map_get(self, ek: EntryKey, user_key: Any, uk_bytes: bytes) -> tuple[bool, Any]: ...

    @abstractmethod
    def map_put(self, ek: EntryKey, user_key: Any, uk_bytes: bytes, value: Any) -> None: ...

    @abstractmethod
    def map_remove(self, ek: EntryKey, uk_bytes: bytes) -> None: ...

    @abstractmethod
    def map_items(self, ek: EntryKey) -> Iterator[tuple[Any, Any]]: ...

    # -- all kinds
    @abstractmethod
    def clear(self, ek: EntryKey) -> None: ...

    @abstractmethod
    def export_batches(self, batch_rows: int) -> Iterator[pa.RecordBatch]:
        """All entries as savepoint rows (see :mod:`statemorph.savepoint.parquet.format`), in key order."""

    @abstractmethod
    def load_batch(self, batch: pa.RecordBatch, row_offset: int) -> None:
        """Add savepoint rows (restore). ``row_offset`` numbers rows in error messages."""

    def finish_load(self) -> None:
        """Called after the last ``load_batch``; the heap table assembles lists here."""
        return None

    def drop(self) -> None:
        """Release storage (the state is being replaced or the backend closed)."""
        return None


def rows_to_batches(kind: StateKind, rows: Iterable[tuple[Any, ...]], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Group savepoint rows (tuples in the state schema's column order) into Arrow batches."""
    schema = state_schema(kind)
    cols: list[list[Any]] = [[] for _ in schema]

    def batch() -> pa.RecordBatch:
        return pa.RecordBatch.from_arrays([pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)],
                                          schema=schema)

    for row in rows:
        for c, x in zip(cols, row, strict=True):
            c.append(x)
        if len(cols[0]) >= batch_rows:
            yield batch()
            cols = [[] for _ in schema]
    if cols[0]:
        yield batch()


@dataclass
class StateHandle:
    """A state's registration inside a backend: its serializers, the snapshots describing the
    schema its stored data is in, and its table. State objects hold the handle, so a migration
    that swaps the table or serializers is seen by every state object at once."""

    name: str
    kind: StateKind
    namespace_serializer: TypeSerializer[Any]
    value_serializer: TypeSerializer[Any]
    user_key_serializer: TypeSerializer[Any] | None
    snapshot_bytes: dict[str, bytes]
    table: StateTable
    registered: bool = False
    registered_with: tuple[Any, ...] | None = None
    """(kind, namespace, value, user key serializer) of the last registration, so registering the
    same descriptor again is a no-op even when a reconfigured serializer is in use."""
    restored_snapshots: dict[str, Any] = field(default_factory=dict)


class _KeyedState:
    """Common part of the three state kinds: current namespace and entry addressing."""

    def __init__(self, backend: KeyContext, handle: StateHandle) -> None:
        self._backend = backend
        self._handle = handle
        self._ns_value: Any = VoidNamespace
        self._ns_bytes: bytes | None = None

    @property
    def name(self) -> str:
        return self._handle.name

    def set_current_namespace(self, namespace: Any) -> None:
        """Entries are addressed by (current key, this namespace); VoidNamespace by default."""
        self._ns_bytes = self._handle.namespace_serializer.to_bytes(namespace)
        self._ns_value = namespace

    def _ek(self) -> EntryKey:
        kg, key_bytes = self._backend.current_entry(self._handle.name)
        if self._ns_bytes is None:
            self._ns_bytes = self._handle.namespace_serializer.to_bytes(self._ns_value)
        return (kg, key_bytes, self._ns_bytes)

    def clear(self) -> None:
        """Remove the entry (all of it for list and map state) of the current key and namespace."""
        self._handle.table.clear(self._ek())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._handle.name!r})"


class ValueState(_KeyedState):
    """One value per key and namespace. ``value()`` is None when nothing is stored."""

    def value(self) -> Any:
        return self._handle.table.get_value(self._ek())

    def update(self, value: Any) -> None:
        """Store ``value``; None clears the entry (as Flink does)."""
        if value is None:
            self.clear()
        else:
            self._handle.table.put_value(self._ek(), value)


class ListState(_KeyedState):
    """A list per key and namespace. ``get()`` is ``[]`` when nothing is stored; None elements
    are rejected (Flink: "You cannot add null to a ListState")."""

    def get(self) -> list[Any]:
        return self._handle.table.get_list(self._ek())

    def add(self, value: Any) -> None:
        if value is None:
            raise SerializationError(f"list state {self.name!r}: cannot add None to a list state")
        self._handle.table.add_elements(self._ek(), [value])

    def add_all(self, values: Iterable[Any]) -> None:
        items = self._elements(values)
        if items:
            self._handle.table.add_elements(self._ek(), items)

    def update(self, values: Iterable[Any] | None) -> None:
        """Replace the list; an empty list (or None) clears it."""
        items = self._elements(values or [])
        if items:
            self._handle.table.put_list(self._ek(), items)
        else:
            self.clear()

    def _elements(self, values: Iterable[Any]) -> list[Any]:
        items = list(values)
        if any(v is None for v in items):
            raise SerializationError(f"list state {self.name!r}: cannot add None to a list state")
        return items


class MapState(_KeyedState):
    """A map per key and namespace. Map values may be None; ``get`` cannot tell a stored None
    from a missing key, ``contains`` can."""

    def _uk(self, user_key: Any) -> bytes:
        ser = self._handle.user_key_serializer
        assert ser is not None
        return ser.to_bytes(user_key)

    def get(self, user_key: Any) -> Any:
        return self._handle.table.map_get(self._ek(), user_key, self._uk(user_key))[1]

    def contains(self, user_key: Any) -> bool:
        return self._handle.table.map_get(self._ek(), user_key, self._uk(user_key))[0]

    def __contains__(self, user_key: Any) -> bool:
        return self.contains(user_key)

    def put(self, user_key: Any, value: Any) -> None:
        self._handle.table.map_put(self._ek(), user_key, self._uk(user_key), value)

    def put_all(self, mapping: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        pairs = mapping.items() if isinstance(mapping, Mapping) else mapping
        ek = self._ek()
        for k, v in pairs:
            self._handle.table.map_put(ek, k, self._uk(k), v)

    def remove(self, user_key: Any) -> None:
        self._handle.table.map_remove(self._ek(), self._uk(user_key))

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._handle.table.map_items(self._ek()))

    def keys(self) -> list[Any]:
        return [k for k, _ in self._handle.table.map_items(self._ek())]

    def values(self) -> list[Any]:
        return [v for _, v in self._handle.table.map_items(self._ek())]

    def is_empty(self) -> bool:
        return next(iter(self._handle.table.map_items(self._ek())), None) is None


STATE_CLASSES: dict[StateKind, type[_KeyedState]] = {
    StateKind.VALUE: ValueState,
    StateKind.LIST: ListState,
    StateKind.MAP: MapState,
}

__all__ = ["EntryKey", "ListState", "MapState", "StateHandle", "StateTable", "ValueState", "rows_to_batches"]
