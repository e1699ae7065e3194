"""Operator state of a Flink savepoint described (for ``inspect``) and read as Arrow tables.

Kinds, as a schema file and ``inspect`` name them: ``operator-list`` (``ListState`` through
``getListState``, distribution mode SPLIT_DISTRIBUTE: elements are split over the subtasks on
restore), ``union-list`` (``getUnionListState``, UNION: every subtask gets every element) and
``broadcast-map`` (``BroadcastState``, BROADCAST: every subtask holds the same map).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ... import arrow
from ...errors import FlinkSavepointError, StatemorphError
from ...typeutils import describe_serializer
from .envelope import Snapshot
from .handles import DISTRIBUTION_MODES
from .keyed_header import VALUE_SERIALIZER, StateMetaInfo
from .metadata import OperatorState
from .operator_state import KEY_SERIALIZER, OperatorStatePart, operator_streams
from .reader import FlinkSavepoint

KIND_OF_MODE = {"SPLIT_DISTRIBUTE": "operator-list", "UNION": "union-list", "BROADCAST": "broadcast-map"}
"""The name of each distribution mode's state kind (``inspect``, schema files)."""


def type_text(snap: Snapshot | None) -> str | None:
    """The serializer a snapshot restores in Flink SQL syntax, else its snapshot class's short name."""
    if snap is None:
        return None
    if snap.parsed is not None:
        try:
            return describe_serializer(snap.parsed.restore_serializer())
        except StatemorphError:
            pass
    return snap.class_name.rsplit(".", 1)[-1]


@dataclass
class OperatorStateInfo:
    """One operator state of one operator, over its subtasks."""

    name: str
    mode: str
    meta: StateMetaInfo
    entries: list[int] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return KIND_OF_MODE[self.mode]

    def to_json(self) -> dict[str, Any]:
        value = self.meta.serializer(VALUE_SERIALIZER)
        key = self.meta.serializer(KEY_SERIALIZER)
        return {
            "name": self.name, "kind": self.kind, "mode": self.mode,
            "key_type": type_text(key), "value_type": type_text(value),
            "key_snapshot": key.class_name if key is not None else None,
            "value_snapshot": value.class_name if value is not None else None,
            "entries_per_subtask": self.entries,
            "entries": sum(self.entries),
        }


def describe_operator_states(savepoint: FlinkSavepoint, op: OperatorState) -> list[OperatorStateInfo]:
    """The managed operator states of ``op``, in the order the first subtask's handle names them.
    A list state's entry count per subtask is its offset count; a broadcast state's is its map's
    size."""
    infos: dict[str, OperatorStateInfo] = {}
    n_sub = len(op.subtasks or [])
    for st, stream in operator_streams(savepoint, op):
        pos = st.index
        for h in stream.handle.states:
            mode = DISTRIBUTION_MODES[h.mode]
            meta = stream.header.meta(h.name)
            assert meta is not None  # OperatorStream checks every handle state is in the header
            info = infos.setdefault(h.name, OperatorStateInfo(h.name, mode, meta, [0] * n_sub))
            if mode != "BROADCAST":
                info.entries[pos] = len(h.offsets)
            else:
                part = stream.part(h.name)
                info.entries[pos] = part.count if part is not None else 0
    return list(infos.values())


def operator_state_table(savepoint: FlinkSavepoint, operator: str, state: str, *, decode: bool = True) -> pa.Table:
    """One operator state of one operator, one row per list element (``subtask``, ``index``,
    ``value_bytes``[, ``value``]) or per broadcast map entry (``subtask``, ``key_bytes``,
    ``value_bytes``[, ``key``, ``value``]); with ``decode`` the typed columns are decoded with the
    recorded serializers (refused when statemorph does not read one; ``decode=False`` gives the
    exact bytes of any serializer)."""
    op = savepoint.operator(operator)
    parts: list[tuple[int, OperatorStatePart]] = []
    for st, stream in operator_streams(savepoint, op):
        part = stream.part(state)
        if part is not None:
            parts.append((st.index, part))
    if not parts:
        names = sorted({h.name for _, s in operator_streams(savepoint, op) for h in s.handle.states})
        raise FlinkSavepointError(f"{savepoint.path}: {op.label()} has no operator state {state!r} (operator states: "
                                  f"{', '.join(repr(n) for n in names) or 'none'})")
    broadcast = parts[0][1].broadcast
    cols: dict[str, list[Any]] = {"subtask": [], "index": [], "key_bytes": [], "value_bytes": []}
    for sub, part in parts:
        if broadcast:
            if part.entries is None:
                raise FlinkSavepointError(f"{savepoint.path}: {op.label()} broadcast state {state!r}: its key or value "
                                          f"serializer is not one statemorph reads, so its entries cannot be cut")
            for i, (k, v) in enumerate(part.entries):
                cols["subtask"].append(sub)
                cols["index"].append(i)
                cols["key_bytes"].append(k)
                cols["value_bytes"].append(v)
        else:
            for i, e in enumerate(part.elements):
                cols["subtask"].append(sub)
                cols["index"].append(i)
                cols["value_bytes"].append(e)
    arrays: dict[str, pa.Array] = {"subtask": pa.array(cols["subtask"], pa.int32()),
                                   "index": pa.array(cols["index"], pa.int32())}
    if broadcast:
        arrays["key_bytes"] = pa.array(cols["key_bytes"], pa.binary())
    arrays["value_bytes"] = pa.array(cols["value_bytes"], pa.binary())
    if decode:
        meta = parts[0][1].meta
        roles = [("key", KEY_SERIALIZER)] if broadcast else []
        for col, role in [*roles, ("value", VALUE_SERIALIZER)]:
            arrays[col] = _decode(arrays[f"{col}_bytes"], meta.serializer(role), f"{op.label()} operator state "
                                  f"{state!r} {role}")
    return pa.table(arrays)


def _decode(col: pa.Array, snap: Snapshot | None, what: str) -> pa.Array:
    if snap is None or snap.parsed is None:
        cls = snap.class_name if snap is not None else "(none)"
        raise FlinkSavepointError(f"{what}: the serializer snapshot {cls} is not one statemorph reads; read with "
                                  f"decode=False for the exact bytes")
    return arrow.decode(col, snap.parsed.restore_serializer(), threads=1)


__all__ = ["KIND_OF_MODE", "OperatorStateInfo", "describe_operator_states", "operator_state_table", "type_text"]
