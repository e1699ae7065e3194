"""What both keyed state backends share: the current key and its key group, registration of
states with compatibility resolution, savepoints and restore.

The backends differ only in their :class:`~statemorph.state.states.StateTable` (objects vs bytes)
and in how they migrate a table; everything a user can observe about keys, key groups, error
messages and the savepoint format is decided here once.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ..errors import SavepointError, StateMigrationError, StatemorphError
from ..keyed.keygroups import (
    KeyGroupRange,
    KeyHasher,
    assign_to_key_group,
    check_max_parallelism,
    hasher_for_serializer,
    key_group_prefix_bytes,
)
from ..keyed.namespace import VoidNamespaceSerializer
from ..typeutils import SnapshotRegistry, TypeSerializer, TypeSerializerSnapshot, write_versioned_snapshot
from .descriptors import StateDescriptor, StateKind
from .resolve import Outcome, StateResolution, resolve_key_serializer, resolve_state
from .states import STATE_CLASSES, StateHandle, StateTable

B = TypeVar("B", bound="KeyedStateBackend")

ROLES = ("namespace_serializer", "value_serializer", "user_key_serializer")


def _snapshot_bytes_of(ser: TypeSerializer[Any] | None) -> bytes | None:
    return None if ser is None else write_versioned_snapshot(ser.snapshot_configuration())


class KeyedStateBackend(ABC):
    """Keyed state for one operator instance: a key serializer, ``max_parallelism`` key groups (the
    instance owns ``key_group_range`` of them), and named states registered by descriptor."""

    def __init__(
        self,
        key_serializer: TypeSerializer[Any],
        max_parallelism: int = 128,
        *,
        key_group_range: KeyGroupRange | tuple[int, int] | None = None,
        key_hasher: KeyHasher | None = None,
    ) -> None:
        if not isinstance(key_serializer, TypeSerializer):
            raise TypeError(f"key_serializer must be a TypeSerializer, got {type(key_serializer).__name__}")
        self.key_serializer = key_serializer
        self.max_parallelism = check_max_parallelism(max_parallelism)
        self.key_group_range = KeyGroupRange.of(key_group_range, max_parallelism)
        self.key_group_prefix_bytes = key_group_prefix_bytes(max_parallelism)
        self._hasher = key_hasher or hasher_for_serializer(key_serializer)
        self._key_snapshot_bytes = write_versioned_snapshot(key_serializer.snapshot_configuration())
        self._handles: dict[str, StateHandle] = {}
        self._current: tuple[int, bytes] | None = None
        self._closed = False

    # -- keys ------------------------------------------------------------------------------------
    def key_group_of(self, key: Any) -> int:
        """Flink's ``assignToKeyGroup``: ``murmurHash(key.hashCode()) % max_parallelism``."""
        return assign_to_key_group(self._hasher(key), self.max_parallelism)

    def set_current_key(self, key: Any) -> None:
        """Select the key that state reads and writes apply to."""
        self._check_open()
        if key is None:
            raise ValueError("a key must not be None")
        key_bytes = self.key_serializer.to_bytes(key)
        kg = self.key_group_of(key)
        if kg not in self.key_group_range:
            raise ValueError(
                f"key {key!r} belongs to key group {kg}, outside this backend's key group range "
                f"[{self.key_group_range.start}, {self.key_group_range.end}]"
            )
        self._current = (kg, key_bytes)

    @property
    def current_key_group(self) -> int | None:
        return None if self._current is None else self._current[0]

    def current_entry(self, state_name: str) -> tuple[int, bytes]:
        self._check_open()
        if self._current is None:
            raise ValueError(f"state {state_name!r}: no current key; call set_current_key(key) first")
        return self._current

    # -- states ----------------------------------------------------------------------------------
    def state_names(self) -> list[str]:
        return list(self._handles)

    def get_state(self, descriptor: StateDescriptor, namespace_serializer: TypeSerializer[Any] | None = None) -> Any:
        """Register (or re-register) a state and return its state object.

        A state that exists already (restored from a savepoint, or registered earlier with other
        serializers) is resolved against the new serializers first: incompatible raises
        :class:`StateMigrationError` naming the state and the reason; after-migration converts every
        stored entry before this returns (all or nothing); reconfigured uses the reconfigured serializer.
        """
        self._check_open()
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"expected a state descriptor, got {type(descriptor).__name__}")
        ns_ser = namespace_serializer if namespace_serializer is not None else VoidNamespaceSerializer()
        signature = (descriptor.kind, ns_ser, descriptor.value_serializer, descriptor.user_key_serializer)
        h = self._handles.get(descriptor.name)
        if h is None:
            h = self._new_handle(descriptor.name, descriptor.kind, ns_ser, descriptor.value_serializer,
                                 descriptor.user_key_serializer)
        elif not (h.registered and h.registered_with == signature):
            self._reregister(h, descriptor, ns_ser)
        h.registered_with = signature
        return STATE_CLASSES[h.kind](self, h)

    def _new_handle(self, name: str, kind: StateKind, ns: TypeSerializer[Any], value: TypeSerializer[Any],
                    user_key: TypeSerializer[Any] | None, snapshot_bytes: dict[str, bytes] | None = None,
                    registered: bool = True) -> StateHandle:
        h = StateHandle(name=name, kind=kind, namespace_serializer=ns, value_serializer=value,
                        user_key_serializer=user_key, snapshot_bytes={}, table=None,  # type: ignore[arg-type]
                        registered=registered)
        h.snapshot_bytes = snapshot_bytes or self._current_snapshot_bytes(h)
        h.table = self._create_table(h)
        self._handles[name] = h
        return h

    @staticmethod
    def _current_snapshot_bytes(h: StateHandle) -> dict[str, bytes]:
        out = {}
        for role in ROLES:
            b = _snapshot_bytes_of(getattr(h, role))
            if b is not None:
                out[role] = b
        return out

    def _old_snapshots(self, h: StateHandle) -> dict[str, TypeSerializerSnapshot]:
        if not h.restored_snapshots:
            h.restored_snapshots = {role: (getattr(h, role)).snapshot_configuration()
                                    for role in ROLES if getattr(h, role) is not None}
        return h.restored_snapshots

    def resolve(self, descriptor: StateDescriptor,
                namespace_serializer: TypeSerializer[Any] | None = None) -> StateResolution:
        """What registering ``descriptor`` would do to the existing state of that name (no change)."""
        ns_ser = namespace_serializer if namespace_serializer is not None else VoidNamespaceSerializer()
        h = self._handles.get(descriptor.name)
        if h is None:
            return StateResolution(descriptor.name, Outcome.NEW_STATE, value_serializer=descriptor.value_serializer,
                                   user_key_serializer=descriptor.user_key_serializer, namespace_serializer=ns_ser)
        return resolve_state(h.name, h.kind, self._old_snapshots(h), descriptor, ns_ser)

    def _reregister(self, h: StateHandle, descriptor: StateDescriptor, ns_ser: TypeSerializer[Any]) -> None:
        res = self.resolve(descriptor, ns_ser)
        res.raise_if_incompatible()
        assert res.value_serializer is not None and res.namespace_serializer is not None
        new_table: StateTable | None
        if res.outcome is Outcome.MIGRATION:
            old_value_snapshot = self._old_snapshots(h)["value_serializer"]
            new_table = self._migrate_table(h, old_value_snapshot, res)
        else:
            new_table = self._rebind_table(h, res)
        if new_table is not None:
            old_table, h.table = h.table, new_table
            old_table.drop()
        h.value_serializer = res.value_serializer
        h.namespace_serializer = res.namespace_serializer
        h.user_key_serializer = res.user_key_serializer
        h.registered = True
        h.snapshot_bytes = self._current_snapshot_bytes(h)
        h.restored_snapshots = {}

    # -- backend-specific ------------------------------------------------------------------------
    @abstractmethod
    def _create_table(self, handle: StateHandle) -> StateTable: ...

    @abstractmethod
    def _migrate_table(self, handle: StateHandle, old_value_snapshot: TypeSerializerSnapshot,
                       resolution: StateResolution) -> StateTable:
        """A new table holding every entry of ``handle.table`` in the new schema; on any failure
        raise StateMigrationError (naming the state and the first bad entry) and leave the old
        table untouched."""

    def _rebind_table(self, handle: StateHandle, resolution: StateResolution) -> StateTable | None:
        """Compatible as is (or reconfigured): the stored data stays valid. A backend that holds
        objects may return a table whose objects are in the new serializers' representation
        (e.g. dataclass instances instead of the dicts a class-less restored serializer made)."""
        return None

    def describe_key(self, key_bytes: bytes) -> str:
        """The key for messages: its value when it deserializes, else its bytes in hex."""
        try:
            return repr(self.key_serializer.from_bytes(key_bytes))
        except StatemorphError:  # only for a message
            return f"0x{key_bytes.hex()}"

    def migration_error(self, h: StateHandle, what: str, e: BaseException) -> StateMigrationError:
        return StateMigrationError(
            f"state {h.name!r}: migration failed at {what}: {type(e).__name__}: {e}; "
            f"the state was left unchanged in its old schema"
        )

    # -- savepoints ------------------------------------------------------------------------------
    def savepoint(self, path: str | os.PathLike[str], *, rows_per_file: int = 1_000_000,
                  batch_rows: int = 65536) -> Path:
        """Write every state (including restored states never re-registered, in their old schema)
        as a savepoint directory, atomically."""
        # imported here, not at the top: the planner imports this module in every Spark worker,
        # which never writes the Parquet form, and pyarrow.parquet costs ~60 ms to import
        from ..savepoint.parquet.writer import SavepointWriter

        self._check_open()
        with SavepointWriter(path, max_parallelism=self.max_parallelism, key_serializer=self._key_snapshot_bytes,
                             rows_per_file=rows_per_file) as w:
            for h in self._handles.values():
                sw = w.add_state(
                    h.name, h.kind,
                    value_serializer=h.snapshot_bytes["value_serializer"],
                    namespace_serializer=h.snapshot_bytes["namespace_serializer"],
                    user_key_serializer=h.snapshot_bytes.get("user_key_serializer"),
                )
                for batch in h.table.export_batches(batch_rows):
                    sw.write(batch)
                sw.close()
        return Path(path)

    @classmethod
    def restore(
        cls: type[B],
        path: str | os.PathLike[str],
        *,
        key_serializer: TypeSerializer[Any] | None = None,
        max_parallelism: int | None = None,
        key_group_range: KeyGroupRange | tuple[int, int] | None = None,
        key_hasher: KeyHasher | None = None,
        registry: SnapshotRegistry | None = None,
        **backend_options: Any,
    ) -> B:
        """A backend holding the savepoint's state (only ``key_group_range`` if given, as one parallel
        instance would). ``key_serializer`` must be compatible as is with the savepoint's; the
        default is the serializer restored from its snapshot. ``max_parallelism`` must equal the
        savepoint's: key groups are fixed when state is first written. ``registry`` resolves snapshot
        identifiers (default: the global registry). The savepoint is only read."""
        # imported here for the same reason as in savepoint(): pyarrow.parquet, not in Spark workers
        from ..savepoint.parquet.reader import iter_state_batches, read_metadata

        meta = read_metadata(path)
        if max_parallelism is not None and max_parallelism != meta.max_parallelism:
            raise SavepointError(
                f"savepoint {path} was written with max_parallelism {meta.max_parallelism}; it cannot be "
                f"restored with max_parallelism {max_parallelism} (the key group of every key would change)"
            )
        old_key = meta.key_snapshot(registry)
        key_ser = old_key.restore_serializer() if key_serializer is None else resolve_key_serializer(old_key,
                                                                                                   key_serializer)
        for st in meta.states.values():
            if st.key_serializer != meta.key_serializer:
                raise SavepointError(f"state {st.name!r}: its key serializer snapshot differs from the savepoint's "
                                     f"key serializer; one backend has one key serializer")
        backend = cls(key_ser, meta.max_parallelism, key_group_range=key_group_range, key_hasher=key_hasher,
                      **backend_options)
        try:
            for st in meta.states.values():
                snaps = {role: st.snapshot(role, registry) for role in ROLES if getattr(st, role) is not None}
                try:
                    sers = {role: s.restore_serializer() for role, s in snaps.items()}
                except StatemorphError as e:  # a snapshot that cannot build its serializer
                    raise SavepointError(f"state {st.name!r}: cannot restore its serializers: {e}") from e
                h = backend._new_handle(
                    st.name, st.kind, sers["namespace_serializer"], sers["value_serializer"],
                    sers.get("user_key_serializer"),
                    snapshot_bytes={role: st.snapshot_bytes(role) for role in snaps}, registered=False,
                )
                h.restored_snapshots = snaps
                offset = 0
                for batch in iter_state_batches(path, st, key_group_range=backend.key_group_range, metadata=meta):
                    h.table.load_batch(batch, offset)
                    offset += batch.num_rows
                h.table.finish_load()
        except BaseException:
            backend._discard()
            raise
        return backend

    # -- lifecycle -------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{type(self).__name__} is closed")

    def _discard(self) -> None:
        """Close after a failed restore; backends with on-disk state remove what they created."""
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        for h in self._handles.values():
            h.table.drop()
        self._closed = True

    def __enter__(self: B) -> B:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


__all__ = ["KeyedStateBackend"]
