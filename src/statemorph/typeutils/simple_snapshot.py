"""Flink's ``SimpleTypeSerializerSnapshot``: the snapshot of a serializer without configuration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..io import DataInputDeserializer, DataOutputSerializer
from .registry import register_snapshot
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


def simple_snapshot(serializer: type[TypeSerializer[Any]], identifier: str,
                    name: str | None = None) -> type[SimpleTypeSerializerSnapshot]:
    """The snapshot class of ``serializer``, a serializer without configuration, registered under
    Flink's class name ``identifier``. Flink gives each such serializer a snapshot class of its own
    that adds nothing but the name (``IntSerializer$IntSerializerSnapshot``), so one line builds it
    here: the class is named ``name``, by default the last part of Flink's (``IntSerializerSnapshot``),
    and lives in the serializer's module, where it must be bound to that same name (pickle finds
    it there)."""
    name = name or identifier.rsplit("$", 1)[-1]
    cls = type(name, (SimpleTypeSerializerSnapshot,), {
        "IDENTIFIER": identifier, "SERIALIZER": serializer, "__module__": serializer.__module__,
        "__qualname__": name,
        "__doc__": f"Flink's ``{identifier.rsplit('.', 1)[-1]}``: the snapshot of a {serializer.__name__}.",
    })
    return register_snapshot()(cls)


def nested_simple_snapshot(serializer: type[TypeSerializer[Any]], package: str) -> type[SimpleTypeSerializerSnapshot]:
    """:func:`simple_snapshot` under Flink's usual name, a snapshot class nested in the serializer
    class of the same name: ``package`` + ``IntSerializer$IntSerializerSnapshot``."""
    name = serializer.__name__
    return simple_snapshot(serializer, f"{package}{name}${name}Snapshot")


__all__ = ["SimpleTypeSerializerSnapshot", "nested_simple_snapshot", "simple_snapshot"]
