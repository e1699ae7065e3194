"""State descriptors: the name, kind and serializers a program registers keyed state with.

A descriptor is what a new program brings to an old savepoint: the savepoint holds the *old*
serializer snapshots under the state's name, the descriptor carries the *new* serializers, and
compatibility is resolved between the two when the state is first accessed.
"""

from __future__ import annotations

from typing import Any

from ..keyed.kinds import StateKind
from ..typeutils import TypeSerializer


class StateDescriptor:
    """Base of the three descriptors. ``value_serializer`` is the per-value serializer: the value
    of value state, the element of list state, the map value of map state."""

    kind: StateKind

    def __init__(self, name: str, value_serializer: TypeSerializer[Any], *, ttl: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a state name must be a non-empty string, got {name!r}")
        if not isinstance(value_serializer, TypeSerializer):
            raise TypeError(f"state {name!r}: expected a TypeSerializer, got {type(value_serializer).__name__}")
        self.name = name
        self.value_serializer = value_serializer
        self.ttl = ttl
        """Whether the state uses time-to-live. Turning TTL on or off for stored state is incompatible
        (Flink stores TTL values with their timestamp), which the planner reports."""

    @property
    def user_key_serializer(self) -> TypeSerializer[Any] | None:
        """The map key serializer of map state; None for the other kinds."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.value_serializer!r})"


class ValueStateDescriptor(StateDescriptor):
    """One value per (key, namespace)."""

    kind = StateKind.VALUE

    def __init__(self, name: str, serializer: TypeSerializer[Any], *, ttl: bool = False) -> None:
        super().__init__(name, serializer, ttl=ttl)

    @property
    def serializer(self) -> TypeSerializer[Any]:
        return self.value_serializer


class ListStateDescriptor(StateDescriptor):
    """A list of elements per (key, namespace)."""

    kind = StateKind.LIST

    def __init__(self, name: str, element_serializer: TypeSerializer[Any], *, ttl: bool = False) -> None:
        super().__init__(name, element_serializer, ttl=ttl)

    @property
    def element_serializer(self) -> TypeSerializer[Any]:
        return self.value_serializer


class MapStateDescriptor(StateDescriptor):
    """A map from user key to value per (key, namespace)."""

    kind = StateKind.MAP

    def __init__(self, name: str, key_serializer: TypeSerializer[Any], value_serializer: TypeSerializer[Any], *,
                 ttl: bool = False) -> None:
        super().__init__(name, value_serializer, ttl=ttl)
        if not isinstance(key_serializer, TypeSerializer):
            raise TypeError(f"state {name!r}: expected a TypeSerializer for the map key, got "
                            f"{type(key_serializer).__name__}")
        self.key_serializer = key_serializer

    @property
    def user_key_serializer(self) -> TypeSerializer[Any]:
        return self.key_serializer

    def __repr__(self) -> str:
        return f"MapStateDescriptor({self.name!r}, {self.key_serializer!r}, {self.value_serializer!r})"


__all__ = ["ListStateDescriptor", "MapStateDescriptor", "StateDescriptor", "StateKind", "ValueStateDescriptor"]
