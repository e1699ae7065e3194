"""The ONE planner: what restoring or rewriting a savepoint with new descriptors does to each
state, decided once on the driver before any data moves.

``statemorph check``, ``statemorph migrate``, :func:`~statemorph.engine.check_savepoint` (the API's dry run), the
local engine and the Spark engine all build their :class:`RewritePlan` here, from the format's
per-state descriptions (:class:`~statemorph.savepoint.description.StateDescription`: name, kind,
serializer snapshots, TTL flag), so the dry run and the real run cannot disagree and a second
savepoint format plugs in by describing its states. The per-state rules themselves are
:func:`statemorph.state.resolve.resolve_state`, the function the backends use when a restored
state is registered. Planning reads only metadata (serializer snapshots), never state data.

Per state the action is one of:

- ``copy``: the new serializer reads the old bytes as they are (compatible as is, or with a
  reconfigured serializer); files are copied unchanged, the metadata gets the new snapshot;
- ``migrate``: compatible after migration; the ``value`` column is rewritten by the kernels;
- ``keep``: the new job does not mention the state; it is carried over with its old snapshots;
- ``new``: a descriptor for a state the savepoint lacks (only when planning a dry run);
- ``incompatible``: the reason names the state and the field paths.

Every snapshot a rewrite carries into the new metadata (the savepoint's key serializer, each
state's key and namespace serializers, and all snapshots of a kept state) must be readable: one
that is not (junk, an unregistered class) makes the state, or ``<key>``, incompatible with a reason
naming the role, so ``check`` reports it and ``migrate`` refuses before writing anything.

Keys and namespaces are carried over as they are (Flink requires their serializers to be
compatible as is; pass ``key_serializer`` / ``namespace_serializers`` to have them judged too);
map keys must stay readable as they are (Flink migrates map values, not map keys).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExitCode, IncompatibleSchemaError, SavepointError, StateMigrationError, UnsupportedStateError
from ..keyed.kinds import StateKind
from ..state.descriptors import StateDescriptor
from ..state.resolve import Outcome, resolve_key_serializer, resolve_state
from ..typeutils import SnapshotRegistry, TypeSerializer, TypeSerializerSnapshot, write_versioned_snapshot

COPY, MIGRATE, KEEP, NEW, INCOMPATIBLE = "copy", "migrate", "keep", "new", "incompatible"

_ACTION = {Outcome.AS_IS: COPY, Outcome.RECONFIGURED: COPY, Outcome.MIGRATION: MIGRATE,
           Outcome.NEW_STATE: NEW, Outcome.INCOMPATIBLE: INCOMPATIBLE}

_VERDICT = {ExitCode.OK: "compatible as is", ExitCode.MIGRATION_NEEDED: "compatible after migration",
            ExitCode.INCOMPATIBLE: "INCOMPATIBLE"}


StateDocument = Callable[["StatePlan"], dict[str, Any]]
"""How a caller shows one planned state (``statemorph check --json``'s state shape)."""


@dataclass
class StatePlan:
    """The outcome for one state (or for the key serializer, named ``<key>``, kind ``key``).

    ``value_snapshot`` / ``user_key_snapshot`` are the versioned snapshot bytes the NEW metadata
    records; ``prior_value_snapshot`` the old ones; ``new_serializer`` writes the new values;
    ``meta`` is the format's description of the state (the runners read its files)."""

    name: str
    kind: str
    action: str
    outcome: Outcome = Outcome.AS_IS
    reasons: list[str] = field(default_factory=list)
    rows: int = 0
    """Entries; -1 when the format counts them only while rewriting (Flink keyed-state files)."""
    registered: bool = True
    prior_value_snapshot: bytes = b""
    value_snapshot: bytes = b""
    user_key_snapshot: bytes | None = None
    new_serializer: Any = None
    meta: Any = field(default=None, repr=False)
    savepoint_meta: Any = field(default=None, repr=False)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    @property
    def exit_status(self) -> ExitCode:
        if self.action == INCOMPATIBLE:
            return ExitCode.INCOMPATIBLE
        return ExitCode.MIGRATION_NEEDED if self.action == MIGRATE else ExitCode.OK

    @property
    def plan(self) -> str:
        """The migration in words (the compatibility reason); empty when nothing changes."""
        return self.reason if self.action == MIGRATE else ""

    def line(self) -> str:
        label = self.outcome.label if self.registered else "not registered by the new program: kept as is"
        head = label if self.action in (INCOMPATIBLE, NEW) else f"{self.action} ({label})"
        detail = f": {self.reason}" if self.reasons else ""
        rows = f", {self.rows:,} rows" if self.kind != "key" and self.rows >= 0 else ""
        return f"{self.name} ({self.kind}{rows}): {head}{detail}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "action": self.action, "outcome": self.outcome.name.lower(),
                "label": self.outcome.label, "reasons": list(self.reasons), "rows": self.rows,
                "registered": self.registered, "exit_status": int(self.exit_status)}


