"""Operator state planned by the one planner and migrated in place.

Planning: each operator with operator state is described like a keyed operator
(:class:`OperatorStatesDescription`, what :func:`statemorph.engine.plan.plan_rewrite` takes), its
states by shape: a list or union list state is ``list`` state (the element is the value), a
broadcast state is ``map`` state (its key serializer the map key, its value serializer the map
value). So a program registers them with the descriptors Flink itself uses (``ListStateDescriptor``,
``MapStateDescriptor``), and a schema file names them like keyed states,
``[operators.<uid>.states.<name>]``, the kind defaulting to the recorded one.

Rewriting: each subtask stream holding a migrated state is read whole, the state's elements (or
broadcast map values) go through the value migration, the header records the new
``VALUE_SERIALIZER`` snapshot, and the stream is written again with new offsets (the other states'
bytes as they were) inline in ``_metadata`` or as a new file, as the source had it.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ...errors import FlinkSavepointError
from ...keyed.kinds import StateKind
from ...typeutils import SnapshotRegistry
from ..storage import NewFile, Target
from .description import DescribedOperator, FlinkOperatorDescription, RecordedSnapshots
from .envelope import Snapshot, snapshot_from_envelope
from .files import SavepointDirectory
from .handles import DISTRIBUTION_MODES, ByteStreamHandle, FileHandle, OperatorStreamHandle, RelativeFileHandle
from .keyed_header import VALUE_SERIALIZER
from .keyed_writer import keep_inline
from .metadata import CheckpointMetadata, OperatorState
from .migrate_stream import ValueMigration
from .operator_ids import naming
from .operator_state import KEY_SERIALIZER, OperatorStatePart, operator_streams, write_operator_stream
from .operator_state_read import KIND_OF_MODE
from .reader import FlinkSavepoint

OperatorChanges = Mapping[tuple[str, str], tuple[bytes, ValueMigration]]
"""``(operator uid or uid hash, state name)`` -> (new per-value snapshot envelope, value migration),
as :func:`~.rewrite.rewrite` takes for keyed states."""


@dataclass
class OperatorStateDescription(RecordedSnapshots):
    """One operator state as the planner sees it (no key, no namespace, no TTL)."""

    mode: str
    rows: int = -1
    ttl: bool = False
    carries_unread_snapshots: bool = True

    @property
    def flink_kind(self) -> str:
        return KIND_OF_MODE[self.mode]

    @property
    def kind(self) -> StateKind:
        return StateKind.MAP if self.mode == "BROADCAST" else StateKind.LIST

    WHAT = "operator state"

    def _recorded(self, role: str) -> Snapshot | None:
        key = {"value_serializer": VALUE_SERIALIZER, "user_key_serializer": KEY_SERIALIZER}.get(role)
        return self.meta.serializer(key) if key is not None and (key == VALUE_SERIALIZER or self.mode == "BROADCAST") \
            else None


@dataclass
class OperatorStatesDescription(DescribedOperator):
    """The operator states of one operator (from its first subtask that has them; every subtask
    registers the same states), described for the planner."""

    operator: OperatorState
    states: dict[str, OperatorStateDescription] = field(default_factory=dict)
    carries_unread_snapshots: bool = True
    operator_state = True
    """Tells the Flink runner these states live in operator-state streams, not keyed ones."""

    new_snapshot_bytes = staticmethod(FlinkOperatorDescription.new_snapshot_bytes)

def describe_operator_states_of(savepoint: FlinkSavepoint, op: OperatorState) -> OperatorStatesDescription | None:
    """``op``'s managed operator states, or None when it has none (reads its streams only)."""
    desc = OperatorStatesDescription(op)
    for _, stream in operator_streams(savepoint, op):
        for h in stream.handle.states:
            meta = stream.header.meta(h.name)
            if meta is not None and h.name not in desc.states:
                desc.states[h.name] = OperatorStateDescription(op, meta, DISTRIBUTION_MODES[h.mode])
    return desc if desc.states else None


@dataclass
class StateOwner:
    """One operator as a schema file sees it: its keyed and its operator states under one uid."""

    ident: str
    label: str
    states: dict[str, Any]
    owners: list[Any]
    operator: OperatorState
    derived_from: str | None = None
    """As :attr:`FlinkOperatorDescription.derived_from` (the one operator lookup,
    :func:`.operator_ids.find_operator`, finds owners like descriptions)."""


def state_owners(savepoint: FlinkSavepoint, keyed: list[Any], idents: list[str]) -> list[StateOwner]:
    """The keyed operators merged per operator with the operator states of the operators
    ``idents`` names (schema files name both kinds of state as ``[operators.<uid>.states.<name>]``;
    the operator-state streams of the other operators are not read)."""
    named = [op for op in savepoint.operators if any(naming(op, i) is not None for i in idents)]
    operator_states = [d for d in (describe_operator_states_of(savepoint, op) for op in named) if d is not None]
    merged: dict[bytes, StateOwner] = {}
    for o in [*keyed, *operator_states]:
        owner = merged.setdefault(o.operator.operator_id, StateOwner(o.ident, o.label, {}, [], o.operator))
        owner.states.update(o.states)
        owner.owners.append(o)
    return list(merged.values())


