"""Keyed state: descriptors, key groups, and the heap and RocksDB backends, under Flink 2.x's
names: :class:`HashMapStateBackend` (objects on the heap) and :class:`EmbeddedRocksDBStateBackend`
(bytes in an embedded RocksDB; needs the ``[rocksdb]`` extra).

::

    from statemorph.state import HashMapStateBackend, ValueStateDescriptor
    b = HashMapStateBackend(key_serializer=StringSerializer(), max_parallelism=128)
    events = b.get_state(ValueStateDescriptor("events", row_serializer))
    b.set_current_key("user-1"); events.update(row); b.savepoint("sp-1")
    r = HashMapStateBackend.restore("sp-1")   # or EmbeddedRocksDBStateBackend.restore("sp-1", db_path=...)
    r.get_state(ValueStateDescriptor("events", new_row_serializer))   # resolves; migrates or raises

``HeapStateBackend`` and ``RocksDBStateBackend`` (the names before Flink 2.0 removed
``RocksDBStateBackend``) still work for this release: they are the same classes and warn with a
DeprecationWarning when used.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ..keyed.keygroups import KeyGroupRange, assign_to_key_group, key_group_range_for_operator, murmur_hash
from ..keyed.namespace import VoidNamespace, VoidNamespaceSerializer
from .backend import KeyedStateBackend
from .descriptors import ListStateDescriptor, MapStateDescriptor, StateDescriptor, StateKind, ValueStateDescriptor
from .heap import HashMapStateBackend
from .resolve import Outcome, StateResolution
from .states import ListState, MapState, ValueState

if TYPE_CHECKING:  # resolved lazily at run time (below); type checkers see the real classes
    from .rocksdb import EmbeddedRocksDBStateBackend

    HeapStateBackend = HashMapStateBackend
    RocksDBStateBackend = EmbeddedRocksDBStateBackend

DEPRECATED_NAMES = {"HeapStateBackend": "HashMapStateBackend", "RocksDBStateBackend": "EmbeddedRocksDBStateBackend"}
"""Old name → Flink 2.x name; the old names are removed in the next release."""


def __getattr__(name: str) -> Any:
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        warnings.warn(f"statemorph.state.{name} is deprecated and will be removed in the next release; use "
                      f"{new} (Flink 2.x's name)", DeprecationWarning, stacklevel=2)
        return globals()[new] if new in globals() else __getattr__(new)
    # rocksdict is an optional dependency: import the RocksDB backend only when asked for
    if name == "EmbeddedRocksDBStateBackend":
        from .rocksdb import EmbeddedRocksDBStateBackend

        return EmbeddedRocksDBStateBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EmbeddedRocksDBStateBackend",
    "HashMapStateBackend",
    "KeyGroupRange",
    "KeyedStateBackend",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "Outcome",
    "StateDescriptor",
    "StateKind",
    "StateResolution",
    "ValueState",
    "ValueStateDescriptor",
    "VoidNamespace",
    "VoidNamespaceSerializer",
    "assign_to_key_group",
    "key_group_range_for_operator",
    "murmur_hash",
]