@dataclass
class RewritePlan:
    """Every state of a savepoint, in metadata order, plus the key check when one was asked for.
    ``exit_status`` is the ``statemorph check`` status (:class:`~statemorph.errors.ExitCode`)."""

    source: str
    metadata: Any
    states: list[StatePlan]
    key: StatePlan | None = None

    @property
    def path(self) -> str:
        return self.source

    @property
    def max_parallelism(self) -> int:
        return int(self.metadata.max_parallelism)

    @property
    def incompatible(self) -> list[StatePlan]:
        checks = ([self.key] if self.key is not None else []) + self.states
        return [s for s in checks if s.action == INCOMPATIBLE]

    @property
    def total_rows(self) -> int:
        """Entries of every state (a format that only counts them while rewriting reports -1
        per state, counted here as 0)."""
        return sum(max(s.rows, 0) for s in self.states)

    @property
    def rows_to_migrate(self) -> int:
        return sum(max(s.rows, 0) for s in self.states if s.action == MIGRATE)

    @property
    def exit_status(self) -> ExitCode:
        """OK (0) nothing to migrate, MIGRATION_NEEDED (1), INCOMPATIBLE (3)."""
        if self.incompatible:
            return ExitCode.INCOMPATIBLE
        return ExitCode.MIGRATION_NEEDED if any(s.action == MIGRATE for s in self.states) else ExitCode.OK

    @property
    def is_compatible(self) -> bool:
        return self.exit_status != ExitCode.INCOMPATIBLE

    @property
    def needs_migration(self) -> bool:
        return self.exit_status == ExitCode.MIGRATION_NEEDED

    def state(self, name: str) -> StatePlan:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    def raise_if_incompatible(self) -> None:
        bad = self.incompatible
        if bad:
            reasons = "\n".join(f"state {s.name!r}: {s.reason}" if s.kind != "key" else s.reason for s in bad)
            n = sum(1 for s in bad if s.kind != "key")
            what = f"{n} of {len(self.states)} states" + (" and the key" if n < len(bad) else "")
            raise IncompatibleSchemaError(
                f"{what} of {self.source} cannot be restored by the new schema (nothing was written)\n{reasons}",
                reasons)

    @property
    def summary(self) -> str:
        status = self.exit_status
        lines = [f"savepoint {self.source} (max_parallelism {self.max_parallelism}): {_VERDICT[status]} "
                 f"(exit status {int(status)})"]
        if self.key is not None:
            lines.append("  " + self.key.line())
        lines += ["  " + s.line() for s in self.states]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary

    def check_fields(self, state_document: StateDocument) -> dict[str, Any]:
        """What ``check --json`` says of this format beside the states: ``format`` and the key
        check (each planned state in ``state_document``'s shape)."""
        return {"format": "parquet", "key": state_document(self.key) if self.key is not None else None}

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.source, "max_parallelism": self.max_parallelism, "exit_status": int(self.exit_status),
                "key": self.key.to_dict() if self.key else None, "states": [s.to_dict() for s in self.states]}


def _descriptor_map(
    descriptors: Iterable[StateDescriptor] | Mapping[str, StateDescriptor],
) -> dict[str, StateDescriptor]:
    items = descriptors.values() if isinstance(descriptors, Mapping) else descriptors
    out: dict[str, StateDescriptor] = {}
    for d in items:
        if not isinstance(d, StateDescriptor):
            raise TypeError(f"expected state descriptors, got {type(d).__name__}")
        if d.name in out:
            raise ValueError(f"two descriptors for state {d.name!r}")
        out[d.name] = d
    return out


def plan_rewrite(
    source: str | os.PathLike[str],
    metadata: Any,
    new_descriptors: Iterable[StateDescriptor] | Mapping[str, StateDescriptor],
    *,
    key_serializer: TypeSerializer[Any] | None = None,
    namespace_serializers: Mapping[str, TypeSerializer[Any]] | None = None,
    registry: SnapshotRegistry | None = None,
    new_states: bool = False,
) -> RewritePlan:
    """Resolve every state ``metadata`` describes (a
    :class:`~statemorph.savepoint.description.SavepointDescription`) against ``new_descriptors``
    (by state name).

    A descriptor naming a state the savepoint lacks is a :class:`SavepointError` (usually a typo:
    the message lists the states there are), unless ``new_states`` is set (a dry run of a program
    that adds states): then it is planned as ``new``."""
    source = os.fspath(source)
    descs = _descriptor_map(new_descriptors)
    unknown = [n for n in descs if n not in metadata.states]
    if unknown and not new_states:
        known = ", ".join(repr(n) for n in metadata.states) or "none"
        raise SavepointError(f"{source} has no state named {', '.join(repr(n) for n in unknown)} (states: {known})")
    ns_map = dict(namespace_serializers or {})
    write_snapshot = getattr(metadata, "new_snapshot_bytes", _default_snapshot_bytes)
    plans = [_plan_state(st, descs.get(name), ns_map.get(name), registry, write_snapshot)
             for name, st in metadata.states.items()]
    for p in plans:
        p.savepoint_meta = metadata
    plans += [StatePlan(n, descs[n].kind.value, NEW, Outcome.NEW_STATE) for n in unknown]
    key: StatePlan | None
    if key_serializer is not None:
        key = _plan_key(metadata, key_serializer, registry)
    else:
        key = None if getattr(metadata, "carries_unread_snapshots", False) else _check_key_snapshot(metadata, registry)
    return RewritePlan(source, metadata, plans, key)