# -- rewriting ----------------------------------------------------------------------------------

@dataclass
class _OperatorChange:
    snapshot: Snapshot
    migrate: ValueMigration
    label: tuple[str, str]


def check_operator_changes(src: FlinkSavepoint, changes: OperatorChanges,
                           registry: SnapshotRegistry | None) -> dict[int, dict[str, _OperatorChange]]:
    """The changes by operator index, checked before anything is written: every state exists as
    operator state, its entries can be cut (a broadcast state needs both serializers read), and
    the new snapshot envelope reads."""
    index = {id(op): i for i, op in enumerate(src.operators)}
    out: dict[int, dict[str, _OperatorChange]] = {}
    for (ident, state), (envelope, migrate) in changes.items():
        op = src.operator(ident)
        found = False
        for _, stream in operator_streams(src, op):
            part = stream.part(state)
            if part is None:
                continue
            found = True
            if part.broadcast and part.entries is None:
                raise FlinkSavepointError(f"{op.label()} broadcast state {state!r}: its key or value serializer is "
                                          f"not one statemorph reads, so its entries cannot be migrated")
        if not found:
            raise FlinkSavepointError(f"{src.path}: {op.label()} has no operator state named {state!r}")
        out.setdefault(index[id(op)], {})[state] = _OperatorChange(
            snapshot_from_envelope(envelope, registry), migrate, (ident, state))
    return out


def write_operator_changes(src: FlinkSavepoint, meta: CheckpointMetadata,
                           changes: dict[int, dict[str, _OperatorChange]], tmp: Target,
                           threshold: int) -> tuple[dict[tuple[str, str], int], set[str], int]:
    """Rewrite every operator-state stream holding a changed state into ``tmp`` and point
    ``meta``'s handles at them; returns the values migrated per (operator, state), the source
    files no longer referenced, and the number of streams rewritten."""
    counts = {ch.label: 0 for chs in changes.values() for ch in chs.values()}
    replaced: set[str] = set()
    rewritten = 0
    for op_index, chs in changes.items():
        op = src.operators[op_index]
        for st, stream in operator_streams(src, op):
            parts = stream.parts()
            mine = [p for p in parts if p.name in chs]
            if not mine:
                continue
            header = copy.deepcopy(stream.header)
            for p in mine:
                ch = chs[p.name]
                target = header.meta(p.name)
                assert target is not None
                target.set_serializer(VALUE_SERIALIZER, ch.snapshot)
                counts[ch.label] += _migrate_part(p, ch.migrate, f"{op.label()} subtask {st.index} state {p.name!r}")
            data, infos = write_operator_stream(header, parts)
            old = stream.handle.delegate
            new_st = next(s for s in meta.operators[op_index].subtasks or [] if s.index == st.index and not s.finished)
            new_st.managed_operator = OperatorStreamHandle(infos, _new_delegate(src.directory, old, data, tmp,
                                                                                threshold))
            if isinstance(old, (FileHandle, RelativeFileHandle)):
                replaced.add(src.directory.relative_name(old))
            rewritten += 1
    return counts, replaced, rewritten


def _migrate_part(p: OperatorStatePart, migrate: ValueMigration, where: str) -> int:
    """Migrate a part's list elements or broadcast map values in place; returns how many."""
    old = [v for _, v in p.entries] if p.broadcast and p.entries is not None else p.elements
    new = migrate(pa.array(old, pa.binary())).to_pylist()
    if len(new) != len(old) or any(v is None for v in new):
        raise FlinkSavepointError(f"{where}: the migration returned {len(new)} values for {len(old)}")
    if p.broadcast and p.entries is not None:
        p.entries = [(k, v) for (k, _), v in zip(p.entries, new, strict=True)]
    else:
        p.elements = new
    return len(new)


def _new_delegate(d: SavepointDirectory, old: Any, data: bytes, tmp: Target, threshold: int) -> Any:
    """The rewritten stream inline in ``_metadata`` or as a file, as the source had it (see
    :func:`~.keyed_writer.keep_inline`)."""
    if keep_inline(old, len(data), threshold):
        return ByteStreamHandle(old.name if isinstance(old, ByteStreamHandle) else str(uuid.uuid4()), data)
    return new_stream_file(tmp, data, d.relative_name(old) if isinstance(old, (FileHandle, RelativeFileHandle))
                           else None)


def new_stream_file(tmp: Target, data: bytes, name: str | None = None) -> RelativeFileHandle:
    """``data`` as a new file ``name`` (default: a fresh UUID, as Flink names its files) of ``tmp``."""
    name = name or str(uuid.uuid4())
    f = NewFile(tmp, name)
    try:
        f.write(data)
        f.finish()
    except BaseException:
        f.abort()
        raise
    return RelativeFileHandle(name, len(data))


__all__ = ["OperatorChanges", "OperatorStateDescription", "OperatorStatesDescription", "StateOwner",
           "check_operator_changes", "describe_operator_states_of", "new_stream_file", "state_owners",
           "write_operator_changes"]
