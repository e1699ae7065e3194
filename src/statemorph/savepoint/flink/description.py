"""Flink's keyed operators described for the one planner (:mod:`statemorph.engine.plan`).

A Flink savepoint holds keyed state per operator, each with its own key serializer and max
parallelism, so each keyed operator is one :class:`~statemorph.savepoint.description.SavepointDescription`.
Everything comes from the keyed-state headers (the data is not read): entry counts are therefore
unknown at planning time (``rows == -1``) and counted by the rewrite.

Two Flink specifics live here rather than in the planner:

- the per-value snapshot of a state is the one inside its List / Map / TTL wrappers (the wrappers
  are Flink's and stay as they are);
- a new serializer's snapshot is written in Flink's own class where statemorph's default differs
  (``RowDataSerializer.flink_snapshot_configuration``), so Flink restores it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from ... import serializers as _serializers  # noqa: F401  (registers every snapshot class Flink names)
from ...errors import SavepointError, UnsupportedStateError
from ...keyed.kinds import StateKind
from ...typeutils import (
    SnapshotRegistry,
    TypeSerializerSnapshot,
    flink_snapshot,
    write_versioned_snapshot,
)
from ..description import opaque_type as _opaque_type
from .envelope import Snapshot
from .keyed_header import NAMESPACE_SERIALIZER, KeyedHeader, StateMetaInfo
from .metadata import OperatorState
from .operator_ids import find_operator, naming
from .reader import FlinkSavepoint

_KIND = {"value": StateKind.VALUE, "reducing": StateKind.VALUE, "aggregating": StateKind.VALUE,
         "list": StateKind.LIST, "map": StateKind.MAP}
"""Reducing and aggregating state keep one value per key, stored like value state."""


@dataclass
class RecordedSnapshots:
    """The planner's view of a state of an operator, keyed and operator states alike: its meta
    info (the name and the recorded serializer snapshots by role; ``_raw`` finds a role's
    snapshot, ``label`` names the state), so one place says how a snapshot statemorph does not
    read is refused."""

    operator: OperatorState
    meta: StateMetaInfo
    WHAT: ClassVar[str] = "state"
    """What :attr:`label` calls the state after its operator's label."""

    @property
    def name(self) -> str:
        return self.meta.name

    def _recorded(self, role: str) -> Snapshot | None:
        """The snapshot recorded for ``role``, None where the state has no such serializer."""
        raise NotImplementedError

    def _raw(self, role: str) -> Snapshot:
        snap = self._recorded(role)
        if snap is None:
            raise SavepointError(f"{self.label} has no {role.replace('_', ' ')}")
        return snap

    @property
    def label(self) -> str:
        return f"{self.operator.label()} {self.WHAT} {self.name!r}"

    def snapshot_bytes(self, role: str) -> bytes:
        return self._raw(role).raw

    def snapshot_class(self, role: str) -> str:
        """The Flink snapshot class recorded for ``role`` (what inspect shows for opaque types)."""
        return self._raw(role).class_name

    def snapshot(self, role: str, registry: SnapshotRegistry | None = None) -> TypeSerializerSnapshot:
        snap = self._raw(role)
        if snap.parsed is None:
            raise UnsupportedStateError(
                f"{self.label}: unsupported state: its {role.replace('_', ' ')} is {opaque_type(snap)} "
                f"({snap.class_name.rsplit('.', 1)[-1]}), which statemorph cannot decode; the state is carried over "
                f"byte for byte but cannot be read decoded or migrated")
        return snap.parsed