CheckReport = RewritePlan
"""The dry run's answer is a plan (the name :func:`statemorph.engine.check_savepoint` callers know)."""
StateCheck = StatePlan


def _plan_key(metadata: Any, key_serializer: TypeSerializer[Any], registry: SnapshotRegistry | None) -> StatePlan:
    try:
        old_key = metadata.key_snapshot(registry)
        reconfigured = resolve_key_serializer(old_key, key_serializer) is not key_serializer
    except (SavepointError, StateMigrationError, UnsupportedStateError) as e:
        return StatePlan("<key>", "key", INCOMPATIBLE, Outcome.INCOMPATIBLE, [str(e)])
    outcome = Outcome.RECONFIGURED if reconfigured else Outcome.AS_IS
    return StatePlan("<key>", "key", COPY, outcome)


def _default_snapshot_bytes(serializer: TypeSerializer[Any]) -> bytes:
    return write_versioned_snapshot(serializer.snapshot_configuration())


def _check_key_snapshot(metadata: Any, registry: SnapshotRegistry | None) -> StatePlan | None:
    """None when the savepoint's key serializer snapshot reads, or is opaque (Kryo, a user class:
    the keys are carried as they are, like an opaque state's values); else an incompatible ``<key>``."""
    try:
        metadata.key_snapshot(registry)
    except UnsupportedStateError:
        return None
    except SavepointError as e:
        return StatePlan("<key>", "key", INCOMPATIBLE, Outcome.INCOMPATIBLE, [str(e)])
    return None


def _carried_roles(kind: StateKind, desc: StateDescriptor | None,
                   namespace_serializer: TypeSerializer[Any] | None) -> list[str]:
    """The snapshots copied into the new metadata as they are (not resolved against the new program)."""
    roles = ["key_serializer"] + ([] if namespace_serializer is not None else ["namespace_serializer"])
    if desc is None:
        roles += ["value_serializer"] + (["user_key_serializer"] if kind is StateKind.MAP else [])
    return roles


def _plan_state(st: Any, desc: StateDescriptor | None, namespace_serializer: TypeSerializer[Any] | None,
                registry: SnapshotRegistry | None, write_snapshot: Callable[[Any], bytes]) -> StatePlan:
    kind = StateKind(st.kind)
    prior_bytes = st.snapshot_bytes("value_serializer")
    user_key_bytes = st.snapshot_bytes("user_key_serializer") if kind is StateKind.MAP else None
    plan = StatePlan(st.name, kind.value, KEEP, rows=st.rows, prior_value_snapshot=prior_bytes,
                     value_snapshot=prior_bytes, user_key_snapshot=user_key_bytes, meta=st)
    plan.registered = desc is not None
    try:
        for role in [] if getattr(st, "carries_unread_snapshots", False) else \
                _carried_roles(kind, desc, namespace_serializer):
            st.snapshot(role, registry)
    except (SavepointError, UnsupportedStateError) as e:
        plan.action, plan.outcome, plan.reasons = INCOMPATIBLE, Outcome.INCOMPATIBLE, [str(e)]
        return plan
    if desc is None:
        return plan
    roles = ["value_serializer"] + (["user_key_serializer"] if kind is StateKind.MAP else []) \
        + (["namespace_serializer"] if namespace_serializer is not None else [])
    try:
        snaps: dict[str, TypeSerializerSnapshot] = {role: st.snapshot(role, registry) for role in roles}
    except (SavepointError, UnsupportedStateError) as e:
        plan.action, plan.outcome, plan.reasons = INCOMPATIBLE, Outcome.INCOMPATIBLE, [str(e)]
        return plan
    res = resolve_state(st.name, kind, snaps, desc, namespace_serializer, old_ttl=bool(st.ttl))
    plan.outcome, plan.reasons, plan.action = res.outcome, list(res.reasons), _ACTION[res.outcome]
    if res.outcome is Outcome.INCOMPATIBLE:
        return plan
    assert res.value_serializer is not None
    plan.new_serializer = res.value_serializer
    plan.value_snapshot = write_snapshot(res.value_serializer)
    if res.user_key_serializer is not None:
        plan.user_key_snapshot = write_snapshot(res.user_key_serializer)
    return plan


__all__ = ["COPY", "CheckReport", "INCOMPATIBLE", "KEEP", "MIGRATE", "NEW", "RewritePlan", "StateCheck", "StatePlan",
           "plan_rewrite"]
