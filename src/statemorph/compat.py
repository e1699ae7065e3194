"""The four answers a snapshot gives about a new serializer (Flink's
``TypeSerializerSchemaCompatibility``), plus the rule that combines nested answers."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .serializers.base import TypeSerializer


class CompatibilityType(enum.Enum):
    COMPATIBLE_AS_IS = "compatible as is"
    COMPATIBLE_AFTER_MIGRATION = "compatible after migration"
    COMPATIBLE_WITH_RECONFIGURED_SERIALIZER = "compatible with a reconfigured serializer"
    INCOMPATIBLE = "incompatible"


class SchemaCompatibility:
    """Result of ``new_snapshot.resolve_schema_compatibility(old_snapshot)`` (Flink 2.x) or of
    ``old_snapshot.resolve_schema_compatibility(new_serializer)`` (the older direction).

    ``reason`` explains an incompatible (and, where useful, an after-migration) result with
    field paths; ``plan`` may carry a precomputed migration plan so that it is built once.
    """

    __slots__ = ("type", "reason", "reconfigured_serializer", "plan")

    def __init__(
        self,
        type: CompatibilityType,
        reason: str = "",
        reconfigured_serializer: TypeSerializer | None = None,
        plan: Any = None,
    ) -> None:
        self.type = type
        self.reason = reason
        self.reconfigured_serializer = reconfigured_serializer
        self.plan = plan

    @classmethod
    def compatible_as_is(cls) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_AS_IS)

    @classmethod
    def compatible_after_migration(cls, reason: str = "", plan: Any = None) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_AFTER_MIGRATION, reason, plan=plan)

    @classmethod
    def compatible_with_reconfigured_serializer(
        cls, serializer: TypeSerializer, reason: str = ""
    ) -> SchemaCompatibility:
        return cls(CompatibilityType.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER, reason, serializer)

    @classmethod
    def incompatible(cls, reason: str) -> SchemaCompatibility:
        return cls(CompatibilityType.INCOMPATIBLE, reason)

    def is_compatible_as_is(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_AS_IS

    def is_compatible_after_migration(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_AFTER_MIGRATION

    def is_compatible_with_reconfigured_serializer(self) -> bool:
        return self.type is CompatibilityType.COMPATIBLE_WITH_RECONFIGURED_SERIALIZER

    def is_incompatible(self) -> bool:
        return self.type is CompatibilityType.INCOMPATIBLE

    def get_reconfigured_serializer(self) -> TypeSerializer:
        if self.reconfigured_serializer is None:
            raise ValueError("only a reconfigured result carries a serializer")
        return self.reconfigured_serializer

    def __repr__(self) -> str:
        extra = f", reason={self.reason!r}" if self.reason else ""
        return f"SchemaCompatibility({self.type.name}{extra})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SchemaCompatibility) and (self.type, self.reason) == (other.type, other.reason)

    def __hash__(self) -> int:
        return hash((self.type, self.reason))


class IntermediateCompatibility:
    """Combination of nested results (Flink's ``IntermediateCompatibilityResult``): any
    incompatible wins, then any migration, then any reconfiguration."""

    def __init__(self, results: Iterable[tuple[str, SchemaCompatibility]]) -> None:
        self.results = list(results)

    @property
    def incompatible_reasons(self) -> list[str]:
        return [_label(name, r.reason) for name, r in self.results if r.is_incompatible()]

    def is_incompatible(self) -> bool:
        return any(r.is_incompatible() for _, r in self.results)

    def needs_migration(self) -> bool:
        return any(r.is_compatible_after_migration() for _, r in self.results)

    def is_reconfigured(self) -> bool:
        return any(r.is_compatible_with_reconfigured_serializer() for _, r in self.results)

    def migration_reasons(self) -> list[str]:
        return [_label(name, r.reason or "needs migration") for name, r in self.results
                if r.is_compatible_after_migration()]


def _label(name: str, reason: str) -> str:
    if not name:
        return reason
    return f"{name}: {reason}" if reason else name


__all__ = ["CompatibilityType", "SchemaCompatibility", "IntermediateCompatibility"]
