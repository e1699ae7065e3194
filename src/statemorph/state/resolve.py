"""Compatibility resolution for one registered state: old snapshots (from a savepoint) against the
serializers of a new descriptor. This is the ONE rule book: the backends call it when a restored
state is registered (and raise), the engine's planner (:mod:`statemorph.engine.plan`, behind
``check``, ``migrate``, :func:`~statemorph.savepoint.check_savepoint` and Spark) calls it for every
state of a savepoint (and reports), so a dry run and a real run can never disagree.

Flink's rules for keyed state: the key serializer and the namespace serializer must be compatible
as is (or with a reconfigured serializer); a map state's user key must be too, because entries are
addressed by the user key bytes and only value schema evolution is supported; the value (list
element, map value) serializer may also need migration.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from ..errors import StateMigrationError, StatemorphError
from ..typeutils import SchemaCompatibility, TypeSerializer, TypeSerializerSnapshot
from .descriptors import StateDescriptor, StateKind


class Outcome(enum.IntEnum):
    """Per-state result of a compatibility check; the int value orders severity."""

    AS_IS = 0
    RECONFIGURED = 1
    NEW_STATE = 2
    MIGRATION = 3
    INCOMPATIBLE = 4

    @property
    def label(self) -> str:
        return {
            Outcome.AS_IS: "compatible as is",
            Outcome.RECONFIGURED: "compatible with a reconfigured serializer",
            Outcome.NEW_STATE: "new state (not in the savepoint)",
            Outcome.MIGRATION: "compatible after migration",
            Outcome.INCOMPATIBLE: "incompatible",
        }[self]


@dataclass
class StateResolution:
    """What registering ``descriptor`` over a restored state means: which serializers to use from
    now on and whether the stored values must be migrated first."""

    name: str
    outcome: Outcome
    reasons: list[str] = field(default_factory=list)
    value_serializer: TypeSerializer[Any] | None = None
    user_key_serializer: TypeSerializer[Any] | None = None
    namespace_serializer: TypeSerializer[Any] | None = None

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def raise_if_incompatible(self) -> None:
        if self.outcome is Outcome.INCOMPATIBLE:
            raise StateMigrationError(f"state {self.name!r} cannot be restored with the new serializers: {self.reason}")


def _use(result: SchemaCompatibility, new: TypeSerializer[Any]) -> TypeSerializer[Any]:
    return result.get_reconfigured_serializer() if result.is_compatible_with_reconfigured_serializer() else new


def _resolve(snapshot: TypeSerializerSnapshot, new: TypeSerializer[Any], what: str) -> SchemaCompatibility:
    """Resolve, turning a snapshot that cannot be judged (unreadable nested snapshot, unknown
    class) into an incompatible answer. Only statemorph's own errors are expected here; anything
    else is a bug and propagates."""
    try:
        return snapshot.resolve_schema_compatibility(new)
    except StatemorphError as e:
        return SchemaCompatibility.incompatible(f"{what}: compatibility check failed: {type(e).__name__}: {e}")


def resolve_state(
    name: str,
    old_kind: StateKind,
    old_snapshots: dict[str, TypeSerializerSnapshot],
    descriptor: StateDescriptor,
    namespace_serializer: TypeSerializer[Any] | None,
    *,
    old_ttl: bool = False,
) -> StateResolution:
    """Judge ``descriptor`` against the old ``namespace_serializer`` / ``value_serializer`` /
    ``user_key_serializer`` snapshots of a state named ``name``. ``namespace_serializer`` None
    means the namespace is carried over unchanged (a savepoint rewrite), so it is not judged."""
    if descriptor.kind is not old_kind:
        return StateResolution(name, Outcome.INCOMPATIBLE, [
            f"state kind changed from {old_kind.value} to {descriptor.kind.value}: the savepoint holds "
            f"{old_kind.value} state but it is registered as {descriptor.kind.value} state"])
    if descriptor.ttl != old_ttl:
        change = "enabled" if descriptor.ttl else "disabled"
        return StateResolution(name, Outcome.INCOMPATIBLE, [
            f"time-to-live was {change}: stored values {'lack' if descriptor.ttl else 'carry'} the TTL timestamp, "
            f"so the state cannot be restored with TTL {change}"])
    reasons: list[str] = []
    res = StateResolution(name, Outcome.AS_IS)
    reconfigured = False
    if namespace_serializer is not None:
        ns = _resolve(old_snapshots["namespace_serializer"], namespace_serializer, "namespace")
        if ns.is_incompatible() or ns.is_compatible_after_migration():
            reasons.append(f"the namespace serializer must be compatible as is ({ns.type.value}"
                           f"{': ' + ns.reason if ns.reason else ''})")
        res.namespace_serializer = _use(ns, namespace_serializer)
        reconfigured = ns.is_compatible_with_reconfigured_serializer()
    if descriptor.kind is StateKind.MAP:
        new_uk = descriptor.user_key_serializer
        assert new_uk is not None
        uk = _resolve(old_snapshots["user_key_serializer"], new_uk, "map key")
        if uk.is_incompatible() or uk.is_compatible_after_migration():
            reasons.append(f"map keys: {uk.type.value}{': ' + uk.reason if uk.reason else ''}; map keys cannot be "
                           f"migrated (map state supports only value schema evolution, the user key serializer "
                           f"must be compatible as is)")
        res.user_key_serializer = _use(uk, new_uk)
        reconfigured = reconfigured or uk.is_compatible_with_reconfigured_serializer()
    what = {StateKind.VALUE: "value", StateKind.LIST: "list element", StateKind.MAP: "map value"}[descriptor.kind]
    val = _resolve(old_snapshots["value_serializer"], descriptor.value_serializer, what)
    res.value_serializer = _use(val, descriptor.value_serializer)
    if val.is_incompatible():
        reasons.append(f"{what}: {val.reason or 'incompatible'}")
    if reasons:
        res.outcome = Outcome.INCOMPATIBLE
        res.reasons = reasons
        return res
    if val.is_compatible_after_migration():
        res.outcome = Outcome.MIGRATION
        res.reasons = [f"{what}: {val.reason or 'the serializer needs migration'}"]
    elif reconfigured or val.is_compatible_with_reconfigured_serializer():
        res.outcome = Outcome.RECONFIGURED
        if val.reason:
            res.reasons = [f"{what}: {val.reason}"]
    return res


def resolve_key_serializer(old: TypeSerializerSnapshot, new: TypeSerializer[Any]) -> TypeSerializer[Any]:
    """The key serializer to use after restore; anything but as-is / reconfigured is an error
    (keys address every entry, so Flink never migrates them)."""
    r = _resolve(old, new, "key")
    if r.is_incompatible() or r.is_compatible_after_migration():
        raise StateMigrationError(
            f"the new key serializer {type(new).__name__} must be compatible as is with the savepoint's key "
            f"serializer, but it is {r.type.value}{': ' + r.reason if r.reason else ''}"
        )
    return _use(r, new)


__all__ = ["Outcome", "StateResolution", "resolve_key_serializer", "resolve_state"]
