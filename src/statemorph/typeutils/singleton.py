"""Values that exist once (Flink's ``VoidNamespace.INSTANCE``, ``GlobalWindow.get()``) and the
serializer that writes such a value as one zero byte."""

from __future__ import annotations

from typing import Any, ClassVar

from ..errors import SerializationError
from ..io import DataOutputSerializer
from .serializer import TypeSerializer


class NamedSingleton:
    """A class with one instance: constructing it again returns that instance, ``repr`` is
    :attr:`NAME`, and pickle restores the same instance through the module global of that name
    (so a subclass's instance must be bound to :attr:`NAME` in the subclass's module)."""

    NAME: ClassVar[str]
    _instance: ClassVar[NamedSingleton | None] = None

    def __new__(cls) -> NamedSingleton:
        instance = cls.__dict__.get("_instance")
        if instance is None:
            instance = super().__new__(cls)
            cls._instance = instance
        return instance

    def __repr__(self) -> str:
        return self.NAME

    def __reduce__(self) -> str:
        return self.NAME


class SingletonSerializer(TypeSerializer[Any]):
    """Writes its one value, :attr:`VALUE` (or None), as one zero byte: the namespace of state
    that is not windowed, the window of ``GlobalWindows``. Subclasses read the byte as Flink does."""

    VALUE: ClassVar[NamedSingleton]
    LENGTH = 1
    IMMUTABLE_VALUES = True

    def serialize(self, value: Any, out: DataOutputSerializer) -> None:
        if value is not self.VALUE and value is not None:
            raise SerializationError(f"{type(self).__name__} writes only {self.VALUE!r}, got {value!r}")
        out.write_byte(0)


__all__ = ["NamedSingleton", "SingletonSerializer"]