@dataclass
class FlinkStateDescription(RecordedSnapshots):
    """One keyed state of one operator (timers are not states the planner resolves)."""

    header: KeyedHeader
    rows: int = -1
    carries_unread_snapshots: bool = True
    """Snapshots statemorph does not read (Kryo, user classes) are carried over as exact bytes:
    only the states a program changes need readable snapshots."""

    @property
    def flink_kind(self) -> str:
        """value / list / map / reducing / aggregating, as Flink's descriptor type says."""
        return self.meta.kind

    @property
    def kind(self) -> StateKind:
        kind = _KIND.get(self.meta.kind)
        if kind is None:
            raise SavepointError(f"{self.operator.label()} state {self.name!r} is {self.meta.state_type} state, "
                                 f"which statemorph does not resolve")
        return kind

    @property
    def ttl(self) -> bool:
        return self.meta.ttl

    def _recorded(self, role: str) -> Snapshot | None:
        if role == "value_serializer":
            return self.meta.value_snapshot_unwrapped()[0]
        if role == "user_key_serializer":
            return self.meta.user_key_snapshot()
        if role == "namespace_serializer":
            return self.meta.serializer(NAMESPACE_SERIALIZER)
        if role == "key_serializer":
            return self.header.key_serializer
        raise SavepointError(f"unknown serializer role {role!r}")

    def opaque_roles(self) -> dict[str, str]:
        """Role → ``RAW('<class>')`` of each serializer of this state that statemorph does not read
        (empty for a fully readable state)."""
        roles = ["key_serializer", "namespace_serializer", "value_serializer"]
        if self.meta.kind == "map":
            roles.append("user_key_serializer")
        out = {}
        for role in roles:
            try:
                snap = self._raw(role)
            except SavepointError:
                continue
            if snap.parsed is None:
                out[role] = opaque_type(snap)
        return out


class DescribedOperator:
    """What the planner and messages ask of any described operator (its keyed states or its
    operator states): a label, the name a schema file uses, the max parallelism."""

    operator: OperatorState
    derived_from: str | None = None
    """The uid that found this operator through its derived ID (:func:`find_keyed_operator` on a
    savepoint that records no uid strings), so messages can say which uid it was."""

    @property
    def label(self) -> str:
        if self.derived_from is not None:
            return f"operator {self.operator.uid_hash} (uid {self.derived_from!r}, by its derived ID)"
        return self.operator.label()

    @property
    def ident(self) -> str:
        """The operator's uid, or its uid hash when the job set none."""
        return self.operator.uid or self.operator.uid_hash

    @property
    def max_parallelism(self) -> int:
        return int(self.operator.max_parallelism)


@dataclass
class FlinkOperatorDescription(DescribedOperator):
    """One keyed operator: its states (from the first subtask's header; every subtask of an
    operator registers the same states), key serializer and max parallelism."""

    operator: OperatorState
    header: KeyedHeader
    states: dict[str, FlinkStateDescription] = field(default_factory=dict)
    carries_unread_snapshots: bool = True
    derived_from: str | None = None

    def key_snapshot(self, registry: SnapshotRegistry | None = None) -> TypeSerializerSnapshot:
        snap = self.header.key_serializer
        if snap.parsed is None:
            raise UnsupportedStateError(f"{self.label}: unsupported state: its key serializer is {opaque_type(snap)} "
                                        f"({snap.class_name.rsplit('.', 1)[-1]}), which statemorph cannot decode")
        return snap.parsed

    @staticmethod
    def new_snapshot_bytes(serializer: Any) -> bytes:
        """The versioned snapshot bytes of a new serializer, in the class Flink itself writes."""
        return write_versioned_snapshot(flink_snapshot(serializer))


def opaque_type(snap: Snapshot) -> str:
    """``RAW('<class>')`` of a snapshot statemorph does not read
    (:func:`statemorph.savepoint.description.opaque_type`)."""
    return _opaque_type(snap.raw)


def find_keyed_operator(operators: list[FlinkOperatorDescription], ident: str) -> FlinkOperatorDescription | None:
    """The keyed operator ``ident`` names: a uid, a uid hash, or a uid the savepoint does not
    record by its derived ID (:func:`.operator_ids.find_operator`, the one lookup); found the
    last way, the description says which uid in its label."""
    op = find_operator(operators, ident, lambda d: d.operator)
    if op is not None and naming(op.operator, ident) == "derived_id":
        return replace(op, derived_from=ident)
    return op


def describe_operators(savepoint: FlinkSavepoint) -> list[FlinkOperatorDescription]:
    """Every operator with keyed state, in ``_metadata`` order; reads the headers only."""
    out = []
    for op in savepoint.operators:
        desc: FlinkOperatorDescription | None = None
        for _, stream in savepoint.keyed_streams(op):
            if desc is None:
                desc = FlinkOperatorDescription(op, stream.header)
            for m in stream.header.states:
                if not m.is_timers and m.name not in desc.states:
                    desc.states[m.name] = FlinkStateDescription(op, m, stream.header)
        if desc is not None:
            out.append(desc)
    return out


__all__ = ["DescribedOperator", "FlinkOperatorDescription", "FlinkStateDescription", "RecordedSnapshots",
           "describe_operators", "find_keyed_operator", "opaque_type"]
