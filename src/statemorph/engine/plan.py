"""What a savepoint rewrite will do to each state, decided once on the driver before any data moves.

Both engines (local and Spark) execute the same :class:`RewritePlan`, which is why they produce
the same savepoint. Planning reads only the metadata (serializer snapshots), never state data, so
an incompatible state stops the job before anything is written.

Per state the outcome is one of:

- ``copy``: the new serializer reads the old bytes as they are (compatible as is, or with a
  reconfigured serializer); files are copied unchanged, the metadata gets the new snapshot;
- ``migrate``: compatible after migration; the ``value`` column is rewritten by the kernels;
- ``keep``: the new job does not mention the state; it is carried over with its old snapshots;
- ``incompatible``: the reason names the state and the field paths.

Key and namespace serializers never change in a rewrite (Flink requires them AS_IS); map keys
must stay readable as they are (Flink migrates map values, not map keys).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import IncompatibleSchemaError, SavepointError, StateFormatError
from ..snapshot import write_versioned_snapshot

COPY, MIGRATE, KEEP, INCOMPATIBLE = "copy", "migrate", "keep", "incompatible"


@dataclass
class StatePlan:
    """The rewrite of one state. ``value_snapshot`` / ``user_key_snapshot`` are the versioned
    snapshot bytes the NEW metadata records; ``prior_value_snapshot`` the old ones."""

    name: str
    kind: str
    action: str
    reason: str = ""
    rows: int = 0
    prior_value_snapshot: bytes = b""
    value_snapshot: bytes = b""
    user_key_snapshot: bytes | None = None
    new_serializer: Any = None
    meta: Any = field(default=None, repr=False)
    savepoint_meta: Any = field(default=None, repr=False)

    @property
    def needs_data_pass(self) -> bool:
        return self.action == MIGRATE


@dataclass
class RewritePlan:
    """Every state of a savepoint, in metadata order."""

    source: str
    metadata: Any
    states: list[StatePlan]

    @property
    def incompatible(self) -> list[StatePlan]:
        return [s for s in self.states if s.action == INCOMPATIBLE]

    @property
    def total_rows(self) -> int:
        return sum(s.rows for s in self.states)

    @property
    def rows_to_migrate(self) -> int:
        return sum(s.rows for s in self.states if s.action == MIGRATE)

    @property
    def exit_status(self) -> int:
        """0 nothing to migrate, 1 migration needed, 2 incompatible (as ``statemorph check``)."""
        if self.incompatible:
            return 2
        return 1 if any(s.action == MIGRATE for s in self.states) else 0

    def raise_if_incompatible(self) -> None:
        bad = self.incompatible
        if bad:
            reasons = "\n".join(f"state {s.name!r}: {s.reason}" for s in bad)
            raise IncompatibleSchemaError(
                f"{len(bad)} of {len(self.states)} states of {self.source} cannot be restored by the new "
                f"schema (nothing was written)\n{reasons}", reasons)

    def summary(self) -> str:
        lines = []
        for s in self.states:
            why = f": {s.reason}" if s.reason else ""
            lines.append(f"  {s.name} ({s.kind}, {s.rows:,} entries): {s.action}{why}")
        return "\n".join(lines)


def _kind(meta: Any) -> str:
    k = meta.kind
    return str(getattr(k, "value", k))


def _descriptor_map(descriptors: Iterable[Any] | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(descriptors, Mapping):
        return dict(descriptors)
    out: dict[str, Any] = {}
    d: Any
    for d in descriptors:
        if d.name in out:
            raise ValueError(f"two descriptors for state {d.name!r}")
        out[d.name] = d
    return out


def plan_rewrite(source: str, metadata: Any, new_descriptors: Iterable[Any] | Mapping[str, Any]) -> RewritePlan:
    """Resolve every state of ``metadata`` against ``new_descriptors`` (by state name).

    A descriptor naming a state the savepoint lacks is a :class:`SavepointError` (usually a typo:
    the message lists the states there are)."""
    descs = _descriptor_map(new_descriptors)
    unknown = [n for n in descs if n not in metadata.states]
    if unknown:
        known = ", ".join(repr(n) for n in metadata.states) or "none"
        raise SavepointError(f"{source} has no state named {', '.join(repr(n) for n in unknown)} (states: {known})")
    plans = [_plan_state(meta, descs.get(name)) for name, meta in metadata.states.items()]
    for p in plans:
        p.savepoint_meta = metadata
    return RewritePlan(source, metadata, plans)


def _plan_state(meta: Any, desc: Any) -> StatePlan:
    kind = _kind(meta)
    prior_bytes = meta.snapshot_bytes("value_serializer")
    user_key_bytes = meta.user_key_serializer
    plan = StatePlan(meta.name, kind, KEEP, rows=meta.rows, prior_value_snapshot=prior_bytes,
                     value_snapshot=prior_bytes, user_key_snapshot=user_key_bytes, meta=meta)
    if desc is None:
        return plan
    new_kind = str(getattr(desc.kind, "value", desc.kind))
    if new_kind != kind:
        return _incompatible(plan, f"state kind changed from {kind} to {new_kind}")
    try:
        prior = meta.snapshot("value_serializer")
        result = prior.resolve_schema_compatibility(desc.value_serializer)
    except (StateFormatError, SavepointError) as e:
        return _incompatible(plan, f"the old value serializer snapshot cannot be read: {e}")
    reasons: list[str] = []
    if kind == "map" and desc.user_key_serializer is not None:
        uk = meta.snapshot("user_key_serializer").resolve_schema_compatibility(desc.user_key_serializer)
        if uk.is_compatible_as_is():
            plan.user_key_snapshot = write_versioned_snapshot(desc.user_key_serializer.snapshot_configuration())
        elif uk.is_compatible_with_reconfigured_serializer():
            plan.user_key_snapshot = write_versioned_snapshot(
                uk.get_reconfigured_serializer().snapshot_configuration())
        else:
            why = uk.reason or "needs migration"
            reasons.append(f"map keys: {why} (map keys cannot be migrated; only map values can)")
    if result.is_incompatible():
        reasons.insert(0, result.reason or "incompatible")
    if reasons:
        return _incompatible(plan, "; ".join(reasons))
    if result.is_compatible_after_migration():
        plan.action = MIGRATE
        plan.reason = result.reason or "compatible after migration"
        plan.new_serializer = desc.value_serializer
        plan.value_snapshot = write_versioned_snapshot(desc.value_serializer.snapshot_configuration())
        return plan
    plan.action = COPY
    if result.is_compatible_with_reconfigured_serializer():
        ser = result.get_reconfigured_serializer()
        plan.reason = "compatible with a reconfigured serializer"
    else:
        ser = desc.value_serializer
        plan.reason = "compatible as is"
    plan.new_serializer = ser
    plan.value_snapshot = write_versioned_snapshot(ser.snapshot_configuration())
    return plan


def _incompatible(plan: StatePlan, reason: str) -> StatePlan:
    plan.action = INCOMPATIBLE
    plan.reason = reason
    return plan


__all__ = ["COPY", "INCOMPATIBLE", "KEEP", "MIGRATE", "RewritePlan", "StatePlan", "plan_rewrite"]
