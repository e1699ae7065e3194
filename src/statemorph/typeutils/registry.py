"""The registry that maps snapshot identifiers to snapshot classes: the only way a name read
from data becomes code (Flink resolves a class name through its class loader; statemorph never
imports anything named in the data).

Built-in classes register themselves with :func:`register_snapshot` when their module is imported
(``import statemorph.serializers`` registers all of them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..errors import UnknownSnapshotError
from .serializer import TypeSerializerSnapshot

S = TypeVar("S", bound="type[TypeSerializerSnapshot]")


class SnapshotRegistry:
    """Identifier (and alias) → snapshot class. The only way a name in data becomes code."""

    def __init__(self, parent: SnapshotRegistry | None = None) -> None:
        self._classes: dict[str, type[TypeSerializerSnapshot]] = {}
        self._parent = parent

    def register(self, cls: type[TypeSerializerSnapshot], *aliases: str) -> None:
        for name in (cls.IDENTIFIER, *aliases):
            if not name:
                raise ValueError(f"{cls.__name__} has no identifier")
            known = self._classes.get(name)
            if known is not None and known is not cls:
                raise ValueError(f"snapshot identifier {name!r} already registered to {known.__name__}")
            self._classes[name] = cls

    def resolve(self, identifier: str) -> type[TypeSerializerSnapshot]:
        cls = self._classes.get(identifier)
        if cls is None and self._parent is not None:
            return self._parent.resolve(identifier)
        if cls is None:
            raise UnknownSnapshotError(
                f"unknown serializer snapshot identifier {identifier!r}: it is not registered "
                f"(register its class with statemorph.typeutils.register_snapshot)"
            )
        return cls

    def __contains__(self, identifier: str) -> bool:
        return identifier in self._classes or (self._parent is not None and identifier in self._parent)

    def child(self) -> SnapshotRegistry:
        """A registry that adds classes on top of this one without changing it."""
        return SnapshotRegistry(self)


DEFAULT_REGISTRY = SnapshotRegistry()
def register_snapshot(*aliases: str) -> Callable[[S], S]:
    """Class decorator: add a snapshot class (and alias identifiers) to the default registry."""

    def deco(cls: S) -> S:
        DEFAULT_REGISTRY.register(cls, *aliases)
        return cls

    return deco


__all__ = ["DEFAULT_REGISTRY", "SnapshotRegistry", "register_snapshot"]
