"""The dry run: what restoring a savepoint with new serializers would do, per state, without
restoring anything or reading any state data (only ``_metadata.json`` and its snapshots).

The per-state rules are :func:`statemorph.state.resolve.resolve_state`, the same function the
backends use when a state is registered, so a dry run and a real restore cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SavepointError, StateMigrationError, StatemorphError
from ..serializers.base import TypeSerializer
from ..snapshot import SnapshotRegistry
from ..state.descriptors import StateDescriptor
from ..state.keygroups import KeyHasher, assign_to_key_group, hasher_for_serializer
from ..state.namespace import VoidNamespaceSerializer
from ..state.resolve import Outcome, resolve_key_serializer, resolve_state
from .format import SNAPSHOT_ROLES, StateMetadata
from .reader import iter_state_batches, read_metadata

EXIT_AS_IS = 0
EXIT_MIGRATION = 1
EXIT_INCOMPATIBLE = 2


@dataclass
class StateCheck:
    """The outcome for one state (or for the key serializer, named ``<key>``)."""

    name: str
    kind: str
    outcome: Outcome
    reasons: list[str] = field(default_factory=list)
    rows: int = 0
    registered: bool = True

    @property
    def exit_status(self) -> int:
        if self.outcome is Outcome.INCOMPATIBLE:
            return EXIT_INCOMPATIBLE
        return EXIT_MIGRATION if self.outcome is Outcome.MIGRATION else EXIT_AS_IS

    @property
    def plan(self) -> str:
        """The migration plan in words (the compatibility reason); empty when nothing changes."""
        return "; ".join(self.reasons) if self.outcome is Outcome.MIGRATION else ""

    def line(self) -> str:
        label = self.outcome.label if self.registered else "not registered by the new program: kept as is"
        detail = f": {'; '.join(self.reasons)}" if self.reasons else ""
        rows = f", {self.rows} rows" if self.kind != "key" else ""
        return f"{self.name} ({self.kind}{rows}): {label}{detail}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "outcome": self.outcome.name.lower(),
                "label": self.outcome.label, "reasons": list(self.reasons), "rows": self.rows,
                "registered": self.registered, "exit_status": self.exit_status}


@dataclass
class CheckReport:
    """Per-state outcomes and the overall exit status: 0 all compatible as is (or reconfigured, or
    new), 1 at least one state needs migration, 2 at least one is incompatible."""

    path: str
    max_parallelism: int
    states: list[StateCheck]
    key: StateCheck | None = None

    @property
    def exit_status(self) -> int:
        checks = self.states + ([self.key] if self.key is not None else [])
        return max((c.exit_status for c in checks), default=EXIT_AS_IS)

    @property
    def is_compatible(self) -> bool:
        return self.exit_status < EXIT_INCOMPATIBLE

    @property
    def needs_migration(self) -> bool:
        return self.exit_status == EXIT_MIGRATION

    def state(self, name: str) -> StateCheck:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def summary(self) -> str:
        verdict = {EXIT_AS_IS: "compatible as is", EXIT_MIGRATION: "compatible after migration",
                   EXIT_INCOMPATIBLE: "INCOMPATIBLE"}[self.exit_status]
        lines = [f"savepoint {self.path} (max_parallelism {self.max_parallelism}): {verdict} "
                 f"(exit status {self.exit_status})"]
        if self.key is not None:
            lines.append("  " + self.key.line())
        lines += ["  " + s.line() for s in self.states]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "max_parallelism": self.max_parallelism, "exit_status": self.exit_status,
                "key": self.key.to_dict() if self.key else None, "states": [s.to_dict() for s in self.states]}


def _check_state(st: StateMetadata, desc: StateDescriptor, ns: TypeSerializer[Any],
                 registry: SnapshotRegistry | None) -> StateCheck:
    try:
        snaps = {role: st.snapshot(role, registry) for role in SNAPSHOT_ROLES[1:] if getattr(st, role) is not None}
    except SavepointError as e:
        return StateCheck(st.name, st.kind.value, Outcome.INCOMPATIBLE, [str(e)], st.rows)
    res = resolve_state(st.name, st.kind, snaps, desc, ns)
    return StateCheck(st.name, st.kind.value, res.outcome, res.reasons, st.rows)


def check_savepoint(
    path: str | os.PathLike[str],
    new_descriptors: Iterable[StateDescriptor],
    *,
    key_serializer: TypeSerializer[Any] | None = None,
    namespace_serializers: Mapping[str, TypeSerializer[Any]] | None = None,
    registry: SnapshotRegistry | None = None,
) -> CheckReport:
    """Judge ``new_descriptors`` (and optionally a new key serializer) against the savepoint at
    ``path``. Reads the metadata only; a damaged metadata file raises SavepointError. States in
    the savepoint without a descriptor are reported as kept as is; descriptors without a state as
    new states."""
    meta = read_metadata(path)
    descs: dict[str, StateDescriptor] = {}
    for d in new_descriptors:
        if not isinstance(d, StateDescriptor):
            raise TypeError(f"expected state descriptors, got {type(d).__name__}")
        if d.name in descs:
            raise ValueError(f"two descriptors for state {d.name!r}")
        descs[d.name] = d
    ns_map = dict(namespace_serializers or {})
    key_check = None
    if key_serializer is not None:
        try:
            old_key = meta.key_snapshot(registry)
            reconfigured = resolve_key_serializer(old_key, key_serializer) is not key_serializer
            key_check = StateCheck("<key>", "key", Outcome.RECONFIGURED if reconfigured else Outcome.AS_IS)
        except (SavepointError, StateMigrationError) as e:
            key_check = StateCheck("<key>", "key", Outcome.INCOMPATIBLE, [str(e)])
    checks = []
    for st in meta.states.values():
        desc = descs.pop(st.name, None)
        if desc is None:
            checks.append(StateCheck(st.name, st.kind.value, Outcome.AS_IS, rows=st.rows, registered=False))
        else:
            checks.append(_check_state(st, desc, ns_map.get(st.name) or VoidNamespaceSerializer(), registry))
    for d in descs.values():
        checks.append(StateCheck(d.name, d.kind.value, Outcome.NEW_STATE))
    return CheckReport(str(path), meta.max_parallelism, checks, key_check)


def verify_key_groups(
    path: str | os.PathLike[str],
    *,
    key_serializer: TypeSerializer[Any] | None = None,
    key_hasher: KeyHasher | None = None,
    states: Iterable[str] | None = None,
    registry: SnapshotRegistry | None = None,
) -> int:
    """Check that every row's ``key_group`` is the group Flink assigns to its key (a row filed
    under the wrong group is invisible after restore). Reads the data; returns the number of rows
    checked; the first mismatch is a SavepointError naming the state, row, key and both groups.
    ``key_serializer`` defaults to the one restored from the savepoint; ``key_hasher`` to the Java
    hashCode for that serializer's type."""
    meta = read_metadata(path)
    ser = key_serializer if key_serializer is not None else meta.key_snapshot(registry).restore_serializer()
    hasher = key_hasher or hasher_for_serializer(ser)
    names = list(states) if states is not None else list(meta.states)
    checked = 0
    for name in names:
        st = meta.state(name)
        cache: dict[bytes, int] = {}
        row = 0
        for batch in iter_state_batches(path, st, metadata=meta):
            groups = batch.column("key_group").to_pylist()
            for kg, kb in zip(groups, batch.column("key").to_pylist(), strict=True):
                expected = cache.get(kb)
                if expected is None:
                    try:
                        key = ser.from_bytes(kb)
                        expected = assign_to_key_group(hasher(key), meta.max_parallelism)
                    except StatemorphError as e:
                        raise SavepointError(f"state {name!r}, row {row}: key 0x{kb.hex()} cannot be read or "
                                             f"hashed: {e}") from e
                    if len(cache) < 1 << 16:
                        cache[kb] = expected
                if kg != expected:
                    raise SavepointError(f"state {name!r}, row {row}: key {ser.from_bytes(kb)!r} is stored under "
                                         f"key group {kg} but belongs to key group {expected}")
                row += 1
        checked += row
    return checked


__all__ = ["CheckReport", "EXIT_AS_IS", "EXIT_INCOMPATIBLE", "EXIT_MIGRATION", "StateCheck", "check_savepoint",
           "verify_key_groups"]
