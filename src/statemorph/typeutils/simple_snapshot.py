"""Flink's ``SimpleTypeSerializerSnapshot``: the snapshot of a serializer without configuration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..io import DataInputDeserializer, DataOutputSerializer
from .serializer import SchemaCompatibility, TypeSerializer, TypeSerializerSnapshot


class SimpleTypeSerializerSnapshot(TypeSerializerSnapshot):
    """For serializers without configuration: an empty content, version 3. Compatible as is
    exactly when the new serializer is of the same class; anything else is incompatible."""

    VERSION: ClassVar[int] = 3
    MIN_READ_VERSION: ClassVar[int] = 2
    SERIALIZER: ClassVar[Callable[[], TypeSerializer[Any]]]

    def write_snapshot(self, out: DataOutputSerializer) -> None:
        pass

    @classmethod
    def read_snapshot(cls, read_version: int, src: DataInputDeserializer) -> TypeSerializerSnapshot:
        if read_version < 3:
            src.read_utf()  # v2 stored the serializer class name; it carries no information
        return cls()

    def restore_serializer(self) -> TypeSerializer[Any]:
        return type(self).SERIALIZER()

    def resolve_new_serializer(self, new_serializer: TypeSerializer[Any]) -> SchemaCompatibility:
        old = self.restore_serializer()
        if type(new_serializer) is type(old):
            return SchemaCompatibility.compatible_as_is()
        return SchemaCompatibility.incompatible(
            f"type changed from {type(old).__name__} to {type(new_serializer).__name__}"
        )


__all__ = ["SimpleTypeSerializerSnapshot"]
