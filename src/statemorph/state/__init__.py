"""Keyed state: descriptors, key groups, and the heap and RocksDB backends.

::

    from statemorph.state import HeapStateBackend, ValueStateDescriptor
    b = HeapStateBackend(key_serializer=StringSerializer(), max_parallelism=128)
    events = b.get_state(ValueStateDescriptor("events", row_serializer))
    b.set_current_key("user-1"); events.update(row); b.savepoint("sp-1")
    r = HeapStateBackend.restore("sp-1")          # or RocksDBStateBackend.restore("sp-1", db_path=...)
    r.get_state(ValueStateDescriptor("events", new_row_serializer))   # resolves; migrates or raises
"""

from __future__ import annotations

from typing import Any

from ..keyed.keygroups import KeyGroupRange, assign_to_key_group, key_group_range_for_operator, murmur_hash
from ..keyed.namespace import VoidNamespace, VoidNamespaceSerializer
from .backend import KeyedStateBackend
from .descriptors import ListStateDescriptor, MapStateDescriptor, StateDescriptor, StateKind, ValueStateDescriptor
from .heap import HeapStateBackend
from .resolve import Outcome, StateResolution
from .states import ListState, MapState, ValueState


def __getattr__(name: str) -> Any:
    # rocksdict is an optional dependency: import the RocksDB backend only when asked for
    if name == "RocksDBStateBackend":
        from .rocksdb import RocksDBStateBackend

        return RocksDBStateBackend
    raise AttributeError(name)


__all__ = [
    "HeapStateBackend",
    "KeyGroupRange",
    "KeyedStateBackend",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "Outcome",
    "RocksDBStateBackend",
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
