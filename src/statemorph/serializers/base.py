"""The serializer contract every format implements (Flink's ``TypeSerializer``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import MalformedDataError
from ..io import DataInputDeserializer, DataOutputSerializer

if TYPE_CHECKING:
    from ..snapshot import TypeSerializerSnapshot

T = TypeVar("T")


class TypeSerializer(ABC, Generic[T]):
    """Turns values of one type into Flink's bytes and back.

    Serializers are immutable value objects here (no reused buffers), so ``duplicate`` returns
    ``self`` unless a subclass holds mutable state. Equality compares the configuration
    (``_config``), which is what Flink's ``equals`` compares.
    """

    @abstractmethod
    def serialize(self, value: T, out: DataOutputSerializer) -> None: ...

    @abstractmethod
    def deserialize(self, src: DataInputDeserializer) -> T: ...

    @abstractmethod
    def snapshot_configuration(self) -> TypeSerializerSnapshot: ...

    def get_length(self) -> int:
        """Fixed byte length of every value, or -1 when values vary in length."""
        return -1

    def copy(self, value: T) -> T:
        """A deep copy of ``value``; through the bytes, so it is exact for every format."""
        return self.from_bytes(self.to_bytes(value))

    def copy_bytes(self, src: DataInputDeserializer, out: DataOutputSerializer) -> None:
        """Copy one serialized value from ``src`` to ``out`` (Flink's ``copy(in, out)``)."""
        self.serialize(self.deserialize(src), out)

    def duplicate(self) -> TypeSerializer[T]:
        return self

    def is_immutable_type(self) -> bool:
        return False

    def to_bytes(self, value: T) -> bytes:
        out = DataOutputSerializer()
        self.serialize(value, out)
        return out.get_copy_of_buffer()

    def from_bytes(self, data: bytes | bytearray | memoryview) -> T:
        """Read exactly one value; leftover bytes are an error, not silently ignored."""
        src = DataInputDeserializer(data)
        value = self.deserialize(src)
        if src.available():
            raise MalformedDataError(
                f"{type(self).__name__}: {src.available()} trailing bytes after the value "
                f"at offset {src.position}"
            )
        return value

    def _config(self) -> tuple[Any, ...]:
        """What makes two serializers of the same class equal."""
        return ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._config() == other._config()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._config()))

    def __repr__(self) -> str:
        cfg = self._config()
        inner = ", ".join(repr(c) for c in cfg)
        return f"{type(self).__name__}({inner})"


__all__ = ["TypeSerializer"]
